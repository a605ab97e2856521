"""``forensics snapshot --timeout S``, when given, bounds every probe, a launcher that hangs included.

Left out, probes that start slow work (``--launcher``, ``--nccl-init``) get time on top of the
default 10 s, since a real torchrun needs it; given, the user's number is the limit.
"""

from __future__ import annotations

import json
import time
import uuid

from forensics.model import ProbeStatus
from forensics.probe import Probe
from forensics.runner import run_probes
from tests.conftest import processes_with_env, run_cli

HANGING_LAUNCHER = "#!/bin/sh\nsleep 300\n"  # a launcher that never starts the ranks


def test_a_hanging_launcher_is_stopped_within_the_given_timeout(tmp_path):
    launcher = tmp_path / "hang.sh"
    launcher.write_text(HANGING_LAUNCHER)
    launcher.chmod(0o755)
    mark = uuid.uuid4().hex
    # with the launcher's own 60 s on top of --timeout 4 it took 63 s: the limit fails that, not a slow machine
    r = run_cli(
        "snapshot",
        "--probe",
        "nccl_env",
        "--probe",
        "host",
        "--launcher",
        str(launcher),
        "--timeout",
        "4",
        "-o",
        "s.json",
        cwd=tmp_path,
        env={"FORENSICS_TEST_MARK": mark},
        timeout=45,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    section = json.loads((tmp_path / "s.json").read_text())["probes"]["nccl_env"]
    if section["status"] == "failed":  # the runner's limit came first (a loaded machine)
        assert section["reason"].startswith("timed out after 4 s")
    else:  # the probe stopped the launcher itself, a little before
        assert any(
            e["field"] == "launcher" and "timed out" in e["error"] for e in section["errors"]
        ), section
    assert section["duration_s"] < 20  # not the 60 s a launcher gets when --timeout is left out
    assert (
        processes_with_env("FORENSICS_TEST_MARK", mark, "sleep") == []
    )  # the launcher's child is gone too


def test_sample_window_longer_than_the_given_timeout_is_refused_before_any_probe(tmp_path):
    r = run_cli("snapshot", "--sample", "30", "--timeout", "10", "-o", "s.json", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr == (
        "forensics: error: --sample 30 does not fit in --timeout 10, which bounds each probe when "
        "given: give --timeout 32 or more, or leave it out\n"
    )
    assert not (tmp_path / "s.json").exists()


def test_extra_time_asked_by_a_probe_is_given_unless_the_timeout_bounds_it():
    class Launches(Probe):
        name, description = "launches", "runs a launcher that takes a while"

        def extra_timeout_s(self, options):
            return 30.0

        def collect(self, ctx):
            time.sleep(0.5)
            return {"ranks_count": 2}

    assert run_probes([Launches()], {}, timeout_s=0.1)["launches"].status is ProbeStatus.OK
    bounded = run_probes([Launches()], {}, timeout_s=0.1, extra_time=False)["launches"]
    assert bounded.status is ProbeStatus.FAILED and bounded.reason.startswith(
        "timed out after 0.1 s"
    )
