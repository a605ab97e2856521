"""Finding probes: the entry-point group ``forensics.probes``.

Built-in probes are registered in setup.cfg under this group exactly like a
third-party probe, so this module knows no probe by name. A broken entry point
(import error, wrong type, duplicate name) does not stop the others: it comes
back as a :class:`LoadFailure` that the runner records as ``failed`` with the
distribution that provided it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import metadata

from forensics.probe import Probe
from forensics.readers import name_and_version

GROUP = "forensics.probes"
NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass
class LoadedProbe:
    """A probe instance and the distribution ("name version") that provided it."""

    name: str
    probe: Probe
    distribution: str


@dataclass
class LoadFailure:
    """An entry point that could not be turned into a probe, and why."""

    name: str
    distribution: str
    error: str


def _dist_label(ep: metadata.EntryPoint, cache: dict[int, str] | None = None) -> str:
    """ "name version" of the distribution that registered ``ep``: METADATA's ``Name`` as the project
    spells it and the version from its ``<name>-<version>.dist-info`` folder name
    (:func:`forensics.readers.name_and_version` with ``normalised=False``: the header lines only, not
    the README after them), else its parsed METADATA; once per distribution when ``cache`` is given."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "unknown distribution"
    if cache is not None and id(dist) in cache:
        return cache[id(dist)]
    name, version = name_and_version(dist, normalised=False)
    label = f"{name or 'unnamed distribution'} {version}".strip()
    if cache is not None:
        cache[id(dist)] = label
    return label


def _instantiate(ep: metadata.EntryPoint) -> Probe:
    obj = ep.load()
    probe = obj() if isinstance(obj, type) else obj
    if not isinstance(probe, Probe):
        raise TypeError(f"{ep.value} is not a forensics.probe.Probe")
    if probe.name != ep.name:
        raise ValueError(
            f"probe name {probe.name!r} does not match its entry-point name {ep.name!r}"
        )
    if not NAME_RE.match(ep.name):
        raise ValueError(f"probe name {ep.name!r} is not lowercase snake_case")
    if not probe.description:
        raise ValueError(f"probe {ep.name!r} has no description")
    return probe


def load_probes(group: str = GROUP) -> tuple[list[LoadedProbe], list[LoadFailure]]:
    """Load every probe registered under ``group``, sorted by name.

    Returns:
        (probes that loaded, entry points that failed). Duplicate names: the
        first distribution wins, later ones are failures.
    """
    loaded: dict[str, LoadedProbe] = {}
    failures: list[LoadFailure] = []
    eps = sorted(metadata.entry_points(group=group), key=lambda e: e.name)
    labels: dict[
        int, str
    ] = {}  # the entry points of one distribution share its Distribution object
    for ep in eps:
        dist = _dist_label(ep, labels)
        if ep.name in loaded:
            failures.append(
                LoadFailure(
                    ep.name,
                    dist,
                    f"duplicate probe name (already provided by {loaded[ep.name].distribution})",
                )
            )
            continue
        try:
            probe = _instantiate(ep)
        except Exception as exc:  # a third-party probe may fail in any way; record it, keep going
            failures.append(LoadFailure(ep.name, dist, f"{type(exc).__name__}: {exc}"))
            continue
        loaded[ep.name] = LoadedProbe(ep.name, probe, dist)
    return list(loaded.values()), failures


@functools.lru_cache(maxsize=None)
def _group_entry_points(group: str) -> tuple[metadata.EntryPoint, ...]:
    """The entry points of ``group``, read once per process (``importlib.metadata.entry_points``: every
    installed distribution's entry_points.txt, ~200 of them in a torch environment)."""
    return tuple(metadata.entry_points(group=group))


def find_probe_class(name: str, group: str = GROUP) -> Probe | None:
    """Return a new instance of the probe registered as ``name`` (for ``judge`` and field types at diff
    and report time), or ``None``.

    The group's entry points are read once per process: ``fleet report`` checks the field types of
    each of 1,000 node snapshots, and reading them again for each probe of each snapshot dominated it
    (docs/benchmarks.md, 'Plain node snapshots').
    """
    for ep in _group_entry_points(group):
        if ep.name == name:
            try:
                return _instantiate(ep)
            except Exception:
                return None
    return None
