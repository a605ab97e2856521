"""Counted nouns for every sentence forensics prints: "1 suspect", "2 rounds", "0 processes"; and the unit a
step's metric name says ("step_s": seconds), for every figure printed with it.

In the core and dependency-free, so every package that words a sentence (the diff, bisect,
investigate, the probes' judges, the renderers) can use it instead of writing "file(s)" or a
bare "s", without reaching into ``render``.
"""

from __future__ import annotations

import re


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word``, the plural form unless ``n`` is 1.

    Args:
        n: the count.
        word: the singular ("suspect", "untracked file").
        many: the plural when it is not ``word + "s"`` ("processes", "repositories").

    Returns:
        e.g. ``"1 suspect"``, ``"3 suspects"``, ``"0 processes"``.
    """
    return f"{n} {word if n == 1 else (many or word + 's')}"


_METRIC_UNIT = re.compile(r"(?:^|[._-])(ms|s|sec|secs|seconds|us|usec|ns)$", re.I)


def metric_time_unit(metric: str | None) -> str:
    """The time unit a metric's name ends in (``step_s`` -> ``s``, ``latency_us`` -> ``us``, ``step_ms`` or
    a name without one -> ``ms``, the unit the step's results are kept in). From the name only.

    The unit of a time result whose unit the user did not give (``forensics bench --cmd`` without
    ``--unit``, ``forensics investigate``): the step prints its values in the unit its name says.
    """
    m = _METRIC_UNIT.search(metric or "")
    unit = m.group(1).lower() if m else "ms"
    return {"sec": "s", "secs": "s", "seconds": "s", "usec": "us"}.get(unit, unit)
