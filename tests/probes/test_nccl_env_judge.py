"""The nccl_env judge: nccl.env and nccl.env-propagation, on case 10 and hand-written sections."""

import copy
import json

import pytest

from forensics import snapshot as snap
from forensics.env.judge import judge, judge_env, judge_propagation, problems
from forensics.model import HypothesisStatus, ProbeStatus, Severity
from forensics.probe import ProbeResult
from forensics.registry import find_probe_class
from tests.conftest import FIXTURES, ROOT

CASE = FIXTURES / "cases" / "case10_launcher_injects_ifname"
UNSET = {"missing": "not_found", "detail": "unset"}


def section(path):
    return ProbeResult.from_json(snap.load(path)["probes"]["nccl_env"])


def ranked(findings):
    imp = [f for f in findings if f.status is HypothesisStatus.IMPLICATED]
    return sorted(imp, key=lambda f: f.severity.weight * f.relevance, reverse=True)


def test_case10_launcher_injects_ifname():
    expect = json.loads((CASE / "expect.json").read_text())
    probe = find_probe_class("nccl_env")
    findings = probe.judge(section(CASE / "before.json"), section(CASE / "after.json"))
    top = ranked(findings)[0]
    assert top.hypothesis == expect["top"] == "nccl.env-propagation"
    assert top.severity is Severity.HIGH
    assert "NCCL_SOCKET_IFNAME differs between the launching process (unset)" in top.summary
    text = "\n".join(top.evidence)
    for rank in (0, 1):
        assert (
            f"launcher rank {rank}: NCCL_SOCKET_IFNAME='^lo,docker,veth' vs launching process unset"
            in text
        )
        assert (
            f"launcher rank {rank}: NCCL reported 'NCCL_SOCKET_IFNAME set by environment to ^lo,docker,veth' "
            "(launching process: unset)"
        ) in text
    env = [f for f in findings if f.hypothesis == "nccl.env"]
    assert [f.status for f in env] == [HypothesisStatus.RULED_OUT]
    assert set(expect["ruled_out"]) <= {
        f.hypothesis for f in findings if f.status is HypothesisStatus.RULED_OUT
    }


def test_identical_snapshots_implicate_nothing():
    s = section(CASE / "before.json")
    findings = judge(s, s)
    assert [(f.hypothesis, f.status) for f in findings[2:]] == [
        ("nccl.transport", HypothesisStatus.RULED_OUT),
        ("host.numa", HypothesisStatus.INCONCLUSIVE),
    ]
    assert (
        "NET/IB x16" in findings[2].summary
    )  # the case's ranks went over InfiniBand on both sides
    findings = findings[:2]
    assert [f.status for f in findings] == [HypothesisStatus.RULED_OUT, HypothesisStatus.RULED_OUT]
    assert "workers saw the launching process's values" in findings[1].summary
    assert (
        "launcher rank 0" in findings[1].summary
        and "NCCL's 'set by environment' report agrees" in findings[1].summary
    )


def test_problem_present_in_both_is_low_and_says_so():
    s = section(CASE / "after.json")
    findings = judge_propagation(s.data, s.data)
    [f] = findings
    assert (
        f.status is HypothesisStatus.IMPLICATED
        and f.severity is Severity.LOW
        and f.relevance == 0.2
    )
    assert "in both snapshots: a standing problem, not what changed" in f.summary


def test_problem_gone_since_before_is_a_change():
    findings = judge_propagation(
        section(CASE / "after.json").data, section(CASE / "before.json").data
    )
    [f] = findings
    assert f.status is HypothesisStatus.IMPLICATED and f.severity is Severity.MEDIUM
    assert f.summary.startswith("NCCL_SOCKET_IFNAME no longer differs")


def test_single_snapshot_reports_its_problems():
    [f] = judge_propagation(None, section(CASE / "after.json").data)
    assert f.status is HypothesisStatus.IMPLICATED and f.severity is Severity.HIGH


def test_problems_keyed_by_variable_channel_and_source():
    probs = problems(section(CASE / "after.json").data)
    assert set(probs) == {
        ("NCCL_SOCKET_IFNAME", f"launcher rank {r}", src) for r in (0, 1) for src in ("env", "nccl")
    }
    assert probs[("NCCL_SOCKET_IFNAME", "launcher rank 1", "nccl")] == {
        "parent": UNSET,
        "worker": "^lo,docker,veth",
        "where": "nccl",
    }


def test_nccl_conf_explains_a_reported_variable():
    data = copy.deepcopy(section(CASE / "after.json").data)
    for rank in data["launcher"]["ranks"]:
        rank["differs"] = []
        for d in rank["nccl"]["nccl_differs"]:
            d["explained_by"] = "/etc/nccl.conf"
    [f] = judge_propagation(None, data)
    assert f.status is HypothesisStatus.RULED_OUT


def _env_section(env, conf=None):
    return {
        "select": ["NCCL_"],
        "parent": {"env": env},
        "config_files": {"files": [], "effective": conf or {}},
    }


