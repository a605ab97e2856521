"""One GPU of ``nvidia-smi -q`` (text or XML) in the ``gpu`` probe's shape (docs/gpu-probe.md).

Both readers collect the same raw strings under the names below; :func:`to_probe`
converts them. nvidia-smi prints what NVML answers: an ``N/A`` is NVML's
NotSupported and becomes ``not_supported``, a field the text lacks (older driver,
a cut-off paste) becomes ``not_recorded``.

Field names changed across drivers; both spellings are read:

- "Clocks Throttle Reasons" (before 535) / "Clocks Event Reasons" (535+);
- "Power Readings" with "Power Draw", "Power Limit", "Enforced Power Limit" (before 530) /
  "GPU Power Readings" with "Average/Instantaneous Power Draw", "Requested Power Limit",
  "Current Power Limit" (530+; the current limit is the enforced one);
- "PCIe Generation" Max/Current (all) and "Device Max" (the GPU's own max, 530+).
"""

from __future__ import annotations

from typing import Any

from forensics.gpu.readings import CURRENT_MHZ, PSTATE
from forensics.importers.common import (
    COMPUTE_MODES,
    as_int,
    bytes_of,
    enabled_of,
    is_na,
    mhz_of,
    mw_of,
    na_value,
    not_recorded,
    number,
    pstate_of,
)
from forensics.model import is_missing, is_unrecorded

REASON_NAMES = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}
"""nvmlClocksEventReason bits (the same as forensics.gpu.readings.REASON_BITS), by the probe's names."""

GROUPS = (
    "memory",
    "utilization",
    "clocks",
    PSTATE,
    "clocks_event_reasons",
    "pcie",
    "power",
    "temperature",
    "violation_ns",
    "clocks_event_ns",
    "ecc",
    "remapped_rows",
    "retired_pages",
    "modes",
    "mig_devices",
    "nvlink",
    "processes",
)


def _val(raw: dict[str, Any], key: str, label: str, conv=None, what: str = "") -> Any:
    """``conv(raw[key])``; N/A -> not_supported; absent -> not_recorded."""
    text = raw.get(key)
    if text is None:
        return not_recorded(label, what)
    if is_na(text):
        return na_value(text, f"{label}: {what or key}")
    if conv is None:
        return text.strip()
    v = conv(text)
    if v is None:
        return na_value(text, f"{label}: {what or key} unreadable")
    return v


def _pct(text: str) -> int | None:
    return as_int(number(text)) if text.strip().endswith("%") or text.strip().isdigit() else None


def _int(text: str) -> int | None:
    t = text.strip()
    return int(t) if t.lstrip("-").isdigit() else None


def _gen(text: str) -> int | None:
    return as_int(number(text))


def _temp(text: str) -> int | None:
    t = text.strip()
    return as_int(number(t)) if t.endswith("C") else None


def _yes(text: str) -> int | None:
    t = text.strip().lower()
    return {"yes": 1, "no": 0}.get(t)


def _us_to_ns(text: str) -> int | None:
    t = text.strip()
    return as_int(number(t) * 1000) if t.endswith("us") and number(t) is not None else None


