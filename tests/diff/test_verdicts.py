"""Three-way verdicts (issue 13): no change, a small real change, a change beyond the threshold.

The two user-step figures the issue quotes were measured on the H200 and misreported: +1.4% (95% CI
1.008-1.033, p=0.008) as ``same`` and +4.7% (CI 1.041-1.057, p=0.004) as ``inconclusive``. Their
per-process medians were not kept, so the samples below are built to reproduce those statistics:
side A is the real user step of examples/silent-pull/before.json (5 fresh processes on the H200);
side B (5 and 6 processes) was searched for (by
scaling A's median with normal jitter) until ratio, CI and p match the quoted figures.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from forensics.bench.compare import compare_docs, compare_values
from forensics.cli import main
from forensics.stats import Verdict, compare
from tests.conftest import ROOT

STEP_A = [3.5566, 3.5675, 3.5741, 3.5752, 3.5701]  # examples/silent-pull/before.json user.step_ms
PLUS_1_4 = [3.6868, 3.6126, 3.5983, 3.6405, 3.619]  # reproduces +1.4% (CI 1.008-1.033, p=0.008)
PLUS_4_7 = [
    3.751,
    3.7277,
    3.747,
    3.7962,
    3.7202,
    3.716,
]  # reproduces +4.7% (CI 1.041-1.057, p=0.004)


def _doc(values, name="user.step_ms"):
    return {
        "schema": "forensics.bench/1",
        "config": {"kind": "user", "step": "cmd", "command": "python3 step.py"},
        "results": [
            {
                "name": name,
                "kind": "user",
                "unit": "ms",
                "higher_is_better": False,
                "process_medians": list(values),
            }
        ],
    }


def test_the_quoted_figures_are_reproduced():
    c = compare_values(STEP_A, PLUS_1_4)[1]
    assert (
        round(c.time_ratio, 3) == 1.014
        and round(c.ci_low, 3) == 1.008
        and round(c.ci_high, 3) == 1.033
    )
    assert round(c.p_value, 3) == 0.008
    c = compare_values(STEP_A, PLUS_4_7)[1]
    assert (
        round(c.time_ratio, 3) == 1.047
        and round(c.ci_low, 3) == 1.041
        and round(c.ci_high, 3) == 1.057
    )
    assert round(c.p_value, 3) == 0.004


def test_plus_1_4_percent_is_a_small_real_change_not_same():
    c = compare_values(STEP_A, PLUS_1_4)[1]
    assert c.verdict is Verdict.SMALL_SLOWER
    assert c.sentence().startswith(
        "a small real change: 1.014x slower (+1.4%, below the 5% threshold)"
    )
    assert "95% CI 1.008-1.033" in c.sentence()


def test_plus_4_7_percent_is_a_small_real_change_not_inconclusive():
    c = compare_values(STEP_A, PLUS_4_7)[1]
    assert c.verdict is Verdict.SMALL_SLOWER
    assert "+4.7%" in c.sentence()


def test_threshold_gates_the_exit_code_and_the_size(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_doc(STEP_A)))
    b.write_text(json.dumps(_doc(PLUS_1_4)))
    r = CliRunner().invoke(main, ["bench", "compare", str(a), str(b)])
    assert r.exit_code == 0, r.output  # small: below the threshold, exit 0
    assert "small-slower" in r.output
    r = CliRunner().invoke(main, ["bench", "compare", str(a), str(b), "--threshold", "1%"])
    assert r.exit_code == 1, r.output  # beyond a 1% threshold: slower
    assert "user.step_ms: slower" in r.output


def test_faster_small_change_and_symmetry():
    c = compare_values(PLUS_1_4, STEP_A)[1]
    assert c.verdict is Verdict.SMALL_FASTER
    assert c.sentence().startswith("a small real change: 1.014x faster")


def test_same_needs_the_ci_inside_the_noise_band():
    # real A/A: the two H200 baselines of examples/h200x2/bench (CI 0.995-1.003): inside +-1%
    a1 = json.loads((ROOT / "examples/h200x2/bench/a1.json").read_text())
    a2 = json.loads((ROOT / "examples/h200x2/bench/a2.json").read_text())
    res = compare_docs(a1, a2)
    assert res.verdict is Verdict.SAME
    assert res.results["canary.verify_step_ms"].noise_band == 0.01
    # the same readings with a wide CI (one side's spread x5 around its median) are no longer `same`
    med = sorted(a2["results"][0]["process_medians"])[3]
    wide = [med + 5 * (v - med) for v in a2["results"][0]["process_medians"]]
    c = compare(a1["results"][0]["process_medians"], wide, noise_floor=None)
    assert c.verdict is Verdict.INCONCLUSIVE, c.sentence()
    assert any("noise band" in r for r in c.reasons)


def test_effect_inside_twice_the_aa_floor_is_not_a_small_change():
    # The +2% step on the H200 (A B B A): measured +1.5%, while side A differs 1.2% from itself between its
    # alternate pairs of processes; no larger than twice that, it is not called a change
    runs = ROOT / "examples/verdicts/h200-abba"
    a, b = [
        json.loads((runs / f"step-plus2-{s}.json").read_text())["results"][0]["process_medians"]
        for s in "ab"
    ]
    floor, c = compare_values(a, b)
    assert floor is not None and abs(c.time_ratio - 1) <= 2 * floor
    assert not c.verdict.slower_at_all, c.sentence()


def test_the_h200_one_percent_step_is_a_small_real_change_and_its_a_a_is_same():
    # examples/verdicts/h200-abba: 200 vs 202 bf16 matmuls per block, 6 fresh processes a side, A B B A
    runs = ROOT / "examples/verdicts/h200-abba"

    def load(name):
        return [
            json.loads((runs / f"{name}-{s}.json").read_text())["results"][0]["process_medians"]
            for s in "ab"
        ]

    _, plus1 = compare_values(*load("step-plus1"))
    assert plus1.verdict is Verdict.SMALL_SLOWER and 1.0 < plus1.ci_low and plus1.time_ratio > 1.005
    _, plus0 = compare_values(*load("step-plus0"))
    assert plus0.verdict is Verdict.SAME
    _, canary = compare_values(*load("canary-aa"))
    assert canary.verdict is Verdict.SAME


def test_a_speed_up_is_said_first_and_its_change_is_not_called_a_cause():
    """The power-limit incident read backwards (the cap lifted): the verdict says faster, not 'most likely cause'."""
    from forensics.diff.files import analyse_files

    pair = ROOT / "examples" / "incidents" / "power-limit-capped"
    verdict = analyse_files(pair / "after.json", pair / "before.json").verdict
    assert verdict.startswith(
        "Measured 1.28x faster, no slowdown to explain; what changed: gpu.config"
    )
    assert "most likely cause" not in verdict
    assert analyse_files(pair / "before.json", pair / "after.json").verdict.startswith(
        "Measured 1.28x slower; most likely cause: gpu.config"
    )


def test_one_hypothesis_ruled_out_is_said_in_the_singular(tmp_path):
    """Two snapshots of the host probe alone (a real H200 reading): the one hypothesis it rules out read
    '1 hypotheses ruled out'."""
    doc = json.loads((ROOT / "examples" / "aa" / "before.json").read_text())
    doc["probes"] = {"host": doc["probes"]["host"]}
    doc["bench"] = None
    path = tmp_path / "host.json"
    path.write_text(json.dumps(doc))
    r = CliRunner().invoke(main, ["diff", str(path), str(path), "-q", "-o", str(tmp_path / "r.md")])
    assert r.exit_code == 0, r.output
    assert ": 1 hypothesis ruled out, " in r.output and "hypotheses ruled out" not in r.output


def test_a_step_giving_one_value_on_both_sides_is_not_said_within_the_noise(tmp_path):
    """Two real snapshots (NCCL_P2P_DISABLE added) whose user step gave 4 ms in every process on both sides
    (a step reporting a fixed figure): no noise to speak of. The verdict said 'The benchmarks measured no
    slowdown beyond the noise.' and the bench lines 'no benchmark result moved beyond the noise', 'no
    change beyond the noise (ratio 1.000, CI within +-1.0%)'."""
    case = ROOT / "tests" / "fixtures" / "cases" / "case20_p2p_disabled_env"
    for side in ("before", "after"):
        snap = json.loads((case / f"{side}.json").read_text())
        result = {**snap["bench"]["results"][0], "name": "user.step_ms", "kind": "user"}
        result.update(process_medians=[4.0] * 5, median=4.0)
        snap["bench"]["results"] = [result]
        (tmp_path / f"{side}.json").write_text(json.dumps(snap))
    r = CliRunner().invoke(
        main,
        [
            "diff",
            str(tmp_path / "before.json"),
            str(tmp_path / "after.json"),
            "-o",
            str(tmp_path / "r.md"),
        ],
    )
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "The benchmarks measured no slowdown (exact: each process gave one value)." in said
    assert (
        "no benchmark result moved: each process gave exactly the same value on both sides" in said
    )
    assert "user.step_ms (user): no change: each process gave the same value on both sides" in said
    assert "noise" not in said
