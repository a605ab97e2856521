"""The fleet report and the diff of two fleets as HTML, Markdown or JSON.

Reads a :class:`forensics.fleet.report.FleetReport` (:func:`render`) or the
dict of :func:`forensics.fleet.compare.compare` (:func:`render_diff`). HTML is
one self-contained file (inline CSS, no script, no network), Jinja2 with
autoescape on: node names, variable values and every other string are escaped.
Templates: ``reports/templates/fleet.html.j2``, ``fleet.md.j2``,
``fleet-diff.html.j2``, ``fleet-diff.md.j2``. Nothing here judges.
"""

from __future__ import annotations

import json
from typing import Any

from forensics import __version__
from forensics.docfile import finite_json, utc_now
from forensics.render import templating

TOP_N = 25  # outliers shown as cards; the rest in a table
DIFF_SCHEMA = "forensics.fleet-diff/1"


def context(rep) -> dict[str, Any]:
    """The template variables."""
    from forensics.fleet.outliers import OutlierKind

    return {
        "source": rep.source,
        "created": rep.created,
        "verdict": rep.verdict,
        "counts": rep.counts,
        "outliers_real": rep.real_outliers,
        "mixed": [o for o in rep.outliers if o.kind == OutlierKind.MIXED],
        "missing": rep.missing,
        "notes": rep.notes,
        "heat": rep.heat,
        "checked": rep.checked,
        "peers": rep.peers,
        "baseline": rep.baseline,
        "top_n": TOP_N,
        "version": __version__,
        "generated": utc_now(),
        "unit": getattr(rep, "unit", "rank"),
    }


def render(rep, fmt: str) -> str:
    """``html``, ``md`` or ``json`` text of the report."""
    if fmt == "json":
        return (
            json.dumps(finite_json(rep.to_json()), indent=1, ensure_ascii=False, allow_nan=False)
            + "\n"
        )
    name = "fleet.html.j2" if fmt == "html" else "fleet.md.j2"
    return templating.render(name, **context(rep))


def render_diff(c: dict[str, Any], before: str, after: str, fmt: str) -> str:
    """``json`` (``forensics.fleet-diff/1``: the comparison plus ``schema``, ``before``, ``after``),
    ``md`` or ``html`` text of a fleet comparison, secrets redacted (:class:`forensics.redact.Redactor`:
    the names of the inputs, ``snaps-<key>/``, and every string of the comparison)."""
    from forensics.redact import Redactor

    before, after, c = Redactor().sweep((before, after, c))
    if fmt == "json":
        doc = {
            "schema": DIFF_SCHEMA,
            "tool": {"name": "forensics", "version": __version__},
            "before": before,
            "after": after,
            **c,
        }
        return json.dumps(finite_json(doc), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    name = "fleet-diff.html.j2" if fmt == "html" else "fleet-diff.md.j2"
    return templating.render(
        name, c=c, before=before, after=after, version=__version__, generated=utc_now()
    )
