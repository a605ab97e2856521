"""How long ``forensics diff`` takes in-process: diff + judge + rank + HTML render of two snapshots.

Budget (DESIGN section 11): under 0.3 s. Usage::

    python benchmarks/diff_speed.py [BEFORE AFTER] [--runs N] [--added-packages N]

Without files it takes two full snapshots of this machine first (default
probes) and makes the second one differ (a package version, an NCCL variable,
a moved HEAD with a reflog entry) so every stage has work. Prints the first call
(probe look-up and template compilation included: what one ``forensics diff``
pays) and the median, min and max of N further runs (``time.perf_counter``
around ``analyse`` + ``render_html``).
``--added-packages N`` adds N packages to AFTER (N changed fields): the time must grow
linearly with N (20,000 and 80,000 differ by about 4x, not 16x).
Timings are printed, never asserted (tests hold no timings).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path


def _make_different(doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    sw = (doc.get("probes") or {}).get("software", {}).get("data") or {}
    if isinstance(sw.get("packages"), dict) and sw["packages"]:
        name = sorted(sw["packages"])[0]
        sw["packages"][name] = str(sw["packages"][name]) + ".post1"
    for repo in ((doc.get("probes") or {}).get("git", {}).get("data") or {}).get("repos") or []:
        if isinstance(repo.get("head"), dict):
            old = repo["head"].get("sha")
            repo["head"]["sha"] = "f" * 40
            repo.setdefault("reflog", []).insert(
                0,
                {
                    "old": old,
                    "new": "f" * 40,
                    "time": "2026-11-29T21:00:00Z",
                    "action": "pull origin main: Fast-forward",
                },
            )
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--added-packages", type=int, default=0, metavar="N")
    args = ap.parse_args()
    from forensics import snapshot as snap
    from forensics.diff.ledger import analyse
    from forensics.render.report import render_html

    if len(args.files) == 2:
        before, after = snap.load(args.files[0]), snap.load(args.files[1])
        what = f"{args.files[0]} vs {args.files[1]}"
    elif not args.files:
        from forensics.collect import take_snapshot

        before = take_snapshot(label="before")
        after = _make_different(take_snapshot(label="after"))
        what = f"two snapshots of this machine ({len(before['probes'])} probes)"
    else:
        ap.error("give two snapshot files or none")
    if args.added_packages:
        after = copy.deepcopy(after)
        pkgs = after["probes"]["software"]["data"]["packages"]
        pkgs.update({f"added-pkg-{i}": "1.0" for i in range(args.added_packages)})
    import jinja2  # noqa: F401  imports are start-up cost, measured by `make bench` as whole processes

    t0 = time.perf_counter()
    render_html(analyse(before, after))
    cold = time.perf_counter() - t0  # first call: probes looked up, templates compiled
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        a = analyse(before, after)
        html = render_html(a)
        times.append(time.perf_counter() - t0)
    print(f"diff + HTML render, {what}: {len(a.changes)} changes, {len(html) / 1024:.0f} KiB HTML")
    print(
        f"first call {cold * 1000:.1f} ms (probe look-up, template compile); then median "
        f"{statistics.median(times) * 1000:.1f} ms, min {min(times) * 1000:.1f} ms, "
        f"max {max(times) * 1000:.1f} ms over {args.runs} runs (budget 300 ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
