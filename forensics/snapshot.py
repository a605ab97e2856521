"""The snapshot file: build, write atomically, load and validate (DESIGN section 3).

Format (``docs/snapshot-format.md`` documents every field)::

    {"schema": "forensics.snapshot/1", "created": "2026-11-29T19:49:47Z",
     "label": "before", "tool": {"name": "forensics", "version": "0.1.0"},
     "machine": {"hostname": ..., "machine_id": ...},
     "options": {...}, "redactions": [{"where", "why"}], "redaction": "on",
     "probes": {"<name>": {"status", "duration_s", "data", "errors", "reason"}},
     "bench": null}

JSON by default, YAML when the file name ends in ``.yaml``/``.yml``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

from forensics import __version__
from forensics.errors import BadInputError
from forensics.model import ProbeStatus
from forensics.probe import ProbeResult
from forensics.redact import Redactor

SCHEMA_NAME = "forensics.snapshot"
SCHEMA_VERSION = 1
SCHEMA = f"{SCHEMA_NAME}/{SCHEMA_VERSION}"

_STATUSES = {s.value for s in ProbeStatus}
MAX_FILE_BYTES = 512 * 2**20
"""Largest file the loader reads (a real snapshot is well under 10 MiB)."""


def utc_now() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _hardware() -> str:
    """"x86_64, 32 CPUs, 252 GiB": ``platform.machine()``, ``os.cpu_count()`` and physical memory
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


def build(results: dict[str, ProbeResult], *, label: str | None, options: dict[str, Any],
          redactor: Redactor, bench: dict[str, Any] | None = None) -> dict[str, Any]:
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


SWEPT_SECTIONS = ("probes", "options", "bench")  # what a snapshot holds that can carry a secret


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
    out = _sweep_sections(dict(doc), red, SWEPT_SECTIONS + ("label",))
    new = [{"where": r.where, "why": f"{r.why} (when reporting)"} for r in red.records]
    if new:
        out["redactions"] = list(out.get("redactions") or []) + new
    return out, len(new)


def _is_yaml(path: Path) -> bool:
    return path.suffix.lower() in (".yaml", ".yml")


def finite_json(obj: Any) -> Any:
    """A copy of a JSON-like tree with NaN/Infinity floats as the strings "NaN"/"Infinity"/"-Infinity".

    Strict JSON has no such numbers (``JSON.parse`` and many tools reject them).
    """
    if isinstance(obj, float) and not math.isfinite(obj):
        return "NaN" if obj != obj else ("Infinity" if obj > 0 else "-Infinity")
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def dumps(doc: dict[str, Any], path: Path) -> str:
    """Serialise ``doc`` as strict JSON, or YAML when ``path`` ends in .yaml/.yml."""
    doc = finite_json(doc)
    if _is_yaml(path):
        import yaml

        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    return json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same folder and a rename.

    A crash never leaves a half-written file at ``path``.

    Raises:
        BadInputError: the folder does not exist or is not writable.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise BadInputError(f"{path}: folder {folder} does not exist; create it or choose another -o")
    if path.is_dir():
        raise BadInputError(f"{path}: is a folder; give a file name")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise BadInputError(f"{path}: cannot write in {folder} ({exc.strerror}); choose another -o") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        _unlink_quietly(tmp)
        raise BadInputError(f"{path}: cannot write ({exc.strerror}); the old file, if any, is unchanged") from None
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def save(doc: dict[str, Any], path: Path) -> Path:
    """Write a snapshot (or any forensics document) atomically; returns ``path``."""
    path = Path(path)
    write_atomic(path, dumps(doc, path))
    return path


def read_document(path: Path, what: str = "snapshot") -> dict[str, Any]:
    """Read a JSON or YAML file into a mapping, with one-line errors.

    Raises:
        BadInputError: missing, unreadable, empty, truncated/invalid, or not a mapping.
    """
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        st = None
    if st is not None and path.is_dir():
        raise BadInputError(f"{path}: is a folder, not a {what} file")
    if st is not None and not path.is_file():
        raise BadInputError(f"{path}: not a regular file; give the path of a {what} file")
    if st is not None and st.st_size > MAX_FILE_BYTES:
        raise BadInputError(f"{path}: {st.st_size / 2**20:.0f} MiB is larger than any {what} ({MAX_FILE_BYTES // 2**20} MiB limit)")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BadInputError(f"{path}: no such file; give the path of a {what} written by forensics") from None
    except IsADirectoryError:
        raise BadInputError(f"{path}: is a folder, not a {what} file") from None
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadInputError(f"{path}: not a text file (not UTF-8); is this really a {what}?") from None
    if not text.strip():
        raise BadInputError(f"{path}: file is empty; take the {what} again")
    if _is_yaml(path):
        import yaml

        try:
            doc = yaml.safe_load(text)
        except RecursionError:
            raise BadInputError(f"{path}: nested too deeply; the file is damaged") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise BadInputError(f"{path}: invalid YAML{where}; the file is damaged or truncated") from None
    else:
        try:
            doc = json.loads(text)
        except RecursionError:
            raise BadInputError(f"{path}: nested too deeply; the file is damaged") from None
        except json.JSONDecodeError as exc:
            hint = "truncated" if exc.pos >= len(text.rstrip()) - 1 else "damaged"
            raise BadInputError(
                f"{path}: invalid JSON at line {exc.lineno} column {exc.colno} ({exc.msg}); the file looks {hint}"
            ) from None
    if not isinstance(doc, dict):
        raise BadInputError(f"{path}: expected a mapping at the top, found {_json_type(doc)}; not a {what}")
    return doc


