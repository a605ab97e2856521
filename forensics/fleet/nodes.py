"""Plain node snapshots read as a fleet: ``fleet report DIR`` / ``FILE...`` and ``diff DIR DIR``.

Clusters gather with what they have: ``srun --ntasks-per-node 1 forensics snapshot -o
snaps/%N.json``, pdsh, ansible. Each file is a whole ``forensics.snapshot/1`` document
(``.json``, ``.yaml``/``.yml``, or gzip-compressed JSON, ``.json.gz``). Each becomes the record of
one node (:func:`record`), the same record a fleet's local rank 0 sends, so the fleet
report, its rules and ``--baseline``/``diff`` read it unchanged:

- the node's name is the snapshot's ``machine.hostname`` (``socket.gethostname`` when it was
  taken), else the file name without its suffixes; a second file naming a host already read
  is kept as ``<host> (<file name>)`` and named in the report's notes;
- its "rank" is the process that ran ``forensics snapshot``: the launching environment's
  NCCL/CUDA/torch variables (``nccl_env`` probe, ``parent.env``) are judged per node;
- GPU samples come from ``--sample`` (``gpu`` probe, ``sample``) and the canary's telemetry
  (``--bench``, ``bench.telemetry``), whichever saw a GPU busy longer;
- a probe that failed or timed out is an error line of the node.

Files are read one at a time and dropped once their facts are taken (1,000 documents are
never held at once). A file that is not a readable snapshot (damaged, cut short, a foreign
document) is skipped and listed among the missing nodes with its reason; with
``expect_nodes`` or a ``hostfile`` the nodes that sent no file are missing too.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Iterator

from forensics.docfile import MAX_FILE_BYTES, gunzip, is_yaml, read_document
from forensics.errors import BadInputError
from forensics.fleet.document import (
    GZIP_MAGIC,
    MAX_WORLD_SIZE,
    RECORD_SCHEMA,
    Fleet,
    header,
    is_fleet_file,
)

SUFFIXES = (".json", ".yaml", ".yml", ".json.gz")
UNIT = "node snapshot"
"""What one record stands for (the report says "998 of 1,000 node snapshots read")."""
_ERROR_STATUSES = ("failed", "timeout")


def _suffix(path: Path) -> str:
    name = path.name.lower()
    return next((s for s in sorted(SUFFIXES, key=len, reverse=True) if name.endswith(s)), "")


def stem(path: Path) -> str:
    """The file name without its snapshot suffixes: ``snaps/gpu-a17.json.gz`` -> ``gpu-a17``."""
    suf = _suffix(path)
    return path.name[: -len(suf)] if suf else path.name


def candidates(folder: Path) -> list[Path]:
    """The entries of ``folder`` (not its subfolders) that may be node snapshots, by name, sorted.

    An entry is kept by its name (a snapshot suffix, not hidden) when it is a regular file or a symbolic
    link whose target is gone or that loops: reading such a link names the problem among the missing
    nodes instead of the node vanishing unseen. Folders, FIFOs and devices are left out.
    """
    with os.scandir(folder) as entries:
        return sorted(
            Path(e.path)
            for e in entries
            if _suffix(Path(e.name)) and not e.name.startswith(".") and _maybe_snapshot(e)
        )


def _maybe_snapshot(entry: os.DirEntry) -> bool:
    """A regular file (through links), or a link that leads nowhere (gone, or a loop); never a folder,
    a FIFO or a device (opening a FIFO would wait for a writer)."""
    if entry.is_symlink() and not os.path.exists(entry.path):  # os.path.exists never raises
        return True
    try:
        return entry.is_file()
    except OSError:
        return False


def is_node_folder(path: Path) -> bool:
    """True if ``path`` is a folder holding node snapshot files: no ``rank-*.json`` fleet record, and a
    ``.json``/``.yaml``/``.json.gz`` file that is not a fleet file (a folder holding only ``fleet.json`` is not)."""
    path = Path(path)
    try:
        return (
            path.is_dir()
            and not is_fleet_file(path)
            and any(not is_fleet_file(p) for p in candidates(path))
        )
    except OSError:
        return False


def read(path: Path) -> dict[str, Any]:
    """One node snapshot, parsed and validated (:func:`forensics.snapshot.validate`), not redacted
    (the fleet report redacts what it reports).

    Read as the records of a fleet file are: the file's bytes straight into ``json.loads`` (gunzipped
    first when they start with gzip's magic number); a file that does not parse that way (YAML, a
    byte-order mark, damage) goes through :func:`forensics.docfile.read_document`, whose one-line
    errors name the problem.

    Raises:
        BadInputError: missing, unreadable, damaged, cut short, foreign or newer-schema file (one line).
    """
    from forensics.snapshot import validate

    path = Path(path)
    doc = None
    try:
        if path.stat().st_size <= MAX_FILE_BYTES and path.is_file():
            raw = path.read_bytes()
            if raw[:2] == GZIP_MAGIC:
                doc = _gunzip(raw, path)
            elif not is_yaml(path):
                doc = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        doc = read_document(path, "snapshot")  # names the problem (or reads YAML)
    schema = str(doc.get("schema", ""))
    if schema.startswith("forensics.fleet"):
        raise BadInputError(
            f"{path}: a fleet file, not a node snapshot; give it alone to 'fleet report'"
        )
    return validate(doc, path)


def _gunzip(raw: bytes, path: Path) -> dict[str, Any]:
    data = gunzip(raw, path)
    try:
        doc = json.loads(data)
    except UnicodeDecodeError:
        raise BadInputError(
            f"{path}: not UTF-8 text once uncompressed; is this really a snapshot?"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise BadInputError(
            f"{path}: invalid JSON once uncompressed ({exc}); the file is damaged or truncated"
        ) from None
    if not isinstance(doc, dict):
        raise BadInputError(
            f"{path}: not a snapshot (a JSON {type(doc).__name__} once uncompressed, not a mapping)"
        )
    return doc


def _busy(entry: Any) -> int:
    n = entry.get("busy_samples") if isinstance(entry, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else -1


def telemetry(snap: dict[str, Any]) -> dict[str, Any] | None:
    """The GPU samples of a node snapshot, by UUID: ``--sample`` (``probes.gpu.data.sample``) and the
    canary's (``bench.telemetry``), the entry with more busy samples for a GPU both sampled; None without."""
    gpu = (snap.get("probes") or {}).get("gpu") or {}
    sample = (
        ((gpu.get("data") or {}).get("sample") or {}).get("gpus")
        if isinstance(gpu.get("data"), dict)
        else None
    )
    bench = snap.get("bench")
    canary = (
        (bench.get("telemetry") or {}).get("gpus")
        if isinstance(bench, dict) and isinstance(bench.get("telemetry"), dict)
        else None
    )
    merged: dict[str, Any] = {}
    for source in (sample, canary):
        if isinstance(source, dict):
            for uuid, entry in source.items():
                if _busy(entry) > _busy(merged.get(uuid)):
                    merged[uuid] = entry
    return {"gpus": merged} if merged else None


