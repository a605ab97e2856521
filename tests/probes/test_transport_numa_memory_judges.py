"""The judges of issue 14: nccl.transport, host.numa (nccl_env data), gpu.memory, the spin signature and
ACS/IOMMU under gpu.topology (gpu data). Inputs are built from real readings: the H200 of 2026-12-01
(memory 133889 of 143771 MiB at 93%, matmul 100% SM / 21-23% memory, copy 100% / 100%), public NCCL logs,
numa_maps/status samples (tests/fixtures/)."""

import copy

from conftest import real_text
from forensics_probes.gpu.load import judge_memory, judge_spin
from forensics_probes.gpu.state import judge_topology

from forensics.env import nccllog
from forensics.env.data import _Redact, nccl_entry
from forensics.env.numa import judge_numa
from forensics.env.transport import judge_transport
from forensics.env.workers.binding import cpulist, parse_cpulist, parse_status, summarize_numa_maps
from forensics.gpu.sampler import summarise
from forensics.model import HypothesisStatus as H
from forensics.model import Severity
from forensics.redact import Redactor

MIB = 2**20


# -- nccl.transport -------------------------------------------------------------------------------------
def rank_from_log(name, pid_prefix=None, **info):
    lines = real_text(f"nccl/{name}").splitlines() if name.endswith(".log") else name.splitlines()
    if pid_prefix:
        lines = [ln for ln in lines if pid_prefix in ln]
    entry = nccl_entry(
        {
            "backend": "nccl",
            "nccl_available": True,
            "allreduce_ok": True,
            "log_lines": lines,
            **info,
        },
        {},
        _Redact(Redactor()),
        "x",
    )
    return {"rank": 0, "nccl": entry, "env": {}, "differs": []}


def data_with(*ranks, env=None, interfaces=None):
    d = {
        "parent": {"env": env or {}},
        "start_methods": {},
        "nccl_init": {"under": "subprocess", "ranks": list(ranks)},
    }
    if interfaces is not None:
        d["network"] = {"interfaces": interfaces}
    return d


H200_IFS = {
    "eth0": {"operstate": "up", "mtu": 1400, "families": ["inet", "inet6"]},
    "ifb0": {"operstate": "down", "mtu": 1500, "families": []},
    "ifb1": {"operstate": "down", "mtu": 1500, "families": []},
    "lo": {"operstate": "unknown", "mtu": 65536, "families": ["inet", "inet6"]},
}


def test_p2p_to_shm_downgrade_is_high():
    before = data_with(rank_from_log("nccl-2.22.3-p2p-cumem-torchrun.log", "host-a:5663:"))
    after = data_with(rank_from_log("nccl-2.27.5-shm-direct-torch-2gpu.log", "host-a:205631:"))
    [f] = judge_transport(before, after)
    assert f.status is H.IMPLICATED and f.severity is Severity.HIGH and f.relevance == 0.9
    assert "P2P/CUMEM" in f.summary and "-> SHM" in f.summary


def test_same_transport_is_ruled_out_and_upgrade_is_not_high():
    p2p = data_with(rank_from_log("nccl-2.22.3-p2p-cumem-torchrun.log", "host-a:5663:"))
    [same] = judge_transport(p2p, copy.deepcopy(p2p))
    assert same.status is H.RULED_OUT and "P2P/CUMEM" in same.summary
    shm = data_with(rank_from_log("nccl-2.27.5-shm-direct-torch-2gpu.log", "host-a:205631:"))
    [up] = judge_transport(shm, p2p)
    assert up.status is H.IMPLICATED and up.severity is Severity.MEDIUM


def test_no_nccl_init_is_inconclusive_never_ruled_out():
    [f] = judge_transport({"parent": {"env": {}}}, {"parent": {"env": {}}})
    assert f.status is H.INCONCLUSIVE and "--nccl-init" in f.summary


def test_failed_collective_is_high_with_the_last_error():
    err = real_text("nccl/torch-failed-collectives.log").split(
        "# ==== https://github.com/codefuse-ai"
    )[0]
    bad = rank_from_log(
        "nccl-2.22.3-p2p-cumem-torchrun.log", "host-a:5663:", allreduce_ok=False, error=err
    )
    ok = rank_from_log("nccl-2.22.3-p2p-cumem-torchrun.log", "host-a:5663:")
    found = judge_transport(data_with(ok), data_with(bad))
    f = next(x for x in found if "failed" in x.summary)
    assert f.severity is Severity.HIGH and f.relevance == 1.0
    assert (
        "internal error (ncclInternalError)" in f.summary
        and "no socket interface found" in f.summary
    )
    standing = next(
        x
        for x in judge_transport(data_with(bad), data_with(copy.deepcopy(bad)))
        if "failed" in x.summary
    )
    assert standing.severity is Severity.MEDIUM and "standing" in standing.summary


