"""``forensics bisect``: find the commit that made the step slower, under noise (DESIGN section 8).

Method (research/benchmarking.md sections 5 and 7):

1. Re-measure both endpoints now, interleaved (good, bad, good, bad...), each
   in its own worktree (:mod:`forensics.bisect.measure`). Compare them with
   :func:`forensics.stats.compare` (Mann-Whitney U on per-process medians,
   bootstrap CI of the ratio, practical threshold):
   - ``slower``: bisect;
   - ``same``: the good commit is now as slow as the bad one: the environment
     changed, not the code (with ``good_was``, a good commit still as fast as
     before means the slowdown does not reproduce here);
   - ``inconclusive`` after doubling the processes, or ``faster``: refuse.
2. Each midpoint is measured and compared with both endpoints
   (:func:`classify`): ``fast`` if same as good (or faster) and faster than
   bad; ``slow`` if slower than good and same as bad; ``intermediate`` (slower
   than good and faster than bad: more than one step) counts as slow. When
   one comparison is significant and the other inconclusive (a regression
   that also adds variance), the side of the gap's middle the commit lies on
   decides. Else ``unknown``: processes are doubled (endpoints topped up to
   match, interleaved) up to ``cap_factor`` x, then the commit is skipped. A
   setup or run failure skips it at once.
3. The first slow commit after the last fast one is the culprit. It is
   re-measured against its parent (``confirm_factor`` x processes, fresh,
   interleaved); the report gives that effect with its CI and the share of the
   endpoint gap it explains (``log(r_culprit) / log(r_endpoints)``).

Core only: returns a :class:`BisectResult`, never prints; progress goes to
the ``on_log`` callback.
"""

from __future__ import annotations

import math
from typing import Callable

from forensics.bisect.measure import CALLABLE_NOTE, ISOLATION_NOTE, Measurer, StepFailed
from forensics.bisect.model import (
    BisectConfig,
    BisectResult,
    CommitClass,
    CommitRecord,
    LogEntry,
    Outcome,
    StepExit,
)
from forensics.bisect.worktree import WorktreePool, diff_stat, resolve_range
from forensics.errors import BadInputError
from forensics.gitio import Commit, git, read_commit
from forensics.hypotheses import HYPOTHESES
from forensics.stats import REACHABLE_PROCESSES, Comparison, Verdict
from forensics.stats import compare as _stats_compare
from forensics.words import plural

__all__ = [
    "BisectConfig",
    "BisectResult",
    "CommitClass",
    "CommitRecord",
    "LogEntry",
    "Outcome",
    "StepExit",
    "classify",
    "gap_position",
    "run_bisect",
    "run_step",
    "ENV_HYPOTHESES",
]

ENV_HYPOTHESES = [h for h in HYPOTHESES if h != "code.change"]


def classify(vs_good: Comparison, vs_bad: Comparison) -> CommitClass:
    """Class of a commit X from ``compare(good, X)`` and ``compare(X, bad)`` (see module docstring).

    A real regression often adds variance (an extra allocation or collective that
    sometimes stalls), so X can be significantly slower than good yet not
    separable from a noisy bad endpoint at this number of processes. Then its
    position in the endpoint gap decides (:func:`gap_position`): at or past the
    middle it is ``slow``; symmetrically, significantly faster than bad and at or
    before the middle is ``fast``. Anything else is ``unknown``.
    """
    slower_than_good = vs_good.verdict is Verdict.SLOWER
    like_good = vs_good.verdict in (Verdict.SAME, Verdict.FASTER)
    faster_than_bad = vs_bad.verdict is Verdict.SLOWER
    like_bad = vs_bad.verdict in (Verdict.SAME, Verdict.FASTER)
    if like_good and faster_than_bad:
        return CommitClass.FAST
    if slower_than_good and like_bad:
        return CommitClass.SLOW
    if slower_than_good and faster_than_bad:
        return CommitClass.INTERMEDIATE
    pos = gap_position(vs_good, vs_bad)
    if (
        slower_than_good
        and vs_bad.verdict is Verdict.INCONCLUSIVE
        and pos is not None
        and pos >= 0.5
    ):
        return CommitClass.SLOW
    if (
        faster_than_bad
        and vs_good.verdict is Verdict.INCONCLUSIVE
        and pos is not None
        and pos <= 0.5
    ):
        return CommitClass.FAST
    return CommitClass.UNKNOWN


