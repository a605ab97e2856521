"""Parts of pasted texts -> one snapshot document (``forensics.snapshot/1``) marked as imported.

Rules:

- Facts of all parts are merged per probe section; a real value replaces a missing
  one; two parts that disagree keep the first value and the import notes the conflict.
- Every documented field of ``software``, ``libs``, ``gpu`` and ``host`` that no
  part states is ``{"missing": "not_recorded", "detail": "not in collect_env output"}``
  (naming the formats read). A judge compares nothing that is not recorded.
- A section that holds at least one fact is ``partial``, with an ``errors`` entry per
  group the text does not hold; a section with none is ``unavailable`` with the reason
  ("not in collect_env or nvidia-smi output"). ``git`` and ``nccl_env`` never come from
  a text: ``unavailable``.
- Provenance: the top-level ``source`` is ``"imported"``; ``import`` lists the files,
  each part's format, tool, tool version (when the text names it) and line range, and
  notes; each section carries ``source: "imported: <formats>"``.
- Values are swept by :class:`forensics.redact.Redactor` (a pasted environment can hold tokens).
"""

from __future__ import annotations

from typing import Any

from forensics import __version__
from forensics.importers.common import FORMAT_LABELS, Part, merge_into, not_recorded
from forensics.importers.gpu_record import GROUPS
from forensics.model import ProbeStatus, is_missing, is_unrecorded
from forensics.redact import Redactor
from forensics.snapshot import IMPORTED

SOURCE = IMPORTED

_TEMPLATES: dict[str, dict[str, Any]] = {
    "software": {
        "python": ("version", "implementation", "executable"),
        "packages": None,
        "editable": None,
        "torch": ("version", "build"),
    },
    "libs": {
        "torch": ("version", "version_py", "cuda", "cuda_build_tag"),
        "cuda_runtime": None,
        "nccl": None,
        "cudnn": None,
        "nvcc": None,
        "env_claims": None,
    },
    "gpu": {
        "driver_version": None,
        "cuda_driver_version": None,
        "nvml_version": None,
        "nvidia_ml_py_version": None,
        "gpu_count": None,
        "gpus": None,
        "topology": None,
    },
    "host": {
        "cpu": (
            "model",
            "logical_cores",
            "physical_cores",
            "affinity_cores",
            "freq_current_mhz",
            "freq_min_mhz",
            "freq_max_mhz",
            "governor",
        ),
        "load_avg_1m": None,
        "load_avg_5m": None,
        "load_avg_15m": None,
        "memory": None,
        "swap": None,
        "kernel": None,
        "os_release": None,
        "uptime_s": None,
        "container": None,
        "cgroup": None,
        "numa_nodes": None,
        "thp_enabled": None,
        "thp_defrag": None,
        "top_processes": None,
    },
}
_GPU_KEYS = (
    "uuid",
    "name",
    "serial",
    "pci_bus_id",
    "vbios_version",
    "board_part_number",
    "architecture",
    "compute_capability",
    *GROUPS,
)
_NOT_FROM_TEXT = {
    "git": "git state (HEAD, reflog, working tree)",
    "nccl_env": "the workers' environment and NCCL config",
}


def _labels(parts: list[Part]) -> str:
    seen = list(dict.fromkeys(p.label for p in parts))
    return " or ".join(seen) if len(seen) <= 2 else ", ".join(seen[:-1]) + " or " + seen[-1]


def _fill(data: dict[str, Any], template: dict[str, Any], label: str) -> None:
    for key, leaves in template.items():
        if key not in data:
            data[key] = not_recorded(label)
        elif leaves and isinstance(data[key], dict) and not is_missing(data[key]):
            for leaf in leaves:
                data[key].setdefault(leaf, not_recorded(label))


def _fill_gpus(gpus: Any, label: str) -> None:
    if not isinstance(gpus, dict) or is_missing(gpus):
        return
    for g in gpus.values():
        if isinstance(g, dict):
            for key in _GPU_KEYS:
                g.setdefault(key, not_recorded(label))


def _has_fact(value: Any) -> bool:
    if is_missing(value):
        return not is_unrecorded(value)
    if isinstance(value, dict):
        return any(_has_fact(v) for k, v in value.items() if k not in ("index",))
    if isinstance(value, list):
        return True
    return value is not None


def _errors(data: dict[str, Any]) -> list[dict[str, str]]:
    out: dict[str, str] = {}
    for key, v in data.items():
        if is_unrecorded(v):
            out.setdefault(key, v.get("detail", ""))
        elif isinstance(v, dict) and not is_missing(v):
            for k2, v2 in v.items():
                if is_unrecorded(v2):
                    out.setdefault(f"{key}.{k2}", v2.get("detail", ""))
    gpus = data.get("gpus")
    if isinstance(gpus, dict) and not is_missing(gpus):
        for g in gpus.values():
            for k, v in g.items() if isinstance(g, dict) else ():
                if is_unrecorded(v):
                    out.setdefault(f"gpus.*.{k}", v.get("detail", ""))
    return [{"field": f, "error": e} for f, e in out.items()]


