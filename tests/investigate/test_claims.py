"""What investigate's report claims, against what was measured: a cause in the step's own script is not
ruled out, ... (adversarial cases of issue 25's "confirmed by experiment").

The steps busy-wait (CPU time, tests/_stepkit.busy_step); the user's repository is a throw-away clone whose
upstream gets a pull.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests._stepkit import busy_step, run_investigate
from tests.conftest import commit, git, make_repo

CMD = f"{sys.executable} step.py"


def investigate(cwd, *args: str, **env: str):
    return run_investigate(cwd, "--cmd", CMD, "--no-canary", "-q", "--budget", "5m", *args, **env)


@pytest.mark.slow
def test_a_pull_that_changes_only_the_steps_own_script_is_a_suspect_and_confirmed(tmp_path):
    """The step's script is what ``python step.py`` runs; it was not recorded among the files the step loaded,
    so this pull read "not a suspect: the step never loaded step.py", code.change was ruled out and the
    report said 'Slower, not explained: ... nothing that changed is known to this machine' (exit 3)."""
    step = busy_step("4", "1.0")
    up = make_repo(tmp_path / "upstream", {"step.py": step}, "serving: verify step")
    user = tmp_path / "user"
    git(tmp_path, "clone", "-q", str(up), str(user))
    slow = commit(up, {"step.py": step.replace("(1.0)", "(1.5)")}, "step: more work")
    git(user, "pull", "-q")
    r = investigate(user, "-o", str(tmp_path / "r.json"))
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    (row,) = [c for c in doc["commits"] if c["role"] == "main"][0]["commits"]
    assert row["assessment"]["suspect"] and "never loaded" not in row["assessment"]["why"]
    assert [e["details"]["commit"] for e in doc["experiments"] if e["outcome"] == "confirmed"] == [
        slow
    ]
