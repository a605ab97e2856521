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
