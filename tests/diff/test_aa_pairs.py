"""A/A: two real snapshots of this machine, taken one after the other, implicate nothing."""

from __future__ import annotations

import time

from forensics.diff.ledger import analyse
from forensics.model import HypothesisStatus, Severity
from forensics.registry import load_probes
from forensics.render.report import render_html
from forensics.snapshot import load
from tests.conftest import run_cli


def test_aa_two_real_snapshots_of_this_machine(tmp_path):
    """Each snapshot is a fresh ``forensics snapshot`` process, as a user takes them. Taken in the test's own
    process, they started their workers from a forkserver another test in the same worker had left running
    with NCCL_ALGO set, and read 'NCCL_ALGO differs between the launching process and its workers
    (forkserver)' (it failed so once, with the tests in another order)."""
    loaded, _ = load_probes()
    assert loaded, "no probe registered"
    # no repository here: the git probe reports that plainly
    r = run_cli("snapshot", "--label", "a", "-o", "a.json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    time.sleep(1.0)  # idle counters (load average, memory used, uptime) move meanwhile
    r = run_cli("snapshot", "--label", "b", "-o", "b.json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    first, second = (load(tmp_path / f"{side}.json") for side in "ab")
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
