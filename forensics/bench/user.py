"""The user's own step: a command (JSON metric lines or a regex) or a Python callable.

Both run as several fresh processes; each process gives one value to the
statistics, the median of its measurements.

- ``--cmd``: :func:`forensics.step.command.run_command` runs the command once per
  process and parses its output. When a process prints 3 or more values the
  first is dropped as warm-up (recorded as ``warmup_dropped``).
- ``--callable package.module:function``: a child process
  (``python -m forensics.step.callable --summary``) imports the function and
  times it in-process in blocks of >= 1 ms with ``time.perf_counter``; if the
  function has initialised CUDA through torch, each block is bracketed by
  ``torch.cuda.synchronize()``. Warm-up is checked like the canary's.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from typing import Callable

from forensics.bench.document import VALUE_MAX, ResultKind, make_result
from forensics.bench.harness import MIN_PROCESSES, balanced_order
from forensics.errors import BadInputError
from forensics.procgroup import run_group_bounded
from forensics.stats import summarize
from forensics.step import loaded_files
from forensics.step.command import StepTimedOut, child_env, run_command, shown
from forensics.words import metric_time_unit

CALLABLE_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def run_cmd_process(
    cmd: str,
    *,
    metric: str | None,
    metric_regex: str | None,
    timeout_s: float,
    env: dict[str, str] | None = None,
) -> dict:
    """One fresh process of the user's command; returns ``{"value", "values", "metric", "warmup_dropped",
    "loaded_files", "loaded_packages", "python_paths"}`` (the last three: :mod:`forensics.step.loaded_files`).

    Raises:
        BadInputError: the command failed, timed out, or printed no measurement.
    """
    step_env, folder = loaded_files.recording_env(child_env(env))
    try:
        run = run_command(
            cmd, env=step_env, timeout_s=timeout_s, metric=metric, metric_regex=metric_regex
        )
    finally:
        loaded, packages, paths = loaded_files.collect_all(folder)
    values = list(run.values)
    dropped = len(values) >= 3
    kept = values[1:] if dropped else values
    if any(v <= 0 for v in kept):
        raise BadInputError(f"step command printed a non-positive value for {run.metric!r}: {cmd}")
    if any(v >= VALUE_MAX for v in kept):
        raise BadInputError(
            f"step command printed a value of {max(kept):g} for {run.metric!r}, no measurement (at most "
            f"{VALUE_MAX:g}): {cmd}"
        )
    return {
        "value": statistics.median(kept),
        "values": values,
        "metric": run.metric,
        "warmup_dropped": dropped,
        "loaded_files": loaded,
        "loaded_packages": packages,
        "python_paths": paths,
    }


def run_callable_process(
    target: str,
    *,
    blocks: int,
    block_ms: float,
    warmup_s: float,
    timeout_s: float,
    env: dict[str, str] | None = None,
) -> dict:
    """One fresh process timing ``package.module:function`` in-process; returns ms per call and block data.

    Raises:
        BadInputError: bad target, import failure, the function raised.
        StepTimedOut: it ran past ``timeout_s`` (its process group was stopped).
    """
    if not CALLABLE_RE.match(target):
        raise BadInputError(f"--callable {target!r}: expected package.module:function")
    args = [
        sys.executable,
        "-m",
        "forensics.step.callable",
        target,
        "--summary",
        "--blocks",
        str(blocks),
        "--min-block-ms",
        str(block_ms),
        "--warmup-s",
        str(warmup_s),
    ]
    step_env, folder = loaded_files.recording_env(child_env(env))
    try:  # its own process group, ended when it exits: a child the callable started does not outlive it
        # the function's own prints are not held: the last 64 KiB of each stream hold the result line
        code, out, err = run_group_bounded(args, timeout_s, env=step_env)
        stdout, stderr = out.tail, err.tail
    finally:
        loaded, packages, paths = loaded_files.collect_all(folder)
    if code is None:
        raise StepTimedOut(
            f"--callable {target}: timed out after {timeout_s:g} s (its processes were stopped)"
        )
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    if code != 0:
        last = shown(lines[-1]) if lines else f"exit status {code}"
        raise BadInputError(f"--callable {target}: {last}")
    try:
        data = json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise BadInputError(f"--callable {target}: the timing process printed no result") from None
    data["value"] = statistics.median(data["per_call_ms"])
    data["loaded_files"] = loaded
    data["loaded_packages"] = packages
    data["python_paths"] = paths
    return data


def user_result(name: str, processes: list[dict], *, unit: str, higher_is_better: bool) -> dict:
    """The result entry of the user's step from its per-process records."""
    vals = [p["value"] for p in processes]
    within = []
    for p in processes:
        xs = p.get("per_call_ms") or (p["values"][1:] if p.get("warmup_dropped") else p["values"])
        if len(xs) >= 2:
            within.append(summarize(xs).iqr_over_median)
    result = make_result(
        name, ResultKind.USER, unit, vals, higher_is_better=higher_is_better, within=within or None
    )
    files = sorted({f for p in processes for f in p.get("loaded_files") or []})
    if any("loaded_files" in p for p in processes):
        # every Python process of the step (spawned workers too) recorded the source files it loaded:
        # forensics diff ranks a commit that touches none of them lower (forensics.step.loaded_files)
        result["loaded_files"] = files
    if any("loaded_packages" in p for p in processes):
        # the installed packages it imported: a GPU-stack package the step never imported weighs less
        result["loaded_packages"] = sorted(
            {n for p in processes for n in p.get("loaded_packages") or []}
        )
    paths = list(dict.fromkeys(f for p in processes for f in p.get("python_paths") or []))
    if paths:
        # the sys.path folders of the step's Python processes: where the distributions it runs with live
        result["python_paths"] = paths
    return result


