"""Worker entry point: write what this process sees of its environment as JSON.

Run as ``python -m forensics.env.workers.envdump --out FILE`` (or ``--out-dir
DIR``; or the ``FORENSICS_ENVDUMP_OUT`` variable naming the file), or call
:func:`dump_to_file` (or, ending the process after, :func:`dump_and_exit`) as a multiprocessing target. The NCCL environment probe
starts it through every start method it checks (multiprocessing spawn and
forkserver, a plain subprocess, torch.multiprocessing.spawn) and under the
user's launcher (``torchrun``, ``srun``, a wrapper script), one file per
process. Only the standard library is imported here unless ``--nccl-init`` or
``--via-torch-spawn`` is given.

The record (one JSON object, schema ``forensics.envdump/1``):

- ``env``: the selected variables (:data:`DEFAULT_SELECT`: names ending in
  ``_`` are prefixes) as this process sees them in ``os.environ``, raw
  (the parent redacts them; files go to a private folder and are deleted).
- ``env_at_exec``: the same selection read from ``/proc/self/environ``, i.e.
  the environment the process was started with, before ``sitecustomize``,
  ``usercustomize`` or ``.pth`` hooks ran; ``null`` where unreadable.
- ``rank_vars``: launcher variables (RANK, WORLD_SIZE, SLURM_PROCID...).
- ``hooks``: where the interpreter's start-up hooks are (:func:`find_hooks`).
- ``host``, ``pid``, ``rank``, ``method``, ``python``: identity.
"""

from __future__ import annotations

import json
import os
import sys

from forensics.env.workers.record import (  # noqa: F401  (re-exported)
    DEFAULT_SELECT,
    OUT_VAR,
    RANK_VARS,
    SCHEMA,
    STDOUT_MARKER,
    filter_env,
    find_hooks,
    read_exec_env,
    record_path,
    selected,
    snapshot,
    write_record,
)


def dump_to_file(path: str, select=DEFAULT_SELECT, method: str = "", rank=None) -> None:
    """Multiprocessing target: write this process's record to ``path``."""
    write_record(snapshot(select, method, rank), path)


def dump_and_exit(path: str, select=DEFAULT_SELECT, method: str = "") -> None:
    """Multiprocessing target of the nccl_env probe's ``spawn`` and ``forkserver`` workers: write the
    record (closed and renamed into place), then end the process with ``os._exit(0)``.

    A ``spawn`` worker otherwise returns into ``multiprocessing.spawn`` and tears its interpreter
    down while the probe waits for it to exit (docs/benchmarks.md, 'measured phase by phase'); ``fork`` and
    ``forkserver`` children already end with ``os._exit``. The worker holds nothing else to flush
    but its standard streams, which may be absent (``None``) or closed when forensics was started
    without them: then they are passed over, as multiprocessing does, and the exit status is 0.
    """
    write_record(snapshot(select, method, None), path)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):  # no such stream, closed, or its pipe is gone
            pass
    os._exit(0)


def _torch_spawn_target(
    index: int, path: str, select
) -> None:  # pragma: no cover - runs in a grandchild
    dump_to_file(path, select, "torch_spawn")


def via_torch_spawn(path: str, select) -> None:
    """Start one worker with ``torch.multiprocessing.spawn`` and let it write its record (imports torch)."""
    import torch.multiprocessing as tmp

    tmp.spawn(_torch_spawn_target, args=(path, tuple(select)), nprocs=1, join=True)


def main(argv=None) -> int:
    """Command line: ``--out FILE | --out-dir DIR``, ``--select A,B_``, ``--method NAME``,
    ``--nccl-init``, ``--via-torch-spawn``, ``--stdout`` (also print the record on one marked line)."""
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m forensics.env.workers.envdump", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "--out", default=os.environ.get(OUT_VAR), help=f"file to write (default: ${OUT_VAR})"
    )
    p.add_argument(
        "--out-dir", help="folder to write envdump-<host>-<pid>.json in (one file per process)"
    )
    p.add_argument(
        "--select", default=",".join(DEFAULT_SELECT), help="comma-separated names and prefixes_"
    )
    p.add_argument(
        "--method", default="subprocess", help="label of the start method, stored in the record"
    )
    p.add_argument(
        "--nccl-init", action="store_true", help="also initialise NCCL (gloo without GPUs)"
    )
    p.add_argument(
        "--via-torch-spawn",
        action="store_true",
        help="dump from a torch.multiprocessing.spawn child",
    )
    p.add_argument(
        "--stdout", action="store_true", help="also print the record on stdout after a marker"
    )
    args = p.parse_args(argv)
    select = tuple(s for s in args.select.split(",") if s)
    if not args.out and not args.out_dir:
        p.error(f"give --out FILE, --out-dir DIR or set {OUT_VAR}")
    if args.nccl_init:
        from forensics.env.workers.ncclinit import run

        return run(
            args.out_dir or os.path.dirname(os.path.abspath(args.out)),
            select,
            args.method,
            stdout=args.stdout,
        )
    path = args.out or record_path(args.out_dir)
    if args.via_torch_spawn:
        via_torch_spawn(path, select)
        return 0
    record = snapshot(select, args.method)
    write_record(record, path)
    if args.stdout:
        sys.stdout.write(STDOUT_MARKER + json.dumps(record) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
