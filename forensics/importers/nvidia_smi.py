"""Plain ``nvidia-smi``: the table (both layouts: before driver 530 and the wider one since).

Header: ``NVIDIA-SMI <version>  Driver Version: <v>  CUDA Version: <v>``. Each GPU
is a box of up to three rows::

    |   0  NVIDIA A100 80G...  Off  | 00000000:17:00.0 Off |                    0 |
    | N/A   35C    P0    64W / 300W |      0MiB / 80994MiB |      0%      Default |
    |                               |                      |             Disabled |

(index, name - cut to fit -, persistence mode, bus id, display, volatile uncorrected
ECC errors or Off; fan, temperature, P-state, power draw / cap (the enforced limit),
memory used / total, utilization, compute mode; MIG mode). Then the process
table. A name that ends in "..." was cut by nvidia-smi and is not recorded.
"""

from __future__ import annotations

import re
from typing import Any

from forensics.gpu.readings import PSTATE
from forensics.importers.common import (
    COMPUTE_MODES,
    Part,
    enabled_of,
    is_na,
    mw_of,
    na_value,
    not_recorded,
)

_HEADER = re.compile(
    r"NVIDIA-SMI\s+(\d+\.\d+\S*)\s+Driver Version:\s*(\d\S*)(?:\s+CUDA Version:\s*(\S+))?"
)
_ROW1 = re.compile(
    r"^\|\s*(\d+)\s+(.+?)\s+(On|Off)\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])"
    r"\s+(On|Off)\s*\|\s*(\S+)\s*\|"
)
_ROW2 = re.compile(
    r"^\|\s*(\S+)\s+(\S+)\s+(P\d+|ERR!|N/A)\s+(\S+)\s*/\s*(\S+)\s*\|\s*(\d+)MiB\s*/\s*(\d+)MiB\s*\|"
    r"\s*(\d+%|N/A)\s+(.+?)\s*\|"
)
_ROW3 = re.compile(r"^\|\s+\|\s+\|\s*(\S.*?)\s*\|$")
_PROC = re.compile(
    r"^\|\s*(\d+)\s+(?:(\S+)\s+(\S+)\s+)?(\d+)\s+(C\+G|C|G)\s+(.+?)\s+(\d+)MiB\s*\|$"
)


def parse(lines: list[str], part: Part) -> Part:
    """Fill ``part.facts["gpu"]`` from the nvidia-smi table (module docstring)."""
    label = part.label
    gpu = part.section("gpu")
    gpus: dict[str, dict[str, Any]] = {}
    cur: dict[str, Any] | None = None
    row = 0
    in_procs = False
    procs: dict[int, list[dict[str, Any]]] = {}
    for ln in lines:
        s = ln.strip()
        m = _HEADER.search(s)
        if m:
            part.tool_version = m.group(1)
            gpu["driver_version"] = m.group(2)
            if m.group(3) and not is_na(m.group(3)):
                gpu["cuda_driver_version"] = m.group(3)
            continue
        if "Processes:" in s:
            in_procs = True
            continue
        if in_procs:
            p = _PROC.match(s)
            if p:
                procs.setdefault(int(p.group(1)), []).append(
                    {
                        "pid": int(p.group(4)),
                        "kind": "graphics" if p.group(5) == "G" else "compute",
                        "name": p.group(6).strip(),
                        "used_memory_bytes": int(p.group(7)) * 2**20,
                        "user": not_recorded(label, "the process owner is"),
                    }
                )
            continue
        m1 = _ROW1.match(s)
        if m1:
            idx, name = int(m1.group(1)), m1.group(2).strip()
            cur = {
                "index": idx,
                "pci_bus_id": m1.group(4),
                "name": name
                if not name.endswith("...")
                else not_recorded(label, f"the full name (cut to {name!r}) is"),
                "modes": {"persistence": enabled_of(m1.group(3))},
            }
            ecc = m1.group(6)
            if ecc.isdigit():
                cur["ecc"] = {"mode_current": "enabled", "uncorrected_volatile": int(ecc)}
            elif enabled_of(ecc) == "disabled":
                cur["ecc"] = {"mode_current": "disabled"}
            elif is_na(ecc):
                cur["ecc"] = {"mode_current": na_value(ecc, f"{label}: Volatile Uncorr. ECC")}
            gpus[f"index-{idx}"] = cur
            row = 1
            continue
        if cur is not None and row == 1:
            m2 = _ROW2.match(s)
            if m2:
                temp = m2.group(2)
                cur["temperature"] = {
                    "gpu_c": int(temp[:-1]) if re.match(r"^\d+C$", temp) else na_value(temp, label)
                }
                ps = m2.group(3)
                cur[PSTATE] = int(ps[1:]) if ps.startswith("P") else na_value(ps, f"{label}: Perf")
                draw, cap = mw_of(m2.group(4)), mw_of(m2.group(5))
                cur["power"] = {
                    "draw_mw": draw
                    if draw is not None
                    else na_value(m2.group(4), f"{label}: Pwr:Usage"),
                    "enforced_limit_mw": cap
                    if cap is not None
                    else na_value(m2.group(5), f"{label}: Pwr:Cap"),
                }
                cur["memory"] = {
                    "used_bytes": int(m2.group(6)) * 2**20,
                    "total_bytes": int(m2.group(7)) * 2**20,
                }
                util = m2.group(8)
                cur["utilization"] = {
                    "gpu_pct": int(util[:-1]) if util.endswith("%") else na_value(util, label)
                }
                mode = m2.group(9).strip().lower()
                cur["modes"]["compute"] = COMPUTE_MODES.get(mode, mode)
                row = 2
                continue
        if cur is not None and row == 2:
            m3 = _ROW3.match(s)
            if m3:
                mig = m3.group(1)
                cur["modes"]["mig_current"] = enabled_of(mig) or na_value(mig, f"{label}: MIG M.")
            row = 0
    for g in gpus.values():
        if in_procs:
            g["processes"] = procs.get(g["index"], [])
    if gpus:
        if (
            part.tool_version or not part.fragment
        ):  # the whole table (its header seen) lists every GPU
            gpu["gpu_count"] = len(gpus)
        else:
            part.notes.append(
                f"a piece of the nvidia-smi table: {len(gpus)} GPU box(es) without the header; the "
                "machine's GPU count and driver are not recorded"
            )
        gpu["gpus"] = gpus
    return part
