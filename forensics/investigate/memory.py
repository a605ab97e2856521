"""The baseline the machine remembers (DESIGN section 15): used when ``--baseline`` is missing or did not
measure the step.

- **code**: the HEAD before the last pull, checkout, reset, rebase or merge, read from the reflog the
  git probe recorded in the snapshot taken now (``probes.git.data.repos[].reflog``, newest first,
  ``{"old", "new", "time", "action"}``); ``--since REV`` names another point (``git rev-parse``);
  with a baseline snapshot that has no measurement of the step, its own HEAD. That commit is
  measured now in a private worktree exactly as ``forensics bisect`` measures a commit
  (:class:`forensics.bisect.measure.Measurer`), and its result is put in a copy of the snapshot
  taken now (or of the baseline snapshot) as if that snapshot had measured it
  (:func:`synthetic_baseline`), so the ledger, the plan and the share of every experiment work as
  with a baseline snapshot;
- **a remembered figure**: ``--expect 19ms`` / ``--expect 94tok/s`` (:func:`parse_expect`): the
  baseline value of the step, a sample of one;
- **packages**: the distributions installed or upgraded recently, from the modification time of
  their ``.dist-info`` / ``.egg-info`` folders in the step's Python (the ``sys.path`` its processes
  recorded; ``importlib.metadata``; :func:`recent_distributions`);
- **environment**: variables known to cost speed when set (``costly_env.yaml`` next to this module,
  one source per row; :func:`costly_set_now`), tested unset when they are set now.
"""

from __future__ import annotations

import copy
import datetime as dt
import math
import os
import re
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from forensics.docfile import packaged_yaml
from forensics.errors import BadInputError
from forensics.words import metric_time_unit

_MOVES = ("pull", "checkout:", "reset:", "rebase", "merge", "am", "cherry-pick")
"""Reflog messages that move HEAD to other code (git's own wording: ``pull origin main: Fast-forward``,
``checkout: moving from a to b``, ``reset: moving to HEAD~1``, ``rebase (finish): ...``). A ``commit``
entry is the user's own work and not a baseline point."""


@dataclass
class CodePoint:
    """The commit the step is measured at as the baseline.

    Attributes:
        repo: working-tree root of the main repository (the git probe's ``path``).
        old: the commit before the move (40 hex digits).
        new: HEAD now.
        label: how the user would name it (``HEAD@{1}``, ``--since v1.2``, ``the baseline snapshot's HEAD``).
        action: the reflog message of the move ("pull origin main: Fast-forward"), or "".
        when: the move's time (UTC ISO), or "".
        clean: the checkout is at ``new`` without uncommitted changes (today's step runs HEAD's code).
        reflog_index: index in the reflog (newest first) of the move, or -1.
        note: what the report must say about the point ("not an ancestor of HEAD"), or "".
    """

    repo: str
    old: str
    new: str
    label: str
    action: str = ""
    when: str = ""
    clean: bool = True
    reflog_index: int = -1
    note: str = ""

    def sentence(self) -> str:
        """``HEAD@{1} 112037e, before the pull of 2026-11-30 10:15``."""
        what = self.action.split(":", 1)[0].split(" (")[0].strip() or "move"
        when = self.when.replace("T", " ")[:16] if self.when else ""
        before = f", before the {what.split()[0]} of {when}" if self.action else ""
        return f"{self.label} {self.old[:7]}{before}"


def main_repo(snapshot: Mapping[str, Any]) -> dict[str, Any] | None:
    """The git probe's record of the main repository in a snapshot (``role == "main"``), or None."""
    repos = (((snapshot.get("probes") or {}).get("git") or {}).get("data") or {}).get("repos")
    for r in repos if isinstance(repos, list) else []:
        if (
            isinstance(r, dict)
            and r.get("role", "main") == "main"
            and isinstance(r.get("path"), str)
        ):
            return r
    return None


def _head(rec: Mapping[str, Any]) -> str:
    h = rec.get("head")
    sha = h.get("sha") if isinstance(h, dict) else None
    return sha if isinstance(sha, str) else ""


