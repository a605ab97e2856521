"""Importing real environment texts from public tickets (tests/fixtures/import) and the H200 captures.

Two kinds of checks:

- every real value in an imported snapshot is traced back to the text it came from
  (:func:`check_traced`): a string must occur in the text, a number in the unit the
  tool printed (MiB, W, MHz, C, us). Nothing may be invented;
- per fixture, the facts a maintainer would ask for first (torch, CUDA, driver, GPU
  models, tool version) and what the text does *not* hold (``not_recorded`` with a
  "not in ... output" reason, ``unavailable`` probes).
"""

from __future__ import annotations

import re

import pytest

from forensics import snapshot
from forensics.errors import BadInputError
from forensics.importers import import_files, import_text, is_imported
from forensics.importers.common import FORMAT_LABELS
from forensics.model import is_missing, is_unrecorded
from tests.conftest import FIXTURES

FIX = FIXTURES / "import"
H200 = FIXTURES / "h200x2"
ALL = sorted(FIX.glob("*.txt")) + [
    H200 / n
    for n in (
        "collect_env.txt",
        "nvidia-smi.txt",
        "nvidia-smi-q.txt",
        "nvidia-smi-q.xml",
        "pip-list.txt",
    )
]

# Keys whose values are derived words, not copied text (checked by the per-fixture tests instead).
_DERIVED = {
    "source",
    "command",
    "raw",
    "wheel",
    "kind",
    "active",
    "persistence",
    "compute",
    "mig_current",
    "mig_pending",
    "mode_current",
    "mode_pending",
    "coverage",
    "files_note",
    "current_mask",
    "physical_cores",
    "pending",
    "failure",
    "cuda_available",
    "index",
    "gpu_count",
    "build",
    "cuda_build_tag",
    "version_py",
}


def leaves(obj, path=()):
    if is_missing(obj):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, path + (str(k),))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from leaves(v, path + (f"[{i}]",))
    else:
        yield path, obj


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).lower()


