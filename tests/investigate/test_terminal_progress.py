"""What a person sees on a terminal while and after ``forensics investigate`` runs.

The command runs under a pseudo-terminal (its progress line only shows on one); the bytes it
writes are played on a small 80-column screen model (carriage return, line feed, erase line,
cursor up, auto-wrap), and the test reads the screen the user is left with.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

STEP = r"""
import json, os, time
for _ in range(3):
    t0 = time.process_time()
    ms = 4.0 * (2.0 if os.environ.get("PYTORCH_TEST_SLOW") else 1.0)
    while (time.process_time() - t0) * 1e3 < ms:
        pass
    print(json.dumps({"metric": "step_ms", "value": (time.process_time() - t0) * 1e3}))
"""
BASELINE = r"""
import sys
from forensics import snapshot as snap
from forensics.collect import take_snapshot
from forensics.investigate.measure import Subject, measure_now
step = Subject("cmd", sys.argv[2])
doc = take_snapshot(label="baseline", bench=lambda: measure_now(step, canary=False, canary_options={},
                                                                 processes=5, budget_s=60)[0])
snap.save(doc, sys.argv[1])
"""
COLUMNS = 80
_TOKEN = re.compile(r"\x1b\[([?0-9;]*)([A-Za-z])|\x1b\][^\x07]*\x07|\r|\n|\x08|[^\x1b\r\n\x08]")


def screen(data: str, width: int = COLUMNS) -> list[str]:
    """The lines a terminal of ``width`` columns shows after receiving ``data``."""
    rows: list[list[str]] = [[]]
    r = c = 0
    for m in _TOKEN.finditer(data):
        tok = m.group(0)
        if m.group(2):
            arg, op = m.group(1), m.group(2)
            n = int(arg) if arg.isdigit() else None
            if op == "K":  # erase in line: 2 whole line, 0 (default) to its end
                rows[r] = [] if n == 2 else rows[r][:c]
            elif op == "A":
                r = max(0, r - (n or 1))
            elif op == "B":
                r += n or 1
            elif op == "G":
                c = (n or 1) - 1
            continue  # colours (m), cursor show/hide (?25h/l)
        if tok.startswith("\x1b]"):
            continue
        if tok == "\r":
            c = 0
        elif tok == "\n":
            r, c = r + 1, 0
        elif tok == "\x08":
            c = max(0, c - 1)
        else:
            if c >= width:  # auto-wrap
                r, c = r + 1, 0
            while len(rows) <= r:
                rows.append([])
            line = rows[r]
            line.extend(" " * (c - len(line)))
            if c < len(line):
                line[c] = tok
            else:
                line.append(tok)
            c += 1
        while len(rows) <= r:
            rows.append([])
    return ["".join(x).rstrip() for x in rows]


def on_terminal(
    args: list[str], cwd: Path, env: dict[str, str], limit_s: float = 300
) -> tuple[int, str]:
    """Run ``args`` with stdout and stderr on one pseudo-terminal of COLUMNS x 24; (exit code, bytes as text)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, COLUMNS, 0, 0))
    proc = subprocess.Popen(
        args, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, close_fds=True
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + limit_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the other side closed: the process is gone
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        else:
            raise AssertionError(f"{args} still running after {limit_s} s")
        return proc.wait(timeout=30), out.decode("utf-8", "replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def test_screen_model_plays_erase_and_cursor_up():
    # what rich's live display sends: a line, redrawn in place, then erased when it stops
    assert screen("progress 1\r\x1b[2Kprogress 2\r\n\x1b[1A\x1b[2Kresult\r\n") == ["result", ""]
    assert screen("x" * 85) == ["x" * 80, "x" * 5]


def test_investigate_results_are_not_printed_onto_the_progress_line(tmp_path):
    (tmp_path / "step.py").write_text(STEP)
    cmd = f"{sys.executable} step.py"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTORCH_TEST_SLOW", "FORENSICS_DEBUG", "COLUMNS", "LINES")
    }
    env["TERM"] = "xterm"
    subprocess.run(
        [sys.executable, "-c", BASELINE, "before.json", cmd],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    env["PYTORCH_TEST_SLOW"] = (
        "1"  # twice the CPU time per step: measured slower, one experiment runs
    )
    code, raw = on_terminal(
        [
            sys.executable,
            "-m",
            "forensics",
            "investigate",
            "--baseline",
            "before.json",
            "--cmd",
            cmd,
            "--no-canary",
            "--budget",
            "5m",
            "-o",
            "r.json",
        ],
        tmp_path,
        env,
    )
    shown = screen(raw)
    text = "\n".join(shown)
    assert code in (1, 3), text
    # the experiment's line, printed while the progress line showed, starts a line of its own
    done = [line for line in shown if line.startswith("env-1 ")]
    assert done and re.match(r"env-1 (confirmed|refuted|inconclusive|partial): ", done[0]), text
    # and no progress text is left anywhere on the screen
    assert not any(
        "of the budget left" in line or "s of th…" in line or line.startswith("[1/1]")
        for line in shown
    ), text
    assert any(line.startswith(("Confirmed by experiment", "Most likely")) for line in shown), text
