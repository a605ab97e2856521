"""The probe runner: concurrency, per-probe timeout, and isolation of failures."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from forensics.errors import ProbeUnavailable
from forensics.model import ProbeStatus
from forensics.probe import Probe
from forensics.runner import run_probes


class Quick(Probe):
    name, description = "quick", "returns at once"

    def collect(self, ctx):
        return {"answer_count": 42}


class Hangs(Probe):
    name, description = "hangs", "never returns (like nvidia-smi on a wedged driver)"

    def __init__(self):
        self.release = threading.Event()

    def collect(self, ctx):
        self.release.wait(60)
        return {}


class Raises(Probe):
    name, description = "raises", "crashes"

    def collect(self, ctx):
        raise RuntimeError("driver said no")


class Partial(Probe):
    name, description = "partial", "one field fails"

    def collect(self, ctx):
        ctx.error("clock_sm_mhz", "NVMLError_Unknown")
        return {"name": "x"}


class NotHere(Probe):
    name, description = "nothere", "does not apply"

    def available(self, ctx):
        return "no NVIDIA driver found"


class RaisesUnavailable(Probe):
    name, description = "unavail", "finds out late that it does not apply"

    def collect(self, ctx):
        raise ProbeUnavailable("not a git repository")


def test_hang_and_crash_do_not_lose_other_probes():
    hang = Hangs()
    t0 = time.perf_counter()
    results = run_probes(
        [Quick(), hang, Raises(), Partial(), NotHere(), RaisesUnavailable()], timeout_s=0.5
    )
    elapsed = time.perf_counter() - t0
    hang.release.set()
    assert list(results) == ["quick", "hangs", "raises", "partial", "nothere", "unavail"]
    assert results["quick"].status is ProbeStatus.OK and results["quick"].data == {
        "answer_count": 42
    }
    assert (
        results["hangs"].status is ProbeStatus.FAILED
        and "timed out after 0.5 s" in results["hangs"].reason
    )
    assert (
        results["raises"].status is ProbeStatus.FAILED
        and "RuntimeError: driver said no" in results["raises"].reason
    )
    assert results["partial"].status is ProbeStatus.PARTIAL
    assert results["partial"].errors == [{"field": "clock_sm_mhz", "error": "NVMLError_Unknown"}]
    assert (
        results["nothere"].status is ProbeStatus.UNAVAILABLE
        and results["nothere"].reason == "no NVIDIA driver found"
    )
    assert results["unavail"].status is ProbeStatus.UNAVAILABLE
    assert elapsed < 5  # the hung probe did not hold the snapshot for its 60 s
    for r in results.values():
        assert r.duration_s >= 0


def test_probes_run_concurrently():
    class Sleeper(Probe):
        description = "sleeps"

        def __init__(self, name):
            self.name = name

        def collect(self, ctx):
            time.sleep(0.3)
            return {}

    t0 = time.perf_counter()
    results = run_probes([Sleeper(f"s{i}") for i in range(5)], timeout_s=5)
    assert all(r.status is ProbeStatus.OK for r in results.values())
    assert time.perf_counter() - t0 < 1.2  # 5 x 0.3 s in sequence would be 1.5 s


def test_probes_that_start_workers_start_first_and_results_keep_their_order(monkeypatch):
    started: list[str] = []
    start = threading.Thread.start
    monkeypatch.setattr(
        threading.Thread, "start", lambda self: started.append(self.name) or start(self)
    )

    class Recorder(Probe):
        description = "returns at once"

        def __init__(self, name, first=False):
            self.name, self.start_first = name, first

        def collect(self, ctx):
            return {}

    probes = [Recorder("host"), Recorder("git"), Recorder("nccl_env", first=True), Recorder("gpu")]
    results = run_probes(probes, timeout_s=5)
    assert [n for n in started if n.startswith("probe-")] == [
        "probe-nccl_env",
        "probe-host",
        "probe-git",
        "probe-gpu",
    ]
    assert list(results) == ["host", "git", "nccl_env", "gpu"]
    assert sys.getswitchinterval() == pytest.approx(
        0.005
    )  # Python's default, restored after the run


def test_overlapping_runs_from_two_threads_give_back_the_interval_from_before_both():
    """A program taking snapshots from two threads: the first run to start ends first. The process-wide
    switch interval must come back as it was before either, not as the second run found it."""
    a_in, a_go, b_in, b_go = (threading.Event() for _ in range(4))

    class Waits(Probe):
        description = "waits for the test"

        def __init__(self, name, entered, go):
            self.name, self.entered, self.go = name, entered, go

        def collect(self, ctx):
            self.entered.set()
            self.go.wait(30)
            return {}

    results = {}
    run_a = threading.Thread(
        target=lambda: results.update(run_probes([Waits("a", a_in, a_go)], timeout_s=60))
    )
    run_b = threading.Thread(
        target=lambda: results.update(run_probes([Waits("b", b_in, b_go)], timeout_s=60))
    )
    before = sys.getswitchinterval()
    run_a.start()
    assert a_in.wait(30)
    run_b.start()
    assert b_in.wait(30)
    a_go.set()
    run_a.join(30)
    b_go.set()
    run_b.join(30)
    assert set(results) == {"a", "b"} and all(r.status is ProbeStatus.OK for r in results.values())
    assert sys.getswitchinterval() == before


def test_probe_may_ask_for_more_time():
    class Window(Probe):
        name, description = "window", "samples for a while"

        def extra_timeout_s(self, options):
            return options.get("sample_s", 0)

        def collect(self, ctx):
            time.sleep(0.4)
            return {"samples": 4}

    results = run_probes([Window()], {"sample_s": 1.0}, timeout_s=0.2)
    assert results["window"].status is ProbeStatus.OK


def test_an_abandoned_probe_thread_cannot_start_children_after_its_groups_are_closed():
    import errno
    import subprocess

    import pytest

    from forensics.procgroup import ChildGroups, probe_children

    groups = ChildGroups()
    with probe_children(groups):
        first = subprocess.Popen(["sleep", "30"])
        assert groups.running() == [first.pid]
        assert groups.close(grace_s=0.2) == 1  # the runner, when the probe's time is up
        first.wait(5)
        with pytest.raises(OSError) as exc:
            subprocess.Popen(["sleep", "30"])  # the thread going on to its next command
    assert exc.value.errno == errno.ECANCELED and "time is up" in str(exc.value)
    assert groups.running() == []
