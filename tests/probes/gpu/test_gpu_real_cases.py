"""The real cases (tests/fixtures/cases, from shared/cases/README.md) through the gpu and libs judges.

Each case has before.json / after.json (full snapshots) and expect.json. This
test checks the expectation for the hypotheses these two probes own; the diff
engine's own case test checks the whole ranking.
"""

import json

import pytest
from forensics_probes.gpu import GpuProbe
from forensics_probes.libs import LibsProbe

from forensics.model import HypothesisStatus, Severity
from forensics.probe import JudgeContext, ProbeResult
from tests.conftest import FIXTURES

CASES = FIXTURES / "cases"
MINE = {
    "gpu.throttling",
    "gpu.pcie-link",
    "gpu.contention",
    "gpu.config",
    "gpu.health",
    "gpu.topology",
    "driver.version",
    "cuda.version",
    "nccl.version",
    "gpu.memory",
}
ORDER = [Severity.INFO, Severity.LOW, Severity.MEDIUM, Severity.HIGH, Severity.CRITICAL]
NAMES = [
    "case01_power_brake",
    "case02_pcie_gen2",
    "case03_idle_pcie_false_alarm",
    "case05_cuda_runtime",
    "case14_contention",
]


def judge_case(name):
    before = json.loads((CASES / name / "before.json").read_text())
    after = json.loads((CASES / name / "after.json").read_text())
    jctx = JudgeContext(before, after)
    out = []
    for probe in (GpuProbe(), LibsProbe()):
        b, a = (ProbeResult.from_json(d["probes"][probe.name]) for d in (before, after))
        out += probe.judge(b, a, jctx)
    return out, json.loads((CASES / name / "expect.json").read_text())


@pytest.mark.parametrize("name", NAMES)
def test_case(name):
    findings, expect = judge_case(name)
    assert {f.hypothesis for f in findings} == MINE  # one finding per hypothesis, none missing
    implicated = [f for f in findings if f.status is HypothesisStatus.IMPLICATED]
    top = max(implicated, key=lambda f: (ORDER.index(f.severity), f.relevance), default=None)
    if expect["top"] in MINE:
        assert top is not None and top.hypothesis == expect["top"], [
            (f.hypothesis, f.summary) for f in implicated
        ]
        assert ORDER.index(top.severity) >= ORDER.index(Severity.MEDIUM)
    elif expect["top"] is None:
        assert all(f.severity is Severity.INFO for f in findings), [
            (f.hypothesis, f.summary) for f in implicated
        ]
    limit = ORDER.index(Severity(expect["max_severity_other"]))
    others = [f for f in findings if top is None or f.hypothesis != top.hypothesis]
    assert all(ORDER.index(f.severity) <= limit for f in others), [
        (f.hypothesis, f.severity, f.summary) for f in others
    ]
    ruled = {f.hypothesis for f in findings if f.status is HypothesisStatus.RULED_OUT}
    assert set(expect["ruled_out"]) & MINE <= ruled, set(expect["ruled_out"]) - ruled


def test_case03_says_idle_downtraining():
    findings, _ = judge_case("case03_idle_pcie_false_alarm")
    pcie = next(f for f in findings if f.hypothesis == "gpu.pcie-link")
    assert pcie.status is HypothesisStatus.RULED_OUT and "idle downtraining" in pcie.summary
    assert "Gen5 x16 under load" in pcie.summary


def test_case01_names_the_hw_reasons_and_the_clock():
    findings, _ = judge_case("case01_power_brake")
    thr = next(f for f in findings if f.hypothesis == "gpu.throttling")
    assert "1530 -> 382 MHz" in thr.summary and "hw power brake slowdown" in thr.summary
    assert thr.severity is Severity.HIGH


def test_case02_points_at_the_one_gpu():
    findings, _ = judge_case("case02_pcie_gen2")
    pcie = next(f for f in findings if f.hypothesis == "gpu.pcie-link")
    assert (
        pcie.summary.startswith("GPU 1")
        and "Gen2 x16 while busy" in pcie.summary
        and "Gen5 x16" in pcie.summary
    )


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("side", ["before", "after"])
def test_identical_snapshots_implicate_nothing(name, side):
    doc = json.loads((CASES / name / f"{side}.json").read_text())
    jctx = JudgeContext(doc, doc)
    for probe in (GpuProbe(), LibsProbe()):
        r = ProbeResult.from_json(doc["probes"][probe.name])
        assert [f for f in probe.judge(r, r, jctx) if f.status is HypothesisStatus.IMPLICATED] == []
