"""GPU readings shared by the ``gpu`` probe and the window sampler.

The keys of the readings (``CLOCK_SM_MHZ``, ``CURRENT_MHZ`` ...) are declared here once, with what each
one is; every reader (the probe and its judges, the sampler, the benchmark's comparison, the fleet,
investigate, the importers) uses the constant, never the string (tests/gpu/test_reading_keys.py).

Decoding tables (clocks-event reason bits by numeric value, DESIGN section 6,
research/nvml.md section 2) and the two reads both need: the cumulative
counters (read at the start and end of a window) and one instant sample.
All NVML access goes through :class:`forensics.gpu.nvml.Nvml`.
"""

from __future__ import annotations

from typing import Any

from forensics.gpu.nvml import Nvml
from forensics.model import is_missing

# --- the keys of the readings: one name per quantity ----------------------------------------------
# An instant reading is what NVML said once, at snapshot time, whatever the GPU was doing then; an
# under-load reading is a sampler summary ``{"min", "median", "max"}`` over the *busy* samples of a
# window (:mod:`forensics.gpu.sampler`), the median being the figure judged. The names are recorded in
# snapshot and benchmark files: they are a file format and do not change.

CURRENT_MHZ = "current_mhz"
"""Instant clock, MHz: ``gpu.devices[<uuid>].clocks.<kind>.current_mhz`` (kind ``graphics``, ``sm``,
``mem``, ``video``), ``nvmlDeviceGetClockInfo(NVML_CLOCK_<KIND>)`` read once by the ``gpu`` probe (and
``Clocks`` of ``nvidia-smi -q`` in an imported snapshot). Not judged alone: an idle GPU reads low."""

CLOCK_SM_MHZ = "clock_sm_mhz"
"""SM clock, MHz, ``nvmlDeviceGetClockInfo(NVML_CLOCK_SM)``: one value in an instant sample
(:func:`read_instant`), ``{"min", "median", "max"}`` over busy samples in a sampler summary (under load;
the median is what the fleet reports as :data:`SM_CLOCK_LOAD_MHZ`)."""

CLOCK_MEM_MHZ = "clock_mem_mhz"
"""Memory clock, MHz, ``nvmlDeviceGetClockInfo(NVML_CLOCK_MEM)``; instant sample / busy-sample summary."""

POWER_MW = "power_mw"
"""Board power draw, milliwatts, ``nvmlDeviceGetPowerUsage`` (a 1 s average on Ampere and later);
instant sample / busy-sample summary."""

UTIL_GPU_PCT = "util_gpu_pct"
"""SM utilization, percent: the share of the last sample period in which a kernel ran,
``nvmlDeviceGetUtilizationRates().gpu``; instant sample / busy-sample summary."""

UTIL_MEM_PCT = "util_mem_pct"
"""Memory utilization, percent: the share of the last sample period in which device memory was read or
written, ``nvmlDeviceGetUtilizationRates().memory``; instant sample / busy-sample summary."""

TEMP_C = "temp_c"
"""GPU temperature, degrees C, ``nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)``; instant sample /
busy-sample summary."""

PCIE_GEN = "pcie_gen"
"""PCIe link generation in use (1-6), ``nvmlDeviceGetCurrPcieLinkGeneration``; instant sample /
busy-sample summary (the median is the fleet's :data:`PCIE_GEN_LOAD`). An idle link trains down, so only
the under-load figure is judged."""

PCIE_WIDTH = "pcie_width"
"""PCIe link width in use (lanes), ``nvmlDeviceGetCurrPcieLinkWidth``; instant sample / busy-sample
summary (the median is the fleet's :data:`PCIE_WIDTH_LOAD`)."""

PSTATE = "pstate"
"""Performance state, 0 (P0, fastest) to 15, ``nvmlDeviceGetPerformanceState``: the snapshot's
``gpu.devices[<uuid>].pstate`` read once by the ``gpu`` probe (``Performance State`` of ``nvidia-smi -q``,
``<performance_state>`` of its XML, in an imported snapshot); instant sample / busy-sample summary.
An idle GPU sits in a high P-state, so only the under-load figure is judged."""

