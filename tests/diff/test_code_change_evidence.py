"""code.change evidence on a real git repository: commits between HEADs, how HEAD moved, hot paths."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from _diffkit import commit_file, git, repo_data, section, snapshot

from forensics.diff.commits import MoveKind, classify_reflog_action, head_move, load_hot_paths
from forensics.diff.commits import analyse as commits_analyse
from forensics.diff.ledger import analyse
from forensics.errors import BadInputError
from forensics.render.report import render_json, render_markdown

HOT = "vllm/distributed/device_communicators/pynccl.py"


def _tree_state(repo: Path) -> str:
    """A fingerprint of everything git keeps: refs, HEAD, index, reflog, objects list."""
    h = hashlib.sha256()
    gitdir = repo / ".git"
    for p in sorted(gitdir.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(gitdir)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def pulled_repo(tmp_path):
    """A clone that fast-forward pulls four commits, one touching pynccl.py; probe data before/after."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    commit_file(upstream, "README.md", "serving stack\n", "initial import")
    commit_file(upstream, "vllm/engine.py", "MAX_TOKENS = 512\n", "engine: first version")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(upstream), str(work))
    before = repo_data(work)
    commit_file(upstream, "docs/usage.md", "how to run\n" * 20, "docs: usage page")
    commit_file(
        upstream,
        HOT,
        "def all_reduce(x):\n    return x\n" * 5,
        "pynccl: call ncclAllReduce without the stream sync",
    )
    commit_file(
        upstream, "vllm/utils/strings.py", "def f():\n    pass\n" * 30, "utils: string helpers"
    )
    commit_file(
        upstream,
        "tests/test_engine.py",
        "def test():\n    assert True\n",
        "tests: engine smoke test",
    )
    git(work, "pull", "origin", "main")
    after = repo_data(work)
    return work, before, after


def test_real_pull_is_named_and_the_hot_commit_comes_first(pulled_repo):
    work, rb, ra = pulled_repo
    state = _tree_state(work)
    a = analyse(
        snapshot({"git": section({"repos": [rb]})}), snapshot({"git": section({"repos": [ra]})})
    )
    assert _tree_state(work) == state, "diff must not modify the repository"
    (rc,) = a.repos
    assert rc.move.kinds == [MoveKind.FAST_FORWARD_PULL]
    assert (
        "fast-forward pull" in rc.move.sentence
        and "pull origin main: Fast-forward" in rc.move.sentence
    )
    assert len(rc.commits) == 4
    first = rc.commits[0]
    assert first.subject == "pynccl: call ncclAllReduce without the stream sync"
    assert [f.path for f in first.hot_files] == [HOT]
    assert "distributed communication" in first.hot_categories
    assert first.added == 10 and first.deleted == 0
    assert all(c.hot_lines == 0 for c in rc.commits[1:])
    top = a.top
    assert top is not None and top.id == "code.change"
    assert "fast-forward pull" in a.verdict
    md = render_markdown(a)
    assert md.index("pynccl: call ncclAllReduce") < md.index("utils: string helpers")
    assert '"subject": "pynccl: call ncclAllReduce' in render_json(a)


def test_repo_override_and_missing_repo(pulled_repo, tmp_path):
    work, rb, ra = pulled_repo
    for d in (rb, ra):
        d["path"] = "/srv/elsewhere/app"  # taken on another machine
    b, a = snapshot({"git": section({"repos": [rb]})}), snapshot({"git": section({"repos": [ra]})})
    (rc,) = commits_analyse(b, a)
    assert rc.commits == [] and "not on this machine" in rc.availability
    (rc,) = commits_analyse(b, a, repo=work)
    assert len(rc.commits) == 4 and rc.availability == "ok"
    with pytest.raises(BadInputError, match="--repo"):
        commits_analyse(b, a, repo=tmp_path / "nope")


def test_commit_not_available_degrades(pulled_repo):
    work, rb, ra = pulled_repo
    ra = dict(ra, head=dict(ra["head"], sha="f" * 40))
    (rc,) = commits_analyse(
        snapshot({"git": section({"repos": [rb]})}), snapshot({"git": section({"repos": [ra]})})
    )
    assert "not available" in rc.availability and rc.commits == []


