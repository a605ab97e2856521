"""Which commits of a pull are suspects, in what order, and what the pull weighs (issue 25, issue 26 family 2).

A commit is judged from what its files' changes do, not from how many lines they touch:

- **inert files** weigh nothing: documentation (``*.md``, ``*.rst``, ``docs/``, images in
  documentation folders (``docs/``, ``images/``, ``figures/``...: one elsewhere may be a step's input), a
  README, licence or changelog of any suffix but a code or configuration one: ``history.py``
  and ``security.py`` are code; any other ``*.txt`` may be data the step reads,
  so it is code here), tests (``tests/``, ``test_*.py``,
  ``*_test.py``, ``conftest.py``) and CI or repository tooling (``.github/``,
  ``.gitlab-ci.yml``, ``.circleci/``, ``.pre-commit-config.yaml``, ``.gitignore``...)
  (:func:`file_kind`), unless the step loaded the file (a ``load_test.py`` run as the step,
  a module in a ``testing/`` package it imports): a file the step loaded is judged as code;
- **behaviour-free edits** weigh nothing: a Python file whose syntax tree is unchanged once
  comments, docstrings, annotations, formatting, debug logging and consistent renames of
  local names are set aside (:mod:`forensics.diff.pysource`); a configuration file whose
  values are unchanged; another source file whose text is unchanged once comments and
  whitespace are set aside;
- **files the step never loaded** (``.py`` files absent from the benchmark's recorded
  ``loaded_files`` when it recorded them) make a commit that touches nothing else "not a
  suspect";
- what is left is a suspect, weighted by its **signals** (:mod:`forensics.diff.signals`:
  precision, synchronisation, allocation in a loop, collectives, graph/compile switches,
  changed defaults), by where they are (a file the step loaded x :data:`PLACE_FACTORS`)
  and, a little, by its hot lines (:func:`forensics.diff.hotpaths.category_weight`).

:func:`assess` turns a commit's file changes into a :class:`CommitAssessment`;
:func:`order` ranks commits (suspects with the strongest signals in loaded files first,
behaviour-free commits last); :func:`pull_weight` says what a whole pull weighs for the
``code.change`` hypothesis: nothing (ruled out, with the reason), unknown, or scaled.
Pure: texts in, verdicts out (the git reads are :mod:`forensics.diff.commits`').
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Iterable, Sequence

from forensics.diff import signals as sig
from forensics.model import Severity
from forensics.words import plural


class FileKind(str, enum.Enum):
    """What a changed file is, for weighing a commit."""

    CODE = "code"
    CONFIG = "configuration"
    DOCS = "documentation"
    TESTS = "tests"
    CI = "CI"


INERT = (FileKind.DOCS, FileKind.TESTS, FileKind.CI)
"""Kinds that never change what the user's step runs."""

_DOC_SUFFIXES = {
    ".md",
    ".rst",
    ".adoc",
    ".png",
    ".jpg",
    ".jpeg",
    ".gif",
    ".svg",
    ".pdf",
    ".ipynb",
    ".tex",
    ".bib",
    ".drawio",
    ".mdx",
}
_DOC_NAMES = re.compile(
    r"^(license|licence|copying|notice|authors|contributors|changelog|changes|history|"
    r"codeowners|citation|readme|security|code_of_conduct|contributing|notes|release[-_]notes|todo|news)"
    r"([.-].*)?$",
    re.I,
)
_DOC_DIRS = {"docs", "doc", "documentation", "examples-docs", "site", "mkdocs"}
_IMAGES = {".png", ".jpg", ".jpeg", ".gif", ".svg"}
_IMAGE_DIRS = {"img", "imgs", "image", "images", "figures", "figs", "screenshots", ".github"}
"""Folders whose images are documentation; an image elsewhere may be the input a step reads (a sample picture
for a vision model), so it is judged as data."""
_TEST_DIRS = {
    "tests",
    "test",
    "testing",
    "__tests__",
    "unittests",
    "unit_tests",
    "integration_tests",
}
_TEST_FILES = re.compile(r"^(test_.*\.py|.*_test\.py|conftest\.py|.*_test\.(cc|cpp|cu|go))$")
_CI = re.compile(
    r"^(\.github/|\.gitlab/|\.gitlab-ci\.ya?ml$|\.circleci/|\.buildkite/|\.azure-pipelines/|"
    r"azure-pipelines\.ya?ml$|Jenkinsfile$|\.travis\.ya?ml$|\.pre-commit-config\.ya?ml$|"
    r"\.readthedocs\.ya?ml$|codecov\.ya?ml$|\.codecov\.ya?ml$|\.git(ignore|attributes|modules)$|"
    r"\.mailmap$|\.editorconfig$|\.flake8$|\.pylintrc$|\.clang-format$|\.clang-tidy$|mypy\.ini$|"
    r"\.yamllint|\.markdownlint|\.codespellrc$|\.typos\.toml$|ruff\.toml$|\.ruff\.toml$)"
)
_SOURCE_SUFFIXES = (
    ".py",
    ".pyw",
    ".pyx",
    ".pxd",
    ".pyi",
    ".so",
    ".pyd",
    ".c",
    ".cc",
    ".cpp",
    ".cxx",
    ".cu",
    ".cuh",
    ".h",
    ".hpp",
    ".sh",
    ".bash",
    ".js",
    ".ts",
    ".rs",
    ".go",
    ".java",
)
"""Suffixes of code: a file named like a document (``history.py``, ``notes.sh``) with one of them is code."""
_DEPENDENCY_TXT = re.compile(r"(requirements|constraints)[^/]*\.txt$|CMakeLists\.txt$", re.I)


