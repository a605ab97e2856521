"""``forensics show``: a readable summary of a snapshot file."""

from __future__ import annotations

from pathlib import Path

import click

from forensics.cli.common import console, error_boundary


@click.command()
@click.argument("file", type=click.Path(path_type=Path))
@error_boundary
def show(file):
    """Print a readable summary of a snapshot FILE."""
    from forensics import snapshot as snap
    from forensics.render.terminal import print_snapshot_summary

    doc = snap.load(file)
    print_snapshot_summary(console(), doc, detail=True)
