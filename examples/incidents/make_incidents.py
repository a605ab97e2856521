"""Build the issue-26 incident pairs (examples/incidents/<name>/) from the real H200 A/A pair.

Every pair starts from examples/aa (two real snapshots of the 2 x H200 machine, canary embedded)
through the helpers of tests/fixtures/cases/make_issue13_cases.py (the same edits the issue-13
cases use: versions, variables, benchmark components, the real 2-rank --nccl-init record of the
same machine) and edits only what its public incident says; SOURCE.md in each folder cites the
thread and lists what was taken from it and what was chosen. No forensics import: the script only
edits JSON.

Run from anywhere: python examples/incidents/make_incidents.py
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
_spec = importlib.util.spec_from_file_location(
    "issue13", ROOT / "tests" / "fixtures" / "cases" / "make_issue13_cases.py"
)
m13 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(m13)  # type: ignore[union-attr]

UNSET = {"missing": "not_found", "detail": "unset"}


def write(name: str, before: dict, after: dict, expect: dict, source: str) -> None:
    d = HERE / name
    d.mkdir(exist_ok=True)
    for fn, obj in (("before.json", before), ("after.json", after), ("expect.json", expect)):
        (d / fn).write_text(json.dumps(obj, indent=1) + "\n")
    (d / "SOURCE.md").write_text(source.strip() + "\n")


def with_ranks(snap: dict) -> None:
    """The real 2-rank --nccl-init record of the same machine on this snapshot (24 channels over
    P2P/CUMEM), as issue 13's case 21 adds it (NUMA layout of that case, no pinning)."""
    m13.two_numa(snap)
    m13.bindings(snap, under_numactl=False)


def ranks(snap: dict) -> list[dict]:
    """The ranks of the snapshot's --nccl-init record (under --launcher when there is one)."""
    ne = snap["probes"]["nccl_env"]["data"]
    sec = (
        ne["launcher"]
        if isinstance(ne.get("launcher"), dict) and "ranks" in ne["launcher"]
        else ne["nccl_init"]
    )
    return sec["ranks"]


def nccl_version_everywhere(snap: dict, version: str, cuda: str) -> None:
    m13.set_nccl(snap, version, "nvidia-nccl-cu12")
    sec = snap["probes"]["nccl_env"]["data"]["nccl_init"]
    sec["version"] = f"{version}+cuda{cuda}"
    for r in sec["ranks"]:
        r["nccl"]["version"] = f"{version}+cuda{cuda}"
        r["nccl"]["torch_nccl_version"] = version


def as_launcher(snap: dict, command: str, rank_vars) -> None:
    """Move the --nccl-init ranks under ``--launcher COMMAND`` (as ``forensics snapshot --launcher CMD
    --nccl-init`` records them): the section becomes ``launcher``, ``nccl_init`` its summary."""
    ne = snap["probes"]["nccl_env"]["data"]
    sec = ne["nccl_init"]
    for r in sec["ranks"]:
        r["method"] = "launcher"
        r["rank_vars"] = rank_vars(r["rank"])
    ne["launcher"] = {
        "command": command,
        "duration_s": sec.get("duration_s", 11.5),
        "ranks": sec["ranks"],
        "returncode": 0,
    }
    ne["nccl_init"] = {
        "under": "launcher",
        "backend": "nccl",
        "nccl_available": True,
        "version": sec["version"],
        "allreduce_ok": True,
        "ranks_reporting": len(sec["ranks"]),
    }
    snap["options"]["launcher"] = command


def set_rank_env(snap: dict, name: str, value, parent=None) -> None:
    """Worker ``name`` = VALUE (None: unset) in every rank, the launching process having PARENT (None:
    unset); ``differs`` says so when they differ, as the probe records it (where: at_exec)."""
    for r in ranks(snap):
        if value is None:
            r["env"].pop(name, None)
        else:
            r["env"][name] = value
        r["differs"] = [d for d in r.get("differs") or [] if d["name"] != name]
        if value != parent:
            r["differs"].append(
                {
                    "name": name,
                    "parent": parent if parent is not None else dict(UNSET),
                    "worker": value if value is not None else dict(UNSET),
                    "where": "at_exec",
                }
            )


