"""Helpers shared by the CLI modules: the error boundary and the console."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
from typing import Any, Callable, TypeVar

import click

from forensics.errors import ForensicsError

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
    """Turn SIGTERM and SIGHUP into :class:`Terminated` for the block (main thread only; else a no-op)."""

    def handler(signum, frame):
        raise Terminated(signum)

    try:
        old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    except ValueError:  # not the main thread (an embedding application): leave its handlers alone
        old = {}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def fail(message: str, code: int) -> None:
    """Print ``forensics: error: <message>`` on stderr and exit with ``code``."""
    click.echo(f"forensics: error: {message}", err=True)
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
            fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            fail("interrupted", EXIT_INTERRUPTED)
        except BrokenPipeError:
            sys.stderr.close()
            sys.exit(0)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:  # a bug: say so in one line, keep the traceback behind a switch
            if os.environ.get("FORENSICS_DEBUG"):
                raise
            fail(f"internal error: {type(exc).__name__}: {exc} (set FORENSICS_DEBUG=1 for the traceback and "
                 "please report it)", EXIT_INTERNAL)

    return wrapper  # type: ignore[return-value]


def console(stderr: bool = False):
    """A rich Console (imported lazily so ``--help`` stays fast)."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)
