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
- ``network``: ``Using network Socket`` / ``IB``; ``warnings``: ``NCCL WARN`` lines
  (``host:pid:tid [0] bootstrap.cc:45 NCCL WARN msg`` is kept as
  ``bootstrap.cc:45 msg``; NCCL 2.0-2.4 printed ``file:line WARN msg`` without
  the word NCCL);
- ``p2p_failures``: ``Could not enable P2P between dev 1(=1b000) and dev 0(=1a000)``
  (NCCL 2.8-2.11, before it falls back to shared memory).

Forms accepted (real logs in ``tests/fixtures/nccl/``): the ``host:pid:tid``
prefix anywhere in the line (Ray ``(actor pid=N) <time>``, k9s ``│``, CloudWatch
``| <time> |`` and colour-code prefixes are skipped), the bare ``NCCL version
2.7.8+cuda11.1`` line NCCL printed up to 2.21, ``[1] NCCL INFO`` without a host
(2.7), ``Channel 00 :`` without the ``/connIndex`` (up to 2.11, and SHM lines in
2.27), ``[send]``/``[receive]`` tags, and transport names with spaces
(``P2P/direct pointer/read``, ``NET/AWS Libfabric/0``, ``direct shared memory``).
:func:`failures` reads a failed collective as torch reports it
(``NCCL error in: ..., internal error, NCCL version X``, ``ncclInternalError``,
``Last error:``, the watchdog's ``Watchdog caught collective operation timeout``).

Input is text (the tests pass the real capture in
``tests/fixtures/h200x2/nccl-debug-info.log``); nothing here reads files.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

_PREFIX = re.compile(
    r"(?:^|[\s(|\]])(?P<host>[^\s:|()\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?:(?P<src>\S+:\d+) )?NCCL (?P<level>INFO|WARN) (?P<msg>.*)$"
)
_NOHOST = re.compile(
    r"^\s*\[(?P<dev>\d+)\] (?:(?P<src>\S+:\d+) )?NCCL (?P<level>INFO|WARN) (?P<msg>.*)$"
)
_OLD_WARN = re.compile(r"(?:^|\s)(?P<src>[\w./-]+\.(?:cc|h|cu|cpp):\d+) WARN (?P<msg>.*)$")
_BARE_VERSION = re.compile(r"(?:^|\s)NCCL version (?P<v>\d+\.\d+\.\d+\S*)\s*$")
_VERSION = re.compile(r"^NCCL version (?P<v>\S+)")
_SET_BY_ENV = re.compile(r"^(?P<name>NCCL_[A-Z0-9_]+) set by environment to (?P<value>.*)$")
_INIT_RANK = re.compile(
    r"^ncclCommInitRank\w* comm \S+ rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>\d+)"
    r"(?:.*? busId (?P<bus>[0-9a-fA-F]+))?"
)
_COLL_CHANNELS = re.compile(r"^(?P<n>\d+) coll channels")
_RING_CHANNEL = re.compile(r"^Channel \d+/(?P<n>\d+) :")
_CONNECT = re.compile(r"^Channel \d+(?:/\d+)? : \S+ -> \S+ (?:\[\w+\] )?via (?P<via>.+?)\s*$")
_NETWORK = re.compile(r"^Using network (?P<net>\S+)")
_P2P_FAIL = re.compile(r"^Could not enable P2P between dev (?P<a>\S+) and dev (?P<b>\S+)")


def transport_family(via: str) -> str:
    """The transport of one connection line, without its options.

    ``P2P/CUMEM/read`` -> ``P2P/CUMEM``; ``P2P/direct pointer/read`` -> ``P2P/direct pointer``;
    ``SHM/direct/direct`` and NCCL 2.8-2.11's ``direct shared memory`` -> ``SHM``;
    ``NET/IB/0/GDRDMA`` -> ``NET/IB``; ``NET/AWS Libfabric/0`` -> ``NET/AWS Libfabric``.
    """
    via = via.strip()
    if via.startswith("SHM") or via == "direct shared memory":
        return "SHM"
    return "/".join(via.split("/")[:2])


def transport_class(family: str) -> str:
    """``P2P``, ``SHM`` or ``NET`` (anything else as it is): the kind of path a family is."""
    head = family.split("/")[0]
    return head if head in ("P2P", "SHM", "NET") else family


def _new_rank() -> dict[str, Any]:
    return {
        "rank": None,
        "nranks": None,
        "cuda_dev": None,
        "bus_id": None,
        "host": None,
        "pid": None,
        "version": None,
        "set_by_environment": {},
        "channels": None,
        "transports": {},
        "network": None,
        "warnings": [],
        "p2p_failures": [],
    }


def _match(raw: str) -> tuple[str, str, dict[str, Any]] | None:
    """(process key, level, fields) of one NCCL line, or None when it is not one."""
    line = raw.rstrip("\n")
    m = _PREFIX.search(line)
    if m:
        return f"{m['host']}:{m['pid']}", m["level"], m.groupdict()
    m = _NOHOST.match(line)
    if m:
        return "?", m["level"], {**m.groupdict(), "host": None, "pid": None}
    m = _OLD_WARN.search(line)
    if m and "NCCL WARN" not in line:
        return "?", "WARN", {"src": m["src"], "msg": m["msg"], "host": None, "pid": None}
    return None


def parse(lines: Iterable[str]) -> dict[str, Any]:
    """Parse NCCL INFO/WARN lines (any order, several processes mixed).

    Args:
        lines: text lines; lines that are not NCCL's are ignored.

    Returns:
        ``{"version": str | list | None, "ranks": {"0": {...}, ...}, "unranked": {...}}``:
        per rank (string keys, by the comm-init line) the facts of the module
        docstring; ``ring_channels`` falls back for ``channels``. Processes
        whose rank line is missing are kept under ``unranked`` keyed by
        ``host:pid`` (``?`` for lines without a host, NCCL 2.7). The bare
        ``NCCL version`` line (no prefix, up to 2.21) sets the version of
        processes that printed none. Values absent from the log are ``None``.
    """
    by_pid: dict[str, dict[str, Any]] = {}
    ring_channels: dict[str, int] = {}
    bare_versions: list[str] = []
    for raw in lines:
        got = _match(raw)
        if got is None:
            v = _BARE_VERSION.search(raw.rstrip("\n"))
            if v and " NCCL INFO " not in raw:
                bare_versions.append(v["v"])
            continue
        key, level, m = got
        rec = by_pid.setdefault(key, _new_rank())
        if m.get("host"):
            rec["host"], rec["pid"] = m["host"], int(m["pid"])
        msg = m["msg"].strip()
        if level == "WARN":
            rec["warnings"].append(f"{m['src']} {msg}" if m.get("src") else msg)
            continue
        if v := _VERSION.match(msg):
            rec["version"] = v["v"]
        elif v := _SET_BY_ENV.match(msg):
            value = v["value"].strip()
            rec["set_by_environment"][v["name"]] = value[:-1] if value.endswith(".") else value
        elif v := _INIT_RANK.match(msg):
            rec["rank"], rec["nranks"], rec["cuda_dev"] = (
                int(v["rank"]),
                int(v["nranks"]),
                int(v["dev"]),
            )
            rec["bus_id"] = v["bus"]
        elif v := _COLL_CHANNELS.match(msg):
            rec["channels"] = int(v["n"])
        elif v := _CONNECT.match(msg):
            fam = transport_family(v["via"])
            rec["transports"][fam] = rec["transports"].get(fam, 0) + 1
        elif v := _RING_CHANNEL.match(msg):
            ring_channels[key] = int(v["n"])
        elif v := _NETWORK.match(msg):
            rec["network"] = v["net"]
        elif v := _P2P_FAIL.match(msg):
            pair = f"{v['a']} and {v['b']}"
            if pair not in rec["p2p_failures"]:
                rec["p2p_failures"].append(pair)
    if bare_versions:
        for rec in by_pid.values():
            rec["version"] = rec["version"] or bare_versions[0]
    ranks: dict[str, dict[str, Any]] = {}
    unranked: dict[str, dict[str, Any]] = {}
    for key, rec in by_pid.items():
        if rec["channels"] is None and key in ring_channels:
            rec["channels"] = ring_channels[key]
        if rec["rank"] is None:
            unranked[key] = rec
        else:
            ranks[str(rec["rank"])] = rec
    versions = {r["version"] for r in by_pid.values() if r["version"]} or set(bare_versions)
    return {
        "version": sorted(versions)[0] if len(versions) == 1 else (sorted(versions) or None),
        "ranks": dict(sorted(ranks.items(), key=lambda kv: int(kv[0]))),
        "unranked": unranked,
    }


_NCCL_ERROR = re.compile(
    r"NCCL error in: (?P<where>[^,]+), (?P<what>[^,]+?)(?: \(run with [^)]*\))?, "
    r"NCCL version (?P<v>\S+)"
)
_NCCL_CODE = re.compile(
    r"\b(?P<code>nccl(?:InternalError|UnhandledCudaError|SystemError|InvalidArgument|InvalidUsage|"
    r"RemoteError|InProgress))\b"
)
_WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), "
    r"OpType=(?P<op>\w+).*?Timeout\(ms\)=(?P<timeout>\d+)\) ran for (?P<ran>\d+) milliseconds"
)
_LAST_ERROR = re.compile(r"Last error:\s*$")
_RANK_TAG = re.compile(r"^\s*(?:\[rank\d+\]:\s*)")


