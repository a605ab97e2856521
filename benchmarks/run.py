"""``make bench``: how long forensics takes, side by side with torch's collect_env.

Times, in one run on this machine, each as several fresh processes (wall clock,
``time.perf_counter`` from the process's start to its exit), and prints a table of medians:

- ``forensics snapshot`` with the default probes and the default output, as a user runs it: in a
  terminal (a pseudo-terminal, :mod:`ptyrun`, so the summary table is really rendered), from the
  current folder (run ``make bench`` in a git checkout: the git probe reads it);
- ``python -m torch.utils.collect_env`` when torch is installed (the tool users run today; it imports
  torch and starts CUDA where there is a GPU), on the same pty, interleaved with the snapshot round
  by round, so both meet the same machine;
- ``forensics snapshot -q`` (only the path printed) and ``forensics --help`` (start-up);
- ``forensics diff`` of two snapshots with HTML rendering, when installed.

The first line names the condition: whether Python writes bytecode (``PYTHONDONTWRITEBYTECODE``) and
whether forensics' own modules have compiled ``.pyc`` files next to them (docs/benchmarks.md measures
both conditions: everything compiled, as ``pip install`` leaves a machine, and no ``.pyc`` at all).

Options: ``--runs N`` (default 5; collect_env gets min(N, 3) and pairs with the first snapshots), ``--json FILE``,
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

sys.path.insert(0, str(Path(__file__).parent))
from ptyrun import COLUMNS, LINES, run_in_pty  # noqa: E402


def _once(argv: list[str], cwd: str, tty: bool) -> tuple[int, float]:
    if tty:
        rc, _out, wall = run_in_pty(argv, cwd=cwd)
        return rc, wall
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    return proc.returncode, time.perf_counter() - t0


def _summary(times: list[float], rc: int) -> dict:
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "runs": len(times),
        "rc": rc,
    }


def _time(argv: list[str], runs: int, cwd: str, tty: bool = False) -> dict:
    times, rc = [], 0
    for _ in range(runs):
        code, wall = _once(argv, cwd, tty)
        times.append(wall)
        rc = rc or code
    return _summary(times, rc)


def _interleaved(
    pairs: dict[str, list[str]],
    runs: int,
    cwd: str,
    tty: bool = True,
    limit: dict[str, int] | None = None,
) -> dict[str, dict]:
    """Time each command of ``pairs`` once per round (at most ``limit[key]`` times), the order reversing
    each round, on a pty when ``tty``; like :func:`_time`."""
    times: dict[str, list[float]] = {k: [] for k in pairs}
    rcs = {k: 0 for k in pairs}
    for i in range(runs):
        for key in list(pairs) if i % 2 == 0 else list(reversed(pairs)):
            if limit and len(times[key]) >= limit.get(key, runs):
                continue
            code, wall = _once(pairs[key], cwd, tty)
            times[key].append(wall)
            rcs[key] = rcs[key] or code
    return {k: _summary(v, rcs[k]) for k, v in times.items()}


def condition() -> str:
    """Whether Python writes bytecode here and whether forensics' modules have compiled files."""
    import forensics

    pkg = Path(forensics.__file__).parent
    compiled = sum(1 for _ in pkg.rglob("*.pyc"))
    writes = (
        "PYTHONDONTWRITEBYTECODE set" if sys.dont_write_bytecode else "bytecode written on import"
    )
    return f"{writes}; {compiled} .pyc files in forensics' own package"


def _in_git(folder: str) -> bool:
    return any((p / ".git").exists() for p in (Path(folder), *Path(folder).parents))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--baseline",
        metavar="PYTHON",
        help="interpreter of a baseline forensics, timed interleaved",
    )
    args = ap.parse_args()
    py = sys.executable
    rows = []
    cwd = str(Path.cwd())  # a user's project folder: the git probe reads the checkout it is in
    with tempfile.TemporaryDirectory() as tmp:
        a, b = str(Path(tmp) / "a.json"), str(Path(tmp) / "b.json")
        subprocess.run(
            [py, "-m", "forensics", "snapshot", "-q", "-o", a], check=True, capture_output=True
        )
        subprocess.run(
            [py, "-m", "forensics", "snapshot", "-q", "-o", b], check=True, capture_output=True
        )
        snap = ["-m", "forensics", "snapshot", "-o", str(Path(tmp) / "s.json")]
        quiet = ["-m", "forensics", "snapshot", "-q", "-o", str(Path(tmp) / "q.json")]
        pairs = {"snap": [py, *snap]}
        if args.baseline:
            subprocess.run([args.baseline, *quiet], check=True, capture_output=True, cwd=cwd)
            pairs["base"] = [args.baseline, *snap]
        has_torch = importlib.util.find_spec("torch") is not None
        if has_torch:
            pairs["env"] = [py, "-m", "torch.utils.collect_env"]
        got = _interleaved(pairs, args.runs, cwd, limit={"env": min(args.runs, 3)})
        rows.append(("forensics snapshot (default output, on a pty)", got["snap"]))
        if args.baseline:
            rows.append(("  baseline: forensics snapshot", got["base"]))
        rows.append(
            (
                "forensics snapshot -q (path only, on a pty)",
                _time([py, *quiet], args.runs, cwd, tty=True),
            )
        )
        rows.append(
            (
                "forensics --help (start-up)",
                _time([py, "-m", "forensics", "--help"], args.runs, cwd),
            )
        )
        if importlib.util.find_spec("forensics.cli.diff") is not None:
            rows.append(
                (
                    "forensics diff a b -> HTML (whole process)",
                    _time(
                        [py, "-m", "forensics", "diff", a, b, "-o", str(Path(tmp) / "r.html")],
                        args.runs,
                        tmp,
                    ),
                )
            )
        rows.append(
            ("python -m torch.utils.collect_env (on a pty)", got["env"] if has_torch else None)
        )
    print(
        f"machine: {platform.node()} {platform.machine()}, {platform.processor() or ''} python {platform.python_version()}"
    )
    print(
        f"condition: {condition()}; terminal {COLUMNS}x{LINES}; folder: {'a git checkout' if _in_git(cwd) else 'not a git checkout'}"
    )
    print(f"{'command':<48} {'median':>9} {'min':>9} {'max':>9} {'runs':>5}")
    for name, r in rows:
        if r is None:
            print(f"{name:<48} {'(torch not installed)':>30}")
            continue
        flag = "" if r["rc"] == 0 else f"  (exit {r['rc']})"
        print(
            f"{name:<48} {r['median_s']:>8.3f}s {r['min_s']:>8.3f}s {r['max_s']:>8.3f}s {r['runs']:>5}{flag}"
        )
    env = next((r for n, r in rows if n.startswith("python -m torch") and r), None)
    if env:
        print(
            f"default snapshot / collect_env (medians, interleaved): 1/{env['median_s'] / rows[0][1]['median_s']:.1f}"
        )
    if args.json:
        args.json.write_text(json.dumps({n: r for n, r in rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