def test_warn_lines_new_are_medium_benign_ones_are_not():
    ok = rank_from_log("nccl-2.22.3-p2p-cumem-torchrun.log", "host-a:5663:")
    oom = rank_from_log("nccl-2.22.3-p2p-cumem-torchrun.log", "host-a:5663:")
    oom["nccl"]["warnings"] = nccllog.parse(
        real_text("nccl/warn-socket-closed-rem-allocator-cuda-oom.log").splitlines()
    )["unranked"]["host-a:39"]["warnings"]
    found = judge_transport(data_with(ok), data_with(oom))
    w = next(f for f in found if f.summary.startswith("NCCL warned"))
    assert w.severity is Severity.MEDIUM and any("out of memory" in e for e in w.evidence)
    benign = rank_from_log("nccl-2.22.3-p2p-cumem-torchrun.log", "host-a:5663:")
    benign["nccl"]["warnings"] = ["misc/ibvwrap.cc:63 Failed to open libibverbs.so[.1]"]
    [f] = judge_transport(data_with(ok), data_with(benign))
    assert f.status is H.RULED_OUT and any("not a fault" in e for e in f.evidence)


def test_could_not_enable_p2p_is_reported():
    old = rank_from_log("nccl-2.10.3-direct-shared-memory-p2p-disabled.log", "host-a:538447:")
    found = judge_transport(None, data_with(old))
    assert any("could not enable P2P" in f.summary and f.severity is Severity.MEDIUM for f in found)


def test_socket_ifname_matching_no_interface_of_the_h200():
    ok = rank_from_log("nccl-2.22.3-p2p-cumem-torchrun.log", "host-a:5663:")
    good = data_with(ok, env={"NCCL_SOCKET_IFNAME": "^lo,docker"}, interfaces=H200_IFS)
    [f] = judge_transport(good, copy.deepcopy(good))
    assert f.status is H.RULED_OUT
    for value in ("ens5", "=eth", "^eth,lo", "ifb"):  # ifb0/ifb1 exist but carry no address
        bad = data_with(ok, env={"NCCL_SOCKET_IFNAME": value}, interfaces=H200_IFS)
        found = judge_transport(good, bad)
        hit = [x for x in found if "NCCL_SOCKET_IFNAME" in x.summary]
        assert hit and hit[0].severity is Severity.HIGH, value
    # injected by a launcher into a rank only (case 10 shape): found in the rank's environment
    rank = copy.deepcopy(ok)
    rank["env"] = {"NCCL_SOCKET_IFNAME": "ens5"}
    found = judge_transport(
        good, data_with(rank, env={"NCCL_SOCKET_IFNAME": "^lo,docker"}, interfaces=H200_IFS)
    )
    assert any("nccl-init rank 0" in x.summary and "ens5" in x.summary for x in found)


# -- host.numa --------------------------------------------------------------------------------------------
NUMA_MAPS = real_text("sysfs/numa_maps-samples.txt")


def test_binding_parsers_on_real_samples():
    st = parse_status(real_text("sysfs/proc-status-allowed-samples.txt"))
    assert st == {"cpus_allowed_list": "4-7", "mems_allowed_list": "1"}
    s = summarize_numa_maps(
        NUMA_MAPS.split("# ==== https://github.com/TencentCloud")[1].split("\n", 1)[1]
    )
    assert s["anon_pages_by_node"] == {
        "0": 12,
        "1": 24,
    }  # file= mappings (N1=162, N1=2092...) are not counted
    assert s["policies"] == {"default": 13} and s["mappings"] == 13
    assert (
        parse_cpulist("0-7,16-23") == set(range(8)) | set(range(16, 24))
        and cpulist({0, 1, 2, 5}) == "0-2,5"
    )


def numa_rank(cpus, mems, gpu_node, pages=None, nodes=None, policy="default"):
    nodes = nodes or {
        "0": "0-47,96-143",
        "1": "48-95,144-191",
    }  # 8 x H100 host of ThunderKittens#167
    return {
        "rank": 0,
        "env": {},
        "differs": [],
        "nccl": {"backend": "nccl", "allreduce_ok": True},
        "binding": {
            "cpus": cpus,
            "cpus_allowed_list": cpus,
            "mems_allowed_list": mems,
            "host_nodes": nodes,
            "numa_maps": {"anon_pages_by_node": pages or {}, "policies": {policy: 10}},
            "gpu": {
                "bdf": "0000:9a:00.0",
                "numa_node": gpu_node,
                "local_cpulist": nodes.get(str(gpu_node), "") if isinstance(gpu_node, int) else "",
            },
        },
    }


