"""Judging ``host.numa``: each rank's CPU affinity and memory binding against its GPU's NUMA node.

Pure functions over two ``nccl_env`` data sections. A rank's view is its
``binding`` (recorded by the rank itself: :mod:`forensics.env.workers.binding`)
with ``binding.gpu`` (its CUDA device's PCI address, sysfs ``numa_node`` and
``local_cpulist``), which only ``--nccl-init`` ranks that use a GPU have.

Rules, per rank with a GPU on a host with more than one NUMA node:

- *remote CPUs*: none of the CPUs the rank may run on (``sched_getaffinity``)
  belongs to its GPU's node (``local_cpulist``): high, relevance 0.8. Every
  host-to-device copy, pinned buffer and kernel launch then crosses the socket
  interconnect (a reporter in NVIDIA/go-gpuallocator#17 saw inference slower
  than on one card when ranks ran on the other node).
- *remote memory*: ``Mems_allowed_list`` excludes the GPU's node, or a
  ``bind:``/``prefer:`` policy names only other nodes, or more than half of
  the rank's anonymous pages (at least 1000 pages, ``numa_maps``) sit on
  other nodes: medium, 0.6.
- A rank allowed on CPUs of several nodes (not pinned) is no finding: the
  scheduler may place it anywhere; the evidence says so.

A finding present, identical, in both snapshots is low, relevance 0.2
("standing"). The GPU's node read as -1 (the firmware gives none): that
rank is not judged (a missing value, inconclusive); a host with a single
NUMA node rules the hypothesis out (every CPU and page is local). No rank
with a GPU: inconclusive.
"""

from __future__ import annotations

from typing import Any

from forensics.env.transport import nccl_ranks
from forensics.env.workers.binding import cpulist, parse_cpulist
from forensics.model import Finding, Severity, implicated, inconclusive, is_missing, ruled_out

H = "host.numa"
MIN_PAGES = 1000
NO_RANKS = (
    "no rank recorded its GPU's NUMA node: run 'forensics snapshot --nccl-init' (or --launcher ... "
    "--nccl-init) on the GPU machine"
)


def _problems(
    data,
) -> tuple[dict[tuple[str, str], tuple[Severity, str]], list[str], list[str], int | None]:
    """({(rank, kind): (severity, line)}, evidence, unknown ranks, host node count)."""
    probs: dict[tuple[str, str], tuple[Severity, str]] = {}
    evidence: list[str] = []
    unknown: list[str] = []
    nodes_count = None
    for lbl, rank in nccl_ranks(data):
        b = rank.get("binding")
        if not isinstance(b, dict) or is_missing(b):
            continue
        gpu = b.get("gpu")
        host = b.get("host_nodes") or {}
        if host:
            nodes_count = len(host)
        if not isinstance(gpu, dict):
            continue
        node = gpu.get("numa_node")
        cpus = b.get("cpus")
        evidence.append(
            f"{lbl}: GPU {gpu.get('bdf') if isinstance(gpu.get('bdf'), str) else '?'} on NUMA node "
            f"{node if isinstance(node, int) else 'unknown'}; rank may run on CPUs "
            f"{cpus if isinstance(cpus, str) else '?'}, memory nodes {b.get('mems_allowed_list')}"
        )
        if not host:
            unknown.append(
                f"{lbl}: the host's NUMA nodes were not readable (/sys/devices/system/node)"
            )
            continue
        if len(host) == 1:
            continue
        if not isinstance(node, int):
            unknown.append(
                f"{lbl}: {node.get('detail') if is_missing(node) else 'GPU NUMA node not recorded'}"
            )
            continue
        local = gpu.get("local_cpulist")
        gpu_cpus = (
            parse_cpulist(local)
            if isinstance(local, str)
            else parse_cpulist(host.get(str(node), ""))
        )
        if isinstance(cpus, str) and gpu_cpus:
            mine = parse_cpulist(cpus)
            if mine and not mine & gpu_cpus:
                probs[(lbl, "cpus")] = (
                    Severity.HIGH,
                    f"{lbl} may run only on CPUs {cpus}, none of them on its "
                    f"GPU's NUMA node {node} (CPUs {cpulist(gpu_cpus)})",
                )
            elif mine and not mine <= gpu_cpus:
                evidence.append(
                    f"{lbl}: not pinned to its GPU's node (CPUs {cpus} span several nodes)"
                )
        mems = b.get("mems_allowed_list")
        if isinstance(mems, str) and mems and node not in parse_cpulist(mems):
            probs[(lbl, "mems")] = (
                Severity.MEDIUM,
                f"{lbl} may allocate memory only on node(s) {mems}, not on "
                f"its GPU's node {node} (Mems_allowed_list)",
            )
        maps = b.get("numa_maps")
        if isinstance(maps, dict) and not is_missing(maps):
            pol = [
                p
                for p in (maps.get("policies") or {})
                if p.split(":")[0] in ("bind", "prefer", "preferred")
            ]
            for p in pol:
                want = parse_cpulist(p.split(":", 1)[1]) if ":" in p else set()
                if want and node not in want:
                    probs[(lbl, "policy")] = (
                        Severity.MEDIUM,
                        f"{lbl} memory policy {p} names only nodes other "
                        f"than its GPU's node {node} (numa_maps)",
                    )
            pages = {int(k): v for k, v in (maps.get("anon_pages_by_node") or {}).items()}
            total = sum(pages.values())
            if total >= MIN_PAGES and pages.get(node, 0) < total / 2:
                top = max(pages, key=pages.get)
                probs[(lbl, "pages")] = (
                    Severity.MEDIUM,
                    f"{lbl}: {100 * (1 - pages.get(node, 0) / total):.0f}% of "
                    f"its {total} anonymous pages are off its GPU's node {node} (most on node "
                    f"{top}; numa_maps)",
                )
    return probs, evidence, unknown, nodes_count


def judge_numa(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[Finding]:
    """Findings for ``host.numa`` (rules in the module docstring); ``before`` None judges ``after`` alone."""
    if after is None:
        return []
    pa, ev, unknown, nodes = _problems(after)
    pb = _problems(before)[0] if before is not None else {}
    found = []
    for key, (sev, line) in sorted(pa.items()):
        if key in pb and pb[key] == (sev, line):
            found.append(
                implicated(
                    H,
                    Severity.LOW,
                    line + " -- on both sides: a standing problem, not what changed",
                    [line] + ev,
                    relevance=0.2,
                    fields=["nccl_env.nccl_init.ranks.*.binding"],
                )
            )
        else:
            found.append(
                implicated(
                    H,
                    sev,
                    line,
                    [line] + ev,
                    relevance=0.8 if sev is Severity.HIGH else 0.6,
                    fields=["nccl_env.nccl_init.ranks.*.binding"],
                )
            )
    if found:
        return found
    if not ev:
        return [inconclusive(H, NO_RANKS)]
    if nodes == 1:
        return [
            ruled_out(H, "one NUMA node on this host: every CPU and page is local to the GPU", ev)
        ]
    if unknown:
        return [
            inconclusive(
                H, "the GPU's NUMA node is unknown, placement not judged: " + "; ".join(unknown), ev
            )
        ]
    return [
        ruled_out(H, "every rank may run on CPUs of its GPU's NUMA node and allocate there", ev)
    ]
