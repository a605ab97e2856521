"""Terminal rendering of snapshots with rich."""

from __future__ import annotations

from typing import Any

import re

from forensics.render.words import plural

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


def print_snapshot_summary(console, doc: dict[str, Any], detail: bool = False) -> None:
    """Print a snapshot's header and one row per probe (status, duration, headline).

    Args:
        console: a ``rich.console.Console``.
        doc: a validated snapshot dict.
        detail: also list each probe's field errors.
    """
    from rich.markup import escape
    from rich.table import Table

    machine = doc.get("machine") if isinstance(doc.get("machine"), dict) else {}
    tool = doc.get("tool") if isinstance(doc.get("tool"), dict) else {}
    label = doc.get("label") or "-"
    console.print(f"[bold]snapshot[/bold] {escape(clean(label))}  {escape(clean(doc.get('created', '')))}  "
                  f"host {escape(clean(machine.get('hostname', '?')))}  forensics {escape(clean(tool.get('version', '?')))}")
    from forensics.importers import describe

    imported = describe(doc)
    if imported:
        console.print(f"[bold]{escape(clean(imported))}[/bold]: fields the text does not hold are not recorded")
        for note in (doc.get("import") or {}).get("notes") or []:
            console.print(f"  [dim]{escape(clean(note))}[/dim]")
    table = Table(show_header=True, header_style="bold", expand=False)
    table.add_column("probe")
    table.add_column("status")
    table.add_column("time", justify="right")
    table.add_column("facts", overflow="fold")
    for name, section in (doc.get("probes") or {}).items():
        status = section.get("status", "?")
        style = _STATUS_STYLE.get(status, "")
        if status in ("ok", "partial"):
            facts = _headline(name, section.get("data") or {})
            if status == "partial" and imported:
                n = len(section.get("errors") or [])
                facts = (facts + "  " if facts else "") + f"({n} field group{'s' if n != 1 else ''} not in the text)"
            elif status == "partial":
                facts = (facts + "  " if facts else "") + _fields_failed(len(section.get('errors') or []))
        else:
            facts = section.get("reason", "")
        table.add_row(escape(clean(name)), f"[{style}]{escape(clean(status))}[/{style}]" if style else escape(clean(status)),
                      f"{float(section.get('duration_s', 0)):.2f}s", escape(clean(facts)))
    console.print(table)
    if detail:
        for name, section in (doc.get("probes") or {}).items():
            for err in section.get("errors") or []:
                console.print(f"  [yellow]{escape(clean(name))}[/yellow] {escape(clean(err.get('field', '')))}: "
                              f"{escape(clean(err.get('error', '')))}")
    red = doc.get("redactions") or []
    if red:
        where = ", ".join(sorted({r.get("where", "?") for r in red})[:5])
        more = "" if len(red) <= 5 else f" and {len(red) - 5} more"
        console.print(f"[yellow]redacted {plural(len(red), 'secret value')}[/yellow]: {escape(clean(where))}{more}")
    elif doc.get("redaction", "on") != "on":
        console.print("[red]redaction is off[/red]: this file may hold secrets")
    bench = doc.get("bench")
    if isinstance(bench, dict) and bench.get("summary"):
        console.print(f"bench: {escape(clean(bench['summary']))}")
