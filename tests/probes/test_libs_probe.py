"""The libs probe: finding libraries, decoding versions, and judging cuda.version / nccl.version."""

import json

import pytest
from forensics_probes.libs import probe as libs
from forensics_probes.libs.probe import (
    LibsProbe,
    decode_version,
    find_library,
    parse_version_py,
    query_versions,
    read_nvcc,
)

from forensics.model import HypothesisStatus as H
from forensics.model import ProbeStatus, Severity
from forensics.probe import ProbeContext, ProbeResult
from forensics.readers import CommandResult
from tests.conftest import FIXTURES

# What the H200 machine reports (tests/fixtures/h200x2: collect_env.txt, nvml_torch.json "torch", env.txt).
H200 = {
    "torch": {"version": "2.11.0+cu130", "cuda_build_tag": "cu130", "cuda": "13.0"},
    "cuda_runtime": {
        "path": "site/nvidia/cu13/lib/libcudart.so.13",
        "source": "nvidia_wheel",
        "version_code": 13000,
        "version": "13.0",
        "wheel": "nvidia-cuda-runtime 13.0.96",
    },
    "nccl": {
        "path": "site/nvidia/nccl/lib/libnccl.so.2",
        "source": "nvidia_wheel",
        "version_code": 22809,
        "version": "2.28.9",
        "wheel": "nvidia-nccl-cu13 2.28.9",
    },
    "cudnn": {
        "path": "site/nvidia/cudnn/lib/libcudnn.so.9",
        "source": "nvidia_wheel",
        "version_code": 91900,
        "version": "9.19.0",
        "wheel": "nvidia-cudnn-cu13 9.19.0.56",
    },
    "nvcc": {"missing": "not_found", "detail": "nvcc not on PATH"},
    "env_claims": {"CUDA_VERSION": "13.0.2", "NCCL_VERSION": "2.28.3-1"},
}


def test_decode_versions_match_the_h200_capture():
    cap = json.load(open(FIXTURES / "h200x2" / "nvml_torch.json"))
    assert decode_version("nccl", 22809) == ".".join(map(str, cap["torch"]["nccl"]))  # 2.28.9
    assert decode_version("cudnn", cap["torch"]["cudnn"]) == "9.19.0"
    assert decode_version("cuda_runtime", 13000) == cap["torch"]["cuda"]
    assert decode_version("cudnn", 8902) == "8.9.2" and decode_version("nccl", 2708) == "2.7.8"


def test_build_tag_from_version_py_when_metadata_has_none(tmp_path, monkeypatch):
    # The H200 machine: metadata says 2.11.0, torch/version.py says 2.11.0+cu130 (seen on the GPU run).
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text(
        "__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\n"
    )

    class Dist:
        version = "2.11.0"

        def locate_file(self, name):
            return tmp_path / name

    monkeypatch.setattr(libs, "_torch_dist", lambda: Dist())
    torch, site = libs.read_torch()
    assert torch == {
        "version": "2.11.0",
        "version_py": "2.11.0+cu130",
        "cuda": "13.0",
        "cuda_build_tag": "cu130",
    }
    assert site == tmp_path


def test_torch_version_py_is_parsed_not_imported():
    assert (
        parse_version_py("__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\n", "cuda")
        == "13.0"
    )
    assert parse_version_py("cuda: Optional[str] = None\n", "cuda")["missing"] == "not_applicable"


def test_find_library_prefers_torch_wheels_over_system(tmp_path):
    site, system = tmp_path / "site", tmp_path / "sys"
    for p in (
        site / "nvidia" / "cu13" / "lib" / "libcudart.so.13",
        site / "nvidia" / "nccl" / "lib" / "libnccl.so.2",
        system / "libcudart.so.12",
        system / "libnccl.so.2",
    ):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"")
    got = find_library("cuda_runtime", site, system_dirs=(str(system),))
    assert got["source"] == "nvidia_wheel" and got["path"].endswith("cu13/lib/libcudart.so.13")
    assert find_library("nccl", None, system_dirs=(str(system),))["source"] == "system"
    assert find_library("cudnn", site, system_dirs=(str(system),)) is None