def reflog_point(rec: Mapping[str, Any], start: int = 0) -> tuple[int, dict[str, Any]] | None:
    """The newest reflog entry (from index ``start`` on) that moved HEAD to other code, and its index; a
    multi-entry operation (``rebase (start)`` ... ``rebase (finish)``, ``pull --rebase``) is followed back
    to its start, whose ``old`` is the HEAD before it. None when the reflog has none."""
    log = [e for e in rec.get("reflog") or [] if isinstance(e, dict)]
    for i, e in enumerate(log):
        if i < start:
            continue
        action = str(e.get("action", ""))
        if not action.startswith(_MOVES) or e.get("old") == e.get("new"):
            continue
        op = action.split(" (", 1)[0] if " (" in action.split(":", 1)[0] else ""
        j = i
        while (
            op
            and j + 1 < len(log)
            and str(log[j + 1].get("action", "")).startswith(op + " (")
            and "(start)" not in str(log[j].get("action", ""))
        ):
            j += 1
        old = str(log[j].get("old", ""))
        if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", old) and not set(old) <= {"0"}:
            return j, {
                **log[j],
                "action": action if j == i else str(log[j].get("action", action)),
                "time": str(e.get("time", "")),
            }
    return None


def code_point(
    now: Mapping[str, Any],
    *,
    since: str | None = None,
    repo: Path | None = None,
    baseline: Mapping[str, Any] | None = None,
) -> tuple[CodePoint | None, str]:
    """The baseline commit: ``--since``, else the baseline snapshot's HEAD when it differs, else the reflog's.

    Returns:
        (point or None, the reason there is none).

    Raises:
        BadInputError: ``--since`` names no commit of the repository, or names HEAD itself in a checkout
            without uncommitted changes (nothing to compare today's code with).
    """
    rec = main_repo(now)
    if rec is not None and rec.get("state") == "no_commits":
        return (
            None,
            f"the repository at {rec['path']} has no commit yet, so no earlier code to measure; give --expect with the value you remember",
        )
    if rec is not None and rec.get("state", "ok") != "ok":
        why = f": {rec['error']}" if rec.get("error") else ""
        return None, f"the repository at {rec['path']} could not be read ({rec.get('state')}{why})"
    if rec is None:
        return None, "the snapshot taken now found no git repository for the step (give --repo)"
    root = str(repo) if repo is not None else rec["path"]
    head = _head(rec)
    clean = not rec.get("dirty") and not rec.get("operation")
    if since is not None:
        sha = resolve_since(since, root)
        # HEAD itself and nothing uncommitted: the verdict said to give --since REV, or 'could not be measured'
        if sha == head and clean:
            raise BadInputError(
                f"is HEAD itself ({sha[:7]}) and the checkout has no uncommitted change: no code changed "
                "since it; give an older revision (e.g. HEAD~3), or leave it out and give --expect with the "
                "value you remember",
                option=f"since {since}",
            )
        return CodePoint(
            root,
            sha,
            head,
            f"--since {since}",
            clean=clean,
            note=_not_ancestor(root, sha, head, since),
        ), ""
    if baseline is not None:
        brec = main_repo(baseline)
        old = _head(brec) if brec else ""
        if old and old != head:
            if _gone(root, old):
                return None, (
                    f"the baseline snapshot's HEAD {old[:7]} is no longer in {root} (a commit no branch, tag or "
                    "reflog holds is pruned by git gc); name a point with --since REV"
                )
            return CodePoint(
                root,
                old,
                head,
                "the baseline snapshot's HEAD",
                when=str(baseline.get("created", "")),
                clean=clean,
            ), ""
        if old:
            return None, "the baseline snapshot's HEAD is today's: no code changed"
    found, passed = reflog_point(rec), []
    while found is not None and _unrelated(root, found[1]["old"], head):
        passed.append(  # an orphan branch (gh-pages) visited: no history shared with today's code
            f"HEAD@{{{found[0] + 1}}} {found[1]['old'][:7]} ({found[1].get('action', '')}) shares no "
            "history with HEAD and was passed over"
        )
        found = reflog_point(rec, found[0] + 1)
    orig = (
        _orig_head(root, head, len(rec.get("reflog") or []))
        if found is None and not passed
        else None
    )
    if orig is not None:
        return orig, ""
    if found is None:
        return (
            None,
            "; ".join(
                passed
                + [
                    "the reflog holds no other pull, checkout, reset or rebase"
                    if passed
                    else "the reflog holds no pull, checkout, reset or rebase (git reflog)"
                ]
            )
            + "; name a point with --since REV",
        )
    i, e = found
    if e["old"] == head:
        return None, f"the last move in the reflog ({e['action']}) left HEAD where it was"
    point = CodePoint(
        root,
        e["old"],
        head,
        f"HEAD@{{{i + 1}}}",
        str(e.get("action", "")),
        str(e.get("time", "")),
        clean,
        i,
        "; ".join(passed),
    )
    if _gone(root, e["old"]):
        return None, (
            f"{point.sentence()} is no longer in the repository (a commit no branch or tag holds is pruned by "
            "git gc once its reflog entries expire); name a point with --since REV"
        )
    return point, ""


