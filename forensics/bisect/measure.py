"""Measuring one commit of the user's repository, in a private worktree.

A :class:`Measurer` owns the :class:`~forensics.bisect.worktree.WorktreePool` of a
bisect run. For each commit it checks out a worktree, runs ``--setup`` there
once, then runs the step as fresh processes (:func:`forensics.step.command.run_command`,
one call = one process). The sample of one process is the median of the values
it printed (the unit of evidence of :mod:`forensics.stats`).

How the code under test is the code that runs (said in the report, too):
the step's working folder is the worktree, ``PYTHONPATH`` starts with the
worktree (and its ``src/`` when there is one), so its packages shadow an
installed or editable copy; git's location variables (``GIT_DIR``...) are
removed; ``FORENSICS_BISECT_COMMIT`` holds the commit. With ``--callable`` the
runner also checks that the module was imported from inside the worktree.
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from forensics.bisect.worktree import Worktree, WorktreePool, untracked_named
from forensics.errors import BadInputError
from forensics.gitio import GitError, clean_env
from forensics.procgroup import run_group_bounded
from forensics.step.command import run_command, shown

ISOLATION_NOTE = (
    "each commit ran in its own `git worktree` (detached, in a temporary folder) with the worktree as "
    "the working folder and first on PYTHONPATH (then its src/ if present), so its modules shadow any "
    "installed or editable copy; GIT_DIR and similar variables were removed"
)
CALLABLE_NOTE = "; --callable also checked that the module was imported from inside the worktree"


def workdir(tree: Path, repo: str | Path) -> Path:
    """Where the step runs in the private worktree ``tree`` of ``repo``: the same subfolder as the one the
    command was started in (``cd serving && forensics bisect ...`` runs the step in ``<tree>/serving``),
    when this process's working folder is inside ``repo`` and that subfolder exists at the commit; else
    the worktree itself (``os.getcwd``)."""
    try:
        rel = Path.cwd().resolve().relative_to(Path(repo).resolve())
    except (ValueError, OSError):
        return tree
    sub = tree / rel
    return sub if rel.parts and sub.is_dir() else tree


class StepFailed(Exception):
    """The setup or the step failed on a commit; ``str()`` says which and why (one line)."""


@dataclass
class StepSpec:
    """What to run for one commit.

    Attributes:
        cmd: the user's shell command printing JSON metric lines, or None.
        target: ``module:function`` for ``--callable``, or None.
        setup: shell command run once per checkout before measuring, or None.
        metric, metric_regex: passed to :func:`forensics.step.command.parse_output`.
        higher_is_better: the metric is a throughput (tok/s).
        timeout_s: wall-clock limit of one process, and of the setup.
        callable_timer: ``wall`` or ``cpu`` (:mod:`forensics.step.callable` ``--timer``).
        callable_args: more options for :mod:`forensics.step.callable` (e.g. ``--blocks``).
        env: variables set (a ``None`` value: removed) for the setup and every process, on top of
            :func:`step_env` (``forensics investigate``: the interventions already confirmed).
        pythonpath: folders put on ``PYTHONPATH`` after the worktree's, before this process's own
            (``forensics investigate``: the temporary overlays of package swaps already confirmed).
        drop_warmup: a process's sample is the median of its values after the first when it printed
            3 or more (as ``forensics bench`` reduces one process), instead of the median of all.
    """

    cmd: str | None = None
    target: str | None = None
    setup: str | None = None
    metric: str | None = None
    metric_regex: str | None = None
    higher_is_better: bool = False
    timeout_s: float = 600.0
    callable_timer: str = "wall"
    callable_args: tuple[str, ...] = ()
    env: dict[str, str | None] | None = None
    drop_warmup: bool = False
    pythonpath: tuple[str, ...] = ()

    def environment(self, tree: Path, sha: str, session: str) -> dict[str, str]:
        """:func:`step_env` (with ``pythonpath``) with ``env`` applied (a ``None`` value unsets a variable)."""
        out = step_env(tree, sha, session, self.pythonpath)
        for key, value in (self.env or {}).items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
        return out

    def command_for(self, tree: Path) -> str:
        """The shell command line measuring one process in ``tree``."""
        if self.cmd:
            return self.cmd
        return " ".join(
            shlex.quote(a)
            for a in (
                sys.executable,
                "-m",
                "forensics.step.callable",
                str(self.target),
                "--expect-under",
                str(tree),
                "--timer",
                self.callable_timer,
                *self.callable_args,
            )
        )

    def describe(self) -> str:
        """The step as the user gave it (``--cmd`` text or ``--callable`` target)."""
        return self.cmd if self.cmd else f"--callable {self.target}"


def step_env(tree: Path, sha: str, session: str = "", more: tuple[str, ...] = ()) -> dict[str, str]:
    """Environment of the setup and of each process: worktree first on PYTHONPATH (see module docstring),
    then the folders ``more``, then this process's own PYTHONPATH.

    ``session`` (``FORENSICS_BISECT_SESSION``) lets :func:`forensics.bisect.worktree.reap` find
    what the step left running when the bisect is interrupted.
    """
    paths = [str(tree)] + ([str(tree / "src")] if (tree / "src").is_dir() else []) + list(more)
    old = os.environ.get("PYTHONPATH")
    if old:
        paths.append(old)
    return clean_env(
        {
            "PYTHONPATH": os.pathsep.join(paths),
            "FORENSICS_BISECT_COMMIT": sha,
            "FORENSICS_WORKTREE": str(tree),
            "FORENSICS_BISECT_SESSION": session,
        }
    )


class Measurer:
    """Per-commit samples (one float per process, the user's unit) and failures of one session.

    Args:
        pool: the worktree pool (entered by the caller).
        spec: what to run.
        on_process: called after each process with (sha, sample or None) for progress.
    """

    def __init__(
        self,
        pool: WorktreePool,
        spec: StepSpec,
        on_process: Callable[[str, float | None], None] | None = None,
    ):
        self.pool = pool
        self.spec = spec
        self.samples: dict[str, list[float]] = {}
        self.failures: dict[str, str] = {}
        self.metric: str = spec.metric or ""
        self.on_process = on_process or (lambda sha, value: None)
        self._ready: dict[str, Worktree] = {}
        # the user's own untracked benchmark script, named by the command, is in no commit
        pool.carry = untracked_named(spec.cmd, pool.repo) if spec.cmd else []

    def tree_for(self, sha: str, role: str) -> Worktree:
        """A worktree at ``sha`` with the setup done (reuses one already there).

        Raises:
            StepFailed: checkout or setup failed.
        """
        if sha in self._ready:
            return self._ready[sha]
        old = self.pool.trees.get(role)
        if old is not None:
            self._ready.pop(old.sha, None)
        try:
            tree = self.pool.add(role, sha)
        except GitError as exc:
            if (
                exc.returncode is None
            ):  # git hung (stopped) or is gone: not this commit's fault, end the search
                raise
            raise StepFailed(f"checkout failed: {exc}") from None
        if self.spec.setup:
            self._run_setup(tree.path, sha)
        self._ready[sha] = tree
        return tree

    def _run_setup(self, path: Path, sha: str) -> None:
        try:  # its own process group: a timeout stops the whole setup, nothing keeps writing in the worktree
            code, out, err = (
                run_group_bounded(  # a long build log is not held: its tail has the last line
                    self.spec.setup,
                    self.spec.timeout_s,
                    shell=True,
                    cwd=path,
                    env=self.spec.environment(path, sha, self.pool.session),
                )
            )
        except OSError as exc:
            raise StepFailed(f"setup could not start: {exc}") from None
        if code is None:
            raise StepFailed(
                f"setup timed out after {self.spec.timeout_s:g} s (its processes were stopped)"
            )
        if code != 0:
            last = (err.tail.strip().splitlines() or out.tail.strip().splitlines() or [""])[-1]
            raise StepFailed(
                f"setup exited with status {code}" + (f": {shown(last)}" if last else "")
            )

    def run_once(self, sha: str, role: str) -> float:
        """One fresh process of the step at ``sha``; returns the median of its values.

        Raises:
            StepFailed: setup or step failed, or the step printed no measurement.
        """
        if sha in self.failures:
            raise StepFailed(self.failures[sha])
        try:
            tree = self.tree_for(sha, role)
            run = run_command(
                self.spec.command_for(tree.path),
                cwd=str(workdir(tree.path, self.pool.repo)),
                env=self.spec.environment(tree.path, sha, self.pool.session),
                timeout_s=self.spec.timeout_s,
                metric=self.spec.metric or (self.metric or None),
                metric_regex=self.spec.metric_regex,
            )
        except (StepFailed, BadInputError) as exc:
            why = str(exc)
            empty = getattr(self._ready.get(sha), "missing_submodules", None)
            if empty:  # the likely cause: say it with the failure
                why += (
                    f"; submodule {', '.join(empty)} is empty in the worktree (the commit it records is not "
                    "in your checkout of it: git submodule update --init brings it)"
                )
            self.failures[sha] = why
            self.on_process(sha, None)
            raise StepFailed(why) from None
        self.metric = self.metric or run.metric
        values = list(run.values)
        value = statistics.median(
            values[1:] if self.spec.drop_warmup and len(values) >= 3 else values
        )
        if value <= 0:
            self.failures[sha] = f"the step printed a non-positive {run.metric} ({value:g})"
            raise StepFailed(self.failures[sha])
        self.samples.setdefault(sha, []).append(value)
        self.on_process(sha, value)
        return value

    def top_up(self, wanted: list[tuple[str, str]], n: int) -> None:
        """Bring each (sha, role) to at least ``n`` processes, interleaved A B C A B C...

        Raises:
            StepFailed: of the first commit that failed (the others keep their samples).
        """
        while True:
            todo = [(sha, role) for sha, role in wanted if len(self.samples.get(sha, [])) < n]
            if not todo:
                return
            for sha, role in todo:
                self.run_once(sha, role)
