"""`forensics snapshot` of one or more builds and `python -m torch.utils.collect_env`, fresh processes interleaved.

Used for the H200 figures in docs/benchmarks.md. Each command runs as a user runs it: in a terminal
(stdout and stderr on a pseudo-terminal, :mod:`ptyrun`, so the snapshot prints and renders its
default output, the summary table), from the current folder (run it inside a git checkout: the git
probe then reads a repository, as in a user's project):

    python3 benchmarks/snapshot_interleaved.py --new SITE_DIR [--old SITE_DIR] [--build NAME=SITE_DIR ...]
        [--rounds 9] [--env-every 1] [--quiet-too] [--condition TEXT] [--out FILE]

``--new``/``--old``/``--build``: folders put on PYTHONPATH for each build (``pip install --target DIR``),
each run through the ``forensics`` script pip wrote in ``DIR/bin`` (``python -m forensics`` where there
is none). Each round runs every build's ``forensics snapshot`` (default output) and, every
``--env-every`` rounds, collect_env: a snapshot and collect_env side by side in one call, the order
reversing round by round. ``--quiet-too`` adds each build's ``snapshot -q``. The wall clock is
``time.perf_counter`` around the process (start to exit): no shell or timing tool in the figure.

``--condition`` names the state of the machine's compiled modules (the caller sets it up: see
docs/benchmarks.md), and is printed on every line. Prints, and appends to ``--out``, each command's
median/min/max, the ratio of each snapshot's median to collect_env's, and each build's per-probe
``duration_s`` of its last snapshot.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from ptyrun import COLUMNS, LINES, run_in_pty  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new", required=True)
    ap.add_argument("--old")
    ap.add_argument(
        "--build", action="append", default=[], metavar="NAME=SITE_DIR", help="a further build"
    )
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument(
        "--env-every", type=int, default=1, help="collect_env runs every N rounds (1: every round)"
    )
    ap.add_argument("--quiet-too", action="store_true", help="also time each build's `snapshot -q`")
    ap.add_argument(
        "--condition", default="", help="the machine's state (compiled modules or not), printed"
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    builds = {
        "new": args.new,
        **({"old": args.old} if args.old else {}),
        **dict(b.split("=", 1) for b in args.build),
    }

    def command(path: str) -> list[str]:
        script = Path(path, "bin", "forensics")
        return (
            [sys.executable, str(script)]
            if script.is_file()
            else [sys.executable, "-m", "forensics"]
        )

    cmds: dict[str, list[str]] = {}
    for name, path in builds.items():
        run = ["env", f"PYTHONPATH={path}", *command(path), "snapshot"]
        cmds[f"{name} snapshot"] = [*run, "-o", str(tmp / f"{name}.json")]
        if args.quiet_too:
            cmds[f"{name} snapshot -q"] = [*run, "-q", "-o", str(tmp / f"{name}-q.json")]
    cmds["collect_env"] = [sys.executable, "-m", "torch.utils.collect_env"]
    times: dict[str, list[float]] = {k: [] for k in cmds}
    snaps = [k for k in cmds if k != "collect_env"]
    printed: dict[str, bytes] = {}
    for i in range(args.rounds):
        order = [*snaps, "collect_env"] if i % args.env_every == 0 else list(snaps)
        for k in order if i % 2 == 0 else order[::-1]:
            rc, out, wall = run_in_pty(cmds[k])
            times[k].append(wall)
            printed[k] = out
            if rc:
                print(f"{k}: exit {rc}: {out.decode(errors='replace')[-300:]}", file=sys.stderr)
    tag = f"[{args.condition}] " if args.condition else ""
    lines = [
        f"{tag}{args.rounds} rounds, fresh processes on a {COLUMNS}x{LINES} pty, order reversing each round"
    ]
    env = statistics.median(times["collect_env"]) if times["collect_env"] else None
    for k, v in times.items():
        if not v:
            continue
        med = statistics.median(v)
        ratio = f"  1/{env / med:.1f} of collect_env" if env and k != "collect_env" else ""
        lines.append(
            f"{tag}{k}: median {med:.3f} s (min {min(v):.3f}, max {max(v):.3f}, n={len(v)}){ratio}"
        )
    for name in builds:
        try:
            doc = json.loads((tmp / f"{name}.json").read_text())
            lines.append(
                f"{tag}{name} per probe: "
                + ", ".join(
                    f"{k} {v.get('status')} {v.get('duration_s', 0):.3f}"
                    for k, v in doc["probes"].items()
                )
            )
        except (OSError, ValueError, KeyError):
            lines.append(f"{tag}{name}: no snapshot written")
    print("\n".join(lines))
    for k in snaps:
        if not k.endswith("-q"):
            print(f"--- what `{k}` printed last (the table, as the terminal got it) ---")
            print(printed.get(k, b"").decode(errors="replace").replace("\r\n", "\n"))
    if args.out:
        with open(args.out, "a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