class StepBoundSpent(StepTimedOut):
    """The time given to all the processes of the user's step together ran out (:func:`run_user`'s
    ``deadline``); the process running then was stopped with its process group (exit 2).

    Attributes:
        finished: the per-process records of the processes that had finished.
    """

    def __init__(self, message: str, finished: list[dict]):
        super().__init__(message)
        self.finished = finished


def run_user(
    kind: str,
    target: str,
    *,
    processes: int,
    budget_s: float,
    timeout_s: float,
    metric: str | None = None,
    metric_regex: str | None = None,
    blocks: int = 30,
    block_ms: float = 5.0,
    warmup_s: float = 0.5,
    on_process: Callable[[int, dict], None] | None = None,
    deadline: float | None = None,
) -> list[dict]:
    """Run ``processes`` fresh processes of the user's step (``kind`` "cmd" or "callable") within the budget.

    ``budget_s`` is soft (no process starts past it once :data:`MIN_PROCESSES` ran); ``timeout_s`` bounds one
    process; ``deadline`` (``time.monotonic()``), when given, bounds them all: each process may run only until
    it, and the one running then is stopped with its process group.

    Raises:
        BadInputError: a process failed (:func:`run_cmd_process`, :func:`run_callable_process`).
        StepTimedOut: a process ran past ``timeout_s``.
        StepBoundSpent: ``deadline`` passed (before a process could start, or while one ran).
    """
    import time

    t0 = time.perf_counter()
    out: list[dict] = []
    for i in range(processes):
        spent = time.perf_counter() - t0
        if i >= MIN_PROCESSES and spent + spent / i > budget_s:
            break
        each = timeout_s
        if deadline is not None:
            each = min(timeout_s, deadline - time.monotonic())
            if each <= 0:
                raise StepBoundSpent(
                    f"its time ran out before process {i + 1} of {processes} could start "
                    f"({len(out)} finished)",
                    out,
                )
        try:
            if kind == "cmd":
                rec = run_cmd_process(
                    target, metric=metric, metric_regex=metric_regex, timeout_s=each
                )
            else:
                rec = run_callable_process(
                    target, blocks=blocks, block_ms=block_ms, warmup_s=warmup_s, timeout_s=each
                )
        except StepTimedOut:
            if each < timeout_s:  # stopped by the bound on all the processes, not by its own
                raise StepBoundSpent(
                    f"its time ran out in process {i + 1} of {processes} ({len(out)} finished; the "
                    "process running was stopped with its process group)",
                    out,
                ) from None
            raise
        out.append(rec)
        if on_process:
            on_process(i, rec)
    return out


