"""Every kind of experiment runs on top of the causes already confirmed (issue 25), so that the accounting
"cause 1: x%, cause 2: y%, unexplained: z%" holds whatever kinds of causes are combined.

The step prints seeded timings (tests/_stepkit.busy_step) of ``fakeslow.COST`` milliseconds (a package imported from a ``pip --target``
folder on PYTHONPATH; the wheels are built offline), 1.6x longer when ``CUDA_LAUNCH_BLOCKING=1``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests._stepkit import (
    busy_step,
    pip_target,
    run_investigate,
    take_baseline,
    tree_hash,
    wheel,
)
from tests.conftest import EXAMPLES, commit, git, upstream_and_clone

STEP = busy_step(
    '__import__("fakeslow").COST',
    '1.6 if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1" else 1.0',
)
CMD = f"{sys.executable} step.py"


@pytest.fixture
def upgraded(tmp_path):
    """(work folder, wheelhouse, site, baseline snapshot): the baseline measured with fakeslow 1.0 (4 ms), then
    fakeslow upgraded to 2.0 (6 ms) in the site folder the step imports it from."""
    wheels, site, work = tmp_path / "wheels", tmp_path / "site", tmp_path / "work"
    for d in (wheels, site, work):
        d.mkdir()
    old, new = wheel(wheels, "1.0", 4), wheel(wheels, "2.0", 6)
    (work / "step.py").write_text(STEP)
    pip_target(site, old)
    base = take_baseline(tmp_path / "before.json", work, CMD, PYTHONPATH=str(site))
    pip_target(site, new, upgrade=True)
    return work, wheels, site, base


def investigate(cwd, *args: str, **env: str) -> subprocess.CompletedProcess:
    return run_investigate(
        cwd,
        "--cmd",
        CMD,
        "--no-canary",
        "-q",
        "--budget",
        "20m",
        "--max-processes",
        "5",
        *args,
        **env,
    )


@pytest.mark.slow
def test_a_package_is_swapped_back_on_top_of_a_confirmed_variable(upgraded, tmp_path):
    """A variable left set (x1.6) and an upgraded package (4 -> 6 ms): today 9.6 ms, baseline 4 ms. The variable
    explains (9.6 - 6) / 5.6 = 64%, the package (6 - 4) / 5.6 = 36% when it is swapped back with the variable
    unset on both sides (with the variable still set it would seem to recover (9.6 - 6.4) / 5.6 = 57%)."""
    work, wheels, site, base = upgraded
    before = tree_hash(site)
    r = investigate(
        work,
        "--baseline",
        str(base),
        "--wheelhouse",
        str(wheels),
        "-o",
        str(tmp_path / "r.json"),
        PYTHONPATH=str(site),
        CUDA_LAUNCH_BLOCKING="1",
    )
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    conf = {e["kind"]: e for e in doc["experiments"] if e["outcome"] == "confirmed"}
    assert set(conf) == {"environment", "package"}, r.stdout
    env, pkg = conf["environment"], conf["package"]
    assert pkg["details"]["on_top_of"] == ["CUDA_LAUNCH_BLOCKING unset"]
    assert "of what was left after CUDA_LAUNCH_BLOCKING unset" in pkg["sentence"]
    assert pkg["details"]["share_of_remaining"]["point"] > 0.7
    assert 0.5 < env["share"]["point"] < 0.8 and 0.2 < pkg["share"]["point"] < 0.5
    # the residual was measured with both interventions applied: within noise, and the shares add up
    assert doc["residual"]["status"] != "beyond"
    total = env["share"]["point"] + pkg["share"]["point"] + doc["residual"]["unexplained"]["point"]
    assert abs(total - 1) < 0.15, doc["accounting"]
    assert (
        doc["accounting"].startswith("CUDA_LAUNCH_BLOCKING: ") and "fakeslow: " in doc["accounting"]
    )
    assert tree_hash(site) == before  # the user's packages are not touched


@pytest.mark.slow
def test_a_package_and_a_commit_each_on_top_of_the_other(tmp_path):
    """An upgraded package (4 -> 6 ms) and a pulled commit that multiplies the step by 1.5: today 9 ms, baseline
    4 ms. Whichever the ledger tests first recovers 9 -> 6 ms (60%); the second one, on top of it, 6 -> 4 ms
    (40%, all of what was left): a commit against its parent with the old package first on PYTHONPATH on both
    sides, or the package swapped back in a worktree of HEAD with the commit taken out."""
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    for d in (wheels, site):
        d.mkdir()
    old, new = wheel(wheels, "1.0", 4), wheel(wheels, "2.0", 6)
    step = STEP.replace("factor = ", 'factor = float(open("mult.txt").read()) * ')
    up, user = upstream_and_clone(tmp_path, {"step.py": step, "mult.txt": "1\n"}, "step")
    pip_target(site, old)
    base = take_baseline(tmp_path / "before.json", user, CMD, PYTHONPATH=str(site))
    pip_target(site, new, upgrade=True)
    slow = commit(up, {"mult.txt": "1.5\n"}, "step: recompute the scores")
    git(user, "pull", "-q")
    r = investigate(
        user,
        "--baseline",
        str(base),
        "--wheelhouse",
        str(wheels),
        "-o",
        str(tmp_path / "r.json"),
        PYTHONPATH=str(site),
    )
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    conf = [e for e in doc["experiments"] if e["outcome"] == "confirmed"]
    assert [e["kind"] for e in conf] in (["package", "commit"], ["commit", "package"]), r.stdout
    first, second = conf
    assert "on_top_of" not in first["details"] and 0.45 < first["share"]["point"] < 0.75
    assert second["details"]["on_top_of"] == (
        ["fakeslow 1.0 instead of 2.0"]
        if first["kind"] == "package"
        else [f"commit {slow[:10]} taken out"]
    )
    assert (
        0.25 < second["share"]["point"] < 0.55
        and second["details"]["share_of_remaining"]["point"] > 0.7
    )
    total = (
        first["share"]["point"] + second["share"]["point"] + doc["residual"]["unexplained"]["point"]
    )
    assert doc["residual"]["status"] != "beyond" and abs(total - 1) < 0.15, doc["accounting"]
    assert (
        git(user, "status", "--porcelain") == "" and git(user, "worktree", "list").count("\n") == 1
    )


# --- the sides, without running a step ------------------------------------------------------------------


def _effective(over: dict) -> dict:
    """This process's environment with ``over`` applied as a canary process gets it (None unsets)."""
    env = dict(os.environ)
    for k, v in over.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def test_the_canarys_a_side_runs_with_the_confirmed_interventions(monkeypatch):
    """Without --cmd the A/Bs measure the canary; side A ran in this process's environment, so a variable
    confirmed and unset was still set on side A, and the next A/B measured both causes at once."""
    from forensics.bench import session
    from forensics.investigate.measure import CANARY_RESULT, Subject, ab

    seen = {}

    def run_canary(cfg, *, processes, budget_s, env=None, b_env=None, on_process=None, **kw):
        seen["a"], seen["b"] = _effective(env or {}), _effective({**(env or {}), **b_env})
        return [
            {"results": [{"name": CANARY_RESULT, "process_medians": [v] * processes}]}
            for v in (6.2, 3.9)
        ]

    monkeypatch.setattr(session, "run_canary", run_canary)
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    monkeypatch.setenv("NCCL_ALGO", "Tree")
    monkeypatch.setenv("NCCL_PROTO", "LL")
    a, b = ab(
        Subject("canary"),
        a_env={"CUDA_LAUNCH_BLOCKING": None, "NCCL_PROTO": "Simple"},
        b_env={"CUDA_LAUNCH_BLOCKING": None, "NCCL_ALGO": "Ring"},
        processes=5,
        budget_s=60,
    )
    assert a == [6.2] * 5 and b == [3.9] * 5
    names = ("CUDA_LAUNCH_BLOCKING", "NCCL_ALGO", "NCCL_PROTO")
    # as for the user's step, side B is exactly b_env over this process's environment
    assert [seen["a"].get(k) for k in names] == [None, "Tree", "Simple"]
    assert [seen["b"].get(k) for k in names] == [None, "Ring", "LL"]


