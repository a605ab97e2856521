"""Data of an investigation: experiment kinds and outcomes, one experiment, the whole result.

Plain dataclasses and enums (string values, as in the JSON report), read by
the runner (:mod:`forensics.investigate.run`), the reports
(:mod:`forensics.render.investigate`) and the CLI. Nothing here measures.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from forensics.stats import Comparison


class Kind(str, enum.Enum):
    """What an experiment does (DESIGN section 13)."""

    ENV = "environment"  # restore the baseline's value of variables in the step's own environment
    COMMIT = "commit"  # the suspect commit against its parent, in private worktrees
    BISECT = "bisect"  # bisect the pulled range (forensics bisect)
    REMEASURE = (
        "re-measure"  # a condition the tool may not change: measure the matching component again
    )
    PACKAGE = "package"  # the baseline's version of a package in a temporary overlay
    NONE = "no experiment"  # a hypothesis no experiment can test (driver, firmware, topology)


class Outcome(str, enum.Enum):
    """How one experiment ended.

    ``confirmed``, ``partial`` and ``refuted`` come only from
    :func:`forensics.investigate.decide.decide`; ``still-present`` and
    ``gone`` only from a re-measurement.
    """

    CONFIRMED = "confirmed"  # moves the step back and recovers the stated share of the slowdown
    PARTIAL = "partial"  # moves the step back significantly, but recovers less than that share
    REFUTED = "refuted"  # no change within the threshold and the noise floor
    INCONCLUSIVE = "inconclusive"  # ran, could not decide (reason and what to run say why)
    STILL_PRESENT = (
        "still-present"  # re-measured now: the condition and its slowdown are still there
    )
    GONE = "gone"  # re-measured now: the component is back to the baseline
    NOT_RUN = "not-run"  # could not run: no step, no repository, budget spent (reason given)
    PLANNED = "planned"  # --plan: not run yet
    INTERRUPTED = "interrupted"  # Ctrl-C / SIGTERM during this experiment


@dataclass
class Share:
    """The share of the slowdown an intervention recovers (``(today - intervention) / (today - baseline)``).

    Attributes:
        point: from the medians, a fraction (0.97 = 97%); ``None`` when it cannot be computed.
        low, high: percentile bootstrap 95% interval (resampling the processes of every side).
        baseline, today, intervention: the three medians, in the step's unit.
        note: why there is no share ("" when there is one).
    """

    point: float | None
    low: float | None = None
    high: float | None = None
    baseline: float | None = None
    today: float | None = None
    intervention: float | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Experiment:
    """One planned or run experiment.

    Attributes:
        id: short stable id within the report (``env-1``, ``commit-1``...).
        kind: a :class:`Kind`.
        hypothesis: the ledger's hypothesis id it tests.
        title: what it does, one line ("restore NCCL_ALGO=Ring in the step's environment").
        subject: the measured result (``user.step_ms`` or ``canary.verify_step_ms``).
        estimate_s: estimated wall seconds before it ran.
        outcome: an :class:`Outcome`.
        sentence: the one line a reader sees ("Restoring ... recovers 97% of the slowdown").
        reason: why it ended so (rule applied, or why it could not run).
        command: the command a user runs to repeat (or, when it could not run, to run) it.
        a_label, b_label: what sides A (today) and B (the intervention) are.
        a, b: per-process medians of the two sides (the subject's unit).
        comparison: A vs B (``forensics.stats`` comparison; time ratio < 1 = B faster).
        noise_floor: the A/A noise floor used (alternate pairs of processes), or ``None``.
        share: the share of the slowdown recovered.
        elapsed_s: wall seconds it took.
        details: kind-specific facts (variables restored, commit, bisect result...).
        params: what the runner needs to run it (not shown).
    """

    id: str
    kind: Kind
    hypothesis: str
    title: str
    subject: str = ""
    estimate_s: float = 0.0
    outcome: Outcome = Outcome.PLANNED
    sentence: str = ""
    reason: str = ""
    command: str = ""
    a_label: str = "today"
    b_label: str = ""
    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)
    comparison: Comparison | None = None
    noise_floor: float | None = None
    share: Share | None = None
    elapsed_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind.value,
            "hypothesis": self.hypothesis,
            "title": self.title,
            "subject": self.subject,
            "estimate_s": round(self.estimate_s, 1),
            "outcome": self.outcome.value,
            "sentence": self.sentence,
            "reason": self.reason,
            "command": self.command,
            "a_label": self.a_label,
            "b_label": self.b_label,
            "a": list(self.a),
            "b": list(self.b),
            "comparison": self.comparison.to_json() if self.comparison else None,
            "noise_floor": self.noise_floor,
            "share": self.share.to_json() if self.share else None,
            "elapsed_s": round(self.elapsed_s, 2),
            "details": self.details,
        }


class Regression(str, enum.Enum):
    """Did the subject get slower between the baseline and now (the measurement in the two snapshots)?"""

    YES = "slower"
    NO = "no regression"
    UNKNOWN = "could not tell"