def compare(a, b, *, threshold: float, higher_is_better: bool = False) -> Comparison:
    """:func:`forensics.stats.compare` at the bisect's threshold.

    A bisect asks whether two commits differ by ``--threshold``, so ``same`` is
    judged against that band and a small real change below it counts as the
    same (its sentence and reasons keep the measured ratio and CI).
    """
    c = _stats_compare(
        a, b, threshold=threshold, higher_is_better=higher_is_better, min_band=threshold
    )
    if c.verdict.small:
        c.reasons.append(
            f"a small real change ({c.change_pct:+.1f}%) below the {threshold:.0%} threshold: "
            "the same for this bisect"
        )
        c.verdict = Verdict.SAME
    return c


def gap_position(vs_good: Comparison, vs_bad: Comparison) -> float | None:
    """Where X lies between good (0.0) and bad (1.0), on a log-time scale.

    ``log(good->X ratio) / log(good->bad ratio)``, with the good->bad ratio taken
    as the product of the two comparisons' median ratios. None when the two
    medians give no gap to place X in (X outside [good, bad] is clamped to 0..1).
    """
    a, b = vs_good.time_ratio, vs_bad.time_ratio
    if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
        return None
    gap = math.log(a) + math.log(b)
    if gap <= 0:
        return None
    return min(1.0, max(0.0, math.log(a) / gap))


class _Session:
    """One bisect or bisect-step session: the measurer plus the log."""

    def __init__(
        self, cfg: BisectConfig, measurer: Measurer, on_log: Callable[[LogEntry], None] | None
    ):
        self.cfg = cfg
        self.m = measurer
        self.log: list[LogEntry] = []
        self.on_log = on_log or (lambda e: None)

    def say(self, phase: str, message: str, sha: str = "", left: int | None = None) -> None:
        entry = LogEntry(phase, message, sha, left)
        self.log.append(entry)
        self.on_log(entry)

    def cmp(self, a: str, b: str) -> Comparison:
        return compare(
            self.m.samples[a],
            self.m.samples[b],
            threshold=self.cfg.threshold,
            higher_is_better=self.cfg.spec.higher_is_better,
        )

    def endpoints(self, good: str, bad: str) -> Comparison:
        """Interleaved endpoint measurement, doubled once when inconclusive.

        Raises:
            BadInputError: the step or the setup fails on an endpoint.
        """
        n = self.cfg.processes
        while True:
            try:
                self.m.top_up([(good, "good"), (bad, "bad")], n)
            except StepFailed as exc:
                which = "--good" if good in self.m.failures else "--bad"
                raise BadInputError(f"cannot measure the {which} commit: {exc}") from None
            c = self.cmp(good, bad)
            self.say("endpoints", f"good vs bad with {n} processes each: {c.sentence()}")
            if c.verdict is not Verdict.INCONCLUSIVE or n >= self.cfg.processes * 2:
                return c
            n *= 2

    def measure_point(self, sha: str, good: str, bad: str, phase: str) -> CommitRecord:
        """Measure ``sha`` against both endpoints, escalating on ``unknown`` (see module docstring)."""
        rec = CommitRecord(Commit(sha, sha[:12]), -1, CommitClass.UNKNOWN)
        n, cap = self.cfg.processes, self.cfg.processes * self.cfg.cap_factor
        while True:
            try:
                self.m.top_up([(good, "good"), (sha, "mid"), (bad, "bad")], n)
            except StepFailed as exc:
                if sha not in self.m.failures:
                    raise BadInputError(f"an endpoint stopped working mid-bisect: {exc}") from None
                rec.cls, rec.note = CommitClass.SKIPPED, str(exc)
                rec.samples = list(self.m.samples.get(sha, []))
                return rec
            rec.vs_good, rec.vs_bad = self.cmp(good, sha), self.cmp(sha, bad)
            rec.cls, rec.samples = classify(rec.vs_good, rec.vs_bad), list(self.m.samples[sha])
            if rec.cls is not CommitClass.UNKNOWN:
                if Verdict.INCONCLUSIVE in (rec.vs_good.verdict, rec.vs_bad.verdict):
                    other = "bad" if rec.cls is CommitClass.SLOW else "good"
                    rec.note = (
                        f"{gap_position(rec.vs_good, rec.vs_bad):.0%} of the way from good to bad; not "
                        f"separable from {other} with {n} processes, so the gap's middle decided"
                    )
                return rec
            if n * 2 > cap:
                rec.cls = CommitClass.SKIPPED
                rec.note = (
                    f"still unknown with {n} processes (vs good: {rec.vs_good.verdict.value}, "
                    f"vs bad: {rec.vs_bad.verdict.value})"
                )
                return rec
            self.say(
                phase,
                f"{sha[:12]} unknown with {n} processes (vs good {rec.vs_good.verdict.value}, vs bad "
                f"{rec.vs_bad.verdict.value}); doubling to {n * 2}",
                sha,
            )
            n *= 2


