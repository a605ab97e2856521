"""The budgeted runner of ``forensics investigate``: snapshot now, diff, rank, plan, experiment, conclude.

:func:`investigate` is the core of the command. It

1. loads the baseline snapshot (one-line errors for a missing, truncated or
   foreign file: exit 2);
2. takes a snapshot now (:func:`forensics.collect.take_snapshot`) with the
   canary and the user's step embedded (:func:`forensics.investigate.measure.measure_now`);
3. diffs and ranks (:func:`forensics.diff.ledger.analyse`);
4. decides whether the step got slower: the user's step when the baseline
   measured it, else the canary's verify step (``forensics.stats`` comparison
   of the two snapshots). No regression: no experiment runs;
5. plans (:func:`forensics.investigate.plan.build_plan`) and runs the
   experiments most likely first while the budget lasts (the budget covers the
   whole command, snapshot included). An experiment whose estimate exceeds the
   time left is listed as not run, with the reason. After a cause is confirmed
   the rest are not needed (``keep_going`` runs them anyway). Then each partial cause is tested again on
   top of the confirmed ones and kept in the accounting when it still moves the step
   (:func:`_retest_partials`);
6. writes the verdict: "Confirmed: ..." only from a ``confirmed`` experiment
   (:mod:`forensics.investigate.decide`), else "Most likely, not confirmed: ...".

Ctrl-C or SIGTERM (the exception types in ``interrupts``) while the snapshot
is taken now, while the remembered baseline is measured, or during an
experiment stops it cleanly: the running step's process group is stopped by
:mod:`forensics.procgroup`, worktrees are removed by
:class:`forensics.bisect.worktree.WorktreePool`, and the result so far is
returned with ``interrupted`` set, so the report still says what was learned
(in the snapshot phase: the values of today's processes that finished, nothing
compared).

Core only: returns an :class:`Investigation`; progress goes to ``on_event``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from forensics.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION, BadInputError
from forensics.investigate.experiments import KINDS, Context
from forensics.investigate.measure import (
    CANARY_RESULT,
    MAX_PROCESSES,
    Subject,
    callable_command,
    measure_now,
    results_of,
)
from forensics.investigate.memory import main_repo
from forensics.investigate.model import Experiment, Kind, Outcome, Regression
from forensics.investigate.plan import build_plan
from forensics.options import probe_options
from forensics.stats import Verdict
from forensics.step.spec import StepOptions
from forensics.words import plural

EventFn = Callable[..., None]
SNAPSHOT_PROCESSES = 5


@dataclass
class Settings:
    """The command's options (see ``forensics investigate --help``)."""

    baseline: Path | None
    cmd: str | None = None
    target: str | None = None
    metric: str | None = None
    metric_regex: str | None = None
    higher_is_better: bool = False
    repo: Path | None = None
    config: Path | None = None
    budget_s: float = 900.0
    processes: int = 5
    snapshot_processes: int = SNAPSHOT_PROCESSES
    threshold: float = 0.05
    min_share: float = 0.5
    wheelhouse: Path | None = None
    canary: bool = True
    canary_options: dict[str, Any] = field(default_factory=dict)
    plan_only: bool = False
    keep_going: bool = False
    timeout_s: float = 300.0
    redact: bool = True
    baseline_doc: dict[str, Any] | None = (
        None  # the loaded baseline, when the caller has read it already
    )
    since: str | None = None  # --since REV: the code baseline instead of the reflog's
    expect: str | None = None  # --expect 19ms: the step's remembered value, the baseline's value
    max_processes: int = MAX_PROCESSES

    @classmethod
    def from_options(
        cls, step: StepOptions, *, tp: int | None = None, **options: Any
    ) -> "Settings":
        """Settings from the command's options: the user's step (``--cmd``/``--callable``, metric,
        processes per side, timeout) from ``step``, the canary's tensor-parallel ranks from ``tp``
        (None: all visible GPUs), every other field by its name in ``options``.

        Raises:
            TypeError: an option that is no field of :class:`Settings`.
        """
        return cls(
            cmd=step.cmd,
            target=step.target,
            metric=step.metric,
            metric_regex=step.metric_regex,
            higher_is_better=step.higher_is_better,
            processes=step.processes,
            timeout_s=step.timeout_s,
            canary_options={"tp": tp} if tp else {},
            **options,
        )

    @property
    def step(self) -> StepOptions:
        """The user's step as :class:`forensics.step.spec.StepOptions`."""
        return StepOptions(
            cmd=self.cmd,
            target=self.target,
            metric=self.metric,
            metric_regex=self.metric_regex,
            higher_is_better=self.higher_is_better,
            processes=self.processes,
            timeout_s=self.timeout_s,
        )


@dataclass
class Investigation:
    """What ``forensics investigate`` found; rendered by :mod:`forensics.render.investigate`.

    Attributes:
        analysis: the ledger (``None`` without a baseline).
        now: the snapshot taken now.
        subject: what the experiments measured.
        regression: did the step get slower, and ``regression_sentence`` the measurement saying so.
        experiments: every planned experiment, run or not, in plan order.
        verdict: the sentence the report leads with; ``exit_code`` 0/1/3.
        hardware: without a baseline, the machine judged against its hardware (list of checks).
        timings: wall seconds of the snapshot, the experiments and the whole run.
        baseline_source: which baseline was used, one line ("baseline: HEAD@{1} 112037e, before the pull of
            ...", measured now in a private worktree); the report's first line.
        residual: the last :class:`forensics.investigate.decide.Residual` (today with every confirmed
            intervention applied against the baseline), or None.
        stopped: why the experiments stopped ("the residual is within noise", "the budget is spent", ...).
    """

    settings: Settings
    baseline: dict[str, Any] | None
    now: dict[str, Any]
    analysis: Any
    subject: Subject | None
    regression: Regression
    regression_sentence: str
    experiments: list[Experiment] = field(default_factory=list)
    verdict: str = ""
    exit_code: int = EXIT_INCONCLUSIVE
    notes: list[str] = field(default_factory=list)
    hardware: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    interrupted: str = ""
    names: tuple[str, str] = ("BASELINE", "NOW")
    baseline_source: str = ""
    residual: Any = None
    stopped: str = ""

    @property
    def exit_status(self) -> int:
        """The process exit code: 128 + the signal's number after a signal, 130 after Ctrl-C, else
        :attr:`exit_code`."""
        if not self.interrupted:
            return self.exit_code
        if self.interrupted.startswith("signal "):
            return 128 + int(self.interrupted.split()[1])
        return 130

    @property
    def confirmed(self) -> list[Experiment]:
        return [e for e in self.experiments if e.outcome is Outcome.CONFIRMED]


def _load_baseline(path: Path, doc: dict[str, Any] | None = None) -> dict[str, Any]:
    from forensics.diff.files import load_side

    return load_side(
        doc if doc is not None else path
    ).doc  # a snapshot or a pasted text, swept again


def _step_subject(s: Settings) -> Subject | None:
    if s.cmd:
        return Subject(
            "cmd", s.cmd, s.metric, s.metric_regex, s.higher_is_better, timeout_s=s.timeout_s
        )
    if s.target:
        from forensics.bench.user import CALLABLE_RE

        if not CALLABLE_RE.match(s.target):
            raise BadInputError(f"--callable {s.target!r}: expected package.module:function")
        return Subject(
            "cmd", callable_command(s.target), "call_ms", None, False, timeout_s=s.timeout_s
        )
    return None


def check_settings(s: Settings) -> None:
    """Refuse bad options before any measurement (one line each, exit 2).

    Raises:
        BadInputError: both --cmd and --callable, an empty --cmd, a missing wheelhouse,
            too few processes, a non-positive budget.
    """
    s.step.check()
    if s.wheelhouse is not None and not s.wheelhouse.is_dir():
        what = "is a file, not a folder" if s.wheelhouse.exists() else "no such folder"
        raise BadInputError(
            f"{s.wheelhouse}: {what}; give a folder of wheels (pip download -d DIR)",
            option="wheelhouse",
        )
    if s.expect is not None:
        from forensics.investigate.memory import parse_expect

        if not (s.cmd or s.target):
            raise BadInputError(
                "is the old value of your step; give the step with {cmd} or {target}",
                option="expect",
                names=("cmd", "target"),
            )
        parse_expect(s.expect, higher_is_better=s.higher_is_better)
    if s.since is not None and not (s.cmd or s.target):
        raise BadInputError(
            "names the code to measure as the baseline; give the step with {cmd} or {target}",
            option="since",
            names=("cmd", "target"),
        )
    if s.processes < 5:
        raise BadInputError(
            f"{s.processes}: at least 5 a side (with fewer Mann-Whitney U cannot reach "
            "p <= 0.01, so nothing could be confirmed)",
            option="processes",
        )
    if not 0 < s.budget_s < math.inf:
        raise BadInputError("must be a positive duration, e.g. 120, 15m or 1h", option="budget")
    if not 0 < s.min_share <= 1:
        raise BadInputError("{min_share} must be between 0% and 100%", names=("min_share",))


