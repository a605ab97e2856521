"""Built-in probes, one module or package per probe, installed as the package ``forensics_probes``.

Each is registered in setup.cfg under the entry-point group ``forensics.probes``
exactly as a third-party probe would be; the core never imports them by name.

Modules: ``host`` (CPU, memory, NUMA, cgroup limits), ``software`` (Python and its packages),
``nccl_env`` (the NCCL/CUDA environment the workers see, through ``forensics.env``); packages
``git/``, ``gpu/`` and ``libs/`` (each ``__init__`` lists its modules).

May import the core (``nccl_env`` also ``forensics.env``; ``gpu`` also ``forensics.gpu``); never
another probe, ``diff``, ``bench``, ``render`` or ``cli``.
"""
