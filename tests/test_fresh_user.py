"""Defects a fresh-user pass found beyond issue 16, each through what a user sees (letters follow the pass's list)."""

from __future__ import annotations

import copy
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PULL_B, PULL_A = EXAMPLES / "silent-pull" / "before.json", EXAMPLES / "silent-pull" / "after.json"
AA_B, AA_A = EXAMPLES / "aa" / "before.json", EXAMPLES / "aa" / "after.json"


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


# -- E: a file path holding a secret-looking word is not a "name: value" to redact -------------------------------


def test_error_lines_keep_a_path_named_like_a_secret(tmp_path):
    (tmp_path / "passwd").write_text("")
    (tmp_path / "api_key.json").write_text("")
    (tmp_path / "token").mkdir()
    r = run_cli("snapshot", "--repo", str(tmp_path / "passwd"), "-o", str(tmp_path / "s.json"))
    assert r.returncode == 2 and f"--repo {tmp_path / 'passwd'}: is a file" in r.stderr, r.stderr
    r = run_cli("show", str(tmp_path / "api_key.json"))
    assert r.returncode == 2 and f"{tmp_path / 'api_key.json'}: file is empty" in r.stderr, r.stderr
    r = run_cli("show", "api_key.json", cwd=tmp_path)  # a bare name as typed
    assert r.returncode == 2 and "api_key.json: file is empty" in r.stderr, r.stderr
    r = run_cli("diff", str(tmp_path / "token"), str(PULL_A))
    assert r.returncode == 2 and f"{tmp_path / 'token'}: is a folder" in r.stderr, r.stderr
    assert "<redacted>" not in r.stderr


def test_a_secret_in_an_error_line_is_still_redacted(tmp_path):
    r = run_cli("bench", "--cmd", "python step.py --token abcdef123secret", "-o", str(tmp_path / "no" / "b.json"))
    assert r.returncode == 2
    assert "abcdef123secret" not in r.stderr


# -- F: outputs honour the umask; a replaced file keeps its mode --------------------------------------------------


def test_outputs_honour_the_umask_and_keep_an_existing_mode(tmp_path):
    code = ("import os, sys; os.umask(0o022); sys.argv[1:] = ['diff', %r, %r, '-o', %r]; "
            "from forensics.cli import run; run()")
    new = tmp_path / "new.md"
    r = subprocess.run([sys.executable, "-c", code % (str(PULL_B), str(PULL_A), str(new))], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(new.stat().st_mode) == 0o644
    old = tmp_path / "old.md"
    old.write_text("x")
    os.chmod(old, 0o640)
    r = subprocess.run([sys.executable, "-c", code % (str(PULL_B), str(PULL_A), str(old))], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(old.stat().st_mode) == 0o640 and old.read_text() != "x"


# -- G: a closed output pipe is exit 141, never 1 ("regression found") --------------------------------------------


@pytest.mark.parametrize("args", [("diff", str(PULL_B), str(PULL_A)), ("show", str(PULL_B))])
def test_a_closed_pipe_is_not_a_regression(args):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line (head -1 after its line, deterministically)
    try:
        r = subprocess.run([sys.executable, "-m", "forensics", *args], stdout=write_end, stderr=subprocess.PIPE,
                           timeout=120)
    finally:
        os.close(write_end)
    err = r.stderr.decode()
    assert r.returncode == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err
