"""``forensics bisect`` and ``forensics bisect-step`` (thin click layer over :mod:`forensics.bisect.run`).

Exit codes of ``bisect``: 0 a culprit named and confirmed against its parent;
3 no culprit named (endpoints not different, the environment changed, the
slowdown does not reproduce, the culprit not confirmed or only a range of
commits left by skips); 2 bad input, or a git command that failed or did not
answer in time (:class:`forensics.gitio.GitError`); 130 Ctrl-C; 143 SIGTERM;
129 SIGHUP.
``bisect-step`` follows ``git bisect run``: 0 fast, 1 slow, 125 skip, 128+ abort
(any error, so git never reads an error as "slow").
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape

from forensics.cli.common import (
    Terminated,
    console,
    error_boundary,
    fail,
    message_of,
    parse_threshold,
    safe,
    signals_raise,
)
from forensics.cli.options import step_options
from forensics.cli.types import POSITIVE_VALUE, REPORT_FILE, PathArg


def _step_options(f):
    options = [
        click.option(
            "--good", required=True, metavar="REV", help="A commit where the step was fast."
        ),
        click.option(
            "--bad", required=True, metavar="REV", help="A later commit where it is slow."
        ),
        click.option(
            "--repo",
            type=PathArg(file_okay=False, path_type=Path),
            default=Path("."),
            show_default=True,
            help="The git repository of the code under test (never modified).",
        ),
        step_options(
            cmd_help='Step command printing {"metric": ..., "value": ...} lines.',
            callable_help="Python callable timed in a fresh process.",
            between=(
                click.option(
                    "--callable-timer",
                    type=click.Choice(["wall", "cpu"]),
                    default="wall",
                    show_default=True,
                    help="Clock for --callable: cpu (process time) only for CPU-bound code on a shared "
                    "machine.",
                ),
                click.option(
                    "--setup",
                    metavar="CMD",
                    help="Run in the worktree once per commit before measuring "
                    "(e.g. a build, or pip install -e . --no-deps into a private venv).",
                ),
            ),
            threshold_help="Smallest change that counts.",
            processes_type=click.IntRange(3, 200),
            processes_default=5,
            processes_help="Fresh processes per commit to start with (doubled on an unknown "
            "result).",
            timeout_default=600.0,
            timeout_help="Seconds one process (or the setup) may run.",
        ),
        click.option(
            "--max-processes",
            type=click.IntRange(3, 1000),
            default=None,
            help="Cap for the doubling [default: 4 x --processes].",
        ),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def _config(step, threshold, **options):
    from forensics.bisect.model import BisectConfig

    return BisectConfig.from_options(step, threshold=parse_threshold(threshold), **options)


@click.command(epilog="Inconclusive (exit 3)? docs/inconclusive.md says what to do.")
@_step_options
@click.option(
    "--good-was",
    type=POSITIVE_VALUE,
    default=None,
    metavar="VALUE",
    help="The good commit's earlier result (the metric's unit), to tell an environment change apart.",
)
@click.option(
    "-o",
    "--output",
    "outputs",
    multiple=True,
    type=REPORT_FILE,
    help="Report file: .html, .md or .json (repeatable).",
)
@error_boundary
def bisect(step, threshold, outputs, **options):
    """Find the commit that made the step slower, in private git worktrees.

    Re-measures both endpoints first (if the good commit is now slow too, the
    environment changed: it stops and says so), then bisects with a
    statistical rule, skipping commits whose setup or step fails, and confirms
    the culprit against its parent. Your checkout, branch, index, stash and
    uncommitted files are never touched, also on Ctrl-C or a crash.

    Exit codes: 0 culprit named and confirmed, 3 no culprit named (the
    environment changed, endpoints not different, a range of candidates, or
    not confirmed), 2 bad input or a git command that failed or hung (stopped
    after 120 s), 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP.
    """
    from forensics.bisect.run import Outcome, run_bisect
    from forensics.bisect.worktree import remove_stale
    from forensics.redact import Redactor
    from forensics.render.bisect import write_report

    cfg = _config(step, threshold, **options)
    progress = _Progress()
    progress.stale(remove_stale(cfg.repo))
    try:
        with signals_raise(), progress.status:
            result = run_bisect(cfg, progress.on_log, progress.on_process)
    except Terminated as exc:
        fail(
            f"terminated by signal {exc.signum}; worktrees removed, your checkout is untouched",
            128 + exc.signum,
        )
    result = Redactor().sweep(result)  # commit subjects and notes, once, for every output below
    for out in outputs:
        write_report(result, out)
        progress.err.print(f"wrote {escape(str(out))}")
    click.echo(safe(f"{result.outcome.value}: {result.sentence}"))
    if result.hypotheses:
        click.echo(f"look at: {', '.join(result.hypotheses)}")
    for note in result.notes:
        click.echo(safe(f"note: {note}"))
    sys.exit(0 if result.outcome is Outcome.CULPRIT and result.confirmed else 3)


class _Progress:
    """The bisect's progress on stderr: one line per log entry, a spinner with the process being measured."""

    def __init__(self):
        self.err = console(stderr=True)
        self.err.soft_wrap = True
        self.status = self.err.status("bisect: starting", spinner="dots")
        self.counts: dict[str, int] = {}

    def stale(self, removed: list[str]) -> None:
        if removed:
            self.err.print(
                f"removed {len(removed)} stale worktree{'s' if len(removed) > 1 else ''} of an interrupted "
                "bisect: " + escape("; ".join(removed))
            )

    def on_log(self, entry) -> None:
        self.err.print(f"[bold]{escape(entry.phase)}[/bold] {escape(safe(entry.message))}")

    def on_process(self, sha: str, value: float | None) -> None:
        self.counts[sha] = self.counts.get(sha, 0) + 1
        shown = "failed" if value is None else f"{value:.4g}"
        self.status.update(f"measuring {sha[:10]}: process {self.counts[sha]} -> {shown}")


class _StepCommand(click.Command):
    """A usage error must abort `git bisect run` (exit 128), not read as "slow" (click's exit 2)."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            exc.exit_code = 128
            raise


@click.command("bisect-step", cls=_StepCommand)
@_step_options
def bisect_step(step, threshold, **options):
    """Classify HEAD for `git bisect run`: exit 0 fast, 1 slow, 125 skip, 128 abort.

    HEAD, --good and --bad are measured in private worktrees, interleaved, and
    HEAD is compared with both. Use with
    `git bisect start --term-old=fast --term-new=slow BAD GOOD` then
    `git bisect run forensics bisect-step --good GOOD --bad BAD --cmd "..."`.
    """
    from forensics.bisect.run import StepExit, run_step
    from forensics.errors import ForensicsError

    err = console(stderr=True)
    try:
        with signals_raise():
            cfg = _config(step, threshold, **options)
            code, reason = run_step(
                cfg,
                lambda e: err.print(f"[bold]{escape(e.phase)}[/bold] {escape(safe(e.message))}"),
            )
    except ForensicsError as exc:
        fail(f"{message_of(exc)} (aborting the bisect)", StepExit.ABORT.value)
    except click.BadParameter as exc:
        fail(f"{exc.message} (aborting the bisect)", StepExit.ABORT.value)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Terminated as exc:
        fail(f"terminated by signal {exc.signum}", 128 + exc.signum)
    except Exception as exc:  # never let git read a crash as "slow"
        fail(f"internal error: {type(exc).__name__}: {exc} (aborting the bisect)", 129)
    click.echo(safe(f"{code.name.lower()}: {reason}"))
    sys.exit(code.value)
