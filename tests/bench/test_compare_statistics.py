"""Statistics and verdicts of ``forensics bench compare`` on samples with known effects."""

from __future__ import annotations

import json
import random
import statistics

import pytest

from forensics.bench.compare import aa_noise, compare_docs, foreign_processes, throttled
from forensics.bench.document import build, make_result
from forensics.errors import BadInputError
from forensics.stats import Verdict
from tests.conftest import ROOT

# per-process medians of canary.verify_step_ms from the real 2 x H200 run (examples/h200x2/bench)
H200_STEP_MS = [7.8177, 7.8498, 7.8452, 7.8683, 7.8861]


def side(
    values, *, name="canary.verify_step_ms", telemetry=None, extra=None, config=None, hib=False
):
    results = [make_result(name, "canary", "ms", values, higher_is_better=hib)]
    for n, vals in (extra or {}).items():
        results.append(make_result(n, "component", "us", vals))
    cfg = {"kind": "canary", "device": "cuda", "tp": 2, "layers": 16}
    cfg.update(config or {})
    return build(cfg, results, telemetry=telemetry or {"missing": "not_found", "detail": "test"})


def noisy(center, cv, n, seed):
    rng = random.Random(seed)
    return [max(0.05 * center, center * (1 + rng.gauss(0, cv))) for _ in range(n)]


def test_aa_same_configuration_says_same():
    a = noisy(7.85, 0.003, 6, 1)
    b = noisy(7.85, 0.003, 6, 2)
    res = compare_docs(side(a), side(b))
    assert res.verdict is Verdict.SAME
    assert res.exit_code == 0


def test_the_same_noisy_measurements_on_both_sides_do_not_claim_a_narrow_ci():
    """Identical sides are ``same`` however noisy, and the sentence says why, not "CI within +-N%"."""
    values = [4.0, 16.0, 10.0, 5.0, 15.0]
    res = compare_docs(side(values), side(list(reversed(values))))
    cmp = res.results["canary.verify_step_ms"]
    assert cmp.verdict is Verdict.SAME and cmp.ci_low < 0.5
    assert cmp.sentence().startswith("no change: the same measurements on both sides (95% CI 0.")
    assert "CI within" not in cmp.sentence()


def test_ten_percent_shift_with_low_noise_says_slower():
    a = noisy(7.85, 0.003, 6, 3)
    b = [v * 1.10 for v in noisy(7.85, 0.003, 6, 4)]
    res = compare_docs(side(a), side(b))
    assert res.verdict is Verdict.SLOWER
    assert res.exit_code == 1
    assert "slower" in res.results["canary.verify_step_ms"].sentence()


def test_faster_exits_zero():
    a = noisy(7.85, 0.003, 6, 5)
    b = [v * 0.85 for v in noisy(7.85, 0.003, 6, 6)]
    res = compare_docs(side(a), side(b))
    assert res.verdict is Verdict.FASTER and res.exit_code == 0


def test_a_faster_change_gives_its_factor_and_ci_in_the_same_terms():
    """On the H200 the reports said "1.271x faster (95% CI 0.718-0.813, ...)": a speed-up factor beside
    the time ratio's interval. The interval is now of the factor, and holds it."""
    a = [v / 0.787 for v in H200_STEP_MS]
    c = compare_docs(side(a), side(H200_STEP_MS)).results["canary.verify_step_ms"]
    head, ci = c.sentence().split(" (95% CI ")
    factor = float(head.removesuffix("x faster"))
    lo, hi = (float(x) for x in ci.split(",")[0].split("-"))
    assert 1 < lo <= factor <= hi and abs(factor - 1 / 0.787) < 0.01


def test_high_noise_is_inconclusive_with_how_many_more():
    a = noisy(7.85, 0.30, 6, 1)
    b = [v * 1.10 for v in noisy(7.85, 0.30, 6, 2)]
    res = compare_docs(side(a), side(b))
    assert res.verdict is Verdict.INCONCLUSIVE
    assert res.exit_code == 3
    reasons = " ".join(res.results["canary.verify_step_ms"].reasons)
    assert "more)" in reasons


def test_high_noise_never_calls_a_change_over_many_draws():
    calls = 0
    for seed in range(60):
        a = noisy(7.85, 0.30, 6, 100 + seed)
        b = [v * 1.10 for v in noisy(7.85, 0.30, 6, 500 + seed)]
        calls += compare_docs(side(a), side(b)).verdict is not Verdict.INCONCLUSIVE
    assert calls <= 1


