"""The confirm / refute rule on real canary readings (2 x H200, examples/h200x2/bench).

a1 and a2 are two unchanged runs (3.91 ms per verify step), p2p the same machine with
NCCL_P2P_DISABLE=1 (4.48 ms): "restoring" the variable is p2p -> a2, against the a1 baseline.
"""

from __future__ import annotations

import json

import pytest

from forensics.bench.compare import compare_values
from forensics.investigate.decide import decide, share_recovered
from forensics.investigate.model import Outcome
from tests.conftest import ROOT

BENCH = ROOT / "examples" / "h200x2" / "bench"


def medians(name: str) -> list[float]:
    doc = json.loads((BENCH / f"{name}.json").read_text())
    return next(
        r["process_medians"] for r in doc["results"] if r["name"] == "canary.verify_step_ms"
    )


def rule(baseline, a, b, **kw):
    floor, cmp = compare_values(a, b)
    share = share_recovered(baseline, a, a, b)
    return decide(cmp, share, **kw), share


def test_restoring_the_variable_is_confirmed_with_its_share():
    (outcome, reason), share = rule(medians("a1"), medians("p2p"), medians("a2"))
    assert outcome is Outcome.CONFIRMED, reason
    assert 0.9 < share.point < 1.1 and share.low >= 0.5 and share.low <= share.point <= share.high
    assert "recovers" in reason and "lower end >= 50%" in reason


def test_no_change_is_refuted():
    p2p = medians("p2p")
    (outcome, reason), _ = rule(medians("a1"), p2p, list(reversed(p2p)))
    assert outcome is Outcome.REFUTED and "not significant" in reason


def test_too_few_processes_is_never_confirmed():
    (outcome, reason), _ = rule(medians("a1"), medians("p2p"), medians("a2")[:3])
    assert outcome is Outcome.INCONCLUSIVE and "Mann-Whitney U cannot reach" in reason


def test_a_higher_bar_leaves_a_full_recovery_confirmed_and_says_the_bar():
    (outcome, reason), _ = rule(medians("a1"), medians("p2p"), medians("a2"), min_share=0.8)
    assert outcome is Outcome.CONFIRMED and ">= 80%" in reason


def test_without_a_baseline_measurement_nothing_is_confirmed():
    (outcome, reason), share = rule(None, medians("p2p"), medians("a2"))
    assert share.point is None and outcome is Outcome.INCONCLUSIVE and "share" in reason


def test_a_slowdown_that_did_not_reproduce_has_no_share():
    share = share_recovered(medians("p2p"), medians("a1"), medians("a1"), medians("a2"))
    assert share.point is None and "not slower than the baseline" in share.note


@pytest.mark.parametrize("hib", [False, True])
def test_share_is_the_same_for_a_throughput(hib):
    conv = (lambda xs: [1 / x for x in xs]) if hib else (lambda xs: xs)
    s = share_recovered(
        conv(medians("a1")),
        conv(medians("p2p")),
        conv(medians("p2p")),
        conv(medians("a2")),
        higher_is_better=hib,
    )
    ref = share_recovered(medians("a1"), medians("p2p"), medians("p2p"), medians("a2"))
    assert s.point == pytest.approx(ref.point, rel=1e-6)


def _busy_gpu():
    root = ROOT / "examples" / "busy-gpu"
    return json.loads((root / "before.json").read_text()), json.loads(
        (root / "after.json").read_text()
    )


def test_a_busy_gpu_re_measured_is_still_present_with_the_process_named():
    """The 2 x H200 busy-GPU run: the canary measured again (here: its recorded run) is still slower."""
    from forensics.diff.ledger import analyse
    from forensics.investigate.experiments import Context, RemeasureExperiment
    from forensics.investigate.measure import Subject
    from forensics.investigate.plan import build_plan

    before, after = _busy_gpu()
    ctx = Context(before, after, analyse(before, after), Subject("canary"), False, processes=5)
    plan = build_plan(ctx)
    assert [e.hypothesis for e in plan] == ["gpu.contention", "gpu.throttling"]
    ctx.cache["remeasure"] = after["bench"]  # what a fresh canary run under the load measured
    exp = plan[0]
    RemeasureExperiment.run(ctx, exp)
    assert exp.outcome is Outcome.STILL_PRESENT
    assert exp.sentence.startswith("Still present: GPU 0 also runs pid ")
    assert "python3" in exp.sentence and "canary.compute_ms" in exp.sentence
    assert RemeasureExperiment.estimate(ctx, plan[1]) == 0.0  # the second one reuses the same run


