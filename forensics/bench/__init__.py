"""The benchmark: the verify-step canary, the user's step, telemetry during the run.

Modules: ``config`` (the canary's sizes, no torch), ``canary`` (the canary's
model) and ``worker`` (one canary rank; both import torch and run only in
the canary's child processes), ``harness`` (fresh processes, slowest rank),
``session`` (a whole run with GPU telemetry from ``forensics.gpu.sampler``),
``user`` (the user's step as bench results, run through ``forensics.step``),
``document`` (the ``forensics.bench/1`` file), ``compare`` (two files ->
verdict), ``effect`` (bench results inside two snapshots -> findings for
the diff), ``power`` (detection-power estimates from recorded runs), ``request`` (one
``forensics bench`` run: the request checked, the canary or the user's step run).
Nothing here imports torch at module level.

May import the core, ``forensics.gpu`` and ``forensics.step``; never
``diff``, ``render``, ``cli`` or a probe.
"""

from __future__ import annotations

from typing import Any

SNAPSHOT_PROCESSES = (
    5  # the fewest with which Mann-Whitney U can reach p <= 0.01 (2 / C(10, 5) = 0.008)
)
SNAPSHOT_BUDGET_S = 45.0
SNAPSHOT_BLOCKS = 15
SNAPSHOT_WARMUP_S = 0.1
SNAPSHOT_STEP_LIMIT_S = 600.0
"""Seconds all the processes of the user's step may take together in ``forensics snapshot --bench``
(``--bench-timeout``); each one alone may take :data:`SNAPSHOT_STEP_TIMEOUT_S`."""
SNAPSHOT_STEP_TIMEOUT_S = 300.0


def run_for_snapshot(
    options: dict[str, Any], interrupts: tuple[type[BaseException], ...] = ()
) -> dict[str, Any]:
    """Run the canary (and the user's step, if given) with a small budget; returns a bench document.

    Used by ``forensics snapshot --bench``. ``options`` may override any
    canary setting (``tp``, ``layers``, ``device``...; see
    :func:`forensics.bench.session.canary_config`), ``processes`` (default
    5) and ``budget_s`` (default 45 s of wall time). Blocks per metric drop
    to 15 and the minimum warm-up to 0.1 s (what a fresh TP=2 process
    takes: docs/bench.md, 'From Python').

    Further options:
        launcher: a command prefix (string) every canary rank is started
            under, the same one ``--launcher`` gives the NCCL env probe.
        cmd: the user's step command (JSON metric lines, see
            :mod:`forensics.step.command`); it runs ``processes`` fresh times
            after the canary and its result (kind ``user``) joins the document.
            When it fails, ``config.user_step.failed`` says why and the
            document keeps the canary's results.
        metric, metric_regex, higher_is_better: how to read ``cmd``'s output.
        step_limit_s: seconds all of ``cmd``'s processes may take together (default
            :data:`SNAPSHOT_STEP_LIMIT_S`). When they run out, the process running is stopped with its
            process group and ``config.user_step`` says so: ``failed``, ``limit_s`` and the medians of the
            processes that finished (``process_medians``).

    ``interrupts``: the exceptions a signal raises (``KeyboardInterrupt`` for Ctrl-C, the CLI's
    ``Terminated`` for SIGTERM and SIGHUP) that stop the run but not the snapshot: the processes running are
    stopped with their process groups (:mod:`forensics.procgroup`) and the document keeps what was measured,
    marked (:func:`interruption`): during the user's step, the canary's results, and ``config.user_step``
    with ``interrupted``, ``processes_finished`` and the medians of those (``process_medians``); during the
    canary, no result (``results`` empty) and ``config.interrupted``.

    Raises:
        forensics.errors.BadInputError: bad options, or a canary or step process failed.
    """
    from forensics.bench.session import canary_config, run_canary
    from forensics.step.command import split_command

    opts = {
        "blocks": SNAPSHOT_BLOCKS,
        "warmup_s": SNAPSHOT_WARMUP_S,
        **{k: v for k, v in dict(options or {}).items() if v is not None},
    }
    cfg = canary_config(opts)
    processes = int(opts.get("processes") or SNAPSHOT_PROCESSES)
    budget = float(opts.get("budget_s") or SNAPSHOT_BUDGET_S)
    launcher = split_command(opts["launcher"]) if opts.get("launcher") else None
    try:
        doc = run_canary(
            cfg, processes=processes, budget_s=budget, label="snapshot", launcher=launcher
        )[0]
    except interrupts as exc:  # the canary's ranks are stopped; the probes' minute is not lost
        return _interrupted_canary(cfg, opts, processes, exc)
    if opts.get("cmd"):
        _add_user_step(doc, opts, processes, budget, interrupts)
    return doc


def interruption(exc: BaseException, during: str) -> dict[str, Any]:
    """How a bench document records the signal that stopped it (``config.interrupted``):
    ``{"signal": 2, "name": "SIGINT", "during": "your step"}``.

    ``signal`` is the signal's number, read from ``exc.signum`` (the CLI's ``Terminated``: SIGTERM, SIGHUP),
    else SIGINT (``KeyboardInterrupt``, Ctrl-C); the command exits ``128 + signal`` (130 for Ctrl-C).
    ``during`` says what ran: "the canary" or "your step".
    """
    import signal

    signum = int(getattr(exc, "signum", None) or signal.SIGINT)
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return {"signal": signum, "name": name, "during": during}


