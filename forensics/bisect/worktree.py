"""Read-only git queries and private, temporary ``git worktree`` checkouts.

``forensics bisect`` never checks anything out in the user's tree. Each
commit it measures is checked out in a worktree of its own under a temporary
folder (``git worktree add --detach``), and removed again on exit, Ctrl-C,
SIGTERM or a crash of the benchmark (:class:`WorktreePool` is a context
manager; the CLI turns SIGTERM into an exception so the ``finally`` runs).

What touches the user's repository, and how it is undone:

- ``git worktree add`` writes ``.git/worktrees/<name>/`` (HEAD, index,
  gitdir). At exit ``git worktree remove --force --force`` removes it; if
  that fails, exactly our own admin folder is deleted (not ``git worktree
  prune``: that would also prune the user's own stale worktrees), and
  ``.git/worktrees`` is removed if we created it and it is empty.
- Hooks are disabled for our git calls (``-c core.hooksPath=/dev/null``, set by
  :mod:`forensics.gitio`): a ``post-checkout`` hook of the user's must not run for our checkouts.
- Before removal, processes our steps left behind (a killed step's
  grandchildren, e.g. torchrun's ranks) are terminated: :func:`reap` finds
  them by the ``FORENSICS_BISECT_SESSION`` token they inherited.
- Submodules: ``git worktree add`` leaves a submodule's folder empty (``git submodule update`` would
  fetch, maybe over the network, and write into ``.git/modules``). Each one is filled instead from the
  user's own checkout of it, read-only: ``git -C <that checkout> archive <the recorded commit>``,
  unpacked into the private worktree (:func:`fill_submodules`; nested ones the same way). A submodule
  whose recorded commit is not on this machine stays empty. (``git archive`` honours the
  submodule's ``export-ignore`` / ``export-subst`` attributes.)
- Untracked files the step's command names (the user's own ``bench.py``) are copied into each
  worktree (:func:`untracked_named`, :attr:`WorktreePool.carry`); the originals are only read.
- Nothing else is written: the other commands (rev-parse, rev-list,
  merge-base, show, diff --stat between commits) only read; ``forensics
  investigate`` takes a commit out of a private worktree with ``git apply -R``
  of its diff (a patch file), which changes only that worktree's files (no
  object, no index).

Every git command goes through the git gateway, :mod:`forensics.gitio` (a timeout that stops
git's process group, ``LC_ALL=C``, no terminal prompt, no hook, the caller's
``GIT_DIR``/``GIT_WORK_TREE`` removed); a command that hangs ends the bisect with
:class:`~forensics.gitio.GitError` naming it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from forensics.errors import BadInputError
from forensics.gitio import GitError, git, succeeds
from forensics.procgroup import signals_held, stop_processes


def diff_stat(repo: str | Path, parent: str, sha: str) -> str:
    """``git diff --stat`` between two commits (read-only; empty text if none)."""
    return git(repo, "diff", "--stat=100", "--no-color", parent, sha, "--")


@dataclass
class Range:
    """A validated bisect range: ``commits`` runs from the first commit after good to bad, oldest first."""

    toplevel: str
    good: str
    bad: str
    commits: list[str]
    linear: bool  # True when bad's first-parent chain passes through good


def resolve_range(repo: str | Path, good: str, bad: str) -> Range:
    """Check the repository and the two revisions, and list the commits between them.

    The list is ``git rev-list --first-parent --reverse good..bad`` when good is
    on bad's first-parent chain, else ``git rev-list --ancestry-path
    --topo-order --reverse good..bad`` (a linear order of a merge-y range).

    Raises:
        BadInputError: not a git work tree, no commits, unknown revision (with a
            hint for shallow clones), good not an ancestor of bad, or good == bad.
        GitError: a git command ran past its timeout or git is not installed.
    """
    repo = Path(repo)
    if not repo.is_dir():
        raise BadInputError(f"--repo {repo}: no such folder")
    try:
        top = git(repo, "rev-parse", "--show-toplevel")
    except GitError as exc:
        if exc.returncode is None:  # git hung or is missing: say so, not "not a repository"
            raise
        raise BadInputError(
            f"{repo}: not a git repository (or a bare one); pass --repo with a checkout"
        ) from None
    if not succeeds(top, "rev-parse", "--verify", "-q", "HEAD^{commit}") and not git(
        top, "rev-list", "-n1", "--all", check=False
    ):
        raise BadInputError(f"{top}: the repository has no commits yet; nothing to bisect")
    shallow = git(top, "rev-parse", "--is-shallow-repository", check=False) == "true"
    hint = " (this is a shallow clone: run `git fetch --unshallow` first)" if shallow else ""
    shas = []
    for opt, rev in (("--good", good), ("--bad", bad)):
        try:
            shas.append(
                git(top, "rev-parse", "--verify", "-q", "--end-of-options", f"{rev}^{{commit}}")
            )
        except GitError as exc:
            if exc.returncode is None:
                raise
            kind = (
                git(top, "cat-file", "-t", f"{rev}^{{object}}", check=False)
                if succeeds(
                    top, "rev-parse", "--verify", "-q", "--end-of-options", f"{rev}^{{object}}"
                )
                else ""
            )
            if kind:  # an object that exists but is no commit: a tree, a blob, a tag of one
                raise BadInputError(
                    f"{opt} {rev}: names a {kind}, not a commit; give a commit (a sha, a branch, "
                    "HEAD~3)"
                ) from None
            raise BadInputError(f"{opt} {rev}: unknown revision in {top}{hint}") from None
    g, b = shas
    if g == b:
        raise BadInputError(
            f"--good {good} and --bad {bad} are the same commit ({g[:12]}); nothing to bisect"
        )
    if not succeeds(top, "merge-base", "--is-ancestor", g, b):
        raise BadInputError(
            f"--good {good} ({g[:12]}) is not an ancestor of --bad {bad} ({b[:12]}){hint}; "
            "give an older good commit"
        )
    first_parent = git(top, "rev-list", "--first-parent", "--reverse", f"{g}..{b}").split()
    chain_parent = git(top, "rev-parse", f"{first_parent[0]}^", check=False) if first_parent else ""
    if chain_parent == g:
        commits, linear = first_parent, True
    else:
        commits = git(
            top, "rev-list", "--ancestry-path", "--topo-order", "--reverse", f"{g}..{b}"
        ).split()
        linear = False
    if shallow:
        shallow_file = Path(top) / git(top, "rev-parse", "--git-path", "shallow")
        cut = set(shallow_file.read_text().split()) if shallow_file.is_file() else set()
        if cut & set(commits):
            raise BadInputError(
                f"the history between --good and --bad is cut by the shallow clone{hint}"
            )
    return Range(top, g, b, commits, linear)


def reap(session: str, grace_s: float = 2.0) -> list[int]:
    """Terminate every process whose environment holds ``FORENSICS_BISECT_SESSION=<session>``.

    A step killed on Ctrl-C can leave grandchildren (torchrun's ranks, a
    backgrounded helper) holding GPUs; they inherited the token, so they and
    only they are found (``psutil`` reads ``/proc/<pid>/environ``; other users'
    processes are unreadable and skipped). SIGTERM first, SIGKILL after ``grace_s``.

    Returns:
        the pids that were signalled.
    """
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dependency
        return []
    mine = []
    for proc in psutil.process_iter():
        try:
            if (
                proc.pid != os.getpid()
                and proc.environ().get("FORENSICS_BISECT_SESSION") == session
            ):
                mine.append(proc)
        except (psutil.Error, OSError):
            continue
    stop_processes(mine, grace_s)
    return [p.pid for p in mine]


OWNER_FILE = "forensics-bisect-owner"
"""Our token in each admin entry we create (``.git/worktrees/<name>/forensics-bisect-owner``): JSON
``{"pid", "started", "session"}`` of the bisect that made it. git ignores unknown files there."""


def _process_started(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # noqa: BLE001 - gone, or not ours to read
        return None


def _mark_ours(admin: Path, session: str) -> None:
    import json

    try:
        (admin / OWNER_FILE).write_text(
            json.dumps(
                {"pid": os.getpid(), "started": _process_started(os.getpid()), "session": session}
            )
        )
    except OSError:
        pass


def _owner(path: Path) -> dict | None:
    import json

    try:
        owner = json.loads(path.read_text())
        int(owner["pid"])
        return owner
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _running(owner: dict) -> bool:
    started = _process_started(int(owner["pid"]))
    return started is not None and (
        owner.get("started") is None or abs(started - float(owner["started"])) < 1
    )


def remove_stale(repo: str | Path) -> list[str]:
    """Remove the worktrees an earlier ``forensics bisect`` left when it was killed (``kill -9``); only ours.

    Ours are recognised by their token: the checkout lives in a folder
    ``forensics-bisect-<random>/forensics-bisect-<random>-<role>`` that
    :class:`WorktreePool` made, whose :data:`OWNER_FILE` (also copied into the
    admin entry under ``git rev-parse --git-common-dir``/``worktrees``) names
    the bisect's pid and start time. One is stale when that process is gone,
    or when its temp folder is gone altogether. Steps it left running (found
    by its session token, :func:`reap`) are stopped, its checkout and admin entry
    are deleted; the user's own worktrees, stale or not, are never touched (no
    ``git worktree prune``).

    Returns:
        one line per worktree removed ("<path> (bisect pid N)"); [] when none or
        ``repo`` is not a repository.

    Raises:
        GitError: git ran past its timeout (:data:`forensics.gitio.TIMEOUT_S`) or could not be started.
    """
    try:
        common = (Path(repo) / git(repo, "rev-parse", "--git-common-dir")).resolve()
    except GitError as exc:
        if exc.returncode is None:
            raise
        return []
    except OSError:
        return []
    wdir = common / "worktrees"
    removed: list[str] = []
    for entry in sorted(wdir.iterdir()) if wdir.is_dir() else []:
        try:
            checkout = Path((entry / "gitdir").read_text().strip()).parent
        except OSError:
            continue
        base = checkout.parent
        token = base.name.startswith("forensics-bisect-") and checkout.name.startswith(
            base.name + "-"
        )
        owner = _owner(entry / OWNER_FILE) or _owner(base / OWNER_FILE)
        if not token and owner is None:
            continue  # not ours
        if owner is not None and _running(owner):
            continue  # that bisect is still running
        if owner is None and base.exists():
            continue  # ours by name but its owner unknown and its folder still there: leave it
        if owner is not None and owner.get("session"):
            reap(str(owner["session"]))  # the killed bisect's steps (own sessions) outlived it
        shutil.rmtree(checkout, ignore_errors=True)
        if token and base.exists() and not [p for p in base.iterdir() if p.name != OWNER_FILE]:
            shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(f"{checkout}" + (f" (bisect pid {owner['pid']})" if owner else ""))
    if removed and wdir.is_dir() and not any(wdir.iterdir()):
        try:
            wdir.rmdir()
        except OSError:
            pass
    return removed


def fill_submodules(repo: str | Path, path: Path, sha: str, depth: int = 0) -> list[str]:
    """Fill the submodule folders of the private checkout ``path`` (of commit ``sha`` of ``repo``) with
    the files of the commit each one records, from the user's own checkout of that submodule
    (``repo/<submodule path>``), read-only: ``git ls-tree`` finds the gitlinks, ``git archive`` of the
    recorded commit is unpacked into the folder; nested submodules the same way (4 levels).

    Returns:
        the submodule paths left empty: no checkout of it in ``repo``, or its recorded commit is not
        there (``git fetch`` in that submodule brings it). [] for a commit without ``.gitmodules``.

    Raises:
        GitError: ``git ls-tree`` failed or ran past its timeout.
    """
    import io
    import tarfile

    from forensics.gitio import Calls

    if not succeeds(repo, "cat-file", "-e", f"{sha}:.gitmodules"):
        return []
    missing: list[str] = []
    for entry in git(repo, "ls-tree", "-r", "-z", sha).split("\0"):
        meta, _, sub = entry.partition("\t")
        if not meta.startswith("160000 commit "):
            continue
        sub_sha, src, dest = meta.split()[2], Path(repo) / sub, path / sub
        if not (src / ".git").exists():
            missing.append(sub)
            continue
        try:
            with Calls(src, 120) as calls:
                _, data = calls.result_bytes(calls.start("archive", "--format=tar", sub_sha))
        except GitError:
            missing.append(sub)
            continue
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            if hasattr(tarfile, "data_filter"):  # no member may leave dest (Python 3.11.4+)
                tar.extractall(dest, filter="data")
            else:  # pragma: no cover - git archive writes relative names only
                tar.extractall(dest)
        if depth < 4:
            missing += [f"{sub}/{m}" for m in fill_submodules(src, dest, sub_sha, depth + 1)]
    return missing


CARRY_COPY_BYTES = 16 << 20
"""Untracked files the step names up to this size are copied into a worktree; larger ones are left out."""


def untracked_named(cmd: str | None, repo: str | Path, cwd: Path | None = None) -> list[str]:
    """The files the step's command names (``python bench.py --config local.yaml``) that are in the
    repository's folder but in no commit (untracked or ignored: ``git ls-files --error-unmatch`` fails),
    as paths relative to its top. Such a file, the user's own benchmark script, is in no worktree, so a
    step naming it failed at every commit; it is copied into each (:attr:`WorktreePool.carry`).

    ``cwd``: the folder the command runs from (default: this process's). Options, absolute paths and
    words that name no file there are left alone.
    """
    import shlex

    try:
        words = shlex.split(cmd or "")
    except ValueError:
        return []
    top, here = Path(repo).resolve(), (cwd or Path.cwd()).resolve()
    out = []
    for word in words[1:]:
        if word.startswith("-") or os.path.isabs(word) or "=" in word:
            continue
        path = (here / word).resolve()
        try:
            rel = path.relative_to(top)
        except ValueError:
            continue
        if path.is_file() and not succeeds(top, "ls-files", "--error-unmatch", "--", str(rel)):
            out.append(str(rel))
    return out


class Worktree:
    """One private detached checkout; use :meth:`checkout` to move it to another commit."""

    def __init__(self, repo: str, path: Path, sha: str):
        self.repo = repo
        self.path = path
        self.sha = sha
        self.admin_dir: Path | None = None
        self.missing_submodules: list[str] = []

    def checkout(self, sha: str) -> None:
        """Force the worktree to ``sha`` and remove untracked files (ignored build outputs stay)."""
        if sha == self.sha:
            return
        git(self.path, "checkout", "--detach", "--force", "-q", sha)
        git(self.path, "clean", "-ffdq")
        self.sha = sha
        self.missing_submodules = fill_submodules(self.repo, self.path, sha)


class WorktreePool:
    """Temporary worktrees of one repository, all removed when the ``with`` block ends.

    Usage::

        with WorktreePool(repo) as pool:
            wt = pool.add("good", sha)   # a Worktree at sha, under a temp folder
            ...

    Raises:
        GitError: ``git worktree add`` failed (e.g. a locked repository).
    """

    def __init__(self, repo: str):
        self.repo = repo
        # (``--path-format=absolute`` needs git 2.31; a relative answer is relative to ``repo``)
        self.common_dir = (Path(repo) / git(repo, "rev-parse", "--git-common-dir")).resolve()
        self._worktrees_dir_existed = (self.common_dir / "worktrees").exists()
        self.base: Path | None = None
        self.trees: dict[str, Worktree] = {}
        self.carry: list[str] = []  # untracked files the step names, copied into every worktree

    def __enter__(self) -> "WorktreePool":
        self.base = Path(tempfile.mkdtemp(prefix="forensics-bisect-"))
        _mark_ours(
            self.base, self.session
        )  # before any worktree exists: a kill -9 at any point leaves our token
        return self

    def add(self, role: str, sha: str) -> Worktree:
        """Create (or move) the worktree for ``role`` at ``sha``; the files of :attr:`carry` are copied in."""
        if role in self.trees:
            self.trees[role].checkout(sha)
            self._carry(self.trees[role].path)
            return self.trees[role]
        assert self.base is not None, "use WorktreePool as a context manager"
        path = self.base / f"{self.base.name}-{role}"
        wt = Worktree(self.repo, path, sha)
        self.trees[role] = wt  # registered before creation: a half-made one is cleaned up too
        git(self.repo, "worktree", "add", "--detach", "-q", str(path), sha)
        gitfile = path / ".git"
        if gitfile.is_file() and gitfile.read_text().startswith("gitdir:"):
            wt.admin_dir = Path(gitfile.read_text().split(":", 1)[1].strip())
            _mark_ours(wt.admin_dir, self.session)
        wt.missing_submodules = fill_submodules(self.repo, path, sha)
        self._carry(path)
        return wt

    def _carry(self, path: Path) -> None:
        """Copy each file of :attr:`carry` (relative to the repository's top) into the worktree at ``path``,
        unless the commit has a file there or it is larger than :data:`CARRY_COPY_BYTES`. A copy, never a
        link: Python puts a script's *resolved* folder first on ``sys.path`` (a link would import the
        user's checkout), and a step writing to a file it names must not write to the user's."""
        for rel in self.carry:
            src, dest = Path(self.repo) / rel, path / rel
            if dest.exists() or dest.is_symlink():
                continue
            try:
                if src.stat().st_size > CARRY_COPY_BYTES:
                    continue  # a local data set or checkpoint: not copied per worktree
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)
            except OSError:
                continue  # the step then says what is missing

    @property
    def session(self) -> str:
        """A token unique to this pool (its temp folder's name); steps carry it in ``FORENSICS_BISECT_SESSION``."""
        return self.base.name if self.base is not None else ""

    def close(self) -> None:
        """Stop what our steps left running, remove every worktree and its ``.git/worktrees`` entry; never raises."""
        if self.base is not None:
            reap(self.session)
        for wt in self.trees.values():
            admin = wt.admin_dir
            if admin is None:  # creation was interrupted: find our entry by its gitdir file
                admin = self._find_admin(wt.path)
            try:
                git(
                    self.repo,
                    "worktree",
                    "remove",
                    "--force",
                    "--force",
                    str(wt.path),
                    timeout_s=60,
                )
            except GitError:
                pass
            if wt.path.exists():
                shutil.rmtree(wt.path, ignore_errors=True)
            ours = (
                admin is not None
                and admin.resolve().parent == (self.common_dir / "worktrees").resolve()
            )
            if ours and admin.exists():
                shutil.rmtree(admin, ignore_errors=True)
        self.trees.clear()
        wdir = self.common_dir / "worktrees"
        if not self._worktrees_dir_existed and wdir.is_dir() and not any(wdir.iterdir()):
            try:
                wdir.rmdir()
            except OSError:
                pass
        if self.base is not None:
            shutil.rmtree(self.base, ignore_errors=True)
            self.base = None

    def _find_admin(self, path: Path) -> Path | None:
        wdir = self.common_dir / "worktrees"
        if not wdir.is_dir():
            return None
        for entry in wdir.iterdir():
            if entry.name.startswith(
                path.name
            ):  # git names the entry after the folder (plus digits)
                return entry
            try:
                if Path((entry / "gitdir").read_text().strip()) == path / ".git":
                    return entry
            except OSError:
                continue
        return None

    def __exit__(self, *exc) -> None:
        # A second Ctrl-C/SIGTERM/SIGHUP must not interrupt the clean-up half way: hold them until it is done.
        with signals_held():
            self.close()
