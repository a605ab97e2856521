"""A private worktree of a repository with a submodule holds the submodule's files at the commit it records.

``git worktree add`` leaves a submodule's folder empty, so a step that reads it failed in every worktree
(``forensics investigate``'s remembered baseline: "could not be measured: ... No such file or directory:
'lib/cost.txt'"; every bisect step). The files come from the user's own checkout of the submodule, read
only; nothing of the user's repository or submodule changes.
"""

from __future__ import annotations

import sys

import pytest

from forensics.bisect.measure import Measurer, StepFailed, StepSpec
from forensics.bisect.worktree import WorktreePool
from tests.conftest import commit, git, make_repo, repo_state

FILE = (
    "-c",
    "protocol.file.allow=always",
)  # local submodule URLs (git 2.38.1+ refuses them by default)


def test_a_submodule_is_filled_at_the_commit_each_revision_records(tmp_path):
    lib = make_repo(tmp_path / "lib", {"cost.txt": "10\n", "inner/x.py": "x = 1\n"}, "lib 1")
    up = make_repo(tmp_path / "up", {"step.py": "print(open('lib/cost.txt').read())\n"})
    git(up, *FILE, "submodule", "add", "-q", str(lib), "lib")
    git(up, "commit", "-qm", "lib at 1")
    old = git(up, "rev-parse", "HEAD").strip()
    commit(lib, {"cost.txt": "20\n"}, "lib 2")
    git(up / "lib", "pull", "-q")
    git(up, "commit", "-qam", "lib at 2")
    new = git(up, "rev-parse", "HEAD").strip()
    user = tmp_path / "user"
    git(tmp_path, *FILE, "clone", "-q", "--recurse-submodules", str(up), str(user))
    before, sub_before = repo_state(user), repo_state(user / "lib")

    with WorktreePool(str(user)) as pool:
        wt = pool.add("baseline", old)
        assert (wt.path / "lib" / "cost.txt").read_text() == "10\n"
        assert (wt.path / "lib" / "inner" / "x.py").read_text() == "x = 1\n"
        assert wt.missing_submodules == []
        wt.checkout(new)
        assert (wt.path / "lib" / "cost.txt").read_text() == "20\n"
        path = wt.path
    assert not path.exists()
    assert (user / "lib" / "cost.txt").read_text() == "20\n"
    assert repo_state(user) == before and repo_state(user / "lib") == sub_before


def test_a_submodule_commit_not_on_this_machine_is_named(tmp_path):
    lib = make_repo(tmp_path / "lib", {"cost.txt": "10\n"}, "lib 1")
    up = make_repo(tmp_path / "up", {"step.py": "pass\n"})
    git(up, *FILE, "submodule", "add", "-q", str(lib), "lib")
    git(up, "commit", "-qm", "lib at 1")
    commit(up, {"step.py": "open('lib/cost.txt')\n"}, "the step reads the submodule")
    user = tmp_path / "user"
    git(tmp_path, "clone", "-q", str(up), str(user))  # the submodule never initialised
    sha = git(user, "rev-parse", "HEAD").strip()
    with WorktreePool(str(user)) as pool:
        wt = pool.add("baseline", sha)
        assert wt.missing_submodules == ["lib"]
        assert list((wt.path / "lib").iterdir()) == []
        m = Measurer(pool, StepSpec(cmd=f"{sys.executable} step.py"), lambda *a: None)
        with pytest.raises(StepFailed) as err:
            m.run_once(sha, "baseline")
    assert str(err.value).endswith(
        "; submodule lib is empty in the worktree (the commit it records is not in your checkout of it: "
        "git submodule update --init brings it)"
    )
