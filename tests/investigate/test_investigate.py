"""forensics investigate on CPU: a real step script in a throw-away git repository.

The step prints seeded timings (tests/_stepkit.busy_step) of
``cost.txt`` (in the commit under test) milliseconds, times 1.4 when ``PYTORCH_TEST_SLOW``
is set; ``NCCL_TEST_DECOY`` is read and ignored. It prints ``{"metric": "step_ms", ...}``
lines. Baselines are real snapshots taken with the step measured in fresh processes (the
canary left out so a test takes seconds, not minutes; tests marked ``slow`` run more
processes).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._stepkit import (
    busy_step,
    pip_target,
    run_investigate,
    step_env,
    take_baseline,
    tree_hash,
    wheel,
)
from tests.conftest import (
    ROOT,
    commit,
    git,
    processes_with_env,
    run_cli,
    upstream_and_clone,
)

STEP = busy_step(
    'float(open("cost.txt").read())',
    '1.4 if os.environ.get("PYTORCH_TEST_SLOW") else 1.0',
    '_ = os.environ.get("NCCL_TEST_DECOY")  # read, and it does not matter',
)
STEP_SPIN = busy_step(
    'float(open("cost.txt").read())',
    '1.4 if os.environ.get("PYTORCH_TEST_SLOW") else 1.0',
    '_ = os.environ.get("NCCL_TEST_DECOY")  # read, and it does not matter',
    spin=True,
)
"""The same step, its processes busy-waiting each timing out (the Ctrl-C test catches one running)."""
CMD = f"{sys.executable} step.py"


@pytest.fixture
def user_repo(tmp_path):
    """(upstream, user clone): the user's clone at the first commit (cost 4 ms)."""
    up, user = upstream_and_clone(
        tmp_path,
        {"step.py": STEP, "cost.txt": "4\n", "kernels/attn.py": "x = 1\n"},
        "serving: verify step",
    )
    return up, user


def baseline(path: Path, cwd: Path, processes: int = 5, **env: str) -> Path:
    return take_baseline(path, cwd, CMD, processes, **env)


investigate = run_investigate


@pytest.mark.slow
def test_confirms_the_variable_that_slows_the_step_and_refutes_the_decoy(user_repo, tmp_path):
    _, user = user_repo
    base = baseline(tmp_path / "before.json", user)
    r = investigate(
        user,
        "--baseline",
        str(base),
        "--cmd",
        CMD,
        "--no-canary",
        "-o",
        str(tmp_path / "r.json"),
        "-o",
        str(tmp_path / "r.html"),
        "-o",
        str(tmp_path / "r.md"),
        "--budget",
        "20m",
        "-q",
        PYTORCH_TEST_SLOW="1",
        NCCL_TEST_DECOY="1",
    )
    assert r.returncode == 1, r.stdout + r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("Confirmed by experiment: nccl.env: Unsetting PYTORCH_TEST_SLOW"), first
    assert "recovers" in first and "of the slowdown" in first
    doc = json.loads((tmp_path / "r.json").read_text())
    by_var = {next(iter(e["details"]["restore"])): e for e in doc["experiments"]}
    slow, decoy = by_var["PYTORCH_TEST_SLOW"], by_var["NCCL_TEST_DECOY"]
    assert slow["outcome"] == "confirmed" and slow["share"]["low"] >= 0.5
    assert slow["comparison"]["verdict"] == "faster" and slow["comparison"]["ci95"][1] < 1
    # refuted: no change within the noise band, or it cannot account for a fifth of the slowdown
    assert decoy["outcome"] == "refuted" and decoy["comparison"]["verdict"] not in (
        "faster",
        "small-faster",
    )
    assert decoy["comparison"]["verdict"] == "same" or decoy["share"]["high"] < 0.2
    # the JSON keeps forensics diff's keys and adds the experiments
    for key in (
        "verdict",
        "hypotheses",
        "changes",
        "commits",
        "bench",
        "experiments",
        "diff_verdict",
    ):
        assert key in doc
    assert doc["verdict"] == first
    html = (tmp_path / "r.html").read_text()
    assert html.index("Confirmed by experiment") < html.index(
        "Suspects, most likely first"
    )  # verdict, then ledger
    assert "PYTORCH_TEST_SLOW" in (tmp_path / "r.md").read_text()


