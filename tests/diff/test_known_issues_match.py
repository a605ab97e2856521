"""Known-issues catalog matching (forensics.diff.known) and which layer brought which (forensics.diff.layers).

On the real case fixtures (tests/fixtures/cases: real H200 snapshots edited only where each case changes).
"""

from __future__ import annotations

import copy

import pytest
from _diffkit import CASES

from forensics import snapshot as snap
from forensics.diff import known, layers
from forensics.diff.ledger import analyse


def _pair(name):
    return snap.load(CASES / name / "before.json"), snap.load(CASES / name / "after.json")


@pytest.mark.parametrize(
    "version,spec,ok",
    [
        ("2.16.2", "==2.16.2", True),
        ("2.16", "==2.16.0", True),
        ("2.15.5", ">=2.14.3,<2.16", True),
        ("2.16.0", ">=2.14.3,<2.16", False),
        ("580.159.04", ">580.105.08", True),
        ("2.11.0+cu130", ">=2.11", True),
        ("13.4.1.2", "==13.4.1.2", True),
        (None, ">=1", False),
        ("1.0", "*", True),
        ("1.0", "~1", False),
    ],
)
def test_version_specifiers(version, spec, ok):
    assert known.version_matches(version, spec) is ok


def test_catalog_is_read_from_the_package():
    ids = {e["id"] for e in known.catalog()}
    assert len(ids) >= 20 and "nccl-setting-p2p-disable" in ids


def test_setting_match_with_every_condition_checked_raises_three_fold():
    a = analyse(*_pair("case20_p2p_disabled_env"))
    top = a.top
    assert top.id == "nccl.env"
    [m] = top.known_issues
    assert m["id"] == "nccl-setting-p2p-disable" and not m["possible"] and m["factor"] == 3.0
    assert any(
        "known issue x3 nccl-setting-p2p-disable" in e and "https://" in e for e in top.evidence
    )
    assert "known_issues" in a.to_json()["hypotheses"][0]


def test_a_condition_the_snapshot_contradicts_drops_the_entry():
    # the cuBLAS NVFP4 entry needs a Blackwell GPU; case19's GPU is an H200 (compute capability 9.0, hopper)
    b, a = _pair("case19_cublas_rollup_decoy")
    assert not [
        m for m in known.match(b, a, {"cuda.version"}) if m.entry["id"].startswith("cublas-")
    ]
    blackwell = copy.deepcopy(a)
    for g in blackwell["probes"]["gpu"]["data"]["gpus"].values():
        g["compute_capability"] = "10.0"
    [m] = [
        m
        for m in known.match(b, blackwell, {"cuda.version"})
        if m.entry["id"].startswith("cublas-")
    ]
    assert (
        m.unchecked == ["dtype=nvfp4"] and m.factor == 1.5
    )  # the dtype cannot be read from a snapshot


def test_a_match_needs_its_hypothesis_implicated():
    b, a = _pair("case20_p2p_disabled_env")
    assert known.match(b, a, set()) == []


def test_a_match_whose_components_stayed_flat_is_evidence_against():
    b, a = _pair("case18_nccl_229_small_allreduce")
    entry = next(e for e in known.catalog() if e["id"] == "nccl-2.29-small-allreduce-latency")
    an = analyse(b, a)
    assert (
        known.match(b, a, {"nccl.version"}, an.bench, (entry,))[0].against == ""
    )  # the all-reduce moved here
    matmul_only = dict(entry, effect=dict(entry["effect"], benchmark=["matmul"]))
    [m] = known.match(b, a, {"nccl.version"}, an.bench, (matmul_only,))
    assert m.against.startswith("against it") and m.factor == 0.7


def test_torch_brought_nccl_and_cuda_and_the_allreduce_decides():
    b, a = _pair("case15_torch_cuda_nccl_together")
    lines = layers.brought_by_torch(b, a)
    assert lines["torch.version"] == [
        "torch 2.6.0 -> 2.8.0 brought NCCL 2.21.5 -> 2.27.3, CUDA runtime 12.6 -> 12.8, "
        "cuDNN 9.5.1 -> 9.10.2 (its bundled or pinned libraries)"
    ]
    assert lines["nccl.version"][0].startswith(
        "torch 2.6.0 -> 2.8.0 brought NCCL 2.21.5 -> 2.27.3 "
        "(nvidia-nccl-cu12 2.27.3, installed with torch)"
    )
    an = analyse(b, a)
    assert an.top.id == "nccl.version"
    assert an.top.evidence[1].startswith("torch 2.6.0 -> 2.8.0 brought NCCL")


def test_no_torch_change_brings_nothing():
    assert layers.brought_by_torch(*_pair("case18_nccl_229_small_allreduce")) == {}


def test_cuda_library_wheels_implicate_cuda_version():
    b, a = _pair("case19_cublas_rollup_decoy")
    [f] = layers.library_findings(b, a)
    assert f.hypothesis == "cuda.version" and f.severity.value == "high"
    assert "cuBLAS (nvidia-cublas 13.4.0.1 -> 13.4.1.2)" in f.summary
    assert layers.library_findings(b, b) == []