def file_kind(path: str) -> FileKind:
    """Classify a repository-relative path (by folder, name and suffix; contents are not read)."""
    p = PurePosixPath(path)
    parts = [x.lower() for x in p.parts[:-1]]
    name = p.name
    if _CI.match(path):
        return FileKind.CI
    if any(x in _TEST_DIRS for x in parts) or _TEST_FILES.match(name):
        return FileKind.TESTS
    if _DEPENDENCY_TXT.search(name):
        return FileKind.CONFIG if not name.lower().startswith("cmakelists") else FileKind.CODE
    suffix = p.suffix.lower()
    if suffix in _IMAGES and not any(x in _DOC_DIRS | _IMAGE_DIRS for x in parts):
        return FileKind.CODE  # an image outside documentation folders may be what the step reads
    if (
        suffix in _DOC_SUFFIXES
        or (_DOC_NAMES.match(name) and suffix not in _SOURCE_SUFFIXES + sig.CONFIG_SUFFIXES)
        or any(x in _DOC_DIRS for x in parts)
    ):
        return FileKind.DOCS
    if p.suffix.lower() in sig.CONFIG_SUFFIXES or name in ("pyproject.toml", "setup.cfg"):
        return FileKind.CONFIG
    return FileKind.CODE


PLACE_FACTORS = {"loaded": 1.5, "unknown": 1.0, "never loaded": 0.25}
"""Where a changed file sits against the step: one it loaded weighs 1.5x, one it never loaded 0.25x (recorded
``loaded_files``; only Python files and extension modules can be known never loaded)."""

_LOADABLE = (".py", ".so", ".pyd")


def place(path: str, loaded: set[str] | None, renamed_from: str = "") -> str:
    """``loaded``, ``never loaded`` or ``unknown`` for ``path`` against the step's recorded files."""
    if loaded is None:
        return "unknown"
    if path in loaded or (renamed_from and renamed_from in loaded):
        return "loaded"
    return "never loaded" if path.endswith(_LOADABLE) else "unknown"


@dataclass
class FileAssessment:
    """One file of a commit, judged.

    Attributes:
        path: repository-relative path.
        kind: :class:`FileKind`.
        place: ``loaded`` / ``never loaded`` / ``unknown`` (see :func:`place`).
        behaviour_free: the change has no behaviour (inert kind, or only set-aside edits).
        set_aside: for a behaviour-free code or configuration file, the kinds of edit it is
            ("annotations", "renames", ...); for an inert file, its kind's name.
        signals: :class:`forensics.diff.signals.Signal` found in what it added or changed.
        read: the file's texts were read (False: judged by its path only).
    """

    path: str
    kind: FileKind
    place: str = "unknown"
    behaviour_free: bool = False
    set_aside: list[str] = field(default_factory=list)
    signals: list[sig.Signal] = field(default_factory=list)
    read: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind.value,
            "place": self.place,
            "behaviour_free": self.behaviour_free,
            "set_aside": list(self.set_aside),
            "read": self.read,
        }