@pytest.mark.slow
def test_suspect_commit_confirmed_in_a_private_worktree_checkout_untouched(user_repo, tmp_path):
    up, user = user_repo
    base = baseline(tmp_path / "before.json", user)
    commit(up, {"README.md": "timings per block\n"}, "docs: timings")
    slow = commit(
        up,
        {"cost.txt": "5.6\n", "kernels/attn.py": "x = 2\n"},
        "kernels: recompute attention scores <script>alert(1)</script>",
    )
    commit(up, {"config.yaml": "log_every: 50\n"}, "config: log every 50 steps")
    git(user, "pull", "-q")
    (user / "scratch.txt").write_text("uncommitted, untracked\n")
    before = tree_hash(user)
    r = investigate(
        user,
        "--baseline",
        str(base),
        "--cmd",
        CMD,
        "--no-canary",
        "-o",
        str(tmp_path / "r.json"),
        "-o",
        str(tmp_path / "r.html"),
        "--budget",
        "20m",
        "-q",
    )
    assert r.returncode == 1, r.stdout + r.stderr
    html = (tmp_path / "r.html").read_text()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert r.stdout.startswith(f"Confirmed by experiment: code.change: Going back from {slow[:10]}")
    doc = json.loads((tmp_path / "r.json").read_text())
    first, bis = doc["experiments"][0], doc["experiments"][1]
    assert (
        first["kind"] == "commit"
        and first["details"]["commit"] == slow
        and first["outcome"] == "confirmed"
    )
    assert bis["kind"] == "bisect" and bis["outcome"] == "not-run" and "not needed" in bis["reason"]
    assert tree_hash(user) == before
    # our worktrees are gone: the checkout alone is listed
    assert git(user, "worktree", "list").count("\n") == 1


@pytest.mark.slow
def test_a_hot_but_innocent_suspect_is_refuted_then_bisect_names_the_commit(user_repo, tmp_path):
    up, user = user_repo
    base = baseline(tmp_path / "before.json", user)
    culprit = commit(up, {"cost.txt": "5.6\n"}, "tune the block size")
    commit(
        up, {"kernels/attn.py": "x = 1  # attention\n"}, "kernels: comments"
    )  # the hot-path suspect
    commit(up, {"config.yaml": "a: 1\n"}, "config")
    git(user, "pull", "-q")
    r = investigate(
        user,
        "--baseline",
        str(base),
        "--cmd",
        CMD,
        "--no-canary",
        "-o",
        str(tmp_path / "r.json"),
        "--budget",
        "10m",
        "-q",
        timeout=600,
    )
    doc = json.loads((tmp_path / "r.json").read_text())
    first, bis = doc["experiments"][0], doc["experiments"][1]
    assert first["outcome"] == "refuted", first
    assert bis["details"]["bisect"]["culprit"]["sha"] == culprit
    assert bis["outcome"] == "confirmed" and r.returncode == 1, r.stdout + r.stderr


def test_plan_lists_experiments_with_costs_and_runs_none(user_repo, tmp_path):
    _, user = user_repo
    base = baseline(tmp_path / "before.json", user)
    r = investigate(
        user,
        "--baseline",
        str(base),
        "--cmd",
        CMD,
        "--no-canary",
        "--plan",
        "-q",
        "-o",
        str(tmp_path / "plan.json"),
        PYTORCH_TEST_SLOW="1",
        NCCL_TEST_DECOY="1",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Plan: measured slower")
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("env-")]
    assert len(lines) == 2 and all("planned" in ln and "est. " in ln for ln in lines)
    assert "--b-unset PYTORCH_TEST_SLOW" in r.stdout  # the command that would run it
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert doc["plan_only"] and all(
        e["outcome"] == "planned" and e["estimate_s"] > 0 and not e["a"] for e in doc["experiments"]
    )


