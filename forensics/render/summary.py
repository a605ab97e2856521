"""Terminal summary of a diff analysis (rich): verdict, suspects, benchmark, commits."""

from __future__ import annotations

_STATUS_STYLE = {"implicated": "red", "ruled-out": "green", "inconclusive": "yellow"}
EVIDENCE_LINES = 2
"""Evidence lines shown per suspect under its summary; the rest are counted ("+N more in the report")."""


def evidence_lines(
    hypothesis, limit: int = EVIDENCE_LINES, where: str = "in the report"
) -> list[str]:
    """The evidence a terminal shows for one suspect, and a count of what it leaves out.

    The summaries of the suspect's other implicating findings come first (each names another
    changed thing: a second variable, another GPU), then the rest in the ledger's order.

    Args:
        hypothesis: a :class:`forensics.diff.ledger.Hypothesis`.
        limit: at most this many evidence lines.
        where: where the rest can be read, for the marker.

    Returns:
        up to ``limit`` lines, then ``(+N more <where>)`` when N lines were left out.
    """
    lines = [line for line in dict.fromkeys(hypothesis.evidence) if line != hypothesis.summary]
    heads = [
        f.summary
        for f in hypothesis.findings
        if getattr(f.status, "value", f.status) == "implicated" and f.summary in lines
    ]
    shown = list(dict.fromkeys(heads + lines))[:limit]
    if len(lines) > len(shown):
        shown.append(f"(+{len(lines) - len(shown)} more {where})".replace(" )", ")"))
    return shown


def print_diff_summary(
    console, analysis, report_path: str | None = None, max_rows: int = 8
) -> None:
    """Print what a person reads first after ``forensics diff``.

    Args:
        console: a ``rich.console.Console``.
        analysis: a :class:`forensics.diff.ledger.Analysis`.
        report_path: where the full report was written (``None``: not written).
        max_rows: at most this many suspects and commits per repository.
    """
    from rich.markup import escape
    from rich.table import Table

    if analysis.machine_note:
        console.print(f"[yellow]{escape(analysis.machine_note)}[/yellow]")
    style = "red" if analysis.implicated else "green"
    console.print(f"[bold {style}]{escape(analysis.verdict)}[/bold {style}]")
    for note in analysis.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    if analysis.implicated:
        table = Table(show_header=True, header_style="bold", expand=False)
        for col in ("#", "hypothesis", "severity", "score", "evidence"):
            table.add_column(col, overflow="fold")
        where = "in the report" if report_path else ""
        for i, h in enumerate(analysis.causes[:max_rows], 1):
            table.add_row(
                str(i),
                escape(h.id),
                escape(h.severity.value),
                f"{h.score:.2f}",
                escape("\n".join([h.summary] + evidence_lines(h, where=where))),
            )
            for m in analysis.mechanisms(h):  # under its cause, never a rival suspect
                table.add_row(
                    "",
                    escape(f"  -> {m.id}"),
                    escape(m.severity.value),
                    "",
                    escape(f"mechanism (explained by {m.explained_by}): {m.summary}"),
                )
        hidden = len(analysis.causes) - max_rows
        if hidden > 0:
            table.add_row("", f"+{hidden} more", "", "", f"implicated, {where or 'not shown'}")
        console.print(table)
    if analysis.bench is not None:
        console.print(f"bench: {escape(analysis.bench.sentence)}")
        for r in analysis.bench.results:
            what = r.comparison.sentence() if r.comparison else r.note
            console.print(f"  {escape(r.name)} ({escape(r.kind)}): {escape(what)}")
    for rc in analysis.repos:
        if not rc.changed:
            continue
        console.print(f"code {escape(rc.path)}: {escape(rc.move.sentence)}")
        if rc.availability != "ok":
            console.print(f"  [yellow]{escape(rc.availability)}[/yellow]")
        for c in rc.commits[:max_rows]:
            hot = f" [red]hot: {escape(', '.join(c.hot_categories))}[/red]" if c.hot_lines else ""
            a = c.assessment
            why = (
                ""
                if a is None
                else (
                    f"\n      [red]{escape(a.why)}[/red]"
                    if a.signals and a.suspect
                    else f"\n      {escape(a.why)}"
                    if a.suspect
                    else f"\n      [dim]{escape(a.why)}[/dim]"
                )
            )
            console.print(f"  {c.sha[:10]} {escape(c.subject)} (+{c.added}/-{c.deleted}){hot}{why}")
        if len(rc.commits) > max_rows:
            console.print(f"  ... {len(rc.commits) - max_rows} more in the report")
    counts = {s: sum(h.status.value == s for h in analysis.hypotheses) for s in _STATUS_STYLE}
    console.print(
        " ".join(f"[{_STATUS_STYLE[s]}]{n} {s}[/{_STATUS_STYLE[s]}]" for s, n in counts.items())
        + f"; {len(analysis.changes)} changed fields"
    )
    if report_path:
        console.print(
            f"report: [bold]{escape(report_path)}[/bold]", soft_wrap=True
        )  # a path stays whole: it is copied
