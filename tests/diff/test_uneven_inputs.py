"""diff on uneven inputs, found by a fresh-user pass: a probe on one side only, snapshots of
machines that cannot be matched, and a --no-redact snapshot against a redacted one. Built from
the real 2 x H200 A/A snapshots in examples/aa."""

from __future__ import annotations

import copy
import json

import pytest

from forensics import snapshot as snap
from forensics.diff.ledger import analyse, machine_note
from forensics.model import HypothesisStatus
from tests.conftest import ROOT, run_cli

AA = ROOT / "examples" / "aa"


def _pair():
    return snap.load(AA / "before.json"), snap.load(AA / "after.json")


def test_a_probe_missing_on_one_side_rules_nothing_out():
    before, after = _pair()
    del after["probes"]["nccl_env"]
    an = analyse(before, after)
    prop = next(h for h in an.hypotheses if h.id == "nccl.env-propagation")
    assert prop.status is HypothesisStatus.INCONCLUSIVE  # was "ruled out: 0 variables compared"
    assert "nccl_env (no data in AFTER)" in an.verdict


def test_machines_that_cannot_be_matched_are_said_so():
    before, after = _pair()
    assert machine_note(before, after) == ""  # both 'vm', neither has a machine id: same machine
    after["machine"] = {
        "hostname": "vm",
        "machine_id": "3d1210aa55c1",
        "hardware": "x86_64, 2 CPUs, 8 GiB",
    }
    assert machine_note(before, after).startswith(
        "Cannot tell whether BEFORE and AFTER were taken on the same machine"
    )
    before["machine"] = {"hostname": "vm", "hardware": "x86_64, 32 CPUs, 252 GiB"}
    after["machine"] = {"hostname": "vm", "hardware": "x86_64, 2 CPUs, 8 GiB"}
    assert "different hardware" in machine_note(before, after)


@pytest.mark.slow
def test_an_unredacted_snapshot_is_redacted_for_the_report(tmp_path):
    raw_b, raw_a = (
        json.loads((AA / "before.json").read_text()),
        json.loads((AA / "after.json").read_text()),
    )
    secret = "https://nuser:NRPASS123@host/"
    for doc, value in ((raw_b, "https://<redacted>@host/"), (raw_a, secret)):
        doc["probes"]["nccl_env"]["data"]["parent"]["env"]["NCCL_SOCKET_IFNAME"] = value
    raw_a["probes"]["nccl_env"]["data"]["parent"]["env"]["HF_TOKEN"] = "hf_plainvalue"
    raw_b["probes"]["nccl_env"]["data"]["parent"]["env"]["HF_TOKEN"] = "<redacted>"
    raw_a["redaction"] = "off (--no-redact)"
    b, a = tmp_path / "b.json", tmp_path / "a.json"
    b.write_text(json.dumps(raw_b))
    a.write_text(json.dumps(raw_a))
    for fmt in ("html", "md", "json"):
        out = tmp_path / f"r.{fmt}"
        proc = run_cli("diff", str(b), str(a), "-o", str(out), "-q")
        assert proc.returncode == 0, proc.stderr
        text = out.read_text()
        assert "NRPASS123" not in text and "hf_plainvalue" not in text, fmt
        assert "AFTER was taken with --no-redact" in text
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["verdict"].startswith(
        "No significant change"
    )  # no fake NCCL_SOCKET_IFNAME/HF_TOKEN change
    kept = run_cli("diff", str(b), str(a), "-o", str(tmp_path / "k.md"), "--no-redact", "-q")
    assert kept.returncode == 0 and "NRPASS123" in (tmp_path / "k.md").read_text()


def test_redact_loaded_leaves_a_redacted_snapshot_alone():
    before, _ = _pair()
    swept, n = snap.redact_loaded(copy.deepcopy(before))
    assert n == 0 and swept["probes"] == before["probes"]
