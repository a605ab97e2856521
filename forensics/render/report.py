"""The root-cause report of ``forensics diff``: HTML, Markdown and JSON from one :class:`Analysis`.

- HTML: one self-contained file (inline CSS and SVG, no script, no network);
  Jinja2 with autoescape on, so every value (commit subjects, environment
  values) is escaped. Template: ``reports/templates/report.html.j2``.
- Markdown: the same content, compact, with ``<details>`` blocks for the long
  parts; values go through :func:`forensics.render.templating.md_escape`. Template: ``report.md.j2``.
- JSON: :meth:`forensics.diff.ledger.Analysis.to_json` (the stable interface).

Rendering reads the analysis only; nothing here judges or collects.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from forensics import __version__
from forensics.docfile import utc_now, write_atomic
from forensics.errors import BadInputError
from forensics.model import HypothesisStatus
from forensics.render import templating
from forensics.render.templating import show_value

FORMATS = ("html", "md", "json")
_SUFFIX = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md", ".json": "json"}


def format_for(path: Path, fmt: str | None = None) -> str:
    """The output format: ``fmt`` when given, else from the file suffix.

    Raises:
        BadInputError: unknown format or suffix.
    """
    if fmt:
        if fmt not in FORMATS:
            raise BadInputError(f"--format {fmt}: expected one of {', '.join(FORMATS)}")
        implied = _SUFFIX.get(Path(path).suffix.lower())
        if implied is not None and implied != fmt:
            raise BadInputError(
                f"--format {fmt} does not match the file name {path} (a {implied} name); "
                "change one of them"
            )
        return fmt
    try:
        return _SUFFIX[Path(path).suffix.lower()]
    except KeyError:
        from forensics.docfile import written_in_place

        if written_in_place(Path(path)):  # -o /dev/null, a FIFO: the default format
            return "html"
        raise BadInputError(
            f"{path}: cannot tell the report format from the name; end it in .html, .md or "
            ".json, or give --format"
        ) from None


def format_from_name(path: Path, in_place: str | None = None) -> str:
    """``html``, ``md`` or ``json`` from the file name alone (the bisect and investigate reports, which
    have no --format).

    Args:
        path: the output's name.
        in_place: the format of an output written in place (``/dev/null``, a FIFO:
            :func:`forensics.docfile.written_in_place`) whose name has none of the suffixes;
            None: such a name is refused like any other.

    Raises:
        BadInputError: any other suffix.
    """
    fmt = _SUFFIX.get(Path(path).suffix.lower())
    if fmt is None:
        from forensics.docfile import written_in_place

        if in_place is not None and written_in_place(Path(path)):
            return in_place
        raise BadInputError(f"-o {path}: the report name must end in .html, .md or .json")
    return fmt


def _fmt(x: float) -> str:
    return f"{x:.4g}" if math.isfinite(x) else str(x)


def strip_chart(
    before: list[float], after: list[float], width: int = 224, row_h: int = 24
) -> dict[str, Any]:
    """Geometry of a two-row strip + box plot of per-process medians (numbers only; the template draws it).

    Returns:
        ``{"width", "height", "rows": [{"label", "y", "q1", "q3", "med", "points": [x...]}], "ticks": [{"x", "text"}]}``
        with x in pixels.
    """
    from forensics.stats import summarize

    values = before + after
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
    lo, hi = lo - pad, hi + pad
    left, right = 50, width - 14

    def x(v: float) -> float:
        return round(left + (v - lo) / (hi - lo) * (right - left), 1)

    rows = []
    for i, (label, xs) in enumerate((("before", before), ("after", after))):
        s = summarize(xs)
        y = 14 + i * (row_h + 8)
        rows.append(
            {
                "label": label,
                "y": y,
                "h": row_h,
                "q1": x(s.q1),
                "q3": x(s.q3),
                "med": x(s.median),
                "points": [
                    {"x": x(v), "y": y + row_h / 2 + ((j % 5) - 2) * 2.5} for j, v in enumerate(xs)
                ],
            }
        )
    ticks = [{"x": x(v), "text": _fmt(v)} for v in (lo + pad, (lo + hi) / 2, hi - pad)]
    return {
        "width": width,
        "height": 14 + 2 * (row_h + 8) + 16,
        "rows": rows,
        "ticks": ticks,
        "axis_y": 14 + 2 * (row_h + 8),
    }


def context(analysis) -> dict[str, Any]:
    """The template context: the JSON document plus display-ready pieces.

    Args:
        analysis: a :class:`forensics.diff.ledger.Analysis`.
    """
    doc = analysis.to_json()
    hyps = doc["hypotheses"]
    by_status = {s.value: [h for h in hyps if h["status"] == s.value] for s in HypothesisStatus}
    groups: dict[str, list[dict[str, Any]]] = {}
    for c in analysis.changes:
        groups.setdefault(c.probe, []).append(
            {
                "path": c.path,
                "kind": c.kind.value,
                "before": show_value(c.before),
                "after": show_value(c.after),
                "volatile": c.volatile,
                "label": c.label,
                "unit": c.unit,
            }
        )
    # per probe: the fields that matter, then the volatile ones (load, uptime, process lists), collapsed
    split = {
        probe: {
            "steady": [r for r in rows if not r["volatile"]],
            "volatile": [r for r in rows if r["volatile"]],
        }
        for probe, rows in groups.items()
    }
    bench = None
    if doc["bench"] is not None:
        bench = dict(doc["bench"])
        rows = []
        for r in bench["results"]:
            row = dict(r)
            if r["before"] and r["after"]:
                row["chart"] = strip_chart(r["before"], r["after"])
            rows.append(row)
        bench["results"] = rows
    implicated = by_status["implicated"]
    ids = {h["id"] for h in implicated}

    def mechanisms(h: dict[str, Any]) -> list[dict[str, Any]]:
        out, todo = [], [h["id"]]
        while todo:
            cur = todo.pop(0)
            for x in implicated:
                if x.get("explained_by") == cur and x not in out:
                    out.append(x)
                    todo.append(x["id"])
        return out

    causes = [
        dict(h, mechanisms=mechanisms(h)) for h in implicated if h.get("explained_by") not in ids
    ]
    return {
        "doc": doc,
        "verdict": doc["verdict"],
        "machine_note": doc["machine_note"],
        "implicated": causes,
        "n_implicated": len(implicated),
        "ruled_out": by_status["ruled-out"],
        "inconclusive": by_status["inconclusive"],
        "changes": groups,
        "changes_split": split,
        "ledger_rows": ledger_rows(
            by_status["implicated"] + by_status["inconclusive"] + by_status["ruled-out"]
        ),
        "n_changes": len(analysis.changes),
        "n_volatile": sum(c.volatile for c in analysis.changes),
        "repos": [r for r, rc in zip(doc["commits"], analysis.repos) if rc.changed],
        "n_repos_unchanged": sum(not rc.changed for rc in analysis.repos),
        "bench": bench,
        "notes": doc["notes"],
        "snapshots": doc["snapshots"],
        "version": __version__,
        "generated": utc_now(),
    }


def ledger_rows(hyps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ledger's rows: hypotheses in order, inconclusive ones with the same reason folded into one row.

    Seven GPU hypotheses all "gpu probe unavailable ...: no NVIDIA driver found" are one row naming
    the seven ids. Each row is the hypothesis' JSON plus ``ids`` (the ids it stands for).
    """
    rows: list[dict[str, Any]] = []
    folded: dict[str, dict[str, Any]] = {}
    for h in hyps:
        if h["status"] == "inconclusive" and h["summary"] in folded:
            folded[h["summary"]]["ids"].append(h["id"])
            continue
        row = dict(h, ids=[h["id"]])
        if h["status"] == "inconclusive":
            folded[h["summary"]] = row
        rows.append(row)
    return rows