def _join_gpus(gpu: dict[str, Any], conflicts: list[str]) -> None:
    """Fold ``index-N`` GPUs (collect_env, check_env, the nvidia-smi table name no UUID) into the
    UUID-keyed GPU of the same index from ``nvidia-smi -q``: they are the same device."""
    gpus = gpu.get("gpus")
    if not isinstance(gpus, dict) or is_missing(gpus):
        return
    by_index = {
        g.get("index"): k
        for k, g in gpus.items()
        if not k.startswith("index-") and isinstance(g, dict)
    }
    for key in [k for k in gpus if k.startswith("index-")]:
        target = by_index.get(gpus[key].get("index"))
        if target is not None:
            merge_into(gpus[target], gpus.pop(key), f"gpu.gpus.{target}", conflicts)


def build(parts: list[Part], names: list[str], label: str | None = None) -> dict[str, Any]:
    """The snapshot of ``parts`` (module docstring).

    Args:
        parts: parsed parts, in file order.
        names: the files they came from (as given on the command line).
        label: the snapshot's label; default "imported: <files>".

    Returns:
        a JSON-ready snapshot dict that :func:`forensics.snapshot.validate` accepts.
    """
    from forensics.docfile import utc_now
    from forensics.snapshot import SCHEMA

    labels = _labels(parts)
    merged: dict[str, dict[str, Any]] = {}
    conflicts: list[str] = []
    unavailable: dict[str, str] = {}
    partial_lists: dict[str, str] = {}
    for p in parts:
        for probe, facts in p.facts.items():
            facts = dict(facts)
            why = facts.pop("_unavailable", None)
            if why:
                unavailable.setdefault(probe, why)
            merge_into(merged.setdefault(probe, {}), facts, probe, conflicts)
        partial_lists.update(p.partial_lists)
    _join_gpus(merged.get("gpu", {}), conflicts)
    formats = ", ".join(dict.fromkeys(p.format for p in parts))
    probes: dict[str, Any] = {}
    for probe in ("host", "software", "git", "gpu", "libs", "nccl_env"):
        data = merged.get(probe, {})
        src = f"{SOURCE}: {formats}"
        if probe in _NOT_FROM_TEXT:
            probes[probe] = {
                "status": ProbeStatus.UNAVAILABLE.value,
                "duration_s": 0.0,
                "source": src,
                "reason": f"{_NOT_FROM_TEXT[probe]} not in {labels} output",
                "data": {},
                "errors": [],
            }
            continue
        if probe in unavailable and not _has_fact({k: v for k, v in data.items() if k != "gpus"}):
            probes[probe] = {
                "status": ProbeStatus.UNAVAILABLE.value,
                "duration_s": 0.0,
                "source": src,
                "reason": unavailable[probe],
                "data": {},
                "errors": [],
            }
            continue
        if not _has_fact(data):
            probes[probe] = {
                "status": ProbeStatus.UNAVAILABLE.value,
                "duration_s": 0.0,
                "source": src,
                "reason": f"not in {labels} output",
                "data": {},
                "errors": [],
            }
            continue
        _fill(data, _TEMPLATES[probe], labels)
        if probe == "gpu":
            _fill_gpus(data.get("gpus"), labels)
        coverage = {
            k.split(".", 1)[1]: v for k, v in partial_lists.items() if k.startswith(probe + ".")
        }
        if coverage:
            data["coverage"] = coverage
        errors = _errors(data) + [
            {"field": f, "error": f"partial list: {why}"} for f, why in coverage.items()
        ]
        probes[probe] = {
            "status": ProbeStatus.PARTIAL.value,
            "duration_s": 0.0,
            "source": src,
            "data": data,
            "errors": errors,
        }
    notes = [f"{n}" for p in parts for n in p.notes]
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "created": utc_now(),
        "label": label or f"imported: {', '.join(names)}",
        "tool": {"name": "forensics", "version": __version__},
        "source": SOURCE,
        "import": {
            "files": list(names),
            "parts": [p.to_json() for p in parts],
            "notes": notes,
            "conflicts": conflicts,
        },
        "machine": {"hostname": "unknown (imported text)", "imported": True},
        "options": {},
        "probes": probes,
        "bench": None,
    }
    red = Redactor()
    for key in (
        "label",
        "probes",
        "import",
    ):  # the label too: --label, or the file names it is made of
        doc[key] = red.sweep(doc[key], key)
    doc["redaction"] = "on"
    doc["redactions"] = [r.to_json() for r in red.records]
    return doc


FORMATS_HELP = ", ".join(f"{k} ({v})" for k, v in FORMAT_LABELS.items())
