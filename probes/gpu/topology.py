"""The GPU topology matrix that ``nvidia-smi topo -m`` prints, answered by NVML where NVML can.

``nvidia-smi`` is an NVML client: the matrix it prints comes from NVML calls that this process can
make itself, in well under a millisecond each once NVML is started, instead of a second process that
starts NVML again (tens of milliseconds of every snapshot, docs/benchmarks.md). :func:`from_nvml` builds the same
``{row: {column: cell}}`` matrix as :func:`forensics_probes.gpu.probe.parse_topo` reads from
``nvidia-smi topo -m``, for the cases it can answer, from:

- GPU to GPU: ``NV<n>`` where GPU i has n active NVLinks (``nvmlDeviceGetNvLinkState``, read by the
  probe) whose far end is GPU j (``nvmlDeviceGetNvLinkRemotePciInfo``, ``nvmlDeviceGetNvLinkRemoteDeviceType``),
  else the PCIe path from ``nvmlDeviceGetTopologyCommonAncestor``: ``PIX`` (one bridge), ``PXB``
  (several bridges), ``PHB`` (a host bridge), ``NODE`` (host bridges of one NUMA node), ``SYS``
  (across NUMA nodes); ``X`` on the diagonal;
- ``CPU Affinity``: ``nvmlDeviceGetCpuAffinity`` (the CPUs of the GPU's NUMA node), as CPU ranges;
- ``NUMA Affinity``: ``nvmlDeviceGetMemoryAffinity`` (scope node), as node ranges;
- ``GPU NUMA ID``: ``nvmlDeviceGetNumaNodeId`` (a GPU that is a NUMA node of its own); ``N/A`` where
  NVML answers NotSupported, as nvidia-smi prints it.

What it leaves to ``nvidia-smi topo -m`` (:func:`from_nvml` returns the reason, one line): network
cards (``/sys/class/infiniband`` lists any: nvidia-smi adds them as ``NIC`` rows and columns); NVLinks
that end in an NVSwitch or another kind of device (nvidia-smi's count across a switch is not derived
here); GPUs on one board (``NVML_TOPOLOGY_INTERNAL``); MIG mode; an empty CPU or memory affinity
mask, or a memory affinity of several NUMA nodes (how nvidia-smi spells those is not derived here); and
any call that fails or is missing from this driver or nvidia-ml-py. Pure apart from NVML and that one folder listing.
"""

from __future__ import annotations

import os
from typing import Any

from forensics.gpu.nvml import Nvml
from forensics.model import is_missing

SOURCE = "NVML: common ancestor, NVLink far ends, CPU and memory affinity, NUMA node id"
"""The ``topology.command`` of a matrix built here (``nvidia-smi topo -m`` otherwise)."""

INFINIBAND = "/sys/class/infiniband"
_LEVELS = {10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}  # nvmlGpuTopologyLevel_t
LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def _bus(value: Any) -> str:
    """A PCI bus id in one spelling: ``0000:00:06.0`` (NVML writes an 8-digit domain)."""
    text = value.decode() if isinstance(value, bytes) else str(value)
    return text.strip().lower()[-12:]


def ranges(mask_words: Any) -> str:
    """``"0-15,32-47"`` for the bits set in a mask of 64-bit words (lowest word first); ``"N/A"`` if none."""
    bits = [
        w * 64 + b for w, word in enumerate(mask_words) for b in range(64) if int(word) >> b & 1
    ]
    if not bits:
        return "N/A"
    out, start = [], bits[0]
    for prev, cur in zip(bits, bits[1:] + [None]):
        if cur != prev + 1:
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = cur
    return ",".join(out)


def nics_present(folder: str = INFINIBAND) -> bool:
    """True when ``folder`` lists a network card (nvidia-smi then shows NIC rows NVML cannot give)."""
    try:
        return bool(os.listdir(folder))
    except OSError:
        return False