def check_traced(doc: dict, text: str) -> int:
    """Assert every real value of the imported sections occurs in ``text``; returns how many were checked."""
    flat = _flat(text)
    digits = set(re.findall(r"-?\d+(?:\.\d+)?", text))
    checked = 0
    for probe, sec in doc["probes"].items():
        for path, v in leaves(sec.get("data") or {}):
            if is_missing(v) or not path or any(p in _DERIVED for p in path):
                continue
            key = next(
                (p for p in reversed(path) if re.search(r"_(bytes|mw|ns|mhz|pct|c)$", p)), path[-1]
            )
            where = f"{probe}.{'.'.join(path)}={v!r}"
            if isinstance(v, bool):
                continue
            if isinstance(v, str):
                if probe == "libs" and path[0] in ("cuda_runtime",) and key == "version":
                    assert (
                        any(d.startswith(v) or d == v for d in digits)
                        or f"cu{v.replace('.', '')}" in flat
                    ), where
                elif probe == "libs" and path[0] == "nvcc" and key == "version":
                    assert v in flat, where
                elif probe == "libs" and path[0] == "cudnn" and key == "version":
                    assert v in flat, where
                else:
                    assert _flat(v) in flat, where
            elif isinstance(v, int):
                if key.endswith("_bytes"):
                    assert str(v // 2**20) in digits, where
                elif key.endswith("_mw"):
                    assert any(
                        abs(float(d) - v / 1000) < 0.01 for d in digits if "." in d or d.isdigit()
                    ), where
                elif key.endswith("_ns"):
                    assert str(v // 1000) in digits, where
                else:
                    assert str(v) in digits or f"p{v}" in flat, where
            checked += 1
    return checked


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_fixture_imports_and_every_value_is_in_the_text(path):
    doc = import_files([path])
    snapshot.validate(doc, path)  # a valid snapshot document
    assert is_imported(doc) and doc["source"] == "imported"
    assert doc["import"]["parts"], "each fixture holds at least one part"
    assert check_traced(doc, path.read_text(encoding="utf-8")) >= 3
    for name, sec in doc["probes"].items():
        if sec["status"] == "unavailable":
            assert sec["reason"], name
        for path_, v in leaves(sec.get("data") or {}):
            if is_unrecorded(v):
                assert any(lbl in v["detail"] for lbl in FORMAT_LABELS.values()), (name, path_, v)
    assert doc["probes"]["git"]["status"] == "unavailable"
    assert "not in" in doc["probes"]["git"]["reason"]


def imp(name: str) -> dict:
    p = FIX / name if (FIX / name).exists() else H200 / name
    return import_files([p])


def data(doc, probe):
    return doc["probes"][probe]["data"]


def test_h200_collect_env_matches_the_machine():
    doc = imp("collect_env.txt")
    sw, libs, gpu, host = (data(doc, p) for p in ("software", "libs", "gpu", "host"))
    part = doc["import"]["parts"][0]
    assert (
        part["format"] == "collect-env" and "tool_version" not in part
    )  # collect_env names no version of its own
    # pip's metadata version is what the software probe records on a live machine; __version__ carries +cu130
    assert sw["torch"]["version"] == "2.11.0" and sw["packages"]["torch"] == "2.11.0"
    assert libs["torch"]["version_py"] == "2.11.0+cu130" and libs["torch"]["cuda"] == "13.0"
    assert libs["torch"]["cuda_build_tag"] == "cu130" and libs["torch"]["cuda_available"] is True
    assert (
        libs["cuda_runtime"]["version"] == "13.0"
        and libs["cuda_runtime"]["wheel"] == "nvidia-cuda-runtime 13.0.96"
    )
    assert libs["nccl"]["version"] == "2.28.9" and "not asked" in libs["nccl"]["source"]
    assert libs["cudnn"]["version"] == "9.19.0"  # the nvidia-cudnn-cu13 wheel, not the system files
    assert libs["nvcc"] == {"version": "13.0", "build": "13.0.88"}
    assert gpu["driver_version"] == "580.159.04" and gpu["gpu_count"] == 2
    assert [g["name"] for g in gpu["gpus"].values()] == ["NVIDIA H200", "NVIDIA H200"]
    assert set(gpu["gpus"]) == {"index-0", "index-1"}  # collect_env strips the UUIDs
    assert sw["python"]["version"] == "3.12.3"
    assert host["os_release"] == "Ubuntu 24.04.3 LTS" and host["kernel"] == "6.18.44-fc-v657-gpu"
    assert (
        host["cpu"]["model"] == "Intel(R) Xeon(R) Processor" and host["cpu"]["logical_cores"] == 32
    )
    assert host["numa_nodes"] == {"node0": "0-31"}
    # what collect_env does not hold
    g0 = gpu["gpus"]["index-0"]
    for key in ("clocks", "pcie", "power", "clocks_event_reasons", "processes"):
        assert is_unrecorded(g0[key]) and g0[key]["detail"] == "not in collect_env output", key
    assert is_unrecorded(gpu["cuda_driver_version"])
    assert is_unrecorded(host["memory"]) and is_unrecorded(host["cpu"]["governor"])
    assert "collect_env lists only" in data(doc, "software")["coverage"]["packages"]
    assert doc["probes"]["software"]["status"] == "partial"
    assert {"field": "packages", "error": "partial list: " + sw["coverage"]["packages"]} in doc[
        "probes"
    ]["software"]["errors"]


def test_h200_nvidia_smi_q_text_and_xml_agree_on_the_fixed_facts():
    t, x = data(imp("nvidia-smi-q.txt"), "gpu"), data(imp("nvidia-smi-q.xml"), "gpu")
    assert (
        set(t["gpus"])
        == set(x["gpus"])
        == {"GPU-00000000-1111-2222-3333-000000000000", "GPU-00000000-1111-2222-3333-000000000001"}
    )
    for g in (
        t["gpus"]["GPU-00000000-1111-2222-3333-000000000000"],
        x["gpus"]["GPU-00000000-1111-2222-3333-000000000000"],
    ):
        assert (
            g["name"] == "NVIDIA H200"
            and g["architecture"] == "Hopper"
            and g["pci_bus_id"] == "00000000:00:06.0"
        )
        assert g["clocks"]["sm"]["max_mhz"] == 1980 and g["clocks"]["mem"]["max_mhz"] == 3201
        assert (
            g["pcie"]["gen_max"] == 5
            and g["pcie"]["width_max"] == 16
            and g["pcie"]["gen_gpu_max"] == 5
        )
        assert g["power"]["enforced_limit_mw"] == 700000 and g["power"]["min_limit_mw"] == 200000
        assert g["memory"]["total_bytes"] == 143771 * 2**20
        assert g["modes"] == {
            "persistence": "enabled",
            "compute": "default",
            "mig_current": "disabled",
            "mig_pending": "disabled",
        }
        assert g["ecc"]["mode_current"] == "enabled"
        assert g["remapped_rows"] == {
            "correctable": 0,
            "uncorrectable": 0,
            "pending": 0,
            "failure": 0,
        }
        assert (
            g["processes"][0]["pid"] == 559
            and g["processes"][0]["used_memory_bytes"] == 1002 * 2**20
        )
        assert (
            g["retired_pages"]["single_bit_ecc"]["missing"] == "not_supported"
        )  # N/A: NVML NotSupported
        assert is_unrecorded(g["nvlink"]) and is_unrecorded(g["violation_ns"])
    # the text capture was taken under load, the XML at idle: the readings differ, as on the machine
    gt = t["gpus"]["GPU-00000000-1111-2222-3333-000000000000"]
    assert gt["utilization"]["gpu_pct"] == 96 and gt["clocks_event_reasons"]["active"] == [
        "sw_power_cap"
    ]
    assert gt["clocks_event_reasons"]["current_mask"] == 0x4 and gt["pstate"] == 0
    assert gt["clocks_event_ns"]["sw_power_cap"] == 3153750 * 1000
    assert gt["power"]["draw_mw"] == 630400  # "Average Power Draw" (driver 530+ layout)
    assert (
        x["gpus"]["GPU-00000000-1111-2222-3333-000000000000"]["clocks_event_ns"]["sw_power_cap"]
        == 3428479 * 1000
    )
    assert imp("nvidia-smi-q.xml")["import"]["parts"][0]["tool_version"] == "DTD nvsmi_device_v13"


def test_h200_nvidia_smi_table_and_pip_list():
    gpu = data(imp("nvidia-smi.txt"), "gpu")
    doc = imp("nvidia-smi.txt")
    assert doc["import"]["parts"][0]["tool_version"] == "580.159.04"
    assert gpu["driver_version"] == "580.159.04" and gpu["cuda_driver_version"] == "13.0"
    g0 = gpu["gpus"]["index-0"]
    assert g0["power"] == {"draw_mw": 179000, "enforced_limit_mw": 700000} or (
        g0["power"]["draw_mw"] == 179000 and g0["power"]["enforced_limit_mw"] == 700000
    )
    assert (
        g0["memory"]["used_bytes"] == 1011 * 2**20
        and g0["temperature"]["gpu_c"] == 39
        and g0["pstate"] == 0
    )
    assert g0["processes"][0]["pid"] == 559 and gpu["gpus"]["index-1"]["processes"] == []
    sw = data(imp("pip-list.txt"), "software")
    assert sw["packages"]["torch"] == "2.11.0" and sw["packages"]["nvidia-nccl-cu13"] == "2.28.9"
    assert (
        sw["packages"]["nvidia-ml-py"] == "13.610.43" and "coverage" not in sw
    )  # pip list is the whole environment
    assert len(sw["packages"]) == 197


def test_torch_1_x_collect_env_old_field_names():
    doc = imp(
        "pytorch-16999-torch1.1-macos.txt"
    )  # "Is debug build: No", one GPU on the key's own line
    sw, libs, gpu = data(doc, "software"), data(doc, "libs"), data(doc, "gpu")
    assert sw["torch"]["version"] == "1.1.0a0+4335aac" and libs["torch"]["cuda"] == "10.0"
    assert (
        gpu["gpus"]["index-0"]["name"] == "GeForce GTX 1060 with Max-Q Design"
        and gpu["driver_version"] == "1.1.0"
    )
    assert libs["cudnn"]["files"] == ["/Users/<user>/cuda/lib/libcudnn.dylib"]
    assert (
        is_unrecorded(libs["cudnn"]["version"])
        and "without a version" in libs["cudnn"]["version"]["detail"]
    )
    assert sw["conda_packages"]["mkl"] == "2019.1" and sw["packages"] == {
        "numpy": "1.15.4",
        "torch": "1.1.0a0+4335aac",
    }

    doc = imp("pytorch-28321-torch1.3.0-conda.txt")
    sw, libs = data(doc, "software"), data(doc, "libs")
    assert (
        sw["torch"]["version"] == "1.3.0" and sw["packages"]["torch"] == "1.3.0"
    )  # what ran, not pip's 1.2.0
    assert any("pip lists torch==1.2.0" in n for n in doc["import"]["notes"])
    assert libs["torch"]["cuda"] == "10.1.243" and libs["cuda_runtime"]["version"] == "10.1"
    assert libs["torch"]["cuda_available"] is False
    assert (
        libs["cudnn"]["missing"] == "not_found"
    )  # "Could not collect" is the tool's own failure, not absence
    assert data(doc, "gpu")["driver_version"] == "410.104"

    doc = imp("pytorch-30071-torch1.3.1-8x-titan-xp.txt")
    gpu = data(doc, "gpu")
    assert gpu["gpu_count"] == 8 and {g["name"] for g in gpu["gpus"].values()} == {"TITAN Xp"}
    assert any(
        "[pip3] to" in n for n in doc["import"]["notes"]
    )  # the cut-off last line is said, not guessed

    doc = imp(
        "pytorch-37320-torch1.5.0-hand-edited.txt"
    )  # no colon after "PyTorch version", full-width colons
    assert data(doc, "software")["torch"]["version"] == "1.5.0"
    assert (
        data(doc, "gpu")["gpu_count"] == 4
        and data(doc, "gpu")["gpus"]["index-3"]["name"] == "Tesla P100-PCIE-16GB"
    )
    assert data(doc, "libs")["cudnn"]["version"] == "7.6.5"

    doc = imp("pytorch-46973-torch1.7.0-colab.txt")  # cut inside the cuDNN line
    assert (
        data(doc, "software")["torch"]["version"] == "1.7.0+cu101"
        and data(doc, "gpu")["driver_version"] == "418.67"
    )
    assert is_unrecorded(data(doc, "libs")["cudnn"])


def test_collect_env_and_nvidia_smi_in_one_paste():
    doc = imp("pytorch-43058-torch1.6.0-and-nvidia-smi.txt")
    assert [p["format"] for p in doc["import"]["parts"]] == ["collect-env", "nvidia-smi"]
    gpu = data(doc, "gpu")
    assert (
        gpu["driver_version"] == "418.67" and gpu["cuda_driver_version"] == "10.1"
    )  # from the nvidia-smi part
    assert gpu["gpu_count"] == 2 and doc["import"]["parts"][1]["tool_version"] == "418.67"
    assert (
        data(doc, "libs")["nvcc"]["missing"] == "not_found"
    )  # "CUDA runtime version: Could not collect"


def test_vllm_collect_env_layouts():
    doc = imp(
        "vllm-13497-torch2.5.1-rtx4090.txt"
    )  # in <details> with a ```text fence, after vLLM's INFO line
    assert doc["import"]["parts"][0]["format"] == "vllm"
    libs = data(doc, "libs")
    assert libs["torch"]["version"] == "2.5.1+cu121" and libs["nvcc"]["build"] == "12.1.105"
    assert libs["cudnn"]["version"] == "8.9.0" and len(libs["cudnn"]["files"]) == 7
    doc = imp("vllm-4066-torch1.12.1-a100.txt")
    assert is_unrecorded(
        data(doc, "libs")["cudnn"]["version"]
    )  # files of 8.2.0 and 8.9.7: which one is loaded?
    doc = imp("vllm-21310-new-format-rhel.txt")  # the sectioned layout
    assert doc["import"]["parts"][0]["format"] == "vllm"
    assert (
        data(doc, "software")["torch"]["version"] == "2.5.1+cu124"
        and data(doc, "libs")["torch"]["cuda"] == "12.4"
    )
    assert data(doc, "host")["os_release"] == "Red Hat Enterprise Linux release 8.3 (Ootpa)"
    assert (
        doc["probes"]["gpu"]["status"] == "unavailable"
        and doc["probes"]["gpu"]["reason"] == "not in vllm collect-env output"
    )
    doc = imp("vllm-19607-vllm-info-and-topology.txt")
    assert doc["import"]["parts"][0]["tool_version"] == "0.8.5.post1"
    assert data(doc, "gpu")["topology"]["matrix"]["GPU0"]["GPU1"] == "NV12"
    assert (
        "CPU Affinity" not in data(doc, "gpu")["topology"]["matrix"]["GPU0"]
    )  # blank cells: not placed by guess
    doc = imp("vllm-34154-new-format-rocm.txt")
    assert (
        doc["probes"]["gpu"]["status"] == "unavailable"
        and "AMD Radeon RX 7900 XTX" in doc["probes"]["gpu"]["reason"]
    )
    assert data(doc, "libs")["torch"]["rocm"] == "7.2.26015-fc0010cf6a"
    doc = imp(
        "vllm-10147-torch2.5.1-cu118-v100s.txt"
    )  # torch's own collect_env run in a vLLM environment
    assert doc["import"]["parts"][0]["format"] == "collect-env"


def test_sglang_check_env_versions():
    doc = imp("sglang-965-check-env-0.2.10-8x-a100.txt")
    assert doc["import"]["parts"][0]["tool_version"] == "0.2.10"
    gpu, sw, libs = data(doc, "gpu"), data(doc, "software"), data(doc, "libs")
    assert gpu["gpu_count"] == 8 and gpu["gpus"]["index-7"]["compute_capability"] == "8.0"
    assert gpu["driver_version"] == "550.90.07" and libs["nvcc"]["version"] == "12.1"
    assert (
        sw["packages"]["pillow"] == "10.2.0" and sw["packages"]["pyzmq"] == "24.0.1"
    )  # check_env's import names
    assert libs["cuda_runtime"]["version"] == "12.1" and "cu121" in libs["cuda_runtime"]["source"]
    assert doc["probes"]["host"]["status"] == "unavailable"
    doc = imp("sglang-748-check-env-10x-rtx2080ti.txt")  # the driver printed once per GPU
    assert data(doc, "gpu")["driver_version"] == "550.90.07" and data(doc, "gpu")["gpu_count"] == 10
    assert data(doc, "gpu")["topology"]["matrix"]["GPU0"]["GPU9"] == "NV2"
    doc = imp("sglang-645-check-env-0.1.21.txt")  # tab-separated topology
    assert data(doc, "gpu")["topology"]["matrix"]["GPU0"] == {
        "GPU0": "X",
        "NIC0": "SYS",
        "NIC1": "SYS",
        "NIC2": "SYS",
        "NIC3": "PXB",
        "NIC4": "NODE",
        "CPU Affinity": "32-63,96-127",
        "NUMA Affinity": "1",
        "GPU NUMA ID": "N/A",
    }
    doc = imp("sglang-5389-check-env-0.4.5-8x-a100.txt")
    assert (
        data(doc, "software")["packages"]["sgl-kernel"] == "0.0.8"
        and "flashinfer" not in data(doc, "software")["packages"]
    )


def test_nvidia_smi_old_drivers_and_cut_pastes():
    gpu = data(imp("nvidia-docker-1541-nvidia-smi-470-2x-a100.txt"), "gpu")
    g0 = gpu["gpus"]["index-0"]
    assert (
        is_unrecorded(g0["name"]) and "NVIDIA A100 80G..." in g0["name"]["detail"]
    )  # cut by nvidia-smi
    assert (
        g0["power"]["enforced_limit_mw"] == 300000 and g0["memory"]["total_bytes"] == 80994 * 2**20
    )
    assert gpu["gpus"]["index-1"]["utilization"]["gpu_pct"] == 3
    doc = imp("nvidia-docker-954-nvidia-smi-q-396.txt")
    gpu = data(doc, "gpu")
    assert gpu["driver_version"] == "396.54" and is_unrecorded(
        gpu["cuda_driver_version"]
    )  # no CUDA line before 410
    (g,) = gpu["gpus"].values()
    assert g["name"] == "GeForce GTX 1080" and g["vbios_version"] == "86.04.60.00.80"
    assert g["serial"]["missing"] == "not_supported"
    assert (
        is_unrecorded(g["clocks"]) and g["clocks"]["detail"] == "clocks not in nvidia-smi -q output"
    )
    doc = imp("nvidia-docker-1076-nvidia-smi-q-384-v100.txt")
    assert data(doc, "gpu")["gpu_count"] == 4 and len(data(doc, "gpu")["gpus"]) == 1
    assert any("Attached GPUs: 4" in n for n in doc["import"]["notes"])


def test_xml_of_old_dtds_cut_mid_document():
    doc = imp("a0s-nvidia-smi-exporter-1-xml-dtd-v10.txt")
    part = doc["import"]["parts"][0]
    assert part["tool_version"] == "DTD nvsmi_device_v10" and any(
        "cut off" in n for n in part["notes"]
    )
    gpu = data(doc, "gpu")
    assert (
        gpu["driver_version"] == "430.26"
        and gpu["cuda_driver_version"] == "10.2"
        and gpu["gpu_count"] == 4
    )
    doc = imp("netdata-2759-xml-dtd-v6.txt")
    gpu = data(doc, "gpu")
    (g,) = gpu["gpus"].values()
    assert (
        g["name"] == "GeForce 8800 GT"
        and g["pci_bus_id"] == "0000:01:00.0"
        and gpu["driver_version"] == "340.102"
    )


def test_paste_damage_is_undone(tmp_path):
    text = (H200 / "collect_env.txt").read_text()
    damaged = "> " + "\r\n> ".join(
        ln.strip() for ln in text.splitlines()
    )  # quoted reply, trimmed lines, CRLF
    wrapped = (
        "<details>\r\n<summary>env</summary>\r\n\r\n```text\r\n"
        + damaged
        + "\r\n```\r\n</details>\r\n"
    )
    p = tmp_path / "ticket.txt"
    p.write_bytes(b"\xef\xbb\xbf" + wrapped.encode())
    a, b = import_files([p]), imp("collect_env.txt")
    for probe in ("software", "libs", "gpu", "host"):
        assert data(a, probe) == data(b, probe), probe
    p16 = tmp_path / "windows.txt"
    p16.write_bytes(text.encode("utf-16"))  # PowerShell's "> file" writes UTF-16 with a BOM
    assert data(import_files([p16]), "libs") == data(b, "libs")


def test_trimmed_nvidia_smi_q_keeps_sections():
    text = (H200 / "nvidia-smi-q.txt").read_text()
    trimmed = "\n".join(ln.strip() for ln in text.splitlines())
    (part,) = import_text(trimmed, "trimmed")
    g = part.facts["gpu"]["gpus"]["GPU-00000000-1111-2222-3333-000000000000"]
    assert g["clocks"]["sm"]["current_mhz"] == 1965 and g["clocks"]["sm"]["max_mhz"] == 1980
    assert g["pcie"]["gen_current"] == 5 and g["pcie"]["width_max"] == 16
    assert g["pstate"] == 0 and g["clocks_event_reasons"]["active"] == ["sw_power_cap"]


def test_not_an_environment_report_is_refused(tmp_path):
    with pytest.raises(BadInputError, match="not an environment report"):
        import_files([H200 / "nccl-debug-info.log"])
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(BadInputError, match="empty"):
        import_files([empty])


def test_two_reports_of_one_kind_in_one_file_are_refused(tmp_path):
    a = (FIX / "vllm-13497-torch2.5.1-rtx4090.txt").read_text()
    b = (FIX / "vllm-10303-torch2.4.0-8x-rtx3090.txt").read_text()
    p = tmp_path / "both.txt"
    p.write_text(a + "\n\nand on the other machine:\n\n" + b)
    with pytest.raises(BadInputError, match="two vllm reports"):
        import_files([p])


def test_several_files_make_one_snapshot():
    doc = import_files([H200 / "collect_env.txt", H200 / "nvidia-smi-q.txt", H200 / "pip-list.txt"])
    assert [p["format"] for p in doc["import"]["parts"]] == ["collect-env", "nvidia-smi-q", "pip"]
    gpu = data(doc, "gpu")
    # nvidia-smi -q names the GPUs by UUID; collect_env's index-keyed entries are the same GPUs
    assert gpu["driver_version"] == "580.159.04" and gpu["cuda_driver_version"] == "13.0"
    assert len(data(doc, "software")["packages"]) >= 197
    assert data(doc, "software")["packages"]["torch"] == "2.11.0"
    assert not doc["import"]["conflicts"]


XML_BOMB = """<?xml version="1.0"?>
<!DOCTYPE nvidia_smi_log [
 <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
 <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
 <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
 <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
 <!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
 <!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">
 <!ENTITY g "&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;">
]>
<nvidia_smi_log><driver_version>&g;</driver_version></nvidia_smi_log>
"""


def test_billion_laughs_is_refused_before_expansion(tmp_path):
    p = tmp_path / "bomb.xml"
    p.write_text(XML_BOMB)  # 20^6 x 66 bytes expanded: ~4 GB if entities were expanded
    with pytest.raises(BadInputError, match="declares entities"):
        import_files([p])


def test_external_entity_is_refused(tmp_path):
    p = tmp_path / "xxe.xml"
    p.write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [ <!ENTITY x SYSTEM "file:///etc/passwd"> ]>\n'
        "<nvidia_smi_log><driver_version>&x;</driver_version></nvidia_smi_log>\n"
    )
    with pytest.raises(BadInputError, match="declares entities"):
        import_files([p])


def test_secrets_in_a_paste_are_redacted(tmp_path):
    p = tmp_path / "env.txt"
    text = (FIX / "vllm-13497-torch2.5.1-rtx4090.txt").read_text()
    token = (
        "hf_" + "abcdefghijklmnopqrstuvwxyz0123456789"
    )  # built here so no token shape sits in the tree
    p.write_text(text + f"\nHF_TOKEN={token}\nCUDA_VERSION=12.1.105\n")
    doc = import_files([p])
    assert token not in str(doc)
    assert data(doc, "libs")["env_claims"] == {"CUDA_VERSION": "12.1.105"}


def test_pip_list_from_a_ticket_and_pip_freeze():
    doc = imp("pytriton-86-pip-list.txt")
    sw = data(doc, "software")
    assert (
        len(sw["packages"]) == 28
        and sw["packages"]["brotli"] == "1.1.0"
        and sw["packages"]["anyio"] == "4.6.2.post1"
    )
    assert "h11" not in sw["packages"]  # the cut-off last row has no version ...
    assert (
        sw["coverage"]["packages"] == "the pip list in the text is cut off at 'h11'"
    )  # ... so the list is partial
    assert is_unrecorded(sw["torch"]) and doc["probes"]["gpu"]["status"] == "unavailable"
    # the same real list as pip freeze prints it (name==version), with a direct reference and an editable line
    rows = [ln.split() for ln in (H200 / "pip-list.txt").read_text().splitlines()[2:] if ln.strip()]
    freeze = "\n".join(f"{r[0]}=={r[1]}" for r in rows)
    freeze += "\nmypkg @ file:///tmp/mypkg\n-e git+https://github.com/pytorch/pytorch@abc123#egg=torchfork\n"
    (part,) = import_text(freeze, "freeze.txt")
    pk = part.facts["software"]["packages"]
    assert {k: v for k, v in pk.items() if isinstance(v, str)} == data(
        imp("pip-list.txt"), "software"
    )["packages"]
    assert is_unrecorded(pk["mypkg"]) and is_unrecorded(pk["torchfork"])
    assert part.facts["software"]["editable"]["torchfork"]["url"].startswith(
        "git+https://github.com/pytorch/pytorch"
    )


def test_every_fixture_names_its_public_source():
    for path in sorted(FIX.glob("*.txt")):
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert re.match(
            r"^# source: https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+ ", first
        ), path.name
