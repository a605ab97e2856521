"""Defects a fresh-user pass found beyond issue 16, each through what a user sees (letters follow the pass's list)."""

from __future__ import annotations

import copy
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

EXAMPLES = ROOT / "examples"
PULL_B, PULL_A = EXAMPLES / "silent-pull" / "before.json", EXAMPLES / "silent-pull" / "after.json"
AA_B, AA_A = EXAMPLES / "aa" / "before.json", EXAMPLES / "aa" / "after.json"


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


# -- E: a file path holding a secret-looking word is not a "name: value" to redact -------------------------------


def test_error_lines_keep_a_path_named_like_a_secret(tmp_path):
    (tmp_path / "passwd").write_text("")
    (tmp_path / "api_key.json").write_text("")
    (tmp_path / "token").mkdir()
    r = run_cli("snapshot", "--repo", str(tmp_path / "passwd"), "-o", str(tmp_path / "s.json"))
    assert r.returncode == 2 and f"--repo {tmp_path / 'passwd'}: is a file" in r.stderr, r.stderr
    r = run_cli("show", str(tmp_path / "api_key.json"))
    assert r.returncode == 2 and f"{tmp_path / 'api_key.json'}: file is empty" in r.stderr, r.stderr
    r = run_cli("show", "api_key.json", cwd=tmp_path)  # a bare name as typed
    assert r.returncode == 2 and "api_key.json: file is empty" in r.stderr, r.stderr
    r = run_cli("diff", str(tmp_path / "token"), str(PULL_A))
    assert r.returncode == 2 and f"{tmp_path / 'token'}: is a folder" in r.stderr, r.stderr
    assert "<redacted>" not in r.stderr


def test_a_secret_in_an_error_line_is_still_redacted(tmp_path):
    r = run_cli(
        "bench",
        "--cmd",
        "python step.py --token abcdef123secret",
        "-o",
        str(tmp_path / "no" / "b.json"),
    )
    assert r.returncode == 2
    assert "abcdef123secret" not in r.stderr


# -- F: outputs honour the umask; a replaced file keeps its mode --------------------------------------------------


