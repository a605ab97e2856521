"""Ctrl-C at a terminal while the nccl_env probe's workers start (the first half second of a snapshot).

The terminal sends SIGINT to the whole foreground process group: forensics and the children it shares that
group with. The probe's multiprocessing workers (spawn, forkserver, the resource tracker) are fresh Python
interpreters; one hit while it starts printed its own traceback, or "Fatal Python error: init_import_site",
under forensics' one line. The user sees forensics' line alone, exit 130, and nothing is left running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import processes_with_env

MARK = "FORENSICS_TEST_MARK"


def _started(pid: int, what: str) -> bool:
    """True once a process of ``pid``'s group (its own, as a terminal's foreground job) runs ``what``."""
    import psutil

    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return False
    for kid in kids:
        try:
            if os.getpgid(kid.pid) == pid and what in " ".join(kid.cmdline()):
                return True
        except (psutil.Error, OSError):
            continue
    return False


def _ctrl_c_when(tmp_path, args: list[str], what: str, after_s: float) -> tuple[int, str, str]:
    """Start ``forensics ARGS`` as a terminal starts a foreground job (a process group of its own), wait
    until a worker running ``what`` has started in that group, and ``after_s`` more (its interpreter is
    starting), then SIGINT the whole group. Returns (exit status, stdout + stderr, the processes' mark)."""
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != "FORENSICS_DEBUG"}
    env[MARK] = mark
    proc = subprocess.Popen(
        [sys.executable, "-m", "forensics", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while proc.poll() is None and not _started(proc.pid, what):
        assert time.monotonic() < deadline, f"no {what} worker started"
    time.sleep(after_s)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out + err, mark


# the moments: multiprocessing's spawn worker, or the forkserver, has been started, and its interpreter
# is starting (a few milliseconds later: the window in which one hit printed a traceback)
WORKERS = ["spawn_main", "forkserver import main"]
MOMENTS_S = (0.0, 0.005, 0.01, 0.02)


@pytest.mark.parametrize("worker", WORKERS)
def test_ctrl_c_while_the_env_workers_start_is_one_line_and_130(tmp_path, worker):
    for after_s in MOMENTS_S:
        out = tmp_path / "s.json"
        code, shown, mark = _ctrl_c_when(tmp_path, ["snapshot", "-o", out.name], worker, after_s)
        if code == 0:  # the snapshot was done before the signal came: nothing to judge then
            assert "wrote" in shown
            out.unlink()
            continue
        seen = (after_s, shown)
        assert "Traceback" not in shown and "Fatal Python error" not in shown, seen
        assert "KeyboardInterrupt" not in shown, seen
        assert code == 130, seen
        assert shown.strip().splitlines()[-1] == "forensics: error: interrupted", seen
        assert not out.exists()
        assert processes_with_env(MARK, mark) == [], ("a worker outlived forensics", after_s)


STEP = """import json
for _ in range(3):
    print(json.dumps({"metric": "step_ms", "value": 4.0}))
"""


def test_ctrl_c_while_investigate_takes_its_snapshot_is_its_one_line_and_130(tmp_path):
    """investigate takes the snapshot of now first: the same workers, the same moments; its own line says
    the report holds what was learned."""
    (tmp_path / "step.py").write_text(STEP)
    args = ["investigate", "--no-canary", "-q", "--cmd", "python step.py", "--expect", "4ms"]
    for after_s in MOMENTS_S:
        code, shown, mark = _ctrl_c_when(tmp_path, args, "forkserver import main", after_s)
        if code == 0:  # done before the signal came
            continue
        seen = (after_s, shown)
        assert "Traceback" not in shown and "Fatal Python error" not in shown, seen
        assert code == 130, seen
        assert shown.strip().splitlines()[-1].startswith("forensics: error: interrupted"), seen
        assert processes_with_env(MARK, mark) == [], ("a worker outlived forensics", after_s)


def test_ctrl_c_while_a_launcher_runs_stops_it_at_once(tmp_path):
    """forensics env --launcher CMD: the launcher runs in a session of its own, which the terminal's SIGINT
    does not reach, in a worker thread the command waited for: Ctrl-C exited only when the launcher
    ended (a torchrun waiting on its rendezvous: minutes, or --timeout's 120 s)."""
    import psutil

    hang = tmp_path / "launcher.py"
    hang.write_text("import time\ntime.sleep(600)\n")  # a launcher that never starts its ranks
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != "FORENSICS_DEBUG"}
    env[MARK] = mark
    proc = subprocess.Popen(
        [sys.executable, "-m", "forensics", "env", "--launcher", f"{sys.executable} {hang}"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )

    def launcher_runs() -> bool:
        for p in processes_with_env(MARK, mark):
            try:  # the launcher itself, not forensics (whose own command line names it too)
                if p.pid != proc.pid and p.cmdline()[1:2] == [str(hang)]:
                    return True
            except psutil.Error:
                continue
        return False

    deadline = time.monotonic() + 60
    while proc.poll() is None and not launcher_runs():
        assert time.monotonic() < deadline, "the launcher never started"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)  # it waited for the launcher: 600 s here
    except subprocess.TimeoutExpired:
        proc.kill()
        for p in processes_with_env(MARK, mark):
            p.kill()
        raise
    assert proc.returncode == 130, out + err
    assert err.strip().splitlines()[-1] == "forensics: error: interrupted"
    assert processes_with_env(MARK, mark) == [], "the launcher outlived forensics"


def test_a_probe_abandoned_at_exit_leaves_no_worker_folder_behind(tmp_path, monkeypatch):
    """The probe's three private folders (one for the workers' records of the raw variables) were removed
    only when the probe's thread returned: a daemon thread that Ctrl-C or --timeout left waiting is ended by
    the exit before that, and its folders stayed in the temp folder (80 in /tmp after a day of runs, a few
    holding a worker's record)."""
    from tests.conftest import run_cli

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    # what a probe thread abandoned at exit leaves: its folders made, never removed
    abandoned = (
        "import sys, threading\n"
        "from forensics.env import collect\n"
        "made = threading.Event()\n"
        "def probe():\n"
        "    dirs = [collect.private_dir() for _ in range(3)]\n"
        "    made.set()\n"
        "    threading.Event().wait()  # waits for workers that never answer\n"
        "threading.Thread(target=probe, daemon=True).start()\n"
        "made.wait()\n"
        "sys.exit(130)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", abandoned], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 130, proc.stderr
    assert sorted(p.name for p in temp.iterdir() if p.name.startswith("forensics-env-")) == []
    # and as a user meets it: the probe stopped by --timeout
    args = ["snapshot", "--probe", "nccl_env", "--timeout", "0.05", "-o", "s.json"]
    proc = run_cli(*args, cwd=tmp_path, env={"TMPDIR": str(temp)})
    assert proc.returncode in (0, 3), proc.stderr
    assert sorted(p.name for p in temp.iterdir() if p.name.startswith("forensics-env-")) == []
