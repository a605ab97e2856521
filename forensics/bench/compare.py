"""``forensics bench compare``: two bench files -> a verdict per result, telemetry differences.

Each result present in both files is compared with
:func:`forensics.stats.compare` on its per-process medians (ratio of
medians, bootstrap 95% CI over processes, Mann-Whitney U, threshold). The
A/A noise floor of the session is the larger |ratio - 1| of each side split
by alternate pairs of its processes (run order; :func:`aa_noise`), so an effect must exceed twice
what the same configuration shows against itself. The **headline** is the
first result (``canary.verify_step_ms`` or the user's metric); components
that moved the same way are named as pointing at the cause.

Noise gate: a side whose per-process medians have IQR/median > 10% never
gets ``slower``/``faster`` (DESIGN section 7: noisy runs are inconclusive).

Telemetry: a throttle reason (SW power cap, HW slowdown, thermal) active in
> 5% of busy samples on one side only, or whose share differs by > 10 points,
is reported; it turns a ``same`` into ``inconclusive`` (the
throttle may hide a change) and is given as an explanation next to
``slower``/``faster``. Foreign processes on a GPU
(not the bench's own ranks) are listed as contention.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from forensics.bench.config import CanaryConfig
from forensics.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION, BadInputError
from forensics.gpu.readings import CLOCK_SM_MHZ, POWER_MW, UTIL_GPU_PCT  # noqa: E402
from forensics.gpu.readings import THROTTLE_REASONS as THROTTLE_KEYS  # noqa: E402  (one list of throttling reasons)
from forensics.stats import REACHABLE_PROCESSES, Comparison, Verdict, compare

THROTTLE_FRACTION = 0.05
THROTTLE_CHANGE = 0.10
NOISY = 0.10  # IQR/median across processes above which no change is called (torch.utils.benchmark's warning level)
CI_CLEAR_PROCESSES = 8
"""Processes a side from which a noisy comparison is called when the CI of the ratio clears the threshold by more
than the spread ((1 + threshold)(1 + IQR/median)); see :func:`compare_values`."""


@dataclass
class BenchComparison:
    """Result of :func:`compare_docs`.

    Attributes:
        headline: name of the result that decides the verdict.
        verdict: the headline's verdict, after the telemetry rule.
        results: name -> :class:`forensics.stats.Comparison` for results in both files.
        pointing: components whose change has the headline's direction and is significant.
        notes: telemetry and method notes, one line each.
        noise_floor: A/A |ratio - 1| used for the headline.
    """

    headline: str
    verdict: Verdict
    results: dict[str, Comparison]
    pointing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    noise_floor: float | None = None
    telemetry: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """1 slower, 3 inconclusive, 0 same or faster (DESIGN section 12)."""
        return {Verdict.SLOWER: EXIT_REGRESSION, Verdict.INCONCLUSIVE: EXIT_INCONCLUSIVE}.get(
            self.verdict, EXIT_OK
        )

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (``forensics bench compare --json``)."""
        return {
            "headline": self.headline,
            "verdict": self.verdict.value,
            "noise_floor": self.noise_floor,
            "pointing": self.pointing,
            "notes": self.notes,
            "telemetry": self.telemetry,
            "results": {k: v.to_json() for k, v in self.results.items()},
        }


