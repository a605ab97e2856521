"""The facts a fleet report judges, read from rank records and node snapshots.

Three kinds of subjects, each with a table of fields (name, where it is read, unit):

- a **node** (from its local rank 0's snapshot): the categorical fields of
  :data:`NODE_FIELDS` (driver, CUDA, NCCL, torch, kernel, git HEAD of the workload...);
- a **GPU** (from the node snapshot's ``gpu`` probe, the GPU samples taken
  during the fleet bench, and the bench figures of the rank driving it): the
  categorical fields of :data:`GPU_CATEGORICAL` and the numbers of :data:`METRICS`;
- a **rank** (from its own record): every selected environment variable
  (NCCL_*, CUDA_*, TORCH_*...), ``unset`` where a rank lacks it.

Clocks, PCIe link and clocks-event reasons are read only from samples taken
*under load* (``busy_samples`` >= :data:`MIN_BUSY_SAMPLES`; DESIGN section 6): an
idle GPU at a low clock or a PCIe link trained down is normal. Missing values
(``{"missing": ...}``) are left out, never read as 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from forensics.gpu.readings import LOAD_METRICS, PCIE_GEN_LOAD, PCIE_WIDTH_LOAD, SM_CLOCK_LOAD_MHZ
from forensics.model import is_missing

MIN_BUSY_SAMPLES = 3
UNSET = "unset"
PER_RANK_BY_DESIGN = frozenset({"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"})
"""Variables a launcher sets differently on every rank (one GPU each): never judged across ranks."""


@dataclass(frozen=True)
class Metric:
    """A per-GPU number judged against peers of the same GPU model.

    Attributes:
        name: key in :attr:`GpuFacts.values` (unit in the name).
        label: what a person reads ("SM clock under load").
        unit: shown after the value.
        bad: ``low`` (less is worse: clocks, bandwidth) or ``high`` (more is worse: throttle time, errors).
        rel_tol: smallest relative departure from the peers' median that counts (``low`` metrics).
        abs_tol: smallest absolute departure that counts (``high`` metrics, counters, fractions).
        discrete: whole-number settings (PCIe generation/width): any step below the peers' median counts.
        effect: a measured speed (clock, bench figure) rather than a state that explains one; a GPU's
            causes are listed before its effects.
        hypothesis: the DESIGN section 5 hypothesis it bears on.
        source: where the value is read.
    """

    name: str
    label: str
    unit: str
    bad: str
    hypothesis: str
    source: str
    rel_tol: float = 0.0
    abs_tol: float = 0.0
    discrete: bool = False
    effect: bool = False


_REASON_FRACTIONS = (
    # (clocks-event reason as the busy samples name it, metric, label, NVML reason bit, abs_tol)
    ("sw_power_cap", "sw_power_cap_fraction", "SW power cap active", 0x4, 0.25),
    ("hw_slowdown", "hw_slowdown_fraction", "HW slowdown active", 0x8, 0.05),
    ("sw_thermal_slowdown", "sw_thermal_fraction", "SW thermal slowdown active", 0x20, 0.05),
    ("hw_thermal_slowdown", "hw_thermal_fraction", "HW thermal slowdown active", 0x40, 0.05),
    ("hw_power_brake_slowdown", "hw_power_brake_fraction", "HW power brake active", 0x80, 0.05),
)

METRICS: tuple[Metric, ...] = (
    Metric(
        PCIE_GEN_LOAD,
        "PCIe generation under load",
        "",
        "low",
        "gpu.pcie-link",
        "busy samples: nvmlDeviceGetCurrPcieLinkGeneration (median)",
        discrete=True,
    ),
    Metric(
        PCIE_WIDTH_LOAD,
        "PCIe width under load",
        "x",
        "low",
        "gpu.pcie-link",
        "busy samples: nvmlDeviceGetCurrPcieLinkWidth (median)",
        discrete=True,
    ),
    Metric(
        "pcie_gen_max",
        "PCIe generation the link can reach",
        "",
        "low",
        "gpu.pcie-link",
        "nvmlDeviceGetMaxPcieLinkGeneration",
        discrete=True,
    ),
    Metric(
        "pcie_width_max",
        "PCIe width the link can reach",
        "x",
        "low",
        "gpu.pcie-link",
        "nvmlDeviceGetMaxPcieLinkWidth",
        discrete=True,
    ),
    Metric(
        SM_CLOCK_LOAD_MHZ,
        "SM clock under load",
        "MHz",
        "low",
        "gpu.throttling",
        "busy samples: nvmlDeviceGetClockInfo(SM) (median)",
        rel_tol=0.10,
        effect=True,
    ),
    *(
        Metric(
            metric,
            label,
            "of busy samples",
            "high",
            "gpu.throttling",
            f"busy samples: clocks-event reason bit {bit:#x}",
            abs_tol=tol,
        )
        for _, metric, label, bit, tol in _REASON_FRACTIONS
    ),
    Metric(
        "power_limit_w",
        "enforced power limit",
        "W",
        "low",
        "gpu.config",
        "nvmlDeviceGetEnforcedPowerLimit",
        rel_tol=0.02,
    ),
    Metric(
        "ecc_uncorrected",
        "uncorrected ECC errors (volatile)",
        "",
        "high",
        "gpu.health",
        "nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE)",
        abs_tol=0.5,
    ),
    Metric(
        "ecc_corrected",
        "corrected ECC errors (volatile)",
        "",
        "high",
        "gpu.health",
        "nvmlDeviceGetTotalEccErrors(CORRECTED, VOLATILE)",
        abs_tol=1000,
    ),
    Metric(
        "remapped_rows_bad",
        "remapped rows: uncorrectable + pending + failure",
        "",
        "high",
        "gpu.health",
        "nvmlDeviceGetRemappedRows",
        abs_tol=0.5,
    ),
    Metric(
        "pcie_replay",
        "PCIe replays",
        "",
        "high",
        "gpu.health",
        "nvmlDeviceGetPcieReplayCounter",
        abs_tol=100,
    ),
    Metric(
        "matmul_tflops",
        "matmul (bf16 8192^3)",
        "TFLOP/s",
        "low",
        "gpu.throttling",
        "fleet bench on this GPU's rank",
        rel_tol=0.10,
        effect=True,
    ),
    Metric(
        "h2d_gbps",
        "host-to-device copy",
        "GB/s",
        "low",
        "gpu.pcie-link",
        "fleet bench on this GPU's rank (pinned, 64 MiB)",
        rel_tol=0.25,
        effect=True,
    ),
    Metric(
        "d2h_gbps",
        "device-to-host copy",
        "GB/s",
        "low",
        "gpu.pcie-link",
        "fleet bench on this GPU's rank (pinned, 64 MiB)",
        rel_tol=0.25,
        effect=True,
    ),
)
METRIC_BY_NAME = {m.name: m for m in METRICS}

_REASON_METRIC = {reason: metric for reason, metric, *_ in _REASON_FRACTIONS}


def _dig(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...``, or None where a level is absent or the value is missing."""
    for key in path:
        if type(obj) is not dict:
            return None
        obj = obj.get(key)
    if type(obj) is dict and "missing" in obj and is_missing(obj):
        return None
    return obj


