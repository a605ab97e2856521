"""The one Jinja2 environment of every report, and the filters its templates use.

:func:`environment` is built once per process (templates compile once) and
serves the diff, bisect, investigate and fleet reports alike. Autoescape is
chosen by the template's name: ``*.html.j2`` escapes every value (commit
subjects, environment values, node names are user data), ``*.md.j2`` does not
(Markdown templates escape with the :func:`md_escape` and :func:`md_code`
filters). A field a document lacks renders empty (Jinja2's default
``Undefined``): snapshots of older schemas and one-sided probes leave fields out.
Templates live in ``reports/templates`` (the ``forensics_reports`` package).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from forensics.model import as_missing

_MAX_VALUE_CHARS = 240


def show_value(value: Any) -> str:
    """A field value as short text: missing values as "missing: reason (detail)", containers as compact JSON."""
    if value is None:
        return "-"
    miss = as_missing(value)
    if miss is not None:
        return f"missing: {miss}"
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, (dict, list)):
        text = json.dumps(
            value, ensure_ascii=False, sort_keys=False, default=str, separators=(", ", ": ")
        )
    else:
        text = str(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 1] + "\u2026"


def md_escape(value: Any) -> str:
    """Text safe inside a Markdown table cell or list item: HTML and table syntax escaped.

    ``<`` and ``&`` are escaped (no tag or entity can form); a lone ``>`` cannot
    open a tag and is kept, so "1980 -> 1440" stays readable as plain text.
    """
    text = str(value)
    for a, b in (("&", "&amp;"), ("<", "&lt;"), ("|", "\\|"), ("`", "\\`"), ("\n", " ")):
        text = text.replace(a, b)
    return text


def md_code(value: Any) -> str:
    """Text safe inside a Markdown code span in a table: backticks, pipes and newlines neutralised."""
    return str(value).replace("`", "'").replace("|", "\\|").replace("\n", " ")


def md_cell(value: Any) -> str:
    """Text of a Markdown table cell whose value is already plain text: pipes and newlines neutralised."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def dot_break(name: object):
    """HTML-escaped ``name`` with a line-break opportunity (``<wbr>``) after each dot, as Markup.

    ``component.allreduce_busbw_gbps`` wraps after ``component.`` in a narrow
    table column instead of mid-word.
    """
    from markupsafe import Markup, escape

    return Markup(".<wbr>").join(escape(p) for p in str(name).split("."))


def bucket(score: float) -> int:
    """Heat-map colour class of an outlier score: 0 (within peers), 1 (< 0.25) ... 4 (>= 0.75)."""
    if score <= 0:
        return 0
    return min(4, 1 + int(score / 0.25))


def fixed(value: Any, digits: int = 3) -> str:
    """``value`` with ``digits`` decimals; ``-`` when there is none."""
    return "-" if value is None else f"{float(value):.{digits}f}"


def significant(value: Any) -> str:
    """``value`` to 4 significant digits; ``n/a`` when there is none."""
    return "n/a" if value is None else f"{value:.4g}"


def percent(value: Any, digits: int = 0) -> str:
    """A fraction as a percentage with ``digits`` decimals (0.691 -> ``69%``); ``n/a`` when there is none."""
    return "n/a" if value is None else f"{value:.{digits}%}"


def seconds(value: Any) -> str:
    """Whole seconds (``12 s``); ``-`` for none or zero."""
    return "-" if not value else f"{value:.0f} s"


@functools.cache
def environment():
    """The Jinja2 environment of all reports (built on first use, then shared; imports jinja2 lazily)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("forensics_reports", "templates"),
        autoescape=jinja2.select_autoescape(["html", "html.j2"], default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        {
            "value": show_value,
            "md": md_escape,
            "mdcode": md_code,
            "mdcell": md_cell,
            "dotbreak": dot_break,
            "bucket": bucket,
            "num": fixed,
            "sig": significant,
            "pct": percent,
            "secs": seconds,
            "short": lambda s: str(s)[:10] if s else "?",
        }
    )
    return env


def render(template: str, **context: Any) -> str:
    """Render ``reports/templates/<template>`` with ``context``.

    Raises:
        jinja2.TemplateError: the template cannot be found or is broken (a bug, not bad input).
    """
    return environment().get_template(template).render(**context)
