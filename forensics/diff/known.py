"""Known-issues catalog matching: a public, verified regression that fits the change adds evidence.

The catalog is ``forensics/data/known_issues.yaml`` (format: docs/known-issues.md). For
two snapshots, :func:`match` finds the entries whose component changed the way the
entry says (version transition, or a setting newly set in AFTER) and checks the
entry's conditions against what the snapshots record:

- every condition kind has a checker on AFTER's own fields in :data:`CONDITIONS`
  (``gpu_family``, ``gpu``, ``os``, ``memory``, ``nodes``, ``numa_nodes``, ``topology``), and
  each ``topology`` value its own in :data:`TOPOLOGY` (``nvlink``, ``pcie``,
  ``nvlink-bridge-pairs`` and ``nvswitch`` from the ``nvidia-smi topo -m`` matrix, ``ib`` from
  the NCCL log of the ``--nccl-init`` ranks);
- kinds that describe the user's job, not the machine (:data:`WORKLOAD_FACTS`: ``collective``,
  ``dtype``, ``workload`` ...) and topology values no field states (``multi-node``, ``nvls``)
  cannot be decided: the entry is a *possible* match, reported with the conditions left
  unchecked. tests/diff/test_known_conditions.py keeps every kind the catalog uses in one of the two.

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
from typing import Any, Mapping

from forensics.diff import evidence as ev
from forensics.docfile import packaged_yaml
from forensics.model import is_missing

HYPOTHESIS = {
    "nccl": "nccl.version",
    "cuda": "cuda.version",
    "torch": "torch.version",
    "driver": "driver.version",
    "nccl_setting": "nccl.env",
    "cuda_setting": "nccl.env",
    "torch_setting": "nccl.env",
    "host_setting": "host.numa",
    "package": "python.packages",
    "gpu_state": "gpu.topology",
}
"""Catalog component -> the hypothesis a match adds evidence to."""

BENCH_RESULTS = {"allreduce": ev.ALLREDUCE, "matmul": ev.COMPUTE, "h2d": ev.COPIES}
"""``effect.benchmark`` values that name canary components (``host`` and ``step`` name none)."""

_FAMILY = {7: "volta", 8: "ampere", 9: "hopper", 10: "blackwell", 12: "blackwell"}


@functools.lru_cache(maxsize=1)
def catalog() -> tuple[dict[str, Any], ...]:
    """The packaged catalog's entries (``importlib.resources``; read once). Empty when absent."""
    try:
        doc = packaged_yaml("forensics", "data/known_issues.yaml") or {}
    except (FileNotFoundError, OSError):
        return ()
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
        ok = {"==": c == 0, ">=": c >= 0, "<=": c <= 0, ">": c > 0, "<": c < 0, "!=": c != 0}[
            m.group(1)
        ]
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


def component_version(
    doc: Mapping[str, Any], component: str, package: str | None = None
) -> str | None:
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


def _setting_matches(
    m: Mapping[str, Any], before: Mapping[str, Any], after: Mapping[str, Any]
) -> str:
    """ "" when no match, else the sentence of the variables newly set as the entry says."""
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
    return (
        list(gpus.values())
        if isinstance(gpus, dict)
        else list(gpus)
        if isinstance(gpus, list)
        else []
    )


def _family(gpu: Mapping[str, Any]) -> str | None:
    for g in _gpus(gpu):
        cc = g.get("compute_capability") if isinstance(g, dict) else None
        if isinstance(cc, str) and cc.split(".")[0].isdigit():
            return _FAMILY.get(int(cc.split(".")[0]))
    return None


def _names(gpu: Mapping[str, Any]) -> list[str]:
    return [str(g.get("name")) for g in _gpus(gpu) if isinstance(g, dict) and _str(g.get("name"))]