def failures(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Failed collectives as torch reports them, in text order (one entry per distinct failure).

    Args:
        lines: an exception message or stderr lines (``[rankN]:`` tags are ignored).

    Returns:
        entries ``{"kind": "nccl_error", "what": "internal error", "nccl_version",
        "code": "ncclInternalError", "last_error": "Bootstrap : no socket interface
        found"}`` or ``{"kind": "watchdog_timeout", "op": "ALLREDUCE", "seq": 1580,
        "timeout_ms": 600000, "ran_ms": 600060}``; keys whose text is absent are left out.
        Source of the forms: torch's ProcessGroupNCCL messages (real ones in
        ``tests/fixtures/nccl/torch-*.log``).
    """
    text = [_RANK_TAG.sub("", ln.rstrip("\n")) for ln in lines]
    out: list[dict[str, Any]] = []
    seen: set = set()
    for i, ln in enumerate(text):
        m = _NCCL_ERROR.search(ln)
        if m:
            entry: dict[str, Any] = {
                "kind": "nccl_error",
                "what": m["what"].strip(),
                "nccl_version": m["v"],
            }
            for nxt in text[i + 1 : i + 4]:
                c = _NCCL_CODE.search(nxt)
                if c and "code" not in entry:
                    entry["code"] = c["code"]
            for j in range(i + 1, min(i + 5, len(text) - 1)):
                if _LAST_ERROR.search(text[j]) and text[j + 1].strip():
                    entry["last_error"] = text[j + 1].strip()[:300]
                    break
            key = tuple(sorted(entry.items()))
            if key not in seen:
                seen.add(key)
                out.append(entry)
            continue
        m = _WATCHDOG.search(ln)
        if m:
            entry = {
                "kind": "watchdog_timeout",
                "op": m["op"],
                "seq": int(m["seq"]),
                "timeout_ms": int(m["timeout"]),
                "ran_ms": int(m["ran"]),
            }
            key = (entry["op"], entry["seq"])
            if key not in seen:
                seen.add(key)
                out.append(entry)
    return out


BENIGN_WARNINGS = (
    (
        "Failed to open libibverbs",
        "no InfiniBand verbs library: NCCL uses sockets (normal on hosts without IB)",
    ),
    ("No plugin found", "no network plugin: NCCL uses its internal one"),
    ("Could not find: libnccl-net", "no network plugin: NCCL uses its internal one"),
)
"""WARN texts NCCL prints on healthy hosts without InfiniBand (NVIDIA/nccl#857): (substring, meaning)."""

WARNING_KINDS = (
    ("Cuda failure 'out of memory'", "GPU out of memory inside NCCL"),
    ("out of memory", "out of memory inside NCCL"),
    ("Cuda failure", "a CUDA call inside NCCL failed"),
    ("Allocation failed", "NCCL could not allocate a buffer"),
    ("shared memory segment", "/dev/shm too small or not shared (SHM transport)"),
    ("/dev/shm", "/dev/shm too small or not shared (SHM transport)"),
    ("Connection closed", "a peer closed its connection (it crashed or was killed)"),
    ("socketStartConnect", "could not connect to a peer (network, firewall, wrong interface)"),
    ("Connect to", "could not connect to a peer (network, firewall, wrong interface)"),
    ("Got completion", "InfiniBand completion error (link, fabric or NIC problem)"),
    ("iommu", "IOMMU not in passthrough mode (RCCL's check)"),
    ("no socket interface", "NCCL found no usable network interface (NCCL_SOCKET_IFNAME?)"),
    ("Socket creation failed", "NCCL could not open a socket"),
)
"""WARN texts that mean trouble, first match wins: (substring, meaning)."""


def classify_warning(text: str) -> tuple[bool, str]:
    """``(benign, meaning)`` of one stored WARN line (tables :data:`BENIGN_WARNINGS`, :data:`WARNING_KINDS`)."""
    low = text.lower()
    for needle, meaning in BENIGN_WARNINGS:
        if needle.lower() in low:
            return True, meaning
    for needle, meaning in WARNING_KINDS:
        if needle.lower() in low:
            return False, meaning
    return False, "an NCCL warning"