# ---- 1. NCCL upgrade moves the channels from P2P to SHM ---------------------------------------------
def nccl_upgrade_shm():
    b, a = m13.pair(
        "before: NCCL 2.18.5", "2024-05-20T09:00:00Z", "after: NCCL 2.20.5", "2024-05-24T09:00:00Z"
    )
    for s in (b, a):
        with_ranks(s)
    nccl_version_everywhere(b, "2.18.5", "12.2")
    nccl_version_everywhere(a, "2.20.5", "12.4")
    for r in ranks(a):
        r["nccl"]["transports"] = {"SHM": 24}
    m13.move(a, allreduce_us=1.5, busbw=0.67)
    write(
        "nccl-upgrade-p2p-to-shm",
        b,
        a,
        {
            "top": "nccl.version",
            "mechanism": "nccl.transport",
            "first_sentence_has": ["nccl.version", "2.18.5 -> 2.20.5", "nccl.transport", "SHM"],
        },
        """
# NCCL 2.18.5 -> 2.20.5 moves the channels off P2P; all-reduce slower

Source: pytorch/pytorch#127077, "Significant peformance regression in DDP for torch > 2.1"
(https://github.com/pytorch/pytorch/issues/127077): DDP on 4 x A10G slowed after torch 2.1; the
thread narrowed it to the NCCL torch loads, with nccl-tests all_reduce_perf runs of NCCL 2.18.5
(Avg bus bandwidth 3.10 GB/s) against 2.20.5, and fixed it by loading another libnccl.

Taken: the NCCL versions 2.18.5 -> 2.20.5 (wheel `nvidia-nccl-cu12`, the torch kept), the
all-reduce as the only moved benchmark.
Chosen: the mechanism -- the after side's ranks connect their 24 channels over SHM instead of
P2P/CUMEM (the thread's NCCL INFO lines are not quoted); busbw x0.67 and the small all-reduce
x1.5; the machine stays the 2 x H200 of examples/aa (the thread's A10G numbers are not encoded).
Both sides carry the real 2-rank `--nccl-init` record of the same machine (issue 13, case 21).
Built by examples/incidents/make_incidents.py.

Expected: the verdict leads with `nccl.version` and names the transport change in the same
sentence; `nccl.transport` is listed under it as its mechanism.
""",
    )


# ---- 2. a lowered power limit, the SW power cap and the clocks --------------------------------------
def power_limit_lowered():
    b, a = m13.pair(
        "before",
        "2026-06-20T09:00:00Z",
        "after: power limit capped at 500 W",
        "2026-06-26T10:53:53Z",
    )
    for dev in a["probes"]["gpu"]["data"]["gpus"].values():
        dev["power"]["enforced_limit_mw"] = 500000
    for g in a["bench"]["telemetry"]["gpus"].values():
        g["clock_sm_mhz"] = {"min": 1320, "median": 1410, "max": 1755}
        g["power_mw"] = {"min": 84667, "median": 496000, "max": 500100}
        g["reason_fraction"] = {"sw_power_cap": 0.91}
        busy = g.get("busy_samples") or 140
        g["counter_deltas"]["clocks_event_sw_power_cap_ns"] = int(0.91 * busy * 0.1 * 1e9)
        g["counter_deltas"]["violation_power_ns"] = g["counter_deltas"][
            "clocks_event_sw_power_cap_ns"
        ]
    m13.move(a, compute=1.3, matmul=1 / 1.3)
    write(
        "power-limit-capped",
        b,
        a,
        {
            "top": "gpu.config",
            "mechanism": "gpu.throttling",
            "first_sentence_has": ["gpu.config", "700 W -> 500 W", "gpu.throttling"],
        },
        """
# A power limit capped below the default; the SW power cap cuts the clocks

Sources: stackhpc/ansible-slurm-appliance#975 (https://github.com/stackhpc/ansible-slurm-appliance/pull/975):
`nvidia-smi -q -d power` on a 700 W board (driver 595.71.05) showing "Current Power Limit: 500.00 W",
"Requested Power Limit: 700.00 W", "Default Power Limit: 700.00 W"; and
l4rz/reverse-engineering-dell-idrac-to-get-rid-of-gpu-throttling#3
(https://github.com/l4rz/reverse-engineering-dell-idrac-to-get-rid-of-gpu-throttling/issues/3):
an A100 whose clocks drop with "SW Power Cap" once it reaches a lowered limit ("If I manually limit
the Power to 350W, it will appear at 210W").

Taken: the enforced limit 700 W -> 500 W with the requested and default limits left at 700 W; the
SW power cap as the throttling reason under load.
Chosen: both GPUs capped; under load the SM clock median 1980 -> 1410 MHz, SW power cap active
91% of the busy samples, power median at the cap; the canary's compute x1.3 and matmul x1/1.3.
Built from examples/aa by examples/incidents/make_incidents.py.

Expected: the verdict leads with `gpu.config` (the lowered limit) and names the throttling in the
same sentence; `gpu.throttling` is its mechanism, listed under it.
""",
    )


