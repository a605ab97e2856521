"""Tickets pasted in pieces: every section a text holds is read wherever it starts.

Each fragment is cut from a real text (tests/fixtures/import, the H200 captures in tests/fixtures/h200x2):
the vLLM lines with only the library section of a collect_env, a collect_env without its first lines,
pieces of one report scattered through a ticket, check_env from "PyTorch:" on, the nvidia-smi table
without its header, one GPU block of -q, <gpu> elements of -q -x without the log around them, pip list
rows without their header.
"""

from __future__ import annotations

import pytest

from forensics.errors import BadInputError
from forensics.importers import import_files, import_text
from forensics.model import is_missing
from tests.conftest import FIXTURES

FIX = FIXTURES / "import"
H200 = FIXTURES / "h200x2"


def _text(path) -> str:
    return path.read_text(encoding="utf-8")


def cut(text: str, start: str, end: str | None = None) -> str:
    """The lines of ``text`` from the first line holding ``start`` up to (not including) the first after
    it holding ``end`` (the end of the text without one)."""
    lines = text.splitlines()
    i = next(n for n, ln in enumerate(lines) if start in ln)
    j = next(
        (n for n in range(i + 1, len(lines)) if end is not None and end in lines[n]), len(lines)
    )
    return "\n".join(lines[i:j]) + "\n"


def one(text: str, tmp_path, name: str = "ticket.txt") -> dict:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return import_files([p])


def data(doc: dict, probe: str) -> dict:
    return doc["probes"][probe].get("data") or {}


LIBS = cut(_text(H200 / "collect_env.txt"), "Versions of relevant libraries:", "--stderr--")
VLLM = cut(_text(FIX / "vllm-19607-vllm-info-and-topology.txt"), "vLLM Version", "Legend:")


def test_vllm_lines_with_only_the_library_section(tmp_path):
    """The issue's paste: "Versions of relevant libraries:" and the vLLM lines, nothing else. It recorded no
    torch and no NCCL although the [pip3] lines name both."""
    doc = one(LIBS + "\n" + VLLM, tmp_path)
    [part] = doc["import"]["parts"]
    assert (
        part["format"] == "vllm"
        and part["fragment"] is True
        and part["tool_version"] == "0.8.5.post1"
    )
    assert data(doc, "software")["torch"]["version"] == "2.11.0"
    assert data(doc, "libs")["nccl"]["version"] == "2.28.9"
    assert data(doc, "libs")["nccl"]["wheel"] == "nvidia-nccl-cu13 2.28.9"
    assert data(doc, "libs")["cudnn"]["version"] == "9.19.0"
    assert data(doc, "software")["packages"]["numpy"] == "2.5.2"
    assert data(doc, "gpu")["topology"]["matrix"]["GPU0"]["GPU1"] == "NV12"


def test_library_lines_without_their_header(tmp_path):
    bare = "\n".join(ln for ln in LIBS.splitlines() if ln.startswith("[pip3]"))
    doc = one("here is what pip has:\n\n" + bare + "\n", tmp_path)
    [part] = doc["import"]["parts"]
    assert part["format"] == "collect-env" and part["lines"][0] == 3
    assert (
        data(doc, "software")["torch"]["version"] == "2.11.0"
        and data(doc, "libs")["nccl"]["version"] == "2.28.9"
    )


def test_collect_env_without_its_first_lines(tmp_path):
    doc = one(
        cut(_text(H200 / "collect_env.txt"), "Is CUDA available:", "cuDNN version:"), tmp_path
    )
    gpu = data(doc, "gpu")
    assert gpu["driver_version"] == "580.159.04" and gpu["gpu_count"] == 2
    assert [g["name"] for g in gpu["gpus"].values()] == ["NVIDIA H200", "NVIDIA H200"]
    assert is_missing(
        data(doc, "software").get("torch", {"missing": "not_recorded"})
    ) or "torch" not in data(doc, "software")  # the fragment does not say which torch


def test_pieces_of_one_report_scattered_through_a_ticket(tmp_path):
    ce = _text(H200 / "collect_env.txt")
    gpus = cut(ce, "Is CUDA available:", "cuDNN version:")
    smi = _text(H200 / "nvidia-smi.txt")
    text = (
        "The GPUs:\n\n"
        + gpus
        + "\nand nvidia-smi:\n\n"
        + smi
        + "\nthe libraries, in case it helps:\n\n"
        + LIBS
    )
    doc = one(text, tmp_path)
    parts = doc["import"]["parts"]
    assert [p["format"] for p in parts] == ["collect-env", "nvidia-smi"]
    assert parts[0]["notes"][0].startswith("read from 2 pieces of the text (lines 3-")
    assert data(doc, "gpu")["driver_version"] == "580.159.04"
    assert (
        data(doc, "software")["torch"]["version"] == "2.11.0"
        and data(doc, "libs")["nccl"]["version"] == "2.28.9"
    )


def test_two_whole_reports_are_still_refused_beside_a_fragment(tmp_path):
    whole = _text(FIX / "vllm-13497-torch2.5.1-rtx4090.txt")
    other = _text(FIX / "vllm-10303-torch2.4.0-8x-rtx3090.txt")
    with pytest.raises(BadInputError, match="two vllm reports"):
        one(LIBS + "\n" + whole + "\n\nand on the other machine:\n\n" + other, tmp_path)


