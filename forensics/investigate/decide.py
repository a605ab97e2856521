"""The confirm / refute rule of ``forensics investigate`` (docs/investigate.md, "When is a cause confirmed").

An experiment is an interleaved A/B in fresh processes: side A is the step as it
is today, side B the same step with one intervention (a variable restored to the
baseline's value, the suspect commit's parent, an older package). The two sides
are compared exactly as ``forensics bench compare`` does
(:func:`forensics.bench.compare.compare_values`: Mann-Whitney U on per-process
medians, alpha 0.01; percentile bootstrap 95% CI of the ratio of medians; A/A
noise floor from each side's alternate pairs of processes; practical threshold, 5% by
default; no call on a side whose IQR/median exceeds 10%).

The **share recovered** is ``(today - intervention) / (today - baseline)`` on
the medians, where *baseline* is the baseline snapshot's measurement of the same
result (for throughputs the same on ``1 / value``, so it is always a share of
the lost time). Its 95% interval is a percentile bootstrap resampling the
processes of the baseline, today and the intervention independently.

:func:`decide`:

- **confirmed**: B significantly *faster* than A (``faster``, or ``small-faster``
  inside the threshold: p <= alpha, CI excludes 1, beyond twice the A/A noise
  floor, not noisy) **and** the lower end of the share's 95% interval is at
  least ``min_share`` (default 50%);
- **partial**: B significantly faster, but the share's upper end is below
  ``min_share``: a contributing cause, not the explanation;
- **refuted**: B the same as A (``same``: not significant and the whole CI
  inside the noise band, ``max(2 x A/A floor, 1%)``) with the share's upper end
  below ``min_share``; or B not significantly faster and the share's upper end
  below ``refute_share`` (20%: it cannot account for more than a fifth of the
  slowdown); or B significantly *slower*;
- **inconclusive** otherwise, with the reason and how many processes the noise
  needs. Without a baseline measurement of the subject nothing is confirmed: the
  share cannot be said.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from forensics.investigate.model import Outcome, Share
from forensics.stats import Comparison, Verdict

DEFAULT_MIN_SHARE = 0.5
REFUTE_SHARE = 0.2
N_BOOT = 4000


def _time_like(xs: Sequence[float], higher_is_better: bool) -> list[float]:
    return [1.0 / x for x in xs] if higher_is_better else [float(x) for x in xs]


def share_recovered(
    baseline: Sequence[float] | None,
    today: Sequence[float],
    a: Sequence[float],
    b: Sequence[float],
    *,
    higher_is_better: bool = False,
    today_is_a: bool = True,
    seed: int = 0,
) -> Share:
    """The share of the slowdown (baseline -> today) that going from A to B recovers.

    Args:
        baseline: per-process medians in the baseline snapshot (``None`` when it has none).
        today: per-process medians of the step as it is now (for an environment
            experiment, side A itself: ``today_is_a``).
        a, b: per-process medians of the experiment's sides (A with the suspected cause, B without).
        higher_is_better: the values are throughputs; the share is computed on ``1 / value``.
        today_is_a: ``today`` is the same sample as ``a`` (resampled together).

    Returns:
        a :class:`Share`; ``point`` is ``None`` (with ``note``) when there is no
        baseline, or today is not slower than the baseline in these samples.
    """
    import statistics

    import numpy as np

    med = statistics.median
    if not a or not b:
        return Share(None, note="no measurements")
    shown = Share(
        None, baseline=med(baseline) if baseline else None, today=med(today), intervention=med(b)
    )
    if not baseline:
        shown.note = "the baseline snapshot has no measurement of this result, so the share of the slowdown is unknown"
        return shown
    xb, xt = (
        np.asarray(_time_like(baseline, higher_is_better)),
        np.asarray(_time_like(today, higher_is_better)),
    )
    xa, xi = (
        np.asarray(_time_like(a, higher_is_better)),
        np.asarray(_time_like(b, higher_is_better)),
    )
    gap = float(np.median(xt) - np.median(xb))
    if gap <= 0:
        shown.note = (
            "today's measurement is not slower than the baseline's here, so there is no slowdown to "
            "recover a share of"
        )
        return shown
    shown.point = float((np.median(xa) - np.median(xi)) / gap)
    rng = np.random.default_rng(seed)
    rb = np.median(xb[rng.integers(0, len(xb), (N_BOOT, len(xb)))], axis=1)
    ra = np.median(xa[rng.integers(0, len(xa), (N_BOOT, len(xa)))], axis=1)
    ri = np.median(xi[rng.integers(0, len(xi), (N_BOOT, len(xi)))], axis=1)
    rt = ra if today_is_a else np.median(xt[rng.integers(0, len(xt), (N_BOOT, len(xt)))], axis=1)
    den = rt - rb
    ok = den > 0
    if ok.mean() < 0.95:
        shown.note = (
            f"the slowdown itself is not resolved by these samples (today is slower than the baseline in "
            f"only {ok.mean():.0%} of bootstrap resamples), so the share's interval is undefined"
        )
        return shown
    shares = (ra[ok] - ri[ok]) / den[ok]
    lo, hi = np.quantile(shares, [0.025, 0.975])
    shown.low, shown.high = float(lo), float(hi)
    return shown


def _share_range(share: Share, bar: float) -> str:
    """``50% (95% CI 49% to 57%)``; with one decimal where whole percentages would hide on which side of
    ``bar`` an end lies (``49.98% (95% CI 49.96% to 50.03%)``, not "50% (95% CI 50% to 50%) ... an interval
    that straddles 50%")."""
    fmt = ".0%"
    for digits in range(4) if share.low < bar < share.high else ():
        fmt = f".{digits}%"  # the fewest decimals that keep both ends off the bar, at most 3
        if f"{bar:{fmt}}" not in (f"{share.low:{fmt}}", f"{share.high:{fmt}}"):
            break
    return f"{share.point:{fmt}} (95% CI {share.low:{fmt}} to {share.high:{fmt}})"


def decide(
    comparison: Comparison,
    share: Share,
    *,
    min_share: float = DEFAULT_MIN_SHARE,
    refute_share: float = REFUTE_SHARE,
) -> tuple[Outcome, str]:
    """Apply the rule of the module docstring to one A/B.

    Args:
        comparison: A (today) vs B (intervention), from
            :func:`forensics.bench.compare.compare_values` (time ratio B/A; < 1 = B faster).
        share: from :func:`share_recovered`.
        min_share: the share of the slowdown B must recover (lower end of its 95% interval) to confirm.
        refute_share: an A/B that is not significantly faster refutes when the share's upper end is below this.

    Returns:
        (outcome, reason): the reason names the rule that applied and, when
        inconclusive, what would decide it.
    """
    v = comparison.verdict
    has_share = share.point is not None and share.low is not None and share.high is not None
    need = (
        f" (about {comparison.processes_needed} processes a side would resolve it)"
        if comparison.processes_needed > min(comparison.a.n, comparison.b.n)
        else ""
    )
    rng = _share_range(share, min_share) if has_share else ""
    if v in (Verdict.FASTER, Verdict.SMALL_FASTER):
        what = (
            "significantly faster"
            if v is Verdict.FASTER
            else f"a small real change, significantly faster but inside the {comparison.threshold:.0%} threshold"
        )
        if not has_share:
            return Outcome.INCONCLUSIVE, f"{what}, but {share.note or 'the share is unknown'}"
        if share.low >= min_share:  # type: ignore[operator]
            return Outcome.CONFIRMED, (
                f"{what} (p={comparison.p_value:.2g}, CI of the ratio excludes 1, beyond "
                f"twice the A/A noise floor) and recovers {rng} of the slowdown, lower end "
                f">= {min_share:.0%}"
            )
        if share.high < min_share:  # type: ignore[operator]
            return Outcome.PARTIAL, (
                f"{what} but recovers only {rng} of the slowdown (below {min_share:.0%}): it "
                "contributes; something else explains the rest"
            )
        return Outcome.INCONCLUSIVE, (
            f"{what}; it recovers {rng} of the slowdown, an interval that straddles "
            f"{min_share:.0%}{need}"
        )
    if v in (Verdict.SLOWER, Verdict.SMALL_SLOWER):
        return Outcome.REFUTED, f"the intervention made it slower ({comparison.sentence()})"
    if v is Verdict.SAME and (not has_share or share.high < min_share):  # type: ignore[operator]
        why = f"; share recovered {rng}" if has_share else ""
        return Outcome.REFUTED, (
            f"no change: not significant (p={comparison.p_value:.2g}) and the whole CI of the "
            f"ratio inside the +-{comparison.noise_band:.1%} noise band{why}"
        )
    if has_share and share.high < refute_share:  # type: ignore[operator]
        return Outcome.REFUTED, (
            f"not significantly faster, and it recovers at most {share.high:.0%} of the "
            f"slowdown (share {rng}, upper end below {refute_share:.0%}): it cannot explain it"
        )
    reasons = "; ".join(comparison.reasons) or "not decided"
    tail = f"; share recovered {rng}" if has_share else ""
    return Outcome.INCONCLUSIVE, f"{reasons}{tail}{need if 'need about' not in reasons else ''}"


def fmt_value(x: float | None, unit: str) -> str:
    """``29.1 ms``: 4 significant digits and the unit."""
    if x is None or not math.isfinite(x):
        return "?"
    return f"{x:.4g} {unit}".strip()


@dataclass
class Residual:
    """Today with every confirmed intervention applied, against the baseline (DESIGN section 16).

    Attributes:
        status: ``within`` (a residual of the threshold or more is ruled out: the upper end of the ratio's
            95% CI is below ``1 + threshold``), ``beyond`` (still slower than the baseline: ``slower`` by the
            statistics of ``bench compare``, or for a remembered figure the CI's lower end above 1 and the
            point beyond the threshold) or ``undecided``.
        ratio, low, high: time ratio applied / baseline with its 95% bootstrap CI.
        unexplained: the share of the slowdown still there, ``(applied - baseline) / (today - baseline)``
            on the medians, with its 95% bootstrap interval (a :class:`Share`; ``point`` is the share).
        processes: processes of the applied side.
        higher_is_better: the step's metric is a throughput: :meth:`sentence` says the rate against the
            baseline's (``0.800x the baseline's rate``), as the value reads, not the time ratio (1.250x, which
            reads as faster).
        exact: every process of the applied side gave one value, and so did the baseline's (a remembered
            figure is one value): the ratio is exact, there is no noise to be within (:meth:`sentence` and
            the accounting say so: ``gives exactly the baseline's value``, ``nothing is left``).
        baseline_bound: set when ``undecided`` and the baseline's own processes hold the CI's upper end at
            ``1 + threshold`` or more (:func:`baseline_bound`): more processes of the applied side cannot
            decide it, a baseline measured with more processes can; the upper end the baseline alone leaves.
        baseline_processes: processes (values) of the baseline.
        faster: ``within``, and the CI's upper end below ``1 - threshold``: today with the interventions applied
            is faster than the baseline (a speed-up of the same pull that they do not take out), which is not
            "within noise" (:meth:`sentence` and the accounting say so; the shares then add up to more than
            100%, the unexplained part below 0).
    """

    status: str
    ratio: float
    low: float
    high: float
    unexplained: Share
    processes: int
    higher_is_better: bool = False
    exact: bool = False
    baseline_bound: float | None = None
    baseline_processes: int = 0
    faster: bool = False

    @property
    def none_left(self) -> bool:
        """Exactly the baseline's value: every process gave it (:attr:`exact`), nothing of the slowdown is left."""
        return self.exact and math.isclose(self.ratio, 1.0, rel_tol=1e-9)

    def sentence(self) -> str:
        what = {
            "within": "below the threshold"
            if self.exact
            else "faster than the baseline beyond the threshold"
            if self.faster
            else "within noise",
            "beyond": "still beyond the threshold",
            "undecided": "not decided",
        }
        applied = "today with the confirmed interventions applied"
        if self.none_left:
            return (
                f"{applied} gives exactly the baseline's value (each of its {self.processes} "
                "processes): nothing is left"
            )
        if self.exact:
            spread = f"exact: each of its {self.processes} processes gave the same value"
        elif self.higher_is_better:
            spread = f"95% CI {1 / self.high:.3f}-{1 / self.low:.3f}, {self.processes} processes"
        else:
            spread = f"95% CI {self.low:.3f}-{self.high:.3f}, {self.processes} processes"
        if self.higher_is_better:
            shown = f"runs at {1 / self.ratio:.3f}x the baseline's rate ({spread})"
        else:
            shown = f"is {self.ratio:.3f}x the baseline ({spread})"
        why = ""
        if self.status == "undecided" and self.baseline_bound is not None:
            why = (
                f" (the baseline's {self.baseline_processes} processes alone leave the CI's upper end at "
                f"{self.baseline_bound:.3f}: more processes of today cannot narrow it, a baseline measured "
                "with more processes can)"
            )
        return f"{applied} {shown}: {what[self.status]}{why}"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "ratio": self.ratio,
            "ci95": [self.low, self.high],
            "unexplained": self.unexplained.to_json(),
            "processes": self.processes,
            "higher_is_better": self.higher_is_better,
            "exact": self.exact,
            "baseline_bound": self.baseline_bound,
            "baseline_processes": self.baseline_processes,
            "faster": self.faster,
            "sentence": self.sentence(),
        }


