"""A partial cause (significantly faster, less than half of the slowdown) is tested again on top of the confirmed
causes and kept in the accounting, not left in "unexplained".

The step prints seeded timings (tests/_stepkit.busy_step) of ``cost.txt`` milliseconds plus 1.2 ms when ``CUDA_LAUNCH_BLOCKING=1``: the
two costs add, so each cause's share of the slowdown is the same whichever is taken out first.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests._stepkit import busy_step, run_investigate, take_baseline
from tests.conftest import commit, git, upstream_and_clone

STEP = busy_step(
    'float(open("cost.txt").read()) + (1.2 if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1" else 0.0)',
    "1.0",
)
CMD = f"{sys.executable} step.py"


@pytest.mark.slow
def test_a_partial_variable_is_retested_on_top_of_the_confirmed_commit(tmp_path):
    """Baseline 4 ms; a pulled commit (cost 4 -> 6.8 ms) and CUDA_LAUNCH_BLOCKING=1 (+1.2 ms): today 8 ms. Alone
    against today the variable recovers 1.2 / 4 = 30% (partial), the commit 2.8 / 4 = 70% (confirmed); on top of
    the commit taken out the variable recovers all of what was left, so it is a cause with its 30%."""
    up, user = upstream_and_clone(tmp_path, {"step.py": STEP, "cost.txt": "4\n"}, "serving: step")
    base = take_baseline(tmp_path / "before.json", user, CMD)
    slow = commit(up, {"cost.txt": "6.8\n"}, "step: logits in float32")
    git(user, "pull", "-q")
    out = tmp_path / "r.json"
    r = run_investigate(
        user,
        "--cmd",
        CMD,
        "--no-canary",
        "-q",
        "--budget",
        "20m",
        "--max-processes",
        "5",
        "--baseline",
        str(base),
        "-o",
        str(out),
        CUDA_LAUNCH_BLOCKING="1",
    )
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    by_id = {e["id"]: e for e in doc["experiments"]}
    alone = next(e for e in doc["experiments"] if e["kind"] == "environment")
    again = by_id[f"{alone['id']}-on-top"]
    code = next(e for e in doc["experiments"] if e["kind"] == "commit")
    # alone, against today: a partial cause of about 30%; the commit confirmed at about 70%
    assert alone["outcome"] == "partial" and 0.2 < alone["share"]["point"] < 0.4, r.stdout
    assert code["outcome"] == "confirmed" and 0.6 < code["share"]["point"] < 0.8, r.stdout
    # tested again with the commit taken out on both sides: all of what was left, 30% of the whole
    assert again["details"]["retest_of"] == alone["id"]
    assert again["details"]["on_top_of"] == [f"commit {slow[:10]} taken out"]
    assert again["outcome"] == "confirmed", r.stdout
    assert again["details"]["share_of_remaining"]["point"] > 0.7
    assert 0.2 < again["share"]["point"] < 0.4
    assert doc["confirmed"] == [code["id"], again["id"]]
    # what the user reads: both causes with their shares, what is left after both
    acc = doc["accounting"]
    assert acc.startswith(f"commit {slow[:7]}: ") and "; CUDA_LAUNCH_BLOCKING: " in acc, acc
    assert "partial" not in acc and doc["residual"]["status"] != "beyond", acc
    assert abs(doc["residual"]["unexplained"]["point"]) < 0.15, acc
    assert r.stdout.startswith(f"Confirmed by experiment, 2 causes: {acc}. Evidence: ")
    assert git(user, "status", "--porcelain") == ""


# --- the accounting, with the A/Bs' measurements given (no process runs) ----------------------------------------

# The busy step's processes in the end-to-end test's run: the baseline's (ms), and side A and side B of one of
# its A/Bs, each as factors of its median: the spread every sample below has.
BASE = [4.012, 4.061, 3.97, 4.015, 3.948]
NOISE_A = [x / 7.987 for x in (7.982, 8.236, 7.981, 7.987, 8.244)]
NOISE_B = [x / 6.765 for x in (6.792, 6.775, 6.751, 6.588, 6.765)]
# today's values of two variables and the milliseconds each adds to the step; 1.5 ms no experiment names
COSTS = {"CUDA_LAUNCH_BLOCKING": ("1", 3.6), "NCCL_ALGO": ("Tree", 0.9)}
OTHER = 1.5


def step_ms(env: dict) -> float:
    """The step with ``env`` applied over today's variables (None: unset): 4 ms, plus each variable left at
    today's value, plus :data:`OTHER`. Today 10 ms: the slowdown is 6 ms, CUDA_LAUNCH_BLOCKING 60% of it,
    NCCL_ALGO 15%, the rest 25%."""
    return 4.0 + OTHER + sum(c for k, (now, c) in COSTS.items() if env.get(k, now) == now)


def setup(monkeypatch, order: list[str], after_ab=None, model=step_ms):
    """An investigation whose plan restores the variables of ``order`` one by one, each A/B given by ``model``
    (:func:`step_ms`; ``after_ab(ctx, n)`` is called after the n-th A/B)."""
    from forensics.investigate import experiments
    from forensics.investigate.experiments import Context
    from forensics.investigate.measure import Subject
    from forensics.investigate.model import Experiment, Kind, Regression
    from forensics.investigate.run import Investigation, Settings

    calls = []

    def ab(subject, *, a_env=None, b_env=None, processes, **kw):
        calls.append((a_env, b_env))
        a = [model(a_env or {}) * f for f in NOISE_A[:processes]]
        b = [model(b_env or {}) * f for f in NOISE_B[:processes]]
        if after_ab:
            after_ab(ctx, len(calls))
        return a, b

    monkeypatch.setattr(experiments, "ab", ab)
    baseline = {"bench": {"results": [{"name": "user.step_ms", "process_medians": BASE}]}}
    subject = Subject("cmd", CMD, name="user.step_ms", process_s=0.1)
    today = [model({}) * f for f in NOISE_A]
    ctx = Context(baseline, {}, None, subject, True, processes=5, max_processes=5, today=today)
    plan = []
    for i, var in enumerate(order, 1):
        restore = {var: None if var == "CUDA_LAUNCH_BLOCKING" else "Ring"}
        e = Experiment(f"env-{i}", Kind.ENV, "nccl.env", f"restore {var}", subject="user.step_ms")
        e.params["restore"] = e.details["restore"] = restore
        plan.append(e)
    inv = Investigation(
        Settings(None), baseline, {}, None, subject, Regression.YES, "", experiments=plan
    )
    return inv, ctx, calls


def run_plan(inv, ctx):
    from forensics.investigate.run import _run_plan

    _run_plan(inv, ctx, lambda *a, **k: None, (KeyboardInterrupt,))
    return {e.id: e for e in inv.experiments}


def test_a_partial_cause_that_stays_partial_on_top_is_named_with_its_share(monkeypatch):
    """NCCL_ALGO alone: 0.9 of 6 ms, partial. CUDA_LAUNCH_BLOCKING: confirmed, 60%. NCCL_ALGO again with
    CUDA_LAUNCH_BLOCKING unset on both sides: 0.9 of the 2.4 ms left, still partial; kept, and the unexplained
    part is what is left after it (1.5 of 6 ms), from its A/B's side B."""
    from forensics.investigate.run import accounting

    inv, ctx, calls = setup(monkeypatch, ["NCCL_ALGO", "CUDA_LAUNCH_BLOCKING"])
    exps = run_plan(inv, ctx)
    assert [e.outcome.value for e in exps.values()] == ["partial", "confirmed", "partial"]
    again = exps["env-1-on-top"]
    assert calls[-1] == (
        {"CUDA_LAUNCH_BLOCKING": None},
        {"CUDA_LAUNCH_BLOCKING": None, "NCCL_ALGO": "Ring"},
    )
    assert again.details["on_top_of"] == ["CUDA_LAUNCH_BLOCKING unset"]
    assert again.details["retest_of"] == "env-1" and again.details["accounted"] == "partial"
    assert 0.3 < again.details["share_of_remaining"]["point"] < 0.45
    assert ctx.overlay == {"CUDA_LAUNCH_BLOCKING": None, "NCCL_ALGO": "Ring"}
    # never called confirmed without an A/B saying so
    assert [e.id for e in inv.confirmed] == ["env-2"]
    acc = accounting(inv)
    assert acc.startswith("CUDA_LAUNCH_BLOCKING: 60% ("), acc
    assert "; NCCL_ALGO: partial, 15% (" in acc and "; unexplained: 25% (" in acc, acc
    assert acc.index("NCCL_ALGO: partial") < acc.index("unexplained")
    assert acc.endswith("; stopped: no suspect left to test"), acc