def test_a_kept_package_overlay_is_first_on_every_later_sides_pythonpath(monkeypatch, tmp_path):
    from forensics.investigate.experiments import Context, _spec
    from forensics.investigate.measure import Subject

    monkeypatch.setenv("PYTHONPATH", "site")
    ctx = Context({}, {}, None, Subject("cmd", CMD), True, overlay={"CUDA_LAUNCH_BLOCKING": None})
    ctx.packages["fakeslow"] = {"old": "1.0", "today": "2.0", "dir": "overlay"}
    join = os.pathsep.join
    # a variable or package A/B in the checkout, and one in a worktree with a commit taken out
    assert ctx.side_env() == {"CUDA_LAUNCH_BLOCKING": None, "PYTHONPATH": join(["overlay", "site"])}
    assert ctx.side_env(["tree", "new"])["PYTHONPATH"] == join(["tree", "new", "overlay", "site"])
    # a commit against its parent, a bisect, a residual: the worktree first, then the overlay
    env = _spec(ctx).environment(tmp_path, "0" * 40, "")
    assert env["PYTHONPATH"] == join([str(tmp_path), "overlay", "site"])
    assert "CUDA_LAUNCH_BLOCKING" not in env
    # what was measured without the swap is not reused as a measurement with it
    ctx.remember("head", [6.0] * 5, {"CUDA_LAUNCH_BLOCKING": None})
    assert ctx.seed("head") == [] and ctx.state()["package:fakeslow"] == "1.0"


