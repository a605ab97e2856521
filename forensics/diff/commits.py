"""``code.change`` evidence at diff time: the commits between two HEADs and how HEAD moved.

Input is the ``git`` probe's data in each snapshot (``{"repos": [{"path", "role",
"head": {"sha", ...}, "reflog": [{"old", "new", "time", "action"}] newest first,
"dirty", "modified", "staged", ...}]}``). For each repository named on both
sides (matched by path) this module

- says how HEAD moved, from the reflog entries that appeared between the two
  snapshots (:func:`head_move`): fast-forward pull, pull with a merge or a
  rebase, checkout, reset, rebase, commit, amend, merge, cherry-pick;
- lists the commits between the two HEADs through the git gateway,
  :mod:`forensics.gitio` (subject, author date, files touched, lines
  added/deleted; ``git log`` and ``git diff-tree --numstat``), when the
  repository is on this machine (or ``--repo`` points at a clone of it);
- flags files matching performance-sensitive path patterns
  (:data:`DEFAULT_HOT_PATHS`, extended by ``hot_paths`` in ``.forensics.yaml``
  in the repository or in ``--config``) and ranks commits by their **weighted
  hot lines** (:attr:`CommitChanges.weight`): lines from ``git diff-tree -M -C
  --numstat`` (a renamed or copied file counts only the lines that changed, not
  the lines it moved), times the file's category weight
  (:data:`forensics.diff.hotpaths.CATEGORY_WEIGHTS`: collective communication and
  CUDA graphs 4, kernels/attention/MoE/quantization 3, scheduler 2, the rest 1),
  times :data:`NOT_LOADED_FACTOR` for a commit that touches only files the user's
  step never loaded (when the benchmark recorded them: ``loaded_files`` of a
  ``user`` result, :mod:`forensics.step.loaded_files`);
- judges each commit by what it changed (:mod:`forensics.diff.suspects`: both versions of
  every file it touched, read with ``git cat-file blob``): behaviour-free or not, its
  signals, its weight; commits are ranked suspects first (:func:`order`), and a pull
  weighs what its commits changed (:meth:`RepoChanges.weight`);
- flags hot files in a dirty working tree.

Only read-only git commands are run (``rev-parse``, ``log``, ``diff-tree``, ``cat-file``),
with the gateway's safety settings (``GIT_OPTIONAL_LOCKS=0``, so git does not
even refresh the index; no hook; a timeout). A commit the repository no longer has (garbage
collected, shallow clone) degrades to "commit not available".
"""

from __future__ import annotations

import enum
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from forensics.diff import suspects as suspects_mod
from forensics.diff.hotpaths import DEFAULT_HOT_PATHS, HotPaths, category_weight, load_hot_paths  # noqa: F401
from forensics.diff.suspects import CommitAssessment, FileAssessment
from forensics.errors import BadInputError
from forensics.gitio import Calls, Commit, GitError, git, moved_checkouts, read_commits, succeeds
from forensics.model import Finding, HypothesisStatus, Severity
from forensics.words import plural

MAX_COMMITS = 200
"""At most this many commits are listed per side (newest first)."""

MAX_READ_BYTES = 1 << 20
"""A file version larger than this is not read for the behaviour check (judged by its path and lines only)."""

MAX_READ_FILES = 60
"""At most this many files of one commit are read for the behaviour check; the rest are judged by their paths."""

MAX_READ_TOTAL = 400
"""At most this many files are read for the behaviour check per repository and side (newest commits first);
past it, files are judged by their paths and the notes say so."""

MAX_READ_S = 5.0
"""Seconds the behaviour check may spend per repository and side (parsing dominates: a 2,000-line Python file
costs tens of milliseconds a version); past it, files are judged by their paths and the notes say so."""

NOT_LOADED_FACTOR = 0.25
"""Weight of a commit whose files the user's step never loaded (recorded by the benchmark), against 1."""


class MoveKind(str, enum.Enum):
    """How HEAD moved, read from one reflog entry's message."""

    FAST_FORWARD_PULL = "fast-forward pull"
    PULL_MERGE = "pull with a merge"
    PULL_REBASE = "pull with a rebase"
    CHECKOUT = "checkout"
    RESET = "reset"
    REBASE = "rebase"
    COMMIT = "commit"
    AMEND = "amend"
    MERGE = "merge"
    CHERRY_PICK = "cherry-pick"
    REVERT = "revert"
    CLONE = "clone"
    OTHER = "other"


