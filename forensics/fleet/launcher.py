"""Where this process sits in a distributed job: rank, world size, local rank, node.

Read from the variables the launcher sets (no launcher of our own):

| launcher | rank | world size | local rank | node index | node name |
| --- | --- | --- | --- | --- | --- |
| torchrun / torch.distributed (env://) | ``RANK`` | ``WORLD_SIZE`` | ``LOCAL_RANK`` | ``GROUP_RANK`` or ``NODE_RANK`` | hostname |
| Slurm ``srun`` | ``SLURM_PROCID`` | ``SLURM_NTASKS`` | ``SLURM_LOCALID`` | ``SLURM_NODEID`` | ``SLURMD_NODENAME`` |
| Open MPI ``mpirun`` | ``OMPI_COMM_WORLD_RANK`` | ``OMPI_COMM_WORLD_SIZE`` | ``OMPI_COMM_WORLD_LOCAL_RANK`` | - | hostname |
| MPICH / Intel MPI (PMI) | ``PMI_RANK`` | ``PMI_SIZE`` | ``MPI_LOCALRANKID`` | - | hostname |

``RANK``/``WORLD_SIZE`` win when set (torchrun under srun sets both). Local
world size: ``LOCAL_WORLD_SIZE``, ``SLURM_NTASKS_PER_NODE`` (a plain number),
``OMPI_COMM_WORLD_LOCAL_SIZE`` or ``MPI_LOCALNRANKS``. ``MASTER_ADDR`` and
``MASTER_PORT`` name the c10d store (torchrun sets them; under srun or mpirun
export them, e.g. the first host of ``scontrol show hostnames``).

Two overrides, for containers whose hostnames all look alike and for tests
that play several nodes on one machine:

- ``FORENSICS_FLEET_NODE=NAME``: this process's node name.
- ``FORENSICS_FLEET_RANKS_PER_NODE=N``: pretend each node holds N consecutive
  ranks: local rank ``RANK % N``, node index ``RANK // N``, node name
  ``<hostname>-node<index>`` (unless ``FORENSICS_FLEET_NODE`` is set), local
  world size N. ``torchrun --nproc-per-node 8`` with N=2 plays 4 nodes.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from forensics.errors import BadInputError

NODE_VAR = "FORENSICS_FLEET_NODE"
SPLIT_VAR = "FORENSICS_FLEET_RANKS_PER_NODE"

# launcher -> (rank, world size, local rank, node index, node name, local world size) variable names
_SCHEMES: tuple[tuple[str, tuple[str | None, ...]], ...] = (
    (
        "slurm",
        (
            "SLURM_PROCID",
            "SLURM_NTASKS",
            "SLURM_LOCALID",
            "SLURM_NODEID",
            "SLURMD_NODENAME",
            "SLURM_NTASKS_PER_NODE",
        ),
    ),
    (
        "openmpi",
        (
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            None,
            None,
            "OMPI_COMM_WORLD_LOCAL_SIZE",
        ),
    ),
    ("pmi", ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", None, None, "MPI_LOCALNRANKS")),
)


@dataclass(frozen=True)
class Placement:
    """This process's place in the job.

    Attributes:
        rank: global rank, 0 .. world_size - 1.
        world_size: number of processes in the job.
        local_rank: rank on this node (0 takes the node's snapshot).
        local_world_size: processes on this node, or None when the launcher does not say.
        node: node name (hostname, the launcher's node name, or an override).
        node_index: the launcher's node number, or None.
        hostname: ``socket.gethostname()``, whatever the node name.
        launcher: ``torchrun``, ``env`` (RANK/WORLD_SIZE without torchrun), ``slurm``,
            ``openmpi``, ``pmi`` or ``none`` (a single process).
        master_addr, master_port: the c10d store's address, or None when not set.
        run_id: a job identifier the store keys are prefixed with.
        variables: the launcher variables read, by name (for the record).
    """

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int | None
    node: str
    node_index: int | None
    hostname: str
    launcher: str
    master_addr: str | None
    master_port: int | None
    run_id: str
    variables: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        """All fields, JSON-ready."""
        return asdict(self)


def _int(environ: Mapping[str, str], name: str | None, minimum: int = 0) -> int | None:
    """``environ[name]`` as an int >= minimum, None when unset or empty.

    Raises:
        BadInputError: set but not a whole number >= minimum.
    """
    if name is None or not environ.get(name, "").strip():
        return None
    raw = environ[name].strip()
    if not raw.lstrip("-").isdigit() or int(raw) < minimum:
        raise BadInputError(
            f"${name}={environ[name]!r}: expected a whole number >= {minimum}; the launcher "
            "environment is broken"
        )
    return int(raw)


def detect(environ: Mapping[str, str] | None = None, hostname: str | None = None) -> Placement:
    """Read this process's placement from the launcher's variables (table in the module docstring).

    Args:
        environ: the environment (default ``os.environ``).
        hostname: the host name (default ``socket.gethostname()``).

    Returns:
        the :class:`Placement`; rank 0 of 1 (launcher ``none``) when no launcher variable is set.

    Raises:
        BadInputError: a variable is not a number, the rank is not below the world size, or one
            of ``RANK``/``WORLD_SIZE`` is set without the other (``RANK=0`` or ``WORLD_SIZE=1`` alone
            is a single process).
    """
    env = os.environ if environ is None else environ
    host = hostname or socket.gethostname()
    used: dict[str, str] = {}

    def take(name: str | None, minimum: int = 0) -> int | None:
        v = _int(env, name, minimum)
        if v is not None and name is not None:
            used[name] = env[name]
        return v

    node_name = None
    node_index = None
    half = [n for n in ("RANK", "WORLD_SIZE") if env.get(n, "").strip()]
    if len(half) == 1 and env[half[0]].strip() not in ("0" if half[0] == "RANK" else "1",):
        # one of the pair alone: a job whose launcher lost the other one; taken for a single process,
        # every rank would write a fleet file of its own claiming to be rank 0
        other = "WORLD_SIZE" if half[0] == "RANK" else "RANK"
        raise BadInputError(
            f"${half[0]}={env[half[0]]!r} is set but ${other} is not; the launcher environment is "
            f"broken (torchrun sets both; under srun or mpirun set neither, or both)"
        )
    if "RANK" in env and "WORLD_SIZE" in env:
        launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
        rank, world = take("RANK"), take("WORLD_SIZE", 1)
        local = take("LOCAL_RANK")
        local_world = take("LOCAL_WORLD_SIZE", 1)
        node_index = take("GROUP_RANK")
        if node_index is None:
            node_index = take("NODE_RANK")
        if "SLURMD_NODENAME" in env:
            node_name = env["SLURMD_NODENAME"]
    else:
        launcher, rank, world, local, local_world = "none", 0, 1, 0, 1
        for name, (r, w, lr, ni, nn, lw) in _SCHEMES:
            if r in env and w in env:
                launcher = name
                rank, world, local = take(r), take(w, 1), take(lr)
                node_index = take(ni)
                local_world = take(lw, 1) if lw and env.get(lw, "").strip().isdigit() else None
                node_name = env.get(nn) if nn else None
                break
    assert rank is not None and world is not None
    from forensics.fleet.document import MAX_WORLD_SIZE

    if world > MAX_WORLD_SIZE:
        raise BadInputError(
            f"world size {world:,} ({', '.join(sorted(used))}) is beyond any job ({MAX_WORLD_SIZE:,} "
            "ranks at most); the launcher environment is broken"
        )
    if rank >= world:
        raise BadInputError(
            f"rank {rank} is not below the world size {world} ({', '.join(sorted(used))}); the "
            "launcher environment is broken"
        )
    split = _int(env, SPLIT_VAR, 1)
    if split is not None:
        used[SPLIT_VAR] = env[SPLIT_VAR]
        local, node_index, local_world = rank % split, rank // split, split
        node_name = f"{host}-node{node_index}"
    if local is None:
        local = 0 if world == 1 else None
    if local is None:
        raise BadInputError(
            f"{launcher}: rank {rank} of {world} but no local rank (LOCAL_RANK, SLURM_LOCALID, "
            "OMPI_COMM_WORLD_LOCAL_RANK); set LOCAL_RANK so one process per node takes its snapshot"
        )
    if env.get(NODE_VAR, "").strip():
        node_name = env[NODE_VAR].strip()
        used[NODE_VAR] = node_name
    port = _int(env, "MASTER_PORT", 1)
    return Placement(
        rank=rank,
        world_size=world,
        local_rank=local,
        local_world_size=local_world,
        node=node_name or host,
        node_index=node_index,
        hostname=host,
        launcher=launcher,
        master_addr=env.get("MASTER_ADDR") or None,
        master_port=port,
        run_id=_run_id(env),
        variables=used,
    )


def _run_id(env: Mapping[str, str]) -> str:
    """A job identifier: torchelastic's run id and restart count, Slurm's job and step, or ``job``."""
    if "TORCHELASTIC_RUN_ID" in env:
        return f"{env['TORCHELASTIC_RUN_ID']}.{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    if "SLURM_JOB_ID" in env:
        return f"slurm-{env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID', '0')}"
    return "job"