def _h200_site(tmp_path):
    """A site-packages holding the H200 machine's ~200 distributions (tests/fixtures/h200x2/pip-list.txt) as
    ``<name>-<version>.dist-info`` folders (the wheel spec's escaped names), plus one ``.egg-info``."""
    lines = (FIXTURES / "h200x2" / "pip-list.txt").read_text().splitlines()[2:]
    for line in lines:
        name, version = line.split()[:2]
        folder = tmp_path / f"{name.replace('-', '_')}-{version}.dist-info"
        folder.mkdir()
        (folder / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        )
    egg = tmp_path / "nvidia_legacy_tools.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text(
        "Metadata-Version: 1.0\nName: NVIDIA-Legacy-Tools\nVersion: 1.0\n"
    )
    return len(lines)


def test_wheels_found_from_folder_names_reading_no_wheel_metadata(tmp_path, monkeypatch):
    from importlib import metadata

    count = _h200_site(tmp_path)
    every_dist = metadata.distributions
    monkeypatch.setattr(libs.metadata, "distributions", lambda: every_dist(path=[str(tmp_path)]))
    reads = []
    original = metadata.PathDistribution.read_text
    monkeypatch.setattr(
        metadata.PathDistribution,
        "read_text",
        lambda self, name: reads.append(self._path.name) or original(self, name),
    )
    dists = libs.nvidia_distributions()
    # what reading every METADATA finds (the probe's earlier way), in the same order
    every = [
        ((d.metadata["Name"] or "").lower(), d.version) for d in every_dist(path=[str(tmp_path)])
    ]
    assert dists == [(n, v) for n, v in every if n.startswith("nvidia-")]
    assert ("nvidia-legacy-tools", "1.0") in dists and len(dists) == 17
    for kind, want in (
        ("cuda_runtime", H200["cuda_runtime"]),
        ("nccl", H200["nccl"]),
        ("cudnn", H200["cudnn"]),
    ):
        assert libs._wheel_for(want["path"], libs.LIBS[kind][2], dists) == want["wheel"]
        assert libs._wheel_for(want["path"], libs.LIBS[kind][2]) == want["wheel"]
    assert (
        libs._wheel_for("/usr/lib/x86_64-linux-gnu/libnccl.so.2", "nccl")["missing"]
        == "not_applicable"
    )
    reads.clear()
    libs.nvidia_distributions()
    assert count > 190 and set(reads) == {
        "nvidia_legacy_tools.egg-info"
    }  # only the layout without a versioned name


def test_version_query_of_a_broken_library_is_an_error_not_a_crash(tmp_path):
    bogus = tmp_path / "libnccl.so.2"
    bogus.write_text("not an ELF file")
    out = query_versions({"nccl": {"path": str(bogus)}})
    assert out["nccl"]["missing"] == "error" and "OSError" in out["nccl"]["detail"]


def test_nvcc_parsing_and_absence():
    text = "Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n"
    assert read_nvcc(CommandResult(True, text))["version"] == "13.0"
    gone = CommandResult(False, failure={"missing": "not_found", "detail": "nvcc not on PATH"})
    assert read_nvcc(gone)["missing"] == "not_found"


def test_collect_here_is_json_and_keeps_claims_apart(monkeypatch):
    monkeypatch.setenv("NCCL_VERSION", "2.28.3-1")
    ctx = ProbeContext({})
    data = LibsProbe().collect(ctx)
    json.dumps(data)
    assert data["env_claims"]["NCCL_VERSION"] == "2.28.3-1"
    assert set(data) >= {"torch", "cuda_runtime", "nccl", "cudnn", "nvcc", "env_claims"}
    assert "deep" not in data


def judge(b, a):
    return {
        f.hypothesis: f
        for f in LibsProbe().judge(
            ProbeResult(ProbeStatus.OK, 0.1, b), ProbeResult(ProbeStatus.OK, 0.1, a)
        )
    }


