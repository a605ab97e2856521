"""Probe ``git``: where the code under test stands, and how it got there.

Repositories examined: the one given by ``--repo`` (default: the current folder
if it is inside a repository), plus every editable-installed distribution whose
source folder is in a git repository (from ``direct_url.json``, PEP 610).

Per repository (``data.repos[]``), read with a few ``git`` plumbing commands started side by
side (see :mod:`forensics_probes.git.read`) and plain file reads, never changing anything:

- ``path`` (working-tree root), ``role`` (``main`` | ``editable``), ``distribution``.
- ``state``: ``ok`` | ``no_commits`` | ``bare`` | ``not_a_repository`` | ``error`` (with ``error``).
- ``operation``: an operation in progress, from marker files in the git dir
  (``rebase-merge``/``rebase-apply`` -> rebase, ``MERGE_HEAD`` -> merge,
  ``CHERRY_PICK_HEAD``, ``REVERT_HEAD``, ``BISECT_LOG``) or null; mid-rebase,
  ``rebasing_branch`` is the branch being rewritten (their ``head-name`` file).
- ``shallow``: ``.git/shallow`` exists.
- ``head``: ``{"sha", "subject", "author", "authored_at", "committed_at"}`` (UTC ISO).
- ``branch`` (null when detached), ``detached``.
- ``upstream``: ``{"name", "ahead", "behind"}`` (``git rev-list --left-right --count``) or null.
- ``dirty``, ``modified`` (unstaged), ``staged``, ``conflicted`` (unmerged index entries: a merge or
  rebase stopped on them), ``untracked`` (first 200 names), ``untracked_count``.
- ``stash_count``: entries of ``refs/stash``'s reflog.
- ``submodules``: ``[{"path", "head", "state"}]`` from ``git submodule status --recursive``
  (``state``: ``ok``, ``moved``, ``not_initialized``, ``conflict``); a submodule whose
  checked-out commit moved between the snapshots is a code change.
- ``reflog``: the last 100 entries of HEAD's reflog (``.git/logs/HEAD``), newest
  first: ``{"old", "new", "time", "action"}`` where action is git's message,
  e.g. ``pull origin main: Fast-forward``.
- ``remotes``: ``{name: url}``, credentials in URLs redacted.

Judged hypothesis: ``code.change`` (HEAD moved and how, tree got dirty or
clean, branch switched, an operation left in progress). This judge is the only
source of ``code.change`` findings from git; each carries the repository path
as its ``subject``, by which :func:`forensics.diff.commits.attach_evidence`
adds the commit list between the two HEADs at diff time (it needs the
repository).
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
from pathlib import Path
from typing import Any

from forensics.errors import ProbeUnavailable
from forensics_probes.git.read import (GitCalls, GitError, parse_head, parse_remotes, parse_status_v2, parse_submodules,
                                       worktree_fields)
from forensics.model import Finding, Severity, implicated, ruled_out
from forensics.render.words import plural
from forensics.probe import JudgeContext, Probe, ProbeContext, ProbeResult

REFLOG_ENTRIES = 100
UNTRACKED_LIST = 200
_OPERATIONS = (("rebase-merge", "rebase"), ("rebase-apply", "rebase"), ("MERGE_HEAD", "merge"),
               ("CHERRY_PICK_HEAD", "cherry-pick"), ("REVERT_HEAD", "revert"), ("BISECT_LOG", "bisect"))


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


def find_repo_root(start: Path) -> Path | None:
    """The working-tree root containing ``start`` (a ``.git`` dir or file), or None."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


