"""Document files: write atomically, read strictly, check the schema line (DESIGN section 3).

Every file forensics writes or reads -- snapshots (``forensics.snapshot/1``),
bench files (``forensics.bench/1``), env files, bisect and diff reports --
goes through here: strict JSON (NaN/Infinity as strings) or YAML when the
name ends in ``.yaml``/``.yml``, written through a temp file and a rename,
read with one-line :class:`forensics.errors.BadInputError` messages naming
the file. What each document must contain is checked by its own module
(``forensics.snapshot.validate``, ``forensics.bench.document.validate``).

Output paths (links written through, devices in place, the atomic writer) are
:mod:`forensics.outpath`'s; their names are re-exported here.

May import ``forensics.errors``, ``forensics.outpath`` and the standard library (PyYAML lazily) only.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path
from typing import Any

from forensics import __version__
from forensics.errors import BadInputError
from forensics.outpath import (  # noqa: F401 - re-exported
    atomic_writer,
    check_writable,
    no_folder,
    path_error,
    write_atomic,
    written_in_place,
)

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


def unused_path(folder: Path, stem: str, suffix: str = ".json") -> Path:
    """``folder/<stem><suffix>``, or with ``-2``, ``-3``... after the stem, the first name not taken: a
    default output name that never overwrites an existing file (checked with ``Path.exists``)."""
    path, n = folder / f"{stem}{suffix}", 2
    while path.exists():
        path, n = folder / f"{stem}-{n}{suffix}", n + 1
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

        return yaml.dump(
            doc,
            Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
            sort_keys=False,
            allow_unicode=True,
        )  # libyaml's emitter when PyYAML was built with it (the same data)
    return json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def _file_word(what: str) -> str:
    """'snapshot' -> 'snapshot file'; 'bench file' stays 'bench file'."""
    return what if what.endswith("file") else f"{what} file"


GZIP_MAGIC = b"\x1f\x8b"
"""The first two bytes of gzip data (RFC 1952)."""


def gunzip(raw: bytes, path: Path, what: str = "snapshot") -> bytes:
    """``raw`` (gzip data read from ``path``) uncompressed, at most :data:`MAX_FILE_BYTES`.

    Raises:
        BadInputError: the data ends early, is not gzip after its first bytes, or is larger than any
            ``what`` once uncompressed (one line naming ``path``).
    """
    import gzip
    import io
    import zlib

    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except EOFError:
        raise BadInputError(f"{path}: the gzip data ends early; the file is truncated") from None
    except (OSError, zlib.error) as exc:
        raise BadInputError(
            f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    if len(data) > MAX_FILE_BYTES:
        raise BadInputError(
            f"{path}: larger than any {what} once uncompressed ({MAX_FILE_BYTES // 2**20} MiB limit)"
        )
    return data


def read_document(path: Path, what: str = "snapshot") -> dict[str, Any]:
    """Read a JSON or YAML file (YAML when the name ends in .yaml/.yml) into a mapping, with one-line errors.

    Gzip-compressed JSON (``.json.gz``, told by its first bytes, :data:`GZIP_MAGIC`) is uncompressed first.

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
        raise BadInputError(f"{path}: is a folder, not a {_file_word(what)}")
    if st is not None and not path.is_file():
        raise BadInputError(f"{path}: not a regular file; give the path of a {_file_word(what)}")
    if st is not None and st.st_size > MAX_FILE_BYTES:
        raise BadInputError(
            f"{path}: {st.st_size / 2**20:.0f} MiB is larger than any {what} ({MAX_FILE_BYTES // 2**20} MiB limit)"
        )
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BadInputError(
            f"{path}: no such file; give the path of a {what} written by forensics"
        ) from None
    except IsADirectoryError:
        raise BadInputError(f"{path}: is a folder, not a {_file_word(what)}") from None
    except (
        OSError
    ) as exc:  # a folder the user cannot search, a name too long: "cannot read (Permission denied)"
        raise path_error(path, exc, doing="read") from None
    packed = raw[:2] == GZIP_MAGIC
    if packed:  # snaps/gpu-a17.json.gz: node snapshots are often kept compressed
        raw = gunzip(raw, path, what)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadInputError(
            f"{path}: not a text file (not UTF-8); is this really a {what}?"
        ) from None
    if not text.strip():
        raise BadInputError(f"{path}: file is empty; take the {what} again")
    if is_yaml(path):
        import yaml

        try:
            doc = yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a SafeLoader without aliases
        except RecursionError:
            raise BadInputError(f"{path}: nested too deeply; the file is damaged") from None
        except yaml.YAMLError as exc:
            raise BadInputError(f"{path}: {_yaml_problem(exc)}") from None
        except ValueError:  # an integer of more than 4,300 digits (sys.get_int_max_str_digits)
            raise BadInputError(
                f"{path}: holds a number thousands of digits long, which no {what} has; the file "
                "is damaged"
            ) from None
    else:
        try:
            doc = json.loads(text)
        except RecursionError:
            raise BadInputError(f"{path}: nested too deeply; the file is damaged") from None
        except json.JSONDecodeError as exc:
            hint = "truncated" if exc.pos >= len(text.rstrip()) - 1 else "damaged"
            raise BadInputError(
                f"{path}: invalid JSON{' once uncompressed' if packed else ''} at line {exc.lineno} column "
                f"{exc.colno} ({exc.msg}); the file looks {hint}"
            ) from None
        except (
            ValueError
        ):  # Python refuses an integer of more than 4,300 digits (sys.get_int_max_str_digits)
            raise BadInputError(
                f"{path}: holds a number thousands of digits long, which no {what} has; the file "
                "is damaged"
            ) from None
    if not isinstance(doc, dict):
        raise BadInputError(
            f"{path}: expected a mapping at the top, found {json_type(doc)}; not a {what}"
        )
    cut = cap_strings(doc)
    if cut:
        doc[LOAD_NOTES] = cut
    return doc