def versus_baseline(
    baseline: Sequence[float],
    values: Sequence[float],
    *,
    threshold: float,
    higher_is_better: bool = False,
) -> tuple[str, float, float, float]:
    """``values`` against the baseline: (``within`` | ``beyond`` | ``undecided``, ratio, CI low, CI high).

    With a baseline of several processes, :func:`forensics.bench.compare.compare_values` decides (``slower``
    is ``beyond``); with a remembered figure (one value, ``--expect``) the bootstrap CI of the ratio of
    ``values``' median to it does. Either way ``within`` means the CI ends below ``1 + threshold``.
    """
    from forensics.stats import bootstrap_ratio_ci

    xb, xv = _time_like(baseline, False), _time_like(values, False)
    import statistics

    ratio = statistics.median(xv) / statistics.median(xb)
    lo, hi = bootstrap_ratio_ci(xb, xv)
    if higher_is_better:
        ratio, lo, hi = 1 / ratio, 1 / hi, 1 / lo
    if hi < 1 + threshold:
        return "within", ratio, lo, hi
    if len(baseline) >= 3:
        from forensics.bench.compare import compare_values

        _, c = compare_values(
            list(baseline), list(values), threshold=threshold, higher_is_better=higher_is_better
        )
        beyond = c.verdict is Verdict.SLOWER
    else:
        beyond = lo > 1 and ratio >= 1 + threshold
    return ("beyond" if beyond else "undecided"), ratio, lo, hi


