"""Known-issues catalog matching: a public, verified regression that fits the change adds evidence.

The catalog is ``forensics/data/known_issues.yaml`` (format: docs/known-issues.md). For
two snapshots, :func:`match` finds the entries whose component changed the way the
entry says (version transition, or a setting newly set in AFTER) and checks the
entry's conditions against what the snapshots record:

- ``gpu_family`` (compute capability from the ``gpu`` probe: 7 volta, 8 ampere,
  9 hopper, 10/12 blackwell), ``gpu`` (model name), ``os`` (``host`` kernel
  release: linux, wsl2), ``memory: near-full`` (an implicated ``gpu.memory``),
  ``topology`` ``nvlink``/``pcie`` (the ``nvidia-smi topo -m`` matrix: NV# between
  GPUs or none) and ``nodes: single`` (a snapshot is one machine) can be decided;
- anything else (``nvswitch``, ``multi-node``, ``collective``, ``dtype``,
  ``workload`` ...) cannot: the entry is a *possible* match, reported with the
  conditions left unchecked.

A condition that is decided false drops the entry. The entry's ``effect.benchmark``
is weighed against what was measured: when none of the canary components it names
moved while the canary did, the match is evidence against it (the docs' rule).
Factors live in :mod:`forensics.diff.evidence`. Pure apart from reading the
packaged catalog once.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Mapping

from forensics.diff import evidence as ev
from forensics.model import is_missing

HYPOTHESIS = {"nccl": "nccl.version", "cuda": "cuda.version", "torch": "torch.version", "driver": "driver.version",
              "nccl_setting": "nccl.env", "cuda_setting": "nccl.env", "torch_setting": "nccl.env",
              "host_setting": "host.numa", "package": "python.packages", "gpu_state": "gpu.topology"}
"""Catalog component -> the hypothesis a match adds evidence to."""

BENCH_RESULTS = {"allreduce": ev.ALLREDUCE, "matmul": ev.COMPUTE, "h2d": ev.COPIES}
"""``effect.benchmark`` values that name canary components (``host`` and ``step`` name none)."""

_FAMILY = {7: "volta", 8: "ampere", 9: "hopper", 10: "blackwell", 12: "blackwell"}


@functools.lru_cache(maxsize=1)
def catalog() -> tuple[dict[str, Any], ...]:
    """The packaged catalog's entries (``importlib.resources``; read once). Empty when absent."""
    import yaml

    try:
        text = (resources.files("forensics") / "data" / "known_issues.yaml").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return ()
    doc = yaml.safe_load(text) or {}
    return tuple(e for e in doc.get("entries") or [] if isinstance(e, dict) and e.get("id"))


def _parts(v: str) -> tuple[int, ...]:
    out = []
    for p in re.split(r"[.\-]", str(v).split("+")[0]):
        m = re.match(r"\d+", p)
        if not m:
            break
        out.append(int(m.group()))
    return tuple(out)


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (a > b) - (a < b)


def version_matches(version: str | None, spec: str | None) -> bool:
    """Does ``version`` satisfy the catalog specifier ``spec`` (">=2.14.3,<2.16", "==2.16.2", "*")?

    Versions compare by their numeric dotted parts; a missing part counts as 0.
    ``None`` spec matches anything; a ``None`` version matches only ``*``/``None``.
    """
    if spec is None or str(spec).strip() == "*":
        return True
    if not version or not _parts(version):
        return False
    v = _parts(version)
    for clause in str(spec).split(","):
        m = re.fullmatch(r"\s*(==|>=|<=|>|<|!=)\s*([\d.]+)\s*", clause)
        if not m:
            return False
        c = _cmp(v, _parts(m.group(2)))
        ok = {"==": c == 0, ">=": c >= 0, "<=": c <= 0, ">": c > 0, "<": c < 0, "!=": c != 0}[m.group(1)]
        if not ok:
            return False
    return True


def _data(doc: Mapping[str, Any], probe: str) -> dict[str, Any]:
    sec = (doc.get("probes") or {}).get(probe) or {}
    data = sec.get("data") if isinstance(sec, dict) else None
    return data if isinstance(data, dict) else {}


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _entry_version(entry: Any) -> str | None:
    return _str(entry.get("version")) if isinstance(entry, dict) and not is_missing(entry) else None


def component_version(doc: Mapping[str, Any], component: str, package: str | None = None) -> str | None:
    """The version of ``component`` a snapshot records (libs, software and gpu probes), or None."""
    libs, soft, gpu = _data(doc, "libs"), _data(doc, "software"), _data(doc, "gpu")
    if package or component == "package":
        pk = soft.get("packages") if isinstance(soft.get("packages"), dict) else {}
        name = (package or "").lower()
        for k, v in pk.items():
            if k.lower() == name or k.lower().startswith(name + "-"):
                return _str(v)
        return None
    if component == "nccl":
        return _entry_version(libs.get("nccl"))
    if component == "cuda":
        return _entry_version(libs.get("cuda_runtime"))
    if component == "torch":
        return _entry_version(libs.get("torch")) or _entry_version(soft.get("torch"))
    if component == "driver":
        return _str(gpu.get("driver_version"))
    return None


