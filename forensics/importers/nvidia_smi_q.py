"""``nvidia-smi -q`` (also ``-a``) text: the log header and one block per GPU.

A line is ``Key : value`` or a section name alone ("Clocks", "Max Clocks", "PCIe
Generation"). A value is looked up by (nearest section, key), which survives a
paste that trimmed the indentation: only the section line right above matters,
and keys that are unique in a GPU block ("Performance State", "Product Name") are
found anywhere in it. ``-d PERFORMANCE``/``-d CLOCK`` excerpts parse too; what they
omit is ``not_recorded``.
"""

from __future__ import annotations

import re
from typing import Any

from forensics.gpu.readings import PSTATE
from forensics.importers.common import Part, is_na
from forensics.importers.gpu_record import to_probe

_KV = re.compile(r"^(\s*)([^:]+?)\s+:\s?(.*?)\s*$")
_GPU = re.compile(r"^\s*GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")

# canonical -> ((section names or None for "anywhere"), key names)
_LOOKUP: dict[str, tuple[tuple[str, ...] | None, tuple[str, ...]]] = {
    "name": (None, ("Product Name",)),
    "architecture": (None, ("Product Architecture",)),
    "uuid": (None, ("GPU UUID",)),
    "serial": (None, ("Serial Number",)),
    "vbios": (None, ("VBIOS Version",)),
    "board_part": (None, ("Board Part Number",)),
    "bus_id": (("PCI",), ("Bus Id",)),
    "persistence": (None, ("Persistence Mode",)),
    "compute_mode": (None, ("Compute Mode",)),
    "mig_current": (("MIG Mode",), ("Current",)),
    "mig_pending": (("MIG Mode",), ("Pending",)),
    PSTATE: (None, ("Performance State",)),
    "fb_total": (("FB Memory Usage",), ("Total",)),
    "fb_used": (("FB Memory Usage",), ("Used",)),
    "util_gpu": (("Utilization",), ("GPU", "Gpu")),
    "util_mem": (("Utilization",), ("Memory",)),
    "pcie_gen_max": (("PCIe Generation",), ("Max",)),
    "pcie_gen_current": (("PCIe Generation",), ("Current",)),
    "pcie_gen_device_max": (("PCIe Generation",), ("Device Max",)),
    "pcie_width_max": (("Link Width",), ("Max",)),
    "pcie_width_current": (("Link Width",), ("Current",)),
    "replay": (None, ("Replays Since Reset", "Replays since reset")),
    "power_draw": (("Power Readings",), ("Power Draw",)),
    "power_draw_avg": (("GPU Power Readings",), ("Average Power Draw",)),
    "power_limit": (
        ("Power Readings", "GPU Power Readings"),
        ("Requested Power Limit", "Power Limit"),
    ),
    "enforced_limit": (
        ("Power Readings", "GPU Power Readings"),
        ("Enforced Power Limit", "Current Power Limit"),
    ),
    "default_limit": (("Power Readings", "GPU Power Readings"), ("Default Power Limit",)),
    "min_limit": (("Power Readings", "GPU Power Readings"), ("Min Power Limit",)),
    "max_limit": (("Power Readings", "GPU Power Readings"), ("Max Power Limit",)),
    "temp_gpu": (("Temperature",), ("GPU Current Temp",)),
    "temp_slowdown": (("Temperature",), ("GPU Slowdown Temp",)),
    "temp_shutdown": (("Temperature",), ("GPU Shutdown Temp",)),
    "temp_max_gpu": (("Temperature",), ("GPU Max Operating Temp",)),
    "temp_mem_max": (("Temperature",), ("Memory Max Operating Temp",)),
    "ecc_current": (("ECC Mode", "Ecc Mode"), ("Current",)),
    "ecc_pending": (("ECC Mode", "Ecc Mode"), ("Pending",)),
    "remap_corr": (("Remapped Rows",), ("Correctable Error",)),
    "remap_unc": (("Remapped Rows",), ("Uncorrectable Error",)),
    "remap_pending": (("Remapped Rows",), ("Pending",)),
    "remap_failure": (("Remapped Rows",), ("Remapping Failure Occurred",)),
    "retired_sbe": (("Retired Pages",), ("Single Bit ECC",)),
    "retired_dbe": (("Retired Pages",), ("Double Bit ECC",)),
    "retired_pending": (
        ("Retired Pages",),
        ("Pending Page Blacklist", "Pending Page Retirement", "Pending"),
    ),
}
for _k, _sec in (("graphics", "Graphics"), ("sm", "SM"), ("mem", "Memory"), ("video", "Video")):
    _LOOKUP[f"clk_{_k}"] = (("Clocks",), (_sec,))
    _LOOKUP[f"max_{_k}"] = (("Max Clocks",), (_sec,))
    _LOOKUP[f"app_{_k}"] = (("Applications Clocks",), (_sec,))
    _LOOKUP[f"default_app_{_k}"] = (("Default Applications Clocks",), (_sec,))

