"""The experiment kinds of ``forensics investigate``: one class each, proposing, estimating and running.

Each class turns the implicated hypotheses of the ledger
(:class:`forensics.diff.ledger.Analysis`, read through its public attributes) into
:class:`~forensics.investigate.model.Experiment` objects (``propose``), says
what one costs (``estimate``, wall seconds from the measured length of one
fresh process) and runs it (``run``), filling in the A/B numbers and the
outcome from :func:`forensics.investigate.decide.decide`.

- :class:`EnvExperiment` (``nccl.env``, ``nccl.env-propagation``): the
  baseline's value of a variable (or its absence) restored in the step's own
  environment, interleaved with today's.
- :class:`CommitExperiment` (``code.change``): the top-ranked commit against its
  parent in private worktrees (:mod:`forensics.bisect.measure`, the user's
  checkout is never touched); :class:`BisectExperiment` bisects the range when
  the suspect does not explain the slowdown (:func:`forensics.bisect.run_bisect`).
- :class:`RemeasureExperiment` (``gpu.contention``, ``gpu.throttling``,
  ``gpu.pcie-link``): conditions the tool never changes; the canary's matching
  component is measured again now, with the process or reason named.
- :class:`PackageExperiment` (``torch.version``, ``nccl.version``,
  ``python.packages``): the baseline's version installed with ``pip --target``
  into a temporary overlay from ``--wheelhouse`` (offline), first on the B
  side's ``PYTHONPATH``; without a wheelhouse the command that would run it.
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from forensics.errors import BadInputError
from forensics.gitio import LOCATION_VARIABLES
from forensics.gpu.readings import PCIE_GEN, PCIE_WIDTH
from forensics.investigate.decide import decide, fmt_value, share_recovered
from forensics.investigate.measure import (
    MAX_PROCESSES,
    ROUND,
    STARTUP_S,
    Subject,
    ab,
    canary_once,
    results_of,
)
from forensics.investigate.model import Experiment, Kind, Outcome
from forensics.model import HypothesisStatus, is_missing
from forensics.redact import REDACTED

ProgressFn = Callable[[str, int, dict], None]


@dataclass
class Context:
    """Everything an experiment needs; built once by :mod:`forensics.investigate.run`.

    Attributes:
        baseline, now: the two snapshots (documents).
        analysis: the ledger (:class:`forensics.diff.ledger.Analysis`).
        subject: what the A/Bs measure (``None``: nothing measurable now).
        has_step: the user gave ``--cmd`` / ``--callable``.
        processes: fresh processes per side.
        threshold, min_share: the decision rule's settings.
        repo: ``--repo``.
        wheelhouse: ``--wheelhouse``.
        canary: the canary may run here (torch importable) and the baseline has it.
        canary_options, canary_process_s: canary settings and the length of one canary process.
        deadline: ``time.monotonic()`` value when the budget is spent.
        on_process: progress callback (side, index, record).
        cache: results shared between experiments (one re-measurement serves several).
        today: per-process values of the subject in the snapshot taken now.
        overlay: variables of the confirmed causes, restored (``None``: unset) in every later experiment.
        reverts: confirmed commits, taken out (their diffs applied in reverse in a private worktree of HEAD)
            in every later experiment that runs today's code.
        packages: confirmed package swaps, ``name -> {"old", "today", "dir"}``: ``dir`` is the temporary
            ``pip --target`` overlay holding the old version, first on PYTHONPATH in every later experiment
            (removed when the experiments end).
        seeds: per-process values already measured, by (commit or place, :meth:`env_key` of the state).
    """

    baseline: dict[str, Any]
    now: dict[str, Any]
    analysis: Any
    subject: Subject | None
    has_step: bool
    processes: int = 6
    threshold: float = 0.05
    min_share: float = 0.5
    repo: Path | None = None
    wheelhouse: Path | None = None
    canary: bool = True
    canary_options: dict[str, Any] = field(default_factory=dict)
    canary_process_s: float = 10.0
    deadline: float = math.inf
    on_process: ProgressFn | None = None
    cache: dict[str, Any] = field(default_factory=dict)
    max_processes: int = MAX_PROCESSES
    today: list[float] = field(default_factory=list)
    overlay: dict[str, str | None] = field(default_factory=dict)
    reverts: list[str] = field(default_factory=list)
    packages: dict[str, dict[str, str]] = field(default_factory=dict)
    seeds: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def baseline_values(self, name: str) -> list[float] | None:
        r = results_of(self.baseline).get(name)
        return [float(x) for x in r["process_medians"]] if r else None

    @staticmethod
    def env_key(env: dict[str, str | None]) -> str:
        """A stable text key of an environment overlay (seeds are kept per commit and overlay)."""
        return ";".join(f"{k}={'<unset>' if v is None else v}" for k, v in sorted(env.items()))

    def state(self, **packages: str) -> dict[str, str | None]:
        """The confirmed variables and package swaps (with ``packages``, ``name=old version``, added) as one
        mapping, the key under which measurements are kept (``package:NAME`` for a swap)."""
        out = dict(self.overlay)
        for name, old in {**{n: p["old"] for n, p in self.packages.items()}, **packages}.items():
            out[f"package:{name}"] = old
        return out

    def applied(self) -> bool:
        """Whether a confirmed intervention (variable, commit, package) is applied in later experiments."""
        return bool(self.overlay or self.reverts or self.packages)

    def side_env(
        self, first: tuple[str, ...] | list[str] = (), more: dict[str, str | None] | None = None
    ) -> dict[str, str | None]:
        """The environment of a side run outside a bisect worktree: the confirmed variables, then ``more``, and
        PYTHONPATH = the folders ``first``, the confirmed package overlays, then the PYTHONPATH the side would
        have had (the restored value when a confirmed variable is PYTHONPATH, else this process's)."""
        env = dict(self.overlay)
        env.update(more or {})
        dirs = [*first, *(p["dir"] for p in self.packages.values())]
        if dirs:
            rest = env["PYTHONPATH"] if "PYTHONPATH" in env else os.environ.get("PYTHONPATH")
            env["PYTHONPATH"] = os.pathsep.join(dirs + ([rest] if rest else []))
        return env

    def seed(self, sha: str, env: dict[str, str | None] | None = None) -> list[float]:
        """Per-process values already measured for ``sha`` under ``env`` (default: :meth:`state`)."""
        return list(self.seeds.get((sha, self.env_key(self.state() if env is None else env)), []))

    def remember(
        self, sha: str, values: list[float], env: dict[str, str | None] | None = None
    ) -> None:
        """Keep ``values`` of ``sha`` under ``env`` (default: :meth:`state`) for later experiments (replaces
        a shorter sample)."""
        key = (sha, self.env_key(self.state() if env is None else env))
        if len(values) >= len(self.seeds.get(key, [])):
            self.seeds[key] = list(values)

    def per_process_s(self) -> float:
        return self.subject.process_s if self.subject else self.canary_process_s

    def can_add(self, sides: int, n: int) -> bool:
        """Whether ``n`` more processes on each of ``sides`` sides fit in the budget left."""
        return sides * n * self.per_process_s() < self.left_s()

    def bench_hint(self) -> str:
        """The options that reproduce the subject's measurement with ``forensics bench``."""
        if self.subject is None or self.subject.kind != "cmd":
            return ""
        return f"--cmd {shlex.quote(self.subject.cmd)}" + (
            f" --metric-regex {shlex.quote(self.subject.metric_regex)}"
            if self.subject.metric_regex
            else ""
        )


def _finish_ab(
    ctx: Context,
    exp: Experiment,
    a: list[float],
    b: list[float],
    *,
    today: list[float] | None = None,
    what: str,
) -> None:
    """Compare A and B like ``bench compare``, compute the share, apply the rule, write the sentence."""
    from forensics.bench.compare import compare_values

    s = ctx.subject
    assert s is not None
    exp.a, exp.b = list(a), list(b)
    exp.noise_floor, exp.comparison = compare_values(
        a, b, threshold=ctx.threshold, higher_is_better=s.higher_is_better, name=s.name
    )
    exp.share = share_recovered(
        ctx.baseline_values(s.name),
        today if today is not None else a,
        a,
        b,
        higher_is_better=s.higher_is_better,
        today_is_a=today is None,
    )
    exp.details["processes_per_side"] = [len(a), len(b)]
    rest = None
    # side A against the baseline: what the causes already confirmed left, or, for a commit older than today's
    # HEAD against its parent, the slowdown at that commit with them applied (later commits are not in it: a
    # commit worth half of what they left read "95% of what was left")
    at = exp.details.get("measured_at")
    left = f"the slowdown at {at} with " if at else "the slowdown left after "
    if ctx.applied() and today is not None:
        # on top of causes already confirmed, this one is judged on the slowdown they left (side A against the
        # baseline); its share of the whole slowdown is what the accounting adds up
        rest = share_recovered(
            ctx.baseline_values(s.name), a, a, b, higher_is_better=s.higher_is_better
        )
        exp.details["share_of_remaining"] = rest.to_json()
    exp.outcome, exp.reason = decide(exp.comparison, rest or exp.share, min_share=ctx.min_share)
    if rest is not None:
        exp.reason += f" (shares here are of {left}" + ", ".join(_on_top(ctx)) + ")"
    sh, c = exp.share, exp.comparison
    moved = (
        f"{what} brings {'the step' if s.kind == 'cmd' else 'the canary'} from "
        f"{fmt_value(c.a.median, s.unit)} to {fmt_value(c.b.median, s.unit)}"
    )
    if sh.point is not None and sh.low is not None:
        part = f"recovers {sh.point:.0%} of the slowdown (95% CI {sh.low:.0%} to {sh.high:.0%}"
        part += f"; baseline {fmt_value(sh.baseline, s.unit)})"
    elif sh.point is not None:
        part = f"recovers {sh.point:.0%} of the slowdown ({sh.note})"
    else:
        part = sh.note or "share unknown"
    if rest is not None and rest.point is not None and rest.low is not None:
        part += (
            f", {rest.point:.0%} ({rest.low:.0%} to {rest.high:.0%}) of "
            + (f"{left}" if at else "what was left after ")
            + ", ".join(_on_top(ctx))
        )
    label = {
        Outcome.CONFIRMED: "confirmed",
        Outcome.PARTIAL: "a partial cause",
        Outcome.REFUTED: "refuted",
        Outcome.INCONCLUSIVE: "inconclusive",
    }.get(exp.outcome, exp.outcome.value)
    exp.sentence = f"{moved}: {part}; {label}"


def _on_top(ctx: Context, commits: bool = True) -> list[str]:
    """The interventions already confirmed, in words ("CUDA_LAUNCH_BLOCKING unset", "commit 1a2b3c4d5e taken
    out", "fakeslow 1.0 instead of 2.0"); ``commits`` false leaves the commits out."""
    return (
        [f"{k} unset" if v is None else f"{k}={v}" for k, v in ctx.overlay.items()]
        + [f"commit {sha[:10]} taken out" for sha in (ctx.reverts if commits else [])]
        + [f"{n} {p['old']} instead of {p['today']}" for n, p in ctx.packages.items()]
    )


@contextmanager
def applied_place(
    ctx: Context, role: str = "applied"
) -> Iterator[tuple[str | None, list[str], str, dict[str, str | None]]]:
    """Where an A/B outside a bisect runs with the confirmed commits taken out: ``(cwd, first, key, env)``.

    Without a confirmed commit: today's checkout (``cwd`` None), no folder first on PYTHONPATH, ``key``
    the checkout's (HEAD's sha when it is clean, else ``checkout``), no variable to add. With one: HEAD in a
    private worktree with every confirmed commit's diff applied in reverse (:func:`reverted_tree`), the
    worktree (and its ``src/``) first on PYTHONPATH as in a bisect, ``key`` the same as
    :func:`measure_revision`'s, and git's location variables (``GIT_DIR`` ...) unset in ``env`` so the step
    is never pointed at the user's repository; the worktree is removed on leaving.

    Raises:
        BadInputError: the confirmed commit's repository is not known, or the revert failed.
    """
    if not ctx.reverts:
        yield None, [], ctx.cache.get("cwd_sha") or "checkout", {}
        return
    from forensics.bisect.worktree import WorktreePool
    from forensics.gitio import git

    if "code" not in ctx.cache:
        raise BadInputError("the confirmed commit's repository is not known here")
    folder, head = ctx.cache["code"]
    top = git(folder, "rev-parse", "--show-toplevel")
    mine = uncommitted(ctx)
    with WorktreePool(top) as pool:
        tree = _reverted(ctx, pool, top, head, ctx.reverts, role, mine)
        first = [str(tree.path)] + (
            [str(tree.path / "src")] if (tree.path / "src").is_dir() else []
        )
        env: dict[str, str | None] = {k: None for k in LOCATION_VARIABLES}
        yield str(tree.path), first, revert_key(head, tuple(ctx.reverts), bool(mine)), env


def revert_key(sha: str, reverts: tuple[str, ...], mine: bool = False) -> str:
    """The key of measurements of ``sha`` with ``reverts`` taken out (``sha`` itself without), and with the
    user's uncommitted changes applied (``mine``)."""
    key = sha if not reverts else f"{sha}-revert-{'-'.join(r[:12] for r in reverts)}"
    return key + ("-uncommitted" if mine else "")


def uncommitted(ctx: Context) -> str:
    """The user's uncommitted changes to tracked files as a patch (``git diff --binary HEAD`` in the checkout,
    read-only), "" when the checkout was clean in the snapshot taken now (``ctx.cache["dirty"]``). Today's
    step runs them; a private worktree of HEAD does not hold them, so "today with the confirmed commits taken
    out" applies them first (:func:`reverted_tree`).

    Raises:
        BadInputError: the checkout's diff could not be read.
    """
    if not ctx.cache.get("dirty") or "code" not in ctx.cache:
        return ""
    if "uncommitted" not in ctx.cache:
        from forensics.gitio import GitError, git

        folder, _ = ctx.cache["code"]
        try:
            top = git(folder, "rev-parse", "--show-toplevel")
            ctx.cache["uncommitted"] = git(
                top, "diff", "--binary", "--no-color", "--no-ext-diff", "HEAD", "--"
            )
        except GitError as exc:
            raise BadInputError(f"your uncommitted changes could not be read: {exc}") from None
    return ctx.cache["uncommitted"]


def _apply_diff(top: str, tree: str, commit: str, *, reverse: bool) -> None:
    """Apply ``commit``'s diff against its first parent to the files of the worktree ``tree`` (``git apply``,
    in reverse with ``reverse``): nothing is written to the repository's objects, refs or index.

    Raises:
        GitError: the diff could not be read, or does not apply.
    """
    from forensics.gitio import git

    patch = git(top, "diff", "--binary", "--no-color", "--no-ext-diff", f"{commit}^", commit, "--")
    _apply_patch(tree, patch, reverse=reverse)


def _apply_patch(tree: str, patch: str, *, reverse: bool = False) -> None:
    """``git apply`` the text ``patch`` to the files of the worktree ``tree`` (in reverse with ``reverse``).

    Raises:
        GitError: it does not apply.
    """
    from forensics.gitio import git

    if not patch.strip():
        return
    fd, name = tempfile.mkstemp(prefix="forensics-revert-", suffix=".patch")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(patch + "\n")
        git(tree, "apply", *(["-R"] if reverse else []), "--whitespace=nowarn", name)
    finally:
        os.unlink(name)


def reverted_tree(
    pool,
    top: str,
    sha: str,
    reverts: tuple[str, ...],
    role: str,
    free: frozenset[str] | set[str] = frozenset(),
    notes: list[str] | None = None,
    mine: str = "",
):
    """A private worktree of ``sha`` with the diffs of ``reverts`` applied in reverse, newest first (``git
    apply -R`` on the files: nothing is written to the repository's objects or refs). ``mine``, the user's
    uncommitted changes as a patch (:func:`uncommitted`), is applied first: today's step runs them.

    When a reverse patch does not apply (a later commit rewrote the same lines: a rename of a local, a
    reformatting), the worktree is checked out at the parent of the oldest of ``reverts`` instead, and the
    commits after it up to ``sha`` that may change behaviour (neither reverted nor in ``free``, the shas
    ``forensics.diff.commits.classify`` judged behaviour-free) are applied forward on the files, oldest
    first, then ``mine``: the same behaviour as ``sha`` without ``reverts``, because what is left out
    changes none. A line saying so is appended to ``notes``.

    Raises:
        BadInputError: the checkout or a reverse patch failed, the parent with the later commits cannot
            stand in for it either (a later commit's diff does not apply on it, or a later merge commit
            that may change behaviour), and neither can ``sha`` with the files as before (:func:`_files_as_before`).
    """
    from forensics.gitio import GitError, git

    order: list[str] = []
    try:
        order = sorted(
            reverts, key=lambda c: len(git(top, "rev-list", f"{c}..{sha}").split())
        )  # newest first
        tree = pool.add(role, sha)
        _apply_patch(tree.path, mine)
        for r in order:
            _apply_diff(top, tree.path, r, reverse=True)
    except GitError as exc:
        failed = (
            f"reverting {', '.join(r[:10] for r in reverts)} on {sha[:10]} in a private "
            f"worktree failed: {exc}"
        )
        if not order:  # the commits could not even be listed
            raise BadInputError(failed) from None
        oldest = order[-1]
        try:
            between = git(top, "rev-list", f"{oldest}..{sha}").split()  # newest first
            merges = set(git(top, "rev-list", "--merges", f"{oldest}..{sha}").split())
            kept = [
                c
                for c in reversed(between)
                if c not in reverts and not any(c.startswith(f) for f in free)
            ]
            merge = next((c for c in kept if c in merges), None)
            if (
                merge
            ):  # its diff cannot be applied forward on the parent: the files as before stand in
                standin = (
                    f"{failed}; nor can its parent {oldest[:10]}^ stand in: the later merge commit "
                    f"{merge[:10]} may change behaviour"
                )
                return _files_as_before(pool, top, sha, reverts, role, mine, standin, notes)
            parent = git(top, "rev-parse", f"{oldest}^").strip()
            tree = pool.add(role, parent)
            for c in kept:
                _apply_diff(top, tree.path, c, reverse=False)
            _apply_patch(tree.path, mine)
        except GitError as again:
            standin = (
                f"{failed}; nor can its parent {oldest[:10]}^ stand in, with the later commits that may "
                f"change behaviour applied: {again}"
            )
            return _files_as_before(pool, top, sha, reverts, role, mine, standin, notes)
        if notes is not None:
            skipped = len(between) - len(kept) - sum(c in reverts for c in between)
            notes.append(
                f"{failed.split(': git')[0]} (a later commit rewrote the same lines); "
                f"{oldest[:10]}'s parent {parent[:10]} was measured instead"
                + (
                    f", with the {len(kept)} later commit(s) that may change behaviour applied on its "
                    f"files ({', '.join(c[:10] for c in kept)})"
                    if kept
                    else ""
                )
                + f": the {skipped} other commit(s) after it up to {sha[:10]} change no behaviour"
            )
    return tree


def _files_as_before(
    pool,
    top: str,
    sha: str,
    reverts: tuple[str, ...],
    role: str,
    mine: str,
    failed: str,
    notes: list[str] | None,
):
    """The last stand-in of :func:`reverted_tree`: a private worktree of ``sha`` whose files touched by
    ``reverts`` are as they were before the oldest of them that touched each (``git diff sha C^ -- FILE``
    applied; nothing written to objects, refs or index), then ``mine``. That also takes out every later
    change to those files (a commit that rewrote the same lines, or undid the effect), which a note names:
    what is measured is today without the changes made to those files since ``reverts``.

    Raises:
        BadInputError: ``failed`` (the revert's and the parent's failures), and why this did not apply either.
    """
    from forensics.gitio import GitError, git

    try:
        touched: dict[str, str] = {}  # file -> the oldest revert that touched it
        for c in sorted(reverts, key=lambda c: len(git(top, "rev-list", f"{c}..{sha}").split())):
            for f in git(
                top, "diff-tree", "--no-commit-id", "--name-only", "--no-renames", "-r", c
            ).split("\n"):
                if f:
                    touched[f] = c  # newest first, so the oldest stays
        if (
            role in pool.trees
        ):  # it may hold ``mine`` and a reverse patch from the first try: checked out afresh
            pool.trees[role].sha = ""
        tree = pool.add(role, sha)
        for c in sorted(set(touched.values())):
            files = sorted(f for f, o in touched.items() if o == c)
            patch = git(
                top,
                "diff",
                "--binary",
                "--no-color",
                "--no-ext-diff",
                "--no-renames",
                sha,
                f"{c}^",
                "--",
                *files,
            )
            _apply_patch(tree.path, patch)
        _apply_patch(tree.path, mine)
        later = [
            x
            for c in set(touched.values())
            for x in git(top, "rev-list", f"{c}..{sha}", "--", *touched).split()
            if x not in reverts
        ]
    except GitError as exc:
        raise BadInputError(
            f"{failed}; nor can its files be restored to before it on {sha[:10]}: {exc}"
        ) from None
    if notes is not None:
        notes.append(
            f"{failed.split(': git')[0]} (a later commit rewrote the same lines); {sha[:10]} was measured with "
            f"{', '.join(sorted(touched))} as before {', '.join(r[:10] for r in reverts)}, which also takes out "
            f"the later change(s) to those files ({', '.join(sorted({x[:10] for x in later})) or 'none'})"
        )
    return tree


def ab_on_top(
    ctx: Context,
    exp: Experiment,
    *,
    what: str,
    b_env: dict[str, str | None] | None = None,
    b_first: tuple[str, ...] = (),
    b_state: dict[str, str | None] | None = None,
) -> None:
    """The adaptive interleaved A/B of an intervention outside a bisect (a variable, a package), on top of
    every intervention already confirmed, on both sides: where :func:`applied_place` says (today's checkout,
    or HEAD with the confirmed commits taken out), with :meth:`Context.side_env` (the confirmed variables, the
    confirmed package overlays first on PYTHONPATH). Side B adds ``b_env`` and the folders ``b_first`` first on
    its PYTHONPATH. ``ctx.processes`` a side, then rounds of :data:`ROUND` while undecided, up to
    ``ctx.max_processes``; fills ``exp`` (:func:`_finish_ab`) and keeps both sides' values as seeds (side B
    under ``b_state``).

    Raises:
        BadInputError: a process failed, or the place could not be prepared.
    """
    with applied_place(ctx) as (cwd, first, key, place):
        a_env = {**place, **ctx.side_env(first)}
        b = {**place, **ctx.side_env([*first, *b_first], b_env)}
        if cwd is not None:
            exp.details["place"] = (
                f"HEAD in a private git worktree with {', '.join(r[:10] for r in ctx.reverts)} taken out "
                "(reverse diff, files only), on both sides"
            )
        a: list[float] = []
        bs: list[float] = []
        n, grown = ctx.processes, False
        while True:  # adaptive: the first round decides a large effect; more only while undecided
            ra, rb = ab(
                ctx.subject,
                a_env=a_env or None,
                b_env=b,
                processes=n,
                budget_s=max(ctx.left_s() / 2, 1.0),
                cwd=cwd,
                on_process=ctx.on_process,
            )
            a, bs = a + ra, bs + rb
            _finish_ab(
                ctx, exp, a, bs, today=ctx.today if ctx.applied() and ctx.today else None, what=what
            )
            first, n = not grown, min(ROUND, ctx.max_processes - len(a))
            if not _more(exp, ctx, n, first):
                break
            grown = True
    ctx.remember(key, a)
    ctx.remember(key, bs, b_state if b_state is not None else ctx.state())


def _more(exp: Experiment, ctx: Context, step: int, first: bool) -> bool:
    """Whether an adaptive A/B takes another round of ``step`` processes a side: while it is undecided, and
    once when its first round alone says ``partial``. A partial cause is a claim, and the first round's
    5 + 5 processes fall in perfect order by chance (Mann-Whitney's floor, p = 0.008) in about one A/B of 250
    where nothing changed; an innocent commit read "a partial cause" so. Never past ``--max-processes``, the
    budget, or where the noise needs more processes than that cap."""
    again = exp.outcome is Outcome.INCONCLUSIVE or (exp.outcome is Outcome.PARTIAL and first)
    return again and step > 0 and ctx.can_add(2, step) and not _hopeless(exp, ctx)


def _hopeless(exp: Experiment, ctx: Context) -> bool:
    """More processes cannot decide it within the cap: the noise needs more than ``ctx.max_processes``."""
    c = exp.comparison
    return (
        c is not None
        and c.processes_needed > ctx.max_processes
        and c.verdict.value == "inconclusive"
    )


class EnvExperiment:
    """Restore the baseline's value of changed variables in the step's own environment (``nccl.env``)."""

    hypotheses = ("nccl.env", "nccl.env-propagation")
    GROUP_FROM = (
        3  # with this many variables, first restore them all at once (one A/B can refute them all)
    )

    @staticmethod
    def _parent_env(doc: dict[str, Any]) -> dict[str, Any]:
        sec = (doc.get("probes") or {}).get("nccl_env") or {}
        return ((sec.get("data") or {}).get("parent") or {}).get("env") or {}

    @classmethod
    def changed_vars(cls, ctx: Context, hyp) -> list[str]:
        """Variables the hypothesis's implicating findings name, in the ledger's order."""
        out: list[str] = []
        for f in hyp.findings:
            if f.status is not HypothesisStatus.IMPLICATED:
                continue
            for path in f.fields:
                var = path.rsplit(".", 1)[-1] if path.startswith("nccl_env.") else ""
                if var and var not in out:
                    out.append(var)
        return out

    @classmethod
    def propose(
        cls, ctx: Context, hyp, taken: set[str], next_id: Callable[[str], str]
    ) -> list[Experiment]:
        before, after = cls._parent_env(ctx.baseline), cls._parent_env(ctx.now)
        restore: dict[str, str | None] = {}
        out: list[Experiment] = []
        for var in cls.changed_vars(ctx, hyp):
            if var in taken:
                continue
            taken.add(var)
            old, new = before.get(var), after.get(var)
            old = None if old is None or is_missing(old) else str(old)
            new = None if new is None or is_missing(new) else str(new)
            if (
                old == new
            ):  # a propagation problem: same value in the launching process on both sides
                out.append(
                    Experiment(
                        next_id("env"),
                        Kind.NONE,
                        hyp.id,
                        f"{var} reaches the workers differently",
                        outcome=Outcome.NOT_RUN,
                        reason=(
                            f"{var} has the same value in the launching process on both sides; the "
                            "launch path changes what the workers see, and the tool does not change "
                            "launch paths: set it where the workers start (the launcher's --env or "
                            "config) and run investigate again"
                        ),
                    )
                )
                continue
            if (old and REDACTED in old) or (new and REDACTED in new):
                out.append(
                    Experiment(
                        next_id("env"),
                        Kind.ENV,
                        hyp.id,
                        f"restore {var}",
                        outcome=Outcome.NOT_RUN,
                        reason=f"{var}'s value is redacted in a snapshot, so it cannot be restored; "
                        "take the baseline with --no-redact to test it",
                    )
                )
                continue
            restore[var] = old
        if not restore:
            return out
        single = [cls._one(ctx, hyp, {k: v}, next_id("env")) for k, v in restore.items()]
        if len(restore) >= cls.GROUP_FROM:
            group = cls._one(ctx, hyp, restore, next_id("env"))
            for e in single:
                e.params["depends_on"] = group.id
            return out + [group] + single
        return out + single

    @classmethod
    def _one(cls, ctx: Context, hyp, restore: dict[str, str | None], eid: str) -> Experiment:
        what = ", ".join(f"{k}={v}" if v is not None else f"{k} unset" for k, v in restore.items())
        title = (
            f"restore {what} (the baseline's value{'s' if len(restore) > 1 else ''}) in "
            f"{'the step' if ctx.subject and ctx.subject.kind == 'cmd' else 'the canary'}'s environment"
        )
        exp = Experiment(eid, Kind.ENV, hyp.id, title, b_label=f"today with {what}")
        exp.params["restore"] = restore
        exp.details["restore"] = {k: v if v is not None else None for k, v in restore.items()}
        opts = " ".join(
            f"--b-env {shlex.quote(f'{k}={v}')}" if v is not None else f"--b-unset {k}"
            for k, v in restore.items()
        )
        hint = ctx.bench_hint()
        exp.command = (
            f"forensics bench {hint + ' ' if hint else ''}--processes {ctx.processes} {opts} "
            "-o today.json --b-output restored.json"
        )
        return exp

    @staticmethod
    def estimate(ctx: Context, exp: Experiment) -> float:
        s = ctx.subject
        per = s.process_s if s else ctx.canary_process_s
        return 2 * ctx.processes * per + STARTUP_S

    @staticmethod
    def run(ctx: Context, exp: Experiment) -> None:
        restore = exp.params["restore"]
        sets = ", ".join(f"{k}={v}" for k, v in restore.items() if v is not None)
        unsets = ", ".join(k for k, v in restore.items() if v is None)
        gone = (
            "set now, known to cost speed"
            if "known_cost" in exp.details
            else "unset in the baseline"
        )
        what = " and ".join(
            ([f"Restoring {sets}"] if sets else [])
            + ([f"{'unsetting' if sets else 'Unsetting'} {unsets} ({gone})"] if unsets else [])
        )
        if ctx.applied():
            what += " on top of " + ", ".join(_on_top(ctx))
        ab_on_top(ctx, exp, what=what, b_env=restore, b_state={**ctx.state(), **restore})


class CommitExperiment:
    """The top-ranked commit of a pulled range against its parent, in private worktrees (``code.change``)."""

    hypotheses = ("code.change",)

    @staticmethod
    def _folder(ctx: Context, rc) -> str | None:
        for cand in (rc.read_from, str(ctx.repo) if ctx.repo else "", rc.path):
            if cand and Path(cand).is_dir():
                return cand
        return None

    @classmethod
    def propose(
        cls, ctx: Context, hyp, taken: set[str], next_id: Callable[[str], str]
    ) -> list[Experiment]:
        out: list[Experiment] = []
        for rc in ctx.analysis.repos:
            if not rc.changed or rc.path in taken:
                continue
            taken.add(rc.path)
            name = Path(rc.path).name or rc.path
            if rc.role != "main":
                out.append(
                    Experiment(
                        next_id("commit"),
                        Kind.COMMIT,
                        hyp.id,
                        f"{name} ({rc.role}): test its commits",
                        outcome=Outcome.NOT_RUN,
                        reason=(
                            f"{rc.path} is an installed package's repository ({rc.role}), not the "
                            "folder the step runs in: testing its commits needs the step to import it "
                            "from a worktree; run forensics bisect --repo on it with a --setup that "
                            "installs it"
                        ),
                    )
                )
                continue
            if not rc.commits:
                why = (
                    rc.availability
                    if rc.availability != "ok"
                    else (
                        "no new commits (uncommitted changes or a reset): no commit to test; the tool never changes your "
                        "working tree"
                    )
                )
                out.append(
                    Experiment(
                        next_id("commit"),
                        Kind.COMMIT,
                        hyp.id,
                        f"{name}: test the suspect commit",
                        outcome=Outcome.NOT_RUN,
                        reason=why,
                    )
                )
                continue
            from forensics.diff.commits import classify, suspects

            top = (suspects(rc) or rc.commits)[
                0
            ]  # the strongest suspect by what it changed (issue 25)
            exp = Experiment(
                next_id("commit"),
                Kind.COMMIT,
                hyp.id,
                f'{name}: {top.sha[:10]} "{top.subject}" against its parent',
                a_label=f"{top.sha[:10]}",
                b_label="its parent",
            )
            exp.details.update(
                {
                    "repository": rc.path,
                    "commit": top.sha,
                    "subject": top.subject,
                    "hot_lines": top.hot_lines,
                    "commits_in_range": len(rc.commits),
                    "why": classify(top).why,
                    "good": rc.before_sha,
                    "bad": rc.after_sha,
                }
            )
            folder = cls._folder(ctx, rc)
            hint = ctx.bench_hint()
            exp.command = (
                f"forensics bisect --repo {shlex.quote(folder or rc.path)} --good {top.sha[:12]}^ "
                f"--bad {top.sha[:12]} {hint or '--cmd STEP'}"
            )
            exp.params.update({"folder": folder, "sha": top.sha, "head": rc.after_sha})
            if not ctx.has_step:
                exp.outcome, exp.reason = (
                    Outcome.NOT_RUN,
                    (
                        "no step given: the canary does not run your code, so a commit cannot change it; give --cmd or "
                        "--callable"
                    ),
                )
            elif folder is None:
                exp.outcome, exp.reason = (
                    Outcome.NOT_RUN,
                    (
                        f"the repository {rc.path} is not on this machine; give --repo with a clone of it"
                    ),
                )
            out.append(exp)
            if len(rc.commits) > 1 and rc.before_sha and rc.after_sha:
                bis = Experiment(
                    next_id("bisect"),
                    Kind.BISECT,
                    hyp.id,
                    f"{name}: bisect the {len(rc.commits)} commits {rc.before_sha[:10]}..{rc.after_sha[:10]}",
                )
                free = _behaviour_free(rc.commits)
                ctx.cache.setdefault("behaviour_free", set()).update(free)
                bis.params.update(
                    {
                        "folder": folder,
                        "good": rc.before_sha,
                        "bad": rc.after_sha,
                        "depends_on": exp.id,
                        "n": len(rc.commits) - len(free),
                        "free": free,
                    }
                )
                if free:
                    bis.details["behaviour_free"] = [sha[:10] for sha in free]
                bis.command = (
                    f"forensics bisect --repo {shlex.quote(folder or rc.path)} --good {rc.before_sha[:12]} "
                    f"--bad {rc.after_sha[:12]} {hint or '--cmd STEP'} -o bisect.html"
                )
                if exp.outcome is Outcome.NOT_RUN:
                    bis.outcome, bis.reason = Outcome.NOT_RUN, exp.reason
                out.append(bis)
        return out

    @staticmethod
    def estimate(ctx: Context, exp: Experiment) -> float:
        # first round: both sides fresh, interleaved (nothing measured earlier is reused: commit_vs_parent)
        per = ctx.subject.process_s if ctx.subject else 5.0
        return 2 * ctx.processes * per + 2 * STARTUP_S

    @staticmethod
    def run(ctx: Context, exp: Experiment) -> None:
        if exp.params.get("retest_of") and ctx.reverts:
            commit_on_top(ctx, exp, exp.params["folder"], exp.params["sha"], exp.params["head"])
        else:
            commit_vs_parent(ctx, exp, exp.params["folder"], exp.params["sha"], exp.params["head"])


def _spec(ctx: Context):
    from forensics.bisect.measure import StepSpec

    s = ctx.subject
    return StepSpec(
        cmd=s.cmd,
        metric=s.metric,
        metric_regex=s.metric_regex,
        higher_is_better=s.higher_is_better,
        timeout_s=s.timeout_s,
        env=dict(ctx.overlay) or None,
        drop_warmup=True,
        pythonpath=tuple(p["dir"] for p in ctx.packages.values()),
    )


def commit_vs_parent(
    ctx: Context, exp: Experiment, folder: str, sha: str, head: str | None
) -> None:
    """A/B of ``sha`` (A) against its first parent (B) in private worktrees, interleaved, with the interventions
    already confirmed applied on both sides (``ctx.overlay``); fills ``exp`` by the rule of :mod:`decide`.

    Both sides are fresh processes, interleaved: ``ctx.processes`` a side, then rounds of :data:`ROUND` while
    the call is undecided, up to ``ctx.max_processes`` a side. Samples measured earlier are not reused on
    either side (today's step when ``sha`` is HEAD, the baseline, the commits a bisect measured): they were
    measured at another time, so a machine that got faster or slower since would read as the commit's
    effect, and today's and the baseline's are the very samples that decided the step got slower, whose
    chance extremes a comparison reusing them would confirm. The share uses today's step (``ctx.today``)
    for today's side.

    Raises:
        BadInputError: the step failed in a worktree.
    """
    from forensics.bisect.measure import Measurer
    from forensics.bisect.worktree import WorktreePool
    from forensics.gitio import git

    top = git(folder, "rev-parse", "--show-toplevel")
    parent = git(top, "rev-parse", f"{sha}^")
    subject = exp.details.get("subject") or git(top, "show", "-s", "--format=%s", sha)
    exp.details["parent"] = parent
    sides = [(sha, "suspect"), (parent, "parent")]

    def on_process(which, value):
        if ctx.on_process:
            label = {sha: "A", parent: "B"}.get(which, "HEAD")
            ctx.on_process(label, len(m.samples.get(which, [])), {"value": value})

    what = f'Going back from {sha[:10]} "{subject}" to its parent {parent[:10]}'
    if ctx.overlay or ctx.packages:
        what += " (with " + ", ".join(_on_top(ctx, commits=False)) + ")"
    if head and sha != head:
        exp.details["measured_at"] = sha[
            :10
        ]  # side A is this commit, not today: _finish_ab words its share
    with WorktreePool(top) as pool:
        m = Measurer(pool, _spec(ctx), on_process)
        _worktree_ab(ctx, exp, m, sides, what)
    exp.a_label, exp.b_label = sha[:10], f"its parent {parent[:10]}"
    exp.details["isolation"] = (
        "each commit ran in its own private git worktree, both in fresh processes, interleaved; your "
        "checkout was not touched"
    )


def _worktree_ab(ctx: Context, exp: Experiment, m, sides: list[tuple[str, str]], what: str) -> None:
    """The adaptive A/B of two worktree sides (``[(A key, role), (B key, role)]``, prepared in ``m``, a
    :class:`forensics.bisect.measure.Measurer`): ``ctx.processes`` fresh processes a side, interleaved, then
    rounds of :data:`ROUND` while :func:`_more` says so; fills ``exp`` (:func:`_finish_ab`, today's step for
    the share) and keeps both sides' values (``ctx.remember``).

    Raises:
        BadInputError: the step failed in a worktree.
    """
    from forensics.bisect.measure import StepFailed

    n = ctx.processes
    while True:
        try:
            m.top_up(sides, n)
        except StepFailed as exc:
            raise BadInputError(f"the step failed in a worktree: {exc}") from None
        a, b = m.samples[sides[0][0]], m.samples[sides[1][0]]
        _finish_ab(ctx, exp, a, b, today=ctx.today or None, what=what)
        step = min(ROUND, ctx.max_processes - n)
        if not _more(exp, ctx, step, n == ctx.processes):
            break
        n += step
    for key, _ in sides:
        ctx.remember(key, m.samples[key])


def _reverted(ctx: Context, pool, top: str, sha: str, reverts, role: str, mine: str):
    """:func:`reverted_tree` with what ``ctx`` knows: the commits judged behaviour-free, the notes to add to."""
    return reverted_tree(
        pool,
        top,
        sha,
        tuple(reverts),
        role,
        ctx.cache.get("behaviour_free", set()),
        ctx.cache.setdefault("notes", []),
        mine,
    )


def commit_on_top(ctx: Context, exp: Experiment, folder: str, sha: str, head: str) -> None:
    """A/B of today with the confirmed commits taken out (A) against the same with ``sha`` taken out too (B):
    HEAD in two private worktrees with the reverse diffs applied (:func:`reverted_tree`, with its stand-ins
    when a reverse patch does not apply), the user's uncommitted changes applied first, the confirmed overlay
    on both sides; fresh processes, interleaved, adaptive as :func:`commit_vs_parent`. A commit's A/B against
    its parent cannot have another commit taken out on either side, so this is how a commit is tested again
    on top of a confirmed commit (a partial cause's re-test); its share of what the confirmed causes left is
    ``details.share_of_remaining``.

    Raises:
        BadInputError: a worktree could not be made with the commits taken out, or the step failed in one.
    """
    from forensics.bisect.measure import Measurer
    from forensics.bisect.worktree import WorktreePool
    from forensics.gitio import git

    top = git(folder, "rev-parse", "--show-toplevel")
    mine = uncommitted(ctx)
    kept = tuple(ctx.reverts)
    sides = [
        (revert_key(head, kept, bool(mine)), "on-top-a", kept),
        (revert_key(head, (*kept, sha), bool(mine)), "on-top-b", (*kept, sha)),
    ]
    subject = exp.details.get("subject") or git(top, "show", "-s", "--format=%s", sha)
    what = f'Taking {sha[:10]} "{subject}" out of today with ' + ", ".join(_on_top(ctx))

    def on_process(which, value):
        if ctx.on_process:
            label = {sides[0][0]: "A", sides[1][0]: "B"}.get(which, "HEAD")
            ctx.on_process(label, len(m.samples.get(which, [])), {"value": value})

    with WorktreePool(top) as pool:
        m = Measurer(pool, _spec(ctx), on_process)
        for key, role, reverts in sides:
            m._ready[key] = _reverted(ctx, pool, top, head, reverts, role, mine)
        _worktree_ab(ctx, exp, m, [(key, role) for key, role, _ in sides], what)
    exp.a_label = f"today with {', '.join(_on_top(ctx))}"
    exp.b_label = f"the same with {sha[:10]} taken out too"
    exp.details["isolation"] = (
        "both sides ran HEAD in private git worktrees with the commits taken out (reverse diffs, files "
        "only), in fresh processes, interleaved; your checkout was not touched"
    )


def measure_revision(
    ctx: Context,
    folder: str,
    sha: str,
    *,
    reverts: tuple[str, ...] = (),
    against: list[float] | None = None,
    higher_is_better: bool = False,
    role: str = "baseline",
    decided: Callable[[list[float]], bool] | None = None,
    today_sha: str = "",
    mine: str = "",
) -> list[float]:
    """Measure the step at ``sha`` (with ``reverts`` reverted, uncommitted, and the patch ``mine`` applied
    first: the user's uncommitted changes) in a private worktree, the confirmed overlay applied: ``ctx.processes`` fresh processes, then rounds of :data:`ROUND` while its comparison with
    ``against`` (today's step) is undecided, or while ``decided(values)`` is false, up to ``ctx.max_processes``.

    With ``today_sha`` (the commit today's checkout runs, clean), today's side grows too: ``against`` seeds it,
    and each undecided round adds :data:`ROUND` fresh processes of ``today_sha`` in its own worktree,
    interleaved with the baseline's, until the call is decided, a slowdown of ``ctx.threshold`` is ruled out,
    or ``ctx.max_processes`` a side; today's values are kept as ``ctx.seed(today_sha)``. One side growing
    alone cannot narrow a median whose other side has 5 processes.

    Raises:
        BadInputError: the checkout, the revert or the step failed.
    """
    from forensics.bench.compare import compare_values
    from forensics.bisect.measure import Measurer, StepFailed
    from forensics.bisect.worktree import WorktreePool
    from forensics.gitio import git
    from forensics.stats import Verdict

    top = git(folder, "rev-parse", "--show-toplevel")
    key = revert_key(sha, reverts, bool(mine))
    with WorktreePool(top) as pool:
        m = Measurer(
            pool,
            _spec(ctx),
            lambda which, v: (
                ctx.on_process and ctx.on_process(role, len(m.samples.get(which, [])), {"value": v})
            ),
        )
        if ctx.seed(key):
            m.samples[key] = ctx.seed(key)
        if reverts or mine:
            m._ready[key] = _reverted(ctx, pool, top, sha, reverts, role, mine)
        both = bool(today_sha and against and decided is None and today_sha != key)
        if both:
            m.samples[today_sha] = [float(x) for x in against or []]
        wanted = [(key, role)]
        n = ctx.processes
        while True:
            try:
                m.top_up(wanted, n)
            except StepFailed as exc:
                raise BadInputError(f"the step failed at {sha[:10]} in a worktree: {exc}") from None
            step = min(ROUND, ctx.max_processes - n)
            if (
                (not against and decided is None)
                or step <= 0
                or not ctx.can_add(2 if both else 1, step)
            ):
                break
            if decided is not None:
                if decided(list(m.samples[key])):
                    break
            elif both:
                _, c = compare_values(
                    m.samples[key],
                    m.samples[today_sha],
                    threshold=ctx.threshold,
                    higher_is_better=higher_is_better,
                )  # as the regression call reads it: the baseline is A, today B
                if c.verdict is not Verdict.INCONCLUSIVE or c.ci_high < 1 + ctx.threshold:
                    break
                wanted = [(key, role), (today_sha, "today")]
            else:
                _, c = compare_values(
                    against,
                    m.samples[key],
                    threshold=ctx.threshold,
                    higher_is_better=higher_is_better,
                )
                if c.verdict is not Verdict.INCONCLUSIVE or c.processes_needed > ctx.max_processes:
                    break
            n += step
    ctx.remember(key, m.samples[key])
    if both:
        ctx.remember(today_sha, m.samples[today_sha])
    return list(m.samples[key])


def _merged_side(folder: str, res) -> tuple[str, str, str] | None:
    """When a bisect named a merge commit as the culprit: (the merge base of its two parents, its second
    parent, the merge), the range of the commits it brought in; else None."""
    from forensics.bisect.run import Outcome as BOutcome
    from forensics.gitio import GitError, git

    if res.outcome is not BOutcome.CULPRIT or res.culprit is None:
        return None
    try:
        shas = git(folder, "rev-list", "--parents", "-n", "1", res.culprit.sha).split()
        if len(shas) != 3:  # the commit and its parents: a merge of two
            return None
        base = git(folder, "merge-base", shas[1], shas[2]).strip()
    except GitError:
        return None
    if not base or base == shas[2]:
        return None
    return base, shas[2], shas[0]


def _behaviour_free(commits) -> list[str]:
    """Shas of the commits whose change has no behaviour, by ``forensics.diff.commits.classify`` where that
    classification exists (else none: every commit may be measured)."""
    try:
        from forensics.diff.commits import classify  # type: ignore[attr-defined]
    except ImportError:
        return []
    out = []
    for c in commits:
        try:
            if classify(c).behaviour_free:
                out.append(c.sha)
        except Exception:  # noqa: BLE001 - a commit it cannot read is simply measured
            continue
    return out


class BisectExperiment:
    """Bisect the pulled range when the suspect commit does not explain the slowdown (``forensics bisect``)."""

    hypotheses = ("code.change",)

    @staticmethod
    def estimate(ctx: Context, exp: Experiment) -> float:
        per = ctx.subject.process_s if ctx.subject else 5.0
        n = max(int(exp.params.get("n", 2)), 2)
        p = max(ctx.processes, 5)
        # endpoints not yet measured, one commit per round (log2 n rounds), then the culprit against its
        # parent, both fresh and interleaved
        ends = sum(p - min(len(ctx.seed(exp.params.get(k) or "")), p) for k in ("good", "bad"))
        return (ends + math.ceil(math.log2(n + 1)) * p + 2 * ctx.processes) * per + 4 * STARTUP_S

    @staticmethod
    def run(ctx: Context, exp: Experiment) -> None:
        from forensics.bisect.run import BisectConfig, run_bisect
        from forensics.bisect.run import Outcome as BOutcome

        good, bad = exp.params["good"], exp.params["bad"]
        seeds = {c: ctx.seed(c) for c in (good, bad) if ctx.seed(c)}
        cfg = BisectConfig(
            exp.params["folder"],
            good,
            bad,
            _spec(ctx),
            processes=max(5, min(ctx.processes, 8)),
            threshold=ctx.threshold,
            confirm_factor=0,
            seeds=seeds,
            free=frozenset(exp.params.get("free") or ()),
        )
        exp.details["reused_endpoints"] = {c[:10]: len(v) for c, v in seeds.items()}

        def on_process(sha, value):
            if ctx.on_process:
                ctx.on_process(sha[:7], 0, {"value": value})

        res = run_bisect(cfg, None, on_process)
        merged = _merged_side(exp.params["folder"], res)
        if merged is not None:
            # the range's only descendants of good were merges (a pull that merged: the pulled commits are not
            # descendants of the user's own last commit), so it named the merge, whose first parent is the user's
            # commit: going back re-measured the whole pull. The commits the merge brought in are bisected.
            base, side, merge = merged
            exp.details["merge_named"] = merge[:10]
            res2 = run_bisect(
                BisectConfig(
                    exp.params["folder"],
                    base,
                    side,
                    _spec(ctx),
                    processes=cfg.processes,
                    threshold=ctx.threshold,
                    confirm_factor=0,
                    free=cfg.free,
                ),
                None,
                on_process,
            )
            said = (
                f"the bisect of {good[:10]}..{bad[:10]} named the merge {merge[:10]}, whose first parent is your "
                f"own commit; the {res2.n_commits} commit(s) it merged were bisected ({base[:10]}..{side[:10]})"
            )
            if res2.outcome is BOutcome.CULPRIT and res2.culprit is not None:
                res2.notes.insert(0, said)
                res = res2
            else:
                res.notes.append(f"{said} and named none ({res2.outcome.value}: {res2.sentence})")
        for rec in res.records:  # the commits it measured serve later bisects' endpoints
            if rec.samples and rec.cls.value not in ("skipped",):
                ctx.remember(rec.info.sha, rec.samples)
        exp.details["bisect"] = {
            "outcome": res.outcome.value,
            "sentence": res.sentence,
            "culprit": res.culprit.to_json() if res.culprit else None,
            "confirmed": res.confirmed,
            "gap_share": res.gap_share,
            "notes": res.notes,
            "rounds": res.rounds,
        }
        exp.details["bisect_confirmation"] = (
            res.confirmation.to_json() if res.confirmation else None
        )
        if res.outcome is BOutcome.CULPRIT and res.culprit is not None:
            # bisect's own confirmation has no A/A floor or noise gate: the culprit is tested again against its
            # parent with the same rule as every other experiment, in fresh processes
            exp.details["subject"] = res.culprit.subject
            if ctx.left_s() < CommitExperiment.estimate(ctx, exp):
                exp.outcome = Outcome.INCONCLUSIVE
                exp.reason = (
                    f"bisect named {res.culprit.short}, but the budget is spent before the A/B that would "
                    f"confirm it: forensics bisect --good {res.culprit.short}^ --bad {res.culprit.short}"
                )
                exp.sentence = f"forensics bisect: {res.sentence}"
                return
            commit_vs_parent(
                ctx,
                exp,
                exp.params["folder"],
                res.culprit.sha,
                exp.params.get("head") or exp.params["bad"],
            )
            exp.sentence = (
                f"bisect named {res.culprit.short}; {exp.sentence[0].lower()}{exp.sentence[1:]}"
            )
            return
        if res.outcome is BOutcome.ENVIRONMENT:
            exp.outcome = Outcome.REFUTED
            exp.reason = (
                "the old and the new commit measure the same now: the code is not the cause"
            )
        else:
            exp.outcome = Outcome.INCONCLUSIVE
            exp.reason = f"bisect ended with {res.outcome.value}: {res.sentence}"
        exp.sentence = f"forensics bisect: {res.sentence}"


# which canary results a condition shows in, and the words for it
_COMPONENTS = {
    "gpu.contention": (
        ["canary.compute_ms", "component.matmul_tflops"],
        "another process on the GPU",
    ),
    "gpu.throttling": (["component.matmul_tflops", "canary.compute_ms"], "clocks cut under load"),
    "gpu.pcie-link": (
        ["component.h2d_gbps", "component.d2h_gbps"],
        "a PCIe link below its maximum",
    ),
}


class RemeasureExperiment:
    """Re-measure the canary's matching component now and say whether the condition still holds."""

    hypotheses = tuple(_COMPONENTS)

    @classmethod
    def propose(
        cls, ctx: Context, hyp, taken: set[str], next_id: Callable[[str], str]
    ) -> list[Experiment]:
        comps, words = _COMPONENTS[hyp.id]
        exp = Experiment(
            next_id("remeasure"),
            Kind.REMEASURE,
            hyp.id,
            f"re-measure {', '.join(comps)} now ({words}; the tool never changes GPU settings or "
            "other people's processes)",
            a_label="baseline",
            b_label="now",
        )
        exp.params["components"] = comps
        exp.command = f"forensics bench --processes {max(ctx.processes, 5)} -o now.json && forensics bench compare BASELINE-BENCH.json now.json"
        if not ctx.canary:
            exp.outcome, exp.reason = (
                Outcome.NOT_RUN,
                ctx.cache.get("no_canary_reason", "the canary cannot run here"),
            )
        return [exp]

    @staticmethod
    def estimate(ctx: Context, exp: Experiment) -> float:
        return (
            0.0
            if "remeasure" in ctx.cache
            else max(ctx.processes, 5) * ctx.canary_process_s + STARTUP_S
        )

    @staticmethod
    def run(ctx: Context, exp: Experiment) -> None:
        from forensics.bench.compare import compare_values, foreign_processes, throttled
        from forensics.stats import Verdict

        if "remeasure" not in ctx.cache:
            ctx.cache["remeasure"] = canary_once(
                ctx.canary_options,
                processes=max(ctx.processes, 5),
                budget_s=max(ctx.left_s(), 1.0),
                on_process=ctx.on_process,
            )
        doc = ctx.cache["remeasure"]
        now = {r["name"]: r for r in doc["results"]}
        lines, verdicts = [], []
        for name in exp.params["components"]:
            base = ctx.baseline_values(name)
            if base is None or name not in now:
                lines.append(f"{name}: not measured on both sides")
                continue
            r = now[name]
            floor, c = compare_values(
                base,
                r["process_medians"],
                threshold=ctx.threshold,
                higher_is_better=bool(r.get("higher_is_better")),
                name=name,
            )
            verdicts.append(c)
            if exp.comparison is None:
                exp.comparison, exp.noise_floor, exp.subject = c, floor, name
                exp.a, exp.b = list(base), list(r["process_medians"])
            lines.append(
                f"{name} {c.a.median:.4g} -> {c.b.median:.4g} {r.get('unit', '')}: {c.sentence()}"
            )
        tel = doc.get("telemetry")
        cond = []
        if exp.hypothesis == "gpu.contention":
            for gpu, procs in foreign_processes(doc).items():
                cond.append(f"{gpu} also runs {', '.join(procs[:4])}")
        elif exp.hypothesis == "gpu.throttling":
            cond += [
                f"{k} in {v:.0%} of busy samples" for k, v in throttled(tel).items() if v > 0.05
            ]
        elif (
            exp.hypothesis == "gpu.pcie-link"
            and isinstance(tel, dict)
            and isinstance(tel.get("gpus"), dict)
        ):
            for g in tel["gpus"].values():
                gen, width = (
                    (g.get(PCIE_GEN) or {}).get("median"),
                    (g.get(PCIE_WIDTH) or {}).get("median"),
                )
                if gen is not None:
                    cond.append(f"GPU {g.get('index')} PCIe Gen{gen} x{width} under load")
        if not isinstance(tel, dict) or "gpus" not in tel:
            cond_note = "no GPU telemetry here, so the condition itself cannot be seen"
        else:
            cond_note = (
                "; ".join(cond) if cond else "the condition is not seen in this run's telemetry"
            )
        exp.details.update({"components": lines, "condition": cond_note})
        measured = [ln for ln in lines if not ln.endswith("not measured on both sides")]
        lines = measured + [ln for ln in lines if ln not in measured]
        if any(c.verdict is Verdict.SLOWER for c in verdicts):
            exp.outcome = Outcome.STILL_PRESENT
            exp.reason = "the component is still slower than in the baseline, beyond the threshold"
            exp.sentence = f"Still present: {cond_note}; {lines[0]}"
        elif verdicts and all(c.ci_high < 1 + ctx.threshold for c in verdicts):
            exp.outcome = Outcome.GONE
            exp.reason = (
                f"the component is back: a slowdown of {ctx.threshold:.0%} or more against the baseline is "
                "ruled out (the CI of the ratio ends below it)"
            )
            exp.sentence = f"Gone now: {lines[0]}; {cond_note}"
        else:
            exp.outcome = Outcome.INCONCLUSIVE
            exp.reason = "; ".join(lines) or "no component measured on both sides"
            exp.sentence = f"Could not tell whether it is still present: {exp.reason}"


_PKG_NAMES = {
    "torch.version": lambda n: n.lower() == "torch",
    "nccl.version": lambda n: n.lower().startswith("nvidia-nccl"),
    "python.packages": lambda n: n.lower() != "torch" and not n.lower().startswith("nvidia-nccl"),
}


class PackageExperiment:
    """The baseline's version of a changed package in a temporary ``pip --target`` overlay (B side only)."""

    hypotheses = tuple(_PKG_NAMES)
    MAX_PER_HYPOTHESIS = 3
    INSTALL_S = 30.0

    @staticmethod
    def _packages(doc: dict[str, Any]) -> dict[str, str]:
        sec = (doc.get("probes") or {}).get("software") or {}
        pk = (sec.get("data") or {}).get("packages")
        return {str(k): str(v) for k, v in pk.items()} if isinstance(pk, dict) else {}

    @classmethod
    def propose(
        cls, ctx: Context, hyp, taken: set[str], next_id: Callable[[str], str]
    ) -> list[Experiment]:
        before, after = cls._packages(ctx.baseline), cls._packages(ctx.now)
        pick = _PKG_NAMES[hyp.id]
        names = [
            n
            for n in sorted(set(before) & set(after))
            if before[n] != after[n] and pick(n) and n not in taken
        ]
        out = []
        for name in names[: cls.MAX_PER_HYPOTHESIS]:
            taken.add(name)
            old = before[name]
            exp = Experiment(
                next_id("package"),
                Kind.PACKAGE,
                hyp.id,
                f"{name} {old} (the baseline's) instead of {after[name]}, in a temporary overlay",
                b_label=f"today with {name}=={old}",
            )
            exp.params.update({"name": name, "old": old})
            exp.details.update(
                {"package": name, "baseline_version": old, "today_version": after[name]}
            )
            hint = ctx.bench_hint() or "--cmd STEP"
            exp.command = (
                f"pip download --no-deps -d WHEELS {name}=={old} && forensics investigate --baseline "
                f"BASELINE.json {hint} --wheelhouse WHEELS"
            )
            if ctx.cache.get("measured_now"):
                # the baseline snapshot's HEAD was measured now, with today's packages: a package changed since
                # the snapshot is on both sides of the slowdown measured, so a swap cannot be a share of it
                exp.outcome, exp.reason = (
                    Outcome.NOT_RUN,
                    f"the baseline's commit was measured now with today's {name} {after[name]}, so the change "
                    f"from {old} is on both sides of the slowdown measured; take a baseline snapshot with the step "
                    "measured (forensics snapshot --bench --bench-cmd STEP) to test it",
                )
            elif ctx.wheelhouse is None:
                exp.outcome, exp.reason = (
                    Outcome.NOT_RUN,
                    (
                        f"{name}=={old} is not available offline: give --wheelhouse DIR holding its wheel"
                    ),
                )
            elif not ctx.has_step and not ctx.canary:
                exp.outcome, exp.reason = (
                    Outcome.NOT_RUN,
                    "no step to measure (give --cmd or --callable)",
                )
            out.append(exp)
        if not names:
            out.append(
                Experiment(
                    next_id("package"),
                    Kind.PACKAGE,
                    hyp.id,
                    "swap a package back",
                    outcome=Outcome.NOT_RUN,
                    reason="no distribution with a version on both sides changed (added or removed "
                    "packages, or a library outside pip): nothing to swap back",
                )
            )
        return out

    @classmethod
    def estimate(cls, ctx: Context, exp: Experiment) -> float:
        per = ctx.subject.process_s if ctx.subject else ctx.canary_process_s
        reused = exp.params.get("installed_overlay")
        install = 0.0 if reused and Path(str(reused)).is_dir() else cls.INSTALL_S
        return 2 * ctx.processes * per + install

    @staticmethod
    def run(ctx: Context, exp: Experiment) -> None:
        """Install the old version into a temporary overlay and A/B it on top of the confirmed interventions
        (:func:`ab_on_top`: the overlay first on side B's PYTHONPATH). A confirmed or partial swap's overlay is
        kept in ``exp.params["overlay_dir"]`` (and ``ctx.cache["overlays"]``, removed when the experiments end)
        so that later experiments run with it (a partial cause kept in the accounting); any other is removed at
        once."""
        name, old = exp.params["name"], exp.params["old"]
        reused = str(exp.params.get("installed_overlay") or "")
        if reused and not Path(reused).is_dir():
            reused = ""
        overlay = reused or tempfile.mkdtemp(prefix="forensics-overlay-")
        keep = False
        try:
            if not reused:  # a partial cause's re-test reuses the overlay its first A/B installed
                argv = [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--no-deps",
                    "--no-index",
                    "--find-links",
                    str(ctx.wheelhouse),
                    "--target",
                    overlay,
                    f"{name}=={old}",
                ]
                try:
                    proc = subprocess.run(
                        argv,
                        capture_output=True,
                        text=True,
                        timeout=600,
                        errors="replace",
                        stdin=subprocess.DEVNULL,
                    )
                except subprocess.TimeoutExpired:
                    exp.outcome, exp.reason = (
                        Outcome.NOT_RUN,
                        f"pip install {name}=={old} timed out",
                    )
                    return
                if proc.returncode != 0:
                    last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
                    exp.outcome, exp.reason = (
                        Outcome.NOT_RUN,
                        f"{name}=={old} could not be installed from the wheelhouse: {last}",
                    )
                    return
            exp.details["overlay"] = (
                "pip --target into a temporary folder, first on PYTHONPATH for side B only; "
                "--no-deps, so its dependencies stay today's; removed afterwards (kept until the "
                "experiments end when confirmed, so later ones run with it)"
            )
            what = f"{name} {old} instead of {exp.details['today_version']}"
            if ctx.applied():
                what += " on top of " + ", ".join(_on_top(ctx))
            ab_on_top(ctx, exp, what=what, b_first=(overlay,), b_state=ctx.state(**{name: old}))
            keep = exp.outcome in (Outcome.CONFIRMED, Outcome.PARTIAL)
            if keep:
                exp.params["overlay_dir"] = overlay
                ctx.cache.setdefault("overlays", []).append(overlay)
        finally:
            # a reused overlay is the partial cause's own: removed with the kept ones, when the experiments end
            if not keep and not reused:
                shutil.rmtree(overlay, ignore_errors=True)


KINDS: dict[Kind, Any] = {
    Kind.ENV: EnvExperiment,
    Kind.COMMIT: CommitExperiment,
    Kind.BISECT: BisectExperiment,
    Kind.REMEASURE: RemeasureExperiment,
    Kind.PACKAGE: PackageExperiment,
}
"""kind -> the class that estimates and runs it."""

PROPOSERS = [EnvExperiment, CommitExperiment, RemeasureExperiment, PackageExperiment]
"""Classes that turn a hypothesis into experiments, by the ids in their ``hypotheses``."""
