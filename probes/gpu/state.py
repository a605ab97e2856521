"""Judging the ``gpu`` probe's settled state: gpu.config, gpu.health, gpu.topology, driver.version.

These fields do not move on an idle machine, so a change between the two
snapshots is itself the evidence. Counters (ECC, remapped rows, PCIe and
NVLink errors) are judged by their growth; a value that became a missing
``gpu_lost`` is critical. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any

from forensics_probes.gpu.views import get, label, not_held, num, unheld_summary, worst

from forensics.gpu.readings import PSTATE
from forensics.hypotheses import FACT_LIMIT_LOWERED, FACT_P2P_BLOCKED
from forensics.model import (
    Finding,
    Severity,
    implicated,
    inconclusive,
    is_missing,
    is_unrecorded,
    ruled_out,
)

# (path, label, severity when it changes, relevance, "lower is worse")
_CONFIG = [
    (("power", "enforced_limit_mw"), "enforced power limit", Severity.HIGH, 0.8, True),
    (("power", "limit_mw"), "power limit", Severity.HIGH, 0.8, True),
    (("power", "default_limit_mw"), "default power limit", Severity.MEDIUM, 0.5, True),
    (("clocks", "graphics", "app_mhz"), "application graphics clock", Severity.HIGH, 0.8, True),
    (("clocks", "sm", "app_mhz"), "application SM clock", Severity.HIGH, 0.8, True),
    (("clocks", "mem", "app_mhz"), "application memory clock", Severity.HIGH, 0.8, True),
    (("clocks", "sm", "max_mhz"), "max SM clock", Severity.MEDIUM, 0.6, True),
    (("modes", "persistence"), "persistence mode", Severity.LOW, 0.3, False),
    (("modes", "compute"), "compute mode", Severity.MEDIUM, 0.5, False),
    (("modes", "mig_current"), "MIG mode", Severity.HIGH, 0.8, False),
    (("ecc", "mode_current"), "ECC mode", Severity.MEDIUM, 0.5, False),
]
# (path, label, severity when it grows)
_HEALTH = [
    (("ecc", "uncorrected_volatile"), "uncorrected ECC errors (volatile)", Severity.HIGH),
    (("ecc", "uncorrected_aggregate"), "uncorrected ECC errors (aggregate)", Severity.HIGH),
    (("ecc", "corrected_volatile"), "corrected ECC errors (volatile)", Severity.LOW),
    (("remapped_rows", "uncorrectable"), "rows remapped for uncorrectable errors", Severity.HIGH),
    (("remapped_rows", "pending"), "row remap pending", Severity.HIGH),
    (("remapped_rows", "failure"), "row remap failure", Severity.CRITICAL),
    (("remapped_rows", "correctable"), "rows remapped for correctable errors", Severity.LOW),
    (("retired_pages", "double_bit_ecc"), "pages retired (double-bit ECC)", Severity.MEDIUM),
    (("retired_pages", "single_bit_ecc"), "pages retired (single-bit ECC)", Severity.LOW),
    (("pcie", "counters", "replay"), "PCIe replays", Severity.LOW),
    (("pcie", "counters", "fatal_error"), "PCIe fatal errors", Severity.HIGH),
    (("pcie", "counters", "non_fatal_error"), "PCIe non-fatal errors", Severity.LOW),
]


def _fmt(path, value) -> str:
    if is_missing(value):
        return str(value.get("missing")).replace("_", " ")
    if path[-1].endswith("_mw") and num(value) is not None:
        return f"{value / 1000:g} W"
    if path[-1].endswith("_mhz") and num(value) is not None:
        return f"{value:g} MHz"
    return str(value)


def judge_config(pairs) -> Finding:
    """``gpu.config``: enforced/default power limit (mW), application clocks (MHz), persistence,
    compute, ECC and MIG modes changed (nvmlDeviceGetEnforcedPowerLimit, ...GetApplicationsClock,
    ...GetPersistenceMode, ...GetComputeMode, ...GetEccMode, ...GetMigMode)."""
    found, evidence, same = [], [], []
    lowered = False
    for key, gb, ga in pairs:
        if gb is None or ga is None:
            continue
        name = label(key, ga)
        compared = 0
        for path, what, sev, rel, lower_worse in _CONFIG:
            vb, va = _at(gb, path), _at(ga, path)
            if vb is None or va is None or is_unrecorded(vb) or is_unrecorded(va):
                # a field one side never recorded (a pasted text that does not hold it, an older
                # snapshot): unknown, not a change; a value NVML could not read is a missing value, not None
                continue
            compared += 1
            if vb == va:
                continue
            nb, na = num(vb), num(va)
            s = sev
            if lower_worse and nb is not None and na is not None and na > nb:
                s, rel = Severity.LOW, 0.3  # a raised limit or clock does not slow a step down
            if is_missing(va) or is_missing(vb):
                s, rel = Severity.LOW, 0.3
            elif lower_worse and nb is not None and na is not None and na < nb:
                lowered = True  # a lowered limit: what the SW power cap and low clocks under load follow from
            found.append((s, rel, f"{name}: {what} {_fmt(path, vb)} -> {_fmt(path, va)}", []))
            evidence.append(
                f"{name}: {what} {_fmt(path, vb)} -> {_fmt(path, va)} ({'.'.join(path)})"
            )
        for gpu, side in ((gb, "before"), (ga, "after")):
            enf, dflt = (
                num(get(gpu, "power", "enforced_limit_mw")),
                num(get(gpu, "power", "default_limit_mw")),
            )
            if enf is not None and dflt is not None and enf < dflt:
                evidence.append(
                    f"{name} {side}: enforced power limit {enf / 1000:g} W below the default "
                    f"{dflt / 1000:g} W (nvidia-smi -pl or a datacenter cap)"
                )
            req = num(get(gpu, "power", "limit_mw"))
            if enf is not None and req is not None and enf < req:
                evidence.append(
                    f"{name} {side}: enforced power limit {enf / 1000:g} W below the requested "
                    f"{req / 1000:g} W (nvmlDeviceGetEnforcedPowerLimit vs ...GetPowerManagementLimit): "
                    "a cap applied outside this limit (the BMC, a datacenter power policy)"
                )
            pend, cur = get(gpu, "ecc", "mode_pending"), get(gpu, "ecc", "mode_current")
            if isinstance(pend, str) and isinstance(cur, str) and pend != cur:
                evidence.append(f"{name} {side}: ECC mode {cur}, {pend} after the next reboot")
        if not compared:
            continue
        same.append(
            f"{name}: power limit {_fmt(('x_mw',), get(ga, 'power', 'enforced_limit_mw'))}, "
            f"app SM clock {_fmt(('x_mhz',), get(ga, 'clocks', 'sm', 'app_mhz'))}, persistence "
            f"{_fmt(('',), get(ga, 'modes', 'persistence'))}, compute {_fmt(('',), get(ga, 'modes', 'compute'))}, "
            f"MIG {_fmt(('',), get(ga, 'modes', 'mig_current'))}, ECC {_fmt(('',), get(ga, 'ecc', 'mode_current'))}"
        )
    if found:
        sev, rel, summary, _ = worst(found)
        return implicated(
            "gpu.config",
            sev,
            summary,
            evidence,
            relevance=rel,
            fields=["gpus.*.power", "gpus.*.clocks", "gpus.*.modes", "gpus.*.ecc"]
            + ([FACT_LIMIT_LOWERED] if lowered else []),
        )
    if same:
        unheld = not_held(pairs, "power") + not_held(pairs, "clocks") + not_held(pairs, "modes")
        return ruled_out(
            "gpu.config",
            "same on both sides: " + "; ".join(same),
            evidence + [f"not compared: {line}" for line in unheld],
            fields=["gpus.*.power", "gpus.*.clocks", "gpus.*.modes", "gpus.*.ecc"],
        )
    unheld = not_held(pairs, "power") + not_held(pairs, "clocks") + not_held(pairs, "modes")
    if unheld:
        return inconclusive(
            "gpu.config",
            unheld_summary(unheld, "power limits, application clocks and modes"),
            evidence + unheld,
        )
    return inconclusive("gpu.config", "no GPU present on both sides to compare", evidence)


def _at(gpu, path):
    """The value at ``path`` of a GPU record; a ``not_recorded`` group above it stands for the whole group."""
    node = gpu
    for part in path:
        if is_unrecorded(node):
            return node
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _window_deltas(doc, data, pairs, side):
    """{gpu label: counter_deltas} of one side's benchmark or --sample window."""
    for summary in (get(doc, "bench", "telemetry"), get(data, "sample")):
        gpus = get(summary, "gpus")
        if not isinstance(gpus, dict):
            continue
        out = {}
        for key, gb, ga in pairs:
            entry = gpus.get(key)
            if isinstance(entry, dict) and isinstance(entry.get("counter_deltas"), dict):
                out[label(key, ga or gb)] = entry["counter_deltas"]
        return out
    return {}


