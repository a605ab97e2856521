"""Core value types shared by probes, the diff engine, statistics and reports.

Everything here is plain data: enums with string values (for JSON), the
``Missing`` value that stands in for a field a source could not give, and the
``Finding`` a probe's ``judge`` returns. No I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class ProbeStatus(str, enum.Enum):
    """Outcome of one probe in one snapshot (DESIGN section 3)."""

    OK = "ok"  # every field read
    PARTIAL = "partial"  # some fields failed; see the probe's ``errors``
    UNAVAILABLE = "unavailable"  # the subject does not exist here; see ``reason``
    FAILED = "failed"  # the probe crashed or timed out; see ``reason``


class Severity(str, enum.Enum):
    """How much a finding matters, lowest first. ``weight`` feeds the ranking score."""

    INFO = "info"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def weight(self) -> float:
        """0 (info) to 4 (critical): the severity's share of a hypothesis's ranking score."""
        return _SEVERITY_WEIGHT[self]

    def __lt__(self, other: "Severity") -> bool:  # type: ignore[override]
        return _SEVERITY_WEIGHT[self] < _SEVERITY_WEIGHT[other]

    def __le__(self, other: "Severity") -> bool:  # type: ignore[override]
        return _SEVERITY_WEIGHT[self] <= _SEVERITY_WEIGHT[other]

    def __gt__(self, other: "Severity") -> bool:  # type: ignore[override]
        return _SEVERITY_WEIGHT[self] > _SEVERITY_WEIGHT[other]

    def __ge__(self, other: "Severity") -> bool:  # type: ignore[override]
        return _SEVERITY_WEIGHT[self] >= _SEVERITY_WEIGHT[other]


_SEVERITY_WEIGHT = {
    Severity.INFO: 0.0,
    Severity.LOW: 1.0,
    Severity.MEDIUM: 2.0,
    Severity.HIGH: 3.0,
    Severity.CRITICAL: 4.0,
}


class HypothesisStatus(str, enum.Enum):
    """Where a hypothesis ends in the ledger (DESIGN section 5)."""

    IMPLICATED = "implicated"
    RULED_OUT = "ruled-out"
    INCONCLUSIVE = "inconclusive"


class MissingReason(str, enum.Enum):
    """Why a field has no value. Never collapse these into 0, ``""`` or ``None``."""

    NOT_SUPPORTED = "not_supported"  # NVML_ERROR_NOT_SUPPORTED, "N/A" on this device
    NO_PERMISSION = "no_permission"  # NVML_ERROR_NO_PERMISSION, EACCES on a file
    FUNCTION_NOT_FOUND = (
        "function_not_found"  # symbol absent in this driver, or wrapper absent in this nvidia-ml-py
    )
    GPU_LOST = "gpu_lost"  # NVML_ERROR_GPU_IS_LOST: the GPU fell off the bus
    TIMED_OUT = "timed_out"  # a subprocess or call exceeded its timeout
    NOT_FOUND = "not_found"  # file, command or library absent
    NOT_APPLICABLE = "not_applicable"  # e.g. MIG child handles have no clocks
    ERROR = "error"  # anything else; ``detail`` says what
    NOT_RECORDED = "not_recorded"  # the source holds no such field (an imported text: "not in collect_env output")


@dataclass(frozen=True)
class Missing:
    """A field that could not be read, with the reason.

    JSON form: ``{"missing": "<reason>", "detail": "<text>"}``. Use
    :func:`is_missing` to recognise it in loaded data.
    """

    reason: MissingReason
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        out = {"missing": self.reason.value}
        if self.detail:
            out["detail"] = self.detail
        return out

    def __str__(self) -> str:
        text = self.reason.value.replace("_", " ")
        return f"{text} ({self.detail})" if self.detail else text


_MISSING_VALUES = {r.value for r in MissingReason}


def missing(reason: MissingReason | str, detail: str = "") -> dict[str, str]:
    """Return the JSON form of a missing value (what probes put in their data)."""
    return Missing(MissingReason(reason), detail).to_json()


def is_missing(value: Any) -> bool:
    """True if ``value`` is the JSON form of a :class:`Missing` value."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("missing"), str)
        and value["missing"] in _MISSING_VALUES
        and set(value) <= {"missing", "detail"}
    )


