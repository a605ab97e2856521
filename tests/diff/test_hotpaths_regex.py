"""Hot-path patterns from a repository's .forensics.yaml are untrusted: matching them is bounded.

A pattern such as ``^(a|aa)+$`` makes Python's backtracking ``re`` take exponential time on a long
run of ``a`` followed by another letter; a pulled commit that brings one must not hang ``forensics
diff``. Config patterns run on RE2 (linear time); one RE2 cannot run is skipped and named.
"""

from __future__ import annotations

import json

from _diffkit import commit_file, git, repo_data, section, snapshot, write
from conftest import run_cli

from forensics.diff.hotpaths import load_hot_paths

CATASTROPHIC = "^(a|aa)+$"
# fib(n) backtracking steps for Python's re: about 10**12 with 60 a's, hours; RE2 reads it once
LONG_NAME = "a" * 60 + "b.py"


def _dirty_repo(tmp_path, config: str):
    """A repository whose AFTER snapshot has an uncommitted change to LONG_NAME and ``config`` as .forensics.yaml."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit_file(repo, LONG_NAME, "x = 1\n", "base")
    commit_file(repo, "src/nccl_ops.py", "y = 1\n", "ops")
    commit_file(repo, ".forensics.yaml", config, "hot paths")
    before = repo_data(repo)
    (repo / LONG_NAME).write_text("x = 2\n")
    after = repo_data(repo)
    b = write(tmp_path / "before.json", snapshot({"git": section({"repos": [before]})}))
    a = write(
        tmp_path / "after.json",
        snapshot({"git": section({"repos": [after]})}, created="2026-11-29T21:00:00Z"),
    )
    return repo, b, a


def test_catastrophic_pattern_in_the_repository_config_does_not_hang_diff(tmp_path):
    config = f"hot_paths:\n  evil: ['{CATASTROPHIC}']\n  mine: ['a+b[.]py$']\n"
    repo, b, a = _dirty_repo(tmp_path, config)
    # Python's re would need hours here: the generous limit fails only when the pattern ran on re
    r = run_cli("diff", str(b), str(a), "-o", str(tmp_path / "r.json"), cwd=tmp_path, timeout=240)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "warning" not in r.stderr  # RE2 runs it: nothing skipped
    rep = json.loads((tmp_path / "r.json").read_text())
    (rc,) = rep["commits"]
    assert [f["path"] for f in rc["dirty_hot"]] == [LONG_NAME]
    assert rc["dirty_hot"][0]["hot"] == [
        "mine"
    ]  # the catastrophic pattern does not match, the other does


def test_pattern_re2_cannot_run_is_skipped_and_named_in_the_report_and_on_stderr(tmp_path):
    config = "hot_paths:\n  lookaround: ['(?<=src/)nccl']\n  mine: ['^a+b[.]py$']\n"
    repo, b, a = _dirty_repo(tmp_path, config)
    r = run_cli("diff", str(b), str(a), "-o", str(tmp_path / "r.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1, r.stderr
    assert "hot_paths['lookaround'] pattern '(?<=src/)nccl' skipped" in warnings[0]
    assert "RE2" in warnings[0] and ".forensics.yaml" in warnings[0]
    assert "re2.cc" not in r.stderr  # RE2's own log lines stay off the user's terminal
    rep = json.loads((tmp_path / "r.json").read_text())
    assert any("'(?<=src/)nccl' skipped" in n for n in rep["notes"])
    assert rep["commits"][0]["dirty_hot"][0]["hot"] == ["mine"]  # the other patterns still count


def test_config_patterns_match_case_insensitively_like_the_built_in_ones(tmp_path):
    cfg = tmp_path / "hot.yaml"
    cfg.write_text(f"hot_paths:\n  tokenizer: ['tokeni[sz]er']\n  evil: ['{CATASTROPHIC}']\n")
    hot = load_hot_paths(config=cfg)
    assert hot.skipped == []
    assert hot.categories("src/Tokenizer.py") == ["tokenizer"]
    assert hot.categories("csrc/NCCL/x.cu") == ["distributed communication", "kernels"]
    assert hot.categories("a" * 5000 + "b") == []
    assert hot.categories("aaaa") == ["evil"]
    assert hot.categories("src/tokenizer_\udcff.py") == [
        "tokenizer"
    ]  # a name git gave in another encoding


BASELINE = r"""
import sys
from forensics import snapshot as snap
from forensics.collect import take_snapshot
from forensics.investigate.measure import Subject, measure_now
step = Subject("cmd", sys.argv[2])
doc = take_snapshot(label="baseline", options={"repo": "."},
                    bench=lambda: measure_now(step, canary=False, canary_options={}, processes=5, budget_s=60)[0])
