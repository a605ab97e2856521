"""``forensics env``: what the launching process and its workers see of NCCL/CUDA/torch variables."""

from __future__ import annotations

import click

from forensics.cli.common import console, error_boundary
from forensics.cli.types import OUTPUT_FILE, POSITIVE
from forensics.options import probe_options


@click.command()
@click.option(
    "--launcher",
    metavar="CMD",
    help="Start the workers under this command prefix, e.g. "
    "'torchrun --nproc-per-node 2', 'srun -N 2', or a wrapper script; each rank reports.",
)
@click.option(
    "--nccl-init",
    is_flag=True,
    help="Workers initialise a real NCCL communicator (NCCL_DEBUG=INFO), "
    "all-reduce once, and report what NCCL read; gloo on a machine without GPUs.",
)
@click.option(
    "--deep",
    is_flag=True,
    help="Also check torch.multiprocessing.spawn (imports torch in a child).",
)
@click.option(
    "--select",
    "extra",
    multiple=True,
    metavar="NAME|PREFIX_",
    help="Also record this variable (or every variable with this prefix); repeatable.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=POSITIVE,
    default=120.0,
    show_default=True,
    help="Seconds before the workers (and the launcher's process group) are killed.",
)
@click.option("-o", "--output", type=OUTPUT_FILE, help="Also write JSON here.")
@click.option("--no-redact", is_flag=True, help="Keep secrets in the output.")
@error_boundary
def env(launcher, nccl_init, deep, extra, timeout_s, output, no_redact):
    """Show NCCL/CUDA/torch variables as the launching process and each fresh worker see them.

    Workers are started through multiprocessing spawn and forkserver, a plain
    subprocess, torch.multiprocessing.spawn (with --deep, --launcher or
    --nccl-init) and, with --launcher, under your own launcher (one column per
    rank). Values that differ from this process are shown in red and judged as
    nccl.env-propagation. Exit code 0 (2 for a bad option).
    """
    from forensics import __version__, docfile
    from forensics import snapshot as snap
    from forensics.env.data import collect_nccl_env
    from forensics.env.judge import judge_propagation
    from forensics.errors import BadInputError
    from forensics.redact import Redactor

    if timeout_s <= 0:
        raise BadInputError(f"--timeout must be positive, got {timeout_s:g}")
    for name in extra:
        if not name.strip() or "=" in name or any(c.isspace() for c in name):
            raise BadInputError(
                f"--select {name!r}: give a variable name or a prefix, e.g. --select HF_HOME or "
                "--select MY_APP_"
            )
    if launcher is not None:
        from forensics.step.command import check_launcher

        check_launcher(launcher)
    redactor = Redactor(enabled=not no_redact)
    errors: list[dict[str, str]] = []
    options = probe_options(
        launcher=launcher, nccl_init=nccl_init, deep=deep, env_select_extra=list(extra)
    )
    c = console(stderr=True)
    with c.status("starting workers..."):
        data = collect_nccl_env(
            options, redactor, timeout_s, lambda f, m: errors.append({"field": f, "error": m})
        )
    findings = judge_propagation(None, data)
    print_env_output(data, findings, errors)
    if output is not None:
        doc = {
            "schema": "forensics.env/1",
            "created": docfile.utc_now(),
            "tool": {"name": "forensics", "version": __version__},
            "machine": snap.machine_identity(),
            "options": {k: v for k, v in options.items() if v not in (None, False, [], ())},
            "data": redactor.sweep(data, "data"),
            "errors": errors,
            "findings": [f.to_json() for f in findings],
            "redaction": "on" if redactor.enabled else "off (--no-redact)",
            "redactions": [r.to_json() for r in redactor.records],
        }
        docfile.save(doc, output)
        console().print(f"wrote [bold]{output}[/bold]")


def print_env_output(data, findings, errors) -> None:
    """Print the table, findings and field errors to stdout."""
    from rich.markup import escape

    from forensics.render.env import print_env

    c = console()
    print_env(c, data, findings)
    for e in errors:
        c.print(f"[yellow]{escape(e['field'])}[/yellow]: {escape(e['error'])}")