def test_budget_spent_lists_every_experiment_with_the_reason(user_repo, tmp_path):
    _, user = user_repo
    base = baseline(tmp_path / "before.json", user)
    # one second cannot hold even the snapshot taken now: every experiment is left out, saying why
    r = investigate(
        user,
        "--baseline",
        str(base),
        "--cmd",
        CMD,
        "--no-canary",
        "--budget",
        "1",
        "-q",
        "-o",
        str(tmp_path / "r.json"),
        PYTORCH_TEST_SLOW="1",
    )
    assert r.returncode == 3, r.stdout + r.stderr
    assert r.stdout.startswith("Most likely, not confirmed: nccl.env")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["experiments"] and all(
        e["outcome"] == "not-run" and e["reason"].startswith("budget spent: needs about")
        for e in doc["experiments"]
    )
    assert "raise --budget" in r.stdout


def test_no_regression_runs_no_experiment(user_repo, tmp_path):
    _, user = user_repo
    base = baseline(tmp_path / "before.json", user, processes=10)
    r = investigate(
        user,
        "--baseline",
        str(base),
        "--cmd",
        CMD,
        "--no-canary",
        "-q",
        "-o",
        str(tmp_path / "r.json"),
        "--snapshot-processes",
        "10",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("No regression: user.step_ms")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["experiments"] == [] and doc["regression"]["status"] == "no regression"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--baseline", "missing.json"], "--baseline missing.json: no such file"),
        (["--baseline", "foreign.json"], "foreign.json"),
        (
            ["--baseline", "before.json", "--budget", "soon"],
            "--budget 'soon': expected seconds or a duration",
        ),
        (
            ["--baseline", "before.json", "--cmd", "x", "--callable", "a:b"],
            "either --cmd or --callable",
        ),
        (["--baseline", "before.json", "-o", "report.txt"], "must end in .html, .md or .json"),
        (
            ["--baseline", "before.json", "--wheelhouse", "nowhere"],
            "--wheelhouse nowhere: no such folder",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    (tmp_path / "foreign.json").write_text(json.dumps({"schema": "something.else/1"}))
    (tmp_path / "before.json").write_text(
        json.dumps({"schema": "forensics.snapshot/1", "probes": {}})
    )
    r = investigate(tmp_path, *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert (
        r.stderr.count("\n") == 1
        and r.stderr.startswith("forensics: error:")
        and message in r.stderr
    )
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "text, seconds", [("120", 120), ("90s", 90), ("15m", 900), ("1h", 3600), ("1h30m", 5400)]
)
def test_budget_accepts_seconds_and_units(text, seconds):
    from forensics.cli.investigate import parse_duration

    assert parse_duration(text) == seconds


@pytest.mark.slow
def test_ctrl_c_mid_experiment_stops_its_processes_and_still_writes_the_report(user_repo, tmp_path):
    _, user = user_repo
    commit(
        user,
        {"step.py": STEP_SPIN.replace("for _ in range(4):", "for _ in range(100):")},
        "longer processes",
    )
    base = baseline(tmp_path / "before.json", user)
    marker = f"inv-{os.getpid()}-{time.time_ns()}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "forensics",
            "investigate",
            "--baseline",
            str(base),
            "--cmd",
            CMD,
            "--no-canary",
            "-o",
            str(tmp_path / "r.json"),
            "--timeout",
            "600",
        ],
        cwd=user,
        env=step_env(PYTORCH_TEST_SLOW="1", INV_TEST_MARKER=marker),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def side_b_running() -> (
        bool
    ):  # side B of the environment experiment: the step without the variable
        import psutil

        for p in processes_with_env("INV_TEST_MARKER", marker):
            try:
                if "step.py" in " ".join(p.cmdline()) and "PYTORCH_TEST_SLOW" not in p.environ():
                    return True
            except psutil.Error:
                continue
        return False

    deadline = time.time() + 120
    while time.time() < deadline and not (tmp_path / "r.json").exists() and not side_b_running():
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert err.strip().splitlines()[-1].startswith("forensics: error: interrupted"), err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] and doc["experiments"][0]["outcome"] == "interrupted", doc[
        "experiments"
    ]
    time.sleep(0.5)
    assert [p for p in processes_with_env("INV_TEST_MARKER", marker) if p.pid != proc.pid] == []