def test_the_canarys_residual_is_accounted_against_the_baselines_canary():
    """Without --cmd: a variable, then a package swapped back on top of it; after each, today with every
    confirmed intervention applied (the A/B's own side B) against the baseline's canary processes."""
    from forensics.investigate.experiments import Context
    from forensics.investigate.measure import CANARY_RESULT, Subject
    from forensics.investigate.model import Experiment, Kind, Outcome, Regression
    from forensics.investigate.run import Investigation, Settings, _account, accounting

    before = json.loads((EXAMPLES / "aa" / "before.json").read_text())
    base = next(
        r["process_medians"] for r in before["bench"]["results"] if r["name"] == CANARY_RESULT
    )
    today = [x * 1.6 for x in base]
    subject = Subject("canary", name=CANARY_RESULT)
    ctx = Context(before, {}, None, subject, False, today=today)
    inv = Investigation(Settings(None), before, {}, None, subject, Regression.YES, "")
    env = Experiment("env-1", Kind.ENV, "nccl.env", "unset", outcome=Outcome.CONFIRMED)
    env.params["restore"] = {"CUDA_LAUNCH_BLOCKING": None}
    env.a, env.b = today, [x * 1.2 for x in base]
    _account(inv, ctx, env, lambda *a, **k: None)
    assert inv.residual.status == "beyond" and 0.3 < inv.residual.unexplained.point < 0.4
    pkg = Experiment("package-1", Kind.PACKAGE, "torch.version", "swap", outcome=Outcome.CONFIRMED)
    pkg.params.update({"name": "torch", "old": "2.4.1", "overlay_dir": "overlay"})
    pkg.details["today_version"] = "2.5.0"
    pkg.details["on_top_of"] = ["CUDA_LAUNCH_BLOCKING unset"]  # as run.py's _execute records it
    pkg.a, pkg.b = env.b, list(base)
    _account(inv, ctx, pkg, lambda *a, **k: None)
    assert (
        ctx.overlay == {"CUDA_LAUNCH_BLOCKING": None} and ctx.packages["torch"]["dir"] == "overlay"
    )
    assert inv.residual.status == "within" and abs(inv.residual.unexplained.point) < 0.01
    inv.experiments = [env, pkg]
    assert "unexplained: 0%" in accounting(inv)