CRC_ALERT_PER_S = 100
"""NVLink CRC errors per second per link at which DCGM's health watch alerts (research/nvml.md section 4)."""


def seconds_between(docs) -> float | None:
    """Seconds from the before snapshot's ``created`` to the after one's, or None if unknown."""
    import datetime as _dt

    try:
        t0, t1 = (_dt.datetime.strptime(d["created"], "%Y-%m-%dT%H:%M:%SZ") for d in docs)
    except (KeyError, TypeError, ValueError):
        return None
    span = (t1 - t0).total_seconds()
    return span if span > 0 else None


def judge_health(pairs, docs=({}, {}), b=None, a=None) -> Finding:
    """``gpu.health``: ECC, remapped-row, retired-page, PCIe replay and NVLink error counters that grew.

    NVLink CRC errors are judged as a rate between the snapshots' ``created`` times against
    :data:`CRC_ALERT_PER_S` (they are corrected by link retry and trickle up under traffic);
    replay/recovery errors and a GPU lost (NVML_ERROR_GPU_IS_LOST) always count.
    """
    found, evidence, checked = [], [], []
    elapsed = seconds_between(docs)
    for key, gb, ga in pairs:
        name = label(key, ga or gb)
        if ga is None:
            found.append(
                (
                    Severity.HIGH,
                    0.9,
                    f"{name}: present before, absent after (fell off the bus?)",
                    [],
                )
            )
            continue
        if gb is None:
            evidence.append(f"{name}: absent before, present after")
            continue
        lost = [
            k
            for k in ("name", PSTATE, "uuid")
            if is_missing(ga.get(k)) and ga[k].get("missing") == "gpu_lost"
        ]
        if lost or (is_missing(get(ga, "handle"))):
            found.append(
                (
                    Severity.CRITICAL,
                    1.0,
                    f"{name}: NVML reports the GPU lost (NVML_ERROR_GPU_IS_LOST)",
                    [],
                )
            )
            continue
        grew = []
        compared = 0
        for path, what, sev in _HEALTH:
            b0, a0 = num(get(gb, *path)), num(get(ga, *path))
            if b0 is None or a0 is None:
                continue
            compared += 1
            if a0 < b0:
                evidence.append(
                    f"{name}: {what} {b0:g} -> {a0:g} (counter reset: driver reload or reboot)"
                )
            elif a0 > b0:
                grew.append(what)
                found.append(
                    (sev, 0.7, f"{name}: {what} grew {b0:g} -> {a0:g} between the snapshots", [])
                )
                evidence.append(f"{name}: {what} {b0:g} -> {a0:g} ({'.'.join(path)})")
        links_b, links_a = get(gb, "nvlink", "links") or {}, get(ga, "nvlink", "links") or {}
        crc_quiet = []
        for link, la in links_a.items() if isinstance(links_a, dict) else ():
            for err, a0 in (get(la, "errors") or {}).items():
                b0 = num(get(links_b, link, "errors", err))
                if b0 is None or num(a0) is None or a0 <= b0:
                    continue
                rate = (a0 - b0) / elapsed if elapsed else None
                if err.startswith("crc") and (
                    rate < CRC_ALERT_PER_S if rate is not None else a0 - b0 < 1000
                ):
                    # CRC errors are corrected by link-level retry and trickle up under traffic on healthy
                    # links (docs/gpu-probe.md, 'Measured on the 2 x H200 machine'); DCGM's NVLink
                    # health watch alerts at 100/s. Replay/recovery (link retraining) and floods matter.
                    crc_quiet.append(f"NVLink {link} {err} +{a0 - b0:g}")
                    continue
                sev = Severity.HIGH if err.startswith("crc") else Severity.MEDIUM
                per_s = f" ({rate:.0f}/s)" if rate is not None else ""
                found.append(
                    (sev, 0.6, f"{name}: NVLink {link} {err} errors {b0:g} -> {a0:g}{per_s}", [])
                )
                evidence.append(
                    f"{name}: NVLink {link} {err} {b0:g} -> {a0:g}{per_s} (nvmlDeviceGetNvLinkErrorCounter)"
                )
        if crc_quiet:
            span = f" over {elapsed:.0f} s" if elapsed else ""
            evidence.append(
                f"{name}: NVLink CRC errors corrected by link retry, below DCGM's {CRC_ALERT_PER_S}/s alert "
                f"rate{span}: {', '.join(crc_quiet[:4])}" + (" ..." if len(crc_quiet) > 4 else "")
            )
        compared += sum(
            1
            for link, la in (links_a.items() if isinstance(links_a, dict) else ())
            if get(la, "errors") and isinstance(links_b, dict) and get(links_b, link, "errors")
        )
        if compared:
            checked.append(
                f"{name}: no ECC, row-remap, retired-page, PCIe or NVLink error counter grew"
                if not grew
                else ""
            )
    before_w = _window_deltas(docs[0], b, pairs, "before")
    for name, deltas in _window_deltas(docs[1], a, pairs, "after").items():
        for key, what, sev in (
            ("pcie_replay", "PCIe replays", Severity.MEDIUM),
            ("ecc_uncorrected_volatile", "uncorrected ECC errors", Severity.HIGH),
            ("ecc_corrected_volatile", "corrected ECC errors", Severity.LOW),
        ):
            d, d0 = num(deltas.get(key)), num(get(before_w, name, key)) or 0
            if d and d > d0:  # more growth than in the before window (identical windows: nothing)
                found.append(
                    (sev, 0.7, f"{name}: {what} grew by {d:g} during the measured window", [])
                )
                evidence.append(f"{name}: {key} +{d:g} during the window (counter_deltas)")
    if found:
        sev, rel, summary, _ = worst(found)
        return implicated(
            "gpu.health",
            sev,
            summary,
            evidence,
            relevance=rel,
            fields=["gpus.*.ecc", "gpus.*.remapped_rows", "gpus.*.pcie.counters", "gpus.*.nvlink"],
        )
    if any(checked):
        return ruled_out(
            "gpu.health",
            "; ".join(c for c in checked if c),
            evidence,
            fields=["gpus.*.ecc", "gpus.*.remapped_rows", "gpus.*.pcie.counters", "gpus.*.nvlink"],
        )
    unheld = [
        ln
        for g in ("ecc", "remapped_rows", "retired_pages", "pcie", "nvlink")
        for ln in not_held(pairs, g)
    ]
    if unheld:
        return inconclusive(
            "gpu.health",
            unheld_summary(unheld, "error counters (ECC, remapped rows, PCIe, NVLink)"),
            evidence + unheld,
        )
    return inconclusive("gpu.health", "no GPU present on both sides to compare", evidence)