def _data(snap: dict[str, Any], probe: str) -> dict[str, Any]:
    sec = (snap.get("probes") or {}).get(probe) or {}
    return sec.get("data") or {} if sec.get("status") in ("ok", "partial") else {}


def _git_head(snap: dict[str, Any]) -> str | None:
    for repo in _data(snap, "git").get("repos") or []:
        if isinstance(repo, dict) and repo.get("role") == "main":
            sha = _dig(repo, "head", "sha")
            if isinstance(sha, str):
                return sha[:12] + (" (dirty)" if repo.get("dirty") else "")
    return None


@dataclass(frozen=True)
class CategoricalField:
    """A node- or GPU-level fact compared by value (majority grouping).

    Attributes:
        name: the field's key in reports ("driver", "gpu.vbios").
        label: what a person reads.
        hypothesis: the DESIGN section 5 hypothesis it bears on.
        weight: how much a minority value matters for ranking (0..1).
        read: reads the value from a node snapshot (or a GPU entry); None when absent.
    """

    name: str
    label: str
    hypothesis: str
    weight: float
    read: Callable[[dict[str, Any]], Any]


NODE_FIELDS: tuple[CategoricalField, ...] = (
    CategoricalField(
        "gpu_count", "GPU count", "gpu.health", 1.0, lambda s: _dig(_data(s, "gpu"), "gpu_count")
    ),
    CategoricalField(
        "driver",
        "NVIDIA driver",
        "driver.version",
        0.9,
        lambda s: _dig(_data(s, "gpu"), "driver_version"),
    ),
    CategoricalField(
        "cuda_driver",
        "CUDA version of the driver",
        "driver.version",
        0.8,
        lambda s: _dig(_data(s, "gpu"), "cuda_driver_version"),
    ),
    CategoricalField(
        "cuda_runtime",
        "CUDA runtime loaded",
        "cuda.version",
        0.8,
        lambda s: _dig(_data(s, "libs"), "cuda_runtime", "version"),
    ),
    CategoricalField(
        "nccl",
        "NCCL loaded",
        "nccl.version",
        0.8,
        lambda s: _dig(_data(s, "libs"), "nccl", "version"),
    ),
    CategoricalField(
        "cudnn",
        "cuDNN loaded",
        "cuda.version",
        0.6,
        lambda s: _dig(_data(s, "libs"), "cudnn", "version"),
    ),
    CategoricalField(
        "torch",
        "PyTorch",
        "torch.version",
        0.8,
        lambda s: (
            _dig(_data(s, "libs"), "torch", "version_py")
            or _dig(_data(s, "software"), "torch", "version")
        ),
    ),
    CategoricalField(
        "python",
        "Python",
        "python.packages",
        0.5,
        lambda s: _dig(_data(s, "software"), "python", "version"),
    ),
    CategoricalField("git_head", "git HEAD of the workload", "code.change", 0.8, _git_head),
    CategoricalField(
        "kernel", "kernel", "host.cpu", 0.5, lambda s: _dig(_data(s, "host"), "kernel")
    ),
    CategoricalField(
        "os", "OS release", "host.cpu", 0.4, lambda s: _dig(_data(s, "host"), "os_release")
    ),
    CategoricalField(
        "cpu_model", "CPU model", "host.cpu", 0.5, lambda s: _dig(_data(s, "host"), "cpu", "model")
    ),
)

