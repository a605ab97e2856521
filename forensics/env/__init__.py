"""NCCL and CUDA environment as the workers see it: shared by the ``nccl_env`` probe and ``forensics env``.

Owns ``collect`` (start fresh worker processes the way the user's launcher
does and read their environment), ``data`` (the probe's document), ``entries``
(the workers of a data section, as every judge walks them), ``judge``
(which variable changed, which one the workers never saw), ``nccllog``
(parsing ``NCCL_DEBUG=INFO`` output), ``transport`` (judging how NCCL moved
data), ``numa`` (judging each rank's CPU and memory binding against its GPU)
and ``workers/`` (the tiny standard-library entry points run in those processes).

May import ``forensics.model``, ``procgroup``, ``redact``, ``errors``, ``hypotheses``,
``forensics.__version__`` and ``forensics.gpu.pci`` (a worker's GPU NUMA node, from sysfs);
never a probe, ``render`` or ``cli``.
"""
