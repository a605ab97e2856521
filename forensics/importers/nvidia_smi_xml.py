"""``nvidia-smi -q -x``: the XML log, any DTD version (``nvsmi_device_v6.dtd`` ... ``v13``).

Parsed with the standard library's expat (:mod:`xml.parsers.expat`), never
fetching anything and refusing what nvidia-smi never writes:

- any entity declaration (``<!ENTITY``): the "billion laughs" and external-entity
  attacks both need one; the document is refused with one line, before expansion;
- parameter entities and external DTD loading are off
  (``SetParamEntityParsing(XML_PARAM_ENTITY_PARSING_NEVER)``; nvidia-smi's
  ``<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">`` is only a name);
- documents over :data:`MAX_BYTES`.

A paste cut off mid-document keeps every element read so far (expat reports the
error at the end; the tree built until then stands), and the part notes the cut.

Element names across DTD versions: ``clocks_throttle_reasons`` /
``clocks_throttle_reason_*`` (v6-v11) and ``clocks_event_reasons`` /
``clocks_event_reason_*`` (v12+); ``power_readings`` with ``power_draw``,
``power_limit``, ``enforced_power_limit`` (before v12) and ``gpu_power_readings``
with ``average_power_draw``, ``requested_power_limit``, ``current_power_limit``
(v12+); ``pci_bus_id`` and ``gpu id=...`` for the bus id.
"""

from __future__ import annotations

import re
from typing import Any
from xml.parsers import expat

from forensics.errors import BadInputError
from forensics.gpu.readings import PSTATE
from forensics.importers.common import Part, is_na
from forensics.importers.gpu_record import to_probe

MAX_BYTES = 16 * 2**20
"""Largest XML document read (an 8-GPU -q -x log is about 0.5 MB)."""


class Element:
    """A parsed XML element: ``tag``, ``attrib``, ``text`` (stripped) and ``children``."""

    __slots__ = ("tag", "attrib", "children", "_text")

    def __init__(self, tag: str, attrib: dict[str, str]):
        self.tag, self.attrib, self.children, self._text = tag, attrib, [], []

    @property
    def text(self) -> str:
        return "".join(self._text).strip()

    def find(self, *path: str) -> "Element | None":
        """The first descendant along ``path`` (child tag names), or ``None``."""
        node: Element | None = self
        for tag in path:
            node = (
                next((c for c in node.children if c.tag == tag), None) if node is not None else None
            )
        return node

    def findall(self, tag: str) -> list["Element"]:
        return [c for c in self.children if c.tag == tag]


def parse_xml(text: str, name: str) -> tuple[Element | None, str | None]:
    """Build the element tree of ``text``; returns ``(root, problem)``.

    ``problem`` is ``None`` for a complete document, else expat's message (a cut-off paste).

    Raises:
        BadInputError: an entity declaration (refused before any expansion), or a document
            larger than :data:`MAX_BYTES`.
    """
    if len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise BadInputError(
            f"{name}: the XML is larger than {MAX_BYTES // 2**20} MiB; no nvidia-smi log is"
        )
    p = expat.ParserCreate()
    p.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    root: list[Element] = []
    stack: list[Element] = []

    def refuse(*_args):
        raise BadInputError(
            f"{name}: the XML declares entities (<!ENTITY>), which nvidia-smi never writes; refused "
            "(entity expansion is how 'billion laughs' and external-entity attacks work)"
        )

    def start(tag, attrib):
        el = Element(tag, dict(attrib))
        if stack:
            stack[-1].children.append(el)
        elif not root:
            root.append(el)
        stack.append(el)

    def end(tag):
        if stack:
            stack.pop()

    def chars(data):
        if stack:
            stack[-1]._text.append(data)

    p.EntityDeclHandler = refuse
    p.UnparsedEntityDeclHandler = refuse
    p.ExternalEntityRefHandler = lambda *a: refuse()
    p.StartElementHandler, p.EndElementHandler, p.CharacterDataHandler = start, end, chars
    problem = None
    try:
        p.Parse(text, True)
    except expat.ExpatError as exc:
        problem = expat.ErrorString(exc.code) + f" at line {exc.lineno}"
    return (root[0] if root else None), problem