def _gone(root: str, sha: str) -> bool:
    """Whether commit ``sha`` is missing from the repository at ``root`` (``git cat-file -e``); False when
    ``root`` is no folder or git cannot answer (the measurement then says why)."""
    from forensics.gitio import GitError, succeeds

    if not Path(root).is_dir():
        return False
    try:
        return not succeeds(root, "cat-file", "-e", f"{sha}^{{commit}}")
    except GitError:
        return False


def _orig_head(root: str, head: str, entries: int = 0) -> CodePoint | None:
    """``ORIG_HEAD`` as the baseline when the reflog the git probe read (``entries`` of them) holds no move
    (``core.logAllRefUpdates=false``, expired, or the move older than the probe's last 100 entries): git
    writes it at every pull, merge, reset and rebase (the HEAD before it). Its date is the file's
    modification time (``git rev-parse --git-path ORIG_HEAD``). None when there is none, it is HEAD, it
    shares no history with HEAD, or git cannot tell."""
    from forensics.gitio import GitError, git

    if not Path(root).is_dir():
        return None
    try:
        sha = git(root, "rev-parse", "--verify", "-q", "ORIG_HEAD^{commit}", check=False)
        if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha) or sha == head:
            return None
        if _unrelated(root, sha, head):
            return None
        path = Path(root) / git(root, "rev-parse", "--git-path", "ORIG_HEAD")
        when = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc)
    except (GitError, OSError):
        return None
    stamp = when.strftime("%Y-%m-%d %H:%M")
    return CodePoint(
        root,
        sha,
        head,
        "ORIG_HEAD",
        note=(
            (
                "git keeps no reflog in this repository (core.logAllRefUpdates is false, or it expired)"
                if not entries
                else f"the {entries} reflog entries read hold no pull, checkout, reset or rebase"
            )
            + f": the baseline is ORIG_HEAD {sha[:7]}, the HEAD before the last pull, merge, reset or "
            f"rebase (written {stamp} UTC)"
        ),
    )


def _unrelated(root: str, old: str, head: str) -> bool:
    """Whether ``old`` and ``head`` share no history (``git merge-base`` finds no common commit: an orphan
    branch); False when they do, or when git cannot tell (a missing commit is :func:`_gone`'s to say)."""
    from forensics.gitio import GitError, git

    if not Path(root).is_dir() or old == head:
        return False
    try:
        if _gone(root, old):
            return False
        return git(root, "merge-base", old, head, check=False) == ""
    except GitError:
        return False


def _not_ancestor(root: str, old: str, head: str, since: str) -> str:
    """A note when ``old`` is not an ancestor of ``head`` (``git merge-base --is-ancestor``): the commits between
    them cannot be tested one by one. "" when it is one, or git cannot tell."""
    from forensics.gitio import GitError, git, succeeds

    try:
        if old == head or succeeds(root, "merge-base", "--is-ancestor", old, head):
            return ""
        if succeeds(root, "merge-base", "--is-ancestor", head, old):
            n = git(root, "rev-list", "--count", f"{head}..{old}")
            return (
                f"--since {since} ({old[:7]}) is not behind HEAD but {n} commit(s) ahead of it: the baseline is newer "
                "code than today's, and no commit of today's checkout can be tested against it"
            )
    except GitError:
        return ""
    return (
        f"--since {since} ({old[:7]}) is not an ancestor of HEAD (the histories split): the comparison stands, "
        "but the commits between cannot be tested one by one; name a commit HEAD descends from"
    )


