"""``make screenshot`` writes an untracked file unless asked for another: it rewrote a tracked image."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import ROOT


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_make_screenshot_writes_an_ignored_file_by_default_and_the_docs_image_only_when_asked():
    def planned(*extra: str) -> str:
        proc = subprocess.run(
            ["make", "-n", "screenshot", *extra],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        return next(line for line in proc.stdout.splitlines() if "benchmarks/screenshot.py" in line)

    line = planned()
    assert "-o forensics-report.png" in line and "docs/img" not in line, line
    ignored = subprocess.run(["git", "check-ignore", "-q", "forensics-report.png"], cwd=ROOT)
    assert ignored.returncode == 0  # git status stays clean after a screenshot
    assert "-o docs/img/diff-report.png" in planned("SCREENSHOT=docs/img/diff-report.png")
