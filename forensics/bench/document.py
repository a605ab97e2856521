"""The bench file (``forensics.bench/1``): build results, save, load and validate.

Layout (docs/bench.md documents every field)::

    {"schema": "forensics.bench/1", "created": "...Z", "tool": {...},
     "config": {"kind": "canary"|"user", ...},
     "results": [{"name": "canary.verify_step_ms", "kind": "canary", "unit": "ms",
                  "higher_is_better": false, "process_medians": [...],
                  "median": ..., "noise_iqr_over_median": ..., ...}],
     "processes": [{"wall_s", "pids", "warmup_converged"}],
     "telemetry": <gpusample Sampler summary or {"missing": ...}>,
     "host_cpu": {"other_cpus", "cpus", "wall_s", "source"} (user steps; may be absent),
     "summary": "one line"}
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Callable

from forensics import __version__, docfile
from forensics.bench.config import CanaryConfig
from forensics.bench.harness import slowest_rank_ms
from forensics.errors import BadInputError
from forensics.stats import summarize
from forensics.words import plural

SCHEMA_NAME = "forensics.bench"
SCHEMA_VERSION = 1
SCHEMA = f"{SCHEMA_NAME}/{SCHEMA_VERSION}"


VALUE_MAX = 1e300
"""A measurement a bench file holds is below this (sums and ratios of such values stay finite); a step that
prints more is refused when it is run, not when its file is read."""


class ResultKind:
    """Values of a result's ``kind``: the headline canary figure, a component, the user's step."""

    CANARY = "canary"
    COMPONENT = "component"
    USER = "user"


def make_result(
    name: str,
    kind: str,
    unit: str,
    values: list[float],
    *,
    higher_is_better: bool = False,
    within: list[float] | None = None,
    description: str = "",
    **extra: Any,
) -> dict[str, Any]:
    """One entry of ``results``: per-process medians plus their summary and noise figure."""
    s = summarize(values)
    out: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "unit": unit,
        "higher_is_better": higher_is_better,
        "process_medians": [float(v) for v in values],
        "median": s.median,
        "min": s.minimum,
        "max": s.maximum,
        "noise_iqr_over_median": s.iqr_over_median,
    }
    if within:
        out["within_process_iqr_over_median"] = statistics.median(within)
    if description:
        out["description"] = description
    out.update(extra)
    return out


def canary_results(cfg: CanaryConfig, processes: list[dict]) -> list[dict[str, Any]]:
    """Turn per-process rank results into the canary's result entries.

    Per process: the slowest rank's median per metric (see
    :func:`forensics.bench.harness.slowest_rank_ms`); rates are computed from
    that time, so they are the slowest rank's rate.
    """
    per: dict[str, list[tuple[float, float]]] = {}
    for p in processes:
        for metric in (
            "step",
            "compute",
            "allreduce",
            "allreduce_busbw",
            "matmul",
            "h2d",
            "d2h",
            "p2p",
            "p2p_latency",
        ):
            got = slowest_rank_ms(p["ranks"], metric)
            if got is not None:
                per.setdefault(metric, []).append(got)

    def vals(
        metric: str, f: Callable[[float], float] = lambda x: x
    ) -> tuple[list[float], list[float]]:
        return [f(v) for v, _ in per[metric]], [w for _, w in per[metric]]

    n_ar = cfg.allreduces_per_step
    results = []
    if "compute" in per and "allreduce" in per:
        comp, w = vals("compute")
        ar = [v for v, _ in per["allreduce"]]
        step = [c + n_ar * a for c, a in zip(comp, ar)]
        how = (
            f"composed: compute (CUDA graph replay) + {n_ar} x all-reduce of {cfg.message_bytes} B"
        )
        if cfg.device != "cuda":
            how = f"composed: compute (eager, CPU) + {n_ar} x all-reduce of {cfg.message_bytes} B (gloo)"
    else:
        step, w = vals("step")
        how = {
            "graph": "whole step incl. all-reduces replayed from one CUDA graph",
            "eager": "whole step launched eagerly",
        }.get(cfg.variant, "compute of the step")
        if cfg.device == "cuda" and cfg.tp == 1 and cfg.variant != "eager":
            how = "whole step replayed from a CUDA graph (tp=1: no all-reduce)"
    method, why = cfg.variant, {}
    eager = graph_note(processes)
    if eager:  # the ranks could not capture a CUDA graph in this environment
        how = (
            f"composed: compute (eager, no CUDA graph) + {n_ar} x all-reduce of {cfg.message_bytes} B"
            if "compute" in per and "allreduce" in per
            else "whole step launched eagerly"
        )
        how, method, why = f"{how} ({eager})", "eager", {"method_reason": eager}
    toks = cfg.batch * cfg.tokens
    results.append(
        make_result(
            "canary.verify_step_ms",
            ResultKind.CANARY,
            "ms",
            step,
            within=w,
            description=f"ms per verify step, slowest rank; {how}",
            method=method,
            **why,
        )
    )
    results.append(
        make_result(
            "canary.verified_tokens_per_s",
            ResultKind.CANARY,
            "tok/s",
            [toks * 1e3 / s for s in step],
            higher_is_better=True,
            within=w,
            description=f"batch x (k+1) = {toks} positions verified per step / step time",
        )
    )
    if "compute" in per:
        v, w = vals("compute")
        results.append(
            make_result(
                "canary.compute_ms",
                ResultKind.COMPONENT,
                "ms",
                v,
                within=w,
                description="compute of one step, all layers, no collectives",
            )
        )
    if "allreduce" in per:
        v, w = vals("allreduce", lambda ms: ms * 1e3)
        results.append(
            make_result(
                "canary.allreduce_us",
                ResultKind.COMPONENT,
                "us",
                v,
                within=w,
                description=f"one all-reduce of the step's message ({cfg.message_bytes} B), "
                "back-to-back, GPU time",
            )
        )
    if "matmul" in per:
        flop = 2.0 * cfg.matmul_n**3
        v, w = vals("matmul", lambda ms: flop / (ms * 1e-3) / 1e12)
        results.append(
            make_result(
                "component.matmul_tflops",
                ResultKind.COMPONENT,
                "TFLOP/s",
                v,
                higher_is_better=True,
                within=w,
                description=f"{cfg.dtype} {cfg.matmul_n}^3 matmul, slowest rank",
            )
        )
    if "allreduce_busbw" in per:
        n = cfg.tp
        v, w = vals(
            "allreduce_busbw", lambda ms: cfg.busbw_bytes / (ms * 1e-3) * 2 * (n - 1) / n / 1e9
        )
        results.append(
            make_result(
                "component.allreduce_busbw_gbps",
                ResultKind.COMPONENT,
                "GB/s",
                v,
                higher_is_better=True,
                within=w,
                description=f"all-reduce busbw = algbw x 2(n-1)/n at {cfg.busbw_bytes} B float32",
            )
        )
    for metric, label in (("h2d", "host-to-device"), ("d2h", "device-to-host")):
        if metric in per:
            v, w = vals(metric, lambda ms: cfg.copy_bytes / (ms * 1e-3) / 1e9)
            results.append(
                make_result(
                    f"component.{metric}_gbps",
                    ResultKind.COMPONENT,
                    "GB/s",
                    v,
                    higher_is_better=True,
                    within=w,
                    description=f"pinned {label} copy of {cfg.copy_bytes} B, slowest rank",
                )
            )
    if "p2p" in per:
        v, w = vals("p2p", lambda ms: cfg.p2p_bytes / (ms * 1e-3) / 1e9)
        results.append(
            make_result(
                "component.p2p_gbps",
                ResultKind.COMPONENT,
                "GB/s",
                v,
                higher_is_better=True,
                within=w,
                description=f"GPU-to-GPU copy of {cfg.p2p_bytes} B, each rank to the "
                "next GPU at once, slowest rank",
            )
        )
    if "p2p_latency" in per:
        v, w = vals("p2p_latency", lambda ms: ms * 1e3)
        results.append(
            make_result(
                "component.p2p_latency_us",
                ResultKind.COMPONENT,
                "us",
                v,
                within=w,
                description="GPU-to-GPU copy of 4 B, back-to-back, GPU time, slowest rank",
            )
        )
    return results


def graph_note(processes: list[dict]) -> str | None:
    """The reason the ranks launched the step eagerly instead of from a CUDA graph (``graph_skipped`` of each
    rank, see :func:`forensics.bench.worker.graph_blocker`), or ``None`` when every rank used its graph."""
    reasons = sorted(
        {
            r["graph_skipped"]
            for p in processes
            for r in p.get("ranks", [])
            if r.get("graph_skipped")
        }
    )
    return "; ".join(reasons) or None


def p2p_note(processes: list[dict]) -> dict[str, Any]:
    """Whether the P2P components ran: ``{"measured": bool, "reason"|"peer_access": ...}`` from the ranks."""
    ranks = [r for p in processes for r in p.get("ranks", [])]
    skipped = sorted({r["p2p_skipped"] for r in ranks if r.get("p2p_skipped")})
    if skipped or not ranks:
        return {"measured": False, "reason": "; ".join(skipped) or "no rank reported"}
    return {"measured": True, "peer_access": sorted({bool(r.get("p2p_access")) for r in ranks})}


def process_records(processes: list[dict]) -> list[dict[str, Any]]:
    """Per fresh process: wall time, rank pids, warm-up convergence, host-bound blocks."""
    out = []
    for p in processes:
        ranks = p.get("ranks", [])
        metrics = [m for r in ranks for m in r.get("metrics", {}).values()]
        out.append(
            {
                "wall_s": p.get("wall_s"),
                "pids": p.get("pids", []),
                "warmup_converged": all(m["warmup"]["converged"] for m in metrics),
                "host_bound_blocks": sum(m.get("host_bound_blocks", 0) for m in metrics),
                "device_names": sorted({r["device_name"] for r in ranks if r.get("device_name")}),
                "metrics": {
                    name: {
                        "calls_per_block": m["calls_per_block"],
                        "queue_ahead_ms": m["queue_ahead_ms"],
                        "warmup_blocks": m["warmup"]["blocks"],
                        "converged": m["warmup"]["converged"],
                    }
                    for name, m in (ranks[0].get("metrics", {}) if ranks else {}).items()
                },
                "init_s": [r.get("init_s") for r in ranks],
                "total_s": [r.get("total_s") for r in ranks],
                "torch": ranks[0].get("torch") if ranks else None,
                "nccl": ranks[0].get("nccl") if ranks else None,
            }
        )
    return out


def build(
    config: dict[str, Any],
    results: list[dict[str, Any]],
    *,
    telemetry: dict[str, Any],
    processes: list[dict[str, Any]] | None = None,
    label: str = "",
    host_cpu: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble a bench document (see the module docstring); ``host_cpu`` is
    :func:`forensics.bench.session.host_cpu`'s reading, recorded when given and not empty."""
    head = results[0]
    summary = (
        f"{head['name']} {head['median']:.4g} {head['unit']} (median of "
        f"{plural(len(head['process_medians']), 'process', 'processes')}, noise IQR/median "
        f"{head['noise_iqr_over_median']:.1%})"
    )
    return {
        "schema": SCHEMA,
        "created": docfile.utc_now(),
        "label": label,
        "tool": {"name": "forensics", "version": __version__},
        "config": config,
        "results": results,
        "processes": processes or [],
        "telemetry": telemetry,
        **({"host_cpu": host_cpu} if host_cpu else {}),
        "summary": summary,
    }