def test_config_extends_hot_paths(tmp_path):
    cfg = tmp_path / "f.yaml"
    cfg.write_text("hot_paths:\n  tokenizer: ['tokeni[sz]er']\n")
    hot = load_hot_paths(config=cfg)
    assert hot.categories("src/tokenizer/bpe.py") == ["tokenizer"]
    assert hot.categories("README.md") == []
    cfg.write_text("hot_paths: [1, 2]\n")
    with pytest.raises(BadInputError, match="hot_paths"):
        load_hot_paths(config=cfg)
    cfg.write_text("hot_paths:\n  x: ['(']\n")
    with pytest.raises(BadInputError, match="not a regular expression"):
        load_hot_paths(config=cfg)


@pytest.mark.parametrize(
    "action,kind",
    [
        ("pull origin main: Fast-forward", MoveKind.FAST_FORWARD_PULL),
        ("pull: Merge made by the 'ort' strategy.", MoveKind.PULL_MERGE),
        ("pull --rebase (finish): returning to refs/heads/main", MoveKind.PULL_REBASE),
        ("pull --no-rebase --no-edit: Merge made by the 'ort' strategy.", MoveKind.PULL_MERGE),
        ("checkout: moving from main to v0.6.3", MoveKind.CHECKOUT),
        ("reset: moving to HEAD~2", MoveKind.RESET),
        ("rebase (finish): returning to refs/heads/main", MoveKind.REBASE),
        ("commit (amend): fix", MoveKind.AMEND),
        ("commit: add kernel", MoveKind.COMMIT),
    ],
)
def test_reflog_actions(action, kind):
    assert classify_reflog_action(action) is kind


def test_head_move_without_reflog_and_reset():
    b = {"head": {"sha": "a" * 40}, "reflog": []}
    a = {"head": {"sha": "b" * 40}, "reflog": []}
    assert "no new reflog entry" in head_move(b, a).sentence
    a = {
        "head": {"sha": "b" * 40},
        "reflog": [
            {
                "old": "a" * 40,
                "new": "b" * 40,
                "time": "2026-11-29T20:00:00Z",
                "action": "reset: moving to HEAD~1",
            }
        ],
    }
    move = head_move(b, a)
    assert move.kinds == [MoveKind.RESET] and "by a reset" in move.sentence


