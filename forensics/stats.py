"""Benchmark statistics: one module, every test named (DESIGN section 7).

The unit of evidence is the **per-process median** (blocks inside one process
are correlated; fresh processes are the independent samples). Given the
per-process medians of side A (before/good) and side B (after/candidate):

- effect: ratio of medians expressed as a *time ratio* ``B/A`` (for
  higher-is-better metrics such as tok/s, ``A/B``), so > 1 always means slower;
- 95% confidence interval of that ratio: percentile bootstrap, resampling
  processes within each side (``n_boot`` resamples, fixed seed: reproducible);
- significance: two-sided Mann-Whitney U on the process medians
  (the p-value of ``scipy.stats.mannwhitneyu``, computed here: :func:`mwu_p`), alpha 0.01: exact for
  small samples, and exact over every split (a permutation test) when values tie, where scipy would
  fall back to the normal
  approximation (5+5 fully separated processes with one tie: p=0.012 instead of the exact 0.0079,
  above alpha, so even a large change could not be called); see :func:`mwu_p`;
- practical threshold (default 5%): a change smaller than that is ``same``;
- noise: IQR/median of each side's process medians, and the number of
  processes the observed spread needs to resolve half the threshold
  (``ceil(4 * 1.96^2 * cv^2 / W^2)``, pyperf's rule).

Verdicts (three-way: no change, a small real change, a change beyond the threshold):

- ``slower`` / ``faster``: p <= alpha, the CI excludes 1, and the point effect
  is beyond the threshold (and beyond twice the A/A noise floor when one is given);
- ``small-slower`` / ``small-faster`` (a *small real change*): p <= alpha, the CI
  excludes 1, the effect is beyond twice the A/A noise floor but below the
  threshold. It is real, reported with its CI, and does not fail the threshold;
- ``same``: not significant and the whole CI lies inside the noise band,
  ``max(2 x A/A noise floor, 1%)`` (never wider than the threshold): a CI that
  reaches beyond it could hide a small real change, so it is not ``same``;
- anything else is ``inconclusive`` with a reason. Too few processes (< 3 a
  side) is always ``inconclusive``, never "significant".

Against a **remembered figure** (one value the user gives, ``investigate --expect 19ms``; not a side of
processes) :func:`compare_to_figure` takes no rank test: the CI is the bootstrap of today's median over the
figure, and ``slower`` / ``faster`` / ``same`` are read from it and the threshold alone.
"""

from __future__ import annotations

import enum
import itertools
import math
import sys
from dataclasses import dataclass, field
from typing import Sequence

MIN_PROCESSES = 3
DEFAULT_ALPHA = 0.01
MWU_TEST = "Mann-Whitney U (two-sided) on per-process medians; bootstrap CI of the ratio of medians"
FIGURE_TEST = "today's median over the remembered figure (one value: no rank test); bootstrap CI over today's processes"
DEFAULT_THRESHOLD = 0.05
MIN_NOISE_BAND = 0.01
REACHABLE_PROCESSES = 50
"""More fresh processes a side than this (:attr:`Comparison.processes_needed`) is no advice worth giving:
fix the noise instead. Read by ``bench compare``'s and bisect's advice."""
"""``same`` needs the CI inside +-max(2 x A/A floor, this): 1%, the size of real nightly-to-nightly regressions."""


class Verdict(str, enum.Enum):
    """Outcome of comparing two sides."""

    SLOWER = "slower"
    FASTER = "faster"
    SAME = "same"
    INCONCLUSIVE = "inconclusive"
    SMALL_SLOWER = (
        "small-slower"  # real (CI excludes 1, p <= alpha) but below the practical threshold
    )
    SMALL_FASTER = "small-faster"

    @property
    def small(self) -> bool:
        """A small real change: significant, beyond the noise, below the threshold."""
        return self in (Verdict.SMALL_SLOWER, Verdict.SMALL_FASTER)

    @property
    def slower_at_all(self) -> bool:
        """``slower`` or ``small-slower``: B measured slower, whatever the size."""
        return self in (Verdict.SLOWER, Verdict.SMALL_SLOWER)

    @property
    def faster_at_all(self) -> bool:
        """``faster`` or ``small-faster``."""
        return self in (Verdict.FASTER, Verdict.SMALL_FASTER)


@dataclass
class Summary:
    """Robust summary of one side's per-process medians (same unit as the input)."""

    n: int
    median: float
    q1: float
    q3: float
    minimum: float
    maximum: float
    iqr_over_median: float  # the noise figure, as a fraction

    def to_json(self) -> dict:
        return dict(self.__dict__)