_C_LIKE = (
    ".c",
    ".cc",
    ".cpp",
    ".cxx",
    ".cu",
    ".cuh",
    ".h",
    ".hpp",
    ".hh",
    ".inl",
    ".java",
    ".js",
    ".ts",
    ".rs",
    ".go",
    ".proto",
)
_HASH_COMMENTS = (".sh", ".bash", ".cmake", ".mk", ".pyx", ".pxd", ".pyi", ".r")


def _uncommented(path: str, text: str) -> str:
    """``text`` without comments (C-style or ``#``, by suffix) and without any whitespace."""
    low = path.lower()
    if low.endswith(_C_LIKE):
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        text = re.sub(r"//[^\n]*", "", text)
    elif low.endswith(_HASH_COMMENTS) or PurePosixPath(low).name in (
        "makefile",
        "cmakelists.txt",
        "dockerfile",
    ):
        text = re.sub(r"(?m)(^|\s)#[^\n]*", "", text)
    return re.sub(r"\s+", "", text)


def assess_file(
    path: str,
    old: str | None,
    new: str | None,
    *,
    loaded: set[str] | None = None,
    renamed_from: str = "",
    binary: bool = False,
) -> FileAssessment:
    """Judge one file's change from its two versions (``None``: absent on that side, or not read).

    Args:
        path, renamed_from: repository-relative paths (after and before a rename).
        old, new: the file's text before and after the commit.
        loaded: repository-relative files the step loaded, ``None`` when not recorded.
        binary: the file is binary (judged by its path only).

    Returns:
        a :class:`FileAssessment`; never raises on odd contents (a file that does not parse
        is searched as text).
    """
    kind = file_kind(path)
    where = place(path, loaded, renamed_from)
    if (
        kind in INERT and where == "loaded"
    ):  # the step ran it: its tests-like or doc-like path says nothing
        kind = FileKind.CODE
    fa = FileAssessment(path, kind, where)
    if kind in INERT:
        fa.behaviour_free, fa.set_aside = True, [kind.value]
        return fa
    if binary or (old is None and new is None):
        fa.read = False
        return fa
    if (
        new is None
    ):  # deleted: behaviour changed (something the step may import is gone); nothing added to search
        return fa
    low = path.lower()
    if low.endswith((".py", ".pyw")):
        cmp, found = sig.python_file(path, old, new)
        fa.behaviour_free, fa.signals = cmp.same_behaviour, found
        fa.set_aside = list(cmp.set_aside) if cmp.same_behaviour else []
        return fa
    if kind is FileKind.CONFIG:
        if re.search(r"\.txt$", low):  # requirements / constraints: a changed pin
            same = old is not None and sorted(_pins(old)) == sorted(_pins(new))
            fa.behaviour_free = same
            fa.set_aside = ["comments", "formatting"] if same else []
            if not same:
                fa.signals = [
                    sig.Signal(sig.SignalKind.CONFIG_DEFAULT, path, n, t, f"dependency pin: {t}")
                    for n, t in _new_pins(old, new)
                ][: sig.MAX_CONFIG_SIGNALS]
            return fa
        same, found = sig.config_signals(path, old, new)
        fa.behaviour_free, fa.signals = same, found
        fa.set_aside = ["comments", "formatting"] if same else []
        return fa
    if old is not None and _uncommented(path, old) == _uncommented(path, new):
        fa.behaviour_free, fa.set_aside = True, ["comments", "formatting"]
        return fa
    fa.signals = sig.text_signals(path, old, new)
    return fa


def _pins(text: str) -> list[str]:
    return [
        line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()
    ]


def _new_pins(old: str | None, new: str) -> list[tuple[int, str]]:
    before = set(_pins(old or ""))
    return [
        (i + 1, line.split("#", 1)[0].strip())
        for i, line in enumerate(new.splitlines())
        if line.split("#", 1)[0].strip() and line.split("#", 1)[0].strip() not in before
    ]


STRONG_WEIGHT = 4.0
"""A suspect this heavy (a signal in a file the step loaded, or two kinds of signal) makes its pull ``high``."""

HOT_LINES_SCALE = 200.0
"""Weighted hot lines at which a signal-free behaviour change reaches its full base weight (1)."""