# ---- 3. a standing ACS redirect, exposed when NCCL_P2P_DISABLE is removed ---------------------------
def _acs_topology(snap: dict) -> None:
    ctl = 0x001D  # SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+ (the thread's ACSCtl)
    flags = {
        "src_valid": True,
        "trans_blk": False,
        "req_redir": True,
        "cmplt_redir": True,
        "upstream_fwd": True,
        "egress_ctrl": False,
        "direct_trans": False,
    }
    g = snap["probes"]["gpu"]["data"]
    for i, dev in enumerate(sorted(g["gpus"].values(), key=lambda d: d["index"])):
        dev["pci_topology"] = {
            "bdf": dev["pci_bus_id"][4:].lower(),
            "bridges": [
                {
                    "bdf": f"0000:00:03.{i + 1}",
                    "acs": {
                        "offset": "0x148",
                        "capability": {},
                        "control": f"{ctl:#06x}",
                        "control_flags": dict(flags),
                        "redirect": True,
                    },
                }
            ],
        }
    g["iommu"] = {"units": [], "groups": 0, "group_types": {}, "mode": "off"}
    g["kernel_cmdline"] = {"raw": "", "params": {}}


def acs_workaround_removed():
    b, a = m13.pair(
        "before: NCCL_P2P_DISABLE=1",
        "2026-03-28T09:00:00Z",
        "after: workaround removed",
        "2026-03-31T09:00:00Z",
    )
    for s in (b, a):
        with_ranks(s)
        _acs_topology(s)
        del s["bench"]  # the all-reduce hangs: no canary finishes on the after side
    m13.env_everywhere(b, "NCCL_P2P_DISABLE", "1")
    for r in ranks(b):
        r["env"]["NCCL_P2P_DISABLE"] = "1"
        r["nccl"]["transports"] = {"SHM": 24}
        r["nccl"]["set_by_environment"]["NCCL_P2P_DISABLE"] = "1"
    sec = a["probes"]["nccl_env"]["data"]["nccl_init"]
    for r in sec["ranks"]:
        n = r["nccl"]
        n.update(
            allreduce_ok=False,
            phase="allreduce",
            transports={"P2P/CUMEM": 2},
            hung={"phase": "allreduce", "killed_after_s": 60.0},
            last_lines=["INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM"],
        )
    sec.update(
        allreduce_ok=False,
        hung=2,
        returncode={"missing": "timed_out", "detail": "killed after the probe's time budget"},
    )
    write(
        "acs-p2p-workaround-removed",
        b,
        a,
        {
            "top": "gpu.topology",
            "mechanism": "nccl.env",
            "first_sentence_has": [
                "gpu.topology",
                "ACSCtl 0x001d",
                "nccl.env",
                "NCCL_P2P_DISABLE",
                "hung",
            ],
        },
        """
# ACS on the root-complex bridges: P2P hangs once NCCL_P2P_DISABLE=1 is removed

Source: NVIDIA/nccl#2079, "ncclAllReduce deadlocks on 2x RTX 5880 Ada (PCIe PHB topology, no
NVLink)" (https://github.com/NVIDIA/nccl/issues/2079): the first all-reduce hung; NCCL_P2P_DISABLE=1
made it work; the cause was ACS enabled on the AMD root-complex bridges above the two GPUs
(`ACSCtl: 0x001d = SrcValid+, ReqRedir+, CmpltRedir+, UpstreamFwd+`), which forced P2P through the
IOMMU; disabling ACS (setpci, or pci=noacs) fixed it.

Taken: ACSCtl 0x001d on the bridge above each GPU, on both sides (a standing condition); the
workaround NCCL_P2P_DISABLE=1 on the before side (exported everywhere), removed on the after side;
the all-reduce hanging with P2P.
Chosen: the 2 x H200 of examples/aa stands in for the thread's GPUs (its NVLink facts kept); bridge
addresses; IOMMU off; the hung ranks' record as `--nccl-init` now keeps it (phase allreduce, killed
after 60 s, 2 channels connected over P2P/CUMEM so far); no benchmark on either side (nothing
finishes with the hang). Built by examples/incidents/make_incidents.py.

Expected: the verdict leads with `gpu.topology` (the standing ACS redirect), says that removing the
workaround exposed it, and names the hang; `nccl.env` and `nccl.transport` are its mechanisms.
""",
    )