_MOVE_RULES: list[tuple[re.Pattern[str], MoveKind]] = [
    (re.compile(r"^pull\b.*fast-forward", re.I), MoveKind.FAST_FORWARD_PULL),
    # "pull --no-rebase: Merge made by ..." is a merge ('a pull with a rebase' named the merge a rebase)
    (re.compile(r"^pull\b(?!.*--no-rebase).*rebase", re.I), MoveKind.PULL_REBASE),
    (re.compile(r"^pull\b", re.I), MoveKind.PULL_MERGE),
    (re.compile(r"^checkout:", re.I), MoveKind.CHECKOUT),
    (re.compile(r"^switch:", re.I), MoveKind.CHECKOUT),
    (re.compile(r"^reset:", re.I), MoveKind.RESET),
    (re.compile(r"^rebase", re.I), MoveKind.REBASE),
    (re.compile(r"^commit \(amend\)", re.I), MoveKind.AMEND),
    (re.compile(r"^commit \(merge\)", re.I), MoveKind.MERGE),
    (re.compile(r"^commit", re.I), MoveKind.COMMIT),
    (re.compile(r"^merge\b", re.I), MoveKind.MERGE),
    (re.compile(r"^cherry-pick", re.I), MoveKind.CHERRY_PICK),
    (re.compile(r"^revert", re.I), MoveKind.REVERT),
    (re.compile(r"^clone", re.I), MoveKind.CLONE),
]


def classify_reflog_action(action: str) -> MoveKind:
    """Map a reflog message ("pull origin main: Fast-forward") to a :class:`MoveKind`."""
    for pattern, kind in _MOVE_RULES:
        if pattern.search(action or ""):
            return kind
    return MoveKind.OTHER


@dataclass
class HeadMove:
    """How HEAD moved between two snapshots of one repository.

    Attributes:
        moved: HEAD's commit differs.
        kinds: one :class:`MoveKind` per new reflog entry, oldest first.
        entries: the reflog entries that appeared between the snapshots, oldest first.
        sentence: one line for the report ("HEAD moved 1a2b3c4 -> 5d6e7f8 by a fast-forward pull ...").
        short: the same without the reflog times (for summaries and the verdict).
    """

    moved: bool
    kinds: list[MoveKind]
    entries: list[dict[str, Any]]
    sentence: str
    short: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "moved": self.moved,
            "kinds": [k.value for k in self.kinds],
            "entries": self.entries,
            "sentence": self.sentence,
            "short": self.short or self.sentence,
        }


def _short(sha: Any) -> str:
    return str(sha)[:10] if isinstance(sha, str) and sha else "?"


def _head_sha(repo: Mapping[str, Any]) -> str | None:
    head = repo.get("head")
    sha = head.get("sha") if isinstance(head, dict) else None
    return sha if isinstance(sha, str) and sha else None


EVENTS_LISTED = 3
"""New reflog events named one by one in the sentence of a HEAD move; more are counted by kind, the first
and the last named (every entry is in :attr:`HeadMove.entries`)."""
ACTION_CHARS = 100
"""A reflog message longer than this is cut in the sentence (``...``)."""


def head_move(before: Mapping[str, Any], after: Mapping[str, Any]) -> HeadMove:
    """Say how HEAD moved, from the reflog entries in AFTER that BEFORE did not have.

    Args:
        before, after: one repository's entry of the git probe data on each side.

    Returns:
        a :class:`HeadMove`; pure (reads only the two dicts).
    """
    old, new = _head_sha(before), _head_sha(after)
    seen = {
        (e.get("old"), e.get("new"), e.get("time"), e.get("action"))
        for e in before.get("reflog") or []
        if isinstance(e, dict)
    }
    fresh = [
        e
        for e in after.get("reflog") or []
        if isinstance(e, dict)
        and (e.get("old"), e.get("new"), e.get("time"), e.get("action")) not in seen
    ]
    fresh.reverse()  # the probe lists newest first; tell the story oldest first
    kinds = [classify_reflog_action(str(e.get("action", ""))) for e in fresh]
    moved = bool(new and old != new)  # no HEAD before (no commits yet) and one after: moved too
    span = f"{_short(old)} -> {_short(new)}" if old else f"(no commits) -> {_short(new)}"

    def how(with_time: bool) -> str:
        def one(k: MoveKind, e: dict[str, Any]) -> str:
            when = f", {e.get('time', '?')}" if with_time else ""
            action = str(e.get("action", ""))
            if len(action) > ACTION_CHARS:  # a commit's whole subject: the commits are listed below
                action = action[: ACTION_CHARS - 3].rstrip() + "..."
            return f'{k.value} ("{action}"{when})'

        if len(fresh) == 1:
            return f"a {one(kinds[0], fresh[0])}"
        if len(fresh) <= EVENTS_LISTED:
            return f"{len(fresh)} reflog events: " + "; ".join(
                one(k, e) for k, e in zip(kinds, fresh)
            )
        tally: dict[str, int] = {}
        for k in kinds:
            tally[k.value] = tally.get(k.value, 0) + 1
        # every event was listed, each with its whole message: 14 of a day's commits and rebases filled 130
        # lines of the terminal's table (the entries are all in the JSON report)
        return (
            f"{len(fresh)} reflog events ({', '.join(f'{v} x{n}' for v, n in tally.items())}): the first "
            f"{one(kinds[0], fresh[0])}, the last {one(kinds[-1], fresh[-1])}"
        )

    if fresh:
        lead = f"HEAD moved {span} by " if moved else f"HEAD is back at {_short(new)} after "
        sentence, short = lead + how(True), lead + how(False)
    elif moved:
        sentence = short = (
            f"HEAD moved {span} with no new reflog entry (reflog expired or disabled, or HEAD was "
            "written directly)"
        )
    else:
        sentence = short = f"HEAD unchanged at {_short(new)}"
    return HeadMove(moved, kinds, fresh, sentence, short)