class GitProbe(Probe):
    """HEAD, branch, upstream, dirty files, stash and reflog of the code under test."""

    name = "git"
    description = "git HEAD, branch/detached, upstream ahead/behind, dirty files, stash, reflog of the code under test"
    hypotheses = ("code.change",)
    types = {"repos": "list", "repos.*": "mapping", "repos.*.path": "string", "repos.*.branch": "string?",
             "repos.*.detached": "boolean", "repos.*.dirty": "boolean", "repos.*.head": "mapping?",
             "repos.*.head.sha": "string", "repos.*.reflog": "list", "repos.*.reflog.*": "mapping",
             "repos.*.modified": "list", "repos.*.staged": "list", "repos.*.untracked": "list",
             "repos.*.remotes": "mapping", "repos.*.stash_count": "integer>=0"}

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
            raise ProbeUnavailable("the current folder is not in a git repository and no editable install is "
                                   "(use --repo PATH to name the code under test)")
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
        from importlib import metadata
        import json

        out = []
        for dist in metadata.distributions():
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

    def _read_repo(self, path: Path, root: Path | None, role: str, dist: str | None,
                   ctx: ProbeContext) -> dict[str, Any]:
        rec: dict[str, Any] = {"path": str((root or path).absolute()), "role": role, "distribution": dist}
        if root is None:
            rec["state"] = "bare" if (path / "HEAD").is_file() and (path / "objects").is_dir() else "not_a_repository"
            return rec
        calls = GitCalls(root, ctx.timeout_s + 5)  # the runner's timeout comes first and ends the groups
        dirs = calls.start("rev-parse", "--absolute-git-dir", "--git-common-dir")
        status = calls.start("status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all")
        log = calls.start("log", "-1", "--format=%H%x00%an%x00%at%x00%ct%x00%B", "HEAD")
        remotes = calls.start("remote", "-v")
        subs = calls.start("submodule", "status", "--recursive") if (root / ".gitmodules").exists() else None
        try:
            lines = calls.result(dirs).splitlines()
            git_dir = Path(lines[0])
            common = Path(lines[1]) if len(lines) > 1 else git_dir
            common = common if common.is_absolute() else root / common
            rec["operation"] = operation_in_progress(git_dir)
            if rec["operation"] == "rebase":  # HEAD is detached mid-rebase; say which branch is being rebased
                rec["rebasing_branch"] = rebasing_branch(git_dir)
            rec["shallow"] = (common / "shallow").exists()
            rec["remotes"] = {name: ctx.redactor.text(url, f"git.{root.name}.remotes.{name}")
                              for name, url in parse_remotes(calls.result(remotes)).items()}
            st = parse_status_v2(calls.result(status))
            if st["oid"] is None:
                rec.update(state="no_commits", head=None, branch=st["branch"], detached=False,
                           untracked=st["untracked"][:UNTRACKED_LIST], stash_count=0, reflog=[])
                return rec
            rec["state"] = "ok"
            rec["head"] = parse_head(calls.result(log))
            rec.update(branch=st["branch"], detached=st["branch"] is None)
            rec.update(worktree_fields(st))
            rec["submodules"] = parse_submodules(calls.result(subs)) if subs is not None else []
            rec["upstream"] = st["upstream"]
            rec["stash_count"] = self._count_lines(common / "logs" / "refs" / "stash")
            try:
                text = (git_dir / "logs" / "HEAD").read_text(errors="replace")
            except OSError:
                text = ""
            rec["reflog"] = parse_reflog(text)
            for e in rec["reflog"]:
                e["action"] = ctx.redactor.text(e["action"], f"git.{root.name}.reflog")
        except GitError as exc:  # odd repository states must be recorded, not crash the probe
            rec.update(state="not_a_repository" if exc.not_a_repository else "error", error=str(exc))
            if not exc.not_a_repository:  # a folder that is not a repository is a state, not a failed read
                ctx.error(f"repos[{rec['path']}]", rec["error"])
        except (OSError, ValueError, IndexError) as exc:
            rec.update(state="error", error=f"{type(exc).__name__}: {exc}")
            ctx.error(f"repos[{rec['path']}]", rec["error"])
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
                parts.append(f"{name}: {r.get('state')}")
                continue
            head = r.get("head") or {}
            where = r.get("branch") or "detached"
            extra = ", dirty" if r.get("dirty") else ""
            extra += f", {r['operation']} in progress" if r.get("operation") else ""
            extra += f" (of {r['rebasing_branch']})" if r.get("rebasing_branch") else ""
            parts.append(f"{name} {where}@{str(head.get('sha', ''))[:10]}{extra}")
        return "; ".join(parts)

    def judge(self, before: ProbeResult | None, after: ProbeResult | None,
              jctx: JudgeContext | None = None) -> list[Finding]:
        if not (before and after and before.usable and after.usable):
            return []  # one side alone shows nothing here; the ledger marks code.change inconclusive
        brepos = {r.get("path"): r for r in before.data.get("repos") or []}
        out: list[Finding] = []
        checked = []
        for ar in after.data.get("repos") or []:
            br = brepos.get(ar.get("path"))
            name = os.path.basename(str(ar.get("path", "")).rstrip("/")) or str(ar.get("path"))
            if br is None:
                out.append(implicated("code.change", Severity.LOW, f"{name}: repository appears only in the after snapshot",
                                      [str(ar.get("path"))], relevance=0.3))
                out[-1].subject = str(ar.get("path"))
                continue
            for f in self._judge_repo(name, br, ar):
                f.subject = str(ar.get("path"))  # forensics.diff.commits attaches the commit list by this path
                out.append(f)
            checked.append(f"{name} at {str((ar.get('head') or {}).get('sha', ''))[:10]}")
        if not any(f.status.value == "implicated" for f in out):
            out.append(ruled_out("code.change", f"HEAD unchanged and working tree clean on both ({', '.join(checked) or 'no repository'})"))
        return out

    @staticmethod
    def _judge_repo(name: str, br: dict[str, Any], ar: dict[str, Any]) -> list[Finding]:
        subs = (br.get("submodules"), ar.get("submodules"))  # compared only when both snapshots list them
        br, ar = _well_typed(br), _well_typed(ar)
        out = []
        if all(isinstance(x, list) for x in subs):
            bs, as_ = ({str(x.get("path")): x.get("head") for x in side if isinstance(x, dict)} for side in subs)
            for path in sorted(set(bs) | set(as_)):
                hb, ha = bs.get(path), as_.get(path)
                if hb != ha:
                    out.append(implicated("code.change", Severity.HIGH,
                                          f"{name}: submodule {path} moved {str(hb)[:7] if hb else '(absent)'} -> "
                                          f"{str(ha)[:7] if ha else '(absent)'}",
                                          [f"submodule {path}: {hb or 'absent or not initialized'} -> "
                                           f"{ha or 'absent or not initialized'}"], relevance=0.8,
                                          fields=["submodules"]))
        bsha, asha = (br.get("head") or {}).get("sha"), (ar.get("head") or {}).get("sha")
        if bsha != asha:
            newest_before = (br.get("reflog") or [{}])[0]
            new_events = []
            for e in ar.get("reflog") or []:
                if e == newest_before:
                    break
                new_events.append(e)
            how = "; ".join(f"{e.get('action')} ({str(e.get('old'))[:7]}..{str(e.get('new'))[:7]})" for e in reversed(new_events))
            evidence = [f"HEAD {str(bsha)[:10]} -> {str(asha)[:10]} ({(ar.get('head') or {}).get('subject', '')})"]
            if how:
                evidence.append(f"reflog since the before snapshot: {how}")
            role = f" (editable install {ar.get('distribution')})" if ar.get("role") == "editable" else ""
            verb = new_events[-1].get("action", "moved") if new_events else "moved"
            summary = f"{name}{role}: HEAD moved by '{verb}'" if new_events else f"{name}{role}: HEAD moved"
            out.append(implicated("code.change", Severity.HIGH, summary, evidence, relevance=0.8, fields=["head.sha"]))
        if (br.get("branch") != ar.get("branch")) and bsha == asha:
            def _br(r):  # no branch: a detached HEAD, not Python's None
                return r.get("branch") or ("(detached)" if r.get("detached", True) else "(none)")
            out.append(implicated("code.change", Severity.LOW, f"{name}: branch {_br(br)} -> {_br(ar)} (same commit)",
                                  relevance=0.1))
        bdirty = set(br.get("modified") or []) | set(br.get("staged") or [])
        adirty = set(ar.get("modified") or []) | set(ar.get("staged") or [])
        if adirty != bdirty and adirty:
            newly = sorted(adirty - bdirty) or sorted(adirty)
            out.append(implicated("code.change", Severity.MEDIUM,
                                  f"{name}: uncommitted changes to {plural(len(adirty), 'file')} after ({', '.join(newly[:3])}"
                                  + (" ..." if len(newly) > 3 else "") + ")", newly, relevance=0.6, fields=["modified"]))
        elif bdirty and not adirty:
            out.append(implicated("code.change", Severity.MEDIUM,
                                  f"{name}: working tree was dirty before and is clean now (uncommitted changes were "
                                  "committed, stashed or discarded)", sorted(bdirty)[:10], relevance=0.6,
                                  fields=["modified"]))
        if ar.get("operation") and ar.get("operation") != br.get("operation"):
            out.append(implicated("code.change", Severity.MEDIUM, f"{name}: a {ar['operation']} is in progress",
                                  relevance=0.5, fields=["operation"]))
        return out
