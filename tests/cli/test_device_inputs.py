"""A device or a pipe given where a file is expected: one line naming it, exit 2, at once.

/dev/zero never ends: 'forensics show /dev/zero' (read as a pasted text), 'fleet report /dev/zero' (a
first line read to its end) and '--hostfile /dev/zero' read until the kernel killed forensics for its
memory; a piped text ('... | forensics show /dev/stdin') lost its start to the format test and was
called empty; '--config /dev/zero' was 'no such file'.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, run_cli

SNAPSHOT = str(EXAMPLES / "aa" / "after.json")

pytestmark = pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")


@pytest.mark.parametrize(
    "args, said",
    [
        (["show", "/dev/zero"], "/dev/zero: not a regular file (a pipe or a device)"),
        (
            ["import", "/dev/zero", "-o", "r.json"],
            "/dev/zero: not a regular file (a pipe or a device)",
        ),
        (["diff", "/dev/zero", SNAPSHOT, "-o", "r.json"], "/dev/zero: not a regular file"),
        (
            ["fleet", "report", "/dev/zero", "-o", "r.json"],
            "/dev/zero: not a regular file (a device or a pipe)",
        ),
        (
            ["fleet", "report", SNAPSHOT, "--hostfile", "/dev/zero", "-o", "r.json"],
            "/dev/zero: not a regular file (a device or a pipe); give a hostfile",
        ),
        (
            ["diff", SNAPSHOT, SNAPSHOT, "--config", "/dev/zero", "-o", "r.json"],
            "--config /dev/zero: not a regular file (a device or a pipe)",
        ),
    ],
    ids=["show", "import", "diff", "fleet report", "hostfile", "config"],
)
def test_dev_zero_is_refused_in_one_line(tmp_path, args, said):
    r = run_cli(*args, cwd=tmp_path, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("forensics: error: ")
    assert said in r.stderr
    assert not (tmp_path / "r.json").exists()


def test_a_piped_text_is_refused_with_what_to_do(tmp_path):
    """A pipe is read once: the format test ate its start and the text was called empty."""
    env = {k: v for k, v in os.environ.items() if k != "FORENSICS_DEBUG"}
    r = subprocess.run(
        [sys.executable, "-m", "forensics", "show", "/dev/stdin"],
        input="Package    Version\n---------- -------\ntorch      2.4.0\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert (
        "not a regular file (a pipe or a device); save the text pasted from the ticket" in r.stderr
    )