def _endpoint_verdict(
    cfg: BisectConfig, c: Comparison, good_now: float
) -> tuple[Outcome, str] | None:
    """None when the endpoints differ (bisect); else the outcome and its sentence."""
    if c.verdict is Verdict.SLOWER:
        return None
    same = f"bad/good {c.time_ratio:.3f}, 95% CI {c.ci_low:.3f}-{c.ci_high:.3f}, n={c.a.n}+{c.b.n}"
    look = "; diff a `forensics snapshot` taken now against one from when the good commit was fast"
    if c.verdict is Verdict.SAME:
        if cfg.good_was is not None:
            r = (
                good_now / cfg.good_was
                if not cfg.spec.higher_is_better
                else cfg.good_was / good_now
            )
            if r - 1 < cfg.threshold:
                return (
                    Outcome.NOT_REPRODUCED,
                    f"the slowdown does not reproduce here: both endpoints measure the "
                    f"same ({same}) and the good commit is as fast as before ({good_now:.4g} now, "
                    f"{cfg.good_was:.4g} before)",
                )
            return (
                Outcome.ENVIRONMENT,
                f"the environment changed, not the code: the good commit is now as slow as "
                f"the bad one ({same}) and {r - 1:+.0%} against its earlier result ({good_now:.4g} now, "
                f"{cfg.good_was:.4g} before){look}",
            )
        return (
            Outcome.ENVIRONMENT,
            f"the environment changed, not the code, if the good commit was fast when you "
            f"saw it: both endpoints measure the same now ({same}){look}. If it was never measured fast, the range "
            "is wrong or the slowdown does not reproduce here: --good-was with its earlier result tells these apart",
        )
    if c.verdict is Verdict.FASTER:
        return (
            Outcome.BAD_FASTER,
            f"refusing to bisect: the bad commit is faster than the good one here ({c.sentence()})",
        )
    if c.processes_needed > REACHABLE_PROCESSES:
        advice = (
            f"about {c.processes_needed} processes per commit (--processes) would be needed, more than is worth "
            "running: cut the noise instead (a quieter machine, a longer step); see docs/inconclusive.md"
        )
    else:
        advice = (
            "raise --processes"
            + (f" to about {c.processes_needed}" if c.processes_needed else "")
            + " or reduce the noise; see docs/inconclusive.md"
        )
    return (
        Outcome.NO_DIFFERENCE,
        f"refusing to bisect: the endpoints do not differ significantly ({c.sentence()}); "
        f"a bisect on this would follow noise - {advice}",
    )