SAME_MEASUREMENTS = "the same measurements on both sides"
"""The reason of a ``same`` verdict whose two sides hold the very same values (a file compared with
itself): it says nothing of a noise band, which such sides, however noisy, do not need."""


@dataclass
class Comparison:
    """Result of :func:`compare`; ``time_ratio`` > 1 means B is slower than A."""

    verdict: Verdict
    time_ratio: float
    ci_low: float
    ci_high: float
    p_value: (
        float | None
    )  # None: no rank test (against a remembered figure, :func:`compare_to_figure`)
    threshold: float
    alpha: float
    a: Summary
    b: Summary
    higher_is_better: bool = False
    reasons: list[str] = field(default_factory=list)
    processes_needed: int = 0
    noise_band: float = DEFAULT_THRESHOLD
    test: str = MWU_TEST  # how the call was made; FIGURE_TEST (``p_value`` None) against a remembered figure

    @property
    def exact(self) -> bool:
        """Every process on each side gave one value (a remembered figure is one value): the ratio is exact,
        its CI a point, and there is no noise to speak of (``minimum == maximum`` of both summaries)."""
        return self.a.minimum == self.a.maximum and self.b.minimum == self.b.maximum

    @property
    def change_pct(self) -> float:
        """Signed change of step time in percent (+ = slower)."""
        return (self.time_ratio - 1.0) * 100.0

    def sentence(self) -> str:
        """One line: "1.12x slower (95% CI 1.09-1.15, p=0.0002, Mann-Whitney U)". A change called faster
        gives its factor and CI in the same terms ("1.27x faster (95% CI 1.23-1.39 ...)": the inverse of
        the time ratio's CI), never a speed-up factor beside a time ratio's interval."""
        ci = f"95% CI {self.ci_low:.3f}-{self.ci_high:.3f}"
        if self.verdict.faster_at_all:
            ci = f"95% CI {1 / self.ci_high:.3f}-{1 / self.ci_low:.3f}"
        p = f"p={self.p_value:.2g}" if self.p_value is not None else ""
        if self.verdict is Verdict.SLOWER:
            head = f"{self.time_ratio:.3f}x slower"
        elif self.verdict is Verdict.FASTER:
            head = f"{1 / self.time_ratio:.3f}x faster"
        elif self.verdict is Verdict.SMALL_SLOWER:
            head = (
                f"a small real change: {self.time_ratio:.3f}x slower "
                f"({self.change_pct:+.1f}%, below the {self.threshold:.0%} threshold)"
            )
        elif self.verdict is Verdict.SMALL_FASTER:
            head = (
                f"a small real change: {1 / self.time_ratio:.3f}x faster "
                f"({self.change_pct:+.1f}%, below the {self.threshold:.0%} threshold)"
            )
        elif self.verdict is Verdict.SAME and self.exact and math.isclose(self.time_ratio, 1.0):
            if self.p_value is None:  # every process of today gave the figure itself
                return f"the same value: each of today's {self.b.n} processes gave the figure you remember"
            return (
                f"no change: each process gave the same value on both sides ({p}, Mann-Whitney U, "
                f"n={self.a.n}+{self.b.n})"
            )
        elif self.verdict is Verdict.SAME and SAME_MEASUREMENTS in self.reasons:
            # the CI can be wide here: the sides are equal, not known to be equal within a band
            head = f"no change: {SAME_MEASUREMENTS}"
        elif self.verdict is Verdict.SAME and self.p_value is None:
            head = f"within {self.threshold:.0%} of it (ratio {self.time_ratio:.3f})"
        elif self.verdict is Verdict.SAME:
            head = f"no change beyond the noise (ratio {self.time_ratio:.3f}, CI within +-{self.noise_band:.1%})"
        else:
            head = f"ratio {self.time_ratio:.3f}, not decided"
        tail = (
            f" - {'; '.join(self.reasons)}"
            if self.reasons and self.verdict is Verdict.INCONCLUSIVE
            else ""
        )
        if self.p_value is None:  # one remembered value: today's processes against it
            return f"{head} ({ci} over today's {self.b.n} processes, against the figure you remember){tail}"
        return f"{head} ({ci}, {p}, Mann-Whitney U, n={self.a.n}+{self.b.n}){tail}"

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict.value,
            "time_ratio": self.time_ratio,
            "change_pct": self.change_pct,
            "ci95": [self.ci_low, self.ci_high],
            "p_value": self.p_value,
            "test": self.test,
            "threshold": self.threshold,
            "alpha": self.alpha,
            "higher_is_better": self.higher_is_better,
            "a": self.a.to_json(),
            "b": self.b.to_json(),
            "reasons": list(self.reasons),
            "processes_needed": self.processes_needed,
            "noise_band": self.noise_band,
            "sentence": self.sentence(),
        }