def is_unrecorded(value: Any) -> bool:
    """True if ``value`` is a missing value whose source never held the field (``not_recorded``).

    Imported texts (``forensics import``) hold a fraction of what a probe reads; a judge
    must not compare such a field (unknown is neither "same" nor "changed").
    """
    return is_missing(value) and value["missing"] == MissingReason.NOT_RECORDED.value


def as_missing(value: Any) -> Missing | None:
    """Turn the JSON form back into a :class:`Missing`, or ``None`` for a real value."""
    if not is_missing(value):
        return None
    return Missing(MissingReason(value["missing"]), str(value.get("detail", "")))


@dataclass
class Finding:
    """One judgement a probe makes about its own fields between two snapshots.

    Attributes:
        hypothesis: a stable hypothesis id of DESIGN section 5, e.g. ``gpu.throttling``.
        status: ``implicated`` (evidence for), ``ruled-out`` (checked and clean:
            the evidence says what was checked) or ``inconclusive`` (no data).
        severity: how much it matters; ``info`` never leads a report.
        summary: one line a person reads first ("SW power cap active 93% of the run on GPU 0").
        evidence: lines of supporting facts, each naming its source and values.
        probe: the probe that judged it (filled in by the engine if left empty).
        relevance: 0..1, how directly the evidence ties to step time (a clock cut
            under load is 1.0; a changed default power limit without throttling is lower).
        fields: the dotted field paths the finding is about (for linking to changes).
        subject: the thing within the probe's data the finding is about, when
            there can be several (the ``git`` probe: the repository path, by
            which :func:`forensics.diff.commits.attach_evidence` adds the commits).
    """

    hypothesis: str
    status: HypothesisStatus
    severity: Severity
    summary: str
    evidence: list[str] = field(default_factory=list)
    probe: str = ""
    relevance: float = 1.0
    fields: list[str] = field(default_factory=list)
    subject: str = ""

    def to_json(self) -> dict[str, Any]:
        out = {
            "hypothesis": self.hypothesis,
            "status": self.status.value,
            "severity": self.severity.value,
            "summary": self.summary,
            "evidence": list(self.evidence),
            "probe": self.probe,
            "relevance": self.relevance,
            "fields": list(self.fields),
        }
        if self.subject:
            out["subject"] = self.subject
        return out


def implicated(
    hypothesis: str,
    severity: Severity,
    summary: str,
    evidence=(),
    *,
    relevance: float = 1.0,
    fields=(),
) -> Finding:
    """Shorthand for an implicating :class:`Finding`."""
    return Finding(
        hypothesis,
        HypothesisStatus.IMPLICATED,
        severity,
        summary,
        list(evidence),
        relevance=relevance,
        fields=list(fields),
    )


def ruled_out(hypothesis: str, summary: str, evidence=(), *, fields=()) -> Finding:
    """Shorthand for a ``ruled-out`` :class:`Finding`: say what was checked in ``summary``."""
    return Finding(
        hypothesis,
        HypothesisStatus.RULED_OUT,
        Severity.INFO,
        summary,
        list(evidence),
        relevance=0.0,
        fields=list(fields),
    )


def inconclusive(hypothesis: str, summary: str, evidence=()) -> Finding:
    """Shorthand for an ``inconclusive`` :class:`Finding` (the data to decide is missing)."""
    return Finding(
        hypothesis,
        HypothesisStatus.INCONCLUSIVE,
        Severity.INFO,
        summary,
        list(evidence),
        relevance=0.0,
    )