def test_a_partial_cause_decided_on_top_of_every_kept_intervention_is_not_tested_again(monkeypatch):
    from forensics.investigate.run import accounting

    inv, ctx, calls = setup(monkeypatch, ["CUDA_LAUNCH_BLOCKING", "NCCL_ALGO"])
    exps = run_plan(inv, ctx)
    assert list(exps) == ["env-1", "env-2"] and len(calls) == 2
    on_top = exps["env-2"]
    assert on_top.outcome.value == "partial" and on_top.details["accounted"] == "partial"
    acc = accounting(inv)
    assert "; NCCL_ALGO: partial, 15% (" in acc and "; unexplained: 25% (" in acc, acc


def test_a_partial_cause_the_budget_leaves_no_time_to_test_again_is_said_so(monkeypatch):
    """The budget is spent once the confirmed cause is known: the partial cause is not re-tested, the report
    says so and why, and the unexplained part (which holds it) is the residual after the confirmed cause."""
    import time

    from forensics.investigate.run import accounting

    def spend(ctx, n):
        if n == 2:
            ctx.deadline = time.monotonic() + 0.5

    inv, ctx, calls = setup(monkeypatch, ["NCCL_ALGO", "CUDA_LAUNCH_BLOCKING"], spend)
    exps = run_plan(inv, ctx)
    again = exps["env-1-on-top"]
    assert len(calls) == 2 and again.outcome.value == "not-run" and again.a == []
    assert again.reason.startswith("budget spent: needs about 2 s, 0 s of the ")
    assert "raise --budget" in again.reason
    assert ctx.overlay == {"CUDA_LAUNCH_BLOCKING": None}
    acc = accounting(inv)
    assert acc.startswith("CUDA_LAUNCH_BLOCKING: 60% (") and "; unexplained: 40% (" in acc, acc
    assert (
        "; NCCL_ALGO (partial alone: 15% (" in acc
        and ") is in the unexplained part: not tested on top of the confirmed causes (the budget is "
        "spent: it needs about 2 s, 0 s left)"
        in acc
    ), acc
    assert acc.endswith("stopped: the budget is spent with part of the slowdown unexplained"), acc