def test_outputs_honour_the_umask_and_keep_an_existing_mode(tmp_path):
    code = (
        "import os, sys; os.umask(0o022); sys.argv[1:] = ['diff', %r, %r, '-o', %r]; "
        "from forensics.cli import run; run()"
    )
    new = tmp_path / "new.md"
    r = subprocess.run(
        [sys.executable, "-c", code % (str(PULL_B), str(PULL_A), str(new))],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(new.stat().st_mode) == 0o644
    old = tmp_path / "old.md"
    old.write_text("x")
    os.chmod(old, 0o640)
    r = subprocess.run(
        [sys.executable, "-c", code % (str(PULL_B), str(PULL_A), str(old))],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(old.stat().st_mode) == 0o640 and old.read_text() != "x"


# -- G: a closed output pipe is exit 141, never 1 ("regression found") --------------------------------------------


@pytest.mark.parametrize("args", [("diff", str(PULL_B), str(PULL_A)), ("show", str(PULL_B))])
def test_a_closed_pipe_is_not_a_regression(args):
    read_end, write_end = os.pipe()
    os.close(
        read_end
    )  # the reader is gone before the first line (head -1 after its line, deterministically)
    try:
        r = subprocess.run(
            [sys.executable, "-m", "forensics", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(write_end)
    err = r.stderr.decode()
    assert r.returncode == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err


# -- B: a YAML snapshot cut short still parses; it is refused as truncated ------------------------------------------


def _as_yaml(src: Path, dest: Path) -> Path:
    from forensics import docfile

    return docfile.save(_load(src), dest)  # what `snapshot -o s.yaml` writes


@pytest.mark.parametrize("keep", [130, -1])
def test_a_truncated_yaml_snapshot_is_refused(tmp_path, keep):
    full = _as_yaml(PULL_B, tmp_path / "s.yaml")
    lines = full.read_text().splitlines(keepends=True)
    cut = tmp_path / "t.yaml"
    cut.write_text("".join(lines[:keep]))
    r = run_cli("diff", str(full), str(cut))
    assert r.returncode == 2, r.stdout
    assert r.stderr.strip() == (
        f"forensics: error: {cut}: ends before 'redactions', the last field forensics writes; "
        "the file looks truncated; copy it again or take the snapshot again"
    )
    assert run_cli("show", str(cut)).returncode == 2
    assert run_cli("diff", str(full), str(full)).returncode == 0


# -- C: a self-referencing YAML alias is refused on load (no RecursionError, exit 2) ----------------------------------


@pytest.mark.parametrize("text", ["probes: &a\n  x: *a\n", "probes: {}\nlabel: &a [*a]\n"])
def test_a_self_referencing_yaml_alias_is_refused(tmp_path, text):
    f = tmp_path / "self.yaml"
    f.write_text("schema: forensics.snapshot/1\n" + text)
    r = run_cli("diff", str(f), str(f))
    assert r.returncode == 2 and "YAML alias *a refused at line 3" in r.stderr, r.stderr


# -- D: the ledger's evidence grows linearly with the number of changed fields ---------------------------------------


class _CountingStr(str):
    compared = 0

    def __eq__(self, other):
        _CountingStr.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_evidence_of_many_changed_packages_is_deduplicated_without_pairwise_comparison():
    """20,000 added packages took 3 s, 80,000 took 71 s: each evidence line was compared with every earlier one."""
    from forensics.diff.evidence import Scored
    from forensics.diff.ledger import _build
    from forensics.model import Severity, implicated

    lines = [_CountingStr(f"pkg{i}: absent -> 1.0") for i in range(3000)]
    f = implicated(
        "python.packages", Severity.LOW, "3000 other packages changed", lines + lines[:10]
    )
    _CountingStr.compared = 0
    hyp = _build("python.packages", [f], Scored(1.0, [], {}))
    assert hyp.evidence == ["3000 other packages changed", *lines]
    assert _CountingStr.compared < 3 * len(lines)  # was about 4.5 million (n**2 / 2)


# -- A: each probe's fields are checked against the types it declares --------------------------------------------


def _gpu0(doc: dict) -> dict:
    return next(iter(doc["probes"]["gpu"]["data"]["gpus"].values()))


def _set_power(value):
    return lambda d: _gpu0(d)["power"].__setitem__("enforced_limit_mw", value)


WRONG_TYPES = {
    "gpus a string": (
        lambda d: d["probes"]["gpu"]["data"].__setitem__("gpus", "x"),
        "probes.gpu.data.gpus is 'x', expected a mapping",
    ),
    "gpus a list": (
        lambda d: d["probes"]["gpu"]["data"].__setitem__("gpus", [1, 2]),
        "probes.gpu.data.gpus is a list, expected a mapping",
    ),
    "one GPU a string": (
        lambda d: d["probes"]["gpu"]["data"]["gpus"].__setitem__(
            next(iter(d["probes"]["gpu"]["data"]["gpus"])), "x"
        ),
        "is 'x', expected a mapping",
    ),
    "power a word": (_set_power("fast"), "power.enforced_limit_mw is 'fast', expected a number"),
    "power true": (_set_power(True), "power.enforced_limit_mw is True, expected a number"),
    "power null": (_set_power(None), "power.enforced_limit_mw is null, expected a number"),
    "power a list": (_set_power([1]), "power.enforced_limit_mw is a list, expected a number"),
    "host cpu a string": (
        lambda d: d["probes"]["host"]["data"].__setitem__("cpu", "x"),
        "probes.host.data.cpu is 'x', expected a mapping",
    ),
    "git repos a string": (
        lambda d: d["probes"]["git"]["data"].__setitem__("repos", "x"),
        "probes.git.data.repos is 'x', expected a list",
    ),
    "packages a list": (
        lambda d: d["probes"]["software"]["data"].__setitem__("packages", ["a"]),
        "probes.software.data.packages is a list, expected a mapping",
    ),
    "package version a number": (
        lambda d: d["probes"]["software"]["data"]["packages"].__setitem__("torch", 5),
        "probes.software.data.packages.torch is 5, expected a string",
    ),
}


@pytest.mark.parametrize("case", list(WRONG_TYPES))
def test_a_field_of_the_wrong_type_refuses_the_file(tmp_path, case):
    """Each of these gave a made-up cause with exit 0 ("gpu.health: GPU 0 absent after (fell off the bus?)",
    "gpu.config: 700 W -> nan W", python.packages) or an internal exception in a note."""
    mutate, expected = WRONG_TYPES[case]
    doc = _load(PULL_B)
    mutate(doc)
    bad = _write(tmp_path / "bad.json", doc)
    for args in (("diff", str(bad), str(PULL_B)), ("show", str(bad))):
        r = run_cli(*args)
        assert r.returncode == 2, (args, r.stdout)
        lines = r.stderr.strip().splitlines()
        assert (
            len(lines) == 1
            and lines[0].startswith(f"forensics: error: {bad}: ")
            and expected in lines[0]
        ), r.stderr


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), -5, 10**400], ids=["nan", "inf", "negative", "1e400"]
)
def test_an_impossible_power_reading_makes_gpu_config_inconclusive(tmp_path, value):
    doc = _load(PULL_B)
    _gpu0(doc)["power"]["enforced_limit_mw"] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))  # NaN and Infinity as JSON's lenient literals
    report = tmp_path / "r.json"
    r = run_cli("diff", str(bad), str(PULL_B), "-o", str(report))
    assert r.returncode == 0, r.stderr
    assert (
        "gpu.config" not in r.stdout.splitlines()[0]
    )  # was "Most likely cause: gpu.config (... 700 W -> nan W)"
    out = json.loads(report.read_text())
    hyp = next(h for h in out["hypotheses"] if h["id"] == "gpu.config")
    assert hyp["status"] == "inconclusive" and hyp["summary"].startswith(
        "malformed value (BEFORE gpus."
    ), hyp
    assert any("power.enforced_limit_mw: malformed value" in n for n in out["notes"]), out["notes"]
    assert r.returncode == 0 and run_cli("show", str(bad)).returncode == 0


