"""Fresh processes for the canary: launch the ranks, collect, reduce to per-process values.

One *process* in the statistics is one fresh launch of all ``tp`` ranks (new
CUDA contexts, new NCCL communicator). Its value for a metric is the median
over timed blocks of the **slowest rank** (per block, the max time over
ranks). Several sides can be run **interleaved** (A B B A A B ...) so slow drift
(thermal, clocks, neighbours) hits every side alike.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from forensics.bench.config import CanaryConfig
from forensics.errors import BadInputError
from forensics.procgroup import kill_group, signals_deferred, signals_held
from forensics.stats import summarize

PROCESS_TIMEOUT_S = 300.0
MIN_PROCESSES = 5


@dataclass
class Side:
    """One side of a run: a configuration and the environment overrides its processes get.

    Attributes:
        name: label used in progress and results ("A", "B", "canary").
        cfg: the canary configuration.
        env: variables added to the workers' environment (e.g. ``NCCL_P2P_DISABLE=1``).
        processes: per-process results, filled by :func:`run_sides`.
        launcher: argv prefix each rank is started under (a wrapper that rebuilds or
            filters the environment, as a cluster launcher would); empty for none.
    """

    name: str
    cfg: CanaryConfig
    env: dict[str, str] = field(default_factory=dict)
    processes: list[dict[str, Any]] = field(default_factory=list)
    launcher: list[str] = field(default_factory=list)


def visible_gpus() -> int:
    """Number of GPUs this process may use, without importing torch.

    Source: NVML ``nvmlDeviceGetCount`` (nvidia-ml-py), narrowed by
    ``CUDA_VISIBLE_DEVICES`` when set. 0 when NVML is unavailable.
    """
    from forensics.gpu.nvml import Nvml  # the one NVML wrapper (timeouts, error mapping)

    nvml = Nvml()
    try:
        if nvml.unavailable():
            return 0
        count = nvml.call("nvmlDeviceGetCount")
    finally:
        nvml.shutdown()
    if not isinstance(count, int):
        return 0
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        entries = [e for e in cvd.split(",") if e.strip() and e.strip() != "-1"]
        count = min(count, len(entries))
    return count


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(
    cfg: CanaryConfig,
    env: dict[str, str] | None = None,
    timeout_s: float = PROCESS_TIMEOUT_S,
    launcher: list[str] | None = None,
) -> dict:
    """Launch one fresh canary process (``cfg.tp`` ranks) and wait for it.

    Each rank is ``[*launcher, python, -m, forensics.bench.worker, ...]``: a
    launcher prefix sees (and may change) the rank's environment, as a real
    one would.

    Returns:
        ``{"ranks": [per-rank result], "wall_s": float, "pids": [...]}``.

    Raises:
        BadInputError: a rank failed or the process timed out; the message
            carries the last stderr line of the first failing rank.
    """
    with tempfile.TemporaryDirectory(prefix="forensics-bench-") as tmp:
        cfg_path = os.path.join(tmp, "config.json")
        with open(cfg_path, "w", encoding="utf-8") as fh:
            json.dump(cfg.to_json(), fh)
        base = dict(os.environ)
        for key, value in (
            env or {}
        ).items():  # a None value unsets the variable (the baseline had none)
            if value is None:
                base.pop(key, None)
            else:
                base[key] = value
        base.update(
            {
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(_free_port()),
                "WORLD_SIZE": str(cfg.tp),
                "PYTHONUNBUFFERED": "1",
            }
        )
        base.setdefault("NCCL_NVLS_ENABLE", "0")
        procs = []
        t0 = time.perf_counter()
        try:
            for rank in range(cfg.tp):
                renv = dict(base, RANK=str(rank), LOCAL_RANK=str(rank))
                out = os.path.join(tmp, f"rank{rank}.json")
                err = open(os.path.join(tmp, f"rank{rank}.err"), "w+", encoding="utf-8")
                # a SIGTERM between the fork and the append would leave this rank unknown to the clean-up
                # below, still running after forensics exits: started and recorded as one step
                with signals_deferred():
                    try:
                        p = subprocess.Popen(
                            [
                                *(launcher or []),
                                sys.executable,
                                "-m",
                                "forensics.bench.worker",
                                cfg_path,
                                out,
                            ],
                            env=renv,
                            stdout=subprocess.DEVNULL,
                            stderr=err,
                            start_new_session=True,
                        )
                    except OSError as exc:
                        err.close()
                        what = launcher[0] if launcher else sys.executable
                        raise BadInputError(
                            f"cannot start a canary rank with {what!r} ({exc.strerror})"
                        ) from None
                    procs.append((p, out, err))
            failed = _wait(procs, t0 + timeout_s, timeout_s)
            if failed:
                raise BadInputError(f"canary process failed ({failed})")
            ranks = []
            for _, out, _ in procs:
                with open(out, encoding="utf-8") as fh:
                    ranks.append(json.load(fh))
        finally:  # on failure, timeout or Ctrl-C: no rank outlives the run (they run in their own sessions)
            with signals_held():  # a second signal must not skip the next rank's kill
                for p, _, err in procs:
                    if p.poll() is None:
                        kill_group(p)
                    err.close()
        return {
            "ranks": ranks,
            "wall_s": round(time.perf_counter() - t0, 3),
            "pids": [p.pid for p, _, _ in procs],
        }


def _wait(procs: list, deadline: float, timeout_s: float) -> str | None:
    """Wait for every rank; return why the run failed (first failing rank, or the timeout), or None."""
    while any(p.poll() is None for p, _, _ in procs):
        bad = next(((p, err) for p, _, err in procs if p.returncode not in (None, 0)), None)
        if bad is not None:
            return _why(bad[0].returncode, bad[1])
        if time.perf_counter() > deadline:
            return f"timed out after {timeout_s:g} s"
        time.sleep(0.05)
    bad = next(((p, err) for p, _, err in procs if p.returncode != 0), None)
    return _why(bad[0].returncode, bad[1]) if bad is not None else None


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b:? ")


def failure_line(stderr: str) -> str:
    """The line of a rank's stderr that says what went wrong: the last exception line
    (``torch.AcceleratorError: CUDA error: ...``), not the hints torch prints after a CUDA error
    ("For debugging consider passing CUDA_LAUNCH_BLOCKING=1", "Compile with `TORCH_USE_CUDA_DSA`
    ..."); else the last non-empty line; else "no output on stderr"."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    raised = [ln for ln in lines if _EXCEPTION_LINE.match(ln)]
    return (raised or lines or ["no output on stderr"])[-1]


def _why(returncode: int, err) -> str:
    err.flush()
    err.seek(0)
    return f"rank exited with status {returncode}: {failure_line(err.read())[:300]}"


def slowest_rank_ms(ranks: list[dict], metric: str) -> tuple[float, float] | None:
    """(median over blocks of the slowest rank's ms per call, within-process IQR/median) or None."""
    series = [r["metrics"][metric]["per_call_ms"] for r in ranks if metric in r.get("metrics", {})]
    if not series:
        return None
    s = summarize([max(vals) for vals in zip(*series)])
    return s.median, s.iqr_over_median


def balanced_order(items: list, round_index: int) -> list:
    """The order of the sides in round ``round_index``: as given in even rounds, reversed in odd ones
    (A B, B A, A B, B A ...: each side runs first in half the rounds).

    Plain A B A B puts B right after A every time: under a steady drift (a GPU warming towards its power
    cap, a page cache filling) B is always measured later, and that bias adds to every comparison
    (docs/bench.md, 'Method'). Reversing every other round cancels a linear drift within each
    pair of rounds.
    """
    return list(items) if round_index % 2 == 0 else list(reversed(items))


def run_sides(
    sides: list[Side],
    *,
    processes: int,
    budget_s: float,
    on_process: Callable[[Side, int, dict | None], None] | None = None,
    timeout_s: float = PROCESS_TIMEOUT_S,
) -> None:
    """Run fresh processes for every side, interleaved in :func:`balanced_order` (A B B A A B ...), until
    ``processes`` each or the budget is spent.

    The budget is wall seconds **per side** (about its GPU time); at least 3
    processes per side always run (with fewer, Mann-Whitney U cannot reach
    p <= 0.01 even at complete separation: 2 / C(10, 5) = 0.008). A
    failing process stops the run (its error is raised).

    Raises:
        BadInputError: a process failed (see :func:`launch`).
    """
    t0 = time.perf_counter()
    minimum = min(MIN_PROCESSES, processes)
    for i in range(processes):
        spent = time.perf_counter() - t0
        if i >= minimum and i > 0:
            per_round = spent / i
            if spent + per_round > budget_s * len(sides):
                break
        for side in balanced_order(sides, i):
            result = launch(side.cfg, side.env, timeout_s, side.launcher)
            side.processes.append(result)
            if on_process:
                on_process(side, i, result)