def _matrix_pairs(gpu: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """``{(GPUi, GPUj): link}`` for each unordered GPU pair of the ``nvidia-smi topo -m`` matrix (i < j)."""
    topo = gpu.get("topology")
    matrix = topo.get("matrix") if isinstance(topo, dict) else None
    out: dict[tuple[str, str], str] = {}
    if isinstance(matrix, dict):
        for row, cols in matrix.items():
            if isinstance(cols, dict) and re.fullmatch(r"GPU\d+", str(row)):
                for col, v in cols.items():
                    if re.fullmatch(r"GPU\d+", str(col)) and col != row:
                        out[tuple(sorted((str(row), str(col)), key=lambda g: int(g[3:])))] = str(v)  # type: ignore[index]
    return out


def _nv(v: str) -> bool:
    return bool(re.fullmatch(r"NV\d+", v))


def _topo_nvlink(after: Mapping[str, Any]) -> bool | None:
    pairs = _matrix_pairs(_data(after, "gpu"))
    return None if not pairs else any(_nv(v) for v in pairs.values())


def _topo_pcie(after: Mapping[str, Any]) -> bool | None:
    pairs = _matrix_pairs(_data(after, "gpu"))
    return None if not pairs else not any(_nv(v) for v in pairs.values())


def _topo_bridge_pairs(after: Mapping[str, Any]) -> bool | None:
    """NVLink bridges join GPUs two by two: each GPU has exactly one NV# peer, every other pair is a PCIe path.
    Two GPUs joined by NV# cannot be told apart from an NVSwitch pair (None)."""
    pairs = _matrix_pairs(_data(after, "gpu"))
    if not pairs:
        return None
    gpus = {g for p in pairs for g in p}
    if len(gpus) < 3:
        return None if any(_nv(v) for v in pairs.values()) else False
    peers = {g: sum(1 for p, v in pairs.items() if g in p and _nv(v)) for g in gpus}
    return all(n == 1 for n in peers.values())


def _topo_nvswitch(after: Mapping[str, Any]) -> bool | None:
    """Every GPU pair NV# with 4 or more GPUs: an NVSwitch fabric (direct links cannot join every pair); a pair
    over PCIe: no NVSwitch; two GPUs joined by NV#: a bridge or a switch (None)."""
    pairs = _matrix_pairs(_data(after, "gpu"))
    if not pairs:
        return None
    gpus = {g for p in pairs for g in p}
    if not all(_nv(v) for v in pairs.values()):
        return False
    return True if len(gpus) >= 4 else None


def _nccl_networks(after: Mapping[str, Any]) -> set[str]:
    """The ``Using network X`` values the ``--nccl-init`` / ``--launcher`` ranks' NCCL logs printed."""
    data = _data(after, "nccl_env")
    out: set[str] = set()
    for key in ("nccl_init", "launcher"):
        sec = data.get(key)
        for r in (sec.get("ranks") or []) if isinstance(sec, dict) else []:
            net = (r.get("nccl") or {}).get("network") if isinstance(r, dict) else None
            if isinstance(net, str):
                out.add(net)
    return out


def _topo_ib(after: Mapping[str, Any]) -> bool | None:
    nets = _nccl_networks(after)
    return None if not nets else any(n.upper().startswith("IB") for n in nets)


TOPOLOGY: dict[str, Any] = {
    "nvlink": _topo_nvlink,  # gpu.topology.matrix: any GPU pair NV#
    "pcie": _topo_pcie,  # gpu.topology.matrix: no GPU pair NV#
    "nvlink-bridge-pairs": _topo_bridge_pairs,  # gpu.topology.matrix: each GPU one NV# peer, 3+ GPUs
    "nvswitch": _topo_nvswitch,  # gpu.topology.matrix: every pair NV#, 4+ GPUs
    "ib": _topo_ib,  # nccl_env ranks' NCCL log: 'Using network IB' (RoCE included)
    "roce": None,
    "multi-node": None,
    "nvls": None,
    "mnnvl": None,
}
"""``topology`` values -> a checker on AFTER's fields (True/False/None), or ``None`` where no snapshot field
says it: a snapshot is one machine (``multi-node`` is the job's, not the machine's), NCCL's log does not tell
RoCE from InfiniBand in the lines kept, NVLS/MNNVL are NCCL's runtime choices."""


def _cond_gpu_family(wants: list, after, implicated) -> bool | None:
    fam = _family(_data(after, "gpu"))
    return None if fam is None else fam in [str(w).lower() for w in wants]


def _cond_gpu(wants: list, after, implicated) -> bool | None:
    names = _names(_data(after, "gpu"))
    if not names:
        return None
    return any(
        re.search(rf"(^|\s){re.escape(str(w))}(\s|$)", n, re.I) for n in names for w in wants
    )


def _cond_os(wants: list, after, implicated) -> bool | None:
    host = _data(after, "host")
    kernel = host.get("kernel")
    rel = str(kernel.get("release", "")) if isinstance(kernel, dict) else str(kernel or "")
    osr = str(host.get("os_release") or "")
    if not rel and not osr:
        return None
    is_windows = "windows" in osr.lower() and "microsoft" not in rel.lower()
    is_wsl = "microsoft" in rel.lower()
    return any(
        (w == "linux" and not is_wsl and not is_windows)
        or (w == "wsl2" and is_wsl)
        or (w == "windows" and is_windows)
        for w in wants
    )


def _cond_memory(wants: list, after, implicated) -> bool | None:
    return True if "near-full" in wants and "gpu.memory" in implicated else None


def _count_ok(n: int, spec: str) -> bool:
    m = re.fullmatch(r"\s*(>=|<=|>|<|==)?\s*(\d+)\s*", spec)
    if not m:
        return False
    op, k = m.group(1) or "==", int(m.group(2))
    return {"==": n == k, ">=": n >= k, "<=": n <= k, ">": n > k, "<": n < k}[op]


def _cond_nodes(wants: list, after, implicated) -> bool | None:
    if wants == ["single"]:
        return True  # a snapshot is one machine
    return None  # how many nodes the user's job spans is not a field of one machine's snapshot


def _cond_numa_nodes(wants: list, after, implicated) -> bool | None:
    nodes = _data(after, "host").get("numa_nodes")
    if not isinstance(nodes, dict) or not nodes:
        return None
    return any(_count_ok(len(nodes), str(w)) for w in wants)


def _cond_topology(wants: list, after, implicated) -> bool | None:
    verdicts = [(TOPOLOGY.get(str(w)) or (lambda _a: None))(after) for w in wants]
    if any(v is True for v in verdicts):
        return True
    return None if any(v is None for v in verdicts) else False


CONDITIONS: dict[str, Any] = {
    "gpu_family": _cond_gpu_family,  # gpu.gpus.*.compute_capability
    "gpu": _cond_gpu,  # gpu.gpus.*.name
    "os": _cond_os,  # host.kernel (release), host.os_release
    "memory": _cond_memory,  # gpu.memory implicated (the gpu probe's under-load peak)
    "nodes": _cond_nodes,  # a snapshot is one machine: 'single' holds
    "numa_nodes": _cond_numa_nodes,  # host.numa_nodes
    "topology": _cond_topology,  # TOPOLOGY
}
"""Condition kind -> checker ``(wanted values, AFTER, implicated ids) -> True/False/None`` on the snapshot's fields."""

WORKLOAD_FACTS: dict[str, str] = {
    "collective": "which collectives the user's job calls",
    "algorithm": "the algorithm/protocol NCCL picks per call at run time",
    "feature": "an NCCL feature the job turns on in its code (symmetric memory, user buffers)",
    "message_size": "the sizes the job's collectives move",
    "dtype": "the data type of the job's kernels",
    "workload": "the program the user runs (vLLM, SGLang, training)",
    "model": "the model the user serves or trains",
    "parallelism": "the job's parallelism (DDP, FSDP, tensor parallel)",
    "call_on_hot_path": "an API the step calls in its loop",
    "platform": "the cloud instance type (no snapshot field names it)",
}
"""Condition kinds about the user's job, not the machine: no snapshot field holds them (a *possible* match)."""


def _condition(key: str, want: Any, after: Mapping[str, Any], implicated: set[str]) -> bool | None:
    """True/False when the snapshots decide ``key: want`` (:data:`CONDITIONS`), None when they cannot."""
    check = CONDITIONS.get(key)
    return (
        None
        if check is None
        else check(want if isinstance(want, list) else [want], after, implicated)
    )


def _nvlink_states(doc: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """GPU label -> (active, inactive) NVLink links (gpu probe, nvmlDeviceGetNvLinkState per link)."""
    out = {}
    for g in _gpus(_data(doc, "gpu")):
        nv = g.get("nvlink") if isinstance(g, dict) else None
        links = nv.get("links") if isinstance(nv, dict) and not is_missing(nv) else None
        if isinstance(links, dict):
            states = [e.get("state") for e in links.values() if isinstance(e, dict)]
            out[f"GPU {g.get('index')}"] = (states.count("active"), states.count("inactive"))
    return out


def _links_inactive(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """Some of a GPU's NVLinks inactive beside active ones in AFTER, not so in BEFORE ("" otherwise)."""
    b, a = _nvlink_states(before), _nvlink_states(after)
    hit = [
        f"{gpu}: {act} active, {ina} inactive"
        for gpu, (act, ina) in sorted(a.items())
        if act and ina and not (b.get(gpu, (0, 0))[1] >= ina)
    ]
    return (
        ("NVLink links newly inactive beside active ones (" + "; ".join(hit) + ")") if hit else ""
    )


def _acs_redirect(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """ACS with request/completion redirect on a bridge above a GPU in AFTER ("" otherwise)."""
    bridges = []
    for g in _gpus(_data(after, "gpu")):
        pt = g.get("pci_topology") if isinstance(g, dict) else None
        for br in (pt.get("bridges") or []) if isinstance(pt, dict) and not is_missing(pt) else []:
            acs = br.get("acs") if isinstance(br, dict) else None
            if isinstance(acs, dict) and not is_missing(acs) and acs.get("redirect"):
                bridges.append(f"{br.get('bdf')} ACSCtl {acs.get('control')}")
    return (
        ("PCIe ACS redirect enabled above the GPUs (" + ", ".join(sorted(set(bridges))) + ")")
        if bridges
        else ""
    )


STATE_MATCHERS: dict[str, tuple[str, Any]] = {
    "nvlink": (
        "gpu.topology",
        _links_inactive,
    ),  # some-links-inactive: gpu.gpus.*.nvlink.links.*.state
    "pcie_acs": (
        "gpu.topology",
        _acs_redirect,
    ),  # enabled: gpu.gpus.*.pci_topology.bridges.*.acs.redirect
}
"""``gpu_state``/``host_setting`` match keys -> (the hypothesis a match adds evidence to, a check on the
snapshots' own fields returning the "what" line or ""). ``binding`` (far NUMA node) has none: the
``host.numa`` judge compares each rank's binding with its GPU's node itself."""


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
        return (
            f"{kind} x{self.factor:g} {e['id']}: {self.what} - {str(eff.get('what', '')).strip()}{mag}{tail} "
            f"[{src.get('project', '')} {src.get('kind', '')}: {self.url}]"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.entry["id"],
            "hypothesis": self.hypothesis,
            "url": self.url,
            "what": self.what,
            "possible": bool(self.unchecked),
            "unchecked": list(self.unchecked),
            "against": self.against,
            "factor": self.factor,
        }


def _moved_against(entry: Mapping[str, Any], bench) -> str:
    names = [
        n
        for b in (entry.get("effect") or {}).get("benchmark") or []
        for n in BENCH_RESULTS.get(b, ())
    ]
    if not names or bench is None or bench.pointer.value != "environment":
        return ""
    if any(bench.moved(n) for n in names):
        return ""
    flat = [n for n in names if bench.same(n)]
    return f"against it: the canary slowed but {', '.join(flat)} did not" if flat else ""


def match(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    implicated: set[str],
    bench=None,
    entries: tuple[dict[str, Any], ...] | None = None,
) -> list[Match]:
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
            if (
                not vb
                or not va
                or vb == va
                or not version_matches(vb, m.get("from"))
                or not version_matches(va, m.get("to"))
            ):
                continue
            label = (
                pkg
                or {"nccl": "NCCL", "cuda": "CUDA runtime", "torch": "torch", "driver": "driver"}[
                    comp
                ]
            )
            what = f"{label} {vb} -> {va}"
        elif comp in ("gpu_state", "host_setting"):
            found = [(k, STATE_MATCHERS.get(str(k))) for k in m]
            if not found or any(check is None for _, check in found):
                continue  # a state no snapshot field shows (binding: the host.numa judge carries it)
            whats = [check[1](before, after) for _, check in found]
            if not all(whats):
                continue
            hyp, what = found[0][1][0], "; ".join(whats)
        else:
            continue
        if not what or hyp not in implicated:
            continue
        unchecked, dropped = [], False
        for key, want in (e.get("condition") or {}).items():
            verdict = _condition(str(key), want, after, implicated)
            if verdict is False:
                dropped = True
                break
            if verdict is None:
                unchecked.append(
                    f"{key}={want if not isinstance(want, list) else '/'.join(map(str, want))}"
                )
        if dropped:
            continue
        out.append(Match(dict(e), hyp, what, unchecked, _moved_against(e, bench)))
    return out