def investigate(
    s: Settings,
    on_event: EventFn | None = None,
    interrupts: tuple[type[BaseException], ...] = (KeyboardInterrupt,),
) -> Investigation:
    """Run the whole method (module docstring); returns what was learned, also when interrupted.

    Raises:
        BadInputError: bad options, an unreadable baseline, a step that fails in the snapshot taken now.
    """
    emit = on_event or (lambda *a, **k: None)
    t0 = time.monotonic()
    check_settings(s)
    baseline = _load_baseline(s.baseline, s.baseline_doc) if s.baseline is not None else None
    step = _step_subject(s)
    notes: list[str] = []
    canary = s.canary
    no_canary_reason = ""
    if canary and importlib.util.find_spec("torch") is None:
        canary, no_canary_reason = (
            False,
            "PyTorch is not installed in this Python, so the canary cannot run",
        )
    elif canary and baseline is not None and CANARY_RESULT not in results_of(baseline):
        canary, no_canary_reason = False, "the baseline has no canary measurement to compare with"
    elif canary and baseline is None and step is not None:
        canary, no_canary_reason = (
            False,
            "no baseline snapshot holds an earlier canary measurement to compare it with; your "
            "step is what is compared",
        )
    elif not canary:
        no_canary_reason = "--no-canary"
    if no_canary_reason and s.canary:
        notes.append(f"the canary was not run: {no_canary_reason}")
    measure_canary = (
        canary and not s.plan_only
    )  # --plan measures the step only: the canary is the slow part
    if canary and s.plan_only:
        notes.append(
            "--plan: the canary was not run now; its experiments are estimated from the baseline's "
            "canary processes"
        )
    refuse_early(s, baseline, step, measure_canary)
    if (
        s.since is not None
    ):  # a revision that names nothing (or '') is bad input before the snapshot
        from forensics.investigate.memory import resolve_since

        resolve_since(s.since, s.repo if s.repo is not None else Path.cwd())
    canary_s = [0.0 if measure_canary else _baseline_canary_s(baseline)]
    stop: list[BaseException] = []  # an interrupt while the snapshot was taken now
    doing = [PROBES_READ]  # what it stopped
    measured: list[float] = []  # today's step: each process's value, as it comes
    metric = [""]  # and the metric it printed (its unit)

    def on_now(side: str, i: int, rec: dict) -> None:
        if side == "step" and isinstance(rec.get("value"), (int, float)):
            measured.append(float(rec["value"]))
            doing[0] = "today's step was measured"  # the canary is done
            metric[0] = str(rec.get("metric") or "")
        emit("process", side=side, index=i, record=rec)

    def bench():
        emit(
            "phase",
            text="measuring now: "
            + " and ".join(
                (["the canary"] if measure_canary else []) + (["your step"] if step else [])
            )
            + " in fresh processes",
        )
        doing[0] = (
            ("the canary and today's step were measured" if step else "the canary was measured")
            if measure_canary
            else "today's step was measured"
        )
        full_timeout = step.timeout_s if step is not None else 0.0
        if (
            step is not None
        ):  # a step that hangs stops when the --budget is spent, not after --timeout
            left = t0 + s.budget_s - time.monotonic()
            step.timeout_s = max(1.0, round(min(full_timeout, left), 1))
        try:
            doc, took = measure_now(
                step,
                canary=measure_canary,
                canary_options=s.canary_options,
                processes=s.snapshot_processes,
                budget_s=45.0,
                notes=notes,
                on_process=on_now,
            )
        except interrupts as exc:
            stop.append(exc)  # its processes are stopped; the snapshot keeps what the probes read
            return None
        except BadInputError as exc:
            if step is not None and step.timeout_s < full_timeout and "timed out" in str(exc):
                raise BadInputError(
                    f"{exc}; the --budget {s.budget_s:g}s was spent measuring today's step (give a longer "
                    "--budget)"
                ) from exc
            raise
        finally:
            if step is not None:
                step.timeout_s = full_timeout  # the experiments bound each process themselves
        if measure_canary:
            canary_s[0] = took
        return doc

    from forensics.collect import take_snapshot

    emit("phase", text="taking a snapshot now")
    options = probe_options(repo=str(s.repo) if s.repo else None)
    measure = bench if (measure_canary or step) else None
    try:
        now = take_snapshot(label="investigate", options=options, redact=s.redact, bench=measure)
    except interrupts as exc:  # while the probes ran: a snapshot with none of them
        from forensics import snapshot as snap
        from forensics.redact import Redactor

        stop.append(exc)
        now = snap.build({}, label="investigate", options=options, redactor=Redactor(s.redact))
    t_snap = time.monotonic() - t0
    if stop:
        return _interrupted_now(
            s, now, step, notes, stop[0], doing[0], measured, t_snap, metric=metric[0]
        )
    if step is not None and now.get("bench"):
        from forensics.investigate.measure import spread_note

        why = spread_note(now["bench"], step.name)
        if why:
            notes.append(why)
    source = ""
    seeds: dict[tuple[str, str], list[float]] = {}
    cwd_sha = ""
    if s.since is not None and step is not None and baseline is not None and not s.expect:
        if step.name in results_of(baseline):  # the flag is not silently dropped
            notes.append(
                f"--since {s.since} was not used: the baseline snapshot measured your step "
                f"({step.name}), and that measurement is the baseline; --since names the code to measure "
                "without one"
            )
    if step is not None and (baseline is None or step.name not in results_of(baseline) or s.expect):
        emit("phase", text="finding the baseline in this machine's memory")
        try:
            remembered = _remember(
                s, now, baseline, step, notes, deadline=t0 + s.budget_s, emit=emit
            )
        except (
            interrupts
        ) as exc:  # the worktree is already removed; the report says what was measured now
            inv = Investigation(s, None, now, None, step, Regression.UNKNOWN, "", notes=notes)
            inv.interrupted = _signal_name(exc)
            inv.verdict = (
                "Interrupted while the commit this machine remembers was being measured in a private worktree "
                f"for the code suspects (the baseline is --expect {s.expect}, the value you remember): nothing "
                "was compared (the worktree was removed; your checkout is untouched)."
                if s.expect
                else "Interrupted while the baseline this machine remembers was being measured in a private "
                "worktree: nothing was compared (the worktree was removed; your checkout is untouched)."
            )
            inv.baseline_source = "baseline: " + _interrupted_point(s, now, baseline)
            inv.timings = {"snapshot_s": time.monotonic() - t0, "experiments_s": 0.0}
            inv.timings["total_s"] = time.monotonic() - t0
            return inv
        if remembered is not None:
            baseline, source, seeds, cwd_sha = remembered
    rec = main_repo(now)
    if (
        step is not None
        and rec is not None
        and rec.get("state", "ok") == "ok"
        and not rec.get("dirty")
        and not rec.get("operation")
        and (rec.get("head") or {}).get("sha")
    ):
        cwd_sha = (
            cwd_sha or rec["head"]["sha"]
        )  # the checkout runs HEAD's code: today's processes serve for HEAD
        today_now = (results_of(now).get(step.name) or {}).get("process_medians")
        if today_now and cwd_sha == rec["head"]["sha"]:
            seeds.setdefault((cwd_sha, ""), [float(x) for x in today_now])
    if baseline is None:
        from forensics.investigate.hardware import gpus_seen, judge_alone

        if (
            step is not None
            and not _has_canary(now)
            and s.canary
            and not s.plan_only
            and gpus_seen(
                now
            )  # without a GPU the hardware cannot be judged: the canary is not run for nothing
            and importlib.util.find_spec("torch") is not None
        ):
            try:  # nothing remembered either: judge the hardware, as without --cmd
                _add_canary(now, s, notes, emit)
                notes[:] = [n for n in notes if not n.startswith("the canary was not run: ")]
            except interrupts as exc:  # the canary's ranks are stopped; today's step was measured
                today_now = (results_of(now).get(step.name) or {}).get("process_medians") or []
                return _interrupted_now(
                    s,
                    now,
                    step,
                    notes,
                    exc,
                    "the canary was measured for the hardware checks",
                    [float(x) for x in today_now],
                    t_snap,
                    why="no baseline is remembered to compare your step with",
                    source="baseline: none remembered (this machine against its hardware, not judged: "
                    "interrupted)",
                    total_s=time.monotonic() - t0,
                )
        inv = Investigation(s, None, now, None, step, Regression.UNKNOWN, "", notes=notes)
        planned = [n for n in notes if n.startswith(PLAN_MEMORY)]
        if s.plan_only and planned:
            notes.remove(planned[0])
            inv.verdict, inv.exit_code = (
                "Plan: "
                + planned[0].removeprefix("--plan: ").removesuffix("; nothing was run")
                + "; then today's step is compared with it and the experiments follow from what differs "
                "(give --expect with the value you remember to see them planned); nothing was run.",
                EXIT_OK,
            )
        elif s.plan_only and step is not None and not gpus_seen(now):
            inv.verdict, inv.exit_code = (
                "Plan: nothing to compare your step with (no baseline snapshot, none remembered) and no GPU "
                f"to judge the hardware by; give {_what_to_give(rec)}; nothing was run.",
                EXIT_OK,
            )
        elif s.plan_only:
            inv.verdict, inv.exit_code = (
                f"Plan: without --baseline, the canary runs in {s.snapshot_processes} fresh processes and this "
                "machine is judged against what its GPUs should give (PCIe and SM clock under load, NVLink, the "
                "canary's figures); nothing was run.",
                EXIT_OK,
            )
        else:
            inv.hardware, inv.verdict, inv.exit_code = judge_alone(now)
            failed = [m.group(1) for m in map(_BASELINE_FAILED.match, notes) if m]
            if step is not None and not gpus_seen(now) and s.since is not None:
                # --since was given: its measurement failed (a note says why), so it is no advice to give
                inv.verdict = (
                    f"Cannot judge: the baseline --since {s.since} could not be measured (the notes say why) "
                    "and there is no GPU to judge the hardware by (the gpu probe has no data); give a --since "
                    "REV whose step runs, --expect VALUE (the value you remember) or --baseline BEFORE.json."
                )
            elif step is not None and not gpus_seen(now) and failed:
                # the machine remembered a baseline, whose step failed there: not 'none remembered'
                inv.verdict = (
                    f"Cannot judge: the baseline {failed[0]} could not be measured (the notes say why) and "
                    "there is no GPU to judge the hardware by (the gpu probe has no data); give --since REV "
                    "whose step runs, --expect VALUE (the value you remember) or --baseline BEFORE.json."
                )
            elif step is not None and not gpus_seen(now):
                inv.verdict = (
                    "Cannot judge: nothing to compare your step with (no baseline snapshot, none remembered) "
                    "and no GPU to judge the hardware by (the gpu probe has no data); give "
                    f"{_what_to_give(rec)}."
                )
        inv.timings = {"snapshot_s": t_snap, "experiments_s": 0.0, "total_s": time.monotonic() - t0}
        return inv
    from forensics.diff.files import Side, analyse_files

    name = (
        str(s.baseline)
        if s.baseline is not None
        else (source.split(",")[0].split(";")[0].removeprefix("baseline: ") + " (remembered)")
    )
    try:  # reading the commits of a long pull can take a while
        analysis = analyse_files(
            Side(baseline, name), Side(now, "now"), repo=s.repo, config=s.config
        )
        if getattr(
            analysis, "machine_note", ""
        ):  # every share below is of a slowdown against that baseline
            notes.append(
                f"{analysis.machine_note} The slowdown, and every share of it, is measured against that "
                "baseline."
            )
        subject, regression, sentence = _regression(
            analysis, baseline, step, canary, canary_s[0], s, notes
        )
        if s.expect and step is not None:
            regression, sentence = _versus_expect(baseline, now, step, s)
    except interrupts as exc:
        today_now = (results_of(now).get(step.name) or {}).get("process_medians") if step else None
        return _interrupted_now(
            s,
            now,
            step,
            notes,
            exc,
            "the snapshot taken now was compared with the baseline",
            [float(x) for x in today_now or []],
            t_snap,
            source=source
            or f"baseline: {s.baseline}, not compared (interrupted while it was compared with now)",
            total_s=time.monotonic() - t0,
        )
    inv = Investigation(
        s,
        baseline,
        now,
        analysis,
        subject,
        regression,
        sentence,
        notes=notes,
        names=(name, "now"),
        baseline_source=source,
    )
    today = (
        list((results_of(now).get(subject.name) or {}).get("process_medians") or [])
        if subject
        else []
    )
    ctx = Context(
        baseline,
        now,
        analysis,
        subject,
        step is not None,
        processes=s.processes,
        threshold=s.threshold,
        min_share=s.min_share,
        repo=s.repo,
        wheelhouse=s.wheelhouse,
        canary=canary,
        canary_options=dict(s.canary_options),
        canary_process_s=canary_s[0] or 10.0,
        deadline=t0 + s.budget_s,
        max_processes=max(s.max_processes, s.processes),
        today=[float(x) for x in today],
        seeds=seeds,
        on_process=lambda side, i, rec: emit("process", side=side, index=i, record=rec),
    )
    ctx.cache["no_canary_reason"] = f"the canary cannot run: {no_canary_reason}"
    ctx.cache["cwd_sha"] = cwd_sha
    ctx.cache["dirty"] = bool(rec is not None and rec.get("dirty"))
    ctx.cache["memory"] = bool(source) and s.baseline is None
    ctx.cache["figure"] = bool(
        s.expect
    )  # the baseline's value is a figure: its environment unknown
    # the baseline's value was measured now (a commit in a worktree), with today's packages
    ctx.cache["measured_now"] = bool(source) and not s.expect
    if regression is Regression.YES or (s.plan_only and regression is Regression.UNKNOWN):
        try:  # --plan shows what would run, also when the slowdown is not yet measured
            inv.experiments = build_plan(ctx)
        except interrupts as exc:
            inv.interrupted = _signal_name(exc)
            inv.verdict, inv.exit_code = (
                f"Interrupted while the experiments were planned: {sentence}; nothing was changed (no "
                "experiment ran; your checkout is untouched).",
                EXIT_INCONCLUSIVE,
            )
            inv.timings = {
                "snapshot_s": t_snap,
                "experiments_s": 0.0,
                "total_s": time.monotonic() - t0,
            }
            return inv
        if not s.plan_only:
            _run_all(inv, ctx, emit, interrupts)
            inv.notes.extend(  # what the experiments had to do differently (a revert that did not apply)
                n for n in dict.fromkeys(ctx.cache.get("notes", [])) if n not in inv.notes
            )
    t_exp = sum(e.elapsed_s for e in inv.experiments)
    inv.timings = {
        "snapshot_s": t_snap,
        "experiments_s": t_exp,
        "total_s": time.monotonic() - t0,
        "budget_s": s.budget_s,
    }
    if "baseline_s" in ctx.cache:
        inv.timings["baseline_s"] = ctx.cache["baseline_s"]
    inv.verdict, inv.exit_code = _verdict(inv)
    return inv


def _has_canary(doc: dict[str, Any]) -> bool:
    return CANARY_RESULT in results_of(doc)


def _what_to_give(rec: dict[str, Any] | None) -> str:
    """The baselines a user can give when nothing is remembered: --since only where the step's repository
    (the git probe's ``rec``) has commits to name."""
    since = "--since REV (the code to measure), " if rec and rec.get("state") == "ok" else ""
    return f"{since}--expect VALUE (the value you remember) or --baseline BEFORE.json"