MEM_USED_BYTES = "mem_used_bytes"
"""Device memory in use, bytes, ``nvmlDeviceGetMemoryInfo().used``; instant sample, and the sampler's
``{"min", "median", "max"}`` over *all* samples (memory held is not a busy-only figure)."""

MEM_TOTAL_BYTES = "mem_total_bytes"
"""Device memory, bytes, ``nvmlDeviceGetMemoryInfo().total``; instant sample, one value in a summary."""

SM_CLOCK_LOAD_MHZ = "sm_clock_load_mhz"
"""The fleet's name (``forensics fleet``: its JSON, HTML and Prometheus metric) for the median of
:data:`CLOCK_SM_MHZ` over busy samples: the same quantity under another name, kept because the fleet's
output is an interface. Derived here, next to the reading it names."""

PCIE_GEN_LOAD = "pcie_gen_load"
"""The fleet's name for the median of :data:`PCIE_GEN` over busy samples (output interface, as above)."""

PCIE_WIDTH_LOAD = "pcie_width_load"
"""The fleet's name for the median of :data:`PCIE_WIDTH` over busy samples (output interface, as above)."""

LOAD_METRICS: dict[str, str] = {
    CLOCK_SM_MHZ: SM_CLOCK_LOAD_MHZ,
    PCIE_GEN: PCIE_GEN_LOAD,
    PCIE_WIDTH: PCIE_WIDTH_LOAD,
}
"""Sampler key -> the fleet metric that reports its busy-sample median."""

READING_KEYS = (
    CURRENT_MHZ,
    CLOCK_SM_MHZ,
    CLOCK_MEM_MHZ,
    POWER_MW,
    UTIL_GPU_PCT,
    UTIL_MEM_PCT,
    TEMP_C,
    PCIE_GEN,
    PCIE_WIDTH,
    PSTATE,
    MEM_USED_BYTES,
    MEM_TOTAL_BYTES,
    SM_CLOCK_LOAD_MHZ,
    PCIE_GEN_LOAD,
    PCIE_WIDTH_LOAD,
)
"""Every name declared above: no other module of forensics/ or probes/ spells one as a string."""

# nvmlClocksEventReason* bit values (same as nvmlClocksThrottleReason*).
REASON_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}
IDLE_BIT = 0x1
# Bits that mean clocks were cut (research/nvml.md section 3.3); 0x2/0x100 are configuration.
THROTTLE_REASONS = (
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "board_limit",
    "reliability",
)
CONFIG_REASONS = ("applications_clocks_setting", "display_clock_setting")
HW_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")

