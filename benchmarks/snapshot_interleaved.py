"""`forensics snapshot` of two builds and `python -m torch.utils.collect_env`, fresh processes interleaved.

Used for the H200 figures in docs/benchmarks.md. Run it from inside a git checkout (the git probe then
reads a repository, as in a user's project):

    python3 benchmarks/snapshot_interleaved.py --new SITE_DIR --old SITE_DIR [--build NAME=SITE_DIR ...]
        [--rounds 9] [--label TEXT] [--out FILE]

``--new``/``--old``/``--build``: folders put on PYTHONPATH for each build (``pip install --target DIR``),
each run as a user runs it, through the ``forensics`` script pip wrote in ``DIR/bin`` (``python -m
forensics`` where there is none); the order of the builds reverses round by round, collect_env runs
every other round (at most ``--env-runs`` times, default 4). Wall clock is
``time.perf_counter`` around ``subprocess.run``: no shell or timing tool in the figure. Prints, and appends
to ``--out``, each command's median/min/max and each build's per-probe ``duration_s`` of its last snapshot.
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new", required=True)
    ap.add_argument("--old")
    ap.add_argument("--build", action="append", default=[], metavar="NAME=SITE_DIR", help="a further build")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--env-runs", type=int, default=4, help="collect_env runs at most (every other round)")
    ap.add_argument("--label", default="")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    builds = {"new": args.new, **({"old": args.old} if args.old else {}),
              **dict(b.split("=", 1) for b in args.build)}

    def command(path: str) -> list[str]:
        script = Path(path, "bin", "forensics")
        return [sys.executable, str(script)] if script.is_file() else [sys.executable, "-m", "forensics"]

    cmds = {f"{name} snapshot": ["env", f"PYTHONPATH={path}", *command(path), "snapshot", "-q",
                                 "-o", str(tmp / f"{name}.json")] for name, path in builds.items()}
    cmds["collect_env"] = [sys.executable, "-m", "torch.utils.collect_env"]
    times: dict[str, list[float]] = {k: [] for k in cmds}
    snaps = [k for k in cmds if k != "collect_env"]
    for i in range(args.rounds):
        order = snaps if i % 2 == 0 else snaps[::-1]
        if i % 2 == 0 and len(times["collect_env"]) < args.env_runs:
            order = [*order, "collect_env"]
        for k in order:
            t0 = time.perf_counter()
            proc = subprocess.run(cmds[k], capture_output=True)
            times[k].append(time.perf_counter() - t0)
            if proc.returncode:
                print(f"{k}: exit {proc.returncode}: {proc.stderr.decode(errors='replace')[-300:]}", file=sys.stderr)
    lines = [f"{args.label} {k}: median {statistics.median(v):.3f} s (min {min(v):.3f}, max {max(v):.3f}, n={len(v)})"
             for k, v in times.items() if v]
    for name in builds:
        try:
            doc = json.loads((tmp / f"{name}.json").read_text())
            lines.append(f"{args.label} {name} per probe: " + ", ".join(
                f"{k} {v.get('duration_s', 0):.3f}" for k, v in doc["probes"].items()))
        except (OSError, ValueError, KeyError):
            lines.append(f"{args.label} {name}: no snapshot written")
    print("\n".join(lines))
    if args.out:
        with open(args.out, "a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
