"""Probe ``git``: where the code under test stands, and how it got there.

Repositories examined: the one given by ``--repo`` (default: the current folder
if it is inside a repository), plus every editable-installed distribution whose
source folder is in a git repository (from ``direct_url.json``, PEP 610).

Per repository (``data.repos[]``), read with a few ``git`` plumbing commands started side by
side through the git gateway (:mod:`forensics.gitio`; parsed by :mod:`forensics_probes.git.read`) and plain
file reads, never changing anything:

- ``path`` (working-tree root), ``role`` (``main`` | ``editable``), ``distribution``.
- ``state``: ``ok`` | ``no_commits`` | ``bare`` | ``not_a_repository`` | ``error`` (with ``error``).
- ``operation``: an operation in progress, from marker files in the git dir
  (``rebase-merge``/``rebase-apply`` -> rebase, ``MERGE_HEAD`` -> merge,
  ``CHERRY_PICK_HEAD``, ``REVERT_HEAD``, ``BISECT_LOG``) or null; mid-rebase,
  ``rebasing_branch`` is the branch being rewritten (their ``head-name`` file).
- ``shallow``: ``.git/shallow`` exists.
- ``head``: ``{"sha", "subject", "author", "authored_at", "committed_at"}`` (UTC ISO).
- ``branch`` (null when detached), ``detached``.
- ``upstream``: ``{"name", "ahead", "behind"}`` (``git status --porcelain=v2 --branch``'s ``branch.ab``), or
  ``{"name", "ahead": null, "behind": null, "gone": true}`` when the upstream branch no longer exists; null
  when the branch tracks nothing.
- ``dirty_stat``: ``{path: [size_bytes, mtime_ns]}`` of the modified and staged files (``os.lstat``), so
  that two snapshots dirty in the same files tell whether those files changed in between.
- ``dirty``, ``modified`` (unstaged), ``staged``, ``conflicted`` (unmerged index entries: a merge or
  rebase stopped on them), ``untracked`` (first 200 names), ``untracked_count``.
- ``tool_outputs``: untracked files forensics itself wrote (``forensics-report.html``,
  ``forensics-before.json``...: its default names, naming forensics in their first 4 KiB; or named
  with ``-o`` and beginning as its documents and reports do: ``report.html``, ``before.json``); they are
  not in ``untracked`` and do not make the tree ``dirty`` (read.own_outputs).
- ``stash_count``: entries of ``refs/stash``'s reflog.
- ``submodules``: ``[{"path", "head", "state"}]`` from ``git submodule status --recursive``
  (``state``: ``ok``, ``moved``, ``not_initialized``, ``conflict``); a submodule whose
  checked-out commit moved between the snapshots is a code change.
- ``reflog``: the last 100 entries of HEAD's reflog (``.git/logs/HEAD``), newest
  first: ``{"old", "new", "time", "action"}`` where action is git's message,
  e.g. ``pull origin main: Fast-forward``.
- ``remotes``: ``{name: url}``, credentials in URLs redacted.

Judged hypothesis: ``code.change`` (HEAD moved and how, tree got dirty or
clean, branch switched, an operation left in progress, a new untracked source file: ``.py``, ``.so``,
``.cu``... not logs or data). A checkout at another path after (moved, or another
machine's copy: a remote URL in common, or its HEAD before in the reflog after) is
compared with itself; a repository only the before snapshot read (the after one
taken in another folder) leaves it inconclusive, never ruled out. This judge is the only
source of ``code.change`` findings from git; each carries the repository path
as its ``subject``, by which :func:`forensics.diff.commits.attach_evidence`
adds the commit list between the two HEADs at diff time (it needs the
repository).
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import shutil
from pathlib import Path
from typing import Any

from forensics_probes.git.read import (
    dirty_stat,
    parse_head,
    parse_remotes,
    parse_status_v2,
    parse_submodules,
    shown,
    worktree_fields,
)

from forensics.errors import ProbeUnavailable
from forensics.gitio import Calls, GitError, moved_checkouts
from forensics.model import Finding, Severity, implicated, inconclusive, ruled_out
from forensics.probe import JudgeContext, Probe, ProbeContext, ProbeResult
from forensics.readers import read_text
from forensics.words import plural

REFLOG_ENTRIES = 100
UNTRACKED_LIST = 200
_OPERATIONS = (
    ("rebase-merge", "rebase"),
    ("rebase-apply", "rebase"),
    ("MERGE_HEAD", "merge"),
    ("CHERRY_PICK_HEAD", "cherry-pick"),
    ("REVERT_HEAD", "revert"),
    ("BISECT_LOG", "bisect"),
)


SOURCE = re.compile(r"\.(?:py|pyx|pxd|so|cu|cuh|c|cc|cpp|cxx|h|hpp)$")
"""Untracked files that are code a step may load (a new module, an extension, a kernel source); logs,
checkpoints and data written into a checkout are not."""


def _count(count: Any, names: Any) -> int:
    """``untracked_count`` when it is a number, else the length of the ``untracked`` list (0 when neither)."""
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    return len(names) if isinstance(names, list) else 0


def _well_typed(rec: dict[str, Any]) -> dict[str, Any]:
    """A repo record with list fields that are not lists (a hand-edited file) read as empty."""
    rec = dict(rec)
    for key in ("reflog", "modified", "staged", "conflicted", "untracked"):
        if not isinstance(rec.get(key), list):
            rec[key] = []
    rec["reflog"] = [e for e in rec["reflog"] if isinstance(e, dict)]
    if not isinstance(rec.get("head"), dict):
        rec["head"] = {}
    return rec


def _iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_reflog(text: str, limit: int = REFLOG_ENTRIES) -> list[dict[str, Any]]:
    """Parse ``.git/logs/<ref>`` text into entries, newest first.

    Each line is ``<old> <new> <name> <<email>> <unix time> <tz>\\t<message>``.
    """
    entries: list[dict[str, Any]] = []
    for line in text.splitlines()[-limit:]:
        head, _, message = line.partition("\t")
        parts = head.split()
        if len(parts) < 4:
            continue
        old, new = parts[0], parts[1]
        try:
            ts = float(parts[-2])
        except ValueError:
            continue
        entries.append({"old": old, "new": new, "time": _iso(ts), "action": message.strip()})
    entries.reverse()
    return entries


def operation_in_progress(git_dir: Path) -> str | None:
    """The operation a git dir shows as in progress (rebase, merge, ...), or None."""
    for marker, op in _OPERATIONS:
        if (git_dir / marker).exists():
            return op
    return None


def rebasing_branch(git_dir: Path) -> str | None:
    """The branch a stopped rebase is rewriting ("topic"), from ``rebase-merge/head-name`` or
    ``rebase-apply/head-name`` in the git dir; None when not recorded (a detached rebase)."""
    for folder in ("rebase-merge", "rebase-apply"):
        try:
            name = (git_dir / folder / "head-name").read_text().strip()
        except OSError:
            continue
        return name.removeprefix("refs/heads/") if name and name != "detached HEAD" else None
    return None


READABLE = ("ok", "no_commits")
_STATE_WORDS = {
    "no_commits": "no commit yet",
    "bare": "a bare repository (no working tree)",
    "not_a_repository": "not a git repository",
    "error": "git could not read it",
}
"""A repository's ``state`` as the snapshot's summary table says it."""
"""Repository states whose HEAD and working tree were read (a ``bare``, ``error`` or ``not_a_repository``
record cannot rule a code change out)."""


def _same_dirty(br: dict[str, Any], ar: dict[str, Any]) -> list[str] | None:
    """The uncommitted files two records share when they list the same ones and each is unchanged in
    size and mtime (``[]`` when both are clean); ``None`` when the same files are dirty but either record
    lacks ``dirty_stat`` (an older snapshot): their content may have changed unseen."""
    bdirty = set(br.get("modified") or []) | set(br.get("staged") or [])
    adirty = set(ar.get("modified") or []) | set(ar.get("staged") or [])
    if not bdirty and not adirty:
        return []
    bst, ast = br.get("dirty_stat"), ar.get("dirty_stat")
    if not (isinstance(bst, dict) and isinstance(ast, dict)) or any(
        p not in bst or p not in ast for p in adirty
    ):
        return None
    return sorted(adirty)


_HEAD_REF = re.compile(r"^(ref:\s*refs/\S*|[0-9a-f]{40}|[0-9a-f]{64})\s*$")


def is_git_dir(folder: Path) -> bool:
    """Whether ``folder`` is a repository folder by git's own test (``is_git_directory`` in git's
    setup.c): ``objects/`` and ``refs/`` folders and a ``HEAD`` that names a ref (``ref: refs/...``)
    or holds an object id (40 or 64 hex digits). Reads the first line of ``HEAD``.

    A folder that merely has files and folders of those names (a checkpoint store with a ``HEAD``
    pointer, say) is not one.
    """
    if not ((folder / "objects").is_dir() and (folder / "refs").is_dir()):
        return False
    head = read_text(folder / "HEAD")
    return head is not None and _HEAD_REF.match(head.partition("\n")[0]) is not None


def find_repo_root(start: Path) -> Path | None:
    """The working-tree root containing ``start`` (a ``.git`` dir or file), or None.

    None too when ``start`` is in a bare repository (a folder other than ``.git`` that passes
    :func:`is_git_dir`): it has no working tree, even when it sits inside another repository's.
    """
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
        if folder.name != ".git" and is_git_dir(folder):
            return None
    return None


class GitProbe(Probe):
    """HEAD, branch, upstream, dirty files, stash and reflog of the code under test."""

    name = "git"
    description = "git HEAD, branch/detached, upstream ahead/behind, dirty files, stash, reflog of the code under test"
    hypotheses = ("code.change",)
    map_fields = (
        "repos.*.remotes",
        "repos.*.dirty_stat",
    )  # remote names and file paths are data, not keys
    types = {
        "repos": "list",
        "repos.*": "mapping",
        "repos.*.path": "string",
        "repos.*.branch": "string?",
        "repos.*.detached": "boolean",
        "repos.*.dirty": "boolean",
        "repos.*.head": "mapping?",
        "repos.*.head.sha": "string",
        "repos.*.reflog": "list",
        "repos.*.reflog.*": "mapping",
        "repos.*.modified": "list",
        "repos.*.staged": "list",
        "repos.*.untracked": "list",
        "repos.*.tool_outputs": "list",
        "repos.*.remotes": "mapping",
        "repos.*.stash_count": "integer>=0",
        "repos.*.dirty_stat": "mapping",
    }

    def collect(self, ctx: ProbeContext) -> dict[str, Any]:
        targets: list[tuple[Path, str, str | None]] = []
        explicit = ctx.option("repo")
        if explicit:
            targets.append((Path(explicit), "main", None))
        else:
            root = find_repo_root(Path.cwd())
            if root is not None:
                targets.append((root, "main", None))
        targets += self._editable_sources()
        if not targets:
            raise ProbeUnavailable(
                "the current folder is not in a git repository and no editable install is "
                "(use --repo PATH to name the code under test)"
            )
        if shutil.which("git") is None:
            raise ProbeUnavailable("git is not on PATH: install git to record the code under test")
        repos, seen = [], set()
        for path, role, dist in targets:
            root = find_repo_root(path) if path.exists() else None
            key = str(root or path.resolve())
            if key in seen:
                continue
            seen.add(key)
            repos.append(self._read_repo(path, root, role, dist, ctx))
        return {"repos": repos}

    @staticmethod
    def _editable_sources() -> list[tuple[Path, str, str | None]]:
        import json
        from importlib import metadata

        out = []
        for dist in metadata.distributions():
            folder = getattr(dist, "_path", None)
            if folder is not None and not os.path.isfile(
                os.path.join(str(folder), "direct_url.json")
            ):
                continue  # one stat, not pathlib's open, for the ~200 distributions that have no such file
            try:
                raw = dist.read_text("direct_url.json")
                info = json.loads(raw) if raw else None
            except Exception:
                continue
            if not isinstance(info, dict) or not (info.get("dir_info") or {}).get("editable"):
                continue
            url = str(info.get("url", ""))
            if url.startswith("file://"):
                from urllib.parse import unquote, urlparse

                src = Path(unquote(urlparse(url).path))
                if find_repo_root(src) is not None:
                    out.append((src, "editable", dist.metadata["Name"]))
        return out

    def _read_repo(
        self, path: Path, root: Path | None, role: str, dist: str | None, ctx: ProbeContext
    ) -> dict[str, Any]:
        """One ``repos`` entry, with :func:`shown` text throughout (names and paths that are not UTF-8
        included: the folder's own path, git's output, the error lines and redaction labels)."""
        return shown(self._read_repo_raw(path, root, role, dist, ctx))

    def _read_repo_raw(
        self, path: Path, root: Path | None, role: str, dist: str | None, ctx: ProbeContext
    ) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "path": str((root or path).absolute()),
            "role": role,
            "distribution": dist,
        }
        if root is None:
            rec["state"] = "bare" if is_git_dir(path) else "not_a_repository"
            return rec
        calls = Calls(
            root, ctx.timeout_s + 5, ceiling=True
        )  # the runner's timeout comes first and ends the groups
        dirs = calls.start("rev-parse", "--absolute-git-dir", "--git-common-dir")
        status = calls.start("status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all")
        log = calls.start(
            "log",
            "-1",
            "--encoding=UTF-8",
            "--no-show-signature",
            "--format=%H%x00%an%x00%at%x00%ct%x00%B",
            "HEAD",
        )
        remotes = calls.start("remote", "-v")
        subs = (
            calls.start("submodule", "status", "--recursive")
            if (root / ".gitmodules").exists()
            else None
        )
        try:
            try:
                lines = calls.result(dirs).splitlines()
            except GitError as exc:  # git does not see a repository here: nothing else can be read
                rec.update(
                    state="not_a_repository" if exc.not_a_repository else "error", error=str(exc)
                )
                if (
                    not exc.not_a_repository
                ):  # a folder that is not a repository is a state, not a failed read
                    ctx.error(shown(f"repos[{rec['path']}]"), shown(rec["error"]))
                return rec
            git_dir = Path(lines[0])
            common = Path(lines[1]) if len(lines) > 1 else git_dir
            common = common if common.is_absolute() else root / common
            rec["operation"] = operation_in_progress(git_dir)
            if (
                rec["operation"] == "rebase"
            ):  # HEAD is detached mid-rebase; say which branch is being rebased
                rec["rebasing_branch"] = rebasing_branch(git_dir)
            rec["shallow"] = (common / "shallow").exists()
            problems: list[str] = []

            def read(handle, parse):  # one command's parsed output, or None with the problem noted
                try:
                    return parse(calls.result(handle))
                except (GitError, ValueError) as exc:
                    problems.append(
                        str(exc) if isinstance(exc, GitError) else f"{type(exc).__name__}: {exc}"
                    )
                    return None

            where = f"git.{shown(root.name)}"  # the redactor's records name the repository as the record does
            rec["remotes"] = {
                name: ctx.redactor.text(url, shown(f"{where}.remotes.{name}"))
                for name, url in (read(remotes, parse_remotes) or {}).items()
            }
            st = read(status, parse_status_v2)
            head = read(log, parse_head) if st is None or st["oid"] is not None else None
            if (
                st is None
            ):  # the branch from the HEAD file itself ("ref: refs/heads/main"; else detached)
                ref = (read_text(git_dir / "HEAD") or "").strip()
                rec.update(
                    branch=ref[len("ref: refs/heads/") :]
                    if ref.startswith("ref: refs/heads/")
                    else None,
                    detached=not ref.startswith("ref: "),
                )
            else:
                rec.update(
                    branch=st["branch"], detached=st["branch"] is None and st["oid"] is not None
                )
                rec.update(worktree_fields(st, UNTRACKED_LIST, root))
                rec["dirty_stat"] = dirty_stat(
                    root, rec["modified"] + rec["staged"], UNTRACKED_LIST
                )
                rec["upstream"] = st["upstream"]
            rec["head"] = head
            if subs is not None:
                got = read(subs, parse_submodules)
                if got is not None:
                    rec["submodules"] = got
            else:
                rec["submodules"] = []
            rec["stash_count"] = self._count_lines(common / "logs" / "refs" / "stash")
            try:
                text = (git_dir / "logs" / "HEAD").read_text(errors="replace")
            except OSError:
                text = ""
            rec["reflog"] = parse_reflog(text)
            for e in rec["reflog"]:
                e["action"] = ctx.redactor.text(e["action"], f"{where}.reflog")
            if st is None or (st["oid"] is not None and head is None):
                rec["state"] = (
                    "error"  # the worktree or HEAD could not be read: what was read is kept
                )
            else:
                rec["state"] = "ok" if st["oid"] is not None else "no_commits"
            if problems:
                rec["error"] = "; ".join(problems)
                ctx.error(shown(f"repos[{rec['path']}]"), shown(rec["error"]))
        except (
            OSError,
            ValueError,
            IndexError,
        ) as exc:  # odd repository states are recorded, never crash
            rec.update(state="error", error=f"{type(exc).__name__}: {exc}")
            ctx.error(shown(f"repos[{rec['path']}]"), shown(rec["error"]))
        finally:
            calls.close()
        return rec

    @staticmethod
    def _count_lines(path: Path) -> int:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                return sum(1 for _ in fh)
        except OSError:
            return 0

    def headline(self, data: dict[str, Any]) -> str:
        parts = []
        for r in data.get("repos") or []:
            name = os.path.basename(str(r.get("path", "?")).rstrip("/"))
            if r.get("state") != "ok":
                state = _STATE_WORDS.get(str(r.get("state")), str(r.get("state")))
                parts.append(f"{name}: {state}")
                continue
            head = r.get("head") or {}
            where = r.get("branch") or "detached"
            extra = ", dirty" if r.get("dirty") else ""
            extra += f", {r['operation']} in progress" if r.get("operation") else ""
            extra += f" (of {r['rebasing_branch']})" if r.get("rebasing_branch") else ""
            parts.append(f"{name} {where}@{str(head.get('sha', ''))[:10]}{extra}")
        return "; ".join(parts)

    def judge(
        self,
        before: ProbeResult | None,
        after: ProbeResult | None,
        jctx: JudgeContext | None = None,
    ) -> list[Finding]:
        if not (before and after and before.usable and after.usable):
            return []  # one side alone shows nothing here; the ledger marks code.change inconclusive
        brepos = {r.get("path"): r for r in before.data.get("repos") or []}
        arepos = [r for r in after.data.get("repos") or [] if isinstance(r, dict)]
        moved = moved_checkouts(
            brepos, arepos
        )  # after path -> the before path of the same checkout
        out: list[Finding] = []
        checked = []
        for ar in arepos:
            bpath, why = moved.get(ar.get("path"), (ar.get("path"), ""))
            br = brepos.get(bpath)
            name = os.path.basename(str(ar.get("path", "")).rstrip("/")) or str(ar.get("path"))
            was = f" (at {bpath} before: the same repository, {why})" if why else ""
            if br is None:
                out.append(
                    implicated(
                        "code.change",
                        Severity.LOW,
                        f"{name}: repository appears only in the after snapshot",
                        [str(ar.get("path"))],
                        relevance=0.3,
                    )
                )
                out[-1].subject = str(ar.get("path"))
                continue
            for f in self._judge_repo(name, br, ar):
                f.subject = str(
                    ar.get("path")
                )  # forensics.diff.commits attaches the commit list by this path
                if was:
                    f.evidence = [*f.evidence, f"{name}{was}"]
                out.append(f)
            if not any(
                f.status.value == "implicated" for f in out if f.subject == str(ar.get("path"))
            ):
                unread = [
                    f"{side} {r.get('state')}" + (f" ({r.get('error')})" if r.get("error") else "")
                    for side, r in (("before", br), ("after", ar))
                    if r.get("state") not in READABLE
                ]
                if unread:
                    out.append(
                        inconclusive(
                            "code.change",
                            f"{name}: could not be read on both sides ("
                            + "; ".join(unread)
                            + "): a code change is not ruled out",
                        )
                    )
                    continue
                same_dirty = _same_dirty(br, ar)
                if same_dirty is None:
                    out.append(
                        inconclusive(
                            "code.change",
                            f"{name}: uncommitted changes to the same files on both "
                            "sides; whether they changed in between was not recorded (a snapshot "
                            "older than the dirty-file sizes and times)",
                        )
                    )
                    continue
                clean = (
                    "working tree clean on both"
                    if not same_dirty
                    else (
                        f"the same uncommitted files on both ({len(same_dirty)}), unchanged in size and time"
                    )
                )
                untracked = _count(ar.get("untracked_count"), ar.get("untracked"))
                if untracked:  # not 'clean': git lists them; none of them is new source code
                    clean = (
                        ("tracked files clean on both" if not same_dirty else clean)
                        + f"; {plural(untracked, 'untracked file')} after, no new source file among them"
                    )
                checked.append(
                    f"{name} at {str((ar.get('head') or {}).get('sha', ''))[:10]}{was}: {clean}"
                )
        seen = {ar.get("path") for ar in arepos} | {b for b, _ in moved.values()}
        for path, br in brepos.items():
            if path in seen:
                continue
            name = os.path.basename(str(path or "").rstrip("/")) or str(path)
            out.append(
                inconclusive(
                    "code.change",
                    f"{name}: repository recorded only in the before snapshot (at "
                    f"{str((br.get('head') or {}).get('sha', ''))[:10] or 'an unread HEAD'}); the "
                    "after snapshot did not look there (taken in another folder?): a code change "
                    f"is not ruled out; take it in that checkout or with --repo {path}",
                )
            )
        if not any(f.status.value in ("implicated", "inconclusive") for f in out):
            out.append(
                ruled_out(
                    "code.change", f"HEAD unchanged ({'; '.join(checked) or 'no repository'})"
                )
            )
        return out

    @staticmethod
    def _judge_repo(name: str, br: dict[str, Any], ar: dict[str, Any]) -> list[Finding]:
        if any(
            (r.get("head") or {}).get("sha") is None and r.get("state") not in READABLE
            for r in (br, ar)
        ):
            return []  # a side's HEAD was not read: nothing to compare it with (the caller says inconclusive)
        subs = (
            br.get("submodules"),
            ar.get("submodules"),
        )  # compared only when both snapshots list them
        br, ar = _well_typed(br), _well_typed(ar)
        out = []
        if all(isinstance(x, list) for x in subs):
            bs, as_ = (
                {str(x.get("path")): x.get("head") for x in side if isinstance(x, dict)}
                for side in subs
            )
            for path in sorted(set(bs) | set(as_)):
                hb, ha = bs.get(path), as_.get(path)
                if hb != ha:
                    out.append(
                        implicated(
                            "code.change",
                            Severity.HIGH,
                            f"{name}: submodule {path} moved {str(hb)[:7] if hb else '(absent)'} -> "
                            f"{str(ha)[:7] if ha else '(absent)'}",
                            [
                                f"submodule {path}: {hb or 'absent or not initialized'} -> "
                                f"{ha or 'absent or not initialized'}"
                            ],
                            relevance=0.8,
                            fields=["submodules"],
                        )
                    )
        bsha, asha = (br.get("head") or {}).get("sha"), (ar.get("head") or {}).get("sha")
        if bsha != asha:
            newest_before = (br.get("reflog") or [{}])[0]
            new_events = []
            for e in ar.get("reflog") or []:
                if e == newest_before:
                    break
                new_events.append(e)
            how = "; ".join(
                f"{e.get('action')} ({str(e.get('old'))[:7]}..{str(e.get('new'))[:7]})"
                for e in reversed(new_events)
            )
            evidence = [
                f"HEAD {str(bsha)[:10]} -> {str(asha)[:10]} ({(ar.get('head') or {}).get('subject', '')})"
            ]
            if how:
                evidence.append(f"reflog since the before snapshot: {how}")
            role = (
                f" (editable install {ar.get('distribution')})"
                if ar.get("role") == "editable"
                else ""
            )
            verb = new_events[-1].get("action", "moved") if new_events else "moved"
            summary = (
                f"{name}{role}: HEAD moved by '{verb}'"
                if new_events
                else f"{name}{role}: HEAD moved"
            )
            out.append(
                implicated(
                    "code.change",
                    Severity.HIGH,
                    summary,
                    evidence,
                    relevance=0.8,
                    fields=["head.sha"],
                )
            )
        if (br.get("branch") != ar.get("branch")) and bsha == asha:

            def _br(r):  # no branch: a detached HEAD, not Python's None
                return r.get("branch") or ("(detached)" if r.get("detached", True) else "(none)")

            out.append(
                implicated(
                    "code.change",
                    Severity.LOW,
                    f"{name}: branch {_br(br)} -> {_br(ar)} (same commit)",
                    relevance=0.1,
                )
            )
        bdirty = set(br.get("modified") or []) | set(br.get("staged") or [])
        adirty = set(ar.get("modified") or []) | set(ar.get("staged") or [])
        bst, ast = br.get("dirty_stat"), ar.get("dirty_stat")
        edited = sorted(
            p
            for p in adirty & bdirty
            if isinstance(bst, dict)
            and isinstance(ast, dict)
            and p in bst
            and p in ast
            and bst[p] != ast[p]
        )
        if adirty == bdirty and edited:
            out.append(
                implicated(
                    "code.change",
                    Severity.MEDIUM,
                    f"{name}: uncommitted changes to {plural(len(edited), 'file')} changed since before "
                    f"({', '.join(edited[:3])}" + (" ..." if len(edited) > 3 else "") + ")",
                    [
                        f"{p}: size {bst[p][0]} -> {ast[p][0]} B, modified again"
                        for p in edited[:10]
                    ],
                    relevance=0.6,
                    fields=["dirty_stat"],
                )
            )
        elif adirty != bdirty and adirty:
            newly = sorted(adirty - bdirty) or sorted(adirty)
            out.append(
                implicated(
                    "code.change",
                    Severity.MEDIUM,
                    f"{name}: uncommitted changes to {plural(len(adirty), 'file')} after ({', '.join(newly[:3])}"
                    + (" ..." if len(newly) > 3 else "")
                    + ")",
                    newly,
                    relevance=0.6,
                    fields=["modified"],
                )
            )
        elif bdirty and not adirty:
            out.append(
                implicated(
                    "code.change",
                    Severity.MEDIUM,
                    f"{name}: working tree was dirty before and is clean now (uncommitted changes were "
                    "committed, stashed or discarded)",
                    sorted(bdirty)[:10],
                    relevance=0.6,
                    fields=["modified"],
                )
            )
        known = set(map(str, br.get("untracked") or []))
        new_code = sorted(
            u for u in map(str, ar.get("untracked") or []) if u not in known and SOURCE.search(u)
        )
        if (
            new_code
        ):  # a module the step may import (or that shadows one): never 'working tree clean'
            out.append(
                implicated(
                    "code.change",
                    Severity.LOW,
                    f"{name}: {plural(len(new_code), 'new untracked source file')} after ("
                    + ", ".join(new_code[:3])
                    + (" ..." if len(new_code) > 3 else "")
                    + ")",
                    new_code[:10],
                    relevance=0.3,
                    fields=["untracked"],
                )
            )
        if ar.get("operation") and ar.get("operation") != br.get("operation"):
            out.append(
                implicated(
                    "code.change",
                    Severity.MEDIUM,
                    f"{name}: a {ar['operation']} is in progress",
                    relevance=0.5,
                    fields=["operation"],
                )
            )
        return out