# ---- 4. NCCL_SOCKET_IFNAME no longer reaches the workers; their bootstrap fails ---------------------
def ifname_not_propagated():
    b, a = m13.pair(
        "before",
        "2020-02-10T09:00:00Z",
        "after: launcher no longer passes the environment",
        "2020-02-17T09:00:00Z",
    )
    cmd = "srun --ntasks 2 --gpus-per-task 1 python -m forensics.env.workers.envdump"
    for s in (b, a):
        with_ranks(s)
        m13.env_everywhere(s, "NCCL_SOCKET_IFNAME", "eth0")
        as_launcher(
            s, cmd, lambda r: {"SLURM_PROCID": str(r), "SLURM_LOCALID": str(r), "SLURM_NTASKS": "2"}
        )
        for r in ranks(s):
            r["env"]["NCCL_SOCKET_IFNAME"] = "eth0"
            r["nccl"]["set_by_environment"]["NCCL_SOCKET_IFNAME"] = "eth0"
    set_rank_env(a, "NCCL_SOCKET_IFNAME", None, parent="eth0")
    err = (
        "DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error, NCCL version "
        "2.28.9; Last error: socketStartConnect: Connect to 172.17.0.1<51377> failed : Connection refused"
    )
    for r in ranks(a):
        r["nccl"]["set_by_environment"].pop("NCCL_SOCKET_IFNAME", None)
        r["nccl"].update(allreduce_ok=False, error=err, transports={})
    a["probes"]["nccl_env"]["data"]["nccl_init"]["allreduce_ok"] = False
    m13.move(a, allreduce_us=1.0)
    del a["bench"], b["bench"]
    write(
        "ifname-not-propagated",
        b,
        a,
        {
            "top": "nccl.env-propagation",
            "mechanism": "nccl.transport",
            "first_sentence_has": [
                "nccl.env-propagation",
                "NCCL_SOCKET_IFNAME",
                "nccl.transport",
                "failed",
            ],
        },
        """
# NCCL_SOCKET_IFNAME no longer reaches the workers; their NCCL bootstrap fails

Sources: espnet/espnet#1588, "[ESPnet2] Fix launch.py for slurm" (https://github.com/espnet/espnet/pull/1588):
"environment variables are not inherited from parents process: e.g. NCCL_SOCKET_IFNAME"; and
NVIDIA/nccl#1000 (https://github.com/NVIDIA/nccl/issues/1000): jobs in containers failing in NCCL's
bootstrap until NCCL_SOCKET_IFNAME named the ethernet NIC ("only NCCL_SOCKET_IFNAME matters" at that
stage, per the maintainer).

Taken: NCCL_SOCKET_IFNAME set in the launching process under a Slurm launcher, missing in the
workers after the change; the workers' NCCL then failing to connect during bootstrap.
Chosen: the interface name eth0 (the capture machine's), the launcher line (`srun --ntasks 2
--gpus-per-task 1`), the error text (torch's DistBackendError with NCCL's socketStartConnect to a
docker bridge address), no benchmark on either side. The ranks are the real 2-rank record of
examples/aa's machine moved under the launcher. Built by examples/incidents/make_incidents.py.

Expected: the verdict leads with `nccl.env-propagation` and names the failed collective in the same
sentence; `nccl.transport` is its mechanism.
""",
    )


