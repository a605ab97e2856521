"""Every real case of the shared case list, replayed: the report must lead with the right hypothesis.

Each folder under tests/fixtures/cases/ holds before.json, after.json and
expect.json ``{"top": id | null, "ruled_out": [ids], "note": "..."}`` (optional
``"requires"``: the probes the verdict depends on; default: every probe section
in the two snapshots; optional ``"below_top"``: ids that changed too but must rank
below ``top``). A case whose probes are not registered in this install is
skipped, naming them; nothing else is skipped.

Cases marked ``"new_in": 13`` (issue 13's real cases, built by
tests/fixtures/cases/make_issue13_cases.py) run like every other case since the
evidence-based ranking landed. A case whose expect.json lists ``"requires_facts"``
(facts its snapshots do not hold yet) is a strict xfail naming them, so it turns
into a failure the day the fixture gains the facts and passes.
"""

from __future__ import annotations

import json

import pytest
from _diffkit import CASES

from forensics import snapshot as snap
from forensics.diff.ledger import analyse
from forensics.hypotheses import HYPOTHESES
from forensics.model import HypothesisStatus, Severity
from forensics.registry import find_probe_class
from forensics.render.report import render_html, render_json

CASE_DIRS = sorted(p for p in CASES.iterdir() if p.is_dir() and (p / "expect.json").is_file())


def _param(case):
    expect = json.loads((case / "expect.json").read_text())
    marks = (
        [
            pytest.mark.xfail(
                reason="the snapshots lack: " + "; ".join(expect["requires_facts"]), strict=True
            )
        ]
        if expect.get("requires_facts")
        else []
    )
    return pytest.param(case, id=case.name, marks=marks)


def test_case_fixtures_exist():
    assert len(CASE_DIRS) >= 2


@pytest.mark.parametrize("case", [_param(p) for p in CASE_DIRS])
def test_case(case):
    expect = json.loads((case / "expect.json").read_text())
    before, after = snap.load(case / "before.json"), snap.load(case / "after.json")
    needed = expect.get("requires") or sorted(set(before["probes"]) | set(after["probes"]))
    absent = [name for name in needed if find_probe_class(name) is None]
    if absent:
        pytest.skip(f"probe(s) {', '.join(absent)} not registered in this install")
    top, ruled = expect["top"], expect.get("ruled_out", [])
    assert top is None or top in HYPOTHESES
    a = analyse(before, after)
    doc = json.loads(render_json(a))
    statuses = {h["id"]: h for h in doc["hypotheses"]}
    if top is None:
        implicated = [h["id"] for h in doc["hypotheses"] if h["status"] == "implicated"]
        assert implicated == [], (
            f"{case.name}: expected nothing implicated, got {implicated}; {doc['verdict']}"
        )
    else:
        assert doc["hypotheses"][0]["id"] == top, f"{case.name}: {doc['verdict']}"
        assert doc["hypotheses"][0]["status"] == "implicated"
        assert top in doc["verdict"]
        html = render_html(a)
        first = html.index(
            'class="hid">'
        )  # the first suspect card is the one the reader sees first
        assert html[first:].startswith(f'class="hid">{top}<')
    order = [h["id"] for h in doc["hypotheses"]]
    for hyp in expect.get("below_top", []):
        assert hyp in order and order.index(hyp) > 0, (
            f"{case.name}: {hyp} should rank below {top}: {order}"
        )
    for hyp in ruled:
        h = statuses[hyp]
        assert h["status"] == "ruled-out", f"{case.name}: {hyp} is {h['status']}: {h['summary']}"
        assert h["summary"], f"{case.name}: {hyp} ruled out without saying what was checked"


@pytest.mark.parametrize("case", CASE_DIRS, ids=[p.name for p in CASE_DIRS])
def test_case_baseline_against_itself(case):
    """Every case's before side is a healthy baseline: compared with itself it implicates nothing above info."""
    before = snap.load(case / "before.json")
    absent = [name for name in before["probes"] if find_probe_class(name) is None]
    if absent:
        pytest.skip(f"probe(s) {', '.join(absent)} not registered in this install")
    a = analyse(before, snap.load(case / "before.json"))
    above_info = [
        (f.hypothesis, f.summary)
        for h in a.hypotheses
        for f in h.findings
        if f.status is HypothesisStatus.IMPLICATED and f.severity.weight > Severity.INFO.weight
    ]
    assert above_info == [], f"{case.name}: {above_info}"
