"""Print what examples/facts/run.sh checks, from its files: ``summary.py OUTDIR`` (exit 1 when a check fails).

(a) the snapshot's new facts: per GPU the PCI bridges and their ACS, NUMA node, IOMMU group; IOMMU mode;
kernel parameters; each nccl-init rank's CPU/NUMA binding and its GPU's node; the interfaces;
(b) gpu.memory implicated for the window where memory was filled (diff matmul -> fill);
(c) no spin signature in the matmul window (an ordinary loaded GPU).
"""

import json
import sys
from pathlib import Path

from forensics_probes.gpu.load import spin_check, window

out = Path(sys.argv[1])
ok = True


def check(cond, text):
    global ok
    print(("PASS " if cond else "FAIL ") + text)
    ok = ok and bool(cond)


snap = json.loads((out / "snapshot-facts.json").read_text())
gpu = snap["probes"].get("gpu", {}).get("data", {})
for g in (gpu.get("gpus") or {}).values():
    print(
        f"GPU {g.get('index')} {g.get('pci_bus_id')}: pci_topology = {json.dumps(g.get('pci_topology'))}"
    )
print("iommu:", json.dumps(gpu.get("iommu")))
print("kernel_cmdline.params:", json.dumps((gpu.get("kernel_cmdline") or {}).get("params")))
env = snap["probes"].get("nccl_env", {}).get("data", {})
print("network:", json.dumps(env.get("network")))
ranks = (env.get("nccl_init") or {}).get("ranks") or []
for r in ranks:
    b = r.get("binding") or {}
    print(
        f"nccl-init rank {r.get('rank')}: cpus {b.get('cpus')}, mems {b.get('mems_allowed_list')}, "
        f"gpu {json.dumps(b.get('gpu'))}, anon pages by node {(b.get('numa_maps') or {}).get('anon_pages_by_node')}, "
        f"transports {(r.get('nccl') or {}).get('transports')}"
    )
check(
    gpu.get("gpus") and all("pci_topology" in g for g in gpu["gpus"].values()),
    "(a) every GPU has pci_topology",
)
check(isinstance(gpu.get("iommu"), dict) and "mode" in gpu["iommu"], "(a) IOMMU mode recorded")
check(
    ranks
    and all(
        isinstance((r.get("binding") or {}).get("gpu"), dict)
        for r in ranks
        if (r.get("nccl") or {}).get("backend") == "nccl"
    ),
    "(a) each NCCL rank recorded its binding and GPU",
)

diff = json.loads((out / "diff-matmul-to-fill.json").read_text())
hyps = {h["id"]: h for h in diff["hypotheses"]}
mem = hyps["gpu.memory"]
print("gpu.memory:", mem["status"], mem["severity"], "-", mem["summary"])
check(
    mem["status"] == "implicated", "(b) gpu.memory implicated when the step fills the GPU's memory"
)
tr = hyps["nccl.transport"]
spin_findings = [
    f for f in tr["findings"] if f.get("probe") == "gpu" and f["status"] == "implicated"
]
print("nccl.transport:", tr["status"], "-", tr["summary"])

m = json.loads((out / "matmul.json").read_text())
gd = m["probes"].get("gpu", {}).get("data") or {}
check(isinstance(gd.get("gpus"), dict), "(c) the matmul window has GPU samples")
for uuid, g in (gd.get("gpus") or {}).items():
    w = window({}, gd, uuid, g)
    if w:
        seen, line = spin_check(*w)
        print(
            f"matmul window, GPU {g['index']}: {line} -> spin signature {'SEEN' if seen else 'not seen'}"
        )
        check(not seen, "(c) no spin signature on an ordinary loaded GPU (bf16 matmul)")
check(not spin_findings, "(c) the diff raises no spin finding")
sys.exit(0 if ok else 1)
