"""The bad-input corpus: every kind of bad file a user can hand forensics, generated here.

Each one, given to ``forensics show`` and to ``forensics diff`` (as BEFORE, with a real AFTER),
must end in exit 2 and one stderr line that names the file and the problem; the file itself is
left unchanged. The kinds come from a hostile pass over the tool (issue 16): truncated, foreign,
newer-schema and binary files, YAML with aliases that expand without bound ("billion laughs"),
YAML with Python object tags, nesting past the parser, a field far larger than any real one.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

EXAMPLES = ROOT / "examples"
REAL = EXAMPLES / "aa" / "after.json"


def _real() -> dict:
    return json.loads(REAL.read_text())


def _with(field: tuple[str, ...], value, **top) -> dict:
    """The real snapshot with ``field`` (a key path) set to ``value`` and ``top`` keys set at the top."""
    doc = dict(_real(), **top)
    node = doc
    for k in field[:-1]:
        node = node[k]
    node[field[-1]] = value
    return doc


def _yaml_head() -> str:
    return "schema: forensics.snapshot/1\ncreated: '2026-12-01T00:00:00Z'\n"


def _bomb(levels: int = 9) -> str:
    """A ~1 KB YAML file whose aliases expand to 9**9 (387 million) strings."""
    lines = [_yaml_head(), 'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]")
    lines.append(f"probes: {{host: {{status: ok, data: {{bomb: *l{levels - 1}}}}}}}")
    return "\n".join(lines) + "\n"


# name -> (file name, content builder, words the error line must hold)
CORPUS: dict[str, tuple[str, object, tuple[str, ...]]] = {
    "empty": ("empty.json", lambda: "", ("empty",)),
    "whitespace": ("blank.json", lambda: " \n\t\n", ("empty",)),
    "truncated": (
        "cut.json",
        lambda: REAL.read_text()[: len(REAL.read_text()) // 2],
        ("invalid JSON at line",),
    ),
    "binary": ("bin.json", lambda: b"\x89PNG\r\n\x1a\n\x00\xff\xfe", ("not UTF-8",)),
    "top-level list": ("list.json", lambda: "[1, 2, 3]\n", ("expected a mapping",)),
    "foreign json": (
        "pkg.json",
        lambda: json.dumps({"name": "left-pad", "version": "1.3.0"}),
        ("no 'schema' field",),
    ),
    "other schema": (
        "bench.json",
        lambda: json.dumps({"schema": "forensics.bench/1", "probes": {}}),
        ("wrong kind of file",),
    ),
    "newer schema": (
        "new.json",
        lambda: json.dumps(dict(_real(), schema="forensics.snapshot/99")),
        ("newer", "upgrade forensics"),
    ),
    "schema version 0": (
        "v0.json",
        lambda: json.dumps(dict(_real(), schema="forensics.snapshot/0")),
        ("not a version this tool wrote",),
    ),
    "probes not a mapping": (
        "p.json",
        lambda: json.dumps(dict(_real(), probes=[1])),
        ("'probes' must be a mapping",),
    ),
    "bad status": (
        "st.json",
        lambda: json.dumps(dict(_real(), probes={"host": {"status": "great"}})),
        ("has status 'great'",),
    ),
    "deep nesting json": (
        "deep.json",
        lambda: '{"schema": "forensics.snapshot/1", "probes": ' + "[" * 100000 + "]" * 100000 + "}",
        ("nested too deeply",),
    ),
    "invalid yaml": (
        "bad.yaml",
        lambda: _yaml_head() + "probes: {host: [unclosed\n",
        ("invalid YAML at line",),
    ),
    "yaml python tag": (
        "obj.yaml",
        lambda: _yaml_head() + "probes: !!python/object/apply:os.system ['true']\n",
        ("unsupported YAML tag", "!!python/object/apply:os.system", "at line 3"),
    ),
    "yaml custom tag": (
        "tag.yaml",
        lambda: _yaml_head() + "probes: !vault |\n  abc\n",
        ("unsupported YAML tag", "!vault", "at line 3"),
    ),
    "yaml billion laughs": ("lol.yaml", _bomb, ("alias",)),
    "yaml top-level scalar": ("s.yaml", lambda: "just a sentence\n", ("expected a mapping",)),
    # fields the renderers read, of the wrong type (issue 29): refused on load, not an internal error when shown
    "probe error not a mapping": (
        "perr.json",
        lambda: json.dumps(_with(("probes", "gpu", "errors"), ["oops"])),
        ("probes.gpu.errors[0] must be a mapping",),
    ),
    "probe error field a list": (
        "pfield.json",
        lambda: json.dumps(_with(("probes", "gpu", "errors"), [{"field": ["a"], "error": "x"}])),
        ("probes.gpu.errors[0].field must be a string",),
    ),
    "redaction where a list": (
        "rlist.json",
        lambda: json.dumps(_with(("redactions",), [{"where": ["a"], "why": "x"}])),
        ("redactions[0].where must be a string, found a list",),
    ),
    "redaction where a number": (
        "rnum.json",
        lambda: json.dumps(_with(("redactions",), [{"where": 5, "why": "x"}])),
        ("redactions[0].where must be a string, found a number",),
    ),
    "import files of mappings": (
        "ifiles.json",
        lambda: json.dumps(_with(("import",), {"files": [{"a": 1}]}, source="imported")),
        ("import.files[0] must be a string",),
    ),
    "import parts of numbers": (
        "iparts.json",
        lambda: json.dumps(_with(("import",), {"parts": [1]}, source="imported")),
        ("import.parts[0] must be a mapping",),
    ),
    "import part lines a string": (
        "ilines.json",
        lambda: json.dumps(
            _with(("import",), {"parts": [{"format": "pip", "lines": "1-9"}]}, source="imported")
        ),
        ("import.parts[0].lines must be",),
    ),
}


def _write(tmp_path: Path, name: str) -> Path:
    fname, build, _ = CORPUS[name]
    content = build()
    path = tmp_path / fname
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def _one_line_exit_2(proc, path: Path) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-500:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("forensics: error:") and "Traceback" not in proc.stderr
    assert path.name in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("name", list(CORPUS))
def test_show_refuses_bad_file_in_one_line(tmp_path, name):
    path = _write(tmp_path, name)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    line = _one_line_exit_2(run_cli("show", str(path), timeout=60), path)
    for words in CORPUS[name][2]:
        assert words in line, line
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


@pytest.mark.parametrize("name", list(CORPUS))
def test_diff_refuses_bad_file_in_one_line(tmp_path, name):
    path = _write(tmp_path, name)
    out = tmp_path / "report.json"
    line = _one_line_exit_2(run_cli("diff", str(path), str(REAL), "-o", str(out), timeout=20), path)
    for words in CORPUS[name][2]:
        assert words in line, line
    assert not out.exists()


def test_a_folder_a_fifo_and_a_device_are_not_snapshots(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for path, words in (
        (tmp_path, "is a folder"),
        (fifo, "not a regular file"),
        (Path(os.devnull), ""),
    ):
        proc = run_cli("show", str(path), timeout=30)
        assert (
            proc.returncode == 2
            and words in proc.stderr
            and len(proc.stderr.strip().splitlines()) == 1
        ), proc.stderr
        assert str(path) in proc.stderr


def test_a_huge_field_is_cut_on_load_with_a_note(tmp_path):
    """One 8 MB string in an otherwise real snapshot: diff works, says the field was cut, and reports no 8 MB."""
    doc = _real()
    doc["probes"]["host"]["data"]["kernel"] = "x" * (8 * 2**20)
    big = tmp_path / "big.json"
    big.write_text(json.dumps(doc))
    out = tmp_path / "r.json"
    proc = run_cli("diff", str(REAL), str(big), "-o", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert any("host.data.kernel" in n and "cut" in n for n in report["notes"]), report["notes"]
    assert out.stat().st_size < 2 * 2**20