@dataclass
class CommitAssessment:
    """What a commit changed, judged (the commit table's "why" column and investigate's order).

    Attributes:
        suspect: the commit can have changed the step's speed (False: behaviour-free,
            inert files only, or only files the step never loaded).
        behaviour_free: no file of it changes behaviour (inert files and set-aside edits only).
        why: one line for the commit table ("no behaviour change: annotations, renames",
            "precision change: .float() (model.py:12)").
        signals: every signal, strongest kind first.
        weight: the ranking weight (0 when not a suspect): base x place + the signals'
            weights x their files' places (module docstring).
        files: each file's :class:`FileAssessment`.
    """

    suspect: bool
    behaviour_free: bool
    why: str
    signals: list[sig.Signal] = field(default_factory=list)
    weight: float = 0.0
    files: list[FileAssessment] = field(default_factory=list)

    @property
    def reasons(self) -> list[str]:
        """The signals as commit-table lines, strongest first."""
        return [s.reason() for s in self.signals]

    def to_json(self) -> dict[str, Any]:
        return {
            "suspect": self.suspect,
            "behaviour_free": self.behaviour_free,
            "why": self.why,
            "weight": round(self.weight, 3),
            "signals": [s.to_json() for s in self.signals],
            "files": [f.to_json() for f in self.files],
        }


def _listed(names: Sequence[str], limit: int = 3) -> str:
    return ", ".join(names[:limit]) + (
        f" and {len(names) - limit} more" if len(names) > limit else ""
    )


def assess(files: Iterable[FileAssessment], hot_weight: float = 0.0) -> CommitAssessment:
    """Judge a commit from its files' assessments; ``hot_weight``: its weighted hot lines (``CommitChanges.weight``).

    Returns:
        a :class:`CommitAssessment` (see the module docstring for the weight).
    """
    files = list(files)
    live = [f for f in files if not f.behaviour_free]
    if not live:
        kinds = list(dict.fromkeys(k for f in files for k in f.set_aside)) or ["no file changed"]
        return CommitAssessment(
            False, True, f"no behaviour change: {', '.join(kinds)}", [], 0.0, files
        )
    signals = sorted(
        (s for f in live for s in f.signals), key=lambda s: (-s.weight, s.file, s.line)
    )
    places = {f.path: f.place for f in live}
    if all(f.place == "never loaded" for f in live):
        return CommitAssessment(
            False,
            False,
            f"not a suspect: the step never loaded {_listed([f.path for f in live])}",
            signals,
            0.0,
            files,
        )
    best_place = max(PLACE_FACTORS[f.place] for f in live)
    base = 0.2 + 0.8 * min(1.0, hot_weight / HOT_LINES_SCALE)
    weight = base * best_place
    by_kind: dict[sig.SignalKind, float] = {}
    for s in signals:
        by_kind[s.kind] = max(
            by_kind.get(s.kind, 0.0), s.weight * PLACE_FACTORS[places.get(s.file, "unknown")]
        )
    weight += sum(by_kind.values()) + min(0.5, 0.1 * (len(signals) - len(by_kind)))
    if signals:
        top = signals[0]
        more = f" (+{len(signals) - 1} more)" if len(signals) > 1 else ""
        where = "" if places.get(top.file) != "loaded" else "; the step loaded it"
        why = f"{top.reason()}{where}{more}"
    else:
        changed = [f.path for f in live]
        why = f"behaviour change in {_listed(changed)}; no suspicious construct found"
    return CommitAssessment(True, False, why, signals, weight, files)


def paths_only(paths: Iterable[tuple[str, str]], loaded: set[str] | None) -> list[FileAssessment]:
    """File assessments from paths alone ((path, renamed_from) pairs), when the texts were not read."""
    out = []
    for path, src in paths:
        kind, where = file_kind(path), place(path, loaded, src)
        if kind in INERT and where == "loaded":
            kind = FileKind.CODE
        fa = FileAssessment(path, kind, where, read=kind in INERT)
        if kind in INERT:
            fa.behaviour_free, fa.set_aside = True, [kind.value]
        out.append(fa)
    return out


def order(commits: Sequence[Any]) -> list[Any]:
    """Commits in the order to suspect them: suspects by weight (then weighted hot lines, then their given order),
    then commits that are not suspects (files the step never loaded before behaviour-free ones). Within
    a tier, a merge commit comes after the commits it brought in when they are listed too: its diff
    against its first parent repeats theirs (a ``git pull`` that merged), so it would always weigh most,
    and going back from it to its first parent only re-measures the whole pull.

    ``commits``: objects with ``assessment`` (a :class:`CommitAssessment` or ``None``: judged as a
    signal-free suspect), ``weight`` (weighted hot lines) and optionally ``parents``, e.g.
    :class:`forensics.diff.commits.CommitChanges`.
    """
    index = {id(c): i for i, c in enumerate(commits)}
    many = len(commits) > 1

    def key(c: Any) -> tuple:
        merge = many and len(getattr(c, "parents", None) or ()) > 1
        a = getattr(c, "assessment", None)
        if a is None:
            return (0, merge, -0.2, -float(getattr(c, "weight", 0.0)), index[id(c)])
        tier = 0 if a.suspect else (1 if not a.behaviour_free else 2)
        return (tier, merge, -a.weight, -float(getattr(c, "weight", 0.0)), index[id(c)])

    return sorted(commits, key=key)