def redact(doc: dict[str, Any], enabled: bool = True) -> dict[str, Any]:
    """A copy of a bench document with secrets replaced (:class:`forensics.redact.Redactor`).

    The step command (``config.command``), ``--env``/``--b-env`` values and any
    other string can hold a token; the copy gets ``redaction`` ("on" or "off
    (--no-redact)") and ``redactions`` (where and why, never the value), as a
    snapshot does.
    """
    from forensics.redact import Redactor

    red = Redactor(enabled=enabled)
    out = red.sweep({k: v for k, v in doc.items() if k not in ("redaction", "redactions")})
    out["redaction"] = "on" if enabled else "off (--no-redact)"
    out["redactions"] = [r.to_json() for r in red.records]
    return out


def save(doc: dict[str, Any], path: Path) -> Path:
    """Write a bench document atomically (:func:`forensics.docfile.save`)."""
    return docfile.save(doc, path)


def _other_kind(doc: dict[str, Any], path: Path) -> None:
    """Refuse another forensics document, naming the command that reads it (a snapshot: ``forensics diff``,
    which compares the benches two ``--bench`` snapshots embed).

    Raises:
        BadInputError: ``schema`` names another forensics document.
    """
    from forensics.snapshot import OTHER_KINDS
    from forensics.snapshot import SCHEMA_NAME as SNAPSHOT

    schema = doc.get("schema")
    if not isinstance(schema, str):
        return
    name = schema.rpartition("/")[0]
    if name == SNAPSHOT:
        what = (
            "a snapshot; compare two snapshots with 'forensics diff BEFORE AFTER', which compares the "
            "benches they embed (snapshot --bench)"
        )
    elif name != SCHEMA_NAME and name in OTHER_KINDS:
        folder = path.parent if str(path.parent) else Path(".")
        what = OTHER_KINDS[name].format(path=path, folder=folder)
    else:
        return
    raise BadInputError(
        f"{path}: schema is {schema!r}: wrong kind of file, not a bench file: {what}"
    )


