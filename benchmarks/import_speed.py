"""How long importing a pasted ticket text takes, in-process (budget: well under 0.3 s for 200 KB).

Usage::

    python benchmarks/import_speed.py [FILE ...] [--runs N] [--size-kb K]

Without files it builds a ~200 KB ticket the way people paste them, from the real
captures in tests/fixtures/h200x2: a sentence of prose, ``collect_env`` in a
```text fence, ``nvidia-smi -q`` in a ``<details>`` block, ``pip list``, then an
NCCL_DEBUG=INFO log repeated until the text reaches ``--size-kb`` (the detector
has to walk past it), with Windows line ends. It also times the 2-GPU
``nvidia-smi -q -x`` XML alone. Prints the first call (module imports excluded)
and the median, min and max of N further runs of :func:`forensics.importers.import_files`.
Timings are printed, never asserted (tests hold no timings).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "tests" / "fixtures" / "h200x2"


def build_ticket(size_kb: int) -> str:
    parts = [
        "After upgrading, the step is 30% slower. My environment:\n\n<details>\n<summary>collect_env</summary>\n\n"
        "```text\n",
        (H200 / "collect_env.txt").read_text(),
        "```\n</details>\n\n<details>\n<summary>nvidia-smi -q</summary>\n\n```\n",
        (H200 / "nvidia-smi-q.txt").read_text(),
        "```\n</details>\n\npip list:\n```\n",
        (H200 / "pip-list.txt").read_text(),
        "```\n\nThe NCCL log of one run:\n```\n",
    ]
    log = (H200 / "nccl-debug-info.log").read_text()
    text = "".join(parts)
    while len(text.encode()) < size_kb * 1024:
        text += log
    return (text + "```\n").replace("\n", "\r\n")


def time_it(paths: list[Path], runs: int) -> tuple[float, list[float], dict]:
    from forensics.importers import import_files

    t0 = time.perf_counter()
    doc = import_files(paths)
    first = time.perf_counter() - t0
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        import_files(paths)
        times.append(time.perf_counter() - t0)
    return first, times, doc


def report(what: str, size: int, first: float, times: list[float], doc: dict) -> None:
    parts = ", ".join(p["format"] for p in doc["import"]["parts"])
    print(f"{what} ({size / 1024:.0f} KB; parts: {parts})")
    print(
        f"  first call {first * 1000:.1f} ms; then median {statistics.median(times) * 1000:.1f} ms "
        f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f}, {len(times)} runs)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--size-kb", type=int, default=200)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import forensics.importers  # noqa: F401  (module import cost is not the import's)

    if args.files:
        first, times, doc = time_it(args.files, args.runs)
        report(
            " + ".join(map(str, args.files)),
            sum(p.stat().st_size for p in args.files),
            first,
            times,
            doc,
        )
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        ticket = Path(tmp) / "ticket.txt"
        ticket.write_bytes(build_ticket(args.size_kb).encode())
        first, times, doc = time_it([ticket], args.runs)
        report(
            "a pasted ticket: collect_env + nvidia-smi -q + pip list + NCCL log, CRLF",
            ticket.stat().st_size,
            first,
            times,
            doc,
        )
    xml = H200 / "nvidia-smi-q.xml"
    first, times, doc = time_it([xml], args.runs)
    report("nvidia-smi -q -x of 2 x H200", xml.stat().st_size, first, times, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