def resolve_since(since: str, repo: str | Path) -> str:
    """The full sha ``--since`` names in the repository at ``repo`` (``git rev-parse --verify``).

    Raises:
        BadInputError: ``repo`` is no git repository, or ``since`` names no commit there.
    """
    from forensics.gitio import GitError, git

    if not since.strip():
        raise BadInputError("--since '': empty; give a sha, a tag, a branch or HEAD~3")
    try:
        return git(repo, "rev-parse", "--verify", "-q", "--end-of-options", f"{since}^{{commit}}")
    except GitError as exc:
        if exc.not_a_repository:
            raise BadInputError(
                f"--since {since}: {repo} is not in a git repository; give --repo"
            ) from None
    why = "no such commit"
    try:
        if re.fullmatch(r"[0-9a-fA-F]{4,39}", since):
            n = len(git(repo, "rev-parse", "--disambiguate=" + since.lower(), check=False).split())
            if n > 1:
                why = f"ambiguous: {n} objects' names start with {since}; give more of the sha"
        if why == "no such commit" and not git(
            repo, "rev-parse", "--verify", "-q", "HEAD", check=False
        ):
            why = (
                f"the repository at {repo} has no commit yet, so no earlier code to measure; give --expect "
                "with the value you remember"
            )
        if why == "no such commit" and git(repo, "rev-parse", "--is-shallow-repository") == "true":
            why = (
                "no such commit in this shallow clone (its history is cut); fetch the rest with "
                "'git fetch --unshallow' (or --deepen N), or give a commit it holds"
            )
    except GitError:
        pass
    if why == "no such commit":
        why = f"no such commit in {repo}; give a sha, a tag, a branch or HEAD~3"
    raise BadInputError(f"--since {since}: {why}")


_EXPECT = re.compile(
    r"^\s*(?P<v>[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)\s*(?P<u>ms|s|us|µs|μs|ns|(?:[a-z]+)?/s)?\s*$",
    re.I,
)
_TIME_UNITS = {"ms": 1.0, "s": 1e3, "us": 1e-3, "µs": 1e-3, "μs": 1e-3, "ns": 1e-6}
"""Milliseconds in one of each time unit ``--expect`` takes (microseconds with the micro sign U+00B5 or the
Greek letter mu U+03BC, which a Greek keyboard types)."""


def parse_expect(
    text: str, *, higher_is_better: bool, metric: str | None = None
) -> tuple[float, bool]:
    """``--expect 19ms`` / ``0.019s`` / ``94tok/s`` / ``94`` -> (value in the step's unit, higher_is_better).

    A time is returned in the unit the metric's name ends in (:func:`forensics.words.metric_time_unit`: ``step_s`` ->
    seconds; milliseconds when the name says none or ``metric`` is None); a number without a unit is
    taken in that unit. A throughput (``.../s``) is returned as given and marks the metric higher-is-better.

    Raises:
        BadInputError: not a finite number with a known unit, zero or below, a time below 1 ps (with or without
            its unit), or a time for a throughput metric.
    """
    m = _EXPECT.match(text or "")
    if not m:
        raise BadInputError(
            f"--expect {text!r}: expected the step's old value with its unit, e.g. 19ms, 0.019s "
            "or 94tok/s"
        )
    v, unit = float(m.group("v")), (m.group("u") or "").lower()
    if not math.isfinite(v):
        raise BadInputError(
            f"--expect {text!r}: not a finite value; give the step's old value, e.g. 19ms"
        )
    if v > 1e12:
        raise BadInputError(
            f"--expect {text!r}: more than 1e12, no step's value in any unit; give the step's old value, "
            "e.g. 19ms"
        )
    if v <= 0:
        raise BadInputError(f"--expect {text!r}: must be more than 0")
    if not unit.endswith("/s") and not higher_is_better:
        ms = v * _TIME_UNITS[unit or metric_time_unit(metric)]
        if ms < 1e-9:  # a number without a unit is in the metric's unit
            raise BadInputError(
                f"--expect {text!r}: below 1 ps, no step's time in any unit; give the step's old value, "
                "e.g. 19ms"
            )
    if unit.endswith("/s"):
        return v, True
    if higher_is_better and unit:
        raise BadInputError(
            f"--expect {text!r} is a time, but --higher-is-better says the metric is a throughput"
        )
    if not unit:
        return v, higher_is_better
    return v * _TIME_UNITS[unit] / _TIME_UNITS[metric_time_unit(metric)], higher_is_better


