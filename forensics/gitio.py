"""The one door to ``git`` (as :mod:`forensics.gpu.nvml` is to NVML): every git process forensics starts.

The git probe, the diff's commit list, bisect's worktrees and investigate's commit experiments all read
the user's repository through this module, the same careful way:

- **One way to start git**: ``git -C REPO <safe config> ARGS`` with ``subprocess.Popen`` in a session
  of its own (its process group), standard input from ``/dev/null``, output captured.
- **Bounded**: every command has a timeout (``timeout_s``; :data:`TIMEOUT_S` when none is given). Past
  it, the whole process group is stopped (:func:`forensics.procgroup.kill_group`: a hook, a credential
  helper or a filter that git started goes too, and nothing keeps a pipe open) and :class:`GitError`
  names the command (``git rev-parse: no answer after 120 s (stopped)``). Ctrl-C or SIGTERM while
  waiting stops the group too.
- **Safe configuration** on the command line, after (and so over) anything the repository, the user's
  configuration or ``GIT_CONFIG_PARAMETERS`` say: no hook runs (``core.hooksPath=/dev/null``), no
  fsmonitor hook (``core.fsmonitor=false``), no gpg program (``log.showSignature=false``), no
  detached-HEAD advice; ``--no-pager``.
- **A scrubbed environment** (:func:`clean_env`): the variables that point git at another repository or
  index (``GIT_DIR``, ``GIT_WORK_TREE``, ``GIT_INDEX_FILE`` ...) are removed; ``GIT_OPTIONAL_LOCKS=0``
  (``status`` does not refresh the index or take its lock), ``GIT_TERMINAL_PROMPT=0`` (never asks for a
  password), ``LC_ALL=C`` (messages in English, for :func:`error_line`). With ``ceiling=True``,
  ``GIT_CEILING_DIRECTORIES`` is the folder above ``repo``: git reads the repository at ``repo`` itself
  and never one further up (a damaged ``.git`` is never replaced by a parent repository).
- **One error**: :class:`GitError` (a :class:`forensics.errors.ForensicsError`, exit 2 when it reaches
  a command), with ``command``, ``timed_out`` and ``not_a_repository``.
- **One commit record**: :class:`Commit`, read by :func:`read_commit` / :func:`read_commits`.
- **One way to tell a moved checkout**: :func:`moved_checkouts` pairs the git probe's records of one
  repository read at two paths (the probe's judge and the diff's commit list pair them the same way).

Callers: :class:`Calls` starts several commands at once and reads them one by one (the snapshot's git
probe, on the snapshot's critical path); :func:`git` runs one command and returns its output. Nothing
here writes to the repository by itself; the commands that do (``worktree add``, ``checkout`` in a
private worktree) are the caller's (:mod:`forensics.bisect.worktree`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.errors import ForensicsError
from forensics.procgroup import kill_group, signals_deferred

TIMEOUT_S = 120.0
"""Seconds one git command may run when the caller gives no ``timeout_s`` (read at each call)."""

SAFE_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "log.showSignature=false",
    "-c",
    "advice.detachedHead=false",
)
"""``-c`` options on every command line: no hook, no fsmonitor hook, no gpg program, no advice."""

LOCATION_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)
"""Variables that would point git (ours, or a step's run in a worktree) at another repository or index."""

_GRACE_S = 0.1  # git holds no state worth a longer SIGTERM grace
_NO_BLOCK = contextlib.nullcontext()


class GitError(ForensicsError):
    """A git command failed, did not answer in time, or could not be started.

    ``str()`` is ``"git <subcommand>: <what went wrong>"``: git's ``fatal:``/``error:`` line
    (:func:`error_line`), ``no answer after N s (stopped)``, or ``git is not installed (not on PATH)``.

    Attributes:
        command: ``"git <subcommand>"``.
        returncode: git's exit status; None when it did not end by itself (timed out) or never started.
        timed_out: it ran past its timeout and its process group was stopped.
        not_a_repository: git said the folder is not a repository.
    """

    def __init__(
        self,
        message: str,
        *,
        command: str = "git",
        returncode: int | None = None,
        timed_out: bool = False,
        not_a_repository: bool = False,
    ):
        super().__init__(message)
        self.command = command
        self.returncode = returncode
        self.timed_out = timed_out
        self.not_a_repository = not_a_repository


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without :data:`LOCATION_VARIABLES`, plus ``extra``.

    Also the environment of a step run in a bisect worktree (it must not be pointed at the user's
    repository by an inherited ``GIT_DIR``)."""
    env = {k: v for k, v in os.environ.items() if k not in LOCATION_VARIABLES}
    env.update(extra or {})
    return env


def git_env(repo: str | Path, ceiling: bool = False) -> dict[str, str]:
    """The environment of every git command: :func:`clean_env` plus ``GIT_OPTIONAL_LOCKS=0``,
    ``GIT_TERMINAL_PROMPT=0``, ``LC_ALL=C``, and with ``ceiling`` ``GIT_CEILING_DIRECTORIES`` = the
    folder above ``repo`` (absolute)."""
    extra = {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    if ceiling:
        extra["GIT_CEILING_DIRECTORIES"] = str(Path(repo).absolute().parent)
    return clean_env(extra)


def error_line(stderr: str, returncode: int) -> str:
    """What a failed git command said: its ``fatal:``/``error:`` line (not the hints printed after it,
    such as the ``git config --global --add safe.directory ...`` line of a dubious-ownership refusal), else
    its last line, else the exit status."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.startswith(("fatal:", "error:"))]
    return (said or lines or [f"exit status {returncode}"])[0 if said else -1]


def _name(args: tuple[str, ...]) -> str:
    return f"git {args[0]}" if args else "git"


class Calls:
    """git commands in one repository, started at once and read one by one.

    :meth:`start` returns at once (``subprocess.Popen`` in the calling thread, so the probe runner
    records the child against its probe and ends its process group if the probe runs out of time);
    :meth:`result` waits for that command, at most ``timeout_s``. :meth:`close` stops any still
    running. Also a context manager (``close`` on exit).

    Args:
        repo: the folder git runs in (``git -C repo``).
        timeout_s: how long :meth:`result` waits for one command before stopping it (seconds;
            :data:`TIMEOUT_S` when None).
        ceiling: set ``GIT_CEILING_DIRECTORIES`` to the folder above ``repo`` (see the module docstring).
    """

    def __init__(self, repo: str | Path, timeout_s: float | None = None, *, ceiling: bool = False):
        self.repo = repo
        self.timeout_s = TIMEOUT_S if timeout_s is None else timeout_s
        self._env = git_env(repo, ceiling)
        self._procs: list[tuple[subprocess.Popen, str]] = []

    def start(self, *args: str) -> int:
        """Start ``git -C REPO <safe config> ARGS...``; returns a handle for :meth:`result`.

        Raises:
            GitError: git could not be started (not installed: ``FileNotFoundError``; another ``OSError``).
        """
        name = _name(args)
        try:
            # In the main thread, a signal right after the fork must still find the child to stop (the
            # signal handlers run there only; probe threads skip the bookkeeping).
            with (
                signals_deferred()
                if threading.current_thread() is threading.main_thread()
                else _NO_BLOCK
            ):
                proc = subprocess.Popen(
                    ["git", "--no-pager", "-C", str(self.repo), *SAFE_CONFIG, *args],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=self._env,
                    start_new_session=True,
                )  # its group: stopped as a whole
                self._procs.append((proc, name))
        except FileNotFoundError:
            raise GitError(f"{name}: git is not installed (not on PATH)", command=name) from None
        except OSError as exc:
            raise GitError(f"{name}: {exc.strerror or exc}", command=name) from None
        return len(self._procs) - 1

    def result_bytes(self, handle: int, check: bool = True) -> tuple[int, bytes]:
        """(exit status, standard output) of a started command, once it ended.

        Raises:
            GitError: it exited non-zero (only with ``check``; the message is git's :func:`error_line`) or
                ran past ``timeout_s`` (its process group was stopped; ``timed_out``).
        """
        proc, name = self._procs[handle]
        try:
            out, err = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc, grace_s=_GRACE_S)
            _drain(proc)
            raise GitError(
                f"{name}: no answer after {self.timeout_s:g} s (stopped)",
                command=name,
                timed_out=True,
            ) from None
        except BaseException:  # Ctrl-C, SIGTERM turned into an exception: git goes with us
            kill_group(proc, grace_s=_GRACE_S)
            raise
        if check and proc.returncode != 0:
            line = error_line(err.decode("utf-8", "replace"), proc.returncode)
            raise GitError(
                f"{name}: {line}",
                command=name,
                returncode=proc.returncode,
                not_a_repository="not a git repository" in line,
            )
        return proc.returncode, out

    def result(self, handle: int) -> str:
        """Standard output of a started command, decoded as UTF-8; bytes that are not UTF-8 (file names in
        another encoding) are kept as surrogate escapes, so each name stays distinct and can still be
        stat'ed.

        Raises:
            GitError: as :meth:`result_bytes` (with ``check``).
        """
        return self.result_bytes(handle)[1].decode("utf-8", "surrogateescape")

    def close(self) -> None:
        """Stop and reap every command still running, with whatever it started (its process group)."""
        for proc, _ in self._procs:
            if proc.poll() is None:
                kill_group(proc, grace_s=_GRACE_S)
            _drain(proc)

    def __enter__(self) -> "Calls":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _drain(proc: subprocess.Popen) -> None:
    try:
        proc.communicate(timeout=1)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        pass


