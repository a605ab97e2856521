"""``forensics diff`` on the command line: outputs, exit codes, bad input as one line."""

from __future__ import annotations

import json

import pytest
from _diffkit import CASES, snapshot, write
from click.testing import CliRunner

from forensics.cli import main

CASE13 = CASES / "case13_pull_halves_throughput"


def _run(args):
    return CliRunner().invoke(main, ["diff", *map(str, args)])


def test_default_writes_html_in_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(
        main, ["diff", str(CASE13 / "before.json"), str(CASE13 / "after.json")]
    )
    assert res.exit_code == 0, res.output
    assert (tmp_path / "forensics-report.html").is_file()
    assert "code.change" in res.output and "report: forensics-report.html" in res.output
    assert "fast-forward pull" in res.output


def test_json_to_stdout_and_fail_on(tmp_path):
    res = _run([CASE13 / "before.json", CASE13 / "after.json", "-o", "-", "--format", "json"])
    assert res.exit_code == 0
    doc = json.loads(res.output)
    assert doc["hypotheses"][0]["id"] == "code.change" and doc["bench"]["points_at"] == "code"
    res = _run(
        [
            CASE13 / "before.json",
            CASE13 / "after.json",
            "-o",
            tmp_path / "r.md",
            "--fail-on",
            "regression",
        ]
    )
    assert res.exit_code == 1
    assert (tmp_path / "r.md").read_text().startswith("## forensics diff")


def test_aa_is_exit_0_with_fail_on(tmp_path):
    a = write(tmp_path / "a.json", snapshot({}))
    res = _run([a, a, "-o", tmp_path / "r.json", "--fail-on", "any"])
    assert res.exit_code == 0
    assert json.loads((tmp_path / "r.json").read_text())["verdict"].startswith(
        "Nothing implicated, and no slowdown was measured"
    )


def test_inconclusive_bench_exits_3_with_fail_on(tmp_path):
    def bench(xs):
        return {
            "schema": "forensics.bench/1",
            "results": [
                {
                    "name": "user.step_ms",
                    "kind": "user",
                    "unit": "ms",
                    "higher_is_better": False,
                    "process_medians": xs,
                }
            ],
        }

    b = write(tmp_path / "b.json", snapshot({}, bench=bench([10.0, 10.5])))
    a = write(tmp_path / "a.json", snapshot({}, bench=bench([11.0, 12.0])))
    res = _run([b, a, "-o", tmp_path / "r.html", "--fail-on", "regression"])
    assert res.exit_code == 3
    assert _run([b, a, "-o", tmp_path / "r.html"]).exit_code == 0


@pytest.mark.parametrize(
    "content,expect",
    [
        (None, "no such file"),
        ('{"schema": "forensics.snapshot/1", "probes": {', "invalid JSON"),
        ('{"schema": "forensics.snapshot/9", "probes": {}}', "newer than this forensics"),
        ('{"schema": "forensics.bench/1", "results": []}', "wrong kind of file"),
        (
            '{"schema": "forensics.snapshot/1", "probes": {"gpu": {"status": "great"}}}',
            "has status 'great'",
        ),
        ("", "file is empty"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, content, expect):
    good = write(tmp_path / "good.json", snapshot({}))
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    res = _run([good, bad, "-o", tmp_path / "r.html"])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("forensics: error: ") and expect in lines[0]
    assert "bad.json" in lines[0]
    assert "Traceback" not in res.output


@pytest.mark.parametrize(
    "extra,expect",
    [
        (["-o", "r.txt"], "cannot tell the report format"),
        (["--repo", "no-such-folder"], "--repo no-such-folder: no such folder"),
        (["--config", "no-such.yaml"], "--config no-such.yaml: no such file"),
        (["-o", "missing-dir/r.html"], "does not exist"),
    ],
)
def test_bad_options_are_one_line_exit_2(tmp_path, monkeypatch, extra, expect):
    monkeypatch.chdir(tmp_path)
    good = write(tmp_path / "good.json", snapshot({}))
    res = _run([good, good, *extra])
    assert res.exit_code == 2, res.output
    assert expect in res.output and len(res.output.strip().splitlines()) == 1
