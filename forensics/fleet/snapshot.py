"""One rank's part of ``forensics fleet snapshot``, and rank 0's gather.

Every rank, in order:

1. says hello on the channel (so a rank that dies later is named);
2. records what it sees: the NCCL/CUDA/torch variables of its own environment
   (:data:`forensics.env.workers.record.DEFAULT_SELECT`, launcher bookkeeping
   left out, secrets redacted) and the GPU it drives (``cuda:LOCAL_RANK`` by
   torchrun's convention, mapped through ``CUDA_VISIBLE_DEVICES``);
3. local rank 0 only: takes the node's full snapshot
   (:func:`forensics.collect.take_snapshot`, every GPU, the usual probe
   options) before any benchmark load, then marks the node ready;
4. with ``--bench``: waits for its node to be ready, runs the per-GPU
   components (:mod:`forensics.fleet.rankbench`); local rank 0 samples every
   GPU of the node meanwhile (:class:`forensics.gpu.sampler.Sampler`, ~10 Hz),
   so clocks, PCIe and clocks-event reasons are judged *under load*;
5. publishes its record; rank 0 then waits for the others until the gather
   deadline and writes the fleet file with the missing ranks named.

No step waits without a deadline. Core code: returns data, never prints
(progress goes through a callback).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from forensics.docfile import utc_now
from forensics.fleet.document import RECORD_SCHEMA
from forensics.fleet.gather import Channel, Gathered
from forensics.fleet.launcher import Placement
from forensics.redact import Redactor

READY_WAIT_S = 120.0  # longest a rank waits for its node's snapshot before benchmarking anyway


@dataclass
class Options:
    """What ``fleet snapshot`` was asked to do.

    Attributes:
        label: free text stored in the node snapshots and the fleet file.
        only, skip, timeout_s, probe_options: as ``forensics snapshot``'s ``--probe``, ``--skip``,
            ``--timeout`` and probe options (``repo``, ``sample_s``, ``deep``...).
        bench: run the per-GPU components on every rank.
        redact: replace secrets (default).
        gather_timeout_s: how long rank 0 waits for every record (from its own start), seconds.
    """

    label: str | None = None
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    timeout_s: float = 10.0
    probe_options: dict[str, Any] = field(default_factory=dict)
    bench: bool = False
    redact: bool = True
    gather_timeout_s: float = 300.0


class LocalChannel(Channel):
    """A one-process job (world size 1, no launcher): the channel is a dict."""

    def __init__(self) -> None:
        self._kv: dict[str, Any] = {}
        self._counts: dict[str, set[int]] = {}

    def _put(self, key: str, value: dict[str, Any]) -> None:
        self._kv[key] = value

    def _get(self, key: str) -> dict[str, Any] | None:
        return self._kv.get(key)

    def _incr(self, name: str, who: int) -> None:
        self._counts.setdefault(name, set()).add(who)

    def _count(self, name: str) -> int:
        return len(self._counts.get(name, ()))


def rank_env(red: Redactor, environ=os.environ) -> dict[str, str]:
    """The selected variables of this rank's environment, launcher bookkeeping left out, redacted.

    Source: ``os.environ`` filtered by :data:`forensics.env.workers.record.DEFAULT_SELECT`;
    :data:`forensics.env.workers.record.RANK_VARS` (RANK, LOCAL_RANK...) are dropped: they differ
    per rank by design.
    """
    from forensics.env.workers.record import DEFAULT_SELECT, RANK_VARS, filter_env

    return {
        k: red.env(k, v, f"env.{k}")
        for k, v in filter_env(environ, DEFAULT_SELECT).items()
        if k not in RANK_VARS
    }


def assigned_gpu(pl: Placement, environ=os.environ) -> dict[str, Any]:
    """The GPU this rank is expected to drive: ``cuda:LOCAL_RANK`` through ``CUDA_VISIBLE_DEVICES``.

    Returns:
        ``{"cuda_index", "nvml_index" or "uuid", "source"}``; ``source`` says how it was decided
        (``CUDA_VISIBLE_DEVICES`` entry, or ``LOCAL_RANK`` when it is unset). The bench, when it
        runs on a GPU, replaces the guess by the device's UUID from torch.
    """
    out: dict[str, Any] = {"cuda_index": pl.local_rank}
    cvd = environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        out.update(nvml_index=pl.local_rank, source="LOCAL_RANK (CUDA_VISIBLE_DEVICES unset)")
        return out
    entries = [e.strip() for e in cvd.split(",") if e.strip()]
    if pl.local_rank >= len(entries):
        out.update(source=f"CUDA_VISIBLE_DEVICES={cvd!r} has no entry {pl.local_rank}")
        return out
    entry = entries[pl.local_rank]
    if entry.isdigit():
        out.update(nvml_index=int(entry), source="CUDA_VISIBLE_DEVICES")
    elif entry.startswith("GPU-"):
        out.update(uuid=entry, source="CUDA_VISIBLE_DEVICES")
    else:
        out.update(source=f"CUDA_VISIBLE_DEVICES entry {entry!r} (MIG or unknown form)")
    return out


def _node_snapshot(opts: Options) -> dict[str, Any]:
    from forensics.collect import take_snapshot

    return take_snapshot(
        label=opts.label,
        only=opts.only,
        skip=opts.skip,
        options=dict(opts.probe_options),
        timeout_s=opts.timeout_s,
        redact=opts.redact,
    )


def _start_sampler():
    """A started GPU sampler of every GPU of the node, or None where NVML is not usable."""
    try:
        from forensics.gpu.nvml import Nvml
        from forensics.gpu.sampler import Sampler

        probe = Nvml()
        try:
            if probe.unavailable():
                return None
        finally:
            probe.shutdown()
        return Sampler(interval_s=0.1).start()
    except Exception:  # NVML trouble must not stop a fleet snapshot
        return None


def run_rank(
    pl: Placement,
    opts: Options,
    channel: Channel,
    *,
    gather: bool,
    progress: Callable[[str], None] | None = None,
    node_snapshot: Callable[[Options], dict[str, Any]] = _node_snapshot,
) -> tuple[dict[str, Any], Gathered | None]:
    """This rank's whole part: record, publish; rank 0 with ``gather`` also collects.

    Args:
        pl: where this process sits (:func:`forensics.fleet.launcher.detect`).
        opts: what was asked.
        channel: the store or the shared folder.
        gather: rank 0 waits for the other records (a fleet file will be written).
        progress: called with one-line messages.
        node_snapshot: takes the node's snapshot (replaceable for tests).

    Returns:
        (this rank's record, what rank 0 gathered or None on other ranks / without ``gather``).
    """
    say = progress or (lambda msg: None)
    t0 = time.monotonic()
    deadline = t0 + opts.gather_timeout_s
    channel.hello(pl)
    say(f"rank {pl.rank}/{pl.world_size} on node {pl.node} (local rank {pl.local_rank}): started")
    red = Redactor(enabled=opts.redact)
    rec: dict[str, Any] = {
        "schema": RECORD_SCHEMA,
        "created": utc_now(),
        "label": red.text(opts.label or "", "label"),
        "rank": pl.rank,
        "local_rank": pl.local_rank,
        "world_size": pl.world_size,
        "local_world_size": pl.local_world_size,
        "node": pl.node,
        "node_index": pl.node_index,
        "hostname": pl.hostname,
        "launcher": pl.launcher,
        "run_id": pl.run_id,
        "pid": os.getpid(),
        "launcher_vars": pl.variables,
        "env": rank_env(red),
        "gpu": assigned_gpu(pl),
        "bench": None,
        "snapshot": None,
        "telemetry": None,
        "errors": [],
    }
    node_key = f"node/{pl.node}"
    if pl.local_rank == 0:
        try:
            rec["snapshot"] = node_snapshot(opts)
        except Exception as exc:  # recorded; the other ranks' data is still worth having
            rec["errors"].append({"where": "snapshot", "error": f"{type(exc).__name__}: {exc}"})
        channel.mark(f"{node_key}/ready", pl.rank)
        say(f"rank {pl.rank}: node snapshot taken ({time.monotonic() - t0:.1f} s)")
    if opts.bench:
        _bench(pl, rec, channel, node_key, deadline, say)
    rec["errors"] = red.sweep(rec["errors"], "errors")  # exception texts can quote a command line
    rec["launcher_vars"] = red.sweep(rec["launcher_vars"], "launcher_vars")
    rec["redaction"] = "on" if opts.redact else "off (--no-redact)"
    rec["redactions"] = [r.to_json() for r in red.records]
    rec["duration_s"] = round(time.monotonic() - t0, 3)
    channel.publish(pl.rank, rec)
    say(f"rank {pl.rank}: record sent ({rec['duration_s']:.1f} s)")
    got = None
    if gather and pl.rank == 0:
        got = channel.collect(
            pl.world_size,
            deadline,
            opts.gather_timeout_s,
            on_wait=lambda n: say(f"gathering: {n} of {pl.world_size} ranks"),
        )
    return rec, got


def _bench(
    pl: Placement,
    rec: dict[str, Any],
    channel: Channel,
    node_key: str,
    deadline: float,
    say: Callable[[str], None],
) -> None:
    """Step 4 of the module docstring; failures land in ``rec["errors"]``."""
    if pl.local_rank != 0 and not channel.wait(
        f"{node_key}/ready", 1, min(deadline, time.monotonic() + READY_WAIT_S)
    ):
        rec["errors"].append(
            {
                "where": "bench",
                "error": "the node's snapshot was not ready in time; benchmarked "
                "anyway (the snapshot may show this load)",
            }
        )
    sampler = _start_sampler() if pl.local_rank == 0 else None
    try:
        from forensics.fleet import rankbench

        rec["bench"] = rankbench.run(pl.local_rank, pl.local_world_size or 1)
        uuid = rec["bench"].get("gpu_uuid")
        if uuid:
            rec["gpu"].update(uuid=uuid, source="torch.cuda.get_device_properties().uuid")
    except Exception as exc:
        rec["errors"].append({"where": "bench", "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
    finally:
        channel.mark(f"{node_key}/benched", pl.rank)
    if sampler is not None:
        peers = pl.local_world_size or 1
        if not channel.wait(
            f"{node_key}/benched", peers, deadline - min(30.0, 0.2 * (deadline - time.monotonic()))
        ):
            rec["errors"].append(
                {
                    "where": "telemetry",
                    "error": f"not all {peers} local ranks finished their bench "
                    "before the deadline; samples cover those that did",
                }
            )
        try:
            rec["telemetry"] = sampler.stop()
        except Exception as exc:
            rec["errors"].append({"where": "telemetry", "error": f"sampler failed: {exc}"})
    say(f"rank {pl.rank}: bench done")


def write_fleet(path: Path, pl: Placement, got: Gathered, *, channel: str, opts: Options) -> Path:
    """Rank 0: write the gathered records as a fleet file (:mod:`forensics.fleet.document`)."""
    from forensics.fleet.document import header, write

    label = Redactor(enabled=opts.redact).text(
        opts.label or "", "label"
    )  # as in the records and node snapshots
    head = header(
        world_size=pl.world_size,
        launcher=pl.launcher,
        run_id=pl.run_id,
        label=label,
        gather={
            "channel": channel,
            "timeout_s": opts.gather_timeout_s,
            "waited_s": got.waited_s,
            "interrupted": None if got.interrupted is None else type(got.interrupted).__name__,
        },
        missing=got.missing,
    )
    return write(path, head, got.records)


def name_clashes(records) -> list[str]:
    """One line per local rank two ranks of one node name claim: two machines answer to one hostname.

    ``records``: the rank records gathered (``node``, ``local_rank``, ``rank`` of each).
    """
    first: dict[tuple[str, int], int] = {}
    out = []
    for r in records:
        key = (r.get("node"), r.get("local_rank"))
        if key in first:
            out.append(
                f"node {key[0]}: ranks {first[key]} and {r.get('rank')} are both local rank {key[1]}: two "
                "machines share the name; set FORENSICS_FLEET_NODE=NAME on each (the report counts them as one)"
            )
        else:
            first[key] = r.get("rank")
    return out


def open_channel(
    pl: Placement, out_dir: Path | None, gather_timeout_s: float
) -> tuple[Channel, str]:
    """How this rank's record reaches rank 0, and the channel's name for the fleet file.

    A shared ``out_dir``: one file per rank there (``dir``); a job of one process with no
    ``MASTER_ADDR``: in this process (``local``); else torch.distributed's c10d store (``store``,
    :meth:`forensics.fleet.gather.StoreChannel.connect`, which waits up to ``gather_timeout_s``).
    """
    from forensics.fleet.gather import DirChannel, StoreChannel

    if out_dir is not None:
        return DirChannel(out_dir, pl.run_id), "dir"
    if pl.world_size == 1 and not pl.master_addr:
        return LocalChannel(), "local"
    return StoreChannel.connect(pl, gather_timeout_s), "store"
