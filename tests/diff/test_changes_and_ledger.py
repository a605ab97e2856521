"""The generic snapshot diff (forensics.diff.changes) and the ledger's plumbing (forensics.diff.ledger)."""

from __future__ import annotations

from _diffkit import section, snapshot

from forensics.diff.changes import ChangeKind, diff_probe, diff_snapshots
from forensics.diff.ledger import analyse, machine_note
from forensics.hypotheses import HYPOTHESES
from forensics.model import HypothesisStatus, missing
from forensics.probe import FieldSpec


def _gpus(clock0: int, temp0: int, order=(0, 1)):
    devs = [
        {"uuid": "GPU-aaaa", "index": 0, "clock_sm_mhz": clock0, "temperature_c": temp0},
        {"uuid": "GPU-bbbb", "index": 1, "clock_sm_mhz": 1980, "temperature_c": 31},
    ]
    return {"devices": [devs[i] for i in order]}


def test_identical_snapshots_have_no_changes():
    doc = snapshot({"gpu": section(_gpus(1980, 30))})
    assert diff_snapshots(doc, doc) == []


def test_gpus_are_matched_by_uuid_not_by_index():
    before = {"status": "ok", "data": _gpus(1980, 30)}
    after = {"status": "ok", "data": _gpus(1440, 30, order=(1, 0))}  # reordered, GPU-aaaa slower
    changes = diff_probe("gpu", before, after)
    assert [(c.path, c.kind, c.before, c.after) for c in changes] == [
        ("gpu.devices[GPU-aaaa].clock_sm_mhz", ChangeKind.CHANGED, 1980, 1440)
    ]


def test_field_table_marks_volatile_fields_and_labels():
    specs = {"devices.*.temperature_c": FieldSpec(unit="C", label="GPU temperature", volatile=True)}
    changes = diff_probe(
        "gpu",
        {"status": "ok", "data": _gpus(1980, 30)},
        {"status": "ok", "data": _gpus(1980, 44)},
        specs,
    )
    assert len(changes) == 1
    assert changes[0].volatile and changes[0].label == "GPU temperature" and changes[0].unit == "C"


def test_value_to_missing_is_its_own_kind():
    gone = missing("gpu_lost", "nvmlDeviceGetClockInfo")
    changes = diff_probe(
        "gpu",
        {"status": "ok", "data": {"clock_sm_mhz": 1980}},
        {"status": "ok", "data": {"clock_sm_mhz": gone}},
    )
    assert changes[0].kind is ChangeKind.TO_MISSING and changes[0].after == gone
    back = diff_probe(
        "gpu",
        {"status": "ok", "data": {"clock_sm_mhz": gone}},
        {"status": "ok", "data": {"clock_sm_mhz": 1980}},
    )
    assert back[0].kind is ChangeKind.FROM_MISSING


def test_added_removed_keys_and_unkeyed_lists_as_multisets():
    before = {
        "status": "ok",
        "data": {"env": {"NCCL_ALGO": "Ring"}, "reflog": [{"action": "a"}, {"action": "b"}]},
    }
    after = {
        "status": "ok",
        "data": {
            "env": {"NCCL_PROTO": "LL"},
            "reflog": [{"action": "c"}, {"action": "a"}, {"action": "b"}],
        },
    }
    got = {(c.path, c.kind) for c in diff_probe("x", before, after)}
    assert got == {
        ("x.env.NCCL_ALGO", ChangeKind.REMOVED),
        ("x.env.NCCL_PROTO", ChangeKind.ADDED),
        ("x.reflog[#0]", ChangeKind.ADDED),
    }


def test_probe_status_change_carries_the_reason():
    before = {"status": "ok", "data": {"a": 1}}
    after = {"status": "unavailable", "reason": "no NVIDIA driver found", "data": {}}
    changes = diff_probe("gpu", before, after)
    assert changes[0].path == "gpu.status"
    assert changes[0].after == "unavailable: no NVIDIA driver found"


def test_every_hypothesis_ends_with_a_status_and_unknown_probes_are_noted():
    before = snapshot({"thirdparty": section({"x": 1})})
    after = snapshot({"thirdparty": section({"x": 2})})
    a = analyse(before, after)
    assert {h.id for h in a.hypotheses} >= set(HYPOTHESES)
    assert all(isinstance(h.status, HypothesisStatus) for h in a.hypotheses)
    assert any("'thirdparty' is not installed" in n for n in a.notes)
    assert [c.path for c in a.changes] == ["thirdparty.x"]
    assert a.verdict.startswith(
        "Nothing implicated, and no slowdown was measured (no benchmark in either snapshot)"
    )


def test_different_machines_are_said_at_the_top():
    a = snapshot({}, host="node-a", machine_id="111111111111")
    b = snapshot({}, host="node-b", machine_id="222222222222")
    assert machine_note(a, a) == ""
    note = machine_note(a, b)
    assert "different machines" in note and "node-a" in note and "node-b" in note
    assert not analyse(a, b).to_json()["same_machine"]


def test_json_interface_keys():
    doc = analyse(snapshot({}), snapshot({})).to_json()
    assert {"verdict", "hypotheses", "changes", "commits", "bench"} <= set(doc)
    assert doc["bench"] is None
    for h in doc["hypotheses"]:
        assert {"id", "status", "score", "evidence"} <= set(h)
