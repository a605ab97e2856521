"""The probe contract (DESIGN section 4) and the context a probe collects with.

A probe is one class in one module of ``probes/`` (or of any installed
distribution), registered under the entry-point group ``forensics.probes``;
the entry-point name is the probe's ``name`` and its snapshot section key.

Contract:

- ``name``: the section key, lowercase snake_case.
- ``description``: one line for ``forensics probes``.
- ``available(ctx) -> str | None``: cheap check; a string is the reason it does
  not apply here. ``collect`` may also raise :class:`ProbeUnavailable`.
- ``collect(ctx) -> dict``: JSON-serialisable data; field-level failures are
  :func:`forensics.model.missing` values plus ``ctx.error(...)`` records (the
  runner then marks the probe ``partial``). Keys carry units (``power_mw``).
- ``hypotheses``: the hypothesis ids (:data:`forensics.hypotheses.HYPOTHESES`)
  this probe's judge can decide; its findings use no others. When a side has no
  data the ledger (:mod:`forensics.diff.ledger`) marks each of them
  inconclusive itself: judges do not repeat that check.
- ``judge(before, after, jctx) -> list[Finding]``: pure; compares this probe's
  two sections (:class:`ProbeResult`; called when at least one is usable, the
  other may be ``None`` or unusable: return only what one side alone shows,
  often nothing). Identical input implicates nothing.
- ``extra_timeout_s(options) -> float``: seconds this probe needs beyond the
  runner's per-probe timeout for these options (a sampling window, a deep
  scan); default 0.
- ``fields``: optional field table (dotted path pattern -> :class:`FieldSpec`),
  read by both ``judge`` and the report; ``*`` matches one path element.
- ``types``: optional field-type table (dotted path pattern -> type word such as
  ``"mapping"``, ``"string?"``, ``"number>=0"``), checked when a snapshot is
  loaded (:mod:`forensics.fieldtypes`): a wrong type refuses the file (exit 2),
  an impossible reading becomes a missing value, so judges never see either.
- ``headline(data) -> str``: optional one-line summary for the terminal.
- ``map_fields``: dotted paths whose child keys are data (env var names,
  package names), exempt from the snake_case key rule.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from forensics.errors import ProbeUnavailable
from forensics.model import Finding, ProbeStatus

if TYPE_CHECKING:  # pragma: no cover
    from forensics.redact import Redactor

__all__ = [
    "Probe",
    "ProbeContext",
    "ProbeResult",
    "FieldSpec",
    "JudgeContext",
    "ProbeUnavailable",
    "key_problems",
]

KEY_RE = re.compile(r"^[a-z][a-z0-9_]*$")
"""A data key: lowercase snake_case (units as suffixes: ``power_mw``)."""


@dataclass(frozen=True)
class FieldSpec:
    """What a field means: unit, a short label, where it comes from.

    Attributes:
        unit: unit string for display ("MHz", "mW", "s", "" for none).
        label: short human label ("SM clock").
        source: the NVML call, file or command it comes from.
        volatile: True for values that move on an idle machine (temperature,
            power draw, load average, memory used): the diff shows them but they
            are never findings on their own.
        counter: True for cumulative counters (judged by their growth).
    """

    unit: str = ""
    label: str = ""
    source: str = ""
    volatile: bool = False
    counter: bool = False


@dataclass
class ProbeResult:
    """One probe's section of a snapshot (``snapshot["probes"][name]``).

    JSON form: ``{"status", "duration_s", "data", "errors", "reason"}``.
    """

    status: ProbeStatus
    duration_s: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)
    errors: list[dict[str, str]] = field(default_factory=list)
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status.value, "duration_s": round(self.duration_s, 4)}
        if self.reason:
            out["reason"] = self.reason
        out["data"] = self.data
        out["errors"] = self.errors
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "ProbeResult":
        """Build from a loaded section; the snapshot loader has validated the types."""
        return cls(
            status=ProbeStatus(obj["status"]),
            duration_s=float(obj.get("duration_s", 0.0)),
            data=obj.get("data") or {},
            errors=list(obj.get("errors") or []),
            reason=obj.get("reason", ""),
        )

    @property
    def usable(self) -> bool:
        """True when there is data to judge (``ok`` or ``partial``)."""
        return self.status in (ProbeStatus.OK, ProbeStatus.PARTIAL)


class ProbeContext:
    """What a probe gets to collect with; one instance per probe per run.

    Attributes:
        options: every option of :data:`forensics.options.PROBE_OPTIONS`, set by the
            command's flags or at its default. Read with :meth:`option`.
        redactor: the snapshot's :class:`forensics.redact.Redactor`; use it for
            values that are secret by their *name* (environment variables).
        timeout_s: this probe's time budget; subprocesses must use less.
        errors: field-level errors recorded with :meth:`error`.
    """

    def __init__(
        self,
        options: dict[str, Any] | None = None,
        redactor: "Redactor | None" = None,
        timeout_s: float = 10.0,
    ):
        from forensics.options import probe_options
        from forensics.redact import Redactor

        self.options = probe_options(**(options or {}))
        self.redactor = redactor if redactor is not None else Redactor(enabled=True)
        self.timeout_s = timeout_s
        self.errors: list[dict[str, str]] = []
        self._lock = threading.Lock()

    def option(self, name: str, default: Any = None) -> Any:
        """Return option ``name`` or ``default`` when unset or ``None``.

        Raises:
            KeyError: ``name`` is not declared in :data:`forensics.options.PROBE_OPTIONS`.
        """
        from forensics.options import declared

        declared(name)
        value = self.options.get(name)
        return default if value is None else value

    def error(self, field_path: str, message: str) -> None:
        """Record that ``field_path`` could not be read; the probe becomes ``partial``."""
        with self._lock:
            self.errors.append({"field": field_path, "error": message})


@dataclass
class JudgeContext:
    """Whole-snapshot context for ``judge``: both snapshots as loaded dicts.

    Judges use it for facts outside their own section, e.g. the benchmark
    telemetry in ``snapshot["bench"]`` (under-load samples of the GPU).
    """

    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)


class Probe:
    """Base class of every probe (built-in or third-party). See the module docstring."""

    name: str = ""
    description: str = ""
    fields: dict[str, FieldSpec] = {}
    types: dict[str, str] = {}
    map_fields: tuple[str, ...] = ()
    hypotheses: tuple[str, ...] = ()
    #: causal links between hypothesis ids this probe judges (:class:`forensics.hypotheses.Link`): a finding
    #: of ``cause`` may explain one of ``effect`` (its mechanism); the ledger adds them to
    #: :data:`forensics.hypotheses.LINKS`.
    links: tuple = ()
    #: True for a probe that waits on fresh interpreters it starts (workers): the runner starts its
    #: thread before the others', so its children come up while the other probes import and read.
    #: Order only: every probe still runs concurrently under its own timeout.
    start_first: bool = False

    def extra_timeout_s(self, options: dict[str, Any]) -> float:
        """Seconds needed beyond the per-probe timeout for ``options``; default 0."""
        return 0.0

    def available(self, ctx: ProbeContext) -> str | None:
        """Return ``None`` if the probe applies here, else the reason it does not."""
        return None

    def collect(self, ctx: ProbeContext) -> dict[str, Any]:  # pragma: no cover - abstract
        """Read this probe's facts. Must not import torch or start a CUDA context."""
        raise NotImplementedError

    def judge(
        self,
        before: ProbeResult | None,
        after: ProbeResult | None,
        jctx: JudgeContext | None = None,
    ) -> list[Finding]:
        """Compare two sections; default: no findings (changes still show as plain changes)."""
        return []

    def headline(self, data: dict[str, Any]) -> str:
        """One short line of the most telling facts, for terminal summaries ("" for none)."""
        return ""


def key_problems(data: Any, map_fields: tuple[str, ...] | list[str] = ()) -> list[str]:
    """The dotted paths of keys in ``data`` that break the snake_case key rule.

    Keys directly under a path matching one of ``map_fields`` are data (variable
    names, package names, GPU UUIDs) and exempt; ``*`` in a pattern matches one
    path element (``start_methods.*.env``). Missing values
    (``{"missing", "detail"}``) are leaves. A list index is one path element
    (``config_files.files.*.vars``). Used by the contract tests of built-in and third-party probes.

    Returns:
        ``"path.key"`` strings, in document order; empty when every key is fine.
    """
    exempt = [re.compile(re.escape(e).replace(r"\*", "[^.]+")) for e in map_fields]
    out: list[str] = []

    def walk(obj: Any, path: str) -> None:
        if isinstance(obj, dict):
            if obj and obj.keys() <= {"missing", "detail"}:
                return
            free = any(e.fullmatch(path) for e in exempt)
            for k, v in obj.items():
                sub = f"{path}.{k}" if path else str(k)
                if not free and not (isinstance(k, str) and KEY_RE.match(k)):
                    out.append(sub)
                walk(v, sub)
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, f"{path}.{i}" if path else str(i))

    walk(data, "")
    return out
