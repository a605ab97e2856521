"""The workers of an ``nccl_env`` data section, one list for every judge and renderer that walks them.

Pure (no I/O, standard library only), so the judges (:mod:`forensics.env.judge`,
:mod:`forensics.env.transport`) and :mod:`forensics.render.env` share it without importing each other.
"""

from __future__ import annotations

from typing import Any


def worker_entries(data: dict[str, Any]):
    """Yield (channel label, worker entry) for every worker of an ``nccl_env`` data section that reported:
    each start method whose ``status`` is ``ok`` (label: the method), then each rank of ``launcher`` and
    ``nccl_init`` (label: ``launcher rank 0``, ``nccl-init rank 1``)."""
    for method, entry in (data.get("start_methods") or {}).items():
        if isinstance(entry, dict) and entry.get("status") == "ok":
            yield method, entry
    for key, label in (("launcher", "launcher"), ("nccl_init", "nccl-init")):
        sec = data.get(key)
        if isinstance(sec, dict):
            ranks = sec.get("ranks")
            for i, rank in enumerate(ranks if isinstance(ranks, list) else []):
                if not isinstance(rank, dict):
                    continue
                r = rank.get("rank")
                yield f"{label} rank {r if isinstance(r, int) else i}", rank