# Cumulative violation time per policy (ns), NVML_FI_DEV_PERF_POLICY_* fields,
# falling back to nvmlDeviceGetViolationStatus(policy).
VIOLATION_FIELDS: dict[str, tuple[str, str]] = {
    "power": ("NVML_FI_DEV_PERF_POLICY_POWER", "NVML_PERF_POLICY_POWER"),
    "thermal": ("NVML_FI_DEV_PERF_POLICY_THERMAL", "NVML_PERF_POLICY_THERMAL"),
    "sync_boost": ("NVML_FI_DEV_PERF_POLICY_SYNC_BOOST", "NVML_PERF_POLICY_SYNC_BOOST"),
    "board_limit": ("NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT", "NVML_PERF_POLICY_BOARD_LIMIT"),
    "low_utilization": (
        "NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION",
        "NVML_PERF_POLICY_LOW_UTILIZATION",
    ),
    "reliability": ("NVML_FI_DEV_PERF_POLICY_RELIABILITY", "NVML_PERF_POLICY_RELIABILITY"),
    "total_app_clocks": (
        "NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS",
        "NVML_PERF_POLICY_TOTAL_APP_CLOCKS",
    ),
    "total_base_clocks": (
        "NVML_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS",
        "NVML_PERF_POLICY_TOTAL_BASE_CLOCKS",
    ),
}
# Accumulated time per clocks-event reason (ns on R580, see research/nvml.md section 4).
CLOCKS_EVENT_FIELDS: dict[str, str] = {
    "sw_power_cap": "NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP",
    "sync_boost": "NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST",
    "sw_thermal_slowdown": "NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN",
    "hw_thermal_slowdown": "NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN",
    "hw_power_brake_slowdown": "NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN",
}
# PCIe link error counters (cumulative counts); rx/tx byte counters are traffic, not health.
PCIE_COUNTER_FIELDS: dict[str, str] = {
    "replay": "NVML_FI_DEV_PCIE_REPLAY_COUNTER",
    "replay_rollover": "NVML_FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER",
    "l0_to_recovery": "NVML_FI_DEV_PCIE_L0_TO_RECOVERY_COUNTER",
    "correctable_errors": "NVML_FI_DEV_PCIE_COUNT_CORRECTABLE_ERRORS",
    "naks_received": "NVML_FI_DEV_PCIE_COUNT_NAKS_RECEIVED",
    "naks_sent": "NVML_FI_DEV_PCIE_COUNT_NAKS_SENT",
    "receiver_error": "NVML_FI_DEV_PCIE_COUNT_RECEIVER_ERROR",
    "bad_tlp": "NVML_FI_DEV_PCIE_COUNT_BAD_TLP",
    "bad_dllp": "NVML_FI_DEV_PCIE_COUNT_BAD_DLLP",
    "lane_error": "NVML_FI_DEV_PCIE_COUNT_LANE_ERROR",
    "lcrc_error": "NVML_FI_DEV_PCIE_COUNT_LCRC_ERROR",
    "fatal_error": "NVML_FI_DEV_PCIE_COUNT_FATAL_ERROR",
    "non_fatal_error": "NVML_FI_DEV_PCIE_COUNT_NON_FATAL_ERROR",
    "unsupported_req": "NVML_FI_DEV_PCIE_COUNT_UNSUPPORTED_REQ",
}


def decode_reasons(mask: Any) -> list[str] | Any:
    """Names of the set bits of a clocks-event reason mask, lowest bit first.

    Unknown bits are kept as ``"unknown_0x800"``. A missing mask is returned as is.
    """
    if not isinstance(mask, int):
        return mask
    names, bit = [], 1
    while bit <= mask:
        if mask & bit:
            names.append(REASON_BITS.get(bit, f"unknown_{bit:#x}"))
        bit <<= 1
    return names


def read_reason_masks(nvml: Nvml, handle: Any) -> dict[str, Any]:
    """Current and supported clocks-event reason masks (uint64 bitmasks).

    Sources: ``nvmlDeviceGetCurrentClocksEventReasons`` /
    ``nvmlDeviceGetSupportedClocksEventReasons`` (R535+), falling back to the
    deprecated ``...ClocksThrottleReasons`` calls when the new one is absent.
    """
    cur, used = nvml.first(
        ("nvmlDeviceGetCurrentClocksEventReasons", handle),
        ("nvmlDeviceGetCurrentClocksThrottleReasons", handle),
    )
    sup, _ = nvml.first(
        ("nvmlDeviceGetSupportedClocksEventReasons", handle),
        ("nvmlDeviceGetSupportedClocksThrottleReasons", handle),
    )
    return {"current_mask": cur, "supported_mask": sup, "source": used}


def read_violations(nvml: Nvml, handle: Any) -> dict[str, Any]:
    """Cumulative violation time per policy, ns (``violation_ns`` keys).

    Source: field values ``NVML_FI_DEV_PERF_POLICY_*``; a field the batch
    cannot give falls back to ``nvmlDeviceGetViolationStatus(policy).violationTime``.
    """
    vals = nvml.field_values(handle, [f for f, _ in VIOLATION_FIELDS.values()])
    out: dict[str, Any] = {}
    for key, (fname, policy_name) in VIOLATION_FIELDS.items():
        value = vals.get(fname)
        if is_missing(value) and value.get("missing") not in ("gpu_lost", "timed_out"):
            policy = nvml.constant(policy_name)
            if policy is not None:
                status = nvml.call("nvmlDeviceGetViolationStatus", handle, policy)
                if not is_missing(status):
                    value = int(status.violationTime)
        out[key] = value
    return out