def test_nccl_env_changes_with_descriptions():
    before = _env_section(
        {"NCCL_ALGO": "Ring", "NCCL_DEBUG": "WARN", "MASTER_PORT": "29500", "NCCL_FOO": "1"}
    )
    after = _env_section(
        {"NCCL_DEBUG": "INFO", "NCCL_P2P_DISABLE": "1", "MASTER_PORT": "29611", "NCCL_FOO": "1"},
        {"NCCL_IB_HCA": {"value": "mlx5_1", "from": "/etc/nccl.conf"}},
    )
    by_var = {f.summary.split()[0]: f for f in judge_env(before, after)}
    assert set(by_var) == {
        "NCCL_ALGO",
        "NCCL_DEBUG",
        "NCCL_P2P_DISABLE",
        "NCCL_IB_HCA",
    }  # MASTER_PORT is bookkeeping
    assert (
        by_var["NCCL_ALGO"].summary
        == "NCCL_ALGO removed in the launching process's environment: 'Ring' -> unset"
    )
    assert by_var["NCCL_ALGO"].severity is Severity.HIGH
    assert (
        by_var["NCCL_P2P_DISABLE"]
        .evidence[0]
        .startswith("NCCL_P2P_DISABLE: 1 disables direct GPU-to-GPU")
    )
    assert by_var["NCCL_DEBUG"].severity is Severity.LOW
    assert "nccl.conf" in by_var["NCCL_IB_HCA"].summary
    assert all(f.status is HypothesisStatus.IMPLICATED for f in by_var.values())


def test_nccl_env_unchanged_is_ruled_out_and_one_sided_inconclusive():
    s = _env_section({"NCCL_ALGO": "Ring"})
    [f] = judge_env(s, copy.deepcopy(s))
    assert f.status is HypothesisStatus.RULED_OUT and "1 set" in f.summary
    assert judge_env(None, s) == []  # a missing side is the ledger's to mark
    from _diffkit import section, snapshot

    from forensics.diff.ledger import analyse

    by_id = {h.id: h for h in analyse(snapshot({}), snapshot({"nccl_env": section(s)})).hypotheses}
    g = by_id["nccl.env"]
    assert (
        g.status is HypothesisStatus.INCONCLUSIVE
        and "'nccl_env' has no data in BEFORE" in g.summary
    )


def test_no_data_is_inconclusive():
    failed = ProbeResult(ProbeStatus.FAILED, reason="timed out")
    findings = judge(failed, None)
    assert {f.status for f in findings} == {HypothesisStatus.INCONCLUSIVE}


def test_every_failed_start_method_is_inconclusive():
    data = {
        "parent": {"env": {}},
        "start_methods": {"spawn": {"status": "failed"}},
        "launcher": {"missing": "x"},
    }
    [f] = judge_propagation(data, data)
    assert f.status is HypothesisStatus.INCONCLUSIVE


def test_headline():
    probe = find_probe_class("nccl_env")
    assert (
        probe.headline(section(CASE / "after.json").data)
        == "4 vars; differ in workers: NCCL_SOCKET_IFNAME (launcher rank 0, launcher rank 1); NCCL 2.28.9+cuda13.0 all-reduce ok"
    )
    assert (
        probe.headline(section(CASE / "before.json").data)
        == "4 vars; workers agree (spawn, forkserver, subprocess, torch_spawn); NCCL 2.28.9+cuda13.0 all-reduce ok"
    )


@pytest.mark.parametrize(
    "opts,extra",
    [
        ({}, 0.0),
        ({"nccl_init": True}, 90.0),
        ({"launcher": "x"}, 60.0),
        ({"nccl_init": True, "launcher": "x"}, 150.0),
        ({"deep": True}, 20.0),
    ],
)
def test_extra_timeout(opts, extra):
    assert find_probe_class("nccl_env").extra_timeout_s(opts) == extra


EXAMPLES = ROOT / "examples" / "h200x2"


def test_real_h200_snapshots_nccl_facts():
    """Captured on 2 x H200 with NCCL_ALGO=Ring NCCL_PROTO=Simple; the second under a launcher that drops both."""
    set_ = section(EXAMPLES / "nccl-env-set.json").data
    dropped = section(EXAMPLES / "nccl-env-dropped.json").data
    assert (
        set_["nccl_init"]["backend"] == "nccl" and set_["nccl_init"]["version"] == "2.28.9+cuda13.0"
    )
    for rank in set_["nccl_init"]["ranks"]:
        assert rank["nccl"]["set_by_environment"] == {
            "NCCL_NVLS_ENABLE": "0",
            "NCCL_PROTO": "Simple",
            "NCCL_ALGO": "Ring",
        }
        assert rank["nccl"]["channels"] == 24 and rank["nccl"]["transports"] == {"P2P/CUMEM": 24}
        assert rank["nccl"]["allreduce_ok"] is True
    assert dropped["nccl_init"]["under"] == "launcher"
    for rank in dropped["launcher"]["ranks"]:
        assert rank["nccl"]["set_by_environment"] == {"NCCL_NVLS_ENABLE": "0"}
    assert judge_propagation(None, set_)[0].status is HypothesisStatus.RULED_OUT


def test_real_h200_dropped_launcher_is_judged_propagation():
    findings = judge(
        section(EXAMPLES / "nccl-env-set.json"), section(EXAMPLES / "nccl-env-dropped.json")
    )
    top = ranked(findings)
    assert {f.summary.split()[0] for f in top} == {"NCCL_ALGO", "NCCL_PROTO"}
    assert all(f.hypothesis == "nccl.env-propagation" and f.severity is Severity.HIGH for f in top)
    algo = next(f for f in top if f.summary.startswith("NCCL_ALGO"))
    assert (
        "launching process ('Ring')" in algo.summary
        and "launcher rank 0, launcher rank 1: unset" in algo.summary
    )
    assert (
        "launcher rank 1: NCCL did not report NCCL_ALGO as set by environment (it reported: NCCL_NVLS_ENABLE=0)"
        in algo.evidence
    )
    assert [f.status for f in findings if f.hypothesis == "nccl.env"] == [
        HypothesisStatus.RULED_OUT
    ]