def _add_canary(now: dict[str, Any], s: Settings, notes: list[str], emit: EventFn) -> None:
    """Measure the canary now and add its results to the snapshot's bench document (hardware checks)."""
    emit("phase", text="no baseline remembered: measuring the canary for the hardware checks")
    try:
        doc, _ = measure_now(
            None,
            canary=True,
            canary_options=s.canary_options,
            processes=s.snapshot_processes,
            budget_s=45.0,
        )
    except BadInputError as exc:
        notes.append(f"the canary failed in this environment ({exc})")
        return
    if doc is None:
        return
    bench = now.get("bench") if isinstance(now.get("bench"), dict) else None
    if bench is None:
        now["bench"] = doc
    else:
        bench["results"] = list(doc.get("results") or []) + list(bench.get("results") or [])
        bench.setdefault("telemetry", doc.get("telemetry"))


def _signal_name(exc: BaseException) -> str:
    """``KeyboardInterrupt``, or ``signal 15`` for SIGTERM's ``Terminated`` (:attr:`Investigation.interrupted`)."""
    signum = getattr(exc, "signum", None)
    return f"signal {signum}" if signum else type(exc).__name__


def _interrupted_now(
    s: Settings,
    now: dict[str, Any],
    step: Subject | None,
    notes: list[str],
    exc: BaseException,
    doing: str,
    measured: list[float],
    t_snap: float,
    *,
    metric: str = "",
    why: str = "",
    source: str = "",
    total_s: float | None = None,
) -> Investigation:
    """The investigation of a run interrupted before anything was compared: while the snapshot was taken now
    (``doing``: what it was doing, "today's step was measured"), or while the canary was measured for the
    hardware checks; nothing compared, nothing changed. The verdict gives the values of the step's processes
    that finished (``measured``, in the unit of ``metric``, the step's name or the metric it printed), after
    ``why`` (a clause said first in the same parentheses); ``source`` is the report's first line (default:
    the baseline was not looked for yet)."""
    from forensics.words import metric_time_unit

    unit = (
        "per s" if s.higher_is_better else metric_time_unit(metric or (step.name if step else ""))
    )
    got = ""
    if measured:
        shown = ", ".join(f"{v:.4g}" for v in measured)
        got = f"{plural(len(measured), 'process', 'processes')} measured: {shown} {unit}"
        got = f"{why}; your step: {got}" if why else got
    elif step is not None and doing != PROBES_READ:
        got = "no process of your step finished"
    got = f" ({got})" if got else (f" ({why})" if why else "")
    inv = Investigation(s, None, now, None, step, Regression.UNKNOWN, "", notes=notes)
    inv.interrupted = _signal_name(exc)
    inv.verdict = (
        f"Interrupted while {doing}{got}: nothing was compared and nothing was changed (no experiment "
        "ran; your checkout is untouched)."
    )
    if source:
        inv.baseline_source = source
    elif s.baseline is not None:
        inv.baseline_source = (
            f"baseline: {s.baseline}, not compared (interrupted while the snapshot was taken now)"
        )
    elif s.expect:
        inv.baseline_source = (
            f"baseline: {_expected(s)}, not compared (interrupted while the snapshot was taken now)"
        )
    elif step is not None:
        inv.baseline_source = (
            "baseline: not looked for (interrupted while the snapshot was taken now, before the baseline this "
            "machine remembers was looked for)"
        )
    else:
        inv.baseline_source = "baseline: this machine's hardware, not judged (interrupted while the snapshot was taken now)"
    inv.timings = {"snapshot_s": t_snap, "experiments_s": 0.0, "total_s": total_s or t_snap}
    return inv


PROBES_READ = "the snapshot taken now read this machine"
"""What an interrupt before any measurement stopped (:func:`_interrupted_now`)."""


def _expected(s: Settings) -> str:
    """``--expect VALUE (the value you remember)``: how the report names the baseline a user's remembered
    figure gives (``s.expect``, as typed), in its first line and verdict, interrupted or not."""
    return f"--expect {s.expect} (the value you remember)"


def _interrupted_point(s: Settings, now: dict[str, Any], baseline: dict[str, Any] | None) -> str:
    """The report's first line after an interrupt while the commit the machine remembers was measured in a
    private worktree: that commit as the baseline, or, with ``--expect``, the user's figure as the baseline
    (the commit was measured for the code suspects only)."""
    from forensics.investigate import memory

    try:
        point, _ = memory.code_point(now, since=s.since, repo=s.repo, baseline=baseline)
    except Exception:  # noqa: BLE001 - the interrupt is the news; the point only names it
        point = None
    what = point.sentence() if point is not None else "the commit the machine remembers"
    if s.expect:
        return (
            f"{_expected(s)}, not compared (interrupted while {what} was measured in a private worktree "
            "for the code suspects)"
        )
    return f"{what}, interrupted while measured in a private worktree (nothing was compared)"


_BASELINE_FAILED = re.compile(r"^the baseline (.+?) could not be measured: ")
"""The note of a remembered baseline whose step failed (:func:`_remember`): the verdict names it."""

PLAN_MEMORY = "--plan: the baseline would be "
"""How the note of a --plan run that found a code point to measure begins (its verdict repeats it)."""


def _remember(
    s: Settings,
    now: dict[str, Any],
    baseline: dict[str, Any] | None,
    step: Subject,
    notes: list[str],
    *,
    deadline: float,
    emit: EventFn,
) -> tuple[dict[str, Any], str, dict, str] | None:
    """The baseline from the machine's memory (:mod:`forensics.investigate.memory`): a document with the step's
    baseline value, the sentence naming it, the samples measured (seeds for the experiments) and HEAD's sha
    when the checkout runs HEAD's code ("" otherwise). None (with a note) when nothing is remembered."""
    from forensics.bench.document import make_result
    from forensics.investigate import memory
    from forensics.investigate.experiments import measure_revision

    today = list((results_of(now).get(step.name) or {}).get("process_medians") or [])
    if not today:
        notes.append("the step was not measured now, so no baseline could be measured against it")
        return None
    point, why = memory.code_point(now, since=s.since, repo=s.repo, baseline=baseline)
    seeds: dict[tuple[str, str], list[float]] = {}
    values: list[float] = []
    parts: list[str] = []
    hib = step.higher_is_better
    if s.expect:
        value, hib = memory.parse_expect(
            s.expect, higher_is_better=step.higher_is_better, metric=step.name
        )
        if hib != step.higher_is_better:
            raise BadInputError(
                f"--expect {s.expect} is a throughput; the step's metric {step.name} is a time (give "
                "--higher-is-better for a throughput metric, or --expect in ms)"
            )
        memory.check_expect_scale(s.expect, value, today, step.name, hib)
        values = [value]
        parts.append(_expected(s))
    if point is not None and point.note:
        notes.append(point.note)
    if point is not None and s.plan_only and not values:
        notes.append(
            f"{PLAN_MEMORY}{point.sentence()}, measured in a private worktree "
            f"({s.processes} processes or more, about {s.processes * step.process_s:.0f} s); nothing was run"
        )
        return None
    if point is not None and step.cmd and point.repo.rstrip("/") + "/" in step.cmd:
        notes.append(
            f"your step's command names the checkout itself ({point.repo}): run in the baseline's worktree "
            "it still runs today's files there, so the baseline would measure today's code; give the "
            "command with paths relative to the repository (it runs in the repository's folder)"
        )
    if point is not None and not s.plan_only:
        left = deadline - time.monotonic()
        bounded = dataclasses.replace(step, timeout_s=max(1.0, round(min(step.timeout_s, left), 1)))
        # a baseline snapshot that did not measure the step recorded its environment: its HEAD is measured with
        # the variables that differ now set as it recorded them, else a variable changed since would be on both
        # sides of the slowdown measured, and restoring it 'recovered 114%' of a slowdown a commit caused
        restore = _recorded_env(baseline, now) if baseline is not None and not values else {}
        ctx = Context(
            {},
            now,
            None,
            bounded,
            True,
            processes=s.processes,
            threshold=s.threshold,
            deadline=deadline,
            max_processes=max(s.max_processes, s.processes),
            on_process=lambda side, i, rec: emit("process", side=side, index=i, record=rec),
        )
        ctx.overlay.update(restore)
        if restore:
            notes.append(
                f"{point.sentence()} was measured with the environment the baseline snapshot recorded: "
                + ", ".join(f"{k} unset" if v is None else f"{k}={v}" for k, v in restore.items())
            )
        emit("phase", text=f"measuring the baseline {point.sentence()} in a private worktree")
        t = time.monotonic()
        try:
            measured = measure_revision(
                ctx,
                point.repo,
                point.old,
                against=today,
                higher_is_better=hib,
                today_sha=point.new if point.clean and not values and not restore else "",
            )
        except BadInputError as exc:
            spent = bounded.timeout_s < step.timeout_s and time.monotonic() >= deadline - 0.5
            notes.append(
                f"the baseline {point.sentence()} could not be measured: {exc}"
                + ("; the --budget was spent (give a longer --budget)" if spent else "")
            )
            measured = []
        if measured:
            seeds[(point.old, Context.env_key(restore))] = measured
            if point.clean and not restore:
                grown = ctx.seed(point.new)
                if len(grown) > len(today):  # undecided at first: today's side grew too
                    _grow_today(now, step.name, grown[len(today) :], point.new)
                    notes.append(
                        f"the first {len(today)} processes a side did not decide whether the step got slower: "
                        f"both sides grew to {len(measured)} and {len(grown)} processes, interleaved (today's "
                        f"extra ones ran HEAD {point.new[:10]} in a private worktree: the checkout is clean)"
                    )
                    today = grown
                seeds[(point.new, "")] = [float(x) for x in today]
            if not values:
                values = measured
                parts.append(
                    f"{point.sentence()}, measured now in a private worktree ({len(measured)} processes, "
                    f"{time.monotonic() - t:.0f} s)"
                )
            else:
                parts.append(f"commits since {point.sentence()} are the code suspects")
                notes.append(
                    _old_code_note(point.sentence(), measured, today, step, hib, s.threshold)
                )
            if not point.clean:
                notes.append(
                    "your checkout has uncommitted changes (or an operation in progress): today's step runs "
                    "them, the baseline commit does not; they are part of the measured slowdown"
                )
    elif not values:
        notes.append(
            f"no baseline in this machine's memory: {why}"
            + (
                ""
                if "--expect" in why
                else ", or give --expect with the value you remember"
                if "--since" in why
                else "; give --expect with the value you remember, or --since REV"
            )
        )
        # nothing to share a slowdown with, but an A/B still tells what each one costs
        for row in memory.costly_set_now():
            notes.append(
                f"{row['name']}={row['value']} is set now and is known to cost speed ({row['effect']}); "
                f"without a baseline it is not tested: forensics bench --cmd STEP --b-unset {row['name']} "
                "measures it"
            )
    if not values:
        return None
    if baseline is None:
        from forensics.investigate.memory import recent_note

        note = recent_note(results_of(now).get(step.name))
        if note:
            notes.append(note)
    result = make_result(
        step.name,
        "user",
        step.unit,
        values,
        higher_is_better=hib,
        description="the baseline measured now or remembered (forensics investigate)",
    )
    files = (results_of(now).get(step.name) or {}).get("loaded_files")
    if isinstance(files, list):
        result["loaded_files"] = files
    if s.expect:  # one value, not processes: the diff compares today's with it exactly (stats.compare_to_figure)
        result["remembered"] = f"--expect {s.expect}"
    label = "baseline: " + "; ".join(parts)
    doc = memory.synthetic_baseline(
        now,
        result,
        point=point if baseline is None else None,
        source=baseline,
        label=label.removeprefix("baseline: ")[:120],
    )
    return doc, label, seeds, point.new if point is not None and point.clean else ""


