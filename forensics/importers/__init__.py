"""Read the environments people paste into tickets into snapshots (``forensics import``).

Formats (one module each): torch's ``collect_env`` and vLLM's ``collect-env``
(:mod:`.collect_env`), ``sglang.check_env`` (:mod:`.sglang`), the ``nvidia-smi``
table (:mod:`.nvidia_smi`), ``nvidia-smi -q`` text (:mod:`.nvidia_smi_q`) and XML
(:mod:`.nvidia_smi_xml`), ``pip list`` / ``pip freeze`` (:mod:`.pip`). A file may
hold several parts (:mod:`.detect` finds them); :mod:`.assemble` merges them into
one snapshot whose probe sections say honestly what the text did not hold.

Public entry points:

- :func:`import_files` -- texts -> snapshot dict (the ``forensics import`` command);
- :func:`load` -- a snapshot file *or* a pasted text -> snapshot dict (``diff``, ``show``,
  and the fleet report use it, so nobody has to import first);
- :func:`is_imported` -- whether a loaded snapshot came from a text.

Shared by the parsers: :mod:`.common` (the parsed part, value parsers) and :mod:`.gpu_record`
(one GPU of ``nvidia-smi -q``, text or XML, in the ``gpu`` probe's shape).

May import the core (``forensics.snapshot`` holds how an imported snapshot is told and named) and
``forensics.gpu.readings`` (the names of the GPU readings); never a probe, ``diff``, ``render`` or ``cli``. The data it writes follows the probes' documented
shapes (docs/snapshot-format.md, docs/gpu-probe.md) without importing them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forensics.docfile import path_error
from forensics.errors import BadInputError
from forensics.importers import collect_env, nvidia_smi, nvidia_smi_q, nvidia_smi_xml, pip, sglang
from forensics.importers.assemble import build
from forensics.importers.common import Part
from forensics.importers.detect import FORMATS, Span, decode, family, parts_of
from forensics.snapshot import describe_import as describe  # noqa: F401  (in the core: every reader of snapshots)
from forensics.snapshot import is_imported

__all__ = ["FORMATS", "import_files", "import_text", "load", "is_imported", "looks_like_snapshot"]

MAX_TEXT_BYTES = 64 * 2**20
"""Largest text read (a pasted environment is kilobytes; a 200 KB paste imports in milliseconds)."""

_PARSERS = {
    "collect-env": collect_env.parse,
    "vllm": collect_env.parse,
    "sglang": sglang.parse,
    "nvidia-smi": nvidia_smi.parse,
    "nvidia-smi-q": nvidia_smi_q.parse,
    "pip": pip.parse,
}


def import_text(text: str, name: str, fmt: str = "auto") -> list[Part]:
    """Parse every part of one pasted text.

    Args:
        text: the file's text.
        name: how errors and provenance name it (the path as given).
        fmt: ``auto`` or one of :data:`FORMATS` (then only parts of that format are read).

    Returns:
        the parts, in text order, each with ``facts`` in the probes' data shapes.

    Raises:
        BadInputError: not an environment report; an XML part that declares entities;
            two reports of the same kind in one file (split them to compare them).
    """
    lines, spans = parts_of(text, name, fmt)
    groups: dict[
        str, list[Span]
    ] = {}  # fragments of one kind are one part; two whole reports are refused
    for s in spans:
        group = groups.setdefault(family(s.format), [])
        whole = [g for g in group if not g.fragment]
        if whole and not s.fragment:
            raise BadInputError(
                f"{name}: holds two {s.format} reports (lines {whole[0].start + 1} and {s.start + 1}); "
                "put each machine's text in its own file and diff the two files"
            )
        group.append(s)
    parts = []
    for group in groups.values():
        fmt_ = "vllm" if any(g.format == "vllm" for g in group) else group[0].format
        part = Part(fmt_, first_line=group[0].start + 1, last_line=group[-1].end, file=name)
        part.fragment = all(g.fragment for g in group)
        body: list[str] = []
        for g in group:
            body += lines[g.start : g.end] + [""]
        if len(group) > 1:
            part.notes.append(
                f"read from {len(group)} pieces of the text (lines "
                + ", ".join(f"{g.start + 1}-{g.end}" for g in group)
                + ")"
            )
        if fmt_ == "nvidia-smi-xml":
            nvidia_smi_xml.parse(body, part, name)
        else:
            _PARSERS[fmt_](body, part)
        parts.append(part)
    return parts


def _read(path: Path) -> str:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise BadInputError(
            f"{path}: no such file; give the text pasted from the ticket (saved to a file)"
        ) from None
    except OSError as exc:
        raise path_error(path, exc, doing="read") from None
    if path.is_dir():
        raise BadInputError(f"{path}: is a folder; give the text file pasted from the ticket")
    if (
        not path.is_file()
    ):  # a pipe is read once (the format test would eat its start), a device never ends
        raise BadInputError(
            f"{path}: not a regular file (a pipe or a device); save the text pasted from the ticket to a "
            "file and give that"
        )
    if st.st_size > MAX_TEXT_BYTES:
        raise BadInputError(
            f"{path}: {st.st_size / 2**20:.0f} MiB is larger than any environment report "
            f"({MAX_TEXT_BYTES // 2**20} MiB limit)"
        )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise path_error(path, exc, doing="read") from None
    if not raw.strip():
        raise BadInputError(f"{path}: file is empty; paste the environment text into it")
    if raw[:2] == b"\x1f\x8b":
        raise BadInputError(
            f"{path}: gzip-compressed, not a pasted text; 'forensics show' and 'forensics diff' read a "
            "compressed snapshot as it is, a compressed text needs gunzip first"
        )
    return decode(raw)


def import_files(
    paths: list[Path | str], fmt: str = "auto", label: str | None = None
) -> dict[str, Any]:
    """Import one or more pasted texts into one snapshot (the texts describe one machine).

    Returns:
        a snapshot dict (:mod:`forensics.importers.assemble`), valid for :func:`forensics.snapshot.validate`.

    Raises:
        BadInputError: a file is missing, empty, or not an environment report; two files or parts
            hold the same kind of report.
    """
    parts: list[Part] = []
    names = [str(p) for p in paths]
    seen: dict[str, str] = {}
    for p in paths:
        path = Path(p)
        for part in import_text(_read(path), str(path), fmt):
            kind = "collect-env" if part.format == "vllm" else part.format
            if kind in seen:
                raise BadInputError(
                    f"{path}: another {part.format} report was already read from {seen[kind]}; "
                    "one snapshot describes one machine: import them separately"
                )
            seen[kind] = str(path)
            parts.append(part)
    return build(parts, names, label)


def looks_like_snapshot(path: Path) -> bool:
    """True when ``path`` is (or claims to be) a snapshot document: a .json/.yaml/.yml/.json.gz name,
    gzip data, or a text whose first non-blank character opens a JSON object (the file is then read as
    a snapshot and its own errors apply)."""
    if path.suffix.lower() in (".json", ".yaml", ".yml") or path.name.lower().endswith(".json.gz"):
        return True
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return True  # let the snapshot loader name the problem
    if head[:2] == b"\x1f\x8b":  # gzip: a compressed snapshot (a pasted text is never compressed)
        return True
    text = head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    return text.startswith("{") or text.startswith("schema:")


def load(path: Path | str) -> dict[str, Any]:
    """A snapshot file, or a pasted environment text imported on the fly.

    The loader ``diff``, ``show`` and the fleet report call: a ``.json``/``.yaml``
    file (or any file that starts with ``{``) is read by :func:`forensics.snapshot.load`;
    anything else is imported (:func:`import_files`).

    Raises:
        BadInputError: one line naming the file and the problem (exit code 2).
    """
    from forensics import snapshot

    path = Path(path)
    if path.exists() and not path.is_file() and not path.is_dir():
        _read(path)  # a pipe or a device: refused before the format test reads from it
    if looks_like_snapshot(path):
        return snapshot.load(path)
    return import_files([path])
