"""Bad input found by trying the tool as a new user would: each ends in one line, the right exit
code, and nothing lost."""

from __future__ import annotations

import json
import shutil
import time

import psutil
import pytest

from forensics import snapshot as snap
from forensics.errors import BadInputError
from forensics.step.command import parse_output, run_command
from tests.conftest import ROOT, run_cli

EXAMPLES = ROOT / "examples"


def _one_line_exit_2(proc):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith("forensics: error:")
        and "Traceback" not in proc.stderr
    )
    return lines[0]


def test_diff_refuses_to_overwrite_an_input(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    shutil.copy(EXAMPLES / "aa" / "before.json", a)
    shutil.copy(EXAMPLES / "aa" / "after.json", b)
    before = a.read_bytes()
    line = _one_line_exit_2(run_cli("diff", str(a), str(b), "-o", str(a), "--format", "json"))
    assert "is one of the input snapshots" in line and a.read_bytes() == before


def test_diff_format_must_match_the_suffix(tmp_path):
    line = _one_line_exit_2(
        run_cli(
            "diff",
            str(EXAMPLES / "aa" / "before.json"),
            str(EXAMPLES / "aa" / "after.json"),
            "-o",
            str(tmp_path / "r.html"),
            "--format",
            "md",
        )
    )
    assert "--format md does not match" in line and not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    "field, value, expected",
    [
        (("probes", "gpu", "status"), ["ok"], "has status ['ok']"),
        (("machine",), "vm", "'machine' must be a mapping"),
        (("redactions",), {"a": "b"}, "'redactions' must be a list"),
        # read as every host value changed to None ('CPU model changed: AMD EPYC -> None')
        (("probes", "host", "data"), None, "probe 'host' has status 'ok' but its 'data' is null"),
        # read as 'Python 3.11.7 -> 3', a GPU-stack package change
        (
            ("probes", "software", "data", "python", "version"),
            3,
            "probes.software.data.python.version is 3, expected a string",
        ),
    ],
)
def test_malformed_snapshot_fields_are_bad_input(tmp_path, field, value, expected):
    doc = json.loads((EXAMPLES / "aa" / "after.json").read_text())
    node = doc
    for k in field[:-1]:
        node = node[k]
    node[field[-1]] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    line = _one_line_exit_2(
        run_cli(
            "diff", str(EXAMPLES / "aa" / "before.json"), str(bad), "-o", str(tmp_path / "r.md")
        )
    )
    assert expected in line


def test_malformed_git_data_degrades_to_a_note():
    from forensics.diff.ledger import analyse
    from forensics.render.report import render

    b = snap.load(EXAMPLES / "silent-pull" / "before.json")
    a = snap.load(EXAMPLES / "silent-pull" / "after.json")
    a["probes"]["git"]["data"]["repos"][0]["reflog"] = 1e308
    an = analyse(b, a)
    assert an.top.id == "code.change"
    assert any("could not be read for the commit list" in n for n in an.notes)
    render(an, "html")


def test_non_finite_and_boolean_values_are_not_measurements():
    out = (
        '{"metric": "x", "value": NaN}\n{"metric": "x", "value": Infinity}\n{"metric": "x", "value": true}\n'
        '{"metric": "x", "value": 3.5}\n'
    )
    assert parse_output(out) == ("x", [3.5])
    assert parse_output("step nan ms\nstep 2.0 ms\n", metric_regex=r"step (\S+) ms")[1] == [2.0]


def test_json_outputs_are_strict(tmp_path):
    path = snap.save(
        {"schema": "forensics.snapshot/1", "probes": {}, "x": float("nan"), "y": float("inf")},
        tmp_path / "s.json",
    )
    doc = json.loads(
        path.read_text(), parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}")
    )
    assert doc["x"] == "NaN" and doc["y"] == "Infinity"


def test_step_timeout_stops_the_whole_step(tmp_path):
    marker = tmp_path / "started"
    cmd = f"python3 -c \"import time, pathlib; pathlib.Path('{marker}').write_text('x'); time.sleep(60)\"; echo done"
    with pytest.raises(BadInputError, match="timed out after 2 s"):
        run_command(cmd, timeout_s=2)
    assert marker.exists()
    time.sleep(0.2)
    left = [
        p
        for p in psutil.process_iter(["cmdline"])
        if str(marker) in " ".join(p.info["cmdline"] or [])
    ]
    assert left == []


