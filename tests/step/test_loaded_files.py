"""The files a step's processes loaded (forensics/step/loaded_files.py and its sitecustomize hook)."""

from __future__ import annotations

import json
import shlex
import sys

from forensics.bench import document
from tests.conftest import run_cli

STEP = (
    "import json, time\n"
    "t = time.perf_counter()\n"
    "for v in (1.0, 1.1, 1.0, 1.05):\n"
    "    print(json.dumps({'metric': 'step_ms', 'value': v}))\n"
)


def test_the_script_the_step_runs_is_recorded_as_loaded(tmp_path):
    """`python step.py`: the interpreter deletes __main__.__file__ before atexit, so step.py itself was
    never recorded, and diff said of a commit changing it 'not a suspect: the step never loaded step.py'."""
    (tmp_path / "step.py").write_text(STEP)
    (tmp_path / "other.py").write_text("X = 1\n")
    out = tmp_path / "b.json"
    r = run_cli(
        "bench",
        "-q",
        "--processes",
        "3",
        "--cmd",
        f"{shlex.quote(sys.executable)} step.py",
        "-o",
        str(out),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    (res,) = document.load(out)["results"]
    assert str((tmp_path / "step.py").resolve()) in res["loaded_files"]
    assert str((tmp_path / "other.py").resolve()) not in res["loaded_files"]
    assert json.dumps(res["loaded_files"]).count("step.py") == 1