def test_reset_lists_dropped_commits_and_dirty_hot_files(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit_file(repo, "model.py", "x = 1\n", "base")
    commit_file(repo, "ops/fused_moe.py", "def moe():\n    pass\n", "moe: fused kernel")
    commit_file(repo, "notes.txt", "n\n", "notes")
    before = repo_data(repo)
    git(repo, "reset", "-q", "--hard", "HEAD~2")
    (repo / "model.py").write_text("x = 2\n")  # uncommitted; then a hot file via .forensics.yaml
    (repo / ".forensics.yaml").write_text("hot_paths:\n  model code: ['^model[.]py$']\n")
    after = repo_data(repo)
    state = _tree_state(repo)
    a = analyse(
        snapshot({"git": section({"repos": [before]})}),
        snapshot({"git": section({"repos": [after]})}),
    )
    assert _tree_state(repo) == state
    (rc,) = a.repos
    assert rc.move.kinds == [MoveKind.RESET] and "by a reset" in rc.move.sentence
    assert rc.commits == [] and [c.subject for c in rc.dropped] == ["moe: fused kernel", "notes"]
    assert rc.dropped[0].hot_categories == ["MoE"]
    assert [f.path for f in rc.dirty_hot] == ["model.py"] and rc.dirty_hot[0].hot == ["model code"]
    assert any("became dirty" in n for n in rc.notes)
    assert a.top.id == "code.change" and a.top.severity.value == "high"
    assert any("uncommitted change to hot file model.py" in line for line in a.top.evidence)


def test_editable_install_repositories_count(pulled_repo):
    work, rb, ra = pulled_repo
    for d in (rb, ra):
        d.update(role="editable", distribution="vllm")
    a = analyse(
        snapshot({"git": section({"repos": [rb]})}), snapshot({"git": section({"repos": [ra]})})
    )
    assert a.top.id == "code.change" and a.repos[0].role == "editable"
    assert a.repos[0].commits[0].hot_lines > 0


def test_repo_option_without_git_data_says_why(tmp_path):
    a = analyse(snapshot({}), snapshot({}), repo=tmp_path)
    assert any("no two HEADs" in n for n in a.notes)


def test_commits_go_to_the_repository_of_the_same_path_not_of_the_same_name(pulled_repo, tmp_path):
    work, rb, ra = pulled_repo
    other = (
        tmp_path / "elsewhere" / "work"
    )  # same folder name, another repository that did not move
    other.mkdir(parents=True)
    git(other, "init", "-q", "-b", "main")
    commit_file(other, "vllm/engine.py", "MAX_TOKENS = 1\n", "unrelated")
    (other / "vllm" / "engine.py").write_text(
        "MAX_TOKENS = 2\n"
    )  # dirty (a hot-looking file), on both sides
    od = repo_data(other)
    a = analyse(
        snapshot({"git": section({"repos": [od, rb]})}),
        snapshot({"git": section({"repos": [od, ra]})}),
    )
    code = [
        f
        for f in next(h for h in a.hypotheses if h.id == "code.change").findings
        if f.status.value == "implicated"
    ]
    assert [f.subject for f in code] == [str(work)]  # the unchanged repository is not implicated
    assert (
        "fast-forward pull" in code[0].summary and "1 commit touches hot paths" in code[0].summary
    )
    assert any(line.startswith(f"repository {work}: ") for line in code[0].evidence)
    assert not any(str(other) in line for line in code[0].evidence)


def test_a_first_commit_is_a_move_not_a_return():
    # before: a repository with no commits yet; after: two commits made
    b = {"head": None, "reflog": []}
    a = {
        "head": {"sha": "b" * 40},
        "reflog": [
            {
                "old": "b" * 40,
                "new": "b" * 40,
                "time": "2026-12-01T12:01:00Z",
                "action": "commit: second",
            },
            {
                "old": "0" * 40,
                "new": "a" * 40,
                "time": "2026-12-01T12:00:00Z",
                "action": "commit (initial): first",
            },
        ],
    }
    move = head_move(b, a)
    assert move.moved and move.sentence.startswith(
        "HEAD moved (no commits) -> bbbbbbbbbb by 2 reflog events"
    )
    assert "back at" not in move.sentence


def test_a_day_of_reflog_events_is_counted_not_listed_whole():
    # 14 commits and rebases of an editable checkout, each message a long commit subject: every one was
    # listed whole in the verdict's evidence, 130 lines of the terminal's table
    subject = "investigate: " + "a long commit subject that says what changed and why " * 6
    reflog = []
    for i in range(14):
        action = f"commit: {subject}{i}" if i % 2 else f"rebase (pick): {subject}{i}"
        reflog.append(
            {"old": f"{i:02d}" * 20, "new": f"{i + 1:02d}" * 20, "time": f"T{i}", "action": action}
        )
    before = {"head": {"sha": "00" * 20}, "reflog": []}
    after = {"head": {"sha": "14" * 20}, "reflog": list(reversed(reflog))}
    move = head_move(before, after)
    assert move.short.startswith(
        "HEAD moved 0000000000 -> 1414141414 by 14 reflog events (rebase x7, commit x7): the first rebase "
        '("rebase (pick): investigate: a long commit subject'
    )
    assert '..."), the last commit ("commit: investigate: a long' in move.short
    assert len(move.short) < 400 and len(move.entries) == 14  # every entry kept for the JSON report


def test_the_commits_of_a_checkout_moved_between_the_snapshots_are_listed(tmp_path):
    # a checkout at another path after (moved, or the same clone in another container): its commits were
    # not read, so the diff had no suspect and investigate no commit to try
    import json
    import shutil

    from tests.conftest import commit as commit_files
    from tests.conftest import git as run_git
    from tests.conftest import run_cli, upstream_and_clone

    up, user = upstream_and_clone(tmp_path, {"step.py": "print(1)\n"}, "first")
    before = tmp_path / "before.json"
    assert run_cli("snapshot", "-q", "--probe", "git", "-o", str(before), cwd=user).returncode == 0
    sha = commit_files(up, {"kernels.py": "slow = True\n"}, "kernels: extra copy")
    moved = tmp_path / "moved"
    shutil.move(str(user), str(moved))
    run_git(moved, "pull", "-q")
    after = tmp_path / "after.json"
    assert run_cli("snapshot", "-q", "--probe", "git", "-o", str(after), cwd=moved).returncode == 0
    report = tmp_path / "r.json"
    proc = run_cli("diff", str(before), str(after), "-o", str(report))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(report.read_text())
    listed = [c["sha"] for r in doc["commits"] for c in r.get("commits", [])]
    assert sha in listed, doc["commits"]
    assert f'first {sha[:10]} "kernels: extra copy"' in doc["verdict"], doc["verdict"]