def _old_code_note(
    what: str,
    measured: list[float],
    today: list[float],
    step: Subject,
    hib: bool,
    threshold: float,
) -> str:
    """What the commit the machine remembers (``what``: "HEAD@{1} 112037e, before the pull of ..."), measured
    now in a private worktree (``measured``, per-process values), says next to today's processes when the
    baseline is a figure the user remembers: as slow as today (the slowdown is not in the commits since it),
    faster (they are suspects), or not decided."""
    from forensics.investigate.decide import versus_baseline
    from forensics.words import metric_time_unit

    status, ratio, _, _ = versus_baseline(
        measured, today, threshold=threshold, higher_is_better=hib
    )
    unit = step.unit if hib else metric_time_unit(step.name)
    gives = f"{what}, measured now in a private worktree, gives {statistics.median(measured):.4g} {unit}"
    n = f"{len(measured)} processes"
    if status == "within":
        return (
            f"{gives}, as today (ratio {ratio:.3f}): the slowdown against the value you remember is not in the "
            f"commits since it (it is older, or outside the code; {n})"
        )
    if status == "beyond":
        return f"{gives} ({n}); today is {ratio:.3f}x slower than it: the commits since it are suspects"
    return f"{gives} ({n}); whether today is slower than it is not decided (ratio {ratio:.3f})"


_PLACE_VARIABLES = frozenset(
    {
        "PYTHONPATH",
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "CUDA_HOME",
        "CUDA_PATH",
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
    }
)
"""Variables the ``nccl_env`` probe records that name places (paths, a rendezvous) rather than settings: the
baseline's value may not exist here, so :func:`_recorded_env` leaves them as they are now."""


def _recorded_env(baseline: dict[str, Any], now: dict[str, Any]) -> dict[str, str | None]:
    """The variables whose value the baseline snapshot recorded differently from the snapshot taken now (the
    ``nccl_env`` probe's launching-process environment; ``None``: unset in the baseline), redacted ones and
    :data:`_PLACE_VARIABLES` left out: what the baseline ran with, where it differs."""
    from forensics.investigate.experiments import EnvExperiment
    from forensics.model import is_missing
    from forensics.redact import REDACTED

    before, after = EnvExperiment._parent_env(baseline), EnvExperiment._parent_env(now)
    out: dict[str, str | None] = {}
    for k in sorted(set(before) | set(after)):
        if k in _PLACE_VARIABLES:
            continue  # a path or a launcher's value from another shell or machine: not restored
        old, new = before.get(k), after.get(k)
        old = None if old is None or is_missing(old) else str(old)
        new = None if new is None or is_missing(new) else str(new)
        if old != new and REDACTED not in (old or "") and REDACTED not in (new or ""):
            out[k] = old
    return out


def _grow_today(now: dict[str, Any], name: str, more: list[float], sha: str) -> None:
    """Add ``more`` per-process values of HEAD (``sha``, measured in a private worktree because the checkout is
    clean and runs the same code) to today's result ``name`` in ``now``'s bench, its summary recomputed and
    the extra processes said in ``extra_processes``."""
    from forensics.bench.document import make_result

    for i, r in enumerate((now.get("bench") or {}).get("results") or []):
        if isinstance(r, dict) and r.get("name") == name:
            values = [float(x) for x in r.get("process_medians") or []] + list(more)
            fresh = make_result(
                name,
                r.get("kind", "user"),
                r.get("unit", ""),
                values,
                higher_is_better=bool(r.get("higher_is_better")),
            )
            now["bench"]["results"][i] = {
                **r,
                **fresh,
                "extra_processes": {
                    "count": len(more),
                    "where": f"HEAD {sha[:10]} in a private worktree (the checkout is clean: the same code)",
                },
            }


def _versus_expect(
    baseline: dict[str, Any], now: dict[str, Any], step: Subject, s: Settings
) -> tuple[Regression, str]:
    """Did the step get slower than the remembered figure (``--expect``)? The bootstrap CI of today's median
    over the figure (:func:`forensics.investigate.decide.versus_baseline`)."""
    from forensics.investigate.decide import versus_baseline

    base = (results_of(baseline).get(step.name) or {}).get("process_medians") or []
    today = (results_of(now).get(step.name) or {}).get("process_medians") or []
    if not base or not today:
        return (
            Regression.UNKNOWN,
            "could not tell whether the step got slower: no measurement of it now",
        )
    status, ratio, lo, hi = versus_baseline(
        base, today, threshold=s.threshold, higher_is_better=step.higher_is_better
    )
    from forensics.words import metric_time_unit

    unit = step.unit if step.higher_is_better else metric_time_unit(step.name)
    shown = (ratio, lo, hi)  # today over the figure, as a time: the slowdown factor
    if step.higher_is_better:  # a throughput is said as itself: 0.53x the tok/s remembered
        shown = (1 / ratio, 1 / hi, 1 / lo)
    if (
        len(set(today)) == 1
    ):  # every process gave the same value: the ratio is exact, no interval to give
        how = f"each of the {len(today)} processes now gave {today[0]:.4g} {unit}"
    else:
        how = f"95% CI {shown[1]:.3f}-{shown[2]:.3f}, {len(today)} processes now"
    text = f"{step.name}: {shown[0]:.3f}x the value you remember ({base[0]:.4g} {unit}; {how})"
    if status == "beyond":
        return Regression.YES, text
    if status == "within":
        return Regression.NO, text + f"; a slowdown of {s.threshold:.0%} or more is ruled out"
    return Regression.UNKNOWN, text


def _regression(
    analysis,
    baseline,
    step: Subject | None,
    canary: bool,
    canary_s: float,
    s: Settings,
    notes: list[str],
) -> tuple[Subject | None, Regression, str]:
    """The subject of the experiments and whether it got slower (from the two snapshots' measurements)."""
    results = {r.name: r for r in (analysis.bench.results if analysis.bench else [])}
    subject = step
    judged = None
    if (
        s.plan_only and step is None and canary
    ):  # --plan ran no canary now: the plan is for it, if it slowed down
        return (
            Subject(
                "canary",
                name=CANARY_RESULT,
                unit="ms",
                process_s=canary_s or 10.0,
                canary=dict(s.canary_options),
                timeout_s=s.timeout_s,
            ),
            Regression.UNKNOWN,
            "not measured now (--plan runs no canary)",
        )
    if step is not None:
        judged = results.get(step.name)
        if judged is None or judged.comparison is None:
            notes.append(
                f"the baseline has no measurement of your step ({step.name}); take it with "
                f'`forensics snapshot --bench --bench-cmd "{step.cmd}"`: the share of the slowdown an '
                "experiment recovers, and so any confirmation, needs it"
            )
            judged = results.get(CANARY_RESULT)
    else:
        judged = results.get(CANARY_RESULT)
        if judged is not None and judged.comparison is not None and canary:
            subject = Subject(
                "canary",
                name=CANARY_RESULT,
                unit=judged.unit or "ms",
                process_s=canary_s or 10.0,
                canary=dict(s.canary_options),
                timeout_s=s.timeout_s,
            )
    if judged is None or judged.comparison is None:
        then = [r.name for r in results.values() if r.before]
        if then and not any(r.after for r in results.values()):
            # the baseline measured, today nothing did: what to give now, not how to take a baseline
            user = ((baseline or {}).get("bench") or {}).get("config") or {}
            cmd = (user.get("user_step") or {}).get("command") if isinstance(user, dict) else None
            todo = [] if step is not None else ["give your step with --cmd"]
            if step is None and cmd:  # a note of its own: a command ends the line it is in
                notes.append(f"the baseline measured your step as: {cmd}")
            if not canary:
                todo.append("the canary did not run now (the note says why)")
            return (
                subject,
                Regression.UNKNOWN,
                (
                    f"could not tell whether the step got slower: the baseline measured "
                    f"{', '.join(then[:3])}{' ...' if len(then) > 3 else ''}, and nothing was measured "
                    f"now: {'; '.join(todo) or 'see the notes'}"
                ),
            )
        why = "neither snapshot has a measurement on both sides"
        return (
            subject,
            Regression.UNKNOWN,
            (
                f"could not tell whether the step got slower: {why} (take the baseline "
                "with `forensics snapshot --bench`, and `--bench-cmd STEP` for your step, the command "
                "given to --cmd)"
            ),
        )
    c = judged.comparison
    text = f"{judged.name}: {c.sentence()}"
    if c.verdict is Verdict.SLOWER:
        return subject, Regression.YES, text
    if c.verdict in (Verdict.SAME, Verdict.FASTER) or c.verdict.small:
        return subject, Regression.NO, text
    if c.ci_high < 1 + s.threshold:
        # the threshold gates it (DESIGN section 7): a slowdown of the threshold or more is ruled out.
        # What the comparison could not decide (a smaller change, and how many processes would) is not
        # the question asked, so its advice is left out of the verdict (the report's table keeps it).
        return (
            subject,
            Regression.NO,
            f"{judged.name}: ratio {c.time_ratio:.3f} (95% CI {c.ci_low:.3f}-{c.ci_high:.3f}, "
            f"n={c.a.n}+{c.b.n}): a slowdown of {s.threshold:.0%} or more is ruled out (the CI ends "
            f"at {c.ci_high:.3f}); a smaller change is not decided at this noise",
        )
    return subject, Regression.UNKNOWN, text


CANARY_PROCESS_MIN_S = 2.0
"""Wall seconds below which no fresh canary process ends: it imports torch and starts a process group
(docs/investigate.md, 'Cost'). The floor of :func:`refuse_early` without a baseline figure."""


def _baseline_canary_walls(baseline: dict[str, Any] | None) -> list[float]:
    """Wall seconds of each canary process in the baseline's embedded bench (``bench.processes[].wall_s``)."""
    bench = (baseline or {}).get("bench")
    procs = bench.get("processes") if isinstance(bench, dict) else None
    return (
        [
            float(p["wall_s"])
            for p in procs
            if isinstance(p, dict)
            and isinstance(p.get("wall_s"), (int, float))
            and not isinstance(p["wall_s"], bool)
            and 0 < p["wall_s"] < math.inf
        ]
        if isinstance(procs, list)
        else []
    )


def _baseline_canary_s(baseline: dict[str, Any] | None) -> float:
    """Median wall seconds of one canary process in the baseline (0 when it has none)."""
    walls = _baseline_canary_walls(baseline)
    return statistics.median(walls) if walls else 0.0


def refuse_early(
    s: Settings, baseline: dict[str, Any] | None, step: Subject | None, measure_canary: bool
) -> None:
    """Say what cannot be done before doing any work (the snapshot and its canary take minutes on a CPU).

    - No baseline, no step (``--cmd``/``--callable``) and no GPU visible (NVML
      ``nvmlDeviceGetCount`` through :func:`forensics.bench.harness.visible_gpus`): this
      machine can only be judged against what its GPUs should give, and it has none.
    - A ``--budget`` shorter than the snapshot's own measurement: ``snapshot_processes``
      fresh canary processes, each at least the baseline's fastest canary process (its
      embedded bench's ``processes[].wall_s``), else :data:`CANARY_PROCESS_MIN_S`.
      ``--plan`` runs none, so its budget is not checked.

    Raises:
        InconclusiveError: nothing here can be judged (exit 3, as the verdict it replaces).
        BadInputError: the budget is too short (exit 2).
    """
    from forensics.errors import InconclusiveError

    if baseline is None and step is None:
        from forensics.bench.harness import visible_gpus

        if visible_gpus() == 0:
            raise InconclusiveError(
                "cannot judge this machine: without --baseline it is judged against what its GPUs should give, "
                "and no GPU is visible here; give --baseline BEFORE.json (forensics snapshot --bench when it was "
                "fast) or your step with --cmd"
            )
    if s.plan_only or not measure_canary:
        return
    walls = _baseline_canary_walls(baseline)
    each = min(walls) if walls else CANARY_PROCESS_MIN_S
    need = s.snapshot_processes * each
    if s.budget_s < need:
        source = (
            "the baseline's fastest canary process" if walls else "a fresh canary process's least"
        )
        raise BadInputError(
            f"--budget {s.budget_s:g}s is shorter than the snapshot taken now: it runs the canary in "
            f"{s.snapshot_processes} fresh processes of at least {each:.1f} s each ({source}), {need:.0f} s "
            f"before any experiment; give --budget {math.ceil(need / 60)}m or more (experiments need more), "
            "or --no-canary"
        )


MAX_BISECTS = 3
"""Bisects of one pull at most: the plan's own, then one more for each part of the slowdown left after the
commits found so far (three slow commits of one pull are found with three)."""


def _found_commits(inv: Investigation, folder: str) -> list[tuple[str, str]]:
    """(commit, its parent) of each commit experiment or bisect in ``folder`` that showed a part of the slowdown
    (:func:`_contributes`)."""
    out = []
    for e in inv.experiments:
        if e.kind not in (Kind.COMMIT, Kind.BISECT) or e.params.get("folder") != folder:
            continue
        sha, parent = _commit_of(e), e.details.get("parent")
        if sha and parent and _contributes(e) and (sha, parent) not in out:
            out.append((sha, parent))
    return out


