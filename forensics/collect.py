"""Taking a snapshot: choose probes, run them, build the document.

This is the core function behind ``forensics snapshot``; it returns data and
never prints (the CLI renders it).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

from forensics import snapshot as snap
from forensics.errors import BadInputError
from forensics.model import ProbeStatus
from forensics.probe import ProbeResult
from forensics.redact import Redactor
from forensics.registry import load_probes
from forensics.runner import DEFAULT_TIMEOUT_S, run_probes


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, then back as it was (``gc.disable``).

    Loading and running the probes and building the document allocate many objects and
    almost no reference cycles; the collections they trigger cost interpreter time that every
    probe thread waits for (docs/benchmarks.md, 'measured phase by phase'). Not held
    over ``--bench``, which runs for minutes.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def take_snapshot(
    *,
    label: str | None = None,
    only: Iterable[str] = (),
    skip: Iterable[str] = (),
    options: dict[str, Any] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    redact: bool = True,
    on_done: Callable[[str, ProbeResult], None] | None = None,
    bench: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
    extra_time: bool = True,
) -> dict[str, Any]:
    """Run the installed probes and return a snapshot document.

    Args:
        label: free text stored in the snapshot ("before", "after-pull").
        only: run only these probes (names as in ``forensics probes``).
        skip: do not run these probes.
        options: passed to every probe (``repo``, ``sample_s``, ``deep``...).
        timeout_s: per-probe timeout, seconds.
        redact: replace secrets (default); ``False`` is ``--no-redact``.
        on_done: progress callback, called as each probe finishes.
        bench: a benchmark document to embed (``forensics snapshot --bench``), or a
            function that runs one: it is called after the probes, so they see the
            machine as it was before the benchmark (no load average, no processes
            of ours on the GPU).
        extra_time: let probes take the extra time they ask for beyond ``timeout_s``
            (:meth:`forensics.probe.Probe.extra_timeout_s`: a launcher, ``--nccl-init``'s
            ranks, a sampling window); ``False`` when the user set the timeout, which then
            bounds every probe.

    While the probes load and run and the document is built, two settings of the whole process
    are changed and then put back as they were, also on an exception or Ctrl-C: the cyclic
    garbage collector is off (:func:`collector_paused`) and the interpreter lock changes hands
    every 0.5 ms (:func:`forensics.runner.run_probes`). A program calling this from one of its
    threads sees them in its other threads for that time (well under a second by default, up to
    the probes' timeouts), never after.

    Raises:
        BadInputError: ``only``/``skip`` names a probe that is not installed,
            or the timeout is not positive.
    """
    only, skip = list(only), list(skip)
    if timeout_s <= 0:
        raise BadInputError(f"--timeout must be positive, got {timeout_s:g}")
    with collector_paused():  # loading and running the probes
        loaded, failures = load_probes()
        known = {p.name for p in loaded} | {f.name for f in failures}
        for name in only + skip:
            if name not in known:
                raise BadInputError(
                    f"no probe named {name!r}; installed: {', '.join(sorted(known)) or 'none'} "
                    "(see 'forensics probes')"
                )
        chosen = [p.probe for p in loaded if (not only or p.name in only) and p.name not in skip]
        chosen_failures = [
            f for f in failures if (not only or f.name in only) and f.name not in skip
        ]
        if not chosen and not chosen_failures:
            raise BadInputError(
                "no probe left to run: --probe/--skip exclude them all (see 'forensics probes')"
            )
        redactor = Redactor(enabled=redact)
        results = run_probes(
            chosen,
            options or {},
            timeout_s=timeout_s,
            redactor=redactor,
            on_done=on_done,
            extra_time=extra_time,
        )
    if callable(bench):
        bench = bench()
    for f in chosen_failures:
        if (
            f.name in results
        ):  # a second distribution claiming a loaded probe's name: keep the loaded one
            continue
        results[f.name] = ProbeResult(
            ProbeStatus.FAILED, reason=f"could not load probe from {f.distribution}: {f.error}"
        )
    opts = dict(options or {})
    opts.update({"timeout_s": timeout_s, "probes": only or None, "skip": skip or None})
    with collector_paused():
        return snap.build(results, label=label, options=opts, redactor=redactor, bench=bench)