TWO_STEP = busy_step('float(open("cost.txt").read())', 'float(open("mult.txt").read())')


@pytest.mark.slow
@pytest.mark.parametrize(
    "first, second, suspect_outcome",
    [
        # +1 ms, then x1.4 (today 7 ms): the suspect (x1.4) recovers 67%, the rest is in the earlier commits
        (
            (("cost.txt", "5\n"), "step: bigger block"),
            (("mult.txt", "1.4\n"), "step: fp32 logits"),
            "confirmed",
        ),
        # x2, then +1 ms (today 10 ms): the suspect (+1 ms, 2 ms on top of x2) recovers 33%, a partial cause;
        # on top of x2 taken out it recovers 1 ms (17%), and x2 when it landed 4 ms (67%): 84% with the rest
        (
            (("mult.txt", "2.0\n"), "step: fp32 logits"),
            (("cost.txt", "5\n"), "step: bigger block"),
            "partial",
        ),
    ],
    ids=["suspect-confirmed", "suspect-partial"],
)
def test_two_slow_commits_in_one_pull_are_both_found_and_accounted(
    tmp_path, first, second, suspect_outcome
):
    """A pull of 5 commits, two of them slow (4 ms -> 7 or 10 ms). The suspect commit was tested, then the bisect was
    'not needed: commit-1 confirmed the suspect commit', and the report ended 'commit X: 67%; unexplained:
    33%; stopped: no suspect left to test'; or, the suspect partial, the bisect of the whole range named it
    again. Now the bisect searches the part of the range without the suspect that holds the rest, and a
    partial commit is tested again on top of the commit confirmed after it (both taken out of HEAD)."""
    up, user = upstream_and_clone(
        tmp_path, {"step.py": TWO_STEP, "cost.txt": "4\n", "mult.txt": "1.0\n"}, "serving: step"
    )
    shas = {}
    for i, ((path, text), message) in enumerate([first, second]):
        commit(up, {f"docs/{i}.md": "notes\n"}, f"docs: notes {i}")
        shas[message] = commit(up, {path: text}, message)
    commit(up, {"docs/end.md": "notes\n"}, "docs: end")
    git(user, "pull", "-q")
    r = run_investigate(
        user, "--cmd", CMD, "--no-canary", "-q", "--budget", "20m", "-o", str(tmp_path / "r.json")
    )
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    by_id = {e["id"]: e for e in doc["experiments"]}
    suspect, bis = by_id["commit-1"], by_id["bisect-1"]
    assert suspect["outcome"] == suspect_outcome, suspect["reason"]
    # the bisect searched the range without the suspect, and named the other slow commit
    other = next(sha for sha in shas.values() if sha != suspect["details"]["commit"])
    assert bis["outcome"] == "confirmed" and bis["details"]["bisect"]["culprit"]["sha"] == other
    assert (
        "the part of the range without them that holds the most of the rest is bisected"
        in bis["details"]["segment"]
    )
    acc = doc["accounting"]
    for sha in shas.values():
        assert f"commit {sha[:7]}: " in acc, acc
    assert doc["residual"]["status"] == "within" and acc.endswith("the residual is within noise")
    if suspect_outcome == "confirmed":  # 67% + 37%: nothing compounds, nothing is said
        assert "the causes compound" not in acc, acc
    # the baseline first (and notes), then the verdict leading with both causes
    lines = [ln for ln in r.stdout.splitlines() if not ln.startswith("note: ")]
    assert lines[0].startswith("baseline: HEAD@{1} "), r.stdout
    assert lines[1].startswith(f"Confirmed by experiment, 2 causes: {acc}. Evidence: "), r.stdout
    if (
        suspect_outcome == "partial"
    ):  # tested again with the confirmed commit taken out of HEAD on both sides
        again = by_id["commit-1-on-top"]
        assert again["outcome"] == "confirmed", again["reason"]
        assert again["a_label"] == f"today with commit {other[:10]} taken out"
        assert 0.1 < again["share"]["point"] < 0.25  # 1 ms of the 6 ms slowdown
        # measured with x2 taken out, +1 ms is 1 ms; today it costs 2 ms: the two compound, which is said
        assert re.search(r"; the shares add up to [78]\d%: the causes compound \(", acc), acc


