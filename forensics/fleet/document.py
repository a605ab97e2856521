"""The fleet file (``forensics.fleet/1``) and the ``--out-dir`` folder: write, read, validate.

A fleet file is one JSON document, laid out one rank record per line so a
reader can take it a record at a time (1,000 nodes of 8 GPUs are ~60 MB of
JSON; loading it whole costs several times that in memory)::

    {"schema": "forensics.fleet/1", "created": "...Z", "tool": {...}, "world_size": 8,
     "launcher": "torchrun", "run_id": "...", "gather": {"channel", "timeout_s", "waited_s"},
     "missing": [{"rank", "node", "local_rank", "reason"}], "records": [
    {"rank": 0, ...},
    {"rank": 1, ...}
    ]}

Any other valid layout of the same document (pretty-printed, YAML) is read too,
all at once. A gzip-compressed fleet file (``fleet.json.gz``) is read as it is. A rank record (``forensics.fleet-record/1``, written by
:mod:`forensics.fleet.snapshot`): ``rank``, ``local_rank``, ``world_size``,
``node``, ``node_index``, ``hostname``, ``launcher``, ``pid``, ``env`` (the
NCCL/CUDA/torch variables this rank sees, redacted), ``gpu`` (the device this
rank drives), ``bench`` (per-GPU components, or null), ``snapshot`` (the node's
full snapshot, local rank 0 only), ``telemetry`` (GPU samples during the
bench, local rank 0 only), ``errors``, ``duration_s``.

An ``--out-dir`` folder holds one ``rank-NNNNN.json`` per rank (same record);
ranks below the records' ``world_size`` without a file are missing. A ``rank-*.json``
that is not a valid record (a snapshot copied in, a damaged file) is skipped and named in
the head's ``skipped`` list, so one stray file does not hide the other ranks.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import stat
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator

from forensics import __version__
from forensics.docfile import (
    MAX_FILE_BYTES,
    atomic_writer,
    check_schema,
    finite_json,
    path_error,
    read_document,
    utc_now,
)
from forensics.errors import BadInputError
from forensics.snapshot import validate as validate_snapshot

SCHEMA_NAME = "forensics.fleet"
SCHEMA_VERSION = 1
SCHEMA = f"{SCHEMA_NAME}/{SCHEMA_VERSION}"
RECORD_SCHEMA = "forensics.fleet-record/1"
FLEET_MAX_BYTES = 8 * MAX_FILE_BYTES
GZIP_MAGIC = b"\x1f\x8b"
MAX_WORLD_SIZE = 1 << 20
"""Largest world size read (1,048,576 ranks, several times the largest jobs run): a damaged
``world_size`` of 10**12 would otherwise have the reader list a trillion missing ranks."""


def header(
    *,
    world_size: int,
    launcher: str,
    run_id: str,
    gather: dict[str, Any],
    missing: list[dict[str, Any]],
    label: str = "",
) -> dict[str, Any]:
    """The fleet file's top-level fields (everything but ``records``)."""
    return {
        "schema": SCHEMA,
        "created": utc_now(),
        "label": label,
        "tool": {"name": "forensics", "version": __version__},
        "world_size": world_size,
        "launcher": launcher,
        "run_id": run_id,
        "gather": gather,
        "missing": missing,
    }


def write(path: Path, head: dict[str, Any], records: Iterable[dict[str, Any]]) -> Path:
    """Write a fleet file with :func:`forensics.outpath.atomic_writer` (temp file + rename, a new file
    ``0o666 & ~umask`` like every other output, links written through), one record per line.

    A list of records is sorted by rank; any other iterable is written as it comes (a generator of
    1,000 node records never has to be held at once).

    Raises:
        BadInputError: the folder does not exist or is not writable.
    """
    path = Path(path)
    head = {k: v for k, v in head.items() if k != "records"}
    first = json.dumps(finite_json(head), ensure_ascii=False, allow_nan=False)
    with atomic_writer(path) as fh:
        fh.write(first[:-1] + ', "records": [\n')
        recs = (
            sorted(records, key=lambda r: r.get("rank", 0))
            if isinstance(records, list)
            else records
        )
        sep = ""
        for rec in recs:
            fh.write(sep)
            fh.write(json.dumps(finite_json(rec), ensure_ascii=False, allow_nan=False))
            sep = ",\n"
        fh.write("\n]}\n")
    return path


