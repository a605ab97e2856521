"""``forensics show``: a readable summary of a snapshot file, or of a text pasted from a ticket."""

from __future__ import annotations

from pathlib import Path

import click

from forensics.cli.common import error_boundary
from forensics.cli.types import PathArg


@click.command()
@click.argument("file", type=PathArg(path_type=Path))
@error_boundary
def show(file):
    """Print a readable summary of a snapshot FILE (or of a text pasted from a ticket, imported on the fly)."""
    from forensics.fleet.nodes import is_node_folder
    from forensics.importers import load as load_any
    from forensics.render.terminal import print_snapshot_summary

    if is_node_folder(file):  # never raises
        from forensics.errors import BadInputError

        raise BadInputError(
            f"{file}: a folder of node snapshots, not one snapshot; read them together with "
            f"'forensics fleet report {file}', or give one of its files"
        )
    doc = load_any(file)
    print_snapshot_summary(doc, detail=True)