def test_the_same_idle_machine_re_measured_is_gone():
    from forensics.diff.ledger import analyse
    from forensics.investigate.experiments import Context, RemeasureExperiment
    from forensics.investigate.measure import Subject
    from forensics.investigate.plan import build_plan

    before, after = _busy_gpu()
    ctx = Context(before, after, analyse(before, after), Subject("canary"), False, processes=5)
    exp = build_plan(ctx)[0]
    ctx.cache["remeasure"] = before["bench"]  # the load gone: the canary as in the baseline
    RemeasureExperiment.run(ctx, exp)
    assert exp.outcome is Outcome.GONE and exp.sentence.startswith("Gone now:")


def test_a_throughputs_residual_is_said_as_its_rate():
    """Applied at 200 tok/s against the baseline's 250: it read 'is 1.250x the baseline', which for a rate
    says faster, beside 'still beyond the threshold'."""
    from forensics.investigate.decide import residual

    r = residual(
        [250, 251, 249, 250.5, 249.5],
        [104, 105, 103, 104.5, 103.5],
        [200, 201, 199, 200.5, 199.5],
        threshold=0.05,
        higher_is_better=True,
    )
    assert r.status == "beyond"
    text = r.sentence()
    assert "runs at 0.800x the baseline's rate (95% CI 0.79" in text, text
    assert "1.250x" not in text and r.to_json()["sentence"] == text
    assert (
        0.15 < r.unexplained.point < 0.2
    )  # (1/200 - 1/250) / (1/104 - 1/250): a share of the lost time


# The baseline snapshot of a CI run of test_two_causes_each_with_its_share_and_the_residual: 5 processes of the
# synthetic 4 ms step, one of them 5% low (3.82 ms).
OUTLIER_BASELINE = [3.956315, 4.020410, 4.074551, 4.092237, 3.820263]


def test_a_residual_the_baselines_own_processes_leave_undecided_says_so():
    """Today with the causes taken out at 1.001x that baseline read 'not decided (CI 0.980-1.053)' after 20
    processes: the baseline's 3.82 ms alone holds the CI's upper end above 1.05, whatever today's side does."""
    from forensics.investigate.decide import baseline_bound, residual

    applied = [4.0233, 4.0311, 3.9954, 4.0412, 4.0102]
    r = residual(OUTLIER_BASELINE, [9.46, 9.47, 9.45, 9.48, 9.44], applied, threshold=0.05)
    assert r.status == "undecided" and r.baseline_bound is not None
    assert 1.05 <= r.baseline_bound < 1.06
    assert r.sentence().endswith(
        f"not decided (the baseline's 5 processes alone leave the CI's upper end at "
        f"{r.baseline_bound:.3f}: more processes of today cannot narrow it, a baseline measured with "
        "more processes can)"
    )
    assert r.to_json()["baseline_bound"] == r.baseline_bound
    # a tight baseline: more processes of today may still decide it
    tight = [4.0, 4.01, 3.99, 4.005, 3.995]
    assert baseline_bound(tight, applied, threshold=0.05) is None
    # a real residual of 7%: more processes of today may show it beyond the threshold
    slower = [4.28, 4.31, 4.30, 4.29, 4.32]
    assert baseline_bound(OUTLIER_BASELINE, slower, threshold=0.05) is None
    # the same for a throughput: the rate's reciprocal
    rates = [1e3 / x for x in OUTLIER_BASELINE]
    hib = residual(
        rates, [105.7] * 5, [1e3 / x for x in applied], threshold=0.05, higher_is_better=True
    )
    assert hib.status == "undecided" and 1.05 <= hib.baseline_bound < 1.06


def test_a_share_that_straddles_the_bar_by_a_hair_is_printed_with_the_decimals_that_show_it():
    """Two commits of 1 ms each in a 2 ms slowdown: 'recovers 50% (95% CI 50% to 50%) of the slowdown, an
    interval that straddles 50%' (fresh7's hostile pass); the ends are 49.96% and 50.03%."""
    from forensics.investigate.decide import _share_range
    from forensics.investigate.model import Share

    assert _share_range(Share(0.4998, 0.4996, 0.5003), 0.5) == "49.98% (95% CI 49.96% to 50.03%)"
    assert _share_range(Share(0.53, 0.49, 0.57), 0.5) == "53% (95% CI 49% to 57%)"
    assert _share_range(Share(0.53, 0.50, 0.57), 0.5) == "53% (95% CI 50% to 57%)"  # not straddling
