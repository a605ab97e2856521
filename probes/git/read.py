"""Reading a repository with the ``git`` executable: a few plumbing commands started side by side.

Why not GitPython (forensics does not use it): importing it costs tens of milliseconds of interpreter
time (docs/benchmarks.md) and its calls run one after another, each in the snapshot's critical path,
while the other probes wait on the same interpreter lock. The snapshot needs what four commands print
in git's documented machine formats, started at once:

- ``git rev-parse --absolute-git-dir --git-common-dir``: where the repository's files are;
- ``git status --porcelain=v2 --branch -z --untracked-files=all``: branch, upstream and
  ahead/behind, modified (worktree vs index), staged (index vs HEAD), unmerged and untracked
  paths (format: git-status(1), "Porcelain Format Version 2");
- ``git log -1 --encoding=UTF-8 --no-show-signature --format=%H%x00%an%x00%at%x00%ct%x00%B HEAD``: the
  HEAD commit (messages re-encoded from ``i18n.commitEncoding``; no signature check);
- ``git remote -v``: each remote's fetch URL (after ``insteadOf`` rewriting, as git uses it);
- ``git submodule status --recursive`` when ``.gitmodules`` exists.

Every command goes through the git gateway, :mod:`forensics.gitio` (its safe configuration, scrubbed
environment, timeout and process-group stop), with ``GIT_CEILING_DIRECTORIES`` set to the folder above
the root so a damaged ``.git`` is never replaced by a repository further up. This module parses what
they print.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from pathlib import Path
from typing import Any

_SUBMODULE_STATES = {" ": "ok", "+": "moved", "-": "not_initialized", "U": "conflict"}


def _iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_status_v2(text: str) -> dict[str, Any]:
    """Parse ``git status --porcelain=v2 --branch -z`` output.

    Returns:
        ``{"oid": sha | None (no commits), "branch": name | None (detached), "upstream":
        {"name", "ahead", "behind"} | None, "modified": [...], "staged": [...],
        "conflicted": [...], "untracked": [...]}``. ``modified`` are paths whose worktree
        differs from the index (the Y of XY), ``staged`` those whose index differs from HEAD
        (X), ``conflicted`` the unmerged (``u``) entries; paths as git prints them, in its order.
        A rename is listed under both its paths (the old one is gone from the index or the
        working tree); a copy under its new path only.
    """
    out: dict[str, Any] = {
        "oid": None,
        "branch": None,
        "upstream": None,
        "modified": [],
        "staged": [],
        "conflicted": [],
        "untracked": [],
    }
    upstream, ab = None, None
    fields = text.split("\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if not entry:
            continue
        if entry.startswith("# "):
            key, _, value = entry[2:].partition(" ")
            if key == "branch.oid":
                out["oid"] = None if value == "(initial)" else value
            elif key == "branch.head":
                out["branch"] = None if value == "(detached)" else value
            elif key == "branch.upstream":
                upstream = value
            elif key == "branch.ab":
                m = re.match(r"\+(\d+) -(\d+)", value)
                ab = (int(m.group(1)), int(m.group(2))) if m else None
            continue
        kind = entry[0]
        if kind == "?":
            out["untracked"].append(entry[2:])
        elif kind in "12":
            parts = entry.split(" ", 8 if kind == "1" else 9)
            xy, path = parts[1], parts[-1]
            moved = None
            if kind == "2":  # the original path of a rename or copy follows as its own field
                moved = fields[i] if i < len(fields) else None
                i += 1
            if xy[0] != ".":
                out["staged"].append(path)
                if (
                    xy[0] == "R" and moved
                ):  # a rename changes the index at both paths; a copy only at its new one
                    out["staged"].append(moved)
            if xy[1] != ".":
                out["modified"].append(path)
                if xy[1] == "R" and moved:
                    out["modified"].append(moved)
        elif kind == "u":
            out["conflicted"].append(entry.split(" ", 10)[-1])
    if upstream is not None and ab is not None:
        out["upstream"] = {"name": upstream, "ahead": ab[0], "behind": ab[1]}
    elif upstream is not None:  # no branch.ab: the upstream is configured but its branch is gone
        out["upstream"] = {"name": upstream, "ahead": None, "behind": None, "gone": True}
    return out


def worktree_fields(
    status: dict[str, Any], untracked_list: int = 200, root: Path | None = None
) -> dict[str, Any]:
    """The snapshot's worktree fields from :func:`parse_status_v2`'s result (lists sorted, at most
    ``untracked_list`` untracked names kept, their count recorded).

    With ``root`` (the working tree), untracked files that are forensics' own outputs
    (:func:`own_outputs`) are listed under ``tool_outputs`` instead of ``untracked`` and do not make
    the tree ``dirty``: a report written by the last ``forensics diff`` or ``investigate`` is not a
    change to the user's code.
    """
    modified, staged = sorted(set(status["modified"])), sorted(set(status["staged"]))
    conflicted, untracked = sorted(set(status["conflicted"])), status["untracked"]
    own = own_outputs(root, untracked) if root is not None else []
    if own:
        mine = set(own)
        untracked = [u for u in untracked if u not in mine]
    out = {
        "dirty": bool(modified or staged or untracked or conflicted),
        "modified": modified,
        "staged": staged,
        "conflicted": conflicted,
        "untracked": untracked[:untracked_list],
        "untracked_count": len(untracked),
    }
    if root is not None:
        out["tool_outputs"] = own[:untracked_list]
    return out


OWN_OUTPUT_NAME = re.compile(r"(?:^|/)forensics-[^/]*\.(?:json|ya?ml|html|md|prom|png)(?:\.gz)?$")
"""The names forensics gives its outputs by default (``forensics-report.html``, ``forensics-before.json``,
``forensics-investigate.html``, ``forensics-fleet.json``...)."""
OWN_OUTPUT_MARK = b"forensics"
OWN_OUTPUT_HEAD = 4096
NAMED_OUTPUT_SUFFIX = re.compile(r"\.(?:json|ya?ml|html|md|prom)$")
"""The suffixes of the outputs a user names with ``-o`` (``report.html``, ``before.json``, ``r.md``)."""
NAMED_OUTPUT_START = re.compile(
    rb"\A(?:\s*\{\s*\"schema\"\s*:\s*\"forensics\.[a-z-]+/\d+\""  # a JSON document of forensics
    rb"|(?:---\s*\n)?schema:\s*['\"]?forensics\.[a-z-]+/\d+"  # the same in YAML
    rb"|<!DOCTYPE html>.*?<title>forensics (?:diff|investigate|bisect|fleet)\b"  # a report's title
    rb"|#{1,2} forensics (?:diff|investigate|bisect|fleet)\b"  # a Markdown report's heading
    rb"|# HELP forensics_)",  # a Prometheus file's first metric
    re.DOTALL,
)
"""How a file forensics wrote under a name the user gave begins (the templates' titles and headings, the
documents' ``schema`` line): a user's own ``notes.md`` or ``config.json`` does not."""


def own_outputs(root: Path, untracked: list[str], limit: int = 200) -> list[str]:
    """The untracked files under ``root`` that forensics wrote (``open`` + ``read`` of their first 4 KiB):

    - named like its default outputs (:data:`OWN_OUTPUT_NAME`) and naming forensics in their first 4 KiB
      (a document's ``schema`` line, a report's title, a Prometheus file's metric names);
    - or named by the user (``-o report.html``, ``-o before.json``: :data:`NAMED_OUTPUT_SUFFIX`) and
      beginning as a forensics document or report does (:data:`NAMED_OUTPUT_START`).

    A file of the user's that only shares a name pattern stays untracked. At most ``limit`` files are
    listed and ``2 * limit`` opened (a checkout holding thousands of untracked data files is not read
    through).
    """
    out: list[str] = []
    opened = 0
    for rel in untracked:
        if len(out) >= limit or opened >= 2 * limit:
            break
        default = OWN_OUTPUT_NAME.search(rel)
        if not default and not NAMED_OUTPUT_SUFFIX.search(rel):
            continue
        opened += 1
        try:
            with open(root / rel, "rb") as fh:
                head = fh.read(OWN_OUTPUT_HEAD)
        except OSError:
            continue
        if default and (OWN_OUTPUT_MARK in head or head[:8] == b"\x89PNG\r\n\x1a\n"):
            out.append(rel)
        elif not default and NAMED_OUTPUT_START.match(head):
            out.append(rel)
    return out


def shown(obj: Any) -> Any:
    """``obj`` (str, list, dict, nested) with every undecodable byte kept by ``surrogateescape`` written as
    ``\\xNN`` text (as ``git`` itself quotes such names), keys included: the record is valid UTF-8 JSON,
    and two names that differ only in such bytes stay two names."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            return obj.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if isinstance(obj, list):
        return [shown(v) for v in obj]
    if isinstance(obj, dict):
        return {shown(k): shown(v) for k, v in obj.items()}
    return obj


def dirty_stat(root: Path, paths: list[str], limit: int = 200) -> dict[str, list[Any]]:
    """``{path: [size_bytes, mtime_ns]}`` of the first ``limit`` uncommitted files (``os.lstat`` of each in the
    working tree; ``[None, None]`` for a deleted one), so two snapshots dirty in the same files can tell
    whether those files changed in between."""
    out: dict[str, list[Any]] = {}
    for rel in sorted(set(paths))[:limit]:
        try:
            st = os.lstat(root / rel)
            out[rel] = [st.st_size, st.st_mtime_ns]
        except OSError:
            out[rel] = [None, None]
    return out


def parse_head(text: str) -> dict[str, Any]:
    """``{"sha", "subject", "author", "authored_at", "committed_at"}`` from the ``git log -1`` line
    above; ``subject`` is the message's first line, times UTC ISO 8601.

    Raises:
        ValueError: the text is not in that format.
    """
    sha, author, at, ct, message = text.split("\0", 4)
    subject = next(
        (ln.strip() for ln in message.splitlines() if ln.strip()), ""
    )  # git skips leading blank lines
    return {
        "sha": sha.strip(),
        "subject": subject,
        "author": author,
        "authored_at": _iso(float(at)),
        "committed_at": _iso(float(ct)),
    }


def parse_remotes(text: str) -> dict[str, str]:
    """``{name: fetch URL}`` from ``git remote -v`` (``name<TAB>url (fetch)`` lines; first one per name)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        name, _, rest = line.partition("\t")
        url, _, kind = rest.rpartition(" ")
        if name and kind == "(fetch)":
            out.setdefault(name, url)
    return out


def parse_submodules(text: str) -> list[dict[str, Any]]:
    """Each submodule's path, checked-out commit and state from ``git submodule status --recursive``.

    State (the line's first character): ``ok`` (at the commit the superproject records), ``moved``
    (``+``: checked out at another commit), ``not_initialized`` (``-``: ``head`` is null),
    ``conflict`` (``U``).
    """
    out = []
    for line in text.splitlines():
        m = re.match(
            r"^([ +\-U])([0-9a-f]{7,64}) (.+?)(?: \([^()]*\))?$", line
        )  # path may hold spaces
        if m:
            state = _SUBMODULE_STATES[m.group(1)]
            out.append(
                {
                    "path": m.group(3),
                    "head": None if state == "not_initialized" else m.group(2),
                    "state": state,
                }
            )
    return out