SCALE_LIMIT = 100.0
"""A remembered figure this many times today's median, the wrong way for a slowdown, is a unit mistake."""

SLIP_LIMIT = 300.0
"""Today's median this many times *worse* than a remembered figure is a unit slip, not a slowdown: a slip
between ms, s, us and ns is a factor of 1000 (or 1e6), so a figure typed in the wrong unit lands beyond this
limit even when today is up to 3 times faster than the figure meant; a step's own slowdown that large (its
work fallen from the GPU to the CPU) is no question for a remembered figure."""


def _likely_unit(text: str, value: float, med: float, metric: str) -> str:
    """``--expect`` spelled with the time unit that brings ``value`` (in the metric's unit) nearest ``med``
    (within 10x), e.g. ``19ms`` for ``--expect 19`` against a ``step_s`` of 0.02; "" when no unit does."""
    m = _EXPECT.match(text or "")
    if not m:
        return ""
    given = (m.group("u") or metric_time_unit(metric)).lower()
    best, spelled = 10.0, ""
    for unit in ("s", "ms", "us", "ns"):
        moved = value * _TIME_UNITS[unit] / _TIME_UNITS[given]
        off = max(moved / med, med / moved)
        if unit != given and off < best:
            best, spelled = off, f"{m.group('v')}{unit}"
    return spelled