def _nvlink_desc(gpu) -> str:
    nv = get(gpu, "nvlink")
    if is_missing(nv):
        return f"NVLink {nv.get('missing', '').replace('_', ' ')}"
    links = get(nv, "links") or {}
    versions = sorted(
        {str(e.get("version")) for e in links.values() if not is_missing(e.get("version"))}
    )
    return f"{get(nv, 'active_links')} NVLinks active (v{'/'.join(versions) or '?'})"


def _topo_pairs(data) -> dict[str, str]:
    matrix = get(data, "topology", "matrix")
    if not isinstance(matrix, dict):
        return {}
    gpu = re.compile(r"^GPU\d+$")
    return {
        f"{r}-{c}": v
        for r, row in matrix.items()
        if isinstance(row, dict) and gpu.match(r)
        for c, v in row.items()
        if gpu.match(c) and r < c
    }


def _acs(data) -> dict[str, Any]:
    """ACS facts of one side: ``redirect`` {bridge: line}, ``unreadable`` [lines], ``bridges`` count,
    ``recorded`` (False for snapshots of a forensics that did not read sysfs)."""
    out: dict[str, Any] = {
        "redirect": {},
        "acs_on": {},
        "unreadable": [],
        "bridges": 0,
        "recorded": False,
    }
    gpus = get(data, "gpus")
    for key, gpu in gpus.items() if isinstance(gpus, dict) and not is_missing(gpus) else []:
        if not isinstance(gpu, dict) or "pci_topology" not in gpu:
            continue
        out["recorded"] = True
        name = label(key, gpu)
        pt = gpu["pci_topology"]
        if is_missing(pt):
            out["unreadable"].append(
                f"{name}: PCI path not read ({pt.get('detail') or pt.get('missing')})"
            )
            continue
        for br in pt.get("bridges") or []:
            out["bridges"] += 1
            acs = br.get("acs")
            if is_missing(acs):
                if acs.get("missing") != "not_supported":
                    out["unreadable"].append(
                        f"{name}: ACS of bridge {br.get('bdf')} not read "
                        f"({acs.get('detail') or acs.get('missing')})"
                    )
                continue
            flags = acs.get("control_flags") or {}
            text = " ".join(
                f"{n}{'+' if flags.get(k) else '-'}"
                for k, n in (
                    ("src_valid", "SrcValid"),
                    ("req_redir", "ReqRedir"),
                    ("cmplt_redir", "CmpltRedir"),
                    ("upstream_fwd", "UpstreamFwd"),
                )
            )
            line = f"bridge {br.get('bdf')} above {name}: ACSCtl {acs.get('control')} ({text})"
            if acs.get("redirect"):
                out["redirect"][br.get("bdf")] = line
            elif any(flags.values()):
                out["acs_on"][br.get("bdf")] = line
    return out


