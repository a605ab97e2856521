"""Which files of the user's code a step's Python processes loaded (issue 13: relevance of commits).

:func:`recording_env` returns the step's environment with the recording hook
(``forensics/step/loaded/sitecustomize.py``) first on ``PYTHONPATH`` and
``FORENSICS_LOADED_DIR`` naming a fresh temporary folder; every Python process of the
step writes the source files it loaded there when it exits, the installed packages it
imported (top-level import names) and the folders on its ``sys.path`` (where its distributions
live). :func:`collect` (files) and :func:`collect_all` (files, packages and folders) read and remove
the folder. The list excludes the standard library and installed packages
(files under the interpreter's prefixes), so it holds the user's repositories' files
(and editable installs). A process killed by a signal writes nothing: the list is then
what the other processes wrote, and ``loaded_files`` is what was recorded, not a proof
that a file was never loaded.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

HOOK_DIR = Path(__file__).resolve().parent / "loaded"
ENV_VAR = "FORENSICS_LOADED_DIR"
MAX_FILES = 20000
"""At most this many paths are kept (sorted) per result."""


def recording_env(env: dict[str, str]) -> tuple[dict[str, str], str]:
    """``env`` plus the recording hook; returns (new environment, the temporary folder to :func:`collect`)."""
    out = dict(env)
    folder = tempfile.mkdtemp(prefix="forensics-loaded-")
    out[ENV_VAR] = folder
    out["PYTHONPATH"] = os.pathsep.join(
        [str(HOOK_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    return out, folder


def collect(folder: str) -> list[str]:
    """The union of the files every process wrote into ``folder`` (sorted); removes ``folder``."""
    return collect_all(folder)[0]


def collect_all(folder: str) -> tuple[list[str], list[str], list[str]]:
    """(the union of the source files, the union of the installed packages' top-level import names, the
    union of the ``sys.path`` folders) every process wrote into ``folder`` (``<pid>.txt``, ``<pid>.pkgs``,
    ``<pid>.path``); files and packages sorted, folders in each process's ``sys.path`` order (the
    processes by name); removes ``folder``."""
    found: dict[str, dict[str, None]] = {"txt": {}, "pkgs": {}, "path": {}}
    try:
        for kind, names in found.items():
            for entry in sorted(Path(folder).glob(f"*.{kind}")):
                try:
                    lines = entry.read_text(encoding="utf-8").splitlines()
                except (OSError, UnicodeDecodeError):
                    continue
                names.update(dict.fromkeys(ln.strip() for ln in lines if ln.strip()))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return (
        sorted(found["txt"])[:MAX_FILES],
        sorted(found["pkgs"])[:MAX_FILES],
        list(found["path"])[:MAX_FILES],
    )
