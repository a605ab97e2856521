"""Judging what a GPU did under load: memory near full (``gpu.memory``) and a spinning collective (``nccl.transport``).

Both are judged from a *window* of samples (:mod:`forensics.gpu.sampler`): the
benchmark telemetry (``snapshot["bench"]["telemetry"]``) first, else the
probe's own ``--sample`` window -- never from the snapshot's single instant
reading (DESIGN section 6: an idle instant says nothing about the run).

``gpu.memory`` -- memory in use at or near the total (rule):

- the window's peak of ``nvmlDeviceGetMemoryInfo().used / .total`` at or above
  :data:`NEAR_FULL` (90%) is *near full*; at or above :data:`FULL` (98%) *full*.
- New in the second snapshot's window (the first window was below, or had
  none): medium, relevance 0.7 (high at 98%); 0.5 without a first window.
  Near full in both windows: low, 0.2 (standing). Below: ruled out.
- What it means, said as the sources support it: on Linux a CUDA allocation
  beyond the GPU's memory fails with out-of-memory; near the total PyTorch's
  caching allocator frees cached blocks and retries (slower steps), memory
  fragments, and the next larger allocation can fail. NVIDIA's driver spills
  to system memory only on Windows (sysmem fallback since driver 536.40,
  switchable from 546.01; NVIDIA answer a_id 5490); Linux has no such
  fallback. NVML counts what the caching allocator holds, not only live tensors.

``nccl.transport`` -- the spin signature (rule): in a ``--sample`` window with
at least :data:`SPIN_MIN_BUSY` busy samples, at least :data:`SPIN_FRACTION`
(80%) of them read SM utilization >= 95% with memory utilization < 5%
(:func:`forensics.gpu.readings.is_spin`). NCCL kernels busy-wait for their
peers, so a collective that makes no progress reads exactly so (NVIDIA/nccl#2079,
nccl-tests#117, nccl#257). An ordinary compute-bound step does not: a bf16
matmul or a device copy reads far more memory utilization (the readings:
docs/gpu-probe.md, 'Judging').
Progress decides: a window recorded by the benchmark, which completed its
timed blocks, made progress and is never a spin; in a ``--sample`` window
progress is unknown: medium, relevance 0.6, "check that the step advances";
high (0.9) when the same snapshot's ``nccl_env`` shows a failed collective
or a watchdog timeout. No window: no finding (the ledger marks the
hypothesis from the ``nccl_env`` probe's side).
"""

from __future__ import annotations

from typing import Any

from forensics_probes.gpu.views import get, label, num, worst

from forensics.gpu.readings import MEM_TOTAL_BYTES, MEM_USED_BYTES, UTIL_MEM_PCT
from forensics.model import Finding, Severity, implicated, inconclusive, ruled_out

NEAR_FULL = 0.90
FULL = 0.98
SPIN_FRACTION = 0.8
SPIN_MIN_BUSY = 20
MEANING = (
    "on Linux a CUDA allocation beyond GPU memory fails with out-of-memory; near the total the caching "
    "allocator frees and retries (slower steps) and memory fragments. The driver's spill to system memory "
    "exists only on Windows (sysmem fallback, driver 536.40+, NVIDIA a_id 5490)"
)


def window(
    doc: dict[str, Any] | None, data: dict[str, Any] | None, uuid: str, gpu: dict[str, Any] | None
) -> tuple[dict[str, Any], str] | None:
    """(sampler entry of this GPU, source) from the benchmark telemetry, else the ``--sample`` window."""
    for summary, source in (
        (get(doc, "bench", "telemetry"), "benchmark"),
        (get(data, "sample"), "--sample window"),
    ):
        gpus = get(summary, "gpus")
        if not isinstance(gpus, dict):
            continue
        entry = gpus.get(uuid)
        if entry is None and gpu is not None:
            entry = next(
                (
                    e
                    for e in gpus.values()
                    if isinstance(e, dict) and e.get("index") == gpu.get("index")
                ),
                None,
            )
        if isinstance(entry, dict) and num(entry.get("samples")):
            return entry, source
    return None


def _peak(entry: dict[str, Any]) -> float | None:
    return num(get(entry, "mem_used_fraction", "max"))


def _mib(entry: dict[str, Any]) -> str:
    used, total = num(get(entry, MEM_USED_BYTES, "max")), num(entry.get(MEM_TOTAL_BYTES))
    return f"{used / 2**20:.0f} of {total / 2**20:.0f} MiB" if used is not None and total else "?"


