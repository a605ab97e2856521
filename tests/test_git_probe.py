"""The git probe on real repositories in odd states: recorded, never crashed on, never changed."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from forensics.model import HypothesisStatus, ProbeStatus
from forensics.probe import ProbeContext, ProbeResult
from forensics.runner import run_probes
from forensics_probes.git.probe import GitProbe, parse_reflog
from tests.conftest import git


def _commit(repo: Path, name: str, text: str, msg: str) -> str:
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", msg)
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def repo(tmp_path) -> Path:
    r = tmp_path / "serving"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    _commit(r, "step.py", "print(1)\n", "base")
    return r


def _collect(path: Path) -> dict:
    result = run_probes([GitProbe()], {"repo": str(path)}, timeout_s=30)["git"]
    assert result.status is ProbeStatus.OK, result.reason
    return result.data["repos"][0]


def _tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for dirpath, _, files in sorted(os.walk(root)):
        for f in sorted(files):
            p = Path(dirpath) / f
            if p.name == "index.lock":
                continue
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_clean_repo_and_nothing_changed(repo):
    before = _tree_hash(repo)
    rec = _collect(repo)
    assert rec["state"] == "ok" and rec["branch"] == "main" and not rec["detached"]
    assert rec["head"]["subject"] == "base" and rec["dirty"] is False
    assert rec["reflog"][0]["action"].startswith("commit (initial): base")
    assert _tree_hash(repo) == before  # the probe changed nothing, .git included


def test_dirty_untracked_and_stash(repo):
    (repo / "step.py").write_text("print(2)\n")
    git(repo, "stash", "-q")
    (repo / "step.py").write_text("print(3)\n")
    (repo / "notes.txt").write_text("x")
    rec = _collect(repo)
    assert rec["dirty"] and rec["modified"] == ["step.py"] and rec["untracked"] == ["notes.txt"]
    assert rec["stash_count"] == 1


def test_detached_head(repo):
    sha = _commit(repo, "b.py", "b", "second")
    git(repo, "checkout", "-q", "--detach", "HEAD~1")
    rec = _collect(repo)
    assert rec["detached"] is True and rec["branch"] is None
    assert rec["reflog"][0]["action"].startswith("checkout: moving from main to")
    assert sha != rec["head"]["sha"]


def test_mid_rebase(repo):
    git(repo, "checkout", "-q", "-b", "feature")
    _commit(repo, "step.py", "print('feature')\n", "feature change")
    git(repo, "checkout", "-q", "main")
    _commit(repo, "step.py", "print('main')\n", "main change")
    git(repo, "checkout", "-q", "feature")
    with pytest.raises(Exception):
        git(repo, "rebase", "main")  # conflicts: left mid-rebase
    rec = _collect(repo)
    assert rec["operation"] == "rebase"
    assert rec["detached"] and rec["rebasing_branch"] == "feature"  # HEAD is detached; the branch is not lost
    assert rec["conflicted"] == ["step.py"]
    assert rec["modified"] == [] and rec["staged"] == []  # an unmerged path is conflicted, as `git status` says


def test_staged_modified_and_untracked_are_told_apart(repo):
    _commit(repo, "kernels/attn.py", "a = 1\n", "kernel")
    (repo / "step.py").write_text("print(2)\n")
    git(repo, "add", "step.py")  # staged
    (repo / "kernels" / "attn.py").write_text("a = 2\n")  # modified, not staged
    git(repo, "mv", "kernels/attn.py", "kernels/attention.py")  # a staged rename (its own status entry kind)
    (repo / "notes with space.txt").write_text("n")
    rec = _collect(repo)
    assert rec["staged"] == ["kernels/attention.py", "step.py"]
    assert rec["modified"] == ["kernels/attention.py"]
    assert rec["untracked"] == ["notes with space.txt"] and rec["untracked_count"] == 1 and rec["dirty"]


def test_a_git_dir_in_the_environment_does_not_redirect_the_probe(repo, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "elsewhere")
    _commit(other, "o.py", "o", "other repo")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))  # as inside a git hook of another repository
    rec = _collect(repo)
    assert rec["branch"] == "main" and rec["head"]["subject"] == "base"


def test_an_empty_dot_git_is_not_a_repository_even_inside_another(repo):
    inner = repo / "vendor" / "broken"
    (inner / ".git").mkdir(parents=True)
    rec = _collect(inner)
    assert rec["state"] == "not_a_repository" and "not a git repository" in rec["error"]


def test_shallow_clone(repo, tmp_path):
    _commit(repo, "c.py", "c", "third")
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(clone))
    rec = _collect(clone)
    assert rec["shallow"] is True and rec["head"]["subject"] == "third"
    assert rec["upstream"] == {"name": "origin/main", "ahead": 0, "behind": 0}


def test_no_commits(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    (empty / "x.py").write_text("")
    rec = _collect(empty)
    assert rec["state"] == "no_commits" and rec["head"] is None and rec["untracked"] == ["x.py"]


def test_not_a_repository_given_with_repo(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    rec = _collect(plain)
    assert rec["state"] == "not_a_repository"


def test_not_in_a_repository_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(GitProbe, "_editable_sources", staticmethod(lambda: []))
    result = run_probes([GitProbe()], {}, timeout_s=30)["git"]
    assert result.status is ProbeStatus.UNAVAILABLE and "--repo" in result.reason


def test_pull_is_named_in_the_judgement(repo, tmp_path):
    clone = tmp_path / "user"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    before = ProbeResult(ProbeStatus.OK, data={"repos": [_collect(clone)]})
    _commit(repo, "distributed/device_communicators/pynccl.py", "slow = True\n", "pynccl: extra copy")
    git(clone, "pull", "-q", "--ff-only", "origin", "main")
    after = ProbeResult(ProbeStatus.OK, data={"repos": [_collect(clone)]})
    findings = GitProbe().judge(before, after)
    top = [f for f in findings if f.status is HypothesisStatus.IMPLICATED]
    assert top and top[0].hypothesis == "code.change"
    assert "pull -q --ff-only origin main: Fast-forward" in top[0].summary
    assert any("pynccl: extra copy" in e for e in top[0].evidence)
    same = GitProbe().judge(after, after)
    assert [f.status for f in same] == [HypothesisStatus.RULED_OUT]


def test_parse_reflog_newest_first():
    text = ("0" * 40 + " " + "a" * 40 + " T <t@x> 1764446400 +0000\tclone: from /srv/repo\n"
            + "a" * 40 + " " + "b" * 40 + " T <t@x> 1764450000 +0100\tpull origin main: Fast-forward\n")
    entries = parse_reflog(text)
    assert [e["action"] for e in entries] == ["pull origin main: Fast-forward", "clone: from /srv/repo"]
    assert entries[0]["time"] == "2025-11-29T21:00:00Z" and entries[0]["old"] == "a" * 40
