"""The robust rules that find a fleet's outliers (and stay quiet on an A/A fleet).

**Categorical fields** (driver, CUDA, NCCL, torch, GPU model, VBIOS, NCCL_* of
each rank, git HEAD, kernel...): the units (nodes, GPUs or ranks) are grouped
by value. The majority value is the one most units have; every other value is
one outlier group naming its units. A group holding more than
:data:`MINORITY_MAX` of the units is a *mixed fleet* rather than an outlier
(reported, ranked low). With no value above half, the field is reported as
mixed with every group. VBIOS, ECC, MIG and compute mode are compared among
GPUs of the same model.

**Numbers per GPU** are compared with peers of the same GPU model (and, for
clocks, PCIe and clocks-event reasons, only with peers sampled under load):

- with at least :data:`MIN_PEERS_MAD` peers, **median / MAD**: a value is an
  outlier when it is worse than the peers' median by more than
  ``max(K x 1.4826 x MAD, tolerance)``, K = :data:`K_MAD` (a robust z of 5:
  for normal noise ~6e-7 of values cross it, about 0.005 false flags per
  metric in 8,000 GPUs). The tolerance is the metric's practical minimum
  (:data:`forensics.fleet.features.METRICS`): 10% for SM clock and matmul,
  25% for copies (the spread of healthy processes: docs/fleet.md, 'The rules'),
  0.25 of busy samples for SW power cap, 0.05 for HW
  slowdowns, one step for PCIe generation/width, 100 PCIe replays, any
  uncorrected ECC error or bad remapped row;
- with 2 to :data:`MIN_PEERS_MAD` - 1 peers, **ratio to best**: worse than the
  best peer by more than the tolerance;
- alone (one GPU of its model): not judged, and the report says so.

"Worse" is lower for clocks, bandwidth, PCIe and power limit, higher for
throttle time and error counters. The **score** that orders the report (0..1):
a number's shortfall relative to the reference (``1 - value / median`` for
lower-is-worse, the excess fraction for throttle time, 0.6 for a health
counter); a categorical group's field weight x (1 - its share of the units).
Pure functions: no I/O.
"""

from __future__ import annotations

import enum
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forensics.fleet.features import (
    GPU_CATEGORICAL,
    METRICS,
    NODE_FIELDS,
    FleetFacts,
    GpuFacts,
    Metric,
)
from forensics.gpu.readings import PCIE_GEN_LOAD

K_MAD = 5.0
MAD_SCALE = 1.4826  # MAD x 1.4826 estimates the standard deviation of normal data
MIN_PEERS_MAD = 8
MINORITY_MAX = 0.25
MIXED_SCORE = 0.3  # share of the field weight a mixed (not rare) value gets
HEALTH_SEVERITY = 0.6
ENV_WEIGHT = 0.7


class OutlierKind(str, enum.Enum):
    """What an :class:`Outlier` is about."""

    CATEGORICAL = "categorical"  # a rare value of a node, GPU or rank field
    NUMERIC = "numeric"  # one GPU's numbers against its peers
    MIXED = "mixed"  # a field with no dominant value (a mixed fleet, not an outlier)


