"""PCI facts of a GPU from sysfs and procfs: the bridges above it, their ACS control, IOMMU mode, NUMA node.

Standard library only (the env workers import it too); nothing here needs
root except the ACS registers, and every read that fails gives a missing
value saying why. Sources:

- ``/sys/bus/pci/devices/<bdf>`` (a link into ``/sys/devices/pci<dom>:<bus>/...``):
  the path names every bridge between the root complex and the GPU;
  ``numa_node`` (``-1`` when the firmware gives none: unknown, not node 0),
  ``local_cpulist``, ``iommu_group`` (a link to ``/sys/kernel/iommu_groups/<N>``).
- ``/sys/bus/pci/devices/<bdf>/config``: the device's PCI configuration space.
  ACS (Access Control Services, extended capability ID 0x000D) sits in the
  *extended* space at offset 0x100 or later. Linux returns only the first
  64 bytes of this file to a reader without CAP_SYS_ADMIN
  (``drivers/pci/pci-sysfs.c``, ``pci_read_config``), so as a normal user the
  ACS control register cannot be read: that is a ``no_permission`` value
  ("needs root"), never "ACS off".
- ``/sys/class/iommu/`` (one entry per IOMMU unit: ``dmar0`` Intel, ``ivhd0`` AMD),
  ``/sys/kernel/iommu_groups/<N>/type`` (``DMA``, ``DMA-FQ``: translated;
  ``identity``: passthrough, what ``iommu=pt`` gives; kernel >= 5.11).
- ``/proc/cmdline``: the kernel command line (world-readable).

ACS control bits (PCIe spec; Linux ``include/uapi/linux/pci_regs.h``
``PCI_ACS_SV`` ... ``PCI_ACS_DT``; lspci's names): 0x01 SrcValid, 0x02
TransBlk, 0x04 ReqRedir, 0x08 CmpltRedir, 0x10 UpstreamFwd, 0x20 EgressCtrl,
0x40 DirectTrans. ReqRedir/CmpltRedir send peer-to-peer requests and
completions up to the root complex (and the IOMMU) instead of across the
switch: NCCL's troubleshooting guide names this as a cause of slow or hung
P2P (NVIDIA/nccl#2079: ``ACSCtl 0x001d`` on the root ports above two GPUs hung
the first all-reduce).
"""

from __future__ import annotations

import os
import re
from typing import Any

from forensics.model import MissingReason, missing

SYS = "/sys"
PROC_CMDLINE = "/proc/cmdline"
ACS_CAP_ID = 0x000D
EXT_CAP_START = 0x100
UNPRIVILEGED_CONFIG_BYTES = 64
NEEDS_ROOT = (
    "needs root: Linux shows only the first 64 bytes of PCI config space to non-root readers "
    "(drivers/pci/pci-sysfs.c); ACS is in the extended space"
)

ACS_BITS: tuple[tuple[str, int, str], ...] = (
    ("src_valid", 0x01, "SrcValid"),
    ("trans_blk", 0x02, "TransBlk"),
    ("req_redir", 0x04, "ReqRedir"),
    ("cmplt_redir", 0x08, "CmpltRedir"),
    ("upstream_fwd", 0x10, "UpstreamFwd"),
    ("egress_ctrl", 0x20, "EgressCtrl"),
    ("direct_trans", 0x40, "DirectTrans"),
)
"""(key, bit, lspci name) of the ACS capability and control registers."""

REDIRECT_KEYS = ("req_redir", "cmplt_redir")
"""Control bits that route peer-to-peer traffic through the root complex."""

_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def sysfs_bdf(bus_id: str) -> str | None:
    """NVML's ``00000000:00:06.0`` (or lspci's ``00:06.0``) -> sysfs's ``0000:00:06.0``; None if not a bus id."""
    m = re.fullmatch(
        r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", bus_id.strip()
    )
    if not m:
        return None
    dom = int(m.group(1) or "0", 16)
    return f"{dom:04x}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"