MAX_STRING_CHARS = 64 * 1024
"""Longest string kept on load; the longest in a real snapshot is about 2 KB (an NVIDIA_REQUIRE_CUDA value)."""
LOAD_NOTES = "_load_notes"
"""Key under which :func:`read_document` leaves what it changed on load (strings cut), for the report's notes."""


def cap_strings(doc: dict[str, Any], limit: int = MAX_STRING_CHARS) -> list[str]:
    """Cut, in place, every string of ``doc`` longer than ``limit`` characters; returns one note per string cut.

    A field of hundreds of MB (a runaway log pasted into a value) would
    otherwise be swept for secrets, diffed and printed in full. Walks with an
    explicit stack, so depth is no problem.
    """
    notes: list[str] = []
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        node, where = stack.pop()
        items = (
            node.items()
            if isinstance(node, dict)
            else enumerate(node)
            if isinstance(node, list)
            else ()
        )
        for k, v in items:
            here = (
                (f"{where}.{k}" if where else str(k)) if isinstance(node, dict) else f"{where}[{k}]"
            )
            if isinstance(v, str) and len(v) > limit:
                node[k] = v[:limit] + f" ... [cut on load: {len(v):,} characters]"
                notes.append(f"{here} was {_size(len(v))}; cut to {_size(limit)} on load")
            elif isinstance(v, (dict, list)):
                stack.append((v, here))
    return notes


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n // 1024} KiB"


def _strict_loader():
    """PyYAML's safe loader that refuses aliases (``*name``): forensics never writes them, and a
    1 KB file of nested aliases ("billion laughs") expands to gigabytes.

    With libyaml (``yaml.CSafeLoader`` present) the text is scanned and parsed in C (``yaml.cyaml.CParser``;
    figures in docs/benchmarks.md, "Reading YAML snapshots"); nodes are composed by PyYAML's
    Python composer, as without libyaml: libyaml's own composer recurses in C and crashes the
    interpreter (a segmentation fault) on a file nested some ten thousand levels deep, where the
    Python one raises RecursionError, reported as "nested too deeply". Without libyaml, the
    pure-Python ``SafeLoader``.
    """
    import yaml
    from yaml.composer import Composer

    base = yaml.SafeLoader
    if getattr(yaml, "CSafeLoader", None) is not None:

        class _CEvents(
            yaml.cyaml.CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver
        ):
            """libyaml's events, PyYAML's Python composer, safe constructor and resolver."""

            def __init__(self, stream):
                yaml.cyaml.CParser.__init__(self, stream)
                yaml.constructor.SafeConstructor.__init__(self)
                yaml.resolver.Resolver.__init__(self)
                self.anchors = {}

            check_node, get_node, get_single_node = (
                Composer.check_node,
                Composer.get_node,
                Composer.get_single_node,
            )
            compose_document, compose_scalar_node = (
                Composer.compose_document,
                Composer.compose_scalar_node,
            )
            compose_sequence_node, compose_mapping_node = (
                Composer.compose_sequence_node,
                Composer.compose_mapping_node,
            )
            compose_node = Composer.compose_node

        base = _CEvents

    class StrictLoader(base):
        def compose_node(self, parent, index):
            if self.check_event(yaml.events.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None, None, f"YAML alias *{event.anchor} refused", event.start_mark
                )
            return super().compose_node(parent, index)

    return StrictLoader


