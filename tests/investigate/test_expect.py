"""forensics investigate --expect with a step that prints the same value in every process (a step reporting a
fixed configured figure): the comparison with the remembered figure is exact, and nothing in the verdict,
the terminal or the reports asks for more processes or blames a spread that cannot apply.

The remembered figure is one value, not a side of processes: the embedded diff's benchmark table compares
today's processes with it as the verdict does (no rank test against one value, no 'too few processes').
"""

from __future__ import annotations

import json

import pytest

from tests._stepkit import run_investigate
from tests.conftest import commit, git, make_repo

STEP = """import json
for _ in range(3):
    print(json.dumps({"metric": "step_ms", "value": %s}))
"""

ADVICE = ("too few processes", "processes a side", "--processes", "spread", "noisy", "quieter")


@pytest.mark.parametrize(
    "value, code, verdict, diff_verdict",
    [
        (
            "6.0",
            3,
            "Slower, not explained: user.step_ms: 1.500x the value you remember (4 ms; each of the 5 "
            "processes now gave 6 ms); nothing that changed is known to this machine",
            "slower",
        ),
        (
            "4.0",
            0,
            "No regression: user.step_ms: 1.000x the value you remember (4 ms; each of the 5 processes now "
            "gave 4 ms); a slowdown of 5% or more is ruled out; no experiment was run.",
            "same",
        ),
    ],
)
def test_a_constant_step_against_the_value_you_remember_is_compared_exactly(
    tmp_path, value, code, verdict, diff_verdict
):
    (tmp_path / "step.py").write_text(STEP % value)
    r = run_investigate(
        tmp_path,
        "--no-canary",
        "-q",
        "--cmd",
        "python step.py",
        "--expect",
        "4ms",
        "-o",
        "r.json",
        "-o",
        "r.md",
        "-o",
        "r.html",
    )
    assert r.returncode == code, r.stdout + r.stderr
    shown = [ln for ln in r.stdout.splitlines() if not ln.startswith(("note:", "baseline:"))][0]
    assert shown.startswith(verdict), shown
    doc = json.loads((tmp_path / "r.json").read_text())
    (res,) = [x for x in doc["bench"]["results"] if x["name"] == "user.step_ms"]
    cmp = res["comparison"]
    assert cmp["verdict"] == diff_verdict and cmp["reasons"] == [], cmp
    assert cmp["p_value"] is None and "remembered" in cmp["test"], cmp
    assert cmp["ci95"] == [float(value) / 4, float(value) / 4]
    for name in ("r.md", "r.html"):
        text = (tmp_path / name).read_text()
        assert not [w for w in ADVICE if w in text], (name, [w for w in ADVICE if w in text])
        if value == "4.0":  # exactly the figure: the benchmark section has no noise to speak of
            assert "no benchmark result moved: each process gave exactly the same value" in text
            assert "beyond the noise" not in text, name
    assert not [w for w in ADVICE if w in r.stdout + r.stderr]


def test_a_figure_is_compared_by_the_ci_of_todays_median_alone():
    from forensics.stats import FIGURE_TEST, Verdict, compare_to_figure

    spread = compare_to_figure(4.0, [3.9, 4.1, 4.4, 3.8, 4.3])  # the CI reaches across 5%
    assert spread.verdict is Verdict.INCONCLUSIVE and spread.p_value is None
    assert spread.reasons == [
        f"the CI of today's median over the figure ({spread.ci_low:.3f}-{spread.ci_high:.3f}) reaches "
        "across the 5% threshold: more processes now would narrow it"
    ]
    slow = compare_to_figure(94.0, [50.0] * 5, higher_is_better=True)  # tok/s: half the throughput
    assert (
        slow.verdict is Verdict.SLOWER
        and abs(slow.time_ratio - 1.88) < 1e-12
        and slow.test == FIGURE_TEST
    )
    assert slow.sentence() == (
        "1.880x slower (95% CI 1.880-1.880 over today's 5 processes, against the figure you remember)"
    )
    # exactly the figure: no interval, no noise to speak of
    same = compare_to_figure(4.0, [4.0] * 5)
    exactly = "the same value: each of today's 5 processes gave the figure you remember"
    assert same.exact and same.sentence() == exactly
    near = compare_to_figure(4.0, [4.0, 4.02, 3.98, 4.01, 4.0])
    assert not near.exact and near.sentence().startswith("within 5% of it (ratio 1.000) (95% CI ")


def test_slower_than_remembered_with_every_experiment_refuted_still_says_what_was_measured(
    tmp_path,
):
    (tmp_path / "step.py").write_text(
        STEP % "6.0"
    )  # slower than remembered; the variable costs nothing
    r = run_investigate(
        tmp_path,
        "--no-canary",
        "-q",
        "--cmd",
        "python step.py",
        "--expect",
        "4ms",
        CUDA_LAUNCH_BLOCKING="1",
    )
    assert r.returncode == 3, r.stdout + r.stderr
    shown = [ln for ln in r.stdout.splitlines() if not ln.startswith(("note:", "baseline:"))][0]
    assert shown == (
        "Slower, not explained: user.step_ms: 1.500x the value you remember (4 ms; each of the 5 processes "
        "now gave 6 ms); no hypothesis implicated; experiments: env-1 refuted."
    ), r.stdout


