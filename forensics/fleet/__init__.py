"""Fleet mode: one snapshot per node of a distributed job, gathered, and the outliers found.

Modules (documented in ``docs/fleet.md``):

- ``launcher``: who am I in the job: RANK / WORLD_SIZE / LOCAL_RANK from torchrun,
  Slurm (``SLURM_*``), Open MPI (``OMPI_COMM_WORLD_*``) or PMI, and the node name.
- ``gather``: every rank's record to rank 0 through torch.distributed's c10d store
  (no GPU collective), with a deadline; or one file per node in a shared ``--out-dir``.
- ``rankbench``: the per-GPU canary components one rank runs in-process (torch).
- ``document``: the ``forensics.fleet/1`` file (one node per line) and the folder layout.
- ``nodes``: plain node snapshots (``srun forensics snapshot -o snaps/%N.json``, pdsh, ansible)
  read as a fleet, one record per node.
- ``features``: the facts judged across the fleet, read from node snapshots and rank records.
- ``outliers``: the robust rules (majority grouping; median/MAD or ratio to best per GPU model).
- ``report``: the data objects of a fleet report; ``render`` and ``prom`` print them.
- ``compare``: two fleets (or a fleet and a snapshot): what changed fleet-wide and what on a few nodes.
- ``synth``: a synthetic fleet built from real snapshots, for tests and ``make bench``.
- ``snapshot``: one rank's part of ``forensics fleet snapshot``, and rank 0's gather.

May import the core, ``forensics.bench`` (the canary's sizes and worker, for ``rankbench``),
``forensics.env`` (the workers' record), ``forensics.gpu``, and ``forensics.diff.files`` (a
snapshot side of a comparison is read as ``diff`` reads its sides); never the rest of ``diff``,
``render``, ``cli`` or a probe. Nothing here is imported by the single-machine commands.
"""