def test_same_libraries_are_ruled_out_and_the_nccl_claim_is_called_out():
    f = judge(H200, H200)
    assert (
        f["nccl.version"].status is H.RULED_OUT
        and "NCCL 2.28.9 loaded on both" in f["nccl.version"].summary
    )
    assert any(
        "NCCL_VERSION=2.28.3-1 but the NCCL loaded is 2.28.9" in e
        for e in f["nccl.version"].evidence
    )
    assert f["cuda.version"].status is H.RULED_OUT


def test_loaded_nccl_change_is_implicated():
    after = {**H200, "nccl": {**H200["nccl"], "version": "2.27.3", "version_code": 22703}}
    n = judge(H200, after)["nccl.version"]
    assert (
        n.status is H.IMPLICATED and n.severity is Severity.HIGH and "2.28.9 -> 2.27.3" in n.summary
    )


def test_claim_change_alone_is_low():
    after = {**H200, "env_claims": {**H200["env_claims"], "NCCL_VERSION": "2.29.1-1"}}
    n = judge(H200, after)["nccl.version"]
    assert n.status is H.IMPLICATED and n.severity is Severity.LOW


def test_toolkit_on_path_change_is_medium_and_kept_apart():
    b = {
        **H200,
        "nvcc": {"version": "12.4", "build": "12.4.131", "path": "/usr/local/cuda/bin/nvcc"},
    }
    a = {
        **H200,
        "nvcc": {"version": "12.6", "build": "12.6.85", "path": "/usr/local/cuda/bin/nvcc"},
    }
    c = judge(b, a)["cuda.version"]
    assert c.status is H.IMPLICATED and c.severity is Severity.MEDIUM and "nvcc" in c.summary


def test_libs_missing_on_one_side_is_inconclusive():
    from _diffkit import section, snapshot

    from forensics.diff.ledger import analyse

    assert (
        LibsProbe().judge(None, ProbeResult(ProbeStatus.OK, 0.1, H200)) == []
    )  # the ledger handles it
    by_id = {h.id: h for h in analyse(snapshot({}), snapshot({"libs": section(H200)})).hypotheses}
    for hyp in ("cuda.version", "nccl.version"):
        assert (
            by_id[hyp].status is H.INCONCLUSIVE
            and "'libs' has no data in BEFORE" in by_id[hyp].summary
        )


def test_deep_is_opt_in_and_extends_timeout():
    assert LibsProbe().extra_timeout_s({"deep": True}) > 0 and LibsProbe().extra_timeout_s({}) == 0
    assert "import torch" not in open(libs.__file__).read().split("_DEEP")[0]


def test_a_listing_that_never_returns_does_not_keep_forensics_from_exiting():
    """When the runner gives up on the probe while it lists the wheels (its timeout) and the command ends,
    nothing the probe started may hold the process open: a site-packages on a file system that stopped
    answering would hang ``forensics`` at exit."""
    import subprocess
    import sys

    nccl = {
        "path": "/usr/lib/python3/site-packages/" + H200["nccl"]["path"].removeprefix("site/"),
        "source": "nvidia_wheel",
    }
    code = f"""
import threading
from forensics.probe import ProbeContext
from forensics_probes.libs import probe as libs
libs.read_torch = lambda: (None, None)
libs.find_library = lambda kind, site: {nccl!r} if kind == "nccl" else None
libs.query_versions = lambda found, timeout_s: {{"nccl": 22809}}
listing, never = threading.Event(), threading.Event()
libs.nvidia_distributions = lambda: listing.set() or never.wait()  # the file system stopped answering
threading.Thread(target=libs.LibsProbe._loaded, args=(ProbeContext(),), daemon=True).start()
assert listing.wait(30)
print("given up")  # what the runner does at the probe's timeout: the command goes on and ends
"""
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the process did not exit: the wheel-listing thread held it open")
    assert out.returncode == 0 and out.stdout.strip() == "given up", out.stderr