def git(
    repo: str | Path,
    *args: str,
    check: bool = True,
    timeout_s: float | None = None,
    ceiling: bool = False,
) -> str:
    """Run ``git -C repo <safe config> ARGS`` and return its standard output (UTF-8, undecodable bytes
    replaced), stripped of the trailing newline.

    Args:
        repo: the folder git runs in.
        check: raise on a non-zero exit (else the output is returned whatever the status).
        timeout_s: seconds it may run (:data:`TIMEOUT_S` when None).
        ceiling: see :class:`Calls`.

    Raises:
        GitError: git exited non-zero (only with ``check``), ran past ``timeout_s`` (always), or could
            not be started.
    """
    with Calls(repo, timeout_s, ceiling=ceiling) as calls:
        _, out = calls.result_bytes(calls.start(*args), check=check)
    return out.decode("utf-8", "replace").rstrip("\n")


def succeeds(repo: str | Path, *args: str, timeout_s: float | None = None) -> bool:
    """Whether ``git -C repo ARGS`` exits 0 (a question such as ``merge-base --is-ancestor``).

    Raises:
        GitError: it ran past ``timeout_s`` or could not be started (a failure is an answer; a hang is not).
    """
    try:
        git(repo, *args, timeout_s=timeout_s)
        return True
    except GitError as exc:
        if exc.returncode is None:
            raise
        return False