def only_with_blocking(other: float):
    """A step where NCCL_ALGO=Tree costs 0.9 ms only while CUDA_LAUNCH_BLOCKING=1 is set (serialised launches
    expose the slower algorithm), and ``other`` ms no experiment names."""

    def model(env: dict) -> float:
        blocking = env.get("CUDA_LAUNCH_BLOCKING", "1") == "1"
        tree = env.get("NCCL_ALGO", "Tree") == "Tree"
        return 4.0 + other + (3.6 if blocking else 0.0) + (0.9 if blocking and tree else 0.0)

    return model


def test_a_partial_cause_that_does_nothing_on_top_is_refuted_there_and_not_kept(monkeypatch):
    """NCCL_ALGO costs only while CUDA_LAUNCH_BLOCKING is set: partial alone, nothing on top of the confirmed
    variable. Its A/B on top is refuted; nothing of it is kept, and the accounting gives both shares."""
    from forensics.investigate.run import accounting

    inv, ctx, calls = setup(
        monkeypatch, ["NCCL_ALGO", "CUDA_LAUNCH_BLOCKING"], model=only_with_blocking(1.5)
    )
    exps = run_plan(inv, ctx)
    assert [e.outcome.value for e in exps.values()] == ["partial", "confirmed", "refuted"]
    assert ctx.overlay == {"CUDA_LAUNCH_BLOCKING": None} and len(calls) == 3
    acc = accounting(inv)
    assert "NCCL_ALGO: partial" not in acc, acc
    assert "; unexplained: " in acc and "; NCCL_ALGO (partial alone: 15% (" in acc, acc
    assert "): refuted on top of the confirmed causes (0%" in acc, acc


def test_a_partial_cause_is_not_tested_again_when_nothing_is_left_beyond_noise(monkeypatch):
    from forensics.investigate.run import accounting

    inv, ctx, calls = setup(
        monkeypatch, ["NCCL_ALGO", "CUDA_LAUNCH_BLOCKING"], model=only_with_blocking(0.0)
    )
    exps = run_plan(inv, ctx)
    again = exps["env-1-on-top"]
    assert len(calls) == 2 and inv.residual.status == "within"
    assert again.outcome.value == "not-run" and again.reason.startswith(
        "not needed: env-2 confirmed and leave nothing beyond noise (today with the confirmed "
    )
    acc = accounting(inv)
    # its share alone was the confirmed variable's doing: it is not said to be in the unexplained part
    assert acc.endswith(
        ")): not tested on top of the confirmed causes (what the confirmed causes leave is within noise); "
        "stopped: the residual is within noise"
    ), acc


