"""CPU time of printing the snapshot summary after a snapshot, old build (rich) vs new (plain), fresh processes."""

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks"))


def child(doc_path, out):
    doc = json.load(open(doc_path))
    from forensics.registry import find_probe_class

    for n in doc["probes"]:
        find_probe_class(n)
    import inspect

    c0, w0 = time.process_time(), time.perf_counter()
    from forensics.render.terminal import print_snapshot_summary

    if "console" in inspect.signature(print_snapshot_summary).parameters:
        from forensics.cli.common import console

        print_snapshot_summary(console(), doc)
        console().print("wrote [bold]forensics-x.json[/bold]")
    else:
        print_snapshot_summary(doc, wrote="forensics-x.json")
    open(out, "w").write(json.dumps([time.process_time() - c0, time.perf_counter() - w0]))


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        sys.exit(0)
    from ptyrun import run_in_pty

    doc, runs, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    res = {"old": [], "new": []}
    for i in range(runs):
        for b in ("old", "new") if i % 2 == 0 else ("new", "old"):
            env = dict(os.environ, PYTHONPATH=f"/tmp/{b}-l")
            rc, out, _ = run_in_pty(
                [sys.executable, __file__, "--child", doc, "/tmp/pc.json"], env=env, cwd="/tmp"
            )
            assert rc == 0, out[-500:]
            res[b].append(json.load(open("/tmp/pc.json")))
    for b, v in res.items():
        print(
            f"[{label}] {b}: print CPU median {1000 * statistics.median(c for c, _ in v):.1f} ms "
            f"(min {1000 * min(c for c, _ in v):.1f}), wall median {1000 * statistics.median(w for _, w in v):.1f} ms, n={len(v)}"
        )
