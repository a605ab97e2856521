"""forensics bisect / bisect-step on real throw-away git repositories.

The step script of the test repository prints seeded timings of the cost written in
``cost.txt`` (in the commit under test) times a factor read from a file
*outside* the repository (the "environment"), with noise per process and per
value, and prints ``{"metric": "step_ms", "value": ...}`` lines. One commit
makes it 30% slower; one commit is broken (the step exits 1).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from forensics.bisect.measure import StepSpec
from forensics.bisect.run import BisectConfig, CommitClass, Outcome, StepExit, run_bisect, run_step
from forensics.errors import BadInputError
from forensics.render.bisect import render
from tests._stepkit import SEEDED_RNG
from tests.conftest import processes_with_env

_HEAD = (
    r"""
import json, os, random, sys, time
if os.path.exists("BROKEN"):
    sys.exit("step: this commit does not run")
cost = float(open("cost.txt").read())
factor = float(open(os.environ["BISECT_TEST_FACTOR"]).read())
"""
    + SEEDED_RNG
    + r"""
proc = 1 + rnd.gauss(0, 0.02)
for _ in range(4):
    ms = cost * factor * proc * (1 + rnd.gauss(0, 0.04))
"""
)
STEP = _HEAD + '    print(json.dumps({"metric": "step_ms", "value": ms}))\n'
"""The step: its seeded timings printed as drawn (the tool reads what the step prints)."""
STEP_SPIN = _HEAD + (
    "    t0 = time.process_time()  # CPU time: other jobs on a loaded CI machine do not add noise\n"
    "    while (time.process_time() - t0) * 1e3 < ms:\n"
    "        pass\n"
    '    print(json.dumps({"metric": "step_ms", "value": (time.process_time() - t0) * 1e3}))\n'
)
"""The same step busy-waiting each timing out on CPU time (a test that interrupts a running step)."""

CMD = f"{sys.executable} step.py"
CLI = [sys.executable, "-c", "from forensics.cli import main; main()"]


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def make_repo(
    root: Path,
    n: int = 20,
    slow_at: int | None = 13,
    broken_at: int | None = 10,
    base_ms: float = 6.0,
    spin: bool = False,
) -> tuple[Path, list[str]]:
    """A repo with commits 0..n (0 = good); commit ``slow_at`` makes the step 30% slower; ``spin``: the step
    busy-waits its timings (:data:`STEP_SPIN`)."""
    repo = root / "user-repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "step.py").write_text(STEP_SPIN if spin else STEP)
    (repo / ".gitignore").write_text("*.log\n")
    shas = []
    for i in range(n + 1):
        cost = base_ms * (1.3 if slow_at is not None and i >= slow_at else 1.0)
        (repo / "cost.txt").write_text(f"{cost}\n")
        (repo / "notes.txt").write_text(f"change {i}\n")
        if broken_at is not None and i == broken_at:
            (repo / "BROKEN").write_text("x\n")
        elif (repo / "BROKEN").exists():
            (repo / "BROKEN").unlink()
        _git(repo, "add", "-A")
        _git(
            repo,
            "commit",
            "-q",
            "-m",
            f"commit {i}" + (" <make it slower>" if i == slow_at else ""),
        )
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return repo, shas


def dirty_up(repo: Path) -> None:
    """Leave the user's checkout the way real people leave it: stash, staged, modified, untracked, ignored."""
    (repo / "notes.txt").write_text("stashed work\n")
    _git(repo, "stash", "-q")
    _git(repo, "checkout", "-q", "-b", "feature")
    (repo / "staged.txt").write_text("staged\n")
    _git(repo, "add", "staged.txt")
    (repo / "notes.txt").write_text("modified, not staged\n")
    (repo / "untracked.py").write_text("print('mine')\n")
    (repo / "build.log").write_text("ignored\n")