def test_noise_gate_blocks_a_lucky_separation():
    # complete separation by chance (p=0.002) but B's spread is 16% of its median
    a = [5.66, 7.11, 7.25, 7.32, 7.35, 9.05]
    b = [9.60, 9.63, 10.32, 11.47, 11.52, 15.20]
    res = compare_docs(side(a), side(b))
    assert res.verdict is Verdict.INCONCLUSIVE
    assert any("noisy" in r for r in res.results["canary.verify_step_ms"].reasons)


def test_sample_size_where_mann_whitney_cannot_reach_alpha_is_named():
    res = compare_docs(side(H200_STEP_MS), side([v * 1.5 for v in H200_STEP_MS[:4]]))
    assert res.verdict is Verdict.INCONCLUSIVE
    assert (
        res.results["canary.verify_step_ms"]
        .reasons[0]
        .startswith(
            "with 5+4 processes Mann-Whitney U cannot reach p <= 0.01 (smallest possible p 0.016)"
        )
    )


def test_too_few_processes_is_inconclusive():
    res = compare_docs(side(H200_STEP_MS[:2]), side([v * 1.2 for v in H200_STEP_MS[:2]]))
    assert res.verdict is Verdict.INCONCLUSIVE
    assert "too few processes" in res.results["canary.verify_step_ms"].reasons[0]


def test_component_pointing_at_the_cause():
    ar_a = [8.1, 8.5, 8.6, 8.9, 9.1, 8.4]
    ar_b = [v * 2.5 for v in ar_a]
    a = side(
        H200_STEP_MS + [7.85], extra={"canary.allreduce_us": ar_a, "canary.compute_ms": [7.3] * 6}
    )
    b = side(
        [v * 1.12 for v in H200_STEP_MS + [7.85]],
        extra={"canary.allreduce_us": ar_b, "canary.compute_ms": [7.3001] * 6},
    )
    res = compare_docs(a, b)
    assert res.verdict is Verdict.SLOWER
    assert res.pointing == ["canary.allreduce_us"]


def test_throughput_higher_is_better_inverts():
    a = noisy(2548.0, 0.003, 6, 9)
    b = [v / 1.10 for v in noisy(2548.0, 0.003, 6, 10)]
    res = compare_docs(side(a, name="user.tok_s", hib=True), side(b, name="user.tok_s", hib=True))
    assert res.verdict is Verdict.SLOWER


def telemetry(sw_power_cap, pids=()):
    return {
        "duration_s": 60.0,
        "interval_s": 0.1,
        "gpus": {
            "GPU-0": {
                "index": 0,
                "name": "NVIDIA H200",
                "samples": 600,
                "busy_samples": 580,
                "clock_sm_mhz": {
                    "min": 1440,
                    "median": 1440 if sw_power_cap else 1980,
                    "max": 1980,
                },
                "power_mw": {"min": 120000, "median": 692000, "max": 699000},
                "util_gpu_pct": {"min": 0, "median": 100, "max": 100},
                "reason_fraction": {"sw_power_cap": sw_power_cap, "gpu_idle": 0.02},
                "processes": [{"pid": p, "kind": "compute", "name": "python3"} for p in pids],
            }
        },
    }


def test_throttle_on_one_side_turns_same_into_inconclusive():
    a = noisy(7.85, 0.003, 6, 11)
    b = noisy(7.85, 0.003, 6, 12)
    res = compare_docs(side(a, telemetry=telemetry(0.19)), side(b, telemetry=telemetry(0.93)))
    assert res.verdict is Verdict.INCONCLUSIVE
    assert "throttle changed: GPU 0 sw_power_cap 19% -> 93% of busy samples (A -> B)" in res.notes


def test_same_throttle_share_on_both_sides_is_not_a_change():
    a = noisy(7.85, 0.003, 6, 11)
    b = noisy(7.85, 0.003, 6, 12)
    res = compare_docs(side(a, telemetry=telemetry(0.19)), side(b, telemetry=telemetry(0.20)))
    assert res.verdict is Verdict.SAME and not any("throttle" in n for n in res.notes)


