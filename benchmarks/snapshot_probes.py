"""Where a default ``forensics snapshot`` spends its time: wall clock and each probe's ``duration_s``.

Runs ``python -m forensics snapshot -q`` as fresh processes (``--runs N``,
default 9) and prints the median wall time and, per probe, the median of the
``duration_s`` the snapshot records (probes run concurrently, so the slowest
probe plus start-up and writing decide the wall time). With ``--baseline
PYTHON`` (an interpreter with another forensics installed) both are run
interleaved, the order alternating each round, so a noisy machine slows both alike.

    python benchmarks/snapshot_probes.py --runs 9 [--baseline OTHER/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _one(py: str, out: Path, cwd: str) -> tuple[float, dict[str, float]]:
    t0 = time.perf_counter()
    subprocess.run(
        [py, "-m", "forensics", "snapshot", "-q", "-o", str(out)],
        cwd=cwd,
        check=True,
        capture_output=True,
    )
    wall = time.perf_counter() - t0
    doc = json.loads(out.read_text())
    return wall, {name: float(sec.get("duration_s", 0.0)) for name, sec in doc["probes"].items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument(
        "--baseline", metavar="PYTHON", help="interpreter of a baseline forensics, run interleaved"
    )
    args = ap.parse_args()
    sides = {"this": sys.executable, **({"baseline": args.baseline} if args.baseline else {})}
    walls: dict[str, list[float]] = {k: [] for k in sides}
    probes: dict[str, dict[str, list[float]]] = {k: {} for k in sides}
    with tempfile.TemporaryDirectory() as tmp:
        for py in sides.values():  # warm the file cache once per side
            _one(py, Path(tmp) / "warm.json", tmp)
        for i in range(args.runs):
            for key in list(sides) if i % 2 == 0 else list(reversed(sides)):
                wall, durations = _one(sides[key], Path(tmp) / f"{key}.json", tmp)
                walls[key].append(wall)
                for name, d in durations.items():
                    probes[key].setdefault(name, []).append(d)
    names = sorted({n for p in probes.values() for n in p})
    print(
        f"{'':<10} {'wall':>8} "
        + " ".join(f"{n:>9}" for n in names)
        + f"   (medians of {args.runs} runs, s)"
    )
    for key in sides:
        cells = " ".join(
            f"{statistics.median(probes[key][n]):>9.3f}" if n in probes[key] else f"{'-':>9}"
            for n in names
        )
        print(f"{key:<10} {statistics.median(walls[key]):>8.3f} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
