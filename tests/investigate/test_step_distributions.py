"""The distributions installed or upgraded recently, listed by forensics investigate without a baseline
snapshot, are those of the Python the step runs (a venv's python in ``--cmd``), not of the Python running
forensics; a step that runs no Python falls back to forensics' own, and the note says so.

The venv is made here without pip (no network); its one distribution is a fake ``.dist-info`` folder
written as pip writes it, dated two days ago.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time

from tests._stepkit import run_investigate

STEP = """import json
import fakestep_pkg
for _ in range(3):
    print(json.dumps({"metric": "step_ms", "value": 6.0}))
"""


def _venv_with_a_recent_distribution(tmp_path):
    """(the venv's python, the install time its dist-info folder says, UTC 'YYYY-MM-DD HH:MM')."""
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    pkg = os.path.join(site, "fakestep_pkg")
    os.makedirs(pkg)
    open(os.path.join(pkg, "__init__.py"), "w").close()
    info = os.path.join(site, "fakestep_pkg-1.2.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: fakestep-pkg\nVersion: 1.2\n")
    with open(os.path.join(info, "top_level.txt"), "w") as f:
        f.write("fakestep_pkg\n")
    stamp = time.time() - 2 * 86400
    os.utime(info, (stamp, stamp))
    return python, dt.datetime.fromtimestamp(stamp, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def _recent_note(stdout: str) -> str:
    notes = [ln for ln in stdout.splitlines() if "installed or upgraded in the last 14 days" in ln]
    assert len(notes) == 1, stdout
    return notes[0]


def test_a_step_run_by_a_venvs_python_lists_that_venvs_recent_distributions(tmp_path):
    python, installed = _venv_with_a_recent_distribution(tmp_path)
    (tmp_path / "step.py").write_text(STEP)
    r = run_investigate(
        tmp_path, "--no-canary", "-q", "--cmd", f"{python} step.py", "--expect", "4ms"
    )
    assert r.returncode in (1, 3), r.stdout + r.stderr
    note = _recent_note(r.stdout)
    assert note == (
        "note: distributions installed or upgraded in the last 14 days in the step's Python (the folders on "
        "its sys.path; dist-info times; their old versions are not known without a baseline snapshot): "
        f"fakestep-pkg 1.2 ({installed}, imported by the step)"
    ), note


def test_a_step_that_runs_no_python_falls_back_to_forensics_own_python(tmp_path):
    own = tmp_path / "own-site"  # on forensics' own sys.path only (the step runs no Python)
    info = own / "ownside_pkg-3.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ownside-pkg\nVersion: 3.0\n")
    stamp = time.time() - 60  # the newest: it leads the list of forensics' own Python
    os.utime(info, (stamp, stamp))
    installed = dt.datetime.fromtimestamp(stamp, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    step = 'for i in 1 2 3; do echo \'{"metric": "step_ms", "value": 6.0}\'; done'
    r = run_investigate(
        tmp_path,
        "--no-canary",
        "-q",
        "--cmd",
        step,
        "--expect",
        "4ms",
        "-o",
        "r.json",
        PYTHONPATH=str(own),
    )
    assert r.returncode in (1, 3), r.stdout + r.stderr
    note = _recent_note(r.stdout)
    assert note.startswith(
        "note: distributions installed or upgraded in the last 14 days in the Python running forensics "
        f"({sys.executable}; the step recorded no Python folders: it ran no Python, or one started "
        "without its site module; dist-info times;"
    ), note
    assert f"ownside-pkg 3.0 ({installed})" in note
    assert note[len("note: ") :] in json.loads((tmp_path / "r.json").read_text())["notes"]
