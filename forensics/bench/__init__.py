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

SNAPSHOT_PROCESSES = 4
SNAPSHOT_BUDGET_S = 25.0


def run_for_snapshot(options: dict[str, Any]) -> dict[str, Any]:
    """Run the canary with its defaults and a small budget; returns a bench document.

    Used by ``forensics snapshot --bench``. ``options`` may override any
    canary setting (``tp``, ``layers``, ``device``...; see
    :func:`forensics.bench.session.canary_config`) and ``processes``
    (default 4) and ``budget_s`` (default 25 s of wall time). On one H200
    pair a process takes ~5-8 s, so this stays well under a minute.

    Raises:
        forensics.errors.BadInputError: bad options, or a canary process failed.
    """
    from forensics.bench.session import canary_config, run_canary

    opts = dict(options or {})
    cfg = canary_config(opts)
    processes = int(opts.get("processes") or SNAPSHOT_PROCESSES)
    budget = float(opts.get("budget_s") or SNAPSHOT_BUDGET_S)
    return run_canary(cfg, processes=processes, budget_s=budget, label="snapshot")[0]
