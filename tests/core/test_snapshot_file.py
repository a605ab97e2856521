"""The snapshot file: atomic writes, JSON/YAML, and one-line errors for every bad input."""

from __future__ import annotations

import json

import pytest

from forensics import outpath
from forensics import snapshot as snap
from forensics.errors import BadInputError
from tests.conftest import run_cli


def _valid_doc() -> dict:
    return {
        "schema": "forensics.snapshot/1",
        "created": "2026-11-29T19:49:47Z",
        "label": "x",
        "tool": {"name": "forensics", "version": "0.1.0"},
        "probes": {
            "host": {"status": "ok", "duration_s": 0.1, "data": {"kernel": "6.1"}, "errors": []}
        },
        "bench": None,
        "redaction": "on",
        "redactions": [],
    }  # written last, as snapshot.build does


BAD_INPUTS = {
    "empty.json": ("", "file is empty"),
    "truncated.json": (
        '{"schema": "forensics.snapshot/1", "probes": {"host": {"status": "ok"',
        "truncated",
    ),
    "list.json": ("[1, 2]", "expected a mapping"),
    "notmap.yaml": ("- a\n- b\n", "expected a mapping"),
    "badyaml.yaml": ("schema: [unclosed\n", "invalid YAML"),
    "foreign.json": ('{"schema": "other.tool/1", "probes": {}}', "wrong kind of file"),
    "noschema.json": ('{"probes": {}}', "no 'schema' field"),
    "newer.json": (
        '{"schema": "forensics.snapshot/99", "probes": {}}',
        "newer than this forensics",
    ),
    "version_zero.json": (
        '{"schema": "forensics.snapshot/0", "probes": {}}',
        "schema version '0' is not a version this tool wrote",
    ),
    "version_dotted.json": (
        '{"schema": "forensics.snapshot/1.1", "probes": {}}',
        "schema version '1.1' is not a version",
    ),
    "no_probes.json": ('{"schema": "forensics.snapshot/1"}', "no 'probes' field"),
    "probes_list.json": (
        '{"schema": "forensics.snapshot/1", "probes": []}',
        "'probes' must be a mapping",
    ),
    "section_str.json": (
        '{"schema": "forensics.snapshot/1", "probes": {"gpu": "ok"}}',
        "probe section 'gpu' must be a mapping",
    ),
    "bad_status.json": (
        '{"schema": "forensics.snapshot/1", "probes": {"gpu": {"status": "great"}}}',
        "has status 'great'",
    ),
    "data_list.json": (
        '{"schema": "forensics.snapshot/1", "probes": {"gpu": {"status": "ok", "data": [1]}}}',
        "'data' must be a mapping",
    ),
    "duration_str.json": (
        '{"schema": "forensics.snapshot/1", "probes": {"gpu": {"status": "ok", "duration_s": "fast"}}}',
        "'duration_s' must be a number",
    ),
    "binary.json": (b"\xff\xfe\x00garbage", "not a text file"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_load_rejects_bad_input_with_one_line(tmp_path, name):
    content, expected = BAD_INPUTS[name]
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(BadInputError) as exc:
        snap.load(path)
    message = str(exc.value)
    assert str(path) in message and expected in message
    assert "\n" not in message


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(BadInputError, match="no such file"):
        snap.load(tmp_path / "nope.json")
    with pytest.raises(BadInputError, match="is a folder"):
        snap.load(tmp_path)


@pytest.mark.parametrize("name", ["truncated.json", "newer.json", "notmap.yaml"])
def test_cli_show_bad_file_exit_2_no_traceback(tmp_path, name):
    content, expected = BAD_INPUTS[name]
    path = tmp_path / name
    path.write_text(content)
    proc = run_cli("show", str(path))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("forensics: error: ") and expected in lines[0]


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml"])
def test_roundtrip_json_and_yaml(tmp_path, suffix):
    path = snap.save(_valid_doc(), tmp_path / f"s{suffix}")
    loaded = snap.load(path)
    assert loaded["probes"]["host"]["data"]["kernel"] == "6.1"
    if suffix == ".json":
        json.loads(path.read_text())  # really JSON
    else:
        assert path.read_text().startswith("schema: forensics.snapshot/1")


def test_write_is_atomic_and_keeps_old_file_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "s.json"
    snap.save(_valid_doc(), path)
    before = path.read_text()

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(outpath.os, "replace", boom)
    with pytest.raises(RuntimeError):
        snap.save(dict(_valid_doc(), label="new"), path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]  # no temp file left behind


def test_write_into_missing_folder_is_bad_input(tmp_path):
    with pytest.raises(BadInputError, match="does not exist"):
        snap.save(_valid_doc(), tmp_path / "no" / "s.json")


BENCH_DAMAGE = {
    "results_str": (
        lambda b: b.update(results="x"),
        "bench.results must be a list, found a string",
    ),
    "entry_str": (
        lambda b: b["results"].append("x"),
        "must be a mapping with a 'name' string, found a string",
    ),
    "name_int": (
        lambda b: b["results"][0].update(name=5),
        "must be a mapping with a 'name' string, found a 'name' of a number",
    ),
    "medians_str": (
        lambda b: b["results"][0].update(process_medians=["19.3", 19.4]),
        "'process_medians' must be a list of numbers, found a list holding a string",
    ),
    "newer": (
        lambda b: b.update(schema="forensics.bench/9"),
        "its bench is forensics.bench/9, newer than this forensics",
    ),
    "foreign": (lambda b: b.update(schema="other/1"), "bench.schema is 'other/1'"),
}


@pytest.mark.parametrize("name", sorted(BENCH_DAMAGE))
def test_diff_refuses_a_damaged_embedded_bench(tmp_path, name):
    """A snapshot whose embedded bench is damaged or newer: one line naming the file and the field,
    exit 2. diff said 'measured only in BEFORE' (or read a newer bench as its own) and exited 0."""
    from tests.conftest import EXAMPLES

    before = EXAMPLES / "silent-pull" / "before.json"
    doc = json.loads(before.read_text())
    damage, expected = BENCH_DAMAGE[name]
    damage(doc["bench"])
    after = tmp_path / "after.json"
    after.write_text(json.dumps(doc))
    proc = run_cli("diff", str(before), str(after), "-o", str(tmp_path / "r.html"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"forensics: error: {after}: "), lines
    assert expected in lines[0]
    assert not (tmp_path / "r.html").exists()


def test_a_bench_without_results_is_read(tmp_path):
    """Snapshots whose bench holds only telemetry (no results) stay readable."""
    doc = _valid_doc()
    doc["bench"] = {"telemetry": {}}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    assert snap.load(path)["bench"] == {"telemetry": {}}
