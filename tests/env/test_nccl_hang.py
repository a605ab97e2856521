"""A hung ``--nccl-init`` collective leaves a record: what the ranks printed before they were killed.

The real NCCL INFO log of the 2 x H200 machine (tests/fixtures/h200x2/nccl-debug-info.log) is cut
where a hang in the first all-reduce cuts it (after NCCL connected a few channels, before the
rest), written where each rank's log lives, next to the record each rank writes before NCCL starts
(phase ``allreduce``). The run is then "killed" (no return code), as run_group reports a timeout.
"""

from __future__ import annotations

import json
from pathlib import Path

from forensics.env import collect as ec
from forensics.env import data as ed
from forensics.env.transport import judge_transport
from forensics.env.workers import record as envrecord
from forensics.model import HypothesisStatus, Severity
from forensics.redact import Redactor
from tests.conftest import H200

LOG = H200 / "nccl-debug-info.log"
PIDS = {0: "983", 1: "984"}  # the two ranks' pids in the captured log


def _section(folder: Path, cut: int | None, phase: str, ok: bool, rc) -> dict:
    lines = LOG.read_text().splitlines()[:cut]
    folder.mkdir()
    for rank, pid in PIDS.items():
        rec = envrecord.snapshot(envrecord.DEFAULT_SELECT, "nccl_init", rank)
        rec.update(local_rank=rank, world_size=2, pid=int(pid))
        rec["nccl_init"] = {
            "backend": "nccl",
            "nccl_available": True,
            "reason": "",
            "allreduce_ok": ok,
            "log_file": f"nccl-{rank}-{pid}.log",
            "phase": phase,
        }
        (folder / f"envdump-vm-{pid}.json").write_text(json.dumps(rec))
        (folder / f"nccl-{rank}-{pid}.log").write_text(
            "\n".join(ln for ln in lines if ln.startswith(f"vm:{pid}:")) + "\n"
        )
    run = {
        "returncode": rc,
        "records": ec.gather(str(folder), ""),
        "stderr": "",
        "duration_s": 60.0,
    }
    errors: list[str] = []
    sec = ed._ranks_section(
        run,
        {},
        ed._Redact(Redactor()),
        "nccl_init",
        lambda where, msg: errors.append(msg),
        "nccl-init coordinator",
        {},
    )
    return {
        "parent": {"env": {}},
        "nccl_init": {**ed._nccl_summary(sec["ranks"], "subprocess"), **sec},
        "errors": errors,
    }


def test_a_killed_run_keeps_what_the_ranks_printed_and_that_they_hung(tmp_path):
    # cut after NCCL connected the first channels of the all-reduce (lazy connection), before the rest
    cut = next(
        i
        for i, ln in enumerate(LOG.read_text().splitlines())
        if "Channel 02/0" in ln and "via" in ln
    )
    after = _section(tmp_path / "hung", cut, "allreduce", False, None)
    ranks = after["nccl_init"]["ranks"]
    assert len(ranks) == 2 and after["nccl_init"]["hung"] == 2
    r0 = ranks[0]["nccl"]
    assert r0["hung"] == {"phase": "allreduce", "killed_after_s": 60.0}
    assert r0["version"] == "2.28.9+cuda13.0" and set(r0["transports"]) == {"P2P/CUMEM"}
    assert r0["last_lines"] and "via P2P/CUMEM" in r0["last_lines"][-1]
    assert any("hung in NCCL and were killed" in e for e in after["errors"])

    before = _section(tmp_path / "ok", None, "done", True, 0)
    assert "hung" not in before["nccl_init"]["ranks"][0]["nccl"]
    found = judge_transport(before, after)
    hung = [f for f in found if "hung" in f.summary]
    assert hung, [f.summary for f in found]
    f = hung[0]
    assert f.status is HypothesisStatus.IMPLICATED and f.severity is Severity.HIGH
    assert "hung in its first all-reduce and was killed after 60 s" in f.summary
    assert "transport chosen so far: P2P/CUMEM" in f.summary


def test_a_run_that_finished_marks_nothing_hung(tmp_path):
    done = _section(tmp_path / "ok", None, "done", True, 0)
    assert "hung" not in done["nccl_init"] and all(
        "hung" not in r["nccl"] for r in done["nccl_init"]["ranks"]
    )
    assert [f.status for f in judge_transport(done, done)] == [HypothesisStatus.RULED_OUT]


def test_forensics_env_prints_the_hang(tmp_path):
    import io

    from rich.console import Console

    from forensics.render.env import print_env

    cut = next(
        i
        for i, ln in enumerate(LOG.read_text().splitlines())
        if "Channel 02/0" in ln and "via" in ln
    )
    after = _section(tmp_path / "hung", cut, "allreduce", False, None)
    out = io.StringIO()
    print_env(Console(file=out, width=200, color_system=None), after, judge_transport(None, after))
    text = out.getvalue()
    assert "hung in allreduce, killed after 60.0 s; last NCCL line: INFO Channel 01/0" in text
    assert "transports P2P/CUMEM x" in text