def measure_user(
    cmd: str | None,
    target: str | None,
    *,
    metric: str | None = None,
    metric_regex: str | None = None,
    unit: str | None = None,
    higher_is_better: bool = False,
    processes: int,
    budget_s: float,
    timeout_s: float,
    blocks: int | None = None,
    block_ms: float | None = None,
    label: str = "",
    on_process: Callable[[int, dict], None] | None = None,
) -> dict:
    """Run the user's step (``cmd`` or the callable ``target``) as fresh processes under GPU telemetry.

    Returns:
        a ``forensics.bench/1`` document with one result of kind ``user``:
        ``user.<metric>`` for a command (unit ``unit``; left out, the time unit the metric's name
        ends in, :func:`forensics.words.metric_time_unit`: ``step_s`` -> ``s``, else ``ms``; ``per s``
        with ``higher_is_better``), ``user.<target>`` in ms for a callable.

    Raises:
        BadInputError: see :func:`run_user`.
    """
    from forensics.bench import document
    from forensics.bench.harness import visible_gpus
    from forensics.bench.session import host_cpu, telemetry

    kind = "cmd" if cmd else "callable"
    with telemetry(visible_gpus() > 0) as tel, host_cpu() as cpu:
        recs = run_user(
            kind,
            cmd or target,
            processes=processes,
            budget_s=budget_s,
            timeout_s=timeout_s,
            metric=metric,
            metric_regex=metric_regex,
            blocks=blocks or 30,
            block_ms=block_ms or 5.0,
            on_process=on_process,
        )
    if kind == "cmd":
        name, the_unit = (
            f"user.{recs[0]['metric']}",
            unit or ("per s" if higher_is_better else metric_time_unit(recs[0]["metric"])),
        )
    else:
        name, the_unit, higher_is_better = f"user.{target}", "ms", False
    result = user_result(name, recs, unit=the_unit, higher_is_better=higher_is_better)
    config = {
        "kind": "user",
        "step": kind,
        "command" if kind == "cmd" else "callable": cmd or target,
        "metric": metric,
        "metric_regex": metric_regex,
        "processes_asked": processes,
        "budget_s": budget_s,
    }
    return document.build(config, [result], telemetry=tel, label=label, host_cpu=cpu)


def run_user_ab(
    a_cmd: str,
    b_cmd: str,
    *,
    a_env: dict[str, str | None] | None = None,
    b_env: dict[str, str | None] | None = None,
    processes: int,
    budget_s: float,
    timeout_s: float,
    metric: str | None = None,
    metric_regex: str | None = None,
    cwd: str | None = None,
    on_process: Callable[[str, int, dict], None] | None = None,
) -> tuple[list[dict], list[dict]]:
    """Interleaved A/B of the user's step: A B B A A B ... (:func:`forensics.bench.harness.balanced_order`),
    one fresh process each, in one session.

    Side A runs ``a_cmd`` with ``a_env`` applied to this process's environment,
    side B ``b_cmd`` with ``b_env`` (a ``None`` value unsets a variable). Both
    read the same metric (B reads the one A printed first). Processes run until
    ``processes`` a side or until the next pair would pass ``budget_s`` seconds
    per side, but at least ``min(5, processes)`` a side (Mann-Whitney U needs 5
    to reach p <= 0.01).

    Returns:
        (A records, B records), each as :func:`run_cmd_process` returns them, plus ``wall_s``.

    Raises:
        BadInputError: a process of either side failed or printed no measurement
            (the message says which side).
    """
    import time

    t0 = time.perf_counter()
    minimum = min(MIN_PROCESSES, processes)
    out: dict[str, list[dict]] = {"A": [], "B": []}
    chosen = metric
    for i in range(processes):
        spent = time.perf_counter() - t0
        if i >= minimum and i > 0 and spent + spent / i > 2 * budget_s:
            break
        for side, cmd, env in balanced_order([("A", a_cmd, a_env), ("B", b_cmd, b_env)], i):
            p0 = time.perf_counter()
            try:
                run = run_command(
                    cmd,
                    cwd=cwd,
                    env=child_env(env),
                    timeout_s=timeout_s,
                    metric=chosen,
                    metric_regex=metric_regex,
                )
            except BadInputError as exc:
                raise BadInputError(f"side {side} of the A/B: {exc}") from None
            chosen = chosen or run.metric
            values = list(run.values)
            dropped = len(values) >= 3
            kept = values[1:] if dropped else values
            if any(v <= 0 for v in kept):
                raise BadInputError(
                    f"side {side}: the step printed a non-positive value for {run.metric!r}: {cmd}"
                )
            if any(v >= VALUE_MAX for v in kept):
                raise BadInputError(
                    f"side {side}: the step printed a value of {max(kept):g} for {run.metric!r}, no "
                    f"measurement (at most {VALUE_MAX:g}): {cmd}"
                )
            rec = {
                "value": statistics.median(kept),
                "values": values,
                "metric": run.metric,
                "warmup_dropped": dropped,
                "wall_s": round(time.perf_counter() - p0, 3),
            }
            out[side].append(rec)
            if on_process:
                on_process(side, i, rec)
    return out["A"], out["B"]