def _env(doc: Mapping[str, Any]) -> dict[str, str]:
    parent = _data(doc, "nccl_env").get("parent")
    env = parent.get("env") if isinstance(parent, dict) else None
    return {k: str(v) for k, v in env.items()} if isinstance(env, dict) else {}


def _worker_envs(doc: Mapping[str, Any]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    data = _data(doc, "nccl_env")

    def walk(node: Any, depth: int = 0) -> None:
        if depth > 4:
            return
        if isinstance(node, dict):
            env = node.get("env")
            if isinstance(env, dict) and "method" in node:
                out.append({k: str(v) for k, v in env.items()})
            for v in node.values():
                walk(v, depth + 1)
        elif isinstance(node, list):
            for v in node:
                walk(v, depth + 1)

    for key in ("start_methods", "launcher"):
        walk(data.get(key))
    return out


def _setting_matches(m: Mapping[str, Any], before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """"" when no match, else the sentence of the variables newly set as the entry says."""
    want = m.get("env") or {}
    if not isinstance(want, dict) or not want:
        return ""
    workers = m.get("where") == "workers-only"
    envs_a = _worker_envs(after) if workers else [_env(after)]
    envs_b = _worker_envs(before) if workers else [_env(before)]
    if workers:
        parent = _env(after)
        envs_a = [e for e in envs_a if any(k in e and k not in parent for k in want)]

    def hits(envs: list[dict[str, str]]) -> list[str]:
        found = []
        for k, v in want.items():
            if any(k in e and (str(v) == "*" or e[k] == str(v)) for e in envs):
                found.append(k)
        return found

    ha, hb = hits(envs_a), hits(envs_b)
    need_all = not m.get("any")
    ok = (len(ha) == len(want)) if need_all else bool(ha)
    new = [k for k in ha if k not in hb]
    if not ok or not new:
        return ""
    env0 = envs_a[0] if envs_a else {}
    where = "in the workers only" if workers else "in AFTER"
    return ", ".join(f"{k}={env0.get(k, '?')}" for k in ha) + f" newly set {where}"


def _gpus(gpu: Mapping[str, Any]) -> list[Any]:
    gpus = gpu.get("gpus")
    return list(gpus.values()) if isinstance(gpus, dict) else list(gpus) if isinstance(gpus, list) else []


def _family(gpu: Mapping[str, Any]) -> str | None:
    for g in _gpus(gpu):
        cc = g.get("compute_capability") if isinstance(g, dict) else None
        if isinstance(cc, str) and cc.split(".")[0].isdigit():
            return _FAMILY.get(int(cc.split(".")[0]))
    return None


def _names(gpu: Mapping[str, Any]) -> list[str]:
    return [str(g.get("name")) for g in _gpus(gpu) if isinstance(g, dict) and _str(g.get("name"))]


def _links(gpu: Mapping[str, Any]) -> set[str]:
    topo = gpu.get("topology")
    matrix = topo.get("matrix") if isinstance(topo, dict) else None
    out: set[str] = set()
    if isinstance(matrix, dict):
        for row, cols in matrix.items():
            if isinstance(cols, dict) and str(row).startswith("GPU"):
                out |= {str(v) for k, v in cols.items() if str(k).startswith("GPU") and k != row}
    return out


def _condition(key: str, want: Any, after: Mapping[str, Any], implicated: set[str]) -> bool | None:
    """True/False when the snapshots decide ``key: want``, None when they cannot."""
    gpu, host = _data(after, "gpu"), _data(after, "host")
    wants = want if isinstance(want, list) else [want]
    if key == "gpu_family":
        fam = _family(gpu)
        return None if fam is None else fam in [str(w).lower() for w in wants]
    if key == "gpu":
        names = _names(gpu)
        if not names:
            return None
        return any(re.search(rf"(^|\s){re.escape(str(w))}(\s|$)", n, re.I) for n in names for w in wants)
    if key == "os":
        kernel = host.get("kernel")
        rel = str(kernel.get("release", "")) if isinstance(kernel, dict) else str(kernel or "")
        if not rel:
            return None
        is_wsl = "microsoft" in rel.lower()
        return any((w == "linux" and not is_wsl) or (w == "wsl2" and is_wsl) for w in wants)
    if key == "memory":
        return True if "near-full" in wants and "gpu.memory" in implicated else None
    if key == "nodes":
        return True if wants == ["single"] else None
    if key == "topology":
        links = _links(gpu)
        if not links:
            return None
        nv = any(re.fullmatch(r"NV\d+", x) for x in links)
        verdicts: list[bool | None] = []
        for w in wants:
            if w == "nvlink":
                verdicts.append(nv)
            elif w == "pcie":
                verdicts.append(not nv)
            else:
                verdicts.append(None)
        if any(v is True for v in verdicts):
            return True
        return None if any(v is None for v in verdicts) else False
    return None


@dataclass
class Match:
    """One catalog entry that fits the change.

    Attributes:
        entry: the catalog entry (as in the YAML).
        hypothesis: the hypothesis it adds evidence to.
        what: the change that matched ("NCCL 2.28.9 -> 2.29.7").
        unchecked: conditions the snapshots cannot decide (a *possible* match when any).
        against: the benchmark components it names did not move while the canary did.
    """

    entry: dict[str, Any]
    hypothesis: str
    what: str
    unchecked: list[str] = field(default_factory=list)
    against: str = ""

    @property
    def factor(self) -> float:
        if self.against:
            return ev.KNOWN_ISSUE_AGAINST_FACTOR
        return ev.KNOWN_ISSUE_UNCHECKED_FACTOR if self.unchecked else ev.KNOWN_ISSUE_FACTOR

    @property
    def url(self) -> str:
        src = self.entry.get("source") or {}
        return str(src.get("url", ""))

    def line(self) -> str:
        """The evidence line: id, what, magnitude, the match's strength, and the link."""
        e = self.entry
        eff = e.get("effect") or {}
        src = e.get("source") or {}
        mag = f" ({eff['magnitude']})" if eff.get("magnitude") else ""
        kind = "known issue" if not self.unchecked else "possible known issue"
        tail = ""
        if self.unchecked:
            tail = f"; not checked here: {', '.join(self.unchecked)}"
        if self.against:
            tail += f"; {self.against}"
        return (f"{kind} x{self.factor:g} {e['id']}: {self.what} - {str(eff.get('what', '')).strip()}{mag}{tail} "
                f"[{src.get('project', '')} {src.get('kind', '')}: {self.url}]")

    def to_json(self) -> dict[str, Any]:
        return {"id": self.entry["id"], "hypothesis": self.hypothesis, "url": self.url, "what": self.what,
                "possible": bool(self.unchecked), "unchecked": list(self.unchecked), "against": self.against,
                "factor": self.factor}


def _moved_against(entry: Mapping[str, Any], bench) -> str:
    names = [n for b in (entry.get("effect") or {}).get("benchmark") or [] for n in BENCH_RESULTS.get(b, ())]
    if not names or bench is None or bench.pointer.value != "environment":
        return ""
    if any(bench.moved(n) for n in names):
        return ""
    flat = [n for n in names if bench.same(n)]
    return f"against it: the canary slowed but {', '.join(flat)} did not" if flat else ""


def match(before: Mapping[str, Any], after: Mapping[str, Any], implicated: set[str], bench=None,
          entries: tuple[dict[str, Any], ...] | None = None) -> list[Match]:
    """The catalog entries that fit the change between ``before`` and ``after``.

    Args:
        before, after: loaded snapshots.
        implicated: ids implicated at ``low`` or above (a match only adds to those;
            ``memory: near-full`` reads ``gpu.memory`` here).
        bench: the :class:`forensics.bench.effect.BenchEffect`, or None.
        entries: a catalog to use instead of the packaged one (tests).

    Returns:
        the matches, in catalog order.
    """
    out: list[Match] = []
    for e in catalog() if entries is None else entries:
        comp = str(e.get("component", ""))
        hyp = HYPOTHESIS.get(comp)
        m = e.get("match") or {}
        if hyp is None or not isinstance(m, dict):
            continue
        if comp.endswith("_setting") and comp != "host_setting":
            what = _setting_matches(m, before, after)
            if what and m.get("where") == "workers-only":
                hyp = "nccl.env-propagation"
        elif comp in ("nccl", "cuda", "torch", "driver", "package"):
            pkg = m.get("package")
            vb, va = component_version(before, comp, pkg), component_version(after, comp, pkg)
            if not vb or not va or vb == va or not version_matches(vb, m.get("from")) \
                    or not version_matches(va, m.get("to")):
                continue
            label = pkg or {"nccl": "NCCL", "cuda": "CUDA runtime", "torch": "torch", "driver": "driver"}[comp]
            what = f"{label} {vb} -> {va}"
        else:
            continue  # host_setting (binding) and gpu_state: no matcher yet; their judges carry the facts
        if not what or hyp not in implicated:
            continue
        unchecked, dropped = [], False
        for key, want in (e.get("condition") or {}).items():
            verdict = _condition(str(key), want, after, implicated)
            if verdict is False:
                dropped = True
                break
            if verdict is None:
                unchecked.append(f"{key}={want if not isinstance(want, list) else '/'.join(map(str, want))}")
        if dropped:
            continue
        out.append(Match(dict(e), hyp, what, unchecked, _moved_against(e, bench)))
    return out
