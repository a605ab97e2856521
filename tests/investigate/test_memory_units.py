"""The parts of investigate's remembered baseline, accounting and noise rule that need no process: the reflog
point, --expect, the costly-variable table, the residual, the noise rule of bench compare, the spread note."""

from __future__ import annotations

import json

import pytest

from forensics.bench.compare import compare_values
from forensics.errors import BadInputError
from forensics.investigate import memory
from forensics.investigate.decide import residual, versus_baseline
from forensics.investigate.measure import spread_note
from forensics.stats import Verdict
from tests.conftest import EXAMPLES

A = "a" * 40
B = "b" * 40
C = "c" * 40
D = "d" * 40


def _now(reflog, head=D, dirty=False):
    return {
        "probes": {
            "git": {
                "data": {
                    "repos": [
                        {
                            "path": "/src/serving",
                            "role": "main",
                            "state": "ok",
                            "head": {"sha": head},
                            "dirty": dirty,
                            "reflog": reflog,
                        }
                    ]
                }
            }
        }
    }


def test_reflog_point_is_the_head_before_the_last_pull():
    log = [
        {
            "old": C,
            "new": D,
            "time": "2026-11-30T10:15:00Z",
            "action": "pull origin main: Fast-forward",
        },
        {"old": B, "new": C, "time": "2026-11-29T09:00:00Z", "action": "commit: my own work"},
        {
            "old": A,
            "new": B,
            "time": "2026-11-28T09:00:00Z",
            "action": "checkout: moving from x to main",
        },
    ]
    point, why = memory.code_point(_now(log))
    assert why == "" and point.old == C and point.new == D and point.label == "HEAD@{1}"
    assert point.sentence() == f"HEAD@{{1}} {C[:7]}, before the pull of 2026-11-30 10:15"


def test_reflog_point_follows_a_rebasing_pull_back_to_its_start():
    log = [
        {
            "old": C,
            "new": D,
            "time": "2026-11-30T10:16:00Z",
            "action": "pull --rebase (finish): returning to refs/heads/main",
        },
        {
            "old": B,
            "new": C,
            "time": "2026-11-30T10:15:30Z",
            "action": "pull --rebase (pick): mine",
        },
        {
            "old": A,
            "new": B,
            "time": "2026-11-30T10:15:00Z",
            "action": "pull --rebase (start): checkout origin/main",
        },
        {"old": "e" * 40, "new": A, "time": "2026-11-29T10:15:00Z", "action": "commit: mine"},
    ]
    point, _ = memory.code_point(_now(log))
    assert point.old == A and point.label == "HEAD@{3}"


def test_no_move_in_the_reflog_says_what_to_give():
    point, why = memory.code_point(
        _now([{"old": C, "new": D, "time": "", "action": "commit: mine"}])
    )
    assert point is None and "--since REV" in why


def test_a_baseline_snapshot_without_the_step_gives_its_head():
    point, _ = memory.code_point(_now([]), baseline=_now([], head=B))
    assert point.old == B and point.label == "the baseline snapshot's HEAD"


@pytest.mark.parametrize(
    "text,value,hib",
    [
        ("19ms", 19.0, False),
        ("0.019s", 19.0, False),
        ("19", 19.0, False),
        ("94tok/s", 94.0, True),
        ("250 us", 0.25, False),
    ],
)
def test_expect_is_read_in_the_steps_unit(text, value, hib):
    assert memory.parse_expect(text, higher_is_better=False) == pytest.approx((value, hib))


@pytest.mark.parametrize("text", ["fast", "0ms", "19 parsecs", ""])
def test_a_bad_expect_is_one_line(text):
    with pytest.raises(BadInputError, match="--expect"):
        memory.parse_expect(text, higher_is_better=False)


def test_costly_variables_set_now_each_with_a_source():
    rows = memory.costly_set_now(
        {
            "CUDA_LAUNCH_BLOCKING": "1",
            "NCCL_P2P_DISABLE": "0",
            "NCCL_DEBUG": "INFO",
            "TORCH_COMPILE_DISABLE": "1",
        }
    )
    assert [r["name"] for r in rows] == ["CUDA_LAUNCH_BLOCKING", "TORCH_COMPILE_DISABLE"]
    for row in memory.costly_table():
        assert row["source"] and row["effect"] and row["costly"]


def test_the_synthetic_baseline_is_now_at_the_old_commit_with_the_measured_result():
    log = [
        {"old": C, "new": D, "time": "2026-11-30T10:15:00Z", "action": "pull: Fast-forward"},
        {"old": B, "new": C, "time": "2026-11-29T09:00:00Z", "action": "commit: mine"},
    ]
    now = _now(log)
    point, _ = memory.code_point(now)
    doc = memory.synthetic_baseline(
        now, {"name": "user.step_ms", "process_medians": [4.0] * 5}, point=point, label="HEAD@{1}"
    )
    rec = memory.main_repo(doc)
    assert rec["head"] == {"sha": C} and rec["reflog"] == log[1:]
    assert memory.main_repo(now)["head"] == {"sha": D}  # the snapshot taken now is not changed
    assert doc["bench"]["results"][0]["name"] == "user.step_ms"