def _narrow_bisect(
    inv: Investigation,
    ctx: Context,
    exp: Experiment,
    dep: Experiment,
    forced: tuple[Outcome, str] | None,
) -> tuple[Outcome, str] | None:
    """The bisect of a pull in which commits that slowed the step were already found (the suspect commit, an
    earlier bisect's culprit: confirmed while part of the slowdown is left, partial, or significantly faster
    with an uncertain share): a bisect of the whole range finds the first slow commit, a found one again when
    it is the first. The commits found cut the range into parts (the baseline's commit..C1^, C1..C2^, ...,
    Ck..HEAD); the part with the largest gap end to end, from values already measured (each found commit and
    its parent by its A/B, HEAD by today's step, the baseline's commit by the baseline), is bisected when that
    gap is the threshold or more. The bisect measures its ends again as any bisect does.

    Returns None (run it: ``exp.params`` narrowed, ``details.segment`` says why) or ``(not-run, reason)`` when
    no part holds a gap of the threshold (``forced`` when the range or the values are not known).
    """
    import statistics

    from forensics.gitio import GitError, git

    s = ctx.subject
    folder = exp.params.get("folder")
    good, bad, command = exp.params.setdefault(
        "range", [exp.params.get("good"), exp.params.get("bad"), exp.command]
    )
    found = _found_commits(inv, folder or "")
    if s is None or not (good and bad and folder and found):
        return forced
    try:
        order = git(folder, "rev-list", "--reverse", f"{good}..{bad}").split()
    except GitError:
        return forced
    index = {sha: i for i, sha in enumerate(order)}
    found = sorted((f for f in found if f[0] in index), key=lambda f: index[f[0]])

    def med(sha: str, fallback) -> float | None:
        xs = ctx.seed(sha) or fallback or []
        xs = [1.0 / x for x in xs] if s.higher_is_better else list(xs)
        return statistics.median(xs) if xs else None

    parts, lo = [], good
    for sha, parent in found:
        if parent != lo:
            parts.append((lo, parent))
        lo = sha
    if lo != bad:
        parts.append((lo, bad))
    gaps = []
    dirty = bool(ctx.cache.get("dirty"))
    for lo, hi in parts:
        a = med(lo, ctx.baseline_values(s.name) if lo == good else None)
        # today's processes ran the user's uncommitted changes too: HEAD's value only when the checkout is clean
        # (their cost read as a part of the pull, whose bisect said 'the environment changed, not the code')
        b = med(hi, ctx.today if hi == bad and not dirty else None)
        if lo == good:
            # a pull that merged: the pulled commits descend from the merge base, not from your last commit, and
            # a bisect from it refused ('is not an ancestor of'); the baseline stands for the merge base
            try:
                lo = git(folder, "merge-base", good, hi).strip() or good
            except GitError:
                pass
        if a and b and b / a >= 1 + ctx.threshold:
            gaps.append((b / a, lo, hi))
    names = ", ".join(sha[:10] for sha, _ in found)
    said = f"{plural(len(found), 'commit')} that slowed the step found ({names})"
    if not gaps:
        return Outcome.NOT_RUN, (
            f"not needed: {said}, and no part of the range without them measured {ctx.threshold:.0%} or more "
            "slower end to end (so no other commit of the pull is slower by the threshold)"
        )
    ratio, lo, hi = max(gaps)
    n = int(git(folder, "rev-list", "--count", f"{lo}..{hi}").strip() or 0)
    free = set(exp.params.get("free") or ())
    exp.params.setdefault("head", bad)  # today's commit: where the residual after it is measured
    exp.params.update({"good": lo, "bad": hi, "n": max(n - len(free), 1)})
    exp.details["segment"] = (
        f"{said} and part of the slowdown is left: the part of the range without them that holds the most of "
        f"the rest is bisected, {lo[:10]}..{hi[:10]} ({ratio:.2f}x end to end, as already measured)"
    )
    exp.title = f"{exp.title.split(':', 1)[0]}: bisect the rest, {lo[:10]}..{hi[:10]}"
    exp.command = command.replace(f"--good {good[:12]}", f"--good {lo[:12]}").replace(
        f"--bad {bad[:12]}", f"--bad {hi[:12]}"
    )
    return None


def _next_bisect(inv: Investigation, ctx: Context, exp: Experiment, todo: list[Experiment]) -> None:
    """After a bisect whose commit showed a part of the slowdown (:func:`_contributes`), one more over the rest
    of the range (:func:`_narrow_bisect` picks the part when it runs), while part of the slowdown is left: the
    residual after the confirmed causes is not within noise, or, none confirmed, the shares found add up to
    less than 90%, and a part of the range without the commits found holds a gap of the threshold; at most
    :data:`MAX_BISECTS` a pull. Appended to ``inv.experiments`` and ``todo``."""
    if exp.kind is not Kind.BISECT or inv.interrupted or not _contributes(exp):
        return
    if inv.confirmed and not _beyond(inv):
        return
    if not inv.confirmed:
        shown = [e.share.point for e in inv.experiments if _contributes(e) and e.share]
        if sum(x for x in shown if x is not None) >= COMPOUNDED:
            return
    bisects = [e for e in inv.experiments if e.kind is Kind.BISECT]
    if len(bisects) >= MAX_BISECTS:
        return
    good, bad, command = exp.params.get("range") or [
        exp.params.get("good"),
        exp.params.get("bad"),
        exp.command,
    ]
    nxt = Experiment(
        f"bisect-{len(bisects) + 1}",
        Kind.BISECT,
        exp.hypothesis,
        exp.title.split(":", 1)[0] + ": bisect the rest",
    )
    nxt.params.update({k: v for k, v in exp.params.items() if k in ("folder", "free", "head", "n")})
    nxt.params.update(
        {"good": good, "bad": bad, "range": [good, bad, command], "depends_on": exp.id}
    )
    nxt.command = command
    if _narrow_bisect(inv, ctx, nxt, exp, None) is not None:
        return  # no part of the range without the commits found is slower by the threshold
    inv.experiments.append(nxt)
    todo.append(nxt)


def _dependency(exp: Experiment, done: dict[str, Experiment]) -> tuple[Outcome, str] | None:
    """The outcome an experiment takes without running, from the one it depends on (None: run it)."""
    dep = done.get(exp.params.get("depends_on", ""))
    if dep is None:
        return None
    if exp.kind is Kind.BISECT:
        if dep.outcome is Outcome.CONFIRMED:
            return Outcome.NOT_RUN, f"not needed: {dep.id} confirmed the suspect commit"
        if dep.outcome is Outcome.NOT_RUN:
            return Outcome.NOT_RUN, dep.reason
        return None
    if exp.kind is Kind.ENV and dep.outcome is Outcome.REFUTED:
        return (
            Outcome.REFUTED,
            f"restoring all of them together ({dep.id}) did not move the step: {dep.reason}",
        )
    return None


def _run_all(
    inv: Investigation, ctx: Context, emit: EventFn, interrupts: tuple[type[BaseException], ...]
) -> None:
    """Run the plan in order. After each confirmed cause its intervention is kept (``ctx.overlay`` for a
    variable, ``ctx.reverts`` for a commit, ``ctx.packages`` for a package swap) and today with every
    confirmed intervention applied is measured against the baseline (:func:`_account`); while that residual is
    beyond the threshold the next suspects are tested on top of the interventions, else the rest are not
    needed (DESIGN section 16); then the partial causes are tested again on top of them
    (:func:`_retest_partials`). The kept package overlays are removed at the end, also when interrupted."""
    import shutil

    try:
        _run_plan(inv, ctx, emit, interrupts)
    finally:
        for folder in ctx.cache.pop("overlays", []):
            shutil.rmtree(folder, ignore_errors=True)


def _run_plan(
    inv: Investigation, ctx: Context, emit: EventFn, interrupts: tuple[type[BaseException], ...]
) -> None:
    done: dict[str, Experiment] = {}
    todo = [e for e in inv.experiments if e.outcome is Outcome.PLANNED]
    total = len(todo)
    for n, exp in enumerate(todo, 1):
        if inv.interrupted:
            exp.outcome, exp.reason = Outcome.NOT_RUN, f"not run: interrupted ({inv.interrupted})"
            continue
        narrows = exp.params.get("depends_on") in {
            e.id for e in inv.confirmed
        }  # which one of a confirmed group
        if inv.confirmed and not inv.settings.keep_going and not narrows and not _beyond(inv):
            exp.outcome = Outcome.NOT_RUN
            exp.reason = (
                f"not needed: {', '.join(e.id for e in inv.confirmed)} confirmed "
                + (
                    f"and account for the slowdown ({inv.residual.sentence()})"
                    if inv.residual is not None
                    else "a cause"
                )
                + " (--keep-going runs the rest)"
            )
            continue
        forced = _dependency(exp, done)
        dep = done.get(exp.params.get("depends_on", ""))
        if (
            exp.kind is Kind.BISECT
            and dep is not None
            and _contributes(dep)
            and (dep.outcome is not Outcome.CONFIRMED or _beyond(inv))
        ):
            forced = _narrow_bisect(inv, ctx, exp, dep, forced)
        if forced is not None:
            exp.outcome, exp.reason = forced
            done[exp.id] = exp
            continue
        exp.estimate_s = KINDS[exp.kind].estimate(
            ctx, exp
        )  # again: a re-measurement already made costs nothing
        left = ctx.left_s()
        if exp.estimate_s > left:
            exp.outcome = Outcome.NOT_RUN
            exp.reason = (
                f"budget spent: needs about {exp.estimate_s:.0f} s, {max(left, 0):.0f} s of the "
                f"{inv.settings.budget_s:.0f} s budget left (raise --budget, or run it: {exp.command})"
            )
            done[exp.id] = exp
            continue
        _execute(inv, ctx, exp, emit, interrupts, n, total, left)
        done[exp.id] = exp
        if (
            exp.outcome is Outcome.CONFIRMED
            and not inv.interrupted
            and not (
                exp.kind is Kind.ENV and any(e.params.get("depends_on") == exp.id for e in todo)
            )  # a group of variables: the one-by-one experiments that follow say which one to keep
        ):
            _keep(inv, ctx, exp, emit, interrupts)  # may find a commit is not today's cause
        emit("done", experiment=exp)
        _next_bisect(inv, ctx, exp, todo)
        group = done.get(exp.params.get("depends_on", "")) if exp.kind is Kind.ENV else None
        if (
            group is not None
            and group.outcome is Outcome.CONFIRMED
            and not inv.interrupted
            and not any(
                e.params.get("depends_on") == group.id
                and e.outcome in (Outcome.PLANNED, Outcome.CONFIRMED)
                for e in todo
            )
        ):
            # the last variable of a confirmed group, and none alone explains the slowdown: the group is the
            # cause kept (its B side is today with all of them restored); without this no residual was measured
            # and the accounting said 'stopped: the residual could not be measured'
            _keep(inv, ctx, group, emit, interrupts)
    _retest_partials(inv, ctx, emit, interrupts)
    _keep_together(inv, ctx, emit, interrupts)
    if not inv.confirmed and not _together(inv):
        inv.stopped = ""
    elif inv.interrupted:
        inv.stopped = f"interrupted ({inv.interrupted})"
    elif inv.residual is None:
        inv.stopped = "the residual could not be measured"
    elif inv.residual.none_left:  # every process gave the baseline's value: no noise to be within
        inv.stopped = "nothing is left of the slowdown"
    elif inv.residual.status == "within":
        inv.stopped = (
            "the residual is below the threshold"
            if inv.residual.exact
            else "today without them is faster than the baseline beyond the threshold"
            if inv.residual.faster
            else "the residual is within noise"
        )
    elif any(e.reason.startswith("budget spent") for e in inv.experiments):
        inv.stopped = "the budget is spent " + (
            "with part of the slowdown unexplained"
            if inv.residual.status == "beyond"
            else "before the residual was decided"
        )
    else:
        inv.stopped = "no suspect left to test" + (
            ""
            if inv.residual.status == "beyond"
            else " (the residual is not decided"
            + (
                f": the baseline's {inv.residual.baseline_processes} processes bound it)"
                if inv.residual.baseline_bound is not None
                else ")"
            )
        )


