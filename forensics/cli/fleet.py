"""``forensics fleet snapshot``, ``forensics fleet report``, and ``forensics diff`` of two fleets:
a thin click layer over :mod:`forensics.fleet` (rendering in :mod:`forensics.render.fleet`)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click

from forensics.cli.common import check_repo, console, error_boundary
from forensics.cli.types import POSITIVE, OutputFile, PathArg
from forensics.docfile import no_folder
from forensics.options import probe_options
from forensics.render.terminal import (
    clean,  # records come from other machines: their text must not drive the terminal
)

EXIT_MISSING = 3  # the fleet file is written, some ranks are missing from it


@click.group()
def fleet() -> None:
    """Every rank and node of a distributed job: snapshot them all, find the outliers.

    Run 'fleet snapshot' under the launcher of the job (torchrun, srun,
    mpirun), then 'fleet report' on the file it wrote. See docs/fleet.md.
    """


@fleet.command("snapshot")
@click.option(
    "-o",
    "--output",
    type=OutputFile((".json",), kind="fleet file"),
    help="Fleet file rank 0 writes (default: forensics-fleet.json here; with --out-dir, none unless given).",
)
@click.option(
    "--out-dir",
    type=PathArg(file_okay=False, path_type=Path),
    help="Shared folder: every rank writes rank-NNNNN.json there, no store needed (nodes that cannot "
    "form a process group).",
)
@click.option(
    "--bench",
    "with_bench",
    is_flag=True,
    help="Every rank times the per-GPU canary components "
    "(matmul, H2D/D2H copies) while its node's GPUs are sampled, so clocks and PCIe are judged under load.",
)
@click.option("--label", help="Free text stored in the fleet file and node snapshots.")
@click.option(
    "--probe",
    "only",
    multiple=True,
    metavar="NAME",
    help="Node snapshot: run only this probe (repeatable).",
)
@click.option(
    "--skip",
    multiple=True,
    metavar="NAME",
    help="Node snapshot: do not run this probe (repeatable).",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=POSITIVE,
    default=10.0,
    show_default=True,
    help="Per-probe timeout of the node snapshot, seconds.",
)
@click.option(
    "--gather-timeout",
    "gather_timeout_s",
    type=POSITIVE,
    default=300.0,
    show_default=True,
    help="How long rank 0 waits for every rank's record; later ones are recorded as missing.",
)
@click.option(
    "--repo",
    type=PathArg(path_type=Path),
    help="Git repository of the workload (default: the current folder if it is in one).",
)
@click.option(
    "--sample",
    "sample_s",
    type=POSITIVE,
    default=None,
    metavar="SECONDS",
    help="GPU probe: also sample every GPU for this long during the node snapshot.",
)
@click.option(
    "--deep",
    is_flag=True,
    help="Node snapshot: import torch to confirm the CUDA/NCCL versions it loads.",
)
@click.option("--no-redact", is_flag=True, help="Keep secrets in the records.")
@click.option(
    "-v", "--verbose", is_flag=True, help="Every rank prints its progress (default: rank 0 only)."
)
@click.option("-q", "--quiet", is_flag=True, help="Rank 0 prints only the output path.")
@error_boundary
def snapshot(
    output,
    out_dir,
    with_bench,
    label,
    only,
    skip,
    timeout_s,
    gather_timeout_s,
    repo,
    sample_s,
    deep,
    no_redact,
    verbose,
    quiet,
):
    """Snapshot every node of the job (local rank 0 of each) and gather the records on rank 0.

    Each rank records the NCCL/CUDA variables it sees and its GPU; local
    rank 0 takes the node's full snapshot; with --bench every rank times its
    GPU. Rank 0 waits up to --gather-timeout and names the ranks that never
    reported. Exit code 3 when some are missing (the file is still written).
    """
    from forensics.errors import BadInputError
    from forensics.fleet.launcher import detect
    from forensics.fleet.snapshot import Options, open_channel, run_rank, write_fleet

    pl = detect()
    _check_snapshot_options(sample_s, only, skip, repo, with_bench, output, out_dir)
    gather = output is not None or out_dir is None
    out = output or _default_output()
    if gather and pl.rank == 0 and not (out.parent if str(out.parent) else Path(".")).is_dir():
        raise BadInputError(no_folder(out))
    channel, kind = open_channel(pl, out_dir, gather_timeout_s)
    opts = Options(
        label=label,
        only=tuple(only),
        skip=tuple(skip),
        timeout_s=timeout_s,
        probe_options=probe_options(repo=str(repo) if repo else None, sample_s=sample_s, deep=deep),
        bench=with_bench,
        redact=not no_redact,
        gather_timeout_s=gather_timeout_s,
    )
    talk = (verbose or pl.rank == 0) and not quiet
    rec, got = run_rank(
        pl,
        opts,
        channel,
        gather=gather,
        progress=lambda msg: click.echo(f"forensics fleet: {msg}", err=True) if talk else None,
    )
    for err in rec["errors"]:
        click.echo(f"forensics fleet: rank {pl.rank}: {err['where']}: {err['error']}", err=True)
    if got is None:
        if out_dir is not None and pl.rank == 0 and not quiet:
            click.echo(
                f"forensics fleet: records in {out_dir}; read them with 'forensics fleet report {out_dir}'",
                err=True,
            )
        return
    _print_gathered(got, pl.world_size, write_fleet(out, pl, got, channel=kind, opts=opts), quiet)
    if got.interrupted is not None:
        raise got.interrupted
    if got.missing:
        sys.exit(EXIT_MISSING)


def _check_snapshot_options(sample_s, only, skip, repo, with_bench, output, out_dir) -> None:
    """Refuse what ``fleet snapshot`` cannot do before any rank starts work (one line each, exit 2)."""
    import importlib.util

    from forensics.errors import BadInputError

    if sample_s is not None and not 0 < sample_s <= 600:
        raise BadInputError(f"--sample must be between 0 and 600 seconds, got {sample_s:g}")
    _check_probe_names(only, skip)
    check_repo(repo)
    if with_bench and importlib.util.find_spec("torch") is None:
        raise BadInputError("--bench needs PyTorch in this Python: pip install 'forensics[bench]'")
    if (
        output is not None
        and out_dir is not None
        and out_dir.is_dir()
        and output.resolve().parent == out_dir.resolve()
        and output.match("rank-*.json")
    ):
        raise BadInputError(
            f"-o {output} is a rank record's name in --out-dir {out_dir}; the fleet file would "
            "replace that rank's record: choose another name"
        )


def _print_gathered(got, world_size: int, path: Path, quiet: bool) -> None:
    """What rank 0 gathered: the counts and the file (only the path with ``quiet``), the missing ranks,
    then up to 5 warnings of two machines sharing a node name (stderr)."""
    from forensics.fleet.snapshot import name_clashes

    nodes = len({r["node"] for r in got.records})
    if quiet:
        click.echo(str(path))
    else:
        click.echo(
            f"gathered {len(got.records)} of {world_size} ranks from {nodes} node(s) in "
            f"{got.waited_s:.1f} s; wrote {path}"
        )
        for m in got.missing[:10]:
            click.echo(
                clean(
                    f"  missing rank {m['rank']}{' (node ' + m['node'] + ')' if m.get('node') else ''}: "
                    f"{m['reason']}"
                )
            )
        if len(got.missing) > 10:
            click.echo(f"  ... and {len(got.missing) - 10} more missing")
    for warning in name_clashes(got.records)[:5]:
        click.echo(clean(f"forensics fleet: warning: {warning}"), err=True)


def _default_output() -> Path:
    """``forensics-fleet.json`` here, or ``forensics-fleet-2.json``... when taken (never overwritten)."""
    from forensics.docfile import unused_path

    return unused_path(Path("."), "forensics-fleet")


def _check_probe_names(only, skip) -> None:
    """--probe/--skip name installed probes (checked before any rank starts work)."""
    from forensics.errors import BadInputError
    from forensics.registry import load_probes

    if not only and not skip:
        return
    loaded, failures = load_probes()
    known = {p.name for p in loaded} | {f.name for f in failures}
    for name in list(only) + list(skip):
        if name not in known:
            raise BadInputError(
                f"no probe named {name!r}; installed: {', '.join(sorted(known))} "
                "(see 'forensics probes')"
            )


@fleet.command("report")
@click.argument(
    "sources", nargs=-1, required=True, type=PathArg(path_type=Path), metavar="SOURCE..."
)
@click.option(
    "-o",
    "--output",
    type=OutputFile(None, kind="report", allow_dash=True),
    help="Report file: .html (default forensics-fleet-report.html), .md or .json; '-' for stdout "
    "(JSON unless --format says otherwise).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md", "json"]),
    help="Format, if not from the name.",
)
@click.option(
    "--prom",
    type=OutputFile(None, kind="Prometheus file"),
    help="Also write the findings in the Prometheus text format to this file.",
)
@click.option(
    "--baseline",
    type=PathArg(path_type=Path),
    help="A fleet file/folder or a snapshot to compare with: what changed fleet-wide, what on a few nodes.",
)
@click.option(
    "--fail-on",
    type=click.Choice(["outlier", "never"]),
    default="never",
    show_default=True,
    help="Exit 1 when an outlier is found (for CI).",
)
@click.option(
    "--expect-nodes",
    type=click.IntRange(1),
    metavar="N",
    help="Node snapshots: the job had N nodes; those without a snapshot are reported missing.",
)
@click.option(
    "--hostfile",
    type=PathArg(dir_okay=False, path_type=Path),
    help="Node snapshots: the hosts expected, one per line (scontrol show hostnames, a pdsh or MPI "
    "hostfile); those without a snapshot are named missing.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print only the verdict.")
@error_boundary
def report(sources, output, fmt, prom, baseline, fail_on, expect_nodes, hostfile, quiet):
    """Find the outliers of a fleet: SOURCE is a fleet file, an --out-dir folder, or node snapshots.

    Node snapshots are plain 'forensics snapshot' files, one per node (srun,
    pdsh, ansible: snaps/%N.json), given as files or their folder (.json,
    .yaml, .json.gz); a node is named by its hostname. A damaged file is
    skipped and named among the missing nodes. Categorical fields (driver,
    CUDA, NCCL, torch, GPU model, VBIOS, NCCL_* of each rank, git HEAD,
    kernel) are grouped by value against the majority; numbers per GPU
    (PCIe, SM clock, power limit, throttle time, ECC/replay counters, bench
    figures) against peers of the same model, median/MAD. Exit codes: 0
    done (also with missing ranks or nodes, which the report names), 1
    outliers with --fail-on outlier, 2 bad input (no file readable), 3 no
    record at all.
    """
    from forensics.docfile import write_atomic
    from forensics.fleet.report import report_of
    from forensics.render.fleet import render
    from forensics.render.report import format_for

    out = output or Path("forensics-fleet-report.html")
    kind = (fmt or "json") if out == "-" else format_for(out, fmt)
    _check_report_outputs(out, prom, list(sources) + ([baseline] if baseline is not None else []))
    t0 = time.perf_counter()
    rep = report_of(sources, baseline=baseline, expect_nodes=expect_nodes, hostfile=hostfile)
    if out == "-":  # the report is the output: the summary goes to stderr, or nowhere with -q
        sys.stdout.write(render(rep, kind))
        sys.stdout.flush()
    else:
        write_atomic(out, render(rep, kind))
    if prom is not None:
        from forensics.render.prometheus import render as prom_text

        write_atomic(prom, prom_text(rep))
    if out == "-":
        if not quiet:
            click.echo(clean(rep.verdict), err=True)
    elif quiet:
        click.echo(clean(rep.verdict))
    else:
        _print_summary(rep, out, prom, time.perf_counter() - t0)
    if fail_on == "outlier" and rep.real_outliers:
        sys.exit(1)


def _check_report_outputs(out, prom, inputs) -> None:
    """Refuse a report or Prometheus file that would overwrite an input, or a report name given to ``--prom``."""
    for opt, given in (("-o", out), ("--prom", prom)):
        _not_an_input(given, opt, inputs)
    if prom is not None and prom.suffix.lower() in (".html", ".json", ".md"):
        raise click.BadParameter(
            f"{prom} looks like a report name; give the Prometheus file another name "
            "(e.g. fleet.prom)",
            param_hint="--prom",
        )


def _not_an_input(path, option: str, inputs) -> None:
    """Refuse an output that would overwrite an input: the fleet file itself, or a record of its folder.

    Raises:
        forensics.errors.BadInputError: ``path`` is one of ``inputs``, a ``rank-*.json`` inside one, or a
            ``.json``/``.yaml``/``.json.gz`` file inside a folder of node snapshots.
    """
    from forensics.errors import BadInputError

    if path is None or path == "-":
        return
    from forensics.fleet.nodes import is_node_folder, stem

    for (
        given
    ) in inputs:  # a report written among node snapshots would be read as a damaged one next time
        g = Path(given)
        if (
            os.path.isdir(g)
            and Path(path).resolve().parent == g.resolve()
            and stem(Path(path)) != Path(path).name
            and is_node_folder(g)
        ):
            raise BadInputError(
                f"{option} {path} is inside the folder of node snapshots {given}; the next report "
                "would read it as a node's snapshot: write it elsewhere"
            )
    if not os.path.exists(
        path
    ):  # os.path never raises: an input refused by the system is the loader's to name
        return
    target = Path(path).resolve()
    for given in inputs:
        g = Path(given)
        if not os.path.exists(g):
            continue
        g = g.resolve()
        # -o a link (report.html -> snaps/gpu-a17.json): its target, a record or node snapshot of a folder given
        if target == g or (
            os.path.isdir(g)
            and target.parent == g
            and (target.match("rank-*.json") or (stem(target) != target.name and is_node_folder(g)))
        ):
            what = given if target == g else f"{target.name} in {given}, where it leads"
            raise BadInputError(
                f"{option} {path} is one of the inputs ({what}); writing there would destroy it, "
                "choose another name"
            )


def _print_summary(rep, out: Path, prom: Path | None, seconds: float) -> None:
    from rich.markup import escape

    con = console()
    con.print(f"[bold]{escape(clean(rep.verdict))}[/bold]")
    for i, o in enumerate(rep.real_outliers[:10], 1):
        con.print(
            f"  {i}. {escape('[' + o.hypothesis + ']')} {escape(clean(o.summary))}  (score {o.score:.2f})"
        )
    if len(rep.real_outliers) > 10:
        con.print(f"  ... {len(rep.real_outliers) - 10} more in the report")
    for note in rep.notes:
        con.print(f"  note: {escape(clean(note))}")
    if rep.baseline:
        con.print(f"baseline: {escape(clean(rep.baseline['verdict']))}")
    con.print(
        f"wrote [bold]{escape(str(out))}[/bold]"
        + (f" and {escape(str(prom))}" if prom else "")
        + f" ({seconds:.1f} s)"
    )


def is_fleet(path: Path) -> bool:
    """True if ``path`` is a fleet file, an ``--out-dir`` folder or a folder of node snapshots
    (``forensics diff`` hands those over)."""
    from forensics.fleet.document import is_fleet_file
    from forensics.fleet.nodes import is_node_folder

    return is_fleet_file(Path(path)) or is_node_folder(Path(path))


def diff_fleets(
    before: Path,
    after: Path,
    output: Path | str | None,
    fmt: str | None,
    fail_on: str | None,
    quiet: bool,
) -> int:
    """``forensics diff`` when an input is a fleet: what changed fleet-wide, what on a few nodes.

    A plain snapshot on the other side is a one-node fleet
    (:func:`forensics.fleet.compare.compare_files`). Writes the report (``-o``;
    ``-`` for stdout; default ``forensics-fleet-diff.<format>``) and prints the verdict.

    Returns:
        the exit code: 1 with ``--fail-on`` (``regression`` or ``any``) when anything changed, else 0.

    Raises:
        forensics.errors.BadInputError: an input is neither a fleet nor a snapshot, or is damaged.
    """
    from forensics.docfile import write_atomic
    from forensics.fleet.compare import compare_files
    from forensics.render.fleet import render_diff
    from forensics.render.report import format_for

    _not_an_input(output or Path(f"forensics-fleet-diff.{fmt or 'html'}"), "-o", [before, after])
    c = compare_files(before, after)
    if output == "-":
        sys.stdout.write(render_diff(c, str(before), str(after), fmt or "json"))
    else:
        path = Path(output) if output else Path(f"forensics-fleet-diff.{fmt or 'html'}")
        write_atomic(path, render_diff(c, str(before), str(after), format_for(path, fmt)))
        click.echo(clean(c["verdict"]))
        if not quiet:
            for w in c["fleet_wide"][:10]:
                click.echo(
                    clean(
                        f"  fleet-wide: {w['label']}: {w['before']} -> {w['after']} ({w['share']:.0%} of units)"
                    )
                )
            for f in c["few_nodes"][:10]:
                click.echo(
                    clean(
                        f"  on {f['count']} unit(s): {f['label']}: {f['before']} -> {f['after']} "
                        f"({', '.join(f['nodes'][:4])}{' ...' if len(f['nodes']) > 4 else ''})"
                    )
                )
        click.echo(str(path))
    changed = bool(c["fleet_wide"] or c["few_nodes"] or c["nodes_added"] or c["nodes_removed"])
    return 1 if fail_on and changed else 0