def _quantile(sorted_x: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted data (numpy's default method)."""
    if not sorted_x:
        return math.nan
    pos = (len(sorted_x) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_x[lo] + (sorted_x[hi] - sorted_x[lo]) * (pos - lo)


def summarize(values: Sequence[float]) -> Summary:
    """Median, quartiles, range and IQR/median of ``values``.

    Raises:
        ValueError: ``values`` is empty.
    """
    xs = sorted(float(v) for v in values)
    if not xs:
        raise ValueError("no values to summarise")
    med = _quantile(xs, 0.5)
    q1, q3 = _quantile(xs, 0.25), _quantile(xs, 0.75)
    return Summary(len(xs), med, q1, q3, xs[0], xs[-1], (q3 - q1) / med if med else math.inf)


def cv_robust(values: Sequence[float]) -> float:
    """Robust coefficient of variation: IQR / 1.349 / median (equals sd/mean for normal data)."""
    s = summarize(values)
    return (s.q3 - s.q1) / 1.349 / s.median if s.median else math.inf


def processes_needed(values_a: Sequence[float], values_b: Sequence[float], threshold: float) -> int:
    """Processes per side needed to resolve half the threshold at 95% (pyperf's rule)."""
    cv = (
        max(cv_robust(values_a), cv_robust(values_b))
        if len(values_a) > 1 and len(values_b) > 1
        else math.inf
    )
    if not math.isfinite(cv):
        return 0
    w = threshold / 2
    return max(MIN_PROCESSES, math.ceil(4 * 1.96**2 * cv**2 / w**2))


def bootstrap_ratio_ci(
    a: Sequence[float],
    b: Sequence[float],
    *,
    n_boot: int = 4000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap CI of ``median(b) / median(a)``, resampling each side.

    Uses numpy with a fixed seed, so the same input gives the same interval.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ia = rng.integers(0, len(xa), size=(n_boot, len(xa)))
    ib = rng.integers(0, len(xb), size=(n_boot, len(xb)))
    ratios = np.median(xb[ib], axis=1) / np.median(xa[ia], axis=1)
    lo, hi = np.quantile(ratios, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


EXACT_SPLITS_MAX = 20000
"""Above this many ways to split the pooled processes (C(n1+n2, n1); 7+7 is 3,432, 8+8 is 12,870),
tied samples use the normal approximation: with that many processes it is close."""

_PERMUTATION_RTOL = sys.float_info.epsilon * 100
"""Relative tolerance under which a split's U counts as equal to the observed U (floating-point
rank sums of tied values), as ``scipy.stats.permutation_test`` takes it."""


def mwu_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value of per-process medians ``a`` and ``b``.

    The p-value ``scipy.stats.mannwhitneyu(a, b)`` gives, except that ties are handled exactly: scipy's
    ``method="auto"`` is exact only without ties, and with a tie (two processes printing the same
    rounded time, common for a step timed to 4-5 digits) it switches to the normal approximation,
    conservative at these sample sizes. So:

    - no tie, and one side of at most 8: the exact null distribution of U (every split of the ranks
      1..n1+n2 counted), ``p = 2 P(U >= max(U1, U2))``;
    - a tie, and at most :data:`EXACT_SPLITS_MAX` splits: every split of the pooled values enumerated
      (the exact permutation test, as scipy's ``PermutationMethod`` with as many resamples as splits),
      ``p = 2 min(P(U <= U1), P(U >= U1))``;
    - otherwise the normal approximation with the tie correction and the continuity correction.

    Written here rather than called from scipy because ``import scipy.stats`` costs about 0.5 s of a
    process's start (docs/benchmarks.md, 'diff'), every ``diff``, ``bench compare`` and ``investigate``
    paid it for one p-value; tests/bench/test_mwu.py checks every branch against scipy.
    """
    import numpy as np

    xa, xb = [float(v) for v in a], [float(v) for v in b]
    n1, n2 = len(xa), len(xb)
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney U needs a value on each side")
    pooled = np.asarray(xa + xb)
    ranks, counts = _average_ranks(pooled)
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
    u = max(u1, n1 * n2 - u1)
    tied = bool((counts > 1).any())
    if tied and math.comb(n1 + n2, n1) <= EXACT_SPLITS_MAX:
        pick = np.fromiter(
            itertools.chain.from_iterable(itertools.combinations(range(n1 + n2), n1)),
            dtype=np.intp,
        ).reshape(-1, n1)
        null = ranks[pick].sum(axis=1) - n1 * (n1 + 1) / 2
        gamma = abs(_PERMUTATION_RTOL * u1)
        less, greater = np.mean(null <= u1 + gamma), np.mean(null >= u1 - gamma)
        return float(min(1.0, 2 * min(less, greater)))
    if not tied and min(n1, n2) <= 8:
        return float(min(1.0, 2 * _u_exact_sf(round(u), n1, n2)))
    n = n1 + n2
    spread = n1 * n2 / 12 * ((n + 1) - float((counts**3 - counts).sum()) / (n * (n - 1)))
    if spread <= 0:  # every value the same: nothing tells the sides apart
        return 1.0
    z = (u - n1 * n2 / 2 - 0.5) / math.sqrt(spread)
    return float(min(1.0, math.erfc(z / math.sqrt(2))))  # 2 x the normal survival at z


def _average_ranks(x):
    """Ranks 1..n of the 1-D array ``x``, tied values sharing their average rank; and the size of each
    group of equal values (ones where nothing ties). Both numpy arrays."""
    import numpy as np

    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    counts = np.diff(np.r_[starts, len(xs)])
    average = starts + (counts + 1) / 2  # 1-based: the mean of ranks start+1 .. start+count
    ranks = np.empty(len(x))
    ranks[order] = np.repeat(average, counts)
    return ranks, counts


def _u_exact_sf(u: int, n1: int, n2: int) -> float:
    """P(U >= u) under the null for samples of ``n1`` and ``n2`` without ties: the share of the
    n1-subsets of the ranks 1..n1+n2 whose rank sum minus n1(n1+1)/2 is at least ``u``."""
    import numpy as np

    n = n1 + n2
    top = n1 * n2
    ways = np.zeros((n1 + 1, top + 1))  # ways[k, s]: k of the ranks seen so far, their U-sum s
    ways[0, 0] = 1.0
    for r in range(n):  # rank r + 1 adds r - (k - 1) to U when it is the k-th one picked
        for k in range(min(r + 1, n1), 0, -1):
            shift = r - (k - 1)
            if 0 <= shift <= top:
                ways[k, shift:] += ways[k - 1, : top + 1 - shift]
    return float(ways[n1, max(u, 0) :].sum() / math.comb(n, n1))


def compare(
    a: Sequence[float],
    b: Sequence[float],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    higher_is_better: bool = False,
    noise_floor: float | None = None,
    n_boot: int = 4000,
    seed: int = 0,
    min_band: float = MIN_NOISE_BAND,
) -> Comparison:
    """Compare per-process medians of side A (before) and side B (after).

    Args:
        a, b: one value per fresh process (ms, or tok/s when ``higher_is_better``).
        threshold: practical threshold as a fraction (0.05 = 5%).
        alpha: significance level of the Mann-Whitney U test.
        higher_is_better: the metric is a throughput; ratios are inverted so
            ``time_ratio`` > 1 still means slower.
        noise_floor: |ratio - 1| measured in an A/A check of the same session;
            an effect must exceed twice it.
        min_band: the narrowest noise band ``same`` is judged against (a
            fraction; the band is ``max(2 x noise_floor, min_band)``, at most
            ``threshold``). ``forensics bisect`` passes its threshold: it asks
            whether two commits differ by that much, not whether they are equal.

    Returns:
        a :class:`Comparison`. Never raises for noisy or small data: that is
        an ``inconclusive`` verdict with reasons.

    Raises:
        ValueError: a side is empty or holds a non-positive or non-finite value.
    """
    for side, xs in (("before", a), ("after", b)):
        if len(xs) == 0:
            raise ValueError(f"no measurements on the {side} side")
        if any((not math.isfinite(x)) or x <= 0 for x in xs):
            raise ValueError(f"the {side} side holds a non-positive or non-finite value")
    sa, sb = summarize(a), summarize(b)
    ratio = sb.median / sa.median
    lo, hi = bootstrap_ratio_ci(a, b, n_boot=n_boot, seed=seed)
    p = mwu_p(a, b) if (len(a) > 1 or len(b) > 1) else 1.0
    if higher_is_better:
        ratio, lo, hi = 1 / ratio, 1 / hi, 1 / lo
    reasons: list[str] = []
    needed = processes_needed(a, b, threshold)
    band = min(max(2 * noise_floor if noise_floor is not None else 0.0, min_band), threshold)
    verdict = Verdict.INCONCLUSIVE
    if len(a) < MIN_PROCESSES or len(b) < MIN_PROCESSES:
        reasons.append(
            f"too few processes ({len(a)} and {len(b)}; at least {MIN_PROCESSES} a side)"
        )
    elif sorted(a) == sorted(b):
        # the very same measurements (a file compared with itself): nothing changed, however noisy they are
        verdict = Verdict.SAME
        reasons.append(SAME_MEASUREMENTS)
    else:
        effect = abs(ratio - 1)
        in_noise = noise_floor is not None and effect <= 2 * noise_floor
        if in_noise:
            reasons.append(
                f"effect {effect:.1%} within twice the A/A noise floor ({noise_floor:.1%})"
            )
        significant = p <= alpha and (lo > 1 or hi < 1)
        if significant and not in_noise:
            if effect >= threshold:
                verdict = Verdict.SLOWER if ratio > 1 else Verdict.FASTER
            else:
                verdict = Verdict.SMALL_SLOWER if ratio > 1 else Verdict.SMALL_FASTER
        elif (not significant or in_noise) and lo >= 1 / (1 + band) and hi <= 1 + band:
            verdict = Verdict.SAME
        else:
            if not significant:
                reasons.append(
                    f"not significant (p={p:.2g} > {alpha:g}) and the CI ({lo:.3f}-{hi:.3f}) reaches "
                    f"beyond the +-{band:.1%} noise band: a change of that size is not ruled out"
                )
            noisy = max(sa.iqr_over_median, sb.iqr_over_median)
            if noisy > 0.10:
                reasons.append(f"noisy: IQR/median {noisy:.0%} across processes")
            if needed > min(len(a), len(b)):
                reasons.append(
                    f"need about {needed} processes a side ({needed - min(len(a), len(b))} more)"
                )
    return Comparison(
        verdict, ratio, lo, hi, p, threshold, alpha, sa, sb, higher_is_better, reasons, needed, band
    )


def compare_to_figure(
    figure: float,
    values: Sequence[float],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    higher_is_better: bool = False,
    n_boot: int = 4000,
    seed: int = 0,
) -> Comparison:
    """Today's per-process medians ``values`` against one remembered value ``figure`` (side A).

    A figure is not a sample of processes, so no rank test is made (``p_value`` None, ``test``
    :data:`FIGURE_TEST`) and "too few processes" does not apply: the CI is the percentile bootstrap of
    ``median(values) / figure`` over ``values`` (exact, one point, when every process gave the same value).
    ``slower``: the CI's low end above 1 and the ratio beyond the threshold (``faster`` likewise); ``same``:
    the whole CI within the threshold (``noise_band`` is the threshold); anything else ``inconclusive``, the
    reason saying that more processes now would narrow the CI.

    Raises:
        ValueError: ``values`` is empty, or a value or the figure is non-positive or non-finite.
    """
    if len(values) == 0:
        raise ValueError("no measurements on the after side")
    if any((not math.isfinite(x)) or x <= 0 for x in [figure, *values]):
        raise ValueError("a non-positive or non-finite value")
    sa, sb = summarize([figure]), summarize(values)
    ratio = sb.median / figure
    lo, hi = bootstrap_ratio_ci([figure], values, n_boot=n_boot, seed=seed)
    if higher_is_better:
        ratio, lo, hi = 1 / ratio, 1 / hi, 1 / lo
    reasons: list[str] = []
    if lo > 1 and ratio >= 1 + threshold:
        verdict = Verdict.SLOWER
    elif hi < 1 and ratio <= 1 / (1 + threshold):
        verdict = Verdict.FASTER
    elif hi < 1 + threshold and lo > 1 / (1 + threshold):
        verdict = Verdict.SAME
    else:
        verdict = Verdict.INCONCLUSIVE
        reasons.append(
            f"the CI of today's median over the figure ({lo:.3f}-{hi:.3f}) reaches across the "
            f"{threshold:.0%} threshold: more processes now would narrow it"
        )
    return Comparison(
        verdict,
        ratio,
        lo,
        hi,
        None,
        threshold,
        DEFAULT_ALPHA,
        sa,
        sb,
        higher_is_better,
        reasons,
        0,
        threshold,
        FIGURE_TEST,
    )
