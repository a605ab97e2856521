"""The user's step as ``bench``, ``bisect`` and ``investigate`` are given it: one record, checked once.

:class:`StepOptions` holds what those commands' shared options say (``--cmd``, ``--callable``,
``--metric``, ``--metric-regex``, ``--unit``, ``--higher-is-better``, ``--processes``,
``--timeout``); the CLI declares the options once (``forensics.cli.options.step_options``)
and passes the record to the core, which checks it with :meth:`StepOptions.check`.
Messages name the parameters, not the flags (:class:`forensics.errors.BadInputError`).
"""

from __future__ import annotations

from dataclasses import dataclass

from forensics.errors import BadInputError


def check_metric_name(metric: str | None) -> None:
    """Refuse an empty ``--metric`` (an unset shell variable) before the step runs: it read as no metric
    asked for and failed only after a whole run ('printed no JSON line like ...').

    Raises:
        BadInputError: ``metric`` is ``""`` or blank.
    """
    if metric is not None and not metric.strip():
        raise BadInputError(
            "is empty; give the metric name your step prints (e.g. step_ms), or leave it out to read the "
            "first one seen",
            option="metric",
        )


@dataclass(frozen=True)
class StepOptions:
    """The user's step and how many fresh processes measure it.

    Attributes:
        cmd: a shell command printing ``{"metric": ..., "value": ...}`` JSON lines, or None.
        target: ``package.module:function`` (``--callable``), or None.
        metric: with ``cmd``, the metric name to read (None: the first seen).
        metric_regex: with ``cmd``, a regex whose group 1 (or group ``value``) is the number.
        unit: the metric's unit (None: ms, or ``per s`` with ``higher_is_better``).
        higher_is_better: the metric is a throughput (tok/s), not a time.
        processes: fresh processes per side.
        timeout_s: wall seconds one process may run.
    """

    cmd: str | None = None
    target: str | None = None
    metric: str | None = None
    metric_regex: str | None = None
    unit: str | None = None
    higher_is_better: bool = False
    processes: int = 6
    timeout_s: float = 300.0

    @property
    def given(self) -> bool:
        """A step of the user's is given (a command or a callable)."""
        return bool(self.cmd or self.target)

    def check(self) -> None:
        """Refuse what cannot describe one step, before anything runs (one line each).

        Raises:
            BadInputError: both a command and a callable; an empty command or metric name; a metric name or
                regex without a command; a metric regex that does not compile, has no group or matches
                the empty string (:func:`forensics.step.command.compile_metric_regex`).
        """
        if self.cmd and self.target:
            raise BadInputError("give either {cmd} or {target}, not both", names=("cmd", "target"))
        if self.cmd is not None and not self.cmd.strip():
            raise BadInputError("is empty; give the command that runs your step", option="cmd")
        check_metric_name(self.metric)
        if (self.metric or self.metric_regex) and not self.cmd:
            raise BadInputError(
                "{metric} and {metric_regex} read the output of {cmd}; give {cmd} too",
                names=("metric", "metric_regex", "cmd"),
            )
        if self.metric_regex is not None:  # '' too: it matches the empty string
            from forensics.step.command import compile_metric_regex

            compile_metric_regex(self.metric_regex)
