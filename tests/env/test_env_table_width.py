"""The ``forensics env`` table on an 80-column terminal: whole names, whole labels, the differences named.

One column per process (the launching process, four start methods, each launcher rank) folded
paths and labels into three-letter slices at 80 columns; where it does not fit, each row names
the launching process's value and only the workers that see another one.
"""

from __future__ import annotations

import io

from rich.console import Console

from forensics import snapshot as snap
from forensics.render.env import print_env

from tests.conftest import EXAMPLES, run_cli


def _rows(text: str) -> dict[str, list[str]]:
    """Table rows by variable: each column's text, wrapped lines joined (box characters dropped)."""
    rows: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip("│").split("│")]
        if cells[0]:
            current = cells[0]
            rows[current] = cells[1:]
        elif current is not None:
            rows[current] = [f"{a} {b}".strip() for a, b in zip(rows[current], cells[1:])]
    return rows


def _render(width: int) -> str:
    data = snap.load(EXAMPLES / "nccl-lost" / "after.json")["probes"]["nccl_env"]["data"]  # 2 x H200, torchrun
    out = io.StringIO()
    print_env(Console(file=out, width=width, color_system=None), data)
    return out.getvalue()


def test_real_launcher_table_at_80_columns_names_the_workers_that_differ():
    text = _render(80)
    assert max(len(line) for line in text.splitlines()) <= 80
    rows = _rows(text)
    # every variable whole in its own column (it was cut into NVIDIA_DRIVER_CAPABILIT / IES)
    assert {"NCCL_ALGO", "NCCL_PROTO", "NVIDIA_DRIVER_CAPABILITIES", "TORCH_SYMM_MEM_DISABLE_MULTICAST"} <= set(rows)
    assert rows["NCCL_ALGO"] == ["Ring", "launcher rank 0, launcher rank 1: unset; the others the same"]
    assert rows["CUDA_HOME"] == ["/usr/local/cuda", "same"]
    head = "\n".join(text.splitlines()[:3])
    assert "spawn, forkserver, subprocess," in head and "launcher rank 0, launcher rank 1" in head
    # one line per start-up hook instead of one per process
    assert text.count("sitecustomize /usr/lib/python3.12/sitecustomize.py") == 1


def test_one_column_per_process_where_it_fits():
    rows = _rows(_render(330))
    assert rows["NCCL_ALGO"] == ["Ring"] * 5 + ["-", "-"]  # launching process, 4 start methods, 2 ranks


def test_env_launcher_at_80_columns_as_a_user_runs_it(tmp_path):
    launcher = tmp_path / "launch.sh"  # two ranks, the first with a variable of its own
    launcher.write_text('#!/bin/sh\nRANK=0 WORLD_SIZE=2 NCCL_DEBUG=WARN "$@" &\nRANK=1 WORLD_SIZE=2 "$@"\nwait\n')
    launcher.chmod(0o755)
    r = run_cli("env", "--launcher", str(launcher), cwd=tmp_path, env={"COLUMNS": "80", "NCCL_ALGO": "Ring"})
    assert r.returncode == 0, r.stderr
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    rows = _rows(r.stdout)
    assert rows["NCCL_DEBUG"] == ["unset", "launcher rank 0: WARN; the others the same"]
    assert rows["NCCL_ALGO"] == ["Ring", "same"]
    assert rows["RANK"][1].startswith("launcher rank 0: 0; launcher rank 1: 1")
