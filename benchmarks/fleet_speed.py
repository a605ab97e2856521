"""How long ``forensics fleet report`` takes on 1,000 nodes x 8 GPUs, and how much memory it needs.

Budget (issue 17): under 5 s and under 1 GiB on the 2-core development machine. Usage::

    python benchmarks/fleet_speed.py [--nodes 1000] [--gpus 8] [--runs 3]

Builds the synthetic fleet of :mod:`forensics.fleet.synth` (real H200 snapshots, canary
telemetry and bench figures from examples/, four planted outliers) in a temporary
folder, then runs ``forensics fleet report FLEET -o report.html --prom fleet.prom`` as
fresh processes (what a user pays: start-up, streaming the file, the rules, the HTML
with its 8,000-cell heat map, the Prometheus file). Prints wall time (median, min,
max) and the peak resident memory of the report process (``ru_maxrss`` of the child).
Timings are printed, never asserted (tests hold no timings).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _child_peak_mib(before: int) -> float:
    """Peak RSS of the largest child so far, MiB (Linux reports ru_maxrss in KiB)."""
    return max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from forensics.fleet import synth

    with tempfile.TemporaryDirectory(prefix="forensics-fleet-bench-") as tmp:
        fleet = Path(tmp) / "fleet.json"
        t0 = time.perf_counter()
        synth.write_fleet(fleet, ROOT, args.nodes, args.gpus, plant=True, seed=0)
        gen_s = time.perf_counter() - t0
        size_mb = fleet.stat().st_size / 1e6
        walls, peaks = [], []
        verdict = ""
        for _ in range(args.runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            t = time.perf_counter()
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "forensics",
                    "fleet",
                    "report",
                    str(fleet),
                    "-q",
                    "-o",
                    str(Path(tmp) / "report.html"),
                    "--prom",
                    str(Path(tmp) / "fleet.prom"),
                ],
                capture_output=True,
                text=True,
                env=dict(os.environ, PYTHONPATH=str(ROOT)),
            )
            walls.append(time.perf_counter() - t)
            peaks.append(_child_peak_mib(before))
            if r.returncode != 0:
                print(r.stderr, file=sys.stderr)
                return 1
            verdict = r.stdout.strip()
        html_mb = (Path(tmp) / "report.html").stat().st_size / 1e6
        prom_mb = (Path(tmp) / "fleet.prom").stat().st_size / 1e6
    print(
        f"fleet of {args.nodes} nodes x {args.gpus} GPUs: {size_mb:.0f} MB JSON, generated in {gen_s:.1f} s"
    )
    print(
        f"forensics fleet report (fresh process, HTML {html_mb:.1f} MB + Prometheus {prom_mb:.1f} MB): "
        f"median {statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f}, {args.runs} runs); "
        f"peak RSS {max(peaks):.0f} MiB (budget: 5 s, 1024 MiB)"
    )
    print(f"verdict: {verdict[:300]}{' ...' if len(verdict) > 300 else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
