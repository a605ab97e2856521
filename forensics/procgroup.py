"""Child processes in their own process group, stopped as a whole.

Steps, launchers and setups start grandchildren (ranks, shells, background
jobs). Killing only the direct child leaves those running and can keep a pipe
open forever. Everything here starts the child in a new session and, on a
timeout or an interrupt, signals the whole group: SIGTERM, a short grace, then
SIGKILL regardless. :func:`run_group` also ends what is left of the group when
the command exits normally, and does not wait for pipes a leftover holds open.
:func:`run_group_bounded` does the same and keeps, of what the command printed, only
the lines asked for and the last :data:`TAIL_BYTES` of each stream: a step that logs
hundreds of MB is read as it writes, not held in memory.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Callable

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


def _reraise(signum: int) -> None:
    """Deliver a deferred signal to the main thread, where Python runs its handler.

    ``signal.raise_signal`` sends it to the calling thread: from a worker thread (a probe's, a start
    method's) the main thread, blocked in a ``join`` on another worker, was not woken, and Ctrl-C during
    ``forensics env --launcher`` waited for the launcher to end (600 s in its test, 1 run in 6 under load).
    ``pthread_kill`` to the main thread interrupts that wait; the same as ``raise_signal`` when called from
    the main thread, and its fallback where ``pthread_kill`` is missing.
    """
    if hasattr(signal, "pthread_kill"):
        signal.pthread_kill(threading.main_thread().ident, signum)
    else:
        signal.raise_signal(signum)


@contextlib.contextmanager
def signals_deferred():
    """Defer forensics' own handling of Ctrl-C, SIGTERM and SIGHUP to the end of the block, without
    blocking them (:func:`signals_held` blocks them, and a child started meanwhile would inherit the
    blocked mask and ignore its own SIGTERM).

    For starting a child and recording it as one step: a signal in between would leave the child
    running, unknown to the clean-up.
    """
    _HOLD["depth"] += 1
    try:
        yield
    finally:
        _HOLD["depth"] -= 1
        if not _HOLD["depth"] and _HOLD["pending"]:
            signum = _HOLD["pending"][0]
            _HOLD["pending"].clear()
            _reraise(signum)


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
    old = (
        signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
        if hasattr(signal, "pthread_sigmask")
        else None
    )
    try:
        yield
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        _HOLD["depth"] -= 1
        if not _HOLD["depth"] and _HOLD["pending"]:
            signum = _HOLD["pending"][0]
            _HOLD["pending"].clear()
            _reraise(signum)  # now the handler acts (raises), after the clean-up


@contextlib.contextmanager
def terminal_signals_blocked():
    """Block Ctrl-C (SIGINT) in the calling thread for the block, for starting a child that cannot be
    given a session of its own (``multiprocessing``'s spawn and forkserver start theirs without a
    ``start_new_session``).

    A child shares forensics' process group, so the terminal's Ctrl-C reaches it too; a Python child
    hit while its interpreter starts prints a traceback or "Fatal Python error: init_import_site"
    under forensics' one-line message. A child started in the block inherits the blocked signal
    (``fork`` and ``exec`` keep the mask) and keeps it for its life: the terminal's Ctrl-C stays
    pending there and forensics stops the child itself (SIGTERM, which stays unblocked:
    :func:`end_helpers`). Only the calling thread's mask changes; forensics' main thread still gets
    Ctrl-C. A no-op without ``pthread_sigmask``.
    """
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


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


DRAIN_S = 1.0
"""Seconds :func:`run_group` goes on reading a command's output after the command exited and its group
was stopped: what the command wrote is already in the pipe; only a process that left the group
(``setsid``) can still hold the pipe open, and it is not waited for."""


def run_group(
    args: list[str] | str,
    timeout_s: float,
    *,
    shell: bool = False,
    cwd=None,
    env: dict[str, str] | None = None,
) -> tuple[int | None, str, str]:
    """Run a command in its own session until it exits; then stop what it left in its group.

    The command is done when its own process exits, not when its output pipes close: a
    server or a logger it started in the background inherits stdout and would hold the pipe
    open. When the command exits (normally or not), every process still in its process group
    (background jobs, children of a step) gets SIGTERM, up to :data:`GRACE_S` to end, then
    SIGKILL, so that none outlives it or loads the machine for the next command; output is
    read for up to :data:`DRAIN_S` more. On timeout or interrupt the whole group is stopped
    the same way. Everything the command printed is kept (:func:`run_group_bounded` keeps a
    bounded part).

    Args:
        args: argv list, or a command string with ``shell=True``.
        timeout_s: wall-clock limit, seconds.

    Returns:
        (exit status, or ``None`` when it timed out; stdout; stderr), text (the locale's
        encoding, undecodable bytes replaced, universal newlines).

    Raises:
        OSError: the command cannot be started (e.g. FileNotFoundError).
        KeyboardInterrupt: re-raised after the group was stopped.
    """
    out, err = _Everything(), _Everything()
    code = _run(args, timeout_s, out, err, shell=shell, cwd=cwd, env=env)
    return code, out.text(), err.text()


TAIL_BYTES = 64 * 1024
"""Bytes of each stream :func:`run_group_bounded` keeps from the end of what the command printed."""

LINE_MAX = 64 * 1024
"""A line still unended after this many bytes is not offered to ``keep`` (no measurement is that long, and the
line would be held until its end); it still reaches the tail. One read is at most 64 KiB, so a line ended
within the read that began it may be offered up to twice this long."""


@dataclass
class Stream:
    """What :func:`run_group_bounded` kept of one output stream of a command.

    Attributes:
        kept: the pieces ``keep`` picked, in the order printed (stdout only; empty without ``keep``).
        tail: the last :data:`TAIL_BYTES` of everything the stream carried, decoded as :func:`run_group`
            decodes (it may start inside a line).
        cut: bytes printed before the tail and not kept in it (0 when the tail is the whole output).
    """

    kept: list[str] = field(default_factory=list)
    tail: str = ""
    cut: int = 0


def run_group_bounded(
    args: list[str] | str,
    timeout_s: float,
    *,
    keep: Callable[[str], list[str]] | None = None,
    tail_bytes: int = TAIL_BYTES,
    shell: bool = False,
    cwd=None,
    env: dict[str, str] | None = None,
) -> tuple[int | None, Stream, Stream]:
    """:func:`run_group`, keeping a bounded part of the output: memory stays near ``tail_bytes`` per stream
    plus what ``keep`` picks, however much the command prints.

    Args:
        keep: given a block of whole lines of stdout as they come (text, ``\\n`` line ends, no partial
            line; a line unended past :data:`LINE_MAX` is dropped), returns the pieces to keep, e.g. the
            lines that hold a measurement. A piece that spans a block's end is not seen whole.
        tail_bytes: bytes kept from the end of each stream.

    Returns:
        (exit status, or ``None`` when it timed out; stdout; stderr), each a :class:`Stream`.

    Raises:
        OSError: the command cannot be started (e.g. FileNotFoundError).
        KeyboardInterrupt: re-raised after the group was stopped.
    """
    out, err = _Bounded(tail_bytes, keep), _Bounded(tail_bytes)
    code = _run(args, timeout_s, out, err, shell=shell, cwd=cwd, env=env)
    return code, out.stream(), err.stream()


def _run(args, timeout_s: float, out, err, *, shell: bool, cwd, env) -> int | None:
    """The body of :func:`run_group`: what the command writes goes to the sinks ``out`` and ``err``."""
    import time

    proc = None
    try:
        with signals_deferred():  # a signal right after the fork must still find ``proc`` to stop
            proc = subprocess.Popen(
                args,
                shell=shell,
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        reader = _Reader(proc, out, err)
        try:
            exited = reader.until_exit(time.monotonic() + timeout_s)
            if not exited:
                kill_group(proc)
            else:
                proc.wait()  # reap the leader; the group's id stays taken while members remain
                with signals_held():
                    _end_group(proc.pid, GRACE_S)
            reader.drain(time.monotonic() + DRAIN_S)
        finally:
            reader.close()
        return proc.returncode if exited else None
    except BaseException:
        if proc is not None:
            kill_group(proc)
        raise


def _decode(raw: bytes) -> str:
    """Bytes a child wrote, decoded as ``Popen(text=True, errors="replace")`` does (universal newlines)."""
    import locale

    text = raw.decode(locale.getpreferredencoding(False), errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


class _Everything:
    """A sink that keeps every byte of a stream."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def add(self, data: bytes) -> None:
        self.chunks.append(data)

    def text(self) -> str:
        return _decode(b"".join(self.chunks))


class _Bounded:
    """A sink that keeps the last ``tail_bytes`` of a stream and what ``keep`` picks from its whole lines."""

    def __init__(self, tail_bytes: int, keep: Callable[[str], list[str]] | None = None) -> None:
        self.tail_bytes, self.keep = tail_bytes, keep
        self.tail = bytearray()
        self.cut = 0
        self.kept: list[str] = []
        self.line = bytearray()  # the line begun and not yet ended
        self.skip = False  # inside a line over LINE_MAX: not offered to keep, up to its end

    def add(self, data: bytes) -> None:
        self.tail += data
        if len(self.tail) > 2 * self.tail_bytes:  # trimmed now and then, not on every read
            self._trim()
        if self.keep is not None:
            self._lines(data)

    def _trim(self) -> None:
        over = len(self.tail) - self.tail_bytes
        if over > 0:
            del self.tail[:over]
            self.cut += over

    def _lines(self, data: bytes) -> None:
        end = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if end < 0:  # no line ends in it: the line goes on
            if not self.skip:
                self.line += data
                if len(self.line) > LINE_MAX:
                    self.line.clear()
                    self.skip = True
            return
        done, rest = data[: end + 1], data[end + 1 :]
        if self.skip:  # up to the first line end: the rest of the overlong line, dropped
            done = done[min(i for i in (done.find(b"\n"), done.find(b"\r")) if i >= 0) + 1 :]
            self.skip = False
        block = bytes(self.line) + done
        self.line = bytearray()
        self._offer(block)
        if rest:
            self._lines(rest)

    def _offer(self, block: bytes) -> None:
        if not block:
            return
        self.kept.extend(self.keep(_decode(block)))

    def stream(self) -> Stream:
        if self.keep is not None and self.line and not self.skip:
            self._offer(bytes(self.line))  # the last line, printed without its end
        self._trim()
        return Stream(self.kept, _decode(bytes(self.tail)), self.cut)


def _end_group(pgid: int, grace_s: float) -> None:
    """SIGTERM to the members left in group ``pgid`` (its leader already reaped), up to ``grace_s`` for
    them to end, SIGKILL to those still there. Returns at once when the group is empty."""
    import time

    try:
        os.killpg(pgid, signal.SIGTERM)
    except OSError:  # ESRCH: nothing was left (the common case)
        return
    deadline = time.monotonic() + grace_s
    pause = 0.002
    while time.monotonic() < deadline:
        if not _group_alive(pgid):
            return
        time.sleep(pause)
        pause = min(0.05, pause * 2)
    _signal_group(pgid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    """True while a process of group ``pgid`` runs, zombies not counted (``/proc/<pid>/stat``: state and
    process group), else ``killpg(pgid, 0)``. A member that ended is a zombie until its new parent reaps
    it, and a container's init may be slow to: ``killpg`` alone would wait out the grace for nothing."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        pids = None
    if pids is None:
        try:
            os.killpg(pgid, 0)
            return True
        except OSError:
            return False
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[-1].split()
        except OSError:  # gone meanwhile
            continue
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] != b"Z":
            return True
    return False


class _Reader:
    """Reads a child's stdout and stderr into two sinks (``add(bytes)``) without waiting for the pipes to close,
    and tells when the child exits.

    The child's exit is seen through a pidfd (``os.pidfd_open``, Linux 5.3) in the same
    ``select`` as the pipes; without one, by polling ``waitid(WNOWAIT)`` every 50 ms. The
    leader is not reaped here, so its process-group id cannot be reused meanwhile.
    """

    def __init__(self, proc: subprocess.Popen, out, err):
        import selectors

        self.proc = proc
        self.sel = selectors.DefaultSelector()
        self.sinks = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}  # by file descriptor
        for pipe in (proc.stdout, proc.stderr):
            os.set_blocking(pipe.fileno(), False)
            self.sel.register(pipe, selectors.EVENT_READ)
        self.pidfd = None
        try:
            self.pidfd = os.pidfd_open(proc.pid)
            self.sel.register(self.pidfd, selectors.EVENT_READ)
        except (AttributeError, OSError):  # an older kernel or Python: poll
            self.pidfd = None

    def _exited(self) -> bool:
        try:
            return (
                os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            )
        except ChildProcessError:  # reaped already (by someone else)
            return True

    def _pipes_open(self) -> bool:
        return any(key.fileobj is not self.pidfd for key in self.sel.get_map().values())

    def _read(self, timeout: float) -> bool:
        """Read what is ready within ``timeout`` s; True when the child's pidfd said it exited."""
        exited = False
        for key, _ in self.sel.select(max(0.0, timeout)):
            if key.fileobj is self.pidfd:
                exited = True
                continue
            try:
                data = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                self.sinks[key.fd].add(data)
            else:
                self.sel.unregister(key.fileobj)
        return exited

    def until_exit(self, deadline: float) -> bool:
        """Read until the child exits (True) or ``deadline`` (monotonic) passes (False)."""
        import time

        while True:
            left = deadline - time.monotonic()
            if self._exited():
                return True
            if left <= 0:
                return False
            if self._read(left if self.pidfd is not None else min(left, 0.05)) and self._exited():
                return True

    def drain(self, deadline: float) -> None:
        """Read what is left until both pipes close or ``deadline`` (monotonic) passes."""
        import time

        if self.pidfd is not None:
            self.sel.unregister(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None
        while self._pipes_open():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._read(left)

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        self.sel.close()
        for pipe in (self.proc.stdout, self.proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass


# ---------------------------------------------------------------------------------------------
# Children of probes: each in its own process group, recorded against the probe that started it.

_LOCAL = threading.local()
_HOOK_LOCK = threading.Lock()
_ORIGINAL_POPEN_INIT = None


class ChildGroups:
    """The process groups of the children one probe started (see :func:`probe_children`).

    Every ``subprocess.Popen`` made in the probe's thread (its own calls,
    GitPython's, ``subprocess.run``'s) starts in a new session, so the child
    and everything it starts share one process group, and is recorded here.
    :meth:`end` stops the groups still running: SIGTERM, a short grace, SIGKILL.
    """

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen] = []
        self._lock = threading.Lock()
        self.closed = False

    def start(self, popen: subprocess.Popen, init, args, kwargs) -> None:
        """Run ``init(popen, *args, **kwargs)`` (``Popen.__init__``: the fork) and record the child, under
        the lock :meth:`close` takes, so that no child starts unrecorded while the groups are being ended.

        Raises:
            OSError: ECANCELED after :meth:`close`: the probe's time is up, no new child is started.
        """
        with self._lock:
            if self.closed:
                popen._child_created = False  # what Popen.__del__ looks at first
                raise OSError(
                    errno.ECANCELED, "the probe's time is up: no new child process is started"
                )
            init(popen, *args, **kwargs)
            self._procs.append(popen)

    def close(self, grace_s: float = 0.5) -> int:
        """:meth:`end`, and from now on refuse to start a child in the probe's abandoned thread (it may go
        on to its next command after the one that hung was stopped). Returns :meth:`end`'s count."""
        with self._lock:
            self.closed = True
        return self.end(grace_s)

    def running(self) -> list[int]:
        """Process ids of recorded children not yet reaped (their group may hold more)."""
        with self._lock:
            return [p.pid for p in self._procs if p.returncode is None and _alive(p.pid)]

    def end(self, grace_s: float = 0.5) -> int:
        """Stop every recorded group whose leader has not been reaped; returns how many. Never raises.

        The leader is left to the thread that waits on it (reaping it here would
        race that thread); only signals are sent.
        """
        import time

        pids = self.running()
        if not pids:
            return 0
        with signals_held():
            for pid in pids:
                _signal_group(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            pause = 0.002  # most children die within a millisecond of SIGTERM: look again soon, then less often
            while time.monotonic() < deadline and any(_alive(p) for p in pids):
                time.sleep(pause)
                pause = min(0.02, pause * 2)
            for pid in pids:
                _signal_group(pid, signal.SIGKILL)
        return len(pids)


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (``/proc/<pid>/stat``, else ``kill(pid, 0)``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


def _popen_init(self, *args, **kwargs):  # installed as subprocess.Popen.__init__ by _install_hook
    groups = getattr(_LOCAL, "groups", None)
    if (
        groups is not None
        and not kwargs.get("start_new_session")
        and kwargs.get("process_group") is None
        and kwargs.get("preexec_fn") is None
    ):
        kwargs["start_new_session"] = True
    if groups is None:
        _ORIGINAL_POPEN_INIT(self, *args, **kwargs)
    else:
        groups.start(self, _ORIGINAL_POPEN_INIT, args, kwargs)


def _install_hook() -> None:
    """Wrap ``subprocess.Popen.__init__`` once: outside :func:`probe_children` it behaves as before."""
    global _ORIGINAL_POPEN_INIT
    with _HOOK_LOCK:
        if _ORIGINAL_POPEN_INIT is None:
            _ORIGINAL_POPEN_INIT = subprocess.Popen.__init__
            subprocess.Popen.__init__ = _popen_init


@contextlib.contextmanager
def probe_children(groups: ChildGroups):
    """Record in ``groups`` every child process the calling thread starts during the block.

    The probe runner (:func:`forensics.runner.run_probes`) wraps each probe's
    thread in this, and ends the groups when the probe's time is up: a ``git``
    that hangs (GitPython's calls have no timeout of their own) is stopped with
    the probe, not left behind when forensics exits. Threads a probe starts
    itself are not covered; their subprocess calls need their own timeouts.
    """
    _install_hook()
    old = getattr(_LOCAL, "groups", None)
    _LOCAL.groups = groups
    try:
        yield groups
    finally:
        _LOCAL.groups = old


def carry_children(fn):
    """``fn``, wrapped so that the thread running it records its children like the calling thread.

    For a probe that runs a command beside another in a thread of its own
    (:func:`probe_children` covers only the probe's thread): the children the
    wrapped call starts join the calling probe's groups, ended with the probe.
    Outside a probe ``fn`` is returned unchanged.
    """
    groups = getattr(_LOCAL, "groups", None)
    if groups is None:
        return fn

    def run(*args, **kwargs):
        with probe_children(groups):
            return fn(*args, **kwargs)

    return run


def end_helpers(grace_s: float = 1.0) -> list[str]:
    """Stop and reap what this process still has running before it exits; returns what was stopped.

    The ``multiprocessing`` forkserver and resource tracker (started by the
    nccl_env probe's start-method checks) are asked to stop through their own
    ``_stop()``; any other child still running (a probe's child past its
    timeout, a forkserver's worker) gets SIGTERM, ``grace_s``, then SIGKILL, and is reaped
    (``psutil.Process().children()``, read before the forkserver stops too). Never raises.
    """
    import sys

    try:  # taken first: the forkserver's children, orphaned when it stops, are no longer found after
        import psutil

        kids = psutil.Process().children(recursive=True)
    except Exception:  # noqa: BLE001 - exiting anyway
        kids = []
    stopped: list[str] = []
    for mod, attr in (
        ("multiprocessing.forkserver", "_forkserver"),
        ("multiprocessing.resource_tracker", "_resource_tracker"),
    ):
        helper = getattr(sys.modules.get(mod), attr, None)
        if helper is None or getattr(helper, "_pid", None) is None:
            continue
        try:
            helper._stop()
            stopped.append(mod.rsplit(".", 1)[1])
        except Exception:  # noqa: BLE001 - a private API of the standard library; the sweep below catches it
            pass
    try:
        import psutil

        kids = [kid for kid in kids + psutil.Process().children(recursive=True) if kid.is_running()]
        kids = list({kid.pid: kid for kid in kids}.values())
        for kid in kids:
            try:
                stopped.append(kid.name())
            except psutil.Error:
                pass
        stop_processes(kids, grace_s, reap=True)
    except Exception:  # noqa: BLE001 - exiting anyway
        pass
    return stopped


def stop_processes(procs: list, grace_s: float = GRACE_S, *, reap: bool = False) -> None:
    """Stop each of ``procs`` (``psutil.Process`` objects): SIGTERM, up to ``grace_s`` for them to
    end (``psutil.wait_procs``), then SIGKILL for those still running; with ``reap`` (they are this
    process's children), up to ``grace_s`` more so the killed ones are reaped.

    A process already gone, or one this user may not signal, is skipped (``psutil.Error``); other
    errors propagate.
    """
    import psutil

    for proc in procs:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    if reap:
        psutil.wait_procs(alive, timeout=grace_s)