def _execute(
    inv: Investigation,
    ctx: Context,
    exp: Experiment,
    emit: EventFn,
    interrupts: tuple[type[BaseException], ...],
    index: int,
    total: int,
    left: float,
) -> None:
    """Run one experiment that fits the budget: on top of the confirmed interventions (``details.on_top_of``
    names them), progress to ``emit``; an interrupt ends it ``interrupted`` (and sets ``inv.interrupted``), a
    step that fails ends it ``inconclusive`` with the error."""
    if ctx.applied() and exp.kind is not Kind.REMEASURE:  # a re-measurement changes nothing
        exp.details["on_top_of"] = _interventions(ctx)
    emit("experiment", experiment=exp, index=index, total=total, left_s=left)
    t = time.monotonic()
    try:
        KINDS[exp.kind].run(ctx, exp)
    except interrupts as exc:
        inv.interrupted = _signal_name(exc)
        exp.outcome, exp.reason = (
            Outcome.INTERRUPTED,
            "stopped by the user; its processes were ended",
        )
        exp.sentence = f"{exp.title}: interrupted"
    except BadInputError as exc:
        exp.outcome, exp.reason = (
            Outcome.INCONCLUSIVE,
            f"the experiment could not finish: {exc}",
        )
        exp.sentence = f"{exp.title}: could not finish ({exc})"
    exp.elapsed_s = time.monotonic() - t


def _keep(
    inv: Investigation,
    ctx: Context,
    exp: Experiment,
    emit: EventFn,
    interrupts: tuple[type[BaseException], ...],
) -> None:
    """Keep a confirmed cause's intervention and measure the residual (:func:`_account`); an interrupt is
    recorded in ``inv.interrupted``, a residual that cannot be measured in the notes (and no earlier residual
    is left standing for it)."""
    t = time.monotonic()
    earlier = inv.residual
    # a confirmed commit older than HEAD must also hold for today (a partial one is kept as partial: the
    # residual after it says what is left)
    today_check = exp.outcome is Outcome.CONFIRMED and _landed_before_head(exp)
    try:
        _account(inv, ctx, exp, emit)
    except interrupts as exc:
        inv.interrupted = _signal_name(exc)
    except BadInputError as exc:
        if today_check:
            _not_todays_cause(
                inv, ctx, exp, earlier, f"taking it out of today's code could not be tried ({exc})"
            )
        else:
            inv.notes.append(f"the residual could not be measured: {exc}")
    else:
        left = _left_after(earlier, inv.residual)
        if today_check and left is not None and left > 1 - ctx.min_share:
            _not_todays_cause(
                inv,
                ctx,
                exp,
                earlier,
                f"taking it out of today's code leaves at least {left:.0%} of what was left of the slowdown "
                f"({inv.residual.sentence()})",
            )
    if inv.residual is earlier and earlier is not None and exp.outcome is Outcome.CONFIRMED:
        # measured before this cause was kept, it no longer says what is left: no stale share
        inv.residual = None
    exp.elapsed_s += time.monotonic() - t


RETEST = "-on-top"
"""The suffix of the id of a partial cause's second A/B, on top of the confirmed causes (``env-1-on-top``)."""


def _commit_of(e: Experiment) -> str:
    """The commit a commit experiment or a bisect's A/B took out ("" for other kinds)."""
    culprit = (e.details.get("bisect") or {}).get("culprit") or {}
    return str(culprit.get("sha") or e.details.get("commit") or "")


def _kept_already(ctx: Context, e: Experiment) -> bool:
    """Whether ``e``'s intervention is one of those kept (a variable of a confirmed group, the commit a bisect
    confirmed, the same package): then it is part of a cause already accounted, not another."""
    if e.kind is Kind.ENV:
        restore = e.params.get("restore") or {}
        return bool(restore) and all(
            k in ctx.overlay and ctx.overlay[k] == v for k, v in restore.items()
        )
    if e.kind is Kind.PACKAGE:
        return e.params.get("name") in ctx.packages
    sha = _commit_of(e)
    return bool(sha) and sha in ctx.reverts


def _retest(ctx: Context, p: Experiment) -> Experiment:
    """The A/B of the partial cause ``p`` again, on top of every intervention kept now (not run yet): the same
    kind and intervention (a bisect's: its culprit against its parent, a commit experiment), id
    ``p.id + RETEST``, ``details.retest_of`` = ``p.id``."""
    kind = Kind.COMMIT if p.kind is Kind.BISECT else p.kind
    on_top = ", ".join(_interventions(ctx))
    keys = (
        "restore",
        "known_cost",
        "package",
        "baseline_version",
        "today_version",
        "installed",
        "repository",
        "commit",
        "subject",
    )
    details: dict[str, Any] = {k: p.details[k] for k in keys if k in p.details}
    params = {
        k: v for k, v in p.params.items() if k not in ("overlay_dir", "depends_on", "free", "n")
    }
    title = p.title
    if p.kind is Kind.BISECT:
        sha = _commit_of(p)
        culprit = (p.details.get("bisect") or {}).get("culprit") or {}
        subject = p.details.get("subject") or culprit.get("subject") or ""
        details.update({"commit": sha, "subject": subject})
        params = {
            "folder": p.params.get("folder"),
            "sha": sha,
            "head": p.params.get("head") or p.params.get("bad"),
        }
        title = f'{sha[:10]} "{subject}" (named by {p.id}) against its parent'
    if p.kind is Kind.PACKAGE and p.params.get("overlay_dir"):
        params["installed_overlay"] = p.params[
            "overlay_dir"
        ]  # the old version is installed already
    details["retest_of"] = p.id
    params["retest_of"] = p.id
    r = Experiment(
        f"{p.id}{RETEST}",
        kind,
        p.hypothesis,
        f"{title}, again on top of {on_top}",
        subject=p.subject,
        a_label=p.a_label,
        b_label=p.b_label,
        details=details,
        params=params,
    )
    return r


def _why_not_retest(inv: Investigation, ctx: Context, r: Experiment) -> tuple[str, str] | None:
    """(reason, the same in a few words for the accounting) when the re-test ``r`` is not run, else None."""
    if inv.interrupted:
        return f"not run: interrupted ({inv.interrupted})", "interrupted"
    res = inv.residual
    if res is not None and res.status == "within" and not inv.settings.keep_going:
        return (
            f"not needed: {', '.join(e.id for e in inv.confirmed)} confirmed and leave nothing beyond noise "
            f"({res.sentence()}; --keep-going tests it again)",
            "what the confirmed causes leave is within noise",
        )
    return None


def _retest_estimate(ctx: Context, r: Experiment) -> float:
    """Wall seconds of the re-test ``r``: its A/B, and for a commit that is not HEAD alone the residual measured
    after it in fresh processes (a variable's or a package's residual is the A/B's own side B)."""
    cost = KINDS[r.kind].estimate(ctx, r)
    if r.kind is Kind.COMMIT and (
        r.params.get("sha") != r.params.get("head") or ctx.reverts or ctx.cache.get("dirty")
    ):
        cost += ctx.processes * ctx.per_process_s()
    return cost


def _retest_partials(
    inv: Investigation,
    ctx: Context,
    emit: EventFn,
    interrupts: tuple[type[BaseException], ...],
) -> None:
    """Once the confirmed causes are known, each partial cause (significantly faster, its share's upper end
    below ``--explains``) is tested again on top of them, so that it is accounted for rather than left in the
    unexplained part (docs/investigate.md, "A partial cause"):

    - one whose intervention is already kept (a variable of a confirmed group) is part of that cause;
    - one decided on top of exactly the interventions kept now is a partial cause of what they left as it is:
      its intervention is kept and the residual measured after it (``details.accounted`` = ``partial``);
    - any other is run again (:func:`_retest`, appended to ``inv.experiments``), judged against what was left
      (``details.share_of_remaining``), within the budget and ``--max-processes`` like every experiment.
      Confirmed: a cause like any other, kept. Partial again: kept as a partial cause. Refuted or not decided:
      nothing kept. Not run (the budget, an interrupt, nothing left beyond noise, a commit on top of another
      commit): ``not-run`` with the reason, ``details.not_retested`` in a few words.
    """
    if not inv.confirmed:
        return
    partials = [
        e for e in inv.experiments if e.outcome is Outcome.PARTIAL and "retest_of" not in e.params
    ]
    for p in partials:
        if _kept_already(ctx, p):
            continue
        if (
            not inv.interrupted
            and ctx.applied()
            and p.details.get("on_top_of") == _interventions(ctx)
        ):
            _keep(inv, ctx, p, emit, interrupts)
            p.details["accounted"] = "partial"
            continue
        r = _retest(ctx, p)
        inv.experiments.append(r)
        why = _why_not_retest(inv, ctx, r)
        r.estimate_s = _retest_estimate(ctx, r)
        left = ctx.left_s()
        if why is None and r.estimate_s > left:
            why = (
                f"budget spent: needs about {r.estimate_s:.0f} s, {max(left, 0):.0f} s of the "
                f"{inv.settings.budget_s:.0f} s budget left (raise --budget to test it on top of the "
                "confirmed causes)",
                f"the budget is spent: it needs about {r.estimate_s:.0f} s, {max(left, 0):.0f} s left",
            )
        if why is not None:
            r.outcome, r.reason = Outcome.NOT_RUN, why[0]
            r.details["not_retested"] = why[1]
            continue
        n = len(inv.experiments)
        _execute(inv, ctx, r, emit, interrupts, n, n, left)
        emit("done", experiment=r)
        if inv.interrupted:
            continue
        if r.outcome is Outcome.CONFIRMED:
            _keep(inv, ctx, r, emit, interrupts)
        elif r.outcome is Outcome.PARTIAL:
            _keep(inv, ctx, r, emit, interrupts)
            r.details["accounted"] = "partial"


def _together(inv: Investigation) -> list[Experiment]:
    """The causes kept together by :func:`_keep_together` (``details.accounted`` = ``together``)."""
    return [e for e in inv.experiments if e.details.get("accounted") == "together"]


def _keep_together(
    inv: Investigation,
    ctx: Context,
    emit: EventFn,
    interrupts: tuple[type[BaseException], ...],
) -> None:
    """No cause confirmed alone, but two or more A/Bs each showed a part of the slowdown (:func:`_contributes`:
    partial, or significantly faster with a share that straddles ``--explains``) and their shares add up to
    :data:`COMPOUNDED` or more: two commits of 1 ms each in a 2 ms slowdown, each "recovers 50% ... an interval
    that straddles 50%", ended "Most likely, not confirmed". Their interventions are kept together, largest
    share first, the residual measured after each (:func:`_keep`): when today with all of them taken out is
    within noise of the baseline, they are the explanation, shown by experiment (``details.accounted`` =
    ``together``; the verdict says "N causes together").

    One that is not kept (its residual not measured, or taking it out after the others recovers less than half
    its share: :func:`_not_together`) leaves nothing applied: a variable left unset by it made the step within
    noise of the baseline under the name of the others. Fewer than two kept are no causes together: one commit
    whose cost doubles another's (+1 ms, and x2 of it) read "1 causes together: commit X: 53%; unexplained:
    -1%", shares adding up to 52%, and is left as its A/Bs said."""
    if inv.confirmed or inv.interrupted:
        return
    parts = [
        e for e in inv.experiments if _contributes(e) and e.share and e.share.point is not None
    ]
    if len(parts) < 2 or sum(e.share.point for e in parts) < COMPOUNDED:
        return
    start, alone = (
        (_applied_state(ctx), inv.residual),
        {e.id: (e.sentence, e.reason) for e in parts},
    )
    for e in sorted(parts, key=lambda e: -e.share.point):
        if inv.interrupted:
            break
        earlier, state = inv.residual, _applied_state(ctx)
        before = earlier.unexplained.point if earlier is not None else 1.0
        if _together_on_top(ctx, e):
            r = _retest_together(inv, ctx, e, emit, interrupts)
            if r is None:
                continue  # not run (its reason says why), or it showed nothing on top: not kept
            alone[r.id], e = (r.sentence, r.reason), r
        _keep(inv, ctx, e, emit, interrupts)
        now = inv.residual.unexplained.point if inv.residual is not None else None
        if inv.residual is earlier or now is None or before is None:
            _restore_state(ctx, state)  # not measured (the notes say why): not kept
            inv.residual = earlier
            continue
        if (
            before - now < e.share.point / 2
        ):  # taking it out of today recovers less than half its share
            _not_together(inv, ctx, e, earlier, state, before - now, _together(inv))
            continue
        e.details["accounted"] = "together"
        e.sentence = (
            e.sentence.rsplit("; ", 1)[0] + "; significantly faster: one of the causes together"
        )
        e.reason += (
            "; kept as one of the causes together: taken out of today with those kept before it, "
            f"{_pct(now)} of the slowdown is left"
        )
    together = _together(inv)
    if len(together) < 2:  # interrupted after the first too: '1 causes together' is none
        _restore_state(ctx, start[0])
        inv.residual = start[1]
        for e in together:
            del e.details["accounted"]
            e.details.pop("residual", None)
            e.sentence, e.reason = alone[e.id]
    elif inv.residual is None or inv.residual.status != "within":
        # together they leave part of the slowdown: the verdict is 'Most likely, not confirmed' with their
        # shares, and the experiments do not call them causes together (the report's table read 'partial (one
        # of the causes together)' under it)
        for e in together:
            e.details["together_not_confirmed"] = True
            e.sentence = alone[e.id][0]
            e.reason = e.reason.replace(
                "; kept as one of the causes together: taken out of today with those kept before it, ",
                "; taken out of today with the others, not confirmed together: with those kept before it, ",
            )