def test_throttle_explains_a_slowdown_and_contention_is_listed():
    a = noisy(7.85, 0.003, 6, 13)
    b = [v * 1.3 for v in noisy(7.85, 0.003, 6, 14)]
    doc_b = side(b, telemetry=telemetry(0.93, pids=(4242, 100)))
    doc_b["processes"] = [{"pids": [100]}]
    res = compare_docs(side(a, telemetry=telemetry(0.0)), doc_b)
    assert res.verdict is Verdict.SLOWER
    assert any("contention on B: GPU 0 also ran pid 4242 python3" == n for n in res.notes)
    assert throttled(doc_b["telemetry"]) == {"GPU 0 sw_power_cap": 0.93}
    assert foreign_processes(doc_b) == {"GPU 0": ["pid 4242 python3"]}


def test_different_canary_settings_are_refused():
    with pytest.raises(BadInputError, match="different settings.*layers: 16 vs 32"):
        compare_docs(side(H200_STEP_MS), side(H200_STEP_MS, config={"layers": 32}))


def test_aa_noise_needs_four_processes():
    assert aa_noise([1.0, 1.0, 1.0]) is None
    assert aa_noise([1.0, 1.0, 1.1, 1.1]) == pytest.approx(0.1)  # processes 1 2 against 3 4


def test_aa_noise_splits_by_pairs_not_by_the_place_in_the_a_b_b_a_order():
    # Side A of the +1% step on the H200, run A B B A A B ...: its even processes ran first in their round,
    # its odd ones second. Odd/even read 1.2% (the place effect) and hid the 1% change as "same".
    side_a = json.loads((ROOT / "examples/verdicts/h200-abba/step-plus1-a.json").read_text())[
        "results"
    ][0]
    values = side_a["process_medians"]
    assert abs(statistics.median(values[1::2]) / statistics.median(values[0::2]) - 1) > 0.01
    assert aa_noise(values) == pytest.approx(0.0028, abs=5e-4)


def test_detection_power_on_the_recorded_h200_baseline():
    from forensics.bench.power import aa_splits, simulate

    pool = H200_STEP_MS + [3.9082 / 3.906 * 7.85]
    assert simulate(pool, n=6, shift=0.0, trials=30)[Verdict.SAME] == 30
    assert simulate(pool, n=6, shift=0.10, trials=30)[Verdict.SLOWER] == 30
    aa = aa_splits(pool, n_a=3)
    assert aa[Verdict.SLOWER] == aa[Verdict.FASTER] == 0 and sum(aa.values()) == 20


def test_throttle_on_one_side_only_is_reported_even_when_small():
    a = noisy(7.85, 0.003, 6, 15)
    b = noisy(7.85, 0.003, 6, 16)
    res = compare_docs(side(a, telemetry=telemetry(0.0)), side(b, telemetry=telemetry(0.08)))
    assert "throttle changed: GPU 0 sw_power_cap 0% -> 8% of busy samples (A -> B)" in res.notes
    assert res.verdict is Verdict.INCONCLUSIVE


# Real per-process medians (ms per block write) from the 1-GPU H200, examples/investigate/env:
# the step as it was, and with PYTORCH_NO_CUDA_MEMORY_CACHING=1 left in the environment.
H200_BLOCK_WRITE_MS = [0.02272, 0.02264, 0.02235, 0.0226, 0.02238]
H200_BLOCK_WRITE_NO_CACHING_MS = [0.19149, 0.17906, 0.22685, 0.21662, 0.20329]


def test_a_change_far_beyond_the_spread_is_called_on_noisy_data():
    # 9x slower; the "after" side's IQR/median is 12% (over the 10% gate) but its fastest process is
    # 7.9x slower than the slowest "before" one: no noise made that call
    res = compare_docs(
        side(H200_BLOCK_WRITE_MS, name="user.block_write_ms"),
        side(H200_BLOCK_WRITE_NO_CACHING_MS, name="user.block_write_ms"),
    )
    c = res.results["user.block_write_ms"]
    assert c.verdict is Verdict.SLOWER, c.reasons
    assert c.time_ratio > 8 and not any("noisy" in r for r in c.reasons)


def test_tied_process_medians_keep_the_exact_p_value():
    # the same step's bisect on the H200: 5+5 processes fully separated, two "before" processes printing
    # the same time; scipy's tie fallback (normal approximation) gave p=0.012 > 0.01 and no call
    from forensics.stats import compare, mwu_p

    slow = [0.101175, 0.10124, 0.10027, 0.1012, 0.1012]
    fast = [0.02248, 0.02265, 0.02263, 0.022465, 0.022345]
    assert mwu_p(slow, fast) == pytest.approx(2 / 252)
    assert compare(slow, fast).verdict is Verdict.FASTER
