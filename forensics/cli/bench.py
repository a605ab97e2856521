"""``forensics bench`` (run the canary or the user's step) and ``forensics bench compare``.

``bench`` is a click group whose own callback is the run (so ``forensics
bench -o a.json`` runs the canary) with one subcommand, ``compare``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable

import click

from forensics.cli.common import console, error_boundary, parse_threshold
from forensics.cli.options import step_options
from forensics.cli.types import NON_NEGATIVE, OUTPUT_FILE, POSITIVE, PathArg
from forensics.render.bench import print_comparison, print_results


def _parse_env(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    from forensics.errors import BadInputError

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BadInputError(f"{option} {pair!r}: expected NAME=VALUE, e.g. NCCL_P2P_DISABLE=1")
        out[key] = value
    return out


@contextlib.contextmanager
def _progress(total: int, what: str, quiet: bool, last: Callable[..., str]):
    """A progress bar on stderr over ``total`` fresh processes, shown for the block (none when ``quiet``).

    Yields the ``on_process`` callback for the run: each call advances the bar by one and shows
    ``last(*args)`` (the callback's own arguments) after it; with ``quiet`` it does nothing.
    """
    if quiet:
        yield lambda *args: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    prog = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
        console=console(stderr=True),
        transient=True,
    )
    task = prog.add_task(what, total=total, last="")
    prog.start()
    try:
        yield lambda *args: prog.update(task, advance=1, last=last(*args))
    finally:
        prog.stop()


@click.group(
    invoke_without_command=True,
    epilog="Inconclusive (exit 3)? docs/inconclusive.md says what to do.",
)
@step_options(
    cmd_help='Benchmark your step: a command printing JSON lines {"metric": "verify_ms", "value": 19.3} '
    "(or use --metric-regex).",
    callable_help="Benchmark a Python function, timed in-process.",
    unit=True,
    timeout_help="Per-process timeout, s.",
    threshold_help="With --b-env: practical threshold.",
)
@click.option(
    "--budget",
    "budget_s",
    type=POSITIVE,
    default=75.0,
    show_default=True,
    help="Wall seconds per side; no new process starts past it (at least 5 always run).",
)
@click.option(
    "--device",
    type=click.Choice(["cuda", "cpu"]),
    help="Canary device (default: cuda if a GPU is seen).",
)
@click.option(
    "--tp",
    type=int,
    help="Tensor-parallel ranks, one per GPU (default: all visible GPUs; 2 on CPU).",
)
@click.option("--layers", type=int, help="Decoder layers (GPU default 16).")
@click.option("--hidden", type=int, help="Hidden size (GPU default 4096).")
@click.option("--heads", type=int, help="Attention heads (GPU default 32).")
@click.option("--ffn", type=int, help="MLP width (GPU default 14336).")
@click.option(
    "--draft-tokens", type=int, help="k draft tokens; the step verifies k+1 positions (default 4)."
)
@click.option("--batch", type=int, help="Sequences per verify step (GPU default 4).")
@click.option("--kv-len", type=int, help="Cached positions attended over (GPU default 2048).")
@click.option("--blocks", type=int, help="Timed blocks per metric per process (GPU default 30).")
@click.option(
    "--block-ms", type=POSITIVE, help="Target length of a timed block, >= 1 ms (GPU default 5)."
)
@click.option(
    "--warmup",
    "warmup_s",
    type=NON_NEGATIVE,
    help="Minimum warm-up per metric, s, before the convergence check (GPU default 0.2).",
)
@click.option(
    "--cuda-graph",
    is_flag=True,
    help="Capture the whole step, all-reduces included, in one CUDA graph "
    "(guarded by a timeout: this hangs on some torch/NCCL versions).",
)
@click.option(
    "--graph-timeout",
    "graph_timeout_s",
    type=POSITIVE,
    default=None,
    help="With --cuda-graph: seconds allowed for capture and all replays (default 60).",
)
@click.option(
    "--eager", is_flag=True, help="Launch the whole step eagerly (includes launch jitter; noisy)."
)
@click.option(
    "--env",
    "env_pairs",
    multiple=True,
    metavar="NAME=VALUE",
    help="Set for the canary's processes.",
)
@click.option(
    "--b-env",
    "b_env_pairs",
    multiple=True,
    metavar="NAME=VALUE",
    help="Run a second side B with these variables too, interleaved A B B A, and compare.",
)
@click.option(
    "--b-unset",
    "b_unset",
    multiple=True,
    metavar="NAME",
    help="Run a second side B without this variable (repeatable), interleaved, and compare.",
)
@click.option(
    "--b-cmd",
    metavar="COMMAND",
    help="With --cmd: side B runs this command instead (e.g. the same step in "
    "another checkout), interleaved A B B A, and compares.",
)
@click.option("--b-output", type=OUTPUT_FILE, help="Where side B is written.")
@click.option("-o", "--output", type=OUTPUT_FILE, help="Write the bench file here.")
@click.option("--label", default="", help="Free text stored in the bench file.")
@click.option(
    "--no-redact",
    is_flag=True,
    help="Keep secrets (tokens in --cmd or --env values) in the bench file.",
)
@click.option(
    "-q", "--quiet", is_flag=True, help="No progress bar or table; only the summary line."
)
@click.pass_context
@error_boundary
def bench(
    ctx,
    step,
    threshold,
    budget_s,
    eager,
    env_pairs,
    b_env_pairs,
    b_unset,
    b_cmd,
    b_output,
    output,
    label,
    no_redact,
    quiet,
    **canary,
):
    """Measure the verify step: the built-in canary (default), or your own step.

    Runs several fresh processes (median of per-process medians, IQR/median
    as the noise figure) while sampling GPU telemetry, and writes a
    forensics.bench/1 file with -o. Compare two files with
    'forensics bench compare A.json B.json'.

    With --b-env/--b-unset (canary or your step) or --b-cmd (your step), a
    second side B runs interleaved with A (A B B A, fresh processes) and the
    two are compared as 'bench compare' does.

    Exit codes: 0 ok (with a side B: B same or faster than A), 1 B slower,
    3 inconclusive (with a side B), 2 bad input, 130/143/129 Ctrl-C/SIGTERM/SIGHUP.
    """
    if ctx.invoked_subcommand is not None:
        return
    from forensics.bench import document
    from forensics.bench.compare import compare_docs
    from forensics.bench.request import BenchRequest, run_bench
    from forensics.errors import BadInputError

    req = BenchRequest(
        step,
        budget_s,
        canary,
        eager,
        _parse_env(env_pairs, "--env"),
        _side_b_env(b_env_pairs, b_unset),
        b_cmd,
        b_output,
        label,
        not no_redact,
    )
    req.check()
    if output is not None and b_output is not None and _same_file(output, b_output):
        raise BadInputError(
            f"-o {output} and --b-output {b_output} are the same file: side B would overwrite side A; "
            "give two names (e.g. -o a.json --b-output b.json)"
        )
    thr = parse_threshold(threshold)
    docs = run_bench(req, lambda total, what, last: _progress(total, what, quiet, last))
    if no_redact:
        click.echo(
            "forensics: redaction is off: the bench file may hold secrets (tokens in --cmd or --env)",
            err=True,
        )
    c = console()
    result = compare_docs(docs[0], docs[1], threshold=thr) if len(docs) == 2 else None
    if result is not None and not quiet:  # the answer first, each side's table after it
        print_comparison(c, result)
    for doc, path in zip(docs, (output, b_output)):
        print_results(c, doc) if not quiet else click.echo(doc["summary"])
        if path is not None:
            document.save(doc, path)
            if not quiet:
                c.print(f"wrote [bold]{path}[/bold]")
    if result is not None:
        if quiet:  # the summary line only, as --quiet promises
            click.echo(
                f"{result.headline}: {result.verdict.value} - {result.results[result.headline].sentence()}"
            )
        ctx.exit(result.exit_code)


def _same_file(a: Path, b: Path) -> bool:
    """True when the two output paths name one file (the same path, or links to one file)."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def _side_b_env(pairs: tuple[str, ...], unset: tuple[str, ...]) -> dict[str, str | None]:
    """``--b-env NAME=VALUE`` and ``--b-unset NAME`` as side B's variables (None: unset)."""
    from forensics.errors import BadInputError

    b_env: dict[str, str | None] = dict(_parse_env(pairs, "--b-env"))
    for name in unset:
        if not name or "=" in name:
            raise BadInputError(
                f"--b-unset {name!r}: give a variable name, e.g. --b-unset CUDA_LAUNCH_BLOCKING"
            )
        b_env[name] = None
    return b_env


@bench.command("compare", epilog="Inconclusive (exit 3)? docs/inconclusive.md says what to do.")
@click.argument("a", type=PathArg(path_type=Path))
@click.argument("b", type=PathArg(path_type=Path))
@click.option(
    "--threshold",
    default="5%",
    show_default=True,
    help="Practical threshold: a real change below it is 'small-slower'/'small-faster' (exit 0).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.pass_context
@error_boundary
def compare(ctx, a, b, threshold, as_json):
    """Compare bench files A (before) and B (after).

    Per result: ratio of medians with a bootstrap 95% CI over processes,
    Mann-Whitney U, the threshold, and an A/A noise check; GPU throttling or
    contention seen on one side is reported. Exit codes: 0 same, faster or a
    small real change (below the threshold), 1 slower, 3 inconclusive, 2 bad input.
    """
    import json

    from forensics.bench import document
    from forensics.bench.compare import compare_docs

    thr = parse_threshold(threshold)
    result = compare_docs(document.load(a), document.load(b), threshold=thr)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=1))
    else:
        print_comparison(console(), result)
    ctx.exit(result.exit_code)
