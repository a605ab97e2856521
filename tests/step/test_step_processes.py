"""The processes a step starts end with it; the step is done when its own process exits.

A leftover busy child would load the machine for the next fresh process, and a child that inherits
the step's stdout (a server, a logger) held the pipe open: the benchmark waited for it until the
step's timeout, then failed. Every process a test starts carries a unique variable, so leftovers are
found with psutil (zombies, already ended, are not counted).
"""

from __future__ import annotations

import json
import sys
import uuid

from forensics.procgroup import run_group
from tests.conftest import processes_with_env, run_cli

METRIC = """echo '{"metric": "step_ms", "value": 5.0}'"""


def _bench(tmp_path, step: str, mark: str, *extra: str, timeout: float = 240):
    (tmp_path / "step.sh").write_text(step)
    return run_cli(
        "bench",
        "-q",
        "--cmd",
        "sh step.sh",
        "--processes",
        "5",
        "-o",
        "b.json",
        *extra,
        cwd=tmp_path,
        env={"FORENSICS_TEST_MARK": mark},
        timeout=timeout,
    )


def test_children_of_a_step_that_exited_normally_are_stopped(tmp_path):
    mark = uuid.uuid4().hex
    # a busy background child in every process, its output elsewhere; and, in the first process
    # only (each costs the SIGTERM grace before SIGKILL), a second child that ignores SIGTERM
    step = (
        "sh -c 'while :; do :; done' >/dev/null 2>&1 &\n"
        "[ -e deaf-started ] || { touch deaf-started; "
        "sh -c \"trap '' TERM; sleep 300\" >/dev/null 2>&1 & }\n"
        f"{METRIC}\n{METRIC}\n{METRIC}\n"
    )
    r = _bench(tmp_path, step, mark)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(json.loads((tmp_path / "b.json").read_text())["results"][0]["process_medians"]) == 5
    assert (tmp_path / "deaf-started").exists()
    assert processes_with_env("FORENSICS_TEST_MARK", mark, "sh") == []
    assert processes_with_env("FORENSICS_TEST_MARK", mark, "sleep") == []


def test_a_child_holding_the_steps_stdout_does_not_hold_the_benchmark(tmp_path):
    mark = uuid.uuid4().hex
    # the background sleep inherits stdout: the pipe stays open for 300 s after the step exits;
    # waiting for it, each process ran into --timeout 60 and the benchmark failed
    step = f"sleep 300 &\n{METRIC}\n{METRIC}\n{METRIC}\n"
    r = _bench(tmp_path, step, mark, "--timeout", "60")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["results"][0]["process_medians"] == [5.0] * 5
    assert processes_with_env("FORENSICS_TEST_MARK", mark, "sleep") == []


def test_a_callable_steps_children_are_stopped_too(tmp_path):
    mark = uuid.uuid4().hex
    (tmp_path / "spawner.py").write_text(
        "import subprocess\n"
        "started = []\n"
        "def step():\n"
        "    if not started:  # one child per process, left running\n"
        "        started.append(subprocess.Popen(['sleep', '300'], stdout=subprocess.DEVNULL))\n"
        "    return sum(range(1000))\n"
    )
    r = run_cli(
        "bench",
        "-q",
        "--callable",
        "spawner:step",
        "--processes",
        "5",
        "--blocks",
        "3",
        "--block-ms",
        "1",
        "-o",
        "c.json",
        cwd=tmp_path,
        env={"FORENSICS_TEST_MARK": mark, "PYTHONPATH": str(tmp_path)},
        timeout=240,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert processes_with_env("FORENSICS_TEST_MARK", mark, "sleep") == []


def test_run_group_returns_what_the_command_wrote_and_its_status(tmp_path):
    mark = uuid.uuid4().hex
    code, out, err = run_group(
        "sleep 300 & printf 'a\\r\\nb'; echo oops >&2; exit 3",
        60,
        shell=True,
        env={"PATH": "/usr/bin:/bin", "FORENSICS_TEST_MARK": mark},
    )
    assert (code, out, err) == (3, "a\nb", "oops\n")  # universal newlines, as text mode gave
    assert processes_with_env("FORENSICS_TEST_MARK", mark, "sleep") == []
    code, out, _ = run_group([sys.executable, "-c", "print('x' * 300000)"], 60)
    assert code == 0 and out == "x" * 300000 + "\n"  # more than a pipe holds: read while it runs
    code, out, _ = run_group(
        "echo started; exec sleep 300",
        0.5,
        shell=True,
        env={"PATH": "/usr/bin:/bin", "FORENSICS_TEST_MARK": mark},
    )
    assert (code, out) == (None, "started\n")  # timed out: what it printed before is kept
    assert processes_with_env("FORENSICS_TEST_MARK", mark, "sleep") == []