THREE_STEP = busy_step(
    'float(open("cost.txt").read()) * float(open("mult.txt").read())',
    "1.0",
    'extra = float(open("extra.txt").read())',
).replace("cost * factor * proc", "(cost * factor + extra) * proc")


@pytest.mark.slow
@pytest.mark.parametrize(
    "changes",
    [
        # +1 ms and +1 ms (4 -> 6 ms): each 50%, "an interval that straddles 50%"
        [
            ("cost.txt", "5\n", "step: bigger block"),
            ("extra.txt", "1\n", "step: sync after verify"),
        ],
        # +1 ms, x1.5, +1.5 ms (4 -> 9 ms): 20%, 50% and 30%, none above 50% alone
        [
            ("cost.txt", "5\n", "step: bigger block"),
            ("mult.txt", "1.5\n", "step: fp32 logits"),
            ("extra.txt", "1.5\n", "step: sync after verify"),
        ],
    ],
    ids=["two-halves", "three-parts"],
)
def test_slow_commits_none_of_which_explains_it_alone_are_confirmed_together(tmp_path, changes):
    """Two commits of 1 ms each in a 2 ms slowdown each 'recovers 50% (95% CI 50% to 50%) ... an interval that
    straddles 50%', and three of 20%, 50% and 30% are each partial at best: the report ended 'Most likely, not
    confirmed ... experiments: commit-1 inconclusive; bisect-1 inconclusive' (exit 3), the third commit never
    tested. Now each part of the range without the commits found is bisected while the shares found add up to
    less than 90%, and the commits are taken out of HEAD together: today without them is the baseline."""
    up, user = upstream_and_clone(
        tmp_path,
        {"step.py": THREE_STEP, "cost.txt": "4\n", "mult.txt": "1.0\n", "extra.txt": "0\n"},
        "serving: step",
    )
    shas = []
    for i, (path, text, message) in enumerate(changes):
        commit(up, {f"docs/{i}.md": "notes\n"}, f"docs: notes {i}")
        shas.append(commit(up, {path: text}, message))
    commit(up, {"docs/end.md": "notes\n"}, "docs: end")
    git(user, "pull", "-q")
    r = run_investigate(
        user,
        "--cmd",
        CMD,
        "--no-canary",
        "-q",
        "--budget",
        "20m",
        "-o",
        str(tmp_path / "r.json"),
        "-o",
        str(tmp_path / "r.md"),
    )
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["confirmed"] == []  # none alone
    together = [e for e in doc["experiments"] if e["details"].get("accounted") == "together"]
    named = [
        e["details"]["commit"]
        if e["kind"] == "commit"
        else e["details"]["bisect"]["culprit"]["sha"]
        for e in together
    ]
    assert sorted(named) == sorted(shas), r.stdout
    assert all(e["comparison"]["verdict"] == "faster" for e in together)
    acc = doc["accounting"]
    assert doc["residual"]["status"] == "within" and acc.endswith("the residual is within noise")
    verdict = next(
        ln for ln in r.stdout.splitlines() if not ln.startswith(("baseline: ", "note: "))
    )
    assert verdict.startswith(
        f"Confirmed by experiment, {len(shas)} causes together: {acc}. Evidence: "
    ), verdict
    assert verdict.count("significantly faster: one of the causes together") == len(shas)
    bisects = [e for e in doc["experiments"] if e["kind"] == "bisect"]
    assert (
        len(bisects) == len(shas) - 1
    )  # after the suspect commit, one bisect for each commit left
    # the report's table marks each of them, beside its own A/B's outcome
    md = (tmp_path / "r.md").read_text()
    assert md.count("(one of the causes together) |") == len(shas), md
