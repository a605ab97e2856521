"""The NCCL log parser on real public logs of NCCL 2.0-2.28 (tests/fixtures/nccl/, each with its source URL)."""

import pytest
from conftest import real_text

from forensics.env import nccllog


def parse(name):
    return nccllog.parse(real_text(f"nccl/{name}").splitlines())


def all_transports(parsed):
    out = {}
    for rec in list(parsed["ranks"].values()) + list(parsed["unranked"].values()):
        for fam, n in rec["transports"].items():
            out[fam] = out.get(fam, 0) + n
    return out


@pytest.mark.parametrize(
    "name, families",
    [
        ("nccl-2.7.8-p2p-ipc.log", {"P2P/IPC"}),
        ("nccl-2.7.8-net-socket-ray-prefix.log", {"NET/Socket"}),
        ("nccl-2.7.8-p2p-ipc-read-aws-libfabric.log", {"P2P/IPC", "NET/AWS Libfabric"}),
        ("nccl-2.8.2-p2p-direct-pointer.log", {"P2P/direct pointer"}),
        ("nccl-2.10.3-direct-shared-memory-p2p-disabled.log", {"SHM"}),
        ("nccl-2.10.3-net-socket-direct-shm-multinode.log", {"SHM", "NET/Socket"}),
        ("nccl-2.1x-net-ib-gdrdma-p2p-direct-pointer-read.log", {"P2P/direct pointer", "NET/IB"}),
        ("nccl-2.1x-net-ib-no-gdr-p2p-ipc-read-k8s.log", {"P2P/IPC", "NET/IB"}),
        ("nccl-2.1x-net-ib-gdrdma-a100.log", {"NET/IB"}),
        ("nccl-2.1x-net-socket-multi-dev-dgxa100.log", {"NET/Socket"}),
        ("nccl-2.1x-mixed-p2p-read-and-shm-8gpu.log", {"P2P/direct pointer", "SHM"}),
        ("nccl-2.20.5-p2p-direct-pointer-l20.log", {"P2P/direct pointer"}),
        ("nccl-2.22.3-p2p-cumem-torchrun.log", {"P2P/CUMEM"}),
        ("nccl-2.27.5-shm-direct-torch-2gpu.log", {"SHM"}),
        ("nccl-2.2x-p2p-cumem-read-cloudwatch-prefix.log", {"P2P/CUMEM"}),
    ],
)
def test_transport_families_across_versions(name, families):
    got = all_transports(parse(name))
    assert set(got) >= families and all(n > 0 for n in got.values()), got
    assert set(got) <= families | {
        "NET/Socket",
        "NET/IB",
        "SHM",
        "P2P/IPC",
        "P2P/direct pointer",
    }, got


@pytest.mark.parametrize(
    "name, version",
    [
        ("nccl-2.7.8-p2p-ipc.log", "2.7.8+cuda10.2"),  # bare line, no host prefix
        ("nccl-2.8.2-p2p-direct-pointer.log", "2.8.2+cuda11.1"),
        ("nccl-2.10.3-direct-shared-memory-p2p-disabled.log", "2.10.3+cuda11.3"),
        ("nccl-2.20.5-p2p-direct-pointer-l20.log", "2.20.5+cuda12.4"),
        ("nccl-2.22.3-p2p-cumem-torchrun.log", "2.22.3+cuda12.6"),  # prefixed from 2.22
        ("nccl-2.27.5-shm-direct-torch-2gpu.log", "2.27.5+cuda12.9"),
    ],
)
def test_version_line_bare_and_prefixed(name, version):
    assert parse(name)["version"] == version


def test_p2p_could_not_enable_is_recorded():
    parsed = parse("nccl-2.10.3-direct-shared-memory-p2p-disabled.log")
    fails = [
        f
        for r in list(parsed["ranks"].values()) + list(parsed["unranked"].values())
        for f in r["p2p_failures"]
    ]
    assert "1(=1b000) and 0(=1a000)" in fails


def test_ring_channel_summary_is_not_a_transport():
    # "Channel 00/24 : 0 1" has no "via": it must not count as a connection
    r = nccllog.parse(["vm:1:1 [0] NCCL INFO Channel 00/24 : 0 1"])
    assert r["unranked"]["vm:1"]["transports"] == {}


