"""The benchmark: the verify-step canary, the user's step, telemetry during the run.

Modules: ``config`` (sizes, no torch), ``model`` and ``worker`` (torch; run
only in the canary's child processes), ``harness`` (fresh processes,
slowest rank), ``session`` (a whole run with telemetry), ``user`` and
``callable_worker`` (the user's step), ``document`` (the
``forensics.bench/1`` file), ``compare`` (two files -> verdict), ``power``
(detection-power estimates from recorded runs). Nothing here imports torch
at module level.
"""

from __future__ import annotations

from typing import Any

SNAPSHOT_PROCESSES = 5   # the fewest with which Mann-Whitney U can reach p <= 0.01 (2 / C(10, 5) = 0.008)
SNAPSHOT_BUDGET_S = 45.0
SNAPSHOT_BLOCKS = 15
SNAPSHOT_WARMUP_S = 0.1


def run_for_snapshot(options: dict[str, Any]) -> dict[str, Any]:
    """Run the canary with its defaults and a small budget; returns a bench document.

    Used by ``forensics snapshot --bench``. ``options`` may override any
    canary setting (``tp``, ``layers``, ``device``...; see
    :func:`forensics.bench.session.canary_config`), ``processes`` (default
    5) and ``budget_s`` (default 45 s of wall time). Blocks per metric drop
    to 15 and the minimum warm-up to 0.1 s. On 2 x H200 a fresh TP=2
    process takes ~7-10 s (the first of a run up to ~15 s): about 40-50 s.

    Raises:
        forensics.errors.BadInputError: bad options, or a canary process failed.
    """
    from forensics.bench.session import canary_config, run_canary

    opts = {"blocks": SNAPSHOT_BLOCKS, "warmup_s": SNAPSHOT_WARMUP_S, **dict(options or {})}
    cfg = canary_config(opts)
    processes = int(opts.get("processes") or SNAPSHOT_PROCESSES)
    budget = float(opts.get("budget_s") or SNAPSHOT_BUDGET_S)
    return run_canary(cfg, processes=processes, budget_s=budget, label="snapshot")[0]