def run_bisect(
    cfg: BisectConfig,
    on_log: Callable[[LogEntry], None] | None = None,
    on_process: Callable[[str, float | None], None] | None = None,
) -> BisectResult:
    """Bisect ``cfg.good..cfg.bad`` in private worktrees; see the module docstring for the method.

    Returns:
        a :class:`BisectResult` (every outcome, including refusals after measuring).

    Raises:
        BadInputError: bad repository or revisions (:func:`forensics.bisect.worktree.resolve_range`),
            or the step/setup fails on an endpoint.
    """
    rng = resolve_range(cfg.repo, cfg.good, cfg.bad)
    good_i, bad_i = read_commit(rng.toplevel, rng.good), read_commit(rng.toplevel, rng.bad)
    chain = [rng.good] + rng.commits  # index 0 = good, last = bad
    isolation = ISOLATION_NOTE + (CALLABLE_NOTE if cfg.spec.target else "")
    res = BisectResult(
        Outcome.NO_DIFFERENCE,
        "",
        rng.toplevel,
        good_i,
        bad_i,
        len(rng.commits),
        rng.linear,
        cfg.spec.describe(),
        cfg.spec.setup,
        cfg.spec.metric or "",
        cfg.spec.higher_is_better,
        cfg.threshold,
        cfg.processes,
        isolation,
    )
    if not rng.linear:
        res.notes.append(
            "the range has merges and good is not on bad's first-parent chain: commits were ordered "
            "with --ancestry-path --topo-order"
        )
    with WorktreePool(rng.toplevel) as pool:
        m = Measurer(pool, cfg.spec, on_process)
        for sha, values in cfg.seeds.items():
            if sha in (rng.good, rng.bad) and values:
                m.samples[sha] = list(values)
        s = _Session(cfg, m, on_log)
        res.log = s.log
        s.say(
            "endpoints",
            f"{len(rng.commits)} commits from {good_i.short} (good) to {bad_i.short} (bad); "
            f"re-measuring both endpoints, interleaved",
            left=len(rng.commits),
        )
        res.endpoints = s.endpoints(rng.good, rng.bad)
        res.metric = m.metric
        res.records.append(CommitRecord(good_i, 0, CommitClass.GOOD, m.samples[rng.good]))
        res.records.append(CommitRecord(bad_i, len(chain) - 1, CommitClass.BAD, m.samples[rng.bad]))
        stop = _endpoint_verdict(cfg, res.endpoints, res.endpoints.a.median)
        if stop is not None:
            res.outcome, res.sentence = stop
            res.hypotheses = ENV_HYPOTHESES if res.outcome is Outcome.ENVIRONMENT else []
            s.say("verdict", res.sentence)
            return res
        lo, hi, skipped = 0, len(chain) - 1, set()
        while True:
            todo = [i for i in range(lo + 1, hi) if i not in skipped and chain[i] not in cfg.free]
            if not todo:
                break
            mid = min(todo, key=lambda i: (abs(i - (lo + hi) / 2), i))
            res.rounds += 1
            phase = f"round {res.rounds}"
            info = read_commit(rng.toplevel, chain[mid])
            suspects = hi - lo - 1
            s.say(
                phase,
                f'measuring {info.short} "{info.subject}": {plural(suspects, "suspect")} left between '
                f"{chain[lo][:7]} and {chain[hi][:7]}, about "
                f"{plural(math.ceil(math.log2(suspects + 1)), 'round')} to go",
                chain[mid],
                left=suspects,
            )
            rec = s.measure_point(chain[mid], rng.good, rng.bad, phase)
            rec.info, rec.index, rec.round = info, mid, res.rounds
            res.records.append(rec)
            if rec.cls is CommitClass.FAST:
                lo = mid
            elif rec.cls in (CommitClass.SLOW, CommitClass.INTERMEDIATE):
                hi = mid
            else:
                skipped.add(mid)
            detail = rec.note or f"vs good {rec.vs_good.sentence()}; vs bad {rec.relation()[1]}"
            s.say(
                phase,
                f"{rec.info.short} is {rec.cls.value}: {detail}",
                chain[mid],
                left=hi - lo - 1,
            )
        res.records.sort(key=lambda r: r.index)
        _conclude(cfg, s, res, chain, lo, hi)
    return res