# ---- 5. PCIe x16 -> x8: an M.2 drive took lanes from the slot ---------------------------------------
def pcie_lanes_shared():
    b, a = m13.pair(
        "before", "2024-11-20T09:00:00Z", "after: an M.2 NVMe drive added", "2024-11-24T09:00:00Z"
    )
    g1 = next(d for d in a["probes"]["gpu"]["data"]["gpus"].values() if d["index"] == 1)
    g1["pcie"]["width_current"] = 8
    g1["pcie"]["width_max"] = 8
    for t in a["bench"]["telemetry"]["gpus"].values():
        if t["index"] == 1:
            t["pcie_width"] = {"min": 8, "median": 8, "max": 8}
    m13.move(a, h2d=0.5, d2h=0.5)
    write(
        "pcie-x8-lanes-shared",
        b,
        a,
        {"top": "gpu.pcie-link", "first_sentence_has": ["gpu.pcie-link", "x8", "x16"]},
        """
# PCIe x16 -> x8: a new M.2 drive takes lanes from the GPU's slot

Source: dartraiden/NVIDIA-patcher#191, "8 PCIe lanes" (https://github.com/dartraiden/NVIDIA-patcher/issues/191):
a card running at x8 instead of x16; the replies name boards that drop the GPU slot to x8 when a
PCIe M.2 drive is installed, and (Drummchen) an NVMe drive and other devices taking lanes so the
card is left with fewer.

Taken: the GPU's slot loses half its lanes to a newly installed M.2 drive; NVML then reads both the
current and the maximum width as x8 (nvmlDeviceGetMaxPcieLinkWidth is the device's and the slot's
together).
Chosen: GPU 1 of the 2 x H200 pair (examples/aa) at Gen5 x8 under load (telemetry) and at max x8;
host-to-device and device-to-host copies x0.5. Built by examples/incidents/make_incidents.py.

Expected: `gpu.pcie-link` leads and its summary compares the link under load with the baseline's
(x16 -> x8), naming the maximum that dropped as a change of the slot.
""",
    )


