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
    data = snap.load(EXAMPLES / "nccl-lost" / "after.json")["probes"]["nccl_env"][
        "data"
    ]  # 2 x H200, torchrun
    out = io.StringIO()
    print_env(Console(file=out, width=width, color_system=None), data)
    return out.getvalue()


def test_real_launcher_table_at_80_columns_names_the_workers_that_differ():
    text = _render(80)
    assert max(len(line) for line in text.splitlines()) <= 80
    rows = _rows(text)
    # every variable whole in its own column (it was cut into NVIDIA_DRIVER_CAPABILIT / IES)
    assert {
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NVIDIA_DRIVER_CAPABILITIES",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    } <= set(rows)
    assert rows["NCCL_ALGO"] == [
        "Ring",
        "launcher rank 0, launcher rank 1: unset; the others the same",
    ]
    assert rows["CUDA_HOME"] == ["/usr/local/cuda", "same"]
    head = "\n".join(text.splitlines()[:3])
    assert "spawn, forkserver, subprocess," in head and "launcher rank 0, launcher rank 1" in head
    # one line per start-up hook instead of one per process
    assert text.count("sitecustomize /usr/lib/python3.12/sitecustomize.py") == 1


def test_one_column_per_process_where_it_fits():
    rows = _rows(_render(330))
    assert rows["NCCL_ALGO"] == ["Ring"] * 5 + [
        "-",
        "-",
    ]  # launching process, 4 start methods, 2 ranks


def test_env_launcher_at_80_columns_as_a_user_runs_it(tmp_path):
    launcher = tmp_path / "launch.sh"  # two ranks, the first with a variable of its own
    launcher.write_text(
        '#!/bin/sh\nRANK=0 WORLD_SIZE=2 NCCL_DEBUG=WARN "$@" &\nRANK=1 WORLD_SIZE=2 "$@"\nwait\n'
    )
    launcher.chmod(0o755)
    r = run_cli(
        "env", "--launcher", str(launcher), cwd=tmp_path, env={"COLUMNS": "80", "NCCL_ALGO": "Ring"}
    )
    assert r.returncode == 0, r.stderr
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    rows = _rows(r.stdout)
    assert rows["NCCL_DEBUG"] == ["unset", "launcher rank 0: WARN; the others the same"]
    assert rows["NCCL_ALGO"] == ["Ring", "same"]
    assert rows["RANK"][1].startswith("launcher rank 0: 0; launcher rank 1: 1")


def _torchrun(width: int, exported: str | None = None, color: bool = False) -> str:
    """The torchrun A/A incident's workers (OMP_NUM_THREADS=1, TORCH_NCCL_ASYNC_ERROR_HANDLING=1 set by
    torchrun, the launching process has neither); ``exported``: OMP_NUM_THREADS the user exported instead."""
    data = snap.load(EXAMPLES / "incidents" / "torchrun-defaults-aa" / "after.json")["probes"][
        "nccl_env"
    ]["data"]
    if exported is not None:
        for entry in [
            data["parent"],
            *data["start_methods"].values(),
        ]:  # the start methods inherit it
            if isinstance(entry.get("env"), dict):
                entry["env"]["OMP_NUM_THREADS"] = exported
        for r in data["launcher"]["ranks"]:
            for d in r["differs"]:
                if d["name"] == "OMP_NUM_THREADS":
                    d["parent"] = exported
    out = io.StringIO()
    print_env(
        Console(
            file=out, width=width, color_system="standard" if color else None, force_terminal=color
        ),
        data,
    )
    return out.getvalue()


def test_torchrun_defaults_are_shown_as_set_by_torchrun_not_as_differences():
    rows = _rows(_torchrun(80))
    assert rows["OMP_NUM_THREADS"] == [
        "unset",
        "launcher rank 0, launcher rank 1: 1 (set by torchrun); the others the same",
    ]
    assert rows["TORCH_NCCL_ASYNC_ERROR_HANDLING"][1].startswith(
        "launcher rank 0, launcher rank 1: 1 (set by torchrun)"
    )
    wide = _rows(_torchrun(400))
    assert wide["OMP_NUM_THREADS"] == [
        "-",
        "-",
        "-",
        "-",
        "1 (set by torchrun)",
        "1 (set by torchrun)",
    ]
    colored = _torchrun(80, color=True)
    line = next(ln for ln in colored.splitlines() if "OMP_NUM_THREADS" in ln)
    assert "\x1b[36m" in line and "\x1b[31m" not in line  # cyan (a fact), not red (a difference)


def test_a_value_the_user_exported_that_the_workers_lose_is_still_a_difference():
    rows = _rows(_torchrun(80, exported="8"))
    assert rows["OMP_NUM_THREADS"] == [
        "8",
        "launcher rank 0, launcher rank 1: 1; the others the same",
    ]
    colored = _torchrun(80, exported="8", color=True)
    line = next(ln for ln in colored.splitlines() if "OMP_NUM_THREADS" in ln)
    assert "\x1b[31m" in line
