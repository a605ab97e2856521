"""The options a probe may read, declared once (as sos report's ``PluginOpt``).

Commands set them from their flags (``snapshot --repo``, ``--sample``,
``--deep``, ``--nccl-init``, ``--launcher``; ``env --select``) with
:func:`probe_options`, and probes read them with
:meth:`forensics.probe.ProbeContext.option`. A name that is not in
:data:`PROBE_OPTIONS` is a bug and raises :class:`KeyError` at once, instead of
reading as "not set". Third-party probes read the same table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProbeOption:
    """One probe option.

    Attributes:
        name: the key probes read (``sample_s``).
        kind: the type of a set value (``str``, ``float``, ``bool``, ``tuple``).
        default: the value when the command did not set it (None: unset).
        flag: the command-line flag that sets it (``--sample``), for messages and docs.
        help: what it does, one line.
    """

    name: str
    kind: type
    default: Any
    flag: str
    help: str


PROBE_OPTIONS: dict[str, ProbeOption] = {
    o.name: o
    for o in (
        ProbeOption(
            "repo",
            str,
            None,
            "--repo",
            "the git repository to record (git probe; default: the one holding the current folder)",
        ),
        ProbeOption(
            "sample_s",
            float,
            None,
            "--sample",
            "seconds of GPU samples taken under the current load (gpu probe; default: one reading)",
        ),
        ProbeOption(
            "deep",
            bool,
            False,
            "--deep",
            "also import torch in a child process for the versions it loads (libs and nccl_env probes)",
        ),
        ProbeOption(
            "nccl_init",
            bool,
            False,
            "--nccl-init",
            "start two NCCL ranks and record the transport and the variables NCCL read (nccl_env probe)",
        ),
        ProbeOption(
            "launcher",
            str,
            None,
            "--launcher",
            "start the environment workers through this launcher command (nccl_env probe)",
        ),
        ProbeOption(
            "env_select",
            tuple,
            None,
            "",
            "variable names and prefixes recorded (nccl_env probe; default: NCCL_, CUDA_, TORCH_ ...)",
        ),
        ProbeOption(
            "env_select_extra",
            tuple,
            (),
            "--select",
            "variable names and prefixes recorded in addition to the default selection (nccl_env probe)",
        ),
    )
}


def probe_options(**values: Any) -> dict[str, Any]:
    """The options dict handed to probes: every declared option, set ones from ``values``.

    Values of None take the option's default; lists become tuples.

    Raises:
        KeyError: a name that :data:`PROBE_OPTIONS` does not declare.
        TypeError: a value that is not of the option's kind.
    """
    out = {name: opt.default for name, opt in PROBE_OPTIONS.items()}
    for name, value in values.items():
        opt = declared(name)
        if value is None:
            continue
        if opt.kind is tuple and isinstance(value, list):
            value = tuple(value)
        if opt.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, opt.kind):
            raise TypeError(
                f"probe option {name!r} takes {opt.kind.__name__}, got {type(value).__name__}"
            )
        out[name] = value
    return out


def declared(name: str) -> ProbeOption:
    """The declaration of option ``name``.

    Raises:
        KeyError: ``name`` is not a declared probe option (a typo in a probe or a command).
    """
    try:
        return PROBE_OPTIONS[name]
    except KeyError:
        raise KeyError(
            f"{name!r} is not a declared probe option (forensics.options.PROBE_OPTIONS)"
        ) from None
