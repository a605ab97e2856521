"""Terminal rendering of snapshots: the summary table ``snapshot``, ``show`` and ``import`` print."""

from __future__ import annotations

import re
from typing import Any

from forensics.words import plural

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(value: Any) -> str:
    """``str(value)`` with terminal control characters (escape sequences) replaced by '?'.

    Snapshots come from other machines; their text must not drive the terminal.
    """
    return _CONTROL.sub("?", str(value))


_STATUS_STYLE = {"ok": "green", "partial": "yellow", "unavailable": "dim", "failed": "red"}


def _headline(name: str, data: dict[str, Any]) -> str:
    from forensics.registry import find_probe_class

    probe = find_probe_class(name)
    if probe is None:
        return ""
    try:
        return probe.headline(data) or ""
    except Exception as exc:  # a headline that breaks must not break the summary
        return f"(headline failed: {type(exc).__name__})"


def _fields_failed(n: int) -> str:
    return f"({n} field{'s' if n != 1 else ''} failed)"


def print_snapshot_summary(
    doc: dict[str, Any], detail: bool = False, stream=None, wrote: str | None = None
) -> None:
    """Print a snapshot's header and one row per probe (status, duration, headline).

    Plain text through :class:`forensics.render.text.Printer` (no rich: this is printed after every
    ``forensics snapshot``, and rich's import and layout cost more than the table is worth there).

    Args:
        doc: a validated snapshot dict.
        detail: also list each probe's field errors.
        stream: where to print (default ``sys.stdout``); colours only where it is a terminal.
        wrote: the path of the file just written, printed last as ``wrote PATH``.

    Raises:
        BrokenPipeError: the reader of ``stream`` went away (the CLI's boundary exits 141).
    """
    from forensics.render.text import Column, Printer, table

    out = Printer(stream)
    machine = doc.get("machine") if isinstance(doc.get("machine"), dict) else {}
    tool = doc.get("tool") if isinstance(doc.get("tool"), dict) else {}
    label = doc.get("label") or "-"
    out.line(
        f"{out.style('snapshot', 'bold')} {clean(label)}  {clean(doc.get('created', ''))}  "
        f"host {clean(machine.get('hostname', '?'))}  forensics {clean(tool.get('version', '?'))}"
    )
    imported = ""
    if doc.get("source"):  # only a snapshot built from a pasted text has one
        from forensics.snapshot import describe_import as describe

        imported = describe(doc)
    if imported:
        out.line(
            f"{out.style(clean(imported), 'bold')}: fields the text does not hold are not recorded"
        )
        for note in (doc.get("import") or {}).get("notes") or []:
            out.line(f"  {out.style(clean(note), 'dim')}")
    rows = []
    for name, section in (doc.get("probes") or {}).items():
        status = section.get("status", "?")
        if status in ("ok", "partial"):
            facts = _headline(name, section.get("data") or {})
            if status == "partial" and imported:
                n = len(section.get("errors") or [])
                facts = (
                    facts + "  " if facts else ""
                ) + f"({n} field group{'s' if n != 1 else ''} not in the text)"
            elif status == "partial":
                facts = (facts + "  " if facts else "") + _fields_failed(
                    len(section.get("errors") or [])
                )
        else:
            facts = section.get("reason", "")
        rows.append(
            [
                (clean(name), ""),
                (clean(status), _STATUS_STYLE.get(status, "")),
                (f"{float(section.get('duration_s', 0)):.2f}s", ""),
                (clean(facts), ""),
            ]
        )
    columns = [
        Column("probe"),
        Column("status"),
        Column("time", right=True),
        Column("facts", fold=True),
    ]
    for line in table(out, columns, rows):
        out.line(line)
    if detail:
        for name, section in (doc.get("probes") or {}).items():
            for err in section.get("errors") or []:
                out.line(
                    f"  {out.style(clean(name), 'yellow')} {clean(err.get('field', ''))}: "
                    f"{clean(err.get('error', ''))}"
                )
    red = doc.get("redactions") or []
    if red:
        places = sorted({str(r.get("where", "?")) for r in red})
        where = ", ".join(places[:5])
        more = "" if len(places) <= 5 else f" and {len(places) - 5} more places"
        counted = out.style("redacted " + plural(len(red), "secret value"), "yellow")
        out.line(f"{counted}: {clean(where)}{more}")
    elif doc.get("redaction", "on") != "on":
        out.line(f"{out.style('redaction is off', 'red')}: this file may hold secrets")
    bench = doc.get("bench")
    if isinstance(bench, dict) and bench.get("summary"):
        out.line(f"bench: {clean(bench['summary'])}")
    if wrote is not None:
        out.line(f"wrote {out.style(clean(wrote), 'bold')}")
    out.flush()