@dataclass
class FileChange:
    """One file a commit touched: lines added/deleted (``None`` for binary files) and hot categories."""

    path: str
    added: int | None
    deleted: int | None
    hot: list[str] = field(default_factory=list)
    renamed_from: str = ""
    loaded: bool | None = None

    @property
    def lines(self) -> int:
        return (self.added or 0) + (self.deleted or 0) if self.added is not None else 1

    @property
    def weight(self) -> float:
        """Changed lines x the file's category weight (0 when it is not hot)."""
        return self.lines * category_weight(self.hot)

    def to_json(self) -> dict[str, Any]:
        out = {
            "path": self.path,
            "added": self.added,
            "deleted": self.deleted,
            "hot": list(self.hot),
            "weight": self.weight,
        }
        if self.renamed_from:
            out["renamed_from"] = self.renamed_from
        if self.loaded is not None:
            out["loaded_by_step"] = self.loaded
        return out


@dataclass
class CommitChanges(Commit):
    """A commit between the two HEADs (:class:`forensics.gitio.Commit`, from ``git log``) and the files it
    touched (``git diff-tree --numstat`` against its first parent).

    Attributes:
        files: one :class:`FileChange` per file.
        side: ``new`` (in AFTER's history, not BEFORE's) or ``dropped`` (the reverse,
            after a reset or a rebase).
    """

    files: list[FileChange] = field(default_factory=list)
    side: str = "new"
    assessment: CommitAssessment | None = None

    @property
    def added(self) -> int:
        return sum(f.added or 0 for f in self.files)

    @property
    def deleted(self) -> int:
        return sum(f.deleted or 0 for f in self.files)

    @property
    def hot_files(self) -> list[FileChange]:
        return [f for f in self.files if f.hot]

    @property
    def hot_lines(self) -> int:
        return sum(f.lines for f in self.hot_files)

    @property
    def hot_categories(self) -> list[str]:
        return sorted({c for f in self.files for c in f.hot})

    @property
    def unloaded(self) -> bool:
        """The step's loaded files are known and this commit touches none of them."""
        known = [f.loaded for f in self.files if f.loaded is not None]
        return bool(known) and len(known) == len(self.files) and not any(known)

    @property
    def weight(self) -> float:
        """Ranking weight: sum of the files' weighted changed lines, lowered when the step never loaded them."""
        w = sum(f.weight for f in self.files)
        return w * NOT_LOADED_FACTOR if self.unloaded else w

    @property
    def renamed(self) -> list[FileChange]:
        return [f for f in self.files if f.renamed_from]

    def to_json(self) -> dict[str, Any]:
        return {
            "sha": self.sha,
            "subject": self.subject,
            "author": self.author,
            "authored_at": self.authored_at,
            "side": self.side,
            "added": self.added,
            "deleted": self.deleted,
            "hot_lines": self.hot_lines,
            "hot_categories": self.hot_categories,
            "weight": round(self.weight, 2),
            "loaded_by_step": None
            if not any(f.loaded is not None for f in self.files)
            else not self.unloaded,
            "files": [f.to_json() for f in self.files],
            "assessment": self.assessment.to_json() if self.assessment is not None else None,
        }


