"""Helpers for the investigate tests: the environment of a synthetic step, a real baseline snapshot of it,
an offline wheel of a package it imports, and a hash of a folder (to show nothing in it was written).

The steps themselves stay in the test files (each says what its step depends on); git goes through
``tests.conftest.git`` / ``commit`` / ``make_repo``."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import GIT_ENV

BASELINE = r"""
import sys
from forensics import snapshot as snap
from forensics.collect import take_snapshot
from forensics.investigate.measure import Subject, measure_now
step = Subject("cmd", sys.argv[2])
doc = take_snapshot(label="baseline", options={"repo": "."},
                    bench=lambda: measure_now(step, canary=False, canary_options={}, processes=int(sys.argv[3]),
                                              budget_s=60)[0])
snap.save(doc, sys.argv[1])
"""


SEEDED_RNG = (
    "import fcntl, os, random\n"
    "_seq = os.environ.get('STEP_COUNTER')\n"
    "if _seq:\n"
    "    with open(_seq, 'a+') as _f:\n"
    "        fcntl.flock(_f, fcntl.LOCK_EX)\n"
    "        _f.seek(0)\n"
    "        _k = int(_f.read() or 0)\n"
    "        _f.seek(0)\n"
    "        _f.truncate()\n"
    "        _f.write(str(_k + 1))\n"
    "    rnd = random.Random(_k)\n"
    "else:\n"
    "    rnd = random.Random()\n"
)
"""Step-script lines that make ``rnd``: a ``random.Random`` seeded with this process's rank in the test (the
counter file ``STEP_COUNTER`` names, which :func:`tests.conftest.step_counter` gives every test), so a test's
noisy step draws the same noise in every run: its outcome is the same each time, not a chance of one in a
few hundred (a 5-process baseline with one process 5% low left a residual "not decided" in CI)."""


def busy_step(cost: str, factor: str, also: str = "", spin: bool = False) -> str:
    """The text of a step script: 4 timings of ``cost * factor`` ms, with 1% noise per process and 2% per
    timing (drawn from :data:`SEEDED_RNG`), each printed as ``{"metric": "step_ms", "value": ...}``.
    ``cost`` and ``factor`` are Python expressions (``os`` is imported), ``also`` a line run first (a variable
    read and ignored, say).

    The values are printed as drawn: the tool reads what the step prints, and a step that waited them out
    cost the suite a minute of CPU. ``spin`` busy-waits each one on CPU time first and prints the CPU time it
    took (a test that must catch a step process running, to interrupt it)."""
    head = (
        "import json, os, random, time\n"
        f"cost = ({cost})\nfactor = ({factor})\n{also}\n"
        f"{SEEDED_RNG}"
        "proc = 1 + rnd.gauss(0, 0.01)\n"
        "for _ in range(4):\n"
        "    ms = cost * factor * proc * (1 + rnd.gauss(0, 0.02))\n"
    )
    if not spin:
        return head + '    print(json.dumps({"metric": "step_ms", "value": ms}))\n'
    return head + (
        "    t0 = time.process_time()\n"
        "    while (time.process_time() - t0) * 1e3 < ms:\n"
        "        pass\n"
        '    print(json.dumps({"metric": "step_ms", "value": (time.process_time() - t0) * 1e3}))\n'
    )


def step_env(**extra: str) -> dict[str, str]:
    """This environment without ``FORENSICS_DEBUG`` and without any ``CUDA_``/``NCCL_``/``TORCH``/``PYTORCH_``
    variable (the tests set the ones their step reads), with :data:`tests.conftest.GIT_ENV`, then ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "FORENSICS_DEBUG" and not k.startswith(("CUDA_", "NCCL_", "TORCH", "PYTORCH_"))
    }
    env.update(GIT_ENV)
    env.update(extra)
    return env


def run_investigate(
    cwd: Path, *args: str, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess:
    """``python -m forensics investigate ARGS`` in ``cwd`` as a user runs it, in :func:`step_env` with
    ``env``; output captured."""
    return subprocess.run(
        [sys.executable, "-m", "forensics", "investigate", *args],
        cwd=cwd,
        env=step_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def take_baseline(path: Path, cwd: Path, cmd: str, processes: int = 5, **env: str) -> Path:
    """A real snapshot at ``path`` (probes, and ``cmd`` measured in ``processes`` fresh processes in ``cwd``,
    no canary), taken in :func:`step_env` with ``env``; returns ``path``."""
    subprocess.run(
        [sys.executable, "-c", BASELINE, str(path), cmd, str(processes)],
        cwd=cwd,
        env=step_env(**env),
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return path


def wheel(folder: Path, version: str, cost: float, name: str = "fakeslow") -> Path:
    """A minimal pure-Python wheel of ``name`` in ``folder`` whose module holds ``COST = cost`` (built
    offline: no pip, no network)."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"COST = {cost}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{f},,\n" for f in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as z:
        for f, text in files.items():
            z.writestr(f, text)
    return path


def pip_target(site: Path, whl: Path, upgrade: bool = False) -> None:
    """Install ``whl`` into ``site`` with ``pip --target`` (offline, no dependencies)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--target",
            str(site),
        ]
        + (["--upgrade"] if upgrade else [])
        + [str(whl)],
        check=True,
        capture_output=True,
        timeout=120,
    )


def tree_hash(root: Path) -> str:
    """SHA-256 over every file's relative path and bytes under ``root`` (objects, refs, index included)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()
