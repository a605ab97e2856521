"""Two fleets (or a fleet and one snapshot): what changed fleet-wide, and what changed on a few nodes.

Rules (pure; inputs are :class:`forensics.fleet.features.FleetFacts`):

- **categorical** (node fields, GPU fields, each rank's variables): when the
  majority value changed, the change is *fleet-wide* (with the share of units
  that now have it). Otherwise the units matched by name (node name, node + GPU
  index, rank number) whose value changed are a *few-nodes* change, grouped by
  (old value, new value).
- **numbers per GPU model**: when the median of a metric moved by more than the
  metric's tolerance (:data:`forensics.fleet.features.METRICS`), it is a
  fleet-wide change; GPUs matched by node and index whose own value moved by
  more than the tolerance while the median did not are a few-nodes change.
- nodes present on one side only are listed.

A single snapshot as the baseline is a fleet of one node: its values are the
"majority", and node-by-node matching applies when its hostname is a node of
the other fleet.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from forensics.fleet.features import (
    GPU_CATEGORICAL,
    METRICS,
    NODE_FIELDS,
    UNSET,
    FleetFacts,
    facts_of,
    from_records,
)
from forensics.fleet.outliers import group_values


def facts_from_snapshot(snap: dict[str, Any]) -> FleetFacts:
    """A one-node fleet from a plain ``forensics snapshot`` file (its launching process's variables as rank 0's;
    the record of :func:`forensics.fleet.nodes.record`)."""
    from forensics.fleet.nodes import record

    node = str((snap.get("machine") or {}).get("hostname") or "baseline")
    return from_records([record(snap, node=node, rank=0, world_size=1)], [], 1)


def _majority(values: dict[Any, str]) -> str | None:
    if not values:
        return None
    top, _, _ = group_values(values)
    if top is None:  # no value above half: the most common one
        return Counter(values.values()).most_common(1)[0][0]
    return top


def _cat_units(facts: FleetFacts) -> dict[str, dict[Any, str]]:
    out: dict[str, dict[Any, str]] = defaultdict(dict)
    for n in facts.nodes.values():
        for f in NODE_FIELDS:
            if f.name in n.categorical:
                out[f.name][n.node] = n.categorical[f.name]
    for g in facts.gpus:
        for f in GPU_CATEGORICAL:
            if f.name in g.categorical:
                out[f.name][(g.node, g.index)] = g.categorical[f.name]
    by_node = (
        facts.unit != "rank"
    )  # plain node snapshots: ranks are file order, the node name is the unit
    for r, env in facts.rank_env.items():
        for k, v in env.items():
            out[f"env.{k}"][facts.rank_node.get(r, r) if by_node else r] = v
    return out


def _env_units(facts: FleetFacts) -> list[Any]:
    """The units a variable is compared over: ranks, or node names for plain node snapshots."""
    return (
        list(facts.rank_env)
        if facts.unit == "rank"
        else [facts.rank_node.get(r, r) for r in facts.rank_env]
    )


def _label(field: str) -> str:
    for f in NODE_FIELDS + GPU_CATEGORICAL:
        if f.name == field:
            return f.label
    return field[4:] if field.startswith("env.") else field


def _unit_text(u: Any, facts: FleetFacts) -> str:
    if isinstance(u, tuple):
        return f"GPU {u[1]} of node {u[0]}"
    if isinstance(u, int):
        return f"rank {u} (node {facts.rank_node.get(u, '?')})"
    return f"node {u}"


def compare(before: FleetFacts, after: FleetFacts) -> dict[str, Any]:
    """What changed from ``before`` to ``after``.

    Returns:
        ``{"verdict": str, "fleet_wide": [{"field", "label", "before", "after", "share"}],
        "few_nodes": [{"field", "label", "before", "after", "units": [...], "nodes": [...], "count"}],
        "nodes_added": [...], "nodes_removed": [...], "matched_nodes": int}``; numeric entries carry
        ``model`` and their values are medians (fleet-wide) or per-GPU values (few nodes).
    """
    cb, ca = _cat_units(before), _cat_units(after)
    wide, few = [], []
    for fld in sorted(set(cb) | set(ca)):
        vb, va = cb.get(fld, {}), ca.get(fld, {})
        if fld.startswith("env."):  # a variable one side never had is "unset" there
            vb = vb or {u: UNSET for u in _env_units(before)}
            va = va or {u: UNSET for u in _env_units(after)}
        mb, ma = _majority(vb), _majority(va)
        if mb is None or ma is None:
            continue
        if mb != ma:
            share = sum(1 for v in va.values() if v == ma) / max(1, len(va))
            wide.append(
                {
                    "field": fld,
                    "label": _label(fld),
                    "before": mb,
                    "after": ma,
                    "share": round(share, 4),
                }
            )
            continue
        groups: dict[tuple[str, str], list[Any]] = defaultdict(list)
        for u in vb.keys() & va.keys():
            if vb[u] != va[u]:
                groups[(vb[u], va[u])].append(u)
        for (old, new), units in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            units.sort(key=str)
            nodes = sorted(
                {
                    u[0]
                    if isinstance(u, tuple)
                    else (after.rank_node.get(u, "?") if isinstance(u, int) else u)
                    for u in units
                }
            )
            few.append(
                {
                    "field": fld,
                    "label": _label(fld),
                    "before": old,
                    "after": new,
                    "count": len(units),
                    "units": [_unit_text(u, after) for u in units[:50]],
                    "nodes": nodes[:200],
                }
            )
    _numeric(before, after, wide, few)
    nb, na = set(before.nodes), set(after.nodes)
    out = {
        "fleet_wide": wide,
        "few_nodes": few,
        "nodes_added": sorted(na - nb),
        "nodes_removed": sorted(nb - na),
        "matched_nodes": len(na & nb),
    }
    out["verdict"] = _verdict(out)
    from forensics.redact import Redactor

    return Redactor().sweep(
        out
    )  # the values compared come from records and snapshots: no secret in any output


def _numeric(before: FleetFacts, after: FleetFacts, wide: list, few: list) -> None:
    gb = {(g.node, g.index): g for g in before.gpus}
    models = sorted({g.model for g in before.gpus} | {g.model for g in after.gpus})
    for model in models:
        for m in METRICS:
            xb = {
                k: g.values[m.name]
                for k, g in gb.items()
                if g.model == model and m.name in g.values
            }
            xa = {
                (g.node, g.index): g.values[m.name]
                for g in after.gpus
                if g.model == model and m.name in g.values
            }
            if not xb or not xa:
                continue
            medb, meda = float(np.median(list(xb.values()))), float(np.median(list(xa.values())))

            def moved(a: float, b: float, m=m) -> bool:
                if m.bad == "low" or m.rel_tol:
                    tol = 0.5 if m.discrete else m.rel_tol * abs(a)
                else:
                    tol = m.abs_tol
                return abs(b - a) > tol

            if moved(medb, meda):
                wide.append(
                    {
                        "field": m.name,
                        "label": f"{m.label} ({model}, median)",
                        "model": model,
                        "before": _num(medb),
                        "after": _num(meda),
                        "share": 1.0,
                    }
                )
                continue
            changed = sorted(k for k in xb.keys() & xa.keys() if moved(xb[k], xa[k]))
            if changed:
                one = changed[0]
                few.append(
                    {
                        "field": m.name,
                        "label": f"{m.label} ({model})",
                        "model": model,
                        "before": _num(xb[one])
                        if len(changed) == 1
                        else f"peers' median {_num(medb)}",
                        "after": _num(xa[one])
                        if len(changed) == 1
                        else f"peers' median {_num(meda)}",
                        "count": len(changed),
                        "units": [
                            f"GPU {i} of node {n}: {_num(xb[(n, i)])} -> {_num(xa[(n, i)])}"
                            for n, i in changed[:50]
                        ],
                        "nodes": sorted({n for n, _ in changed})[:200],
                    }
                )


def _num(x: float) -> str:
    return f"{x:.0f}" if abs(x) >= 100 or float(x).is_integer() else f"{x:.3g}"


def _verdict(c: dict[str, Any]) -> str:
    parts = []
    if c["fleet_wide"]:
        parts.append(
            "fleet-wide: "
            + "; ".join(f"{w['label']} {w['before']} -> {w['after']}" for w in c["fleet_wide"][:4])
        )
    if c["few_nodes"]:
        parts.append(
            "on a few nodes: "
            + "; ".join(
                f"{f['label']} {f['before']} -> {f['after']} on {', '.join(f['nodes'][:3])}"
                f"{' ...' if len(f['nodes']) > 3 else ''}"
                for f in c["few_nodes"][:4]
            )
        )
    moved = []
    for key, word in (("nodes_added", "only after"), ("nodes_removed", "only before")):
        names = c[key]
        if names:
            moved.append(
                f"{len(names):,} node{'' if len(names) == 1 else 's'} {word} "
                f"({', '.join(names[:3])}{' ...' if len(names) > 3 else ''})"
            )
    if not parts:
        same = f"nothing changed across the {c['matched_nodes']:,} matched node{'' if c['matched_nodes'] == 1 else 's'}"
        return f"{'; '.join(moved)}; {same}." if moved else same[0].upper() + same[1:] + "."
    return "Changed " + "; ".join(parts + moved) + "."


def load_baseline(path) -> FleetFacts:
    """A baseline for ``fleet report --baseline`` or ``diff``: a fleet file/folder, a folder of node snapshots
    (:mod:`forensics.fleet.nodes`), or a snapshot file.

    Raises:
        forensics.errors.BadInputError: neither a fleet nor a snapshot, or damaged.
        forensics.errors.InconclusiveError: a fleet without any rank record (exit 3).
    """
    from pathlib import Path

    from forensics.fleet import document, nodes

    path = Path(path)
    if document.is_fleet_file(path) or nodes.is_node_folder(path):
        facts = facts_of(
            document.load(path) if document.is_fleet_file(path) else nodes.load([path])
        )
        if not facts.rank_env:  # every node would read as added or removed
            from forensics.errors import InconclusiveError

            raise InconclusiveError(
                f"{path}: the fleet holds no rank record (world size {facts.world_size}, "
                f"{len(facts.missing)} named missing); nothing to compare it with"
            )
        return facts
    from forensics.diff.files import load_side
    from forensics.errors import BadInputError

    if os.path.isdir(
        path
    ):  # no rank record and no node snapshot in it: say so, not "is a folder" (never raises)
        nodes.expand([path])
    try:  # swept again: a --no-redact snapshot's secrets stay out of the report
        side = load_side(path, texts=False)
    except BadInputError as exc:
        raise BadInputError(
            f"{exc} (this side of the comparison must be a fleet file or folder, or a snapshot)"
        ) from None
    return facts_from_snapshot(side.doc)


def compare_files(before, after) -> dict[str, Any]:
    """Two fleets in (files, folders, or a snapshot as a fleet of one node), one comparison out.

    What ``forensics diff`` calls when a side is a fleet: each side is read by
    :func:`load_baseline` (a snapshot side by :func:`forensics.diff.files.load_side`, as ``diff``
    and ``investigate`` read theirs), then :func:`compare`.

    Raises:
        forensics.errors.BadInputError, forensics.errors.InconclusiveError: as :func:`load_baseline`.
    """
    return compare(load_baseline(before), load_baseline(after))
