"""The command line as a user meets it: help, versions, one-line errors, safe default names."""

from __future__ import annotations

import json

import pytest

from forensics import __version__
from forensics.cli.snapshot import default_output
from tests.conftest import run_cli


def test_version_and_help_of_every_command():
    assert run_cli("--version").stdout.strip() == f"forensics, version {__version__}"
    top = run_cli("--help")
    assert top.returncode == 0 and "Exit codes" in top.stdout
    for line in top.stdout.split("Commands:")[1].strip().splitlines():
        cmd = line.split()[0]
        sub = run_cli(cmd, "--help")
        assert sub.returncode == 0 and "Usage: forensics" in sub.stdout, cmd


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ["snapshot", "--timeout", "inf"],
            "Invalid value for '--timeout': 'inf' must be a finite number > 0",
        ),
        (
            ["snapshot", "--timeout", "nan"],
            "Invalid value for '--timeout': 'nan' must be a finite number > 0",
        ),
        (["snapshot", "--timeout", "abc"], "Invalid value for '--timeout': 'abc' is not a number"),
        (["snapshot", "--timeout", "5000"], "--timeout must be between 0 and 3600 seconds"),
        (["snapshot", "-o", "out.txt"], "give a file name ending in .json, .yaml or .yml"),
        (["snapshot", "-o", ".json"], "give a file name ending in .json, .yaml or .yml"),
        (
            [
                "snapshot",
                "--skip",
                "host",
                "--skip",
                "git",
                "--skip",
                "software",
                "--skip",
                "gpu",
                "--skip",
                "libs",
                "--skip",
                "nccl_env",
            ],
            None,
        ),
        (["show"], "Missing argument 'FILE'"),
        (["snapshot", "--no-such-option"], "No such option"),
    ],
)
def test_usage_errors_are_one_line_exit_2(tmp_path, args, expected):
    proc = run_cli(*args, cwd=tmp_path)
    if expected is None:  # skipping every installed probe (unknown names are rejected first)
        assert proc.returncode == 2
        return
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("forensics: error:") and expected in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_default_name_never_overwrites(tmp_path):
    first = default_output("before", tmp_path)
    assert first.name == "forensics-before.json"
    first.write_text("{}")
    assert default_output("before", tmp_path).name == "forensics-before-2.json"
    assert default_output("a/b c", tmp_path).name == "forensics-a-b-c.json"
    assert default_output("ünï 日本", tmp_path).name == "forensics-ünï-日本.json"
    assert len(default_output("x" * 300, tmp_path).name) < 100


def test_snapshot_writes_default_name_and_show_strips_control_characters(tmp_path):
    proc = run_cli(
        "snapshot",
        "--probe",
        "host",
        "--label",
        "\x1b[31mRED\x1b[0m",
        cwd=tmp_path,
        env={"COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr
    [out] = list(tmp_path.glob("forensics-*.json"))
    doc = json.loads(out.read_text())
    assert doc["label"] == "\x1b[31mRED\x1b[0m" and doc["probes"]["host"]["status"] == "ok"
    shown = run_cli("show", str(out), env={"COLUMNS": "200"})
    assert "\x1b[31m" not in shown.stdout and "?[31mRED?[0m" in shown.stdout
