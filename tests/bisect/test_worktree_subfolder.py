"""A step started from a subfolder of the repository runs in the same subfolder of each private worktree.

``cd serving && forensics investigate --cmd "python step.py"`` measured today's step in ``serving/`` but
the remembered baseline (and every bisect or commit experiment) at the worktree's root, where there is
no ``step.py``: "could not be measured: can't open file '.../step.py'".
"""

from __future__ import annotations

import sys

from forensics.bisect.measure import Measurer, StepSpec, workdir
from forensics.bisect.worktree import WorktreePool, untracked_named
from tests.conftest import commit, git, make_repo

STEP = 'import json\nprint(json.dumps({"metric": "step_ms", "value": float(open("cost.txt").read())}))\n'


def test_the_step_runs_in_the_subfolder_it_was_started_from(tmp_path, monkeypatch):
    repo = make_repo(
        tmp_path / "r", {"serving/step.py": STEP, "serving/cost.txt": "4\n", "x": "1\n"}
    )
    sha = git(repo, "rev-parse", "HEAD").strip()
    monkeypatch.chdir(repo / "serving")
    with WorktreePool(str(repo)) as pool:
        tree = pool.add("baseline", sha)
        assert workdir(tree.path, repo) == tree.path / "serving"
        m = Measurer(pool, StepSpec(cmd=f"{sys.executable} step.py"), lambda *a: None)
        assert m.run_once(sha, "baseline") == 4.0
    monkeypatch.chdir(tmp_path)  # started outside the repository: the worktree itself
    assert workdir(tmp_path / "t", repo) == tmp_path / "t"


def test_an_untracked_script_the_command_names_is_copied_into_each_worktree(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "r", {"serving/cost.txt": "4\n"})
    first = git(repo, "rev-parse", "HEAD").strip()
    second = commit(repo, {"serving/cost.txt": "8\n"}, "slow")
    (repo / "serving" / "bench.py").write_text(STEP)  # the user's own script, never committed
    (repo / "serving" / "notes.txt").write_text("x\n")  # untracked, but not named by the command
    monkeypatch.chdir(repo / "serving")
    cmd = f"{sys.executable} bench.py --out /tmp/x.json"
    assert untracked_named(cmd, repo) == ["serving/bench.py"]
    before = git(repo, "status", "--porcelain=v2", "--untracked-files=all")
    with WorktreePool(str(repo)) as pool:
        m = Measurer(pool, StepSpec(cmd=cmd), lambda *a: None)
        assert m.run_once(first, "x") == 4.0
        assert (
            m.run_once(second, "x") == 8.0
        )  # the same worktree moved on: copied again after git clean
        assert not (pool.trees["x"].path / "serving" / "notes.txt").exists()
    assert git(repo, "status", "--porcelain=v2", "--untracked-files=all") == before


def test_a_large_untracked_file_the_command_names_is_left_out_not_linked(tmp_path, monkeypatch):
    import forensics.bisect.worktree as wt

    repo = make_repo(tmp_path / "r", {"step.py": STEP})
    sha = git(repo, "rev-parse", "HEAD").strip()
    (repo / "ckpt.pt").write_text("4\n")  # stands for a large local checkpoint the step may write
    monkeypatch.chdir(repo)
    monkeypatch.setattr(wt, "CARRY_COPY_BYTES", 1)
    with WorktreePool(str(repo)) as pool:
        pool.carry = untracked_named(f"{sys.executable} step.py --save ckpt.pt", repo)
        assert pool.carry == ["ckpt.pt"]
        tree = pool.add("x", sha)
        assert not (tree.path / "ckpt.pt").exists() and not (tree.path / "ckpt.pt").is_symlink()
    assert (repo / "ckpt.pt").read_text() == "4\n"
