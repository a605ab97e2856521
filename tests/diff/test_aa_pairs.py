"""A/A: two real snapshots of this machine, taken one after the other, implicate nothing."""

from __future__ import annotations

import time

from forensics.collect import take_snapshot
from forensics.diff.ledger import analyse
from forensics.model import HypothesisStatus, Severity
from forensics.registry import load_probes
from forensics.render.report import render_html


def test_aa_two_real_snapshots_of_this_machine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no repository here: the git probe reports that plainly
    loaded, _ = load_probes()
    assert loaded, "no probe registered"
    first = take_snapshot(label="a")
    time.sleep(1.0)  # idle counters (load average, memory used, uptime) move meanwhile
    second = take_snapshot(label="b")
    a = analyse(first, second)
    above_info = [
        (f.hypothesis, f.summary)
        for h in a.hypotheses
        for f in h.findings
        if f.status is HypothesisStatus.IMPLICATED and f.severity.weight > Severity.INFO.weight
    ]
    assert above_info == []
    assert a.implicated == [] and a.top is None
    assert a.verdict.startswith("Nothing implicated, and no slowdown was measured")
    assert not a.machine_note
    assert "Nothing implicated, and no slowdown was measured" in render_html(a)
