"""Pure helpers for judging the ``gpu`` probe: GPU matching and under-load views.

An *under-load view* of one GPU on one side is what that side knows about the
GPU while it was busy (P0, utilization > 0, GPU-idle bit clear; DESIGN
section 6), taken from, in order of preference:

1. the benchmark telemetry (``snapshot["bench"]["telemetry"]``, a
   :mod:`forensics.gpu.sampler` summary) when it has busy samples;
2. the probe's own ``--sample`` window (``data["sample"]``) when busy;
3. the snapshot's instant reading when that reading itself was busy
   (one sample, judged with less weight).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from forensics.gpu.readings import (
    CLOCK_SM_MHZ,
    CLOCKS_EVENT_FIELDS,
    CURRENT_MHZ,
    IDLE_BIT,
    PCIE_GEN,
    PCIE_WIDTH,
    PSTATE,
    THROTTLE_REASONS,
    is_busy,
)
from forensics.model import Severity, is_missing, is_unrecorded

THROTTLE_MIN_FRACTION = 0.05  # a reason active in >= 5% of busy time counts as throttling

# Window counter -> the reason it measures (violation time per policy mapped to the closest reason).
_COUNTER_REASON = {f"clocks_event_{r}_ns": r for r in CLOCKS_EVENT_FIELDS if r in THROTTLE_REASONS}
_COUNTER_REASON.update(
    {
        "violation_power_ns": "sw_power_cap",
        "violation_thermal_ns": "sw_thermal_slowdown",
        "violation_board_limit_ns": "board_limit",
        "violation_reliability_ns": "reliability",
    }
)


def num(value: Any) -> float | None:
    """The number in ``value``, or ``None`` for a missing value / non-number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def get(d: Any, *path: str) -> Any:
    """``d[path[0]][path[1]]...`` or ``None`` when any step is absent."""
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def gpus_of(data: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """``{uuid: gpu}`` of a probe's data ({} when absent or missing)."""
    gpus = get(data, "gpus")
    if not isinstance(gpus, dict) or is_missing(gpus):
        return {}
    return {u: g for u, g in gpus.items() if isinstance(g, dict)}


def not_held(pairs, *path: str) -> list[str]:
    """ "GPU 0 before: clocks not in collect_env output" for each GPU side whose value at ``path``
    (or a group above it) is ``not_recorded``: the side came from a text that does not hold it
    (``forensics import``), so nothing about it can be compared."""
    out = []
    for key, gb, ga in pairs:
        for side, g in (("before", gb), ("after", ga)):
            if g is None:
                continue
            node: Any = g
            for part in path:
                if is_unrecorded(node) or not isinstance(node, dict):
                    break
                node = node.get(part)
            if is_unrecorded(node):
                out.append(f"{label(key, g)} {side}: {node.get('detail', 'not recorded')}")
    return out


def unheld_summary(lines: list[str], what: str) -> str:
    """One clause for an inconclusive summary: "clocks under load not in the imported text (GPU 0 before: ...)"."""
    shown = "; ".join(lines[:2]) + (f"; +{len(lines) - 2} more" if len(lines) > 2 else "")
    return f"{what} not held by an imported side ({shown})"


def label(uuid: str, gpu: dict[str, Any] | None) -> str:
    """ "GPU 0 (NVIDIA H200)" for evidence lines."""
    if not gpu:
        return uuid
    name = gpu.get("name")
    return f"GPU {gpu.get('index', '?')}" + (f" ({name})" if isinstance(name, str) else "")


def match_gpus(b: dict[str, Any], a: dict[str, Any]) -> tuple[list[tuple[str, Any, Any]], str]:
    """Pair GPUs of two sides by UUID; by index when no UUID is shared (another machine).

    Returns ``([(key, before_gpu|None, after_gpu|None)], note)``.
    """
    if set(b) & set(a) or not b or not a:
        keys = list(dict.fromkeys(list(b) + list(a)))
        pairs = [(k, b.get(k), a.get(k)) for k in keys]
        # A GPU whose UUID could not be read ("index-N", e.g. lost) pairs with the unmatched GPU of that index.
        lone_b = {g.get("index"): k for k, g, h in pairs if h is None}
        paired = {}
        for k, g, h in pairs:
            if g is None and k.startswith("index-") and h.get("index") in lone_b:
                paired[lone_b.pop(h.get("index"))] = k
        out = []
        for k, g, h in pairs:
            if k in paired:
                out.append((k, g, a[paired[k]]))
            elif k not in paired.values():
                out.append((k, g, h))
        return out, ""
    bi = {g.get("index"): g for g in b.values()}
    ai = {g.get("index"): g for g in a.values()}
    idx = sorted(set(bi) | set(ai), key=lambda i: (i is None, i))
    return (
        [(f"index {i}", bi.get(i), ai.get(i)) for i in idx],
        "GPUs matched by index: no UUID is shared (different GPUs or machines)",
    )


@dataclass
class View:
    """What one side knows about one GPU under load."""

    source: str  # "benchmark", "--sample window", "snapshot reading"
    busy_samples: int
    duration_s: float | None
    sm_median_mhz: float | None
    sm_min_mhz: float | None
    pcie_gen: float | None  # median over busy samples
    pcie_width: float | None
    throttle: dict[str, float] = field(default_factory=dict)  # reason -> fraction of busy time
    counter_deltas: dict[str, Any] = field(default_factory=dict)

    @property
    def instant(self) -> bool:
        return self.source == "snapshot reading"


def _window_entry(summary: Any, uuid: str, gpu: dict[str, Any] | None) -> dict[str, Any] | None:
    gpus = get(summary, "gpus")
    if not isinstance(gpus, dict):
        return None
    entry = gpus.get(uuid)
    if entry is None and gpu is not None:  # matched by index
        entry = next(
            (
                e
                for e in gpus.values()
                if isinstance(e, dict) and e.get("index") == gpu.get("index")
            ),
            None,
        )
    if not isinstance(entry, dict) or not num(entry.get("busy_samples")):
        return None
    return entry


def _from_window(entry: dict[str, Any], duration_s: Any, source: str) -> View:
    throttle: dict[str, float] = {}
    for reason, frac in (entry.get("reason_fraction") or {}).items():
        if reason in THROTTLE_REASONS and num(frac) is not None:
            throttle[reason] = float(frac)
    deltas = entry.get("counter_deltas") or {}
    dur = num(duration_s)
    if dur:
        for key, reason in _COUNTER_REASON.items():
            d = num(deltas.get(key))
            if d is not None and d > 0:
                throttle[reason] = max(throttle.get(reason, 0.0), min(1.0, d / (dur * 1e9)))
    return View(
        source,
        int(entry["busy_samples"]),
        dur,
        num(get(entry, CLOCK_SM_MHZ, "median")),
        num(get(entry, CLOCK_SM_MHZ, "min")),
        num(get(entry, PCIE_GEN, "median")),
        num(get(entry, PCIE_WIDTH, "median")),
        {r: round(f, 3) for r, f in throttle.items()},
        dict(deltas),
    )


def instant_busy(gpu: dict[str, Any] | None) -> bool:
    """True when the snapshot's own reading of ``gpu`` was taken under load."""
    if not gpu:
        return False
    return is_busy(
        gpu.get(PSTATE),
        get(gpu, "utilization", "gpu_pct"),
        get(gpu, "clocks_event_reasons", "current_mask"),
    )


def view(
    doc: dict[str, Any] | None, data: dict[str, Any] | None, uuid: str, gpu: dict[str, Any] | None
) -> View | None:
    """The best under-load view of one GPU on one side (see the module docstring), or ``None``."""
    tel = get(doc, "bench", "telemetry")
    entry = _window_entry(tel, uuid, gpu)
    if entry is not None:
        return _from_window(entry, get(tel, "duration_s"), "benchmark")
    sample = get(data, "sample")
    entry = _window_entry(sample, uuid, gpu)
    if entry is not None:
        return _from_window(entry, get(sample, "duration_s"), "--sample window")
    if instant_busy(gpu):
        active = get(gpu, "clocks_event_reasons", "active") or []
        return View(
            "snapshot reading",
            1,
            None,
            num(get(gpu, "clocks", "sm", CURRENT_MHZ)),
            None,
            num(get(gpu, "pcie", "gen_current")),
            num(get(gpu, "pcie", "width_current")),
            {r: 1.0 for r in active if r in THROTTLE_REASONS},
        )
    return None


def throttled(v: View | None) -> dict[str, float]:
    """Reasons active for at least :data:`THROTTLE_MIN_FRACTION` of the busy time."""
    if v is None:
        return {}
    return {r: f for r, f in v.throttle.items() if f >= THROTTLE_MIN_FRACTION}


def idle_state(gpu: dict[str, Any] | None) -> str:
    """ "P8, 0% util, idle bit" -- why a reading counts as idle (for evidence lines)."""
    if not gpu:
        return ""
    parts = []
    ps = gpu.get(PSTATE)
    if num(ps) is not None:
        parts.append(f"P{ps}")
    util = num(get(gpu, "utilization", "gpu_pct"))
    if util is not None:
        parts.append(f"{util:g}% util")
    mask = get(gpu, "clocks_event_reasons", "current_mask")
    if isinstance(mask, int) and mask & IDLE_BIT:
        parts.append("idle bit set")
    return ", ".join(parts)


def pct(frac: float) -> str:
    return f"{100 * frac:.0f}%"


_SEV_ORDER = [Severity.INFO, Severity.LOW, Severity.MEDIUM, Severity.HIGH, Severity.CRITICAL]


def worst(items: list[tuple[Severity, float, str, list[str]]]):
    """The (severity, relevance, summary, evidence) with the highest severity, then relevance."""
    return max(items, key=lambda t: (_SEV_ORDER.index(t[0]), t[1]))
