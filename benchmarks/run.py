"""``make bench``: how long forensics takes, side by side with torch's collect_env.

Times, in one run on this machine, each as several fresh processes (wall clock,
``time.perf_counter`` around ``subprocess.run``), and prints a table of medians:

- ``forensics snapshot`` with the default probes (what a user runs);
- ``python -m torch.utils.collect_env`` when torch is installed (the tool
  users run today; it imports torch and starts CUDA where there is a GPU);
- ``forensics diff`` of two snapshots with HTML rendering, when installed.

Options: ``--runs N`` (default 5; collect_env gets min(N, 3)), ``--json FILE``,
``--baseline PYTHON``: another interpreter with another forensics installed
(e.g. a venv of the previous commit); its ``forensics snapshot`` and ``--help``
are timed interleaved with this one's, run by run, the order alternating, so a
noisy, shared machine slows both alike. Record the table in docs/benchmarks.md
together with the machine it ran on.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _time(argv: list[str], runs: int, cwd: str) -> dict:
    times, rc = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        rc = rc or proc.returncode
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "runs": runs, "rc": rc}


def _interleaved(pairs: dict[str, list[str]], runs: int, cwd: str) -> dict[str, dict]:
    """Time each command of ``pairs`` once per round, rounds alternating the order; like :func:`_time`."""
    times: dict[str, list[float]] = {k: [] for k in pairs}
    rcs = {k: 0 for k in pairs}
    for i in range(runs):
        for key in (list(pairs) if i % 2 == 0 else list(reversed(pairs))):
            t0 = time.perf_counter()
            proc = subprocess.run(pairs[key], cwd=cwd, capture_output=True, text=True)
            times[key].append(time.perf_counter() - t0)
            rcs[key] = rcs[key] or proc.returncode
    return {k: {"median_s": statistics.median(v), "min_s": min(v), "max_s": max(v), "runs": runs, "rc": rcs[k]}
            for k, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--baseline", metavar="PYTHON", help="interpreter of a baseline forensics, timed interleaved")
    args = ap.parse_args()
    py = sys.executable
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        a, b = str(Path(tmp) / "a.json"), str(Path(tmp) / "b.json")
        subprocess.run([py, "-m", "forensics", "snapshot", "-q", "-o", a], check=True, capture_output=True)
        subprocess.run([py, "-m", "forensics", "snapshot", "-q", "-o", b], check=True, capture_output=True)
        snap = ["-m", "forensics", "snapshot", "-q", "-o", str(Path(tmp) / "s.json")]
        if args.baseline:
            subprocess.run([args.baseline, *snap], check=True, capture_output=True, cwd=tmp)
            got = _interleaved({"this": [py, *snap], "base": [args.baseline, *snap]}, args.runs, tmp)
            rows.append(("forensics snapshot (default probes)", got["this"]))
            rows.append(("  baseline: forensics snapshot", got["base"]))
            got = _interleaved({"this": [py, "-m", "forensics", "--help"],
                                "base": [args.baseline, "-m", "forensics", "--help"]}, args.runs, tmp)
            rows.append(("forensics --help (start-up)", got["this"]))
            rows.append(("  baseline: forensics --help", got["base"]))
        else:
            rows.append(("forensics snapshot (default probes)", _time([py, *snap], args.runs, tmp)))
            rows.append(("forensics --help (start-up)", _time([py, "-m", "forensics", "--help"], args.runs, tmp)))
        if importlib.util.find_spec("forensics.cli.diff") is not None:
            rows.append(("forensics diff a b -> HTML (whole process)",
                         _time([py, "-m", "forensics", "diff", a, b, "-o", str(Path(tmp) / "r.html")], args.runs, tmp)))
        if importlib.util.find_spec("torch") is not None:
            rows.append(("python -m torch.utils.collect_env",
                         _time([py, "-m", "torch.utils.collect_env"], min(args.runs, 3), tmp)))
        else:
            rows.append(("python -m torch.utils.collect_env", None))
    print(f"machine: {platform.node()} {platform.machine()}, {platform.processor() or ''} python {platform.python_version()}")
    print(f"{'command':<48} {'median':>9} {'min':>9} {'max':>9} {'runs':>5}")
    for name, r in rows:
        if r is None:
            print(f"{name:<48} {'(torch not installed)':>30}")
            continue
        flag = "" if r["rc"] == 0 else f"  (exit {r['rc']})"
        print(f"{name:<48} {r['median_s']:>8.3f}s {r['min_s']:>8.3f}s {r['max_s']:>8.3f}s {r['runs']:>5}{flag}")
    if args.json:
        args.json.write_text(json.dumps({n: r for n, r in rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