def callable_command(target: str) -> str:
    """The shell command timing ``module:function`` in a fresh process, printing JSON metric lines (``call_ms``)."""
    import shlex

    if not CALLABLE_RE.match(target):
        raise BadInputError(f"--callable {target!r}: expected package.module:function")
    return " ".join(
        shlex.quote(a) for a in (sys.executable, "-m", "forensics.step.callable", target)
    )


def measure_user_ab(
    cmd: str | None,
    target: str | None,
    *,
    b_cmd: str | None = None,
    env: dict[str, str | None] | None = None,
    b_env: dict[str, str | None] | None = None,
    metric: str | None = None,
    metric_regex: str | None = None,
    unit: str | None = None,
    higher_is_better: bool = False,
    processes: int,
    budget_s: float,
    timeout_s: float,
    label: str = "",
    on_process: Callable[[str, int, dict], None] | None = None,
) -> list[dict]:
    """Sides A and B of the user's step, interleaved (:func:`run_user_ab`) under GPU telemetry: two bench documents.

    Side A is ``cmd`` (or the callable ``target``, run as :func:`callable_command`) with ``env``;
    side B is ``b_cmd`` (default: the same) with ``env`` and ``b_env`` (a ``None`` value unsets).
    Each document's config records its command, the variables set and those unset.

    Raises:
        BadInputError: see :func:`run_user_ab`.
    """
    from forensics.bench import document
    from forensics.bench.harness import visible_gpus
    from forensics.bench.session import host_cpu, telemetry

    a_cmd = cmd or callable_command(str(target))
    a_env, full_b = dict(env or {}), {**(env or {}), **(b_env or {})}
    with telemetry(visible_gpus() > 0) as tel, host_cpu() as cpu:
        ra, rb = run_user_ab(
            a_cmd,
            b_cmd or a_cmd,
            a_env=a_env,
            b_env=full_b,
            processes=processes,
            budget_s=budget_s,
            timeout_s=timeout_s,
            metric=metric or ("call_ms" if target else None),
            metric_regex=metric_regex,
            on_process=on_process,
        )
    if "gpus" in tel:
        tel["scope"] = "whole session (A and B interleaved)"
    the_unit = unit or ("per s" if higher_is_better else metric_time_unit(ra[0]["metric"]))
    docs = []
    for side, recs, side_cmd, side_env in (
        ("A", ra, a_cmd, a_env),
        ("B", rb, b_cmd or a_cmd, full_b),
    ):
        result = user_result(
            f"user.{recs[0]['metric']}", recs, unit=the_unit, higher_is_better=higher_is_better
        )
        config = {
            "kind": "user",
            "step": "cmd" if cmd else "callable",
            "command": side_cmd,
            "callable": target,
            "env": {k: v for k, v in side_env.items() if v is not None},
            "unset": sorted(k for k, v in side_env.items() if v is None),
            "metric": metric,
            "metric_regex": metric_regex,
            "processes_asked": processes,
            "budget_s": budget_s,
        }
        docs.append(
            document.build(config, [result], telemetry=tel, label=label or side, host_cpu=cpu)
        )
    return docs
