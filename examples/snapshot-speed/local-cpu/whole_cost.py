"""Whole default snapshot, old vs new build, fresh processes on a pty: wall, the tail after the command
returned (exit), and the CPU time of the process tree (RUSAGE_CHILDREN: the snapshot and the children it waited for)."""

import os
import resource
import statistics
import sys
import time

ROOT = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."
)  # the checkout: git reads it
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def child(mark):
    import forensics.cli

    run = forensics.cli.run

    def timed(*a, **k):
        try:
            return run(*a, **k)
        finally:
            open(mark, "w").write(repr(time.time()))

    forensics.cli.run = timed
    sys.argv[1:] = ["snapshot", "-o", "/tmp/wc.json"]
    from forensics.__main__ import main

    main()


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child(sys.argv[2])
        sys.exit(0)
    from ptyrun import run_in_pty

    runs, label = int(sys.argv[1]), sys.argv[2]
    res = {"old": [], "new": []}
    for i in range(runs):
        for b in ("old", "new") if i % 2 == 0 else ("new", "old"):
            env = dict(os.environ, PYTHONPATH=f"/tmp/{b}-l")
            ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.time()
            rc, out, wall = run_in_pty(
                [sys.executable, __file__, "--child", "/tmp/wc.mark"], env=env, cwd=ROOT
            )
            end = t0 + wall
            ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            assert rc == 0, out[-800:]
            tail = end - float(open("/tmp/wc.mark").read())
            cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
            res[b].append((wall, tail, cpu))
    for b, v in res.items():

        def m(k, v=v):
            return 1000 * statistics.median(x[k] for x in v)

        print(
            f"[{label}] {b}: wall {m(0):.0f} ms, exit after the command returned {m(1):.1f} ms, CPU of the tree {m(2):.0f} ms (medians, n={len(v)})"
        )
