"""Render a diff report and photograph it with headless Chromium (Debian's ``chromium`` package).

Usage::

    python benchmarks/screenshot.py [BEFORE AFTER] [--repo PATH] [-o docs/img/report.png] [--height 1800]

Without snapshot files it builds the "pull halves throughput" scenario of
tests/fixtures/cases/case13_pull_halves_throughput in a temporary folder with a
*real* git repository (a fast-forward pull of four commits, one touching
``distributed/device_communicators/pynccl.py``), read by the registered git
probe, so the screenshot shows the commit list too. The HTML is written next to
the PNG's temp folder and opened as a ``file://`` URL with networking disabled.

Exit codes: 0 written, 2 Chromium not found or it produced no image.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASE = ROOT / "tests" / "fixtures" / "cases" / "case13_pull_halves_throughput"
_ENV = {
    "GIT_AUTHOR_NAME": "Dev One",
    "GIT_AUTHOR_EMAIL": "dev@example.invalid",
    "GIT_COMMITTER_NAME": "Dev One",
    "GIT_COMMITTER_EMAIL": "dev@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_SYSTEM": os.devnull,
}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=cwd, env=dict(os.environ, **_ENV), check=True, capture_output=True
    )


def _commit(repo: Path, rel: str, text: str, msg: str) -> None:
    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
    (repo / rel).write_text(text)
    _git(repo, "add", rel)
    _git(repo, "commit", "-q", "-m", msg)


def _git_section(repo: Path, shown_as: str = "/home/user/assistant") -> dict:
    from forensics.probe import ProbeContext
    from forensics.registry import find_probe_class

    probe = find_probe_class("git")
    if probe is None:
        raise SystemExit("the git probe is not registered; pip install -e . first")
    ctx = ProbeContext({"repo": str(repo)})
    data = probe.collect(ctx)
    # keep only the scenario's repository, named as on a user's machine (no temp paths in the picture)
    data["repos"] = [
        dict(r, path=shown_as) for r in data.get("repos", []) if Path(r["path"]) == repo.resolve()
    ]
    return {"status": "ok", "duration_s": 0.01, "data": data, "errors": ctx.errors}


def scenario(tmp: Path) -> tuple[dict, dict]:
    """Case 13's snapshots with the git section replaced by a real repository's, before and after a pull."""
    up, work = tmp / "upstream", tmp / "assistant"
    up.mkdir()
    _git(up, "init", "-q", "-b", "main")
    _commit(up, "README.md", "assistant\n", "initial import")
    _commit(up, "assistant/generate.py", "MAX_NEW_TOKENS = 512\n", "generate: first version")
    _git(tmp, "clone", "-q", str(up), str(work))
    before = json.loads((CASE / "before.json").read_text())
    after = json.loads((CASE / "after.json").read_text())
    before["probes"]["git"] = _git_section(work)
    _commit(up, "docs/usage.md", "run it\n" * 12, "docs: usage page")
    _commit(
        up,
        "assistant/distributed/device_communicators/pynccl.py",
        "def all_reduce(x, stream):\n    stream.synchronize()\n    return x\n" * 4,
        "pynccl: synchronize the stream after every all_reduce",
    )
    _commit(
        up,
        "assistant/generate.py",
        "MAX_NEW_TOKENS = 256  # planner limit\n",
        "feat(generation): cap max_new_tokens at the planner limit",
    )
    _commit(
        up,
        "tests/test_generate.py",
        "def test():\n    assert True\n",
        "tests: generation smoke test",
    )
    _git(work, "pull", "origin", "main")
    after["probes"]["git"] = _git_section(work)
    return before, after


def shoot(html: Path, png: Path, width: int, height: int) -> None:
    """Photograph ``html`` with headless Chromium (no network, throwaway profile)."""
    exe = (
        shutil.which("chromium")
        or shutil.which("chromium-browser")
        or shutil.which("google-chrome")
    )
    if exe is None:
        print("chromium not found: apt-get install -y chromium", file=sys.stderr)
        raise SystemExit(2)
    with tempfile.TemporaryDirectory() as prof:
        cmd = [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={prof}",
            f"--screenshot={png}",
            f"--window-size={width},{height}",
            html.resolve().as_uri(),
        ]
        subprocess.run(cmd, capture_output=True, timeout=60)
    if not png.is_file() or png.stat().st_size == 0:
        print(f"chromium wrote no image at {png}", file=sys.stderr)
        raise SystemExit(2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--repo", type=Path)
    ap.add_argument("-o", "--output", type=Path, default=Path("forensics-report.png"))
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=1800)
    args = ap.parse_args()
    from forensics import snapshot as snap
    from forensics.diff.ledger import analyse
    from forensics.render.report import write

    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        if len(args.files) == 2:
            before, after = snap.load(args.files[0]), snap.load(args.files[1])
            names = (str(args.files[0]), str(args.files[1]))
        elif not args.files:
            before, after = scenario(tmpd)
            names = ("before.json", "after.json")
            args.repo = args.repo or tmpd / "assistant"
        else:
            ap.error("give two snapshot files or none")
        analysis = analyse(copy.deepcopy(before), copy.deepcopy(after), repo=args.repo, names=names)
        html = write(analysis, tmpd / "report.html")
        shoot(html, args.output, args.width, args.height)
        keep = args.output.with_suffix(".html")
        shutil.copyfile(html, keep)
    print(f"{args.output} ({args.output.stat().st_size // 1024} KiB) from {keep}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