def decode_acs(value: int) -> dict[str, bool]:
    """ACS register bits -> ``{"src_valid": True, "trans_blk": False, ...}``."""
    return {key: bool(value & bit) for key, bit, _ in ACS_BITS}


def acs_text(flags: dict[str, bool]) -> str:
    """``SrcValid+ TransBlk- ReqRedir+ ...`` as lspci prints it."""
    return " ".join(f"{name}{'+' if flags.get(key) else '-'}" for key, _, name in ACS_BITS)


def find_ext_capability(config: bytes, cap_id: int) -> int | None:
    """Offset of extended capability ``cap_id`` in a config-space dump, or None.

    Walks the list from 0x100: each header is 32 bits little-endian, the ID in
    bits 0-15 and the next offset in bits 20-31 (PCIe spec 7.6.3).
    """
    offset, seen = EXT_CAP_START, set()
    while EXT_CAP_START <= offset <= len(config) - 4 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(config[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == cap_id:
            return offset
        offset = (header >> 20) & 0xFFC
    return None


def acs_from_config(config: bytes) -> dict[str, Any]:
    """The ACS capability and control registers of one config-space dump.

    Returns:
        ``{"offset", "capability": {...}, "control": "0x001d", "control_flags": {...},
        "redirect": bool}``; a missing value ``no_permission`` when the dump
        stops at 64 bytes (a non-root reader), ``not_supported`` when the
        device has no ACS capability (nothing to redirect).
    """
    if len(config) <= UNPRIVILEGED_CONFIG_BYTES:
        return missing(MissingReason.NO_PERMISSION, NEEDS_ROOT)
    off = find_ext_capability(config, ACS_CAP_ID)
    if off is None or off + 8 > len(config):
        return missing(
            MissingReason.NOT_SUPPORTED, "no ACS capability (no redirection possible at this port)"
        )
    cap = int.from_bytes(config[off + 4 : off + 6], "little")
    ctl = int.from_bytes(config[off + 6 : off + 8], "little")
    flags = decode_acs(ctl)
    return {
        "offset": f"{off:#x}",
        "capability": decode_acs(cap),
        "control": f"{ctl:#06x}",
        "control_flags": flags,
        "redirect": any(flags[k] for k in REDIRECT_KEYS),
    }


def _read_bytes(path: str) -> bytes | dict[str, str]:
    try:
        with open(path, "rb") as fh:
            return fh.read(4096)
    except FileNotFoundError:
        return missing(MissingReason.NOT_FOUND, path)
    except PermissionError:
        return missing(MissingReason.NO_PERMISSION, path)
    except OSError as exc:
        return missing(MissingReason.ERROR, f"{path}: {exc.strerror}")


def _read_line(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.readline().strip()
    except OSError:
        return None


def numa_node(device_dir: str) -> Any:
    """``numa_node`` of a PCI device folder: an int >= 0, or a missing value (-1 = the firmware gives none)."""
    raw = _read_line(os.path.join(device_dir, "numa_node"))
    if raw is None:
        return missing(MissingReason.NOT_FOUND, f"{device_dir}/numa_node")
    try:
        node = int(raw)
    except ValueError:
        return missing(MissingReason.ERROR, f"numa_node reads {raw!r}")
    if node < 0:
        return missing(
            MissingReason.NOT_SUPPORTED,
            "numa_node is -1: the firmware reports no NUMA node for this "
            "device (common in VMs and on one-socket hosts)",
        )
    return node


def device_topology(bus_id: str, root: str = SYS) -> dict[str, Any]:
    """What sysfs says about one PCI device (a GPU) and the bridges above it.

    Args:
        bus_id: NVML's or lspci's bus id (``00000000:18:00.0``).
        root: the sysfs mount (tests pass a folder tree).

    Returns:
        ``{"bdf", "sysfs_path", "numa_node", "local_cpulist", "iommu_group",
        "iommu_type", "bridges": [{"bdf", "acs"}, ...]}`` (bridges nearest the
        GPU first; ``acs`` from :func:`acs_from_config`), or one missing value
        when the device is not in sysfs (no sysfs in this container, another
        machine's bus id).
    """
    bdf = sysfs_bdf(bus_id) if isinstance(bus_id, str) else None
    if bdf is None:
        return missing(MissingReason.ERROR, f"not a PCI bus id: {bus_id!r}")
    link = os.path.join(root, "bus", "pci", "devices", bdf)
    if not os.path.exists(link):
        return missing(
            MissingReason.NOT_FOUND, f"{link} absent (no sysfs here, e.g. a container without /sys)"
        )
    real = os.path.realpath(link)
    parts = real.split(os.sep)
    above = [p for p in parts[:-1] if _BDF.match(p)]
    bridges = []
    for name in reversed(above):
        folder = os.sep.join(parts[: parts.index(name) + 1]) if name in parts else ""
        cfg = _read_bytes(os.path.join(folder, "config"))
        bridges.append({"bdf": name, "acs": cfg if isinstance(cfg, dict) else acs_from_config(cfg)})
    cpulist = _read_line(os.path.join(real, "local_cpulist"))
    group_link = os.path.join(real, "iommu_group")
    if os.path.islink(group_link):
        group = os.path.basename(os.path.realpath(group_link))
        gtype = _read_line(os.path.join(os.path.realpath(group_link), "type"))
        iommu_type: Any = (
            gtype
            if gtype
            else missing(
                MissingReason.NOT_FOUND, "iommu_groups/<N>/type absent (kernel older than 5.11)"
            )
        )
    else:
        group = missing(
            MissingReason.NOT_APPLICABLE, "no iommu_group link: no IOMMU translates this device"
        )
        iommu_type = group
    return {
        "bdf": bdf,
        "sysfs_path": real,
        "numa_node": numa_node(real),
        "local_cpulist": cpulist
        if cpulist is not None
        else missing(MissingReason.NOT_FOUND, "local_cpulist"),
        "iommu_group": group,
        "iommu_type": iommu_type,
        "bridges": bridges,
    }


def iommu_state(root: str = SYS) -> dict[str, Any]:
    """The host's IOMMU units and groups.

    Returns:
        ``{"units": ["dmar0", ...], "groups": int, "group_types": {"DMA": 12, ...}}``;
        ``units`` is a missing value when ``/sys/class`` itself is absent (no sysfs).
        An empty ``/sys/class/iommu`` and no groups mean no IOMMU translates PCI devices.
    """
    cls = os.path.join(root, "class")
    if not os.path.isdir(cls):
        return {
            "units": missing(MissingReason.NOT_FOUND, f"{cls} absent (no sysfs)"),
            "groups": 0,
            "group_types": {},
        }
    try:
        units = sorted(os.listdir(os.path.join(cls, "iommu")))
    except OSError:
        units = []
    gdir = os.path.join(root, "kernel", "iommu_groups")
    try:
        groups = [g for g in os.listdir(gdir) if g.isdigit()]
    except OSError:
        groups = []
    types: dict[str, int] = {}
    for g in groups:
        t = _read_line(os.path.join(gdir, g, "type"))
        if t:
            types[t] = types.get(t, 0) + 1
    return {"units": units, "groups": len(groups), "group_types": dict(sorted(types.items()))}


CMDLINE_KEYS = (
    "iommu",
    "intel_iommu",
    "amd_iommu",
    "iommu.passthrough",
    "iommu.strict",
    "pci",
    "pcie_acs_override",
    "disable_acs_redir",
    "config_acs",
    "isolcpus",
    "nohz_full",
    "numa_balancing",
    "default_hugepagesz",
    "hugepagesz",
    "hugepages",
    "transparent_hugepage",
)
"""Kernel parameters kept apart from the raw command line (IOMMU, ACS, PCI, CPU isolation, huge pages)."""


def parse_cmdline(text: str) -> dict[str, str]:
    """The :data:`CMDLINE_KEYS` parameters of a kernel command line.

    Tokens are split on spaces and on the first ``=`` only (``crashkernel=2G-4G:320M,...``);
    a later duplicate wins, as the kernel parses left to right; ``--`` ends the
    kernel's part (what follows goes to init). A bare flag maps to ``""``.
    """
    out: dict[str, str] = {}
    for tok in text.split():
        if tok == "--":
            break
        name, _, value = tok.partition("=")
        if name in CMDLINE_KEYS:
            out[name] = value
    return out


def iommu_mode(params: dict[str, str], state: dict[str, Any], gpu_types: list[Any]) -> str:
    """``translated``, ``passthrough``, ``off`` or ``unknown``: how DMA from the GPUs reaches memory.

    Order: the GPUs' own group type (``DMA``/``DMA-FQ`` translated, ``identity``
    passthrough); no IOMMU unit and no group: ``off``; groups without a type
    file: ``iommu=pt`` / ``iommu.passthrough=1`` on the command line means
    passthrough, else unknown (kernels may default either way: CONFIG_IOMMU_DEFAULT_PASSTHROUGH).
    """
    kinds = {t for t in gpu_types if isinstance(t, str)}
    if kinds & {"DMA", "DMA-FQ"}:
        return "translated"
    if "identity" in kinds:
        return "passthrough"
    units = state.get("units")
    if isinstance(units, list) and not units and not state.get("groups"):
        return "off"
    if params.get("iommu") == "pt" or params.get("iommu.passthrough") in ("1", "on", "y"):
        return "passthrough"
    if (
        params.get("iommu") == "off"
        or params.get("intel_iommu") == "off"
        or params.get("amd_iommu") == "off"
    ):
        return "off"
    return "unknown"


_LSPCI_DEV = re.compile(r"^(?P<bdf>(?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) (?P<desc>.*)$")
_LSPCI_ACS = re.compile(r"^\s*(?P<reg>ACSCap|ACSCtl):\s*(?P<flags>.*)$")
_FLAG = re.compile(r"(?P<name>[A-Za-z]+)(?P<sign>[+-])")


def parse_lspci_acs(text: str) -> dict[str, dict[str, Any]]:
    """ACS registers from ``lspci -vvv`` text (or ``lspci -vvv | grep ACS`` lines).

    Args:
        text: lspci output; device lines start with the bus id (``03:00.0 PCI bridge: ...``);
            ``ACSCap:``/``ACSCtl:`` lines hold ``Name+``/``Name-`` flags (spaces or tabs).

    Returns:
        ``{bdf or "#N": {"capability": flags, "control": "0x001d", "control_flags": flags,
        "redirect": bool}}`` per device that has an ``ACSCtl`` line; lines without a
        device header (grep output) are keyed ``#0``, ``#1``... in order.
    """
    out: dict[str, dict[str, Any]] = {}
    current = None
    cap: dict[str, bool] | None = None
    anon = 0
    names = {name: key for key, _, name in ACS_BITS}
    for line in text.splitlines():
        dev = _LSPCI_DEV.match(line)
        if dev:
            current, cap = dev["bdf"], None
            continue
        m = _LSPCI_ACS.match(line)
        if not m:
            continue
        flags = {
            names[f["name"]]: f["sign"] == "+"
            for f in _FLAG.finditer(m["flags"])
            if f["name"] in names
        }
        if m["reg"] == "ACSCap":
            cap = flags
            continue
        value = sum(bit for key, bit, _ in ACS_BITS if flags.get(key))
        key = current if current and current not in out else f"#{anon}"
        if key.startswith("#"):
            anon += 1
        out[key] = {
            "capability": cap or {},
            "control": f"{value:#06x}",
            "control_flags": decode_acs(value),
            "redirect": any(flags.get(k) for k in REDIRECT_KEYS),
        }
        cap = None
    return out