@pytest.mark.parametrize(
    "name, needle",
    [
        (
            "warn-2.10.3-ibvwrap-libibverbs.log",
            "misc/ibvwrap.cc:63 Failed to open libibverbs.so[.1]",
        ),
        (
            "warn-socket-closed-rem-allocator-cuda-oom.log",
            "include/alloc.h:48 Cuda failure 'out of memory'",
        ),
        (
            "warn-socket-closed-rem-allocator-cuda-oom.log",
            "bootstrap.cc:279 [Rem Allocator] Allocation failed (segment 0, fd 130)",
        ),
        (
            "warn-shm-and-socket-connect-abort-nccltests.log",
            "misc/shmutils.cc:112 Error while creating shared memory segment",
        ),
        (
            "warn-2.21.5-enqueue-cuda-failure.log",
            "enqueue.cc:47 Cuda failure 'named symbol not found'",
        ),
        (
            "warn-alloc-cuda-failure-ray-timestamp-prefix.log",
            "include/alloc.h:102 Cuda failure 1 'invalid argument'",
        ),
        (
            "warn-old-nccl-2.0-2.4-without-NCCL-word.log",
            "include/socket.h:185 Call to connect failed : Connection refused",
        ),
        ("warn-rccl-missing-iommu-pt.log", 'Missing "iommu=pt" from kernel command line'),
        (
            "warn-socket-connect-ipv6-ncclsystemerror.log",
            "misc/socket.cc:483 socketStartConnect: Connect to fe80::db8:2%ib1",
        ),
    ],
)
def test_warn_lines_in_the_form_nccl_prints_them(name, needle):
    parsed = parse(name)
    warns = [
        w
        for r in list(parsed["ranks"].values()) + list(parsed["unranked"].values())
        for w in r["warnings"]
    ]
    assert any(needle in w for w in warns), warns[:5]


def test_warn_classification():
    assert (
        nccllog.classify_warning("misc/ibvwrap.cc:63 Failed to open libibverbs.so[.1]")[0] is True
    )
    benign, what = nccllog.classify_warning("include/alloc.h:48 Cuda failure 'out of memory'")
    assert not benign and "out of memory" in what
    assert not nccllog.classify_warning(
        "misc/shmutils.cc:112 Error while creating shared memory segment /dev/shm/x"
    )[0]
    for line in real_text("nccl/warn-texts-from-issue-titles.txt").splitlines():
        if "WARN" in line:
            assert nccllog.classify_warning(line)[0] is False, line


def test_failed_collectives_as_torch_reports_them():
    fails = nccllog.failures(real_text("nccl/torch-failed-collectives.log").splitlines())
    kinds = {(f["what"], f.get("code")) for f in fails}
    assert ("internal error", "ncclInternalError") in kinds
    assert ("unhandled cuda error", "ncclUnhandledCudaError") in kinds
    internal = next(f for f in fails if f["what"] == "internal error")
    assert (
        internal["nccl_version"] == "2.14.3"
        and internal["last_error"] == "Bootstrap : no socket interface found"
    )
    cuda = next(f for f in fails if f["what"] == "unhandled cuda error")
    assert cuda["last_error"] == "Cuda failure 1 'invalid argument'"


def test_watchdog_timeouts_old_and_new_forms():
    fails = nccllog.failures(real_text("nccl/torch-watchdog-timeouts.log").splitlines())
    got = {(f["op"], f["seq"]) for f in fails}
    assert ("ALLREDUCE", 1580) in got  # new form with NumelIn/NumelOut
    assert ("ALLREDUCE", 469508) in got  # old form without them
    assert ("_REDUCE_SCATTER_BASE", 7753) in got
    one = next(f for f in fails if f["seq"] == 1580)
    assert one["timeout_ms"] == 600000 and one["ran_ms"] >= 600000


def test_no_failure_in_a_healthy_log():
    assert nccllog.failures(real_text("nccl/nccl-2.22.3-p2p-cumem-torchrun.log").splitlines()) == []
