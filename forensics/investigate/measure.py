"""What ``forensics investigate`` measures: the snapshot taken now, and the A/B sides of an experiment.

The **subject** is the result an experiment A/Bs: the user's step
(``--cmd``, or ``--callable`` run as ``python -m forensics.step.callable``,
one fresh process per sample, :mod:`forensics.bench.user`) when the baseline
measured it, else the canary's verify step (:mod:`forensics.bench.session`).
Every A/B is interleaved A B B A in fresh processes, so drift hits both sides alike.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from forensics.errors import BadInputError
from forensics.gpu.readings import CLOCK_SM_MHZ

CANARY_RESULT = "canary.verify_step_ms"
STARTUP_S = 1.0  # added to an estimate per experiment: worktrees, temp folders, telemetry
ROUND = 3
"""Fresh processes a side added per round while an A/B is undecided (docs/investigate.md, "Cost")."""
MAX_PROCESSES = 20
"""No side of an A/B grows beyond this many processes: past it the noise, not the sample, is the problem."""


@dataclass
class Subject:
    """The step an experiment measures, and how long one fresh process of it takes.

    Attributes:
        kind: ``cmd`` (the user's step) or ``canary``.
        cmd: the shell command of the user's step (``--callable`` turned into one).
        metric, metric_regex, higher_is_better: how to read the step's output.
        name: the result name in bench documents (``user.step_ms``, ``canary.verify_step_ms``).
        unit: the result's unit.
        process_s: median wall seconds of one fresh process (measured in the snapshot taken now).
        timeout_s: limit of one process.
        canary: canary options (:func:`forensics.bench.session.canary_config`), for ``kind == "canary"``.
    """

    kind: str
    cmd: str = ""
    metric: str | None = None
    metric_regex: str | None = None
    higher_is_better: bool = False
    name: str = CANARY_RESULT
    unit: str = "ms"
    process_s: float = 5.0
    timeout_s: float = 300.0
    canary: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        return f"your step ({self.cmd})" if self.kind == "cmd" else "the canary's verify step"


def callable_command(target: str) -> str:
    """The shell command timing ``module:function`` in a fresh process (:func:`forensics.bench.user.callable_command`)."""
    from forensics.bench.user import callable_command as cc

    return cc(target)


def _user_result(
    doc: dict[str, Any],
    subject: Subject,
    processes: int,
    budget_s: float,
    on_process: Callable[[str, int, dict], None] | None,
) -> None:
    """Run the user's step ``processes`` times and append its result (kind ``user``) to ``doc``."""
    from forensics.bench.user import run_cmd_process, user_result

    recs, walls = [], []
    t0 = time.perf_counter()
    for i in range(processes):
        spent = time.perf_counter() - t0
        if i >= 5 and spent + spent / i > budget_s:
            break
        p0 = time.perf_counter()
        rec = run_cmd_process(
            subject.cmd,
            metric=subject.metric or (recs[0]["metric"] if recs else None),
            metric_regex=subject.metric_regex,
            timeout_s=subject.timeout_s,
        )
        walls.append(time.perf_counter() - p0)
        recs.append(rec)
        if on_process:
            on_process("step", i, rec)
    subject.metric = subject.metric or recs[0]["metric"]
    subject.name = f"user.{recs[0]['metric']}"
    from forensics.words import metric_time_unit

    # a time in the unit its name ends in (step_s: seconds; step_ms or no unit: ms), as the step printed it
    subject.unit = "per s" if subject.higher_is_better else metric_time_unit(subject.name)
    subject.process_s = statistics.median(walls)
    result = user_result(
        subject.name, recs, unit=subject.unit, higher_is_better=subject.higher_is_better
    )
    doc["results"].append(result)
    doc.setdefault("config", {})["user_step"] = {
        "command": subject.cmd,
        "metric": subject.metric,
        "metric_regex": subject.metric_regex,
        "higher_is_better": subject.higher_is_better,
        "processes": len(recs),
    }
    doc["summary"] = (
        f"{doc.get('summary', '')}; {subject.name} {result['median']:.4g} {result['unit']}".lstrip(
            "; "
        )
    )


def measure_now(
    step: Subject | None,
    *,
    canary: bool,
    canary_options: dict[str, Any],
    processes: int,
    budget_s: float,
    on_process: Callable[[str, int, dict], None] | None = None,
    notes: list[str] | None = None,
) -> tuple[dict | None, float]:
    """The benchmark part of the snapshot taken now: the canary (unless ``canary`` is false) and the step.

    With ``notes`` and a step, a canary that fails here (a variable it cannot run under) is noted
    and the step is measured alone.

    Returns:
        (bench document or ``None`` when nothing was measured, median wall seconds of one canary process or 0).

    Raises:
        BadInputError: a canary or step process failed.
    """
    from forensics.bench import SNAPSHOT_BLOCKS, SNAPSHOT_WARMUP_S
    from forensics.bench.document import build

    doc: dict | None = None
    canary_s = 0.0
    if canary:
        from forensics.bench.session import canary_config, run_canary

        opts = {"blocks": SNAPSHOT_BLOCKS, "warmup_s": SNAPSHOT_WARMUP_S, **canary_options}
        cfg = canary_config(opts)

        def cb(side, i, result):
            if on_process:
                on_process("canary", i, {"value": result.get("wall_s", 0.0)})

        try:
            doc = run_canary(
                cfg, processes=processes, budget_s=budget_s, label="snapshot", on_process=cb
            )[0]
        except (
            BadInputError
        ) as exc:  # forensics' own code failing in this environment is itself a finding
            if notes is None or step is None:
                raise
            notes.append(
                f"the canary failed in this environment ({exc}); only your step was measured now"
            )
            doc = None
        else:
            walls = [
                p.get("wall_s")
                for p in doc.get("processes", [])
                if isinstance(p.get("wall_s"), (int, float))
            ]
            canary_s = statistics.median(walls) if walls else 10.0
    if step is not None:
        if doc is None:
            from forensics.bench.harness import visible_gpus
            from forensics.bench.session import host_cpu, telemetry

            doc = {"results": []}
            with telemetry(visible_gpus() > 0) as tel, host_cpu() as cpu:
                _user_result(doc, step, processes, budget_s, on_process)
            config = {
                "kind": "user",
                "step": "cmd",
                "command": step.cmd,
                "metric": step.metric,
                "metric_regex": step.metric_regex,
                "processes_asked": processes,
                "budget_s": budget_s,
            }
            doc = build(config, doc["results"], telemetry=tel, label="snapshot", host_cpu=cpu)
        else:
            from forensics.bench.session import host_cpu

            with host_cpu() as cpu:
                _user_result(doc, step, processes, budget_s, on_process)
            if cpu:
                doc["host_cpu"] = cpu
    return doc, canary_s


def ab(
    subject: Subject,
    *,
    b_env: dict[str, str | None] | None = None,
    b_cmd: str | None = None,
    processes: int,
    budget_s: float,
    cwd: str | None = None,
    on_process: Callable[[str, int, dict], None] | None = None,
    a_env: dict[str, str | None] | None = None,
) -> tuple[list[float], list[float]]:
    """Interleaved A/B of ``subject``: A as it is today with ``a_env`` (the interventions already
    confirmed), B with ``b_env`` (``None`` unsets) and/or ``b_cmd``; each applied to this process's
    environment, for the user's step and for the canary alike (a variable of ``a_env`` that ``b_env`` does not
    name has this process's value on side B).

    Returns:
        (A per-process medians, B per-process medians), the subject's unit.

    Raises:
        BadInputError: a process failed on either side.
    """
    if subject.kind == "cmd":
        from forensics.bench.user import run_user_ab

        ra, rb = run_user_ab(
            subject.cmd,
            b_cmd or subject.cmd,
            a_env=a_env,
            b_env=b_env,
            processes=processes,
            budget_s=budget_s,
            timeout_s=subject.timeout_s,
            metric=subject.metric,
            metric_regex=subject.metric_regex,
            cwd=cwd,
            on_process=on_process,
        )
        return [r["value"] for r in ra], [r["value"] for r in rb]
    if b_cmd:
        raise BadInputError(
            "an A/B with another command needs the user's step (--cmd or --callable)"
        )
    docs = run_canary_ab(
        subject,
        a_env=a_env,
        b_env=b_env,
        processes=processes,
        budget_s=budget_s,
        on_process=on_process,
    )
    return _values(docs[0], subject.name), _values(docs[1], subject.name)


def run_canary_ab(
    subject: Subject,
    *,
    b_env: dict[str, str | None] | None,
    processes: int,
    budget_s: float,
    on_process: Callable[[str, int, dict], None] | None = None,
    a_env: dict[str, str | None] | None = None,
) -> list[dict]:
    """The canary, A and B interleaved (A with ``a_env``, B with ``b_env``, each applied to this process's
    environment: :func:`canary_sides_env`); two bench documents."""
    from forensics.bench import SNAPSHOT_BLOCKS, SNAPSHOT_WARMUP_S
    from forensics.bench.session import canary_config, run_canary

    cfg = canary_config(
        {"blocks": SNAPSHOT_BLOCKS, "warmup_s": SNAPSHOT_WARMUP_S, **subject.canary}
    )

    def cb(side, i, result):
        if on_process:
            on_process(side.name, i, {"value": result.get("wall_s", 0.0)})

    env, b = canary_sides_env(a_env, b_env)
    return run_canary(cfg, processes=processes, budget_s=budget_s, env=env, b_env=b, on_process=cb)


def canary_sides_env(
    a_env: dict[str, str | None] | None, b_env: dict[str, str | None] | None
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """``(env, b_env)`` for :func:`forensics.bench.session.run_canary`, whose B side runs with ``env`` and
    ``b_env`` on top: side A gets ``a_env``, side B exactly ``b_env`` (a variable only ``a_env`` names takes
    this process's value again, ``os.environ``; ``None`` where it is unset here)."""
    import os

    a = dict(a_env or {})
    b = {k: os.environ.get(k) for k in a}
    b.update(b_env or {})
    return a, b


def canary_once(
    options: dict[str, Any],
    *,
    processes: int,
    budget_s: float,
    on_process: Callable[[str, int, dict], None] | None = None,
) -> dict:
    """One fresh canary run (every component), for re-measuring a condition now."""
    from forensics.bench import SNAPSHOT_BLOCKS, SNAPSHOT_WARMUP_S
    from forensics.bench.session import canary_config, run_canary

    cfg = canary_config({"blocks": SNAPSHOT_BLOCKS, "warmup_s": SNAPSHOT_WARMUP_S, **options})

    def cb(side, i, result):
        if on_process:
            on_process("canary", i, {"value": result.get("wall_s", 0.0)})

    return run_canary(
        cfg, processes=processes, budget_s=budget_s, label="re-measure", on_process=cb
    )[0]


def _values(doc: dict, name: str) -> list[float]:
    for r in doc.get("results", []):
        if r.get("name") == name:
            return [float(x) for x in r["process_medians"]]
    raise BadInputError(f"the canary run has no result {name!r}")


def results_of(snapshot: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """``name -> result entry`` of a snapshot's embedded bench document (empty when it has none)."""
    bench = (snapshot or {}).get("bench")
    if not isinstance(bench, dict) or not isinstance(bench.get("results"), list):
        return {}
    return {str(r["name"]): r for r in bench["results"] if isinstance(r, dict) and r.get("name")}


SPREAD_NOTE = 0.10
"""IQR/median across processes above which :func:`spread_note` explains the spread (the bench's noise gate)."""


def spread_note(doc: dict[str, Any] | None, name: str) -> str:
    """Why the per-process values of ``name`` spread widely, from the GPU telemetry sampled while the step ran
    (``doc["telemetry"]``, :mod:`forensics.gpu.sampler`), and what to change; "" when they do not spread.

    Read: the SM clock's range over busy samples (below 85% of its maximum: clocks still ramping or cut),
    the share of samples in which a GPU was busy (a short step spends most of a fresh process starting up),
    processes on the GPU that are not the step's (:func:`forensics.bench.compare.foreign_processes`) and
    throttle reasons (:func:`forensics.bench.compare.throttled`).
    """
    from forensics.bench.compare import foreign_processes, throttled

    r = results_of({"bench": doc}).get(name) if doc else None
    spread = r.get("noise_iqr_over_median") if r else None
    if not isinstance(spread, (int, float)) or spread <= SPREAD_NOTE:
        return ""
    head = f"your step's processes spread by {spread:.0%} (IQR/median)"
    cpu = _cpu_contention(doc.get("host_cpu"))
    tel = doc.get("telemetry") if isinstance(doc, dict) else None
    if not isinstance(tel, dict) or not isinstance(tel.get("gpus"), dict) or not tel["gpus"]:
        if cpu is not None:
            return f"{head}: {cpu[1]}"
        return (
            f"{head}; no GPU telemetry was read during the step, so the cause cannot be seen: quiet the machine, "
            "or time more iterations per process"
        )
    why: list[str] = [cpu[1]] if cpu is not None and cpu[0] else []
    for g in tel["gpus"].values():
        if not isinstance(g, dict):
            continue
        gpu = f"GPU {g.get('index', '?')}"
        clk = g.get(CLOCK_SM_MHZ) if isinstance(g.get(CLOCK_SM_MHZ), dict) else {}
        lo, hi = clk.get("min"), clk.get("max")
        if (
            isinstance(lo, (int, float))
            and isinstance(hi, (int, float))
            and hi > 0
            and lo < 0.85 * hi
        ):
            why.append(
                f"{gpu}'s SM clock ranged {lo:.0f}-{hi:.0f} MHz while busy (clocks still ramping in short "
                "processes, or cut): time more iterations per process, after a warm-up"
            )
        busy, samples = g.get("busy_samples"), g.get("samples")
        if (
            isinstance(busy, int)
            and isinstance(samples, int)
            and samples >= 10
            and busy < 0.5 * samples
        ):
            why.append(
                f"{gpu} was busy in only {busy / samples:.0%} of the samples: each process spends most of its "
                "time starting up, so start-up noise dominates; time a longer step in each process"
            )
    for gpu, procs in foreign_processes(doc).items():
        why.append(
            f"{gpu} also ran {', '.join(procs[:3])}: another process shares the GPU; run when it is idle"
        )
    why += [f"{k} in {v:.0%} of busy samples" for k, v in throttled(tel).items() if v > 0.05]
    if not why:
        where = (
            "the step's own variance, the rest of the machine being quiet"
            if cpu is not None
            else "CPU load, the step's own variance"
        )
        return (
            f"{head}; the GPU telemetry shows no cause (steady clocks, no other process, no throttling): the "
            f"spread is on the host ({where}); more processes per side resolve it"
        )
    return f"{head}: " + "; ".join(why)


CONTENDED = 0.75
"""Share of the machine's CPUs busy (the step's own and other processes together) above which other
processes' CPU use is named as a cause of the step's spread (:func:`_cpu_contention`)."""


def _cpu_contention(reading: Any) -> tuple[bool, str] | None:
    """From the bench document's ``host_cpu`` (:func:`forensics.bench.session.host_cpu`): (other processes
    compete for the CPUs, the sentence saying so); None when there is no reading. They compete when they
    kept a quarter of a CPU or more busy and, with the step's own processes, more than :data:`CONTENDED`
    of the CPUs."""
    if not isinstance(reading, dict):
        return None
    other, own, cpus = reading.get("other_cpus"), reading.get("own_cpus"), reading.get("cpus")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (other, own, cpus)):
        return None
    if cpus <= 0:
        return None
    if other >= 0.25 and other + own > CONTENDED * cpus:
        return True, (
            f"other processes kept {other:.1f} of the {cpus} CPUs busy on average while it ran (the step "
            f"itself {own:.1f}): they compete with the step; quiet the machine, or time more iterations "
            "per process"
        )
    return False, (
        f"the rest of the machine was quiet while it ran (other processes used {other:.1f} of the {cpus} "
        f"CPUs, the step {own:.1f}), so the spread is the step's own: time more iterations per process, "
        "after a warm-up"
    )