def baseline_bound(
    baseline: Sequence[float],
    values: Sequence[float],
    *,
    threshold: float,
    higher_is_better: bool = False,
) -> float | None:
    """Whether the baseline's own processes are what leaves ``values`` against it undecided: the upper end
    of the time ratio's 95% CI (as :func:`versus_baseline` computes it) were every one of ``values`` exactly
    at their median, when that is ``1 + threshold`` or more while ``values``' own spread puts the ratio
    below ``1 + threshold`` (the CI were the baseline exactly its median). Then no number of processes on the
    side of ``values`` decides it: they cannot rule the threshold out, and their ratio is not beyond it.
    ``None`` otherwise (more processes may decide it either way).

    A baseline snapshot's 5 processes with one 5% low left today's step, measured with the causes taken out
    at 1.001x the baseline, "not decided" (CI 0.980-1.053) after 20 processes; the first 5 said as much.
    """
    import statistics

    from forensics.stats import bootstrap_ratio_ci

    if len(baseline) < 2 or not values:
        return None
    lo, hi = bootstrap_ratio_ci(list(baseline), [statistics.median(values)])
    lo_v, hi_v = bootstrap_ratio_ci([statistics.median(baseline)], list(values))
    top, top_v = (1 / lo, 1 / lo_v) if higher_is_better else (hi, hi_v)
    return top if top >= 1 + threshold and top_v < 1 + threshold else None


