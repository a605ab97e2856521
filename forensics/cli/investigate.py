"""``forensics investigate``: diff against a baseline, rank, then confirm or refute the causes by experiment.

A thin click layer over :func:`forensics.investigate.run.investigate`: options
are checked before any measurement, progress goes to stderr (rich), the
verdict and the experiments table to stdout, reports to ``-o`` files.

Exit codes: 0 no regression (or, without --baseline, no deviation; --plan);
1 regression explained (a cause confirmed by experiment; without --baseline, a
deviation from what the hardware should give); 3 regression not explained
(nothing confirmed, or it could not be told); 2 bad input; 130 Ctrl-C, 143
SIGTERM, 129 SIGHUP (the reports are still written, with what was learned).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from forensics.cli.common import (
    Terminated,
    check_repo,
    console,
    error_boundary,
    parse_threshold,
    safe,
    warn_skipped_patterns,
)
from forensics.cli.options import step_options
from forensics.cli.types import PathArg

_DURATION = re.compile(
    r"^\s*(?:(?P<h>\d+(?:\.\d+)?)h)?\s*(?:(?P<m>\d+(?:\.\d+)?)m)?\s*(?:(?P<s>\d+(?:\.\d+)?)s?)?\s*$"
)
DEFAULT_REPORT = "forensics-investigate.html"


def parse_duration(text: str, option: str = "--budget") -> float:
    """``120`` / ``120s`` / ``15m`` / ``1h`` / ``1h30m`` -> seconds.

    Raises:
        BadInputError: anything else (a negative duration, zero or more than 7 days: "must be more than 0").
    """
    from forensics.errors import BadInputError

    m = _DURATION.match(text or "")
    below = _DURATION.match(re.sub(r"^\s*-", "", text or ""))  # -1, -5m: a duration, below zero
    if not m and below and any(below.group(k) for k in "hms"):
        raise BadInputError(f"{option} {text!r}: must be more than 0 and at most 7 days")
    if not m or not any(m.group(k) for k in "hms"):
        raise BadInputError(
            f"{option} {text!r}: expected seconds or a duration such as 120, 90s, 15m or 1h"
        )
    secs = (
        float(m.group("h") or 0) * 3600 + float(m.group("m") or 0) * 60 + float(m.group("s") or 0)
    )
    if not 0 < secs <= 7 * 86400:
        raise BadInputError(f"{option} {text!r}: must be more than 0 and at most 7 days")
    return secs


def _exists(path: Path) -> bool:
    """False only when nothing is at ``path``; a path the system refuses to look at (a folder the user
    cannot search) is left to the loader, which says why (``os.lstat``)."""
    try:
        path.lstat()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True


class _Progress:
    """Rich progress on stderr: the phase or experiment, its A/B processes, the time left."""

    def __init__(self, enabled: bool, deadline_s: float):
        import time

        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.time = time
        self.t_end = time.monotonic() + deadline_s
        self.prog = (
            Progress(
                SpinnerColumn(),
                TextColumn("[bold]{task.description}"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[last]}"),
                TextColumn("[dim]{task.fields[left]}"),
                console=console(stderr=True),
                transient=True,
            )
            if enabled
            else None
        )
        self.task = None
        # lines printed while the progress line shows go through its own console, which clears the
        # line, prints above it and draws it again; another console's text was appended to it
        self.err = self.prog.console if self.prog is not None else console(stderr=True)

    def __enter__(self):
        if self.prog is not None:
            self.prog.start()
            self.task = self.prog.add_task("starting", total=None, last="", left="")
        return self

    def __exit__(self, *exc):
        if self.prog is not None:
            self.prog.stop()

    def _left(self) -> str:
        left = self.t_end - self.time.monotonic()
        return f"{max(left, 0):.0f} s of the budget left"

    def event(self, kind: str, **kw) -> None:
        from rich.markup import escape

        if kind == "done":
            exp = kw["experiment"]
            self.err.print(
                f"[bold]{escape(exp.id)}[/bold] {escape(exp.outcome.value)}: "
                f"{escape(safe(exp.sentence or exp.reason))}",
                soft_wrap=True,
            )
        if self.prog is None:
            return
        if kind == "phase":
            self.prog.update(self.task, description=escape(kw["text"]), last="", left=self._left())
        elif kind == "experiment":
            exp = kw["experiment"]
            self.prog.update(
                self.task,
                description=escape(safe(f"[{kw['index']}/{kw['total']}] {exp.title}")),
                last="",
                left=self._left(),
            )
        elif kind == "process":
            value = (kw.get("record") or {}).get("value")
            shown = "failed" if value is None else f"{value:.4g}"
            self.prog.update(
                self.task,
                last=escape(f"{kw['side']} #{kw['index'] + 1}: {shown}"),
                left=self._left(),
            )


@click.command()
@click.option(
    "--baseline",
    type=PathArg(path_type=Path),
    metavar="BEFORE.json",
    help="A snapshot from when it was fast (forensics snapshot --bench [--bench-cmd STEP]). Without it, "
    "with --cmd: the baseline this machine remembers (the HEAD before the last pull, --since, "
    "--expect); without --cmd: this machine against what its hardware should give.",
)
@step_options(
    cmd_help='Your step: a command printing {"metric": "step_ms", "value": 19.3} lines (the same one the '
    "baseline measured with --bench-cmd).",
    callable_help="Your step as a Python callable, timed in fresh processes.",
    processes_type=click.IntRange(5, 200),
    processes_default=5,
    processes_help="Fresh processes per side in an A/B's first round; rounds of 3 more follow while it is "
    "undecided.",
)
@click.option(
    "--repo",
    type=PathArg(path_type=Path),
    help="The git repository of your code (never modified; "
    "commits are tested in private worktrees). Default: the one the snapshots name.",
)
@click.option(
    "--config",
    type=PathArg(path_type=Path),
    help="Extra hot-path patterns (as for forensics diff).",
)
@click.option(
    "--budget",
    default="15m",
    show_default=True,
    help="Time for the whole investigation, snapshot included: seconds or 90s, 15m, 1h.",
)
@click.option(
    "--plan",
    "plan_only",
    is_flag=True,
    help="Print the plan with each experiment's estimated cost and stop.",
)
@click.option(
    "--since",
    metavar="REV",
    help="The code baseline: measure REV (a sha, tag, branch, HEAD~3) in a private "
    "worktree instead of the HEAD before the last pull in the reflog (used without --baseline, or when the "
    "baseline did not measure the step).",
)
@click.option(
    "--expect",
    metavar="VALUE",
    help="The value you remember for your step (19ms, 0.019s, 94tok/s): the "
    "baseline's value of the step.",
)
@click.option(
    "--max-processes",
    type=click.IntRange(5, 500),
    default=20,
    show_default=True,
    help="The most fresh processes a side of one A/B may grow to.",
)
@click.option(
    "--snapshot-processes",
    type=click.IntRange(3, 100),
    default=5,
    show_default=True,
    help="Fresh processes for the canary and your step in the snapshot taken now.",
)
@click.option(
    "--explains",
    "min_share",
    default="50%",
    show_default=True,
    help="Share of the slowdown an intervention must recover (lower end of its 95% CI) to be confirmed.",
)
@click.option(
    "--wheelhouse",
    type=PathArg(path_type=Path),
    help="A folder of wheels (pip download -d DIR): "
    "package experiments install the baseline's version from it into a temporary overlay.",
)
@click.option(
    "--no-canary",
    is_flag=True,
    help="Do not run the canary now (then environment and code cannot be "
    "told apart by measurement).",
)
@click.option(
    "--tp", type=int, help="Canary tensor-parallel ranks (default: all visible GPUs; 2 on CPU)."
)
@click.option(
    "--keep-going",
    is_flag=True,
    help="Run every planned experiment, also after a cause is confirmed.",
)
@click.option(
    "--snapshot-out",
    type=PathArg(dir_okay=False, path_type=Path),
    help="Also write the snapshot taken now (.json/.yaml).",
)
@click.option(
    "-o",
    "--output",
    "outputs",
    multiple=True,
    type=PathArg(dir_okay=False, path_type=Path),
    help=f"Report file: .html, .md or .json (repeatable). Default: {DEFAULT_REPORT} here.",
)
@click.option(
    "--no-redact", is_flag=True, help="Keep secrets in the snapshot taken now and the report."
)
@click.option(
    "-q", "--quiet", is_flag=True, help="No progress; only the verdict, the table and the paths."
)
@error_boundary
def investigate(
    baseline,
    step,
    threshold,
    repo,
    config,
    budget,
    plan_only,
    since,
    expect,
    max_processes,
    snapshot_processes,
    min_share,
    wheelhouse,
    no_canary,
    tp,
    keep_going,
    snapshot_out,
    outputs,
    no_redact,
    quiet,
):
    """Find the cause of a slowdown and confirm it by experiment.

    Takes a snapshot now (with the canary, and your step when given), diffs
    it against --baseline, ranks the hypotheses, then tests the implicated
    ones, most likely first, within --budget: restores an environment
    variable's old value in an interleaved A/B of your step, tests the suspect
    commit against its parent in a private worktree (then bisects), re-measures
    a condition the tool may not change (another process on the GPU, a power
    cap, a PCIe link), swaps a package back from --wheelhouse. "Confirmed"
    means the A/B shows it with the statistics of 'forensics bench compare' and
    it recovers the --explains share of the slowdown.

    Without --baseline (or with one that did not measure the step), the
    baseline is what this machine remembers: the HEAD before the last pull in
    the reflog (or --since REV), measured now in a private worktree, or the
    value you remember (--expect 19ms); variables known to cost speed are
    tested unset when set. After each confirmed cause, today with every
    confirmed intervention applied is compared with the baseline, and the
    next suspects are tested on top while that residual is beyond the
    threshold; the verdict gives each cause's share and the unexplained part.

    Exit codes: 0 no regression, 1 regression explained (a cause confirmed),
    3 regression not explained, 2 bad input, 130/143/129 Ctrl-C/SIGTERM/SIGHUP.
    """
    from forensics.investigate.run import Settings, check_settings
    from forensics.investigate.run import investigate as run
    from forensics.render.investigate import print_investigation

    budget_s = parse_duration(budget)
    check_repo(repo, work_tree=True)
    outs = _check_outputs(list(outputs) or [Path(DEFAULT_REPORT)], snapshot_out, baseline, config)
    settings = Settings.from_options(
        step,
        baseline=baseline,
        repo=repo,
        config=config,
        budget_s=budget_s,
        snapshot_processes=snapshot_processes,
        threshold=parse_threshold(threshold),
        min_share=parse_threshold(min_share, "--explains"),
        wheelhouse=wheelhouse,
        canary=not no_canary,
        tp=tp,
        plan_only=plan_only,
        keep_going=keep_going,
        redact=not no_redact,
        since=since,
        expect=expect,
        max_processes=max_processes,
    )
    check_settings(settings)
    if (
        step.cmd
    ):  # a program that is not there is one line before the snapshot, as for snapshot --bench-cmd
        from forensics.step.command import check_step_command

        check_step_command(step.cmd, "--cmd")
    if baseline is not None:  # a bad file is one line before any work or progress output
        from forensics.importers import load as load_any

        settings.baseline_doc = load_any(
            baseline
        )  # a snapshot, or a text pasted from a ticket, as diff reads it
    with _Progress(not quiet and console(stderr=True).is_terminal, budget_s) as progress:
        inv = run(settings, progress.event, interrupts=(KeyboardInterrupt, Terminated))
    warn_skipped_patterns(inv.analysis)
    _write_outputs(inv, outs, snapshot_out)
    print_investigation(console(), inv, outs + ([snapshot_out] if snapshot_out else []), safe)
    if inv.interrupted:
        click.echo(
            f"forensics: error: interrupted ({inv.interrupted}); the report holds what was learned",
            err=True,
        )
    sys.exit(inv.exit_status)


def _write_outputs(inv, outs: list[Path], snapshot_out: Path | None) -> None:
    """The reports (``-o``) and the snapshot taken now (``--snapshot-out``)."""
    from forensics import snapshot as snap
    from forensics.render.investigate import write_report

    if snapshot_out is not None:
        snap.save(inv.now, snapshot_out)
    for out in outs:
        write_report(inv, out)


def _same_file(a: Path, b: Path) -> bool:
    """True when two paths name one file (the same path, or links to one file)."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def _check_outputs(
    outs: list[Path],
    snapshot_out: Path | None,
    baseline: Path | None,
    config: Path | None = None,
) -> list[Path]:
    """Refuse report and snapshot names that cannot be written, and a missing baseline, before any work.

    Returns:
        ``outs``.

    Raises:
        BadInputError: a missing or unsearchable folder or a name too long
            (:func:`forensics.docfile.check_writable`), a report name of no known format, a
            ``--snapshot-out`` that is not .json/.yaml/.yml, a ``--baseline`` that does not exist, an
            output that is the ``--baseline`` or ``--config`` file (it was written over), ``--snapshot-out``
            naming a report's file.
    """
    from forensics.docfile import check_writable
    from forensics.errors import BadInputError
    from forensics.render.investigate import format_from_name

    for out, option in [(o, "-o") for o in outs] + (
        [(snapshot_out, "--snapshot-out")] if snapshot_out else []
    ):
        check_writable(
            out, option
        )  # a missing or unsearchable folder, a name too long: one line, before any work
    for out in outs:
        format_from_name(out)
    if snapshot_out is not None and snapshot_out.suffix.lower() not in (".json", ".yaml", ".yml"):
        raise BadInputError(
            f"--snapshot-out {snapshot_out}: the name must end in .json, .yaml or .yml"
        )
    named = [(o, "-o") for o in outs] + ([(snapshot_out, "--snapshot-out")] if snapshot_out else [])
    for out, option in named:
        for given, what in ((baseline, "--baseline"), (config, "--config")):
            if given is not None and _same_file(out, given):
                raise BadInputError(
                    f"{option} {out} is the {what} file; writing there would destroy it, choose "
                    "another name"
                )
    if snapshot_out is not None and any(_same_file(snapshot_out, o) for o in outs):
        raise BadInputError(
            f"--snapshot-out {snapshot_out} is also a report's -o; the snapshot would be written over the "
            "report, choose another name"
        )
    if baseline is not None and not _exists(baseline):
        raise BadInputError(
            f"--baseline {baseline}: no such file; take one with 'forensics snapshot --bench "
            "[--bench-cmd STEP] -o before.json' when the step is fast"
        )
    return outs