def to_probe(raw: dict[str, Any], index: int, label: str) -> tuple[str, dict[str, Any]]:
    """``(key, gpu)``: the GPU's UUID (``index-N`` without one) and its record in the probe's shape."""
    uuid = raw.get("uuid")
    key = uuid.strip() if uuid and not is_na(uuid) else f"index-{index}"
    g: dict[str, Any] = {"index": index}
    g["uuid"] = _val(raw, "uuid", label, what="GPU UUID")
    g["name"] = _val(raw, "name", label, what="Product Name")
    g["serial"] = _val(raw, "serial", label, what="Serial Number")
    g["pci_bus_id"] = _val(raw, "bus_id", label, what="Bus Id")
    g["vbios_version"] = _val(raw, "vbios", label, what="VBIOS Version")
    g["board_part_number"] = _val(raw, "board_part", label, what="Board Part Number")
    g["architecture"] = _val(raw, "architecture", label, what="Product Architecture")
    g["memory"] = {
        "total_bytes": _val(raw, "fb_total", label, bytes_of, "FB Memory Usage Total"),
        "used_bytes": _val(raw, "fb_used", label, bytes_of, "FB Memory Usage Used"),
    }
    g["utilization"] = {
        "gpu_pct": _val(raw, "util_gpu", label, _pct, "Utilization GPU"),
        "memory_pct": _val(raw, "util_mem", label, _pct, "Utilization Memory"),
    }
    clocks = {}
    for k in ("graphics", "sm", "mem", "video"):
        clocks[k] = {
            CURRENT_MHZ: _val(raw, f"clk_{k}", label, mhz_of, f"Clocks {k}"),
            "max_mhz": _val(raw, f"max_{k}", label, mhz_of, f"Max Clocks {k}"),
            "app_mhz": _val(raw, f"app_{k}", label, mhz_of, f"Applications Clocks {k}"),
            "default_app_mhz": _val(
                raw, f"default_app_{k}", label, mhz_of, f"Default Applications Clocks {k}"
            ),
        }
    g["clocks"] = clocks
    g[PSTATE] = _val(raw, PSTATE, label, pstate_of, "Performance State")
    reasons = raw.get("reasons") or {}
    if reasons:
        active = sorted(
            (n for n, v in reasons.items() if v.strip().lower() == "active"),
            key=lambda n: REASON_NAMES.get(n, 1 << 20),
        )
        listed = [n for n in reasons if n in REASON_NAMES]
        g["clocks_event_reasons"] = {
            "current_mask": sum(REASON_NAMES[n] for n in active if n in REASON_NAMES),
            "active": active,
            "supported_mask": not_recorded(label, "the supported-reasons mask is"),
            "source": f"{label} ({', '.join(listed)} listed; mask rebuilt from the Active ones)",
        }
    else:
        g["clocks_event_reasons"] = not_recorded(label, "Clocks Event Reasons")
    g["pcie"] = {
        "gen_current": _val(raw, "pcie_gen_current", label, _gen, "PCIe Generation Current"),
        "gen_max": _val(raw, "pcie_gen_max", label, _gen, "PCIe Generation Max"),
        "gen_gpu_max": _val(raw, "pcie_gen_device_max", label, _gen, "PCIe Generation Device Max"),
        "width_current": _val(raw, "pcie_width_current", label, _gen, "Link Width Current"),
        "width_max": _val(raw, "pcie_width_max", label, _gen, "Link Width Max"),
        "speed_mbps": not_recorded(label, "PCIe speed is"),
        "counters": {"replay": _val(raw, "replay", label, _int, "Replays Since Reset")},
    }
    draw = "power_draw" if "power_draw" in raw else "power_draw_avg"
    g["power"] = {
        "draw_mw": _val(raw, draw, label, mw_of, "Power Draw"),
        "limit_mw": _val(raw, "power_limit", label, mw_of, "Power Limit (requested)"),
        "enforced_limit_mw": _val(
            raw, "enforced_limit", label, mw_of, "Enforced / Current Power Limit"
        ),
        "default_limit_mw": _val(raw, "default_limit", label, mw_of, "Default Power Limit"),
        "min_limit_mw": _val(raw, "min_limit", label, mw_of, "Min Power Limit"),
        "max_limit_mw": _val(raw, "max_limit", label, mw_of, "Max Power Limit"),
        "energy_mj": not_recorded(label, "energy consumption is"),
    }
    g["temperature"] = {
        "gpu_c": _val(raw, "temp_gpu", label, _temp, "GPU Current Temp"),
        "slowdown_c": _val(raw, "temp_slowdown", label, _temp, "GPU Slowdown Temp"),
        "shutdown_c": _val(raw, "temp_shutdown", label, _temp, "GPU Shutdown Temp"),
        "gpu_max_c": _val(raw, "temp_max_gpu", label, _temp, "GPU Max Operating Temp"),
        "mem_max_c": _val(raw, "temp_mem_max", label, _temp, "Memory Max Operating Temp"),
    }
    g["violation_ns"] = not_recorded(label, "violation counters are")
    counters = raw.get("reason_counters") or {}
    g["clocks_event_ns"] = (
        {
            k: _val(counters, k, label, _us_to_ns, f"Clocks Event Reasons Counters {k}")
            for k in (
                "sw_power_cap",
                "sync_boost",
                "sw_thermal_slowdown",
                "hw_thermal_slowdown",
                "hw_power_brake_slowdown",
            )
        }
        if counters
        else not_recorded(label, "Clocks Event Reasons Counters")
    )
    g["ecc"] = {
        "mode_current": _val(raw, "ecc_current", label, enabled_of, "ECC Mode Current"),
        "mode_pending": _val(raw, "ecc_pending", label, enabled_of, "ECC Mode Pending"),
        "corrected_volatile": not_recorded(label, "ECC error totals in NVML's form are"),
        "uncorrected_volatile": not_recorded(label, "ECC error totals in NVML's form are"),
        "corrected_aggregate": not_recorded(label, "ECC error totals in NVML's form are"),
        "uncorrected_aggregate": not_recorded(label, "ECC error totals in NVML's form are"),
    }
    if any(k.startswith("remap_") for k in raw) or raw.get("remapped_rows") is not None:
        if raw.get("remapped_rows") is not None and is_na(raw["remapped_rows"]):
            g["remapped_rows"] = na_value(raw["remapped_rows"], f"{label}: Remapped Rows")
        else:
            g["remapped_rows"] = {
                "correctable": _val(
                    raw, "remap_corr", label, _int, "Remapped Rows Correctable Error"
                ),
                "uncorrectable": _val(
                    raw, "remap_unc", label, _int, "Remapped Rows Uncorrectable Error"
                ),
                "pending": _val(raw, "remap_pending", label, _yes, "Remapped Rows Pending"),
                "failure": _val(raw, "remap_failure", label, _yes, "Remapping Failure Occurred"),
            }
    else:
        g["remapped_rows"] = not_recorded(label, "Remapped Rows")
    if any(k.startswith("retired_") for k in raw):
        g["retired_pages"] = {
            "single_bit_ecc": _val(raw, "retired_sbe", label, _int, "Retired Pages Single Bit ECC"),
            "double_bit_ecc": _val(raw, "retired_dbe", label, _int, "Retired Pages Double Bit ECC"),
            "pending": _val(
                raw,
                "retired_pending",
                label,
                lambda t: {"yes": True, "no": False}.get(t.strip().lower()),
                "Retired Pages Pending",
            ),
        }
    else:
        g["retired_pages"] = not_recorded(label, "Retired Pages")
    compute = raw.get("compute_mode")
    g["modes"] = {
        "persistence": _val(raw, "persistence", label, enabled_of, "Persistence Mode"),
        "compute": (
            COMPUTE_MODES.get(compute.strip().lower(), compute.strip().lower())
            if compute and not is_na(compute)
            else _val(raw, "compute_mode", label, what="Compute Mode")
        ),
        "mig_current": _val(raw, "mig_current", label, enabled_of, "MIG Mode Current"),
        "mig_pending": _val(raw, "mig_pending", label, enabled_of, "MIG Mode Pending"),
    }
    g["mig_devices"] = not_recorded(label, "MIG devices are")
    g["nvlink"] = not_recorded(label, "NVLink state (nvidia-smi nvlink -s) is")
    procs = raw.get("processes")
    if procs is None:
        g["processes"] = not_recorded(label, "the process list is")
    else:
        out = []
        for p in procs:
            pid = _int(p.get("pid", "") or "")
            if pid is None:
                continue
            kind = {"C": "compute", "G": "graphics", "C+G": "compute"}.get(
                (p.get("type") or "").strip(), "compute"
            )
            mem = bytes_of(p.get("used") or "")
            out.append(
                {
                    "pid": pid,
                    "kind": kind,
                    "name": (p.get("name") or "").strip() or not_recorded(label, "name"),
                    "used_memory_bytes": mem
                    if mem is not None
                    else na_value(p.get("used") or "", label),
                    "user": not_recorded(label, "the process owner is"),
                }
            )
        g["processes"] = out
    for k, v in list(g.items()):
        if isinstance(v, dict) and not is_missing(v) and _all_unrecorded(v):
            g[k] = not_recorded(
                label, {"memory": "FB Memory Usage", "pcie": "PCI"}.get(k, k.replace("_", " "))
            )
    return key, g


def _all_unrecorded(d: dict[str, Any]) -> bool:
    """True when every leaf under ``d`` is ``not_recorded`` (a group the text does not hold at all)."""
    for v in d.values():
        if isinstance(v, dict) and not is_missing(v):
            if not _all_unrecorded(v):
                return False
        elif not is_unrecorded(v):
            return False
    return True
