"""Run a command the way a user runs it in a terminal: stdout and stderr on a pseudo-terminal.

``forensics snapshot`` prints its table only when it has somewhere to print it; with its
output captured by a pipe, rich (or any program that asks ``isatty``) takes the cheap path.
The benchmarks of the snapshot therefore run it with stdout and stderr on a pty of
:data:`COLUMNS` x :data:`LINES` characters, the parent reading (and keeping) what it printed,
so the table is really rendered, colours and box drawing included.

Shared by ``benchmarks/run.py``, ``snapshot_interleaved.py`` and ``snapshot_timeline.py``.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
import threading
import time

COLUMNS, LINES = 120, 40
"""Size of the pseudo-terminal (a common terminal window; the facts column wraps below ~100)."""


def run_in_pty(
    argv: list[str],
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    timeout_s: float = 120.0,
) -> tuple[int, bytes, float]:
    """Run ``argv`` with stdin, stdout and stderr on a new pty; return (exit code, output, wall seconds).

    The wall clock is ``time.perf_counter`` from just before the process is started to its exit
    (``Popen.wait``: when a shell would print its prompt again), the output drained as it comes by a
    thread (a full pty would block the program).
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
    run_env = dict(os.environ if env is None else env)
    run_env.setdefault("TERM", "xterm-256color")
    run_env.pop("COLUMNS", None)
    run_env.pop("LINES", None)
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every holder of the slave side has closed it
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=run_env, cwd=cwd, start_new_session=True
    )
    reader.start()
    try:
        rc = proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    wall = time.perf_counter() - t0
    os.close(slave)
    reader.join(
        5.0
    )  # helpers that outlive the command (multiprocessing's) may hold the pty a moment
    os.close(master)
    return rc, b"".join(chunks), wall
