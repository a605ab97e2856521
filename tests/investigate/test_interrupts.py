"""forensics investigate stopped by the user (Ctrl-C, SIGTERM) while the snapshot taken now measures today's
step: the reports are still written and say what was measured, with the interrupted exit code (130 for
Ctrl-C, 128 + the signal's number otherwise), and the user's repository is left as it was.

The step counts its processes in a file outside the repository; the third one hangs, so the signal comes
while today's step is measured, after two processes printed their value (no sleeps decide when).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._stepkit import step_env
from tests.conftest import commit, git, make_repo, repo_state, upstream_and_clone

STEP = """import json, os, pathlib, time
log = pathlib.Path(os.environ["INV_TEST_LOG"])
n = len(log.read_text().splitlines()) if log.exists() else 0
with log.open("a") as f:
    f.write("started\\n")
if n >= 2:
    time.sleep(600)
for _ in range(3):
    print(json.dumps({"metric": "step_ms", "value": 6.0 + n / 10}))
"""


@pytest.mark.parametrize(
    "signum, code, name",
    [(signal.SIGINT, 130, "KeyboardInterrupt"), (signal.SIGTERM, 143, "signal 15")],
)
def test_a_signal_while_todays_step_is_measured_still_writes_the_report(
    tmp_path, signum, code, name
):
    user = make_repo(tmp_path / "user", {"step.py": STEP}, "serving: step")
    log = tmp_path / "processes.log"
    before = repo_state(user)
    p = subprocess.Popen(
        [sys.executable, "-m", "forensics", "investigate", "--no-canary", "-q"]
        + ["--cmd", f"{sys.executable} step.py", "--expect", "4ms"]
        + ["-o", str(tmp_path / "r.json"), "-o", str(tmp_path / "r.md")],
        cwd=user,
        env=step_env(INV_TEST_LOG=str(log)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            if log.exists() and len(log.read_text().splitlines()) >= 3:
                break  # the third process of today's step has started (and hangs)
            time.sleep(0.05)
        os.killpg(p.pid, signum)  # Ctrl-C at a terminal reaches the whole foreground group
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == code, out + err
    assert err.strip().splitlines()[-1] == (
        f"forensics: error: interrupted ({name}); the report holds what was learned"
    ), err
    first, verdict = [line for line in out.splitlines() if not line.startswith("note:")][:2]
    assert first == (  # the user's figure is the baseline, as the run not interrupted says
        "baseline: --expect 4ms (the value you remember), not compared (interrupted while the snapshot was "
        "taken now)"
    ), out
    assert verdict.startswith("Interrupted while today's step was measured"), out
    assert "2 processes measured" in verdict and "measured: 6, 6.1 ms)" in verdict, verdict
    assert "nothing was compared" in verdict and "nothing was changed" in verdict, verdict
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] == name
    assert doc["verdict"] == verdict
    assert doc["experiments"] == [] and doc["exit_code"] == 3
    md = (tmp_path / "r.md").read_text()
    assert verdict in md and first in md and "This machine alone" not in md
    assert repo_state(user) == before
    assert not Path(user, "forensics-investigate.html").exists()


def test_ctrl_c_while_the_canary_is_measured_for_the_hardware_checks_keeps_the_steps_values(
    tmp_path, monkeypatch
):
    """No baseline is remembered (no repository, no --expect) on a GPU machine: after today's step, the
    canary runs for the hardware checks. A Ctrl-C there (raised where the canary runs: this machine has no
    GPU to run it on) still gives the report, with the step's values and the interrupted exit code."""
    from forensics.investigate import hardware, run
    from forensics.render.investigate import to_json
    from forensics.step.spec import StepOptions

    (tmp_path / "step.py").write_text(
        "import json\nfor _ in range(3):\n"
        '    print(json.dumps({"metric": "step_ms", "value": 6.0}))\n'
    )

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(hardware, "gpus_seen", lambda now: True)
    monkeypatch.setattr(run, "_add_canary", ctrl_c)
    find_spec = (
        run.importlib.util.find_spec
    )  # torch "installed" for the canary's branch, whatever this Python has
    monkeypatch.setattr(
        run.importlib.util,
        "find_spec",
        lambda name, *a: object() if name == "torch" else find_spec(name, *a),
    )
    settings = run.Settings.from_options(
        StepOptions(cmd=f"{sys.executable} step.py", processes=5), baseline=None
    )
    inv = run.investigate(settings)
    assert inv.exit_status == 130 and inv.interrupted == "KeyboardInterrupt"
    doc = to_json(inv)
    assert doc["verdict"] == (
        "Interrupted while the canary was measured for the hardware checks (no baseline is remembered to "
        "compare your step with; your step: 5 processes measured: 6, 6, 6, 6, 6 ms): nothing was compared "
        "and nothing was changed (no experiment ran; your checkout is untouched)."
    )
    assert doc["baseline_source"] == (
        "baseline: none remembered (this machine against its hardware, not judged: interrupted)"
    )
    assert doc["hardware"] == [] and doc["experiments"] == []


