"""NCCL and CUDA environment as the workers see it: shared by the ``nccl_env`` probe and ``forensics env``.

Owns ``collect`` (start fresh worker processes the way the user's launcher
does and read their environment), ``data`` (the probe's document), ``entries``
(the workers of a data section, as every judge walks them), ``judge``
(which variable changed, which one the workers never saw), ``nccllog``
(parsing ``NCCL_DEBUG=INFO`` output) and ``workers/`` (the tiny
standard-library entry points run in those processes).

May import ``forensics.model``, ``procgroup``, ``redact``, ``errors`` and ``forensics.__version__``;
never a probe, ``render`` or ``cli``.
"""
