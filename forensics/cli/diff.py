"""``forensics diff BEFORE AFTER``: rank the causes and write the root-cause report."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from forensics.cli.common import check_repo, console, error_boundary, warn_skipped_patterns
from forensics.cli.types import DIFF_REPORT_FILE, PathArg

_DEFAULT_NAME = "forensics-report"


@click.command(epilog="Inconclusive (exit 3)? docs/inconclusive.md says what to do.")
@click.argument("before", type=PathArg(path_type=Path))
@click.argument("after", type=PathArg(path_type=Path))
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    type=DIFF_REPORT_FILE,
    help="Report file (.html, .md or .json; '-' for stdout). Default: forensics-report.<format> here.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md", "json"]),
    help="Report format. Default: from the -o suffix, else html.",
)
@click.option(
    "--repo",
    type=PathArg(path_type=Path),
    help="Read the commits between the two HEADs from this clone (default: the repository the "
    "snapshots name, if it is on this machine).",
)
@click.option(
    "--config",
    type=PathArg(path_type=Path),
    help="YAML file with extra performance-sensitive path patterns (hot_paths: {category: [regex...]}); "
    ".forensics.yaml in the repository is read too.",
)
@click.option(
    "--fail-on",
    type=click.Choice(["regression", "any"]),
    help="Exit 1 when a benchmark result got slower or a hypothesis is implicated at high severity "
    "(regression), or when anything is implicated (any); exit 3 when a benchmark comparison "
    "could not decide and nothing else failed.",
)
@click.option(
    "--no-redact",
    is_flag=True,
    help="Do not redact secrets again: a --no-redact snapshot's values "
    "appear in the report as they are.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print only the verdict and the report path.")
@error_boundary
def diff(before, after, output, fmt, repo, config, fail_on, no_redact, quiet):
    """Compare two snapshots: every hypothesis checked, causes ranked, report written.

    BEFORE and AFTER may also be texts pasted from tickets (collect_env, vLLM collect-env,
    sglang check_env, nvidia-smi, nvidia-smi -q/-x, pip list): they are imported on the fly,
    and what such a text does not hold is reported as not compared.

    Prints a summary and writes a self-contained HTML report
    (forensics-report.html in the current folder unless -o says otherwise).
    Snapshots of different machines are allowed; the report says so at the top.

    Exit codes: 0 done (no regression with --fail-on), 1 regression found (--fail-on),
    2 bad input, 3 inconclusive (--fail-on and a benchmark comparison could not decide).
    """
    from forensics.cli.fleet import diff_fleets, is_fleet
    from forensics.diff.files import analyse_files
    from forensics.render import report

    if is_fleet(before) or is_fleet(
        after
    ):  # fleet files: what changed fleet-wide vs on a few nodes
        sys.exit(diff_fleets(before, after, output, fmt, fail_on, quiet))
    check_repo(repo)
    path, fmt = _report_path(output, fmt, (before, after))
    analysis = analyse_files(before, after, repo=repo, config=config, redact=not no_redact)
    warn_skipped_patterns(analysis)  # also in the report's notes
    if path is None:
        sys.stdout.write(report.render(analysis, fmt))
    else:
        report.write(analysis, path, fmt)
        if quiet:
            for line in ([analysis.machine_note] if analysis.machine_note else []) + [
                analysis.verdict,
                str(path),
            ]:
                click.echo(line)
        else:
            from forensics.render.summary import print_diff_summary

            print_diff_summary(console(), analysis, str(path))
    failed = analysis.regression(fail_on) if fail_on else False
    if failed is None or failed:
        sys.exit(3 if failed is None else 1)


def _report_path(output, fmt: str | None, inputs) -> tuple[Path | None, str]:
    """Where the report goes (None: stdout, ``-o -``) and its format; refuses a report name that is an input.

    Raises:
        BadInputError: ``-o`` names one of the inputs, or a suffix of no report format.
    """
    from forensics.errors import BadInputError
    from forensics.render import report

    if output == "-":
        return None, fmt or "json"
    path = output or Path(f"{_DEFAULT_NAME}.{fmt or 'html'}")
    fmt = report.format_for(path, fmt)
    for given in inputs:
        if path.exists() and Path(given).exists() and path.resolve() == Path(given).resolve():
            raise BadInputError(
                f"-o {path} is one of the input snapshots; choose another report name"
            )
    return path, fmt