@pytest.mark.parametrize(
    "args, expected",
    [
        (["bench", "--processes", "0", "--cmd", "echo"], "--processes must be at least 1"),
        (["bench", "--metric-regex", "x(\\d)"], "give --cmd too"),
        (["bench", "--cmd", " "], "--cmd is empty"),
        (
            ["bench", "--cmd", "echo", "--timeout", "-5"],
            "Invalid value for '--timeout': '-5' must be a finite number > 0",
        ),
        (
            ["bench", "--cmd", "echo", "--budget", "nan"],
            "Invalid value for '--budget': 'nan' must be a finite number > 0",
        ),
        (["snapshot", "--timeout", "inf", "-o", "s.json"], "Invalid value for '--timeout'"),
        (["bench", "--cmd", "echo", "-o", "nodir/x.json"], "does not exist"),
    ],
)
def test_bench_bad_options_before_any_work(tmp_path, args, expected):
    assert expected in _one_line_exit_2(run_cli(*args, cwd=tmp_path))


@pytest.mark.slow
def test_env_with_a_failing_launcher_is_not_ruled_out(tmp_path):
    launcher = tmp_path / "fail.sh"
    launcher.write_text("#!/bin/sh\necho 'launcher broke: no slots' >&2\nexit 1\n")
    launcher.chmod(0o755)
    proc = run_cli(
        "env",
        "--launcher",
        str(launcher),
        "-o",
        str(tmp_path / "e.json"),
        cwd=tmp_path,
        env={"COLUMNS": "250"},
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "e.json").read_text())
    prop = next(f for f in doc["findings"] if f["hypothesis"] == "nccl.env-propagation")
    assert prop["status"] == "inconclusive" and "launcher broke: no slots" in prop["summary"]


def _tiny_repo(tmp_path):
    from tests.conftest import commit, make_repo

    repo = make_repo(
        tmp_path / "repo",
        {"step.py": 'import json\nprint(json.dumps({"metric": "step_ms", "value": 1.0}))\n'},
        "a",
    )
    commit(repo, {}, "b")
    return repo


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--good-was", "0"], "Invalid value for '--good-was': '0' must be a finite number > 0"),
        (
            ["--good-was", "nan"],
            "Invalid value for '--good-was': 'nan' must be a finite number > 0",
        ),
        (["--timeout", "nan"], "Invalid value for '--timeout': 'nan' must be a finite number > 0"),
        (["--threshold", "500%"], "--threshold '500%': must be between 0% and 100%"),
        (["--metric-regex", "("], "--metric-regex '(': not a valid regular expression"),
    ],
)
def test_bisect_bad_options_before_any_measurement(tmp_path, extra, expected):
    """Found by a fresh-user pass: --good-was 0 ended in a ZeroDivisionError (exit 4) after measuring."""
    repo = _tiny_repo(tmp_path)
    proc = run_cli(
        "bisect",
        "--repo",
        str(repo),
        "--good",
        "HEAD~1",
        "--bad",
        "HEAD",
        "--cmd",
        "python3 step.py",
        *extra,
    )
    assert expected in _one_line_exit_2(proc)  # one line: no "endpoints ... re-measuring" before it


_EMPTY_MATCH = (
    "matches the empty string, so every line of the step's output would be a metric line; give a "
    "pattern with a number group, e.g. 'step_ms=([0-9.]+)'"
)


@pytest.mark.parametrize("regex", [".*", r"(\d*)", r"\b(\d*)", ""])
@pytest.mark.parametrize("command", ["bench", "investigate", "bisect"])
def test_a_metric_regex_matching_the_empty_string_is_refused_before_the_step_runs(
    tmp_path, command, regex
):
    """Found by a hostile-user pass: --metric-regex '.*' (or '(\\d*)') kept every line of the step's output
    as a metric line, so the bounded reader held a whole log; '' was ignored (JSON lines read instead)."""
    repo = _tiny_repo(tmp_path)
    ran = tmp_path / "ran"
    step = f"touch {ran}; python3 step.py"
    args = {
        "bench": ["bench", "--processes", "3"],
        "investigate": ["investigate", "--repo", str(repo), "--expect", "20ms"],
        "bisect": ["bisect", "--repo", str(repo), "--good", "HEAD~1", "--bad", "HEAD"],
    }[command]
    proc = run_cli(*args, "--cmd", step, "--metric-regex", regex, cwd=repo)
    line = _one_line_exit_2(proc)
    assert line == f"forensics: error: --metric-regex {regex!r} {_EMPTY_MATCH}"
    assert not ran.exists() and proc.stdout == ""


def test_a_metric_regex_that_matches_empty_only_after_its_label_is_kept():
    from forensics.step.command import compile_metric_regex

    for regex in (r"step_ms=([0-9.]+)", r"(?<=ms=)(\d*)", r"step (\d+\.?\d*) ms"):
        assert compile_metric_regex(regex).pattern == regex
    with pytest.raises(BadInputError, match="needs a group around the number"):
        compile_metric_regex(r"\d+ ms")