def _t(el: Element | None, *path: str) -> str | None:
    node = el.find(*path) if el is not None else None
    return node.text if node is not None else None


def _first(el: Element, *paths: tuple[str, ...]) -> str | None:
    for path in paths:
        v = _t(el, *path)
        if v is not None:
            return v
    return None


def _raw(g: Element) -> dict[str, Any]:
    raw: dict[str, Any] = {}

    def put(key, *paths):
        v = _first(g, *paths)
        if v is not None:
            raw[key] = v

    put("name", ("product_name",))
    put("architecture", ("product_architecture",))
    put("uuid", ("uuid",))
    put("serial", ("serial",))
    put("vbios", ("vbios_version",))
    put("board_part", ("board_part_number",))
    put("bus_id", ("pci", "pci_bus_id"))
    put("persistence", ("persistence_mode",))
    put("compute_mode", ("compute_mode",))
    put("mig_current", ("mig_mode", "current_mig"))
    put("mig_pending", ("mig_mode", "pending_mig"))
    put(PSTATE, ("performance_state",))
    put("fb_total", ("fb_memory_usage", "total"))
    put("fb_used", ("fb_memory_usage", "used"))
    put("util_gpu", ("utilization", "gpu_util"))
    put("util_mem", ("utilization", "memory_util"))
    link = ("pci", "pci_gpu_link_info")
    put("pcie_gen_max", link + ("pcie_gen", "max_link_gen"))
    put("pcie_gen_current", link + ("pcie_gen", "current_link_gen"))
    put("pcie_gen_device_max", link + ("pcie_gen", "max_device_link_gen"))
    put("pcie_width_max", link + ("link_widths", "max_link_width"))
    put("pcie_width_current", link + ("link_widths", "current_link_width"))
    put("replay", ("pci", "replay_counter"))
    old, new = ("power_readings",), ("gpu_power_readings",)
    put("power_draw", old + ("power_draw",))
    put("power_draw_avg", new + ("average_power_draw",), new + ("power_draw",))
    put("power_limit", new + ("requested_power_limit",), old + ("power_limit",))
    put("enforced_limit", new + ("current_power_limit",), old + ("enforced_power_limit",))
    put("default_limit", new + ("default_power_limit",), old + ("default_power_limit",))
    put("min_limit", new + ("min_power_limit",), old + ("min_power_limit",))
    put("max_limit", new + ("max_power_limit",), old + ("max_power_limit",))
    put("temp_gpu", ("temperature", "gpu_temp"))
    put("temp_slowdown", ("temperature", "gpu_temp_slow_threshold"))
    put("temp_shutdown", ("temperature", "gpu_temp_max_threshold"))
    put("temp_max_gpu", ("temperature", "gpu_temp_max_gpu_threshold"))
    put("temp_mem_max", ("temperature", "gpu_temp_max_mem_threshold"))
    put("ecc_current", ("ecc_mode", "current_ecc"))
    put("ecc_pending", ("ecc_mode", "pending_ecc"))
    rr = g.find("remapped_rows")
    if rr is not None:
        if not rr.children:
            raw["remapped_rows"] = rr.text
        put("remap_corr", ("remapped_rows", "remapped_row_corr"))
        put("remap_unc", ("remapped_rows", "remapped_row_unc"))
        put("remap_pending", ("remapped_rows", "remapped_row_pending"))
        put("remap_failure", ("remapped_rows", "remapped_row_failure"))
    put("retired_sbe", ("retired_pages", "multiple_single_bit_retirement", "retired_count"))
    put("retired_dbe", ("retired_pages", "double_bit_retirement", "retired_count"))
    put(
        "retired_pending",
        ("retired_pages", "pending_retirement"),
        ("retired_pages", "pending_blacklist"),
    )
    for k, tag in (
        ("graphics", "graphics_clock"),
        ("sm", "sm_clock"),
        ("mem", "mem_clock"),
        ("video", "video_clock"),
    ):
        put(f"clk_{k}", ("clocks", tag))
        put(f"max_{k}", ("max_clocks", tag))
        put(f"app_{k}", ("applications_clocks", tag))
        put(f"default_app_{k}", ("default_applications_clocks", tag))
    reasons = g.find("clocks_event_reasons") or g.find("clocks_throttle_reasons")
    if reasons is not None:
        out = {}
        for c in reasons.children:
            name = re.sub(r"^clocks_(event|throttle)_reason_", "", c.tag)
            name = {"display_clocks_setting": "display_clock_setting"}.get(name, name)
            out[name] = c.text
        if out:
            raw["reasons"] = out
    counters = g.find("clocks_event_reasons_counters") or g.find("clocks_throttle_reasons_counters")
    if counters is not None:
        names = {
            "sw_power_cap": "sw_power_cap",
            "sync_boost": "sync_boost",
            "sw_therm_slowdown": "sw_thermal_slowdown",
            "hw_therm_slowdown": "hw_thermal_slowdown",
            "hw_power_brake": "hw_power_brake_slowdown",
        }
        out = {}
        for c in counters.children:
            short = re.sub(r"^clocks_(event|throttle)_reasons_counters_", "", c.tag)
            if short in names:
                out[names[short]] = c.text
        if out:
            raw["reason_counters"] = out
    procs = g.find("processes")
    if procs is not None:
        raw["processes"] = [
            {
                "pid": _t(p, "pid") or "",
                "type": _t(p, "type") or "",
                "name": _t(p, "process_name") or "",
                "used": _t(p, "used_memory") or "",
            }
            for p in procs.findall("process_info")
        ]
    return raw


