"""What ``forensics diff`` prints on a terminal: nothing left out without saying how much.

Real snapshots from examples/ (2 x H200), rendered at 80 columns without colour.
"""

from __future__ import annotations

import io
import re

from rich.console import Console

from forensics import snapshot as snap
from forensics.diff.ledger import analyse
from forensics.render.summary import EVIDENCE_LINES, print_diff_summary
from forensics.render.terminal import print_snapshot_summary
from tests.conftest import EXAMPLES


def _shown(analysis, **kw) -> str:
    out = io.StringIO()
    print_diff_summary(
        Console(file=out, width=80, color_system=None, highlight=False), analysis, "r.html", **kw
    )
    return " ".join(
        out.getvalue().replace("│", " ").split()
    )  # the table's cells, wrapped lines joined


def _pair(name: str):
    return analyse(
        snap.load(EXAMPLES / name / "before.json"), snap.load(EXAMPLES / name / "after.json")
    )


def test_evidence_left_out_is_counted_and_every_variable_named_first():
    a = _pair(
        "nccl-lost"
    )  # two variables lost in the workers: NCCL_ALGO and NCCL_PROTO, 12 evidence lines
    (h,) = a.implicated
    lines = [x for x in h.evidence if x != h.summary]
    text = _shown(a)
    assert (
        "NCCL_ALGO differs" in text and "NCCL_PROTO differs" in text
    )  # the second variable is not dropped
    assert f"(+{len(lines) - EVIDENCE_LINES} more in the report)" in text


def test_suspects_beyond_the_rows_shown_are_counted():
    a = _pair("silent-pull")
    b = _pair("busy-gpu")
    # two root causes from real pairs in one ledger: more than the one row asked for
    a.hypotheses = [h for h in a.hypotheses if h.status.value == "implicated"] + [
        h for h in b.hypotheses if h.status.value == "implicated" and h.id == "gpu.contention"
    ]
    assert [h.id for h in a.causes] == ["code.change", "gpu.contention"]
    text = _shown(a, max_rows=1)
    table = text[
        text.index("┡") : text.index("└")
    ]  # the verdict sentence may name both; the table one row
    assert "code.change" in table and "gpu.contention" not in table
    assert "+1 more implicated, in the report" in table
    h = a.causes[0]  # each row shown counts what it leaves out
    hidden = len([x for x in h.evidence if x != h.summary]) - EVIDENCE_LINES
    assert hidden > 0 and f"(+{hidden} more in the report)" in table


def test_redacted_places_are_counted_as_places():
    doc = snap.load(EXAMPLES / "aa" / "before.json")
    doc["redactions"] = [
        {"where": w, "why": "token"} for w in ["software.env.HF_TOKEN"] * 6 + ["git.remote"]
    ]
    out = io.StringIO()
    print_snapshot_summary(doc, stream=out)
    line = next(x for x in out.getvalue().splitlines() if x.startswith("redacted"))
    assert re.fullmatch(r"redacted 7 secret values: git\.remote, software\.env\.HF_TOKEN", line), (
        line
    )