def test_threshold_reads_the_same_in_bisect_and_bench_compare():
    from forensics.cli.common import parse_threshold

    assert parse_threshold("5") == parse_threshold("5%") == parse_threshold("0.05")
    # '0.5' meant as 0.5% once silently became 50% (a fresh-user pass): now refused, both readings offered
    with pytest.raises(BadInputError, match=r"--threshold '0.5' is ambiguous: write 0.5% or 50%"):
        parse_threshold("0.5")
    assert parse_threshold("0.5%") == pytest.approx(0.005)


def test_a_probe_duration_beyond_any_float_is_bad_input_not_an_internal_error(tmp_path):
    src = ROOT / "examples" / "aa" / "before.json"  # a real H200 snapshot
    doc = json.loads(src.read_text())
    name = next(iter(doc["probes"]))
    text = src.read_text().replace(
        json.dumps(doc["probes"][name]["duration_s"]), "1" + "0" * 400, 1
    )
    bad = tmp_path / "big.json"
    bad.write_text(text)
    proc = run_cli("show", str(bad))
    assert (
        proc.returncode == 2 and "duration_s" in proc.stderr and "edited or damaged" in proc.stderr
    )
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_bisect_step_usage_error_aborts_git_bisect(tmp_path):
    proc = run_cli(
        "bisect-step",
        "--good",
        "HEAD~1",
        "--bad",
        "HEAD",
        "--cmd",
        "x",
        "--timeout",
        "nan",
        cwd=tmp_path,
    )
    assert (
        proc.returncode == 128 and "Invalid value for '--timeout'" in proc.stderr
    )  # 2 would read as "slow"


@pytest.mark.parametrize("command", ["snapshot", "diff"])
def test_repo_that_is_not_a_git_repository_is_refused(tmp_path, command):
    plain = tmp_path / "plain"
    plain.mkdir()
    if command == "snapshot":
        args = ["snapshot", "--probe", "git", "--repo", str(plain), "-o", str(tmp_path / "s.json")]
    else:
        args = [
            "diff",
            str(EXAMPLES / "aa" / "before.json"),
            str(EXAMPLES / "aa" / "after.json"),
            "--repo",
            str(plain),
            "-o",
            str(tmp_path / "r.md"),
        ]
    line = _one_line_exit_2(run_cli(*args, cwd=tmp_path))
    assert f"--repo {plain}: not a git repository" in line
    assert not (tmp_path / "s.json").exists() and not (tmp_path / "r.md").exists()


