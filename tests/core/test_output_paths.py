"""Output paths, as a user meets them: a folder they cannot search, a name over the system's limit,
symbolic links, a new file's mode, a standard output that cannot be written.

Every refusal is one ``forensics: error:`` line and exit 2 (never a traceback, never exit 1, which
``--fail-on`` users read as "regression found"), before any work, and nothing is written. The
rules themselves are :mod:`forensics.outpath`'s (docs/snapshot-format.md, "Output files").
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from tests._unprivileged import remove, run_cli_unprivileged, shared_dir
from tests.conftest import H200, ROOT, run_cli

AA_B, AA_A = ROOT / "examples" / "aa" / "before.json", ROOT / "examples" / "aa" / "after.json"
FLEET = ROOT / "examples" / "fleet" / "h200" / "fleet.json"
TICKET = H200 / "collect_env.txt"
LONG = "n" * 300  # one name over NAME_MAX (255 bytes)


def _one_line(proc, code: int = 2) -> str:
    assert proc.returncode == code, (
        proc.returncode,
        (proc.stdout or "")[-400:],
        proc.stderr[-800:],
    )
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("forensics: error:"), proc.stderr
    return lines[0]


@pytest.fixture
def work():
    """A folder any user can write, holding copies of real inputs and ``locked/`` (mode 000)."""
    path = shared_dir()
    for src in (AA_B, AA_A, FLEET, TICKET):
        shutil.copy(src, path / src.name)
        (path / src.name).chmod(0o644)
    (path / "locked").mkdir()
    (path / "locked" / "old.json").write_text("{}")
    (path / "locked").chmod(0)
    yield path
    remove(path)


# every command that takes an output file, with the option that names it
OUTPUT_COMMANDS = {
    "snapshot": ["snapshot", "--probe", "host", "-o", "{out}.json"],
    "diff": ["diff", "before.json", "after.json", "-o", "{out}.html"],
    "bench": ["bench", "--device", "cpu", "-o", "{out}.json"],
    "bisect": ["bisect", "--good", "HEAD~1", "--bad", "HEAD", "--cmd", "true", "-o", "{out}.json"],
    "import": ["import", "collect_env.txt", "-o", "{out}.json"],
    "env": ["env", "-o", "{out}.json"],
    "fleet report": ["fleet", "report", "fleet.json", "-o", "{out}.html"],
    "fleet report --prom": ["fleet", "report", "fleet.json", "--prom", "{out}.prom"],
    "fleet snapshot": ["fleet", "snapshot", "--probe", "host", "-o", "{out}.json"],
    "investigate": ["investigate", "--baseline", "before.json", "--plan", "-o", "{out}.html"],
}


def _args(command: str, out: str) -> list[str]:
    return [a.replace("{out}", out) for a in OUTPUT_COMMANDS[command]]


@pytest.mark.parametrize("command", list(OUTPUT_COMMANDS))
def test_an_output_in_a_folder_the_user_cannot_search_is_one_line_exit_2(work, command):
    line = _one_line(run_cli_unprivileged(*_args(command, "locked/out"), cwd=work, timeout=120))
    assert "locked/out" in line and "Permission denied" in line, line
    os.chmod(work / "locked", 0o700)
    assert sorted(p.name for p in (work / "locked").iterdir()) == [
        "old.json"
    ]  # nothing written, no temp file


@pytest.mark.parametrize("command", list(OUTPUT_COMMANDS))
def test_an_output_name_over_the_limit_is_one_line_exit_2(work, command):
    line = _one_line(run_cli(*_args(command, LONG), cwd=work, timeout=120))
    assert "file name too long (305 bytes" in line, line
    assert len(line) < 400, line  # the name is shortened in the line, not printed whole


def test_an_output_below_an_unsearchable_folder_is_one_line_exit_2(work):
    """``locked/sub/x.json``: even looking for the folder is refused (stat raises EACCES)."""
    line = _one_line(
        run_cli_unprivileged("import", "collect_env.txt", "-o", "locked/sub/x.json", cwd=work)
    )
    assert "locked/sub/x.json" in line and "Permission denied" in line, line


# -- symbolic links are written through, dangling or not --------------------------------------------------------


def test_an_output_through_a_link_replaces_the_target_and_keeps_the_link(tmp_path):
    (tmp_path / "data").mkdir()
    target = tmp_path / "data" / "report.md"
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "report.md"
    link.symlink_to("data/report.md")
    proc = run_cli("diff", str(AA_B), str(AA_A), "-o", str(link), "-q", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and os.readlink(link) == "data/report.md"
    assert target.read_text().startswith("## forensics diff")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the target's mode is kept
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [
        "report.md"
    ]  # no temp file left


def test_an_output_through_a_dangling_link_creates_the_target(tmp_path):
    (tmp_path / "data").mkdir()
    link = tmp_path / "snap.json"
    link.symlink_to("data/snap.json")
    proc = run_cli("import", str(TICKET), "-o", str(link), "-q", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and os.readlink(link) == "data/snap.json"
    assert (
        json.loads((tmp_path / "data" / "snap.json").read_text())["schema"]
        == "forensics.snapshot/1"
    )


def test_a_link_whose_target_folder_is_missing_names_the_link_and_the_folder(tmp_path):
    link = tmp_path / "snap.json"
    link.symlink_to("nowhere/snap.json")
    line = _one_line(run_cli("import", str(TICKET), "-o", str(link), timeout=120))
    assert (
        "snap.json is a link to" in line
        and "folder" in line
        and "nowhere" in line
        and "does not exist" in line
    )
    assert link.is_symlink() and not (tmp_path / "nowhere").exists()


def test_a_loop_of_links_is_one_line_exit_2(tmp_path):
    (tmp_path / "a.json").symlink_to("b.json")
    (tmp_path / "b.json").symlink_to("a.json")
    line = _one_line(run_cli("import", str(TICKET), "-o", str(tmp_path / "a.json"), timeout=120))
    assert "symbolic links" in line, line


# -- one atomic writer: a new fleet file is readable by the others of a shared folder -----------------------------


def test_fleet_snapshot_writes_a_new_file_with_the_umask_mode_and_keeps_an_existing_mode(tmp_path):
    code = (
        "import os, sys; os.umask(0o022); sys.argv[1:] = ['fleet', 'snapshot', '--probe', 'host', '-o', %r]; "
        "from forensics.cli import run; run()"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_", "OMPI_", "MASTER_"))
    }
    new = tmp_path / "fleet.json"
    r = subprocess.run(
        [sys.executable, "-c", code % str(new)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(new.stat().st_mode) == 0o644  # was 0600 (mkstemp without a chmod)
    new.chmod(0o640)
    r = subprocess.run(
        [sys.executable, "-c", code % str(new)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(new.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet.json"]


# -- a standard output that cannot be written is the user's I/O error, exit 2 -----------------------------------


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize(
    "args",
    [
        ["show", str(AA_A)],
        ["show", str(TICKET)],
        ["diff", str(AA_B), str(AA_A), "-o", "-"],
        ["fleet", "report", str(FLEET), "-o", "-"],
        ["probes"],
        ["--help"],
    ],
)
def test_standard_output_on_a_full_disk_is_one_line_exit_2(args):
    env = dict(os.environ)
    env.pop("FORENSICS_DEBUG", None)
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "forensics", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=120,
        )
    line = _one_line(proc)
    assert "cannot write to standard output (No space left on device)" in line, line
