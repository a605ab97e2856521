"""The fleet report in the Prometheus text exposition format (``forensics fleet report --prom FILE``).

For a node-exporter textfile collector or a push gateway. Metrics (all gauges):

- ``forensics_fleet_nodes``, ``forensics_fleet_gpus``, ``forensics_fleet_ranks``: units judged;
  ``forensics_fleet_ranks_missing``: ranks without a record;
- ``forensics_fleet_outliers{kind}``: outliers by kind (``categorical``, ``numeric``, ``mixed``);
- ``forensics_fleet_outlier_score{subject,field,hypothesis,node}``: one series per outlier (node
  is the first node involved), value the score 0..1;
- ``forensics_fleet_gpu_score{node,gpu,model}``: every GPU's worst score (0 = within peers);
- ``forensics_fleet_rank_missing{rank,node}``: 1 for each missing rank.

Label values are escaped as the format requires (backslash, double quote, newline).
"""

from __future__ import annotations

from collections import Counter


def _esc(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**kw: object) -> str:
    return "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in kw.items()) + "}"


def render(rep) -> str:
    """The exposition text of a :class:`forensics.fleet.report.FleetReport` (ends with a newline)."""
    lines: list[str] = []

    def gauge(name: str, help_text: str, series: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} gauge")
        for labels, value in series:
            lines.append(f"{name}{labels} {value:g}")

    c = rep.counts
    gauge("forensics_fleet_nodes", "Nodes with at least one rank record.", [("", c["nodes"])])
    gauge("forensics_fleet_gpus", "GPUs seen in the node snapshots.", [("", c["gpus"])])
    gauge("forensics_fleet_ranks", "Ranks that sent a record.", [("", c["ranks"])])
    gauge(
        "forensics_fleet_ranks_missing",
        "Ranks without a record (died, hung, or never started).",
        [("", len(rep.missing))],
    )
    from forensics.fleet.outliers import OutlierKind

    kinds = Counter(OutlierKind(o.kind) for o in rep.outliers)
    gauge(
        "forensics_fleet_outliers",
        "Outliers found, by kind.",
        [(_labels(kind=k.value), kinds.get(k, 0)) for k in OutlierKind],
    )
    gauge(
        "forensics_fleet_outlier_score",
        "Score (0..1) of each outlier; higher is worse.",
        [
            (
                _labels(
                    subject=o.subject,
                    field=o.field,
                    hypothesis=o.hypothesis,
                    node=(o.nodes or [""])[0],
                ),
                o.score,
            )
            for o in rep.outliers
        ],
    )
    gauge(
        "forensics_fleet_gpu_score",
        "Worst outlier score of each GPU (0 = within its peers).",
        [
            (_labels(node=r.node, gpu=cell.index, model=cell.model), round(cell.score, 4))
            for r in rep.heat
            for cell in r.cells
        ],
    )
    gauge(
        "forensics_fleet_rank_missing",
        "1 for each rank without a record.",
        [(_labels(rank=m.get("rank"), node=m.get("node") or ""), 1) for m in rep.missing],
    )
    return "\n".join(lines) + "\n"