def test_the_residual_within_noise_and_the_unexplained_share():
    base = [4.00, 4.02, 3.98, 4.01, 3.99]
    today = [9.6, 9.7, 9.5, 9.65, 9.55]
    applied = [4.03, 4.00, 4.05, 3.99, 4.02]
    r = residual(base, today, applied, threshold=0.05)
    assert r.status == "within" and r.high < 1.05
    assert (
        abs(r.unexplained.point) < 0.02
        and r.unexplained.low < r.unexplained.point < r.unexplained.high
    )
    still = residual(base, today, [6.0, 6.1, 5.95, 6.05, 6.02], threshold=0.05)
    assert still.status == "beyond" and 0.3 < still.unexplained.point < 0.4


def test_a_remembered_figure_is_a_baseline_of_one():
    status, ratio, lo, hi = versus_baseline([19.0], [29.1, 28.7, 29.4, 29.0, 29.2], threshold=0.05)
    assert status == "beyond" and ratio == pytest.approx(29.1 / 19.0) and lo > 1.5
    assert versus_baseline([19.0], [19.1, 18.9, 19.0, 19.2, 18.95], threshold=0.05)[0] == "within"


def test_a_large_change_with_a_wide_spread_is_decided_with_enough_processes():
    # 1.6x with 17% spread on the slow side and one slow "fast" process (the sides overlap by the separation
    # rule): the CI of the ratio (1.41-1.80) clears (1 + 5%)(1 + 17%) = 1.23, so 8+8 processes decide it
    fast = [3.80, 3.90, 3.94, 3.97, 4.00, 4.02, 4.05, 5.00]
    slow = [5.20, 5.60, 6.00, 6.30, 6.50, 6.90, 7.20, 7.60]
    _, c = compare_values(fast, slow)
    assert c.b.iqr_over_median > 0.15 and c.ci_low > 1.05 * (1 + c.b.iqr_over_median)
    assert c.verdict is Verdict.SLOWER, c.reasons
    _, back = compare_values(slow, fast)
    assert back.verdict is Verdict.FASTER  # going back to the parent: the same rule, the other way
    # with 7+7 the spread itself is too uncertain: the gate holds (and a lucky 6+6 separation stays gated,
    # tests/bench/test_compare_statistics.py)
    _, few = compare_values(fast[:6] + fast[7:], slow[:7])
    assert few.verdict is Verdict.INCONCLUSIVE and any("noisy" in r for r in few.reasons)


def test_the_spread_is_explained_from_the_telemetry_sampled_during_the_step():
    now = json.loads((EXAMPLES / "investigate/h200/env-eager-canary/now.json").read_text())
    bench = dict(now["bench"])
    bench["results"] = [
        {
            "name": "user.step_ms",
            "process_medians": [0.10, 0.13, 0.16, 0.11, 0.15],
            "noise_iqr_over_median": 0.25,
        }
    ]
    note = spread_note(bench, "user.step_ms")
    assert note.startswith(
        "your step's processes spread by 25% (IQR/median): GPU 0's SM clock ranged 1650-1980 MHz"
    )
    assert "busy in only" in note  # 83 of 218 samples: start-up dominates a short process
    assert (
        spread_note(
            bench | {"results": [{"name": "user.step_ms", "noise_iqr_over_median": 0.02}]},
            "user.step_ms",
        )
        == ""
    )


def test_on_a_cpu_run_the_spread_is_explained_from_the_other_processes_cpu_use(tmp_path):
    """No GPU telemetry (a CPU run): the host's CPU reading taken while the step ran says whether other
    processes competed for the CPUs. The per-process values are today's side of the decode step's
    documentation-only pull (examples/investigate/memory.sh) on the 2-core VM while two other agents ran
    their tests beside it."""
    from forensics.bench.document import build, make_result

    result = make_result(
        "user.decode_ms", "user", "ms", [0.35429, 0.45803, 0.35959, 0.36257, 0.76622]
    )
    cpu_run = {"missing": "not_applicable", "detail": "CPU run: no GPU to sample"}

    def note(reading):
        return spread_note(build({}, [result], telemetry=cpu_run, host_cpu=reading), result["name"])

    busy = {"other_cpus": 1.4, "own_cpus": 0.9, "cpus": 2, "wall_s": 9.8, "source": "psutil"}
    assert note(busy) == (
        "your step's processes spread by 27% (IQR/median): other processes kept 1.4 of the 2 CPUs busy on "
        "average while it ran (the step itself 0.9): they compete with the step; quiet the machine, or time "
        "more iterations per process"
    )
    quiet = busy | {"other_cpus": 0.1}
    assert "the rest of the machine was quiet" in note(quiet)
    assert "so the spread is the step's own" in note(quiet)
    assert "no GPU telemetry was read" in note(None)  # no reading: the cause cannot be seen


