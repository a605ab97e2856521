"""Terminal rendering of ``nccl_env`` data: one column per worker, one row per variable."""

from __future__ import annotations

from typing import Any

from forensics.env.entries import worker_entries
from forensics.env.judge import fmt
from forensics.model import is_missing

MAX_CELL = 36


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    text = fmt(value) if is_missing(value) else str(value)
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 3] + "..."


def env_columns(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(column label, env mapping) for the launching process and every worker that reported."""
    cols = [("launching process", (data.get("parent") or {}).get("env") or {})]
    cols += [(label, entry.get("env") or {}) for label, entry in worker_entries(data)]
    return cols


def print_env(console, data: dict[str, Any], findings=()) -> None:
    """Print the per-worker table, NCCL's own report per rank, hooks, config files and findings.

    Args:
        console: a ``rich.console.Console``.
        data: an ``nccl_env`` data section.
        findings: :class:`forensics.model.Finding` objects to list at the end.
    """
    from rich.markup import escape
    from rich.table import Table

    cols = env_columns(data)
    parent = cols[0][1]
    names = sorted({n for _, env in cols for n in env})
    table = Table(show_header=True, header_style="bold", title="variables as each process sees them "
                  "(red: differs from the launching process)")
    table.add_column("variable", no_wrap=True)
    for label, _ in cols:
        table.add_column(escape(label), overflow="fold")
    for name in names:
        row = [escape(name)]
        for i, (_, env) in enumerate(cols):
            text = escape(_cell(env.get(name)))
            row.append(f"[red]{text}[/red]" if i and env.get(name) != parent.get(name) else text)
        table.add_row(*row)
    console.print(table)
    for label, entry in worker_entries(data):
        nccl = entry.get("nccl")
        if isinstance(nccl, dict):
            sbe = ", ".join(f"{k}={v}" for k, v in (nccl.get("set_by_environment") or {}).items()) or "none"
            tr = ", ".join(f"{k} x{v}" for k, v in (nccl.get("transports") or {}).items()) or "-"
            console.print(f"[bold]{escape(label)}[/bold] {escape(nccl.get('backend', ''))}: version "
                          f"{escape(_cell(nccl.get('version')))}, channels {escape(_cell(nccl.get('channels')))}, "
                          f"transports {escape(tr)}, all-reduce {'ok' if nccl.get('allreduce_ok') else 'FAILED'}; "
                          f"set by environment: {escape(sbe)}")
            if nccl.get("error"):
                console.print(f"  [red]{escape(str(nccl['error']))}[/red]")
            hung = nccl.get("hung")
            if isinstance(hung, dict):
                last = (nccl.get("last_lines") or [""])[-1]
                console.print(f"  [red]hung in {escape(str(hung.get('phase')))}, killed after "
                              f"{escape(str(hung.get('killed_after_s')))} s; last NCCL line: {escape(str(last))}[/red]")
    for label, entry in [("launching process", data.get("parent") or {})] + list(worker_entries(data)):
        hooks = entry.get("hooks") or {}
        for key in ("sitecustomize", "usercustomize"):
            if isinstance(hooks.get(key), str):
                console.print(f"{escape(label)}: {key} {escape(hooks[key])}")
    for f in (data.get("config_files") or {}).get("files") or []:
        if isinstance(f.get("vars"), dict) and not is_missing(f["vars"]):
            console.print(f"NCCL config file {escape(f['path'])}: "
                          f"{escape(', '.join(f'{k}={v}' for k, v in f['vars'].items()) or 'empty')}")
    for method, entry in (data.get("start_methods") or {}).items():
        if isinstance(entry, dict) and entry.get("status") != "ok":
            reason = entry.get("reason")
            if is_missing(reason):
                reason = reason.get("detail") or reason["missing"].replace("_", " ")
            console.print(f"[dim]{escape(method)}: {escape(str(reason or ''))}[/dim]")  # a reason, never cut
    for f in findings:
        style = "red" if f.status.value == "implicated" else "green" if f.status.value == "ruled-out" else "yellow"
        console.print(f"[{style}]{escape(f.hypothesis)} {escape(f.status.value)}[/{style}] "
                      f"({escape(f.severity.value)}): {escape(f.summary)}")
        for line in f.evidence:
            console.print(f"    {escape(line)}")
