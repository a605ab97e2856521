"""The snapshot file: build, redact, validate and load (file I/O in :mod:`forensics.docfile`; DESIGN section 3).

Format (``docs/snapshot-format.md`` documents every field)::

    {"schema": "forensics.snapshot/1", "created": "2026-11-29T19:49:47Z",
     "label": "before", "tool": {"name": "forensics", "version": "0.1.0"},
     "machine": {"hostname": ..., "machine_id": ...},
     "options": {...}, "redactions": [{"where", "why"}], "redaction": "on",
     "probes": {"<name>": {"status", "duration_s", "data", "errors", "reason"}},
     "bench": null}

JSON by default, YAML when the file name ends in ``.yaml``/``.yml``.

A snapshot built from pasted texts (``source: imported``, by :mod:`forensics.importers`) is told
apart by :func:`is_imported` and named by :func:`describe_import`, here in the core so that the diff
and the renderers read them without importing the importers.
"""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path
from typing import Any

from forensics import __version__, docfile
from forensics.docfile import json_type, utc_now
from forensics.errors import BadInputError
from forensics.model import ProbeStatus
from forensics.probe import ProbeResult
from forensics.redact import Redactor

SCHEMA_NAME = "forensics.snapshot"
SCHEMA_VERSION = 1
SCHEMA = f"{SCHEMA_NAME}/{SCHEMA_VERSION}"

_STATUSES = {s.value for s in ProbeStatus}


def _hardware() -> str:
    """ "x86_64, 32 CPUs, 252 GiB": ``platform.machine()``, ``os.cpu_count()`` and physical memory
    (``sysconf(SC_PHYS_PAGES) x SC_PAGE_SIZE``), a cheap fingerprint for machines without a machine id."""
    import os
    import platform

    try:
        mem = f", {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GiB"
    except (ValueError, OSError, AttributeError):
        mem = ""
    return f"{platform.machine() or '?'}, {os.cpu_count() or '?'} CPUs{mem}"


def machine_identity() -> dict[str, Any]:
    """Hostname (``socket.gethostname``), a hardware fingerprint and a short hash of ``/etc/machine-id``.

    The hash (first 12 hex digits of SHA-256) tells two machines apart without
    putting the machine id itself in a file meant for tickets.
    """
    ident: dict[str, Any] = {"hostname": socket.gethostname(), "hardware": _hardware()}
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            raw = Path(path).read_text().strip()
        except OSError:
            continue
        if raw:
            ident["machine_id"] = hashlib.sha256(raw.encode()).hexdigest()[:12]
            break
    return ident


