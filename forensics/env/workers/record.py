"""The envdump record: what one process sees of its environment (standard library only).

Shared by the :mod:`forensics.env.workers.envdump` entry point and the
NCCL-initialising ranks of :mod:`forensics.env.workers.ncclinit`, which both
write it; neither imports the other's caller. See ``envdump`` for the fields.
"""

from __future__ import annotations

import json
import os
import socket
import sys

SCHEMA = "forensics.envdump/1"
OUT_VAR = "FORENSICS_ENVDUMP_OUT"
STDOUT_MARKER = "FORENSICS_ENVDUMP_V1 "

DEFAULT_SELECT: tuple[str, ...] = (
    "NCCL_",
    "CUDA_",
    "CUBLAS_",
    "CUDNN_",
    "TORCH_",
    "PYTORCH_",
    "NVIDIA_",
    "NVSHMEM_",
    "OMP_",
    "MKL_",
    "UCX_",
    "FI_",
    "GLOO_",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PYTHONPATH",
)
"""The variables recorded by default: an entry ending in ``_`` is a prefix, any other an exact name."""

RANK_VARS: tuple[str, ...] = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "NODE_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK",
    "PMI_SIZE",
)
"""Variables a launcher sets per rank: recorded apart and never judged as propagation problems."""


def selected(name: str, select: tuple[str, ...] | list[str]) -> bool:
    """True if variable ``name`` matches ``select`` (prefixes end in ``_``, others are exact names)."""
    return any(name.startswith(s) if s.endswith("_") else name == s for s in select)


def filter_env(environ, select) -> dict[str, str]:
    """The selected variables of a mapping, sorted by name."""
    return {k: environ[k] for k in sorted(environ) if selected(k, select)}


def read_exec_env() -> dict[str, str] | None:
    """This process's environment at exec time.

    Returns:
        ``{name: value}`` from ``/proc/self/environ`` (Linux; what the parent or
        launcher passed, before start-up hooks changed ``os.environ``), or
        ``None`` when it cannot be read.
    """
    try:
        with open("/proc/self/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    out = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            out[name.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "replace")
    return out


def find_hooks() -> dict:
    """Where this interpreter's start-up hooks are.

    Returns:
        ``sitecustomize`` / ``usercustomize``: the file of the module the
        interpreter imported at start-up, or ``None`` when none was imported;
        ``pth_files``: every ``*.pth`` file in the site-packages folders
        (``site.getsitepackages()`` and the user site), which ``site`` executes
        or adds to ``sys.path``; ``user_site``: the user site folder and
        whether it is enabled; ``flags``: ``-S``/``-I``/``-E`` as
        ``sys.flags`` reports them.
    """
    import site

    def _mod_file(name: str):
        mod = sys.modules.get(name)
        return getattr(mod, "__file__", None) if mod is not None else None

    dirs = []
    try:
        dirs.extend(site.getsitepackages())
    except AttributeError:  # some embedded builds lack it
        pass
    user_site = getattr(site, "USER_SITE", None)
    if user_site:
        dirs.append(user_site)
    pth = []
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        pth.extend(os.path.join(d, n) for n in names if n.endswith(".pth"))
    return {
        "sitecustomize": _mod_file("sitecustomize"),
        "usercustomize": _mod_file("usercustomize"),
        "pth_files": pth,
        "user_site": {"path": user_site, "enabled": bool(site.ENABLE_USER_SITE)},
        "flags": {
            "no_site": bool(sys.flags.no_site),
            "isolated": bool(sys.flags.isolated),
            "ignore_environment": bool(sys.flags.ignore_environment),
        },
    }


def _int_or_none(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def snapshot(select=DEFAULT_SELECT, method: str = "", rank=None) -> dict:
    """Build this process's record.

    Args:
        select: names and prefixes (ending in ``_``) to record.
        method: label of how this process was started (``spawn``, ``launcher``...).
        rank: the rank when the caller knows it; else ``int($RANK)`` or ``None``.

    Returns:
        the record of the module docstring. Sources: ``os.environ``,
        ``/proc/self/environ``, ``sys``/``site`` (hooks), ``socket.gethostname()``;
        ``binding``: CPU affinity and NUMA binding (:mod:`forensics.env.workers.binding`).
    """
    select = tuple(select)
    at_exec = read_exec_env()
    env = dict(os.environ)
    return {
        "schema": SCHEMA,
        "method": method,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "rank": rank if rank is not None else _int_or_none(env.get("RANK")),
        "local_rank": _int_or_none(env.get("LOCAL_RANK")),
        "world_size": _int_or_none(env.get("WORLD_SIZE")),
        "env": filter_env(env, select),
        "env_at_exec": filter_env(at_exec, select) if at_exec is not None else None,
        "rank_vars": {k: env[k] for k in RANK_VARS if k in env},
        "hooks": find_hooks(),
        "python": {"executable": sys.executable, "version": sys.version.split()[0]},
        "binding": _binding(),
    }


def _binding() -> dict:
    """:func:`forensics.env.workers.binding.read_binding`, never raising (a worker must still report)."""
    from forensics.env.workers.binding import read_binding

    try:
        return read_binding()
    except Exception as exc:  # noqa: BLE001 - an odd /proc must not lose the record
        return {"missing": "error", "detail": f"{type(exc).__name__}: {exc}"[:200]}


def write_record(record: dict, path: str) -> None:
    """Write ``record`` as JSON to ``path`` (temp file + rename, so a reader never sees half a file)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    os.replace(tmp, path)


def record_path(out_dir: str) -> str:
    """The file name one process writes in ``out_dir``: ``envdump-<host>-<pid>.json``."""
    host = "".join(c if c.isalnum() or c in "-." else "_" for c in socket.gethostname())
    return os.path.join(out_dir, f"envdump-{host}-{os.getpid()}.json")