def state(repo: Path) -> dict:
    """Hash of every file under the repo (``.git`` included), then read-only git facts."""
    files = {}
    for p in sorted(repo.rglob("*")):
        if p.is_file() or p.is_symlink():
            files[str(p.relative_to(repo))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return {
        "files": files,
        "head": _git(repo, "rev-parse", "HEAD"),
        "branch": _git(repo, "symbolic-ref", "HEAD"),
        "stash": _git(repo, "stash", "list"),
        "index": _git(repo, "ls-files", "--stage"),
        "worktrees": _git(repo, "worktree", "list", "--porcelain"),
        "admin": (repo / ".git" / "worktrees").exists(),
    }


@pytest.fixture
def factor_file(tmp_path, monkeypatch):
    f = tmp_path / "environment-factor.txt"  # outside the repository
    f.write_text("1.0\n")
    monkeypatch.setenv("BISECT_TEST_FACTOR", str(f))
    return f


@pytest.mark.slow
def test_bisect_finds_the_slow_commit_skips_the_broken_one_and_leaves_the_checkout_alone(
    tmp_path, factor_file, monkeypatch
):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    repo, shas = make_repo(tmp_path)
    dirty_up(repo)
    before = state(repo)
    log = []
    cfg = BisectConfig(str(repo), shas[0], shas[-1], StepSpec(cmd=CMD), processes=5, threshold=0.10)
    res = run_bisect(cfg, on_log=log.append)
    assert state(repo) == before
    assert list(tmp.iterdir()) == []
    assert res.outcome is Outcome.CULPRIT and res.confirmed
    assert res.culprit.sha == shas[13]
    assert res.culprit.subject == "commit 13 <make it slower>"
    assert res.parent.sha == shas[12]
    assert (
        res.rounds <= math.log2(len(shas) - 1) + 2
    )  # 20 commits: at most 6 rounds, the skipped one included
    skipped = [r for r in res.records if r.cls is CommitClass.SKIPPED]
    assert [r.info.sha for r in skipped] == [shas[10]]
    assert "does not run" in skipped[0].note
    assert 1.2 < res.confirmation.time_ratio < 1.45
    assert res.confirmation.ci_low > 1.0
    # the culprit explains about the whole gap; a 6 ms busy-wait shares 2 cores with another test worker
    assert 0.6 < res.gap_share < 1.5
    assert "cost.txt" in res.diffstat
    assert res.drift is not None and res.drift.verdict.value in ("same", "inconclusive")
    assert not any("drifted" in n for n in res.notes)
    assert any("round" in e.phase for e in log) and log[-1].phase == "verdict"

    html = render(res, "html")
    assert "&lt;make it slower&gt;" in html and "<make it slower>" not in html
    assert (
        "<svg" in html
        and html.count("<circle") >= 20
        and "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )
    md = render(res, "md")
    assert shas[13] in md and "cost.txt" in md and "PYTHONPATH" in md
    # the Markdown report escapes HTML as the diff report's does (a renderer may pass raw HTML through)
    assert "commit 13 &lt;make it slower>" in md and "<make it slower>" not in md
    data = json.loads(render(res, "json"))
    assert data["outcome"] == "culprit" and data["culprit"]["sha"] == shas[13]
    assert data["rounds"] == res.rounds


def test_environment_changed_when_the_good_commit_is_slow_too(tmp_path, factor_file):
    repo, shas = make_repo(tmp_path, n=4, slow_at=None, broken_at=None)
    factor_file.write_text("1.3\n")  # the environment got 30% slower; the code did not change
    cfg = BisectConfig(
        str(repo), shas[0], shas[-1], StepSpec(cmd=CMD), processes=5, threshold=0.10, good_was=6.0
    )
    res = run_bisect(cfg)
    assert res.outcome is Outcome.ENVIRONMENT
    assert res.sentence.startswith("the environment changed, not the code")
    assert res.rounds == 0 and res.culprit is None
    assert (
        "gpu.throttling" in res.hypotheses
        and "nccl.env" in res.hypotheses
        and "code.change" not in res.hypotheses
    )
    assert (repo / ".git" / "worktrees").exists() is False


def test_refuses_bad_input_in_one_line(tmp_path, factor_file):
    repo, shas = make_repo(tmp_path, n=3, slow_at=None, broken_at=None, spin=True)
    spec = StepSpec(cmd=CMD)
    with pytest.raises(BadInputError, match="unknown revision"):
        run_bisect(BisectConfig(str(repo), "nope", shas[-1], spec))
    with pytest.raises(BadInputError, match="is not an ancestor"):
        run_bisect(BisectConfig(str(repo), shas[-1], shas[0], spec))
    with pytest.raises(BadInputError, match="not a git repository"):
        run_bisect(BisectConfig(str(tmp_path), shas[0], shas[-1], spec))
    empty = tmp_path / "empty"
    empty.mkdir()
    _git(empty, "init", "-q")
    with pytest.raises(BadInputError, match="no commits"):
        run_bisect(BisectConfig(str(empty), "HEAD~1", "HEAD", spec))
    shallow = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "2", f"file://{repo}", str(shallow)], check=True
    )
    with pytest.raises(BadInputError, match="shallow"):
        run_bisect(BisectConfig(str(shallow), shas[0], "HEAD", spec))
    proc = subprocess.run(
        [*CLI, "bisect", "--repo", str(repo), "--good", shas[-1], "--bad", shas[0], "--cmd", CMD],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.count("\n") == 1
        and "is not an ancestor" in proc.stderr
        and "Traceback" not in proc.stderr
    )


