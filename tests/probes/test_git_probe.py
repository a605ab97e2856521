"""The git probe on real repositories in odd states: recorded, never crashed on, never changed."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from forensics_probes.git.probe import GitProbe, find_repo_root, parse_reflog

from forensics.model import HypothesisStatus, ProbeStatus
from forensics.probe import ProbeResult
from forensics.runner import run_probes
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
    with pytest.raises(subprocess.CalledProcessError):
        git(repo, "rebase", "main")  # conflicts: left mid-rebase
    rec = _collect(repo)
    assert rec["operation"] == "rebase"
    assert (
        rec["detached"] and rec["rebasing_branch"] == "feature"
    )  # HEAD is detached; the branch is not lost
    assert rec["conflicted"] == ["step.py"]
    assert (
        rec["modified"] == [] and rec["staged"] == []
    )  # an unmerged path is conflicted, as `git status` says


def test_staged_modified_and_untracked_are_told_apart(repo):
    _commit(repo, "kernels/attn.py", "a = 1\n", "kernel")
    (repo / "step.py").write_text("print(2)\n")
    git(repo, "add", "step.py")  # staged
    (repo / "kernels" / "attn.py").write_text("a = 2\n")  # modified, not staged
    git(
        repo, "mv", "kernels/attn.py", "kernels/attention.py"
    )  # a staged rename (its own status entry kind)
    (repo / "notes with space.txt").write_text("n")
    rec = _collect(repo)
    assert rec["staged"] == [
        "kernels/attention.py",
        "kernels/attn.py",
        "step.py",
    ]  # a rename: both its paths
    assert rec["modified"] == ["kernels/attention.py"]
    assert rec["dirty_stat"]["kernels/attn.py"] == [None, None]  # gone from the working tree
    assert (
        rec["untracked"] == ["notes with space.txt"]
        and rec["untracked_count"] == 1
        and rec["dirty"]
    )


def test_a_bare_repository_inside_a_working_tree_is_bare_not_the_outer_one(repo):
    git(
        repo, "clone", "-q", "--bare", str(repo), "mirror.git"
    )  # e.g. a local mirror kept in the project
    rec = _collect(repo / "mirror.git")
    assert rec["state"] == "bare" and rec["path"] == str((repo / "mirror.git").absolute())
    assert "head" not in rec  # the outer repository's HEAD is not reported as the bare one's
    assert _collect(repo)["state"] == "ok"  # the outer working tree is still read as before


def test_a_folder_that_only_looks_like_a_bare_repository_does_not_hide_the_working_tree(
    repo, monkeypatch
):
    store = (
        repo / "checkpoints"
    )  # a checkpoint store: a HEAD pointer file, objects/ and refs/ folders
    (store / "objects").mkdir(parents=True)
    (store / "refs").mkdir()
    (store / "HEAD").write_text("step-4200\n")
    monkeypatch.chdir(store)
    rec = run_probes([GitProbe()], {}, timeout_s=30)["git"].data["repos"][0]
    assert rec["role"] == "main" and rec["path"] == str(repo.resolve()) and rec["state"] == "ok"
    (store / "HEAD").write_text(
        "ref: refs/heads/main\n"
    )  # now git would take it for a bare repository too
    assert find_repo_root(store) is None and _collect(store)["state"] == "bare"


def test_file_names_in_another_encoding_stay_apart_and_are_stat_ed(repo):
    root = os.fsencode(repo)
    with open(
        os.path.join(root, b"caf\xe9.py"), "wb"
    ) as fh:  # latin-1 names, as from an old archive
        fh.write(b"a = 1\n")
    with open(os.path.join(root, b"caf\xe8.py"), "wb") as fh:
        fh.write(b"b = 2\n")
    subprocess.run(["git", "add", "--", os.fsdecode(b"caf\xe9.py")], cwd=repo, check=True)
    rec = _collect(repo)
    assert rec["staged"] == ["caf\\xe9.py"] and rec["untracked"] == [
        "caf\\xe8.py"
    ]  # two names, as git quotes them
    assert rec["dirty_stat"]["caf\\xe9.py"][0] == 6  # the real file's size, not "deleted"
    json.dumps(rec, ensure_ascii=False).encode("utf-8")  # valid UTF-8 throughout


def test_a_repository_in_a_folder_named_in_another_encoding_is_written_as_text(tmp_path):
    """The folder's own name reaches the record, its error line and the snapshot file: each as ``\\xNN``
    text, so the JSON file is written (it was an internal error, exit 4) and the name reads as git quotes it."""
    from tests.conftest import run_cli

    folder = os.path.join(os.fsencode(tmp_path), b"caf\xe9")
    subprocess.run(["git", "init", "-q", os.fsdecode(folder)], check=True)
    with open(os.path.join(folder, b".git", b"config"), "ab") as fh:
        fh.write(b"[broken\n")  # git cannot read the repository: an error state, with its line
    out = tmp_path / "s.json"
    proc = run_cli("snapshot", "-q", "--probe", "git", "-o", str(out), cwd=os.fsdecode(folder))
    assert proc.returncode == 0, proc.stderr
    git_rec = json.loads(out.read_bytes().decode("utf-8"))["probes"]["git"]
    rec = git_rec["data"]["repos"][0]
    assert (
        rec["path"] == str(tmp_path / "caf\\xe9")
        and rec["state"] == "error"
        and "bad config" in rec["error"]
    )
    assert git_rec["errors"][0]["field"] == f"repos[{rec['path']}]"


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
    # the summary table said 'empty: no_commits'
    assert GitProbe().headline({"repos": [rec]}) == "empty: no commit yet"


def test_not_a_repository_given_with_repo(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    rec = _collect(plain)
    assert rec["state"] == "not_a_repository"
    assert GitProbe().headline({"repos": [rec]}) == "plain: not a git repository"


def test_not_in_a_repository_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(GitProbe, "_editable_sources", staticmethod(lambda: []))
    result = run_probes([GitProbe()], {}, timeout_s=30)["git"]
    assert result.status is ProbeStatus.UNAVAILABLE and "--repo" in result.reason


def test_pull_is_named_in_the_judgement(repo, tmp_path):
    clone = tmp_path / "user"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    before = ProbeResult(ProbeStatus.OK, data={"repos": [_collect(clone)]})
    _commit(
        repo, "distributed/device_communicators/pynccl.py", "slow = True\n", "pynccl: extra copy"
    )
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
    text = (
        "0" * 40
        + " "
        + "a" * 40
        + " T <t@x> 1764446400 +0000\tclone: from /srv/repo\n"
        + "a" * 40
        + " "
        + "b" * 40
        + " T <t@x> 1764450000 +0100\tpull origin main: Fast-forward\n"
    )
    entries = parse_reflog(text)
    assert [e["action"] for e in entries] == [
        "pull origin main: Fast-forward",
        "clone: from /srv/repo",
    ]
    assert entries[0]["time"] == "2025-11-29T21:00:00Z" and entries[0]["old"] == "a" * 40


# -- a hostile pass on the plumbing reader (issue 16's standard: odd states recorded, nothing run, nothing lost) --


def _submodule_repo(tmp_path: Path, repo: Path, where: str) -> None:
    lib = tmp_path / "kernels-lib"
    lib.mkdir()
    git(lib, "init", "-q", "-b", "main")
    _commit(lib, "k.py", "k = 1\n", "kernel")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), where)
    git(repo, "commit", "-q", "-m", "add submodule")


def test_a_submodule_path_with_a_space_is_kept_whole(repo, tmp_path):
    _submodule_repo(tmp_path, repo, "third party/kernels")
    rec = _collect(repo)
    assert [s["path"] for s in rec["submodules"]] == ["third party/kernels"]


def test_a_broken_submodule_keeps_the_superprojects_head_and_says_what_failed(repo, tmp_path):
    _submodule_repo(tmp_path, repo, "kernels")
    import shutil

    shutil.rmtree(repo / ".git" / "modules" / "kernels")  # the submodule's git dir is gone
    result = run_probes([GitProbe()], {"repo": str(repo)}, timeout_s=30)["git"]
    rec = result.data["repos"][0]
    assert (
        rec["state"] == "error"
        and rec["head"]["subject"] == "add submodule"
        and rec["branch"] == "main"
    )
    assert (
        "git status" in rec["error"] and result.errors
    )  # recorded as a failed read, not "not a repository"


def test_a_latin1_commit_and_a_message_starting_blank_read_as_git_shows_them(repo):
    git(repo, "config", "i18n.commitEncoding", "ISO-8859-1")
    (repo / "step.py").write_text("print(3)\n")
    git(repo, "add", "step.py")
    subprocess.run(
        ["git", "commit", "-q", "-F", "-"],
        cwd=repo,
        check=True,
        input="caf\xe9 tuning\n".encode("latin-1"),
        env=dict(
            os.environ,
            GIT_AUTHOR_NAME="Jos\xe9",
            GIT_AUTHOR_EMAIL="j@example.invalid",
            GIT_COMMITTER_NAME="T",
            GIT_COMMITTER_EMAIL="t@example.invalid",
        ),
    )
    head = _collect(repo)["head"]
    assert head["subject"] == "café tuning"
    git(repo, "config", "--unset", "i18n.commitEncoding")
    (repo / "step.py").write_text("print(4)\n")
    git(repo, "add", "step.py")
    subprocess.run(
        ["git", "commit", "-q", "--cleanup=verbatim", "-F", "-"],
        cwd=repo,
        check=True,
        input=b"\n\nreal subject\n",
        env=dict(
            os.environ,
            GIT_AUTHOR_NAME="T",
            GIT_AUTHOR_EMAIL="t@x.invalid",
            GIT_COMMITTER_NAME="T",
            GIT_COMMITTER_EMAIL="t@x.invalid",
        ),
    )
    assert _collect(repo)["head"]["subject"] == "real subject"


def test_no_configured_program_runs_and_the_users_own_config_is_kept(repo, tmp_path, monkeypatch):
    ran = tmp_path / "RAN"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "$0 $*" >> {ran}\nexit 1\n')
    hook.chmod(0o755)
    # a commit carrying a signature header, with the repository asking to show signatures through that program
    raw = git(repo, "cat-file", "commit", "HEAD")
    head, _, body = raw.partition("\n\n")
    signed = (
        head
        + "\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQ==\n -----END PGP SIGNATURE-----\n\n"
        + body
    )
    sha = subprocess.run(
        ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
        cwd=repo,
        input=signed,
        text=True,
        capture_output=True,
        check=True,
    ).stdout.strip()
    git(repo, "reset", "-q", "--soft", sha)
    git(repo, "config", "log.showSignature", "true")
    git(repo, "config", "gpg.program", str(hook))
    monkeypatch.setenv(
        "GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='{hook}'"
    )  # an fsmonitor hook, from the environment
    (repo / "notes.log").write_text("x")
    ignore = tmp_path / "ignore"
    ignore.write_text("*.log\n")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")  # the user's own setting, kept
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.excludesFile")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", str(ignore))
    rec = _collect(repo)
    assert rec["head"]["sha"] == sha and not ran.exists()
    assert rec["untracked"] == []  # notes.log excluded by the user's core.excludesFile


def test_an_orphan_branch_records_its_staged_files_and_reflog(repo):
    git(repo, "checkout", "-q", "--orphan", "fresh")
    rec = _collect(repo)
    assert rec["state"] == "no_commits" and rec["head"] is None and rec["branch"] == "fresh"
    assert rec["staged"] == ["step.py"] and rec["dirty"] and rec["reflog"]


def test_the_same_dirty_file_edited_between_snapshots_is_a_code_change(repo, monkeypatch):
    monkeypatch.setattr(GitProbe, "_editable_sources", staticmethod(lambda: []))
    probe = GitProbe()
    (repo / "step.py").write_text("print('one')\n")
    before = run_probes([probe], {"repo": str(repo)}, timeout_s=30)["git"]
    (repo / "step.py").write_text("print('two, longer')\n")
    after = run_probes([probe], {"repo": str(repo)}, timeout_s=30)["git"]
    findings = probe.judge(before, after)
    hit = [f for f in findings if f.status is HypothesisStatus.IMPLICATED]
    assert hit and "changed since before (step.py)" in hit[0].summary
    same = probe.judge(after, after)
    assert [f.status for f in same] == [HypothesisStatus.RULED_OUT]
    assert "the same uncommitted files on both (1), unchanged in size and time" in same[0].summary


def test_a_repository_not_read_on_one_side_is_never_ruled_out(repo, monkeypatch):
    monkeypatch.setattr(GitProbe, "_editable_sources", staticmethod(lambda: []))
    probe = GitProbe()
    good = run_probes([probe], {"repo": str(repo)}, timeout_s=30)["git"]
    broken = ProbeResult(
        good.status,
        good.duration_s,
        {
            "repos": [
                {
                    "path": good.data["repos"][0]["path"],
                    "state": "error",
                    "error": "git status: fatal: x",
                }
            ]
        },
    )
    findings = probe.judge(good, broken)
    assert [f.status for f in findings] == [HypothesisStatus.INCONCLUSIVE]
    assert (
        "could not be read on both sides (after error (git status: fatal: x))"
        in findings[0].summary
    )


def test_a_refusal_is_recorded_by_its_fatal_line_not_the_hint_after_it():
    from forensics.gitio import error_line

    # what git 2.35.2+ prints for a repository owned by another user
    stderr = (
        "fatal: detected dubious ownership in repository at '/srv/app'\nTo add an exception for this "
        "directory, call:\n\n\tgit config --global --add safe.directory /srv/app\n"
    )
    assert (
        error_line(stderr, 128) == "fatal: detected dubious ownership in repository at '/srv/app'"
    )
    assert error_line("", 1) == "exit status 1"


def test_an_upstream_that_is_gone_is_not_read_as_no_upstream(repo, tmp_path):
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "checkout", "-q", "-b", "topic", "--track", "origin/main")
    git(
        clone, "update-ref", "-d", "refs/remotes/origin/main"
    )  # the remote branch was deleted and pruned
    rec = _collect(clone)
    assert rec["upstream"] == {"name": "origin/main", "ahead": None, "behind": None, "gone": True}


def test_a_repository_only_the_before_snapshot_read_is_not_ruled_out(repo, tmp_path):
    # before taken in the checkout, after in another folder (another repository found there): the
    # checkout's code was not looked at after, so its change is not ruled out
    other = tmp_path / "elsewhere"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    _commit(other, "notes.txt", "x\n", "notes")
    probe = GitProbe()
    before = ProbeResult(ProbeStatus.OK, data={"repos": [_collect(repo)]})
    after = ProbeResult(ProbeStatus.OK, data={"repos": [_collect(other)]})
    findings = probe.judge(before, after)
    assert HypothesisStatus.RULED_OUT not in [f.status for f in findings]
    gone = [f for f in findings if f.status is HypothesisStatus.INCONCLUSIVE]
    assert len(gone) == 1
    assert gone[0].summary.startswith("serving: repository recorded only in the before snapshot")
    assert f"with --repo {repo}" in gone[0].summary
    # an edited after snapshot that lost its repository list: not ruled out either
    empty = ProbeResult(ProbeStatus.OK, data={})
    assert [f.status for f in probe.judge(before, empty)] == [HypothesisStatus.INCONCLUSIVE]


def test_a_new_untracked_module_is_a_code_change_and_a_log_is_not_called_clean(repo, monkeypatch):
    # a new untracked work_override.py read 'ruled-out: HEAD unchanged (working tree clean on both)' next to
    # the report's own note 'working tree became dirty: 1 untracked file (work_override.py)'
    monkeypatch.setattr(GitProbe, "_editable_sources", staticmethod(lambda: []))
    probe = GitProbe()
    before = run_probes([probe], {"repo": str(repo)}, timeout_s=30)["git"]
    (repo / "train.log").write_text("step 1\n")
    logged = run_probes([probe], {"repo": str(repo)}, timeout_s=30)["git"]
    findings = probe.judge(before, logged)
    assert [f.status for f in findings] == [HypothesisStatus.RULED_OUT]
    assert "clean on both;" in findings[0].summary
    assert "working tree clean" not in findings[0].summary
    assert "1 untracked file after, no new source file among them" in findings[0].summary
    (repo / "work_override.py").write_text("COST_MS = 99\n")
    after = run_probes([probe], {"repo": str(repo)}, timeout_s=30)["git"]
    found = probe.judge(before, after)
    assert [f.status for f in found] == [HypothesisStatus.IMPLICATED]
    assert found[0].summary == "serving: 1 new untracked source file after (work_override.py)"
    assert [f.status for f in probe.judge(after, after)] == [HypothesisStatus.RULED_OUT]


def test_a_checkout_moved_between_the_snapshots_is_compared_with_itself(repo, tmp_path):
    # a checkout at another path after (moved, or another machine's copy): it read 'appears only in the after
    # snapshot' (low) and the pull in it was never seen
    import shutil

    first = tmp_path / "first"
    git(tmp_path, "clone", "-q", str(repo), str(first))
    before = ProbeResult(ProbeStatus.OK, data={"repos": [_collect(first)]})
    _commit(repo, "kernels.py", "slow = True\n", "kernels: extra copy")
    moved = tmp_path / "moved"
    shutil.move(str(first), str(moved))
    git(moved, "pull", "-q", "--ff-only", "origin", "main")
    after = ProbeResult(ProbeStatus.OK, data={"repos": [_collect(moved)]})
    findings = GitProbe().judge(before, after)
    top = [f for f in findings if f.status is HypothesisStatus.IMPLICATED]
    assert [f.summary for f in top] == [
        "moved: HEAD moved by 'pull -q --ff-only origin main: Fast-forward'"
    ]
    assert top[0].subject == str(moved)
    assert (
        f"moved (at {first} before: the same repository, a remote URL in common)" in top[0].evidence
    )
    assert not any("only in the" in f.summary for f in findings)
