"""Runs probes concurrently, each under its own timeout (DESIGN section 4).

Each probe runs in its own daemon thread. The runner waits for each one until
its deadline; a probe still running then is recorded as ``failed`` with
"timed out after N s" and its thread is abandoned (a thread blocked in a hung
NVML or driver call cannot be stopped; being a daemon it cannot keep the
process alive either). Every other probe's data is kept.

Every child process a probe's thread starts (its own ``subprocess`` calls,
GitPython's ``git`` commands) runs in its own process group, recorded against
the probe (:func:`forensics.procgroup.probe_children`). When the probe's time
is up the runner ends those groups, so a hung ``git`` neither keeps the probe's
thread blocked nor outlives forensics; children a probe leaves running when it
returns are ended by its own thread then (the others still collecting), and
any still running once every probe is done are ended too. Probes that shell out still put their own,
shorter timeouts on subprocesses, to report what timed out.

While the probes run, a thread holding the interpreter lock gives it up every
:data:`SWITCH_INTERVAL_S` instead of Python's default 5 ms (``sys.setswitchinterval``,
restored when the last of overlapping runs ends): the probes mostly wait on children and on
NVML's lane threads, and each hand-off (a call queued to a lane, a child's output read) would
otherwise wait behind another probe's CPU work (its imports, parsing) for up to 5 ms.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from forensics.errors import ProbeUnavailable
from forensics.model import ProbeStatus
from forensics.probe import Probe, ProbeContext, ProbeResult
from forensics.procgroup import ChildGroups, probe_children
from forensics.redact import Redactor

DEFAULT_TIMEOUT_S = 10.0
SWITCH_INTERVAL_S = 0.0005  # seconds between the interpreter lock's hand-offs while probes run

_switch_lock = threading.Lock()
_switch_runs = (
    0  # run_probes calls now inside _short_switch_interval (several threads may each run one)
)
_switch_saved = 0.005  # the interval to restore when the last of them is done


@contextmanager
def _short_switch_interval() -> Iterator[None]:
    """``sys.setswitchinterval(SWITCH_INTERVAL_S)`` (never raising the interval) for the block, then the
    caller's interval back. The setting is the whole process's: when runs overlap (a program taking
    snapshots from two threads), the interval from before the first is restored when the last ends."""
    global _switch_runs, _switch_saved
    with _switch_lock:
        if _switch_runs == 0:
            _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_saved, SWITCH_INTERVAL_S))
        _switch_runs += 1
    try:
        yield
    finally:
        with _switch_lock:
            _switch_runs -= 1
            if _switch_runs == 0:
                sys.setswitchinterval(_switch_saved)


@dataclass
class _Slot:
    probe: Probe
    ctx: ProbeContext
    thread: threading.Thread
    started: float
    result: ProbeResult | None = None
    children: ChildGroups | None = None


def _run_one(slot: _Slot) -> None:
    with probe_children(slot.children or ChildGroups()):
        _collect_one(slot)
    if slot.children is not None:
        # What the probe left running (GitPython's persistent ``git cat-file``) is stopped now, in
        # the probe's own thread beside the probes still running, not after the last one is done.
        slot.children.end()


def _collect_one(slot: _Slot) -> None:
    probe, ctx = slot.probe, slot.ctx
    t0 = time.perf_counter()
    try:
        reason = probe.available(ctx)
        if reason:
            raise ProbeUnavailable(reason)
        data = probe.collect(ctx)
        if not isinstance(data, dict):
            raise TypeError(f"collect() returned {type(data).__name__}, not dict")
        status = ProbeStatus.PARTIAL if ctx.errors else ProbeStatus.OK
        slot.result = ProbeResult(status, time.perf_counter() - t0, data, list(ctx.errors))
    except ProbeUnavailable as exc:
        slot.result = ProbeResult(
            ProbeStatus.UNAVAILABLE,
            time.perf_counter() - t0,
            reason=str(exc) or "not available here",
        )
    except BaseException as exc:  # noqa: BLE001 - a probe's crash is data, not the snapshot's crash
        slot.result = ProbeResult(
            ProbeStatus.FAILED,
            time.perf_counter() - t0,
            errors=list(ctx.errors),
            reason=f"{type(exc).__name__}: {exc}",
        )


def run_probes(
    probes: list[Probe],
    options: dict[str, Any] | None = None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    redactor: Redactor | None = None,
    on_done: Callable[[str, ProbeResult], None] | None = None,
    extra_time: bool = True,
) -> dict[str, ProbeResult]:
    """Run ``probes`` concurrently and return ``{name: ProbeResult}`` in input order.

    Threads start in input order, those of probes with ``start_first`` before the rest.

    Args:
        probes: probe instances (names must be unique).
        options: probe options by name (:func:`forensics.options.probe_options`), passed to every
            probe as ``ctx.options``; undeclared names raise :class:`KeyError`.
        timeout_s: per-probe wall-clock budget, seconds. A probe may ask for
            more through :meth:`forensics.probe.Probe.extra_timeout_s` (e.g. a
            sampling window it was told to take, a launcher it runs).
        redactor: shared redactor (one per snapshot).
        on_done: called as each probe finishes (for progress display).
        extra_time: ``False``: ``timeout_s`` is each probe's whole budget, no probe gets more
            (``forensics snapshot --timeout S`` given by the user bounds every probe).

    Never raises for a probe's failure: it becomes that probe's ``failed`` result.
    """
    from forensics.options import probe_options

    redactor = redactor or Redactor()
    options = probe_options(**(options or {}))
    slots: list[_Slot] = []
    for probe in probes:
        try:
            extra = max(0.0, float(probe.extra_timeout_s(options))) if extra_time else 0.0
        except Exception:  # a third-party probe's bug costs it the extra time, nothing else
            extra = 0.0
        ctx = ProbeContext(options, redactor, timeout_s + extra)
        slot = _Slot(probe, ctx, threading.Thread(target=lambda: None), 0.0, children=ChildGroups())
        slot.thread = threading.Thread(
            target=_run_one, args=(slot,), name=f"probe-{probe.name}", daemon=True
        )
        slots.append(slot)
    try:
        with _short_switch_interval():
            for slot in sorted(slots, key=lambda s: not getattr(s.probe, "start_first", False)):
                slot.started = time.perf_counter()
                slot.thread.start()
            results = _wait_all(slots, on_done)
    finally:  # also on Ctrl-C: no probe's child outlives the run
        for slot in slots:
            if slot.children is not None:
                slot.children.close()
    return {s.probe.name: results[s.probe.name] for s in slots}


def _wait_all(
    slots: list[_Slot], on_done: Callable[[str, ProbeResult], None] | None
) -> dict[str, ProbeResult]:
    results: dict[str, ProbeResult] = {}
    pending = list(slots)
    while pending:
        # Wait on whichever probe has the nearest deadline.
        pending.sort(key=lambda s: s.started + s.ctx.timeout_s)
        slot = pending.pop(0)
        remaining = slot.started + slot.ctx.timeout_s - time.perf_counter()
        slot.thread.join(max(0.0, remaining))
        if slot.thread.is_alive() or slot.result is None:
            ended = slot.children.close() if slot.children is not None else 0
            reason = f"timed out after {slot.ctx.timeout_s:g} s"
            if ended:
                reason += f" ({ended} child process{'es' if ended > 1 else ''} stopped)"
            slot.result = ProbeResult(
                ProbeStatus.FAILED,
                time.perf_counter() - slot.started,
                errors=list(slot.ctx.errors),
                reason=reason,
            )
        results[slot.probe.name] = slot.result
        if on_done:
            on_done(slot.probe.name, slot.result)
    return results
