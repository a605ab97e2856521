"""Sample every GPU over a time window (~10 Hz) and summarise it for judging.

Used by the ``gpu`` probe (``forensics snapshot --sample SECONDS``) and by the
benchmark (telemetry during the run). The summary is JSON-ready::

    {"duration_s": 5.0, "interval_s": 0.1,
     "gpus": {"GPU-<uuid>": {
        "index": 0, "name": "NVIDIA H200", "samples": 50, "busy_samples": 48,
        "clock_sm_mhz": {"min", "median", "max"}, "clock_mem_mhz": {...},
        "power_mw": {...}, "util_gpu_pct": {...}, "temp_c": {...},
        "pcie_gen": {...}, "pcie_width": {...}, PSTATE: {...},
        "reason_fraction": {"sw_power_cap": 0.93, ...}, "util_mem_pct": {...},
        "spin_samples": 0, MEM_USED_BYTES: {...}, MEM_TOTAL_BYTES: ..., "mem_used_fraction": {...},
        "counter_deltas": {"violation_power_ns": ..., "clocks_event_sw_power_cap_ns": ...,
                           "pcie_replay": ..., "ecc_uncorrected_volatile": ..., "energy_mj": ...},
        "processes": [{"pid", "kind", "used_memory_bytes", "name", "user", "ours"}]}}}
    (``ours``: the process descends from the sampling one, i.e. it is the benchmark's own)

Statistics of clocks, power, utilization, temperature, PCIe and P-state are
over *busy* samples only (P0, utilization > 0, GPU-idle bit clear; DESIGN
section 6) and are a missing value ``not_applicable`` when the GPU never got
busy. ``reason_fraction`` is the fraction of busy samples with each reason bit
set; ``spin_samples`` counts busy samples that read SM utilization >= 95% with
memory utilization < 5% (:func:`forensics.gpu.readings.is_spin`). Memory in use
(``mem_used_bytes``, ``mem_used_fraction`` of ``mem_total_bytes``) is over *all*
samples: memory stays allocated between kernels. ``counter_deltas`` are end minus start of the cumulative counters over
the whole window. When NVML is unavailable the summary is
``{"missing": "not_found", "detail": "<why>"}``; the sampler never raises.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

from forensics.gpu.nvml import Nvml
from forensics.gpu.readings import (
    CLOCK_MEM_MHZ,
    CLOCK_SM_MHZ,
    MEM_TOTAL_BYTES,
    MEM_USED_BYTES,
    PCIE_GEN,
    PCIE_WIDTH,
    POWER_MW,
    PSTATE,
    TEMP_C,
    UTIL_GPU_PCT,
    UTIL_MEM_PCT,
    decode_reasons,
    is_busy,
    is_spin,
    read_counters,
    read_instant,
    read_processes,
)
from forensics.model import MissingReason, is_missing, missing

_STAT_KEYS = (
    CLOCK_SM_MHZ,
    CLOCK_MEM_MHZ,
    POWER_MW,
    UTIL_GPU_PCT,
    UTIL_MEM_PCT,
    TEMP_C,
    PCIE_GEN,
    PCIE_WIDTH,
    PSTATE,
)
_PROCESS_EVERY = 10  # read the process list every Nth tick (it is the slowest call)


def _descends_from_us(pid: int) -> bool:
    """True if ``pid`` is this process or one it started (psutil parents): the benchmark's own ranks
    and the user's step processes are not contention."""
    import os

    import psutil

    me = os.getpid()
    try:
        return pid == me or any(parent.pid == me for parent in psutil.Process(pid).parents())
    except (psutil.Error, OSError):
        return False