def render_html(analysis) -> str:
    """The self-contained HTML report (autoescape on)."""
    return templating.render("report.html.j2", **context(analysis))


MD_LIMIT = 65536
"""GitHub's comment body limit, in characters: ``diff --format md`` stays under it."""


def render_markdown(analysis, limit: int = MD_LIMIT) -> str:
    """The Markdown report (values escaped with :func:`forensics.render.templating.md_escape`), at most ``limit`` characters.

    Long sections are folded in ``<details>``. When the report would still be too long for a
    GitHub comment, the list of changed fields is cut (the report says how many are not shown
    and where to find them); if even that is not enough, evidence lists are cut to 3 lines each,
    then the text itself, with a last line saying so.
    """
    ctx = context(analysis)
    ctx["md_limit"] = f"{limit:,}"
    template = templating.environment().get_template("report.md.j2")
    text = template.render(**ctx, n_changes_cut=0)
    if len(text) <= limit:
        return text
    rows = [(probe, r) for probe, rs in ctx["changes"].items() for r in rs]

    def with_rows(n: int, ctx=ctx) -> str:
        kept: dict[str, list] = {}
        for probe, r in rows[:n]:
            kept.setdefault(probe, []).append(r)
        return template.render(**dict(ctx, changes=kept), n_changes_cut=len(rows) - n)

    lo, hi = 0, len(rows)  # the largest n whose report fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(with_rows(mid)) <= limit:
            lo = mid
        else:
            hi = mid - 1
    text = with_rows(lo)
    if len(text) <= limit:
        return text
    for key in ("implicated", "inconclusive", "ruled_out"):
        ctx[key] = [
            dict(
                h,
                evidence=h["evidence"][:3],
                mechanisms=[dict(m, evidence=m["evidence"][:3]) for m in h.get("mechanisms", [])],
            )
            for h in ctx[key]
        ]
    text = with_rows(0)
    if len(text) <= limit:
        return text
    tail = "\n\n_The report was cut here to fit GitHub's comment limit; see `--format html` or `--format json`._\n"
    return text[: limit - len(tail)] + tail


def render_json(analysis) -> str:
    """The JSON report: :meth:`Analysis.to_json`, indented."""
    from forensics.docfile import finite_json

    return (
        json.dumps(
            finite_json(analysis.to_json()),
            indent=1,
            ensure_ascii=False,
            default=str,
            allow_nan=False,
        )
        + "\n"
    )


def render(analysis, fmt: str) -> str:
    """Render in ``fmt`` (``html``, ``md`` or ``json``)."""
    return {"html": render_html, "md": render_markdown, "json": render_json}[fmt](analysis)


def write(analysis, path: Path | str, fmt: str | None = None) -> Path:
    """Render and write the report atomically; returns the path.

    Raises:
        BadInputError: unknown format, or the folder is missing or not writable.
    """
    path = Path(path)
    write_atomic(path, render(analysis, format_for(path, fmt)))
    return path
