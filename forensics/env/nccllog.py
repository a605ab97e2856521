"""Parse what NCCL itself reports with ``NCCL_DEBUG=INFO``.

NCCL prefixes each line with ``host:pid:tid [cudaDev] NCCL INFO``; the rank
of a pid comes from its ``ncclCommInitRankConfig ... rank R nranks N`` line
(proxy threads print another device index, so lines are keyed by pid, not by
the bracket). Facts read, per rank:

- ``version``: ``NCCL version 2.28.9+cuda13.0``.
- ``set_by_environment``: ``NCCL_ALGO set by environment to Ring`` (one
  trailing period, which NCCL prints for some variables, is dropped). NCCL
  prints this for each variable it actually read -- the surest evidence of
  what reached the worker -- including values it took from ``nccl.conf``.
- ``channels``: the channel count (``24 coll channels, ...``, else the
  ``Channel 00/24`` ring lines).
- ``transports``: channel connections per transport (``Channel 00/0 : 0[0] ->
  1[1] via P2P/CUMEM`` counts one for ``P2P/CUMEM``); families kept are
  ``P2P/<kind>``, ``SHM``, ``NET/Socket``, ``NET/IB`` (and any other ``NET/<name>``).
- ``network``: ``Using network Socket`` / ``IB``; ``warnings``: ``NCCL WARN`` lines.

Input is text (the tests pass the real capture in
``tests/fixtures/h200x2/nccl-debug-info.log``); nothing here reads files.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

_PREFIX = re.compile(r"^(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] NCCL (?P<level>INFO|WARN) (?P<msg>.*)$")
_VERSION = re.compile(r"^NCCL version (?P<v>\S+)")
_SET_BY_ENV = re.compile(r"^(?P<name>NCCL_[A-Z0-9_]+) set by environment to (?P<value>.*)$")
_INIT_RANK = re.compile(r"^ncclCommInitRank\w* comm \S+ rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>\d+)")
_COLL_CHANNELS = re.compile(r"^(?P<n>\d+) coll channels")
_RING_CHANNEL = re.compile(r"^Channel \d+/(?P<n>\d+) :")
_CONNECT = re.compile(r"^Channel \d+/\d+ : \S+ -> \S+ (?:\[\w+\] )?via (?P<via>\S+)")
_NETWORK = re.compile(r"^Using network (?P<net>\S+)")


def transport_family(via: str) -> str:
    """``P2P/CUMEM/read`` -> ``P2P/CUMEM``; ``SHM/direct/direct`` -> ``SHM``; ``NET/IB/0/GDRDMA`` -> ``NET/IB``."""
    parts = via.split("/")
    if parts[0] == "SHM":
        return "SHM"
    return "/".join(parts[:2])


def _new_rank() -> dict[str, Any]:
    return {"rank": None, "nranks": None, "cuda_dev": None, "host": None, "pid": None, "version": None,
            "set_by_environment": {}, "channels": None, "transports": {}, "network": None, "warnings": []}


def parse(lines: Iterable[str]) -> dict[str, Any]:
    """Parse NCCL INFO/WARN lines (any order, several processes mixed).

    Args:
        lines: text lines; lines without the NCCL prefix are ignored.

    Returns:
        ``{"version": str | None, "ranks": {"0": {...}, ...}, "unranked": {...}}``:
        per rank (string keys, by the comm-init line) the facts of the module
        docstring; ``ring_channels`` falls back for ``channels``. Processes
        whose rank line is missing are kept under ``unranked`` keyed by
        ``host:pid``. Values absent from the log are ``None``.
    """
    by_pid: dict[str, dict[str, Any]] = {}
    ring_channels: dict[str, int] = {}
    for raw in lines:
        m = _PREFIX.match(raw.rstrip("\n"))
        if not m:
            continue
        key = f"{m['host']}:{m['pid']}"
        rec = by_pid.setdefault(key, _new_rank())
        rec["host"], rec["pid"] = m["host"], int(m["pid"])
        msg = m["msg"].strip()
        if m["level"] == "WARN":
            rec["warnings"].append(msg)
            continue
        if (v := _VERSION.match(msg)):
            rec["version"] = v["v"]
        elif (v := _SET_BY_ENV.match(msg)):
            value = v["value"].strip()
            rec["set_by_environment"][v["name"]] = value[:-1] if value.endswith(".") else value
        elif (v := _INIT_RANK.match(msg)):
            rec["rank"], rec["nranks"], rec["cuda_dev"] = int(v["rank"]), int(v["nranks"]), int(v["dev"])
        elif (v := _COLL_CHANNELS.match(msg)):
            rec["channels"] = int(v["n"])
        elif (v := _CONNECT.match(msg)):
            fam = transport_family(v["via"])
            rec["transports"][fam] = rec["transports"].get(fam, 0) + 1
        elif (v := _RING_CHANNEL.match(msg)):
            ring_channels[key] = int(v["n"])
        elif (v := _NETWORK.match(msg)):
            rec["network"] = v["net"]
    ranks: dict[str, dict[str, Any]] = {}
    unranked: dict[str, dict[str, Any]] = {}
    for key, rec in by_pid.items():
        if rec["channels"] is None and key in ring_channels:
            rec["channels"] = ring_channels[key]
        if rec["rank"] is None:
            unranked[key] = rec
        else:
            ranks[str(rec["rank"])] = rec
    versions = {r["version"] for r in by_pid.values() if r["version"]}
    return {"version": sorted(versions)[0] if len(versions) == 1 else (sorted(versions) or None),
            "ranks": dict(sorted(ranks.items(), key=lambda kv: int(kv[0]))), "unranked": unranked}