def test_the_host_cpu_reading_counts_other_processes_not_the_steps(tmp_path):
    """A busy process this one does not wait for during the block counts as another's; a child waited
    for inside the block (as the step's processes are) counts as the step's own."""
    import subprocess
    import sys
    import time

    from forensics.bench.session import host_cpu

    spin = "import time\nt = time.process_time() + {s}\nwhile time.process_time() < t: pass\n"
    other = subprocess.Popen([sys.executable, "-c", spin.format(s=30)])
    try:
        with host_cpu() as cpu:
            time.sleep(1)
            subprocess.run([sys.executable, "-c", spin.format(s=1)], check=True)
    finally:
        other.kill()
        other.wait()
    assert set(cpu) == {"other_cpus", "own_cpus", "cpus", "wall_s", "source"}
    assert cpu["cpus"] >= 1 and cpu["wall_s"] >= 2
    # CPU seconds over the block: the waited-for child's one second of CPU is the step's own, the
    # spinning process that was not waited for is another's (it ran for the whole block)
    assert 0.9 <= cpu["own_cpus"] * cpu["wall_s"] <= 1.5
    assert cpu["other_cpus"] * cpu["wall_s"] >= 0.5


def test_wheel_versions_are_read_from_the_wheel_file_names(tmp_path):
    for name in (
        "flash_attn-2.10.0-cp312-cp312-linux_x86_64.whl",
        "flash_attn-2.7.0-1-cp312-cp312-linux_x86_64.whl",
        "Flash.Attn-2.5.0-py3-none-any.whl",
        "flash_attn_extra-1.0-py3-none-any.whl",
        "notes.txt",
    ):
        (tmp_path / name).write_text("")
    assert memory.wheel_versions(tmp_path, "flash-attn") == ["2.5.0", "2.7.0", "2.10.0"]


def test_since_names_a_commit_or_is_one_line(tmp_path):
    import subprocess

    env = {
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": __import__("os").environ["PATH"],
    }
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True, env=env)
    (tmp_path / "r" / "a.txt").write_text("a\n")
    subprocess.run(["git", "-C", str(tmp_path / "r"), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(tmp_path / "r"), "commit", "-qm", "a"], check=True, env=env)
    assert len(memory.resolve_since("HEAD", tmp_path / "r")) == 40
    with pytest.raises(BadInputError, match=r"^--since v9: no such commit in .*; give a sha"):
        memory.resolve_since("v9", tmp_path / "r")
    with pytest.raises(BadInputError, match="is not in a git repository; give --repo"):
        memory.resolve_since("HEAD", tmp_path)


def test_recent_distributions_newest_first_with_dates_and_not_the_tool_itself(
    tmp_path, monkeypatch
):
    """What pip leaves: a ``.dist-info`` folder per distribution, written at install or upgrade."""
    import os
    import sys

    from forensics.investigate.memory import recent_distributions

    now = 1_900_000_000.0  # 2030-03-17: every distribution really installed here is older than 14 days
    site = tmp_path / "site"
    for name, version, days_ago in (
        ("nvidia-nccl-cu12", "2.27.3", 1.5),
        ("torch", "2.9.1", 0.25),
        ("numpy", "2.1.0", 30),
        ("forensics", "0.1.0", 0.1),
    ):
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        os.utime(info, (now - days_ago * 86400,) * 2)
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    rows = recent_distributions(now=now)
    assert [(r["name"], r["version"], r["installed"]) for r in rows] == [
        ("torch", "2.9.1", "2030-03-17 11:46"),
        ("nvidia-nccl-cu12", "2.27.3", "2030-03-16 05:46"),
    ]
    assert rows[0]["location"] == str(site)


def test_a_share_that_rounds_to_zero_from_below_reads_0_not_minus_0():
    """The H200 'two' run (examples/investigate/h200-memory/two) ended 'unexplained: -0% (-0% to 1%)': the
    residual 0.999x the baseline, a share of -0.4% rounded."""
    from forensics.investigate.model import Share
    from forensics.investigate.run import _pct_range

    assert _pct_range(Share(-0.004, -0.004, 0.012)) == "0% (0% to 1%)"
    assert _pct_range(Share(-0.02, -0.03, 0.004)) == "-2% (-3% to 0%)"