def _check_record(rec: Any, where: str) -> dict[str, Any]:
    """Validate one rank record's structure; returns it.

    Raises:
        BadInputError: naming ``where`` and the problem.
    """
    if not isinstance(rec, dict):
        raise BadInputError(f"{where}: a record must be a mapping")
    schema = rec.get("schema")
    if schema is not None and schema != RECORD_SCHEMA:
        if (
            isinstance(schema, str)
            and schema.rpartition("/")[0] == RECORD_SCHEMA.rpartition("/")[0]
        ):
            check_schema(
                rec,
                Path(where),
                RECORD_SCHEMA.rpartition("/")[0],
                int(RECORD_SCHEMA.rpartition("/")[2]),
            )
        raise BadInputError(
            f"{where}: schema is {schema!r}, not a fleet record ({RECORD_SCHEMA}); "
            + (
                "a snapshot: compare it with 'forensics diff', or give it as --baseline"
                if str(schema).startswith("forensics.snapshot/")
                else "wrong kind of file"
            )
        )
    for key in ("rank", "world_size"):
        v = rec.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise BadInputError(
                f"{where}: record has no valid {key!r}; the file is damaged or not a fleet record"
            )
    if rec["world_size"] > MAX_WORLD_SIZE:
        raise BadInputError(
            f"{where}: world size {rec['world_size']:,} is beyond any job ({MAX_WORLD_SIZE:,} ranks "
            "at most); the record is damaged"
        )
    if rec["rank"] >= rec["world_size"]:
        raise BadInputError(
            f"{where}: rank {rec['rank']} is not below its world size {rec['world_size']}; "
            "the record is damaged"
        )
    if not isinstance(rec.get("node"), str) or not rec["node"]:
        raise BadInputError(f"{where}: record of rank {rec['rank']} has no node name")
    snap = rec.get("snapshot")
    if snap is not None:
        if not isinstance(snap, dict):
            raise BadInputError(f"{where}: rank {rec['rank']}'s snapshot must be a mapping")
        validate_snapshot(snap, Path(f"{where} (rank {rec['rank']}'s snapshot)"))
    for key in ("env", "bench", "telemetry", "gpu"):
        if rec.get(key) is not None and not isinstance(rec[key], dict):
            raise BadInputError(f"{where}: rank {rec['rank']}'s {key!r} must be a mapping or null")
    if rec.get("errors") is not None and not isinstance(rec["errors"], list):
        raise BadInputError(f"{where}: rank {rec['rank']}'s 'errors' must be a list or null")
    figures = (rec.get("bench") or {}).get("figures")
    if figures is not None and not isinstance(figures, dict):
        raise BadInputError(
            f"{where}: rank {rec['rank']}'s 'bench.figures' must be a mapping or null"
        )
    return rec


class Fleet:
    """A loaded fleet: the header and an iterator over records (read once, a line at a time).

    Attributes:
        path: the file or folder read.
        head: the top-level fields (``world_size``, ``missing``...); for a folder, built from its records.
    """

    def __init__(
        self,
        path: Path,
        head: dict[str, Any],
        records: Iterator[dict[str, Any]] | list[dict[str, Any]],
    ):
        self.path = path
        self.head = head
        self._records = records

    def records(self) -> Iterator[dict[str, Any]]:
        """Each validated record once, in file order."""
        yield from self._records


def is_fleet_file(path: Path) -> bool:
    """True if ``path`` is a folder of rank records or a file whose first bytes name the fleet schema."""
    path = Path(path)
    try:
        if path.is_dir():
            return any(path.glob("rank-*.json"))
    except (
        OSError
    ):  # a folder above it the user cannot search, a name too long: the loader says which
        return False
    try:
        with _open_binary(path) as fh:
            start = fh.read(4096)
    except (OSError, EOFError, zlib.error):
        return False
    return f'"{SCHEMA_NAME}/'.encode() in start


