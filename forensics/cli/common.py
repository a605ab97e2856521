"""Helpers shared by the CLI modules: the error boundary and the console."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import sys
from pathlib import Path
from typing import Any, Callable, TypeVar

import click

from forensics.errors import BadInputError, ForensicsError

EXIT_INTERNAL = 4
EXIT_INTERRUPTED = 130

F = TypeVar("F", bound=Callable[..., Any])


class Terminated(BaseException):
    """Raised in the main thread by SIGTERM or SIGHUP (see :func:`signals_raise`).

    A BaseException, like KeyboardInterrupt, so that every ``finally`` runs on
    the way out: benchmark ranks and steps (own process groups) are stopped,
    worktrees removed, partial files deleted. Python's default for SIGTERM is
    to die at once, skipping all of that.
    """

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def signals_raise():
    """Turn SIGTERM and SIGHUP into :class:`Terminated` (and Ctrl-C into KeyboardInterrupt) for the block.

    Main thread only; else a no-op. A signal already ignored (``nohup forensics
    bisect ... &``) stays ignored. While clean-up runs under
    :func:`forensics.procgroup.signals_held`, a signal is deferred to its end.
    """

    from forensics.procgroup import defer_signal

    def handler(signum, frame):
        if defer_signal(signum):  # clean-up in progress: acted on when it is done
            return
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signum)

    old = {}
    try:
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            current = signal.getsignal(s)
            if current is signal.SIG_IGN:  # nohup, or a parent that ignores it: keep ignoring
                continue
            if s == signal.SIGINT and current is not signal.default_int_handler:
                continue  # someone else's Ctrl-C handler: leave it
            old[s] = signal.signal(s, handler)
    except ValueError:  # not the main thread (an embedding application): leave its handlers alone
        pass
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


AMBIGUOUS_FRACTION = 0.2
"""A bare number below 1 is a fraction only up to this (0.05 = 5%); 0.2-1 could be meant as percent too."""


def parse_threshold(text: str, option: str = "--threshold") -> float:
    """'5%', '5' or '0.05' -> 0.05 (a bare number >= 1 is read as percent), for every command.

    A bare number between 0.2 and 1 is refused: '0.5' reads as 50% one way and 0.5% the other.

    Raises:
        BadInputError: not a number, ambiguous, or outside 0-100% (the message names ``option``).
    """
    raw = text.strip().rstrip("%")
    try:
        v = float(raw)
    except ValueError:
        raise BadInputError(f"{option} {text!r}: expected a percentage such as 5%") from None
    percent = text.strip().endswith("%")
    if not percent and AMBIGUOUS_FRACTION < v < 1:
        raise BadInputError(f"{option} {text!r} is ambiguous: write {raw}% or {v * 100:g}%")
    if percent or v >= 1:
        v /= 100
    if not 0 < v < 1:
        raise BadInputError(f"{option} {text!r}: must be between 0% and 100% (e.g. 5%)")
    return v


def check_repo(repo: Path | None, work_tree: bool = False) -> None:
    """Reject a ``--repo`` that is not a folder inside a git work tree, before any work starts.

    Runs ``git -C REPO rev-parse --git-dir --is-bare-repository --is-inside-work-tree`` (read-only)
    through :func:`forensics.gitio.git`. Without a ``git`` executable, or when git
    times out, nothing is checked (the git probe then records why it failed).

    Args:
        repo: the ``--repo`` given, or None (nothing to check).
        work_tree: refuse a bare repository, or a folder inside a ``.git`` folder, too: the step runs
            in the checkout (``investigate``). A bare mirror still serves ``diff --repo`` its commits.

    Raises:
        BadInputError: the path is missing, a file, or not in a git repository (with ``work_tree``: a
            bare repository or a ``.git`` folder).
    """
    if repo is None:
        return
    import shutil

    from forensics.gitio import GitError, git

    if not repo.exists():
        raise BadInputError(f"--repo {repo}: no such folder")
    if not repo.is_dir():
        raise BadInputError(f"--repo {repo}: is a file; give the folder of your clone")
    if shutil.which("git") is None:
        return
    try:
        answers = git(
            repo,
            "rev-parse",
            "--git-dir",
            "--is-bare-repository",
            "--is-inside-work-tree",
            timeout_s=10,
        ).splitlines()
    except GitError as exc:
        why = str(exc)
        if exc.timed_out:
            return
        if "safe.directory" in why or "dubious ownership" in why:
            raise BadInputError(
                f"--repo {repo}: git refuses it, the folder is owned by another user; if you trust "
                f"it: git config --global --add safe.directory {repo.resolve()}"
            ) from None
        raise BadInputError(
            f"--repo {repo}: not a git repository; give the folder of your clone, or leave --repo "
            "out"
        ) from None
    if work_tree and answers[1:2] == ["true"]:  # it ran the step in the current folder instead
        raise BadInputError(
            f"--repo {repo}: a bare repository (nothing checked out for the step to run); give the "
            "folder of your clone"
        )
    if work_tree and answers[2:3] == ["false"]:
        raise BadInputError(
            f"--repo {repo}: inside the repository's .git folder; give the folder of your clone"
        )


def safe(message: str) -> str:
    """``message`` with secrets replaced (:func:`forensics.redact.redact_text`): error lines and progress
    quote the user's step command, which may carry ``--token X``."""
    from forensics.redact import redact_text

    head, sep, tail = message.partition(": ")
    name = head.rsplit(" ", 1)[-1]
    if sep and name and (name in sys.argv[1:] or os.path.lexists(name)):
        # "passwd: file is empty": the head names a file the user gave, not a secret "name: value"
        return f"{redact_text(head)[0]}: {redact_text(tail)[0]}"
    return redact_text(message)[0]


