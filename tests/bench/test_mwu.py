"""The Mann-Whitney U p-value forensics computes itself (forensics.stats.mwu_p) against scipy's, on every
branch: the exact null distribution (no tie, a side of 8 or fewer), the exact permutation test over every
split (ties), and the tie- and continuity-corrected normal approximation (larger samples). scipy is a
test dependency only: importing scipy.stats cost every comparing command about 0.5 s."""

from __future__ import annotations

import json
import math
import random

import pytest

from forensics.stats import EXACT_SPLITS_MAX, mwu_p
from tests.conftest import ROOT

stats = pytest.importorskip("scipy.stats")


def scipy_p(a: list[float], b: list[float]) -> float:
    """What forensics asked scipy before: exact over every split when values tie and the splits are
    few enough, else scipy's own choice (exact without ties for small samples, else normal)."""
    splits = math.comb(len(a) + len(b), len(a))
    if len(set(a) | set(b)) < len(a) + len(b) and splits <= EXACT_SPLITS_MAX:
        method = stats.PermutationMethod(n_resamples=splits)
        return float(stats.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)
    return float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)


def canary(name: str) -> list[float]:
    """Per-process medians of the verify step on the 2 x H200 (examples/h200x2/bench)."""
    doc = json.loads((ROOT / "examples" / "h200x2" / "bench" / f"{name}.json").read_text())
    return next(
        r["process_medians"] for r in doc["results"] if r["name"] == "canary.verify_step_ms"
    )


def test_real_canary_runs_give_scipys_p_value():
    a1, a2, p2p = canary("a1"), canary("a2"), canary("p2p")
    for a, b in ((a1, a2), (a1, p2p), (p2p, a2)):
        assert mwu_p(a, b) == pytest.approx(scipy_p(a, b), rel=1e-12)
    # the same values rounded to 2 digits, as a step printing milliseconds would: ties
    r1, r2 = [round(v, 2) for v in a1], [round(v, 2) for v in a2]
    assert len(set(r1) | set(r2)) < len(r1) + len(r2)
    assert mwu_p(r1, r2) == pytest.approx(scipy_p(r1, r2), rel=1e-12)


@pytest.mark.parametrize(
    "n1, n2",
    [(2, 2), (3, 5), (5, 5), (4, 8), (8, 8), (7, 9), (9, 9), (5, 12), (3, 30), (20, 20)],
)
def test_every_branch_agrees_with_scipy(n1, n2):
    rnd = random.Random(n1 * 100 + n2)
    for digits in (0, 1, 6):  # many ties, some, none
        for shift in (0.0, 1.0, 4.0):  # the same, a shift, fully separated
            a = [round(rnd.gauss(10, 2), digits) for _ in range(n1)]
            b = [round(rnd.gauss(10 + shift, 2), digits) for _ in range(n2)]
            assert mwu_p(a, b) == pytest.approx(scipy_p(a, b), rel=1e-9), (a, b)


def test_identical_sides_and_a_full_separation():
    assert mwu_p([4.0] * 6, [4.0] * 6) == 1.0
    assert mwu_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)  # the smallest at 5+5