def _is_gzip(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == GZIP_MAGIC
    except OSError:
        return False


def _open_binary(path: Path):
    """The file's bytes, gunzipped on the fly when it starts with gzip's magic number."""
    return gzip.open(path, "rb") if _is_gzip(path) else open(path, "rb")


def load(path: Path | str) -> Fleet:
    """Open a fleet file or an ``--out-dir`` folder.

    Returns:
        a :class:`Fleet` whose ``records()`` streams the records (a file in the
        one-record-per-line layout), or yields them from memory (any other layout).

    Raises:
        BadInputError: missing, empty, damaged, foreign or newer-schema input (one line, exit 2).
    """
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise BadInputError(
            f"{path}: no such file or folder; give a fleet file or an --out-dir folder"
        ) from None
    except OSError as exc:  # a folder the user cannot search, a name too long
        raise path_error(path, exc, doing="read") from None
    if stat.S_ISDIR(st.st_mode):
        return _load_dir(path)
    if not stat.S_ISREG(st.st_mode):  # a device or a pipe: its first line may never end (/dev/zero)
        raise BadInputError(
            f"{path}: not a regular file (a device or a pipe); give a fleet file or an --out-dir folder"
        )
    size = st.st_size
    if size > FLEET_MAX_BYTES:
        raise BadInputError(
            f"{path}: {size / 2**20:.0f} MiB is larger than any fleet file "
            f"({FLEET_MAX_BYTES // 2**20} MiB limit)"
        )
    zipped = _is_gzip(path)
    try:
        fh = gzip.open(path, "rt", encoding="utf-8") if zipped else open(path, encoding="utf-8")
        first = fh.readline()
    except UnicodeDecodeError:
        raise BadInputError(f"{path}: not UTF-8 text; is this really a fleet file?") from None
    except EOFError:
        raise BadInputError(f"{path}: the gzip data ends early; the file is truncated") from None
    except (OSError, zlib.error) as exc:
        raise BadInputError(
            f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    if first.rstrip().endswith('"records": ['):
        try:
            head = json.loads(first.rstrip() + "]}")
        except ValueError:
            head = None
        if isinstance(head, dict):
            check_schema(head, path, SCHEMA_NAME, SCHEMA_VERSION)
            return Fleet(path, _check_head(head, path), _stream(fh, path))
    if zipped:  # another layout, compressed: read whole (read_document reads plain files only)
        try:
            text = first + "".join(_lines(fh, path, 1))
        finally:
            fh.close()
        if len(text) > 4 * FLEET_MAX_BYTES:
            raise BadInputError(f"{path}: larger than any fleet file once uncompressed")
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise BadInputError(
                f"{path}: invalid JSON ({exc}); the file is damaged or truncated"
            ) from None
        if not isinstance(doc, dict):
            raise BadInputError(
                f"{path}: not a fleet file (a JSON {type(doc).__name__}, not a mapping)"
            )
    else:
        fh.close()
        doc = read_document(path, "fleet")
    if str(doc.get("schema", "")).startswith("forensics.snapshot/"):
        raise BadInputError(
            f"{path}: a snapshot of one machine, not a fleet file; compare it with a fleet "
            "through 'forensics diff' or 'fleet report FLEET --baseline' it, or give the snapshots "
            "of every node (their files or folder)"
        )
    check_schema(doc, path, SCHEMA_NAME, SCHEMA_VERSION)
    recs = doc.pop("records", None)
    if not isinstance(recs, list):
        raise BadInputError(
            f"{path}: no 'records' list; the file is incomplete or not a fleet file"
        )
    return Fleet(
        path,
        _check_head(doc, path),
        [_check_record(r, f"{path}: records[{i}]") for i, r in enumerate(recs)],
    )


def _check_head(head: dict[str, Any], path: Path) -> dict[str, Any]:
    ws = head.get("world_size")
    if not isinstance(ws, int) or isinstance(ws, bool) or ws < 1:
        raise BadInputError(f"{path}: 'world_size' must be a whole number >= 1")
    if ws > MAX_WORLD_SIZE:
        raise BadInputError(
            f"{path}: world size {ws:,} is beyond any job ({MAX_WORLD_SIZE:,} ranks at most); "
            "the file is damaged"
        )
    missing = head.get("missing", [])
    if not isinstance(missing, list):
        raise BadInputError(f"{path}: 'missing' must be a list")
    for i, m in enumerate(missing):
        rank = m.get("rank") if isinstance(m, dict) else None
        if (
            not isinstance(rank, int)
            or isinstance(rank, bool)
            or not isinstance(m.get("node"), (str, type(None)))
            or not isinstance(m.get("reason", ""), str)
        ):
            raise BadInputError(
                f"{path}: missing[{i}] must be a mapping with a whole 'rank' (and a 'node' and "
                "'reason' text); the file is damaged"
            )
    return head


def _lines(fh, path: Path, start: int) -> Iterator[str]:
    """``fh``'s lines, a file that stops being UTF-8 text (or gzip) midway as one-line bad input."""
    lineno = start
    while True:
        try:
            line = fh.readline()
        except (UnicodeDecodeError, OSError, EOFError, zlib.error) as exc:
            if isinstance(exc, EOFError):
                raise BadInputError(
                    f"{path}: the gzip data ends after line {lineno}; the file is truncated"
                ) from None
            why = (
                "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else f"cannot read ({exc})"
            )
            raise BadInputError(f"{path}: {why} after line {lineno}; the file is damaged") from None
        if not line:
            return
        lineno += 1
        yield line


def _stream(fh, path: Path) -> Iterator[dict[str, Any]]:
    """Records of a one-per-line fleet file; the closing ``]}`` must be there (else: truncated)."""
    with fh:
        lineno = 1
        closed = False
        for line in _lines(fh, path, 1):
            lineno += 1
            text = line.strip()
            if not text:
                continue
            if text == "]}":
                closed = True
                break
            try:
                rec = json.loads(text.rstrip(","))
            except ValueError:
                raise BadInputError(
                    f"{path}: invalid JSON at line {lineno}; the file is damaged or truncated"
                ) from None
            yield _check_record(rec, f"{path}: line {lineno}")
        if not closed:
            raise BadInputError(
                f"{path}: ends before the closing ']}}'; the file is truncated (gather interrupted?)"
            )


def _ranks_text(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    return ", ".join(map(str, ranks[:6])) + (f" ... ({len(ranks)})" if len(ranks) > 6 else "")


def _load_dir(folder: Path) -> Fleet:
    try:  # glob() passes over a folder it cannot list: say why instead of "no records"
        os.scandir(folder).close()
    except OSError as exc:
        raise path_error(folder, exc, doing="read") from None
    files = sorted(folder.glob("rank-*.json"))
    if not files:
        fleets = [
            p.name for p in sorted(folder.glob("*.json"))[:50] if p.is_file() and is_fleet_file(p)
        ]
        hint = (
            f"; it holds {', '.join(fleets[:3])}, a fleet file: give that file instead"
            if fleets
            else "; is this the --out-dir of a fleet snapshot?"
        )
        raise BadInputError(f"{folder}: no rank-*.json records{hint}")
    recs, skipped = [], []
    for (
        f
    ) in files:  # one stray or damaged file does not hide the other ranks: it is skipped and named
        try:
            recs.append(_check_record(read_document(f, "fleet record"), str(f)))
        except BadInputError as exc:
            skipped.append(str(exc))
    if not recs:
        raise BadInputError(
            skipped[0]
            if len(skipped) == 1
            else f"{folder}: none of its {len(files)} rank-*.json files is a fleet record ({skipped[0]})"
        )
    runs: dict[str, list[dict[str, Any]]] = {}
    for r in recs:
        runs.setdefault(str(r.get("run_id", "")), []).append(r)
    if (
        len(runs) > 1
    ):  # a folder used twice: the newest run is the report, the other runs' files are named
        newest = max(runs, key=lambda k: max(str(r.get("created", "")) for r in runs[k]))
        for run_id, rs in runs.items():
            if run_id != newest:
                skipped.append(
                    f"{len(rs)} record(s) of another run (run id {run_id!r}, world size "
                    f"{rs[0]['world_size']}, ranks {_ranks_text([r['rank'] for r in rs])}): the folder "
                    f"holds {len(runs)} runs and the newest ({newest!r}) is reported; give each run a "
                    "fresh --out-dir"
                )
        recs = runs[newest]
    world = max(r["world_size"] for r in recs)
    have = {r["rank"] for r in recs}
    state = folder / ".fleet-state"
    run_state = str(recs[0].get("run_id", "job")).replace("/", "_")
    hellos: dict[int, dict[str, Any]] = {}
    for p in state.glob(f"{glob.escape(run_state)}/hello__*.json") if state.is_dir() else []:
        try:
            h = json.loads(p.read_text(encoding="utf-8"))
            hellos[int(h["rank"])] = h
        except (OSError, ValueError, KeyError, TypeError):
            continue
    missing = []
    for rank in range(world):
        if rank in have:
            continue
        h = hellos.get(rank)
        why = (
            "started (pid {}) but wrote no record".format(h.get("pid"))
            if h
            else "wrote no record (and never started)"
        )
        missing.append(
            {
                "rank": rank,
                "node": (h or {}).get("node"),
                "local_rank": (h or {}).get("local_rank"),
                "reason": why,
            }
        )
    first = recs[0]
    head = header(
        world_size=world,
        launcher=str(first.get("launcher", "")),
        run_id=str(first.get("run_id", "")),
        gather={"channel": "dir", "folder": folder.name},
        missing=missing,
    )
    head["created"] = max(str(r.get("created", "")) for r in recs)
    head["skipped"] = skipped
    return Fleet(folder, head, recs)
