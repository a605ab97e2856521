"""``forensics probes``: the installed probes, what each records, whether it applies here."""

from __future__ import annotations

import click

from forensics.cli.common import console, error_boundary


@click.command()
@error_boundary
def probes():
    """List the installed probes, what each records, and whether it applies here."""
    from rich.table import Table

    from forensics.probe import ProbeContext
    from forensics.registry import load_probes

    loaded, failures = load_probes()
    table = Table(show_header=True, header_style="bold")
    for col in ("probe", "from", "applies here", "what it records"):
        table.add_column(col)
    for lp in loaded:
        try:
            reason = lp.probe.available(ProbeContext({}))
        except Exception as exc:  # an applicability check that crashes is reported, not raised
            reason = f"check failed: {type(exc).__name__}: {exc}"
        table.add_row(
            lp.name, lp.distribution, "yes" if not reason else f"no: {reason}", lp.probe.description
        )
    for f in failures:
        table.add_row(f.name, f.distribution, f"failed to load: {f.error}", "")
    console().print(table)
