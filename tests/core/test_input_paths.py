"""Input paths the system refuses to open: inside a folder the user cannot search, or a name over the
system's limit. Every command that reads a file says ``cannot read (Permission denied)`` or ``file name
too long`` in one line, exit 2, as ``show`` already did (diff, fleet report and ``investigate
--baseline`` said "internal error", exit 4)."""

from __future__ import annotations

import shutil

import pytest

from tests._unprivileged import remove, run_cli_unprivileged, shared_dir
from tests.conftest import H200, ROOT, run_cli

AA_A = ROOT / "examples" / "aa" / "after.json"
TICKET = H200 / "collect_env.txt"
LONG = "n" * 300

# every command that reads a file, with where the refused input goes
READERS = {
    "show": ["show", "{in}"],
    "diff before": ["diff", "{in}", "after.json", "-o", "r.json"],
    "diff after": ["diff", "after.json", "{in}", "-o", "r.json"],
    "import": ["import", "{in}", "-o", "s.json"],
    "bench compare": ["bench", "compare", "{in}", "after.json"],
    "fleet report": ["fleet", "report", "{in}", "-o", "r.json"],
    "fleet report --baseline": [
        "fleet",
        "report",
        "fleet.json",
        "--baseline",
        "{in}",
        "-o",
        "r.json",
    ],
    "investigate --baseline": ["investigate", "--baseline", "{in}", "--plan", "-o", "r.html"],
}


def _one_line_exit_2(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-400:], proc.stderr[-800:])
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("forensics: error:"), proc.stderr
    return lines[0]


@pytest.fixture
def work():
    path = shared_dir()
    shutil.copy(AA_A, path / "after.json")
    shutil.copy(ROOT / "examples" / "fleet" / "h200" / "fleet.json", path / "fleet.json")
    for p in path.iterdir():
        p.chmod(0o644)
    (path / "locked").mkdir()
    shutil.copy(AA_A, path / "locked" / "snap.json")
    shutil.copy(TICKET, path / "locked" / "ticket.txt")
    (path / "locked").chmod(0)
    yield path
    remove(path)


@pytest.mark.parametrize("name", ["snap.json", "ticket.txt"])
@pytest.mark.parametrize("command", list(READERS))
def test_an_input_in_a_folder_the_user_cannot_search_is_cannot_read(work, command, name):
    args = [a.replace("{in}", f"locked/{name}") for a in READERS[command]]
    line = _one_line_exit_2(run_cli_unprivileged(*args, cwd=work, timeout=120))
    assert f"locked/{name}" in line and "Permission denied" in line, line
    assert not (work / "r.json").exists() and not (work / "s.json").exists()


@pytest.mark.parametrize("suffix", [".json", ".txt"])
@pytest.mark.parametrize("command", list(READERS))
def test_an_input_name_over_the_limit_is_one_line_exit_2(work, command, suffix):
    args = [a.replace("{in}", LONG + suffix) for a in READERS[command]]
    line = _one_line_exit_2(run_cli(*args, cwd=work, timeout=120))
    assert "file name too long" in line and "choose a shorter -o" not in line, line


def test_a_fleet_folder_the_user_cannot_list_is_cannot_read(work):
    line = _one_line_exit_2(
        run_cli_unprivileged("fleet", "report", "locked", "-o", "r.json", cwd=work)
    )
    assert "locked" in line and ("Permission denied" in line or "not readable" in line), line


def test_the_net_under_every_command_names_a_refused_path_in_one_line():
    """A check that asks ``Path.is_dir()`` about a path the user gave raises on a refused one; the error
    boundary turns that into the user's path and exit 2 (``path_refused``), not an internal error."""
    import errno

    from forensics.cli.common import path_refused

    line = path_refused(PermissionError(errno.EACCES, "Permission denied", "locked/a.json"))
    assert (
        line.startswith("locked/a.json: cannot use (Permission denied)") and "permissions" in line
    )
    line = path_refused(OSError(errno.ENAMETOOLONG, "File name too long", LONG + ".json"))
    assert "file name too long (305 bytes" in line and len(line) < 300
    assert path_refused(OSError(errno.ENOSPC, "No space left on device")) == ""
    assert path_refused(ValueError("x")) == ""
