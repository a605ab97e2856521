"""The Makefile and the packaging it runs: ``make screenshot`` writes an untracked file unless asked for another
(it rewrote a tracked image); ``make demo``/``make test`` install without setuptools warnings."""

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


def test_every_folder_installed_is_a_listed_package():
    """`make demo` and `make test` printed setuptools' 'Package would be ignored' warning (80 lines) for
    forensics/data and forensics/step/loaded, folders of files it installs that setup.cfg did not list
    as packages. Setuptools warns for every folder with an importable name under a listed package."""
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    listed = set(cfg["options"]["packages"].split())
    where = {"forensics": ROOT / "forensics"}
    for line in cfg["options"]["package_dir"].strip().splitlines():
        name, _, folder = (part.strip() for part in line.partition("="))
        where[name] = ROOT / folder
    missing = []
    for package in sorted(listed):
        top, _, rest = package.partition(".")
        folder = where[top].joinpath(*rest.split(".")) if rest else where[top]
        for sub in sorted(folder.iterdir()):
            if (
                sub.is_dir()
                and sub.name.isidentifier()
                and any(p.is_file() for p in sub.rglob("*"))
            ):
                if f"{package}.{sub.name}" not in listed and sub.name != "__pycache__":
                    missing.append(f"{package}.{sub.name}")
    assert missing == []


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_make_test_runs_one_xdist_worker_per_core_and_one_more():
    """Tests that wait on purpose (a gather timeout, grace periods) left a core idle with one worker per core."""
    import os

    proc = subprocess.run(
        ["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    line = next(x for x in proc.stdout.splitlines() if "-m pytest" in x)
    assert f" -n {len(os.sched_getaffinity(0)) + 1} " in line, line
