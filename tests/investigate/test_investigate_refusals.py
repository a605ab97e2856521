"""forensics investigate says what it cannot do before doing any work.

The snapshot taken now runs the canary in fresh processes (about 25 s on a CPU, minutes with the
recorded H200 configuration), so a refusal that comes after it costs the user that time. These
runs would take the canary's time (and leave reports behind) if the refusal came late; the
generous subprocess limits fail the test rather than hang when it does.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, run_cli

NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # NVML's count narrowed to none, also on a machine with GPUs
needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="the canary (and so these refusals) needs PyTorch",
)


def _baseline(tmp_path: Path) -> Path:
    """A real H200 snapshot with the canary embedded (five processes of 7.3-9.6 s)."""
    return Path(shutil.copy(EXAMPLES / "aa" / "before.json", tmp_path / "before.json"))


def test_without_baseline_step_or_gpu_it_says_so_before_any_snapshot(tmp_path):
    r = run_cli(
        "investigate", "-o", "r.json", "--snapshot-out", "now.json", cwd=tmp_path, env=NO_GPU
    )
    assert r.returncode == 3, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(
        "forensics: error: cannot judge this machine"
    )
    assert "no GPU is visible" in r.stderr and "--baseline" in r.stderr and "--cmd" in r.stderr
    assert r.stdout == ""
    assert (
        not (tmp_path / "r.json").exists() and not (tmp_path / "now.json").exists()
    )  # nothing was measured


@needs_torch
def test_a_budget_shorter_than_the_snapshots_canary_is_refused_before_any_work(tmp_path):
    base = _baseline(tmp_path)
    r = run_cli(
        "investigate",
        "--baseline",
        str(base),
        "--budget",
        "5s",
        "-o",
        "r.json",
        cwd=tmp_path,
        env=NO_GPU,
        timeout=240,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(
        "forensics: error: --budget 5s is shorter than"
    )
    # timed from the baseline's own canary processes, and the way out is named
    assert "5 fresh processes of at least 7.3 s each" in r.stderr and "--no-canary" in r.stderr
    assert not (tmp_path / "r.json").exists()


@needs_torch
def test_plan_prints_the_plan_without_running_the_canary(tmp_path):
    base = _baseline(tmp_path)
    # the recorded H200 canary (TP=2, hidden 4096, 16 layers) would run for many minutes on a CPU
    r = run_cli(
        "investigate",
        "--baseline",
        str(base),
        "--plan",
        "--budget",
        "5s",
        "-o",
        "p.json",
        cwd=tmp_path,
        env=NO_GPU,
        timeout=240,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "note: --plan: the canary was not run now" in r.stdout
    verdict = next(line for line in r.stdout.splitlines() if line.startswith("Plan: "))
    assert verdict.startswith(
        "Plan: not measured now (--plan runs no canary); if it did get slower: "
    )
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["plan_only"] and all(
        e["outcome"] in ("planned", "not-run") for e in doc["experiments"]
    )
    canary = next(x for x in doc["bench"]["results"] if x["name"] == "canary.verify_step_ms")
    assert canary["before"] and canary["after"] is None  # measured in the baseline only
    planned = [e for e in doc["experiments"] if e["outcome"] == "planned"]
    # estimated from the baseline's canary processes (7.3-9.6 s each), 5 a side (the first round), two sides
    assert planned and all(e["estimate_s"] >= 2 * 5 * 7.3 for e in planned)


@needs_torch
@pytest.mark.parametrize("plan", [False, True])
def test_a_step_with_nothing_remembered_and_no_gpu_names_since_and_expect(tmp_path, plan):
    """--cmd in a repository whose reflog holds no pull, on a machine without GPUs: nothing to compare the
    step with and no hardware to judge. It ran the CPU canary (about 20 s) to say 'Cannot judge this machine
    alone: no GPU seen; give --baseline', with a note 'the canary was not run'; --plan said the canary would
    run and the machine be judged against its GPUs."""
    from tests._stepkit import busy_step, run_investigate
    from tests.conftest import make_repo

    repo = make_repo(tmp_path / "repo", {"step.py": busy_step("2", "1")})
    args = ["--cmd", "python step.py", "-o", "r.json", "--snapshot-out", "now.json"]
    r = run_investigate(repo, *args, *(["--plan"] if plan else []), **NO_GPU)
    now = json.loads((repo / "now.json").read_text())
    if (now["probes"]["gpu"].get("data") or {}).get("gpus"):
        pytest.skip("this machine's gpu probe sees a GPU: the hardware is judged")
    assert r.returncode == (0 if plan else 3), r.stdout + r.stderr
    verdict = next(line for line in r.stdout.splitlines() if not line.startswith("note: "))
    assert verdict.startswith(
        "Plan: nothing to compare" if plan else "Cannot judge: nothing to compare"
    )
    assert "--since REV" in verdict and "--expect VALUE" in verdict and "no GPU" in verdict
    names = [x["name"] for x in now["bench"]["results"]]
    assert names == ["user.step_ms"]  # the canary was not run for nothing


@pytest.mark.parametrize(
    "outputs, expected",
    [
        (["-o", "before.json"], "-o before.json is the --baseline file"),
        (["--snapshot-out", "./before.json"], "--snapshot-out before.json is the --baseline file"),
        (
            ["-o", "r.json", "--snapshot-out", "r.json"],
            "--snapshot-out r.json is also a report's -o",
        ),
        (["--config", "hot.yaml", "--snapshot-out", "hot.yaml"], "is the --config file"),
    ],
)
def test_an_output_that_is_an_input_is_refused_before_any_work(tmp_path, outputs, expected):
    """investigate --baseline before.json -o before.json wrote the report over the user's baseline snapshot."""
    base = _baseline(tmp_path)
    (tmp_path / "hot.yaml").write_text("hot_paths: {kernels: ['csrc/']}\n")
    kept = {p.name: p.read_bytes() for p in (base, tmp_path / "hot.yaml")}
    r = run_cli(
        "investigate", "--baseline", str(base), "--plan", "--no-canary", *outputs, cwd=tmp_path
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("forensics: error: ")
    assert expected in r.stderr and "choose another name" in r.stderr
    assert {n: (tmp_path / n).read_bytes() for n in kept} == kept
    assert not (tmp_path / "r.json").exists()


def test_a_step_that_hangs_in_the_snapshot_taken_now_stops_when_the_budget_is_spent(tmp_path):
    """--budget 5s with a step that never returns ran the step for --timeout (300 s by default) before
    saying 'timed out after 300 s'; the budget covers the snapshot taken now."""
    import uuid

    from tests._stepkit import run_investigate
    from tests.conftest import processes_with_env

    step = tmp_path / "hang.py"
    step.write_text("import time\ntime.sleep(600)\n")
    mark = uuid.uuid4().hex
    try:
        r = run_investigate(
            tmp_path,
            *("--cmd", f"python {step}", "--budget", "5s", "--no-canary", "-o", "r.json"),
            timeout=120,  # the default --timeout of 300 s would fail the test here
            INV_TEST_MARK=mark,
        )
    finally:  # a failing run leaves the step in a process group of its own: not left sleeping
        for proc in processes_with_env("INV_TEST_MARK", mark):
            proc.kill()
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "step command timed out after" in r.stderr
    assert "the --budget 5s was spent measuring today's step (give a longer --budget)" in r.stderr


def test_since_in_a_repository_with_no_commit_says_so(tmp_path):
    """--since HEAD~1 where nothing is committed yet said 'no such commit in ...; give a sha, a tag, a branch
    or HEAD~3', none of which exists there."""
    from tests._stepkit import busy_step, run_investigate
    from tests.conftest import make_repo

    repo = make_repo(tmp_path / "repo")
    (repo / "step.py").write_text(busy_step("2", "1"))
    r = run_investigate(repo, "--cmd", "python step.py", "--since", "HEAD~1", "-o", "r.json")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr == (
        f"forensics: error: --since HEAD~1: the repository at {repo} has no commit yet, so no earlier "
        "code to measure; give --expect with the value you remember\n"
    )
    assert not (repo / "r.json").exists()


def test_a_step_program_that_is_not_there_is_refused_before_the_snapshot(tmp_path):
    """--cmd with a program not on PATH ran the probes and then the step, to say 'step command exited with
    status 127: ...; stderr: /bin/sh: 1: ...: not found'; snapshot --bench-cmd checks it first."""
    from tests._stepkit import run_investigate

    r = run_investigate(tmp_path, "--cmd", "no-such-step-xyz --fast", "-o", "r.json")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr == (
        "forensics: error: --cmd: 'no-such-step-xyz' not found on PATH; check the command before the "
        "benchmark runs\n"
    )
    assert r.stdout == "" and not (tmp_path / "r.json").exists()


def test_a_baseline_that_measured_with_nothing_measured_now_says_what_to_give(tmp_path):
    """A baseline with the canary and no canary now (--no-canary, or no PyTorch in this Python) and no
    --cmd: it said 'neither snapshot has a measurement on both sides (take the baseline with forensics
    snapshot --bench ...)', though the baseline had measured, and then 'rerun with more processes'."""
    base = _baseline(tmp_path)
    r = run_cli("investigate", "--baseline", str(base), "--no-canary", "-o", "r.json", cwd=tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr
    verdict = next(line for line in r.stdout.splitlines() if line.startswith("Could not tell"))
    assert verdict.startswith(
        "Could not tell whether it got slower: the baseline measured canary.verify_step_ms, "
    )
    assert verdict.endswith(
        ", and nothing was measured now: give your step with --cmd; the canary did not run now (the note "
        "says why); no experiment was run."
    )
    assert "take the baseline" not in r.stdout and "more processes" not in r.stdout


@needs_torch
def test_a_step_outside_any_repository_is_not_told_to_give_since(tmp_path):
    """Nothing remembered and no GPU, in a folder that is no git repository: --since cannot name anything
    there, and the verdict no longer offers it."""
    from tests._stepkit import busy_step, run_investigate

    (tmp_path / "step.py").write_text(busy_step("2", "1"))
    r = run_investigate(tmp_path, "--cmd", "python step.py", "-o", "r.json", **NO_GPU)
    if r.returncode != 3 or "no GPU to judge" not in r.stdout:
        pytest.skip("this machine has a GPU to judge, or a repository above the test's folder")
    verdict = next(line for line in r.stdout.splitlines() if line.startswith("Cannot judge"))
    assert verdict.endswith(
        "give --expect VALUE (the value you remember) or --baseline BEFORE.json."
    )
    assert "--since" not in verdict


def test_a_since_whose_step_fails_is_not_advised_as_the_fix(tmp_path):
    """The step at --since printed its metric under another name: the verdict said 'nothing to compare your
    step with (no baseline snapshot, none remembered) ...; give --since REV (the code to measure), ...' to a
    user who had given --since, and the note did not say which metric the old step printed."""
    from tests._stepkit import run_investigate
    from tests.conftest import commit, make_repo

    step = "import json\nprint(json.dumps({'metric': 'step_ms', 'value': 20.0}))\n"
    repo = make_repo(tmp_path / "r", {"step.py": step})
    commit(repo, {"step.py": step.replace("step_ms", "step_s").replace("20.0", "0.02")}, "seconds")
    r = run_investigate(
        repo, "--cmd", "python3 step.py", "--since", "HEAD~1", "-q", "-o", "r.json", **NO_GPU
    )
    assert r.returncode == 3, r.stdout + r.stderr
    assert (
        'no JSON line like {"metric": "step_s", "value": 19.3} (it printed metric \'step_ms\'): '
        "python3 step.py" in r.stdout
    )
    assert (
        "Cannot judge: the baseline --since HEAD~1 could not be measured (the notes say why) and there is "
        "no GPU to judge the hardware by (the gpu probe has no data); give a --since REV whose step runs, "
        "--expect VALUE (the value you remember) or --baseline BEFORE.json." in r.stdout
    ), r.stdout


def test_the_verdict_comes_before_the_notes(tmp_path):
    """The notes (the canary not run, nothing remembered, the packages installed lately: often several
    wrapped lines) came before the verdict, so the answer was the third line or later; the report gives the
    verdict first too."""
    from tests._stepkit import busy_step, run_investigate
    from tests.conftest import make_repo

    repo = make_repo(tmp_path / "repo", {"step.py": busy_step("2", "1")})
    r = run_investigate(
        repo, "--cmd", "python step.py", "-o", "r.json", "--expect", "2ms", **NO_GPU
    )
    assert r.returncode in (0, 1, 3), r.stdout + r.stderr
    lines = r.stdout.splitlines()
    doc = json.loads((repo / "r.json").read_text())
    assert doc["notes"]  # there is a note to come after it
    assert lines[0] == "baseline: --expect 2ms (the value you remember)"
    assert lines[1] == doc["verdict"]
    assert lines[2].startswith("note: ")


@pytest.mark.parametrize("since", ["HEAD", "main"])
def test_a_since_that_is_head_itself_in_a_clean_checkout_is_bad_input(tmp_path, since):
    """--since origin/main when the pull brought it all (it is HEAD): the verdict said 'nothing to compare
    your step with (no baseline snapshot, none remembered) ...; give --since REV' (with --plan), or that the
    baseline 'could not be measured (the notes say why)', exit 3."""
    from tests._stepkit import busy_step, run_investigate
    from tests.conftest import commit, git, make_repo

    repo = make_repo(tmp_path / "repo", {"step.py": busy_step("2", "1")})
    commit(repo, {"notes.txt": "x\n"}, "notes")
    head = git(repo, "rev-parse", "HEAD").strip()[:7]
    r = run_investigate(repo, "--cmd", "python step.py", "--since", since, "-o", "r.json", **NO_GPU)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip() == (
        f"forensics: error: --since {since} is HEAD itself ({head}) and the checkout has no uncommitted "
        "change: no code changed since it; give an older revision (e.g. HEAD~3), or leave it out and give "
        "--expect with the value you remember"
    )
    assert "Traceback" not in r.stderr and not (repo / "r.json").exists()


def test_a_remembered_baseline_whose_step_fails_is_not_called_none_remembered(tmp_path):
    """The HEAD before the pull was remembered and measured, and its step failed there: the verdict said
    'nothing to compare your step with (no baseline snapshot, none remembered)'."""
    from tests._stepkit import run_investigate
    from tests.conftest import commit, git, upstream_and_clone

    up, user = upstream_and_clone(tmp_path, {"step.py": "raise SystemExit(1)\n"}, "broken step")
    fixed = "import json\nprint(json.dumps({'metric': 'step_ms', 'value': 20.0}))\n"
    commit(up, {"step.py": fixed}, "the step runs")
    git(user, "pull", "-q")
    r = run_investigate(user, "--cmd", "python3 step.py", "-o", "r.json", **NO_GPU)
    assert r.returncode == 3, r.stdout + r.stderr
    verdict = r.stdout.splitlines()[0]
    assert verdict.startswith("Cannot judge: the baseline HEAD@{1} "), verdict
    assert (
        "could not be measured (the notes say why)" in verdict and "none remembered" not in verdict
    )
    assert any(
        line.startswith("note: the baseline HEAD@{1} ") and "could not be measured: " in line
        for line in r.stdout.splitlines()
    )


def test_no_experiment_planned_is_not_told_to_see_their_reasons(tmp_path):
    """The baseline snapshot was taken in a plain folder, today's in a repository: code.change is the top
    suspect (a repository only today), no experiment can be planned for it, and the verdict said 'no
    experiment could run (see each one's reason)' with no experiment to see."""
    from tests._stepkit import busy_step, run_investigate, take_baseline
    from tests.conftest import make_repo

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "step.py").write_text(busy_step("2", "1"))
    base = take_baseline(tmp_path / "before.json", plain, "python3 step.py", **NO_GPU)
    repo = make_repo(tmp_path / "repo", {"step.py": busy_step("2", "3")})
    r = run_investigate(
        repo,
        "--baseline",
        str(base),
        "--cmd",
        "python3 step.py",
        "--no-canary",
        "-o",
        "r.json",
        **NO_GPU,
    )
    doc = json.loads((repo / "r.json").read_text())
    assert doc["experiments"] == [], doc["experiments"]
    assert "see each one's reason" not in doc["verdict"], doc["verdict"]
    assert doc["verdict"].endswith("; no experiment could be planned for it."), doc["verdict"]
    assert doc["verdict"] in r.stdout