def test_a_failing_third_party_judge_is_a_plain_note_and_its_hypotheses_inconclusive(monkeypatch):
    from forensics.diff import ledger
    from forensics.probe import Probe

    class Crashy(Probe):
        name = "crashy"
        description = "a probe whose judge breaks"
        hypotheses = ("host.cpu",)

        def judge(self, before, after, jctx=None):
            return before.data["nothing"]["here"]

    real = ledger._probe
    monkeypatch.setattr(ledger, "_probe", lambda n: Crashy() if n == "crashy" else real(n))
    monkeypatch.delenv("FORENSICS_DEBUG", raising=False)
    b, a = _load(AA_B), _load(AA_A)
    for doc in (b, a):
        doc["probes"]["crashy"] = {
            "status": "ok",
            "duration_s": 0.0,
            "data": {"x": 1},
            "errors": [],
        }
    result = ledger.analyse(b, a)
    note = next(n for n in result.notes if "crashy" in n)
    assert note == (
        "probe 'crashy' could not judge these snapshots (a fault in the probe, or data it does not "
        "expect); its hypotheses are inconclusive; FORENSICS_DEBUG=1 shows the error"
    )
    assert "KeyError" not in " ".join(result.notes)


# -- K: a signal right after a canary rank is forked still stops that rank -----------------------------------------