def aa_noise(values: list[float]) -> float | None:
    """The A/A noise floor of one side: |median(half 2) / median(half 1) - 1| over its processes in run
    order, split by alternate pairs (processes 1 2 5 6 ... against 3 4 7 8 ...); None below 4 processes.

    Pairs, not odd against even: the sides run A B B A A B ... (:func:`forensics.bench.harness.balanced_order`),
    so a side's odd processes all ran in one place of their round and its even ones in the other; an
    odd/even split measured that place effect, which the A B B A order has already cancelled between the
    sides, and can hide a real 1% change (docs/bench.md, 'Comparison and verdict').
    Each half of a pair split holds as many first places as second ones.
    """
    if len(values) < 4:
        return None
    import statistics

    first = [v for i, v in enumerate(values) if (i // 2) % 2 == 0]
    second = [v for i, v in enumerate(values) if (i // 2) % 2 == 1]
    return abs(statistics.median(second) / statistics.median(first) - 1)


def _check_comparable(a: dict, b: dict) -> None:
    ca, cb = a.get("config", {}), b.get("config", {})
    if ca.get("kind", "canary") != cb.get("kind", "canary"):

        def what(doc: dict, kind: str) -> str:
            all_names = [str(r.get("name")) for r in doc.get("results") or []]
            names = ", ".join(all_names[:2]) + (", ..." if len(all_names) > 2 else "")
            return f"{'your own step' if kind == 'user' else 'the canary'} ({names})"

        raise BadInputError(
            f"A measured {what(a, ca.get('kind', 'canary'))} and B {what(b, cb.get('kind', 'canary'))}: "
            "not comparable; compare two runs of one kind (two 'bench --cmd' runs of the same step, or two "
            "canary runs)"
        )
    if ca.get("kind", "canary") == "canary":
        diff = [k for k in CanaryConfig.SHAPE_FIELDS if ca.get(k) != cb.get(k)]
        if diff:
            raise BadInputError(
                "the two canary runs used different settings ("
                + ", ".join(f"{k}: {ca.get(k)} vs {cb.get(k)}" for k in diff)
                + "); rerun one with the other's options"
            )


def telemetry_problem(telemetry: Any) -> str:
    """Why a bench file's ``telemetry`` cannot be read ("" when it can, or when it is a missing value).

    A sampler summary is ``{"gpus": {uuid: {"reason_fraction": {reason: 0..1}, ...}}, ...}``; anything
    else (an edited or damaged file) is ignored with a note, never read as "no throttling".
    """
    from forensics.model import is_missing

    if telemetry is None or is_missing(telemetry):
        return ""
    if not isinstance(telemetry, dict):
        return f"telemetry is {type(telemetry).__name__}, expected a mapping"
    gpus = telemetry.get("gpus")
    if not isinstance(gpus, dict):
        return f"telemetry.gpus is {'absent' if gpus is None else type(gpus).__name__}, expected a mapping"
    for uuid, g in gpus.items():
        if not isinstance(g, dict):
            return f"telemetry.gpus.{uuid} is {type(g).__name__}, expected a mapping"
        rf = g.get("reason_fraction")
        if (
            rf is not None
            and not is_missing(rf)
            and (
                not isinstance(rf, dict)
                or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1
                    for v in rf.values()
                )
            )
        ):
            return f"telemetry.gpus.{uuid}.reason_fraction is not a mapping of fractions 0-1"
    return ""


def _usable_telemetry(telemetry: Any) -> bool:
    return (
        isinstance(telemetry, dict)
        and isinstance(telemetry.get("gpus"), dict)
        and not telemetry_problem(telemetry)
    )


def throttled(telemetry: Any) -> dict[str, float]:
    """``{"GPU 0 sw_power_cap": 0.93, ...}``: fraction of busy samples with each throttle reason set."""
    out: dict[str, float] = {}
    if not isinstance(telemetry, dict) or not isinstance(telemetry.get("gpus"), dict):
        return out
    for uuid, g in telemetry["gpus"].items():
        rf = g.get("reason_fraction") if isinstance(g, dict) else None
        if not isinstance(rf, dict):
            continue
        for key, frac in rf.items():
            if key in THROTTLE_KEYS and isinstance(frac, (int, float)):
                out[f"GPU {g.get('index', uuid)} {key}"] = float(frac)
    return out


def throttle_changes(tel_a: Any, tel_b: Any) -> list[str]:
    """Throttle reasons whose share of busy samples differs between the sides.

    A reason counts when it is above 5% of busy samples on one side only, or
    above 5% somewhere and the two shares differ by more than 10 points (the
    canary's own matmul probe briefly reaches the SW power cap on both sides
    alike, which is no change: docs/bench.md, 'Limitations').
    """
    if not (_usable_telemetry(tel_a) and _usable_telemetry(tel_b)):
        return []  # a side without readable telemetry shows no change: unknown is not "0% throttled"
    ta, tb = throttled(tel_a), throttled(tel_b)
    out = []
    for key in sorted(set(ta) | set(tb)):
        fa, fb = ta.get(key, 0.0), tb.get(key, 0.0)
        one_side = (fa > THROTTLE_FRACTION) != (fb > THROTTLE_FRACTION)
        if one_side or (max(fa, fb) > THROTTLE_FRACTION and abs(fa - fb) > THROTTLE_CHANGE):
            out.append(f"{key} {fa:.0%} -> {fb:.0%} of busy samples (A -> B)")
    return out


def min_mwu_p(n1: int, n2: int) -> float:
    """Smallest two-sided exact Mann-Whitney U p-value possible with n1 + n2 samples (complete separation)."""
    return min(1.0, 2 / math.comb(n1 + n2, n1))


def foreign_processes(doc: dict) -> dict[str, list[str]]:
    """GPU -> processes seen on it during the run that were not the bench's own ranks."""
    tel = doc.get("telemetry")
    own = {pid for p in doc.get("processes", []) for pid in p.get("pids", [])}
    own |= set(tel.get("bench_pids", [])) if isinstance(tel, dict) else set()
    out: dict[str, list[str]] = {}
    if not isinstance(tel, dict) or not isinstance(tel.get("gpus"), dict):
        return out
    for uuid, g in tel["gpus"].items():
        for proc in (g.get("processes") or []) if isinstance(g, dict) else []:
            pid = proc.get("pid") if isinstance(proc, dict) else proc
            if pid in own or (isinstance(proc, dict) and proc.get("ours")):
                continue
            name = proc.get("name", "") if isinstance(proc, dict) else ""
            out.setdefault(f"GPU {g.get('index', uuid)}", []).append(
                f"pid {pid}{' ' + name if name else ''}"
            )
    return out


def _gpu_line(tel: Any) -> dict[str, str]:
    out = {}
    if isinstance(tel, dict) and isinstance(tel.get("gpus"), dict):
        for uuid, g in tel["gpus"].items():
            if not isinstance(g, dict):
                continue
            bits = []
            for key, unit, scale in (
                (CLOCK_SM_MHZ, "MHz SM", 1),
                (POWER_MW, "W", 1e-3),
                (UTIL_GPU_PCT, "% busy", 1),
            ):
                v = g.get(key)
                if isinstance(v, dict) and isinstance(v.get("median"), (int, float)):
                    bits.append(f"{v['median'] * scale:.0f} {unit}")
            out[f"GPU {g.get('index', uuid)}"] = ", ".join(bits) or "no readings"
    return out


def separation(va: list[float], vb: list[float], higher_is_better: bool = False) -> float:
    """How far apart two sides' processes are: the fastest process of the slower side over the slowest
    process of the faster side, as a time ratio (> 1 when the sides do not overlap; <= 1 when they do)."""
    ta = [1 / v for v in va] if higher_is_better else list(va)
    tb = [1 / v for v in vb] if higher_is_better else list(vb)
    slow, fast = (tb, ta) if sorted(tb)[len(tb) // 2] >= sorted(ta)[len(ta) // 2] else (ta, tb)
    return min(slow) / max(fast)


def compare_values(
    va: list[float],
    vb: list[float],
    *,
    threshold: float = 0.05,
    higher_is_better: bool = False,
    name: str = "result",
) -> tuple[float | None, Comparison]:
    """One result's comparison: :func:`forensics.stats.compare` plus this module's rules.

    Adds the A/A noise floor (:func:`aa_noise`: alternate pairs of each side's processes), the note when
    Mann-Whitney U cannot reach alpha with these sample sizes, and the noise
    gate. Returns (noise floor or None, comparison).

    Raises:
        BadInputError: a side is empty or holds a non-positive value.
    """
    fa, fb = aa_noise(list(va)), aa_noise(list(vb))
    known = [f for f in (fa, fb) if f is not None]
    floor = max(known) if known else None
    try:
        cmp = compare(
            va, vb, threshold=threshold, higher_is_better=higher_is_better, noise_floor=floor
        )
    except ValueError as exc:
        raise BadInputError(f"result {name!r}: {exc}") from None
    floor_p = min_mwu_p(len(va), len(vb))
    if cmp.verdict is Verdict.INCONCLUSIVE and floor_p > cmp.alpha and min(len(va), len(vb)) >= 3:
        cmp.reasons = [r for r in cmp.reasons if not r.startswith("need about")]
        cmp.reasons.insert(
            0,
            f"with {len(va)}+{len(vb)} processes Mann-Whitney U cannot reach p <= "
            f"{cmp.alpha:g} (smallest possible p {floor_p:.3f}); run at least 5 a side "
            "(--processes 5; snapshot --bench-processes 5)",
        )
    noise = max(cmp.a.iqr_over_median, cmp.b.iqr_over_median)
    # The gate guards calls that noise could have made. When every process of the slower side is slower
    # than every process of the faster side by more than the threshold and the spread together, noise
    # cannot have made the call (a separated 9x slowdown was called "inconclusive" for its spread:
    # docs/bench.md, 'When the spread does not gate the call').
    # Likewise when the CI of the ratio (which the bootstrap already widens by the spread) excludes the
    # threshold by more than the spread: lower end above (1 + threshold)(1 + spread) for a slowdown, upper
    # end below 1 / ((1 + threshold)(1 + spread)) for a speed-up (a culprit's parent whose spread was
    # small against the effect was refused before: docs/bench.md, 'When the spread does not gate the call').
    # The spread of a handful of processes is itself uncertain (6+6 fully separated by one lucky draw can
    # show a 1.5x "effect" of a 1.1x change with 16% spread), so this needs CI_CLEAR_PROCESSES a side:
    # investigate's adaptive rounds get there while the call is undecided.
    margin = (1 + threshold) * (1 + noise)
    enough = min(len(va), len(vb)) >= CI_CLEAR_PROCESSES
    ci_clears = enough and (
        (cmp.verdict is Verdict.SLOWER and cmp.ci_low > margin)
        or (cmp.verdict is Verdict.FASTER and cmp.ci_high < 1 / margin)
    )
    clears = cmp.verdict in (Verdict.SLOWER, Verdict.FASTER) and (
        separation(va, vb, higher_is_better) > margin or ci_clears
    )
    if (
        (cmp.verdict in (Verdict.SLOWER, Verdict.FASTER) or cmp.verdict.small)
        and noise > NOISY
        and not clears
    ):
        cmp.verdict = Verdict.INCONCLUSIVE
        cmp.reasons.append(
            f"noisy: IQR/median {noise:.0%} across processes (> {NOISY:.0%}); a change is not "
            "called on noisy data"
        )
        if cmp.processes_needed > min(len(va), len(vb)):
            cmp.reasons.append(f"need about {cmp.processes_needed} processes a side")
    cmp.reasons = [
        more_processes_advice(r, cmp.processes_needed, user_step=name.startswith("user."))
        if r.startswith("need about")
        else r
        for r in cmp.reasons
    ]
    return floor, cmp


def method_changes(
    ra: dict[str, dict], rb: dict[str, dict], names: list[str], sides: tuple[str, str] = ("A", "B")
) -> list[str]:
    """Notes for results measured differently on the two sides (``method``: a CUDA graph replay against an
    eager launch, when an environment stopped graph capture, see :func:`forensics.bench.document.graph_note`).
    ``sides`` names them in the note ("BEFORE", "AFTER" in a diff)."""
    out = []
    for name in names:
        ma, mb = ra[name].get("method"), rb[name].get("method")
        if ma and mb and ma != mb:
            eager = rb[name] if mb == "eager" else ra[name]
            why = eager.get(
                "method_reason"
            ) or (  # bench files from before method_reason: the description's brackets
                str(eager.get("description", "")).partition("(")[2].rstrip(")")
                or "see its description"
            )
            out.append(
                f"{name}: measured as {ma} on {sides[0]} and {mb} on {sides[1]} ({why}); its change includes the kernel-launch "
                "time a CUDA graph replay hides, while the matmul, copy and all-reduce components are "
                "measured alike on both sides"
            )
    return out


def more_processes_advice(reason: str, needed: int, *, user_step: bool = False) -> str:
    """The "need about N processes a side (K more)" reason, with the flag that asks for them or, when N
    is out of reach, the better move (docs/inconclusive.md). ``user_step``: the result is the user's own
    step (``user.*``), so "benchmark your own step" is not offered."""
    if 0 < needed <= REACHABLE_PROCESSES:
        return (
            f"{reason}: run again with --processes {needed} (snapshot --bench-processes {needed})"
        )
    moves = "a quieter machine (nothing else on the GPUs or CPUs), a longer step (more work per timed block)"
    return (
        f"{reason}; that many (--processes) is more than is worth running: cut the noise instead - "
        + (f"{moves}" if user_step else f"{moves}, or your own step with --cmd")
        + "; see docs/inconclusive.md"
    )


def compare_docs(a: dict, b: dict, *, threshold: float = 0.05) -> BenchComparison:
    """Compare bench documents A (before) and B (after).

    Raises:
        BadInputError: the runs are not comparable (different canary sizes,
            canary vs user step) or share no result name.
    """
    _check_comparable(a, b)
    ra = {r["name"]: r for r in a["results"]}
    rb = {r["name"]: r for r in b["results"]}
    names = [r["name"] for r in a["results"] if r["name"] in rb]
    if not names:
        raise BadInputError(
            f"the two bench files share no result name (A: {', '.join(list(ra)[:4])}; B: "
            f"{', '.join(list(rb)[:4])}); nothing to compare: measure both with the same metric "
            "(--metric NAME)"
        )
    for (
        name
    ) in names:  # a time in ms against one in s, or two directions, would compare nothing real
        for key, default in (("unit", ""), ("higher_is_better", False)):
            x, y = ra[name].get(key, default), rb[name].get(key, default)
            if x != y:
                raise BadInputError(
                    f"result {name!r}: {key} is {json.dumps(x)} in A but {json.dumps(y)} in B; "
                    "the two runs are not comparable (measure both the same way)"
                )
    headline = names[0]
    out: dict[str, Comparison] = {}
    floors: dict[str, float | None] = {}
    for name in names:
        va, vb = ra[name]["process_medians"], rb[name]["process_medians"]
        floors[name], out[name] = compare_values(
            va,
            vb,
            threshold=threshold,
            higher_is_better=bool(ra[name].get("higher_is_better", False)),
            name=name,
        )
    head = out[headline]
    verdict = head.verdict
    notes: list[str] = []
    changes = throttle_changes(a.get("telemetry"), b.get("telemetry"))
    notes.extend(f"throttle changed: {c}" for c in changes)
    notes.extend(method_changes(ra, rb, names))
    if changes and verdict is Verdict.SAME:
        verdict = head.verdict = Verdict.INCONCLUSIVE
        head.reasons.append(
            "GPU throttling differed between the runs (see the notes); it may hide a change"
        )
    fp_a, fp_b = foreign_processes(a), foreign_processes(b)
    for side, fp in (("A", fp_a), ("B", fp_b)):
        for gpu, procs in fp.items():
            notes.append(f"contention on {side}: {gpu} also ran {', '.join(procs[:5])}")
    for side, doc in (("A", a), ("B", b)):
        tel = doc.get("telemetry")
        if isinstance(tel, dict) and "missing" in tel:
            notes.append(f"no GPU telemetry on {side}: {tel.get('detail') or tel.get('missing')}")
        elif telemetry_problem(tel):
            notes.append(
                f"GPU telemetry on {side} ignored: {telemetry_problem(tel)} (the file was edited or "
                "damaged); throttling not compared"
            )
    pointing = []
    if verdict in (Verdict.SLOWER, Verdict.FASTER):
        pointing = [
            n
            for n in names
            if n != headline and ra[n].get("kind") == "component" and out[n].verdict is verdict
        ]
    tel = {"A": _gpu_line(a.get("telemetry")), "B": _gpu_line(b.get("telemetry"))}
    return BenchComparison(headline, verdict, out, pointing, notes, floors[headline], tel)
