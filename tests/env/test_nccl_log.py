"""The NCCL INFO log parser, on the real 2 x H200 capture."""

from forensics.env import nccllog
from forensics.env.data import _Redact, nccl_entry
from forensics.redact import Redactor
from tests.conftest import FIXTURES

LOG = FIXTURES / "h200x2" / "nccl-debug-info.log"


def lines():
    return LOG.read_text().splitlines()


def test_real_log_version_and_ranks_by_pid():
    parsed = nccllog.parse(lines())
    assert parsed["version"] == "2.28.9+cuda13.0"
    assert sorted(parsed["ranks"]) == ["0", "1"]
    assert parsed["ranks"]["0"]["pid"] == 983 and parsed["ranks"]["1"]["pid"] == 984
    assert parsed["ranks"]["1"]["cuda_dev"] == 1
    assert parsed["unranked"] == {}


def test_real_log_set_by_environment_per_rank():
    parsed = nccllog.parse(lines())
    for rank in ("0", "1"):
        # "NCCL_NVLS_ENABLE set by environment to 0." carries a trailing period in NCCL's output
        assert parsed["ranks"][rank]["set_by_environment"] == {
            "NCCL_NVLS_ENABLE": "0",
            "NCCL_PROTO": "Simple",
            "NCCL_ALGO": "Ring",
        }


def test_real_log_channels_transport_network():
    parsed = nccllog.parse(lines())
    for rank in ("0", "1"):
        r = parsed["ranks"][rank]
        assert r["channels"] == 24
        assert r["transports"] == {"P2P/CUMEM": 24}
        assert r["network"] == "Socket"
        assert r["warnings"] == []


def test_other_transports_and_warn_lines():
    text = [
        "node:7:7 [0] NCCL INFO ncclCommInitRankConfig comm 0x1 rank 3 nranks 4 cudaDev 0 nvmlDev 0 busId 1 commId 0x2 - Init START",
        "node:7:7 [0] NCCL INFO Channel 00/0 : 3[0] -> 0[0] [send] via NET/IB/0/GDRDMA",
        "node:7:7 [0] NCCL INFO Channel 01/0 : 3[0] -> 2[1] via SHM/direct/direct",
        "node:7:7 [0] NCCL INFO Channel 02/0 : 3[0] -> 0[0] [receive] via NET/Socket/1",
        "node:7:9 [0] NCCL WARN NET/IB : Got async event : port error",
        "node:7:7 [0] NCCL INFO Channel 00/02 : 0 1 2 3",
        "not an NCCL line",
    ]
    r = nccllog.parse(text)["ranks"]["3"]
    assert r["transports"] == {"NET/IB": 1, "SHM": 1, "NET/Socket": 1}
    assert r["channels"] == 2  # from the ring line when there is no "coll channels" line
    assert r["warnings"] == ["NET/IB : Got async event : port error"]
    assert r["version"] is None


def test_transport_family():
    assert nccllog.transport_family("P2P/CUMEM/read") == "P2P/CUMEM"
    assert nccllog.transport_family("P2P/IPC") == "P2P/IPC"
    assert nccllog.transport_family("SHM/direct/direct") == "SHM"
    assert nccllog.transport_family("NET/IB/0/GDRDMA") == "NET/IB"


def test_nccl_report_compared_with_parent():
    """A worker whose NCCL read NCCL_ALGO=Ring while the launching process has Tree, and no NCCL_PROTO."""
    info = {
        "backend": "nccl",
        "nccl_available": True,
        "allreduce_ok": True,
        "log_lines": [ln for ln in lines() if ln.startswith("vm:983:")],
    }
    entry = nccl_entry(
        info,
        {"NCCL_ALGO": "Tree", "NCCL_NVLS_ENABLE": "0"},
        _Redact(Redactor()),
        "x",
        conf={"NCCL_PROTO": {"value": "Simple", "from": "/etc/nccl.conf"}},
    )
    assert entry["version"] == "2.28.9+cuda13.0" and entry["channels"] == 24
    diffs = {d["name"]: d for d in entry["nccl_differs"]}
    assert set(diffs) == {"NCCL_ALGO", "NCCL_PROTO"}
    assert diffs["NCCL_ALGO"]["parent"] == "Tree" and diffs["NCCL_ALGO"]["nccl"] == "Ring"
    assert diffs["NCCL_PROTO"]["parent"] == {"missing": "not_found", "detail": "unset"}
    assert diffs["NCCL_PROTO"]["explained_by"] == "/etc/nccl.conf"


def test_gloo_rank_has_missing_nccl_facts():
    entry = nccl_entry(
        {
            "backend": "gloo",
            "nccl_available": False,
            "allreduce_ok": True,
            "reason": "NCCL not available: no GPU",
        },
        {},
        _Redact(Redactor()),
        "x",
    )
    assert entry["version"] == {"missing": "not_applicable", "detail": "NCCL not available: no GPU"}
    assert entry["nccl_available"] is False and entry["nccl_differs"] == []
