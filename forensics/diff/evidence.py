"""Scores from evidence: the one table that ranks causes (DESIGN section 14, docs/diagnosis.md).

A hypothesis's score is::

    score = prior x strength x product(factor of every evidence rule that fires)

- **prior** (:data:`PRIORS`): how often a change of this kind, once seen between
  two snapshots, turns out to slow a step. These are engineering estimates from
  the incidents in tests/fixtures/cases and the known-issues catalog, not
  measured frequencies; the reason is written next to each.
- **strength** (:func:`strength`): how strong the judge says its own observation
  is (severity and relevance of the implicating findings). It only scales a
  hypothesis's own evidence; it no longer decides between hypotheses on its own
  (a pull being ``high`` and a driver change ``medium`` is the judges' view of
  each change, not of which one slowed the step).
- **evidence rules** (:data:`RULES`): facts that tell causes apart -- which
  benchmark component moved, a canary that stayed flat while the user's step
  slowed, mechanism facts (memory near full with a driver change, a transport
  change with an NCCL change), a known-issues catalog match. Each rule names
  the hypotheses it raises (factor > 1) or lowers (factor < 1).

Every rule that fires adds an evidence line to the hypotheses it moves
("evidence allreduce-moved x4: canary.allreduce_us ..."), so a report says why
one cause ranks above another. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from forensics.bench.effect import BenchEffect, Pointer
from forensics.hypotheses import FACT_CANARY_BLIND
from forensics.model import Finding, HypothesisStatus, Severity

# ----------------------------------------------------------------------------------------------
# Priors: P(this kind of change, when present, is what slowed the step). Estimates; see the module doc.
# ----------------------------------------------------------------------------------------------
PRIORS: dict[str, tuple[float, str]] = {
    "gpu.throttling": (0.8, "clocks cut under load slow every kernel directly"),
    "gpu.contention": (
        0.7,
        "another process on the GPU takes SMs and memory bandwidth while it runs",
    ),
    "gpu.pcie-link": (
        0.6,
        "a downtrained link under load cuts copy bandwidth; only copy-bound steps feel it",
    ),
    "nccl.transport": (
        0.6,
        "a different transport (P2P -> SHM/NET) changes all-reduce latency several-fold",
    ),
    "gpu.topology": (
        0.5,
        "ACS/IOMMU or a broken NVLink/P2P path reroutes collectives through the host",
    ),
    "gpu.memory": (
        0.4,
        "memory at the total under load makes the allocator free and retry, or the driver spill",
    ),
    "gpu.config": (
        0.4,
        "a lower power limit or locked clocks slow compute, but many setting changes are neutral",
    ),
    "nccl.env": (
        0.4,
        "NCCL_* tuning variables change algorithms and protocols; some are no-ops on a topology",
    ),
    "nccl.env-propagation": (
        0.4,
        "a variable the workers do not see is a lost tuning or an injected one",
    ),
    "torch.version": (
        0.35,
        "a PyTorch upgrade changes kernels, defaults and the libraries it bundles",
    ),
    "nccl.version": (0.3, "NCCL releases change tuning; regressions are topology-specific"),
    "code.change": (
        0.3,
        "most pulls do not slow the step; hot-path commits raise it through the judge's strength",
    ),
    "gpu.health": (0.3, "ECC/Xid/replay events are faults first, slowdowns only sometimes"),
    "host.numa": (0.3, "a process moved off its GPU's NUMA node pays on every host-device copy"),
    "cuda.version": (
        0.25,
        "CUDA runtime/cuBLAS changes are mostly neutral; a few regress kernels or host APIs",
    ),
    "driver.version": (
        0.2,
        "most driver updates are performance-neutral; the catalog lists the ones that are not",
    ),
    "host.cpu": (0.2, "governor, load and cgroup limits matter to host-bound steps only"),
    "python.packages": (
        0.15,
        "most package updates do not touch the step's hot loop; a GPU-stack package (flash-attn, "
        "vLLM, triton...) is raised to torch's level by the rule gpu-stack",
    ),
}
DEFAULT_PRIOR = 0.3
"""Prior of a hypothesis id no row names (a third-party probe's)."""

SEVERITY_STRENGTH = {
    Severity.LOW: 0.4,
    Severity.MEDIUM: 0.7,
    Severity.HIGH: 1.0,
    Severity.CRITICAL: 1.3,
}
"""Strength of a judge's implicating finding by severity (``info`` never implicates)."""

ENV_HYPOTHESES = (
    "gpu.throttling",
    "gpu.contention",
    "gpu.pcie-link",
    "gpu.config",
    "gpu.health",
    "gpu.topology",
    "gpu.memory",
    "driver.version",
    "nccl.version",
    "nccl.env",
    "nccl.env-propagation",
    "nccl.transport",
    "host.cpu",
    "host.numa",
)
"""What the canary would see: hypotheses about the machine and the libraries under forensics' own code."""

ALLREDUCE = ("canary.allreduce_us", "component.allreduce_busbw_gbps")
P2P = ("component.p2p_gbps", "component.p2p_latency_us")
COMPUTE = ("canary.compute_ms", "component.matmul_tflops")
COPIES = ("component.h2d_gbps", "component.d2h_gbps")
"""Benchmark results that localise a change (docs/bench.md, component probes)."""

MEMORY_NEAR_FULL_FIELD = "memory.near_full"
"""Besides an implicated ``gpu.memory``, a finding whose ``fields`` name this is the fact "GPU memory near full"."""


MATERIAL_SHARE = 0.1
"""A component counts as moved when its slowdown is at least this share of the step's (BenchEffect.ratio - 1)."""


@dataclass
class Facts:
    """What the rules look at: the benchmark effect, the implicating findings, the catalog matches.

    Attributes:
        bench: the benchmark comparison, ``None`` when neither snapshot has one.
        implicated: hypothesis id -> its implicating findings at ``low`` or above.
        findings: every finding (any status), for mechanism facts carried in ``fields``.
        known: hypothesis id -> catalog entry ids that matched it.
    """

    bench: BenchEffect | None
    implicated: dict[str, list[Finding]]
    findings: list[Finding] = field(default_factory=list)
    known: dict[str, list[str]] = field(default_factory=dict)

    def _negligible(self, name: str) -> bool:
        """Measured slower, but by less than :data:`MATERIAL_SHARE` of the step's own slowdown: a small
        compute change inside a much larger verify-step slowdown does not explain it (docs/diagnosis.md,
        'Small real changes')."""
        if self.bench is None or not self.bench.moved(name):
            return False
        gap = self.bench.ratio - 1
        r = next(
            (r for r in self.bench.results if r.name == name and r.comparison is not None), None
        )
        return r is not None and gap > 0 and (r.comparison.time_ratio - 1) < MATERIAL_SHARE * gap

    def moved(self, names: Iterable[str]) -> list[str]:
        """The results among ``names`` measured slower (``slower`` or ``small-slower``) by a material share
        of the step's slowdown (see :meth:`_negligible`)."""
        return [
            n
            for n in names
            if self.bench is not None and self.bench.moved(n) and not self._negligible(n)
        ]

    def flat(self, names: Iterable[str]) -> list[str]:
        """The results among ``names`` measured ``same`` (or faster), or slower by a negligible share."""
        return [
            n
            for n in names
            if self.bench is not None and (self.bench.same(n) or self._negligible(n))
        ]

    def canary_moved(self) -> bool:
        return self.bench is not None and self.bench.pointer is Pointer.ENVIRONMENT

    def has(self, hyp: str) -> bool:
        return bool(self.implicated.get(hyp))

    def field_fact(self, name: str) -> bool:
        return any(
            name in f.fields for f in self.findings if f.status is HypothesisStatus.IMPLICATED
        )

    def canary_blind(self, hyp: str) -> bool:
        """Every implicating finding of ``hyp`` carries :data:`forensics.hypotheses.FACT_CANARY_BLIND`: the
        canary could not have seen the change (its judge says why in the finding's evidence)."""
        fs = self.implicated.get(hyp) or []
        return bool(fs) and all(FACT_CANARY_BLIND in f.fields for f in fs)


@dataclass(frozen=True)
class Rule:
    """One row of the evidence table.

    Attributes:
        name: stable id, shown in evidence lines ("allreduce-moved").
        when: the condition, in words (docs/diagnosis.md prints these).
        factors: hypothesis id -> multiplier applied when the rule fires.
        fires: ``Facts -> str``: "" when the rule does not fire, else the evidence
            sentence (which results or facts made it fire).
        reads_flat_canary: the rule lowers hypotheses because the canary (or a part of it) did not
            move; it does not lower one whose change the canary could not see
            (:meth:`Facts.canary_blind`): absence of evidence where the canary never looked.
    """

    name: str
    when: str
    factors: dict[str, float]
    fires: Callable[[Facts], str]
    reads_flat_canary: bool = False


def _names(xs: list[str]) -> str:
    return ", ".join(xs)


def _moved(group) -> Callable[[Facts], str]:
    """A rule test: fires on the components of GROUP that measured slower, naming them."""

    def fires(f: Facts) -> str:
        m = f.moved(group)
        return f"measured slower: {_names(m)}" if m else ""

    return fires


def _flat(group) -> Callable[[Facts], str]:
    """A rule test: fires when the canary slowed while the components of GROUP that were measured did not."""

    def fires(f: Facts) -> str:
        if not f.canary_moved():
            return ""
        s = f.flat(group)
        return f"the canary slowed but {_names(s)} did not" if s and not f.moved(group) else ""

    return fires


def _user_only(f: Facts) -> str:
    return (
        "the user's step slowed while the canary's verify step did not"
        if f.bench is not None and f.bench.pointer is Pointer.CODE
        else ""
    )


def _canary_moved(f: Facts) -> str:
    return (
        "forensics' own fixed benchmark (the canary) slowed: the environment changed"
        if f.canary_moved()
        else ""
    )


def _memory_full_driver(f: Facts) -> str:
    return (
        "GPU memory near full with a driver change (drivers differ in how they oversubscribe or fall back to "
        "system memory)"
        if (f.has("gpu.memory") or f.field_fact(MEMORY_NEAR_FULL_FIELD)) and f.has("driver.version")
        else ""
    )


def _transport_nccl(f: Facts) -> str:
    if not f.has("nccl.transport"):
        return ""
    by = [h for h in ("nccl.version", "nccl.env", "nccl.env-propagation") if f.has(h)]
    return (
        f"the NCCL transport changed together with {_names(by)}: the mechanism of that change"
        if by
        else ""
    )


GPU_STACK_FIELD = "packages.gpu_stack"
"""A ``python.packages`` finding whose ``fields`` name this changed a package of the GPU stack's table
(probes/software.py ``GPU_STACK_TABLE``: flash-attn, FlashInfer, Transformer Engine, vLLM, triton...)."""


def _gpu_stack(f: Facts) -> str:
    return (
        "a GPU-stack package changed (attention/GEMM kernels, the serving engine, the compiler the step's kernels "
        "come from): not 'other packages'"
        if f.field_fact(GPU_STACK_FIELD)
        else ""
    )


def _contention_throttle(f: Facts) -> str:
    return (
        "another process on the GPU and throttling together: a foreign process drawing power pushes the board to "
        "its power cap, so the contention comes first"
        if f.has("gpu.contention") and f.has("gpu.throttling")
        else ""
    )


RULES: list[Rule] = [
    Rule(
        "allreduce-moved",
        "the canary's all-reduce latency or bus bandwidth measured slower",
        {
            "nccl.version": 4.0,
            "nccl.env": 4.0,
            "nccl.transport": 4.0,
            "gpu.topology": 4.0,
            "nccl.env-propagation": 3.0,
        },
        _moved(ALLREDUCE),
    ),
    Rule(
        "compute-moved",
        "the canary's compute or the matmul TFLOP/s measured slower",
        {
            "gpu.throttling": 4.0,
            "gpu.contention": 4.0,
            "gpu.config": 3.0,
            "cuda.version": 2.0,
            "driver.version": 2.0,
        },
        _moved(COMPUTE),
    ),
    Rule(
        "p2p-moved",
        "the GPU-to-GPU copy (P2P canary component) measured slower",
        {"gpu.topology": 4.0, "nccl.transport": 3.0},
        _moved(P2P),
    ),
    Rule(
        "copies-moved",
        "host-to-device or device-to-host copy bandwidth measured slower",
        {"gpu.pcie-link": 4.0, "host.numa": 2.0},
        _moved(COPIES),
    ),
    Rule(
        "allreduce-flat",
        "the canary slowed but its all-reduce was measured unchanged",
        {
            "nccl.version": 0.4,
            "nccl.env": 0.4,
            "nccl.transport": 0.4,
            "gpu.topology": 0.4,
            "nccl.env-propagation": 0.4,
        },
        _flat(ALLREDUCE),
        reads_flat_canary=True,
    ),
    Rule(
        "compute-flat",
        "the canary slowed but its compute and the matmul were measured unchanged",
        {"gpu.throttling": 0.4, "gpu.contention": 0.4, "gpu.config": 0.4},
        _flat(COMPUTE),
    ),
    Rule(
        "user-step-only",
        "the user's step slowed while the canary's verify step did not (DESIGN section 7)",
        {
            "code.change": 3.0,
            "python.packages": 4.0,
            "torch.version": 1.2,
            "cuda.version": 1.5,
            **{h: 0.3 for h in ENV_HYPOTHESES},
        },
        _user_only,
        reads_flat_canary=True,
    ),
    Rule(
        "canary-moved",
        "the canary slowed: forensics' own code did not change, so the environment did",
        {"code.change": 0.2, "python.packages": 0.5},
        _canary_moved,
    ),
    Rule(
        "gpu-stack",
        "a package of the GPU stack's table changed (its kernels run in the step, as torch's do)",
        {"python.packages": 2.3},
        _gpu_stack,
    ),
    Rule(
        "contention-then-throttle",
        "gpu.contention and gpu.throttling both implicated (the throttle is its effect)",
        {"gpu.contention": 2.0, "gpu.throttling": 0.6},
        _contention_throttle,
    ),
    Rule(
        "memory-full-driver",
        "GPU memory near full (gpu.memory implicated) and a driver change",
        {"driver.version": 3.0, "gpu.memory": 1.5},
        _memory_full_driver,
    ),
    Rule(
        "transport-with-nccl",
        "the NCCL transport changed and so did the NCCL version or variables",
        {"nccl.version": 2.0, "nccl.env": 2.0, "nccl.env-propagation": 2.0, "nccl.transport": 1.5},
        _transport_nccl,
    ),
]
"""The evidence table, in the order its lines are printed."""

KNOWN_ISSUE_FACTOR = 3.0
"""A known-issues catalog entry matched the change (component, versions, conditions): x3 for its hypothesis."""

KNOWN_ISSUE_UNCHECKED_FACTOR = 1.5
"""The entry matched the versions, but a condition it needs could not be checked in the snapshots."""

KNOWN_ISSUE_AGAINST_FACTOR = 0.7
"""The entry matched, but the canary components it names did not move while the canary did: evidence against."""


def prior(hyp: str) -> float:
    """The prior of ``hyp`` (:data:`DEFAULT_PRIOR` for ids no row names)."""
    return PRIORS.get(hyp, (DEFAULT_PRIOR, ""))[0]


def strength(findings: list[Finding]) -> float:
    """How strong a hypothesis's own implicating findings are (0 when none at ``low`` or above).

    ``max(SEVERITY_STRENGTH[severity] x (0.5 + 0.5 x relevance))`` plus 0.05 per
    further such finding (at most 0.2).
    """
    strong = [
        f for f in findings if f.status is HypothesisStatus.IMPLICATED and f.severity.weight > 0
    ]
    if not strong:
        return 0.0
    best = max(
        SEVERITY_STRENGTH[f.severity] * (0.5 + 0.5 * max(0.0, min(1.0, float(f.relevance))))
        for f in strong
    )
    return best + min(0.05 * (len(strong) - 1), 0.2)


@dataclass
class Scored:
    """A hypothesis's score and the lines that explain it."""

    score: float
    lines: list[str]
    factors: dict[str, float]


def score(
    hyp: str,
    findings: list[Finding],
    facts: Facts,
    catalog_factor: float = 1.0,
    catalog_lines: Iterable[str] = (),
) -> Scored:
    """Score one hypothesis: prior x strength x the factors of the rules that fire for it.

    Args:
        hyp: the hypothesis id.
        findings: its findings (only implicating ones at ``low`` or above count).
        facts: what the rules read.
        catalog_factor: the known-issues factor for ``hyp`` (1 when nothing matched).
        catalog_lines: the evidence lines of those matches.

    Returns:
        a :class:`Scored`; ``score`` is 0 when nothing implicates ``hyp``.
    """
    st = strength(findings)
    if st == 0:
        return Scored(0.0, [], {})
    total = prior(hyp) * st
    lines: list[str] = []
    factors: dict[str, float] = {}
    for rule in RULES:
        f = rule.factors.get(hyp)
        if f is None:
            continue
        why = rule.fires(facts)
        if not why:
            continue
        if rule.reads_flat_canary and f < 1 and facts.canary_blind(hyp):
            lines.append(
                f"evidence {rule.name} x1 (not x{f:g}): {why}, but the canary cannot see this change"
            )
            continue
        total *= f
        factors[rule.name] = f
        lines.append(f"evidence {rule.name} x{f:g}: {why}")
    if catalog_factor != 1.0:
        total *= catalog_factor
        factors["known-issue"] = catalog_factor
    lines.extend(catalog_lines)
    return Scored(total, lines, factors)