def read_counters(nvml: Nvml, handle: Any) -> dict[str, Any]:
    """Cumulative counters for a before/after delta over a window.

    Returns flat keys: ``violation_<policy>_ns``, ``clocks_event_<reason>_ns``,
    ``pcie_replay``, ``ecc_corrected_volatile``, ``ecc_uncorrected_volatile``,
    ``energy_mj``. Sources: see :func:`read_violations`, field values
    ``NVML_FI_DEV_CLOCKS_EVENT_REASON_*``, ``NVML_FI_DEV_PCIE_REPLAY_COUNTER``,
    ``nvmlDeviceGetTotalEccErrors(type, NVML_VOLATILE_ECC)``,
    ``nvmlDeviceGetTotalEnergyConsumption`` (mJ).
    """
    out: dict[str, Any] = {f"violation_{k}_ns": v for k, v in read_violations(nvml, handle).items()}
    names = list(CLOCKS_EVENT_FIELDS.values()) + [PCIE_COUNTER_FIELDS["replay"]]
    vals = nvml.field_values(handle, names)
    for key, fname in CLOCKS_EVENT_FIELDS.items():
        out[f"clocks_event_{key}_ns"] = vals[fname]
    out["pcie_replay"] = vals[PCIE_COUNTER_FIELDS["replay"]]
    for kind, const in (
        ("corrected", "NVML_MEMORY_ERROR_TYPE_CORRECTED"),
        ("uncorrected", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
    ):
        out[f"ecc_{kind}_volatile"] = nvml.call(
            "nvmlDeviceGetTotalEccErrors",
            handle,
            nvml.constant(const, 0 if kind == "corrected" else 1),
            nvml.constant("NVML_VOLATILE_ECC", 0),
        )
    out["energy_mj"] = nvml.call("nvmlDeviceGetTotalEnergyConsumption", handle)
    return out


def read_instant(nvml: Nvml, handle: Any) -> dict[str, Any]:
    """One instant sample: clocks, power, utilization, temperature, PCIe link, P-state, reasons.

    Keys: ``clock_sm_mhz``, ``clock_mem_mhz`` (``nvmlDeviceGetClockInfo``),
    ``power_mw`` (``nvmlDeviceGetPowerUsage``; a 1 s average on Ampere+),
    ``util_gpu_pct`` / ``util_mem_pct`` (``nvmlDeviceGetUtilizationRates().gpu`` / ``.memory``:
    the share of the last sample period in which a kernel ran / device memory was read or written),
    ``mem_used_bytes`` / ``mem_total_bytes`` (``nvmlDeviceGetMemoryInfo``), ``temp_c``
    (``nvmlDeviceGetTemperature(GPU)``), ``pcie_gen``/``pcie_width``
    (``nvmlDeviceGetCurrPcieLinkGeneration``/``...Width``), ``pstate``
    (``nvmlDeviceGetPerformanceState``, read after the link), ``reasons``
    (current clocks-event mask).
    """
    util = nvml.call("nvmlDeviceGetUtilizationRates", handle)
    mem = nvml.call("nvmlDeviceGetMemoryInfo", handle)
    reasons, _ = nvml.first(
        ("nvmlDeviceGetCurrentClocksEventReasons", handle),
        ("nvmlDeviceGetCurrentClocksThrottleReasons", handle),
    )
    return {
        CLOCK_SM_MHZ: nvml.call(
            "nvmlDeviceGetClockInfo", handle, nvml.constant("NVML_CLOCK_SM", 1)
        ),
        CLOCK_MEM_MHZ: nvml.call(
            "nvmlDeviceGetClockInfo", handle, nvml.constant("NVML_CLOCK_MEM", 2)
        ),
        POWER_MW: nvml.call("nvmlDeviceGetPowerUsage", handle),
        UTIL_GPU_PCT: util if is_missing(util) else int(util.gpu),
        UTIL_MEM_PCT: util if is_missing(util) else int(util.memory),
        MEM_USED_BYTES: mem if is_missing(mem) else int(mem.used),
        MEM_TOTAL_BYTES: mem if is_missing(mem) else int(mem.total),
        TEMP_C: nvml.call(
            "nvmlDeviceGetTemperature", handle, nvml.constant("NVML_TEMPERATURE_GPU", 0)
        ),
        PCIE_GEN: nvml.call("nvmlDeviceGetCurrPcieLinkGeneration", handle),
        PCIE_WIDTH: nvml.call("nvmlDeviceGetCurrPcieLinkWidth", handle),
        PSTATE: nvml.call("nvmlDeviceGetPerformanceState", handle),
        "reasons": reasons,
    }


SPIN_GPU_UTIL_PCT = 95
SPIN_MEM_UTIL_MAX_PCT = 5
"""A *spin sample*: busy, SM utilization >= 95% and memory utilization < 5%. NCCL kernels poll for their
peers, so a collective waiting on a peer that never answers reads ~100% / ~0% (NVIDIA/nccl#2079); an
ordinary compute-bound load (a bf16 matmul, a device copy) reads several times 5% of memory utilization
(docs/gpu-probe.md, 'Judging'), so 5% leaves a margin below it."""


def is_spin(sample: dict[str, Any]) -> bool:
    """True for a spin sample (see :data:`SPIN_GPU_UTIL_PCT`); needs ``util_gpu_pct`` and ``util_mem_pct``."""
    g, m = sample.get(UTIL_GPU_PCT), sample.get(UTIL_MEM_PCT)
    return (
        isinstance(g, (int, float))
        and isinstance(m, (int, float))
        and g >= SPIN_GPU_UTIL_PCT
        and m < SPIN_MEM_UTIL_MAX_PCT
    )


def is_busy(pstate: Any, util_gpu_pct: Any, reasons: Any) -> bool:
    """True for an under-load reading: P0, utilization > 0 and the GPU-idle bit clear."""
    return (
        pstate == 0
        and isinstance(util_gpu_pct, (int, float))
        and util_gpu_pct > 0
        and isinstance(reasons, int)
        and not reasons & IDLE_BIT
    )


def read_processes(nvml: Nvml, handle: Any) -> list[dict[str, Any]] | dict[str, str]:
    """Processes using the GPU: pid, used memory, kind, and name/user from psutil.

    Sources: ``nvmlDeviceGetComputeRunningProcesses`` and
    ``nvmlDeviceGetGraphicsRunningProcesses``; ``psutil.Process(pid).name()``
    and ``.username()`` (missing ``not_found`` when the pid is in another PID
    namespace, e.g. another container). ``used_memory_bytes`` is missing
    ``not_supported`` when NVML reports it as unavailable.
    """
    from forensics.model import MissingReason, missing

    out: list[dict[str, Any]] = []
    compute = nvml.call("nvmlDeviceGetComputeRunningProcesses", handle)
    if is_missing(compute):
        return compute
    graphics = nvml.call("nvmlDeviceGetGraphicsRunningProcesses", handle)
    seen = set()
    for kind, procs in (
        ("compute", compute),
        ("graphics", [] if is_missing(graphics) else graphics),
    ):
        for p in procs:
            pid = int(p.pid)
            if (pid, kind) in seen:
                continue
            seen.add((pid, kind))
            mem = getattr(p, "usedGpuMemory", None)
            out.append(
                {
                    "pid": pid,
                    "kind": kind,
                    "used_memory_bytes": int(mem)
                    if isinstance(mem, int) and mem < 2**63
                    else missing(MissingReason.NOT_SUPPORTED, "usedGpuMemory unavailable"),
                    **_process_owner(pid),
                }
            )
    return out


def _process_owner(pid: int) -> dict[str, Any]:
    from forensics.model import MissingReason, missing

    try:
        import psutil

        proc = psutil.Process(pid)
        return {"name": proc.name(), "user": proc.username()}
    except ImportError:
        return {
            "name": missing(MissingReason.NOT_FOUND, "psutil not installed"),
            "user": missing(MissingReason.NOT_FOUND, "psutil not installed"),
        }
    except Exception as exc:  # noqa: BLE001 - NoSuchProcess, AccessDenied, another PID namespace
        m = missing(MissingReason.NOT_FOUND, f"pid {pid} not visible here ({type(exc).__name__})")
        return {"name": m, "user": m}
