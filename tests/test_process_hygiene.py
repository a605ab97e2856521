"""Child processes never outlive forensics, and one broken plugin never hides a good probe."""

from __future__ import annotations

import time

import pytest

from forensics.errors import BadInputError
from forensics.procgroup import run_group


def test_run_group_stops_members_that_ignore_sigterm():
    t0 = time.perf_counter()
    code, _, _ = run_group(["sh", "-c", "(trap '' TERM; exec sleep 30) & sleep 30"], 1.0)
    assert code is None
    assert time.perf_counter() - t0 < 10  # SIGKILL after the grace, not the 30 s of the stubborn child


def test_canary_rank_that_cannot_start_is_bad_input():
    from forensics.bench.config import CanaryConfig
    from forensics.bench.harness import launch

    with pytest.raises(BadInputError, match="cannot start a canary rank with 'no-such-launcher-x'"):
        launch(CanaryConfig.defaults("cpu", 2), launcher=["no-such-launcher-x"], timeout_s=10)


def test_duplicate_probe_name_keeps_the_loaded_probe(monkeypatch):
    import forensics.collect as collect
    from forensics.registry import LoadFailure, load_probes

    loaded, _ = load_probes()
    host = [lp for lp in loaded if lp.name == "host"]
    monkeypatch.setattr(collect, "load_probes",
                        lambda: (host, [LoadFailure("host", "other-dist 1.0", "duplicate probe name")]))
    doc = collect.take_snapshot(only=["host"])
    assert doc["probes"]["host"]["status"] == "ok" and doc["probes"]["host"]["data"]


def _ranks_marked(mark: str) -> list:
    import psutil

    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("FORENSICS_TEST_MARK") == mark:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


@pytest.mark.parametrize("sig, code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_to_bench_stops_the_canary_ranks(tmp_path, sig, code):
    """Seen on the 2 x H200 machine: after SIGTERM to `forensics bench`, both canary ranks were still running."""
    import os
    import signal
    import subprocess
    import sys
    import uuid

    pytest.importorskip("torch")
    mark = uuid.uuid4().hex
    out = tmp_path / "b.json"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "forensics", "bench", "--device", "cpu", "--processes", "5", "-q",
                             "--env", f"FORENSICS_TEST_MARK={mark}", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp)})
    deadline = time.monotonic() + 60
    while len(_ranks_marked(mark)) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, "the canary ranks never started"
        time.sleep(0.05)
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert err.strip().splitlines()[-1].startswith("forensics: error:") and "Traceback" not in err
    assert _ranks_marked(mark) == []
    assert not out.exists()  # no half-written bench file
    assert list(tmp.iterdir()) == []  # the ranks' temporary folder is gone too
