"""Defects found by a hostile pass over the tool (issue 16), each through what a user sees.

Numbers in the test names follow the issue's table. The bad-file corpus, the judge fuzz and the
secrets corpus have modules of their own (test_bad_input_corpus, test_judge_fuzz, test_secrets_corpus).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT, git, make_repo, run_cli

EXAMPLES = ROOT / "examples"
AA_B, AA_A = EXAMPLES / "aa" / "before.json", EXAMPLES / "aa" / "after.json"


def _git(repo: Path, *args: str) -> str:
    return git(repo, *args).strip()


def _repo(root: Path, name: str = "model") -> Path:
    return make_repo(root / name, {"kernels.py": "x = 1\n"})


# -- 0: an output that is not a regular file is written in place --------------------------------------------------


def _drain_fifo(path: Path) -> tuple[threading.Thread, list[bytes]]:
    got: list[bytes] = []

    def read():
        with open(path, "rb") as fh:
            got.append(fh.read())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t, got


def test_0_diff_writes_into_a_fifo_and_leaves_it_a_fifo(tmp_path):
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    reader, got = _drain_fifo(fifo)
    proc = run_cli(
        "diff", str(AA_B), str(AA_A), "-o", str(fifo), "--format", "json", "-q", timeout=60
    )
    reader.join(10)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert got and json.loads(got[0])["schema"] == "forensics.diff/1"


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")
@pytest.mark.parametrize("command", ["diff", "snapshot"])
def test_0_output_to_a_device_node_stays_a_device(tmp_path, command):
    """A private copy of /dev/null (char 1:3) made in the test folder: never replaced by a regular file."""
    dev = tmp_path / "null"
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    if command == "diff":
        proc = run_cli(
            "diff", str(AA_B), str(AA_A), "-o", str(dev), "--format", "md", "-q", timeout=60
        )
    else:
        proc = run_cli("snapshot", "--probe", "host", "-o", str(dev), "-q", timeout=60)
    assert proc.returncode == 0, proc.stderr
    st = os.stat(dev)
    assert stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1 and os.minor(st.st_rdev) == 3
    assert not [p.name for p in tmp_path.iterdir() if p.name != "null"]  # no temp file left either


# -- 2: the label is redacted -----------------------------------------------------------------------------------------


def test_2_label_is_redacted_in_the_snapshot_file(tmp_path):
    token = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"
    out = tmp_path / "s.json"
    proc = run_cli(
        "snapshot",
        "--probe",
        "host",
        "--label",
        f"after pull HF_TOKEN={token}",
        "-o",
        str(out),
        "-q",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert token not in out.read_text() and token not in proc.stdout + proc.stderr
    assert doc["label"] == "after pull HF_TOKEN=<redacted>"
    assert {"where": "label", "why": "secret by name"} in doc["redactions"]


# -- 1: commit texts in the diff go through the redactor ---------------------------------------------------------------


def test_1_commit_subject_secrets_are_redacted_in_every_diff_output(tmp_path):
    repo = _repo(tmp_path)
    before, after = tmp_path / "b.json", tmp_path / "a.json"
    assert (
        run_cli(
            "snapshot", "--probe", "git", "--repo", str(repo), "-o", str(before), "-q"
        ).returncode
        == 0
    )
    (repo / "kernels.py").write_text("x = 2\n")
    _git(repo, "commit", "-q", "-am", "speed up: token=abc123secretvalue password: hunter3")
    assert (
        run_cli(
            "snapshot", "--probe", "git", "--repo", str(repo), "-o", str(after), "-q"
        ).returncode
        == 0
    )
    assert "hunter3" not in after.read_text()  # the reflog's "commit: ... password: hunter3"
    for fmt in ("html", "md", "json"):
        out = tmp_path / f"r.{fmt}"
        proc = run_cli(
            "diff",
            str(before),
            str(after),
            "--repo",
            str(repo),
            "-o",
            str(out),
            env={"COLUMNS": "200"},
        )
        assert proc.returncode == 0, proc.stderr
        text = out.read_text() + proc.stdout
        assert "speed up" in text
        assert "abc123secretvalue" not in text and "hunter3" not in text, fmt


# -- 5, 6: nothing outlives forensics -----------------------------------------------------------------------------------

HUNG_GIT = """#!/bin/sh
echo $$ >> "$HUNG_GIT_PIDS"
sleep 300 &
echo $! >> "$HUNG_GIT_PIDS"
wait
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def test_5_a_hung_git_first_on_path_does_not_outlive_forensics(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "git").write_text(HUNG_GIT)
    (bindir / "git").chmod(0o755)
    pids = tmp_path / "pids"
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".git").mkdir()
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "HUNG_GIT_PIDS": str(pids)}
    proc = run_cli(
        "snapshot",
        "--probe",
        "git",
        "--probe",
        "host",
        "--timeout",
        "2",
        "-o",
        str(tmp_path / "s.json"),
        "-q",
        cwd=repo,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert (
        doc["probes"]["git"]["status"] == "failed" and "timed out" in doc["probes"]["git"]["reason"]
    )
    started = [int(x) for x in pids.read_text().split()]
    assert started
    left = [p for p in started if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"hung git processes still running after forensics exited: {left}"


SUBREAPER = textwrap.dedent("""
    import ctypes, json, subprocess, sys, psutil
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come to us
    p = subprocess.run([sys.executable, "-m", "forensics", *sys.argv[1:]], capture_output=True, text=True)
    left = []
    for c in psutil.Process().children(recursive=True):
        try:
            left.append(c.name() + " " + c.status())
            c.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(psutil.Process().children(), timeout=5)
    print(json.dumps({"rc": p.returncode, "stderr": p.stderr, "left": left}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux")
def test_6_snapshot_reaps_its_helper_processes_before_exit(tmp_path):
    """Run under a subreaper: whatever forensics left running or unreaped comes back to the wrapper."""
    script = tmp_path / "reaper.py"
    script.write_text(SUBREAPER)
    out = subprocess.run(
        [
            sys.executable,
            str(script),
            "snapshot",
            "--probe",
            "nccl_env",
            "--probe",
            "libs",
            "-o",
            str(tmp_path / "s.json"),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    res = json.loads(out.stdout)
    assert res["rc"] == 0, res["stderr"]
    assert res["left"] == [], res["left"]


# -- 7: an unwritable output is refused before any work ------------------------------------------------------------


def _readonly_dir(tmp_path: Path) -> Path:
    if (
        os.geteuid() == 0
    ):  # root writes anywhere a mode allows nothing; /proc refuses new files even to root
        return Path("/proc")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    return ro


STEP = 'import json, pathlib, sys\npathlib.Path(sys.argv[1]).touch()\nprint(json.dumps({"metric": "step_ms", "value": 1.0}))\n'


@pytest.mark.parametrize("command", ["bench", "snapshot --bench"])
def test_7_unwritable_output_is_refused_before_the_benchmark_runs(tmp_path, command):
    step = tmp_path / "step.py"
    step.write_text(STEP)
    marker = tmp_path / "ran"
    target = _readonly_dir(tmp_path) / f"forensics-test-{uuid.uuid4().hex}.json"
    cmd = f"{sys.executable} {step} {marker}"
    if command == "bench":
        proc = run_cli(
            "bench", "--cmd", cmd, "--processes", "3", "-q", "-o", str(target), timeout=120
        )
    else:
        proc = run_cli(
            "snapshot",
            "--probe",
            "host",
            "--bench",
            "--bench-cmd",
            cmd,
            "--bench-processes",
            "3",
            "-o",
            str(target),
            "-q",
            timeout=300,
        )
    assert proc.returncode == 2, proc.stderr
    assert str(target.parent) in proc.stderr and "-o" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not marker.exists(), "the step ran before the output was checked"


# -- 10: bench compare at 80 columns -----------------------------------------------------------------------------------


def test_10_bench_compare_fits_80_columns_and_says_more_throughput(tmp_path):
    bench = EXAMPLES / "h200x2" / "bench"
    proc = run_cli(
        "bench", "compare", str(bench / "load.json"), str(bench / "a1.json"), env={"COLUMNS": "80"}
    )
    assert proc.returncode in (0, 1, 3), proc.stderr
    lines = proc.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert "…" not in proc.stdout and "..." not in proc.stdout, proc.stdout
    # load.json -> a1.json: verified tokens/s 2579 -> 5114, a rise: "1.98x more", never a negative change
    row = next(line for line in lines if "verified_tokens_per_s" in line)
    assert "more" in row and "-" not in row.split("verified_tokens_per_s", 1)[1], row


# -- 11: a report without a benchmark ------------------------------------------------------------------------------------


def _no_bench(path: Path, dest: Path) -> Path:
    doc = json.loads(path.read_text())
    doc["bench"] = None
    dest.write_text(json.dumps(doc))
    return dest


def test_11_report_without_benchmark_says_no_slowdown_was_measured(tmp_path):
    b = _no_bench(EXAMPLES / "nccl-lost" / "before.json", tmp_path / "b.json")
    a = _no_bench(EXAMPLES / "nccl-lost" / "after.json", tmp_path / "a.json")
    out = tmp_path / "r.md"
    proc = run_cli("diff", str(b), str(a), "-o", str(out), env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    for text in (out.read_text(), proc.stdout):
        assert "no slowdown was measured (no benchmark in either snapshot)" in text
        assert "most likely cause" not in text.lower()


def test_11_repeated_reasons_are_folded_and_volatile_fields_collapsed(tmp_path):
    docs = []
    for side in ("before", "after"):
        doc = json.loads((EXAMPLES / "aa" / f"{side}.json").read_text())
        doc["probes"]["gpu"] = {
            "status": "unavailable",
            "duration_s": 0.01,
            "reason": "no NVIDIA driver found",
        }
        doc["bench"] = None
        docs.append(_no_bench_write(tmp_path / f"{side}.json", doc))
    out = tmp_path / "r.html"
    proc = run_cli("diff", str(docs[0]), str(docs[1]), "-o", str(out), env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    ledger = html[html.index("<h2>Hypothesis ledger") :]
    ledger = ledger[: ledger.index("<h2>", 4)]
    rows = [row for row in ledger.split("<tr>") if "no NVIDIA driver found" in row]
    assert len(rows) == 1, rows  # one row for the seven GPU hypotheses, not seven rows
    assert "<code>gpu.throttling</code><br><code>gpu.pcie-link</code>" in ledger
    # process-list churn sits in a collapsed section, not in the expanded table of changes
    assert "top_processes" in html
    i = html.index("top_processes")
    opening = html.rfind("<details", 0, i)
    assert opening != -1 and html.rfind("</details>", 0, i) < opening
    assert "open" not in html[opening : html.index(">", opening)]


def _no_bench_write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


# -- 12: stale worktrees of a killed bisect -------------------------------------------------------------------------------

SLOW_STEP = (
    'import json, time\ntime.sleep(30)\nprint(json.dumps({"metric": "step_ms", "value": 1.0}))\n'
)


def test_12_next_bisect_removes_the_stale_worktrees_of_a_killed_one_and_only_those(tmp_path):
    repo = _repo(tmp_path)
    (repo / "step.py").write_text(SLOW_STEP)
    _git(repo, "add", "step.py")
    _git(repo, "commit", "-q", "-m", "step")
    (repo / "kernels.py").write_text("x = 3\n")
    _git(repo, "commit", "-q", "-am", "third")
    mine = tmp_path / "my-own-worktree"
    _git(repo, "worktree", "add", "-q", "--detach", str(mine), "HEAD")
    import shutil

    shutil.rmtree(mine)  # the user's own stale worktree: not ours to remove
    # --good is the commit that adds step.py: at HEAD~2 the step cannot start, and the bisect could end (and remove
    # its worktrees) before the loop below sees them
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "forensics",
            "bisect",
            "--repo",
            str(repo),
            "--good",
            "HEAD~1",
            "--bad",
            "HEAD",
            "--cmd",
            f"{sys.executable} step.py",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "forensics-bisect" not in _git(
            repo, "worktree", "list"
        ):
            time.sleep(0.1)
        assert "forensics-bisect" in _git(repo, "worktree", "list")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert "forensics-bisect" in _git(repo, "worktree", "list")  # the kill -9 left them
    again = run_cli(
        "bisect",
        "--repo",
        str(repo),
        "--good",
        "HEAD",
        "--bad",
        "HEAD",
        "--cmd",
        "true",
        timeout=60,
    )
    assert "stale" in again.stderr and "worktree" in again.stderr, again.stderr
    listing = _git(repo, "worktree", "list", "--porcelain")
    assert "forensics-bisect" not in listing
    assert "my-own-worktree" in listing


# -- 13: submodules ------------------------------------------------------------------------------------------------------


def test_13_a_moved_submodule_is_a_code_change(tmp_path):
    sub = _repo(tmp_path, "kernels-lib")
    repo = _repo(tmp_path, "app")
    _git(
        repo,
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        str(sub),
        "third_party/kernels",
    )
    _git(repo, "commit", "-q", "-m", "add submodule")
    before, after = tmp_path / "b.json", tmp_path / "a.json"
    assert (
        run_cli(
            "snapshot", "--probe", "git", "--repo", str(repo), "-o", str(before), "-q"
        ).returncode
        == 0
    )
    (sub / "kernels.py").write_text("x = 99\n")
    _git(sub, "commit", "-q", "-am", "retune")
    new = _git(sub, "rev-parse", "HEAD")
    checkout = repo / "third_party" / "kernels"
    _git(checkout, "-c", "protocol.file.allow=always", "fetch", "-q", "origin")
    _git(checkout, "checkout", "-q", new)
    assert (
        run_cli(
            "snapshot", "--probe", "git", "--repo", str(repo), "-o", str(after), "-q"
        ).returncode
        == 0
    )
    rec = json.loads(after.read_text())["probes"]["git"]["data"]["repos"][0]
    assert {"path": "third_party/kernels", "head": new} in [
        {k: s[k] for k in ("path", "head")} for s in rec["submodules"]
    ]
    out = tmp_path / "r.json"
    assert run_cli("diff", str(before), str(after), "-o", str(out)).returncode == 0
    code = next(h for h in json.loads(out.read_text())["hypotheses"] if h["id"] == "code.change")
    assert code["status"] == "implicated"
    assert any("third_party/kernels" in e and new[:7] in e for e in code["evidence"]), code[
        "evidence"
    ]


# -- 14: inconclusive answers say what to do ---------------------------------------------------------------------------------


def test_14_inconclusive_page_exists_and_help_links_it():
    page = ROOT / "docs" / "inconclusive.md"
    assert "When the answer is inconclusive" in page.read_text()
    for args in (
        ["diff", "--help"],
        ["bench", "--help"],
        ["bench", "compare", "--help"],
        ["bisect", "--help"],
    ):
        out = run_cli(*args).stdout
        assert "docs/inconclusive.md" in out, args


def _bench_file(path: Path, values: list[float]) -> Path:
    from forensics.bench.document import build, make_result

    doc = build(
        {"kind": "command", "command": "step"},
        [make_result("user.step_ms", "user", "ms", values)],
        telemetry={"missing": "not_found", "detail": "test"},
    )
    path.write_text(json.dumps(doc))
    return path


def test_14_need_more_processes_names_the_flag_and_the_better_move_when_out_of_reach(tmp_path):
    import random

    rng = random.Random(3)
    a = _bench_file(tmp_path / "a.json", [10 * (1 + rng.gauss(0, 0.4)) for _ in range(6)])
    b = _bench_file(tmp_path / "b.json", [10.3 * (1 + rng.gauss(0, 0.4)) for _ in range(6)])
    proc = run_cli("bench", "compare", str(a), str(b), env={"COLUMNS": "200"})
    assert proc.returncode == 3, proc.stdout + proc.stderr
    text = proc.stdout + proc.stderr
    assert "--processes" in text
    assert "quieter machine" in text or "longer step" in text
    assert "docs/inconclusive.md" in text


# -- 15: plurals and states ----------------------------------------------------------------------------------------------


def test_15_untracked_files_only_are_not_called_zero_modified_files(tmp_path):
    repo = _repo(tmp_path)
    before, after = tmp_path / "b.json", tmp_path / "a.json"
    assert (
        run_cli(
            "snapshot", "--probe", "git", "--repo", str(repo), "-o", str(before), "-q"
        ).returncode
        == 0
    )
    (repo / "scratch.py").write_text("print(1)\n")
    assert (
        run_cli(
            "snapshot", "--probe", "git", "--repo", str(repo), "-o", str(after), "-q"
        ).returncode
        == 0
    )
    out = tmp_path / "r.md"
    proc = run_cli("diff", str(before), str(after), "-o", str(out), env={"COLUMNS": "200"})
    text = out.read_text() + proc.stdout
    assert "0 file(s)" not in text and "0 files" not in text
    assert "1 untracked file" in text


def test_15_one_suspect_one_round(tmp_path):
    from forensics.words import plural

    assert plural(1, "suspect") == "1 suspect" and plural(2, "suspect") == "2 suspects"
    assert plural(1, "round") == "1 round" and plural(0, "process", "processes") == "0 processes"
    assert plural(1, "file") == "1 file"


# -- 16: --deep with a CPU-only torch -------------------------------------------------------------------------------------


def test_16_deep_with_a_cpu_only_torch_says_not_applicable(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available() or getattr(torch.version, "cuda", None):
        pytest.skip("this torch build has CUDA")
    out = tmp_path / "s.json"
    proc = run_cli("snapshot", "--probe", "libs", "--deep", "-o", str(out), "-q", timeout=120)
    assert proc.returncode == 0, proc.stderr
    nccl = json.loads(out.read_text())["probes"]["libs"]["data"]["deep"]["nccl"]
    assert nccl == {"missing": "not_applicable", "detail": "this torch build has no NCCL"}, nccl
    assert (
        "torch's NCCL: not applicable: this torch build has no NCCL"
        in run_cli("show", str(out), env={"COLUMNS": "200"}).stdout
    )