def from_nvml(
    nv: Nvml, devices: list[tuple[int, Any, str]], nic_folder: str = INFINIBAND
) -> dict[str, Any] | str:
    """The ``topology`` value (``matrix``, ``raw`` in nvidia-smi's layout, ``command``), or why NVML cannot say.

    Cheap enough to run before the probe reads the GPUs (a few dozen NVML calls per GPU, each well
    under a millisecond), so that the probe can start ``nvidia-smi topo -m`` at once when NVML cannot
    give the matrix, and run it alongside its reads as before.

    Args:
        nv: the probe's NVML wrapper (started).
        devices: ``[(index, handle, uuid)]`` from :meth:`forensics.gpu.nvml.Nvml.devices`.
        nic_folder: where network cards are listed (tests pass a folder of their own).

    Returns:
        ``{"matrix": {"GPU0": {"GPU0": "X", "GPU1": "NV18", "CPU Affinity": "0-31", "NUMA Affinity": "0",
        "GPU NUMA ID": "N/A"}}, "raw": text, "command": SOURCE}``, or a one-line reason (str) to ask
        ``nvidia-smi topo -m`` instead.
    """
    if nics_present(nic_folder):
        return f"network cards in {nic_folder}: nvidia-smi lists them"
    if any(h is None for _, h, _ in devices):
        return "a GPU without an NVML handle"
    buses, active = {}, {}
    for i, (index, handle, _) in enumerate(devices):
        with nv.lane(index):  # on the GPU's own NVML worker, as its readings
            got = _links_and_bus(nv, i, handle)
        if isinstance(got, str):
            return got
        buses[got[0]], active[i] = i, got[1]
    words = max(1, -(-(os.cpu_count() or 1) // 64))
    links: dict[tuple[int, int], int] = {}
    rows: dict[str, dict[str, str]] = {}
    for i, (index, handle, _) in enumerate(devices):
        with nv.lane(index):
            row = _row(nv, i, handle, devices, active[i], buses, links, words)
        if isinstance(row, str):
            return row
        rows[f"GPU{i}"] = row
    for (
        i,
        j,
    ), n in links.items():  # a link counted from one end only would make the matrix lopsided
        if links.get((j, i), n) != n:
            return f"GPU{i}-GPU{j}: {n} NVLinks one way, {links[(j, i)]} the other"
    return {"matrix": rows, "raw": render(rows), "command": SOURCE}


def _links_and_bus(nv: Nvml, i: int, handle: Any) -> tuple[str, list[int]] | str:
    """GPU ``i``'s PCI bus id and active NVLinks (``nvmlDeviceGetPciInfo``, ``nvmlDeviceGetMigMode``,
    ``nvmlDeviceGetNvLinkState``), or why NVML cannot give its row."""
    pci = nv.call("nvmlDeviceGetPciInfo", handle)
    if is_missing(pci) or not getattr(pci, "busId", None):
        return f"GPU{i}: no PCI bus id"
    mig = nv.call("nvmlDeviceGetMigMode", handle)
    if not is_missing(mig) and mig[0]:
        return f"GPU{i}: MIG mode"
    active = []
    for link in range(int(nv.constant("NVML_NVLINK_MAX_LINKS", 18))):
        state = nv.call("nvmlDeviceGetNvLinkState", handle, link)
        if is_missing(state):
            if state["missing"] in ("gpu_lost", "timed_out", "not_found"):
                return f"GPU{i}: NVLink state {state['missing']}"
            continue  # an unused link index, or no NVLink at all
        if state:
            active.append(link)
    return _bus(pci.busId), active


def _row(
    nv: Nvml, i: int, handle: Any, devices, active: list[int], buses, links, words
) -> dict[str, str] | str:
    """GPU ``i``'s row of the matrix (its NVLinks counted into ``links``), or why NVML cannot give it."""
    for link in active:
        kind = nv.call("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        far = nv.call("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
        if is_missing(kind) or is_missing(far):
            return f"GPU{i} NVLink {link}: far end not read ({(kind if is_missing(kind) else far)['missing']})"
        j = buses.get(_bus(getattr(far, "busId", "")))
        if kind != nv.constant("NVML_NVLINK_DEVICE_TYPE_GPU", 0) or j is None:
            return f"GPU{i} NVLink {link} ends in an NVSwitch or another device"
        links[(i, j)] = links.get((i, j), 0) + 1
    row: dict[str, str] = {}
    for j, (_, other, _) in enumerate(devices):
        if i == j:
            row[f"GPU{j}"] = "X"
        elif links.get((i, j)) or links.get((j, i)):
            row[f"GPU{j}"] = f"NV{links.get((i, j)) or links.get((j, i))}"
        else:
            level = nv.call("nvmlDeviceGetTopologyCommonAncestor", handle, other)
            if is_missing(level) or int(level) not in _LEVELS:
                return f"GPU{i}-GPU{j}: PCIe path not given ({level['missing'] if is_missing(level) else level})"
            row[f"GPU{j}"] = _LEVELS[int(level)]
    cpus = nv.call("nvmlDeviceGetCpuAffinity", handle, words)
    nodes = nv.call(
        "nvmlDeviceGetMemoryAffinity", handle, 1, nv.constant("NVML_AFFINITY_SCOPE_NODE", 0)
    )
    numa = nv.call("nvmlDeviceGetNumaNodeId", handle)
    for name, value in (("nvmlDeviceGetCpuAffinity", cpus), ("nvmlDeviceGetMemoryAffinity", nodes)):
        if is_missing(value):
            return f"GPU{i}: {name} {value['missing']}"
        if (
            ranges(list(value)) == "N/A"
        ):  # what nvidia-smi prints for an empty mask is not derived here
            return f"GPU{i}: {name} gave an empty mask"
    if "," in ranges(list(nodes)) or "-" in ranges(
        list(nodes)
    ):  # nvidia-smi's spelling of several nodes: not derived
        return f"GPU{i}: memory affinity spans several NUMA nodes"
    if is_missing(numa) and numa["missing"] != "not_supported":
        return f"GPU{i}: nvmlDeviceGetNumaNodeId {numa['missing']}"
    row["CPU Affinity"] = ranges(list(cpus))
    row["NUMA Affinity"] = ranges(list(nodes))
    row["GPU NUMA ID"] = "N/A" if is_missing(numa) else str(numa)
    return row


def render(matrix: dict[str, dict[str, str]]) -> str:
    """The matrix as ``nvidia-smi topo -m`` prints it, ANSI codes aside: tab-separated, the diagonal
    `` X ``, an empty cell before ``GPU NUMA ID``, then its legend (driver 580's text, byte for byte on
    the H200 machines); :func:`parse_topo` reads it back to the same matrix."""
    columns = list(next(iter(matrix.values()), {}))
    lines = ["\t" + "\t".join(columns)]
    for name, row in matrix.items():
        cells = [" X " if row.get(c) == "X" else row.get(c, "") for c in columns]
        if "GPU NUMA ID" in columns:
            cells.insert(columns.index("GPU NUMA ID"), "")
        lines.append(f"{name}\t" + "\t".join(cells))
    return "\n".join(lines) + "\n" + LEGEND