@pytest.mark.parametrize("where", ["comparison", "plan"])
def test_ctrl_c_while_the_snapshots_are_compared_or_the_plan_is_made_keeps_what_was_measured(
    tmp_path, monkeypatch, where
):
    """Reading the commits of a long pull takes a while: a Ctrl-C while the snapshot taken now is compared
    with the baseline (the value remembered here), or while the experiments are planned, still gives the
    report with what was measured, and exit 130 (raised where that work runs)."""
    from forensics.diff import files
    from forensics.investigate import run
    from forensics.render.investigate import to_json
    from forensics.step.spec import StepOptions

    (tmp_path / "step.py").write_text(
        "import json\nfor _ in range(3):\n"
        '    print(json.dumps({"metric": "step_ms", "value": 6.0}))\n'
    )

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    if where == "comparison":
        monkeypatch.setattr(files, "analyse_files", ctrl_c)
    else:
        monkeypatch.setattr(run, "build_plan", ctrl_c)
    settings = run.Settings.from_options(
        StepOptions(cmd=f"{sys.executable} step.py", processes=5),
        baseline=None,
        canary=False,
        expect="4ms",
    )
    inv = run.investigate(settings)
    assert inv.exit_status == 130 and inv.interrupted == "KeyboardInterrupt"
    doc = to_json(inv)
    assert doc["baseline_source"] == "baseline: --expect 4ms (the value you remember)"
    assert doc["experiments"] == []
    assert doc["verdict"] == (
        "Interrupted while the snapshot taken now was compared with the baseline (5 processes measured: 6, "
        "6, 6, 6, 6 ms): nothing was compared and nothing was changed (no experiment ran; your checkout is "
        "untouched)."
        if where == "comparison"
        else "Interrupted while the experiments were planned: user.step_ms: 1.500x the value you remember "
        "(4 ms; each of the 5 processes now gave 6 ms); nothing was changed (no experiment ran; your "
        "checkout is untouched)."
    )


HANG = """import os, pathlib, time
pathlib.Path(os.environ["INV_TEST_LOG"]).write_text("started\\n")
time.sleep(600)
"""
TODAY = """import json
for _ in range(3):
    print(json.dumps({"metric": "step_ms", "value": 6.0}))
"""


def test_ctrl_c_while_the_commit_before_the_pull_is_measured_names_the_figure_you_remember(
    tmp_path,
):
    """With --expect and a pull, the commit before the pull is measured in a private worktree for the code
    suspects; the baseline is the figure. Found by a hostile-user pass: a Ctrl-C there gave the first line
    'baseline: HEAD@{1} ..., interrupted while measured' and the verdict 'the baseline this machine remembers'."""
    up, user = upstream_and_clone(tmp_path, {"step.py": HANG}, "serving: step")
    old = git(user, "rev-parse", "HEAD").strip()
    commit(up, {"step.py": TODAY}, "step: no hang")
    git(user, "pull", "-q")
    log = tmp_path / "old-commit.log"  # written by the commit before the pull only, in its worktree
    before = repo_state(user)
    p = subprocess.Popen(
        [sys.executable, "-m", "forensics", "investigate", "--no-canary", "-q"]
        + ["--cmd", f"{sys.executable} step.py", "--expect", "4ms", "--snapshot-processes", "3"]
        + ["-o", str(tmp_path / "r.json"), "-o", str(tmp_path / "r.md")],
        cwd=user,
        env=step_env(INV_TEST_LOG=str(log)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None and not log.exists():
            time.sleep(0.05)
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, out + err
    assert err.strip().splitlines()[-1] == (
        "forensics: error: interrupted (KeyboardInterrupt); the report holds what was learned"
    ), err
    first, verdict = [line for line in out.splitlines() if not line.startswith("note:")][:2]
    assert first.startswith(
        "baseline: --expect 4ms (the value you remember), not compared (interrupted while "
        f"HEAD@{{1}} {old[:7]}, before the pull of "
    ), first
    assert first.endswith(" was measured in a private worktree for the code suspects)"), first
    assert verdict == (
        "Interrupted while the commit this machine remembers was being measured in a private worktree for "
        "the code suspects (the baseline is --expect 4ms, the value you remember): nothing was compared (the "
        "worktree was removed; your checkout is untouched)."
    ), out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["baseline_source"] == first and doc["verdict"] == verdict
    assert doc["interrupted"] == "KeyboardInterrupt"
    assert first in (tmp_path / "r.md").read_text()
    assert repo_state(user) == before
