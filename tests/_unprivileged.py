"""Run forensics as a user file permissions apply to, for tests of folders the user cannot search.

As root (the CI runs the tests as root) a mode-000 folder is no obstacle: root bypasses file
permissions (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH). These helpers find a way to run the CLI
without that power, trying in order:

1. a normal user: ``setpriv --reuid=65534 --regid=65534 --clear-groups`` (or ``runuser -u nobody``);
2. root without the two capabilities that bypass permissions (``setpriv --inh-caps=-... --bounding-set=-...``):
   used when nobody cannot run this Python (an interpreter under ``/root``, mode 0700).

Each candidate is tried for real: it must import forensics and click, and be refused a mode-000
folder. When none is, the tests that need one skip, saying why. Already a normal user: run as is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_CANDIDATES = (
    ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"],
    ["runuser", "-u", "nobody", "--"],
    [
        "setpriv",
        "--inh-caps=-dac_override,-dac_read_search",
        "--bounding-set=-dac_override,-dac_read_search",
    ],
)
_PROBE = (
    "import os, sys, click, forensics.cli\n"
    "try:\n    os.listdir(sys.argv[1])\nexcept PermissionError:\n    print('refused')\n"
)
_found: list | None = None


def shared_dir() -> Path:
    """A new folder under the system temp folder that any user can enter and write (mode 0o777)."""
    path = Path(tempfile.mkdtemp(prefix="forensics-perm-"))
    path.chmod(0o777)
    return path


def remove(path: Path) -> None:
    """Remove ``path`` and everything in it, mode-000 folders included."""
    for folder, dirs, _ in os.walk(path):
        for d in dirs:
            try:
                os.chmod(os.path.join(folder, d), 0o777)
            except OSError:
                pass
    shutil.rmtree(path, ignore_errors=True)


def prefix() -> list[str] | None:
    """The argv prefix that runs a command without the power to bypass file permissions; None if there is none."""
    global _found
    if _found is not None:
        return _found[0]
    if os.geteuid() != 0:
        _found = [[]]
        return []
    work = shared_dir()
    try:
        locked = work / "locked"
        locked.mkdir()
        locked.chmod(0)
        env = _env()
        for cand in _CANDIDATES:
            if shutil.which(cand[0]) is None:
                continue
            try:
                proc = subprocess.run(
                    [*cand, sys.executable, "-c", _PROBE, str(locked)],
                    cwd=work,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
            except (OSError, subprocess.TimeoutExpired):
                continue
            if proc.returncode == 0 and proc.stdout.strip() == "refused":
                _found = [cand]
                return cand
    finally:
        remove(work)
    _found = [None]
    return None


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("FORENSICS_DEBUG", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_cli_unprivileged(
    *args: str, cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess:
    """``python -m forensics ARGS`` in ``cwd`` as a user file permissions apply to; skips the test if none."""
    pre = prefix()
    if pre is None:
        pytest.skip(
            "no way to run without root's permission bypass here (setpriv/runuser missing or refused)"
        )
    return subprocess.run(
        [*pre, sys.executable, "-m", "forensics", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
