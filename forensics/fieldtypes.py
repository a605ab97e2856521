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
from typing import Any, Iterator

from forensics.errors import BadInputError
from forensics.model import MissingReason, is_missing, missing

_BASE = {"mapping": dict, "list": list, "string": str, "integer": int, "number": (int, float), "boolean": bool}
_NAMES = {"mapping": "a mapping", "list": "a list", "string": "a string", "integer": "a whole number",
          "number": "a number", "boolean": "true or false"}
_NONFINITE_STRINGS = {"NaN", "Infinity", "-Infinity"}  # how forensics writes non-finite floats in strict JSON
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


def _walk(node: Any, parts: tuple[str, ...], where: str, trail: tuple = ()) -> Iterator[tuple[Any, Any, tuple]]:
    """(container, key, path elements) of every value the pattern ``parts`` reaches from ``node``; a path
    element is a mapping's key (str) or a list's index (int). No path text is built unless it is needed.

    Raises:
        TypeError: with the dotted path, when the path runs into a value that is no container.
    """
    if not parts:
        return
    head, rest = parts[0], parts[1:]
    if node is None or is_missing(node):  # null where the table allows it ("mapping?"): nothing below to check
        return
    if isinstance(node, dict):
        keys = node if head == "*" else ((head,) if head in node else ())
    elif isinstance(node, list) and head == "*":
        keys = range(len(node))
    else:
        raise TypeError(_display(where, trail))
    for k in keys:
        if rest:
            yield from _walk(node[k], rest, where, trail + (k,))
        else:
            yield node, k, trail + (k,)


@functools.lru_cache(maxsize=128)
def _plan(items: tuple[tuple[str, str], ...]) -> tuple[tuple[str, tuple[str, ...], str, bool, str], ...]:
    """A ``types`` table as (pattern, its parts, base, nullable, bound), containers before leaves; parsed once
    per table (``fleet report`` checks 1,000 snapshots against the same few tables)."""
    return tuple((pattern, tuple(pattern.split(".")), *_parse(word))
                 for pattern, word in sorted(items, key=lambda kv: kv[0].count(".")))


def check_data(data: dict[str, Any], types: dict[str, str], where: str,
               path: Path | str) -> list[tuple[tuple[str, ...], str]]:
    """Check one probe's ``data`` against its ``types`` table; fixes impossible values in place.

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
    for pattern, parts, base, nullable, bound in _plan(tuple(types.items())):  # containers before leaves
        try:
            found = list(_walk(data, parts, where))
        except TypeError as exc:
            continue_path = str(exc)
            raise BadInputError(f"{path}: {continue_path} is not a mapping or list (needed for {where}.{pattern}); "
                                "the file was edited or damaged") from None
        for node, key, trail in found:
            value = node[key]
            if is_missing(value) or (value is None and nullable):
                continue
            if base in ("number", "integer") and isinstance(value, str) and value in _NONFINITE_STRINGS:
                value = float(value)
            ok = isinstance(value, _BASE[base]) and not (isinstance(value, bool) and base != "boolean")
            if not ok:
                shown = repr(value) if isinstance(value, (str, int, float)) and len(repr(value)) < 40 else _json_type(value)
                raise BadInputError(f"{path}: {_display(where, trail)} is {shown}, expected {_NAMES[base]}"
                                    f"{' or null' if nullable else ''}; the file was edited or damaged")
            if base in ("number", "integer"):
                bad = impossible(value, bound)
                if bad:
                    node[key] = missing(MissingReason.ERROR, f"malformed value: {bad}")
                    notes.append((tuple(str(k) for k in trail),
                                  f"{_display(where, trail)}: malformed value ({bad}); treated as unknown"))
    return notes


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
