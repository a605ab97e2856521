"""Child processes in their own process group, stopped as a whole.

Steps, launchers and setups start grandchildren (ranks, shells, background
jobs). Killing only the direct child leaves those running and can keep a pipe
open forever. Everything here starts the child in a new session and, on a
timeout or an interrupt, signals the whole group: SIGTERM, a short grace, then
SIGKILL regardless.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

GRACE_S = 2.0
HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


_HOLD: dict = {"depth": 0, "pending": []}


def defer_signal(signum: int) -> bool:
    """For a Python-level signal handler: True (and the signal kept for later) while a
    :func:`signals_held` block runs; the handler then returns without acting."""
    if _HOLD["depth"]:
        _HOLD["pending"].append(signum)
        return True
    return False


@contextlib.contextmanager
def signals_held():
    """Hold Ctrl-C, SIGTERM and SIGHUP for the block; the first one that came is re-raised after it.

    Clean-up must not be cut half way by a second signal (a supervisor that
    signals twice, an impatient Ctrl-C): a rank left without its SIGKILL keeps
    its GPU memory. Two layers, because blocking alone is not enough: the
    calling thread blocks them (``pthread_sigmask``), and since another thread
    may still receive a process-directed signal, forensics' own handlers
    (:func:`forensics.cli.common.signals_raise`) ask :func:`defer_signal` first.
    """
    _HOLD["depth"] += 1
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS) if hasattr(signal, "pthread_sigmask") else None
    try:
        yield
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        _HOLD["depth"] -= 1
        if not _HOLD["depth"] and _HOLD["pending"]:
            signum = _HOLD["pending"][0]
            _HOLD["pending"].clear()
            signal.raise_signal(signum)  # now the handler acts (raises), after the clean-up


def kill_group(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """Stop ``proc``'s whole process group (SIGTERM, ``grace_s``, SIGKILL) and reap ``proc``. Never raises.

    Signals to forensics itself are held meanwhile (:func:`signals_held`).
    """
    with signals_held():
        _kill_group(proc, grace_s)


def _kill_group(proc: subprocess.Popen, grace_s: float) -> None:
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
