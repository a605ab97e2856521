"""Detection power of the bench method, estimated from recorded baseline runs.

Method (docs/bench.md, "Detection power"): pool the per-process medians of
one result from baseline bench files taken with nothing changed. For each
trial draw ``n`` values for side A and ``n`` for side B by a *smoothed*
bootstrap of the pool (resample with replacement, add Gaussian jitter of
Silverman's bandwidth ``1.06 * sigma * m^(-1/5)``, sigma = IQR/1.349, so no
artificial ties: real timings never tie), multiply side B by ``1 + shift``, and run the same
comparison ``forensics bench compare`` runs
(:func:`forensics.bench.compare.compare_values`). With ``shift = 0`` the
rate of any change verdict (``slower``/``faster``/``small-*``) is the A/A
false-alarm rate; with a shift, the rate of ``slower`` + ``small-slower`` (the
change is reported) is the power. ``inflate`` widens the pool around its
median (a stress test for noisier days than the recorded one).

Run: ``python -m forensics.bench.power A1.json A2.json [--processes 6]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections import Counter
from typing import Sequence

from forensics.bench.compare import compare_values
from forensics.stats import Verdict

SHIFTS = (0.0, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.06)


def simulate(
    pool: Sequence[float],
    *,
    n: int,
    shift: float,
    trials: int = 1000,
    seed: int = 0,
    threshold: float = 0.05,
    inflate: float = 1.0,
) -> Counter:
    """Verdict counts over ``trials`` simulated comparisons of ``n`` vs ``n`` processes.

    Args:
        pool: per-process medians of a baseline (ms; lower is better).
        shift: multiplicative slowdown applied to side B (0.05 = 5% slower).
        inflate: scale the pool's deviations from its median by this factor.
    """
    med = statistics.median(pool)
    values = [med + (v - med) * inflate for v in pool]
    q = statistics.quantiles(values, n=4, method="inclusive")
    h = 1.06 * max((q[2] - q[0]) / 1.349, 1e-9 * med) * len(values) ** -0.2
    rng = random.Random(seed)

    def draw() -> float:
        return rng.choice(values) + rng.gauss(0.0, h)

    counts: Counter = Counter()
    for _ in range(trials):
        a = [draw() for _ in range(n)]
        b = [draw() * (1 + shift) for _ in range(n)]
        counts[compare_values(a, b, threshold=threshold)[1].verdict] += 1
    return counts


def aa_splits(
    pool: Sequence[float], *, n_a: int, limit: int = 1000, threshold: float = 0.05
) -> Counter:
    """Verdicts over every split of the real pool into ``n_a`` vs the rest (no resampling, no jitter).

    Each split is an A/A comparison of processes that were all run with
    nothing changed; any ``slower``/``faster`` is a false alarm. At most
    ``limit`` splits (in a fixed order).
    """
    import itertools

    idx = range(len(pool))
    counts: Counter = Counter()
    for k, chosen in enumerate(itertools.combinations(idx, n_a)):
        if k >= limit:
            break
        a = [pool[i] for i in chosen]
        b = [pool[i] for i in idx if i not in chosen]
        counts[compare_values(a, b, threshold=threshold)[1].verdict] += 1
    return counts


def table(pool: Sequence[float], *, n: int, trials: int, inflate: float = 1.0) -> list[dict]:
    """One row per shift in :data:`SHIFTS`: rates of slower / same / inconclusive / faster."""
    rows = []
    for shift in SHIFTS:
        c = simulate(pool, n=n, shift=shift, trials=trials, inflate=inflate)
        rows.append({"shift": shift, **{v.value: c[v] / trials for v in Verdict}})
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print the A/A splits and the power table for baseline bench files (markdown)."""
    from forensics.bench import document

    ap = argparse.ArgumentParser(
        prog="python -m forensics.bench.power", description=__doc__.splitlines()[0]
    )
    ap.add_argument("files", nargs="+", help="baseline bench files (nothing changed between them)")
    ap.add_argument("--result", default="canary.verify_step_ms")
    ap.add_argument("--processes", type=int, nargs="+", default=[5, 6, 8])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--inflate", type=float, nargs="+", default=[1.0, 3.0])
    args = ap.parse_args(argv)
    pool: list[float] = []
    for f in args.files:
        doc = document.load(f)
        pool += next(r["process_medians"] for r in doc["results"] if r["name"] == args.result)
    q = statistics.quantiles(pool, n=4, method="inclusive")
    med = statistics.median(pool)
    print(
        f"pool: {len(pool)} per-process medians of {args.result} from {len(args.files)} files; "
        f"median {med:.4g}, IQR/median {(q[2] - q[0]) / med:.2%}"
    )
    n_a = len(pool) // 2
    aa = aa_splits(pool, n_a=n_a)
    total = sum(aa.values())
    print(
        f"A/A over all {total} splits of the pool into {n_a} vs {len(pool) - n_a} processes: "
        + ", ".join(f"{v.value} {aa[v]}" for v in Verdict)
    )
    print(
        "| processes a side | noise x | shift | reported (slower + small-slower) | slower | same | inconclusive | "
        "wrong direction |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for inflate in args.inflate:
        for n in args.processes:
            for row in table(pool, n=n, trials=args.trials, inflate=inflate):
                print(
                    f"| {n} | {inflate:g} | {row['shift']:.1%} | {row['slower'] + row['small-slower']:.1%} | "
                    f"{row['slower']:.1%} | {row['same']:.1%} | {row['inconclusive']:.1%} | "
                    f"{row['faster'] + row['small-faster']:.1%} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
