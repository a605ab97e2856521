"""A forensics document given where a snapshot is expected is named with the command that reads it, and
``investigate --baseline`` reads what ``diff`` reads (a snapshot, or a text pasted from a ticket)."""

from __future__ import annotations

import pytest

from tests.conftest import EXAMPLES, H200, run_cli

SNAPSHOT = EXAMPLES / "aa" / "after.json"


FLEET, BENCH, REPORT = (
    EXAMPLES / "fleet" / "h200" / "fleet.json",
    EXAMPLES / "bench-cli" / "h200" / "step-a.json",
    EXAMPLES / "aa" / "report.json",
)


@pytest.mark.parametrize(
    "command, path, words",
    [
        ("show", FLEET, "a fleet file; read it with 'forensics fleet report"),
        ("show", BENCH, "a bench file; compare two with 'forensics bench compare A B'"),
        ("show", REPORT, "a diff report"),
        (
            "diff",
            BENCH,
            "a bench file; compare two with 'forensics bench compare A B'",
        ),  # diff reads fleet files itself
        ("diff", REPORT, "a diff report"),
    ],
    ids=[
        "show fleet file",
        "show bench file",
        "show diff report",
        "diff bench file",
        "diff diff report",
    ],
)
def test_another_forensics_document_names_the_command_that_reads_it(tmp_path, command, path, words):
    args = (
        ["show", str(path)]
        if command == "show"
        else ["diff", str(path), str(SNAPSHOT), "-o", str(tmp_path / "r.md")]
    )
    proc = run_cli(*args, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "wrong kind of file" in lines[0] and words in lines[0], proc.stderr
    assert str(path) in lines[0]
    assert not (tmp_path / "r.md").exists()


def test_investigate_reads_a_ticket_text_as_baseline_as_diff_does(tmp_path):
    """``--baseline ticket.txt`` (a collect_env text pasted in a ticket): a plan against it, not 'damaged'."""
    ticket = H200 / "collect_env.txt"
    assert (
        run_cli(
            "diff", str(ticket), str(SNAPSHOT), "-o", str(tmp_path / "d.json"), timeout=120
        ).returncode
        == 0
    )
    proc = run_cli(
        "investigate",
        "--baseline",
        str(ticket),
        "--plan",
        "-o",
        str(tmp_path / "plan.json"),
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert "damaged" not in proc.stderr and "invalid JSON" not in proc.stderr
    assert (tmp_path / "plan.json").exists()


@pytest.mark.parametrize(
    "path, words",
    [
        (SNAPSHOT, "a snapshot; compare two snapshots with 'forensics diff BEFORE AFTER'"),
        (FLEET, "a fleet file; read it with 'forensics fleet report"),
        (REPORT, "a diff report"),
    ],
    ids=["snapshot", "fleet file", "diff report"],
)
def test_bench_compare_names_the_command_that_reads_another_document(path, words):
    """bench compare of a snapshot said only "schema is 'forensics.snapshot/1', expected forensics.bench/1;
    wrong kind of file", with no word of what reads it."""
    proc = run_cli("bench", "compare", str(BENCH), str(path), timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{path}: schema is " in lines[0] and words in lines[0], proc.stderr
    assert "wrong kind of file, not a bench file" in lines[0]
