"""Benchmark results in two snapshots: compare them and say what the effect points at.

``snapshot["bench"]`` is ``null`` or ``{"schema": "forensics.bench/1", "results":
[{"name", "kind": "canary"|"component"|"user", "unit", "higher_is_better",
"process_medians": [one float per fresh process]}], "telemetry": {...}}``.
Results with the same ``name`` on both sides are compared with
:func:`forensics.bench.compare.compare_values`: :func:`forensics.stats.compare`
(Mann-Whitney U on per-process medians, bootstrap CI of the ratio) plus the
bench's own rules (A/A noise floor, no call on noisy data, too few processes);
a BEFORE result that is a figure the user remembers (``remembered``, one value:
``investigate --expect``) with :func:`forensics.stats.compare_to_figure`.

The canary and its component probes (matmul, all-reduce, copies) are fixed
code, so (DESIGN section 7):

Slower means measured slower at all: ``slower`` (beyond the threshold) or
``small-slower`` (a small real change: CI excludes 1, below the threshold;
:attr:`BenchEffect.small` says every slowdown was small).

- canary or a component slower -> the environment changed (``environment``);
- the user's step slower while the canary is the same -> the cause is in what
  only the user's step runs: their code, or a library only it uses (``code``);
- the user's step slower and no canary on both sides -> ``unattributed``;
- nothing slower -> ``none``; a comparison that could not decide -> noted.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any, Mapping

from forensics.errors import BadInputError
from forensics.stats import Comparison, Verdict, compare_to_figure

ENVIRONMENT_KINDS = ("canary", "component")
"""Result kinds measured by forensics' own fixed code: a change there is the environment's."""


class Pointer(str, enum.Enum):
    """Where a measured slowdown points."""

    NONE = "none"  # nothing measured slower
    ENVIRONMENT = "environment"  # the canary slowed down
    CODE = "code"  # only the user's step slowed; the canary did not
    UNATTRIBUTED = "unattributed"  # something slowed; no canary to tell which side


@dataclass
class BenchResult:
    """One benchmark result name, both sides.

    Attributes:
        before, after: per-process medians (``unit``), ``None`` when that side lacks it.
        comparison: the statistics, ``None`` when a side lacks the result or its data is unusable.
        note: why there is no comparison, or how the two sides measured it differently ("" otherwise).
    """

    name: str
    kind: str
    unit: str
    higher_is_better: bool
    before: list[float] | None
    after: list[float] | None
    comparison: Comparison | None
    note: str = ""

    @property
    def slower(self) -> bool:
        """Measured slower beyond the practical threshold (what ``--fail-on regression`` gates on)."""
        return self.comparison is not None and self.comparison.verdict is Verdict.SLOWER

    @property
    def moved(self) -> bool:
        """Measured slower at all: beyond the threshold, or a small real change (CI excludes 1)."""
        return self.comparison is not None and self.comparison.verdict.slower_at_all

    @property
    def small(self) -> bool:
        """A small real slowdown: significant, beyond the A/A noise, below the threshold."""
        return self.comparison is not None and self.comparison.verdict is Verdict.SMALL_SLOWER

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "before": self.before,
            "after": self.after,
            "comparison": self.comparison.to_json() if self.comparison else None,
            "note": self.note,
        }


@dataclass
class BenchEffect:
    """All compared results and where the measured effect points.

    Attributes:
        ratio: the largest time ratio among results measured slower (``slower`` or
            ``small-slower``; > 1), 1.0 when none.
        small: every result measured slower is a small real change (below the threshold).
    """

    results: list[BenchResult]
    pointer: Pointer
    sentence: str
    ratio: float = 1.0
    small: bool = False

    def moved(self, name: str) -> bool:
        """Result ``name`` was measured slower (at all); False when absent or not compared."""
        return any(r.name == name and r.moved for r in self.results)

    def same(self, name: str) -> bool:
        """Result ``name`` was compared and measured ``same`` (or faster)."""
        return any(
            r.name == name
            and r.comparison is not None
            and (r.comparison.verdict is Verdict.SAME or r.comparison.verdict.faster_at_all)
            for r in self.results
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "results": [r.to_json() for r in self.results],
            "points_at": self.pointer.value,
            "sentence": self.sentence,
            "max_slowdown_ratio": self.ratio,
            "small_change": self.small,
        }


def _results(snapshot: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    bench = snapshot.get("bench")
    if not isinstance(bench, dict) or not isinstance(bench.get("results"), list):
        return {}
    return {str(r["name"]): r for r in bench["results"] if isinstance(r, dict) and r.get("name")}


def _medians(result: Mapping[str, Any] | None) -> list[float] | None:
    if result is None:
        return None
    xs = result.get("process_medians")
    if not isinstance(xs, list):
        return None
    try:
        return [float(x) for x in xs]
    except (TypeError, ValueError):
        return None


def remembered_figure(result: Mapping[str, Any] | None) -> float | None:
    """The value of a result that is a figure the user remembers (``remembered``: where it came from, such as
    ``--expect 19ms``, with one value in ``process_medians``), else None."""
    if not result or not result.get("remembered"):
        return None
    xs = _medians(result)
    return xs[0] if xs is not None and len(xs) == 1 else None


def compare_bench(before: Mapping[str, Any], after: Mapping[str, Any]) -> BenchEffect | None:
    """Compare matching benchmark results of two snapshots.

    Returns:
        ``None`` when neither snapshot carries benchmark results, else a
        :class:`BenchEffect` (results in BEFORE's order, then AFTER's new ones).
    """
    rb, ra = _results(before), _results(after)
    if not rb and not ra:
        return None
    out: list[BenchResult] = []
    for name in list(rb) + [n for n in ra if n not in rb]:
        meta = rb.get(name) or ra.get(name) or {}
        hib = bool(meta.get("higher_is_better", False))
        xb, xa = _medians(rb.get(name)), _medians(ra.get(name))
        res = BenchResult(
            name, str(meta.get("kind", "user")), str(meta.get("unit", "")), hib, xb, xa, None
        )
        if xb is None or xa is None:
            res.note = f"measured only in {'AFTER' if xb is None else 'BEFORE'}; nothing to compare"
        else:
            from forensics.bench.compare import compare_values, method_changes

            figure = remembered_figure(rb.get(name))
            try:
                if figure is not None:  # one value the user remembers, not a side of processes
                    res.comparison = compare_to_figure(figure, xa, higher_is_better=hib)
                else:
                    res.comparison = compare_values(xb, xa, higher_is_better=hib, name=name)[1]
            except BadInputError as exc:
                res.note = f"not comparable: {exc}"
            except ValueError as exc:
                res.note = f"not comparable: result {name!r}: {exc}"
            else:
                res.note = " ".join(method_changes(rb, ra, [name], ("BEFORE", "AFTER")))
        out.append(res)
    return _interpret(out)


def _interpret(results: list[BenchResult]) -> BenchEffect:
    canary = [r for r in results if r.kind in ENVIRONMENT_KINDS and r.comparison is not None]
    others = [r for r in results if r.kind not in ENVIRONMENT_KINDS and r.comparison is not None]
    slower = [r for r in results if r.moved]
    # The headline ratio is a step's (the canary's verify step or the user's), not a component's:
    # a 6x slower all-reduce bus bandwidth inside a 2x slower step is a 2x slowdown.
    steps = [r for r in slower if r.kind != "component"] or slower
    ratio = max((r.comparison.time_ratio for r in steps), default=1.0)  # type: ignore[union-attr]
    small = bool(slower) and not any(r.slower for r in steps)
    if any(r.moved for r in canary):
        env_slow = [r for r in canary if r.moved]
        worst = max(
            [r for r in env_slow if r.kind == "canary"] or env_slow,
            key=lambda r: r.comparison.time_ratio,
        )  # type: ignore[union-attr]
        what = "the canary" if worst.kind == "canary" else "the canary's component"
        how = f" ({worst.note})" if worst.note else ""
        return BenchEffect(
            results,
            Pointer.ENVIRONMENT,
            f"{what} {worst.name} is {worst.comparison.sentence()}: the environment changed, "  # type: ignore[union-attr]
            f"since forensics' own benchmark code did not{how}",
            ratio,
            small,
        )
    user_slow = [r for r in others if r.moved]
    if user_slow:
        worst = max(user_slow, key=lambda r: r.comparison.time_ratio)  # type: ignore[union-attr]
        what = f"{worst.name} is {worst.comparison.sentence()}"  # type: ignore[union-attr]
        # No canary result is slower here (that returned above). The verify step itself decides: a
        # component it does not time (say host-to-device copies) being inconclusive does not make
        # the environment a suspect for this step, but the sentence names it.
        steps_same = [r for r in canary if r.kind == "canary"]
        gap = worst.comparison.time_ratio - 1  # type: ignore[union-attr]
        if steps_same and all(_flat_beside(r.comparison, gap) for r in steps_same):  # type: ignore[arg-type]
            open_parts = [r.name for r in canary if r.comparison.verdict is Verdict.INCONCLUSIVE]  # type: ignore[union-attr]
            caveat = (
                (
                    f" ({', '.join(open_parts)} inconclusive: more processes would rule "
                    f"{'it' if len(open_parts) == 1 else 'them'} out)"
                )
                if open_parts
                else ""
            )
            return BenchEffect(
                results,
                Pointer.CODE,
                f"{what}, while the canary's verify step did not change{caveat}: the cause is in what "
                "only the user's step runs (its code or a library only it uses)",
                ratio,
                small,
            )
        tail = (
            "the canary was inconclusive"
            if canary
            else "no canary on both sides to tell environment from code"
        )
        return BenchEffect(results, Pointer.UNATTRIBUTED, f"{what}; {tail}", ratio, small)
    faster = [r for r in results if r.comparison is not None and r.comparison.verdict.faster_at_all]
    undecided = [
        r
        for r in results
        if r.comparison is not None and r.comparison.verdict is Verdict.INCONCLUSIVE
    ]
    if faster or undecided:
        parts = ["no result measured slower"]
        if faster:
            env = any(r.kind in ENVIRONMENT_KINDS for r in faster)
            parts.append(
                "faster: "
                + "; ".join(f"{r.name} {r.comparison.sentence()}" for r in faster)  # type: ignore[union-attr]
                + (
                    " (forensics' own benchmark code did not change: the environment did)"
                    if env
                    else ""
                )
            )
        if undecided:
            parts.append(
                "inconclusive: " + ", ".join(r.name for r in undecided) + " (see the table)"
            )
        return BenchEffect(results, Pointer.NONE, "; ".join(parts), 1.0)
    if not any(r.comparison is not None for r in results):
        return BenchEffect(
            results, Pointer.NONE, "no benchmark result was measured on both sides", 1.0
        )
    compared = [r.comparison for r in results if r.comparison is not None]
    # every process gave one value on each side: there is no noise to be beyond
    if all(c.exact for c in compared):
        if all(math.isclose(c.time_ratio, 1.0, rel_tol=1e-9) for c in compared):
            return BenchEffect(
                results,
                Pointer.NONE,
                "no benchmark result moved: each process gave exactly the same value on both sides",
                1.0,
            )
        return BenchEffect(
            results,
            Pointer.NONE,
            "no benchmark result moved beyond the threshold (exact: each side's processes gave one value)",
            1.0,
        )
    return BenchEffect(results, Pointer.NONE, "no benchmark result moved beyond the noise", 1.0)


def _flat_beside(c: Comparison, gap: float) -> bool:
    """The canary did not move while a user step slowed by ``gap`` (a fraction).

    ``same`` or faster; or not measured slower and its CI's upper end rules out
    even half of the user's slowdown (a noisy canary still tells a 30% code
    slowdown from an environment one).
    """
    if c.verdict is Verdict.SAME or c.verdict.faster_at_all:
        return True
    return not c.verdict.slower_at_all and (c.ci_high - 1) < gap / 2


def effect_size(ratio: float) -> float:
    """A bounded weight for a time ratio: 0 for no change, up to 2 for >= 3x."""
    if not math.isfinite(ratio) or ratio <= 1:
        return 0.0
    return min(ratio - 1.0, 2.0)