GPU_CATEGORICAL: tuple[CategoricalField, ...] = (
    CategoricalField("gpu.model", "GPU model", "gpu.config", 0.9, lambda g: _dig(g, "name")),
    CategoricalField("gpu.vbios", "VBIOS", "gpu.config", 0.5, lambda g: _dig(g, "vbios_version")),
    CategoricalField(
        "gpu.ecc_mode", "ECC mode", "gpu.config", 0.6, lambda g: _dig(g, "ecc", "mode_current")
    ),
    CategoricalField(
        "gpu.mig_mode", "MIG mode", "gpu.config", 0.6, lambda g: _dig(g, "modes", "mig_current")
    ),
    CategoricalField(
        "gpu.compute_mode", "compute mode", "gpu.config", 0.6, lambda g: _dig(g, "modes", "compute")
    ),
)


@dataclass
class GpuFacts:
    """One GPU of one node.

    Attributes:
        node: node name.
        index: NVML index on the node.
        uuid: NVML UUID ("GPU-..."), or "" when unknown.
        model: GPU name (NVML ``nvmlDeviceGetName``), the peer group.
        rank: the rank that benchmarked it, or None.
        values: metric name -> number (see :data:`METRICS`).
        categorical: GPU field name -> value (see :data:`GPU_CATEGORICAL`).
        under_load: busy samples seen for it (0 when not sampled under load).
    """

    node: str
    index: int
    uuid: str
    model: str
    rank: int | None = None
    values: dict[str, float] = field(default_factory=dict)
    categorical: dict[str, str] = field(default_factory=dict)
    under_load: int = 0

    @property
    def label(self) -> str:
        """``GPU 3 of node n0042``."""
        return f"GPU {self.index} of node {self.node}"


