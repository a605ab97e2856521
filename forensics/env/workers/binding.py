"""Where this process may run and where its memory is: CPU affinity, NUMA binding, page placement.

Standard library only: every env worker and nccl-init rank calls
:func:`read_binding` on itself (each rank's *own* view: a launcher, numactl,
taskset or a cgroup cpuset can give each rank a different one). Sources:

- ``os.sched_getaffinity(0)`` (sched_getaffinity(2)): the CPUs this process may run on;
- ``/proc/self/status``: ``Cpus_allowed_list`` and ``Mems_allowed_list`` (the
  cpuset limit; a ``numactl --membind`` policy is not a limit and shows in
  ``numa_maps`` as ``bind:N`` instead);
- ``/proc/self/numa_maps``: per mapping its policy word (``default``,
  ``bind:1``, ``interleave:0-1``, ``prefer:1``) and pages per node (``N0=12``).
  Only anonymous mappings (no ``file=``: heap, stack, malloc arenas, pinned
  buffers) are counted: the kernel's memory policy does not apply to
  file-backed pages (intel/cri-resource-manager#878);
- ``/sys/devices/system/node/node<N>/cpulist``: the host's NUMA nodes;
- for a rank's GPU: ``/sys/bus/pci/devices/<bdf>/numa_node`` and ``local_cpulist``
  (:mod:`forensics.gpu.pci`).
"""

from __future__ import annotations

import os
import re

NODE_DIR = "/sys/devices/system/node"
_N = re.compile(r"\bN(\d+)=(\d+)\b")


def parse_cpulist(text: str) -> set[int]:
    """``"0-7,16-23"`` -> ``{0..7, 16..23}`` (the kernel's list format; empty text -> empty set)."""
    out: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        stride = 1
        if ":" in hi:
            hi, _, s = hi.partition(":")
            stride = int(s)
        out.update(range(int(lo), int(hi or lo) + 1, stride))
    return out


def cpulist(cpus) -> str:
    """``{0, 1, 2, 5}`` -> ``"0-2,5"``."""
    nums = sorted(set(cpus))
    parts, i = [], 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ",".join(parts)


def parse_status(text: str) -> dict:
    """``Cpus_allowed_list`` / ``Mems_allowed_list`` of /proc/<pid>/status text (absent keys left out)."""
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in ("Cpus_allowed_list", "Mems_allowed_list"):
            out[name.lower()] = value.strip()
    return out


def summarize_numa_maps(text: str) -> dict:
    """Pages per NUMA node of the anonymous mappings, and the policies in use.

    Returns:
        ``{"anon_pages_by_node": {"0": 1234}, "policies": {"default": 310, "bind:1": 2},
        "mappings": N}``; node keys are strings.
    """
    pages: dict[str, int] = {}
    policies: dict[str, int] = {}
    n = 0
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        n += 1
        policies[fields[1]] = policies.get(fields[1], 0) + 1
        if any(f.startswith("file=") for f in fields[2:]):
            continue
        for node, count in _N.findall(line):
            pages[node] = pages.get(node, 0) + int(count)
    return {
        "anon_pages_by_node": dict(sorted(pages.items(), key=lambda kv: int(kv[0]))),
        "policies": dict(sorted(policies.items())),
        "mappings": n,
    }


def _read(path: str):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(), None
    except FileNotFoundError:
        return None, {"missing": "not_found", "detail": f"{path} absent"}
    except PermissionError:
        return None, {"missing": "no_permission", "detail": f"{path}: not readable by this user"}
    except OSError as exc:
        return None, {"missing": "error", "detail": f"{path}: {exc.strerror}"}


def host_nodes(node_dir: str = NODE_DIR) -> dict:
    """``{"0": "0-15"}``: the host's NUMA nodes and their CPUs ({} without sysfs)."""
    try:
        names = sorted(
            (n for n in os.listdir(node_dir) if re.fullmatch(r"node\d+", n)),
            key=lambda n: int(n[4:]),
        )
    except OSError:
        return {}
    out = {}
    for name in names:
        text, _ = _read(os.path.join(node_dir, name, "cpulist"))
        out[name[4:]] = (text or "").strip()
    return out


def read_binding(proc: str = "/proc/self", node_dir: str = NODE_DIR) -> dict:
    """This process's CPU affinity and memory binding (sources in the module docstring).

    Returns:
        ``{"cpus": "0-15", "cpus_allowed_list", "mems_allowed_list", "numa_maps": summary,
        "host_nodes": {...}}``; a value that cannot be read is a missing value
        (``{"missing", "detail"}``), e.g. numa_maps on a kernel without NUMA support.
    """
    out: dict = {}
    try:
        out["cpus"] = cpulist(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        out["cpus"] = {"missing": "not_supported", "detail": "os.sched_getaffinity unavailable"}
    text, why = _read(os.path.join(proc, "status"))
    status = parse_status(text) if text is not None else {}
    for key in ("cpus_allowed_list", "mems_allowed_list"):
        out[key] = (
            status.get(key) or why or {"missing": "not_found", "detail": f"no {key} in status"}
        )
    text, why = _read(os.path.join(proc, "numa_maps"))
    out["numa_maps"] = summarize_numa_maps(text) if text is not None else why
    out["host_nodes"] = host_nodes(node_dir)
    return out


def gpu_of_rank(local_rank: int, sys_root: str = "/sys") -> dict:
    """The PCI address and NUMA node of this rank's CUDA device (imports torch; call after set_device).

    Source: ``torch.cuda.get_device_properties(i).pci_domain_id/pci_bus_id/pci_device_id``
    (the sysfs address torch.numa.binding builds too), then sysfs
    ``numa_node``/``local_cpulist`` of that address.
    """
    import torch

    from forensics.gpu.pci import numa_node

    out: dict = {"cuda_device": local_rank}
    props = torch.cuda.get_device_properties(local_rank)
    dom, bus, dev = (
        getattr(props, k, None) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id")
    )
    if not all(isinstance(v, int) for v in (dom, bus, dev)):
        out["bdf"] = {
            "missing": "function_not_found",
            "detail": "this torch's device properties have no PCI address",
        }
        return out
    bdf = f"{dom:04x}:{bus:02x}:{dev:02x}.0"
    folder = os.path.join(sys_root, "bus", "pci", "devices", bdf)
    out["bdf"] = bdf
    out["numa_node"] = numa_node(folder)
    text, why = _read(os.path.join(folder, "local_cpulist"))
    out["local_cpulist"] = text.strip() if text is not None else why
    return out