@dataclass
class RepoChanges:
    """Everything ``code.change`` knows about one repository between the two snapshots.

    Attributes:
        path: the repository path as the snapshots name it.
        read_from: the folder commits were read from ("" when none could be).
        availability: ``ok``, or why the commit list is absent ("commit not available ...").
        commits: new commits, hottest first, then newest first.
        dropped: commits no longer in HEAD's history (reset, rebase), same order.
        dirty_hot: hot files modified or staged in AFTER's working tree.
        notes: other evidence lines (dirty tree, shallow clone, operation in progress).
        skipped_patterns: hot-path patterns from a config file that were left out and why
            (:attr:`forensics.diff.hotpaths.HotPaths.skipped`).
    """

    path: str
    role: str
    before_sha: str | None
    after_sha: str | None
    move: HeadMove
    read_from: str = ""
    availability: str = "ok"
    commits: list[CommitChanges] = field(default_factory=list)
    dropped: list[CommitChanges] = field(default_factory=list)
    dirty_hot: list[FileChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped_patterns: list[str] = field(default_factory=list)
    to_tell: str = ""

    @property
    def changed(self) -> bool:
        return (
            self.move.moved or bool(self.move.entries) or bool(self.notes) or bool(self.dirty_hot)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "role": self.role,
            "before": self.before_sha,
            "after": self.after_sha,
            "head_move": self.move.to_json(),
            "read_from": self.read_from,
            "availability": self.availability,
            "commits": [c.to_json() for c in self.commits],
            "dropped": [c.to_json() for c in self.dropped],
            "dirty_hot": [f.to_json() for f in self.dirty_hot],
            "notes": list(self.notes),
            "skipped_patterns": list(self.skipped_patterns),
            "to_tell": self.to_tell,
            "pull_weight": self.weight().to_json() if self.move.moved else None,
        }

    def weight(self) -> suspects_mod.PullWeight:
        """What the pull weighs for ``code.change`` (:func:`forensics.diff.suspects.pull_weight`): ``none`` when no
        commit can have changed the step, ``unknown`` when the commits could not be read, else ``scaled``."""
        if self.availability != "ok":
            return suspects_mod.pull_weight(
                [], readable=False, unknown_why=self.availability, command=self.to_tell
            )
        return suspects_mod.pull_weight([classify(c) for c in self.commits + self.dropped])


def _rank(commits: list[CommitChanges]) -> list[CommitChanges]:
    """Suspects first, strongest first (:func:`forensics.diff.suspects.order`), behaviour-free commits last."""
    return suspects_mod.order(commits)


def classify(commit: CommitChanges) -> CommitAssessment:
    """What ``commit`` changed, judged: behaviour-free or not, its signals, its weight (issue 25).

    The assessment made when the commit was listed (:func:`list_commits` reads both versions of
    each file); a commit built without one is judged by its paths alone (documentation, tests
    and CI weigh nothing; any other file is a signal-free suspect).

    Returns:
        a :class:`forensics.diff.suspects.CommitAssessment`.
    """
    if commit.assessment is None:
        files = suspects_mod.paths_only([(f.path, f.renamed_from) for f in commit.files], None)
        commit.assessment = suspects_mod.assess(files, commit.weight)
    return commit.assessment


def order(commits: list[CommitChanges]) -> list[CommitChanges]:
    """``commits`` in the order to test them: suspects with the strongest signals in files the step loaded
    first, then signal-free suspects by weighted hot lines, then commits touching only files the step never
    loaded, behaviour-free commits last (:func:`forensics.diff.suspects.order`)."""
    for c in commits:
        classify(c)
    return suspects_mod.order(commits)


def suspects(rc: "RepoChanges") -> list[CommitChanges]:
    """The new commits of ``rc`` that are suspects, in the order to test them (empty: none can have changed the
    step: behaviour-free, documentation, tests, CI, or files the step never loaded)."""
    return [c for c in order(list(rc.commits)) if classify(c).suspect]


def _numstat(path: Path, commit: Commit) -> list[tuple[str, int | None, int | None, str]]:
    """(path, added, deleted, renamed_from) per file from ``git diff-tree -r -M -C --numstat -z`` between
    ``commit``'s first parent and itself (``--root`` for a root commit).

    Rename and copy detection: a moved file counts only its changed lines.

    Raises:
        GitError: git failed or timed out.
    """
    args = ["-r", "-M", "-C", "--numstat", "-z", "--no-commit-id"]
    args += [commit.parents[0], commit.sha] if commit.parents else ["--root", commit.sha]
    out = git(path, "diff-tree", *args, ceiling=True)
    parts = out.split("\0")
    rows = []
    i = 0
    while i < len(parts):
        head = parts[i]
        if not head.strip():
            i += 1
            continue
        fields = head.split("\t")
        if len(fields) < 3:
            i += 1
            continue
        a, d, path_ = fields[0].strip(), fields[1], fields[2]
        src = ""
        if path_ == "" and i + 2 < len(parts):  # rename/copy: "a\td\t\0src\0dst"
            src, path_ = parts[i + 1], parts[i + 2]
            i += 3
        else:
            i += 1
        added = int(a) if a.isdigit() else None
        deleted = int(d) if d.isdigit() else None
        rows.append((path_, added, deleted, src))
    return rows


def _hot(hot: HotPaths, path: str) -> list[str]:
    """The hot categories of ``path``; none for documentation, tests and CI files (``docs/verify.md`` is not
    speculative-decoding code, ``tests/kernels/test_attn.py`` not a kernel the step runs)."""
    return [] if suspects_mod.file_kind(path) in suspects_mod.INERT else hot.categories(path)


def _texts(
    path: Path, commit: Commit, files: list[FileChange], budget: list[float] | None = None
) -> list[tuple[str | None, str | None, bool] | None]:
    """(old text, new text, binary) of each file, read with ``git cat-file blob REV:PATH`` through
    :class:`forensics.gitio.Calls` (:data:`READ_AT_ONCE` files at a time); ``None`` for a file not read (beyond
    :data:`MAX_READ_FILES`, documentation/tests/CI, or git could not say). A side the commit (or its first
    parent) does not have is ``None``; a version over :data:`MAX_READ_BYTES`, with a NUL byte or not UTF-8
    is binary."""
    parent = commit.parents[0] if commit.parents else None
    wanted = [
        i
        for i, fc in enumerate(files)
        if i < MAX_READ_FILES and suspects_mod.file_kind(fc.path) not in suspects_mod.INERT
    ]
    if budget is not None:  # [files still to read in this listing, the monotonic deadline]
        if time.monotonic() > budget[1]:
            budget[0] = 0
        wanted = wanted[: max(0, int(budget[0]))]
        budget[0] -= len(wanted)
    out: list[tuple[str | None, str | None, bool] | None] = [None] * len(files)
    if not wanted:
        return out
    for chunk in range(0, len(wanted), READ_AT_ONCE):
        _read_chunk(path, commit.sha, parent, files, wanted[chunk : chunk + READ_AT_ONCE], out)
    return out


READ_AT_ONCE = 8
"""Files whose two versions are read at once (two git processes each)."""


def _read_chunk(
    path: Path,
    sha: str,
    parent: str | None,
    files: list[FileChange],
    wanted: list[int],
    out: list[tuple[str | None, str | None, bool] | None],
) -> None:
    with Calls(path, ceiling=True) as calls:
        handles = {}
        for i in wanted:
            fc = files[i]
            old = (
                calls.start("cat-file", "blob", f"{parent}:{fc.renamed_from or fc.path}")
                if parent
                else None
            )
            handles[i] = (old, calls.start("cat-file", "blob", f"{sha}:{fc.path}"))
        for i, (h_old, h_new) in handles.items():
            try:
                sides = [
                    calls.result_bytes(h, check=False) if h is not None else (1, b"")
                    for h in (h_old, h_new)
                ]
            except GitError:  # timed out: this file is judged by its path
                continue
            texts, binary = [], False
            for rc, data in sides:
                if rc != 0:
                    texts.append(None)
                elif len(data) > MAX_READ_BYTES or b"\0" in data[:8192]:
                    texts.append(None)
                    binary = True
                else:
                    try:
                        texts.append(data.decode("utf-8"))
                    except UnicodeDecodeError:
                        texts.append(None)
                        binary = True
            out[i] = (texts[0], texts[1], binary)


def _assess(
    path: Path,
    commit: Commit,
    files: list[FileChange],
    loaded: set[str] | None,
    weight: float,
    budget: list[float] | None = None,
) -> CommitAssessment:
    """Judge a commit from both versions of its files (:func:`_texts`; a file not read is judged by its path)."""
    try:
        texts = _texts(path, commit, files, budget)
    except GitError:  # git could not be started: every file by its path
        texts = [None] * len(files)
    out: list[FileAssessment] = []
    for fc, read in zip(files, texts):
        if read is None:
            out.extend(suspects_mod.paths_only([(fc.path, fc.renamed_from)], loaded))
            continue
        old, new, binary = read
        out.append(
            suspects_mod.assess_file(
                fc.path,
                old,
                new,
                loaded=loaded,
                renamed_from=fc.renamed_from,
                binary=binary or fc.added is None,
            )
        )
    return suspects_mod.assess(out, weight)


def _commit_changes(
    path: Path,
    commit: Commit,
    hot: HotPaths,
    side: str,
    loaded: set[str] | None = None,
    budget: list[float] | None = None,
) -> CommitChanges:
    files = []
    for name, added, deleted, src in _numstat(path, commit):
        fc = FileChange(name, added, deleted, _hot(hot, name), src)
        if loaded is not None:
            fc.loaded = fc.path in loaded or bool(src and src in loaded)
        files.append(fc)
    info = CommitChanges(**vars(commit), files=files, side=side)
    info.assessment = _assess(path, commit, files, loaded, info.weight, budget)
    return info


def list_commits(
    path: Path, old: str, new: str, hot: HotPaths, loaded: set[str] | None = None
) -> tuple[list[CommitChanges], list[CommitChanges], list[str]]:
    """Commits in ``new`` not in ``old`` and the reverse, read from the repository at ``path`` (itself, not
    a repository above it) through :mod:`forensics.gitio`: ``git log old..new`` and ``new..old`` (at most
    :data:`MAX_COMMITS` each), one ``git diff-tree`` per commit.

    ``loaded``: repository-relative paths the user's step loaded (None when unknown).

    Returns:
        (new commits ranked, dropped commits ranked, notes).

    Raises:
        LookupError: a commit is not in the repository (message says which).
        OSError: the folder is not a git repository, git is not installed, or git failed or timed out.
    """
    try:
        git(path, "rev-parse", "--git-dir", ceiling=True)
    except GitError as exc:
        if exc.not_a_repository:
            raise OSError(f"{path} is not a git repository") from None
        raise OSError(str(exc)) from None
    notes = []
    try:
        for sha in (old, new):
            if not succeeds(
                path, "rev-parse", "--verify", "-q", "--end-of-options", f"{sha}^{{commit}}"
            ):
                raise LookupError(
                    f"commit {sha[:10]} not available in {path} (garbage-collected, or a shallow "
                    "or different clone)"
                )
        shallow = Path(path) / git(path, "rev-parse", "--git-path", "shallow", ceiling=True)
        if shallow.exists():
            notes.append(f"{path} is a shallow clone: older commits may be missing from the list")
        budgets = [[MAX_READ_TOTAL, time.monotonic() + MAX_READ_S] for _ in range(2)]
        fresh = [
            _commit_changes(path, c, hot, "new", loaded, budgets[0])
            for c in read_commits(path, f"{old}..{new}", max_count=MAX_COMMITS, ceiling=True)
        ]
        gone = [
            _commit_changes(path, c, hot, "dropped", loaded, budgets[1])
            for c in read_commits(path, f"{new}..{old}", max_count=MAX_COMMITS, ceiling=True)
        ]
    except GitError as exc:
        raise OSError(str(exc)) from None
    if any(b[0] <= 0 for b in budgets) and any(
        f.read is False
        for c in fresh + gone
        for f in (c.assessment.files if c.assessment else [])
        if suspects_mod.file_kind(f.path) not in suspects_mod.INERT
    ):
        notes.append(
            f"the behaviour check stopped at {MAX_READ_TOTAL} files or {MAX_READ_S:g} s a side; later "
            "commits' files are judged by their paths"
        )
    if len(fresh) >= MAX_COMMITS:
        notes.append(f"only the newest {MAX_COMMITS} commits are listed")
    _net_zero(path, fresh)
    _net_zero(path, gone)
    return _rank(fresh), _rank(gone), notes


def _changed_lines(path: Path, a: str, b: str) -> list[str]:
    """The file headers and the added and removed lines of ``git diff a b`` (hunk positions set aside, so a
    revert made after other commits moved the lines still matches)."""
    text = git(
        path, "diff", "--no-color", "--no-ext-diff", "--no-renames", a, b, "--", ceiling=True
    )
    return [
        line
        for line in text.splitlines()
        if line.startswith(("diff --git", "+", "-")) and not line.startswith(("+++", "---"))
    ]


def _net_zero(path: Path, commits: list[CommitChanges]) -> None:
    """Mark a commit and a later one of the same list that reverts it exactly (``git revert``: its diff is the
    reverse of the first's) as changing no behaviour between them: neither is a suspect, a bisect measures
    neither, and today's code holds neither. Measured against its parent the reverted commit is slower and a
    bisect's midpoint at it is 'slow' (its revert undoes it later), so a pull with a reverted slow commit and
    the real one after it named and 'confirmed' the reverted commit. Only a revert whose subject names it
    (``Revert "<subject>"``) is checked, with two ``git diff``; one that does not match exactly is left alone.
    """
    by_subject = {c.subject: c for c in commits if len(c.parents) == 1}
    for r in commits:
        subject = r.subject or ""
        if not (subject.startswith('Revert "') and subject.endswith('"')) or len(r.parents) != 1:
            continue
        x = by_subject.get(subject[len('Revert "') : -1])
        if x is None or x is r or x.assessment is None or r.assessment is None:
            continue
        try:
            if _changed_lines(path, x.sha, x.parents[0]) != _changed_lines(
                path, r.parents[0], r.sha
            ):
                continue
        except GitError:
            continue
        for c, why in (
            (x, f"reverted by {r.sha[:10]} in the same pull"),
            (r, f"reverts {x.sha[:10]} of the same pull"),
        ):
            c.assessment = CommitAssessment(
                False, True, f"no behaviour change: {why}", [], 0.0, c.assessment.files
            )


def _dirty_notes(
    before: Mapping[str, Any], after: Mapping[str, Any], hot: HotPaths
) -> tuple[list[str], list[FileChange]]:
    notes: list[str] = []
    files = [str(f) for f in (after.get("modified") or []) + (after.get("staged") or [])]
    hot_files = [
        FileChange(f, None, None, _hot(hot, f)) for f in dict.fromkeys(files) if _hot(hot, f)
    ]
    was, now = bool(before.get("dirty")), bool(after.get("dirty"))
    before_files = set(map(str, (before.get("modified") or []) + (before.get("staged") or [])))
    new_files = [f for f in dict.fromkeys(files) if f not in before_files]
    before_untracked = set(map(str, before.get("untracked") or []))
    new_untracked = [str(f) for f in after.get("untracked") or [] if str(f) not in before_untracked]

    def listed(names: list[str]) -> str:
        return f" ({', '.join(names[:5])}{' ...' if len(names) > 5 else ''})" if names else ""

    if now and (not was or new_files or new_untracked):
        what = (
            [f"{plural(len(new_files), 'file')} newly modified or staged{listed(new_files)}"]
            if new_files
            else []
        )
        if new_untracked:
            what.append(f"{plural(len(new_untracked), 'untracked file')}{listed(new_untracked)}")
        if not what:
            what.append(
                "conflicted files" if after.get("conflicted") else "changes git reports as dirty"
            )
        notes.append(
            f"working tree {'became dirty' if not was else 'has new uncommitted changes'}: "
            + "; ".join(what)
        )
    elif was and not now:
        notes.append(
            "working tree was dirty before and is clean now (uncommitted changes were committed, "
            "stashed or discarded)"
        )
    if after.get("operation"):
        notes.append(f"a git {after['operation']} is in progress in the AFTER snapshot")
    return notes, hot_files


def loaded_files(*snapshots: Mapping[str, Any]) -> list[str] | None:
    """Files the user's step loaded, from ``loaded_files`` of the ``user`` bench results (None when none recorded)."""
    out: set[str] = set()
    seen = False
    for snap in snapshots:
        bench = snap.get("bench")
        for r in (bench.get("results") or []) if isinstance(bench, dict) else []:
            files = (
                r.get("loaded_files") if isinstance(r, dict) and r.get("kind") == "user" else None
            )
            if isinstance(files, list):
                seen = True
                out.update(str(f) for f in files if isinstance(f, str))
    return sorted(out) if seen else None


def _relative(files: list[str] | None, repo_path: str) -> set[str] | None:
    if files is None:
        return None
    import os

    root = os.path.realpath(repo_path).rstrip(os.sep) + os.sep
    return {
        f[len(root) :]
        for f in (os.path.realpath(x) if not x.startswith(root) else x for x in files)
        if f.startswith(root)
    }


def _repos(snapshot: Mapping[str, Any]) -> list[dict[str, Any]]:
    section = (snapshot.get("probes") or {}).get("git") or {}
    repos = (section.get("data") or {}).get("repos")
    return (
        [r for r in repos if isinstance(r, dict) and isinstance(r.get("path"), str)]
        if isinstance(repos, list)
        else []
    )


def analyse(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    *,
    repo: Path | None = None,
    config: Path | None = None,
) -> list[RepoChanges]:
    """``code.change`` evidence for every repository named in both snapshots' git data.

    Args:
        before, after: loaded snapshots.
        repo: ``--repo``: read commits of the main repository from this clone
            (e.g. when the snapshots were taken on another machine).
        config: ``--config``: extra hot-path patterns (see :func:`load_hot_paths`).

    Returns:
        one :class:`RepoChanges` per repository present on both sides (at the same path, or moved:
        :func:`forensics.gitio.moved_checkouts`), main first.

    Raises:
        BadInputError: ``repo`` is not a folder, or a config file is invalid.
    """
    if repo is not None and not Path(repo).is_dir():
        raise BadInputError(f"--repo {repo}: no such folder")
    load_hot_paths(None, config)  # a bad --config is an error even when no repository moved
    b_repos = {r["path"]: r for r in _repos(before)}
    out: list[RepoChanges] = []
    a_repos = _repos(after)
    moved = {
        a: b for a, (b, _) in moved_checkouts(b_repos, a_repos).items()
    }  # at another path after
    pairs = [
        (b_repos[moved.get(r["path"], r["path"])], r)
        for r in a_repos
        if moved.get(r["path"], r["path"]) in b_repos
    ]
    pairs.sort(key=lambda p: p[1].get("role") != "main")
    step_files = loaded_files(before, after)
    for i, (b, a) in enumerate(pairs):
        where = (
            Path(repo)
            if (repo is not None and i == 0 and a.get("role", "main") == "main")
            else Path(a["path"])
        )
        hot = load_hot_paths(where if where.is_dir() else None, config)
        rc = RepoChanges(
            a["path"], str(a.get("role", "main")), _head_sha(b), _head_sha(a), head_move(b, a)
        )
        rc.skipped_patterns = list(hot.skipped)
        rc.notes, rc.dirty_hot = _dirty_notes(b, a, hot)
        if rc.move.moved:
            rc.to_tell = _to_tell(a, where)
            if not where.is_dir():
                rc.availability = (
                    f"commit list not available: {where} is not on this machine (use --repo)"
                )
            else:
                try:
                    loaded = _relative(step_files, a["path"])
                    rc.commits, rc.dropped, notes = list_commits(
                        where, rc.before_sha, rc.after_sha, hot, loaded
                    )
                    if loaded is not None:
                        notes.append(
                            f"the benchmarked step loaded {len(loaded)} file(s) of this repository "
                            "(recorded in every Python process of the step)"
                        )
                    rc.read_from = str(where)
                    rc.notes.extend(notes)
                except LookupError as exc:
                    rc.availability = str(exc)
                    rc.to_tell = (
                        f"git -C {shlex.quote(str(where))} fetch --all, then forensics diff again "
                        f"(or --repo with a clone that has {str(rc.after_sha)[:10]})"
                    )
                except OSError as exc:
                    rc.availability = f"commit list not available: {exc}"
        out.append(rc)
    return out


def _to_tell(after: Mapping[str, Any], where: Path) -> str:
    """The command that would list the commits of a repository this machine cannot read."""
    remotes = after.get("remotes") if isinstance(after.get("remotes"), dict) else {}
    url = next(
        (str(u) for u in remotes.values() if isinstance(u, str) and u and "REDACTED" not in u), ""
    )
    clone = f"git clone {shlex.quote(url)} CLONE, then " if url else "a clone of it as CLONE: "
    return f"{clone}forensics diff BEFORE AFTER --repo CLONE (the snapshots name {where})"


def attach_evidence(findings: list[Finding], repos: list[RepoChanges]) -> list[Finding]:
    """Add each repository's commits to the ``git`` judge's ``code.change`` finding about it.

    The finding is matched by repository path (:attr:`forensics.model.Finding.subject`):
    the HEAD-move finding (field ``head.sha``) when there is one, else the
    repository's first implicated finding. A HEAD move takes the summary this
    module can write with the commits ("HEAD moved ... by a fast-forward pull;
    1 commit(s) touch hot paths, first ..."); severity becomes high when a commit
    or a dirty file touches a hot path. A repository the judge reported nothing
    about (nothing changed between the snapshots) gets nothing. The findings
    that received evidence come first, in the order of ``repos``.

    Returns:
        the same findings, reordered; no finding is created or dropped.
    """
    leads: list[Finding] = []
    for rc in repos:
        if not rc.changed:
            continue
        mine = [
            f
            for f in findings
            if f.hypothesis == "code.change"
            and f.subject == rc.path
            and f.status is HypothesisStatus.IMPLICATED
            and all(f is not g for g in leads)
        ]
        if not mine:
            continue
        lead = next((f for f in mine if "head.sha" in f.fields), mine[0])
        evidence = [
            f"repository {rc.path}{'' if rc.role == 'main' else f' ({rc.role} install)'}: {rc.move.sentence}"
        ]
        hot = [c for c in rc.commits if c.hot_lines]
        sus = suspects(rc)
        if rc.commits or rc.dropped:
            evidence.append(
                f"{plural(len(rc.commits), 'new commit')}, {len(rc.dropped)} dropped; {len(hot)} touch "
                f"performance-sensitive paths; {plural(len(sus), 'suspect')} by what they changed"
            )
        for c in order(rc.commits + rc.dropped)[:5]:
            dropped = " (dropped)" if c.side == "dropped" else ""
            evidence.append(f'{c.sha[:10]}{dropped} "{c.subject}": {classify(c).why}')
        for c in hot[:3]:
            moved = [f for f in c.hot_files if f.renamed_from]
            extra = ""
            if moved:
                extra += f"; {len(moved)} moved/copied file(s) count only their changed lines"
            if c.unloaded:
                extra += "; the benchmarked step never loaded these files: ranked lower"
            evidence.append(
                f'{c.sha[:10]} "{c.subject}" touches {", ".join(f.path for f in c.hot_files[:3])} '
                f"({', '.join(c.hot_categories)}; {c.hot_lines} hot lines, weight {c.weight:g}{extra})"
            )
        if rc.availability != "ok":
            evidence.append(rc.availability)
        evidence.extend(rc.notes)
        evidence.extend(
            f"uncommitted change to hot file {f.path} ({', '.join(f.hot)})" for f in rc.dirty_hot
        )
        pull = rc.weight() if rc.move.moved else None
        if rc.dirty_hot:
            sev, rel = Severity.HIGH, 0.9
        elif pull is not None and pull.status == "scaled":
            sev, rel = pull.severity, pull.relevance
        elif hot:
            sev, rel = Severity.HIGH, 0.9
        elif rc.move.moved or rc.notes:
            sev, rel = Severity.MEDIUM, 0.6
        else:
            sev, rel = Severity.LOW, 0.3
        if "head.sha" in lead.fields:  # the HEAD move: this module says how, with the commits
            what = (
                rc.move.short
                if (rc.move.moved or rc.move.entries)
                else (rc.notes or ["code changed"])[0]
            )
            top = sus[0] if sus else None
            if hot and pull is not None and pull.status == "scaled":
                what += (
                    f"; {plural(len(hot), 'commit')} {'touches' if len(hot) == 1 else 'touch'} hot paths, first "
                    f'{hot[0].sha[:10]} "{hot[0].subject}"'
                )
            if top is not None and not (hot and top is hot[0]):
                what += f'; first suspect {top.sha[:10]} "{top.subject}" ({classify(top).why})'
            elif top is not None:
                what += f" ({classify(top).why})"
            if pull is not None and pull.status != "scaled":
                what += f"; {pull.sentence}"
            lead.summary = f"{Path(rc.path).name or rc.path}: {what}"
            if pull is not None and pull.status != "scaled" and not rc.dirty_hot:
                # what the pull brought decides its weight, not the rule "a pull is high"
                lead.status = (
                    HypothesisStatus.RULED_OUT
                    if pull.status == "none"
                    else HypothesisStatus.INCONCLUSIVE
                )
                lead.severity, lead.relevance = Severity.INFO, 0.0
                sev, rel = Severity.INFO, 0.0
            elif pull is not None:
                lead.severity, lead.relevance = sev, rel
        if sev.weight > lead.severity.weight:
            lead.severity = sev
        lead.relevance = max(lead.relevance, rel)
        moved = (
            "head.sha" in lead.fields
        )  # its reflog line is said better by the move sentence above
        lead.evidence = evidence + [
            line
            for line in lead.evidence
            if line not in evidence and not (moved and "reflog" in line)
        ]
        leads.append(lead)
    return leads + [f for f in findings if all(f is not g for g in leads)]
