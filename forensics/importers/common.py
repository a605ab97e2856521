"""Shared pieces of the importers: the parsed :class:`Part`, value parsers, the topology matrix.

A parser reads one part of a pasted text (see :mod:`forensics.importers.detect`) and
returns a :class:`Part` whose ``facts`` hold, per probe section (``software``,
``libs``, ``gpu``, ``host``), only what the text states, in the probes' data shapes
(docs/snapshot-format.md, docs/gpu-probe.md). :mod:`forensics.importers.assemble`
turns parts into a snapshot and marks everything else ``not_recorded``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from forensics.model import MissingReason, is_missing, missing
from forensics.readers import normalise  # noqa: F401  (re-exported to the importers)
from forensics.snapshot import FORMAT_LABELS  # noqa: F401  (one table, in the core: readers of snapshots name the parts)

TOOLS = {
    "collect-env": "python -m torch.utils.collect_env",
    "vllm": "vllm collect-env (vllm/collect_env.py)",
    "sglang": "python -m sglang.check_env",
    "nvidia-smi": "nvidia-smi",
    "nvidia-smi-q": "nvidia-smi -q",
    "nvidia-smi-xml": "nvidia-smi -q -x",
    "pip": "pip list / pip freeze",
}


@dataclass
class Part:
    """One environment report found in a text.

    Attributes:
        format: a key of :data:`FORMAT_LABELS`.
        first_line, last_line: 1-based line numbers in the cleaned text.
        facts: ``{probe: data}`` holding only values the text states.
        tool_version: the tool's version when the text names it (vLLM 0.8.5, NVIDIA-SMI 470.57.02,
            the XML's DTD), else ``None``.
        partial_lists: ``{probe.field: why partial}`` for lists the tool prints only in part
            (collect_env lists only "relevant" libraries).
        notes: things a reader should know (a value cut off, a conflicting line).
        file: the file the part was read from, as given.
        fragment: the text holds only sections of the report, not its beginning (a count of GPUs
            the report would give is then not claimed from the GPUs the fragment shows).
    """

    format: str
    first_line: int = 0
    last_line: int = 0
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    tool_version: str | None = None
    partial_lists: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    file: str = ""
    fragment: bool = False

    @property
    def label(self) -> str:
        return FORMAT_LABELS.get(self.format, self.format)

    def section(self, probe: str) -> dict[str, Any]:
        """The facts dict of ``probe`` (created empty on first use)."""
        return self.facts.setdefault(probe, {})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": self.format,
            "tool": TOOLS.get(self.format, self.format),
            "file": self.file,
            "lines": [self.first_line, self.last_line],
        }
        if self.tool_version:
            out["tool_version"] = self.tool_version
        if self.notes:
            out["notes"] = list(self.notes)
        if self.fragment:
            out["fragment"] = True
        return out


def not_recorded(label: str, what: str = "") -> dict[str, str]:
    """The missing value of a field the text does not hold: ``not in collect_env output``."""
    return missing(MissingReason.NOT_RECORDED, f"{what + ' ' if what else ''}not in {label} output")


_NA = {
    "n/a",
    "na",
    "none",
    "",
    "could not collect",
    "no cuda",
    "not supported",
    "[not supported]",
    "unknown error",
    "[unknown error]",
    "requested functionality has been deprecated",
}


def is_na(text: str | None) -> bool:
    """True for the words tools print instead of a value (N/A, Could not collect, No CUDA...)."""
    return text is None or text.strip().strip("[]").lower() in _NA or text.strip().lower() in _NA


def na_value(text: str, source: str) -> dict[str, str]:
    """The missing value for an ``N/A`` the tool printed: NVML said the device does not support it."""
    t = text.strip()
    if t.lower() == "could not collect":
        return missing(MissingReason.NOT_FOUND, f"{source}: Could not collect")
    if t.lower() in ("no cuda",):
        return missing(MissingReason.NOT_FOUND, f"{source}: No CUDA")
    return missing(MissingReason.NOT_SUPPORTED, f"{source}: {t or 'empty'}")


_NUM = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z%/.]*)\s*$")
_SCALE = {"mib": 2**20, "gib": 2**30, "kib": 2**10, "b": 1, "mb": 10**6, "gb": 10**9}


def number(text: str | None) -> float | None:
    """The number at the start of ``text`` ("64W" -> 64.0, "16x" -> 16.0), or ``None``."""
    if text is None:
        return None
    m = re.match(r"^\s*(-?\d+(?:\.\d+)?)", text)
    return float(m.group(1)) if m else None


def as_int(x: float | None) -> int | None:
    return None if x is None else int(round(x))


def bytes_of(text: str | None) -> int | None:
    """ "143771 MiB" -> bytes; ``None`` when not a size."""
    if text is None:
        return None
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]i?B|B)\s*$", text.strip(), re.I)
    if not m:
        return None
    return int(float(m.group(1)) * _SCALE[m.group(2).lower()])


def mw_of(text: str | None) -> int | None:
    """ "700.00 W" / "64W" -> milliwatts; ``None`` when not a power."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*W\s*$", text or "", re.I)
    return int(round(float(m.group(1)) * 1000)) if m else None


