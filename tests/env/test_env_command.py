"""``forensics env`` and ``forensics snapshot --probe nccl_env`` as a user runs them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from forensics.cli import main


def forensics_cmd():
    script = Path(sys.executable).parent / "forensics"
    return [str(script)] if script.exists() else [sys.executable, "-m", "forensics.cli"]


def test_env_command_table_and_json(tmp_path):
    # A fresh process, as a user runs it: a forkserver started earlier in this test process
    # would (correctly) keep the environment it was started with.
    out = tmp_path / "env.json"
    res = subprocess.run(
        forensics_cmd() + ["env", "-o", str(out)],
        capture_output=True,
        text=True,
        env=dict(os.environ, NCCL_ALGO="Ring", COLUMNS="200"),
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "launching process" in res.stdout and "NCCL_ALGO" in res.stdout
    assert "nccl.env-propagation ruled-out" in res.stdout
    doc = json.loads(out.read_text())
    assert doc["schema"] == "forensics.env/1"
    assert doc["data"]["start_methods"]["subprocess"]["env"]["NCCL_ALGO"] == "Ring"
    assert doc["findings"][0]["hypothesis"] == "nccl.env-propagation"


def test_env_command_bad_launcher_is_one_line_exit_2():
    res = CliRunner().invoke(main, ["env", "--launcher", "no-such-launcher-xyz --n 2"])
    assert res.exit_code == 2
    assert (
        res.output.strip()
        == "forensics: error: --launcher: 'no-such-launcher-xyz' not found on PATH (or not executable)"
    )
    res = CliRunner().invoke(main, ["env", "--launcher", "'unbalanced"])
    assert res.exit_code == 2 and "quote it as one shell word" in res.output


@pytest.mark.slow
def test_env_command_launcher_shows_each_rank(tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    wrapper = tmp_path / "drop.sh"
    wrapper.write_text('#!/bin/sh\nunset NCCL_ALGO\nexec "$@"\n')
    wrapper.chmod(0o755)
    res = CliRunner().invoke(main, ["env", "--launcher", str(wrapper)])
    assert res.exit_code == 0, res.output
    assert "launcher rank 0" in res.output
    assert "nccl.env-propagation implicated (high): NCCL_ALGO differs" in " ".join(
        res.output.split()
    )


def test_snapshot_with_the_probe(tmp_path):
    out = tmp_path / "snap.json"
    env = dict(os.environ, NCCL_ALGO="Ring", COLUMNS="200")
    proc = subprocess.run(
        forensics_cmd() + ["snapshot", "--probe", "nccl_env", "-o", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "workers agree (spawn, forkserver, subprocess)" in proc.stdout
    sec = json.loads(out.read_text())["probes"]["nccl_env"]
    assert sec["status"] == "ok", sec
    assert set(sec["data"]) == {
        "select",
        "parent",
        "config_files",
        "start_methods",
        "launcher",
        "nccl_init",
        "network",
    }


@pytest.mark.parametrize("value", ["", " ", "NCCL_ALGO=Tree", "MY APP"])
def test_env_select_that_names_no_variable_is_one_line_exit_2(value):
    """--select '' was taken (no variable named, nothing said); a NAME=VALUE or a name with a space can name
    no variable either."""
    r = CliRunner().invoke(main, ["env", "--select", value])
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1
    assert f"--select {value!r}: give a variable name or a prefix" in r.output
