"""Every condition the known-issues catalog uses is checked against the snapshot's own fields.

Enumerates the condition kinds (and ``topology`` values) of forensics/data/known_issues.yaml: each
must have a checker in :data:`forensics.diff.known.CONDITIONS` / :data:`TOPOLOGY`, or be named in
:data:`WORKLOAD_FACTS` (facts of the user's job that no snapshot field holds) or left ``None`` in
TOPOLOGY with the reason in its docstring. The checkers run on real snapshots: the 2 x H200 (NV18)
of examples/aa and the 8-GPU bridge-pairs matrix of NVIDIA/nccl#770 (examples/incidents).
"""

from __future__ import annotations

from forensics import snapshot as snap
from forensics.diff import known
from tests.conftest import ROOT

H200 = snap.load(ROOT / "examples" / "aa" / "after.json")
PAIRS = snap.load(ROOT / "examples" / "incidents" / "nccl-2.16.2-bridge-pairs" / "after.json")


def _kinds():
    kinds, topo = set(), set()
    for e in known.catalog():
        for k, v in (e.get("condition") or {}).items():
            kinds.add(str(k))
            if k == "topology":
                topo |= {str(x) for x in (v if isinstance(v, list) else [v])}
    return kinds, topo


def test_every_condition_kind_has_a_checker_or_a_reason():
    kinds, topo = _kinds()
    assert {"topology", "gpu_family", "nodes"} <= kinds
    assert kinds <= set(known.CONDITIONS) | set(known.WORKLOAD_FACTS), (
        kinds - set(known.CONDITIONS) - set(known.WORKLOAD_FACTS)
    )
    assert not set(known.CONDITIONS) & set(known.WORKLOAD_FACTS)
    assert topo <= set(known.TOPOLOGY), topo - set(known.TOPOLOGY)
    assert "nvlink-bridge-pairs" in topo and known.TOPOLOGY["nvlink-bridge-pairs"] is not None


def test_every_checker_reads_real_snapshots():
    for kind, check in known.CONDITIONS.items():
        for doc in (H200, PAIRS):
            assert check(["x"], doc, set()) in (True, False, None), kind
    for value, check in known.TOPOLOGY.items():
        if check is not None:
            assert check(H200) in (True, False, None) and check(PAIRS) in (True, False, None), value


def test_the_topology_matrix_decides_what_it_states():
    t = known.TOPOLOGY
    assert t["nvlink-bridge-pairs"](PAIRS) is True and t["nvswitch"](PAIRS) is False
    assert t["nvlink"](PAIRS) is True and t["pcie"](PAIRS) is False
    assert t["nvlink"](H200) is True and t["pcie"](H200) is False
    assert (
        t["nvlink-bridge-pairs"](H200) is None and t["nvswitch"](H200) is None
    )  # two GPUs: bridge or switch
    assert known.CONDITIONS["gpu_family"](["ampere"], PAIRS, set()) is True
    assert known.CONDITIONS["gpu_family"](["ampere"], H200, set()) is False
    assert known.CONDITIONS["numa_nodes"]([">=2"], H200, set()) is False
    assert known.CONDITIONS["os"](["linux"], H200, set()) is True
    assert known.CONDITIONS["os"](["windows"], H200, set()) is False


def test_the_bridge_pairs_entry_matches_without_unchecked_conditions():
    from forensics.diff.ledger import analyse

    a = analyse(
        snap.load(ROOT / "examples" / "incidents" / "nccl-2.16.2-bridge-pairs" / "before.json"),
        PAIRS,
    )
    hit = [
        k
        for h in a.hypotheses
        for k in h.known_issues
        if k["id"] == "nccl-2.16.2-pcie-nvlink-bridge-pairs"
    ]
    assert hit and hit[0]["unchecked"] == [] and hit[0]["factor"] == 3.0


def test_gpu_state_entries_match_on_the_snapshots_own_state():
    from forensics.diff.ledger import analyse

    case = ROOT / "tests" / "fixtures" / "cases" / "case22_nvlink_links_inactive"
    before, after = snap.load(case / "before.json"), snap.load(case / "after.json")
    hit = [k for h in analyse(before, after).hypotheses for k in h.known_issues]
    assert [(k["id"], k["hypothesis"], k["possible"]) for k in hit] == [
        ("nvlink-links-inactive", "gpu.topology", False)
    ]
    assert "GPU 0: 12 active, 6 inactive" in hit[0]["what"]
    assert [
        k
        for h in analyse(before, snap.load(case / "before.json")).hypotheses
        for k in h.known_issues
    ] == []
    assert (
        known.STATE_MATCHERS["pcie_acs"][1](before, after) == ""
    )  # no ACS recorded on the H200 pair
