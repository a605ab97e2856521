"""``forensics bench compare``: exit codes, output, and bad bench files (one line, exit 2)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from forensics.bench import document
from forensics.cli import main
from forensics.cli.common import parse_threshold
from forensics.errors import BadInputError

BASE = [7.8177, 7.8498, 7.8452, 7.8683, 7.8861, 7.8520]


def write(tmp_path, name, values, **kw):
    doc = document.build(
        {"kind": "canary", "device": "cuda", "tp": 2},
        [document.make_result("canary.verify_step_ms", "canary", "ms", values)],
        telemetry={"missing": "not_found", "detail": "test"},
        **kw,
    )
    path = tmp_path / name
    document.save(doc, path)
    return path


def run(*args):
    return CliRunner().invoke(main, ["bench", "compare", *map(str, args)])


def test_same_exits_0(tmp_path):
    a = write(tmp_path, "a.json", BASE)
    b = write(tmp_path, "b.json", [v * 1.001 for v in reversed(BASE)])
    r = run(a, b)
    assert r.exit_code == 0, r.output
    assert "canary.verify_step_ms: same" in r.output


def test_slower_exits_1(tmp_path):
    a = write(tmp_path, "a.json", BASE)
    b = write(tmp_path, "b.json", [v * 1.10 for v in BASE])
    r = run(a, b)
    assert r.exit_code == 1, r.output
    assert "slower" in r.output and "+10.0%" in r.output


def test_threshold_option_changes_the_verdict(tmp_path):
    a = write(tmp_path, "a.json", BASE)
    b = write(tmp_path, "b.json", [v * 1.10 for v in BASE])
    r = run(a, b, "--threshold", "20%")
    # a real 10% change under a 20% threshold: a small real change (issue 13: never "same"); the threshold
    # still gates the exit code
    assert r.exit_code == 0, r.output
    assert "canary.verify_step_ms: small-slower" in r.output
    assert "a small real change: 1.100x slower" in r.output


def test_inconclusive_exits_3_and_json(tmp_path):
    a = write(tmp_path, "a.json", BASE[:2])
    b = write(tmp_path, "b.json", [v * 1.10 for v in BASE[:2]])
    r = run(a, b, "--json")
    assert r.exit_code == 3
    out = json.loads(r.output)
    assert out["verdict"] == "inconclusive"
    assert "too few processes" in out["results"]["canary.verify_step_ms"]["reasons"][0]


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such file"),
        ("", "file is empty"),
        ('{"schema": "forensics.bench/1", "results": [', "invalid JSON"),
        (
            '{"schema": "forensics.snapshot/1", "probes": {}}',
            "wrong kind of file, not a bench file: a snapshot",
        ),
        ('{"schema": "forensics.bench/9", "results": []}', "newer than this forensics"),
        ('{"schema": "forensics.bench/1", "results": []}', "'results' must be a non-empty list"),
        (
            '{"schema": "forensics.bench/1", "results": [{"name": "x", "process_medians": [1.0, -2]}]}',
            "a list of positive numbers",
        ),
    ],
)
def test_bad_bench_files_give_one_line_and_exit_2(tmp_path, content, message):
    good = write(tmp_path, "good.json", BASE)
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    r = CliRunner().invoke(main, ["bench", "compare", str(bad), str(good)])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("forensics: error: ") and message in lines[0], (
        r.output
    )
    assert "Traceback" not in r.output


def test_threshold_parsing():
    assert parse_threshold("5%") == pytest.approx(0.05)
    assert parse_threshold("0.05") == pytest.approx(0.05)
    assert parse_threshold("5") == pytest.approx(0.05)
    with pytest.raises(BadInputError, match="expected a percentage"):
        parse_threshold("five")
    with pytest.raises(BadInputError, match="between 0% and 100%"):
        parse_threshold("0%")


def test_bad_threshold_exits_2(tmp_path):
    a = write(tmp_path, "a.json", BASE)
    r = run(a, a, "--threshold", "lots")
    assert r.exit_code == 2 and "--threshold 'lots'" in r.output


def test_yaml_bench_file_loads(tmp_path):
    a = write(tmp_path, "a.yaml", BASE)
    assert document.load(a)["results"][0]["process_medians"] == BASE


def test_a_step_run_and_a_canary_run_say_what_each_measured(tmp_path):
    """Real H200 bench files: a run of the user's step against a canary run said only 'cannot compare a
    user run with a canary run'; two steps printing different metrics, 'share no result name'."""
    from tests.conftest import EXAMPLES

    step, canary = (
        EXAMPLES / "bench-cli" / "h200" / "step-a.json",
        EXAMPLES / "bench-cli" / "h200" / "canary.json",
    )
    r = run(step, canary)
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1
    assert "A measured your own step (user." in r.output and "and B the canary (canary." in r.output
    assert "compare two runs of one kind" in r.output
    other = json.loads(step.read_text())
    other["results"][0]["name"] = "user.other_ms"
    (tmp_path / "other.json").write_text(json.dumps(other))
    r = run(step, tmp_path / "other.json")
    assert r.exit_code == 2, r.output
    assert "share no result name (A: user." in r.output and "B: user.other_ms" in r.output
    assert "(--metric NAME)" in r.output


def test_the_first_line_is_the_verdict(tmp_path):
    # the table came first, after a blank line: the answer was the sixth line
    a = write(tmp_path, "a.json", BASE)
    b = write(tmp_path, "b.json", [v * 1.10 for v in BASE])
    r = run(a, b)
    assert r.exit_code == 1, r.output
    assert r.output.splitlines()[0].startswith("canary.verify_step_ms: slower - ")