def record(
    snap: dict[str, Any], *, node: str, rank: int, world_size: int, source: str = ""
) -> dict[str, Any]:
    """The fleet record (``forensics.fleet-record/1``) of one plain node snapshot: rank ``rank`` of
    ``world_size``, local rank 0, its launching process's variables as the rank's, the snapshot
    itself, its GPU samples as telemetry, each failed or timed-out probe as an error."""
    from forensics.env.workers.record import RANK_VARS

    probes = snap.get("probes") if isinstance(snap.get("probes"), dict) else {}
    nccl = probes.get("nccl_env") if isinstance(probes.get("nccl_env"), dict) else {}
    env = (
        (((nccl.get("data") or {}).get("parent") or {}).get("env") or {})
        if nccl.get("status") in ("ok", "partial")
        else {}
    )
    env = (
        {k: v for k, v in env.items() if isinstance(v, str) and k not in RANK_VARS}
        if isinstance(env, dict)
        else {}
    )
    errors = [
        {
            "where": f"probe {name}",
            "error": f"{sec.get('status')}: {sec.get('reason') or 'no reason given'}",
        }
        for name, sec in probes.items()
        if isinstance(sec, dict) and sec.get("status") in _ERROR_STATUSES
    ]
    return {
        "schema": RECORD_SCHEMA,
        "created": str(snap.get("created", "")),
        "label": str(snap.get("label") or ""),
        "rank": rank,
        "local_rank": 0,
        "world_size": world_size,
        "local_world_size": 1,
        "node": node,
        "hostname": node,
        "launcher": "snapshot files",
        "run_id": "",
        "env": env,
        "gpu": None,
        "bench": None,
        "snapshot": snap,
        "telemetry": telemetry(snap),
        "errors": errors,
        "source": source,
    }


