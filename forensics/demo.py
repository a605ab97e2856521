"""``make demo``: the main job on a built-in default, with nothing to invent.

1. Snapshot this machine ("before").
2. Snapshot it again from a child process whose environment differs in one
   harmless way (``NCCL_ALGO=Tree`` set for that child only) ("after").
3. If the diff command is installed: diff the two, write the HTML and Markdown
   root-cause reports, and print the verdict and where the reports are.

Everything is written under ``./forensics-demo/``; nothing else is touched.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

OUT = Path("forensics-demo")


def _forensics(*args: str, env: dict[str, str] | None = None) -> int:
    cmd = [sys.executable, "-m", "forensics", *args]
    print("$ forensics " + " ".join(args), flush=True)
    return subprocess.call(cmd, env=env)


def main() -> int:
    """Run the demo; returns the process exit code."""
    OUT.mkdir(exist_ok=True)
    before, after = OUT / "before.json", OUT / "after.json"
    rc = _forensics("snapshot", "--label", "before", "-o", str(before))
    if rc != 0:
        return rc
    env = dict(os.environ, NCCL_ALGO="Tree")
    print(
        "\n# the 'after' snapshot runs with NCCL_ALGO=Tree set in its own environment only",
        flush=True,
    )
    rc = _forensics("snapshot", "--label", "after", "-o", str(after), env=env)
    if rc != 0:
        return rc
    try:
        import forensics.cli.diff  # noqa: F401  (present once the diff command is installed)
    except ModuleNotFoundError:
        print(f"\nsnapshots written: {before} and {after}")
        return 0
    print()
    report = OUT / "report.html"
    rc = _forensics("diff", str(before), str(after), "-o", str(report))
    subprocess.call(
        [
            sys.executable,
            "-m",
            "forensics",
            "diff",
            str(before),
            str(after),
            "-o",
            str(OUT / "report.md"),
        ],
        stdout=subprocess.DEVNULL,
    )
    print(f"\nreports: {report} (open in a browser) and {OUT / 'report.md'}")
    return 0 if rc in (0, 1) else rc


if __name__ == "__main__":
    sys.exit(main())
