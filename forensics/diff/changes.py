"""Generic structured diff of two snapshots: every field, as :class:`Change` objects.

This is the layer under the hypothesis ledger (DESIGN section 2): it knows no
probe, only the shape of the data. Each probe section's ``data`` is walked
recursively; a field present on both sides with equal values is no change.

Paths are ``<probe>.<key>...`` with list elements written ``[key]``:

- a list of mappings that all carry a unique identity field is keyed by it,
  so reordering is no change and a GPU is matched to the same GPU:
  ``uuid`` (GPUs), ``path`` (repositories), ``name``, ``pid``, ``id``;
- any other list is compared as a multiset of its elements (reflog entries,
  file lists): elements that appeared are ``added``, those gone ``removed``;
  the element itself is shown as ``[#n]``.

Missing values (:func:`forensics.model.is_missing`) are leaves: a value that
became missing, or the reverse, is its own change kind (a GPU that fell off the
bus is a finding, STYLE section 5). A probe whose status changed (``ok`` ->
``unavailable``) gives a ``<probe>.status`` change carrying the reason.

Nothing here reads files or prints; the result is plain data.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from forensics.model import is_missing, is_unrecorded
from forensics.probe import FieldSpec

# Identity fields tried, in order, to key a list of mappings.
LIST_KEYS = ("uuid", "path", "name", "pid", "id")
# Top-level snapshot fields compared as the pseudo-section "snapshot".
_META_FIELDS = ("machine", "tool", "options", "redaction")


class ChangeKind(str, enum.Enum):
    """What happened to one field between BEFORE and AFTER."""

    ADDED = "added"  # absent before, present after
    REMOVED = "removed"  # present before, absent after
    CHANGED = "changed"  # both real values, different
    TO_MISSING = "value->missing"  # a real value before, a missing value after
    FROM_MISSING = "missing->value"  # a missing value before, a real value after


@dataclass(frozen=True)
class Change:
    """One field that differs between two snapshots.

    Attributes:
        probe: the snapshot section (probe name), or ``snapshot`` for top-level fields.
        path: display path, ``gpu.devices[GPU-5ac1].clock_sm_mhz``.
        parts: the path below the probe's ``data`` as a tuple (list keys as
            elements), used to match field-table patterns.
        kind: a :class:`ChangeKind`.
        before: the BEFORE value (``None`` when ``kind`` is ``added``).
        after: the AFTER value (``None`` when ``kind`` is ``removed``).
        volatile: the probe's field table marks it as moving on an idle machine
            (temperature, power draw): shown, never a cause on its own.
        label: the field table's label, "" when the field is not in one.
        unit: the field table's unit, "" when unknown.
    """

    probe: str
    path: str
    parts: tuple[str, ...]
    kind: ChangeKind
    before: Any = None
    after: Any = None
    volatile: bool = False
    label: str = ""
    unit: str = ""

    def to_json(self) -> dict[str, Any]:
        out = {
            "probe": self.probe,
            "path": self.path,
            "kind": self.kind.value,
            "before": self.before,
            "after": self.after,
        }
        if self.volatile:
            out["volatile"] = True
        if self.label:
            out["label"] = self.label
        if self.unit:
            out["unit"] = self.unit
        return out


def _list_key(*sides: list[Any]) -> str | None:
    """The identity field present in every element and unique within each side, or None."""
    items = [i for side in sides for i in side]
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for key in LIST_KEYS:
        ok = True
        for side in sides:
            values = [i.get(key) for i in side]
            if not all(
                isinstance(v, (str, int)) and not isinstance(v, bool) for v in values
            ) or len(set(values)) != len(values):
                ok = False
                break
        if ok:
            return key
    return None


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class _Walker:
    def __init__(self, probe: str, specs: Mapping[str, FieldSpec] | None):
        self.probe = probe
        self.out: list[Change] = []
        self._specs = [(tuple(p.split(".")), s) for p, s in (specs or {}).items()]

    def spec(self, parts: tuple[str, ...]) -> FieldSpec | None:
        best: tuple[int, FieldSpec] | None = None
        for pat, spec in self._specs:
            if len(pat) > len(parts):
                continue
            if all(p == "*" or p == q for p, q in zip(pat, parts)):
                exact = len(pat) == len(parts)
                rank = len(pat) * 2 + (1 if exact else 0)
                if best is None or rank > best[0]:
                    best = (rank, spec)
        return best[1] if best else None

    def emit(
        self, parts: tuple[str, ...], display: str, kind: ChangeKind, before: Any, after: Any
    ) -> None:
        spec = self.spec(parts)
        self.out.append(
            Change(
                self.probe,
                display,
                parts,
                kind,
                before,
                after,
                volatile=bool(spec and spec.volatile),
                label=spec.label if spec else "",
                unit=spec.unit if spec else "",
            )
        )

    def walk(self, before: Any, after: Any, parts: tuple[str, ...], display: str) -> None:
        if before == after:
            return
        if is_missing(before) or is_missing(after):
            if is_unrecorded(before) and is_unrecorded(after):
                return  # neither side's source holds it (two imported texts): unknown on both, not a change
            if is_missing(before) and is_missing(after):
                self.emit(parts, display, ChangeKind.CHANGED, before, after)
            else:
                kind = ChangeKind.FROM_MISSING if is_missing(before) else ChangeKind.TO_MISSING
                self.emit(parts, display, kind, before, after)
            return
        if isinstance(before, dict) and isinstance(after, dict):
            for key in list(before) + [k for k in after if k not in before]:
                sub, sub_display = parts + (str(key),), f"{display}.{key}" if display else str(key)
                if key not in after:
                    self.emit(sub, sub_display, ChangeKind.REMOVED, before[key], None)
                elif key not in before:
                    self.emit(sub, sub_display, ChangeKind.ADDED, None, after[key])
                else:
                    self.walk(before[key], after[key], sub, sub_display)
            return
        if isinstance(before, list) and isinstance(after, list):
            self.walk_list(before, after, parts, display)
            return
        self.emit(parts, display, ChangeKind.CHANGED, before, after)

    def walk_list(self, before: list, after: list, parts: tuple[str, ...], display: str) -> None:
        key = _list_key(before, after)
        if key is not None:
            b = {i[key]: i for i in before}
            a = {i[key]: i for i in after}
            for k in list(b) + [k for k in a if k not in b]:
                sub, sub_display = parts + (str(k),), f"{display}[{k}]"
                if k not in a:
                    self.emit(sub, sub_display, ChangeKind.REMOVED, b[k], None)
                elif k not in b:
                    self.emit(sub, sub_display, ChangeKind.ADDED, None, a[k])
                else:
                    self.walk(b[k], a[k], sub, sub_display)
            return
        # Multiset comparison: order is not a change, appearance and disappearance are.
        counts: dict[str, list[Any]] = {}
        for item in before:
            counts.setdefault(_canon(item), []).append(item)
        added: list[Any] = []
        for item in after:
            bucket = counts.get(_canon(item))
            if bucket:
                bucket.pop()
            else:
                added.append(item)
        removed = [item for bucket in counts.values() for item in bucket]
        elem = parts + ("*",)
        for item in removed:
            self.emit(elem, f"{display}[#{before.index(item)}]", ChangeKind.REMOVED, item, None)
        for item in added:
            self.emit(elem, f"{display}[#{after.index(item)}]", ChangeKind.ADDED, None, item)


def diff_probe(
    name: str,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    specs: Mapping[str, FieldSpec] | None = None,
) -> list[Change]:
    """Diff one probe section (``snapshot["probes"][name]``) of two snapshots.

    Args:
        name: the probe (section) name.
        before, after: the loaded sections, ``None`` where the probe is absent.
        specs: the probe's field table (``Probe.fields``), for labels, units and volatility.

    Returns:
        changes in a stable order (BEFORE's key order, then keys new in AFTER).
    """
    w = _Walker(name, specs)
    if before is None or after is None:
        if before is not None or after is not None:
            kind = ChangeKind.REMOVED if after is None else ChangeKind.ADDED
            w.emit(
                ("status",),
                f"{name}.status",
                kind,
                _status_text(before) if before else None,
                _status_text(after) if after else None,
            )
        return w.out
    sb, sa = before.get("status"), after.get("status")
    if sb != sa:
        w.emit(
            ("status",),
            f"{name}.status",
            ChangeKind.CHANGED,
            _status_text(before),
            _status_text(after),
        )
    w.walk(before.get("data") or {}, after.get("data") or {}, (), name)
    return w.out


def _status_text(section: Mapping[str, Any]) -> str:
    status = str(section.get("status", "?"))
    reason = section.get("reason")
    return f"{status}: {reason}" if reason else status


def diff_snapshots(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    specs: Mapping[str, Mapping[str, FieldSpec]] | None = None,
) -> list[Change]:
    """Diff every probe section and the top-level metadata of two loaded snapshots.

    Args:
        before, after: validated snapshot dicts (:func:`forensics.snapshot.load`).
        specs: probe name -> field table; probes without one get generic changes.

    Returns:
        all changes, probes in BEFORE's order then new ones, metadata
        (``snapshot.machine...``) last. ``created`` and ``label`` are not changes.
    """
    specs = specs or {}
    pb, pa = before.get("probes") or {}, after.get("probes") or {}
    out: list[Change] = []
    for name in _ordered(pb, pa):
        out.extend(diff_probe(name, pb.get(name), pa.get(name), specs.get(name)))
    meta = _Walker("snapshot", None)
    for key in _META_FIELDS:
        if key in before or key in after:
            if key not in after:
                meta.emit((key,), f"snapshot.{key}", ChangeKind.REMOVED, before[key], None)
            elif key not in before:
                meta.emit((key,), f"snapshot.{key}", ChangeKind.ADDED, None, after[key])
            else:
                meta.walk(before[key], after[key], (key,), f"snapshot.{key}")
    return out + meta.out


def _ordered(a: Iterable[str], b: Iterable[str]) -> list[str]:
    first = list(a)
    return first + [k for k in b if k not in first]
