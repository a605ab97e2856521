"""The stable hypothesis ids (DESIGN section 5).

Reports, the JSON output and probes' findings use these ids; scripts depend on
them. Add new ids; never rename one.
"""

from __future__ import annotations

HYPOTHESES: dict[str, str] = {
    "gpu.throttling": "GPU clocks cut under load: clocks-event reasons (SW power cap, HW slowdown, "
                      "thermal, power brake) or violation counters that grew during the run",
    "gpu.pcie-link": "PCIe generation or width below the GPU's and the slot's max while busy",
    "gpu.contention": "other processes on the GPU, utilization or memory in use before the run",
    "gpu.config": "power limit, application clocks, persistence/compute/MIG/ECC mode",
    "gpu.health": "ECC errors, remapped rows, PCIe replays, Xid events",
    "gpu.topology": "NVLink state, P2P path (nvidia-smi topo -m), PCIe ACS on the bridges above the GPUs, "
                    "IOMMU mode and kernel command line",
    "gpu.memory": "GPU memory in use at or near the total under load (allocator pressure, fragmentation, "
                  "out-of-memory risk)",
    "driver.version": "NVIDIA driver",
    "cuda.version": "CUDA runtime/toolkit actually used",
    "nccl.version": "NCCL library actually loaded",
    "torch.version": "PyTorch (and its build)",
    "python.packages": "any other installed distribution changed",
    "nccl.env": "NCCL_* / CUDA_* / TORCH_* variables changed in the launching process",
    "nccl.env-propagation": "variables differ between the launching process and its workers",
    "nccl.transport": "how NCCL moves data per channel (P2P, SHM, NET/IB, NET/Socket), NCCL WARN lines, failed "
                      "or spinning collectives, NCCL_SOCKET_IFNAME against the host's interfaces",
    "code.change": "git HEAD moved, reflog events (pull, checkout, reset), dirty tree, editable installs",
    "host.cpu": "CPU model, governor, frequency, load, NUMA, cgroup limits",
    "host.numa": "each rank's CPU affinity and memory NUMA binding against its GPU's NUMA node",
}
"""id -> what the hypothesis covers, in the order a report lists them."""