def _wait_for_worktrees(
    repo: Path, proc: subprocess.Popen, count: int, timeout_s: float = 30
) -> None:
    wdir = repo / ".git" / "worktrees"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if wdir.is_dir() and len(list(wdir.iterdir())) >= count:
            return
        assert proc.poll() is None, "bisect ended before it was interrupted"
        time.sleep(0.02)
    raise AssertionError("bisect never created its worktrees")


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_mid_run_leaves_the_checkout_exactly_as_it_was(tmp_path, factor_file, sig, code):
    repo, shas = make_repo(tmp_path, n=16, broken_at=None, base_ms=15.0, spin=True)
    dirty_up(repo)
    before = state(repo)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with open(tmp_path / "stderr.txt", "w") as err:
        proc = subprocess.Popen(
            [
                *CLI,
                "bisect",
                "--repo",
                str(repo),
                "--good",
                shas[0],
                "--bad",
                shas[-1],
                "--cmd",
                CMD,
                "--threshold",
                "10%",
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, "TMPDIR": str(tmp)},
        )
        _wait_for_worktrees(repo, proc, 2)  # both endpoint worktrees exist: measuring
        time.sleep(0.4)
        proc.send_signal(sig)
        proc.communicate(timeout=60)
    stderr = (tmp_path / "stderr.txt").read_text()
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr
    assert state(repo) == before
    assert list(tmp.iterdir()) == []  # the temporary worktrees are gone too


def _marked(value: str, name: str | None = None) -> list:
    return processes_with_env("BISECT_TEST_FACTOR", value, name)