@dataclass
class NodeFacts:
    """One node: its categorical fields, GPUs and ranks.

    Attributes:
        node: node name.
        ranks: the ranks whose records came from it.
        categorical: :data:`NODE_FIELDS` name -> value (only those present).
        gpus: its GPUs, by NVML index.
        has_snapshot: its local rank 0 sent a snapshot.
        cpu_figures: CPU bench figures by rank (shown, never judged: CPU ranks share cores).
        errors: ``"rank N: where: error"`` lines from its records.
        local_ranks: local rank -> the first rank that had it.
        clashes: ``(local rank, first rank, later rank)`` for each local rank two ranks claimed: two
            machines with one node name (their hostname); only the first one's snapshot is read.
    """

    node: str
    ranks: list[int] = field(default_factory=list)
    categorical: dict[str, str] = field(default_factory=dict)
    gpus: dict[int, GpuFacts] = field(default_factory=dict)
    has_snapshot: bool = False
    cpu_figures: dict[int, dict[str, float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    local_ranks: dict[int, int] = field(default_factory=dict)
    clashes: list[tuple[int, int, int]] = field(default_factory=list)


@dataclass
class FleetFacts:
    """Everything judged, for one fleet.

    Attributes:
        nodes: by node name, in first-seen order.
        rank_env: rank -> {variable: value}; variables a rank lacks are :data:`UNSET` after :meth:`finish`.
        rank_node: rank -> node name.
        world_size: ranks the job had.
        missing: the fleet file's missing ranks (``{"rank", "node", "reason"}``).
        not_finite: metric -> how many values were left out for being an infinity or NaN.
        duplicates: rank -> how many records it had, for ranks with more than one (the first is used).
        unit: what one record is: ``rank``, or ``node snapshot`` for plain snapshot files (one record per
            node, whose launching environment's variables are then judged per node).
    """

    nodes: dict[str, NodeFacts] = field(default_factory=dict)
    rank_env: dict[int, dict[str, str]] = field(default_factory=dict)
    rank_node: dict[int, str] = field(default_factory=dict)
    world_size: int = 0
    missing: list[dict[str, Any]] = field(default_factory=list)
    not_finite: dict[str, int] = field(default_factory=dict)
    duplicates: dict[int, int] = field(default_factory=dict)
    unit: str = "rank"
    _redacted: dict[tuple[str, str], str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def gpus(self) -> list[GpuFacts]:
        """Every GPU of every node, node order then index."""
        return [g for n in self.nodes.values() for _, g in sorted(n.gpus.items())]

    def _clean(self, name: str, value: str) -> str:
        """``value`` redacted (:class:`forensics.redact.Redactor`; by variable ``name`` when given), memoized."""
        key = (name, value)
        got = self._redacted.get(key)
        if got is None:
            from forensics.redact import Redactor

            red = Redactor()
            got = red.env(name, value, name) if name else red.text(value, "errors")
            if len(self._redacted) < 100_000:
                self._redacted[key] = got
        return got

    def _put(self, values: dict[str, float], key: str, value: Any) -> None:
        """:func:`_put`, counting the values left out for not being finite numbers (a report note)."""
        if not _put(values, key, value):
            self.not_finite[key] = self.not_finite.get(key, 0) + 1

    def add(self, rec: dict[str, Any]) -> None:
        """Take one rank record (:mod:`forensics.fleet.document`); the record is not kept."""
        rank = rec["rank"]
        if (
            rank in self.rank_env
        ):  # a second record of one rank (two runs' files merged): the first stands
            self.duplicates[rank] = self.duplicates.get(rank, 1) + 1
            return
        node = self.nodes.setdefault(rec["node"], NodeFacts(rec["node"]))
        node.ranks.append(rank)
        local = rec.get("local_rank")
        if isinstance(local, int) and not isinstance(local, bool):
            if local in node.local_ranks:  # two machines answer to one node name
                node.clashes.append((local, node.local_ranks[local], rank))
            else:
                node.local_ranks[local] = rank
        self.rank_node[rank] = rec["node"]
        self.world_size = max(self.world_size, int(rec.get("world_size") or 0))
        # Every value is redacted again, whatever the record says of itself: a --no-redact record, one
        # written by an older forensics (fewer patterns) or by another tool must not carry a secret into
        # the report. Values repeat across ranks, so each (name, value) is redacted once.
        env = {
            k: self._clean(k, v)
            for k, v in (rec.get("env") or {}).items()
            if isinstance(v, str) and k not in PER_RANK_BY_DESIGN
        }
        self.rank_env[rank] = env
        for err in rec.get("errors") or []:
            if isinstance(err, dict):
                node.errors.append(
                    self._clean("", f"rank {rank}: {err.get('where')}: {err.get('error')}")
                )
        snap = rec.get("snapshot")
        if (
            isinstance(snap, dict) and not node.has_snapshot
        ):  # a second machine of the same name: not mixed in
            node.has_snapshot = True
            for f in NODE_FIELDS:
                v = f.read(snap)
                if v is not None and not isinstance(v, (dict, list)):
                    node.categorical[f.name] = str(v)
            self._add_gpus(node, snap, rec.get("telemetry"))
        bench = rec.get("bench")
        if isinstance(bench, dict):
            self._add_bench(node, rank, rec.get("gpu") or {}, bench)

    def _add_gpus(self, node: NodeFacts, snap: dict[str, Any], telemetry: Any) -> None:
        gdata = _data(snap, "gpu")
        samples = _dig(telemetry, "gpus") if isinstance(telemetry, dict) else None
        if not isinstance(samples, dict):
            samples = _dig(gdata, "sample", "gpus")
        for uuid, g in (gdata.get("gpus") or {}).items():
            if not isinstance(g, dict) or not isinstance(g.get("index"), int):
                continue
            gf = node.gpus.get(g["index"]) or GpuFacts(
                node.node, g["index"], str(uuid), str(_dig(g, "name") or "?")
            )
            gf.uuid, gf.model = str(uuid), str(_dig(g, "name") or "?")
            for f in GPU_CATEGORICAL:
                v = f.read(g)
                if v is not None and not isinstance(v, (dict, list)):
                    gf.categorical[f.name] = str(v)
            v = gf.values
            self._put(v, "pcie_gen_max", _dig(g, "pcie", "gen_max"))
            self._put(v, "pcie_width_max", _dig(g, "pcie", "width_max"))
            lim = _dig(g, "power", "enforced_limit_mw")
            self._put(v, "power_limit_w", _milli(lim))
            self._put(v, "ecc_uncorrected", _dig(g, "ecc", "uncorrected_volatile"))
            self._put(v, "ecc_corrected", _dig(g, "ecc", "corrected_volatile"))
            rows = [_dig(g, "remapped_rows", k) for k in ("uncorrectable", "pending", "failure")]
            nums = [float(x) for x in rows if isinstance(x, (int, float, bool))]
            self._put(v, "remapped_rows_bad", sum(nums) if nums else None)
            self._put(v, "pcie_replay", _dig(g, "pcie", "counters", "replay"))
            s = samples.get(uuid) if isinstance(samples, dict) else None
            if (
                isinstance(s, dict)
                and isinstance(s.get("busy_samples"), int)
                and s["busy_samples"] >= MIN_BUSY_SAMPLES
            ):
                gf.under_load = s["busy_samples"]
                for (
                    key,
                    metric,
                ) in LOAD_METRICS.items():  # the busy-sample medians, under the fleet's names
                    self._put(v, metric, _dig(s, key, "median"))
                fr = s.get("reason_fraction") if isinstance(s.get("reason_fraction"), dict) else {}
                for reason, metric in _REASON_METRIC.items():
                    self._put(v, metric, fr.get(reason, 0.0))
            node.gpus[g["index"]] = gf

    def _add_bench(
        self, node: NodeFacts, rank: int, gpu: dict[str, Any], bench: dict[str, Any]
    ) -> None:
        figs = {
            k: f.get("value")
            for k, f in (bench.get("figures") or {}).items()
            if isinstance(f, dict)
        }
        if bench.get("device") != "cuda":
            cpu: dict[str, float] = {}
            for k, x in figs.items():
                self._put(cpu, k, x)
            node.cpu_figures[rank] = cpu
            return
        target = None
        uuid = gpu.get("uuid")
        for gf in node.gpus.values():
            if uuid and gf.uuid == uuid:
                target = gf
        if target is None and isinstance(gpu.get("nvml_index"), int):
            target = node.gpus.get(gpu["nvml_index"])
        if (
            target is None
        ):  # no snapshot of this node (its local rank 0 is missing): keep the figures anyway
            idx = gpu.get("nvml_index") if isinstance(gpu.get("nvml_index"), int) else 1000 + rank
            target = node.gpus.setdefault(
                idx, GpuFacts(node.node, idx, str(uuid or ""), str(bench.get("device_name") or "?"))
            )
        target.rank = rank
        for k in ("matmul_tflops", "h2d_gbps", "d2h_gbps"):
            self._put(target.values, k, figs.get(k))

    def finish(self) -> "FleetFacts":
        """Fill :data:`UNSET` for variables some ranks lack, drop "missing" ranks that sent a record; returns self."""
        self.missing = [m for m in self.missing if m.get("rank") not in self.rank_env]
        names = set()
        for env in self.rank_env.values():
            names.update(env)
        for env in self.rank_env.values():
            for n in names - env.keys():
                env[n] = UNSET
        return self


def _milli(value: Any) -> Any:
    """``value / 1000`` for a number (mW -> W), the value itself otherwise (an int beyond any float too)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return value / 1000
        except OverflowError:
            return value
    return value


def _put(values: dict[str, float], key: str, value: Any) -> bool:
    """Store a number; False (nothing stored) for an infinity or NaN (JSON's ``1e999``, ``NaN``)."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, (int, float)):
        try:
            f = float(value)
        except OverflowError:  # an int beyond any float
            return False
        if not math.isfinite(f):
            return False
        values[key] = f
    return True


def from_records(
    records: Iterable[dict[str, Any]],
    missing: list[dict[str, Any]] | None = None,
    world_size: int = 0,
) -> FleetFacts:
    """Read every record once (streamed) into :class:`FleetFacts`."""
    facts = FleetFacts(world_size=world_size, missing=list(missing or []))
    for rec in records:
        facts.add(rec)
    return facts.finish()


def facts_of(fleet: Any) -> FleetFacts:
    """Read a loaded fleet's records (:class:`forensics.fleet.document.Fleet`) once into facts.

    The head's ``missing`` and ``world_size`` are taken after the records: a folder of node
    snapshots (:mod:`forensics.fleet.nodes`) learns which files were damaged while it reads them.
    """
    facts = from_records(fleet.records())
    head = fleet.head
    facts.world_size = max(facts.world_size, int(head.get("world_size") or 0))
    facts.missing = list(head.get("missing") or [])
    if head.get("unit"):
        facts.unit = str(head["unit"])
    return facts.finish()
