"""The user's step: ``--cmd`` (JSON lines, --metric-regex) and ``--callable``, and their errors."""

from __future__ import annotations

import json
import shlex
import sys

from click.testing import CliRunner

from forensics.bench import document
from forensics.cli import main


def py(code: str) -> str:
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def bench(*args, env=None):
    return CliRunner().invoke(main, ["bench", "-q", "--processes", "3", *args], env=env)


def test_cmd_json_lines_make_a_bench_file(tmp_path):
    step = py(
        'import json\nfor v in (30.0, 19.3, 19.5, 19.4): print(json.dumps({"metric": "verify_ms", "value": v}))'
    )
    out = tmp_path / "user.json"
    r = bench("--cmd", step, "-o", str(out))
    assert r.exit_code == 0, r.output
    doc = document.load(out)
    res = doc["results"][0]
    assert res["name"] == "user.verify_ms" and res["kind"] == "user" and res["unit"] == "ms"
    assert res["process_medians"] == [
        19.4,
        19.4,
        19.4,
    ]  # the first value of each process is warm-up
    assert doc["config"]["kind"] == "user"


def test_cmd_metric_regex_and_higher_is_better(tmp_path):
    step = py(
        'print("step 1: 510.0 tok/s"); print("step 2: 500.5 tok/s"); print("step 3: 499.5 tok/s")'
    )
    out = tmp_path / "tps.json"
    r = bench(
        "--cmd",
        step,
        "--metric-regex",
        r"(\d+\.\d+) tok/s",
        "--metric",
        "tok_s",
        "--higher-is-better",
        "--unit",
        "tok/s",
        "-o",
        str(out),
    )
    assert r.exit_code == 0, r.output
    res = document.load(out)["results"][0]
    assert res["higher_is_better"] is True and res["unit"] == "tok/s" and res["median"] == 500.0


def test_failing_command_is_one_line_exit_2():
    r = bench("--cmd", py('import sys; sys.stderr.write("CUDA out of memory\\n"); sys.exit(3)'))
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1
    assert "step command exited with status 3" in lines[0] and "CUDA out of memory" in lines[0]


def test_command_without_metric_is_one_line_exit_2():
    r = bench("--cmd", py('print("done in 19 ms")'))
    assert r.exit_code == 2
    assert r.output.count("\n") == 1
    assert 'printed no JSON line like {"metric": "step_ms", "value": 19.3}' in r.output


def test_regex_without_group_is_rejected():
    r = bench("--cmd", py('print("19 ms")'), "--metric-regex", r"\d+ ms")
    assert r.exit_code == 2 and "needs a group around the number" in r.output