def test_interrupt_stops_what_the_step_left_running(tmp_path, factor_file):
    """A step's grandchild (think torchrun's ranks) must not outlive an interrupted bisect."""
    repo, shas = make_repo(tmp_path, n=3, slow_at=None, broken_at=None, spin=True)
    before = state(repo)
    proc = subprocess.Popen(
        [
            *CLI,
            "bisect",
            "--repo",
            str(repo),
            "--good",
            shas[0],
            "--bad",
            shas[-1],
            "--cmd",
            f"sleep 30 & {CMD}; wait",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not _marked(str(factor_file), "sleep"):
        assert proc.poll() is None and time.monotonic() < deadline, "the step never started"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and "worktrees removed" in err
    assert _marked(str(factor_file)) == []
    assert state(repo) == before


def test_a_crashing_step_on_an_endpoint_is_one_line_and_cleans_up(tmp_path, factor_file):
    repo, shas = make_repo(tmp_path, n=3, slow_at=None, broken_at=None, spin=True)
    before = state(repo)
    proc = subprocess.run(
        [
            *CLI,
            "bisect",
            "--repo",
            str(repo),
            "--good",
            shas[0],
            "--bad",
            shas[-1],
            "--cmd",
            f"{sys.executable} -c 'import os; os.abort()'",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "cannot measure the --good commit" in proc.stderr and "Traceback" not in proc.stderr
    assert state(repo) == before


@pytest.mark.slow
def test_bisect_step_exit_codes_follow_git_bisect_run(tmp_path, factor_file):
    repo, shas = make_repo(tmp_path, n=6, slow_at=3, broken_at=5)
    spec = StepSpec(cmd=CMD)

    def at(i: int) -> tuple[StepExit, str]:
        _git(repo, "checkout", "-q", "--detach", shas[i])
        return run_step(
            BisectConfig(str(repo), shas[0], shas[-1], spec, processes=5, threshold=0.10)
        )

    assert at(2)[0] is StepExit.FAST
    assert at(4)[0] is StepExit.SLOW
    code, reason = at(5)
    assert code is StepExit.SKIP and "does not run" in reason
    factor_file.write_text("1.0\n")
    proc = subprocess.run(
        [
            *CLI,
            "bisect-step",
            "--repo",
            str(repo),
            "--good",
            shas[0],
            "--bad",
            shas[0] + "x",
            "--cmd",
            CMD,
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 128 and "aborting the bisect" in proc.stderr
    proc = subprocess.run(
        [*CLI, "bisect-step", "--repo", str(repo), "--good", shas[0]],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 128  # a usage error must not read as "slow"


@pytest.mark.slow
def test_setup_runs_in_each_worktree_and_a_failing_setup_skips_the_commit(tmp_path, factor_file):
    """Commit 4 cannot be built and sits right before the slow commit 5: the answer is the range 4..5."""
    repo, shas = make_repo(tmp_path, n=8, slow_at=5, broken_at=None)
    # commit 4 cannot be built: its setup fails; the step needs what the setup made (.built, untracked)
    _git(repo, "checkout", "-q", "--detach", shas[4])
    hook = tmp_path / "hook-ran"
    (repo / ".git" / "hooks" / "post-checkout").write_text(f"#!/bin/sh\necho ran >> {hook}\n")
    (repo / ".git" / "hooks" / "post-checkout").chmod(0o755)
    _git(repo, "checkout", "-q", "main")
    hook.unlink()
    before = state(repo)
    setup = (
        f"{sys.executable} -c \"import sys; sys.exit('no build' if open('notes.txt').read() == 'change 4\\n' "
        'else 0)" && echo ok > .built'
    )
    cmd = f"test -f .built && {CMD}"
    res = run_bisect(
        BisectConfig(
            str(repo),
            shas[0],
            shas[-1],
            StepSpec(cmd=cmd, setup=setup),
            processes=5,
            threshold=0.10,
        )
    )
    assert res.outcome is Outcome.CULPRIT_RANGE and res.culprit is None
    assert [c.sha for c in res.candidates] == [shas[4], shas[5]] and res.parent.sha == shas[3]
    assert res.confirmed and "one of 2 commits" in res.sentence
    by_sha = {r.info.sha: r for r in res.records}
    assert (
        by_sha[shas[4]].cls is CommitClass.SKIPPED
        and "setup exited with status 1: no build" in by_sha[shas[4]].note
    )
    assert state(repo) == before
    assert not hook.exists()  # the user's post-checkout hook never ran for our checkouts


@pytest.mark.slow
def test_callable_is_timed_from_the_worktree_not_an_installed_copy(tmp_path, monkeypatch):
    repo = tmp_path / "user-repo"
    (repo / "mypkg").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(2):
        n = (
            20000 if i < 1 else 60000
        )  # commit 1 triples the work (wall time: keep the effect large)
        (repo / "mypkg" / "__init__.py").write_text(f"VERSION = {i}\n")
        (repo / "mypkg" / "work.py").write_text(
            f"def step():\n    return sum(i * i for i in range({n}))\n"
        )
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"work {i}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    # an installed copy of the same package elsewhere on PYTHONPATH must not be the one measured
    shadow = tmp_path / "site" / "mypkg"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    (shadow / "work.py").write_text("def step():\n    return 0\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))
    res = run_bisect(
        BisectConfig(
            str(repo),
            shas[0],
            shas[-1],
            StepSpec(
                target="mypkg.work:step",
                callable_timer="cpu",
                callable_args=(
                    "--warmup-s",
                    "0.02",
                    "--warmup-calls",
                    "2",
                    "--blocks",
                    "8",
                    "--min-block-ms",
                    "2",
                ),
            ),
            processes=5,
            threshold=0.10,
        )
    )
    assert res.outcome is Outcome.CULPRIT and res.culprit.sha == shas[1] and res.confirmed
    assert (
        res.metric == "call_ms" and res.endpoints.time_ratio > 1.5
    )  # the shadow copy would give 1.0
    assert "imported from inside the worktree" in res.isolation


def test_bench_callable_refuses_a_module_from_outside_the_worktree(tmp_path, monkeypatch, capsys):
    from forensics.step import callable as bench_callable

    pkg = tmp_path / "elsewhere"
    pkg.mkdir()
    (pkg / "faraway_mod.py").write_text("def f():\n    return 1\n")
    monkeypatch.syspath_prepend(str(pkg))
    assert (
        bench_callable.main(
            ["faraway_mod:f", "--blocks", "2", "--expect-under", str(tmp_path / "wt")]
        )
        == 3
    )
    assert "shadows the code under test" in capsys.readouterr().err
    assert bench_callable.main(["faraway_mod:f", "--blocks", "3", "--min-block-ms", "0.1"]) == 0
    lines = [
        json.loads(x) for x in capsys.readouterr().out.splitlines() if x
    ]  # each on a line of its own
    assert [x["metric"] for x in lines if "value" in x] == ["call_ms"] * 3
    assert bench_callable.main(["faraway_mod:nope"]) == 2


def _cmp(a_ms: float, b_ms: float):
    from forensics.stats import compare

    a = [a_ms * (1 + d) for d in (-0.01, -0.005, 0.0, 0.005, 0.01, 0.002)]
    b = [b_ms * (1 + d) for d in (-0.01, -0.004, 0.0, 0.004, 0.01, -0.002)]
    return compare(a, b, threshold=0.05)


def test_classify_uses_both_endpoints():
    from forensics.bisect.run import classify

    assert classify(_cmp(10, 10), _cmp(10, 13)) is CommitClass.FAST
    assert classify(_cmp(10, 13), _cmp(13, 13)) is CommitClass.SLOW
    assert (
        classify(_cmp(10, 11.5), _cmp(11.5, 13)) is CommitClass.INTERMEDIATE
    )  # a second step exists
    assert classify(_cmp(10, 10.3), _cmp(10.3, 10.6)) is CommitClass.UNKNOWN


@pytest.mark.slow
def test_cli_writes_reports_and_says_environment_changed(tmp_path, factor_file):
    repo, shas = make_repo(tmp_path, n=3, slow_at=None, broken_at=None, spin=True)
    factor_file.write_text("1.3\n")
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run(
        [
            *CLI,
            "bisect",
            "--repo",
            str(repo),
            "--good",
            shas[0],
            "--bad",
            "HEAD",
            "--cmd",
            CMD,
            "--threshold",
            "10%",
            "-o",
            str(out / "r.html"),
            "-o",
            str(out / "r.md"),
            "-o",
            str(out / "r.json"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.startswith("environment-changed: the environment changed, not the code")
    assert "endpoints" in proc.stderr  # progress went to stderr
    data = json.loads((out / "r.json").read_text())
    assert data["outcome"] == "environment-changed" and "gpu.throttling" in data["hypotheses"]
    assert "look at: gpu.throttling, gpu.pcie-link" in proc.stdout
    assert (
        "gpu.throttling" in (out / "r.html").read_text()
        and "environment-changed" in (out / "r.md").read_text()
    )
    bad = subprocess.run(
        [
            *CLI,
            "bisect",
            "--repo",
            str(repo),
            "--good",
            shas[0],
            "--bad",
            "HEAD",
            "--cmd",
            CMD,
            "-o",
            str(out / "r.pdf"),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "give a report name ending in .html, .md or .json" in bad.stderr
    bad = subprocess.run(
        [
            *CLI,
            "bisect",
            "--repo",
            str(repo),
            "--good",
            shas[0],
            "--bad",
            "HEAD",
            "--cmd",
            CMD,
            "-o",
            str(out / "missing" / "r.html"),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "does not exist" in bad.stderr and "endpoints" not in bad.stderr


def test_endpoint_verdicts_name_the_reason():
    from forensics.bisect.run import ENV_HYPOTHESES, _endpoint_verdict

    cfg = BisectConfig(".", "a", "b", StepSpec(cmd="x"), threshold=0.05)
    assert _endpoint_verdict(cfg, _cmp(10, 13), 10) is None
    outcome, sentence = _endpoint_verdict(cfg, _cmp(13, 13), 13)
    assert (
        outcome is Outcome.ENVIRONMENT
        and "--good-was" in sentence
        and "forensics snapshot" in sentence
    )
    cfg.good_was = 10.0
    outcome, sentence = _endpoint_verdict(cfg, _cmp(13, 13), 13)
    assert (
        outcome is Outcome.ENVIRONMENT
        and "+30% against its earlier result (13 now, 10 before)" in sentence
    )
    outcome, sentence = _endpoint_verdict(cfg, _cmp(10, 10), 10)
    assert outcome is Outcome.NOT_REPRODUCED and "does not reproduce" in sentence
    outcome, sentence = _endpoint_verdict(cfg, _cmp(13, 10), 13)
    assert outcome is Outcome.BAD_FASTER
    from forensics.stats import compare

    noisy = compare([10, 14, 9, 12, 16], [11, 15, 10, 13, 17], threshold=0.05)
    outcome, sentence = _endpoint_verdict(cfg, noisy, 12)
    assert (
        outcome is Outcome.NO_DIFFERENCE
        and sentence.startswith("refusing to bisect")
        and "--processes" in sentence
    )
    assert "code.change" not in ENV_HYPOTHESES and "gpu.throttling" in ENV_HYPOTHESES


@pytest.mark.slow
def test_drift_during_the_bisect_is_reported(tmp_path, factor_file):
    repo, shas = make_repo(tmp_path, n=1, slow_at=1, broken_at=None)

    def on_log(entry):
        if entry.phase == "confirm" and entry.message.startswith("confirming"):
            factor_file.write_text(
                "1.3\n"
            )  # the machine gets slower between the start and the confirmation

    res = run_bisect(
        BisectConfig(str(repo), shas[0], shas[1], StepSpec(cmd=CMD), processes=5, threshold=0.10),
        on_log=on_log,
    )
    assert res.outcome is Outcome.CULPRIT and res.culprit.sha == shas[1]
    assert res.drift.verdict.value == "slower"
    assert any("the machine drifted during the bisect" in n for n in res.notes)
    assert "A/A drift check" in render(res, "md")


@pytest.mark.slow
def test_git_bisect_run_with_bisect_step_finds_the_commit(tmp_path, factor_file):
    repo, shas = make_repo(tmp_path, n=6, slow_at=4, broken_at=None)
    _git(repo, "bisect", "start", "--term-old=fast", "--term-new=slow", shas[-1], shas[0])
    argv = [
        *CLI,
        "bisect-step",
        "--good",
        shas[0],
        "--bad",
        shas[-1],
        "--cmd",
        CMD,
        "--threshold",
        "10%",
    ]
    proc = subprocess.run(
        ["git", "-C", str(repo), "bisect", "run", *argv], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{shas[4]} is the first slow commit" in proc.stdout
    _git(repo, "bisect", "reset")


def test_a_failing_setups_last_line_is_quoted_without_its_control_characters(tmp_path):
    """bisect --setup's failure note quoted the first 200 characters of stderr's last line as printed: an
    escape sequence in it reached the terminal and the report's notes."""
    from forensics.bisect.measure import Measurer, StepFailed, StepSpec
    from forensics.bisect.worktree import WorktreePool
    from tests.conftest import make_repo as make_plain_repo

    repo = make_plain_repo(tmp_path / "r", {"a.txt": "a\n"})
    sha = _git(repo, "rev-parse", "HEAD").strip()
    spec = StepSpec(cmd="true", setup="printf 'make: \\033]0;owned\\007 no rule\\n' >&2; exit 2")
    with WorktreePool(str(repo)) as pool:
        tree = pool.add("x", sha)
        with pytest.raises(StepFailed) as exc:
            Measurer(pool, spec)._run_setup(tree.path, sha)
    assert str(exc.value) == "setup exited with status 2: make: ?]0;owned? no rule"
