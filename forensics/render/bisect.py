"""Rendering a :class:`forensics.bisect.run.BisectResult` as HTML, Markdown or JSON.

All three read the same JSON tree (``BisectResult.to_json()``), swept by the
:class:`~forensics.redact.Redactor` (the step and setup commands may hold a
token). HTML and Markdown come from Jinja2 templates in the ``forensics_reports``
package (``bisect.html.j2``, autoescape on; ``bisect.md.j2``); the HTML is
self-contained (inline CSS and SVG, no scripts, no external resources).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from forensics.render import templating
from forensics.render.report import format_from_name

# Geometry of the per-commit strip plot (SVG user units).
_LABEL_W, _PLOT_W, _ROW_H, _PAD = 190, 520, 22, 12


SCHEMA = "forensics.bisect/1"
"""The bisect report's ``schema`` line, as every other document forensics writes has one."""


def report_data(result) -> dict:
    """The redacted JSON tree of ``result`` under a ``schema`` (:data:`SCHEMA`), ``tool`` (name, version) and
    ``created`` (UTC) head, as snapshots and diff reports have, plus ``redactions`` (where and why, never
    the value)."""
    from forensics import __version__
    from forensics.docfile import utc_now
    from forensics.redact import Redactor

    red = Redactor()
    data = {
        "schema": SCHEMA,
        "created": utc_now(),
        "tool": {"name": "forensics", "version": __version__},
        **red.sweep(result.to_json()),
    }
    data["redactions"] = [r.to_json() for r in red.records]
    return data


def strip_plot(data: dict) -> dict:
    """Coordinates of the per-commit distribution plot: one row per measured commit, one dot per process."""
    rows = [r for r in data["records"] if r["samples"]]
    values = [v for r in rows for v in r["samples"]]
    if not values:
        return {"rows": [], "width": 0, "height": 0}
    lo, hi = min(values), max(values)
    span = (hi - lo) or abs(hi) or 1.0
    lo, hi = lo - 0.05 * span, hi + 0.05 * span

    def x(v: float) -> float:
        return round(_LABEL_W + (v - lo) / (hi - lo) * _PLOT_W, 1)

    out = []
    for i, r in enumerate(rows):
        y = _PAD + i * _ROW_H + _ROW_H / 2
        med = statistics.median(r["samples"])
        out.append(
            {
                "label": f"{r['commit']['short']} {r['class']}",
                "cls": r["class"],
                "y": y,
                "dots": [x(v) for v in r["samples"]],
                "median_x": x(med),
                "median": med,
                "n": len(r["samples"]),
            }
        )
    height = _PAD * 2 + len(rows) * _ROW_H + 24
    ticks = [
        {"x": x(lo + (hi - lo) * k / 4), "label": f"{lo + (hi - lo) * k / 4:.4g}"} for k in range(5)
    ]
    return {
        "rows": out,
        "width": _LABEL_W + _PLOT_W + 20,
        "height": height,
        "axis_y": height - 20,
        "ticks": ticks,
        "plot_x0": _LABEL_W,
        "plot_x1": _LABEL_W + _PLOT_W,
    }


def render(result, fmt: str) -> str:
    """The report text in ``fmt`` (``html``, ``md`` or ``json``)."""
    data = report_data(result)
    if fmt == "json":
        return json.dumps(data, indent=2, default=str) + "\n"
    name = "bisect.html.j2" if fmt == "html" else "bisect.md.j2"
    return templating.render(name, r=data, plot=strip_plot(data))


def write_report(result, path: Path) -> None:
    """Render ``result`` in the format named by ``path``'s suffix and write it atomically.

    Raises:
        BadInputError: unknown suffix, or the folder is missing or not writable.
    """
    from forensics.docfile import write_atomic

    # /dev/null, a FIFO: written where it is, in its suffix's format or HTML; a file: the usual file mode (umask), not 0600
    write_atomic(Path(path), render(result, format_from_name(path, in_place="html")))
