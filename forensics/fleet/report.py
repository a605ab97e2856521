"""The fleet report as data: verdict, outliers worst first, missing ranks, heat map, peer statistics.

``build(fleet)`` reads the records once (streamed) into
:class:`forensics.fleet.features.FleetFacts`, runs the rules of
:mod:`forensics.fleet.outliers`, and returns a :class:`FleetReport`. Rendering
(:mod:`forensics.render.fleet`, :mod:`forensics.render.prometheus`) reads only this object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics import __version__
from forensics.fleet.features import METRIC_BY_NAME, FleetFacts, facts_of
from forensics.fleet.outliers import Outlier, OutlierKind, PeerStats, find

JSON_SCHEMA = "forensics.fleet-report/1"
VERDICT_NAMES = 4


@dataclass
class HeatCell:
    """One GPU in the heat map: its worst score (0 = within its peers) and a short note."""

    index: int
    score: float
    note: str
    model: str


@dataclass
class HeatRow:
    """One node of the heat map; ``score`` is its worst finding (GPU or node-level)."""

    node: str
    score: float
    cells: list[HeatCell]
    node_note: str = ""


@dataclass
class FleetReport:
    """Everything the fleet report says.

    Attributes:
        verdict: one sentence, worst outliers named first.
        outliers: every finding, worst first (:class:`forensics.fleet.outliers.Outlier`).
        missing: ranks without a record: ``{"rank", "node", "local_rank", "reason"}``.
        counts: ``nodes``, ``gpus``, ``ranks`` judged; ``world_size`` of the job; ``gpus_under_load``.
        peers: the numeric peer statistics (what each GPU was judged against).
        heat: rows of the per-node x per-GPU heat map, worst node first.
        checked: what was compared, one line each (shown with "no outlier").
        notes: caveats (nodes without a snapshot, CPU figures not judged, record errors).
        source: the fleet file or folder read; ``created``: when the fleet was taken.
        baseline: the comparison with ``--baseline`` (:func:`forensics.fleet.compare.compare`), or None.
        unit: what one record is: ``rank`` (a fleet snapshot) or ``node snapshot`` (plain snapshot files,
            :mod:`forensics.fleet.nodes`); ``counts["ranks"]`` and ``missing`` count these.
    """

    verdict: str
    outliers: list[Outlier]
    missing: list[dict[str, Any]]
    counts: dict[str, int]
    peers: list[PeerStats]
    heat: list[HeatRow]
    checked: list[str]
    notes: list[str] = field(default_factory=list)
    source: str = ""
    created: str = ""
    baseline: dict[str, Any] | None = None
    unit: str = "rank"

    @property
    def real_outliers(self) -> list[Outlier]:
        """Outliers proper (not ``mixed`` fields)."""
        return [o for o in self.outliers if o.kind != OutlierKind.MIXED]

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form (``forensics.fleet-report/1``): ``verdict``, ``outliers`` (worst first),
        ``missing``, ``counts``, ``peers``, ``checked``, ``notes``, ``heat``, ``baseline`` and ``unit``."""
        return {
            "schema": JSON_SCHEMA,
            "tool": {"name": "forensics", "version": __version__},
            "source": self.source,
            "created": self.created,
            "verdict": self.verdict,
            "counts": dict(self.counts),
            "outliers": [o.to_json() for o in self.outliers],
            "missing": list(self.missing),
            "peers": [p.to_json() for p in self.peers],
            "checked": list(self.checked),
            "notes": list(self.notes),
            "heat": [
                {
                    "node": r.node,
                    "score": round(r.score, 4),
                    "note": r.node_note,
                    "gpus": [
                        {"index": c.index, "score": round(c.score, 4), "note": c.note}
                        for c in r.cells
                    ],
                }
                for r in self.heat
                if r.score > 0
            ],
            "baseline": self.baseline,
            "unit": self.unit,
        }


def _verdict(
    outs: list[Outlier], missing: list[dict[str, Any]], counts: dict[str, int], unit: str = "rank"
) -> str:
    def n(count: int, word: str) -> str:
        return f"{count:,} {word}{'' if count == 1 else 's'}"

    scope = f"{n(counts['nodes'], 'node')}, {n(counts['gpus'], 'GPU')}" + (
        f", {n(counts['ranks'], 'rank')}" if unit == "rank" else ""
    )
    real = [o for o in outs if o.kind != OutlierKind.MIXED]
    miss = ""
    if missing:
        nodes = sorted({str(m.get("node")) for m in missing if m.get("node")})
        word = "rank" if unit == "rank" else "node"
        miss = f"; {len(missing):,} {word}{'s' if len(missing) != 1 else ''} missing" + (
            f" ({'node ' if unit == 'rank' else ''}{', '.join(nodes[:3])}{' ...' if len(nodes) > 3 else ''})"
            if nodes
            else ""
        )
    if not real:
        mixed = [o for o in outs if o.kind == OutlierKind.MIXED]
        tail = f"; mixed: {', '.join(sorted({o.field for o in mixed}))}" if mixed else ""
        return f"No outlier among {scope}{tail}{miss}."
    named = "; ".join(o.summary for o in real[:VERDICT_NAMES])
    more = f"; and {len(real) - VERDICT_NAMES} more" if len(real) > VERDICT_NAMES else ""
    return f"{len(real)} outlier{'s' if len(real) != 1 else ''} among {scope}: {named}{more}{miss}."