def iso_utc(ts: float) -> str:
    """A Unix time as ISO 8601 UTC (``2026-11-29T19:49:47Z``), the form of every commit time forensics writes."""
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Commit:
    """One commit, as ``git log``/``git show`` report it. Subject and author are user data: escape them.

    Attributes:
        sha: full object id (40 or 64 hex digits).
        short: git's abbreviation (``%h``: at least 7 digits, longer where needed to be unique).
        subject: the message's first non-blank line.
        author: the author's name.
        authored_at: author date, ISO 8601 UTC (``...Z``).
        committed_at: committer date, ISO 8601 UTC.
        parents: the parents' full object ids, first parent first (empty for a root commit).
    """

    sha: str
    short: str = ""
    subject: str = ""
    author: str = ""
    authored_at: str = ""
    committed_at: str = ""
    parents: list[str] = field(default_factory=list)

    @property
    def date(self) -> str:
        """The committer date (the bisect report's ``date``)."""
        return self.committed_at

    def to_json(self) -> dict[str, Any]:
        """``{"sha", "short", "subject", "author", "authored_at", "committed_at", "date", "parents"}``
        (``date`` is ``committed_at``, under the key bisect reports always had)."""
        return {
            "sha": self.sha,
            "short": self.short,
            "subject": self.subject,
            "author": self.author,
            "authored_at": self.authored_at,
            "committed_at": self.committed_at,
            "date": self.date,
            "parents": list(self.parents),
        }


COMMIT_FORMAT = "%H%x00%h%x00%P%x00%an%x00%at%x00%ct%x00%B"
"""``--format`` of :func:`parse_commit`: NUL-separated fields, the raw message last."""
_RECORD_END = (
    "%x00%x00%x01"  # ends each commit in read_commits (a message holds no NUL, nor \\x01 after one)
)


