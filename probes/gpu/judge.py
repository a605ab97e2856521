"""Judging the ``gpu`` probe under load: gpu.throttling, gpu.pcie-link, gpu.contention.

Rules (DESIGN section 6): an idle GPU is not a slow GPU (idle bit, P8, low
clocks and PCIe trained down at idle are never findings); clocks and PCIe are
judged from busy samples only (:mod:`forensics_probes.gpu.views`); counters
that grew during a window are findings; volatile values alone are not. Each
hypothesis gets one finding: implicated, ruled-out (saying what was checked)
or inconclusive. Identical input implicates nothing. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from forensics_probes.gpu.load import judge_memory, judge_spin
from forensics_probes.gpu.state import judge_state
from forensics_probes.gpu.views import (
    View,
    get,
    gpus_of,
    idle_state,
    instant_busy,
    label,
    match_gpus,
    not_held,
    num,
    pct,
    throttled,
    unheld_summary,
    view,
    worst,
)

from forensics.gpu.readings import HW_REASONS, PSTATE
from forensics.model import Finding, HypothesisStatus, Severity, implicated, inconclusive, ruled_out
from forensics.probe import JudgeContext, ProbeResult
from forensics.words import plural

CLOCK_DROP = 0.05  # median SM clock under load 5% lower = a finding
REASON_GROWTH = 0.10  # a reason's share of busy time up by 10 points = a finding
HW_COUNTER_GROWTH_NS = 1e9  # HW slowdown/brake time grown by > 1 s between snapshots
NEW_PROCESS_MEM_BYTES = 1 << 30
BUSY_UTIL_PCT = 30

_THROTTLE_FIELDS = [
    "gpus.*.clocks_event_reasons",
    "gpus.*.clocks_event_ns",
    "gpus.*.violation_ns",
    "gpus.*.clocks",
    "gpus.*." + PSTATE,
    "gpus.*.utilization",
    "sample",
    "bench.telemetry",
]
"""What gpu.throttling reads (a malformed value under one of these makes it inconclusive)."""


def _reasons(t: dict[str, float]) -> str:
    return (
        ", ".join(
            f"{r.replace('_', ' ')} {pct(f)}" for r, f in sorted(t.items(), key=lambda kv: -kv[1])
        )
        or "none"
    )


def _desc(v: View) -> str:
    clock = (
        f"SM clock median {v.sm_median_mhz:g} MHz"
        if v.sm_median_mhz is not None
        else "SM clock n/a"
    )
    n = (
        f"{v.busy_samples} busy samples"
        if not v.instant
        else "one busy reading; fractions are 0 or 100%"
    )
    return f"{clock} ({v.source}, {n}); throttling reasons: {_reasons(throttled(v))}"


# -- gpu.throttling -----------------------------------------------------------
def _throttle_one(name: str, gb, ga, vb: View | None, va: View | None):
    """Return (implicated?, severity, relevance, summary, evidence) for one GPU."""
    ev: list[str] = []
    ta, tb = throttled(va), throttled(vb)
    if va is not None:
        ev.append(f"{name} after: {_desc(va)}")
    if vb is not None:
        ev.append(f"{name} before: {_desc(vb)}")
    # nvmlDeviceGetMaxClockInfo is a reading too (a VBIOS or a clock limit can lower it): measure a clock
    # against the higher of the two sides' maxima, so a maximum that dropped with the clock hides nothing
    maxima = [
        m
        for m in (num(get(gb, "clocks", "sm", "max_mhz")), num(get(ga, "clocks", "sm", "max_mhz")))
        if m is not None
    ]
    max_sm = max(maxima) if maxima else None
    # HW slowdown / power brake time grown between the snapshots (same GPU, counter not reset).
    hw_grown = {}
    for r in HW_REASONS:
        b0, a0 = num(get(gb, "clocks_event_ns", r)), num(get(ga, "clocks_event_ns", r))
        if b0 is not None and a0 is not None and a0 - b0 > HW_COUNTER_GROWTH_NS:
            hw_grown[r] = (a0 - b0) / 1e9
    for r, s in hw_grown.items():
        ev.append(
            f"{name}: {r.replace('_', ' ')} time grew by {s:.1f} s between the snapshots "
            "(NVML_FI_DEV_CLOCKS_EVENT_REASON_*)"
        )
    if va is None:
        if hw_grown:
            return (
                True,
                Severity.MEDIUM,
                0.7,
                f"{name}: hardware clock slowdown time grew between the snapshots",
                ev,
            )
        return None, None, 0.0, "", ev
    grew = {r: f for r, f in ta.items() if f - tb.get(r, 0.0) >= REASON_GROWTH}
    drop = None
    if vb is not None and va.sm_median_mhz and vb.sm_median_mhz:
        drop = (vb.sm_median_mhz - va.sm_median_mhz) / vb.sm_median_mhz
    clock_cut = drop is not None and drop >= CLOCK_DROP
    if vb is None:
        # Nothing to compare with: only clear throttling counts (HW reasons, or most of the time).
        hw = {r: f for r, f in ta.items() if r in HW_REASONS}
        low_clock = max_sm and va.sm_median_mhz and va.sm_median_mhz < 0.5 * max_sm
        if hw or low_clock or any(f >= 0.5 for f in ta.values()):
            ev.append(f"{name}: no under-load data on the before side to compare with")
            sev = Severity.HIGH if (hw and not va.instant) or low_clock else Severity.MEDIUM
            if not hw and not low_clock and set(ta) <= {"sw_power_cap"}:
                sev = Severity.LOW  # at the power limit under heavy load: common; needs a baseline
                ev.append(
                    f"{name}: SW power cap under heavy load is common at the power limit; "
                    "compare with a baseline window"
                )
            return (
                True,
                sev,
                0.6 if va.instant else 0.9,
                f"{name}: clocks cut under load ({_reasons(ta)}), SM clock {va.sm_median_mhz:g} MHz",
                ev,
            )
        return False, None, 0.0, "", ev
    if not grew and not clock_cut:
        return False, None, 0.0, "", ev
    hw = any(r in HW_REASONS for r in grew)
    big = (drop or 0) >= 0.2 or any(f >= 0.5 for f in grew.values())
    sev = Severity.HIGH if hw or big else Severity.MEDIUM
    rel = 0.6 if va.instant or vb.instant else 1.0
    parts = []
    if clock_cut:
        parts.append(
            f"SM clock under load {vb.sm_median_mhz:g} -> {va.sm_median_mhz:g} MHz (-{pct(drop)})"
        )
    if grew:
        parts.append(
            "; ".join(
                f"{r.replace('_', ' ')} {pct(tb.get(r, 0.0))} -> {pct(f)} of busy time"
                for r, f in grew.items()
            )
        )
    return True, sev, rel, f"{name}: " + ", ".join(parts), ev


def judge_throttling(pairs, docs, datas) -> Finding:
    """``gpu.throttling`` from under-load samples (benchmark telemetry, else the ``--sample`` window).

    Args:
        pairs: ``[(uuid, before_gpu, after_gpu)]`` GPU records matched by UUID.
        docs: (before, after) whole snapshots (for ``bench.telemetry``).
        datas: (before, after) gpu probe data (for its ``sample`` window).

    Implicated when, on busy samples, a throttling reason (SW power cap, HW slowdown, thermal,
    power brake, board limit, reliability; bits 0x4-0x400 of nvmlDeviceGetCurrentClocksEventReasons)
    is active more often, the SM clock median fell, or a violation counter
    (nvmlDeviceGetViolationStatus / NVML_FI_DEV_CLOCKS_EVENT_REASON_*) grew more during the window.
    Idle readings (bit 0x1, P8, low clocks) are never judged. Inconclusive without busy samples.
    """
    found, evidence, checked = [], [], []
    for key, gb, ga in pairs:
        name = label(key, ga or gb)
        vb = view(docs[0], datas[0], key, gb) if gb else None
        va = view(docs[1], datas[1], key, ga) if ga else None
        hit, sev, rel, summary, ev = _throttle_one(name, gb, ga, vb, va)
        evidence += ev
        if hit:
            found.append((sev, rel, summary, ev))
        elif hit is False:
            both = {r: f for r, f in throttled(va).items() if r in throttled(vb)}
            clock = (
                f"SM clock {va.sm_median_mhz:g} MHz under load"
                if va.sm_median_mhz is not None
                else "under load"
            )
            checked.append(
                f"{name}: {clock}"
                + (
                    f", {_reasons(both)} on both sides (not a change)"
                    if both
                    else ", no throttling reason"
                )
            )
    if found:
        sev, rel, summary, _ = worst(found)
        return implicated(
            "gpu.throttling",
            sev,
            summary,
            evidence,
            relevance=rel,
            fields=["gpus.*.clocks_event_reasons", "gpus.*.clocks_event_ns", "bench.telemetry"],
        )
    if checked:
        return ruled_out(
            "gpu.throttling",
            "; ".join(checked) + "; no reason counter grew",
            evidence,
            fields=_THROTTLE_FIELDS,
        )
    unheld = not_held(pairs, "clocks") + not_held(pairs, "clocks_event_reasons")
    if unheld:
        return inconclusive(
            "gpu.throttling",
            unheld_summary(unheld, "clocks and clocks-event reasons under load"),
            evidence + unheld,
        )
    return inconclusive(
        "gpu.throttling",
        "no under-load samples on either side (run 'forensics bench' or "
        "'forensics snapshot --sample 10' during the workload); idle readings are not judged",
        evidence
        + [
            f"{label(k, ga or gb)}: {idle_state(ga or gb)} at snapshot time"
            for k, gb, ga in pairs
            if (ga or gb)
        ],
    )


# -- gpu.pcie-link ------------------------------------------------------------
def _link(gen, width) -> str:
    g = f"Gen{gen:g}" if num(gen) is not None else "Gen?"
    w = f"x{width:g}" if num(width) is not None else "x?"
    return f"{g} {w}"


def _worse(a: tuple, b: tuple) -> bool:
    """Is link ``a`` (gen, width) slower than link ``b``? Unknown parts compare equal."""
    (ga, wa), (gb, wb) = a, b
    slower_gen = ga is not None and gb is not None and ga < gb
    narrower = wa is not None and wb is not None and wa < wb
    return slower_gen or narrower


def judge_pcie(pairs, docs, datas) -> Finding:
    """``gpu.pcie-link``: PCIe generation/width under load, against the baseline's link under load and the maxima.

    Sources: nvmlDeviceGetCurrPcieLinkGeneration/Width from busy samples (bench telemetry or the
    ``--sample`` window); nvmlDeviceGetMaxPcieLinkGeneration/Width, which report what the device *and
    its slot* allow together (a reading, not a constant: a card moved to a slot wired x8, or one
    whose lanes an M.2 drive now shares, reads max x8); nvmlDeviceGetGpuMaxPcieLinkGeneration (the
    GPU alone). Rules, per GPU matched by UUID:

    - the link under load is slower than the baseline's link under load (x16 -> x8, Gen5 -> Gen4):
      implicated, high (medium from a single busy reading), whatever the maxima say;
    - a maximum that dropped between the snapshots (gen or width) is a change of the slot: implicated,
      medium, 0.7, and named in the summary when the link under load followed it;
    - below that side's own maximum under load, with no baseline under load: implicated; below max
      on both sides with the same link: a standing limit (ruled out, said so);
    - a link below max on an idle reading is idle downtraining (DESIGN section 6), never a finding.
    """
    found, evidence, checked, idle_notes = [], [], [], []
    for key, gb, ga in pairs:
        g = ga or gb
        name = label(key, g)
        gmax, wmax = num(get(g, "pcie", "gen_max")), num(get(g, "pcie", "width_max"))
        bgmax, bwmax = num(get(gb, "pcie", "gen_max")), num(get(gb, "pcie", "width_max"))
        gpu_max = num(get(g, "pcie", "gen_gpu_max"))
        if gmax is not None and gpu_max is not None and gpu_max > gmax:
            evidence.append(
                f"{name}: the GPU supports Gen{gpu_max:g} but this slot allows Gen{gmax:g} "
                "(nvmlDeviceGetGpuMaxPcieLinkGeneration vs nvmlDeviceGetMaxPcieLinkGeneration)"
            )
        slot_drop = ""
        if gb and ga and _worse((gmax, wmax), (bgmax, bwmax)):
            slot_drop = f"max {_link(bgmax, bwmax)} -> {_link(gmax, wmax)}"
            evidence.append(
                f"{name}: the maximum link NVML reports dropped {_link(bgmax, bwmax)} -> "
                f"{_link(gmax, wmax)} (nvmlDeviceGetMaxPcieLinkGeneration/Width: the device and its "
                "slot together): the slot changed -- another slot, a riser, or lanes now shared with "
                "another device (an M.2/NVMe drive, a second card)"
            )
        for side, gpu, smax in (("before", gb, bgmax), ("after", ga, gmax)):
            cur = num(get(gpu, "pcie", "gen_current"))
            if (
                gpu
                and not instant_busy(gpu)
                and cur is not None
                and smax is not None
                and cur < smax
            ):
                idle_notes.append(
                    f"{name} {side}: {_link(cur, get(gpu, 'pcie', 'width_current'))} at idle "
                    f"({idle_state(gpu)}) vs max Gen{smax:g}: idle downtraining, expected"
                )
        vb = view(docs[0], datas[0], key, gb) if gb else None
        va = view(docs[1], datas[1], key, ga) if ga else None

        def below(v, smax, swmax):
            return (
                v is not None
                and v.pcie_gen is not None
                and smax is not None
                and (
                    v.pcie_gen < smax
                    or (swmax is not None and v.pcie_width is not None and v.pcie_width < swmax)
                )
            )

        for side, v, smax, swmax in (("before", vb, bgmax, bwmax), ("after", va, gmax, wmax)):
            if v is not None:
                evidence.append(
                    f"{name} {side}: {_link(v.pcie_gen, v.pcie_width)} under load ({v.source}) "
                    f"vs max {_link(smax, swmax)}"
                )
        if va is None:
            if slot_drop:
                found.append(
                    (
                        Severity.MEDIUM,
                        0.7,
                        f"{name}: PCIe {slot_drop} (the slot changed; no link "
                        "under load to compare)",
                        [],
                    )
                )
            continue
        link_a = (va.pcie_gen, va.pcie_width)
        link_b = (vb.pcie_gen, vb.pcie_width) if vb is not None else None
        sev = Severity.HIGH if not va.instant else Severity.MEDIUM
        rel = 0.9 if not va.instant else 0.6
        if link_b is not None and _worse(link_a, link_b):
            why = f"; the slot's {slot_drop}" if slot_drop else ""
            found.append(
                (
                    sev,
                    rel,
                    f"{name}: PCIe link {_link(*link_a)} while busy, below the baseline's "
                    f"{_link(*link_b)} under load (max now {_link(gmax, wmax)}){why}",
                    [],
                )
            )
        elif slot_drop:
            found.append(
                (
                    Severity.MEDIUM,
                    0.7,
                    f"{name}: PCIe {slot_drop} (the slot changed); under load "
                    f"{_link(*link_a)}" + (f" (before: {_link(*link_b)})" if link_b else ""),
                    [],
                )
            )
        elif below(va, gmax, wmax) and not (below(vb, bgmax, bwmax) and link_b == link_a):
            was = f" (before: {_link(*link_b)})" if link_b is not None else ""
            found.append(
                (
                    sev,
                    rel,
                    f"{name}: PCIe link {_link(*link_a)} while busy, below its max "
                    f"{_link(gmax, wmax)}{was}",
                    [],
                )
            )
        elif below(va, gmax, wmax):
            checked.append(
                f"{name}: {_link(*link_a)} under load on both sides, below max "
                f"{_link(gmax, wmax)} (a standing limit, not a change)"
            )
        elif va.pcie_gen is not None:
            checked.append(
                f"{name}: {_link(*link_a)} under load"
                + (" on both sides" if vb is not None else "")
                + f" (max {_link(gmax, wmax)})"
            )
    evidence += idle_notes
    if found:
        sev, rel, summary, _ = worst(found)
        return implicated(
            "gpu.pcie-link",
            sev,
            summary,
            evidence,
            relevance=rel,
            fields=["gpus.*.pcie", "bench.telemetry"],
        )
    idle = "; idle downtraining at snapshot time is expected, not a fault" if idle_notes else ""
    if checked:
        return ruled_out(
            "gpu.pcie-link",
            "; ".join(checked) + idle,
            evidence,
            fields=["gpus.*.pcie", "bench.telemetry"],
        )
    unheld = not_held(pairs, "pcie")
    if unheld:
        return inconclusive(
            "gpu.pcie-link", unheld_summary(unheld, "the PCIe link under load"), evidence + unheld
        )
    return inconclusive(
        "gpu.pcie-link",
        "PCIe link not judged: no under-load samples"
        + (" (idle downtraining seen, expected at idle)" if idle_notes else ""),
        evidence,
    )


# -- gpu.contention -----------------------------------------------------------
def _procs(gpu) -> list[dict[str, Any]] | None:
    p = get(gpu, "processes")
    return p if isinstance(p, list) else None


def _why_missing(gpu) -> str:
    """Why a GPU's process list is not there: the missing value's reason, else "not recorded"."""
    p = get(gpu, "processes") if gpu is not None else None
    if isinstance(p, dict) and isinstance(p.get("missing"), str):
        return p["missing"].replace("_", " ") + (f", {p['detail']}" if p.get("detail") else "")
    return "GPU not in the snapshot" if gpu is None else "process list not recorded"


def _proc_text(p: dict[str, Any]) -> str:
    mem = num(p.get("used_memory_bytes"))
    nm = p.get("name") if isinstance(p.get("name"), str) else "?"
    return (
        f"pid {p.get('pid')} ({nm}" + (f", {mem / 2**30:.1f} GiB" if mem is not None else "") + ")"
    )


def judge_contention(pairs) -> Finding:
    """``gpu.contention``: new processes on a GPU (pid, memory from nvmlDeviceGetComputeRunningProcesses,
    name/user via psutil) or utilization (nvmlDeviceGetUtilizationRates, %) high at snapshot time."""
    found, evidence, checked, unknown = [], [], [], []
    for key, gb, ga in pairs:
        name = label(key, ga or gb)
        pb, pa = _procs(gb), _procs(ga)
        ub, ua = num(get(gb, "utilization", "gpu_pct")), num(get(ga, "utilization", "gpu_pct"))
        if (
            ga is None or pa is None or gb is None or pb is None
        ):  # "no new process" needs both lists
            side = "AFTER" if ga is None or pa is None else "BEFORE"
            unknown.append(f"{name} ({side}: {_why_missing(gb if side == 'BEFORE' else ga)})")
            if pa is not None:
                evidence.append(
                    f"{name} after: {plural(len(pa), 'process', 'processes')} {', '.join(map(_proc_text, pa))}"
                )
            continue
        evidence.append(
            f"{name} after: {plural(len(pa), 'process', 'processes')} {', '.join(map(_proc_text, pa))}; "
            f"utilization {ua if ua is not None else '?'}% at snapshot time"
        )
        if pb is not None:
            evidence.append(
                f"{name} before: {plural(len(pb), 'process', 'processes')} {', '.join(map(_proc_text, pb))}; "
                f"utilization {ub if ub is not None else '?'}% at snapshot time"
            )
        new = len(pa) - (len(pb) if pb is not None else 0)
        if new > 0 and pb is not None:
            mem = sum(num(p.get("used_memory_bytes")) or 0 for p in pa) - sum(
                num(p.get("used_memory_bytes")) or 0 for p in pb
            )
            heavy = mem >= NEW_PROCESS_MEM_BYTES or (ua or 0) >= BUSY_UTIL_PCT
            found.append(
                (
                    Severity.HIGH if heavy else Severity.MEDIUM,
                    0.9 if heavy else 0.6,
                    f"{name}: {plural(new, 'more process', 'more processes')} on the GPU at snapshot time "
                    f"({', '.join(map(_proc_text, pa))}), utilization {ua}%",
                    [],
                )
            )
        elif (ua or 0) >= BUSY_UTIL_PCT and (ub is None or ub < 5) and pb is not None:
            found.append(
                (
                    Severity.LOW,
                    0.4,
                    f"{name}: utilization {ua}% at snapshot time with no new visible "
                    "process (another container?)",
                    [],
                )
            )
        else:
            checked.append(
                f"{name}: {plural(len(pa), 'process', 'processes')} after, {len(pb)} before"
            )
    if found:
        sev, rel, summary, _ = worst(found)
        return implicated(
            "gpu.contention",
            sev,
            summary,
            evidence,
            relevance=rel,
            fields=["gpus.*.processes", "gpus.*.utilization"],
        )
    if checked and not unknown:
        return ruled_out(
            "gpu.contention",
            "no new process on the GPUs: " + "; ".join(checked),
            evidence,
            fields=["gpus.*.processes", "gpus.*.utilization"],
        )
    unheld = not_held(pairs, "processes")
    if unheld:
        return inconclusive(
            "gpu.contention", unheld_summary(unheld, "the process list"), evidence + unheld
        )
    return inconclusive(
        "gpu.contention",
        "process list unavailable in one snapshot for " + ", ".join(unknown or ["all GPUs"]),
        evidence,
    )


def _attribute_throttling(throttling: Finding, contention: Finding) -> None:
    """Rank throttling below contention when another process appeared on the GPUs too.

    Another job's load draws power: the SW power cap that cuts the clocks then is
    a consequence of the contention, not a cause of its own (scenario 3 of the
    end-to-end runs: a second process on GPU 0 drove it from 21% to 97% of busy
    time at its power cap). The throttling finding stays, with that said.
    """
    if (
        throttling.status is not HypothesisStatus.IMPLICATED
        or contention.status is not HypothesisStatus.IMPLICATED
    ):
        return
    if contention.severity < Severity.MEDIUM:
        return
    throttling.relevance = min(throttling.relevance, contention.relevance * 0.8)
    throttling.evidence.insert(
        0,
        "clocks were cut while another process loaded the GPU (see gpu.contention): "
        "likely a consequence of that load, not a separate cause",
    )


def judge_gpu(
    before: ProbeResult | None, after: ProbeResult | None, jctx: JudgeContext | None = None
) -> list[Finding]:
    """All findings of the ``gpu`` probe (see the module docstring)."""

    b = before.data if before is not None and before.usable else None
    a = after.data if after is not None and after.usable else None
    if b is None or a is None:
        return []  # one side alone shows nothing here; the ledger marks the probe's hypotheses inconclusive
    docs = (jctx.before if jctx else {}, jctx.after if jctx else {})
    gb, ga = gpus_of(b), gpus_of(a)
    pairs, note = match_gpus(gb, ga)
    throttling, contention = judge_throttling(pairs, docs, (b, a)), judge_contention(pairs)
    _attribute_throttling(throttling, contention)
    out = [throttling, judge_pcie(pairs, docs, (b, a)), contention]
    out += judge_state(b, a, pairs, docs)
    out.append(judge_memory(pairs, docs, (b, a)))
    out += judge_spin(pairs, docs, (b, a))
    if note:
        for f in out:
            f.evidence.append(note)
    for f in out:
        f.probe = "gpu"
    return out
