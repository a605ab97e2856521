"""Bench documents and comparisons as terminal tables (rich), for ``forensics bench``.

Reads ``forensics.bench/1`` documents and :class:`forensics.bench.compare.BenchComparison`
objects; computes nothing.
"""

from __future__ import annotations


def print_results(c, doc: dict) -> None:
    """Print one bench document's results as a table (median, unit, processes, noise) and its summary line."""
    from rich.table import Table

    t = Table(show_header=True, header_style="bold", title=doc.get("label") or None)
    for col in ("result", "median", "unit", "processes", "noise (IQR/median)", "within process"):
        t.add_column(col, justify="left" if col == "result" else "right", no_wrap=col == "result")
    for r in doc["results"]:
        within = r.get("within_process_iqr_over_median")
        t.add_row(r["name"], f"{r['median']:.4g}", r["unit"], str(len(r["process_medians"])),
                  f"{r['noise_iqr_over_median']:.1%}", f"{within:.1%}" if within is not None else "-")
    c.print(t)
    c.print(doc["summary"])


def print_comparison(c, result) -> None:
    """Print a :class:`forensics.bench.compare.BenchComparison`: per-result table, headline verdict, noise, telemetry, notes."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(show_header=True, header_style="bold")
    for col in ("result", "A", "B", "change", "95% CI of ratio", "p", "verdict"):
        t.add_column(col, justify="left" if col in ("result", "verdict") else "right", no_wrap=col == "result")
    for name, cmp in result.results.items():
        mark = {"slower": "+ slower", "faster": "- faster", "same": "same", "inconclusive": "~ inconclusive",
                "small-slower": "+ small slower", "small-faster": "- small faster"}
        t.add_row(name, f"{cmp.a.median:.4g}", f"{cmp.b.median:.4g}", f"{cmp.change_pct:+.1f}%",
                  f"{cmp.ci_low:.3f}-{cmp.ci_high:.3f}", f"{cmp.p_value:.2g}", mark[cmp.verdict.value])
    c.print(t)
    head = result.results[result.headline]
    c.print(f"[bold]{escape(result.headline)}: {result.verdict.value}[/bold] - {escape(head.sentence())}")
    if result.noise_floor is not None:
        c.print(f"A/A noise floor (odd vs even processes): {result.noise_floor:.1%}")
    if result.pointing:
        c.print("components that moved the same way: " + ", ".join(result.pointing))
    for side in ("A", "B"):
        for gpu, line in result.telemetry.get(side, {}).items():
            c.print(f"telemetry {side}: {gpu}: {line}")
    for note in result.notes:
        c.print(escape(note))