def build(
    results: dict[str, ProbeResult],
    *,
    label: str | None,
    options: dict[str, Any],
    redactor: Redactor,
    bench: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble a snapshot document from probe results; sweeps it for secrets last.

    Returns:
        the snapshot as a JSON-ready dict.
    """
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "created": utc_now(),
        "label": label or "",
        "tool": {"name": "forensics", "version": __version__},
        "machine": machine_identity(),
        "options": {k: v for k, v in options.items() if v not in (None, False, (), [])},
        "probes": {name: r.to_json() for name, r in results.items()},
        "bench": bench,
    }
    _sweep_sections(doc, redactor, SWEPT_SECTIONS)
    doc["redaction"] = "on" if redactor.enabled else "off (--no-redact)"
    doc["redactions"] = [r.to_json() for r in redactor.records]
    return doc


SWEPT_SECTIONS = (
    "label",
    "probes",
    "options",
    "bench",
)  # what a snapshot holds that can carry a secret


def _sweep_sections(doc: dict[str, Any], red: Redactor, keys: tuple[str, ...]) -> dict[str, Any]:
    """Replace each present, non-null ``doc[key]`` by its :meth:`Redactor.sweep`; returns ``doc``."""
    for key in keys:
        if doc.get(key) is not None:
            doc[key] = red.sweep(doc[key], key)
    return doc


def redact_loaded(doc: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Sweep a loaded snapshot for secrets again, before it is compared or reported.

    A snapshot taken with ``--no-redact``, or by an older forensics with fewer
    patterns, may hold values the current :class:`Redactor` replaces. Comparing
    a redacted side with an unredacted one would report every secret as a
    change (and print it). New finds are appended to ``redactions`` with
    ``"(when reporting)"`` after the reason.

    Returns:
        (the swept copy, how many values were newly redacted).
    """
    red = Redactor()
    out = _sweep_sections(dict(doc), red, SWEPT_SECTIONS)
    new = [{"where": r.where, "why": f"{r.why} (when reporting)"} for r in red.records]
    if new:
        out["redactions"] = list(out.get("redactions") or []) + new
    return out, len(new)


def save(doc: dict[str, Any], path: Path) -> Path:
    """Write a snapshot atomically (:func:`forensics.docfile.save`); returns ``path``.

    ``redactions`` is written last (an empty list when the document has none), so that
    :func:`validate` can tell a YAML file cut short from a whole one.
    """
    doc = {k: v for k, v in doc.items() if k != "redactions"} | {
        "redactions": list(doc.get("redactions") or [])
    }
    return docfile.save(doc, path)


def validate(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    """Validate a loaded snapshot's structure; returns it unchanged.

    Raises:
        BadInputError: naming the file and the first problem found.
    """
    _other_kind(doc, path)
    docfile.check_schema(doc, path, SCHEMA_NAME, SCHEMA_VERSION)
    probes = doc.get("probes")
    if "probes" not in doc:
        raise BadInputError(f"{path}: no 'probes' field; the file is incomplete or not a snapshot")
    if not isinstance(probes, dict):
        raise BadInputError(f"{path}: 'probes' must be a mapping, found {json_type(probes)}")
    for key, kind in (("machine", dict), ("tool", dict), ("options", dict), ("redactions", list)):
        if key in doc and doc[key] is not None and not isinstance(doc[key], kind):
            raise BadInputError(
                f"{path}: {key!r} must be {json_type(kind())}, found {json_type(doc[key])}"
            )
    if docfile.is_yaml(path) and "redactions" not in doc:
        # a YAML file cut short still parses (head -n 130 s.yaml); JSON's parser catches it itself
        raise BadInputError(
            f"{path}: ends before 'redactions', the last field forensics writes; the file looks "
            "truncated; copy it again or take the snapshot again"
        )
    for i, red in enumerate(doc.get("redactions") or []):
        if not isinstance(red, dict):
            raise BadInputError(
                f"{path}: redactions[{i}] must be a mapping, found {json_type(red)}"
            )
        if (
            docfile.is_yaml(path)
            and i == len(doc["redactions"]) - 1
            and not {"where", "why"} <= set(red)
        ):
            raise BadInputError(
                f"{path}: redactions[{i}] ends without 'where' and 'why'; the file looks truncated"
            )
        _texts(red, ("where", "why"), f"redactions[{i}]", path)
    _texts(doc, ("source", "redaction"), "", path)
    _check_import(doc, path)
    for name, section in probes.items():
        if not isinstance(section, dict):
            raise BadInputError(
                f"{path}: probe section {name!r} must be a mapping, found {json_type(section)}"
            )
        status = section.get("status")
        if not isinstance(status, str) or status not in _STATUSES:
            raise BadInputError(
                f"{path}: probe {name!r} has status {status!r}; expected one of {sorted(_STATUSES)}"
            )
        data = section.get("data", {})
        if data is not None and not isinstance(data, dict):
            raise BadInputError(
                f"{path}: probe {name!r} 'data' must be a mapping, found {json_type(data)}"
            )
        if data is None and status in (
            "ok",
            "partial",
        ):  # every value would read as changed to None
            raise BadInputError(
                f"{path}: probe {name!r} has status {status!r} but its 'data' is null; the file was "
                "edited or damaged (take the snapshot again)"
            )
        errors = section.get("errors", [])
        if errors is not None and not isinstance(errors, list):
            raise BadInputError(
                f"{path}: probe {name!r} 'errors' must be a list, found {json_type(errors)}"
            )
        for i, err in enumerate(errors or []):
            if not isinstance(err, dict):
                raise BadInputError(
                    f"{path}: probes.{name}.errors[{i}] must be a mapping "
                    f'{{"field", "error"}}, found {json_type(err)}'
                )
            _texts(err, ("field", "error"), f"probes.{name}.errors[{i}]", path)
        _texts(section, ("source",), f"probes.{name}", path)
        dur = section.get("duration_s", 0)
        if not isinstance(dur, (int, float)) or isinstance(dur, bool):
            raise BadInputError(
                f"{path}: probe {name!r} 'duration_s' must be a number, found {json_type(dur)}"
            )
        from forensics.fieldtypes import (
            impossible,  # read side only: the snapshot command never needs it
        )

        why = impossible(dur, ">=0")  # NaN, infinity, 10**400, a negative time
        if why:
            raise BadInputError(
                f"{path}: probe {name!r} 'duration_s': {why}, not a time in seconds; "
                "the file was edited or damaged (take the snapshot again)"
            )
        if "reason" in section and not isinstance(section["reason"], str):
            raise BadInputError(
                f"{path}: probe {name!r} 'reason' must be a string, found {json_type(section['reason'])}"
            )
    bench = doc.get("bench")
    if bench is not None and not isinstance(bench, dict):
        raise BadInputError(f"{path}: 'bench' must be a mapping or null, found {json_type(bench)}")
    if bench:
        _check_bench(bench, path)
    for key in ("label", "created"):
        if key in doc and not isinstance(doc[key], str):
            raise BadInputError(f"{path}: {key!r} must be a string, found {json_type(doc[key])}")
    check_field_types(doc, path)
    return doc


BENCH_SCHEMA = ("forensics.bench", 1)
"""The bench document a ``--bench`` snapshot embeds (written by ``forensics.bench``; docs/bench.md)."""


def _check_bench(bench: dict[str, Any], path: Path) -> None:
    """Check the embedded bench's schema and the shape ``diff`` reads of each result: ``results`` a list of
    mappings, each with a string ``name`` and ``process_medians`` a list of numbers. A result of the wrong
    shape was skipped without a word ('measured only in BEFORE'), a newer bench schema read as the old.

    Raises:
        BadInputError: naming the file and the field (``bench.results[1] must be a mapping ...``).
    """
    name, version = BENCH_SCHEMA
    schema = bench.get("schema")
    if "schema" in bench:
        got, _, n = str(schema).rpartition("/")
        if not isinstance(schema, str) or got != name or not n.isdigit() or int(n) < 1:
            raise BadInputError(
                f"{path}: bench.schema is {schema!r}, expected '{name}/{version}'; the file was "
                "edited or damaged (take the snapshot again)"
            )
        if int(n) > version:
            raise BadInputError(
                f"{path}: its bench is {schema}, newer than this forensics ({__version__}) reads "
                f"({name}/{version}); upgrade forensics"
            )
    results = bench.get("results")
    if results is None:
        return
    if not isinstance(results, list):
        raise BadInputError(
            f"{path}: bench.results must be a list, found {json_type(results)}; the file was "
            "edited or damaged (take the snapshot again)"
        )
    for i, r in enumerate(results):
        if not isinstance(r, dict) or not isinstance(r.get("name"), str):
            found = (
                json_type(r)
                if not isinstance(r, dict)
                else f"a 'name' of {json_type(r.get('name'))}"
            )
            raise BadInputError(
                f"{path}: bench.results[{i}] must be a mapping with a 'name' string, found {found}; "
                "the file was edited or damaged (take the snapshot again)"
            )
        vals = r.get("process_medians")
        if vals is not None and (
            not isinstance(vals, list)
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)
        ):
            raise BadInputError(
                f"{path}: bench result {r['name']!r} 'process_medians' must be a list of numbers, "
                f"found {json_type(vals)}"
                + (
                    f" holding {json_type(next(v for v in vals if not isinstance(v, (int, float)) or isinstance(v, bool)))}"
                    if isinstance(vals, list)
                    else ""
                )
                + "; the file was edited or damaged (take the snapshot again)"
            )


OTHER_KINDS = {
    "forensics.fleet": "a fleet file; read it with 'forensics fleet report {path}' (or compare two with "
    "'forensics diff A B')",
    "forensics.fleet-record": "one rank's record of a fleet; read the whole folder with 'forensics fleet report "
    "{folder}'",
    "forensics.bench": "a bench file; compare two with 'forensics bench compare A B' (a snapshot taken with "
    "--bench holds one)",
    "forensics.env": "written by 'forensics env -o'; take a snapshot with 'forensics snapshot' to diff it",
    "forensics.diff": "a diff report; open the report's .html or .md, or read its JSON as it is",
    "forensics.fleet-report": "a fleet report; open the report's .html or .md, or read its JSON as it is",
    "forensics.fleet-diff": "a fleet comparison report; open its .html or .md, or read its JSON as it is",
    "forensics.bisect": "a bisect report; open its .html or .md, or read its JSON as it is",
    "forensics.investigate": "an investigate report; open its .html or .md, or read its JSON as it is",
}
"""The other documents forensics writes, and the command that reads each (for "wrong kind of file")."""


def _other_kind(doc: dict[str, Any], path: Path) -> None:
    """Refuse another forensics document, naming the command that reads it.

    Raises:
        BadInputError: ``schema`` names another forensics document (``forensics.fleet/1``...).
    """
    schema = doc.get("schema")
    if not isinstance(schema, str):
        return
    name = schema.rpartition("/")[0]
    what = OTHER_KINDS.get(name)
    if what is not None:
        folder = path.parent if str(path.parent) else Path(".")
        raise BadInputError(
            f"{path}: schema is {schema!r}: wrong kind of file, not a snapshot: "
            + what.format(path=path, folder=folder)
        )


def _texts(node: dict[str, Any], keys: tuple[str, ...], where: str, path: Path) -> None:
    """Refuse a key of ``node`` that is present and not a string (the renderers join and sort them).

    Raises:
        BadInputError: naming the file and the field (``redactions[0].where must be a string, found a list``).
    """
    for key in keys:
        if key in node and not isinstance(node[key], str):
            raise BadInputError(
                f"{path}: {where + '.' if where else ''}{key} must be a string, found "
                f"{json_type(node[key])}; the file was edited or damaged"
            )


def _check_import(doc: dict[str, Any], path: Path) -> None:
    """Check the ``import`` section of a snapshot made from a pasted text (docs/snapshot-format.md):
    ``files``, ``notes`` and ``conflicts`` lists of strings, ``parts`` a list of mappings whose
    ``format``, ``tool``, ``tool_version`` and ``file`` are strings, ``notes`` strings and ``lines``
    two whole numbers.

    Raises:
        BadInputError: naming the file and the first field of the wrong type.
    """
    imp = doc.get("import")
    if imp is None:
        return
    if not isinstance(imp, dict):
        raise BadInputError(f"{path}: 'import' must be a mapping, found {json_type(imp)}")

    def strings(value: Any, where: str) -> None:
        if value is None:
            return
        if not isinstance(value, list):
            raise BadInputError(f"{path}: {where} must be a list, found {json_type(value)}")
        for i, v in enumerate(value):
            if not isinstance(v, str):
                raise BadInputError(
                    f"{path}: {where}[{i}] must be a string, found {json_type(v)}; the file was "
                    "edited or damaged"
                )

    for key in ("files", "notes", "conflicts"):
        strings(imp.get(key), f"import.{key}")
    parts = imp.get("parts")
    if parts is None:
        return
    if not isinstance(parts, list):
        raise BadInputError(f"{path}: import.parts must be a list, found {json_type(parts)}")
    for i, part in enumerate(parts):
        where = f"import.parts[{i}]"
        if not isinstance(part, dict):
            raise BadInputError(f"{path}: {where} must be a mapping, found {json_type(part)}")
        _texts(part, ("format", "tool", "tool_version", "file"), where, path)
        strings(part.get("notes"), f"{where}.notes")
        lines = part.get("lines")
        if lines is not None and not (
            isinstance(lines, list)
            and len(lines) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in lines)
        ):
            raise BadInputError(
                f"{path}: {where}.lines must be [first, last] line numbers, found "
                f"{json_type(lines)}; the file was edited or damaged"
            )


