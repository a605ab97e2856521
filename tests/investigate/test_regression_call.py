"""Did the step get slower? The call investigate makes before any experiment, on real per-process medians
of the user's decode step (examples/investigate/decode on the 2-core CPU VM, the silent-pull scenario of
examples/investigate/memory.sh: the HEAD before the pull against today, 8 + 5 processes)."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

from forensics.bench.compare import compare_values
from forensics.investigate.run import Regression, Settings, _regression
from forensics.stats import Verdict
from tests._stepkit import run_investigate, take_baseline
from tests.conftest import make_repo

BEFORE = [0.35639, 0.41649, 0.36179, 0.3684, 0.36641, 0.35439, 0.44793, 0.35243]
AFTER = [0.36698, 0.3585, 0.3583, 0.3665, 0.35751]


def test_a_slowdown_ruled_out_reads_as_no_regression_without_the_undecided_advice():
    _, cmp = compare_values(BEFORE, AFTER, name="user.decode_ms")
    assert cmp.verdict is Verdict.INCONCLUSIVE and cmp.ci_high < 1.05
    analysis = SimpleNamespace(
        bench=SimpleNamespace(results=[SimpleNamespace(name="user.decode_ms", comparison=cmp)])
    )
    step = SimpleNamespace(name="user.decode_ms")
    _, call, text = _regression(analysis, None, step, False, 0.0, Settings(baseline=None), [])
    assert call is Regression.NO
    assert text == (
        "user.decode_ms: ratio 0.985 (95% CI 0.880-1.030, n=8+5): a slowdown of 5% or more is "
        "ruled out (the CI ends at 1.030); a smaller change is not decided at this noise"
    )


def test_the_users_own_step_is_not_told_to_benchmark_its_own_step():
    """Undecided and out of reach: the advice is to cut the noise; "or your own step with --cmd" is
    offered for the canary only."""
    noisy = [
        v * f for v, f in zip(AFTER * 2, (1.0, 1.3, 0.8, 1.25, 0.9, 1.1, 0.75, 1.2, 1.0, 1.35))
    ]
    _, user = compare_values(BEFORE, noisy, name="user.decode_ms")
    _, canary = compare_values(BEFORE, noisy, name="canary.verify_step_ms")
    (u,) = [r for r in user.reasons if r.startswith("need about")]
    (c,) = [r for r in canary.reasons if r.startswith("need about")]
    assert "cut the noise instead" in u and "your own step" not in u
    assert c.endswith("or your own step with --cmd; see docs/inconclusive.md")


# Each process takes the next factor of a fixed cycle (its place kept in a file outside the repository):
# the baseline's 5 processes and today's 5 have the same median and spread by -60% to +60%, which no
# few processes can decide. Random factors could, by chance, put today's 5 below the baseline's and rule
# out a slowdown.
FACTORS = (0.4, 1.6, 1.0, 0.5, 1.5, 1.45, 0.45, 1.0, 1.55, 0.5)
NOISY_STEP = """
import json, pathlib
counter = pathlib.Path({counter!r})
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
spread = {factors!r}[n % {count}]
for _ in range(3):
    print(json.dumps({{"metric": "step_ms", "value": 10.0 * spread}}))
"""


def test_an_undecided_call_gives_one_piece_of_advice_not_two(tmp_path):
    """The comparison says "cut the noise instead" (too many processes to be worth running): the
    verdict does not then also say "rerun with more processes"."""
    step = NOISY_STEP.format(counter=str(tmp_path / "count"), factors=FACTORS, count=len(FACTORS))
    repo = make_repo(tmp_path / "repo", {"step.py": step}, "step")
    cmd = f"{sys.executable} step.py"
    base = take_baseline(tmp_path / "before.json", repo, cmd, processes=5)
    r = run_investigate(
        repo,
        "--baseline",
        str(base),
        "--cmd",
        cmd,
        "--no-canary",
        "--processes",
        "5",
        "--max-processes",
        "5",
        "-q",
        "-o",
        str(tmp_path / "r.json"),
        timeout=120,
    )
    assert r.returncode == 3, r.stdout + r.stderr
    verdict = json.loads((tmp_path / "r.json").read_text())["verdict"]
    assert verdict.startswith("Could not tell whether it got slower: user.step_ms")
    assert "cut the noise instead" in verdict
    assert "rerun with more processes" not in verdict
    assert verdict.endswith("no experiment was run.")