def packaged_yaml(package: str, name: str) -> Any:
    """The parsed contents of the YAML file ``name`` shipped inside ``package`` (read with
    ``importlib.resources``): the known-issues catalog, the costly-variable table, the recorded ceilings.

    These are the tool's own files, shallow and reviewed, so they are parsed by libyaml's whole C loader
    (``yaml.CSafeLoader``, about 8x faster than the pure-Python ``SafeLoader`` on the 23 KB catalog) when
    PyYAML has it: the crash of its C composer on files nested thousands of levels deep
    (:func:`_strict_loader`) cannot come from them. Files from users never come here.

    Raises:
        FileNotFoundError / OSError: the file is not in the installed package.
        yaml.YAMLError: the file is malformed (a packaging error).
    """
    import importlib.resources

    import yaml

    text = importlib.resources.files(package).joinpath(name).read_text(encoding="utf-8")
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader


def _yaml_problem(exc: Exception) -> str:
    """The one-line reason of a PyYAML error: an alias refused, a tag it cannot load, or a syntax error."""
    import re

    import yaml

    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    problem = str(getattr(exc, "problem", "") or "")
    if isinstance(exc, yaml.composer.ComposerError) and problem.startswith("YAML alias"):
        return (
            f"{problem}{where}: aliases (&anchor / *alias) are not accepted, forensics never writes them "
            "(nested aliases can expand without bound)"
        )
    m = re.search(r"for the tag '([^']*)'", problem)
    if isinstance(exc, yaml.constructor.ConstructorError) and m:
        tag = m.group(1).replace("tag:yaml.org,2002:", "!!")
        return f"unsupported YAML tag {tag}{where}; a forensics file holds plain data only"
    if (
        "maximum nesting depth" in problem
    ):  # libyaml >= 0.2.5 (PyYAML 6.0.4's wheels) stops deep nesting itself
        return f"nested too deeply{where}; the file is damaged"
    return f"invalid YAML{where}; the file is damaged or truncated"


def json_type(value: Any) -> str:
    """The JSON name of a loaded value's type (null, list, string...)."""
    return {
        type(None): "null",
        list: "a list",
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
        dict: "a mapping",
    }.get(type(value), type(value).__name__)


def check_schema(doc: dict[str, Any], path: Path, name: str, version: int) -> None:
    """Check ``doc["schema"]`` is ``name/N`` with N <= ``version``.

    Raises:
        BadInputError: no schema, another schema, or a newer version.
    """
    if "schema" not in doc:
        raise BadInputError(f"{path}: no 'schema' field; not a {name} file")
    schema = doc.get("schema")
    if not isinstance(schema, str) or "/" not in schema:
        raise BadInputError(
            f"{path}: 'schema' is {schema!r}, expected '{name}/{version}'; not a {name} file"
        )
    got_name, _, got_version = schema.rpartition("/")
    if got_name != name:
        raise BadInputError(
            f"{path}: schema is {schema!r}, expected {name}/{version}; wrong kind of file"
        )
    if not got_version.isdigit() or int(got_version) < 1:
        raise BadInputError(
            f"{path}: schema version {got_version!r} is not a version this tool wrote (1 to {version}, "
            f"a whole number); not a {name} file"
        )
    n = int(got_version)
    if n > version:
        raise BadInputError(
            f"{path}: schema {schema} is newer than this forensics ({__version__}) reads ({name}/{version}); upgrade forensics"
        )
