"""Data of a bisect: commit classes, outcomes, the log, per-commit records and the result.

Plain dataclasses and enums read by the reports (:mod:`forensics.render.bisect`)
and the CLI; the algorithm is in :mod:`forensics.bisect.run`. Enum values are the
strings of the JSON report.
"""

from __future__ import annotations

import enum
import os
import statistics
from dataclasses import dataclass, field

from forensics.bisect.measure import StepSpec
from forensics.errors import BadInputError
from forensics.gitio import Commit
from forensics.stats import DEFAULT_THRESHOLD, Comparison, Verdict
from forensics.step.spec import StepOptions, check_metric_name


class CommitClass(str, enum.Enum):
    """How a measured commit compares with the two endpoints."""

    GOOD = "good-endpoint"
    BAD = "bad-endpoint"
    FAST = "fast"
    SLOW = "slow"
    INTERMEDIATE = "intermediate"
    UNKNOWN = "unknown"
    SKIPPED = "skipped"


class Outcome(str, enum.Enum):
    """How the bisect ended (the ``outcome`` key of the JSON report)."""

    CULPRIT = "culprit"
    CULPRIT_RANGE = "culprit-range"
    ENVIRONMENT = "environment-changed"
    NOT_REPRODUCED = "not-reproduced"
    NO_DIFFERENCE = "no-difference"
    BAD_FASTER = "bad-faster"


@dataclass
class LogEntry:
    """One line of the bisect log (also the progress event)."""

    phase: str  # "endpoints", "round N", "confirm", "verdict"
    message: str
    sha: str = ""
    left: int | None = None  # commits still in the suspect range

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class CommitRecord:
    """A commit that was measured (or tried)."""

    info: Commit
    index: int  # 0 = good, len(range) = bad
    cls: CommitClass
    samples: list[float] = field(default_factory=list)
    vs_good: Comparison | None = None
    vs_bad: Comparison | None = None
    note: str = ""
    round: int = 0

    def relation(self) -> tuple[str, str]:
        """("same (1.02x)", "faster (0.77x)"): this commit against good and against bad, as time ratios."""
        flip = {
            Verdict.SLOWER: "faster",
            Verdict.FASTER: "slower",
            Verdict.SAME: "same",
            Verdict.INCONCLUSIVE: "inconclusive",
            Verdict.SMALL_SLOWER: "small-faster",
            Verdict.SMALL_FASTER: "small-slower",
        }
        g = f"{self.vs_good.verdict.value} ({self.vs_good.time_ratio:.3f}x)" if self.vs_good else ""
        b = (
            f"{flip[self.vs_bad.verdict]} ({1 / self.vs_bad.time_ratio:.3f}x)"
            if self.vs_bad
            else ""
        )
        return g, b

    def to_json(self) -> dict:
        g, b = self.relation()
        return {
            "commit": self.info.to_json(),
            "index": self.index,
            "vs_good_text": g,
            "vs_bad_text": b,
            "class": self.cls.value,
            "samples": self.samples,
            "median": statistics.median(self.samples) if self.samples else None,
            "vs_good": self.vs_good.to_json() if self.vs_good else None,
            "vs_bad": self.vs_bad.to_json() if self.vs_bad else None,
            "note": self.note,
            "round": self.round,
        }