def test_without_baseline_a_real_busy_gpu_snapshot_is_below_its_hardware():
    from forensics.investigate.hardware import judge_alone

    root = ROOT / "examples"
    busy = json.loads((root / "busy-gpu" / "after.json").read_text())
    checks, verdict, code = judge_alone(busy)
    assert code == 1 and "component.matmul_tflops" in verdict and "GPU 0 SM clock" in verdict
    idle = json.loads((root / "aa" / "before.json").read_text())
    checks, verdict, code = judge_alone(idle)
    assert (
        code == 0
        and verdict.startswith("No deviation")
        and all(c["status"] != "below" for c in checks)
    )
    assert any(c["check"].startswith("GPU 1 NVLink") and c["measured"] == 18 for c in checks)


def test_bench_runs_side_b_of_the_users_step_interleaved(user_repo, tmp_path):
    _, user = user_repo
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "forensics",
            "bench",
            "--cmd",
            CMD,
            "--processes",
            "5",
            "--b-unset",
            "PYTORCH_TEST_SLOW",
            "-o",
            str(a),
            "--b-output",
            str(b),
            "-q",
        ],
        cwd=user,
        env=step_env(PYTORCH_TEST_SLOW="1"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "user.step_ms: faster" in r.stdout, r.stdout + r.stderr
    doc_b = json.loads(b.read_text())
    assert (
        doc_b["config"]["unset"] == ["PYTORCH_TEST_SLOW"]
        and len(doc_b["results"][0]["process_medians"]) == 5
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "forensics",
            "bench",
            "--cmd",
            CMD,
            "--processes",
            "5",
            "--b-cmd",
            f"env PYTORCH_TEST_SLOW=1 {CMD}",
            "-o",
            str(a),
            "--b-output",
            str(b),
            "-q",
        ],
        cwd=user,
        env=step_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "user.step_ms: slower" in r.stdout, r.stdout + r.stderr
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "forensics",
            "bench",
            "--b-cmd",
            CMD,
            "-o",
            str(a),
            "--b-output",
            str(b),
        ],
        cwd=user,
        env=step_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        r.returncode == 2
        and r.stderr.strip()
        == "forensics: error: --b-cmd is side B's version of --cmd; give --cmd too"
    )


@pytest.mark.slow
def test_three_changed_variables_are_restored_together_first_then_one_by_one(user_repo, tmp_path):
    _, user = user_repo
    base = baseline(tmp_path / "before.json", user)
    r = investigate(
        user,
        "--baseline",
        str(base),
        "--cmd",
        CMD,
        "--no-canary",
        "-o",
        str(tmp_path / "r.json"),
        "--budget",
        "20m",
        "-q",
        PYTORCH_TEST_SLOW="1",
        NCCL_TEST_DECOY="1",
        CUDA_TEST_DECOY="2",
    )
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    env = [e for e in doc["experiments"] if e["kind"] == "environment"]
    group, singles = env[0], env[1:]
    assert len(group["details"]["restore"]) == 3 and group["outcome"] == "confirmed"
    outcome = {next(iter(e["details"]["restore"])): e["outcome"] for e in singles}
    assert outcome == {
        "PYTORCH_TEST_SLOW": "confirmed",
        "NCCL_TEST_DECOY": "refuted",
        "CUDA_TEST_DECOY": "refuted",
    }
    assert r.stdout.startswith(
        "Confirmed by experiment: nccl.env: Unsetting PYTORCH_TEST_SLOW (unset"
    )


