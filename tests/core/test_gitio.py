"""The git gateway (forensics.gitio): one way to start git, bounded, with one error and one commit record."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from forensics.errors import EXIT_BAD_INPUT
from forensics.gitio import Commit, GitError, git, read_commit, read_commits
from tests.conftest import git as run_git
from tests.conftest import processes_with_env

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc")


def _hanging_git(folder: Path) -> Path:
    """A ``git`` that never answers: a shell waiting on a child that holds its output pipes (what a hung
    credential helper or a filter process does). Stopping only the shell would leave the pipe open."""
    folder.mkdir()
    fake = folder / "git"
    fake.write_text("#!/bin/sh\nsleep 300\n")
    fake.chmod(0o755)
    return folder


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    run_git(repo, "init", "-q")
    for n in (1, 2):
        (repo / "f.txt").write_text(f"{n}\n")
        run_git(repo, "add", "f.txt")
        run_git(repo, "commit", "-q", "-m", f"commit {n}\n\nbody {n}")
    return repo


def test_a_git_that_hangs_is_stopped_with_its_children_and_named(tmp_path, monkeypatch):
    mark = uuid.uuid4().hex
    monkeypatch.setenv("PATH", f"{_hanging_git(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FORENSICS_TEST_MARK", mark)
    with pytest.raises(GitError) as info:
        git(tmp_path, "rev-parse", "--show-toplevel", timeout_s=1)
    assert str(info.value) == "git rev-parse: no answer after 1 s (stopped)"
    assert (
        info.value.timed_out
        and info.value.returncode is None
        and info.value.command == "git rev-parse"
    )
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert (
        processes_with_env("FORENSICS_TEST_MARK", mark) == []
    )  # the shell and its sleep are both gone


def test_bisect_ends_with_one_line_and_exit_2_when_git_hangs(tmp_path):
    """Issue 29 item 6: bisect waited forever, silently, on a git that hung."""
    repo = _repo(tmp_path)
    mark = uuid.uuid4().hex
    env = dict(
        os.environ,
        PATH=f"{_hanging_git(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}",
        FORENSICS_TEST_MARK=mark,
    )
    env.pop("FORENSICS_DEBUG", None)
    code = "import sys, forensics.gitio as g; g.TIMEOUT_S = 2; from forensics.cli import run; run(sys.argv[1:])"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "bisect",
            "--good",
            "HEAD~1",
            "--bad",
            "HEAD",
            "--repo",
            str(repo),
            "--cmd",
            "true",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "forensics: error: git rev-parse: no answer after 2 s (stopped)"
    ]
    assert processes_with_env("FORENSICS_TEST_MARK", mark) == []


def test_a_failed_command_says_git_s_fatal_line_and_is_not_a_timeout(tmp_path):
    with pytest.raises(GitError) as info:
        git(tmp_path, "rev-parse", "--show-toplevel", ceiling=True)
    assert str(info.value).startswith("git rev-parse: fatal: not a git repository")
    assert info.value.not_a_repository and not info.value.timed_out and info.value.returncode == 128


def test_the_ceiling_keeps_git_from_reading_a_repository_further_up(tmp_path):
    repo = _repo(tmp_path)
    (repo / "sub").mkdir()
    assert git(repo / "sub", "rev-parse", "--show-toplevel") == str(repo)
    with pytest.raises(GitError, match="not a git repository"):
        git(repo / "sub", "rev-parse", "--show-toplevel", ceiling=True)


def test_the_commit_record(tmp_path):
    repo = _repo(tmp_path)
    head = read_commit(repo, "HEAD")
    first = run_git(repo, "rev-parse", "HEAD~1").strip()
    assert isinstance(head, Commit) and head.subject == "commit 2" and head.author == "Test"
    assert head.parents == [first] and head.short and head.sha.startswith(head.short)
    assert head.authored_at.endswith("Z") and head.date == head.committed_at
    assert [c.subject for c in read_commits(repo, "HEAD")] == ["commit 2", "commit 1"]
    assert read_commits(repo, "HEAD~1..HEAD", max_count=5)[0].to_json()["subject"] == "commit 2"
    with pytest.raises(GitError):
        read_commit(repo, "no-such-rev")


def test_the_user_s_hooks_and_git_dir_do_not_reach_our_git(tmp_path, monkeypatch):
    repo = _repo(tmp_path)
    (tmp_path / "o").mkdir()
    other = _repo(tmp_path / "o")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))  # an inherited GIT_DIR must not redirect us
    assert git(repo, "rev-parse", "--show-toplevel") == str(repo)
    assert git(repo, "config", "core.hooksPath") == "/dev/null"


def test_gitio_is_the_only_place_that_starts_git_and_defines_its_error_and_commit():
    """Issue 27: one door to git. A list or tuple literal starting with "git" (an argv) anywhere else in
    forensics or the built-in probes, or another GitError or commit-record class, fails here."""
    import ast

    from tests.conftest import ROOT

    argv, classes = [], []
    for path in [*(ROOT / "forensics").rglob("*.py"), *(ROOT / "probes").rglob("*.py")]:
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, (ast.List, ast.Tuple))
                and node.elts
                and isinstance(node.elts[0], ast.Constant)
                and node.elts[0].value == "git"
            ):
                argv.append(rel)
            if isinstance(node, ast.ClassDef) and (
                node.name == "GitError" or node.name in ("Commit", "CommitInfo")
            ):
                classes.append(f"{rel}:{node.name}")
    assert argv == ["forensics/gitio.py"]
    assert sorted(classes) == ["forensics/gitio.py:Commit", "forensics/gitio.py:GitError"]