class Sampler:
    """Background sampler of every GPU NVML sees.

    Args:
        interval_s: seconds between samples (default 0.1, i.e. ~10 Hz).
        nvml: an :class:`forensics.gpu.nvml.Nvml` (tests pass one over a fake pynvml).

    Use ``start()`` then ``stop() -> dict``, or ``with Sampler() as s: ...``
    and read ``s.summary`` afterwards.
    """

    def __init__(self, interval_s: float = 0.1, nvml: Nvml | None = None):
        self.interval_s = float(interval_s)
        self.nvml = nvml or Nvml()
        self.summary: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._devices: list[tuple[int, Any, str]] = []
        self._start_counters: dict[str, dict[str, Any]] = {}
        self._samples: dict[str, list[dict[str, Any]]] = {}
        self._procs: dict[str, dict[tuple[int, str], dict[str, Any]]] = {}
        self._names: dict[str, Any] = {}
        self._why = ""

    def start(self) -> "Sampler":
        """Read the start counters and begin sampling in a daemon thread. Never raises."""
        self._t0 = time.perf_counter()
        why = self.nvml.unavailable()
        devices = self.nvml.devices() if not why else missing(MissingReason.NOT_FOUND, why)
        if is_missing(devices):
            self._why = devices.get("detail") or devices["missing"]
            return self
        self._devices = [d for d in devices if d[1] is not None]
        for _, handle, uuid in self._devices:
            self._names[uuid] = self.nvml.call("nvmlDeviceGetName", handle)
            self._start_counters[uuid] = read_counters(self.nvml, handle)
            self._samples[uuid] = []
            self._procs[uuid] = {}
        self._thread = threading.Thread(target=self._loop, name="forensics-gpusample", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        tick = 0
        while not self._stop.is_set():
            t = time.perf_counter()
            for _, handle, uuid in self._devices:
                self._samples[uuid].append(read_instant(self.nvml, handle))
                if tick % _PROCESS_EVERY == 0:
                    self._note_processes(uuid, handle)
            tick += 1
            self._stop.wait(max(0.0, self.interval_s - (time.perf_counter() - t)))

    def _note_processes(self, uuid: str, handle: Any) -> None:
        procs = read_processes(self.nvml, handle)
        if is_missing(procs):
            return
        for p in procs:
            key = (p["pid"], p["kind"])
            old = self._procs[uuid].get(key)
            p["ours"] = old["ours"] if old is not None else _descends_from_us(p["pid"])
            mem = p["used_memory_bytes"]
            if old is None or (
                isinstance(mem, int)
                and isinstance(old["used_memory_bytes"], int)
                and mem > old["used_memory_bytes"]
            ):
                self._procs[uuid][key] = p

    def stop(self) -> dict[str, Any]:
        """Stop sampling and return the summary (see the module docstring). Never raises."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 20 * self.interval_s))
        duration = time.perf_counter() - self._t0
        if self._why:
            self.summary = missing(MissingReason.NOT_FOUND, self._why)
            return self.summary
        gpus: dict[str, Any] = {}
        for index, handle, uuid in self._devices:
            self._note_processes(uuid, handle)
            end = read_counters(self.nvml, handle)
            gpus[uuid] = summarise(
                index,
                self._names.get(uuid),
                list(self._samples[uuid]),
                self._start_counters[uuid],
                end,
                list(self._procs[uuid].values()),
            )
        self.summary = {
            "duration_s": round(duration, 3),
            "interval_s": self.interval_s,
            "gpus": gpus,
        }
        return self.summary

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _stats(values: list[Any]) -> dict[str, Any]:
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not nums:
        return missing(MissingReason.NOT_APPLICABLE, "no busy samples")
    med = statistics.median(nums)
    return {
        "min": min(nums),
        "median": int(med) if float(med).is_integer() else round(med, 1),
        "max": max(nums),
    }


def _delta(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return b - a
    return (
        b
        if is_missing(b)
        else (a if is_missing(a) else missing(MissingReason.ERROR, "not a number"))
    )


def summarise(
    index: int,
    name: Any,
    samples: list[dict[str, Any]],
    start: dict[str, Any],
    end: dict[str, Any],
    processes: list[dict[str, Any]],
) -> dict[str, Any]:
    """Summarise one GPU's samples (pure; see the module docstring for the shape)."""
    busy = [s for s in samples if is_busy(s.get(PSTATE), s.get(UTIL_GPU_PCT), s.get("reasons"))]
    out: dict[str, Any] = {
        "index": index,
        "name": name,
        "samples": len(samples),
        "busy_samples": len(busy),
    }
    for key in _STAT_KEYS:
        out[key] = _stats([s.get(key) for s in busy])
    counts: dict[str, int] = {}
    for s in busy:
        for r in decode_reasons(s["reasons"]):
            counts[r] = counts.get(r, 0) + 1
    out["reason_fraction"] = (
        {r: round(c / len(busy), 3) for r, c in sorted(counts.items())} if busy else {}
    )
    out["spin_samples"] = sum(1 for s in busy if is_spin(s))
    used = [s.get(MEM_USED_BYTES) for s in samples]
    total = next(
        (s.get(MEM_TOTAL_BYTES) for s in samples if isinstance(s.get(MEM_TOTAL_BYTES), int)),
        None,
    )
    out[MEM_USED_BYTES] = (
        _stats(used)
        if any(isinstance(u, int) for u in used)
        else missing(MissingReason.NOT_FOUND, "no memory reading")
    )
    out[MEM_TOTAL_BYTES] = total if total else missing(MissingReason.NOT_FOUND, "no memory reading")
    fracs = [u / total for u in used if isinstance(u, int) and total]
    out["mem_used_fraction"] = (
        {
            "min": round(min(fracs), 4),
            "median": round(statistics.median(fracs), 4),
            "max": round(max(fracs), 4),
        }
        if fracs
        else missing(MissingReason.NOT_FOUND, "no memory reading")
    )
    out["counter_deltas"] = {k: _delta(start.get(k), end.get(k)) for k in end}
    out["processes"] = sorted(processes, key=lambda p: (p["pid"], p["kind"]))
    return out