@dataclass
class PullWeight:
    """What a pull (the commits between two HEADs of one repository) weighs for ``code.change``.

    Attributes:
        status: ``none`` (nothing the step runs changed: ruled out), ``unknown`` (the commits
            could not be read: inconclusive) or ``scaled``.
        severity, relevance: for ``scaled``, the finding's severity and relevance.
        sentence: the reason, for the finding's summary.
    """

    status: str
    severity: Severity = Severity.INFO
    relevance: float = 0.0
    sentence: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "severity": self.severity.value,
            "relevance": self.relevance,
            "sentence": self.sentence,
        }


def pull_weight(
    assessments: Sequence[CommitAssessment | None],
    readable: bool = True,
    unknown_why: str = "",
    command: str = "",
) -> PullWeight:
    """Weigh a pull from its commits' assessments.

    Args:
        assessments: one per commit (new and dropped); ``None`` for a commit not judged.
        readable: the commit list was read (False: ``unknown``, with ``unknown_why`` and ``command``).

    Returns:
        ``none`` when no commit changes behaviour (documentation, tests, CI, set-aside edits); ``low`` (0.3)
        when the only ones that do touch files the step was not seen loading; ``high`` (0.9) when the heaviest suspect reaches
        :data:`STRONG_WEIGHT`, ``high`` (0.8) with any signal, ``medium`` otherwise (0.7 when
        the change is in a file the step loaded or a hot one, else 0.5).
    """
    if not readable:
        tell = f"; to tell: {command}" if command else ""
        return PullWeight(
            "unknown",
            Severity.INFO,
            0.0,
            f"what its commits changed is unknown ({unknown_why}){tell}",
        )
    judged = [a for a in assessments if a is not None]
    suspects = [a for a in judged if a.suspect] + [None for a in assessments if a is None]
    unseen = [a for a in judged if not a.suspect and not a.behaviour_free]
    if not suspects and unseen:
        # changes behaviour in files the step was not seen loading: the recorder sees modules, not a file run
        # with exec or runpy.run_path, or imported from a copy (config loaders): ranked lowest, not ruled out
        # ('what changed was checked and does not explain it' for a config run with runpy that did)
        return PullWeight(
            "scaled",
            Severity.LOW,
            0.3,
            f"{plural(len(unseen), 'commit')} {'changes' if len(unseen) == 1 else 'change'} behaviour only in "
            "files the step was not seen loading "
            "(a file run with exec or runpy leaves no trace): ranked lowest, not ruled out",
        )
    if not suspects:
        counts: dict[str, int] = {}
        for a in judged:
            label = a.why.split(": ", 1)[1] if a.behaviour_free else "files the step never loaded"
            counts[label] = counts.get(label, 0) + 1
        what = "; ".join(f"{n} x {label}" if n > 1 else label for label, n in counts.items())
        return PullWeight(
            "none",
            Severity.INFO,
            0.0,
            f"no commit changes what the step runs ({what or 'no commit'})",
        )
    best = max((a for a in suspects if a is not None), key=lambda a: a.weight, default=None)
    n = len(suspects)
    lead = f"{n} suspect commit{'s' if n != 1 else ''}"
    if best is None:
        return PullWeight("scaled", Severity.MEDIUM, 0.5, f"{lead} (not read)")
    if best.signals and best.weight >= STRONG_WEIGHT:
        return PullWeight("scaled", Severity.HIGH, 0.9, f"{lead}, strongest: {best.why}")
    if best.signals:
        return PullWeight("scaled", Severity.HIGH, 0.8, f"{lead}, strongest: {best.why}")
    warm = best.weight >= 0.3  # loaded (0.2 x 1.5) or with hot lines
    return PullWeight("scaled", Severity.MEDIUM, 0.7 if warm else 0.5, f"{lead}: {best.why}")