def test_a_partial_package_swap_is_tested_again_in_the_overlay_it_installed(monkeypatch, tmp_path):
    """Two upgraded packages: fakeslow adds 0.9 ms (partial alone), bigslow 3.6 ms (confirmed after it). The
    re-test of fakeslow runs on top of bigslow's overlay in the overlay fakeslow's first A/B installed: pip is not
    run again, and its estimate has no install time in it."""
    import os
    import subprocess as sp

    from forensics.investigate import experiments
    from forensics.investigate.experiments import Context
    from forensics.investigate.measure import Subject
    from forensics.investigate.model import Experiment, Kind, Regression
    from forensics.investigate.run import Investigation, Settings, accounting

    costs = {"fakeslow": 0.9, "bigslow": 3.6}
    installs = []

    def pip(argv, **kw):  # pip install --target DIR NAME==OLD: a marker for the model below
        target, spec = argv[argv.index("--target") + 1], argv[-1]
        installs.append(spec)
        (Path(target) / spec.split("==")[0]).write_text(spec)
        return sp.CompletedProcess(argv, 0, "", "")

    def model(
        env: dict,
    ) -> float:  # each package swapped back (its overlay on PYTHONPATH) saves its cost
        dirs = (env.get("PYTHONPATH") or "").split(os.pathsep)
        old = {n for n in costs for d in dirs if d and (Path(d) / n).exists()}
        return 4.0 + OTHER + sum(c for n, c in costs.items() if n not in old)

    monkeypatch.setattr(experiments.subprocess, "run", pip)
    monkeypatch.setattr(
        experiments,
        "ab",
        lambda subject, *, a_env=None, b_env=None, processes, **kw: (
            [model(a_env or {}) * f for f in NOISE_A[:processes]],
            [model(b_env or {}) * f for f in NOISE_B[:processes]],
        ),
    )
    baseline = {"bench": {"results": [{"name": "user.step_ms", "process_medians": BASE}]}}
    subject = Subject("cmd", CMD, name="user.step_ms", process_s=0.1)
    today = [model({}) * f for f in NOISE_A]
    ctx = Context(baseline, {}, None, subject, True, processes=5, today=today, wheelhouse=tmp_path)
    plan = []
    for i, name in enumerate(["fakeslow", "bigslow"], 1):
        e = Experiment(
            f"package-{i}", Kind.PACKAGE, "python.packages", f"{name} 1.0", subject=subject.name
        )
        e.params.update({"name": name, "old": "1.0"})
        e.details.update({"package": name, "baseline_version": "1.0", "today_version": "2.0"})
        plan.append(e)
    inv = Investigation(
        Settings(None), baseline, {}, None, subject, Regression.YES, "", experiments=plan
    )
    try:
        exps = run_plan(inv, ctx)
        again = exps["package-1-on-top"]
        assert [e.outcome.value for e in exps.values()] == ["partial", "confirmed", "partial"]
        assert installs == ["fakeslow==1.0", "bigslow==1.0"]  # not installed a second time
        assert again.params["overlay_dir"] == exps["package-1"].params["overlay_dir"]
        assert again.details["on_top_of"] == ["bigslow 1.0 instead of 2.0"]
        assert again.estimate_s == 2 * 5 * 0.1
        acc = accounting(inv)
        assert acc.startswith("bigslow: 60% (") and "; fakeslow: partial, 15% (" in acc, acc
    finally:
        for folder in ctx.cache.get("overlays", []):
            shutil.rmtree(folder, ignore_errors=True)


def test_two_variables_each_half_of_the_slowdown_are_confirmed_together(monkeypatch):
    """NCCL_ALGO and CUDA_LAUNCH_BLOCKING each cost 1 ms of a 2 ms slowdown, no commit among the causes: each
    A/B alone 'recovers 50% ... an interval that straddles 50%'. Kept together, the second one's residual could
    not be measured (its side B is today with only it unset, and there is no worktree of HEAD to measure today
    with both), so it was not kept and the report said 'Most likely, not confirmed'. It is tested again on top
    of the first, and both are kept."""
    from forensics.investigate.run import _verdict, accounting

    def model(env: dict) -> float:
        algo = env.get("NCCL_ALGO", "Tree") == "Tree"
        blocking = env.get("CUDA_LAUNCH_BLOCKING", "1") == "1"
        return 4.0 + (1.0 if algo else 0.0) + (1.0 if blocking else 0.0)

    inv, ctx, calls = setup(monkeypatch, ["NCCL_ALGO", "CUDA_LAUNCH_BLOCKING"], model=model)
    exps = run_plan(inv, ctx)
    assert [e.outcome.value for e in exps.values()] == ["inconclusive", "inconclusive", "confirmed"]
    again = exps["env-2-on-top"]
    assert again.details["on_top_of"] == ["NCCL_ALGO=Ring"] and len(calls) == 3
    assert calls[-1] == ({"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Ring", "CUDA_LAUNCH_BLOCKING": None})
    assert [e.id for e in exps.values() if e.details.get("accounted") == "together"] == [
        "env-1",
        "env-2-on-top",
    ]
    assert ctx.overlay == {"NCCL_ALGO": "Ring", "CUDA_LAUNCH_BLOCKING": None}
    assert inv.residual.status == "within"
    acc = accounting(inv)
    assert acc.startswith("NCCL_ALGO: 50% (") and acc.count("CUDA_LAUNCH_BLOCKING: 50% (") == 1, acc
    assert acc.endswith("; stopped: the residual is within noise"), acc
    inv.analysis = SimpleNamespace(top=None)
    assert _verdict(inv)[0].startswith(f"Confirmed by experiment, 2 causes together: {acc}. ")