def _together_on_top(ctx: Context, e: Experiment) -> bool:
    """A variable or a package swap measured alone while others are kept now, and no worktree of HEAD to
    measure today with all of them applied (no commit was taken out): its own side B is not today without
    all of them, so it is tested again on top of those kept (:func:`_retest_together`). Two variables of 1 ms
    each in a 2 ms slowdown, no commit among the causes: the second one's residual could not be measured, it
    was not kept, and the report said 'Most likely, not confirmed'."""
    return (
        e.kind in (Kind.ENV, Kind.PACKAGE)
        and ctx.applied()
        and "code" not in ctx.cache
        and (e.details.get("on_top_of") or []) != _interventions(ctx)
    )


def _retest_together(
    inv: Investigation,
    ctx: Context,
    e: Experiment,
    emit: EventFn,
    interrupts: tuple[type[BaseException], ...],
) -> Experiment | None:
    """``e``'s A/B again on top of the parts kept together so far (:func:`_retest`, appended to the
    experiments), within the budget; the re-test when it shows a part of the slowdown again (its side B is then
    today with all of them applied), else None (``not-run`` with the reason, or its own outcome)."""
    r = _retest(ctx, e)
    inv.experiments.append(r)
    r.estimate_s = _retest_estimate(ctx, r)
    left = ctx.left_s()
    if r.estimate_s > left:
        r.outcome = Outcome.NOT_RUN
        r.reason = (
            f"budget spent: needs about {r.estimate_s:.0f} s, {max(left, 0):.0f} s of the "
            f"{inv.settings.budget_s:.0f} s budget left (raise --budget to test it on top of the causes "
            "kept together)"
        )
        return None
    n = len(inv.experiments)
    _execute(inv, ctx, r, emit, interrupts, n, n, left)
    emit("done", experiment=r)
    if (
        inv.interrupted
        or not _contributes(r, retest=True)
        or r.share is None
        or r.share.point is None
    ):
        return None
    return r


def _applied_state(ctx: Context) -> tuple[dict, list[str], dict, Any]:
    """The interventions applied now (variables, commits taken out, package swaps, where the residual is
    measured), to be put back by :func:`_restore_state`."""
    return dict(ctx.overlay), list(ctx.reverts), dict(ctx.packages), ctx.cache.get("code")


def _restore_state(ctx: Context, state: tuple[dict, list[str], dict, Any]) -> None:
    """Put back the interventions :func:`_applied_state` read (in place: the context's own objects)."""
    overlay, reverts, packages, code = state
    ctx.overlay.clear()
    ctx.overlay.update(overlay)
    ctx.reverts[:] = reverts
    ctx.packages.clear()
    ctx.packages.update(packages)
    if code is None:
        ctx.cache.pop("code", None)
    else:
        ctx.cache["code"] = code


def _not_together(
    inv: Investigation,
    ctx: Context,
    e: Experiment,
    earlier: Any,
    state: tuple[dict, list[str], dict, Any],
    recovered: float,
    kept: list[Experiment],
) -> None:
    """A part that recovers less than half its share once taken out of today after the parts ``kept`` before it
    (:func:`_keep_together`) is not one of the causes together: its intervention is undone (:func:`_restore_state`,
    a variable too, not only a commit), the residual is the one before it, and it reads ``inconclusive`` with
    what was measured. Its cost may depend on those taken out before it (a commit that doubles another's
    cost), or a later change may have undone it."""
    _restore_state(ctx, state)
    inv.residual = earlier
    e.details.pop("residual", None)
    after = ", ".join(_cause_name(k) for k in kept) or "nothing else"
    why = (
        f"taking it out of today's code after {after} recovers {recovered:.0%} of the slowdown, not the "
        f"{e.share.point:.0%} its A/B showed"
    )
    e.outcome = Outcome.INCONCLUSIVE
    e.details["not_today"] = True
    e.reason = (
        f"not confirmed as one of the causes of today's slowdown together: {why}; its cost may depend on "
        "what was taken out before it, or a later change undid it"
    )
    e.sentence = e.sentence.rsplit("; ", 1)[0] + f"; not confirmed for today: {why}"


def _landed_before_head(exp: Experiment) -> bool:
    """A commit or bisect experiment whose commit is not today's HEAD: its A/B (the commit against its parent)
    measured the step as it was when the commit landed, and later commits may have undone or replaced its
    effect."""
    head = exp.params.get("head") or exp.params.get("bad") or ""
    sha = _commit_of(exp)
    return exp.kind in (Kind.COMMIT, Kind.BISECT) and bool(sha) and sha != head


def _left_after(earlier: Any, now: Any) -> float | None:
    """The lower end of what is still there after an intervention, as a fraction of what was there before it
    (the residuals' unexplained shares; 100% before any cause was kept); None when not known."""
    if now is None or now is earlier or now.unexplained.low is None:
        return None
    before = 1.0 if earlier is None else earlier.unexplained.point
    if before is None or before <= 0:
        return None
    return now.unexplained.low / before


def _not_todays_cause(
    inv: Investigation, ctx: Context, exp: Experiment, earlier: Any, why: str
) -> None:
    """A commit that slowed the step when it landed (its A/B against its parent) is not confirmed as a cause
    of today's slowdown when taking it out of today's code does not recover what it recovered then, or cannot
    be tried: a later commit may have undone or replaced its effect. Its intervention is dropped, the residual
    is the one before it, and the experiment is ``inconclusive`` with both facts, so the plan goes on (a
    bisect it made unneeded runs)."""
    sha = _commit_of(exp)
    if sha in ctx.reverts:
        ctx.reverts.remove(sha)
    inv.residual = earlier
    exp.outcome = Outcome.INCONCLUSIVE
    exp.details["not_today"] = True
    exp.reason = (
        f"it slowed the step when it landed, but is not confirmed as a cause of today's slowdown: {why}; "
        "a later commit may have undone or replaced its effect"
    )
    exp.sentence = exp.sentence.rsplit("; ", 1)[0] + (
        f" when it landed; not confirmed for today: {why}"
    )


def _contributes(e: Experiment, retest: bool = False) -> bool:
    """Whether the A/B ``e`` showed a real part of the slowdown: ``confirmed``, ``partial``, or significantly
    faster with a share whose interval straddles ``--explains`` (``inconclusive`` only on how large a part:
    two commits of 1 ms each in a 2 ms slowdown read "recovers 50% (95% CI 50% to 50%) ... straddles 50%").
    Not a commit that slowed the step when it landed but is not today's cause, nor a re-test (unless
    ``retest``)."""
    if e.details.get("not_today") or ("retest_of" in e.params and not retest):
        return False
    if e.outcome in (Outcome.CONFIRMED, Outcome.PARTIAL):
        return True
    c, sh = e.comparison, e.share
    return (
        e.outcome is Outcome.INCONCLUSIVE
        and c is not None
        and c.verdict.value in ("faster", "small-faster")
        and sh is not None
        and sh.low is not None
        and sh.low > 0
    )


def _beyond(inv: Investigation) -> bool:
    """Whether the residual after the confirmed causes is still to be explained: not shown within noise (beyond
    the threshold, or not decided: issue 25 stops only when it is within noise or the budget is spent; the
    rest of the plan was skipped as 'not needed: ... account for the slowdown' with the residual undecided,
    and the accounting said 'no suspect left to test' with suspects untested)."""
    return inv.residual is not None and inv.residual.status != "within"


def _interventions(ctx: Context) -> list[str]:
    from forensics.investigate.experiments import _on_top

    return _on_top(ctx)


def _account(inv: Investigation, ctx: Context, exp: Experiment, emit: EventFn) -> None:
    """Keep ``exp``'s intervention and measure today with every confirmed intervention applied against the
    baseline (:func:`forensics.investigate.decide.residual`); the applied side is the experiment's own B side
    when that is exactly it (a variable restored or a package swapped back: their A/B runs on top of every
    earlier intervention; HEAD's parent when it is the only commit taken out), else HEAD in a private worktree
    with the confirmed commits reverted, the variables restored and the package overlays kept (for a variable
    or a package whose A/B did not run on top of exactly the interventions kept before it, once a commit was
    taken out; before that, none is measured and nothing is kept)."""
    from forensics.investigate.decide import baseline_bound, residual, versus_baseline
    from forensics.investigate.experiments import measure_revision

    s = ctx.subject
    if s is None:
        return
    base = ctx.baseline_values(s.name)
    today = ctx.today or list(exp.a)
    if not base or not today:
        return
    applied: list[float] | None = None

    def settled(xs: list[float]) -> bool:
        """More processes of the applied side only while the residual is undecided, and only while they
        can decide it: not once the baseline's own processes hold the CI above the threshold."""
        kw = {"threshold": ctx.threshold, "higher_is_better": s.higher_is_better}
        return (
            versus_baseline(base, xs, **kw)[0] != "undecided"
            or baseline_bound(base, xs, **kw) is not None
        )

    # the experiment's own B side is today with every intervention applied only when its A/B ran on top of
    # exactly the ones kept before it: causes kept together (_keep_together) were each measured alone, and a
    # variable's B side taken as today without three commits read "recovers -50%"
    own_b = (exp.details.get("on_top_of") or []) == _interventions(ctx)
    where = None
    if exp.kind in (Kind.ENV, Kind.PACKAGE):
        where = ctx.cache.get("code")  # (folder, today's commit) once a commit was taken out
    if exp.kind is Kind.ENV:
        ctx.overlay.update(exp.params["restore"])
        applied = list(exp.b) if own_b else None
    elif exp.kind in (Kind.COMMIT, Kind.BISECT):
        sha = _commit_of(exp)
        if sha:
            ctx.reverts.append(sha)
        head = exp.params.get("head") or exp.params.get("bad") or ""
        where = (exp.params["folder"], head) if head and exp.params.get("folder") else None
        if where is not None:
            ctx.cache["code"] = where  # where later residuals are measured
        if sha == head and len(ctx.reverts) == 1 and not ctx.cache.get("dirty") and own_b:
            applied = list(exp.b)  # HEAD's parent, the overlay applied: today without the commit
    elif exp.kind is Kind.PACKAGE and exp.params.get("overlay_dir"):
        ctx.packages[exp.params["name"]] = {
            "old": exp.params["old"],
            "today": str(exp.details.get("today_version") or "?"),
            "dir": exp.params["overlay_dir"],
        }
        applied = list(exp.b) if own_b else None
    else:
        where = None
    if applied is None and where is not None:
        from forensics.investigate.experiments import uncommitted

        emit("phase", text="measuring today with every confirmed intervention applied")
        applied = measure_revision(
            ctx,
            where[0],
            where[1],
            reverts=tuple(ctx.reverts),
            role="applied",
            decided=settled,
            mine=uncommitted(ctx),  # today's step runs them: so does today without the commits
        )
    if applied is None:
        return
    inv.residual = residual(
        base, today, applied, threshold=ctx.threshold, higher_is_better=s.higher_is_better
    )
    exp.details["residual"] = inv.residual.to_json()


