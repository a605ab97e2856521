"""Small, safe readers for /proc, /sys and subprocesses, shared by probes.

Readers never raise for an absent or unreadable source: they return a
:func:`forensics.model.missing` value or ``None`` as documented, so a probe's
``collect`` stays a list of one-read-one-parse helpers.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from forensics.model import MissingReason, missing

_DIST_INFO = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._]*?)-(?P<version>[^-]+)\.dist-info$")


def normalise(name: str) -> str:
    """PEP 503 normalised distribution name (lowercase, runs of ``-_.`` as ``-``): the software
    probe's package keys."""
    return re.sub(r"[-_.]+", "-", name).lower()


def name_and_version(dist, normalised: bool = True) -> tuple[str | None, str]:
    """(name, version) of an installed distribution (an ``importlib.metadata.Distribution``).

    Read from the ``<name>-<version>.dist-info`` folder name (the wheel spec's escaped form: the
    version as in METADATA, the name with runs of ``-_.`` as ``_``), which costs no file read;
    other layouts (``.egg-info``) fall back to parsing the METADATA file once (interpreter time
    the other probe threads wait for; docs/benchmarks.md, 'Snapshot critical path').
    The name is PEP 503 normalised
    unless ``normalised=False``: then it is METADATA's ``Name`` as the project spells it
    (``markdown-it-py``, not the folder's ``markdown_it_py``), taken from the file's header lines
    without parsing the rest (the README). A broken distribution gives ``(None, "")``.
    """
    folder = getattr(dist, "_path", None)
    m = _DIST_INFO.match(getattr(folder, "name", "") or "")
    if m:
        name, version = m.group("name"), m.group("version")
        if not normalised:
            name = _metadata_name(dist) or name
    else:
        try:
            md = dist.metadata
            name, version = md["Name"], md["Version"]
        except Exception:  # unreadable or damaged metadata
            return None, ""
    if not name:
        return None, version or ""
    return (normalise(name) if normalised else name), version or ""


def _metadata_name(dist) -> str | None:
    """The ``Name:`` header of ``dist``'s METADATA file (its headers end at the first blank line), or None."""
    try:
        text = dist.read_text("METADATA") or ""
    except Exception:  # unreadable: the folder's spelling is used
        return None
    for line in text.partition("\n\n")[0].splitlines():
        if line[:5].lower() == "name:":
            return line[5:].strip() or None
    return None


def read_text(path: str | Path) -> str | None:
    """Contents of a (small) text file, or ``None`` if absent or unreadable."""
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def read_first_line(path: str | Path):
    """First line of a file, stripped; a missing value (not_found/no_permission) otherwise."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.readline().strip()
    except FileNotFoundError:
        return missing(MissingReason.NOT_FOUND, str(path))
    except PermissionError:
        return missing(MissingReason.NO_PERMISSION, str(path))
    except OSError as exc:
        return missing(MissingReason.ERROR, f"{path}: {exc.strerror}")


@dataclass
class CommandResult:
    """Outcome of :func:`run_command`: stdout text, or a missing value explaining why not."""

    ok: bool
    stdout: str = ""
    failure: dict | None = None
    seconds: float = 0.0


def run_command(
    argv: list[str], timeout_s: float, env: dict[str, str] | None = None
) -> CommandResult:
    """Run a command with a timeout, never raising.

    Returns:
        ``CommandResult(ok=True, stdout=...)`` on exit status 0; otherwise
        ``ok=False`` and ``failure`` a missing value: ``not_found`` (not on
        PATH), ``timed_out`` (killed after ``timeout_s``), or ``error``
        (non-zero exit, with the last stderr line).
    """
    import time

    if shutil.which(argv[0]) is None:
        return CommandResult(
            False, failure=missing(MissingReason.NOT_FOUND, f"{argv[0]} not on PATH")
        )
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            errors="replace",
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return CommandResult(
            False,
            failure=missing(MissingReason.TIMED_OUT, f"{argv[0]} after {timeout_s:g} s"),
            seconds=time.perf_counter() - t0,
        )
    except OSError as exc:
        return CommandResult(
            False, failure=missing(MissingReason.ERROR, f"{argv[0]}: {exc.strerror}")
        )
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or [""])[-1]
        return CommandResult(
            False,
            proc.stdout,
            missing(MissingReason.ERROR, f"{argv[0]} exit {proc.returncode}: {last}"),
            dt,
        )
    return CommandResult(True, proc.stdout, None, dt)