def test_a_signal_between_starting_a_rank_and_recording_it_still_stops_the_rank():
    """The flaky SIGTERM test of test_process_hygiene: under load the signal could land while the next
    process's rank was being started, after the fork but before the rank was recorded for the clean-up,
    and that rank outlived forensics. Here the signal lands exactly there, every time (in a fresh
    process, as the CLI gets it)."""
    import psutil

    code = textwrap.dedent("""
        import os, signal, subprocess as sp, sys
        from forensics.bench import harness
        from forensics.bench.config import CanaryConfig
        from forensics.cli.common import Terminated, signals_raise
        real_popen = sp.Popen
        started = []
        def popen_then_sigterm(*args, **kwargs):
            p = real_popen(["sleep", "60"], start_new_session=True, stdout=sp.DEVNULL, stderr=kwargs.get("stderr"))
            started.append(p)
            print(p.pid, flush=True)
            os.kill(os.getpid(), signal.SIGTERM)  # between the fork and the rank being recorded
            return p
        harness.subprocess.Popen = popen_then_sigterm
        try:
            with signals_raise():
                harness.launch(CanaryConfig(), timeout_s=30)
        except Terminated:
            print("terminated", flush=True)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = r.stdout.split()
    assert lines and lines[-1] == "terminated", r.stdout + r.stderr
    pid = int(lines[0])
    alive = psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    if alive:
        os.kill(pid, 9)
    assert not alive, "the rank outlived the signal"


# -- J: small things a new user meets -------------------------------------------------------------------------------


@pytest.mark.parametrize("example", ["aa", "busy-gpu", "nccl-lost", "silent-pull"])
def test_a_snapshot_compared_with_itself_is_the_same_everywhere(example):
    """`diff X X --fail-on any` exited 3: component.d2h_gbps was inconclusive on identical measurements."""
    snap = EXAMPLES / example / "before.json"
    r = run_cli("diff", str(snap), str(snap), "--fail-on", "any", "-o", os.devnull)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "inconclusive: component" not in r.stdout and "inconclusive: canary" not in r.stdout


def _git_repo(root: Path) -> Path:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="T",
        GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="T",
        GIT_COMMITTER_EMAIL="t@example.invalid",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_SYSTEM=os.devnull,
    )
    repo = root / "model"
    repo.mkdir()
    for args in (
        ["init", "-q", "-b", "main"],
        ["commit", "-q", "--allow-empty", "-m", "one"],
        ["commit", "-q", "--allow-empty", "-m", "two"],
    ):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    return repo


def test_bisect_names_a_tree_as_not_a_commit(tmp_path):
    repo = _git_repo(tmp_path)
    r = run_cli(
        "bisect", "--repo", str(repo), "--good", "HEAD^{tree}", "--bad", "HEAD", "--cmd", "true"
    )
    assert r.returncode == 2
    assert "--good HEAD^{tree}: names a tree, not a commit" in r.stderr, r.stderr


def test_a_nan_measurement_is_named_as_such(tmp_path):
    step = 'echo \'{"metric": "step_ms", "value": NaN}\''
    r = run_cli(
        "bench", "--cmd", step, "--processes", "5", "-o", str(tmp_path / "b.json"), cwd=tmp_path
    )
    assert r.returncode == 2
    assert "its JSON line's value NaN is not a time" in r.stderr, r.stderr


def test_env_prints_a_skipped_start_method_reason_whole():
    r = run_cli("env", env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("torch_spawn:"))
    assert (
        line
        == "torch_spawn: skipped: it imports torch in a child (1-4 s); runs with --deep, --nccl-init or --launcher"
    )


def test_a_branch_change_on_a_detached_head_does_not_print_none(tmp_path):
    doc = _load(PULL_B)
    after = copy.deepcopy(doc)
    repo = after["probes"]["git"]["data"]["repos"][0]
    repo["branch"], repo["detached"] = None, True
    b, a = _write(tmp_path / "b.json", doc), _write(tmp_path / "a.json", after)
    r = run_cli("diff", str(b), str(a), "-o", str(tmp_path / "r.md"))
    report = (tmp_path / "r.md").read_text()
    assert f"branch {doc['probes']['git']['data']['repos'][0]['branch']} -> (detached)" in report, (
        r.stdout
    )
    assert "-> None" not in report and "-> None" not in r.stdout


def test_a_snapshot_whose_probes_time_out_warns(tmp_path):
    r = run_cli("snapshot", "--timeout", "0.001", "-o", str(tmp_path / "s.json"))
    assert r.returncode in (0, 3), r.stderr
    if r.returncode == 0:
        assert (
            "forensics: warning:" in r.stderr
            and "probes timed out under --timeout 0.001 s" in r.stderr
        )
    else:
        assert "every probe failed" in r.stderr


# -- H: bench files that cannot be compared are refused; malformed telemetry is ignored with a note ----------------

BENCH_A, BENCH_B = (
    EXAMPLES / "h200x2" / "bench" / "a1.json",
    EXAMPLES / "h200x2" / "bench" / "a2.json",
)


@pytest.mark.parametrize(
    "key, value, expected",
    [
        (
            "unit",
            "s",
            'result \'canary.verify_step_ms\': unit is "ms" in A but "s" in B; the two runs are not comparable',
        ),
        (
            "higher_is_better",
            True,
            "result 'canary.verify_step_ms': higher_is_better is false in A but true in B",
        ),
    ],
)
def test_bench_results_measured_differently_are_not_compared(tmp_path, key, value, expected):
    """A in ms against B in s was "same", exit 0, no note."""
    doc = _load(BENCH_B)
    doc["results"][0][key] = value
    r = run_cli("bench", "compare", str(BENCH_A), str(_write(tmp_path / "b.json", doc)))
    assert r.returncode == 2 and expected in r.stderr, r.stdout + r.stderr


def test_a_bench_file_with_a_result_twice_is_refused(tmp_path):
    doc = _load(BENCH_B)
    doc["results"].append(copy.deepcopy(doc["results"][0]))
    bad = _write(tmp_path / "b.json", doc)
    r = run_cli("bench", "compare", str(BENCH_A), str(bad))
    assert r.returncode == 2
    assert f"{bad}: result 'canary.verify_step_ms' appears twice in 'results'" in r.stderr


@pytest.mark.parametrize("gpus", ["x", [1, 2], {"GPU-0": "x"}])
def test_malformed_bench_telemetry_is_ignored_not_read_as_no_throttling(tmp_path, gpus):
    """telemetry.gpus = "x" made up "throttle changed: sw_power_cap 19% -> 0%" and flipped the verdict."""
    good = run_cli("bench", "compare", str(BENCH_A), str(BENCH_B))
    doc = _load(BENCH_B)
    doc["telemetry"]["gpus"] = gpus
    r = run_cli("bench", "compare", str(BENCH_A), str(_write(tmp_path / "b.json", doc)))
    assert r.returncode == good.returncode, r.stdout + r.stderr
    assert "throttle changed" not in r.stdout
    assert "GPU telemetry on B ignored: telemetry.gpus" in r.stdout.replace("\n", " ")


# -- I: a failing --bench-cmd: checked first where it can be, and never costs the snapshot -------------------------


def test_a_bench_cmd_whose_program_does_not_exist_is_refused_before_the_canary(tmp_path):
    out = tmp_path / "s.json"
    r = run_cli(
        "snapshot",
        "--probe",
        "host",
        "--bench",
        "--bench-cmd",
        "no-such-step-program --fast",
        "-o",
        str(out),
    )
    assert r.returncode == 2
    assert r.stderr.strip() == (
        "forensics: error: --bench-cmd: 'no-such-step-program' not found on PATH; check the "
        "command before the benchmark runs"
    )
    assert not out.exists()


def test_a_failing_bench_cmd_keeps_the_snapshot_and_the_canary(tmp_path, monkeypatch):
    """A step that fails leaves the snapshot written with the canary's results. The canary is a real recorded
    run put in its place (a CPU canary costs ~12 s of CPU; tests/bench/test_canary.py runs the real one in a
    snapshot): what is tested is what the failing step leaves."""
    import importlib.util

    from click.testing import CliRunner

    from forensics.bench import session
    from forensics.cli import main

    if importlib.util.find_spec("torch") is None:
        pytest.skip("--bench refuses to start without PyTorch")
    canary = _load(AA_B)["bench"]
    monkeypatch.setattr(session, "run_canary", lambda cfg, **kw: [copy.deepcopy(canary)])
    out = tmp_path / "s.json"
    step = f"{sys.executable} -c 'import sys; sys.exit(3)'"
    r = CliRunner().invoke(
        main,
        ["snapshot", "--probe", "host", "--bench", "--bench-cmd", step, "--bench-processes", "3"]
        + ["-q", "-o", str(out)],
    )
    assert r.exit_code == 2, r.output
    assert "--bench-cmd failed (step command exited with status 3" in r.stderr
    assert f"{out} was written with the canary's results only" in r.stderr
    doc = _load(out)
    assert doc["bench"]["config"]["user_step"]["failed"].startswith(
        "step command exited with status 3"
    )
    assert [x["name"] for x in doc["bench"]["results"]][0] == "canary.verify_step_ms"
    assert run_cli("show", str(out)).returncode == 0


def test_a_bench_cmd_that_hangs_is_stopped_at_bench_timeout_with_its_group_and_the_snapshot_kept(
    tmp_path, monkeypatch
):
    """Each process of the step had 300 s, so a step that hangs held the snapshot 300 s per process; now all
    of them together have --bench-timeout, and the step's whole process group is stopped there. The canary
    (~10 s of CPU) is a real recorded run put in its place: what is tested is the step's bound."""
    import importlib.util

    from click.testing import CliRunner

    from forensics.bench import session
    from forensics.cli import main
    from forensics.procgroup import _alive

    if importlib.util.find_spec("torch") is None:
        pytest.skip("--bench refuses to start without PyTorch")
    canary = _load(AA_B)["bench"]
    monkeypatch.setattr(session, "run_canary", lambda cfg, **kw: [copy.deepcopy(canary)])
    out, kid = tmp_path / "s.json", tmp_path / "kid.pid"
    step = f"sleep 1000 & echo $! > {kid}; wait"  # the shell waits on a child of its own, for ever
    r = CliRunner().invoke(
        main,
        ["snapshot", "--probe", "host", "--bench", "--bench-cmd", step, "--bench-timeout", "1s"]
        + ["--bench-processes", "3", "-q", "-o", str(out)],
    )
    assert r.exit_code == 2, r.output
    assert r.stderr == (
        f"forensics: error: --bench-cmd {step!r} was stopped after 1 s, the time for all its processes "
        "together: its time ran out in process 1 of 3 (0 finished; the process running was stopped with "
        f"its process group); {out} was written with the canary's results only (bench.config.user_step); "
        "give a longer --bench-timeout if the step is slow, or see why it hangs\n"
    )
    assert not _alive(int(kid.read_text())), "the step's child outlived the bound"
    doc = _load(out)
    assert doc["probes"]["host"]["status"] == "ok"
    assert [x["name"] for x in doc["bench"]["results"]][0] == "canary.verify_step_ms"
    user = doc["bench"]["config"]["user_step"]
    assert user["limit_s"] == 1.0 and user["process_medians"] == [] and user["command"] == step


@pytest.mark.parametrize(
    "args, told",
    [
        (
            ["--bench-timeout", "1m"],
            "--bench-cmd, --bench-processes and --bench-timeout go with --bench",
        ),
        (
            ["--bench", "--bench-timeout", "1m"],
            "--bench-timeout bounds your step; give the step with",
        ),
        (
            ["--bench", "--bench-cmd", "true", "--bench-timeout", "soon"],
            "--bench-timeout 'soon': expected seconds or a duration such as 120, 90s, 15m or 1h",
        ),
        # an empty step (--bench-cmd "$STEP", unset) was ignored: the canary ran and the snapshot said
        # nothing of the step; bench --cmd '' and investigate --cmd '' refuse it
        (
            ["--bench", "--bench-cmd", ""],
            "--bench-cmd is empty; give the command that runs your step",
        ),
        (
            ["--bench", "--bench-cmd", " ", "--bench-timeout", "1m"],
            "--bench-cmd is empty; give the command that runs your step",
        ),
        (["--bench-cmd", ""], "--bench-cmd, --bench-processes and --bench-timeout go with --bench"),
    ],
)
def test_a_bench_timeout_that_cannot_work_is_refused_before_any_probe(tmp_path, args, told):
    from click.testing import CliRunner

    from forensics.cli import main

    out = tmp_path / "s.json"
    r = CliRunner().invoke(main, ["snapshot", "--probe", "host", "-o", str(out), *args])
    assert r.exit_code == 2 and r.stderr.startswith(f"forensics: error: {told}"), r.output
    assert r.stderr.count("\n") == 1 and not out.exists()


# -- L: Ctrl-C during snapshot --bench --bench-cmd keeps what was measured ------------------------------------------

_SNAPSHOT_RECORDED_CANARY = """import copy, json, pathlib, sys, time
from forensics.bench import session
recorded, mode, marker = json.loads(pathlib.Path(sys.argv[1]).read_text())["bench"], sys.argv[2], sys.argv[3]
def run_canary(cfg, **kw):
    if mode == "hang":  # the signal comes while the canary runs
        pathlib.Path(marker).write_text("canary\\n")
        time.sleep(600)
    return [copy.deepcopy(recorded)]
session.run_canary = run_canary
from forensics.cli import run
run(sys.argv[4:])
"""
"""``forensics snapshot`` in a process of its own with a real recorded canary run (examples/aa) in place of the
CPU canary, or (``hang``) a canary that waits for the signal after writing ``marker``."""

_COUNTED_STEP = """import json, os, pathlib, time
log = pathlib.Path(os.environ["SNAP_TEST_LOG"])
n = len(log.read_text().splitlines()) if log.exists() else 0
with log.open("a") as f:
    f.write(f"{os.getpid()}\\n")
if n >= 2:
    time.sleep(600)
for _ in range(3):
    print(json.dumps({"metric": "step_ms", "value": 6.0 + n / 10}))
"""
"""A step whose third process hangs (the signal comes then, after two finished; no sleep decides when); each
process writes its pid to ``SNAP_TEST_LOG``."""


def _interrupted_snapshot(
    tmp_path, mode: str, signum: int, ready
) -> tuple[subprocess.Popen, str, str]:
    """Run ``forensics snapshot --probe host --bench --bench-cmd STEP`` (:data:`_SNAPSHOT_RECORDED_CANARY`),
    send ``signum`` to its process group once ``ready()``, and return (process, stdout, stderr)."""
    import signal
    import time

    (tmp_path / "step.py").write_text(_COUNTED_STEP)
    env = dict(os.environ, SNAP_TEST_LOG=str(tmp_path / "step.log"))
    env.pop("FORENSICS_DEBUG", None)
    p = subprocess.Popen(
        [sys.executable, "-c", _SNAPSHOT_RECORDED_CANARY, str(AA_B), mode, str(tmp_path / "canary")]
        + ["snapshot", "--probe", "host", "--bench", "--bench-cmd", f"{sys.executable} step.py"]
        + ["-q", "-o", str(tmp_path / "s.json")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None and not ready():
            time.sleep(0.05)
        os.killpg(p.pid, signum)  # Ctrl-C at a terminal reaches the whole foreground group
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    return p, out, err


@pytest.mark.parametrize("signame, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_ctrl_c_while_the_bench_cmd_runs_writes_the_snapshot_with_the_probes_and_the_canary(
    tmp_path, signame, code
):
    """Found by a hostile-user pass: Ctrl-C during the user's step wrote nothing, so the canary's minute
    and the probes were lost. The snapshot is written with them and the step marked interrupted."""
    import importlib.util
    import signal

    from forensics.procgroup import _alive

    if importlib.util.find_spec("torch") is None:
        pytest.skip("--bench refuses to start without PyTorch")
    log, out = tmp_path / "step.log", tmp_path / "s.json"

    def third_started():
        return log.exists() and len(log.read_text().splitlines()) >= 3

    p, stdout, stderr = _interrupted_snapshot(
        tmp_path, "recorded", getattr(signal, signame), third_started
    )
    assert p.returncode == code, stdout + stderr
    assert stderr == (
        f"forensics: error: interrupted ({signame}) while your step ran; {out} was written with the probes, "
        "the canary's results and the 2 processes of your step that finished (bench.config.user_step)\n"
    )
    assert stdout == f"{out}\n"
    doc = _load(out)
    assert doc["probes"]["host"]["status"] == "ok"
    assert [x["name"] for x in doc["bench"]["results"]] == [
        x["name"] for x in _load(AA_B)["bench"]["results"]
    ]
    assert doc["bench"]["config"]["user_step"] == {
        "command": f"{sys.executable} step.py",
        "interrupted": f"by {signame} in process 3 of 5",
        "processes_finished": 2,
        "process_medians": [6.0, 6.1],
    }
    assert doc["bench"]["config"]["interrupted"] == {
        "signal": getattr(signal, signame),
        "name": signame,
        "during": "your step",
    }
    assert doc["bench"]["summary"].endswith(
        f"; your step was interrupted by {signame} (2 processes of 5 finished)"
    )
    hung = int(log.read_text().splitlines()[2])
    assert not _alive(hung), "the step's process outlived the interrupt"
    assert run_cli("show", str(out)).returncode == 0


def test_ctrl_c_while_the_canary_runs_writes_the_snapshot_with_the_probes(tmp_path):
    import importlib.util
    import signal

    if importlib.util.find_spec("torch") is None:
        pytest.skip("--bench refuses to start without PyTorch")
    out, marker = tmp_path / "s.json", tmp_path / "canary"
    p, stdout, stderr = _interrupted_snapshot(tmp_path, "hang", signal.SIGINT, marker.exists)
    assert p.returncode == 130, stdout + stderr
    assert stderr == (
        f"forensics: error: interrupted (SIGINT) while the canary ran; {out} was written with the probes "
        "only (bench.config.interrupted)\n"
    )
    doc = _load(out)
    assert doc["probes"]["host"]["status"] == "ok"
    bench = doc["bench"]
    assert bench["results"] == [] and not (tmp_path / "step.log").exists()
    assert bench["config"]["interrupted"] == {"signal": 2, "name": "SIGINT", "during": "the canary"}
    assert (
        bench["config"]["user_step"]["interrupted"] == "by SIGINT during the canary, before it ran"
    )
    assert bench["summary"] == "interrupted by SIGINT while the canary ran: nothing was measured"
    shown = run_cli("show", str(out))
    assert shown.returncode == 0 and "interrupted by SIGINT while the canary ran" in shown.stdout
    diff = run_cli("diff", str(AA_B), str(out), "--format", "md", "-o", str(tmp_path / "r.md"))
    assert diff.returncode == 0, diff.stderr  # read as a snapshot without a benchmark measured
    assert "no benchmark result was measured on both sides" in (tmp_path / "r.md").read_text()