snap.save(doc, sys.argv[1])
"""


def test_investigate_names_a_skipped_pattern_on_stderr_too(tmp_path):
    import subprocess
    import sys

    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit_file(
        repo,
        "step.py",
        "import json\nfor _ in range(3): print(json.dumps({'metric': 'step_ms', 'value': 5.0}))\n",
        "step",
    )
    commit_file(
        repo, ".forensics.yaml", "hot_paths:\n  lookaround: ['(?<=src/)nccl']\n", "hot paths"
    )
    step = f"{sys.executable} step.py"
    subprocess.run(
        [sys.executable, "-c", BASELINE, "before.json", step],
        cwd=repo,
        check=True,
        capture_output=True,
        timeout=240,
    )
    r = run_cli(
        "investigate",
        "--baseline",
        "before.json",
        "--cmd",
        step,
        "--no-canary",
        "--plan",
        "-q",
        "-o",
        str(tmp_path / "p.json"),
        cwd=repo,
        timeout=240,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "forensics: warning: " in r.stderr and "pattern '(?<=src/)nccl' skipped" in r.stderr, (
        r.stderr
    )


def test_a_lone_surrogate_in_the_config_is_named_not_a_lost_commit_list_or_an_internal_error(
    tmp_path,
):
    # YAML's "\uD800" escape gives a string UTF-8 cannot hold: RE2 and the report's file both read UTF-8
    config = 'hot_paths:\n  bad: ["\\uD800"]\n  mine: ["a+b[.]py$"]\n'
    repo, b, a = _dirty_repo(tmp_path, config)
    r = run_cli("diff", str(b), str(a), "-o", str(tmp_path / "r.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (warning,) = [line for line in r.stderr.splitlines() if "warning" in line]
    assert "hot_paths['bad'] pattern '\\ud800' skipped: it is not valid Unicode text" in warning
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["commits"][0]["dirty_hot"][0]["hot"] == [
        "mine"
    ]  # the commit list is kept, the other pattern counts
    assert not any("could not be read" in n for n in rep["notes"])

    (repo / ".forensics.yaml").write_text('hot_paths:\n  "bad\\uD800": ["a+b[.]py$"]\n')
    r = run_cli("diff", str(b), str(a), "-o", str(tmp_path / "r.html"), cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"forensics: error: {repo / '.forensics.yaml'}: hot_paths category 'bad\\ud800' is not valid Unicode text "
        "(a lone surrogate from a \\uD800-style escape); write the character itself"
    ]
    assert not (tmp_path / "r.html").exists()


def test_a_config_with_a_huge_number_or_nested_too_deeply_is_one_line_exit_2(tmp_path):
    # PyYAML passes on Python's ValueError (an integer over 4,300 digits) and RecursionError: the commit
    # list was dropped under a note blaming the git probe's data
    repo, b, a = _dirty_repo(tmp_path, "hot_paths:\n  mine: ['a+b[.]py$']\n")
    for name, text in (
        ("huge.yaml", "hot_paths:\n  x: [a]\nn: " + "1" * 5000 + "\n"),
        ("deep.yaml", "hot_paths: " + "[" * 20000 + "\n"),
    ):
        cfg = tmp_path / name
        cfg.write_text(text)
        r = run_cli(
            "diff",
            str(b),
            str(a),
            "--config",
            str(cfg),
            "-o",
            str(tmp_path / "r.json"),
            cwd=tmp_path,
        )
        assert r.returncode == 2 and not (tmp_path / "r.json").exists(), r.stderr
        why = "ValueError" if name == "huge.yaml" else "RecursionError"
        assert (
            r.stderr == f"forensics: error: {cfg}: cannot read as YAML ({why}); fix or remove it\n"
        )