_IOMMU_RISK = {"off": 0, "passthrough": 0, "unknown": 1, "translated": 2}
_CMDLINE_WATCH = (
    "iommu",
    "intel_iommu",
    "amd_iommu",
    "iommu.passthrough",
    "iommu.strict",
    "pci",
    "pcie_acs_override",
    "disable_acs_redir",
    "config_acs",
)


def _io_cmd(b, a, multi: bool, found: list, evidence: list, same: list) -> None:
    """IOMMU mode and kernel command line parts of ``gpu.topology``."""
    mb, ma = get(b, "iommu", "mode"), get(a, "iommu", "mode")
    if isinstance(mb, str) and isinstance(ma, str):
        if mb != ma:
            worse = _IOMMU_RISK.get(ma, 1) > _IOMMU_RISK.get(mb, 1)
            sev = (
                (Severity.HIGH if multi else Severity.MEDIUM)
                if worse and ma == "translated"
                else Severity.MEDIUM
            )
            found.append(
                (
                    sev,
                    0.8 if sev is Severity.HIGH else 0.5,
                    f"IOMMU mode {mb} -> {ma} (sysfs "
                    "/sys/kernel/iommu_groups/*/type, /sys/class/iommu)",
                    [],
                )
            )
            evidence.append(
                f"IOMMU {mb} -> {ma}: with translation every GPU DMA and P2P access goes through the "
                "IOMMU; NCCL's troubleshooting guide: IOMMU/VT-d can redirect P2P to the root complex "
                "(slow or hung); iommu=pt is the usual fix (NVIDIA/nccl#631)"
            )
        else:
            same.append(f"IOMMU {ma}")
            if ma == "translated" and multi:
                evidence.append(
                    "IOMMU translates GPU DMA on both sides (not iommu=pt): a standing P2P risk per "
                    "NCCL's troubleshooting guide, not a change"
                )
    pb, pa = get(b, "kernel_cmdline", "params"), get(a, "kernel_cmdline", "params")
    if isinstance(pb, dict) and isinstance(pa, dict):
        changed = [k for k in _CMDLINE_WATCH if pb.get(k) != pa.get(k)]
        for k in changed:
            vb = pb.get(k, "unset") or "(flag)"
            va = pa.get(k, "unset") or "(flag)"
            found.append(
                (Severity.MEDIUM, 0.5, f"kernel parameter {k}: {vb} -> {va} (/proc/cmdline)", [])
            )
        if not changed:
            shown = (
                " ".join(f"{k}={pa[k]}" for k in _CMDLINE_WATCH if k in pa)
                or "no IOMMU/ACS/PCI parameter"
            )
            same.append(f"kernel command line: {shown}")


