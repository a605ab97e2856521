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


# ------------------------------------------------------------------------------------------------
# Causal links (DESIGN section 17, docs/diagnosis.md "Root causes and mechanisms")
# ------------------------------------------------------------------------------------------------
FACT_LIMIT_LOWERED = "fact.limit-lowered"
"""A judge's finding field tag: a power limit or a clock limit was lowered (gpu.config)."""
FACT_WORKAROUND_REMOVED = "fact.p2p-workaround-removed"
"""A judge's finding field tag: a variable that kept NCCL off P2P (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL) was removed."""
FACT_P2P_BLOCKED = "fact.p2p-blocked"
"""A judge's finding field tag: something on the P2P path (PCIe ACS redirect, IOMMU translation) blocks P2P."""
FACT_CANARY_BLIND = "fact.canary-blind"
"""A judge's finding field tag: the change acts only where forensics' canary does not reach (a variable of the
inter-node transport, with every canary rank on one machine), so a canary that stayed flat says nothing against
it (:mod:`forensics.diff.evidence`, rules that read a flat canary)."""


class Link:
    """One row of the causal table: finding ``cause`` can explain finding ``effect``.

    Attributes:
        cause, effect: hypothesis ids (:data:`HYPOTHESES` or a third-party probe's).
        verb: the words between the two in the verdict's chain ("which changed the NCCL transport:").
        why: the mechanism, in words (evidence lines, docs/diagnosis.md).
        cause_fact, effect_fact: a tag an implicating finding of that side must carry in its
            ``fields`` for the link to hold ("" when any implicating finding will do).
        min_cause: the lowest severity name (low, medium, high) of the cause's finding that can explain it.
        measured: benchmark result names the chain's sentence may quote (the mechanism's footprint).
    """

    __slots__ = (
        "cause",
        "effect",
        "verb",
        "why",
        "cause_fact",
        "effect_fact",
        "min_cause",
        "measured",
    )

    def __init__(
        self,
        cause: str,
        effect: str,
        verb: str,
        why: str,
        *,
        cause_fact: str = "",
        effect_fact: str = "",
        min_cause: str = "low",
        measured: tuple[str, ...] = (),
    ):
        self.cause, self.effect, self.verb, self.why = cause, effect, verb, why
        self.cause_fact, self.effect_fact, self.min_cause, self.measured = (
            cause_fact,
            effect_fact,
            min_cause,
            measured,
        )

    def __repr__(self) -> str:
        return f"Link({self.cause} -> {self.effect})"


_ALLREDUCE = ("canary.allreduce_us", "component.allreduce_busbw_gbps", "component.p2p_gbps")
_COMPUTE = ("canary.compute_ms", "component.matmul_tflops")

LINKS: tuple[Link, ...] = (
    Link(
        "nccl.version",
        "nccl.transport",
        "which changed the transport:",
        "an NCCL release changes which transport (P2P, SHM, NET) each channel uses",
        measured=_ALLREDUCE,
    ),
    Link(
        "nccl.env",
        "nccl.transport",
        "which changed the transport:",
        "NCCL_* variables (P2P_DISABLE, P2P_LEVEL, SHM_DISABLE, SOCKET_IFNAME, CUMEM_ENABLE) select the transport "
        "and the bootstrap interface",
        measured=_ALLREDUCE,
    ),
    Link(
        "nccl.env-propagation",
        "nccl.transport",
        "so the workers' NCCL ran without it:",
        "a variable that never reached the workers (or one a launcher injected) changes their transport or "
        "makes their bootstrap fail",
        measured=_ALLREDUCE,
    ),
    Link(
        "gpu.topology",
        "nccl.env",
        "and removing the workaround exposed it:",
        "a standing P2P problem (ACS redirecting P2P through the root complex, IOMMU translation) stays hidden "
        "while NCCL_P2P_DISABLE keeps NCCL off P2P; once it is removed, P2P is used and fails or hangs",
        effect_fact=FACT_WORKAROUND_REMOVED,
        measured=_ALLREDUCE,
    ),
    Link(
        "gpu.topology",
        "nccl.transport",
        "which blocks P2P:",
        "ACS or IOMMU on the P2P path redirects or blocks GPU-to-GPU traffic: NCCL falls back to SHM or hangs",
        cause_fact=FACT_P2P_BLOCKED,
        measured=_ALLREDUCE,
    ),
    Link(
        "gpu.config",
        "gpu.throttling",
        "which caps the clocks under load:",
        "a lowered power limit (or clock limit) is reached under load: the SW power cap cuts the SM clock",
        cause_fact=FACT_LIMIT_LOWERED,
        min_cause="medium",
        measured=_COMPUTE,
    ),
    Link(
        "gpu.contention",
        "gpu.throttling",
        "whose load pushed the board to its power cap:",
        "another process on the GPU draws power: the SW power cap then cuts the clocks for everyone",
        min_cause="medium",
        measured=_COMPUTE,
    ),
)
"""The causal table: every link the ledger may draw (DAG; docs/diagnosis.md prints it).

A third-party probe declares its own links the same way, by hypothesis id, in its class attribute
``links`` (:class:`forensics.probe.Probe`)."""