def test_a_pull_that_changes_no_behaviour_is_checked_not_unknown(tmp_path):
    up = make_repo(tmp_path / "up", {"step.py": STEP % "6.0"}, "serving: step")
    user = tmp_path / "user"
    git(tmp_path, "clone", "-q", str(up), str(user))
    old = git(user, "rev-parse", "HEAD").strip()
    commit(up, {"README": "docs\n"}, "docs")
    commit(up, {"step.py": STEP % "6.0" + "# a comment\n"}, "step: comment")
    git(user, "pull", "-q")
    r = run_investigate(user, "--no-canary", "-q", "--cmd", "python step.py", "--expect", "4ms")
    assert r.returncode == 3, r.stdout + r.stderr
    shown = [ln for ln in r.stdout.splitlines() if not ln.startswith(("note:", "baseline:"))][0]
    assert "nothing that changed is known to this machine" not in shown, shown
    assert shown.startswith(
        "Slower, not explained: user.step_ms: 1.500x the value you remember (4 ms; each of the 5 processes "
        "now gave 6 ms); what changed was checked and does not explain it (code.change: "
    ), shown
    assert "no commit changes what the step runs (comments; documentation)" in shown
    assert (
        f"note: HEAD@{{1}} {old[:7]}, before the pull of " in r.stdout
        and ", measured now in a private worktree, gives 6 ms, as today (ratio 1.000): the slowdown "
        "against the value you remember is not in the commits since it"
        in r.stdout
    ), r.stdout


def test_a_step_timed_in_seconds_is_reported_in_seconds(tmp_path):
    """``step_s`` values are seconds: the experiments, the verdict and the report's table say s, not ms."""
    (tmp_path / "step.py").write_text(
        "import json, os\n"
        'v = 0.006 if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1" else 0.004\n'
        "for _ in range(3):\n"
        '    print(json.dumps({"metric": "step_s", "value": v}))\n'
    )
    r = run_investigate(
        tmp_path,
        "--no-canary",
        "-q",
        "--cmd",
        "python step.py",
        "--expect",
        "4ms",
        "-o",
        "r.md",
        CUDA_LAUNCH_BLOCKING="1",
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert (
        "brings the step from 0.006 s to 0.004 s: recovers 100% of the slowdown (95% CI 100% to 100%; "
        "baseline 0.004 s)" in r.stdout
    ), r.stdout
    md = (tmp_path / "r.md").read_text()
    assert "| `user.step_s` | user | 0.004 s | 0.006 s |" in md
    assert "0.006 ms" not in md + r.stdout and "0.004 ms" not in md + r.stdout


CLB_STEP = """import json, os
value = 6.0 if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1" else %s
for _ in range(3):
    print(json.dumps({"metric": "step_ms", "value": value}))
"""


@pytest.mark.parametrize(
    "without, stopped, residual",
    [
        (
            "4.0",
            "stopped: nothing is left of the slowdown",
            "residual: today with the confirmed interventions applied gives exactly the baseline's value "
            "(each of its 5 processes): nothing is left",
        ),
        (
            "4.1",
            "stopped: the residual is below the threshold",
            "residual: today with the confirmed interventions applied is 1.025x the baseline (exact: each "
            "of its 5 processes gave the same value): below the threshold",
        ),
    ],
)
def test_a_cause_that_gives_back_the_figure_exactly_leaves_no_noise_to_be_within(
    tmp_path, without, stopped, residual
):
    """A variable that costs 2 ms and a step giving one value in every process: unsetting it gives the
    figure remembered, exactly (or 2.5% above it, exactly). The accounting said 'unexplained: 0% (0% to 0%);
    stopped: the residual is within noise' and the residual '1.000x the baseline (95% CI 1.000-1.000, 5
    processes): within noise', where there is no noise."""
    (tmp_path / "step.py").write_text(CLB_STEP % without)
    r = run_investigate(
        tmp_path,
        "--no-canary",
        "--cmd",
        "python step.py",
        "--expect",
        "4ms",
        "-o",
        "r.md",
        CUDA_LAUNCH_BLOCKING="1",
    )
    assert r.returncode == 1, r.stdout + r.stderr
    shown = r.stdout + (tmp_path / "r.md").read_text()
    assert f"unexplained: {'0%' if without == '4.0' else '5%'}; {stopped}" in r.stdout, r.stdout
    assert residual in r.stdout, r.stdout
    assert "within noise" not in shown


def test_the_residual_says_noise_only_where_there_is_some():
    from forensics.investigate.decide import residual

    exact = residual([4.0], [6.0] * 5, [4.0] * 5, threshold=0.05)
    assert exact.status == "within" and exact.exact and exact.none_left
    assert exact.to_json()["exact"] is True
    noisy = residual([4.0], [6.0] * 5, [3.9, 4.0, 4.05, 4.0, 3.95], threshold=0.05)
    assert noisy.status == "within" and not noisy.exact
    assert noisy.sentence().endswith("5 processes): within noise")
