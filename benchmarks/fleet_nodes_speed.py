"""How long ``forensics fleet report DIR`` takes on 1,000 plain node snapshots of 8 GPUs, and its memory.

Budget (issue 28): under 5 s and under 1 GiB on the 2-core development machine. Usage::

    python benchmarks/fleet_nodes_speed.py [--nodes 1000] [--gpus 8] [--runs 3] [--gzip]

Writes the node snapshots of :func:`forensics.fleet.synth.write_node_snapshots` (each a whole
``forensics snapshot`` document built from the real H200 snapshots in examples/, its own file,
as ``srun forensics snapshot -o snaps/%N.json`` leaves them; four planted outliers) into a
temporary folder, then runs ``forensics fleet report DIR -o report.html --prom fleet.prom`` as
fresh processes: every file is read from disk. Prints wall time, CPU time of the report process
(user + sys: what the machine's other load does not inflate as much as wall time) and its peak
resident memory (``ru_maxrss``). Timings are printed, never asserted (tests hold no timings).
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--gzip", action="store_true", help="write the snapshots as .json.gz")
    ap.add_argument(
        "--cold",
        action="store_true",
        help="drop the page cache before each run (root: writes 1 to /proc/sys/vm/drop_caches), so "
        "every file is read from the disk as on a first report of a gathered folder",
    )
    args = ap.parse_args()
    if args.cold and not os.access("/proc/sys/vm/drop_caches", os.W_OK):
        print("--cold: /proc/sys/vm/drop_caches is not writable here (needs root)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    from forensics.fleet import synth

    with tempfile.TemporaryDirectory(prefix="forensics-fleet-nodes-bench-") as tmp:
        snaps = Path(tmp) / "snaps"
        t0 = time.perf_counter()
        files = synth.write_node_snapshots(
            snaps,
            ROOT,
            args.nodes,
            args.gpus,
            plant=True,
            seed=0,
            suffix=".json.gz" if args.gzip else ".json",
        )
        gen_s = time.perf_counter() - t0
        sizes = [f.stat().st_size for f in files]
        walls, cpus, peaks = [], [], []
        verdict = ""
        for _ in range(args.runs):
            if args.cold:
                os.sync()
                Path("/proc/sys/vm/drop_caches").write_text("1\n")
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "forensics",
                    "fleet",
                    "report",
                    str(snaps),
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
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
            peaks.append(max(before.ru_maxrss, after.ru_maxrss) / 1024)
            if r.returncode != 0:
                print(r.stderr, file=sys.stderr)
                return 1
            verdict = r.stdout.strip()
    print(
        f"{args.nodes} node snapshots x {args.gpus} GPUs ({'gzip' if args.gzip else 'JSON'}, "
        f"{statistics.median(sizes) / 1e3:.0f} KB each, {sum(sizes) / 1e6:.0f} MB in all), written in {gen_s:.1f} s"
    )
    print(
        "forensics fleet report DIR (fresh process, HTML + Prometheus"
        + ("; page cache dropped before each run" if args.cold else "; files in the page cache")
        + f"): wall median {statistics.median(walls):.2f} s "
        f"(min {min(walls):.2f}, max {max(walls):.2f}, {args.runs} runs); CPU user+sys median "
        f"{statistics.median(cpus):.2f} s; peak RSS {max(peaks):.0f} MiB (budget: 5 s, 1024 MiB); "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    print(f"verdict: {verdict[:300]}{' ...' if len(verdict) > 300 else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
