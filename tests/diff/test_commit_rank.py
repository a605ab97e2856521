"""Commit ranking on a real git repository (issue 13): renames are not new code, categories weigh
differently, and files the benchmarked step never loaded rank lower."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _diffkit import commit_file, git, repo_data, section, snapshot

from forensics.diff.commits import NOT_LOADED_FACTOR
from forensics.diff.commits import analyse as commits_analyse
from forensics.diff.hotpaths import CATEGORY_WEIGHTS, category_weight
from forensics.diff.ledger import analyse

KERNEL = "csrc/attention/paged_attention_kernels.cu"
COMM = "serving/distributed/communicator.py"


def _kernel_text(n: int = 1200) -> str:
    return "".join(f"__device__ float k{i}(float x) {{ return x * {i}.0f; }}\n" for i in range(n))


def _pull(tmp_path: Path, *, loaded: list[str] | None = None):
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    commit_file(upstream, KERNEL, _kernel_text(), "kernels: paged attention")
    commit_file(
        upstream,
        COMM,
        "def all_reduce(x, group):\n    return group.all_reduce(x)\n" * 5,
        "communicator: first version",
    )
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(upstream), str(work))
    before = repo_data(work)
    # commit 1: the 1,200-line kernel file moved to another folder (one line edited)
    (upstream / "csrc" / "kernels").mkdir(parents=True)
    git(upstream, "mv", KERNEL, "csrc/kernels/paged_attention.cu")
    p = upstream / "csrc/kernels/paged_attention.cu"
    p.write_text(
        p.read_text().replace("k0(float x)", "k0(float y)").replace("x * 0.0f", "y * 0.0f")
    )
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "-m", "kernels: move paged attention under csrc/kernels")
    # commit 2: 70 changed lines on the all-reduce path
    body = "".join(
        f"def all_reduce_{i}(x, group):\n    y = x.clone()\n    return group.all_reduce(y)\n\n"
        for i in range(17)
    )
    commit_file(
        upstream,
        COMM,
        "def all_reduce(x, group):\n    return group.all_reduce(x)\n" * 5 + body,
        "communicator: out-of-place all-reduce",
    )
    git(work, "pull", "-q", "origin", "main")
    after = repo_data(work)
    b, a = (
        snapshot({"git": section({"repos": [before]})}),
        snapshot({"git": section({"repos": [after]})}),
    )
    if loaded is not None:
        bench = {
            "schema": "forensics.bench/1",
            "results": [
                {
                    "name": "user.step_ms",
                    "kind": "user",
                    "unit": "ms",
                    "higher_is_better": False,
                    "process_medians": [3.57, 3.56, 3.57, 3.58, 3.57],
                    "loaded_files": [str(work / f) for f in loaded],
                }
            ],
        }
        a["bench"] = bench
    return work, b, a


def test_category_weights_order():
    w = CATEGORY_WEIGHTS
    assert (
        w["distributed communication"]
        == w["CUDA graphs"]
        > w["kernels"]
        > w["scheduler"]
        > category_weight(["memory pool"])
        > 0
    )
    assert category_weight([]) == 0


def test_a_renamed_kernel_file_ranks_below_a_communicator_change(tmp_path):
    work, b, a = _pull(tmp_path)
    (rc,) = commits_analyse(b, a)
    assert [c.subject for c in rc.commits] == [
        "communicator: out-of-place all-reduce",
        "kernels: move paged attention under csrc/kernels",
    ]
    moved = rc.commits[1]
    (f,) = moved.files
    assert f.renamed_from == KERNEL and f.path == "csrc/kernels/paged_attention.cu"
    assert f.added == 1 and f.deleted == 1  # git -M -C: the 1,200 moved lines are not new code
    comm = rc.commits[0]
    assert (
        comm.hot_lines >= 60
        and comm.weight == comm.hot_lines * CATEGORY_WEIGHTS["distributed communication"]
    )
    an = analyse(b, a)
    assert "first " + comm.sha[:10] + ' "communicator: out-of-place all-reduce"' in an.top.summary
    doc = an.to_json()
    files = doc["commits"][0]["commits"][1]["files"]
    assert files[0]["renamed_from"] == KERNEL


def test_a_commit_touching_only_files_the_step_never_loaded_ranks_lower(tmp_path):
    # the step loaded the kernels' Python side only (say a JIT wrapper next to it), never the communicator
    work, b, a = _pull(tmp_path, loaded=["csrc/kernels/paged_attention.cu"])
    (rc,) = commits_analyse(b, a)
    comm = next(c for c in rc.commits if c.subject.startswith("communicator"))
    assert comm.unloaded
    assert (
        comm.weight
        == comm.hot_lines * CATEGORY_WEIGHTS["distributed communication"] * NOT_LOADED_FACTOR
    )
    an = analyse(b, a)
    assert any("never loaded these files: ranked lower" in e for e in an.top.evidence)
    assert any("loaded 1 file(s) of this repository" in e for e in an.top.evidence)


def test_the_step_records_its_loaded_files_in_every_process(tmp_path):
    """forensics bench --cmd: the step and a spawned and a forked worker each record the modules they loaded."""
    pkg = tmp_path / "proj"
    (pkg / "app").mkdir(parents=True)
    (pkg / "app" / "__init__.py").write_text("")
    (pkg / "app" / "parent_only.py").write_text("X = 1\n")
    (pkg / "app" / "spawned_only.py").write_text("Y = 2\n")
    (pkg / "app" / "forked_only.py").write_text("Z = 3\n")
    (pkg / "app" / "never.py").write_text("W = 4\n")
    (pkg / "step.py").write_text(
        "import json, multiprocessing as mp, sys\n"
        "sys.path.insert(0, %r)\n"
        "import app.parent_only\n"
        "def spawned():\n    import app.spawned_only\n"
        "def forked():\n    import app.forked_only\n"
        "if __name__ == '__main__':\n"
        "    p = mp.get_context('spawn').Process(target=spawned); p.start(); p.join()\n"
        "    p = mp.get_context('fork').Process(target=forked); p.start(); p.join()\n"
        "    for v in (1.0, 1.1, 1.0, 1.05):\n        print(json.dumps({'metric': 'step_ms', 'value': v}))\n"
        % str(pkg)
    )
    from forensics.bench.user import run_cmd_process, user_result

    rec = run_cmd_process(
        f"{sys.executable} {pkg / 'step.py'}", metric=None, metric_regex=None, timeout_s=120
    )
    files = set(rec["loaded_files"])
    real = {
        str((pkg / "app" / n).resolve())
        for n in ("parent_only.py", "spawned_only.py", "forked_only.py")
    }
    assert real <= files, sorted(files)
    assert str((pkg / "app" / "never.py").resolve()) not in files
    assert not any("site-packages" in f for f in files)
    res = user_result("user.step_ms", [rec, rec, rec], unit="ms", higher_is_better=False)
    assert set(res["loaded_files"]) >= real


def test_the_hook_runs_the_users_own_sitecustomize(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['OWN_SITECUSTOMIZE_RAN'] = '1'\n")
    from forensics.step import loaded_files

    env, folder = loaded_files.recording_env(dict(os.environ, PYTHONPATH=str(own)))
    out = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ.get('OWN_SITECUSTOMIZE_RAN'))"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    loaded_files.collect(folder)
    assert out.stdout.strip() == "1"
    assert not Path(folder).exists()