def parse(lines: list[str], part: Part, name: str = "text") -> Part:
    """Fill ``part.facts["gpu"]`` from ``nvidia-smi -q -x`` XML (module docstring).

    Raises:
        BadInputError: entity declarations, or no ``nvidia_smi_log`` element at all.
    """
    text = "\n".join(lines)
    start = min(
        (i for i in (text.find("<?xml"), text.find("<nvidia_smi_log")) if i >= 0), default=-1
    )
    if start < 0:  # a piece (<gpu> elements, header lines) without the log around it
        first = re.search(r"<(gpu id=|driver_version>|attached_gpus>)", text)
        text = text[first.start() if first else 0 :]
        cut = text.rfind("</nvidia_smi_log>")
        text = "<nvidia_smi_log>\n" + (text[:cut] if cut >= 0 else text) + "\n</nvidia_smi_log>\n"
        part.notes.append(
            "a piece of nvidia-smi -q -x: read inside an <nvidia_smi_log> element of our own"
        )
    else:
        text = text[start:]
    m = re.search(r'<!DOCTYPE\s+nvidia_smi_log\s+SYSTEM\s+"nvsmi_device_(v\d+)\.dtd"', text)
    if m:
        part.tool_version = f"DTD nvsmi_device_{m.group(1)}"
    root, problem = parse_xml(text, name)
    if root is None or root.tag != "nvidia_smi_log":
        raise BadInputError(
            f"{name}: the XML part is not an nvidia-smi log (no <nvidia_smi_log> element"
            f"{'; ' + problem if problem else ''})"
        )
    if problem:
        part.notes.append(f"the XML is cut off or damaged ({problem}); what came before is kept")
    gpu = part.section("gpu")
    drv = _t(root, "driver_version")
    if drv and not is_na(drv):
        gpu["driver_version"] = drv
    cuda = _t(root, "cuda_version")
    if cuda and not is_na(cuda):
        gpu["cuda_driver_version"] = cuda
    attached = _t(root, "attached_gpus")
    gpus: dict[str, Any] = {}
    for i, g in enumerate(root.findall("gpu")):
        raw = _raw(g)
        raw.setdefault("bus_id", g.attrib.get("id", ""))
        key, rec = to_probe(raw, i, part.label)
        gpus[key] = rec
    if attached and attached.isdigit():
        gpu["gpu_count"] = int(attached)
        if len(gpus) < int(attached):
            part.notes.append(
                f"attached_gpus is {attached}, but the text holds {len(gpus)} <gpu> element(s) (cut off?)"
            )
    if gpus:
        gpu["gpus"] = gpus
    ts = _t(root, "timestamp")
    if ts:
        part.notes.append(f"nvidia-smi timestamp (the machine's local time): {ts}")
    return part