def test_messages_name_the_real_problem_and_the_option(tmp_path):
    # a fresh-user pass: "folder afile does not exist" for a file, "choose another -o" for --prom,
    # "not a bench file file", and import of a snapshot called "not an environment report"
    root = ROOT
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    snap_a = str(root / "examples" / "aa" / "before.json")
    cases = [
        (
            ["diff", snap_a, snap_a, "-o", "afile/r.html"],
            "afile is a file, not a folder; choose another --output",
        ),
        (
            [
                "fleet",
                "report",
                str(root / "examples/fleet/h200/fleet.json"),
                "--prom",
                "afile/f.prom",
            ],
            "choose another --prom",
        ),
        (
            [
                "bench",
                "compare",
                "adir",
                str(root / "examples/verdicts/h200-final/step-plus0-a.json"),
            ],
            "adir: is a folder, not a bench file",
        ),
        (["import", snap_a], "already a forensics document, not a pasted text"),
        (["diff", snap_a, snap_a, "--config", "adir"], "--config adir: is a folder"),
    ]
    for argv, expected in cases:
        proc = run_cli(*argv, cwd=tmp_path)
        assert proc.returncode == 2 and expected in proc.stderr, (argv, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "file file" not in proc.stderr


@pytest.mark.parametrize(
    "args, named",
    [
        # the folder's snapshots were read as a fleet and compared, exit 0
        (["diff", "", "after.json"], "'BEFORE'"),
        (["diff", "before.json", "after.json", "-o", ""], "'-o' / '--output'"),
        (["diff", "before.json", "after.json", "--repo", ""], "'--repo'"),
        (["show", ""], "'FILE'"),
        (["fleet", "report", ""], "'SOURCE...'"),  # the folder read as a fleet, exit 0
        (
            ["investigate", "--expect", "20ms", "--cmd", "true", "--wheelhouse", ""],
            "'--wheelhouse'",
        ),
        (["snapshot", "--probe", "host", "-o", ""], "'-o' / '--output'"),
    ],
)
def test_an_empty_path_is_refused_not_read_as_the_current_folder(tmp_path, args, named):
    # 'forensics diff "$BEFORE" after.json' with BEFORE unset: Path('') is '.'
    for side in ("before", "after"):
        shutil.copy(EXAMPLES / "aa" / f"{side}.json", tmp_path / f"{side}.json")
    line = _one_line_exit_2(run_cli(*args, cwd=tmp_path))
    assert f"Invalid value for {named}: '' is empty; give a" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["after.json", "before.json"]


@pytest.mark.parametrize("command", ["bench", "investigate", "bisect"])
def test_an_empty_metric_name_is_refused_before_the_step_runs(tmp_path, command):
    # --metric "$METRIC" with METRIC unset read as no metric asked for: bench ran the step, then said it
    # 'printed no JSON line like ...'; bisect measured with the first metric seen
    repo = _tiny_repo(tmp_path)
    ran = tmp_path / "ran"
    args = {
        "bench": ["bench", "--processes", "3"],
        "investigate": ["investigate", "--repo", str(repo), "--expect", "20ms"],
        "bisect": ["bisect", "--repo", str(repo), "--good", "HEAD~1", "--bad", "HEAD"],
    }[command]
    proc = run_cli(*args, "--cmd", f"touch {ran}; python3 step.py", "--metric", "", cwd=repo)
    assert _one_line_exit_2(proc) == (
        "forensics: error: --metric is empty; give the metric name your step prints (e.g. step_ms), "
        "or leave it out to read the first one seen"
    )
    assert not ran.exists() and proc.stdout == ""


@pytest.mark.parametrize(
    "where, expected",
    [
        ("mirror.git", "a bare repository (nothing checked out for the step to run)"),
        ("repo/.git", "inside the repository's .git folder"),
    ],
)
def test_investigate_refuses_a_repo_with_no_checkout_before_the_step_runs(
    tmp_path, where, expected
):
    # a bare --repo was taken: the step ran in the current folder, and the note said only that the
    # repository 'could not be read (bare)'
    from tests.conftest import git

    repo = _tiny_repo(tmp_path)
    git(tmp_path, "clone", "-q", "--bare", str(repo), "mirror.git")
    ran = tmp_path / "ran"
    proc = run_cli(
        "investigate",
        "--repo",
        str(tmp_path / where),
        "--expect",
        "20ms",
        "--cmd",
        f"touch {ran}; python3 {repo / 'step.py'}",
        cwd=tmp_path,
    )
    assert _one_line_exit_2(proc) == (
        f"forensics: error: --repo {tmp_path / where}: {expected}; give the folder of your clone"
    )
    assert not ran.exists() and not (tmp_path / "forensics-investigate.html").exists()


def test_a_step_failing_on_a_conflict_marker_mid_rebase_says_so(tmp_path):
    # a rebase stopped on a conflict in a module the step imports: the error said only 'SyntaxError: invalid
    # decimal literal'
    import os
    import subprocess

    from tests.conftest import GIT_ENV, commit, git, make_repo

    step = 'import json\nfrom work import COST\nprint(json.dumps({"metric": "step_ms", "value": COST}))\n'
    repo = make_repo(tmp_path / "repo", {"step.py": step, "work.py": "COST = 1.0\n"})
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, {"work.py": "COST = 2.0\n"}, "side")
    git(repo, "checkout", "-q", "main")
    commit(repo, {"work.py": "COST = 3.0\n"}, "main")
    git(repo, "checkout", "-q", "side")
    rebase = subprocess.run(
        ["git", "-c", "core.editor=true", "rebase", "main"],
        cwd=repo,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
    )
    assert rebase.returncode != 0 and "<<<<<<<" in (repo / "work.py").read_text()
    before = (repo / "work.py").read_text()
    line = _one_line_exit_2(
        run_cli("bench", "--processes", "3", "--cmd", "python3 step.py", cwd=repo)
    )
    # Python quotes the line it could not parse: '<<<<<<< HEAD' (line 1), or '>>>>>>> <sha> (side)' (line 5)
    # when the sha begins with a digit (an 'invalid decimal literal')
    import re

    m = re.search(
        rf"; {re.escape(str(repo / 'work.py'))} line (\d+) holds a merge conflict marker \('(.+)'\): "
        r"resolve the conflict first \(git status lists the unmerged files\)$",
        line,
    )
    assert m, line
    assert before.splitlines()[int(m.group(1)) - 1] == m.group(2)
    assert m.group(2).startswith(("<<<<<<< ", ">>>>>>> "))
    assert (repo / "work.py").read_text() == before