def judge_topology(b, a, pairs) -> Finding:
    """``gpu.topology``: NVLink links active/version (nvmlDeviceGetNvLinkState/Version), the
    ``nvidia-smi topo -m`` P2P matrix, ACS control on the bridges above each GPU (sysfs config
    space, :mod:`forensics.gpu.pci`), the IOMMU mode and the kernel command line.

    ACS rules: a bridge above a GPU whose ACS control has ReqRedir or CmpltRedir set sends
    peer-to-peer traffic up to the root complex (NCCL's troubleshooting guide; NVIDIA/nccl#2079:
    ``ACSCtl 0x001d`` above two GPUs hung the first all-reduce). Newly set: high (0.9) with two
    or more GPUs, medium (0.5) with one (only GPU-to-NIC traffic is affected); set on both sides
    with 2+ GPUs: low, 0.2 (standing). ACS that cannot be read (non-root: the kernel shows
    64 bytes of config space) leaves the hypothesis inconclusive unless something else
    implicates it; "ACS off" never rules P2P trouble out on its own (NVIDIA/nccl#1160).
    IOMMU mode to ``translated``: high with 2+ GPUs; any other mode or IOMMU/ACS kernel
    parameter change: medium (0.5).
    """
    found, evidence, same = [], [], []
    multi = max(len(gpus_in(b)), len(gpus_in(a))) >= 2
    ab, aa = _acs(b), _acs(a)
    for bdf, line in sorted(aa["redirect"].items()):
        if bdf in ab["redirect"]:
            if multi:
                found.append(
                    (
                        Severity.LOW,
                        0.2,
                        f"{line} on both sides: P2P requests are redirected to the root "
                        "complex -- a standing problem, not what changed",
                        [],
                    )
                )
            evidence.append(line)
        else:
            was = (
                ab["redirect"].get(bdf)
                or ab["acs_on"].get(bdf)
                or ("not recorded" if not ab["recorded"] else "no redirect")
            )
            found.append(
                (
                    Severity.HIGH if multi else Severity.MEDIUM,
                    0.9 if multi else 0.5,
                    f"{line}: ACS redirects peer-to-peer traffic to the root complex (before: {was})",
                    [],
                )
            )
            evidence.append(
                f"{line}; NCCL docs: disable ACS on PCI switches (BIOS, or setpci ECAP_ACS+0x6.w=0000)"
            )
    for line in list(aa["acs_on"].values())[:4]:
        evidence.append(line + ": ACS on, redirect bits off")
    if aa["recorded"] and not aa["unreadable"] and not aa["redirect"]:
        same.append(
            f"no ACS redirect on the {aa['bridges']} bridge(s) above the GPUs"
            if aa["bridges"]
            else "no PCI bridge above the GPUs (nothing to redirect P2P)"
        )
    if not (aa["recorded"] and ab["recorded"]):
        evidence.append(
            "ACS/IOMMU not recorded on both sides (a snapshot from a forensics before sysfs reads)"
        )
    _io_cmd(b, a, multi, found, evidence, same)
    found_topo, same_topo, unheld = _nvlink_topo(pairs, b, a, evidence)
    found += found_topo
    same = same_topo + same
    if found:
        sev, rel, summary, _ = worst(found)
        evidence = [f[2] for f in found if f[2] != summary] + evidence
        blocked = multi and (bool(aa["redirect"]) or get(a, "iommu", "mode") == "translated")
        return implicated(
            "gpu.topology",
            sev,
            summary,
            evidence,
            relevance=rel,
            fields=["gpus.*.nvlink", "topology", "gpus.*.pci_topology", "iommu", "kernel_cmdline"]
            + ([FACT_P2P_BLOCKED] if blocked else []),
        )
    if aa["unreadable"]:
        return inconclusive(
            "gpu.topology",
            "ACS on the bridges above the GPUs not read: "
            + "; ".join(aa["unreadable"][:3])
            + ("; checked: " + "; ".join(same) if same else ""),
            evidence + aa["unreadable"],
        )
    if same:
        return ruled_out(
            "gpu.topology",
            "same on both sides: " + "; ".join(same),
            evidence,
            fields=["gpus.*.nvlink", "topology", "gpus.*.pci_topology", "iommu", "kernel_cmdline"],
        )
    if unheld:
        return inconclusive(
            "gpu.topology",
            unheld_summary(unheld, "NVLink state and the topology matrix"),
            evidence + unheld,
        )
    return inconclusive("gpu.topology", "no NVLink or topology data on both sides", evidence)