_REASON_KEYS = {
    "Idle": "gpu_idle",
    "Applications Clocks Setting": "applications_clocks_setting",
    "SW Power Cap": "sw_power_cap",
    "HW Slowdown": "hw_slowdown",
    "HW Thermal Slowdown": "hw_thermal_slowdown",
    "HW Power Brake Slowdown": "hw_power_brake_slowdown",
    "Sync Boost": "sync_boost",
    "SW Thermal Slowdown": "sw_thermal_slowdown",
    "Display Clock Setting": "display_clock_setting",
}
_COUNTER_KEYS = {
    "SW Power Capping": "sw_power_cap",
    "Sync Boost": "sync_boost",
    "SW Thermal Slowdown": "sw_thermal_slowdown",
    "HW Thermal Slowdown": "hw_thermal_slowdown",
    "HW Power Braking": "hw_power_brake_slowdown",
}
_REASON_SECTIONS = ("Clocks Event Reasons", "Clocks Throttle Reasons", "Clocks Throttle Reason")
_COUNTER_SECTIONS = ("Clocks Event Reasons Counters", "Clocks Throttle Reasons Counters")


def _entries(lines: list[str]) -> list[tuple[str, str, str]]:
    """``(section, key, value)`` of one GPU block; section = the nearest enclosing section line."""
    out = []
    stack: list[tuple[int, str]] = []
    for ln in lines:
        if not ln.strip():
            continue
        indent = len(ln) - len(ln.lstrip())
        m = _KV.match(ln)
        if m:
            while stack and stack[-1][0] >= indent and indent > 0:
                stack.pop()
            out.append((stack[-1][1] if stack else "", m.group(2).strip(), m.group(3)))
            continue
        name = ln.strip()
        if ":" in name:  # "Key:" with no value and no space before the colon
            name = name.rstrip(":").strip()
        while stack and stack[-1][0] >= indent and indent > 0:
            stack.pop()
        if indent == 0:
            stack = []
        stack.append((indent, name))
    return out


def _raw(entries: list[tuple[str, str, str]]) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for canon, (sections, keys) in _LOOKUP.items():
        for sec, key, val in entries:
            if key in keys and (sections is None or sec in sections):
                raw.setdefault(canon, val)
                break
    reasons = {
        _REASON_KEYS[k]: v for s, k, v in entries if s in _REASON_SECTIONS and k in _REASON_KEYS
    }
    if not reasons:  # trimmed paste: the nested "HW Thermal Slowdown" keeps its own section
        reasons = {
            _REASON_KEYS[k]: v
            for s, k, v in entries
            if s in ("HW Slowdown",) + _REASON_SECTIONS and k in _REASON_KEYS
        }
    else:
        reasons.update(
            {_REASON_KEYS[k]: v for s, k, v in entries if s == "HW Slowdown" and k in _REASON_KEYS}
        )
    if reasons:
        raw["reasons"] = reasons
    counters = {
        _COUNTER_KEYS[k]: v for s, k, v in entries if s in _COUNTER_SECTIONS and k in _COUNTER_KEYS
    }
    if counters:
        raw["reason_counters"] = counters
    procs: list[dict[str, str]] = []
    in_procs = False
    for _sec, key, val in entries:
        if key == "Process ID":
            procs.append({"pid": val})
            in_procs = True
        elif in_procs and procs and key in ("Type", "Name", "Used GPU Memory"):
            procs[-1][{"Type": "type", "Name": "name", "Used GPU Memory": "used"}[key]] = val
    has_proc_section = any(sec == "Processes" or key == "Processes" for sec, key, _ in entries)
    if procs or has_proc_section:
        raw["processes"] = procs
    return raw


def parse(lines: list[str], part: Part) -> Part:
    """Fill ``part.facts["gpu"]`` from ``nvidia-smi -q`` text (module docstring)."""
    gpu = part.section("gpu")
    head: dict[str, str] = {}
    blocks: list[tuple[str, list[str]]] = []
    for ln in lines:
        m = _GPU.match(ln)
        if m:
            blocks.append((m.group(1), []))
            continue
        if blocks:
            blocks[-1][1].append(ln)
        else:
            kv = _KV.match(ln)
            if kv:
                head[kv.group(2).strip()] = kv.group(3)
    drv = head.get("Driver Version")
    if drv and not is_na(drv):
        gpu["driver_version"] = drv.strip()
    cuda = head.get("CUDA Version")
    if cuda and not is_na(cuda):
        gpu["cuda_driver_version"] = cuda.strip()
    if head.get("Timestamp"):
        part.notes.append(
            f"nvidia-smi timestamp (the machine's local time): {head['Timestamp'].strip()}"
        )
    attached = head.get("Attached GPUs", "").strip()
    gpus: dict[str, Any] = {}
    for i, (bus, block) in enumerate(blocks):
        raw = _raw(_entries(block))
        raw.setdefault("bus_id", bus)
        key, rec = to_probe(raw, i, part.label)
        gpus[key] = rec
    if attached.isdigit():
        gpu["gpu_count"] = int(attached)
        if blocks and len(blocks) < int(attached):
            part.notes.append(
                f"Attached GPUs: {attached}, but the text holds {len(blocks)} GPU block(s) (cut off?)"
            )
    elif blocks and not part.fragment:
        gpu["gpu_count"] = len(blocks)
    elif blocks:
        part.notes.append(
            f"a piece of nvidia-smi -q: {len(blocks)} GPU block(s), no 'Attached GPUs' line; the machine's "
            "GPU count is not recorded"
        )
    if gpus:
        gpu["gpus"] = gpus
    return part
