"""Worker side of ``--nccl-init``: start ranks that build a real communicator and all-reduce once.

Entered through ``python -m forensics.env.workers.envdump --nccl-init --out-dir DIR``.
Two roles, decided by the environment:

- *a rank*: ``RANK`` and ``WORLD_SIZE`` are set (a launcher such as
  ``torchrun`` started this process): it initialises ``torch.distributed``
  with ``env://``, using the launcher's MASTER_ADDR/MASTER_PORT.
- *a coordinator* (anything else: a plain subprocess, a wrapper script): it
  counts the visible GPUs (``torch.cuda.device_count()``) and starts one rank
  per GPU with ``torch.multiprocessing.spawn``, joined through
  ``tcp://127.0.0.1:<free port>`` so no variable is added to their
  environment. Without a GPU (or without NCCL in this torch) it starts two
  ranks on the CPU with gloo and the record says why NCCL was not used.

Each rank first records what it sees (its environment and its CPU/NUMA binding;
with NCCL also its GPU's PCI address and NUMA node from sysfs) (:func:`forensics.env.workers.record.snapshot`),
then sets ``NCCL_DEBUG=INFO``, ``NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,ENV`` (NCCL's
default set) and ``NCCL_DEBUG_FILE=DIR/nccl-<rank>-<pid>.log`` -- after the
dump, so the record shows the variables as they arrived -- and does one
all-reduce of 1 Mi float32 values, checking the sum. The parent parses the
log with :mod:`forensics.env.nccllog`. The rank's record is written before NCCL starts and again
at each phase (``phase``: ``init``, ``allreduce``, then ``done`` or ``failed``), so a rank that
hangs in a collective and is killed still leaves its record and its NCCL log behind.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys

from forensics.env.workers import record as envrecord

DEBUG_VARS = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV"}
"""Variables each rank sets for itself after its dump (plus NCCL_DEBUG_FILE)."""
ALLREDUCE_ELEMENTS = 1 << 20
INIT_TIMEOUT_S = 60


def log_path(out_dir: str, rank: int) -> str:
    """Where rank ``rank`` of this process asks NCCL to write its log."""
    return os.path.join(out_dir, f"nccl-{rank}-{os.getpid()}.log")


def _rank_main(
    rank: int,
    world: int,
    local_rank: int,
    out_dir: str,
    select,
    method: str,
    backend: str,
    reason: str,
    init_method: str,
    stdout: bool,
) -> None:
    record = envrecord.snapshot(select, method, rank)
    record.update(local_rank=local_rank, world_size=world)
    path = log_path(out_dir, rank)
    os.environ.update(DEBUG_VARS)
    os.environ["NCCL_DEBUG_FILE"] = path
    info: dict = {
        "backend": backend,
        "nccl_available": backend == "nccl",
        "reason": reason,
        "log_file": os.path.basename(path),
        "allreduce_ok": False,
        "phase": "init",
    }
    record["nccl_init"] = info
    rpath = envrecord.record_path(out_dir)
    # written before NCCL starts, so a rank that hangs and is killed still leaves its record; the parent
    # reads its NCCL log from the file and marks it hung (forensics.env.data._ranks_section)
    envrecord.write_record(record, rpath)
    try:
        import torch
        import torch.distributed as dist

        info["torch_version"] = torch.__version__
        device = torch.device("cpu")
        if backend == "nccl":
            torch.cuda.set_device(local_rank)
            device = torch.device("cuda", local_rank)
            if "missing" not in record["binding"]:
                record["binding"]["gpu"] = _gpu_of_rank(local_rank)
            info["torch_nccl_version"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        dist.init_process_group(
            backend,
            init_method=init_method,
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=INIT_TIMEOUT_S),
        )
        info["phase"] = "allreduce"
        envrecord.write_record(record, rpath)
        t = torch.full((ALLREDUCE_ELEMENTS,), float(rank + 1), device=device)
        dist.all_reduce(t)
        if backend == "nccl":
            torch.cuda.synchronize()
        info["allreduce_ok"] = bool(t[0].item() == world * (world + 1) / 2)
        dist.destroy_process_group()
        info["phase"] = "done"
    except Exception as exc:  # the failure is the finding; the record still goes out
        info["error"] = f"{type(exc).__name__}: {exc}"[:500]
        info["phase"] = "failed"
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            info["log_lines"] = [line.rstrip("\n") for line in fh if " NCCL " in line]
    except OSError:
        info["log_lines"] = []
    envrecord.write_record(record, rpath)
    if stdout:
        sys.stdout.write(envrecord.STDOUT_MARKER + json.dumps(record) + "\n")
        sys.stdout.flush()


def _gpu_of_rank(local_rank: int) -> dict:
    from forensics.env.workers.binding import gpu_of_rank

    try:
        return gpu_of_rank(local_rank)
    except Exception as exc:  # noqa: BLE001 - the binding is a side fact; the all-reduce still runs
        return {
            "cuda_device": local_rank,
            "bdf": {"missing": "error", "detail": f"{type(exc).__name__}: {exc}"[:200]},
        }


def _spawned(
    index: int,
    world: int,
    out_dir: str,
    select,
    method: str,
    backend: str,
    reason: str,
    init_method: str,
    stdout: bool,
) -> None:  # pragma: no cover - runs in a torch.multiprocessing.spawn child
    _rank_main(index, world, index, out_dir, select, method, backend, reason, init_method, stdout)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def choose_backend() -> tuple[str, int, str]:
    """(backend, number of ranks, why) for a coordinator; imports torch.

    One rank per visible GPU with NCCL; two CPU ranks with gloo when
    ``torch.cuda.is_available()`` is False or ``torch.distributed.is_nccl_available()`` is False.
    """
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        return (
            "gloo",
            2,
            "NCCL not available: torch.cuda.is_available() is False (no GPU visible); used gloo",
        )
    if not dist.is_nccl_available():
        return "gloo", 2, "NCCL not available: this torch was built without NCCL; used gloo"
    return "nccl", torch.cuda.device_count(), ""


def run(out_dir: str, select, method: str = "nccl_init", stdout: bool = False) -> int:
    """Entry for ``--nccl-init``: act as a rank or as a coordinator (see the module docstring).

    Returns:
        the process exit status (0 when every rank finished; a rank's own
        failure is in its record, not in the status).
    """
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:
        import torch

        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        local = int(env.get("LOCAL_RANK", rank))
        nccl = torch.cuda.is_available() and torch.distributed.is_nccl_available()
        backend = "nccl" if nccl else "gloo"
        reason = (
            "" if nccl else "NCCL not available: no GPU visible or torch without NCCL; used gloo"
        )
        _rank_main(rank, world, local, out_dir, select, method, backend, reason, "env://", stdout)
        return 0
    backend, world, reason = choose_backend()
    import torch.multiprocessing as tmp

    init = f"tcp://127.0.0.1:{_free_port()}"
    tmp.spawn(
        _spawned,
        args=(world, out_dir, tuple(select), method, backend, reason, init, stdout),
        nprocs=world,
        join=True,
    )
    return 0
