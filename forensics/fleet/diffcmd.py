"""``forensics diff`` when an input is a fleet file or folder: what changed fleet-wide, what on a few nodes.

The single-machine diff hands over to :func:`run` when either input is a fleet
(:func:`forensics.fleet.document.is_fleet_file`); a plain snapshot on the
other side is a one-node fleet (:func:`forensics.fleet.compare.load_baseline`).
JSON (``forensics.fleet-diff/1``): the :func:`forensics.fleet.compare.compare`
dict plus ``schema``, ``before``, ``after``. Exit codes as ``diff``: with
``--fail-on regression`` or ``any``, 1 when anything changed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from forensics import __version__

JSON_SCHEMA = "forensics.fleet-diff/1"


def is_fleet(path: Path) -> bool:
    """True if ``path`` is a fleet file or an ``--out-dir`` folder of rank records."""
    from forensics.fleet.document import is_fleet_file

    return is_fleet_file(Path(path))


def render(c: dict[str, Any], before: str, after: str, fmt: str) -> str:
    """The comparison as ``json``, ``md`` or ``html`` text."""
    from forensics.fleet.render import _env
    from forensics.docfile import finite_json, utc_now

    if fmt == "json":
        doc = {"schema": JSON_SCHEMA, "tool": {"name": "forensics", "version": __version__},
               "before": before, "after": after, **c}
        return json.dumps(finite_json(doc), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    name = "fleet-diff.html.j2" if fmt == "html" else "fleet-diff.md.j2"
    return _env(fmt == "html").get_template(name).render(c=c, before=before, after=after, version=__version__,
                                                         generated=utc_now())


def run(before: Path, after: Path, output: Path | str | None, fmt: str | None, fail_on: str | None,
        quiet: bool, echo) -> int:
    """Compare two fleets (or a fleet and a snapshot), write the report; returns the exit code.

    Args:
        output: report path, ``"-"`` for stdout, or None (``forensics-fleet-diff.<fmt>``).
        echo: prints one line (the CLI's ``click.echo``).

    Raises:
        forensics.errors.BadInputError: an input is neither a fleet nor a snapshot, or is damaged.
    """
    from forensics.fleet.compare import compare, load_baseline
    from forensics.render.report import format_for
    from forensics.docfile import write_atomic

    c = compare(load_baseline(before), load_baseline(after))
    if output == "-":
        sys.stdout.write(render(c, str(before), str(after), fmt or "json"))
    else:
        path = Path(output) if output else Path(f"forensics-fleet-diff.{fmt or 'html'}")
        kind = format_for(path, fmt)
        write_atomic(path, render(c, str(before), str(after), kind))
        echo(c["verdict"])
        if not quiet:
            for w in c["fleet_wide"][:10]:
                echo(f"  fleet-wide: {w['label']}: {w['before']} -> {w['after']} ({w['share']:.0%} of units)")
            for f in c["few_nodes"][:10]:
                echo(f"  on {f['count']} unit(s): {f['label']}: {f['before']} -> {f['after']} "
                     f"({', '.join(f['nodes'][:4])}{' ...' if len(f['nodes']) > 4 else ''})")
        echo(str(path))
    changed = bool(c["fleet_wide"] or c["few_nodes"] or c["nodes_added"] or c["nodes_removed"])
    return 1 if fail_on and changed else 0