def check_field_types(doc: dict[str, Any], path: Path) -> None:
    """Check each probe section's ``data`` against the ``types`` its probe declares (:mod:`forensics.fieldtypes`).

    Probes are found through the registry (a probe not installed here is not
    checked). Impossible readings are replaced by missing values in ``doc``,
    listed under :data:`forensics.fieldtypes.MALFORMED` for the ledger and noted
    under :data:`forensics.docfile.LOAD_NOTES` for the report.

    Raises:
        BadInputError: a field of the wrong type, naming the file and the field.
    """
    from forensics.fieldtypes import MALFORMED, check_data
    from forensics.registry import find_probe_class

    notes: list[str] = []
    for name, section in doc["probes"].items():
        data = section.get("data")
        if not data or section.get("status") not in ("ok", "partial"):
            continue
        probe = find_probe_class(name)
        types = getattr(probe, "types", None) if probe is not None else None
        if isinstance(types, dict) and types:
            bad = check_data(data, types, f"probes.{name}.data", path)
            if bad:
                doc.setdefault(MALFORMED, {})[name] = [list(trail) for trail, _ in bad]
                notes += [note for _, note in bad]
    if notes:
        doc[docfile.LOAD_NOTES] = list(doc.get(docfile.LOAD_NOTES) or []) + notes


