"""Option groups declared once for several commands.

:func:`step_options` is the user's step as ``bench``, ``bisect``, ``bisect-step`` and
``investigate`` take it (``--cmd``, ``--callable``, ``--metric``, ``--metric-regex``,
``--unit``, ``--higher-is-better``, ``--processes``, ``--timeout``, ``--threshold``). The
command receives one :class:`forensics.step.spec.StepOptions` as ``step`` (and ``threshold``,
the text as given, for :func:`forensics.cli.common.parse_threshold`).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import click

from forensics.cli.types import POSITIVE

_STEP_FIELDS = (
    "cmd",
    "target",
    "metric",
    "metric_regex",
    "unit",
    "higher_is_better",
    "processes",
    "timeout_s",
)


def step_options(
    *,
    cmd_help: str,
    callable_help: str,
    processes_type: Any = int,
    processes_default: int = 6,
    processes_help: str = "Fresh processes per side.",
    timeout_default: float = 300.0,
    timeout_help: str = "Seconds one process of your step may run.",
    threshold_help: str = "Practical threshold: smaller changes are 'same'.",
    unit: bool = False,
    between: tuple[Callable, ...] = (),
) -> Callable:
    """Add the step options to a click command and hand it ``step`` (a ``StepOptions``) instead of them.

    Args:
        cmd_help, callable_help: what ``--cmd`` and ``--callable`` run for this command.
        processes_type, processes_default, processes_help: ``--processes`` (a click type: the range the
            command accepts).
        timeout_default, timeout_help: ``--timeout``, seconds.
        threshold_help: ``--threshold`` (default 5%; the command parses it).
        unit: also declare ``--unit``.
        between: the command's own options shown after ``--callable`` in ``--help`` (bisect's
            ``--callable-timer`` and ``--setup``).
    """
    options = [
        click.option("--cmd", metavar="COMMAND", help=cmd_help),
        click.option("--callable", "target", metavar="MOD:FN", help=callable_help),
        *between,
        click.option(
            "--metric", help="With --cmd: the metric name to read (default: the first seen)."
        ),
        click.option(
            "--metric-regex",
            help="With --cmd: a regex whose group 1 (or group 'value') is the number.",
        ),
        *(
            [
                click.option(
                    "--unit",
                    default=None,
                    help="Unit of your metric (default: the time unit its name ends in, step_s: s, "
                    "else ms; 'per s' with --higher-is-better).",
                )
            ]
            if unit
            else []
        ),
        click.option(
            "--higher-is-better",
            is_flag=True,
            help="Your metric is a throughput (tok/s), not a time.",
        ),
        click.option("--threshold", default="5%", show_default=True, help=threshold_help),
        click.option(
            "--processes",
            type=processes_type,
            default=processes_default,
            show_default=True,
            help=processes_help,
        ),
        click.option(
            "--timeout",
            "timeout_s",
            type=POSITIVE,
            default=timeout_default,
            show_default=True,
            help=timeout_help,
        ),
    ]

    def decorate(f: Callable) -> Callable:
        from forensics.step.spec import StepOptions

        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("unit", None)
            step = StepOptions(**{name: kwargs.pop(name) for name in _STEP_FIELDS})
            return f(*args, step=step, **kwargs)

        for opt in reversed(options):
            wrapper = opt(wrapper)
        return wrapper

    return decorate
