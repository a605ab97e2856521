"""Bench documents and comparisons as terminal tables (rich), for ``forensics bench``.

Reads ``forensics.bench/1`` documents and :class:`forensics.bench.compare.BenchComparison`
objects; computes nothing.
"""

from __future__ import annotations


def print_results(c, doc: dict) -> None:
    """Print one bench document's summary line and its results as a table (median, unit, processes, noise).

    The table fits an 80-column terminal (and a file or pipe, which rich draws 80 wide) with every
    value whole: the figures never wrap or get cut ("0.091…" was a TFLOP/s median cut short); the
    result names wrap (never below 8 columns), and the long headers take more than one line.
    """
    from rich.table import Table

    t = Table(show_header=True, header_style="bold", title=doc.get("label") or None)
    t.add_column("result", justify="left", overflow="fold", min_width=8)
    for col in ("median", "unit", "processes", "noise\nIQR/\nmedian", "within\nprocess"):
        t.add_column(col, justify="right", overflow="fold")
    for r in doc["results"]:
        within = r.get("within_process_iqr_over_median")
        t.add_row(
            r["name"],
            f"{r['median']:.4g}",
            r["unit"],
            str(len(r["process_medians"])),
            f"{r['noise_iqr_over_median']:.1%}",
            f"{within:.1%}" if within is not None else "-",
        )
    label = doc.get("label")  # the side (A, B) of an A/B, also the table's title
    c.print((f"{label}: " if label else "") + doc["summary"])  # the figure first, its table after
    c.print(t)


def change_text(a: float, b: float) -> str:
    """B's value against A's in the metric's own direction: "+3.2%", "-1.1%", "1.98x more", "2.00x less".

    A throughput that doubled reads "2.00x more" (of tokens/s); a step time that
    doubled reads "2.00x more" (of ms) -- the verdict column says which is slower.
    """
    if not (isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 and b > 0):
        return "?"
    r = b / a
    if r >= 1.5:
        return f"{r:.2f}x more"
    if r <= 1 / 1.5:
        return f"{1 / r:.2f}x less"
    return f"{(r - 1) * 100:+.1f}%"


def print_comparison(c, result) -> None:
    """Print a :class:`forensics.bench.compare.BenchComparison`: headline verdict, per-result table, noise, telemetry, notes.

    The table fits an 80-column terminal: result names wrap rather than being
    cut, the change is in the metric's own direction (:func:`change_text`), and
    each result's confidence interval is in ``bench compare --json``; the
    headline's is in the sentence below the table.
    """
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    t = Table(
        show_header=True,
        header_style="bold",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
    )
    t.add_column("result", justify="left", overflow="fold")
    for col in ("A", "B", "change", "p"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("verdict", justify="left", no_wrap=True)
    for name, cmp in result.results.items():
        t.add_row(
            escape(name),
            f"{cmp.a.median:.4g}",
            f"{cmp.b.median:.4g}",
            change_text(cmp.a.median, cmp.b.median),
            f"{cmp.p_value:.2g}",
            cmp.verdict.value,
        )
    head = result.results[result.headline]
    c.print(  # the answer first, as diff and investigate give it; the table after
        f"[bold]{escape(result.headline)}: {result.verdict.value}[/bold] - {escape(head.sentence())}"
    )
    c.print(t)
    if result.noise_floor is not None:
        c.print(f"A/A noise floor (alternate pairs of processes): {result.noise_floor:.1%}")
    if result.pointing:
        c.print("components that moved the same way: " + ", ".join(result.pointing))
    for side in ("A", "B"):
        for gpu, line in result.telemetry.get(side, {}).items():
            c.print(f"telemetry {side}: {gpu}: {line}")
    for note in result.notes:
        c.print(escape(note))
    if result.verdict.value == "inconclusive":
        c.print("what to do next: docs/inconclusive.md (When the answer is inconclusive)")