# ---- 6. NVLink bridge pairs, stated by the topology matrix -----------------------------------------
def _bridge_pairs(snap: dict) -> None:
    g = snap["probes"]["gpu"]["data"]
    names = [f"GPU{i}" for i in range(8)]
    matrix = {}
    for i, r in enumerate(names):
        row = {}
        for j, c in enumerate(names):
            row[c] = "X" if i == j else ("NV4" if i // 2 == j // 2 else "SYS")
        row.update({"CPU Affinity": "0-31", "NUMA Affinity": "0", "GPU NUMA ID": "N/A"})
        matrix[r] = row
    g["topology"]["matrix"] = matrix
    g["topology"]["raw"] = (
        "\t"
        + "\t".join(names)
        + "\n"
        + "\n".join(r + "\t" + "\t".join(matrix[r][c] for c in names) for r in names)
        + "\n"
    )
    for dev in g["gpus"].values():
        dev["name"], dev["compute_capability"], dev["architecture"] = "NVIDIA A40", "8.6", 7


def nccl_bridge_pairs():
    b, a = m13.pair(
        "before: NCCL 2.15.5", "2023-01-05T09:00:00Z", "after: NCCL 2.16.2", "2023-01-06T09:00:00Z"
    )
    for s in (b, a):
        _bridge_pairs(s)
    m13.set_nccl(b, "2.15.5", "nvidia-nccl-cu11")
    m13.set_nccl(a, "2.16.2", "nvidia-nccl-cu11")
    m13.move(a, allreduce_us=10.0, busbw=0.1)
    write(
        "nccl-2.16.2-bridge-pairs",
        b,
        a,
        {
            "top": "nccl.version",
            "known_issue": "nccl-2.16.2-pcie-nvlink-bridge-pairs",
            "first_sentence_has": ["nccl.version", "2.15.5 -> 2.16.2"],
        },
        """
# NCCL 2.16.2 on GPUs joined by NVLink bridges in pairs

Source: NVIDIA/nccl#770, "NCCL v2.16.2 is slower than v2.14.3 or v2.15.5 by a factor of 10"
(https://github.com/NVIDIA/nccl/issues/770): 8 x A40 with 4 NVLink bridges; `nvidia-smi topo -m`
shows NV4 between GPU0-GPU1, GPU2-GPU3, GPU4-GPU5, GPU6-GPU7 and SYS between the pairs;
all_reduce_perf ~10x slower with 2.16.2 than with 2.14.3/2.15.5. (The known-issues entry
`nccl-2.16.2-pcie-nvlink-bridge-pairs` cites this thread; the pair tests that its conditions --
NVLink bridge pairs, Ampere, one node -- are decided from the snapshot's own topology matrix.)

Taken: the 8-GPU topology matrix (NV4 pairs, SYS between pairs), A40 (compute capability 8.6),
NCCL 2.15.5 -> 2.16.2, the all-reduce ~10x slower.
Chosen: the two GPU records of examples/aa relabelled A40 (the matrix holds all eight GPUs), the
nvidia-nccl-cu11 wheel; busbw x0.1 and the small all-reduce x10. Built by
examples/incidents/make_incidents.py.

Expected: `nccl.version` leads; the catalog entry matches as a known issue (not "possible").
""",
    )


# ---- 7. torchrun's own defaults in the workers, A/A -----------------------------------------------
def torchrun_defaults_aa():
    b, a = m13.pair("before", "2024-07-22T15:00:00Z", "after: reboot", "2024-07-22T16:00:00Z")
    cmd = "torchrun --nproc_per_node 2"
    for s in (b, a):
        with_ranks(s)
        as_launcher(
            s,
            cmd,
            lambda r: {
                "TORCHELASTIC_RUN_ID": "none",
                "TORCHELASTIC_RESTART_COUNT": "0",
                "LOCAL_WORLD_SIZE": "2",
                "GROUP_RANK": "0",
            },
        )
        set_rank_env(s, "OMP_NUM_THREADS", "1")
        set_rank_env(s, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    write(
        "torchrun-defaults-aa",
        b,
        a,
        {"top": None},
        """
# torchrun's own defaults in its workers, same machine before and after a reboot

Source: vllm-project/vllm#6650 (https://github.com/vllm-project/vllm/issues/6650): a torchrun launch
whose log shows torch/distributed/run.py's warning "Setting OMP_NUM_THREADS environment variable for
each process to be 1 in default, to avoid your system being overloaded". torchrun's elastic agent
also gives every worker TORCH_NCCL_ASYNC_ERROR_HANDLING (its own value when the launching process has
none: torch/distributed/elastic/agent/server/local_elastic_agent.py).

Taken: OMP_NUM_THREADS=1 and TORCH_NCCL_ASYNC_ERROR_HANDLING=1 in every torchrun worker while the
launching process has neither.
Chosen: 2 ranks (`torchrun --nproc_per_node 2`), the real --nccl-init record of examples/aa's
machine moved under the launcher; both sides identical (an A/A pair). Built by
examples/incidents/make_incidents.py.

Expected: nothing implicated (launcher defaults are facts, named in the evidence of
`nccl.env-propagation`, not a standing problem).
""",
    )


# ---- 8. flash-attn upgraded the same morning as a docs-only pull -----------------------------------
TRAINER = "/home/user/trainer"  # the placeholder path of the user's repository in pairs 8 and 9
ATTENTION = (
    '"""Decode attention over the KV cache."""\n'
    "from flash_attn import flash_attn_with_kvcache\n\n\n"
    "def decode(q, k_cache, v_cache, cache_seqlens):\n"
    "    return flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=cache_seqlens, causal=True)\n"
)
DOCS_PULL = [
    (
        {
            "README.md": "# trainer\n\nDecode with flash-attn's KV-cache kernel.\n",
            "serve/attention.py": ATTENTION,
        },
        "serve: decode attention over the KV cache",
        "2025-07-01T09:00:00Z",
    ),
    (
        {
            "docs/decode.md": "# Decode\n\nThe decode step calls flash_attn_with_kvcache once per token.\n"
        },
        "docs: how the decode step uses the KV cache",
        "2025-07-08T16:10:00Z",
    ),
    (
        {
            "README.md": "# trainer\n\nDecode with flash-attn's KV-cache kernel (see docs/decode.md).\n"
        },
        "docs: link the decode notes from the README",
        "2025-07-08T16:40:00Z",
    ),
]
"""(files, message, commit time) of the user's repository: a base commit, then the two documentation
commits of the pull. Fixed identity and times: :func:`docs_pull_repo` gives the same commit ids wherever
it runs, so a test can rebuild the repository and read the pull with ``--repo``."""


def docs_pull_repo(dest: Path) -> list[str]:
    """Create the repository of :data:`DOCS_PULL` at ``dest`` (a new folder); returns its commit ids,
    oldest first. Runs git with a fixed identity and no user or system configuration."""
    env = dict(
        os.environ,
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_SYSTEM=os.devnull,
        GIT_AUTHOR_NAME="dev-a",
        GIT_AUTHOR_EMAIL="dev-a@example.invalid",
        GIT_COMMITTER_NAME="dev-a",
        GIT_COMMITTER_EMAIL="dev-a@example.invalid",
    )
    dest.mkdir(parents=True)

    def run(*args: str, **extra: str) -> str:
        return subprocess.run(
            ["git", *args],
            cwd=dest,
            env=dict(env, **extra),
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    run("init", "-q", "-b", "main")
    shas = []
    for files, message, when in DOCS_PULL:
        for rel, text in files.items():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_text(text)
            run("add", "--", rel)
        run("commit", "-q", "-m", message, GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when)
        shas.append(run("rev-parse", "HEAD"))
    return shas


def trainer_repo(
    head: str,
    subject: str,
    when: str,
    reflog: list[dict],
    path: str = TRAINER,
    remote: str = "https://github.com/example/trainer.git",
) -> dict:
    """The git probe's data for the user's repository at ``path`` (issue 13's placeholder repository)."""
    r = copy.deepcopy(m13.REPO)
    r.update(
        path=path,
        remotes={"origin": remote},
        reflog=reflog,
        head={
            "sha": head,
            "subject": subject,
            "author": "dev-a",
            "authored_at": when,
            "committed_at": when,
        },
    )
    return {"repos": [r]}


def flash_attn_docs_pull():
    b, a = m13.pair(
        "before: flash-attn 2.4.2",
        "2025-07-08T09:00:00Z",
        "after: git pull + flash-attn 2.7.4.post1",
        "2025-07-09T09:00:00Z",
    )
    m13.set_package(b, "flash-attn", "2.4.2")
    m13.set_package(a, "flash-attn", "2.7.4.post1")
    with tempfile.TemporaryDirectory() as tmp:
        shas = docs_pull_repo(Path(tmp) / "trainer")
    clone = {
        "old": "0" * 40,
        "new": shas[0],
        "time": "2025-07-01T09:30:00Z",
        "action": "clone: from https://github.com/example/trainer.git",
    }
    pull = {
        "old": shas[0],
        "new": shas[-1],
        "time": "2025-07-09T08:30:00Z",
        "action": "pull origin main: Fast-forward",
    }
    b["probes"]["git"]["data"] = trainer_repo(shas[0], DOCS_PULL[0][1], DOCS_PULL[0][2], [clone])
    a["probes"]["git"]["data"] = trainer_repo(
        shas[-1], DOCS_PULL[-1][1], DOCS_PULL[-1][2], [pull, clone]
    )
    m13.move(a, compute=1.5, matmul=1 / 1.5)
    write(
        "flash-attn-upgrade-docs-pull",
        b,
        a,
        {
            "top": "python.packages",
            "ruled_out": ["code.change"],
            "repo": "docs_pull_repo",
            "first_sentence_has": ["python.packages", "flash-attn"],
        },
        """
# flash-attn 2.4.2 -> 2.7.4.post1 slows the decode step; a docs-only pull the same morning

Source: Dao-AILab/flash-attention#1743, "New FA 2.7.4.post1 has much slower flash_attn_with_kvcache"
(https://github.com/Dao-AILab/flash-attention/issues/1743): on an H100, upgrading flash-attn from
2.4.2 (a 2.4.2.dev3 build) to 2.7.4.post1 made the same flash_attn_with_kvcache call go from
0.145 ms/iter to 0.667 ms/iter (bf16, batch 64, one query token, 8191 cached positions); the reporter
points at changed launch grid shapes.

Taken: the package flash-attn 2.4.2 -> 2.7.4.post1; a step that calls flash_attn_with_kvcache
(decode attention over the KV cache); a data-center Hopper GPU.
Chosen: the decoy -- the same morning a fast-forward pull of the user's repository brought two
documentation commits (docs/decode.md, README.md); the repository, its path (/home/user/trainer),
commits and times are placeholders, built by `docs_pull_repo` with a fixed identity so that the test
rebuilds the same commit ids and reads them with `--repo`. The canary's compute x1.5 and matmul x1/1.5
(the thread's 4.6x is one kernel, not a whole step); the GPU stays the 2 x H200 of examples/aa.
Built by examples/incidents/make_incidents.py.

Expected: the verdict leads with `python.packages` (flash-attn, a GPU-stack package, not "other
packages"); `code.change` is ruled out because the pull's commits touch only documentation.
""",
    )


# ---- 9. a driver update the same day as a pull of a repository that is not on this machine -----------
def driver_pull_elsewhere():
    b, a = m13.pair(
        "before: driver 530",
        "2023-05-31T18:00:00Z",
        "after: update.bat (git pull) + driver 535",
        "2023-06-01T18:00:00Z",
    )
    for s in (
        b,
        a,
    ):  # the real torch 2.1.2+cu121 wheel pins: a CUDA 12.1 build both drivers can run
        m13.cu12_stack(s, "2.1.2", "cu121", "12.1", "12.1.105", "2.18.1", "8.9.2.26", "12.1.3.1")
        m13.container(s, "12.1.1", "12.1.105")
    m13.set_driver(b, "530.41.03", "12.1")
    m13.set_driver(a, "535.54.03", "12.2")
    path, remote = "/home/user/kohya_ss", "https://github.com/bmaltais/kohya_ss.git"
    old, new = (
        "5b0e4c2a9d1f3e6b8a0c2d4f6e8a0b2c4d6e8f01",
        "9e2a7c4b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a02",
    )
    clone = {
        "old": "0" * 40,
        "new": old,
        "time": "2023-05-20T10:00:00Z",
        "action": f"clone: from {remote}",
    }
    pull = {"old": old, "new": new, "time": "2023-06-01T17:20:00Z", "action": "pull: Fast-forward"}
    b["probes"]["git"]["data"] = trainer_repo(
        old, "v21.5.12", "2023-05-19T21:00:00Z", [clone], path, remote
    )
    a["probes"]["git"]["data"] = trainer_repo(
        new, "v21.5.15", "2023-05-31T22:00:00Z", [pull, clone], path, remote
    )
    m13.move(a, compute=2.0, matmul=0.5)
    write(
        "driver-update-pull-elsewhere",
        b,
        a,
        {
            "top": "driver.version",
            "inconclusive": ["code.change"],
            "first_sentence_has": ["driver.version", "530.41.03 -> 535.54.03"],
        },
        """
# A driver update slows training; the same evening's git pull cannot be read here

Source: bmaltais/kohya_ss#884, "After last update training speed slow down"
(https://github.com/bmaltais/kohya_ss/issues/884): after "update.bat" (which pulls the repository)
a LoRA training run on an RTX 3080 went from about 1 h to about 5 h for 715 steps, and rolling the
code back to v21.5.12 was the reporter's first fix; the maintainer suspected a recent code update;
another user named the NVIDIA driver 535.98 ("It's driver's bug, try to rollback"), and the reporter
confirmed that downgrading the driver to 532.03 solved it.

Taken: a code update (a fast-forward pull of bmaltais/kohya_ss, from v21.5.12) and a driver update
from the R530 branch to R535 on the same day; training several times slower; the driver the cause.
Chosen: the Linux drivers of the same branches (530.41.03 -> 535.54.03; the thread's 532.03 and
535.98 are Windows releases); the commit ids and the head subjects (placeholders; the pull is recorded
only by the snapshots, the repository at /home/user/kohya_ss is not on this machine); torch
2.1.2+cu121 on its CUDA 12.1 wheels and a CUDA 12.1.1 image on both sides; the canary's compute x2 and
matmul x0.5 (the thread's 5x is end to end on another GPU). The GPU stays the 2 x H200 of examples/aa.
Built by examples/incidents/make_incidents.py.

Expected: the verdict leads with `driver.version`; `code.change` is inconclusive (the commits
cannot be read) and names the command that would tell (`git clone ... --repo CLONE`), not high.
""",
    )


def main() -> None:
    nccl_upgrade_shm()
    power_limit_lowered()
    acs_workaround_removed()
    ifname_not_propagated()
    pcie_lanes_shared()
    nccl_bridge_pairs()
    torchrun_defaults_aa()
    flash_attn_docs_pull()
    driver_pull_elsewhere()


if __name__ == "__main__":
    main()
