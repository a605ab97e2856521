"""Shared test helpers. Tests never need a GPU or the network."""

from __future__ import annotations

import compileall
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent  # the repository
EXAMPLES = ROOT / "examples"
# Tests send SIGINT to forensics as Ctrl-C would. A test run started in the background by a shell without
# job control inherits SIGINT ignored, and so would every process it starts (an ignored signal stays
# ignored across exec). Python's own handler here is reset to the default in the children, as at a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    """Compile the package's modules to bytecode once, before any test starts a process.

    Most tests run forensics as a user does, in fresh processes (about 1,000 of them). Where the
    environment sets ``PYTHONDONTWRITEBYTECODE`` (this project's machines and CI do) and the package is
    an editable checkout, no ``.pyc`` is ever written, so each of those processes compiled every module
    it imported from source: 0.17 s of the 0.45 s of a ``forensics diff``. Python still reads bytecode
    that exists, so one ``compileall`` here (the controller only, not each xdist worker) is enough. Only
    the package's own folders are compiled; the throw-away repositories the tests create are not.
    """
    if hasattr(config, "workerinput"):
        return
    for folder in ("forensics", "probes"):
        compileall.compile_dir(ROOT / folder, quiet=1)


FIXTURES = Path(__file__).resolve().parent / "fixtures"
H200 = FIXTURES / "h200x2"


@pytest.fixture(autouse=True)
def step_counter(tmp_path_factory, monkeypatch) -> Path:
    """``STEP_COUNTER``: a counter file of this test's own, in the environment of every process it starts.
    The synthetic steps (``tests._stepkit.SEEDED_RNG``) seed their noise with it, so a test sees the same
    draws in every run. A test may pass its own ``STEP_COUNTER`` to a process."""
    path = tmp_path_factory.mktemp("steps") / "counter"
    monkeypatch.setenv("STEP_COUNTER", str(path))
    return path


@pytest.fixture
def nvml_capture() -> dict:
    """The real NVML readings of a 2 x H200 machine (idle and under load)."""
    return json.loads((H200 / "nvml_torch.json").read_text())


def run_cli(
    *args: str, cwd: str | Path | None = None, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run ``python -m forensics.cli`` as a user would (a fresh process), capturing output."""
    full_env = dict(os.environ)
    full_env.pop("FORENSICS_DEBUG", None)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "forensics", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_SYSTEM": os.devnull,
}
"""A fixed identity, and none of this machine's git configuration (hooks, aliases, templates)."""


def git(cwd: Path, *args: str, env: dict | None = None) -> str:
    """Run git in ``cwd`` with :data:`GIT_ENV` (and ``env`` on top); returns stdout as git printed it."""
    full_env = dict(os.environ, **GIT_ENV)
    if env:
        full_env.update(env)
    return subprocess.run(
        ["git", *args], cwd=cwd, env=full_env, check=True, capture_output=True, text=True
    ).stdout


def upstream_and_clone(tmp_path: Path, files: dict[str, str], message: str) -> tuple[Path, Path]:
    """(upstream, user): a repository ``tmp_path/upstream`` with ``files`` as its first commit, and the user's
    clone of it at ``tmp_path/user`` (the shape of a pull: commit to upstream, then ``git pull`` in user)."""
    up = make_repo(tmp_path / "upstream", files, message)
    user = tmp_path / "user"
    git(tmp_path, "clone", "-q", str(up), str(user))
    return up, user


def repo_state(repo: Path) -> str:
    """Everything of the user's repository forensics must leave as it found it: status (branch,
    untracked files), worktrees, stash, reflog, refs and the index, as git prints them."""
    return "\n".join(
        git(repo, *args)
        for args in (
            ("status", "--porcelain=v2", "--branch", "--untracked-files=all"),
            ("worktree", "list", "--porcelain"),
            ("stash", "list"),
            ("reflog", "--format=%H %gs"),
            ("for-each-ref",),
            ("ls-files", "-s"),
        )
    )


def commit(repo: Path, files: dict[str, str], message: str, env: dict | None = None) -> str:
    """Write ``files`` ({relative path: text}) into ``repo``, commit them all; returns the new HEAD's id."""
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "--", *files, env=env)
    git(repo, "commit", "-q", "--allow-empty", "-m", message, env=env)
    return git(repo, "rev-parse", "HEAD").strip()


def make_repo(
    path: Path, files: dict[str, str] | None = None, message: str = "first", branch: str = "main"
) -> Path:
    """A throw-away repository at ``path`` (created) on ``branch``, with ``files`` as its first commit.

    ``files`` None: no commit at all (a repository with an unborn branch).
    """
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    if files is not None:
        commit(path, files, message)
    return path


@pytest.fixture
def git_repo(tmp_path):
    """Factory of throw-away repositories under ``tmp_path``: ``git_repo("name", {"a.py": "x = 1\n"})``."""
    return lambda name="repo", files=None, message="first", branch="main": make_repo(
        tmp_path / name, files, message, branch
    )


def processes_with_env(var: str, value: str, name: str | None = None) -> list:
    """Live processes whose environment has ``var=value`` (and, if given, whose name is ``name``).

    Tests mark what they start with a unique value and look for survivors this way.
    """
    import psutil

    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(var) == value and (name is None or proc.name() == name):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


HEADER_END = "# --- end of header ---"


def real_text(relpath: str) -> str:
    """A captured public text from ``tests/fixtures/`` without its source header (the lines up to
    and including ``# --- end of header ---``, which name the URL it came from)."""
    text = (FIXTURES / relpath).read_text(encoding="utf-8")
    head, sep, body = text.partition(HEADER_END + "\n")
    return body if sep else text
