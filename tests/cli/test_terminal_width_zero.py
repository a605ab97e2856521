"""``COLUMNS=0``: what a shell or container exports when the terminal reports no size. rich took it as
the width and printed nothing at all: ``forensics diff`` wrote its report but showed no verdict, and
``probes`` and ``fleet report`` printed an empty screen. The width is then 80 columns (or the terminal's),
as the snapshot's own table already did."""

from __future__ import annotations

from tests.conftest import EXAMPLES, run_cli

INCIDENT = EXAMPLES / "incidents" / "power-limit-capped"


def test_diff_prints_its_verdict_and_table_at_80_columns(tmp_path):
    r = run_cli(
        "diff",
        str(INCIDENT / "before.json"),
        str(INCIDENT / "after.json"),
        "-o",
        str(tmp_path / "r.html"),
        env={"COLUMNS": "0"},
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("Measured 1.28x slower; most likely cause: gpu.config")
    assert any("gpu.config" in line and "high" in line for line in lines)  # the table's first row
    assert max(len(line) for line in lines[:-1]) <= 80
    assert (
        lines[-1] == f"report: {tmp_path / 'r.html'}"
    )  # the path stays whole, however long: it is copied


def test_probes_lists_the_probes(tmp_path):
    r = run_cli("probes", env={"COLUMNS": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") > 10 and " gpu " in r.stdout and " software " in r.stdout