def _interrupted_canary(
    cfg: Any, opts: dict[str, Any], processes: int, exc: BaseException
) -> dict[str, Any]:
    """The bench document of a snapshot interrupted while the canary ran: no result, the interruption
    recorded (its ranks were stopped by :func:`forensics.bench.session.run_canary`'s process groups)."""
    from forensics import __version__, docfile
    from forensics.bench.document import SCHEMA

    stop = interruption(exc, "the canary")
    config: dict[str, Any] = {
        "kind": "canary",
        **cfg.to_json(),
        "processes_asked": processes,
        "interrupted": stop,
    }
    if opts.get("cmd"):
        config["user_step"] = {
            "command": opts["cmd"],
            "interrupted": f"by {stop['name']} during the canary, before it ran",
            "processes_finished": 0,
            "process_medians": [],
        }
    return {
        "schema": SCHEMA,
        "created": docfile.utc_now(),
        "label": "snapshot",
        "tool": {"name": "forensics", "version": __version__},
        "config": config,
        "results": [],
        "processes": [],
        "telemetry": {},
        "summary": f"interrupted by {stop['name']} while the canary ran: nothing was measured",
    }


def _add_user_step(
    doc: dict[str, Any],
    opts: dict[str, Any],
    processes: int,
    budget: float,
    interrupts: tuple[type[BaseException], ...] = (),
) -> None:
    """Run the user's step command and append its result (kind ``user``) to a canary document; when one of
    ``interrupts`` stops it, ``config.user_step`` and ``config.interrupted`` say so instead (the process
    running was stopped with its process group by :func:`forensics.procgroup.run_group_bounded`)."""
    import time

    from forensics.bench.user import StepBoundSpent, run_user, user_result
    from forensics.errors import BadInputError
    from forensics.step.command import StepTimedOut
    from forensics.words import metric_time_unit

    hib = bool(opts.get("higher_is_better"))
    limit = float(opts.get("step_limit_s") or SNAPSHOT_STEP_LIMIT_S)
    finished: list[dict] = []
    try:
        recs = run_user(
            "cmd",
            opts["cmd"],
            processes=processes,
            budget_s=budget,
            timeout_s=SNAPSHOT_STEP_TIMEOUT_S,
            metric=opts.get("metric"),
            metric_regex=opts.get("metric_regex"),
            on_process=lambda i, rec: finished.append(rec),
            deadline=time.monotonic() + limit,
        )
    except interrupts as exc:  # the canary's minute and the processes that finished are kept
        from forensics.words import plural

        stop = doc["config"]["interrupted"] = interruption(exc, "your step")
        n = len(finished)
        doc["config"]["user_step"] = {
            "command": opts["cmd"],
            "interrupted": f"by {stop['name']} in process {n + 1} of {processes}",
            "processes_finished": n,
            "process_medians": [r["value"] for r in finished],
        }
        doc["summary"] = (
            f"{doc.get('summary', '')}; your step was interrupted by {stop['name']} "
            f"({plural(n, 'process', 'processes')} of {processes} finished)"
        )
        return
    except (
        StepBoundSpent
    ) as exc:  # a step that hangs: stopped at the limit, the snapshot still written
        doc["config"]["user_step"] = {
            "command": opts["cmd"],
            "failed": f"stopped after {limit:g} s, the time for all its processes together: {exc}",
            "limit_s": limit,
            "process_medians": [r["value"] for r in exc.finished],
        }
        doc["summary"] = f"{doc.get('summary', '')}; your step was stopped after {limit:g} s"
        return
    except (
        BadInputError
    ) as exc:  # the canary's minute is kept: the bench is marked, the snapshot written
        failed = str(exc)
        if isinstance(
            exc, StepTimedOut
        ):  # one process past its own limit, not the bound of all of them
            failed += (
                f"; each process may run {SNAPSHOT_STEP_TIMEOUT_S:g} s, whatever --bench-timeout gives all "
                "of them together (forensics bench --cmd takes a longer --timeout)"
            )
        doc["config"]["user_step"] = {"command": opts["cmd"], "failed": failed}
        doc["summary"] = f"{doc.get('summary', '')}; your step failed: {failed}"
        return
    name = f"user.{recs[0]['metric']}"
    unit = "per s" if hib else metric_time_unit(name)  # step_s: seconds, as the step printed it
    result = user_result(name, recs, unit=unit, higher_is_better=hib)
    doc["results"].append(result)
    doc["config"]["user_step"] = {
        "command": opts["cmd"],
        "metric": opts.get("metric"),
        "metric_regex": opts.get("metric_regex"),
        "higher_is_better": hib,
        "processes": len(recs),
    }
    doc["summary"] = f"{doc.get('summary', '')}; {name} {result['median']:.4g} {result['unit']}"
