"""Document files: write atomically, read strictly, check the schema line (DESIGN section 3).

Every file forensics writes or reads -- snapshots (``forensics.snapshot/1``),
bench files (``forensics.bench/1``), env files, bisect and diff reports --
goes through here: strict JSON (NaN/Infinity as strings) or YAML when the
name ends in ``.yaml``/``.yml``, written through a temp file and a rename,
read with one-line :class:`forensics.errors.BadInputError` messages naming
the file. What each document must contain is checked by its own module
(``forensics.snapshot.validate``, ``forensics.bench.document.validate``).

May import ``forensics.errors`` and the standard library (PyYAML lazily) only.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from forensics import __version__
from forensics.errors import BadInputError

MAX_FILE_BYTES = 512 * 2**20
"""Largest file the loader reads (a real snapshot is well under 10 MiB)."""


def utc_now() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def save(doc: dict[str, Any], path: Path) -> Path:
    """Write any forensics document atomically (JSON, or YAML by the file name); returns ``path``.

    Raises:
        BadInputError: the folder does not exist or is not writable, or ``path`` is a folder.
    """
    path = Path(path)
    write_atomic(path, dumps(doc, path))
    return path


def is_yaml(path: Path) -> bool:
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
    if is_yaml(path):
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


def read_document(path: Path, what: str = "snapshot") -> dict[str, Any]:
    """Read a JSON or YAML file (YAML when the name ends in .yaml/.yml) into a mapping, with one-line errors.

    ``what`` names the kind of file in the messages ("snapshot", "bench file"...).
    Files over :data:`MAX_FILE_BYTES` are refused before reading.

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
    if is_yaml(path):
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
        raise BadInputError(f"{path}: expected a mapping at the top, found {json_type(doc)}; not a {what}")
    return doc


def json_type(value: Any) -> str:
    """The JSON name of a loaded value's type (null, list, string...)."""
    return {type(None): "null", list: "a list", str: "a string", int: "a number", float: "a number",
            bool: "a boolean", dict: "a mapping"}.get(type(value), type(value).__name__)


def check_schema(doc: dict[str, Any], path: Path, name: str, version: int) -> None:
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
