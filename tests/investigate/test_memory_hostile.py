"""forensics investigate's remembered baseline met as a new user meets it: odd repository states (a reflog
entry whose commit git gc pruned, uncommitted changes against ``--since HEAD``, a ``--since`` that is not
behind HEAD, a shallow clone, an ambiguous short sha), a remembered figure in the wrong unit, a baseline
step that hangs past the budget, Ctrl-C while the baseline is measured in its worktree, and ``--plan``.

Each asserts what the user sees (the message, the exit code, the report's first line) and that the user's
checkout, branches, stash, index and worktrees are as they were.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forensics.errors import BadInputError
from forensics.investigate import memory
from tests.conftest import commit, git, make_repo, repo_state, run_cli

STEP = """import json, random, time
cost = float(open("cost.txt").read())
for _ in range(3):
    t0 = time.perf_counter()
    time.sleep(cost / 1e3 * (1 + random.gauss(0, 0.01)))
    print(json.dumps({"metric": "step_ms", "value": (time.perf_counter() - t0) * 1e3}))
"""
HANG = "import time\ntime.sleep(600)\n"
CMD = f"{sys.executable} step.py"


def _rec(repo: Path, **extra) -> dict:
    """The snapshot taken now as the git probe records the main repository (the fields memory reads)."""
    from forensics_probes.git.probe import parse_reflog

    head = git(repo, "rev-parse", "HEAD").strip()
    logs = repo / ".git" / "logs" / "HEAD"
    log = parse_reflog(logs.read_text()) if logs.exists() else []
    rec = {"path": str(repo), "role": "main", "state": "ok", "head": {"sha": head}, "reflog": log}
    rec.update(extra)
    return {"probes": {"git": {"data": {"repos": [rec]}}}}


@pytest.fixture
def pulled(tmp_path):
    """A clone after a pull of 2 commits, the second 2x slower: (clone, the HEAD before the pull)."""
    up = make_repo(tmp_path / "up", {"step.py": STEP, "cost.txt": "4\n"}, "serving: step")
    user = tmp_path / "user"
    git(tmp_path, "clone", "-q", str(up), str(user))
    old = git(user, "rev-parse", "HEAD").strip()
    commit(up, {"README": "docs\n"}, "docs")
    commit(up, {"cost.txt": "8\n"}, "slow")
    git(user, "pull", "-q")
    return user, old


def test_a_reflog_point_git_gc_pruned_is_named_as_gone_not_as_a_failed_step(git_repo):
    repo = git_repo("r", {"a.txt": "a\n"})
    head = git(repo, "rev-parse", "HEAD").strip()
    gone = "4ad135072b420983c16e0326f99caa074772a483"  # in no repository: what git gc leaves of a commit
    with open(repo / ".git" / "logs" / "HEAD", "a") as fh:
        fh.write(f"{gone} {head} T <t@e> 1764584100 +0000\tpull origin main: Fast-forward\n")
    point, why = memory.code_point(_rec(repo))
    assert point is None
    assert why.startswith("HEAD@{1} 4ad1350, before the pull of ")
    assert "is no longer in the repository" in why and "git gc" in why and "--since REV" in why


def test_since_head_with_uncommitted_changes_measures_head_against_them(git_repo):
    repo = git_repo("r", {"cost.txt": "4\n"})
    head = git(repo, "rev-parse", "HEAD").strip()
    now = _rec(repo, dirty=True, modified=["cost.txt"], dirty_stat={"cost.txt": [2, 1]})
    point, why = memory.code_point(now, since="HEAD")
    assert why == "" and point is not None
    assert (point.old, point.new, point.clean) == (head, head, False)  # the changes are the suspect
    base = memory.synthetic_baseline(
        now, {"name": "user.step_ms", "process_medians": [4.0]}, point=point, label="x"
    )
    rec = memory.main_repo(base)
    assert rec["dirty"] is False and rec["modified"] == [] and rec["dirty_stat"] == {}
    assert memory.main_repo(now)["dirty"] is True  # today's record is left as it was
    # clean: nothing to compare today's code with, said as bad input (the verdict asked for --since REV)
    with pytest.raises(
        BadInputError, match=r"^--since HEAD is HEAD itself .*: no code changed since it"
    ):
        memory.code_point(_rec(repo), since="HEAD")


def test_since_tells_the_reflog_from_the_named_commit_and_a_commit_ahead_of_head(git_repo):
    repo = git_repo("r", {"a.txt": "1\n"})
    first = git(repo, "rev-parse", "HEAD").strip()
    second = commit(repo, {"a.txt": "2\n"}, "two")
    commit(repo, {"a.txt": "3\n"}, "three")
    git(repo, "checkout", "-q", "--detach", second)  # the reflog: commit, commit, checkout
    point, _ = memory.code_point(_rec(repo), since=first)
    assert point is not None and point.note == ""
    base = memory.main_repo(
        memory.synthetic_baseline(
            _rec(repo), {"name": "s", "process_medians": [1.0]}, point=point, label="x"
        )
    )
    # HEAD was at the named commit after its own commit: the moves since then are the newer entries only
    assert [e["action"] for e in base["reflog"]] == ["commit (initial): first"]
    ahead, _ = memory.code_point(_rec(repo), since="main")
    assert ahead is not None
    assert "is not behind HEAD but 1 commit(s) ahead of it" in ahead.note


def test_since_in_a_shallow_clone_an_ambiguous_sha_or_empty_says_what_to_do(tmp_path, git_repo):
    up = git_repo("up", {"a.txt": "1\n"})
    commit(up, {"a.txt": "2\n"}, "two")
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{up}", str(tmp_path / "shallow"))
    with pytest.raises(BadInputError, match=r"shallow clone .*'git fetch --unshallow'"):
        memory.resolve_since("HEAD~1", tmp_path / "shallow")
    with pytest.raises(BadInputError, match=r"^--since '': empty; give a sha"):
        memory.resolve_since("", up)
    # two commits whose names share 4 hex digits: found offline, then written with git hash-object
    import hashlib

    tree = git(up, "rev-parse", "HEAD^{tree}").strip()
    seen: dict[str, bytes] = {}
    for i in range(100000):
        body = f"tree {tree}\nauthor T <t@e> 1 +0000\ncommitter T <t@e> 1 +0000\n\n{i}\n".encode()
        sha = hashlib.sha1(b"commit %d\0" % len(body) + body).hexdigest()
        if sha[:4] in seen:
            break
        seen[sha[:4]] = body
    for text in (seen[sha[:4]], body):
        subprocess.run(
            ["git", "-C", str(up), "hash-object", "-t", "commit", "-w", "--stdin"],
            input=text,
            check=True,
            capture_output=True,
        )
    with pytest.raises(
        BadInputError, match=rf"^--since {sha[:4]}: ambiguous: .* give more of the sha"
    ):
        memory.resolve_since(sha[:4], up)


def test_expect_is_read_in_the_unit_the_metric_is_named_in():
    assert memory.parse_expect("19ms", higher_is_better=False, metric="user.step_s") == (
        pytest.approx(0.019),
        False,
    )
    assert memory.parse_expect("2s", higher_is_better=False, metric="user.latency_us")[0] == 2e6
    assert memory.parse_expect("19", higher_is_better=False, metric="user.step_s")[0] == 19
    for bad in ("1e999ms", "1e400"):
        with pytest.raises(BadInputError, match="not a finite value"):
            memory.parse_expect(bad, higher_is_better=False)
    # finite but beyond any step's value: it was called 'not a finite value'
    with pytest.raises(BadInputError, match=r"^--expect '1e20ms': more than 1e12, no step's value"):
        memory.parse_expect("1e20ms", higher_is_better=False)


@pytest.mark.parametrize(
    "text, told",
    [
        # meant as ms; the metric is printed in seconds: today would read ~940x better
        (
            "19",
            "above today's user.step_s (0.0202, read in s): that is no slowdown but a unit mistake; ",
        ),
        # a figure ~2e8 times below today's: it was taken, and the report said '155899259x the value you remember'
        (
            "0.0000001ms",
            "below today's user.step_s (0.0202, read in s): no step slows down that much on its own, a unit "
            "slip does; give the value you remember in s, or with its unit (19ms, 0.019s)",
        ),
    ],
)
def test_a_remembered_figure_in_the_wrong_unit_is_refused_not_called_no_regression(
    tmp_path, text, told
):
    (tmp_path / "step.py").write_text(
        "import json\nfor _ in range(3):\n"
        '    print(json.dumps({"metric": "step_s", "value": 0.0202}))\n'
    )
    r = run_cli(
        "investigate",
        "--no-canary",
        "-q",
        "--cmd",
        CMD,
        "--expect",
        text,
        "--snapshot-processes",
        "3",
        "-o",
        "r.json",
        cwd=tmp_path,
        env={"CUDA_LAUNCH_BLOCKING": ""},
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"forensics: error: --expect {text} is "), r.stderr
    assert told in r.stderr, r.stderr
    assert (
        not r.stdout.startswith(("No regression", "Slower")) and not (tmp_path / "r.json").exists()
    )


@pytest.mark.parametrize(
    "text, today, metric, told",
    [
        # us for ms: a factor of 1000, whatever today's speed; the unit that fits today's scale is named
        (
            "20us",
            [0.0202],
            "user.step_s",
            "--expect 20us is 1,010x below today's user.step_s (0.0202, read in s): no step slows down that "
            "much on its own, a unit slip does; did you mean --expect 20ms?",
        ),
        (
            "0.019",
            [19.3, 19.0, 19.9],
            "user.step_ms",
            "--expect 0.019 is 1,016x below today's user.step_ms (19.3, read in ms): no step slows down that "
            "much on its own, a unit slip does; did you mean --expect 0.019s?",
        ),
        (
            "19",
            [0.0202],
            "user.step_s",
            "--expect 19 is 941x above today's user.step_s (0.0202, read in s): that is no slowdown but a "
            "unit mistake; did you mean --expect 19ms?",
        ),
        (
            "94tok/s",
            [0.05],
            "user.tokens_per_s",
            "--expect 94tok/s is 1,880x above today's user.tokens_per_s (0.05, read in the metric's unit): no "
            "step slows down that much on its own, a unit slip does; give the value you remember as the "
            "step prints it (94tok/s for tokens per second)",
        ),
    ],
)
def test_a_figure_a_unit_slip_away_from_today_names_the_unit_that_fits(text, today, metric, told):
    hib = text.endswith("/s")
    value, _ = memory.parse_expect(text, higher_is_better=hib, metric=metric)
    with pytest.raises(BadInputError) as exc:
        memory.check_expect_scale(text, value, today, metric, hib)
    assert str(exc.value) == told


@pytest.mark.parametrize(
    "text, today, metric",
    [
        ("4ms", [6.0], "user.step_ms"),  # 1.5x slower
        ("4ms", [1000.0], "user.step_ms"),  # 250x slower: large, but no unit slip
        ("19ms", [0.0202], "user.step_s"),  # the unit given: converted, then compared
        ("94tok/s", [50.0], "user.tokens_per_s"),
        ("94tok/s", [5000.0], "user.tokens_per_s"),  # 53x better: under the limit
    ],
)
def test_a_remembered_figure_within_reach_of_today_is_taken(text, today, metric):
    hib = text.endswith("/s")
    value, _ = memory.parse_expect(text, higher_is_better=hib, metric=metric)
    memory.check_expect_scale(text, value, today, metric, hib)


def test_a_negative_figure_is_said_to_be_below_zero_not_unreadable():
    for text in ("-19ms", "-0.019s", "0"):
        with pytest.raises(BadInputError, match=r"must be more than 0$"):
            memory.parse_expect(text, higher_is_better=False)


def test_a_baseline_that_hangs_stops_when_the_budget_is_spent(git_repo):
    from forensics.investigate import run
    from forensics.investigate.measure import Subject

    repo = git_repo(
        "r", {"step.py": HANG, "cost.txt": "4\n"}
    )  # the commit before the move never ends
    hang = git(repo, "rev-parse", "HEAD").strip()
    commit(repo, {"step.py": STEP}, "fixed")
    git(repo, "checkout", "-q", "--detach", hang)
    git(repo, "checkout", "-q", "main")
    before = repo_state(repo)
    now = _rec(repo)
    now["bench"] = {"results": [{"name": "user.step_ms", "process_medians": [4.0] * 5}]}
    notes: list[str] = []
    t = time.monotonic()
    got = run._remember(
        run.Settings(None, cmd=CMD, canary=False, budget_s=1.0),
        now,
        None,
        Subject("cmd", CMD, name="user.step_ms", process_s=0.1),
        notes,
        deadline=time.monotonic() + 1.0,
        emit=lambda *a, **k: None,
    )
    assert got is None and time.monotonic() - t < 20  # was the step's own 300 s timeout
    (note,) = [n for n in notes if "could not be measured" in n]
    assert note.startswith(f"the baseline HEAD@{{1}} {hang[:7]}, before the checkout of ")
    assert "timed out after 1" in note
    assert note.endswith("the --budget was spent (give a longer --budget)")
    assert repo_state(repo) == before  # its worktree removed


def test_plan_names_the_remembered_baseline_not_the_hardware_checks(pulled):
    user, old = pulled
    before = repo_state(user)
    r = run_cli(
        "investigate", "--no-canary", "-q", "--cmd", CMD, "--plan", "-o", "../r.md", cwd=user
    )
    assert r.returncode == 0, r.stdout + r.stderr
    first = [line for line in r.stdout.splitlines() if not line.startswith("note:")][0]
    assert first.startswith(
        f"Plan: the baseline would be HEAD@{{1}} {old[:7]}, before the pull of "
    ), first
    assert "canary" not in r.stdout and "hardware" not in r.stdout
    assert r.stdout.count("the baseline would be") == 1  # said once, not as a note too
    assert repo_state(user) == before


def test_ctrl_c_while_the_baseline_is_measured_still_writes_the_report(pulled, tmp_path):
    user, old = pulled
    commit(
        user, {"step.py": HANG}, "hang"
    )  # the pull's old HEAD hangs in its worktree, today's does not
    git(user, "reset", "-q", "--hard", "HEAD~1")
    git(user, "checkout", "-q", "--detach", "HEAD@{1}")
    git(user, "checkout", "-q", "main")  # HEAD@{1}: the hanging commit
    before = repo_state(user)
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="")
    env.pop("FORENSICS_DEBUG", None)
    p = subprocess.Popen(
        [sys.executable, "-m", "forensics", "investigate", "--no-canary", "--cmd", CMD]
        + ["--snapshot-processes", "3"]
        + ["-o", str(tmp_path / "r.md"), "-o", str(tmp_path / "r.json")],
        cwd=user,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while git(user, "worktree", "list").count("\n") < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.3)  # the hanging step has started in the worktree
        os.killpg(p.pid, signal.SIGINT)  # Ctrl-C at a terminal: the whole foreground group
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, out + err
    assert err.strip().endswith(
        "interrupted (KeyboardInterrupt); the report holds what was learned"
    )
    assert out.splitlines()[0].startswith("baseline: HEAD@{1} ")
    assert "interrupted while measured in a private worktree" in out.splitlines()[0]
    md = (tmp_path / "r.md").read_text()
    assert "interrupted while measured in a private worktree" in md.splitlines()[2]
    assert "This machine alone" not in md
    assert json.loads((tmp_path / "r.json").read_text())["interrupted"] == "KeyboardInterrupt"
    assert (
        repo_state(user) == before
    )  # the worktree is gone, the checkout, index, stash and refs untouched


PRINTS = (
    "import json, random\nfor _ in range(3):\n"
    '    print(json.dumps({"metric": "step_ms", "value": 10 * (1 + random.gauss(0, 0.01))}))\n'
)


def test_slower_than_remembered_with_nothing_to_test_says_what_was_measured(tmp_path):
    (tmp_path / "step.py").write_text(PRINTS)  # no repository, no costly variable: nothing to test
    r = run_cli(
        "investigate",
        "--no-canary",
        "-q",
        "--cmd",
        CMD,
        "--expect",
        "5ms",
        "--snapshot-processes",
        "3",
        "-o",
        "r.md",
        cwd=tmp_path,
        env={"CUDA_LAUNCH_BLOCKING": ""},
    )
    assert r.returncode == 3, r.stdout + r.stderr
    verdict = [line for line in r.stdout.splitlines() if not line.startswith("note:")][1]
    assert re.match(
        r"Slower, not explained: user\.step_ms: [12]\.\d+x the value you remember", verdict
    )
    assert "x the value you remember (5 ms;" in verdict and "--since REV" in verdict


def test_a_costly_variable_set_with_nothing_remembered_points_to_the_ab(tmp_path, monkeypatch):
    from forensics.investigate import run
    from forensics.investigate.measure import Subject

    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    now = {"bench": {"results": [{"name": "user.step_ms", "process_medians": [4.0] * 5}]}}
    notes: list[str] = []
    got = run._remember(
        run.Settings(None, cmd=CMD, canary=False),
        now,
        None,
        Subject("cmd", CMD, name="user.step_ms"),
        notes,
        deadline=time.monotonic() + 60,
        emit=lambda *a, **k: None,
    )
    assert got is None
    assert notes[0].startswith("no baseline in this machine's memory: ")
    (costly,) = [n for n in notes if n.startswith("CUDA_LAUNCH_BLOCKING=1 is set now")]
    assert costly.endswith("forensics bench --cmd STEP --b-unset CUDA_LAUNCH_BLOCKING measures it")


def test_an_orphan_branch_visited_is_passed_over_for_the_pull_before_it(pulled):
    user, old = pulled
    git(user, "checkout", "-q", "--orphan", "gh-pages")
    git(user, "rm", "-rfq", ".")
    commit(user, {"index.html": "docs\n"}, "pages")
    git(user, "checkout", "-q", "main")  # HEAD@{1}: the pages commit, which has no step.py
    pages = git(user, "rev-parse", "gh-pages").strip()
    point, why = memory.code_point(_rec(user))
    assert why == "" and point is not None and point.old == old
    assert point.sentence().startswith(f"HEAD@{{3}} {old[:7]}, before the pull of ")
    assert point.note == (
        f"HEAD@{{1}} {pages[:7]} (checkout: moving from gh-pages to main) shares no history with HEAD "
        "and was passed over"
    )


def test_a_throughput_below_the_remembered_figure_is_said_as_a_fraction_of_it():
    from forensics.investigate import run
    from forensics.investigate.measure import Subject

    def doc(values):
        return {"bench": {"results": [{"name": "user.tok_s", "process_medians": values}]}}

    step = Subject("cmd", CMD, higher_is_better=True, name="user.tok_s", unit="per s")
    got, text = run._versus_expect(
        doc([94.0]), doc([50.0, 50.5, 49.5, 50.2, 49.8]), step, run.Settings(None, cmd=CMD)
    )
    assert got is run.Regression.YES
    # 50 tok/s against 94 remembered: about half of it, not "1.88x the value you remember"
    assert text.startswith("user.tok_s: 0.532x the value you remember (94 per s; 95% CI 0.5"), text


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ("--since", ""),
            "forensics: error: --since '': empty; give a sha, a tag, a branch or HEAD~3",
        ),
        (
            ("--wheelhouse", "step.py"),
            "forensics: error: --wheelhouse step.py: is a file, not a folder; give a folder of wheels "
            "(pip download -d DIR)",
        ),
    ],
)
def test_an_empty_since_or_a_file_as_wheelhouse_is_one_line_before_any_work(pulled, args, message):
    user, _ = pulled
    before = repo_state(user)
    r = run_cli("investigate", "--no-canary", "--cmd", CMD, *args, "-o", "../r.json", cwd=user)
    assert (r.returncode, r.stderr.strip(), r.stdout) == (2, message, "")
    assert not (user.parent / "r.json").exists() and repo_state(user) == before


def test_without_a_reflog_orig_head_is_the_baseline_with_a_note(git_repo):
    import shutil

    repo = git_repo("r", {"cost.txt": "4\n"})
    old = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "config", "core.logAllRefUpdates", "false")
    shutil.rmtree(repo / ".git" / "logs")  # git keeps no reflog here
    git(repo, "checkout", "-q", "-b", "up")
    new = commit(repo, {"cost.txt": "8\n"}, "slow")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", "up")  # writes ORIG_HEAD: the HEAD before the merge
    point, why = memory.code_point(_rec(repo))
    assert why == "" and point is not None and (point.old, point.new) == (old, new)
    assert point.sentence() == f"ORIG_HEAD {old[:7]}"
    assert point.note.startswith(
        "git keeps no reflog in this repository (core.logAllRefUpdates is false"
    )
    assert (
        f"the baseline is ORIG_HEAD {old[:7]}, the HEAD before the last pull, merge, reset"
        in point.note
    )


def test_since_with_a_baseline_that_measured_the_step_is_said_to_be_unused(git_repo):
    from tests.conftest import EXAMPLES

    repo = git_repo("r", {"step.py": PRINTS})
    r = run_cli(
        "investigate",
        "--no-canary",
        "-q",
        "--baseline",
        str(EXAMPLES / "silent-pull" / "before.json"),  # H200, user.step_ms measured
        "--cmd",
        CMD,
        "--since",
        "HEAD",
        "--snapshot-processes",
        "3",
        "-o",
        "../r.json",
        cwd=repo,
    )
    assert r.returncode in (0, 1, 3), r.stdout + r.stderr
    assert (
        "note: --since HEAD was not used: the baseline snapshot measured your step (user.step_ms), and "
        "that measurement is the baseline" in r.stdout
    )


def test_a_recent_distribution_the_step_imported_leads_the_list(tmp_path, monkeypatch):
    site = tmp_path / "site"
    t = time.time()
    for i, name in enumerate(["target"] + [f"noise{k}" for k in range(9)]):
        info = site / f"{name}-2.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 2.0\n")
        (info / "top_level.txt").write_text(f"{name}_mod\n")
        stamp = t - 86400 * (3 if name == "target" else 1) + i  # target: the oldest, 3 days ago
        os.utime(info, (stamp, stamp))
    monkeypatch.syspath_prepend(str(site))
    rows = memory.recent_distributions(imported=["target_mod", "json"])
    assert len(rows) == 8 and rows[0]["name"] == "target" and rows[0]["imported"] is True
    assert not any(r["imported"] for r in rows[1:] if r["name"].startswith("noise"))
    everything = memory.recent_distributions(limit=None)
    assert {f"noise{k}" for k in range(9)} | {"target"} <= {r["name"] for r in everything}


def test_a_repository_without_a_commit_is_said_so_not_missing(git_repo):
    repo = git_repo("r")  # git init, nothing committed
    now = {"probes": {"git": {"data": {"repos": [{"path": str(repo), "state": "no_commits"}]}}}}
    point, why = memory.code_point(now)
    assert point is None
    assert why == (
        f"the repository at {repo} has no commit yet, so no earlier code to measure; give --expect with "
        "the value you remember"
    )


def test_a_move_older_than_the_reflog_read_falls_back_to_orig_head(git_repo):
    repo = git_repo("r", {"cost.txt": "4\n"})
    old = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "up")
    commit(repo, {"cost.txt": "8\n"}, "slow")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", "up")  # ORIG_HEAD: the HEAD before the merge
    for i in range(3):
        commit(repo, {"mine.txt": f"{i}\n"}, f"mine {i}")
    now = _rec(repo)
    rec = memory.main_repo(now)
    rec["reflog"] = rec["reflog"][
        :3
    ]  # the probe reads the last entries only: the user's own commits
    point, why = memory.code_point(now)
    assert why == "" and point is not None and point.old == old
    assert point.note.startswith(
        f"the 3 reflog entries read hold no pull, checkout, reset or rebase: the baseline is ORIG_HEAD {old[:7]}"
    )


def test_a_figure_too_small_for_any_step_is_refused_with_or_without_its_unit():
    """``--expect 1e-300`` (no unit: the metric's) was taken, and the unit-slip error then printed a
    ratio of 304 digits; with a unit (``1e-300ms``) it was refused."""
    for text in ("1e-300", "1e-12", "1e-12ms", "1e-16s"):
        with pytest.raises(BadInputError) as exc:
            memory.parse_expect(text, higher_is_better=False, metric="user.step_ms")
        assert str(exc.value) == (
            f"--expect {text!r}: below 1 ps, no step's time in any unit; give the step's old value, "
            "e.g. 19ms"
        )
    value, _ = memory.parse_expect("1e-6", higher_is_better=False, metric="user.step_ms")
    with pytest.raises(BadInputError) as exc:
        memory.check_expect_scale("1e-6", value, [20.0], "user.step_ms", False)
    assert str(exc.value).startswith("--expect 1e-6 is 2.0e+07x below today's user.step_ms (20, ")


def test_microseconds_with_the_greek_mu_are_read_as_with_the_micro_sign():
    """``--expect 20μs`` (U+03BC, what a Greek keyboard types; the micro sign is U+00B5) was 'expected the
    step's old value with its unit, e.g. 19ms', which it was."""
    for text in ("20μs", "20µs", "20us"):
        assert memory.parse_expect(text, higher_is_better=False, metric="user.step_ms") == (
            0.02,
            False,
        )
