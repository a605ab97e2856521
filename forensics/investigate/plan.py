"""The plan: experiments for the implicated hypotheses, most likely first, each with its estimated cost.

The order is the ledger's (:attr:`forensics.diff.ledger.Analysis.implicated`,
highest score first); within a hypothesis, the order its experiment class
proposes (the ledger's order of variables; the suspect commit before the
bisect). A hypothesis no experiment can test (the driver, firmware, GPU
settings, topology, the host) is listed with the reason, so the report shows
it was considered. Estimates are wall seconds: fresh processes per side x
sides x the measured length of one process (from the snapshot taken now).
"""

from __future__ import annotations

from forensics.investigate.experiments import KINDS, PROPOSERS, Context
from forensics.investigate.model import Experiment, Kind, Outcome

UNTESTABLE = {
    "driver.version": "the driver cannot be swapped without root and a reboot; the tool never changes it",
    "cuda.version": "the CUDA toolkit/runtime is not swapped by the tool (a CUDA wheel under python.packages is)",
    "gpu.config": "GPU settings (power limit, clocks, modes) are never changed by the tool; nvidia-smi -q shows them",
    "gpu.health": "ECC errors, remapped rows and Xid events cannot be undone by an experiment",
    "gpu.topology": "NVLink/P2P topology is hardware and firmware; the tool never changes it",
    "host.cpu": "CPU governor, load and cgroup limits belong to the host; the tool never changes them",
}


def costly_env(ctx: Context, plan: list[Experiment], next_id) -> list[Experiment]:
    """One experiment per variable known to cost speed that is set now to a costly value
    (:func:`forensics.investigate.memory.costly_set_now`) and not already restored by the plan: the step with
    it unset against today, an interleaved A/B. It needs no baseline value of the variable, but one the
    baseline had too is no cause of the slowdown since: a variable the baseline snapshot recorded with the
    same value, or any variable when the baseline was measured now in this environment (a remembered commit),
    is left out with a note saying how to measure what it costs (unsetting it recovered more than the
    slowdown, "115%", and was confirmed while the commit that caused it was "not needed"). Only with
    ``--expect``, a figure whose environment nothing recorded, is every costly variable tested
    (``ctx.cache["figure"]``)."""
    from types import SimpleNamespace

    from forensics.investigate.experiments import EnvExperiment
    from forensics.investigate.memory import costly_set_now

    if ctx.subject is None:
        return []
    planned = {k for e in plan if e.kind is Kind.ENV for k in (e.params.get("restore") or {})}
    before = {} if ctx.cache.get("figure") else EnvExperiment._parent_env(ctx.baseline)
    out = []
    for row in costly_set_now():
        if row["name"] in planned:
            continue
        if row["name"] in before and str(before[row["name"]]) == str(row["value"]):
            ctx.cache.setdefault("notes", []).append(
                f"{row['name']}={row['value']} is set now and was set the same in the baseline, so it is not what "
                f"changed; it is known to cost speed ({row['effect']}): forensics bench --cmd STEP --b-unset "
                f"{row['name']} measures what it costs"
            )
            continue
        exp = EnvExperiment._one(
            ctx, SimpleNamespace(id="nccl.env"), {row["name"]: None}, next_id("env")
        )
        exp.title = f"unset {row['name']} (set now to {row['value']!r}; known to cost speed: {row['effect']})"
        exp.details["known_cost"] = {"effect": row["effect"], "source": row["source"]}
        out.append(exp)
    return out