def _heat(facts: FleetFacts, outs: list[Outlier]) -> list[HeatRow]:
    gpu_score: dict[tuple[str, int], tuple[float, str]] = {}
    node_score: dict[str, tuple[float, str]] = {}
    for o in outs:
        if o.kind == OutlierKind.MIXED:
            continue
        if o.gpus:
            for node, idx in o.gpus:
                key = (node, idx)
                if o.score > gpu_score.get(key, (0.0, ""))[0]:
                    gpu_score[key] = (o.score, o.summary)
        else:
            for node in o.nodes:
                if o.score > node_score.get(node, (0.0, ""))[0]:
                    node_score[node] = (o.score, o.summary)
    rows = []
    for n in facts.nodes.values():
        cells = []
        for idx, g in sorted(n.gpus.items()):
            s, note = gpu_score.get((n.node, idx), (0.0, ""))
            cells.append(HeatCell(idx, s, note, g.model))
        ns, nnote = node_score.get(n.node, (0.0, ""))
        rows.append(HeatRow(n.node, max([ns] + [c.score for c in cells]), cells, nnote))
    rows.sort(key=lambda r: (-r.score, r.node))
    return rows


def _checked(facts: FleetFacts, peers: list[PeerStats]) -> list[str]:
    from forensics.fleet.features import GPU_CATEGORICAL, NODE_FIELDS

    node_fields = [
        f.label for f in NODE_FIELDS if any(f.name in n.categorical for n in facts.nodes.values())
    ]
    gpu_fields = [
        f.label for f in GPU_CATEGORICAL if any(f.name in g.categorical for g in facts.gpus)
    ]
    env_names = sorted({k for env in facts.rank_env.values() for k in env})
    lines = []
    if node_fields:
        lines.append(f"per node, by majority: {', '.join(node_fields)}")
    if gpu_fields:
        lines.append(f"per GPU, by majority within the model: {', '.join(gpu_fields)}")
    if env_names:
        lines.append(
            f"per {'rank' if facts.unit == 'rank' else 'node (its launching environment)'}, by majority: "
            f"{len(env_names)} variables ({', '.join(env_names[:8])}"
            f"{' ...' if len(env_names) > 8 else ''})"
        )
    judged = sorted({(p.metric, p.rule) for p in peers})
    if judged:
        by_rule: dict[str, list[str]] = {}
        for metric, rule in judged:
            by_rule.setdefault(rule, []).append(METRIC_BY_NAME[metric].label)
        for rule, labels in by_rule.items():
            lines.append(
                f"per GPU against peers of its model ({rule}): {', '.join(sorted(set(labels)))}"
            )
    return lines


def build(fleet: Any, baseline: Any = None) -> FleetReport:
    """Judge a loaded fleet (:func:`forensics.fleet.document.load`).

    Args:
        fleet: a :class:`forensics.fleet.document.Fleet`; its records are read once.
        baseline: facts of a baseline (:class:`FleetFacts`), compared with :func:`forensics.fleet.compare.compare`.

    Raises:
        forensics.errors.BadInputError: a damaged record (from the loader).
    """
    facts = facts_of(fleet)
    head = fleet.head
    rep = judge(
        facts, source=str(fleet.path), created=str(head.get("created", "")), baseline=baseline
    )
    notes = [str(n) for n in head.get("notes") or []]
    skipped = head.get("skipped") or []
    if skipped:  # files of an --out-dir folder that are not records (forensics.fleet.document)
        notes.append(
            f"not read from the folder: {'; '.join(skipped[:3])}"
            f"{f' ... ({len(skipped)} in all)' if len(skipped) > 3 else ''}"
        )
    # the loader's notes name files and hosts (a file named s1-AKIA....json): swept as judge() swept the rest
    from forensics.redact import Redactor

    rep.notes[:0] = Redactor().sweep(notes)
    return rep