def residual(
    baseline: Sequence[float],
    today: Sequence[float],
    applied: Sequence[float],
    *,
    threshold: float,
    higher_is_better: bool = False,
    seed: int = 1,
) -> Residual:
    """The residual slowdown once the confirmed interventions are applied (see :class:`Residual`)."""
    import numpy as np

    status, ratio, lo, hi = versus_baseline(
        baseline, applied, threshold=threshold, higher_is_better=higher_is_better
    )
    xb = np.asarray(_time_like(baseline, higher_is_better))
    xt = np.asarray(_time_like(today, higher_is_better))
    xr = np.asarray(_time_like(applied, higher_is_better))
    share = Share(
        None,
        baseline=float(np.median(baseline)),
        today=float(np.median(today)),
        intervention=float(np.median(applied)),
    )
    gap = float(np.median(xt) - np.median(xb))
    if gap > 0:
        share.point = float((np.median(xr) - np.median(xb)) / gap)
        rng = np.random.default_rng(seed)
        pick = lambda x: np.median(x[rng.integers(0, len(x), (N_BOOT, len(x)))], axis=1)  # noqa: E731
        rb, rt, rr = pick(xb), pick(xt), pick(xr)
        ok = (rt - rb) > 0
        if ok.mean() >= 0.95:
            lo_s, hi_s = np.quantile((rr[ok] - rb[ok]) / (rt[ok] - rb[ok]), [0.025, 0.975])
            share.low, share.high = float(lo_s), float(hi_s)
    else:
        share.note = "today is not slower than the baseline in these samples"
    exact = len(set(baseline)) == 1 and len(set(applied)) == 1
    bound = (
        baseline_bound(baseline, applied, threshold=threshold, higher_is_better=higher_is_better)
        if status == "undecided"
        else None
    )
    return Residual(
        status,
        ratio,
        lo,
        hi,
        share,
        len(applied),
        higher_is_better,
        exact,
        baseline_bound=bound,
        baseline_processes=len(baseline),
        faster=status == "within" and not exact and hi < 1 - threshold,
    )
