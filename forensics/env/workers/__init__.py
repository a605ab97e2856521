"""Small entry points that forensics starts in fresh processes (``python -m forensics.env.workers.<name>``).

Modules: ``envdump`` (the environment a worker sees, under each start method),
``ncclinit`` (one rank's NCCL init and all-reduce), ``binding`` (a rank's CPU affinity,
memory policy and GPU NUMA node) and ``record`` (the record a worker writes).

They import only the standard library at module level, so a fresh worker
costs one interpreter start and nothing more (``binding`` reads ``forensics.gpu.pci`` lazily).
"""
