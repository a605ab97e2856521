"""``forensics bench``'s results table at 80 columns (a terminal, or any file or pipe, which rich draws 80
wide): every figure whole. The TFLOP/s median printed as "0.091…" and its unit as "TFLOP…" when the
results were piped; the result names wrap instead."""

from __future__ import annotations

import io
import json

from rich.console import Console

from forensics.render.bench import print_results
from tests.conftest import EXAMPLES

CANARY = EXAMPLES / "bench-cli" / "h200" / "canary.json"


def test_every_median_unit_and_noise_figure_is_shown_whole_at_80_columns():
    doc = json.loads(CANARY.read_text())
    con = Console(file=io.StringIO(), width=80, color_system=None, highlight=False)
    print_results(con, doc)
    shown = con.file.getvalue()
    lines = shown.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in shown
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in lines if line.startswith("│")]
    for r in doc["results"]:
        assert [
            f"{r['median']:.4g}",
            r["unit"],
            str(len(r["process_medians"])),
            f"{r['noise_iqr_over_median']:.1%}",
        ] in [row[1:5] for row in rows], r["name"]
    names = "".join(row[0] for row in rows)
    assert names == "".join(
        r["name"] for r in doc["results"]
    )  # each name whole once its lines are joined