@pytest.mark.slow
def test_an_older_package_from_the_wheelhouse_is_confirmed_in_a_temporary_overlay(tmp_path):
    wheels, site, work = tmp_path / "wheels", tmp_path / "site", tmp_path / "work"
    for d in (wheels, site, work):
        d.mkdir()
    old, new = wheel(wheels, "1.0", 4), wheel(wheels, "2.0", 5.6)
    (work / "cost.txt").write_text("0\n")
    (work / "step.py").write_text(
        STEP.replace('float(open("cost.txt").read())', "__import__('fakeslow').COST")
    )
    pip_target(site, old)
    base = baseline(tmp_path / "before.json", work, PYTHONPATH=str(site))
    pip_target(site, new, upgrade=True)
    before_site = tree_hash(site)
    r = investigate(
        work,
        "--baseline",
        str(base),
        "--cmd",
        CMD,
        "--no-canary",
        "--wheelhouse",
        str(wheels),
        "-o",
        str(tmp_path / "r.json"),
        "--budget",
        "20m",
        "-q",
        PYTHONPATH=str(site),
    )
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    pkg = next(e for e in doc["experiments"] if e["kind"] == "package")
    assert pkg["details"]["package"] == "fakeslow" and pkg["details"]["baseline_version"] == "1.0"
    assert pkg["outcome"] == "confirmed", pkg
    assert r.stdout.startswith(
        "Confirmed by experiment: python.packages: fakeslow 1.0 instead of 2.0"
    )
    assert tree_hash(site) == before_site  # the user's environment is not touched
    r = investigate(
        work,
        "--baseline",
        str(base),
        "--cmd",
        CMD,
        "--no-canary",
        "--plan",
        "-q",
        "-o",
        str(tmp_path / "p.json"),
        PYTHONPATH=str(site),
    )
    plan = json.loads((tmp_path / "p.json").read_text())
    pkg = next(e for e in plan["experiments"] if e["kind"] == "package")
    assert (
        pkg["outcome"] == "not-run"
        and "--wheelhouse" in pkg["reason"]
        and "pip download" in pkg["command"]
    )


def test_a_baseline_without_measurements_says_what_to_take_and_plan_still_plans(tmp_path):
    # a fresh-user pass: --plan printed no plan, and the advice said "more processes" where none were measured
    base = tmp_path / "base.json"
    assert (
        run_cli("snapshot", "-q", "-o", str(base), "--probe", "host", cwd=tmp_path).returncode == 0
    )
    plain = run_cli(
        "investigate", "--baseline", str(base), "-o", str(tmp_path / "r.md"), cwd=tmp_path
    )
    assert plain.returncode == 3
    assert (
        "neither snapshot has a measurement on both sides (take the baseline with `forensics snapshot --bench`, "
        "and `--bench-cmd STEP` for your step, the command given to --cmd)"
        in plain.stdout
        and "--snapshot-processes" not in plain.stdout
    )
    plan = run_cli(
        "investigate", "--baseline", str(base), "--plan", "-o", str(tmp_path / "p.md"), cwd=tmp_path
    )
    assert (
        plan.returncode == 0 and "Plan: " in plan.stdout and "if it did get slower" in plan.stdout
    )


@pytest.mark.parametrize(
    "text, told",
    [
        ("-1", "must be more than 0 and at most 7 days"),  # was 'expected seconds or a duration'
        (" -5m", "must be more than 0 and at most 7 days"),
        ("0", "must be more than 0 and at most 7 days"),
        ("-", "expected seconds or a duration such as 120, 90s, 15m or 1h"),
        ("5 m", "expected seconds or a duration such as 120, 90s, 15m or 1h"),
        ("1e9", "expected seconds or a duration such as 120, 90s, 15m or 1h"),
    ],
)
def test_a_duration_below_zero_is_said_to_be_so_not_unreadable(text, told):
    from forensics.cli.investigate import parse_duration
    from forensics.errors import BadInputError

    with pytest.raises(BadInputError) as exc:
        parse_duration(text, "--bench-timeout")
    assert str(exc.value) == f"--bench-timeout {text!r}: {told}"