@dataclass
class BisectConfig:
    """Inputs of :func:`run_bisect` (the CLI options). ``confirm_factor`` 0 leaves the confirmation of the
    culprit against its parent to the caller (``forensics investigate`` runs its own A/B)."""

    repo: str
    good: str
    bad: str
    spec: StepSpec
    processes: int = 5
    cap_factor: int = 4
    confirm_factor: int = 2
    threshold: float = DEFAULT_THRESHOLD
    good_was: float | None = None
    free: frozenset[str] = frozenset()
    """Commits (full shas) whose change has no behaviour (``forensics.diff.commits`` classification): never
    measured as a midpoint; a range holding only them before a slow commit names that commit."""
    seeds: dict[str, list[float]] = field(default_factory=dict)
    """Per-process samples already measured for some commits (full shas): the caller's measurement of the
    endpoints is reused instead of measured again (``forensics investigate``)."""

    @classmethod
    def from_options(
        cls,
        step: StepOptions,
        *,
        repo,
        good: str,
        bad: str,
        setup: str | None = None,
        callable_timer: str = "wall",
        threshold: float = DEFAULT_THRESHOLD,
        max_processes: int | None = None,
        good_was: float | None = None,
    ) -> "BisectConfig":
        """The config of a bisect from the command's options, checked before any git command runs.

        ``step`` is the user's step (exactly one of a command and a callable), its processes per
        commit to start with and its timeout (of one process, and of ``setup``);
        ``max_processes`` caps the doubling on an unknown result (default 4 x ``step.processes``).

        Raises:
            BadInputError: no step or two; a callable not ``module:function``; an empty metric name; a metric regex that
                does not compile, has no group or matches the empty string; ``max_processes`` below ``step.processes``.
        """
        if bool(step.cmd) == bool(step.target):
            raise BadInputError(
                'give exactly one of {cmd} "..." or {target} module:function',
                names=("cmd", "target"),
            )
        target = step.target
        if target and (":" not in target or target.startswith(":") or target.endswith(":")):
            raise BadInputError(
                f"{target!r}: use module:function, e.g. mypkg.step:verify", option="target"
            )
        check_metric_name(step.metric)
        if step.metric_regex is not None:
            import re

            try:
                re.compile(step.metric_regex)
            except re.error as exc:
                raise BadInputError(
                    f"{step.metric_regex!r}: not a valid regular expression ({exc})",
                    option="metric_regex",
                ) from None
            from forensics.step.command import compile_metric_regex

            compile_metric_regex(step.metric_regex)  # no group, or matching the empty string
        cap = max_processes or step.processes * 4
        if cap < step.processes:
            raise BadInputError(
                f"{cap} is below {{processes}} {step.processes}",
                option="max_processes",
                names=("processes",),
            )
        spec = StepSpec(
            cmd=step.cmd,
            target=target,
            setup=setup,
            metric=step.metric,
            metric_regex=step.metric_regex,
            higher_is_better=step.higher_is_better,
            timeout_s=step.timeout_s,
            callable_timer=callable_timer,
        )
        return cls(
            str(repo),
            good,
            bad,
            spec,
            processes=step.processes,
            cap_factor=max(1, cap // step.processes),
            threshold=threshold,
            good_was=good_was,
        )


@dataclass
class BisectResult:
    """Everything the report shows. ``outcome`` decides the exit code (CLI)."""

    outcome: Outcome
    sentence: str
    repo: str
    good: Commit
    bad: Commit
    n_commits: int
    linear: bool
    step: str
    setup: str | None
    metric: str
    higher_is_better: bool
    threshold: float
    processes: int
    isolation: str
    endpoints: Comparison | None = None
    records: list[CommitRecord] = field(default_factory=list)
    culprit: Commit | None = None
    candidates: list[Commit] = field(default_factory=list)
    parent: Commit | None = None
    confirmation: Comparison | None = None
    confirmed: bool = False
    gap_share: float | None = None
    drift: Comparison | None = None
    diffstat: str = ""
    rounds: int = 0
    hypotheses: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    log: list[LogEntry] = field(default_factory=list)

    def to_json(self) -> dict:
        """The JSON report (stable keys: outcome, sentence, culprit, confirmation, records, log)."""

        def info(c):
            return c.to_json() if c else None

        return {
            "outcome": self.outcome.value,
            "sentence": self.sentence,
            "repo": self.repo,
            "repo_name": os.path.basename(self.repo),
            "good": info(self.good),
            "bad": info(self.bad),
            "n_commits": self.n_commits,
            "linear_history": self.linear,
            "step": self.step,
            "setup": self.setup,
            "metric": self.metric,
            "higher_is_better": self.higher_is_better,
            "threshold": self.threshold,
            "processes": self.processes,
            "isolation": self.isolation,
            "endpoints": self.endpoints.to_json() if self.endpoints else None,
            "culprit": info(self.culprit),
            "candidates": [c.to_json() for c in self.candidates],
            "parent": info(self.parent),
            "confirmation": self.confirmation.to_json() if self.confirmation else None,
            "confirmed": self.confirmed,
            "gap_share": self.gap_share,
            "drift": self.drift.to_json() if self.drift else None,
            "diffstat": self.diffstat,
            "rounds": self.rounds,
            "hypotheses": self.hypotheses,
            "notes": self.notes,
            "records": [r.to_json() for r in self.records],
            "log": [e.to_json() for e in self.log],
        }


class StepExit(int, enum.Enum):
    """Exit codes of ``forensics bisect-step`` (the ``git bisect run`` protocol)."""

    FAST = 0
    SLOW = 1
    SKIP = 125
    ABORT = 128