def recent_packages(ctx: Context, next_id) -> list[Experiment]:
    """Without a baseline snapshot, with ``--wheelhouse`` and ``--expect``: for each distribution installed or
    upgraded recently (:func:`forensics.investigate.memory.recent_distributions`) whose wheelhouse holds another
    version, that version in a temporary overlay (the package experiment), newest wheel first, one per
    distribution. Against a remembered commit measured now (no ``--expect``) none: it ran with today's
    packages, so none is part of the slowdown measured (a note says so)."""
    from forensics.investigate.experiments import PackageExperiment
    from forensics.investigate.measure import results_of
    from forensics.investigate.memory import (
        recent_distributions,
        step_python_paths,
        wheel_versions,
    )

    if not ctx.cache.get("memory") or ctx.wheelhouse is None or ctx.subject is None:
        return []
    if not ctx.cache.get("figure"):
        # the remembered commit was measured now, with today's packages: a package installed since is on both
        # sides of the measured slowdown, so swapping it back cannot be a share of it (a swap recovering a
        # speed the code change did not lose was 'confirmed' at 102% of a slowdown the user's edit caused)
        ctx.cache.setdefault("notes", []).append(
            "--wheelhouse: the recently installed distributions were not tried: the remembered commit was "
            "measured now with today's packages, so they are on both sides of the slowdown measured; give "
            "--expect with the value you remember to try them against it"
        )
        return []
    out = []
    today = results_of(ctx.now).get(ctx.subject.name) or {}
    loaded = today.get("loaded_packages") or []
    recent = recent_distributions(
        limit=None, imported=[str(x) for x in loaded], paths=step_python_paths(today)
    )
    for dist in recent:
        others = [v for v in wheel_versions(ctx.wheelhouse, dist["name"]) if v != dist["version"]]
        if not others:
            continue
        older = [v for v in others if _older(v, dist["version"])]
        old = (older or others)[-1]  # the newest version before today's, else the newest other
        exp = Experiment(
            next_id("package"),
            Kind.PACKAGE,
            "python.packages",
            f"{dist['name']} {old} (in --wheelhouse) instead of {dist['version']} (installed "
            f"{dist['installed']}), in a temporary overlay",
            b_label=f"today with {dist['name']}=={old}",
        )
        exp.params.update({"name": dist["name"], "old": old})
        exp.details.update(
            {
                "package": dist["name"],
                "baseline_version": old,
                "today_version": dist["version"],
                "installed": dist["installed"],
            }
        )
        exp.estimate_s = PackageExperiment.estimate(ctx, exp)
        out.append(exp)
    return out


def _older(a: str, b: str) -> bool:
    try:
        from packaging.version import Version

        return Version(a) < Version(b)
    except Exception:  # noqa: BLE001 - packaging missing or a version it cannot parse: not known to be older
        return False


def build_plan(ctx: Context) -> list[Experiment]:
    """Experiments for ``ctx.analysis``'s implicated hypotheses, with estimates; nothing runs.

    Returns:
        experiments in the order they would run (``outcome`` ``planned``, or
        ``not-run`` with the reason when they cannot run at all).
    """
    counters: dict[str, int] = {}

    def next_id(prefix: str) -> str:
        counters[prefix] = counters.get(prefix, 0) + 1
        return f"{prefix}-{counters[prefix]}"

    by_hyp = {h: cls for cls in PROPOSERS for h in cls.hypotheses}
    taken: dict[type, set[str]] = {}
    plan: list[Experiment] = []
    for hyp in ctx.analysis.implicated:
        cls = by_hyp.get(hyp.id)
        if cls is None:
            why = UNTESTABLE.get(hyp.id, "no experiment tests this hypothesis")
            plan.append(
                Experiment(
                    next_id("none"),
                    Kind.NONE,
                    hyp.id,
                    f"{hyp.id}: {hyp.summary}",
                    outcome=Outcome.NOT_RUN,
                    reason=why,
                )
            )
            continue
        plan.extend(cls.propose(ctx, hyp, taken.setdefault(cls, set()), next_id))
    plan.extend(costly_env(ctx, plan, next_id))
    plan.extend(recent_packages(ctx, next_id))
    plan.sort(
        key=lambda e: e.kind is not Kind.ENV
    )  # the cheapest experiments first (stable: ledger order kept)
    for exp in plan:
        if exp.kind in KINDS:
            exp.estimate_s = KINDS[exp.kind].estimate(ctx, exp)
        if ctx.subject is not None and exp.kind in (Kind.ENV, Kind.COMMIT, Kind.PACKAGE):
            exp.subject = ctx.subject.name
        if exp.kind is Kind.BISECT and ctx.subject is not None:
            exp.subject = ctx.subject.name
    return plan