def test_sglang_check_env_from_pytorch_on(tmp_path):
    doc = one(cut(_text(FIX / "sglang-5389-check-env-0.4.5-8x-a100.txt"), "PyTorch:"), tmp_path)
    [part] = doc["import"]["parts"]
    assert part["format"] == "sglang" and part["tool_version"] == "0.4.5"
    assert data(doc, "software")["torch"]["version"] == "2.5.1+cu124"
    assert data(doc, "software")["packages"]["transformers"] == "4.51.0"
    assert data(doc, "gpu")["topology"]["matrix"]["GPU0"]["GPU1"] == "NV12"


def test_nvidia_smi_table_without_its_header(tmp_path):
    smi = _text(H200 / "nvidia-smi.txt")
    for start in ("| GPU  Name", "|   0  NVIDIA H200"):
        doc = one(cut(smi, start), tmp_path)
        [part] = doc["import"]["parts"]
        assert part["format"] == "nvidia-smi" and part["fragment"] is True
        gpus = data(doc, "gpu")["gpus"]
        assert [
            (g["index"], g["pci_bus_id"], g["power"]["enforced_limit_mw"]) for g in gpus.values()
        ] == [(0, "00000000:00:06.0", 700000), (1, "00000000:00:07.0", 700000)]
        assert "gpu_count" not in data(doc, "gpu") or is_missing(data(doc, "gpu")["gpu_count"])
        assert "GPU count and driver are not recorded" in part["notes"][0]


def test_one_gpu_block_of_nvidia_smi_q(tmp_path):
    q = _text(H200 / "nvidia-smi-q.txt")
    doc = one(cut(q, "GPU 00000000:00:07.0"), tmp_path)
    [part] = doc["import"]["parts"]
    assert part["format"] == "nvidia-smi-q"
    [g] = data(doc, "gpu")["gpus"].values()
    assert g["name"] == "NVIDIA H200" and g["pci_bus_id"] == "00000000:00:07.0"
    assert "gpu_count" not in data(doc, "gpu") or is_missing(data(doc, "gpu")["gpu_count"])
    whole = one(cut(q, "Driver Version"), tmp_path)  # without the NVSMI LOG line
    assert (
        data(whole, "gpu")["driver_version"] == "580.159.04"
        and data(whole, "gpu")["gpu_count"] == 2
    )


def test_gpu_elements_of_nvidia_smi_xml_without_the_log(tmp_path):
    x = _text(H200 / "nvidia-smi-q.xml")
    both = one(cut(x, '<gpu id="00000000:00:06.0">'), tmp_path, "gpus.xml.txt")
    assert [g["pci_bus_id"] for g in data(both, "gpu")["gpus"].values()] == [
        "00000000:00:06.0",
        "00000000:00:07.0",
    ]
    second = one(
        cut(x, '<gpu id="00000000:00:07.0">', "</nvidia_smi_log>"), tmp_path, "gpu1.xml.txt"
    )
    [part] = second["import"]["parts"]
    assert part["format"] == "nvidia-smi-xml"
    [g] = data(second, "gpu")["gpus"].values()
    assert g["name"] == "NVIDIA H200" and g["pci_bus_id"] == "00000000:00:07.0"


def test_pip_list_rows_without_the_header(tmp_path):
    rows = cut(_text(H200 / "pip-list.txt"), "absl-py")
    doc = one("pip list | tail -n +3:\n" + rows, tmp_path)
    [part] = doc["import"]["parts"]
    assert part["format"] == "pip"
    pk = data(doc, "software")["packages"]
    assert (
        pk["torch"] == "2.11.0" and pk["nvidia-nccl-cu13"] == "2.28.9" and pk["absl-py"] == "2.5.0"
    )


def test_prose_alone_is_still_not_a_report(tmp_path):
    with pytest.raises(BadInputError, match="not an environment report"):
        import_text(
            "It was fast yesterday.\nNow the step takes 29 ms: Version 2 of our model.\n", "t.txt"
        )


def test_vllm_sections_from_pytorch_info_on(tmp_path):
    """vLLM >= 0.9's sectioned layout, pasted from its second section (no "System Info")."""
    text = _text(FIX / "vllm-21310-new-format-rhel.txt")
    lines = text.splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.strip() == "PyTorch Info")
    doc = one("\n".join(lines[i - 1 :]) + "\n", tmp_path)
    [part] = doc["import"]["parts"]
    assert part["format"] == "vllm"
    assert (
        data(doc, "software")["torch"]["version"] == "2.5.1+cu124"
        and data(doc, "software")["python"]["version"] == "3.10.16"
    )


def test_collect_env_from_its_os_line(tmp_path):
    doc = one(cut(_text(H200 / "collect_env.txt"), "OS: Ubuntu", "Python version:"), tmp_path)
    [part] = doc["import"]["parts"]
    assert part["format"] == "collect-env" and part["lines"][0] == 1
    assert data(doc, "host")["os_release"] == "Ubuntu 24.04.3 LTS"