def gpus_in(data) -> dict:
    g = get(data, "gpus")
    return g if isinstance(g, dict) and not is_missing(g) else {}


def _nvlink_topo(pairs, b, a, evidence):
    """NVLink and ``nvidia-smi topo -m`` parts of ``gpu.topology``: (found, same, not held by an imported text)."""
    found, same = [], []
    for key, gb, ga in pairs:
        if gb is None or ga is None:
            continue
        name = label(key, ga)
        if is_unrecorded(get(gb, "nvlink")) or is_unrecorded(get(ga, "nvlink")):
            continue  # imported from a text without NVLink state: not compared
        db, da = _nvlink_desc(gb), _nvlink_desc(ga)
        ab, aa = num(get(gb, "nvlink", "active_links")), num(get(ga, "nvlink", "active_links"))
        if db != da:
            sev = Severity.HIGH if (ab is not None and (aa is None or aa < ab)) else Severity.MEDIUM
            found.append((sev, 0.8, f"{name}: {db} -> {da}", []))
            evidence.append(f"{name}: {db} -> {da} (nvmlDeviceGetNvLinkState/Version)")
        else:
            same.append(f"{name}: {da}")
    tb, ta = _topo_pairs(b), _topo_pairs(a)
    for pair in sorted(set(tb) | set(ta)):
        if pair in tb and pair in ta and tb[pair] != ta[pair]:
            found.append(
                (
                    Severity.HIGH,
                    0.8,
                    f"{pair.replace('-', ' to ')} path {tb[pair]} -> {ta[pair]} "
                    "(nvidia-smi topo -m)",
                    [],
                )
            )
    if tb and tb == ta:
        same.append("topo " + ", ".join(f"{p} {v}" for p, v in sorted(ta.items())))
    elif not tb or not ta:
        evidence.append("nvidia-smi topo -m not available on both sides")
    unheld = not_held(pairs, "nvlink") + [
        f"{side}: {t['detail']}"
        for side, d in (("before", b), ("after", a))
        if is_unrecorded(t := get(d, "topology"))
    ]
    return found, same, unheld