def test_rank_on_the_other_node_is_high():
    good = data_with(numa_rank("48-95,144-191", "0-1", 1))
    bad = data_with(numa_rank("0-47", "0-1", 1))
    [f] = judge_numa(good, bad)
    assert (
        f.status is H.IMPLICATED
        and f.severity is Severity.HIGH
        and "none of them on its GPU's NUMA node 1" in f.summary
    )
    [ok] = judge_numa(good, copy.deepcopy(good))
    assert ok.status is H.RULED_OUT
    [standing] = judge_numa(bad, copy.deepcopy(bad))
    assert standing.severity is Severity.LOW and "standing" in standing.summary


def test_memory_bound_elsewhere_and_pages_off_node():
    found = judge_numa(None, data_with(numa_rank("48-95", "0", 1)))
    assert any("Mems_allowed_list" in f.summary and f.severity is Severity.MEDIUM for f in found)
    found = judge_numa(None, data_with(numa_rank("48-95", "0-1", 1, pages={"0": 9000, "1": 1000})))
    assert any("90% of its 10000 anonymous pages are off" in f.summary for f in found)
    found = judge_numa(None, data_with(numa_rank("48-95", "0-1", 1, policy="bind:0")))
    assert any("bind:0" in f.summary for f in found)


def test_unknown_gpu_node_is_inconclusive_single_node_rules_out():
    missing = {
        "missing": "not_supported",
        "detail": "numa_node is -1: the firmware reports no NUMA node",
    }
    [f] = judge_numa(None, data_with(numa_rank("0-47", "0-1", missing)))
    assert f.status is H.INCONCLUSIVE and "numa_node is -1" in f.summary
    h200 = numa_rank(
        "0-15", "0", missing, nodes={"0": "0-15"}
    )  # the H200 VM: one node, numa_node -1
    [f] = judge_numa(None, data_with(h200))
    assert f.status is H.RULED_OUT and "one NUMA node" in f.summary
    [f] = judge_numa(None, data_with())
    assert f.status is H.INCONCLUSIVE and "--nccl-init" in f.summary


# -- gpu.memory and the spin signature ---------------------------------------------------------------------
UUID = "GPU-0"
GPU = {"index": 0, "name": "NVIDIA H200"}


def samples(n, gpu, mem, used_mib, total_mib=143771):
    return [
        {
            "clock_sm_mhz": 1500,
            "clock_mem_mhz": 3201,
            "power_mw": 690000,
            "util_gpu_pct": gpu,
            "util_mem_pct": mem,
            "temp_c": 50,
            "pcie_gen": 5,
            "pcie_width": 16,
            "pstate": 0 if gpu else 8,
            "reasons": 0x4 if gpu else 0x1,
            "mem_used_bytes": used_mib * MIB,
            "mem_total_bytes": total_mib * MIB,
        }
        for _ in range(n)
    ]


def sample_doc(smp):
    return {
        "duration_s": len(smp) / 10,
        "interval_s": 0.1,
        "gpus": {UUID: summarise(0, "NVIDIA H200", smp, {}, {}, [])},
    }


def judged(before_samples, after_samples, where="sample"):
    datas = [{"gpus": {UUID: GPU}}, {"gpus": {UUID: GPU}}]
    docs = [{}, {}]
    for i, smp in enumerate((before_samples, after_samples)):
        if smp is None:
            continue
        if where == "sample":
            datas[i]["sample"] = sample_doc(smp)
        else:
            docs[i]["bench"] = {"telemetry": sample_doc(smp)}
    pairs = [(UUID, GPU, GPU)]
    return judge_memory(pairs, docs, datas), judge_spin(pairs, docs, datas)


def test_memory_near_full_from_the_h200_reading():
    # 93% allocated: 133889 of 143771 MiB used (one busy copy sample, then idle with the memory still held)
    full = samples(1, 100, 100, 133889) + samples(29, 0, 0, 133889)
    mem, _ = judged(samples(30, 100, 22, 2521), full)
    assert mem.status is H.IMPLICATED and mem.severity is Severity.MEDIUM and mem.relevance == 0.7
    assert "peak 93% (133889 of 143771 MiB)" in mem.summary
    assert any("only on Windows" in e and "out-of-memory" in e for e in mem.evidence)


def test_memory_full_is_high_standing_is_low_below_is_ruled_out():
    full = samples(30, 100, 22, 142000)
    mem, _ = judged(samples(30, 100, 22, 2521), full)
    assert mem.severity is Severity.HIGH
    mem, _ = judged(full, copy.deepcopy(full))
    assert mem.severity is Severity.LOW and "standing" in mem.summary
    mem, _ = judged(samples(30, 100, 22, 2521), samples(30, 100, 22, 120000))
    assert mem.status is H.RULED_OUT and "83%" in mem.summary