def judge(
    facts: FleetFacts, *, source: str = "", created: str = "", baseline: FleetFacts | None = None
) -> FleetReport:
    """The report of already-read facts (see :func:`build`)."""
    outs, peers = find(facts)
    counts = {
        "nodes": len(facts.nodes),
        "gpus": len(facts.gpus),
        "ranks": len(facts.rank_env),
        "world_size": facts.world_size,
        "gpus_under_load": sum(1 for g in facts.gpus if g.under_load),
    }
    notes = []
    if facts.duplicates:
        d = sorted(facts.duplicates.items())
        notes.append(
            f"{len(d)} rank(s) have more than one record, the first of each was used: "
            + ", ".join(f"rank {r} x{n}" for r, n in d[:8])
            + (" ..." if len(d) > 8 else "")
            + "; the file mixes runs or ranks (launcher variables wrong on some processes?)"
        )
    clash = [(n.node, c) for n in facts.nodes.values() for c in n.clashes]
    if clash:
        shown = "; ".join(
            f"node {node}: ranks {a} and {b} are both local rank {lr}"
            for node, (lr, a, b) in clash[:4]
        )
        notes.append(
            f"{len({node for node, _ in clash})} node name(s) are shared by several machines ({shown}"
            f"{' ...' if len(clash) > 4 else ''}): their ranks are counted as one node and only the first "
            "snapshot is read; give each machine its own name (FORENSICS_FLEET_NODE=NAME, docs/fleet.md)"
        )
    no_snap = [n.node for n in facts.nodes.values() if not n.has_snapshot]
    if no_snap:
        notes.append(
            f"{len(no_snap)} node(s) sent no snapshot (their local rank 0 is missing or failed): "
            f"{', '.join(no_snap[:5])}{' ...' if len(no_snap) > 5 else ''}; their node and GPU fields are not judged"
        )
    if any(n.cpu_figures for n in facts.nodes.values()):
        notes.append(
            "CPU bench figures are shown, never judged: CPU ranks share cores, so their speeds differ "
            "by scheduling, not by hardware"
        )
    if facts.gpus and not counts["gpus_under_load"]:
        how = (
            "run fleet snapshot with --bench"
            if facts.unit == "rank"
            else "take the node snapshots with --sample S while the job runs, or with --bench"
        )
        notes.append(
            f"no GPU was sampled under load ({how}): clocks, PCIe link and clocks-event reasons were not judged"
        )
    alone = sorted({p.model for p in peers if p.rule.startswith("alone")})
    if alone:
        notes.append(f"GPU model(s) with a single GPU, not compared: {', '.join(alone)}")
    if facts.not_finite:
        total = sum(facts.not_finite.values())
        what = ", ".join(
            f"{METRIC_BY_NAME[k].label if k in METRIC_BY_NAME else k} x{n}"
            for k, n in sorted(facts.not_finite.items())
        )
        notes.append(
            f"{total} value(s) in the records were not finite numbers (an infinity or NaN) and were left "
            f"out of the comparison: {what}"
        )
    errs = [e for n in facts.nodes.values() for e in n.errors]
    if errs:
        notes.append(f"{len(errs)} error(s) in the records, e.g. {errs[0]}")
    comp = None
    if baseline is not None:
        from forensics.fleet.compare import compare

        comp = compare(baseline, facts)
    rep = FleetReport(
        verdict=_verdict(outs, facts.missing, counts, facts.unit),
        outliers=outs,
        missing=facts.missing,
        counts=counts,
        peers=peers,
        heat=_heat(facts, outs),
        checked=_checked(facts, peers),
        notes=notes,
        source=source,
        created=created,
        baseline=comp,
        unit=facts.unit,
    )
    # Every renderer (HTML, Markdown, JSON, Prometheus, the terminal) reads this object: one sweep
    # here keeps a secret the records carried (a missing rank's reason, a node field) out of all of them.
    from forensics.redact import Redactor

    return Redactor().sweep(rep)


def report_of(
    sources, *, baseline=None, expect_nodes: int | None = None, hostfile=None
) -> FleetReport:
    """Load a fleet and judge it: what ``forensics fleet report`` does between its options and its output.

    Args:
        sources: one fleet file or ``--out-dir`` folder, or node snapshots (files or their folder).
        baseline: a fleet file/folder or a snapshot to compare with
            (:func:`forensics.fleet.compare.load_baseline`), or None.
        expect_nodes, hostfile: node snapshots only: how many nodes, or which hosts, the job had
            (:func:`forensics.fleet.nodes.load`).

    Raises:
        forensics.errors.BadInputError: an input that cannot be read; ``expect_nodes`` or ``hostfile``
            given with a fleet file.
        forensics.errors.InconclusiveError: no rank record at all.
    """
    from forensics.errors import BadInputError, InconclusiveError
    from forensics.fleet import document, nodes

    base = None
    if baseline is not None:
        from forensics.fleet.compare import load_baseline

        base = load_baseline(baseline)
    one_node = (  # one node's snapshot with the nodes expected: the others are missing, not refused
        len(sources) == 1
        and (expect_nodes is not None or hostfile is not None)
        and Path(sources[0]).is_file()
        and not document.is_fleet_file(Path(sources[0]))
    )
    if (
        len(sources) == 1 and not one_node and not nodes.is_node_folder(sources[0])
    ):  # a fleet file or --out-dir folder
        if expect_nodes is not None or hostfile is not None:
            raise BadInputError(
                f"{sources[0]}: {{expect_nodes}} and {{hostfile}} are for node snapshots (a fleet "
                "knows its world size)",
                names=("expect_nodes", "hostfile"),
            )
        loaded = document.load(sources[0])
    else:
        loaded = nodes.load(sources, expect_nodes=expect_nodes, hostfile=hostfile)
    rep = build(loaded, baseline=base)
    if rep.counts["ranks"] == 0:
        raise InconclusiveError(f"{loaded.path}: no rank record to judge")
    return rep