def mhz_of(text: str | None) -> int | None:
    m = re.match(r"^\s*(\d+)\s*MHz\s*$", text or "", re.I)
    return int(m.group(1)) if m else None


def pstate_of(text: str | None) -> int | None:
    m = re.match(r"^\s*P(\d+)\s*$", text or "")
    return int(m.group(1)) if m else None


def enabled_of(text: str | None) -> str | None:
    """ "Enabled"/"On" -> "enabled", "Disabled"/"Off" -> "disabled", else ``None``."""
    t = (text or "").strip().lower()
    return {"enabled": "enabled", "on": "enabled", "disabled": "disabled", "off": "disabled"}.get(t)


COMPUTE_MODES = {
    "default": "default",
    "exclusive_thread": "exclusive_thread",
    "prohibited": "prohibited",
    "exclusive_process": "exclusive_process",
    "e. process": "exclusive_process",
    "e. thread": "exclusive_thread",
}


def version_tuple(version: str) -> str:
    """ "12.1.105" -> "12.1" (major.minor, the libs probe's CUDA runtime form)."""
    parts = version.split(".")
    return ".".join(parts[:2])


def local_tag(version: str) -> str | None:
    """The local version tag: "2.5.1+cu121" -> "cu121"; ``None`` without one."""
    _, plus, local = version.partition("+")
    return local if plus and local else None


def set_if(d: dict[str, Any], key: str, value: Any) -> None:
    """``d[key] = value`` unless ``value`` is ``None``."""
    if value is not None:
        d[key] = value


def merge_into(dst: dict[str, Any], src: dict[str, Any], path: str, conflicts: list[str]) -> None:
    """Deep-merge ``src`` into ``dst``: a real value replaces a missing one; two different real
    values keep the first and add a line to ``conflicts``."""
    for k, v in src.items():
        where = f"{path}.{k}" if path else k
        if k not in dst:
            dst[k] = v
            continue
        old = dst[k]
        if (
            isinstance(old, dict)
            and isinstance(v, dict)
            and not is_missing(old)
            and not is_missing(v)
        ):
            merge_into(old, v, where, conflicts)
        elif is_missing(old) and not is_missing(v):
            dst[k] = v
        elif not is_missing(old) and not is_missing(v) and old != v:
            conflicts.append(f"{where}: {old!r} kept, another part says {v!r}")


def parse_topology(lines: list[str]) -> dict[str, dict[str, str]] | None:
    """``nvidia-smi topo -m`` matrix as printed inside collect_env / check_env.

    The GPU and NIC columns are read in order (a link cell is never empty). The
    trailing columns (CPU Affinity, NUMA Affinity, GPU NUMA ID) are kept only when
    the row has one value for each: nvidia-smi separates cells by single tabs,
    so an empty cell cannot be placed once a paste turned tabs into spaces.
    Returns ``{"GPU0": {"GPU1": "NV12", "CPU Affinity": "0-31", ...}}`` with the
    GPU rows only, or ``None`` without a header line.
    """
    rows = [ln.expandtabs(8).rstrip() for ln in lines]
    header_i = next((i for i, ln in enumerate(rows) if re.match(r"^\s+GPU0(\s|$)", ln)), None)
    if header_i is None:
        return None
    cols = re.split(r"\s{2,}", rows[header_i].strip())
    links = [c for c in cols if re.match(r"^(GPU|NIC|mlx|CPU\d)\w*$", c) and " " not in c]
    trailing = cols[len(links) :]
    out: dict[str, dict[str, str]] = {}
    for ln in rows[header_i + 1 :]:
        if not ln.strip() or ln.strip().startswith("Legend"):
            break
        cells = ln.split()
        label = cells[0]
        if not re.match(r"^GPU\d+$", label):
            continue
        values = cells[1:]
        row = dict(zip(links, values[: len(links)]))
        rest = values[len(links) :]
        if len(rest) == len(trailing):
            row.update(zip(trailing, rest))
        out[label] = row
    return out or None