def check_expect_scale(
    text: str, value: float, today: list[float], metric: str, higher_is_better: bool
) -> None:
    """Refuse a remembered figure that would make today :data:`SCALE_LIMIT` times *better* than it (no step
    speeds up a hundredfold on its own, a unit does: ``--expect 19ms`` for a metric printed in seconds) or
    :data:`SLIP_LIMIT` times *worse* (``--expect 0.019`` meant in seconds for a ``step_ms`` printing 19).

    Args:
        value: the figure in the step's unit (:func:`parse_expect`); today: today's per-process medians.

    Raises:
        BadInputError: naming the figure, today's median, the unit the metric is read in and the fix (the
            figure with the unit that fits today's scale where one does).
    """
    if not today or not (value > 0 and math.isfinite(value)):
        return
    med = sorted(today)[len(today) // 2]
    if not (med > 0 and math.isfinite(med)):
        return
    better = med / value if higher_is_better else value / med
    if better < SCALE_LIMIT and 1 / better < SLIP_LIMIT:
        return
    unit = "the metric's unit" if higher_is_better else metric_time_unit(metric)
    times = max(value / med, med / value)
    times_said = (
        f"{times:,.0f}x" if times < 1e6 else f"{times:.1e}x"
    )  # not 300 digits for --expect 1e-300
    where = "above" if value > med else "below"
    what = (
        "that is no slowdown but a unit mistake"
        if better >= SCALE_LIMIT
        else "no step slows down that much on its own, a unit slip does"
    )
    fix = "" if higher_is_better else _likely_unit(text, value, med, metric)
    if fix:
        fix = f"did you mean --expect {fix}?"
    elif higher_is_better:
        fix = "give the value you remember as the step prints it (94tok/s for tokens per second)"
    else:
        fix = f"give the value you remember in {unit}, or with its unit (19ms, 0.019s)"
    raise BadInputError(
        f"--expect {text} is {times_said} {where} today's {metric} ({med:.4g}, read in {unit}): "
        f"{what}; {fix}"
    )


@lru_cache(maxsize=1)
def costly_table() -> tuple[dict[str, Any], ...]:
    """The rows of ``costly_env.yaml`` (``name``, ``costly``, ``effect``, ``source``)."""
    return tuple(packaged_yaml("forensics.investigate", "costly_env.yaml")["variables"])


def costly_set_now(env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Rows of :func:`costly_table` whose variable is set now to a costly value, each with ``value``."""
    env = os.environ if env is None else env
    out = []
    for row in costly_table():
        value = env.get(row["name"])
        if value is None or value == "":
            continue
        costly = row.get("costly", "any")
        if costly == "any" or value.strip().upper() in {str(c).upper() for c in costly}:
            out.append({**row, "value": value})
    return out


def recent_distributions(
    *,
    days: float = 14.0,
    limit: int | None = 8,
    now: float | None = None,
    imported: Iterable[str] = (),
    paths: Iterable[str] | None = None,
) -> list[dict[str, Any]]:
    """Distributions whose metadata folder changed in the last ``days`` days: those providing a top-level
    package the step imported first (``imported``: the benchmark's ``loaded_packages``), then the others,
    each group newest first; at most ``limit`` (None: all). An upgrade of torch brings a dozen ``nvidia-*``
    wheels and a new venv brings pip and setuptools: without this order the one the step uses could fall
    off the list.

    ``paths``: the folders to look in, the ``sys.path`` of the step's Python processes (the benchmark's
    ``python_paths``, :func:`step_python_paths`), so that a step run by another Python (a venv's) is
    judged by its own distributions; None: the ``sys.path`` of the Python running forensics.

    forensics itself is left out: it never runs inside the user's step, and reinstalling the tool is
    not a change of the workload. Source: ``importlib.metadata.distributions(path=...)``, the ``st_mtime``
    of each one's ``.dist-info`` / ``.egg-info`` folder (pip writes it at install or upgrade) and the
    top-level names it provides (``top_level.txt``, else the files its ``RECORD`` lists). Entries:
    ``{"name", "version", "installed" (UTC "YYYY-MM-DD HH:MM"), "location", "imported" (bool)}``.
    """
    from importlib import metadata

    wanted = set(imported)
    cutoff = (now if now is not None else time.time()) - days * 86400
    seen: dict[str, dict[str, Any]] = {}
    found = metadata.distributions() if paths is None else metadata.distributions(path=list(paths))
    for dist in found:
        path = getattr(dist, "_path", None)  # PathDistribution's folder; other finders have none
        name = (dist.metadata.get("Name") or "") if path is not None else ""
        if not name or not isinstance(path, Path):
            continue
        try:
            mtime = path.stat().st_mtime
        except OSError:
            continue
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key == "forensics" or mtime < cutoff or (key in seen and seen[key]["t"] >= mtime):
            continue
        seen[key] = {
            "t": mtime,
            "name": name,
            "version": dist.version or "",
            "location": str(path.parent),
            "installed": dt.datetime.fromtimestamp(mtime, dt.timezone.utc).strftime(
                "%Y-%m-%d %H:%M"
            ),
            "imported": bool(wanted) and not wanted.isdisjoint(_top_levels(dist)),
        }
    rows = sorted(seen.values(), key=lambda r: (not r["imported"], -r["t"]))[:limit]
    return [{k: v for k, v in r.items() if k != "t"} for r in rows]


def _top_levels(dist: Any) -> set[str]:
    """The top-level import names a distribution provides: its ``top_level.txt``, else the first part of
    each file its ``RECORD`` lists (``pkg/__init__.py`` -> ``pkg``, ``mod.py`` -> ``mod``); empty when
    neither can be read (as ``importlib.metadata.packages_distributions`` reads them)."""
    try:
        declared = (dist.read_text("top_level.txt") or "").split()
        if declared:
            return set(declared)
        out = set()
        for f in dist.files or ():
            parts = f.parts
            if not parts or parts[0].endswith((".dist-info", ".egg-info")) or parts[0] == "..":
                continue
            out.add(parts[0].split(".", 1)[0] if len(parts) == 1 else parts[0])
        return out
    except Exception:  # noqa: BLE001 - a broken metadata file must not hide the list
        return set()


def step_python_paths(result: Mapping[str, Any] | None) -> list[str] | None:
    """The ``sys.path`` folders the step's Python processes recorded (``python_paths`` of its bench result,
    :mod:`forensics.step.loaded_files`), or None when none was recorded (the step ran no Python, or one
    started without its ``site`` module: ``python -S`` / ``-I``)."""
    paths = (result or {}).get("python_paths")
    if not isinstance(paths, list):
        return None
    kept = [str(p) for p in paths if isinstance(p, str) and p]
    return kept or None


def recent_note(result: Mapping[str, Any] | None) -> str:
    """The note listing :func:`recent_distributions` of the step's Python (:func:`step_python_paths`), or
    of the Python running forensics (``sys.executable``) with the reason when the step recorded none; ""
    when none is recent."""
    import sys

    paths = step_python_paths(result)
    loaded = (result or {}).get("loaded_packages") or []
    recent = recent_distributions(imported=[str(x) for x in loaded], paths=paths)
    if not recent:
        return ""
    where = (
        "in the step's Python (the folders on its sys.path; "
        if paths is not None
        else f"in the Python running forensics ({sys.executable}; the step recorded no Python folders: it ran "
        "no Python, or one started without its site module; "
    )
    return (
        f"distributions installed or upgraded in the last 14 days {where}dist-info times; their old "
        "versions are not known without a baseline snapshot): "
        + ", ".join(
            f"{r['name']} {r['version']} ({r['installed']}"
            + (", imported by the step)" if r.get("imported") else ")")
            for r in recent
        )
    )


def synthetic_baseline(
    now: Mapping[str, Any],
    result: dict[str, Any],
    *,
    point: CodePoint | None,
    source: Mapping[str, Any] | None = None,
    label: str,
) -> dict[str, Any]:
    """A baseline document: ``source`` (the baseline snapshot) or a copy of ``now``, with the step's
    result measured for it and, for a copy of ``now``, the main repository at ``point.old`` and the
    reflog cut before the move.

    The copy of ``now`` differs from it only in those fields, so the ledger finds the code change
    and the measured slowdown and nothing else (the environment is the same by construction). The
    reflog is cut before the move (``point.reflog_index``), or for ``--since`` before the newest entry
    that left HEAD at that commit (the whole reflog when HEAD never was there: then no move is told);
    the working tree is clean (the commit was measured in a worktree, without the uncommitted changes
    of today's checkout).
    """
    doc = copy.deepcopy(dict(source if source is not None else now))
    bench = doc.get("bench") if isinstance(doc.get("bench"), dict) else None
    if source is None or bench is None:
        bench = {
            "schema": "forensics.bench/1",
            "results": [],
            "config": {"kind": "user", "remembered": label},
        }
    bench["results"] = [
        r
        for r in bench.get("results") or []
        if isinstance(r, dict) and r.get("name") != result["name"]
    ] + [result]
    doc["bench"] = bench
    doc["label"] = label
    if source is None and point is not None:
        rec = main_repo(doc)
        if rec is not None:
            rec["head"] = {"sha": point.old}
            log = [e for e in rec.get("reflog") or [] if isinstance(e, dict)]
            cut = point.reflog_index + 1 if point.reflog_index >= 0 else _last_at(log, point)
            rec["reflog"] = log[cut:]
            # measured in a private worktree: the commit's own files, nothing uncommitted, no operation
            rec.update(dirty=False, modified=[], staged=[], conflicted=[], operation=None)
            rec["dirty_stat"] = {}
    return doc


def _last_at(log: list[dict[str, Any]], point: CodePoint) -> int:
    """Index of the newest reflog entry (newest first) that left HEAD at ``point.old``, else at one of its
    ancestors (``git rev-list``, the last 10,000): where the reflog stood when HEAD was at the baseline's code.
    0 (the whole reflog: no move told) when HEAD was never there or git cannot tell."""
    for i, e in enumerate(log):
        if e.get("new") == point.old:
            return i
    from forensics.gitio import GitError, git

    try:
        behind = set(git(point.repo, "rev-list", "--max-count=10000", point.old).split())
    except GitError:
        return 0
    return next((i for i, e in enumerate(log) if e.get("new") in behind), 0)


def wheel_versions(wheelhouse: Path, name: str) -> list[str]:
    """Versions of distribution ``name`` held as wheels in ``wheelhouse``, oldest first (from the file names,
    ``{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl``, PEP 427; names compared normalised; ordered
    by ``packaging.version``)."""
    want = re.sub(r"[-_.]+", "_", name).lower()
    out = []
    for f in sorted(Path(wheelhouse).glob("*.whl")):
        parts = f.name[:-4].split("-")
        if (
            len(parts) >= 5
            and re.sub(r"[-_.]+", "_", parts[0]).lower() == want
            and parts[1] not in out
        ):
            out.append(parts[1])
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - packaging comes with pip and setuptools
        return out

    def key(v: str) -> tuple:
        try:
            return (0, Version(v), v)
        except InvalidVersion:  # an unparsable version last, by its text
            return (1, Version("0"), v)

    return sorted(out, key=key)
