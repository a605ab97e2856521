"""The end-to-end scenarios run on a real 2 x H200 machine (examples/): the report must keep
leading with the right cause. These are real snapshots with embedded canary benchmarks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from forensics import snapshot as snap
from forensics.ledger import analyse
from forensics.model import HypothesisStatus, Severity

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _analyse(scenario: str):
    folder = EXAMPLES / scenario
    return analyse(snap.load(folder / "before.json"), snap.load(folder / "after.json"))


def _bench(an, name):
    return next(r for r in an.bench.results if r.name == name)


def test_aa_nothing_changed_says_so():
    an = _analyse("aa")
    assert an.top is None
    assert an.verdict.startswith("No significant change")
    implicated = [h for h in an.hypotheses if h.status is HypothesisStatus.IMPLICATED]
    assert implicated == []
    assert _bench(an, "canary.verify_step_ms").comparison.verdict.value == "same"


def test_busy_gpu_leads_with_contention_and_shows_throttling():
    an = _analyse("busy-gpu")
    assert an.top.id == "gpu.contention"
    throttling = next(h for h in an.hypotheses if h.id == "gpu.throttling")
    assert throttling.status is HypothesisStatus.IMPLICATED
    assert any("sw power cap" in e for e in throttling.evidence)
    assert _bench(an, "canary.verify_step_ms").comparison.verdict.value == "slower"


def test_nccl_tuning_lost_leads_with_propagation_and_shows_the_allreduce_effect():
    an = _analyse("nccl-lost")
    assert an.top.id == "nccl.env-propagation"
    assert "NCCL_ALGO" in an.top.summary
    allreduce = _bench(an, "canary.allreduce_us").comparison
    assert allreduce.verdict.value == "faster"  # Ring/Simple was slower than NCCL's own choice here
    assert "faster" in an.bench.sentence


def test_silent_pull_leads_with_code_change_and_the_canary_is_unchanged():
    an = _analyse("silent-pull")
    assert an.top.id == "code.change"
    assert "Fast-forward" in an.top.summary
    assert _bench(an, "canary.verify_step_ms").comparison.verdict.value == "same"
    others = [h for h in an.hypotheses if h.status is HypothesisStatus.IMPLICATED and h.id != "code.change"]
    assert all(h.severity <= Severity.INFO for h in others), [(h.id, h.summary) for h in others]


@pytest.mark.parametrize("scenario", ["aa", "busy-gpu", "nccl-lost", "silent-pull"])
def test_example_files_hold_no_machine_paths_or_real_gpu_ids(scenario):
    for f in (EXAMPLES / scenario).glob("*.json"):
        text = f.read_text()
        assert not re.search(r"/wor[k]/main", text)  # the GPU machine's checkout path became <checkout>
        for line in text.splitlines():
            if '"uuid"' in line:
                assert "GPU-00000000-0000-0000-0000-" in line
