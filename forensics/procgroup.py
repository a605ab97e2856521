"""Child processes in their own process group, stopped as a whole.

Steps, launchers and setups start grandchildren (ranks, shells, background
jobs). Killing only the direct child leaves those running and can keep a pipe
open forever. Everything here starts the child in a new session and, on a
timeout or an interrupt, signals the whole group: SIGTERM, a short grace, then
SIGKILL regardless.
"""

from __future__ import annotations

import os
import signal
import subprocess

GRACE_S = 2.0


def kill_group(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """Stop ``proc``'s whole process group (SIGTERM, ``grace_s``, SIGKILL) and reap ``proc``. Never raises."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except OSError:
        pass
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:  # members that ignored SIGTERM, or outlived the leader
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        pass


def run_group(args: list[str] | str, timeout_s: float, *, shell: bool = False, cwd=None,
              env: dict[str, str] | None = None) -> tuple[int | None, str, str]:
    """Run a command in its own session; on timeout or interrupt stop its whole group.

    Args:
        args: argv list, or a command string with ``shell=True``.
        timeout_s: wall-clock limit, seconds.

    Returns:
        (exit status, or ``None`` when it timed out; stdout; stderr), text.

    Raises:
        OSError: the command cannot be started (e.g. FileNotFoundError).
        KeyboardInterrupt: re-raised after the group was stopped.
    """
    proc = subprocess.Popen(args, shell=shell, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, errors="replace", start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        kill_group(proc)
        try:
            out, err = proc.communicate(timeout=5)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            out, err = "", ""
        return None, out or "", err or ""
    except BaseException:
        kill_group(proc)
        raise