def hostname(snap: dict[str, Any], path: Path) -> str:
    """``machine.hostname`` of a snapshot, else the file name without its suffixes."""
    name = (
        (snap.get("machine") or {}).get("hostname")
        if isinstance(snap.get("machine"), dict)
        else None
    )
    return name.strip() if isinstance(name, str) and name.strip() else stem(path)


_HOSTNAME = re.compile(r"[A-Za-z0-9_\[][A-Za-z0-9_.:%@\[\]-]{0,254}")
"""A host's name as hostfiles write it: letters, digits, ``-_.``; an address (``10.0.0.7``, ``[fe80::1%eth0]``),
``user@host``."""


def _short(name: str) -> str:
    return name.split(".", 1)[0].lower()


def read_hostfile(path: Path) -> list[str]:
    """Hostnames of a hostfile: one per line (``scontrol show hostnames``, pdsh ``-w`` lists, an MPI
    hostfile's first column: ``gpu-a17 slots=8``); ``#`` comments and blank lines skipped, order kept.

    A first word that cannot be a host's name (a binary file, a snapshot or a fleet report given by
    mistake: ``{``, ``"schema":``) is refused rather than counted as a node that sent nothing.

    Raises:
        BadInputError: the file is missing, unreadable, binary, names no host, or a line's first word
            is not a hostname.
    """
    if Path(path).exists() and not Path(path).is_file() and not Path(path).is_dir():
        raise BadInputError(  # a device or a pipe: /dev/zero was read until memory ran out
            f"{path}: not a regular file (a device or a pipe); give a hostfile, one hostname per line "
            "(scontrol show hostnames > hosts.txt)"
        )
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read the hostfile ({exc.strerror or exc})") from None
    if "\x00" in text:
        raise BadInputError(
            f"{path}: a binary file, not a hostfile (one hostname per line: scontrol show hostnames)"
        )
    hosts: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        word = line.split("#", 1)[0].split()
        if word and not _HOSTNAME.fullmatch(word[0]):
            raise BadInputError(
                f"{path}: line {number}: {word[0][:60]!r} is not a hostname; a hostfile has one "
                "hostname per line (scontrol show hostnames, an MPI hostfile's first column)"
            )
        if word and word[0] not in hosts:
            hosts.append(word[0])
    if not hosts:
        raise BadInputError(f"{path}: the hostfile names no host (one hostname per line)")
    return hosts


def expand(sources: Iterable[Path]) -> list[Path]:
    """The node snapshot files of ``sources`` (folders expanded to their snapshot files), in order, each
    file once however many times it was given (its real path, links resolved).

    Raises:
        BadInputError: a path that does not exist, or a folder without any snapshot file.
    """
    files: list[Path] = []
    for src in sources:
        src = Path(src)
        if src.is_dir():
            try:
                found = candidates(src)
            except OSError as exc:
                raise BadInputError(
                    f"{src}: cannot list the folder ({exc.strerror or exc})"
                ) from None
            if not found:
                raise BadInputError(
                    f"{src}: no node snapshot in it (*.json, *.yaml, *.json.gz); is this the folder "
                    "'forensics snapshot -o DIR/%N.json' wrote to?"
                )
            files += found
        elif src.exists():
            files.append(src)
        else:
            raise BadInputError(
                f"{src}: no such file or folder; give node snapshots, their folder, or a fleet file"
            )
    seen: set[str] = (
        set()
    )  # one file given twice (snaps/ snaps/gpu-a17.json, overlapping globs) is one node
    unique = []
    for f in files:
        key = os.path.realpath(f)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def load(
    sources: Iterable[Path], *, expect_nodes: int | None = None, hostfile: Path | None = None
) -> Fleet:
    """Open node snapshot files (and folders of them) as a fleet (module docstring).

    The records are built while the report reads them (one document alive at a time); the head's
    ``missing`` (damaged files, nodes expected but not read), ``world_size``, ``notes`` and
    ``skipped`` are complete once every record was read.

    Raises:
        BadInputError: a path does not exist, a folder holds no snapshot file, a bad ``expect_nodes``
            or hostfile; (while reading) no file at all could be read.
    """
    given = [Path(s) for s in sources]
    files = expand(given)
    if expect_nodes is not None and not 1 <= expect_nodes <= MAX_WORLD_SIZE:
        raise BadInputError(
            f"--expect-nodes {expect_nodes}: expected a whole number from 1 to {MAX_WORLD_SIZE:,}"
        )
    hosts = read_hostfile(hostfile) if hostfile is not None else None
    head = header(
        world_size=max(1, len(files)),
        launcher="snapshot files",
        run_id="",
        gather={"channel": "files", "files": len(files)},
        missing=[],
    )
    head.update(unit=UNIT, notes=[], skipped=[])
    label = given[0] if len(given) == 1 else Path(f"{given[0]} and {len(given) - 1} more")
    return Fleet(label, head, _records(files, head, expect_nodes, hosts, given))


