"""YAML snapshots are read with libyaml's parser and written with its emitter when PyYAML has them
(a 200 MB YAML snapshot took 68 s with the pure-Python loader), with the same results and the same
refusals as the pure-Python loader, which stays the fallback. No timings here: what is checked is which
loader runs and what the user gets."""

from __future__ import annotations

import json

import pytest
import yaml

from forensics import docfile
from forensics import snapshot as snap
from tests.conftest import EXAMPLES, run_cli

LIBYAML = getattr(yaml, "CSafeLoader", None) is not None
REAL = [
    EXAMPLES / "aa" / "before.json",
    EXAMPLES / "silent-pull" / "after.json",
    EXAMPLES / "busy-gpu" / "before.json",
]


@pytest.mark.skipif(not LIBYAML, reason="PyYAML built without libyaml here")
def test_the_loader_parses_with_libyaml_when_pyyaml_has_it():
    assert issubclass(docfile._strict_loader(), yaml.cyaml.CParser)


def test_the_loader_falls_back_to_pure_python_without_libyaml(monkeypatch):
    monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    loader = docfile._strict_loader()
    assert issubclass(loader, yaml.SafeLoader)
    if LIBYAML:
        assert not issubclass(loader, yaml.cyaml.CParser)


@pytest.mark.parametrize("src", REAL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_real_snapshot_written_as_yaml_reads_back_the_same_as_the_pure_python_loader_reads_it(
    tmp_path, src
):
    doc = snap.load(src)
    doc.pop(docfile.LOAD_NOTES, None)
    path = tmp_path / "s.yaml"
    snap.save(doc, path)
    text = path.read_text()
    assert yaml.load(text, Loader=yaml.SafeLoader) == json.loads(
        json.dumps(docfile.finite_json(doc))
    )
    assert docfile.read_document(path) == yaml.load(text, Loader=yaml.SafeLoader)
    assert run_cli("show", str(path), timeout=120).returncode == 0


@pytest.mark.parametrize(
    "text, words",
    [
        (
            "schema: forensics.snapshot/1\nprobes: " + "[" * 100_000 + "]" * 100_000 + "\n",
            "nested too deeply",
        ),
        (
            "schema: forensics.snapshot/1\na: &x [1]\nprobes: *x\n",
            "YAML alias *x refused at line 3",
        ),
        ("schema: forensics.snapshot/1\nprobes: &x [*x]\n", "YAML alias *x refused at line 2"),
        (
            "schema: forensics.snapshot/1\nprobes: !!python/object/apply:os.system ['true']\n",
            "unsupported YAML tag !!python/object/apply:os.system at line 2",
        ),
        ("schema: forensics.snapshot/1\nprobes: {host: [unclosed\n", "invalid YAML at line 3"),
    ],
    ids=["nested 100,000 deep", "alias", "self-referencing alias", "python tag", "unclosed"],
)
def test_bad_yaml_is_one_line_exit_2_with_the_fast_loader(tmp_path, text, words):
    """libyaml's own composer recurses in C and crashes the interpreter on deep nesting: the reader must
    not use it, so the user gets one line and exit 2, never a segmentation fault (exit -11)."""
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    proc = run_cli("show", str(path), timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-500:])
    assert len(proc.stderr.strip().splitlines()) == 1 and words in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "package, name",
    [
        ("forensics", "data/known_issues.yaml"),
        ("forensics.investigate", "costly_env.yaml"),
        ("forensics.investigate", "ceilings.yaml"),
    ],
)
def test_the_tools_own_yaml_files_read_the_same_through_libyaml(package, name):
    """The shipped tables are parsed by libyaml's whole loader when PyYAML has it (faster); each gives
    exactly what the pure-Python SafeLoader gives, so no entry of the catalog or a table reads otherwise."""
    import importlib.resources

    text = importlib.resources.files(package).joinpath(name).read_text(encoding="utf-8")
    expected = yaml.load(text, Loader=yaml.SafeLoader)
    assert expected and docfile.packaged_yaml(package, name) == expected