def warn_skipped_patterns(analysis) -> None:
    """One stderr warning per hot-path pattern of a config file that the diff skipped (RE2 cannot run it;
    :func:`forensics.diff.hotpaths.bounded_pattern`); the report's notes say it too."""
    from forensics.render.terminal import clean

    for line in dict.fromkeys(
        x for rc in getattr(analysis, "repos", None) or [] for x in rc.skipped_patterns
    ):
        click.echo(clean(f"forensics: warning: {line}"), err=True)


def fail(message: str, code: int) -> None:
    """Print ``forensics: error: <message>`` (secrets redacted) on stderr and exit with ``code``."""
    click.echo(f"forensics: error: {safe(message)}", err=True)
    sys.exit(code)


def error_boundary(func: F) -> F:
    """Turn domain errors into one stderr line and their exit code; never a traceback.

    ``FORENSICS_DEBUG=1`` re-raises unexpected exceptions with their traceback.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ForensicsError as exc:
            fail(message_of(exc), exc.exit_code)
        except KeyboardInterrupt:
            fail("interrupted", EXIT_INTERRUPTED)
        except BrokenPipeError:
            broken_pipe()
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:  # a bug: say so in one line, keep the traceback behind a switch
            if stdout_failed(exc):
                cannot_write_stdout(exc)
            if path_refused(exc):
                fail(path_refused(exc), 2)
            internal_error(exc)

    return wrapper  # type: ignore[return-value]


_REFUSED = (errno.EACCES, errno.EPERM, errno.ENAMETOOLONG, errno.ELOOP)


def path_refused(exc: BaseException) -> str:
    """The one-line error for an ``OSError`` naming a path the system refused to look at (no permission on a
    folder, a name over the limit, a loop of links), or "" for anything else.

    The loaders and the output checks name these themselves (``cannot read (Permission denied)``); this is
    the net under every command for a check that asked ``Path.is_dir()`` or ``Path.exists()`` (which raise
    on them) about a path the user gave: the user's path, exit 2, not an internal error.
    """
    if not isinstance(exc, OSError) or exc.errno not in _REFUSED or not exc.filename:
        return ""
    from forensics.outpath import path_error

    line = str(path_error(Path(os.fsdecode(exc.filename)), exc, doing="use"))
    return (
        line
        if exc.errno == errno.ENAMETOOLONG
        else f"{line}; check the path and its folders' permissions"
    )


def internal_error(exc: BaseException) -> None:
    """Report a bug in one line and exit :data:`EXIT_INTERNAL` (4); ``FORENSICS_DEBUG=1`` re-raises it."""
    if os.environ.get("FORENSICS_DEBUG"):
        raise exc
    fail(
        f"internal error: {type(exc).__name__}: {exc} (set FORENSICS_DEBUG=1 for the traceback and "
        "please report it)",
        EXIT_INTERNAL,
    )


def stdout_failed(exc: BaseException) -> bool:
    """True when ``exc`` is a failed write to standard output: the user's I/O error, not a bug.

    That is an ``OSError`` other than a closed pipe, naming no file (a file forensics opens is named
    in its errors), raised where standard output was being written: the innermost frame of its
    traceback holds ``sys.stdout`` or its buffer, itself or as an attribute of a local (click.echo's
    ``file``, a rich Console, a writer object's ``stream``), or its line writes ``sys.stdout``. A full
    disk, ``> /dev/full``, a quota, EIO on a terminal that went away.
    """
    if not isinstance(exc, OSError) or isinstance(exc, BrokenPipeError) or exc.filename is not None:
        return False
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    outs = [
        o
        for s in (sys.stdout, sys.__stdout__)
        if s is not None
        for o in (s, getattr(s, "buffer", None))
        if o is not None
    ]
    for value in list(tb.tb_frame.f_locals.values()):
        if isinstance(value, (type, type(sys))):  # a lazily imported module (sys itself) or a class
            continue
        try:
            held = [value, getattr(value, "file", None), *getattr(value, "__dict__", {}).values()]
            if any(h is o for h in held for o in outs):
                return True
        except Exception:  # noqa: BLE001 - a local whose attribute lookup fails is not standard output
            continue
    import linecache

    return "stdout" in linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno)


def cannot_write_stdout(exc: OSError) -> None:
    """Exit 2 with ``forensics: error: cannot write to standard output (<reason>)`` on stderr.

    Standard output is pointed at ``/dev/null`` first (``os.dup2``), so that the interpreter's last
    flush of what is still buffered does not fail again with a second message.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        pass
    fail(
        f"cannot write to standard output ({exc.strerror or exc}); check the disk or the file it is "
        "redirected to",
        2,
    )


def message_of(exc: ForensicsError) -> str:
    """The error's line as the user reads it: a :class:`BadInputError` names the running command's flags
    (:meth:`BadInputError.render` with :func:`flag_of`)."""
    return exc.render(flag_of) if isinstance(exc, BadInputError) else str(exc)


def flag_of(name: str) -> str:
    """The flag the running command declares for parameter ``name`` (``timeout_s`` -> ``--timeout``).

    Read from click's parameter declarations of the current command (its longest option
    string); ``--name`` when there is no command running or it has no such parameter.
    """
    ctx = click.get_current_context(silent=True)
    for param in ctx.command.params if ctx is not None else []:
        if param.name == name and isinstance(param, click.Option):
            return max(param.opts, key=len)
    return "--" + name.replace("_", "-")


EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
"""141: the reader of our output went away (``forensics diff a b | head -1``), as a shell reports a
program ended by SIGPIPE; never 1, which means "regression found"."""


def broken_pipe() -> None:
    """Exit quietly with :data:`EXIT_BROKEN_PIPE` after a write to a closed pipe.

    Standard output is pointed at ``/dev/null`` first (``os.dup2``) so that the
    interpreter's last flush does not fail again and print a traceback.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(EXIT_BROKEN_PIPE)


def console(stderr: bool = False):
    """A rich Console (imported lazily so ``--help`` stays fast); a closed pipe exits 141, not rich's 1.

    ``COLUMNS=0`` (a shell or container that reports a terminal of no size) is not taken as the width:
    rich would draw everything zero columns wide, that is print nothing at all. The width is then the
    terminal's or 80 columns, as :func:`forensics.render.text.terminal_width` gives for the snapshot's table.
    """
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            broken_pipe()

    width = None
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) == 0:
        from forensics.render.text import terminal_width

        width = terminal_width(sys.stderr if stderr else sys.stdout)
    return _Console(stderr=stderr, highlight=False, soft_wrap=False, width=width)


_QUICK_EXIT = {"allowed": False}


def allow_quick_exit() -> None:
    """Let the process end without the interpreter's teardown once the command returns.

    A command calls this when everything it writes is written and closed (``snapshot`` without
    ``--bench``); :func:`quick_exit` then does the rest. Not called: the interpreter exits as usual.
    """
    _QUICK_EXIT["allowed"] = True


def quick_exit(code: Any) -> None:
    """End the process with ``code`` (a ``SystemExit`` code) if :func:`allow_quick_exit` was called.

    What the interpreter's exit does that matters is done first, in its order: the threads that are not
    daemons are joined (``threading._shutdown``, which also runs the thread pools' exit hooks), the
    ``atexit`` handlers run (logging's flush, multiprocessing's temporary folder), stdout and stderr are
    flushed. Then ``os._exit``: the modules are not torn down one by one (tens of milliseconds after a
    snapshot, docs/benchmarks.md). Returns without exiting (the interpreter's own exit
    follows) when it was not allowed, ``code`` is not a number or ``None``, this Python lacks
    ``threading._shutdown``, or a step fails (a closed pipe on the last flush).
    """
    if not _QUICK_EXIT["allowed"] or not (code is None or isinstance(code, int)):
        return
    import atexit
    import threading

    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is None or threading.current_thread() is not threading.main_thread():
        return
    try:
        shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - the interpreter's own exit handles what failed
        return
    os._exit(code or 0)