def _records(
    files: list[Path],
    head: dict[str, Any],
    expect_nodes: int | None,
    hosts: list[str] | None,
    given: list[Path],
) -> Iterator[dict[str, Any]]:
    seen: dict[str, Path] = {}
    dups: list[str] = []
    damaged: list[tuple[Path, str]] = []
    created = ""
    rank = 0
    for path in files:
        try:
            snap = read(path)
        except BadInputError as exc:
            damaged.append((path, str(exc)))
            continue
        node = hostname(snap, path)
        if node in seen:
            dups.append(
                f"{seen[node].name} and {path.name} both name host {node}; the second is kept as "
                f"'{node} ({path.name})'"
            )
            node = f"{node} ({path.name})"
        seen.setdefault(node, path)
        created = max(created, str(snap.get("created", "")))
        rec = record(snap, node=node, rank=rank, world_size=len(files), source=str(path))
        del snap
        rank += 1
        yield rec
    if not rank:
        raise BadInputError(
            damaged[0][1]
            if len(damaged) == 1
            else f"none of the {len(files)} files is a readable node snapshot ({damaged[0][1]})"
        )
    missing = [
        {
            "rank": rank + i,
            "node": stem(p),
            "local_rank": 0,
            "reason": f"its snapshot was not read: {why}",
        }
        for i, (p, why) in enumerate(damaged)
    ]
    expected = len(files)
    if hosts is not None:
        have = {_short(n) for n in seen} | {_short(stem(p)) for p, _ in damaged}
        absent = [h for h in hosts if _short(h) not in have]
        missing += [
            {
                "rank": rank + len(missing) + i,
                "node": h,
                "local_rank": 0,
                "reason": "in the hostfile, but no snapshot of it was given",
            }
            for i, h in enumerate(absent)
        ]
        extra = sorted(
            n for n in seen if _short(n.split(" (")[0]) not in {_short(h) for h in hosts}
        )
        if extra:
            head["notes"].append(
                f"{len(extra)} node(s) not in the hostfile were read too: {', '.join(extra[:5])}"
                f"{' ...' if len(extra) > 5 else ''}"
            )
        expected = max(expected, len(hosts) + len(extra))
    if expect_nodes is not None:
        short = expect_nodes - (rank + len(missing))
        missing += [
            {
                "rank": rank + len(missing) + i,
                "node": None,
                "local_rank": 0,
                "reason": f"--expect-nodes {expect_nodes}: no snapshot for this node",
            }
            for i in range(max(0, short))
        ]
        if short < 0:
            head["notes"].append(
                f"{rank + len(missing):,} nodes read or named, more than --expect-nodes {expect_nodes}"
            )
    if hosts is None and expect_nodes is None:
        head["notes"].append(
            f"read {rank:,} node snapshot{'s' if rank != 1 else ''} from "
            f"{', '.join(str(g) for g in given[:3])}{' ...' if len(given) > 3 else ''}; a node that "
            "wrote no snapshot cannot be named without --expect-nodes N or --hostfile FILE"
        )
    if dups:
        head["notes"].append(
            f"{len(dups)} snapshot(s) name a host already read (two machines answer to one "
            f"hostname, or one file was copied twice): {'; '.join(dups[:3])}{' ...' if len(dups) > 3 else ''}"
        )
    head["missing"] = missing
    head["world_size"] = max(expected, rank + len(missing))
    head["created"] = created
