"""Terminal rendering of ``nccl_env`` data: one column per worker, one row per variable.

A worker's value that differs from the launching process is red; one its launcher sets by design
(:data:`forensics.env.judge.LAUNCHER_DEFAULTS`: torchrun's ``OMP_NUM_THREADS=1``) is a fact, shown in
cyan with "set by torchrun", as the verdict calls it."""

from __future__ import annotations

from typing import Any

from forensics.env.entries import worker_entries
from forensics.env.judge import fmt, launcher_default, launcher_of
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


def launcher_set(data: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(worker label, variable) -> the launcher (``torchrun``) that set the worker's value by design
    (:func:`forensics.env.judge.launcher_default`: the launching process has it unset and the value is
    the launcher's own default), for every such difference recorded in ``data``'s workers."""
    out: dict[tuple[str, str], str] = {}
    for label, entry in worker_entries(data):
        for d in entry.get("differs") or []:
            name = d.get("name", "")
            if launcher_default(data, label, entry, name, d.get("parent"), d.get("worker")):
                out[(label, name)] = launcher_of(data, label, entry)
    return out


def _set_by(launcher: str) -> str:
    return f" (set by {launcher})"


def _matrix_width(
    cols: list[tuple[str, dict[str, Any]]],
    names: list[str],
    facts: dict[tuple[str, str], str] | None = None,
) -> int:
    """Columns needed by the one-column-per-process table, no cell folded (rich's box: 3 per column + 1)."""
    facts = facts or {}
    widths = [max([len("variable")] + [len(n) for n in names])]
    widths += [
        max(
            [len(label)]
            + [
                len(_cell(env.get(n)))
                + (len(_set_by(facts[label, n])) if (label, n) in facts else 0)
                for n in names
            ]
        )
        for label, env in cols
    ]
    return sum(widths) + 3 * len(widths) + 1


def _matrix(
    cols: list[tuple[str, dict[str, Any]]],
    names: list[str],
    facts: dict[tuple[str, str], str] | None = None,
):
    """One row per variable, one column per process (red: differs from the launching process; cyan: the
    launcher's own default, with "set by torchrun")."""
    from rich.markup import escape
    from rich.table import Table

    facts = facts or {}
    parent = cols[0][1]
    table = Table(
        show_header=True,
        header_style="bold",
        title="variables as each process sees them "
        "(red: differs from the launching process"
        + ("; cyan: the launcher's own default)" if facts else ")"),
    )
    table.add_column("variable", no_wrap=True)
    for label, _ in cols:
        table.add_column(escape(label), overflow="fold")
    for name in names:
        row = [escape(name)]
        for i, (label, env) in enumerate(cols):
            text = escape(_cell(env.get(name)))
            if (label, name) in facts:
                row.append(f"[cyan]{text}{escape(_set_by(facts[label, name]))}[/cyan]")
            else:
                row.append(
                    f"[red]{text}[/red]" if i and env.get(name) != parent.get(name) else text
                )
        table.add_row(*row)
    return table


def _differences(
    cols: list[tuple[str, dict[str, Any]]],
    names: list[str],
    facts: dict[tuple[str, str], str] | None = None,
):
    """The narrow form: one row per variable, the launching process's value, and the workers that see
    another value, grouped by value (``launcher rank 0, launcher rank 1: -``); "same" when none does.
    A value the launcher set by design is a group of its own, cyan, "(set by torchrun)"."""
    from rich.markup import escape
    from rich.table import Table

    facts = facts or {}
    parent = cols[0][1]
    workers = cols[1:]
    table = Table(
        show_header=True,
        header_style="bold",
        title="variables as each process sees them; workers: "
        + ", ".join(escape(label) for label, _ in workers)
        + " (red: those that differ"
        + ("; cyan: the launcher's own default)" if facts else ")"),
    )
    table.add_column("variable", no_wrap=True)
    table.add_column("launching process", overflow="fold", ratio=1)
    table.add_column("workers", overflow="fold", ratio=1)
    for name in names:
        groups: dict[
            tuple[str, str], list[str]
        ] = {}  # (value shown, launcher that set it or "") -> workers
        for label, env in workers:
            if env.get(name) != parent.get(name):
                value = _cell(env.get(name)) if env.get(name) is not None else "unset"
                groups.setdefault((value, facts.get((label, name), "")), []).append(label)
        if not groups:
            cell = "same" if workers else "-"
        elif not any(launcher for _, launcher in groups):
            cell = (
                "[red]"
                + escape(
                    "; ".join(
                        f"{', '.join(labels)}: {value}" for (value, _), labels in groups.items()
                    )
                )
                + "[/red]"
            )
        else:
            parts = []
            for (value, launcher), labels in groups.items():
                text = escape(
                    f"{', '.join(labels)}: {value}" + (_set_by(launcher) if launcher else "")
                )
                parts.append(f"[cyan]{text}[/cyan]" if launcher else f"[red]{text}[/red]")
            cell = "; ".join(parts)
        if groups and sum(len(v) for v in groups.values()) < len(workers):
            cell += escape("; the others the same")
        table.add_row(
            escape(name),
            escape(_cell(parent.get(name)) if parent.get(name) is not None else "unset"),
            cell,
        )
    return table


def print_env(console, data: dict[str, Any], findings=()) -> None:
    """Print the per-worker table, NCCL's own report per rank, hooks, config files and findings.

    The table has one column per process when that fits ``console.width`` unfolded; else (an
    80-column terminal with a launcher's ranks) one row per variable with the launching
    process's value and only the workers that see another one.

    Args:
        console: a ``rich.console.Console``.
        data: an ``nccl_env`` data section.
        findings: :class:`forensics.model.Finding` objects to list at the end.
    """
    from rich.markup import escape

    cols = env_columns(data)
    names = sorted({n for _, env in cols for n in env})
    facts = launcher_set(data)
    if _matrix_width(cols, names, facts) <= console.width:
        console.print(_matrix(cols, names, facts))
    else:  # one column per worker does not fit: name only the workers that differ
        console.print(_differences(cols, names, facts))
    for label, entry in worker_entries(data):
        nccl = entry.get("nccl")
        if isinstance(nccl, dict):
            sbe = (
                ", ".join(f"{k}={v}" for k, v in (nccl.get("set_by_environment") or {}).items())
                or "none"
            )
            tr = ", ".join(f"{k} x{v}" for k, v in (nccl.get("transports") or {}).items()) or "-"
            console.print(
                f"[bold]{escape(label)}[/bold] {escape(nccl.get('backend', ''))}: version "
                f"{escape(_cell(nccl.get('version')))}, channels {escape(_cell(nccl.get('channels')))}, "
                f"transports {escape(tr)}, all-reduce {'ok' if nccl.get('allreduce_ok') else 'FAILED'}; "
                f"set by environment: {escape(sbe)}"
            )
            if nccl.get("error"):
                console.print(f"  [red]{escape(str(nccl['error']))}[/red]")
            hung = nccl.get("hung")
            if isinstance(hung, dict):
                last = (nccl.get("last_lines") or [""])[-1]
                console.print(
                    f"  [red]hung in {escape(str(hung.get('phase')))}, killed after "
                    f"{escape(str(hung.get('killed_after_s')))} s; last NCCL line: {escape(str(last))}[/red]"
                )
    entries = [("launching process", data.get("parent") or {})] + list(worker_entries(data))
    hooks: dict[
        tuple[str, str], list[str]
    ] = {}  # one line per start-up hook, naming the processes it ran in
    for label, entry in entries:
        for key in ("sitecustomize", "usercustomize"):
            path = (entry.get("hooks") or {}).get(key)
            if isinstance(path, str):
                hooks.setdefault((key, path), []).append(label)
    for (key, path), labels in hooks.items():
        where = "every process" if len(labels) == len(entries) > 1 else ", ".join(labels)
        console.print(f"{key} {escape(path)}: {escape(where)}")
    for f in (data.get("config_files") or {}).get("files") or []:
        if isinstance(f.get("vars"), dict) and not is_missing(f["vars"]):
            console.print(
                f"NCCL config file {escape(f['path'])}: "
                f"{escape(', '.join(f'{k}={v}' for k, v in f['vars'].items()) or 'empty')}"
            )
    for method, entry in (data.get("start_methods") or {}).items():
        if isinstance(entry, dict) and entry.get("status") != "ok":
            reason = entry.get("reason")
            if is_missing(reason):
                reason = reason.get("detail") or reason["missing"].replace("_", " ")
            console.print(
                f"[dim]{escape(method)}: {escape(str(reason or ''))}[/dim]"
            )  # a reason, never cut
    for f in findings:
        style = (
            "red"
            if f.status.value == "implicated"
            else "green"
            if f.status.value == "ruled-out"
            else "yellow"
        )
        console.print(
            f"[{style}]{escape(f.hypothesis)} {escape(f.status.value)}[/{style}] "
            f"({escape(f.severity.value)}): {escape(f.summary)}"
        )
        for line in f.evidence:
            console.print(f"    {escape(line)}")