def validate(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    """Check a loaded bench document; returns it.

    Raises:
        BadInputError: wrong/newer schema, or a malformed ``results`` entry
            (one line naming the file and the entry).
    """
    _other_kind(doc, path)
    docfile.check_schema(doc, path, SCHEMA_NAME, SCHEMA_VERSION)
    results = doc.get("results")
    if not isinstance(results, list) or not results:
        raise BadInputError(
            f"{path}: 'results' must be a non-empty list; the bench run recorded nothing"
        )
    seen: set[str] = set()
    for i, r in enumerate(results):
        if not isinstance(r, dict) or not isinstance(r.get("name"), str):
            raise BadInputError(f"{path}: results[{i}] must be a mapping with a 'name'")
        if r["name"] in seen:
            raise BadInputError(
                f"{path}: result {r['name']!r} appears twice in 'results'; the file was edited or "
                "damaged"
            )
        seen.add(r["name"])
        if "unit" in r and not isinstance(r["unit"], str):
            raise BadInputError(
                f"{path}: result {r['name']!r} 'unit' must be a string such as \"ms\""
            )
        vals = r.get("process_medians")
        if (
            not isinstance(vals, list)
            or not vals
            or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < float(v) < VALUE_MAX
                for v in vals
            )
        ):
            raise BadInputError(
                f"{path}: result {r['name']!r} needs 'process_medians', a list of positive numbers"
            )
        r["process_medians"] = [float(v) for v in vals]
        if not isinstance(r.get("higher_is_better", False), bool):
            raise BadInputError(
                f"{path}: result {r['name']!r} 'higher_is_better' must be true or false"
            )
    if not isinstance(doc.get("config", {}), dict):
        raise BadInputError(f"{path}: 'config' must be a mapping")
    for key in ("processes",):
        if key in doc and not isinstance(doc[key], list):
            raise BadInputError(f"{path}: {key!r} must be a list")
    if (
        "telemetry" in doc
        and doc["telemetry"] is not None
        and not isinstance(doc["telemetry"], dict)
    ):
        raise BadInputError(f"{path}: 'telemetry' must be a mapping")
    return doc


def load(path: Path | str) -> dict[str, Any]:
    """Read and validate a bench file (JSON or YAML).

    Raises:
        BadInputError: one line naming the file and the problem (exit code 2).
    """
    path = Path(path)
    return validate(docfile.read_document(path, what="bench file"), path)