def _cause_name(e: Experiment) -> str:
    if e.kind is Kind.ENV:
        return ", ".join(e.params.get("restore") or {}) or e.hypothesis
    sha = _commit_of(e)
    if sha:
        return f"commit {sha[:7]}"
    if e.kind is Kind.PACKAGE:
        return str(e.details.get("package") or e.hypothesis)
    return e.hypothesis


def _pct(x: float) -> str:
    """A share as a whole percentage, "0%" for one that rounds to zero from below (not "-0%")."""
    text = f"{x:.0%}"
    return "0%" if text == "-0%" else text


def _pct_range(share) -> str:
    if share is None or share.point is None:
        return "share unknown"
    if share.low is None or share.high is None or _pct(share.low) == _pct(share.high):
        # no interval, or one that is a point: '100%', not '100% (100% to 100%)'
        return _pct(share.point)
    return f"{_pct(share.point)} ({_pct(share.low)} to {_pct(share.high)})"


def _causes(inv: Investigation) -> list[Experiment]:
    """The confirmed experiments that are causes of their own: a group of variables whose one-by-one A/Bs
    said which is left out (the one-by-one experiment is the cause)."""
    narrowed = {e.params.get("depends_on") for e in inv.confirmed if e.kind is Kind.ENV}
    return [e for e in inv.confirmed if e.id not in narrowed]


def _left_partial(p: Experiment, r: Experiment) -> str:
    """The accounting's words for the partial cause ``p`` whose re-test ``r`` kept nothing: refuted, not
    decided, or not run (and why); each share is one that was measured."""
    on = p.details.get("on_top_of")
    first = f"{_cause_name(p)} (partial {'on top of ' + ', '.join(on) if on else 'alone'}: {_pct_range(p.share)})"
    if r.outcome is Outcome.REFUTED:
        return f"{first}: refuted on top of the confirmed causes ({_pct_range(r.share)})"
    if r.outcome is Outcome.INCONCLUSIVE:
        return (
            f"{first}: not decided on top of the confirmed causes ({_pct_range(r.share)}), so it is in the "
            "unexplained part"
        )
    why = r.details.get("not_retested") or r.outcome.value
    if r.reason.startswith("not needed"):  # nothing is left for it to be part of
        return f"{first}: not tested on top of the confirmed causes ({why})"
    return f"{first} is in the unexplained part: not tested on top of the confirmed causes ({why})"


def accounting(inv: Investigation) -> str:
    """``CUDA_LAUNCH_BLOCKING: 69% (68% to 74%); commit ebecb14: 30% (25% to 36%); unexplained: 1% (-4% to 6%);
    stopped: the residual is within noise`` ("" before any cause is confirmed).

    The confirmed causes first, then the partial causes kept (``NCCL_ALGO: partial, 30% (22% to 38%)``: the
    unexplained part is what is left after them), the unexplained part, then each partial cause whose re-test
    on top of the confirmed causes kept nothing, with what it measured or why it did not run
    (:func:`_left_partial`)."""
    together = _together(inv)  # in the order they were kept, then the causes confirmed alone
    conf = together + [e for e in _causes(inv) if e not in together]
    if not conf:
        return ""
    parts = [f"{_cause_name(e)}: {_pct_range(e.share)}" for e in conf]
    parts += [
        f"{_cause_name(e)}: partial, {_pct_range(e.share)}"
        for e in inv.experiments
        if e.details.get("accounted") == "partial"
    ]
    if inv.residual is not None:
        parts.append(f"unexplained: {_pct_range(inv.residual.unexplained)}")
    by_id = {e.id: e for e in inv.experiments}
    parts += [
        _left_partial(by_id[r.params["retest_of"]], r)
        for r in inv.experiments
        if r.params.get("retest_of") in by_id
        and r.outcome is not Outcome.CONFIRMED
        and r.details.get("accounted") != "partial"
    ]
    parts += _more_than_all(inv, conf) or _compounded(inv, conf)
    text = "; ".join(parts)
    if inv.stopped:
        text += f"; stopped: {inv.stopped}"
    return text


OVER_ALL = 1.1
"""A cause whose share's lower end is above this recovers more than the whole slowdown (110%: not a share of
100% read a little high)."""


COMPOUNDED = 0.9
"""The shares of the causes and the unexplained part adding up to less than this (90%) is said: the causes
compound, the rest of the slowdown is what they cost together."""


def _compounded(inv: Investigation, conf: list[Experiment]) -> list[str]:
    """The accounting's words when the causes' shares and the unexplained part add up to less than
    :data:`COMPOUNDED` of the slowdown: the causes compound (a commit that doubled the step's work and one that
    added 1 ms to it: the 1 ms costs 2 ms today). Each share is what taking that cause out measured, with the
    causes confirmed before it already out or, for a commit, when it landed; what they cost together is in no
    single share. Not said when the upper ends of the shares add up to 100% or more."""
    kept = conf + [e for e in inv.experiments if e.details.get("accounted") == "partial"]
    res = inv.residual
    if res is None or res.unexplained.point is None or len(kept) < 2:
        return []
    shares = [e.share for e in kept]
    if any(sh is None or sh.point is None or sh.high is None for sh in shares):
        return []
    total = sum(sh.point for sh in shares) + res.unexplained.point
    high = sum(sh.high for sh in shares) + (res.unexplained.high or res.unexplained.point)
    if total >= COMPOUNDED or high >= 1.0:
        return []
    return [
        f"the shares add up to {_pct(total)}: the causes compound (each was measured with the others out or "
        "not yet in), and the rest of the slowdown is what they cost together"
    ]


def _more_than_all(inv: Investigation, conf: list[Experiment]) -> list[str]:
    """The accounting's words for confirmed causes that recover more than the whole slowdown (the lower end of
    their share above :data:`OVER_ALL`): a commit that doubled the step, half of which a later commit won back
    (its A/B against its parent measured when it landed). The shares then do not add up to 100%, and the
    experiments that measured the step *faster* (a share whose upper end is below 0) are named with theirs."""
    over = [e for e in conf if e.share is not None and (e.share.low or 0) > OVER_ALL]
    if not over:
        return []
    faster = [
        f"{_cause_name(e)}: {_pct_range(e.share)}"
        for e in inv.experiments
        if e not in conf and e.share is not None and e.share.high is not None and e.share.high < 0
    ]
    return [
        f"{', '.join(_cause_name(e) for e in over)} recovers more than the whole slowdown: something else "
        "since the baseline made the step faster, so the shares do not add up to 100%"
        + (f" (measured faster: {', '.join(faster)})" if faster else "")
    ]


def _verdict(inv: Investigation) -> tuple[str, int]:
    """The leading sentence and the exit code (0 no regression, 1 explained, 3 not explained)."""
    if inv.regression is Regression.NO:
        return (f"No regression: {inv.regression_sentence}; no experiment was run.", EXIT_OK)
    top = inv.analysis.top
    if inv.settings.plan_only:
        runnable = [e for e in inv.experiments if e.outcome is Outcome.PLANNED]
        cost = sum(e.estimate_s for e in runnable)
        lead = f"most likely {top.id} ({top.summary})" if top else "nothing implicated"
        measured = (
            f"measured slower ({inv.regression_sentence})"
            if inv.regression is Regression.YES
            else f"{inv.regression_sentence}; if it did get slower"
        )
        return (
            f"Plan: {measured}: {lead}; {plural(len(runnable), 'experiment')}, about {cost:.0f} s.",
            EXIT_OK,
        )
    if inv.regression is Regression.UNKNOWN:
        said = any(  # the sentence already says what to do
            w in inv.regression_sentence
            for w in (
                "neither snapshot has a measurement",
                "nothing was measured now",
                "cut the noise instead",
                "run again with",
            )
        )
        return (
            f"Could not tell whether it got slower: {inv.regression_sentence.removeprefix('could not tell whether the step got slower: ')}; no experiment was run"
            + (
                "."
                if said
                else ": rerun with more processes (--snapshot-processes) on a quieter machine."
            ),
            EXIT_INCONCLUSIVE,
        )
    together = _together(inv)
    if together and inv.residual is not None and inv.residual.status == "within":
        # none explains it alone; each A/B was significantly faster, and today with all of them taken out is
        # within noise of the baseline
        return (
            f"Confirmed by experiment, {len(together)} causes together: {accounting(inv)}. Evidence: "
            + "; ".join(f"{e.hypothesis}: {e.sentence}" for e in together)
            + ".",
            EXIT_REGRESSION,
        )
    # one variable before a group; among causes accounted together, the largest share of the slowdown first
    conf = sorted(
        inv.confirmed,
        key=lambda e: (
            len(e.params.get("restore") or {}) > 1,
            -(e.share.point if e.share and e.share.point is not None else 0),
        ),
    )
    if conf:
        head = conf[0]
        also = [e for e in conf[1:]]
        shares = accounting(inv)
        causes = [e for e in conf if e in _causes(inv)]
        if (
            len(causes) > 1 and shares
        ):  # several causes: each with its share first, then what showed each
            return (
                f"Confirmed by experiment, {len(causes)} causes: {shares}. Evidence: "
                + "; ".join(f"{e.hypothesis}: {e.sentence}" for e in causes)
                + ".",
                EXIT_REGRESSION,
            )
        text = f"Confirmed by experiment: {head.hypothesis}: {head.sentence}."
        if also:
            text += (
                " Also confirmed: " + "; ".join(f"{e.hypothesis}: {e.sentence}" for e in also) + "."
            )
        if shares and inv.residual is not None:
            text += f" Shares of the slowdown: {shares}."
        return text, EXIT_REGRESSION
    if top is None and not inv.experiments and inv.regression is Regression.YES:
        listed = any(n.startswith("distributions installed or upgraded") for n in inv.notes)
        cleared = _cleared(inv.analysis)
        known = (
            f"what changed was checked and does not explain it ({'; '.join(cleared)})"
            if cleared
            else "nothing that changed is known to this machine"
        )
        return (  # say what was measured, and what the user can name
            f"Slower, not explained: {inv.regression_sentence}; {known}, so no experiment could run ("
            + ("the notes list recently installed distributions; " if listed else "")
            + "--since REV names the code it ran before, --wheelhouse DIR old packages).",
            EXIT_INCONCLUSIVE,
        )
    ran = [e for e in inv.experiments if e.outcome not in (Outcome.NOT_RUN, Outcome.PLANNED)]
    lead = f"{top.id} ({top.summary})" if top else "no hypothesis implicated"
    present = [e for e in ran if e.outcome is Outcome.STILL_PRESENT]
    if present:
        tail = f"; re-measured now, {present[0].hypothesis} is still present: {present[0].sentence}"
    elif ran:
        tail = "; experiments: " + "; ".join(f"{e.id} {e.outcome.value}" for e in ran)
    elif inv.experiments:
        tail = "; no experiment could run (see each one's reason)"
    else:  # none was planned: there is no reason to see
        tail = "; no experiment could be planned for it"
    if together:
        tail += f"; shares of the slowdown shown: {accounting(inv)}"
    if inv.interrupted:
        tail += f"; interrupted ({inv.interrupted}) before the plan was done"
    if (
        top is None and inv.regression is Regression.YES
    ):  # the measurement is the news, not a missing suspect
        return f"Slower, not explained: {inv.regression_sentence}; {lead}{tail}.", EXIT_INCONCLUSIVE
    return f"Most likely, not confirmed: {lead}{tail}.", EXIT_INCONCLUSIVE


def _cleared(analysis) -> list[str]:
    """``code.change: <summary>`` when a repository's HEAD moved and the ledger ruled code.change out (every
    new commit behaviour-free: documentation, comments), [] otherwise: a change that is known and checked is
    not "nothing known"."""
    from forensics.model import HypothesisStatus

    if analysis is None or not any(r.changed for r in analysis.repos):
        return []
    return [
        f"{h.id}: {h.summary}"
        for h in analysis.hypotheses
        if h.id == "code.change" and h.status is HypothesisStatus.RULED_OUT and h.summary
    ]


__all__ = ["Investigation", "Settings", "investigate", "check_settings"]