def parse_commit(text: str) -> Commit:
    """A :class:`Commit` from one commit printed with :data:`COMMIT_FORMAT`.

    Raises:
        ValueError: the text is not in that format.
    """
    sha, short, parents, author, at, ct, message = text.split("\0", 6)
    subject = next(
        (ln.strip() for ln in message.splitlines() if ln.strip()), ""
    )  # git skips leading blank lines
    return Commit(
        sha.strip(), short, subject, author, iso_utc(float(at)), iso_utc(float(ct)), parents.split()
    )


def read_commit(
    repo: str | Path, rev: str, *, timeout_s: float | None = None, ceiling: bool = False
) -> Commit:
    """The commit ``rev`` names (``git log -1 --no-walk --encoding=UTF-8 --format=COMMIT_FORMAT``; messages
    re-encoded to UTF-8 from ``i18n.commitEncoding``, no signature check).

    Raises:
        GitError: ``rev`` names no commit here, or git failed or timed out.
    """
    out = git(
        repo,
        "log",
        "-1",
        "--no-walk",
        "--encoding=UTF-8",
        "--no-show-signature",
        f"--format={COMMIT_FORMAT}",
        "--end-of-options",
        rev,
        "--",
        timeout_s=timeout_s,
        ceiling=ceiling,
    )
    try:
        return parse_commit(out)
    except ValueError:
        raise GitError(f"git log: no commit {rev!r}", command="git log") from None


def read_commits(
    repo: str | Path,
    *revs: str,
    max_count: int | None = None,
    timeout_s: float | None = None,
    ceiling: bool = False,
) -> list[Commit]:
    """The commits ``git log REVS`` lists (``old..new``), newest first, at most ``max_count``: one command.

    Raises:
        GitError: a revision is unknown, or git failed or timed out.
    """
    count = [f"--max-count={max_count}"] if max_count is not None else []
    out = git(
        repo,
        "log",
        *count,
        "--encoding=UTF-8",
        "--no-show-signature",
        f"--format={COMMIT_FORMAT}{_RECORD_END}",
        "--end-of-options",
        *revs,
        "--",
        timeout_s=timeout_s,
        ceiling=ceiling,
    )
    return [parse_commit(rec.lstrip("\n")) for rec in out.split("\0\0\x01") if rec.strip()]


def moved_checkouts(
    brepos: dict[Any, dict[str, Any]], arepos: list[dict[str, Any]]
) -> dict[Any, tuple[Any, str]]:
    """``{after path: (before path, why)}`` for a checkout recorded at another path on each side (moved, or
    another machine's or container's copy): the one repository of the before snapshot, of those not read at
    the same path after, that shares a remote URL with it or whose HEAD the after one's reflog holds. Without
    it the two read as a repository 'only in the after snapshot' and one 'only in the before snapshot', and
    their HEADs were never compared.

    Args:
        brepos: the before snapshot's repository records of the git probe, by path.
        arepos: the after snapshot's records.

    Returns:
        the pairs found (pure: reads only the records); a record with no such partner, or with two, is left
        out.
    """

    def urls(rec: dict[str, Any]) -> set[str]:
        remotes = rec.get("remotes")
        return {str(u) for u in remotes.values() if u} if isinstance(remotes, dict) else set()

    def same(br: dict[str, Any], ar: dict[str, Any]) -> str:
        if urls(br) & urls(ar):
            return "a remote URL in common"
        sha = (br.get("head") or {}).get("sha") if isinstance(br.get("head"), dict) else None
        log = ar.get("reflog") if isinstance(ar.get("reflog"), list) else []
        if sha and sha in {e.get(k) for e in log if isinstance(e, dict) for k in ("old", "new")}:
            return f"its HEAD before, {str(sha)[:10]}, in the reflog after"
        return ""

    apaths = {ar.get("path") for ar in arepos}
    lone = {p: br for p, br in brepos.items() if p not in apaths and isinstance(br, dict)}
    out: dict[Any, tuple[Any, str]] = {}
    for ar in arepos:
        if ar.get("path") in brepos:
            continue
        taken = {b for b, _ in out.values()}
        found = [(p, why) for p, br in lone.items() if p not in taken and (why := same(br, ar))]
        if len(found) == 1:
            out[ar.get("path")] = found[0]
    return out