def judge_memory(pairs, docs, datas) -> Finding:
    """``gpu.memory`` from the windows of both sides (rule in the module docstring)."""
    found, evidence, checked, no_window = [], [], [], []
    for key, gb, ga in pairs:
        name = label(key, ga or gb)
        wa = window(docs[1], datas[1], key, ga) if ga else None
        wb = window(docs[0], datas[0], key, gb) if gb else None
        pa = _peak(wa[0]) if wa else None
        pb = _peak(wb[0]) if wb else None
        if pa is None:
            no_window.append(name)
            continue
        evidence.append(
            f"{name} after: memory in use peaked at {pa:.0%} ({_mib(wa[0])}) over {wa[0]['samples']} "
            f"samples ({wa[1]}, nvmlDeviceGetMemoryInfo)"
        )
        if pb is not None:
            evidence.append(f"{name} before: peak {pb:.0%} ({_mib(wb[0])}, {wb[1]})")
        if pa < NEAR_FULL:
            checked.append(f"{name}: peak {pa:.0%} of GPU memory under load")
            continue
        what = "full" if pa >= FULL else "near full"
        if pb is not None and pb >= NEAR_FULL:
            found.append(
                (
                    Severity.LOW,
                    0.2,
                    f"{name}: GPU memory {what} in both windows ({pb:.0%} -> {pa:.0%}): "
                    "a standing condition, not what changed",
                    [],
                )
            )
        else:
            sev = Severity.HIGH if pa >= FULL else Severity.MEDIUM
            was = f" (before: {pb:.0%})" if pb is not None else " (no window on the before side)"
            found.append(
                (
                    sev,
                    0.7 if pb is not None else 0.5,
                    f"{name}: GPU memory {what} under load, peak {pa:.0%} ({_mib(wa[0])}){was}",
                    [],
                )
            )
    if found:
        sev, rel, summary, _ = worst(found)
        return implicated(
            "gpu.memory",
            sev,
            summary,
            evidence
            + [
                MEANING,
                "NVML counts the memory the caching "
                "allocator holds (reserved), not only live tensors",
            ],
            relevance=rel,
            fields=["bench.telemetry", "sample"],
        )
    if checked:
        return ruled_out(
            "gpu.memory",
            "; ".join(checked) + f" (near full is {NEAR_FULL:.0%})",
            evidence,
            fields=["bench.telemetry", "sample", "gpus.*.memory"],
        )
    return inconclusive(
        "gpu.memory",
        "memory in use is judged only from samples under load: run 'forensics bench' "
        "or 'forensics snapshot --sample 10' during the workload; a snapshot's instant reading is not judged",
        evidence,
    )


def spin_check(entry: dict[str, Any], source: str) -> tuple[bool, str]:
    """(signature seen?, one evidence line) for one GPU's window entry."""
    busy = int(num(entry.get("busy_samples")) or 0)
    spin = int(num(entry.get("spin_samples")) or 0)
    mem = get(entry, UTIL_MEM_PCT, "median")
    line = (
        f"{spin} of {busy} busy samples at >= 95% SM with < 5% memory utilization (median memory utilization "
        f"{mem if num(mem) is not None else '?'}%, {source})"
    )
    return busy >= SPIN_MIN_BUSY and spin >= SPIN_FRACTION * busy, line


def _collective_failed(doc: dict[str, Any] | None) -> str:
    """A failed collective or watchdog timeout the same snapshot's nccl_env section recorded ("" if none)."""
    sec = get(doc, "probes", "nccl_env", "data")
    for key in ("nccl_init", "launcher"):
        for rank in get(sec, key, "ranks") or []:
            nccl = rank.get("nccl") if isinstance(rank, dict) else None
            if (
                isinstance(nccl, dict)
                and nccl.get("backend") == "nccl"
                and not nccl.get("allreduce_ok")
            ):
                fails = nccl.get("failures") or []
                return (
                    f"rank {rank.get('rank')}: " + (fails[0].get("what") or fails[0].get("kind"))
                    if fails
                    else f"rank {rank.get('rank')}: all-reduce failed"
                )
    return ""


def judge_spin(pairs, docs, datas) -> list[Finding]:
    """``nccl.transport`` findings for the spin signature (rule in the module docstring); [] when not seen."""
    found, evidence = [], []
    for key, gb, ga in pairs:
        name = label(key, ga or gb)
        w = window(docs[1], datas[1], key, ga) if ga else None
        if not w:
            continue
        seen, line = spin_check(*w)
        if not seen:
            continue
        if w[1] == "benchmark":
            continue  # the benchmark finished its timed blocks: the collectives progressed
        failed = _collective_failed(docs[1])
        evidence.append(f"{name}: {line}")
        if failed:
            found.append(
                (
                    Severity.HIGH,
                    0.9,
                    f"{name}: a collective spinning -- 100% SM with ~0% memory "
                    f"utilization and no progress ({failed})",
                    [],
                )
            )
        else:
            found.append(
                (
                    Severity.MEDIUM,
                    0.6,
                    f"{name}: the signature of a collective spinning (SM busy, memory "
                    "idle) during the sample window; check that the step advances",
                    [],
                )
            )
    if not found:
        return []
    sev, rel, summary, _ = worst(found)
    evidence.append(
        "NCCL kernels busy-wait for their peers: a collective that waits reads ~100% SM and ~0% memory "
        "utilization (NVIDIA/nccl#2079: ACS redirect; nccl#257: IOMMU; a rank that never joined); see "
        "gpu.topology"
    )
    return [implicated("nccl.transport", sev, summary, evidence, relevance=rel, fields=["sample"])]