def _conclude(
    cfg: BisectConfig, s: _Session, res: BisectResult, chain: list[str], lo: int, hi: int
) -> None:
    """Confirm the culprit against its parent (or the range against the last fast commit)."""
    top = res.repo
    if hi - lo > 1 and all(c in cfg.free for c in chain[lo + 1 : hi]):
        res.notes.append(
            f"{plural(hi - lo - 1, 'commit')} between the last fast commit and the culprit change no "
            "behaviour and were not measured"
        )
        lo = (
            hi - 1
        )  # only behaviour-free commits before it: the slow commit is the first that changed behaviour
    culprit, parent = chain[hi], chain[lo]
    res.parent = read_commit(top, parent)
    if hi - lo == 1:
        res.culprit = read_commit(top, culprit)
        res.outcome = Outcome.CULPRIT
    else:
        res.candidates = [read_commit(top, c) for c in chain[lo + 1 : hi + 1]]
        res.outcome = Outcome.CULPRIT_RANGE
    n = cfg.processes * cfg.confirm_factor
    if (
        n <= 0
    ):  # the caller confirms (forensics investigate: its own A/B with the noise floor and gate)
        ref = "its parent" if hi - lo == 1 else f"the last fast commit {parent[:10]}"
        who = (
            f'{res.culprit.short} "{res.culprit.subject}"'
            if res.culprit
            else f"one of {len(res.candidates)} commits {res.candidates[0].short}..{res.candidates[-1].short}"
        )
        res.sentence = (
            f"the slowdown starts at {who} (against {ref}: confirmation left to the caller)"
        )
        res.diffstat = diff_stat(top, parent, culprit)
        s.say("verdict", res.sentence, culprit)
        return
    s.say(
        "confirm",
        f"confirming {culprit[:12]} against {parent[:12]} with {n} fresh processes each",
        culprit,
    )
    m2 = Measurer(s.m.pool, cfg.spec)  # fresh samples; worktrees (and their setup) are reused
    m2.metric, m2._ready = s.m.metric, s.m._ready
    good = chain[0]
    sides = [
        (parent, "good" if parent == good else "ref"),
        (culprit, "mid" if culprit != chain[-1] else "bad"),
    ]
    try:
        # the good commit is measured again alongside (an A/A check of the session: did the machine drift?)
        m2.top_up(sides + ([] if parent == good else [(good, "good")]), cfg.processes)
        m2.top_up(sides, n)
        c = compare(
            m2.samples[parent],
            m2.samples[culprit],
            threshold=cfg.threshold,
            higher_is_better=cfg.spec.higher_is_better,
        )
        res.drift = compare(
            s.m.samples[good][: cfg.processes],
            m2.samples[good],
            threshold=cfg.threshold,
            higher_is_better=cfg.spec.higher_is_better,
        )
        s.say(
            "confirm",
            f"A/A drift check, the good commit at the end vs at the start: {res.drift.sentence()}",
            good,
        )
        if res.drift.verdict in (Verdict.SLOWER, Verdict.FASTER):
            res.notes.append(
                f"the machine drifted during the bisect: the good commit measured {res.drift.sentence()} "
                "at the end against the start; the midpoint classes may be wrong (the confirmation "
                "was interleaved, so it holds): rerun on a quieter machine"
            )
    except StepFailed as exc:
        c = None
        res.notes.append(f"the confirmation run failed: {exc}")
    res.confirmation = c
    res.confirmed = c is not None and c.verdict is Verdict.SLOWER
    res.diffstat = diff_stat(top, parent, culprit)
    if (
        c is not None
        and res.endpoints is not None
        and res.endpoints.time_ratio > 1
        and c.time_ratio > 0
    ):
        res.gap_share = math.log(c.time_ratio) / math.log(res.endpoints.time_ratio)
    ref = "its parent" if hi - lo == 1 else f"the last fast commit {parent[:10]}"
    who = (
        f'{res.culprit.short} "{res.culprit.subject}"'
        if res.culprit
        else f"one of {len(res.candidates)} commits {res.candidates[0].short}..{res.candidates[-1].short} "
        f"(the others could not be measured)"
    )
    if c is None:
        res.sentence = f"the slowdown starts at {who}, but the confirmation against {ref} failed"
    else:
        share = (
            f"; it explains {res.gap_share:.0%} of the endpoint gap"
            if res.gap_share is not None
            else ""
        )
        state = f"confirmed against {ref}" if res.confirmed else f"NOT confirmed against {ref}"
        res.sentence = f"the slowdown starts at {who}: {c.sentence()}, {state}{share}"
        if res.gap_share is not None and res.gap_share < 0.8:
            res.notes.append(
                f"the culprit explains only {res.gap_share:.0%} of the gap between the endpoints: "
                "more than one commit made it slower (bisect again from the culprit to bad)"
            )
    if any(r.cls is CommitClass.INTERMEDIATE for r in res.records):
        res.notes.append(
            "some commits measured between the endpoints (slower than good, faster than bad): "
            "the slowdown came in more than one step"
        )
    s.say("verdict", res.sentence, culprit)


def run_step(
    cfg: BisectConfig, on_log: Callable[[LogEntry], None] | None = None
) -> tuple[StepExit, str]:
    """Classify the repository's current HEAD for ``git bisect run`` (fast 0 / slow 1 / skip 125 / abort 128).

    HEAD, good and bad are each measured in a private worktree, interleaved, and
    HEAD is classified against both endpoints with :func:`classify` (escalating
    processes on ``unknown``). Endpoints that do not differ abort the bisect.

    Returns:
        (exit code, one-line reason).

    Raises:
        BadInputError: bad repository or revisions, or an endpoint cannot be measured
            (the CLI maps this to ``ABORT``).
    """
    rng = resolve_range(cfg.repo, cfg.good, cfg.bad)

    head = git(rng.toplevel, "rev-parse", "--verify", "HEAD^{commit}")
    if head == rng.good:
        return StepExit.FAST, f"HEAD is the --good commit {head[:12]}"
    if head == rng.bad:
        return StepExit.SLOW, f"HEAD is the --bad commit {head[:12]}"
    with WorktreePool(rng.toplevel) as pool:
        s = _Session(cfg, Measurer(pool, cfg.spec), on_log)
        c = s.endpoints(rng.good, rng.bad)
        stop = _endpoint_verdict(cfg, c, c.a.median)
        if stop is not None:
            return StepExit.ABORT, stop[1]
        rec = s.measure_point(head, rng.good, rng.bad, "step")
    if rec.cls is CommitClass.FAST:
        return StepExit.FAST, f"{head[:12]} is fast: vs good {rec.vs_good.sentence()}"
    if rec.cls in (CommitClass.SLOW, CommitClass.INTERMEDIATE):
        return StepExit.SLOW, f"{head[:12]} is {rec.cls.value}: vs good {rec.vs_good.sentence()}"
    return StepExit.SKIP, f"{head[:12]} {rec.note}"