@dataclass
class Outlier:
    """One finding of the fleet report.

    Attributes:
        kind: ``categorical``, ``numeric`` (one GPU's numbers) or ``mixed`` (no clear majority).
        field: the field or worst metric ("driver", "env.NCCL_ALGO", "pcie_gen_load").
        hypothesis: the DESIGN section 5 id it bears on.
        subject: who, in words ("GPU 3 of node n0042", "node n0777", "rank 1234 (node n0154)").
        value: the outlying value, as text.
        peers: what the others have, as text ("580.159.04 on 999 of 1,000 nodes").
        score: 0..1, orders the report (module docstring).
        summary: one line a person reads first.
        evidence: one line per fact, each naming its source.
        nodes, ranks: the nodes and ranks involved.
        gpus: ``[node, index]`` pairs involved.
    """

    kind: OutlierKind
    field: str
    hypothesis: str
    subject: str
    value: str
    peers: str
    score: float
    summary: str
    evidence: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    gpus: list[list[Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """All fields, JSON-ready (score rounded to 4 digits)."""
        return {
            "kind": OutlierKind(self.kind).value,
            "field": self.field,
            "hypothesis": self.hypothesis,
            "subject": self.subject,
            "value": self.value,
            "peers": self.peers,
            "score": round(self.score, 4),
            "summary": self.summary,
            "evidence": list(self.evidence),
            "nodes": list(self.nodes),
            "ranks": list(self.ranks),
            "gpus": [list(g) for g in self.gpus],
        }


@dataclass
class PeerStats:
    """One metric over the GPUs of one model: what each was judged against.

    Attributes:
        model, metric: the peer group and the metric name.
        n: GPUs with a value.
        median, mad: of their values.
        best: the best value (max for lower-is-worse metrics, min otherwise).
        rule: ``median/MAD``, ``ratio to best`` or ``alone (not judged)``.
    """

    model: str
    metric: str
    n: int
    median: float
    mad: float
    best: float
    rule: str

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "metric": self.metric,
            "n": self.n,
            "median": self.median,
            "mad": self.mad,
            "best": self.best,
            "rule": self.rule,
        }


def _count(n: int, unit: str) -> str:
    return f"{n:,} {unit}{'' if n == 1 else 's'}"


def _names(items: list[str], limit: int = 6) -> str:
    head = ", ".join(items[:limit])
    return head + (f" and {len(items) - limit:,} more" if len(items) > limit else "")


def _fmt(x: float) -> str:
    return f"{x:.0f}" if abs(x) >= 100 or float(x).is_integer() else f"{x:.3g}"


# ---------------------------------------------------------------- categorical


def group_values(units: dict[Any, str]) -> tuple[str | None, int, list[tuple[str, list[Any]]]]:
    """Group units by value.

    Args:
        units: unit id (node name, GPU label, rank) -> value.

    Returns:
        (majority value or None when no value holds more than half, its unit count,
        the other values with their units, largest group first).
    """
    by_value: dict[str, list[Any]] = defaultdict(list)
    for unit, value in units.items():
        by_value[value].append(unit)
    ranked = sorted(by_value.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    top, top_units = ranked[0]
    if len(top_units) * 2 <= len(units):
        return None, 0, ranked
    return top, len(top_units), ranked[1:]


def _categorical_outliers(
    fld_name: str,
    label: str,
    hypothesis: str,
    weight: float,
    units: dict[Any, str],
    unit_word: str,
    describe,
    nodes_of,
    ranks_of=lambda us: [],
    gpus_of=lambda us: [],
) -> list[Outlier]:
    """Outliers of one categorical field over ``units`` (module docstring rule)."""
    if len(units) < 2 or len({*units.values()}) < 2:
        return []
    total = len(units)
    majority, n_major, others = group_values(units)
    out = []
    if majority is None:
        parts = [f"{v!s} on {_count(len(us), unit_word)}" for v, us in others]
        out.append(
            Outlier(
                OutlierKind.MIXED,
                fld_name,
                hypothesis,
                f"all {_count(total, unit_word)}",
                "mixed",
                "; ".join(parts[:5]),
                weight * MIXED_SCORE,
                f"{label} is mixed across the fleet: {'; '.join(parts[:3])}",
                [
                    f"{label} = {v} on {_count(len(us), unit_word)}: {_names([describe(u) for u in us])}"
                    for v, us in others[:10]
                ],
                nodes=sorted({n for _, us in others for n in nodes_of(us)})[:50],
            )
        )
        return out
    for value, us in others:
        share = len(us) / total
        rare = share <= MINORITY_MAX
        subject = describe(us[0]) if len(us) == 1 else f"{_count(len(us), unit_word)}"
        peers = f"{majority} on {n_major:,} of {total:,} {unit_word}s"
        nodes = sorted(set(nodes_of(us)))
        summary = (
            f"{subject}: {label} {value} (the other {n_major:,} {unit_word}s: {majority})"
            if rare
            else f"{label} {value} on {_count(len(us), unit_word)} ({share:.0%}), {majority} on the rest: a mixed fleet"
        )
        out.append(
            Outlier(
                OutlierKind.CATEGORICAL if rare else OutlierKind.MIXED,
                fld_name,
                hypothesis,
                subject,
                str(value),
                peers,
                weight * ((1 - share) if rare else MIXED_SCORE),
                summary,
                [
                    f"{label} = {value}: {_names([describe(u) for u in us], 10)}",
                    f"majority: {label} = {majority} on {n_major:,} {unit_word}s",
                ],
                nodes=nodes[:200],
                ranks=sorted(ranks_of(us))[:200],
                gpus=gpus_of(us)[:200],
            )
        )
    return out


def categorical(facts: FleetFacts) -> list[Outlier]:
    """Node, GPU and rank categorical outliers (rule in the module docstring)."""
    out: list[Outlier] = []
    for f in NODE_FIELDS:
        units = {
            n.node: n.categorical[f.name] for n in facts.nodes.values() if f.name in n.categorical
        }
        out += _categorical_outliers(
            f.name,
            f.label,
            f.hypothesis,
            f.weight,
            units,
            "node",
            lambda u: f"node {u}",
            lambda us: us,
        )
    gpus = facts.gpus
    for f in GPU_CATEGORICAL:
        groups: dict[str, list[GpuFacts]] = defaultdict(list)
        for g in gpus:
            groups["" if f.name == "gpu.model" else g.model].append(g)
        for model, members in groups.items():
            units = {
                (g.node, g.index): g.categorical[f.name] for g in members if f.name in g.categorical
            }
            label = f.label if not model else f"{f.label} ({model})"
            out += _categorical_outliers(
                f.name,
                label,
                f.hypothesis,
                f.weight,
                units,
                "GPU",
                lambda u: f"GPU {u[1]} of node {u[0]}",
                lambda us: [u[0] for u in us],
                gpus_of=lambda us: [[u[0], u[1]] for u in us],
            )
    names = sorted({k for env in facts.rank_env.values() for k in env})
    per_rank = (
        facts.unit == "rank"
    )  # plain node snapshots: one launching environment per node, named by node
    for name in names:
        units = {r: env[name] for r, env in facts.rank_env.items()}
        out += _categorical_outliers(
            f"env.{name}",
            name,
            "nccl.env",
            ENV_WEIGHT,
            units,
            "rank" if per_rank else "node",
            (lambda r: f"rank {r} (node {facts.rank_node.get(r, '?')})")
            if per_rank
            else (lambda r: f"node {facts.rank_node.get(r, '?')}"),
            lambda rs: [facts.rank_node.get(r, "?") for r in rs],
            (lambda rs: list(rs)) if per_rank else (lambda rs: []),
        )
    return out


# ---------------------------------------------------------------- numeric


def _severity(m: Metric, value: float, ref: float) -> float:
    if m.bad == "low":
        return max(0.0, min(1.0, 1 - value / ref)) if ref > 0 else 0.0
    if m.unit == "of busy samples":
        return max(0.0, min(1.0, value - ref))
    return HEALTH_SEVERITY


def numeric(facts: FleetFacts) -> tuple[list[Outlier], list[PeerStats]]:
    """Per-GPU numeric outliers, one :class:`Outlier` per GPU (worst metric first), and the peer statistics.

    Returns:
        (outliers, the :class:`PeerStats` of every (model, metric) judged or seen).
    """
    by_model: dict[str, list[GpuFacts]] = defaultdict(list)
    for g in facts.gpus:
        by_model[g.model].append(g)
    flagged: dict[tuple[str, int], list[tuple[float, str, str, Metric]]] = defaultdict(list)
    stats: list[PeerStats] = []
    gpu_by_key = {(g.node, g.index): g for g in facts.gpus}
    for model, members in by_model.items():
        for m in METRICS:
            have = [g for g in members if m.name in g.values]
            if not have:
                continue
            x = np.fromiter((g.values[m.name] for g in have), dtype=float, count=len(have))
            med = float(np.median(x))
            mad = float(np.median(np.abs(x - med)))
            best = float(x.max() if m.bad == "low" else x.min())
            n = len(have)
            if n < 2:
                stats.append(PeerStats(model, m.name, n, med, mad, best, "alone (not judged)"))
                continue
            if n >= MIN_PEERS_MAD:
                rule, ref = "median/MAD", med
                spread = K_MAD * MAD_SCALE * mad
            else:
                rule, ref = "ratio to best", best
                spread = 0.0
            if m.bad == "low":
                margin = max(spread, 0.5 if m.discrete else m.rel_tol * abs(ref))
                bad = np.nonzero(x < ref - margin)[0]
            else:
                margin = max(spread, m.abs_tol)
                bad = np.nonzero(x > ref + margin)[0]
            stats.append(PeerStats(model, m.name, n, med, mad, best, rule))
            for i in bad:
                g = have[int(i)]
                v = float(x[i])
                unit = f" {m.unit}" if m.unit and m.unit != "x" else ""
                shown = (
                    (lambda z: f"x{_fmt(z)}")
                    if m.unit == "x"
                    else (lambda z, unit=unit: f"{_fmt(z)}{unit}")
                )
                if m.unit == "of busy samples":
                    shown = lambda z: f"{z:.0%} of busy samples"  # noqa: E731
                elif m.name in (PCIE_GEN_LOAD, "pcie_gen_max"):
                    shown = lambda z: f"Gen{z:.0f}"  # noqa: E731
                ref_word = "median" if rule == "median/MAD" else "best"
                line = (
                    f"{m.label}: {shown(v)} vs peers' {ref_word} {shown(ref)} ({_count(n - 1, model + ' peer')}, "
                    f"{rule}; source: {m.source})"
                )
                flagged[(g.node, g.index)].append(
                    (_severity(m, v, ref), line, f"{shown(v)} (peers {shown(ref)})", m)
                )
    out = []
    for key, items in flagged.items():
        g = gpu_by_key[key]
        sev = max(t[0] for t in items)
        items.sort(
            key=lambda t: (t[3].effect, -t[0])
        )  # a cause (PCIe Gen3, power cap) before its effects
        _, _, shown_v, m = items[0]
        words = "; ".join(f"{it[3].label} {it[2]}" for it in items[:3])
        ev = [it[1] for it in items]
        if g.rank is not None:
            ev.append(f"driven by rank {g.rank}")
        value, _, peers = shown_v.partition(" (peers ")
        out.append(
            Outlier(
                OutlierKind.NUMERIC,
                m.name,
                m.hypothesis,
                g.label,
                value,
                peers.rstrip(")"),
                min(1.0, sev + 0.02 * (len(items) - 1)),
                f"{g.label} ({g.model}): {words}",
                ev,
                nodes=[g.node],
                ranks=[g.rank] if g.rank is not None else [],
                gpus=[[g.node, g.index]],
            )
        )
    return out, stats


def find(facts: FleetFacts) -> tuple[list[Outlier], list[PeerStats]]:
    """Every outlier, worst first (score, then subject), and the numeric peer statistics."""
    cat = categorical(facts)
    num, stats = numeric(facts)
    allo = cat + num
    allo.sort(key=lambda o: (-o.score, o.kind == OutlierKind.MIXED, o.subject))
    return allo, stats


def unit_counts(facts: FleetFacts) -> Counter:
    """How many nodes, GPUs and ranks were judged."""
    return Counter(nodes=len(facts.nodes), gpus=len(facts.gpus), ranks=len(facts.rank_env))
