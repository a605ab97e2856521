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

import pytest

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


def test_a_step_that_logs_megabytes_keeps_its_metric_lines_and_a_bounded_tail(tmp_path):
    """The reader held all a step printed (a 300 MB log took ~900 MB); now the lines that may hold a
    measurement and the last 64 KiB of each stream. A line that never ends (300 KiB without a line end)
    is not held either, and the lines after it are read as before."""
    from forensics.errors import BadInputError
    from forensics.procgroup import LINE_MAX, TAIL_BYTES, run_group_bounded
    from forensics.step.command import metric_lines, run_command

    log = "".join(f"step {i}: loss {i / 7:.5f} lr 3e-4 tokens 4096\n" for i in range(60000))
    metric = ['{"metric": "step_ms", "value": %s}' % v for v in ("1.5", "2.5", "3.5")]
    stdout = (
        log
        + metric[0]
        + "\n10%\r55%\r100%\r\n"  # a progress bar's carriage returns
        + '{"metric": "step_ms", "value": 9.0, "pad": "%s"}\n' % ("x" * (300 * 1024))
        + log
        + metric[1]
        + "\n"
        + log
        + metric[2]  # the last line, without its end
    ).encode()
    stderr = (log + "Traceback...\nRuntimeError: out of memory\n").encode()
    assert len(stdout) > 3 * 2**20 and LINE_MAX < 300 * 1024
    (tmp_path / "out").write_bytes(stdout)
    (tmp_path / "err").write_bytes(stderr)
    step = "cat out; cat err >&2"
    code, out, err = run_group_bounded(step, 60, keep=metric_lines(), shell=True, cwd=tmp_path)
    assert code == 0 and out.kept == metric  # the 300 KiB line was dropped, not held to its end
    assert out.tail.encode() == stdout[-TAIL_BYTES:] and out.cut == len(stdout) - TAIL_BYTES
    assert err.kept == [] and err.cut == len(stderr) - TAIL_BYTES
    assert err.tail.endswith("RuntimeError: out of memory\n")
    assert run_command(step, cwd=str(tmp_path)).values == [1.5, 2.5, 3.5]
    with pytest.raises(BadInputError) as exc:
        run_command(step + "; exit 3", cwd=str(tmp_path))
    assert str(exc.value) == (
        f"step command exited with status 3: {step}; exit 3; stderr: RuntimeError: out of memory (its "
        f"last line; the {len(stderr) - TAIL_BYTES:,} bytes of stderr before its last 64 KiB were cut)"
    )
    # --metric-regex: the lines holding a match, each once; the rest is not kept
    pick = metric_lines(r"loss (\d+\.\d+).*?tokens (\d+)")
    assert pick("a\nstep 1: loss 0.5 lr 1 tokens 8 loss 0.4 tokens 9\nb\nloss 2.0 tokens 1") == [
        "step 1: loss 0.5 lr 1 tokens 8 loss 0.4 tokens 9",
        "loss 2.0 tokens 1",
    ]


def test_a_failed_steps_last_stderr_line_is_quoted_readable_and_short(tmp_path):
    """A step that dies writing a megabyte without a line end gave a 64 KiB "one-line" error that said
    "its last line", and one whose stderr held escape sequences or binary sent them to the terminal."""
    from forensics.errors import BadInputError
    from forensics.step.command import SHOWN_CHARS, run_command

    (tmp_path / "err").write_bytes(b"x" * 999_700 + b"y" * 300 + b"\x1b[2J\x00")
    with pytest.raises(BadInputError) as exc:
        run_command("cat err >&2; exit 3", cwd=str(tmp_path))
    msg = str(exc.value)
    assert msg == (
        "step command exited with status 3: cat err >&2; exit 3; stderr: ..."
        + "y" * (SHOWN_CHARS - 5)
        + "?[2J? (the end of its last line, longer than the tail kept; the 934,469 bytes of stderr "
        "before its last 64 KiB were cut)"
    )
    (tmp_path / "err").write_bytes(b"Traceback...\nRuntimeError: \x1b]0;owned\x07 out of memory\n")
    with pytest.raises(BadInputError) as exc:
        run_command("cat err >&2; exit 1", cwd=str(tmp_path))
    assert str(exc.value).endswith("; stderr: RuntimeError: ?]0;owned? out of memory")
    (tmp_path / "err").write_bytes(b"Traceback...\n" + b"z" * 400 + b"\n")
    with pytest.raises(BadInputError) as exc:
        run_command("cat err >&2; exit 1", cwd=str(tmp_path))
    assert str(exc.value).endswith(
        "; stderr: ..." + "z" * SHOWN_CHARS + " (the end of its last line, 400 characters)"
    )
