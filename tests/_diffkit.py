"""Helpers for the diff/report tests: minimal snapshots and a real git repository's probe data."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any

CASES = Path(__file__).parent / "fixtures" / "cases"


def snapshot(
    probes: dict[str, Any],
    *,
    label: str = "",
    host: str = "node-a",
    machine_id: str = "0123456789ab",
    bench: dict | None = None,
    created: str = "2026-11-29T20:00:00Z",
) -> dict[str, Any]:
    """A valid snapshot document around ``probes`` ({name: section})."""
    return {
        "schema": "forensics.snapshot/1",
        "created": created,
        "label": label,
        "tool": {"name": "forensics", "version": "0.1.0"},
        "machine": {"hostname": host, "machine_id": machine_id},
        "options": {},
        "probes": copy.deepcopy(probes),
        "bench": copy.deepcopy(bench),
        "redaction": "on",
        "redactions": [],
    }


def section(data: dict[str, Any], status: str = "ok", reason: str = "") -> dict[str, Any]:
    out = {"status": status, "duration_s": 0.01, "data": data, "errors": []}
    if reason:
        out["reason"] = reason
    return out


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc, indent=1))
    return path


def git(cwd: Path, *args: str) -> str:
    """:func:`tests.conftest.git`, its output stripped."""
    from tests.conftest import git as run_git

    return run_git(cwd, *args).strip()


def commit_file(repo: Path, rel: str, text: str, message: str) -> str:
    """Write one file and commit it (:func:`tests.conftest.commit`); returns the new HEAD's id."""
    from tests.conftest import commit

    return commit(repo, {rel: text}, message)


def repo_data(path: Path) -> dict[str, Any]:
    """The git probe's schema for one repository, read with plain git commands and the reflog file (read-only),
    independently of the probe."""

    def utc(ts: str) -> str:
        return dt.datetime.fromtimestamp(int(ts), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    sha, subject, author, at, ct = git(
        path, "log", "-1", "--format=%H%x00%s%x00%an%x00%at%x00%ct"
    ).split("\0")
    reflog = []
    for line in reversed((path / ".git" / "logs" / "HEAD").read_text().splitlines()):
        head, _, message = line.partition("\t")
        parts = head.split()
        reflog.append({"old": parts[0], "new": parts[1], "time": utc(parts[-2]), "action": message})
    modified = git(path, "diff", "--name-only").splitlines()
    return {
        "path": str(path),
        "role": "main",
        "distribution": None,
        "state": "ok",
        "operation": None,
        "shallow": False,
        "head": {
            "sha": sha,
            "subject": subject,
            "author": author,
            "authored_at": utc(at),
            "committed_at": utc(ct),
        },
        "branch": git(path, "symbolic-ref", "--short", "HEAD"),
        "detached": False,
        "upstream": None,
        "dirty": bool(modified),
        "modified": modified,
        "staged": [],
        "untracked": [],
        "untracked_count": 0,
        "stash_count": 0,
        "reflog": reflog,
        "remotes": {},
    }