def load(path: Path | str) -> dict[str, Any]:
    """Read and validate a snapshot file.

    Returns:
        the snapshot dict (probe sections stay dicts; use
        :meth:`forensics.probe.ProbeResult.from_json` to type them).

    Raises:
        BadInputError: one line naming the file and the problem (exit code 2).
    """
    path = Path(path)
    return validate(docfile.read_document(path), path)


# --- snapshots built from pasted texts (``forensics import``): how every reader tells and names them ---

IMPORTED = "imported"
"""The ``source`` of a snapshot built from pasted texts by :mod:`forensics.importers`."""

FORMAT_LABELS = {
    "collect-env": "collect_env",
    "vllm": "vllm collect-env",
    "sglang": "sglang check_env",
    "nvidia-smi": "nvidia-smi",
    "nvidia-smi-q": "nvidia-smi -q",
    "nvidia-smi-xml": "nvidia-smi -q -x",
    "pip": "pip list",
}
"""Format id of an imported part -> the name a reason line or a header uses ("not in collect_env output")."""


def is_imported(doc: dict[str, Any]) -> bool:
    """True for a snapshot built from a pasted text (``source: imported``)."""
    return doc.get("source") == IMPORTED


def describe_import(doc: dict[str, Any]) -> str:
    """ "imported from ticket.txt (collect_env, vllm collect-env 0.8.5)" for report headers and listings,
    from the document's ``import`` section (``files``, ``parts[].format``, ``parts[].tool_version``);
    "" for a snapshot taken on a machine."""
    if not is_imported(doc):
        return ""
    imp = doc.get("import") or {}
    parts = []
    for p in imp.get("parts") or []:
        s = FORMAT_LABELS.get(p.get("format"), str(p.get("format")))
        if p.get("tool_version"):
            s += f" {p['tool_version']}"
        parts.append(s)
    files = ", ".join(imp.get("files") or [])
    return f"imported from {files or 'a text'} ({', '.join(parts) or 'no part'})"
