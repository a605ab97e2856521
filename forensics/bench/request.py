"""One ``forensics bench`` run as a request: checked, dispatched, its documents returned.

:class:`BenchRequest` holds what the command's options say; :func:`run_bench` checks it
(:meth:`BenchRequest.check`), runs the canary (:func:`forensics.bench.session.run_canary`) or
the user's step (:func:`forensics.bench.user.measure_user`, ``measure_user_ab`` with a side B),
and returns the bench documents, swept for secrets (:func:`forensics.bench.document.redact`).
Progress goes to the caller's ``progress`` (see :data:`ProgressFn`); nothing is printed.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager

from forensics.errors import BadInputError
from forensics.step.spec import StepOptions

ProgressFn = Callable[[int, str, Callable[..., str]], ContextManager[Callable[..., None]]]
"""``progress(total, what, last)``: a context manager over ``total`` fresh processes that yields the
``on_process`` callback; ``last(*args)`` (the callback's own arguments) describes the last process."""

CANARY_OPTIONS = (
    "device",
    "tp",
    "layers",
    "hidden",
    "heads",
    "ffn",
    "draft_tokens",
    "batch",
    "kv_len",
    "blocks",
    "block_ms",
    "warmup_s",
    "cuda_graph",
    "graph_timeout_s",
)
"""The canary's settings a request may give (:func:`forensics.bench.session.canary_config`; None: its default)."""


@dataclass
class BenchRequest:
    """What ``forensics bench`` was asked to run.

    Attributes:
        step: the user's step (none given: the canary runs), processes per side, timeout.
        budget_s: wall seconds per side; no new process starts past it.
        canary: the canary's settings (:data:`CANARY_OPTIONS`; None values are its defaults).
        eager: launch the canary's step eagerly (the ``eager`` variant).
        env: variables set for side A's processes.
        b_env: side B's variables (a None value unsets the variable); empty: no side B from the environment.
        b_cmd: side B's command (with ``step.cmd``).
        b_output: where side B is written (required with a side B).
        label: free text stored in the documents.
        redact: sweep the documents for secrets.
    """

    step: StepOptions
    budget_s: float = 75.0
    canary: dict[str, Any] = field(default_factory=dict)
    eager: bool = False
    env: dict[str, str] = field(default_factory=dict)
    b_env: dict[str, str | None] = field(default_factory=dict)
    b_cmd: str | None = None
    b_output: Path | None = None
    label: str = ""
    redact: bool = True

    @property
    def two_sided(self) -> bool:
        """A side B runs interleaved with side A and the two are compared."""
        return bool(self.b_env) or self.b_cmd is not None

    def check(self) -> None:
        """Refuse what cannot run, before anything starts (one line each, in this order).

        Raises:
            BadInputError: a bad step (:meth:`forensics.step.spec.StepOptions.check`); fewer than one
                process; a timeout or budget not in (0, 1 day]; ``b_cmd`` without ``cmd``, or empty; a
                side B without ``b_output``, or ``b_output`` without a side B; the CUDA graph and eager variants together.
        """
        s = self.step
        s.check()
        if s.processes < 1:
            raise BadInputError(
                f"must be at least 1, got {s.processes} (5 or more to reach a verdict)",
                option="processes",
            )
        if not 0 < s.timeout_s <= 86400 or not 0 < self.budget_s <= 86400:
            raise BadInputError(
                "{timeout_s} and {budget_s} must be positive numbers of seconds",
                names=("timeout_s", "budget_s"),
            )
        if self.b_cmd is not None and not s.cmd:
            raise BadInputError(
                "{b_cmd} is side B's version of {cmd}; give {cmd} too", names=("b_cmd", "cmd")
            )
        if self.b_cmd is not None and not self.b_cmd.strip():
            raise BadInputError("is empty; give side B's command", option="b_cmd")
        if self.two_sided and not self.b_output:
            raise BadInputError(
                "{b_env_pairs}, {b_unset} and {b_cmd} need {b_output} PATH for side B's bench file",
                names=("b_env_pairs", "b_unset", "b_cmd", "b_output"),
            )
        if self.b_output and not self.two_sided:
            raise BadInputError(
                "{b_output} is side B's bench file, and no side B was asked for; add {b_env_pairs}, "
                "{b_unset} or {b_cmd} (or leave {b_output} out)",
                names=("b_output", "b_env_pairs", "b_unset", "b_cmd"),
            )
        if self.canary.get("cuda_graph") and self.eager:
            raise BadInputError(
                "{cuda_graph} and {eager} exclude each other", names=("cuda_graph", "eager")
            )


def _no_progress(total: int, what: str, last: Callable[..., str]):
    return contextlib.nullcontext(lambda *args: None)


def run_bench(req: BenchRequest, progress: ProgressFn = _no_progress) -> list[dict[str, Any]]:
    """Check ``req`` and run it: the user's step (one side, or A and B interleaved) or the canary.

    Returns:
        the bench documents: side A, and side B when :attr:`BenchRequest.two_sided`; swept for
        secrets unless ``req.redact`` is False.

    Raises:
        BadInputError: see :meth:`BenchRequest.check`; bad canary settings
            (:func:`forensics.bench.session.canary_config`); a step that cannot run.
    """
    from forensics.bench import document

    req.check()
    s = req.step
    common = dict(
        metric=s.metric,
        metric_regex=s.metric_regex,
        unit=s.unit,
        higher_is_better=s.higher_is_better,
        processes=s.processes,
        budget_s=req.budget_s,
        timeout_s=s.timeout_s,
        label=req.label,
    )
    if s.given and req.two_sided:
        from forensics.bench.user import measure_user_ab

        with progress(
            s.processes * 2,
            "your step, A and B interleaved",
            lambda side, i, rec: f"{side} #{i + 1}: {rec['value']:.4g}",
        ) as on_process:
            docs = measure_user_ab(
                s.cmd,
                s.target,
                b_cmd=req.b_cmd,
                env=req.env,
                b_env=req.b_env,
                on_process=on_process,
                **common,
            )
    elif s.given:
        from forensics.bench.user import measure_user

        with progress(
            s.processes, "your step", lambda i, rec: f"#{i + 1}: {rec['value']:.4g}"
        ) as on_process:
            docs = [
                measure_user(
                    s.cmd,
                    s.target,
                    blocks=req.canary.get("blocks"),
                    block_ms=req.canary.get("block_ms"),
                    on_process=on_process,
                    **common,
                )
            ]
    else:
        from forensics.bench.session import canary_config, run_canary

        cfg = canary_config({**req.canary, "variant": "eager" if req.eager else None})
        with progress(
            s.processes * (2 if req.b_env else 1),
            f"canary {cfg.device} tp={cfg.tp}",
            lambda side, i, result: f"{side.name} #{i + 1}: {result['wall_s']:.1f} s",
        ) as on_process:
            docs = run_canary(
                cfg,
                processes=s.processes,
                budget_s=req.budget_s,
                env=req.env,
                b_env=req.b_env or None,
                label=req.label,
                on_process=on_process,
            )
    return [document.redact(d, enabled=req.redact) for d in docs]
