"""Timeline of one default ``forensics snapshot``: where its wall clock goes, phase by phase.

Each run is a fresh interpreter that wraps a few functions of the snapshot path (imports, probe
loading, each probe's thread, some of the probes' own steps, building and writing the document,
printing the summary) with ``time.perf_counter`` marks, then runs the real CLI. The parent records
the wall clock (``time.time``) before starting it and after it exits, so Python's start-up and the
exit (atexit handlers, stopping helpers, interpreter shutdown) are measured too, outside the
child's view.

The snapshot runs as a user runs it: the default output (the summary table), printed to a
pseudo-terminal (:mod:`ptyrun`), from the current folder (run it inside a git checkout: the git
probe then reads a repository). ``--quiet`` times ``snapshot -q`` instead (only the path printed).

    python3 benchmarks/snapshot_timeline.py [--runs 5] [--quiet] [--out FILE]

Prints, per phase, the median start and end in milliseconds from the parent's launch. This is a
diagnostic for docs/benchmarks.md, not a test: the wrapped functions are internal and may move.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

# (module, attribute path, label): functions timed in the child, when they exist in this build.
TARGETS = (
    ("forensics.collect", "load_probes", "load probes (imports every probe module)"),
    ("forensics.runner", "_run_one", "probe thread"),
    ("forensics.snapshot", "build", "build document (redaction sweep)"),
    ("forensics.snapshot", "save", "write file"),
    ("forensics.gpu.nvml", "Nvml.unavailable", "gpu: nvmlInit"),
    ("forensics.gpu.nvml", "Nvml.devices", "gpu: handles"),
    ("forensics_probes.gpu.probe", "GpuProbe._read_gpus", "gpu: read GPUs"),
    ("forensics_probes.gpu.probe", "GpuProbe._read_topology", "gpu: nvidia-smi topo -m"),
    ("forensics_probes.gpu.topology", "from_nvml", "gpu: topology matrix from NVML"),
    ("forensics_probes.gpu.probe", "GpuProbe._read_pci", "gpu: sysfs PCI"),
    ("forensics.env.collect", "run_start_methods", "nccl_env: all start-method workers"),
    ("forensics.env.collect", "_mp_worker", "nccl_env: worker"),
    ("forensics.env.collect", "_cmd_worker", "nccl_env: subprocess worker"),
    ("forensics.env.data", "_parent_side", "nccl_env: parent side"),
    ("forensics_probes.libs.probe", "query_versions", "libs: version child"),
    ("forensics_probes.host", "_ProcessWindow._times", "host: process scan"),
    ("forensics.render.terminal", "print_snapshot_summary", "print: summary table"),
)
CONDITION = (
    "PYTHONDONTWRITEBYTECODE set (only .pyc files already there are read)"
    if __import__("sys").flags.dont_write_bytecode
    else "bytecode written and read"
)


def _child(out: str, snapshot_path: str, quiet: bool) -> None:
    t0_wall, p0 = time.time(), time.perf_counter()
    spans: list[tuple[str, float, float]] = []

    import importlib
    import threading

    def timed(fn, label):
        def wrapper(*args, **kwargs):
            start, cpu = time.perf_counter() - p0, time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                name = label
                if label == "probe thread" and args:
                    name = f"probe {args[0].probe.name}"
                elif label == "nccl_env: worker" and args:
                    name = f"nccl_env: {args[0]} worker"
                elif label == "host: process scan":
                    name = f"host: process scan {1 + sum(n.startswith(label) for n, *_ in spans)}"
                elif threading.current_thread().name.startswith("forensics-gpu"):
                    name = f"{label} ({threading.current_thread().name})"
                if label.startswith("print:") and any(
                    n == name for n, *_ in spans
                ):  # called twice in a run
                    name = f"{name} {1 + sum(n.startswith(name) for n, *_ in spans)}"
                spans.append((name, start, time.perf_counter() - p0, time.thread_time() - cpu))

        return wrapper

    start, cpu = time.perf_counter() - p0, time.thread_time()
    import forensics.cli  # noqa: F401
    import forensics.cli.snapshot  # noqa: F401

    spans.append(
        (
            "import CLI (click, snapshot command)",
            start,
            time.perf_counter() - p0,
            time.thread_time() - cpu,
        )
    )
    start, cpu = time.perf_counter() - p0, time.thread_time()
    for module_name, attr, label in TARGETS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        owner, _, name = attr.rpartition(".")
        holder = getattr(module, owner) if owner else module
        if hasattr(holder, name):
            setattr(holder, name, timed(getattr(holder, name), label))
    spans.append(
        (
            "import core + wrap (timeline only)",
            start,
            time.perf_counter() - p0,
            time.thread_time() - cpu,
        )
    )
    try:  # the console script's entry point where this build has one (it also sets up the exit)
        from forensics.__main__ import main as entry
    except ImportError:
        from forensics.cli import run as entry
    sys.argv[1:] = ["snapshot", *(["-q"] if quiet else []), "-o", snapshot_path]

    def finish() -> None:
        end = time.perf_counter() - p0
        Path(out).write_text(
            json.dumps(
                {"t0_wall": t0_wall, "end": end, "spans": spans, "process_cpu": time.process_time()}
            )
        )

    try:  # a build whose snapshot ends the process itself once the command returns: record first
        import forensics.cli.common as common

        if hasattr(common, "quick_exit"):
            leave = common.quick_exit
            common.quick_exit = lambda code: (finish(), leave(code))
    except ImportError:
        pass
    try:
        entry()
    except SystemExit:
        pass
    finish()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--quiet", action="store_true", help="time `snapshot -q` (the path printed, no table)"
    )
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child, args.quiet)
        return 0
    sys.path.insert(0, str(Path(__file__).parent))
    from ptyrun import run_in_pty

    rows: dict[str, list[tuple[float, float, float]]] = {}
    walls, starts, tails, cpus = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs + 1):  # the first run warms the file cache and is not counted
            tl, snap = Path(tmp) / "tl.json", Path(tmp) / "snap.json"
            launch = time.time()
            rc, printed, wall = run_in_pty(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    str(tl),
                    str(snap),
                    *(["--quiet"] if args.quiet else []),
                ]
            )
            done = launch + wall
            if rc:
                raise SystemExit(
                    f"the snapshot exited {rc}: {printed.decode(errors='replace')[-400:]}"
                )
            if i == 0:
                continue
            data = json.loads(tl.read_text())
            offset = (data["t0_wall"] - launch) * 1000
            walls.append((done - launch) * 1000)
            starts.append(offset)
            tails.append((done - data["t0_wall"]) * 1000 - data["end"] * 1000)
            cpus.append(data["process_cpu"] * 1000)
            for name, s, e, c in data["spans"]:
                rows.setdefault(name, []).append((offset + s * 1000, offset + e * 1000, c * 1000))
            written = max(
                (e for name, _, e, _ in data["spans"] if name == "write file"), default=None
            )
            if written is not None:
                rows.setdefault("print (write file's end to the command's return)", []).append(
                    (offset + written * 1000, offset + data["end"] * 1000, 0.0)
                )
    med = statistics.median
    what = (
        "snapshot -q (path only)"
        if args.quiet
        else "snapshot, default output (the table, on a pty)"
    )
    lines = [
        f"{what}, {CONDITION}; {args.runs} runs, ms from launch (medians); "
        "cpu: that thread's own CPU time (time.thread_time)",
        f"{'phase':52} {'start':>7} {'end':>7} {'length':>7} {'cpu':>6}",
        f"{'Python start-up (to the first line of the child)':52} {0:7.0f} {med(starts):7.0f} {med(starts):7.0f}",
    ]
    for name, spans in sorted(rows.items(), key=lambda kv: med(s for s, _, _ in kv[1])):
        s, e = med(a for a, _, _ in spans), med(b for _, b, _ in spans)
        lines.append(
            f"{name[:52]:52} {s:7.0f} {e:7.0f} {med(b - a for a, b, _ in spans):7.0f} "
            f"{med(c for _, _, c in spans):6.0f}"
        )
    lines.append(f"{'exit (after run() returned)':52} {'':7} {'':7} {med(tails):7.0f}")
    lines.append(f"{'wall':52} {0:7.0f} {med(walls):7.0f} {med(walls):7.0f}")
    lines.append(
        f"{'CPU time of the snapshot process, all threads':52} {'':7} {'':7} {'':7} {med(cpus):6.0f}"
    )
    text = "\n".join(lines)
    print(text)
    if args.out:
        with args.out.open("a") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
