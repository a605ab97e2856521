"""Field types a probe declares for its data, checked on load (one validator, no probe named here).

A probe's ``types`` table maps a dotted path pattern of its ``data`` to a type
word (the model is pyperf's metadata types table)::

    types = {"gpus": "mapping", "gpus.*": "mapping", "gpus.*.power.limit_mw": "number>=0"}

``*`` matches one element: every key of a mapping or every index of a list.
Type words: ``mapping``, ``list``, ``string``, ``integer``, ``number``,
``boolean``; a trailing ``?`` also accepts null; ``number>=0``/``integer>=0``
(or ``>0``) also bound the value. A missing value (``{"missing": ...}``) is
accepted everywhere, and a path that is absent is not checked (probes grow
fields across versions; their judges treat an absent field as unknown).

Two outcomes for a value that does not fit (:func:`check_data`):

- the wrong type (a string where a number belongs, a list where a mapping
  belongs): the file is refused, :class:`forensics.errors.BadInputError`
  naming the file and the field (exit 2);
- the right type but impossible (NaN, infinity, a negative power, a number
  beyond any float): the value is replaced, in the loaded copy, by the missing
  value ``{"missing": "error", "detail": "malformed value: ..."}`` and a note
  is returned, so each judge finds it unknown and its hypothesis inconclusive,
  never implicated or ruled out on it.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

from forensics.errors import BadInputError
from forensics.model import MissingReason, is_missing, missing

_BASE = {
    "mapping": dict,
    "list": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
}
_NAMES = {
    "mapping": "a mapping",
    "list": "a list",
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
}
_NONFINITE_STRINGS = {
    "NaN",
    "Infinity",
    "-Infinity",
}  # how forensics writes non-finite floats in strict JSON
_LARGEST = 1e300


def _parse(word: str) -> tuple[str, bool, str]:
    """``"number>=0?"`` -> ("number", nullable, ">=0")."""
    nullable = word.endswith("?")
    word = word.rstrip("?")
    for bound in (">=0", ">0"):
        if word.endswith(bound):
            return word[: -len(bound)], nullable, bound
    if word not in _BASE:
        raise ValueError(f"unknown field type {word!r}; one of {sorted(_BASE)}")
    return word, nullable, ""


def _json_type(value: Any) -> str:
    from forensics.docfile import json_type

    return json_type(value)


MALFORMED = "_malformed"
"""Key under which the snapshot loader leaves ``{probe: [[path elements], ...]}`` of the values it
replaced as malformed; :mod:`forensics.diff.ledger` makes findings about them inconclusive."""


def _display(where: str, trail: tuple) -> str:
    """The dotted path of ``trail`` (keys; ints are list indexes) below ``where``: ``probes.gpu.data.gpus.GPU-1.clocks[0]``."""
    return where + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in trail)


class _Node:
    """One step of a ``types`` table read as a tree: the type of the value here (None when the table
    names none), the steps below by key, the ``*`` step, and a pattern through here for messages."""

    __slots__ = ("spec", "keys", "star", "pattern")

    def __init__(self, pattern: str):
        self.spec: tuple[str, bool, str] | None = None
        self.keys: dict[str, _Node] = {}
        self.star: _Node | None = None
        self.pattern = pattern


@functools.lru_cache(maxsize=128)
def _plan(items: tuple[tuple[str, str], ...]) -> _Node:
    """A ``types`` table as a tree of :class:`_Node` (one walk of the data checks every pattern), parsed
    once per table (``fleet report`` checks 1,000 snapshots against the same few tables)."""
    root = _Node("")
    for pattern, word in sorted(
        items, key=lambda kv: kv[0].count(".")
    ):  # a step's pattern: its shallowest
        spec = _parse(word)
        node = root
        for part in pattern.split("."):
            if part == "*":
                node.star = node.star or _Node(pattern)
                node = node.star
            else:
                node = node.keys.setdefault(part, _Node(pattern))
        node.spec = spec
    return root


def check_data(
    data: dict[str, Any], types: dict[str, str], where: str, path: Path | str
) -> list[tuple[tuple[str, ...], str]]:
    """Check one probe's ``data`` against its ``types`` table; fixes impossible values in place.

    The data is walked once; at each value its own type is checked before anything below it
    (a container of the wrong type is named as such, not as a path that runs into it).

    Args:
        data: the probe section's ``data`` as loaded (changed in place for impossible values).
        types: the probe's table (pattern -> type word, see the module docstring).
        where: the section's name in messages (``probes.gpu.data``).
        path: the file, for messages.

    Returns:
        one ``(path elements within data, note)`` per value replaced as malformed
        (``(("gpus", "GPU-..", "power", "limit_mw"), "probes.gpu.data...limit_mw: malformed value (nan is
        not a finite number); treated as unknown")``).

    Raises:
        BadInputError: a value of the wrong type, naming the file and the field.
    """
    notes: list[tuple[tuple[str, ...], str]] = []
    _below(data, _plan(tuple(types.items())), (), where, path, notes)
    return notes


def _below(
    value: Any,
    node: _Node,
    trail: tuple,
    where: str,
    path: Path | str,
    notes: list[tuple[tuple[str, ...], str]],
) -> None:
    """Check what ``node``'s steps reach below ``value`` (a value already checked itself)."""
    if value is None or (type(value) is dict and "missing" in value and is_missing(value)):
        return  # null where the table allows it ("mapping?"), or missing: nothing below to check
    if isinstance(value, dict):
        star = node.star
        if star is not None:
            for k, v in value.items():
                _one(value, k, v, star, trail + (k,), where, path, notes)
        for k, child in node.keys.items():
            if k in value:
                _one(value, k, value[k], child, trail + (k,), where, path, notes)
    elif isinstance(value, list) and node.star is not None and not node.keys:
        star = node.star
        for k, v in enumerate(value):
            _one(value, k, v, star, trail + (k,), where, path, notes)
    else:
        below = node.star or next(iter(node.keys.values()))
        raise BadInputError(
            f"{path}: {_display(where, trail)} is not a mapping or list (needed for "
            f"{where}.{below.pattern}); the file was edited or damaged"
        )


def _one(
    container: Any,
    key: Any,
    value: Any,
    node: _Node,
    trail: tuple,
    where: str,
    path: Path | str,
    notes: list[tuple[tuple[str, ...], str]],
) -> None:
    """Check ``container[key]`` (``value``) against ``node``'s type, then what lies below it."""
    spec = node.spec
    if (
        spec is not None
        and not (type(value) is dict and "missing" in value and is_missing(value))
        and not (value is None and spec[1])
    ):
        base, nullable, bound = spec
        kind = type(value)
        numeric = base == "number" or base == "integer"
        if (
            numeric
            and (kind is int or (kind is float and base == "number"))
            and -_LARGEST <= value <= _LARGEST
            and (not bound or value > 0 or (value == 0 and bound == ">=0"))
        ):
            pass  # the common case, a plain reading: the checks below would all pass
        elif numeric:
            if isinstance(value, str) and value in _NONFINITE_STRINGS:
                value = float(value)
            if not isinstance(value, _BASE[base]) or isinstance(value, bool):
                _wrong(value, base, nullable, where, trail, path)
            bad = impossible(value, bound)
            if bad:
                container[key] = missing(MissingReason.ERROR, f"malformed value: {bad}")
                notes.append(
                    (
                        tuple(str(k) for k in trail),
                        f"{_display(where, trail)}: malformed value ({bad}); treated as unknown",
                    )
                )
        elif not isinstance(value, _BASE[base]) or (kind is bool and base != "boolean"):
            _wrong(value, base, nullable, where, trail, path)
    if node.keys or node.star is not None:
        _below(value, node, trail, where, path, notes)


def _wrong(
    value: Any, base: str, nullable: bool, where: str, trail: tuple, path: Path | str
) -> None:
    """Raise the wrong-type error of ``value`` at ``trail``."""
    shown = (
        repr(value)
        if isinstance(value, (str, int, float)) and len(repr(value)) < 40
        else _json_type(value)
    )
    raise BadInputError(
        f"{path}: {_display(where, trail)} is {shown}, expected {_NAMES[base]}"
        f"{' or null' if nullable else ''}; the file was edited or damaged"
    )


def impossible(value: float, bound: str = "") -> str:
    """Why a number cannot be a reading ("" when it can): not finite, beyond any float, or out of its bound."""
    if isinstance(value, int) and value.bit_length() > 1000:
        return f"a whole number of {value.bit_length()} bits is beyond any reading"
    try:
        f = float(value)
    except OverflowError:
        return "a number beyond any float"
    if not math.isfinite(f):
        return f"{f} is not a finite number"
    if abs(f) > _LARGEST:
        return f"{f:.3g} is beyond any reading"
    if bound == ">=0" and f < 0:
        return f"{value} is negative"
    if bound == ">0" and f <= 0:
        return f"{value} is not positive"
    return ""