def _json_type(value: Any) -> str:
    """The JSON name of a loaded value's type (null, list, string...)."""
    return {type(None): "null", list: "a list", str: "a string", int: "a number", float: "a number",
            bool: "a boolean", dict: "a mapping"}.get(type(value), type(value).__name__)


def check_schema(doc: dict[str, Any], path: Path, name: str = SCHEMA_NAME, version: int = SCHEMA_VERSION) -> None:
    """Check ``doc["schema"]`` is ``name/N`` with N <= ``version``.

    Raises:
        BadInputError: no schema, another schema, or a newer version.
    """
    if "schema" not in doc:
        raise BadInputError(f"{path}: no 'schema' field; not a {name} file")
    schema = doc.get("schema")
    if not isinstance(schema, str) or "/" not in schema:
        raise BadInputError(f"{path}: 'schema' is {schema!r}, expected '{name}/{version}'; not a {name} file")
    got_name, _, got_version = schema.rpartition("/")
    if got_name != name:
        raise BadInputError(f"{path}: schema is {schema!r}, expected {name}/{version}; wrong kind of file")
    if not got_version.isdigit() or int(got_version) < 1:
        raise BadInputError(f"{path}: schema version {got_version!r} is not a version this tool wrote (1 to {version}, "
                            f"a whole number); not a {name} file")
    n = int(got_version)
    if n > version:
        raise BadInputError(
            f"{path}: schema {schema} is newer than this forensics ({__version__}) reads ({name}/{version}); upgrade forensics"
        )


def validate(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    """Validate a loaded snapshot's structure; returns it unchanged.

    Raises:
        BadInputError: naming the file and the first problem found.
    """
    check_schema(doc, path)
    probes = doc.get("probes")
    if "probes" not in doc:
        raise BadInputError(f"{path}: no 'probes' field; the file is incomplete or not a snapshot")
    if not isinstance(probes, dict):
        raise BadInputError(f"{path}: 'probes' must be a mapping, found {_json_type(probes)}")
    for key, kind in (("machine", dict), ("tool", dict), ("options", dict), ("redactions", list)):
        if key in doc and doc[key] is not None and not isinstance(doc[key], kind):
            raise BadInputError(f"{path}: {key!r} must be {_json_type(kind())}, found {_json_type(doc[key])}")
    for i, red in enumerate(doc.get("redactions") or []):
        if not isinstance(red, dict):
            raise BadInputError(f"{path}: redactions[{i}] must be a mapping, found {_json_type(red)}")
    for name, section in probes.items():
        if not isinstance(section, dict):
            raise BadInputError(f"{path}: probe section {name!r} must be a mapping, found {_json_type(section)}")
        status = section.get("status")
        if not isinstance(status, str) or status not in _STATUSES:
            raise BadInputError(f"{path}: probe {name!r} has status {status!r}; expected one of {sorted(_STATUSES)}")
        data = section.get("data", {})
        if data is not None and not isinstance(data, dict):
            raise BadInputError(f"{path}: probe {name!r} 'data' must be a mapping, found {_json_type(data)}")
        errors = section.get("errors", [])
        if errors is not None and not isinstance(errors, list):
            raise BadInputError(f"{path}: probe {name!r} 'errors' must be a list, found {_json_type(errors)}")
        dur = section.get("duration_s", 0)
        if not isinstance(dur, (int, float)) or isinstance(dur, bool):
            raise BadInputError(f"{path}: probe {name!r} 'duration_s' must be a number, found {_json_type(dur)}")
        if "reason" in section and not isinstance(section["reason"], str):
            raise BadInputError(f"{path}: probe {name!r} 'reason' must be a string, found {_json_type(section['reason'])}")
    bench = doc.get("bench")
    if bench is not None and not isinstance(bench, dict):
        raise BadInputError(f"{path}: 'bench' must be a mapping or null, found {_json_type(bench)}")
    for key in ("label", "created"):
        if key in doc and not isinstance(doc[key], str):
            raise BadInputError(f"{path}: {key!r} must be a string, found {_json_type(doc[key])}")
    return doc


def load(path: Path | str) -> dict[str, Any]:
    """Read and validate a snapshot file.

    Returns:
        the snapshot dict (probe sections stay dicts; use
        :meth:`forensics.probe.ProbeResult.from_json` to type them).

    Raises:
        BadInputError: one line naming the file and the problem (exit code 2).
    """
    path = Path(path)
    return validate(read_document(path), path)