def test_callable_timed_in_process(tmp_path, monkeypatch):
    (tmp_path / "mystep.py").write_text("def step():\n    return sum(range(2000))\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    out = tmp_path / "call.json"
    r = bench("--callable", "mystep:step", "--blocks", "5", "--block-ms", "1", "-o", str(out))
    assert r.exit_code == 0, r.output
    res = document.load(out)["results"][0]
    assert res["name"] == "user.mystep:step" and len(res["process_medians"]) == 3


def test_callable_errors_are_one_line(tmp_path, monkeypatch):
    (tmp_path / "badstep.py").write_text(
        "def step():\n    raise RuntimeError('NCCL error: unhandled')\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    r = bench("--callable", "badstep:step")
    assert (
        r.exit_code == 2 and "the function raised RuntimeError: NCCL error: unhandled" in r.output
    )
    r = bench("--callable", "nosuchmodule_xyz:step")
    assert r.exit_code == 2 and "cannot import nosuchmodule_xyz" in r.output
    r = bench("--callable", "not a target")
    assert r.exit_code == 2 and "expected package.module:function" in r.output


def test_cmd_and_callable_exclude_each_other():
    r = bench("--cmd", "true", "--callable", "a:b")
    assert r.exit_code == 2 and "either --cmd or --callable" in r.output


def test_b_env_needs_b_output():
    r = bench("--b-env", "NCCL_P2P_DISABLE=1", "--device", "cpu")
    assert r.exit_code == 2 and "--b-output" in r.output
    r = bench("--env", "NOEQUALS", "--device", "cpu")
    assert r.exit_code == 2 and "expected NAME=VALUE" in r.output


def test_b_output_alone_or_on_side_a_is_refused_before_any_run(tmp_path):
    """--b-output without a side B was ignored (its file never written, exit 0); -o and --b-output naming
    one file wrote side B over side A."""
    ran = tmp_path / "ran"
    step = py(f'open({str(ran)!r}, "a").write("x"); print(\'{{"metric": "ms", "value": 2.0}}\')')
    b = tmp_path / "b.json"
    r = CliRunner().invoke(
        main, ["bench", "-q", "--processes", "3", "--cmd", step, "--b-output", str(b)]
    )
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1 and "no side B was asked for" in r.output
    assert "--b-env, --b-unset or --b-cmd" in r.output
    link = tmp_path / "link.json"
    link.symlink_to(b)
    for a_path, b_path in ((b, b), (tmp_path / "sub" / ".." / "b.json", b), (b, link)):
        (tmp_path / "sub").mkdir(exist_ok=True)
        r = bench("--cmd", step, "--b-env", "X=1", "-o", str(a_path), "--b-output", str(b_path))
        assert r.exit_code == 2, r.output
        assert "are the same file: side B would overwrite side A" in r.output
    assert not ran.exists() and not b.exists()  # refused before any process ran


def test_bench_file_is_json(tmp_path):
    step = py('print(\'{"metric": "ms", "value": 2.0}\')')
    out = tmp_path / "x.json"
    assert bench("--cmd", step, "-o", str(out)).exit_code == 0
    assert json.loads(out.read_text())["schema"] == "forensics.bench/1"


def test_sides_alternate_which_runs_first(tmp_path):
    # A B A B measured B always right after A: on the power-capped H200 a step read 0.3% slower against itself
    from forensics.bench.harness import balanced_order
    from forensics.bench.user import run_user_ab

    assert [balanced_order(["A", "B"], i) for i in range(4)] == [
        ["A", "B"],
        ["B", "A"],
        ["A", "B"],
        ["B", "A"],
    ]
    log = tmp_path / "order.txt"
    step = (
        f"{sys.executable} -c \"import json, os; open({str(log)!r}, 'a').write(os.environ['SIDE']); "
        "[print(json.dumps({'metric': 'step_ms', 'value': 1.0})) for _ in range(3)]\""
    )
    a, b = run_user_ab(
        step, step, a_env={"SIDE": "A"}, b_env={"SIDE": "B"}, processes=4, budget_s=60, timeout_s=30
    )
    assert log.read_text() == "ABBAABBA" and len(a) == len(b) == 4


def test_quiet_a_b_prints_the_summary_lines_and_one_verdict_line_only(tmp_path):
    step = py(
        'import json\nfor v in (30.0, 19.3, 19.5, 19.4): print(json.dumps({"metric": "step_ms", "value": v}))'
    )
    r = bench(
        "--cmd",
        step,
        "--b-env",
        "X=1",
        "--processes",
        "5",
        "-o",
        str(tmp_path / "a.json"),
        "--b-output",
        str(tmp_path / "b.json"),
    )
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 0, r.output
    assert lines[-1].startswith("user.step_ms: same - ") and len(lines) == 3, (
        r.output
    )  # A's, B's summary, verdict
    assert "noise floor" not in r.output and "telemetry" not in r.output


SECONDS_STEP = 'import json\nfor v in (0.5, 0.25, 0.25, 0.25): print(json.dumps({"metric": "step_s", "value": v}))'


def test_a_step_timed_in_seconds_is_reported_in_seconds(tmp_path):
    """A step printing ``step_s`` is in seconds unless --unit says otherwise (as investigate reads it): the
    table, the summary line and the bench files said 'ms' ('user.step_s 0.25 ms')."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    r = CliRunner().invoke(
        main, ["bench", "--processes", "3", "--cmd", py(SECONDS_STEP), "-o", str(a)]
    )
    assert r.exit_code == 0, r.output
    assert "user.step_s 0.25 s (median of 3 processes" in r.output
    assert " ms" not in r.output
    assert document.load(a)["results"][0]["unit"] == "s"
    # side A and B in one run (A B B A), then compared: both files in seconds
    r = bench("--cmd", py(SECONDS_STEP), "--b-env", "X=1", "-o", str(a), "--b-output", str(b))
    assert r.exit_code == 0, r.output
    assert r.output.count("user.step_s 0.25 s (median of 3 processes") == 2, r.output
    assert [document.load(p)["results"][0]["unit"] for p in (a, b)] == ["s", "s"]
    r = CliRunner().invoke(main, ["bench", "compare", str(a), str(b)])
    assert r.exit_code == 0 and "user.step_s: same" in r.output and " ms" not in r.output, r.output
    # the user's own --unit is kept, and a name without a unit is still in ms
    r = bench("--cmd", py(SECONDS_STEP), "--unit", "ms", "-o", str(a))
    assert r.exit_code == 0 and "user.step_s 0.25 ms" in r.output, r.output
    plain = SECONDS_STEP.replace("step_s", "step")
    r = bench("--cmd", py(plain), "-o", str(a))
    assert r.exit_code == 0 and "user.step 0.25 ms" in r.output, r.output


def test_a_step_in_seconds_beside_the_canary_is_in_seconds(tmp_path):
    """``snapshot --bench --bench-cmd``: the user's step is added to the canary's document, its unit from
    the metric's name too (the canary itself is not run here)."""
    from forensics.bench import _add_user_step

    doc = {"results": [], "config": {}, "summary": "canary.verify_step_ms 4.1 ms"}
    _add_user_step(doc, {"cmd": py(SECONDS_STEP)}, 3, 60.0)
    assert doc["results"][0]["unit"] == "s"
    assert doc["summary"].endswith("; user.step_s 0.25 s")


def test_one_process_is_said_in_the_singular(tmp_path):
    """--processes 1 printed 'median of 1 processes'."""
    r = CliRunner().invoke(
        main,
        [
            "bench",
            "-q",
            "--processes",
            "1",
            "--cmd",
            py('print(\'{"metric": "ms", "value": 2.0}\')'),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "user.ms 2 ms (median of 1 process, noise IQR/median 0.0%)" in r.output


def test_a_value_that_is_not_a_number_is_named():
    """A JSON line whose value is true said 'printed no JSON line like {"metric": ...}', though it printed
    one; null, NaN and Infinity were already named."""
    for raw, said in (
        ("true", "value true is not a number"),
        ("null", "value null is not a number"),
    ):
        r = bench("--cmd", py(f'print(\'{{"metric": "x_ms", "value": {raw}}}\')'))
        assert r.exit_code == 2, r.output
        assert r.output.count("\n") == 1
        assert f"printed no usable measurement (its JSON line's {said}" in r.output


def test_a_callable_that_prints_without_ending_its_line_is_still_timed(tmp_path, monkeypatch):
    """A function printing progress with end="" had the timing worker's JSON line appended to its own
    ("progress...{"per_call_ms": ...}"): 'the timing process printed no result', and bisect --callable's
    per-block lines were read as no measurement."""
    from forensics.bench.user import run_callable_process
    from forensics.step.command import run_command

    (tmp_path / "chatty.py").write_text(
        "def step():\n    print('progress...', end='')\n    return sum(range(2000))\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    rec = run_callable_process("chatty:step", blocks=3, block_ms=1, warmup_s=0.01, timeout_s=60)
    assert rec["value"] > 0 and len(rec["per_call_ms"]) == 3
    worker = f"{sys.executable} -m forensics.step.callable chatty:step --blocks 3 --warmup-s 0.01"
    run = run_command(worker, cwd=str(tmp_path))
    assert run.metric == "call_ms" and len(run.values) == 3


def test_a_process_past_its_own_limit_says_a_longer_bench_timeout_does_not_help(monkeypatch):
    """A process past the 300 s each one has read 'step command timed out after 300 s' to a user who had
    given --bench-timeout 1h, with nothing saying that limit is each process's own, which a longer
    --bench-timeout does not change."""
    import forensics.bench as bench_pkg

    monkeypatch.setattr(bench_pkg, "SNAPSHOT_STEP_TIMEOUT_S", 0.3)
    doc = {"results": [], "config": {}, "summary": "canary.verify_step_ms 4.1 ms"}
    bench_pkg._add_user_step(doc, {"cmd": "sleep 5", "step_limit_s": 3600.0}, 3, 60.0)
    assert doc["config"]["user_step"]["failed"] == (
        "step command timed out after 0.3 s (its processes were stopped): sleep 5; each process may run "
        "0.3 s, whatever --bench-timeout gives all of them together (forensics bench --cmd takes a longer "
        "--timeout)"
    )


def test_a_value_too_large_for_a_bench_file_is_refused_when_the_step_runs(tmp_path):
    """A step printing 1e308 ms was measured and written (exit 0), and bench compare then refused the very
    file: "result 'user.step_ms' needs 'process_medians', a list of positive numbers"."""
    step = py(
        'import json\nfor _ in range(4): print(json.dumps({"metric": "step_ms", "value": 1e308}))'
    )
    out = tmp_path / "a.json"
    r = bench("--cmd", step, "--processes", "3", "-o", str(out))
    assert r.exit_code == 2 and not out.exists(), r.output
    assert (
        f"step command printed a value of 1e+308 for 'step_ms', no measurement (at most 1e+300): {step}"
        in r.output
    )


def test_bench_says_its_figure_and_an_ab_its_verdict_first(tmp_path):
    # the results table came first; with a side B, the verdict came after both sides' tables (line 26)
    step = py(
        "import json, os\n"
        "v = 2.0 if os.environ.get('SIDE') == 'B' else 1.0\n"
        'for _ in range(3): print(json.dumps({"metric": "step_ms", "value": v}))'
    )
    args = ["bench", "--processes", "5", "--cmd", step, "-o", str(tmp_path / "a.json")]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert (
        r.stdout.splitlines()[0]
        == "user.step_ms 1 ms (median of 5 processes, noise IQR/median 0.0%)"
    )
    r = CliRunner().invoke(
        main, [*args, "--b-env", "SIDE=B", "--b-output", str(tmp_path / "b.json")]
    )
    assert r.exit_code == 1, r.output
    assert r.stdout.splitlines()[0].startswith("user.step_ms: slower - ")
    assert "A: user.step_ms 1 ms (median of 5 processes" in r.output
    assert "B: user.step_ms 2 ms (median of 5 processes" in r.output