def judge_driver(b, a) -> Finding:
    """``driver.version``: nvmlSystemGetDriverVersion and nvmlSystemGetCudaDriverVersion on both sides."""
    db, da = get(b, "driver_version"), get(a, "driver_version")
    cb, ca = get(b, "cuda_driver_version"), get(a, "cuda_driver_version")
    if not isinstance(db, str) or not isinstance(da, str):

        def why(v):
            return v.get("detail") or v.get("missing") if is_missing(v) else str(v)

        return inconclusive(
            "driver.version",
            f"driver version not read on both sides (before: {why(db)}; after: {why(da)})",
        )
    cb, ca = (c.get("detail") or c.get("missing") if is_missing(c) else c for c in (cb, ca))
    ev = [
        f"driver {db} -> {da}; CUDA driver API {cb} -> {ca} (nvmlSystemGetDriverVersion, "
        "nvmlSystemGetCudaDriverVersion)"
    ]
    if db != da:
        return implicated(
            "driver.version",
            Severity.MEDIUM,
            f"NVIDIA driver {db} -> {da}",
            ev,
            relevance=0.6,
            fields=["driver_version", "cuda_driver_version"],
        )
    return ruled_out(
        "driver.version",
        f"driver {da} on both (CUDA driver API {ca})",
        ev,
        fields=["driver_version", "cuda_driver_version"],
    )


def judge_state(
    b: dict[str, Any] | None, a: dict[str, Any] | None, pairs, docs=({}, {})
) -> list[Finding]:
    """gpu.config, gpu.health, gpu.topology and driver.version findings."""
    return [
        judge_config(pairs),
        judge_health(pairs, docs, b, a),
        judge_topology(b, a, pairs),
        judge_driver(b, a),
    ]
