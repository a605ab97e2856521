"""Fleet mode in real multi-process jobs on the CPU: torchrun with 8 ranks playing 4 nodes
(FORENSICS_FLEET_RANKS_PER_NODE=2), the --out-dir folder, and a rank killed mid-way."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.slow

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
pytest.importorskip("torch")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(
            ("FORENSICS_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_", "TORCHELASTIC", "NCCL_")
        ):
            env.pop(k)
    env.update({"FORENSICS_FLEET_RANKS_PER_NODE": "2", "OMP_NUM_THREADS": "1", **extra})
    return env


def _wrapper(tmp: Path) -> Path:
    """A per-rank wrapper as a site's launcher script would be: rank 5 gets NCCL_ALGO=Tree."""
    script = tmp / "rank.sh"
    script.write_text(
        '#!/bin/sh\nif [ "$RANK" = 5 ]; then export NCCL_ALGO=Tree; fi\n'
        f'exec "{sys.executable}" -m forensics fleet snapshot "$@"\n'
    )
    script.chmod(0o755)
    return script


def _records(path: Path) -> list[dict]:
    lines = path.read_text().splitlines()
    return [json.loads(ln.rstrip(",")) for ln in lines[1:-1]]


def test_torchrun_eight_ranks_four_nodes_gathered_and_reported(tmp_path):
    out = tmp_path / "fleet.json"
    r = subprocess.run(
        [
            *TORCHRUN,
            "--standalone",
            "--nproc-per-node",
            "8",
            "--no-python",
            str(_wrapper(tmp_path)),
            "-o",
            str(out),
            "--bench",
            "--skip",
            "nccl_env",
            "--gather-timeout",
            "120",
        ],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "gathered 8 of 8 ranks from 4 node(s)" in r.stdout
    recs = _records(out)
    assert [x["rank"] for x in recs] == list(range(8))
    assert sorted({x["node"] for x in recs}) == [
        f"{socket.gethostname()}-node{i}" for i in range(4)
    ]
    assert [x["rank"] for x in recs if x["snapshot"]] == [0, 2, 4, 6]  # local rank 0 of each node
    assert all(
        x["launcher"] == "torchrun" and x["bench"]["figures"]["matmul_gflops"]["value"] > 0
        for x in recs
    )
    rep = run_cli("fleet", "report", str(out), "-o", str(tmp_path / "r.json"), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["counts"]["nodes"] == 4 and doc["counts"]["ranks"] == 8 and doc["missing"] == []
    assert [(o["subject"], o["field"], o["value"]) for o in doc["outliers"]] == [
        (f"rank 5 (node {socket.gethostname()}-node2)", "env.NCCL_ALGO", "Tree")
    ]


def test_out_dir_one_record_per_rank(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    r = subprocess.run(
        [
            *TORCHRUN,
            "--standalone",
            "--nproc-per-node",
            "8",
            "-m",
            "forensics",
            "fleet",
            "snapshot",
            "--out-dir",
            str(folder),
            "--probe",
            "host",
            "--probe",
            "software",
        ],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(p.name for p in folder.glob("rank-*.json")) == [
        f"rank-{i:05d}.json" for i in range(8)
    ]
    assert not (tmp_path / "forensics-fleet.json").exists()  # --out-dir alone: no gather
    rep = run_cli("fleet", "report", str(folder), "-o", str(tmp_path / "r.md"), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout.startswith("No outlier among 4 nodes, 0 GPUs, 8 ranks.")


def test_torchrun_teardown_still_writes_what_arrived(tmp_path):
    """Rank 3 of 4 hangs (SIGSTOP) and, once the other ranks have sent their records, is killed;
    torchrun's agent sends SIGTERM to every other rank. Rank 0, waiting in the gather, writes the
    records that arrived and names rank 3."""
    script = tmp_path / "rank.sh"
    script.write_text(
        '#!/bin/sh\nif [ "$RANK" = 3 ]; then\n'
        f'  "{sys.executable}" -m forensics fleet snapshot "$@" & p=$!\n'
        "  sleep 1; kill -STOP $p\n"
        # ranks 1 and 2 have sent their records and exited: rank 0 now waits for rank 3 alone
        "  for i in $(seq 600); do [ -e sent-1 ] && [ -e sent-2 ] && break; sleep 0.2; done\n"
        "  kill -9 $p; exit 137\nfi\n"
        f'"{sys.executable}" -m forensics fleet snapshot "$@"; rc=$?\n'
        'touch "sent-$RANK"; exit $rc\n'
    )
    script.chmod(0o755)
    out = tmp_path / "fleet.json"
    r = subprocess.run(
        [
            *TORCHRUN,
            "--standalone",
            "--nproc-per-node",
            "4",
            "--no-python",
            str(script),
            "-o",
            str(out),
            "--bench",
            "--skip",
            "nccl_env",
            "--gather-timeout",
            "120",
        ],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode != 0  # the job failed: rank 3 was killed
    assert "gathered 3 of 4 ranks" in r.stdout, r.stderr[-3000:]
    head = json.loads(out.read_text().splitlines()[0] + "]}")
    assert head["gather"]["interrupted"] == "Terminated"
    assert [m["rank"] for m in head["missing"]] == [3]
    assert "stopped (SIGTERM)" in head["missing"][0]["reason"]
    assert [x["rank"] for x in _records(out)] == [0, 1, 2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rank_killed_mid_way_is_recorded_missing(tmp_path):
    """Four ranks (two nodes) started as srun or mpirun would (no agent: rank 0 hosts the store);
    rank 3 is killed after it said hello, while it waits for its node's snapshot. Rank 0 stops
    waiting at the gather timeout, writes the file and names rank 3."""
    out = tmp_path / "fleet.json"
    port = _free_port()
    procs = []
    for rank in range(4):
        env = _env(
            RANK=str(rank),
            WORLD_SIZE="4",
            LOCAL_RANK=str(rank),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
        )
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "forensics",
                    "fleet",
                    "snapshot",
                    "-o",
                    str(out),
                    "--bench",
                    "--skip",
                    "nccl_env",
                    "--gather-timeout",
                    "15",
                    "-v",
                ],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        )
    victim = procs[3]
    try:
        deadline = time.monotonic() + 120
        seen = ""
        while "started" not in seen and time.monotonic() < deadline:
            seen += victim.stderr.readline()
        assert "rank 3/4 on node" in seen
        os.killpg(victim.pid, signal.SIGKILL)  # mid-way: after hello, before its record
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert procs[0].returncode == 3, outs[0][1][-2000:]
    assert all(p.returncode == 0 for i, p in enumerate(procs) if i not in (0, 3)), [
        p.returncode for p in procs
    ]
    assert "gathered 3 of 4 ranks" in outs[0][0] and "missing rank 3" in outs[0][0]
    head = json.loads(out.read_text().splitlines()[0] + "]}")
    assert [m["rank"] for m in head["missing"]] == [3]
    assert head["missing"][0]["node"].endswith("-node1")
    assert (
        "started (pid" in head["missing"][0]["reason"]
        and "within 15 s" in head["missing"][0]["reason"]
    )
    assert [x["rank"] for x in _records(out)] == [0, 1, 2]
    rep = run_cli("fleet", "report", str(out), "-o", str(tmp_path / "r.html"), cwd=tmp_path)
    assert rep.returncode == 0 and "1 rank missing (node " in rep.stdout


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_single_process_without_launcher(tmp_path):
    r = run_cli("fleet", "snapshot", "--probe", "host", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "forensics-fleet.json"
    assert (
        json.loads((tmp_path / "forensics-fleet.json").read_text().splitlines()[0] + "]}")[
            "launcher"
        ]
        == "none"
    )
