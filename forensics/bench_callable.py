"""Time a Python callable in this (fresh) process and print JSON metric lines.

Run as ``python -m forensics.bench_callable package.module:function`` with the
code under test first on ``sys.path`` (``forensics bisect --callable`` sets
``PYTHONPATH`` to the worktree and runs this with the worktree as cwd). It
prints one ``{"metric": "call_ms", "value": <ms per call>}`` line per timed
block, the format :mod:`forensics.userstep` reads.

The callable must wait for its own GPU work (``torch.cuda.synchronize()``)
before it returns: this times the call on the host.

Method: warm-up calls until both ``--warmup-calls`` (20) calls and
``--warmup-s`` (0.2 s) are done, or 5 x ``--warmup-s`` has passed; then
``--blocks`` timed blocks of ``time.perf_counter`` around a loop whose length
is calibrated so one block lasts at least ``--min-block-ms``. ``--timer cpu``
uses ``time.process_time`` instead (CPU-bound callables on a shared machine;
it excludes time the process waits, so it is never right for GPU work). With
``--expect-under DIR`` it first checks that the module was imported from
inside DIR and exits 3 otherwise (so a bisect never measures the wrong code).

Exit status: 0 ok; 2 bad target (cannot import, not callable); 3 module
imported from outside ``--expect-under``; 1 the callable raised.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time


def _load(target: str):
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
        return os.path.commonpath([os.path.realpath(path), os.path.realpath(folder)]) == os.path.realpath(folder)
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m forensics.bench_callable")
    ap.add_argument("target", help="package.module:function (called with no arguments)")
    ap.add_argument("--blocks", type=int, default=15)
    ap.add_argument("--min-block-ms", type=float, default=5.0)
    ap.add_argument("--warmup-s", type=float, default=0.2, help="warm up at least this long and --warmup-calls "
                    "calls (but stop after 5 x this)")
    ap.add_argument("--warmup-calls", type=int, default=20)
    ap.add_argument("--metric", default="call_ms")
    ap.add_argument("--expect-under", default=None)
    ap.add_argument("--timer", choices=("wall", "cpu"), default="wall",
                    help="wall: time.perf_counter (default); cpu: time.process_time of this process")
    args = ap.parse_args(argv)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module, fn = _load(args.target)
    except Exception as exc:  # import errors of the user's code are reported, not raised
        print(f"bench_callable: cannot load {args.target}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    where = getattr(module, "__file__", None) or ""
    print(json.dumps({"module_file": where}), flush=True)
    if args.expect_under and not _inside(where, args.expect_under):
        print(f"bench_callable: {module.__name__} was imported from {where or '(no file)'}, not from "
              f"{args.expect_under}: an installed copy shadows the code under test", file=sys.stderr)
        return 3
    clock = time.process_time if args.timer == "cpu" else time.perf_counter
    try:
        t0 = time.perf_counter()
        fn()
        calls = 1
        while True:
            spent = time.perf_counter() - t0
            if (calls >= args.warmup_calls and spent >= args.warmup_s) or spent >= 5 * args.warmup_s:
                break
            fn()
            calls += 1
        loops = 1
        while True:  # calibrate: one block >= min_block_ms
            t0 = clock()
            for _ in range(loops):
                fn()
            dt = clock() - t0
            if dt * 1e3 >= args.min_block_ms or loops >= 1 << 20:
                break
            loops *= 2
        for _ in range(args.blocks):
            t0 = clock()
            for _ in range(loops):
                fn()
            dt = clock() - t0
            print(json.dumps({"metric": args.metric, "value": dt * 1e3 / loops}), flush=True)
    except Exception as exc:
        print(f"bench_callable: {args.target} raised {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