def test_memory_never_judged_from_an_instant_reading():
    datas = [
        {
            "gpus": {
                UUID: {**GPU, "memory": {"total_bytes": 143771 * MIB, "used_bytes": 143000 * MIB}}
            }
        }
    ] * 2
    f = judge_memory([(UUID, datas[0]["gpus"][UUID], datas[1]["gpus"][UUID])], [{}, {}], datas)
    assert f.status is H.INCONCLUSIVE and "instant reading is not judged" in f.summary


def test_spin_signature_raised_and_not_by_an_ordinary_loaded_gpu():
    _, spin = judged(None, samples(50, 100, 0, 2600))
    [f] = spin
    assert (
        f.hypothesis == "nccl.transport"
        and f.severity is Severity.MEDIUM
        and "check that the step advances" in f.summary
    )
    for mem_util in (
        21,
        23,
        100,
    ):  # bf16 matmul (21-23%) and a copy (100%) on the H200: never a spin
        _, spin = judged(None, samples(50, 100, mem_util, 2521))
        assert spin == [], mem_util
    _, spin = judged(None, samples(10, 100, 0, 2600))  # too few busy samples to say
    assert spin == []
    _, spin = judged(
        None, samples(50, 100, 0, 2600), where="bench"
    )  # the benchmark completed: progress
    assert spin == []


# -- gpu.topology: ACS and IOMMU ---------------------------------------------------------------------------
def gpu_data(n_gpus, acs, mode="off", params=None):
    gpus = {}
    for i in range(n_gpus):
        gpus[f"GPU-{i}"] = {
            "index": i,
            "name": "NVIDIA H200",
            "nvlink": {"missing": "not_supported"},
            "pci_topology": {
                "bdf": f"0000:0{i + 3}:00.0",
                "bridges": [{"bdf": "0000:02:08.0", "acs": acs}],
            },
        }
    return {
        "gpus": gpus,
        "iommu": {"units": [], "groups": 0, "group_types": {}, "mode": mode},
        "kernel_cmdline": {"raw": "", "params": params or {}},
    }


def acs(ctl):
    from forensics.gpu.pci import decode_acs

    flags = decode_acs(ctl)
    return {
        "offset": "0x148",
        "capability": {},
        "control": f"{ctl:#06x}",
        "control_flags": flags,
        "redirect": flags["req_redir"] or flags["cmplt_redir"],
    }


def topo(b, a):
    pairs = [(k, b["gpus"].get(k), a["gpus"].get(k)) for k in a["gpus"]]
    return judge_topology(b, a, pairs)


def test_acs_redirect_enabled_above_two_gpus_is_high():
    f = topo(gpu_data(2, acs(0)), gpu_data(2, acs(0x001D)))
    assert f.status is H.IMPLICATED and f.severity is Severity.HIGH and "ACSCtl 0x001d" in f.summary
    one = topo(gpu_data(1, acs(0)), gpu_data(1, acs(0x001D)))
    assert one.severity is Severity.MEDIUM
    standing = topo(gpu_data(2, acs(0x001D)), gpu_data(2, acs(0x001D)))
    assert standing.severity is Severity.LOW and "standing" in standing.summary
    srcvalid = topo(gpu_data(2, acs(0x0001)), gpu_data(2, acs(0x0001)))
    assert srcvalid.status is H.RULED_OUT


def test_acs_unreadable_without_root_is_inconclusive_not_ruled_out():
    from forensics.gpu.pci import NEEDS_ROOT

    d = gpu_data(2, {"missing": "no_permission", "detail": NEEDS_ROOT})
    f = topo(d, copy.deepcopy(d))
    assert f.status is H.INCONCLUSIVE and "needs root" in f.summary


def test_iommu_to_translated_and_cmdline_change():
    f = topo(
        gpu_data(2, acs(0), mode="passthrough", params={"iommu": "pt"}),
        gpu_data(2, acs(0), mode="translated"),
    )
    assert (
        f.status is H.IMPLICATED
        and f.severity is Severity.HIGH
        and "IOMMU mode passthrough -> translated" in f.summary
    )
    assert any("kernel parameter iommu: pt -> unset" in e for e in f.evidence)


def test_h200_no_bridge_no_iommu_is_ruled_out():
    d = gpu_data(1, acs(0))
    d["gpus"]["GPU-0"]["pci_topology"]["bridges"] = []
    f = topo(d, copy.deepcopy(d))
    assert (
        f.status is H.RULED_OUT
        and "no PCI bridge above the GPUs" in f.summary
        and "IOMMU off" in f.summary
    )
