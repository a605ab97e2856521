"""Time a user's Python callable in a fresh process (``--callable package.module:function``).

Usage: ``python -m forensics.bench.callable_worker MODULE:FUNC BLOCKS BLOCK_MS WARMUP_S``.
Prints one JSON line ``{"per_call_ms": [...], "calls_per_block", "warmup"}``;
on failure prints one line on stderr and exits 1. The function is called
with no arguments; blocks are timed with ``time.perf_counter`` and, when the
function initialised CUDA through torch, bracketed by ``torch.cuda.synchronize()``.
"""

from __future__ import annotations

import importlib
import json
import math
import statistics
import sys
import time
from typing import Callable


def _sync() -> Callable[[], None]:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.synchronize
    return lambda: None


def time_callable(fn: Callable[[], object], blocks: int, block_ms: float, warmup_s: float) -> dict:
    """Calibrate a block to >= ``block_ms``, warm up (checked), time ``blocks`` blocks."""
    fn()
    sync = _sync()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    n = max(1, math.ceil(block_ms / max((time.perf_counter() - t0) * 1e3, 1e-4)))

    def block() -> float:
        sync()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        return (time.perf_counter() - t) * 1e3 / n

    warm, start, converged = [], time.perf_counter(), False
    while True:
        warm.append(block())
        elapsed = time.perf_counter() - start
        if elapsed >= warmup_s and len(warm) >= 10:
            a, b = statistics.median(warm[-10:-5]), statistics.median(warm[-5:])
            converged = abs(b / a - 1) < 0.02
            if converged or elapsed >= 10 * warmup_s + 1:
                break
    return {"per_call_ms": [block() for _ in range(blocks)], "calls_per_block": n,
            "warmup": {"blocks": len(warm), "converged": converged}}


def main(argv: list[str]) -> int:
    """Entry point; returns the exit status (0 ok, 1 the target failed, 2 usage)."""
    try:
        target, blocks, block_ms, warmup_s = argv[1], int(argv[2]), float(argv[3]), float(argv[4])
    except (IndexError, ValueError):
        sys.stderr.write("usage: python -m forensics.bench.callable_worker MODULE:FUNC BLOCKS BLOCK_MS WARMUP_S\n")
        return 2
    mod_name, _, func_name = target.partition(":")
    try:
        fn = getattr(importlib.import_module(mod_name), func_name)
    except ImportError as exc:
        sys.stderr.write(f"cannot import {mod_name} ({exc}); is it on PYTHONPATH?\n")
        return 1
    except AttributeError:
        sys.stderr.write(f"module {mod_name} has no attribute {func_name}\n")
        return 1
    if not callable(fn):
        sys.stderr.write(f"{target} is not callable\n")
        return 1
    try:
        result = time_callable(fn, blocks, block_ms, warmup_s)
    except Exception as exc:  # the user's function failed: one line, the caller reports it
        sys.stderr.write(f"the function raised {type(exc).__name__}: {exc}\n")
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
