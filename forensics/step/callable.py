"""Time a Python callable in this (fresh) process: the one in-process worker of ``--callable``.

Run as ``python -m forensics.step.callable package.module:function [options]``
with the code under test importable (``forensics bisect --callable`` sets
``PYTHONPATH`` to the worktree and runs this with the worktree as cwd;
``forensics bench --callable`` runs it with the user's environment). The
function is called with no arguments. Only the standard library is imported
at module level; torch is looked at only if the callable imported it.

Two output modes, one loader and one set of exit statuses:

- default (``forensics bisect``): one ``{"module_file": PATH}`` line, then one
  ``{"metric": "call_ms", "value": <ms per call>}`` line per timed block, the
  format :mod:`forensics.step.command` reads. Warm-up calls until both
  ``--warmup-calls`` (20) calls and ``--warmup-s`` (0.2 s) are done, or 5 x
  ``--warmup-s`` has passed; then ``--blocks`` (15) timed blocks of
  ``time.perf_counter`` around a loop whose length doubles until one block
  lasts at least ``--min-block-ms`` (5 ms). ``--timer cpu`` uses
  ``time.process_time`` instead (CPU-bound callables on a shared machine; it
  excludes time the process waits, so it is never right for GPU work). The
  callable must wait for its own GPU work (``torch.cuda.synchronize()``).
- ``--summary`` (``forensics bench``): one JSON line ``{"per_call_ms": [...],
  "calls_per_block", "warmup": {"blocks", "converged"}}``. A block is sized
  from one timed call to ``--min-block-ms``; warm-up blocks run for at least
  ``--warmup-s`` and 10 blocks until the medians of the last two windows of 5
  differ by < 2% (or 10 x ``--warmup-s`` + 1 s has passed); when the function
  has initialised CUDA through torch each block is bracketed by
  ``torch.cuda.synchronize()``.

With ``--expect-under DIR`` it first checks that the module was imported from
inside DIR and exits 3 otherwise (so a bisect never measures the wrong code).

Exit status: 0 ok; 1 the callable raised; 2 bad target (cannot import, not
callable) or usage; 3 module imported from outside ``--expect-under``. On
failure one line goes to stderr.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import statistics
import sys
import time
from typing import Callable

PROG = "python -m forensics.step.callable"


def load(target: str):
    """Import ``package.module:function`` (dotted attributes allowed); returns ``(module, callable)``.

    Raises:
        ValueError: ``target`` is not ``MODULE:FUNCTION`` or names something not callable.
        Exception: whatever importing the user's module raises.
    """
    mod_name, _, attr = target.partition(":")
    if not mod_name or not attr:
        raise ValueError(f"{target!r} is not MODULE:FUNCTION")
    module = importlib.import_module(mod_name)
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{target} is not callable")
    return module, obj


def _inside(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath(
            [os.path.realpath(path), os.path.realpath(folder)]
        ) == os.path.realpath(folder)
    except ValueError:
        return False


def _sync() -> Callable[[], None]:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.synchronize
    return lambda: None


def time_blocks(
    fn: Callable[[], object],
    *,
    blocks: int,
    min_block_ms: float,
    warmup_s: float,
    warmup_calls: int,
    clock: Callable[[], float] = time.perf_counter,
):
    """Warm up, calibrate a loop to >= ``min_block_ms``, then yield ms per call of each of ``blocks`` blocks."""
    t0 = time.perf_counter()
    fn()
    calls = 1
    while True:
        spent = time.perf_counter() - t0
        if (calls >= warmup_calls and spent >= warmup_s) or spent >= 5 * warmup_s:
            break
        fn()
        calls += 1
    loops = 1
    while True:  # calibrate: one block >= min_block_ms
        t0 = clock()
        for _ in range(loops):
            fn()
        dt = clock() - t0
        if dt * 1e3 >= min_block_ms or loops >= 1 << 20:
            break
        loops *= 2
    for _ in range(blocks):
        t0 = clock()
        for _ in range(loops):
            fn()
        dt = clock() - t0
        yield dt * 1e3 / loops


def time_callable(fn: Callable[[], object], blocks: int, block_ms: float, warmup_s: float) -> dict:
    """Calibrate a block to >= ``block_ms``, warm up until converged, time ``blocks`` blocks (``--summary``)."""
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
    return {
        "per_call_ms": [block() for _ in range(blocks)],
        "calls_per_block": n,
        "warmup": {"blocks": len(warm), "converged": converged},
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (see the module docstring)."""
    ap = argparse.ArgumentParser(prog=PROG)
    ap.add_argument("target", help="package.module:function (called with no arguments)")
    ap.add_argument(
        "--summary",
        action="store_true",
        help="print one JSON summary (forensics bench) instead of "
        "one metric line per block (forensics bisect)",
    )
    ap.add_argument("--blocks", type=int, default=15)
    ap.add_argument("--min-block-ms", type=float, default=5.0)
    ap.add_argument(
        "--warmup-s",
        type=float,
        default=0.2,
        help="warm up at least this long and --warmup-calls calls (but stop after 5 x this)",
    )
    ap.add_argument("--warmup-calls", type=int, default=20)
    ap.add_argument("--metric", default="call_ms")
    ap.add_argument("--expect-under", default=None)
    ap.add_argument(
        "--timer",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: time.perf_counter (default); cpu: time.process_time of this process",
    )
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage line
        return int(exc.code or 0)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module, fn = load(args.target)
    except ImportError as exc:
        print(
            f"cannot import {args.target.partition(':')[0]} ({exc}); is it on PYTHONPATH?",
            file=sys.stderr,
        )
        return 2
    except Exception as exc:  # errors of the user's code at import are reported, not raised
        print(f"cannot load {args.target}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    where = getattr(module, "__file__", None) or ""
    if not args.summary:
        print(json.dumps({"module_file": where}), flush=True)
    if args.expect_under and not _inside(where, args.expect_under):
        print(
            f"{module.__name__} was imported from {where or '(no file)'}, not from "
            f"{args.expect_under}: an installed copy shadows the code under test",
            file=sys.stderr,
        )
        return 3
    try:
        if args.summary:
            _emit(time_callable(fn, args.blocks, args.min_block_ms, args.warmup_s))
            return 0
        clock = time.process_time if args.timer == "cpu" else time.perf_counter
        for ms in time_blocks(
            fn,
            blocks=args.blocks,
            min_block_ms=args.min_block_ms,
            warmup_s=args.warmup_s,
            warmup_calls=args.warmup_calls,
            clock=clock,
        ):
            _emit({"metric": args.metric, "value": ms})
    except Exception as exc:  # the user's function failed: one line, the caller reports it
        print(f"the function raised {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


def _emit(obj: dict) -> None:
    """Print ``obj`` as one JSON line on stdout, on a line of its own: the function timed may have printed
    without ending its line (a progress ``print(..., end="")``), and a JSON line appended to it is read as
    no result."""
    sys.stdout.write("\n" + json.dumps(obj) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
