"""A single snapshot kept compressed (``snaps/gpu-a17.json.gz``, as ``fleet report`` reads them) is read by
``show`` and ``diff`` too. It was taken for a pasted ticket text and refused as "not an environment report
(no collect_env ...); paste one of those"; a damaged one is named as damaged gzip."""

from __future__ import annotations

import gzip

from tests.conftest import EXAMPLES, run_cli

INCIDENT = EXAMPLES / "incidents" / "power-limit-capped"


def test_show_and_diff_read_a_gzipped_snapshot(tmp_path):
    packed = tmp_path / "gpu-a17.json.gz"
    packed.write_bytes(gzip.compress((INCIDENT / "after.json").read_bytes()))
    shown = run_cli("show", str(packed))
    plain = run_cli("show", str(INCIDENT / "after.json"))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == plain.stdout
    r = run_cli("diff", str(INCIDENT / "before.json"), str(packed), "-o", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Measured 1.28x slower; most likely cause: gpu.config")


def test_a_damaged_gzipped_snapshot_is_one_line_exit_2(tmp_path):
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress((INCIDENT / "after.json").read_bytes())[:300])
    r = run_cli("show", str(cut))
    assert r.returncode == 2
    assert r.stderr == f"forensics: error: {cut}: the gzip data ends early; the file is truncated\n"
    text = tmp_path / "paste.json.gz"
    text.write_bytes(
        gzip.compress(b"Collecting environment information...\nPyTorch version: 2.5.1\n")
    )
    r = run_cli("diff", str(INCIDENT / "before.json"), str(text), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 2 and not (tmp_path / "r.html").exists()
    assert r.stderr == (
        f"forensics: error: {text}: invalid JSON once uncompressed at line 1 column 1 (Expecting "
        "value); the file looks damaged\n"
    )


def test_import_of_a_gzipped_file_says_what_reads_it(tmp_path):
    # it said "not an environment report (no collect_env ...); paste one of those"
    packed = tmp_path / "gpu-a17.json.gz"
    packed.write_bytes(gzip.compress((INCIDENT / "after.json").read_bytes()))
    r = run_cli("import", str(packed), "-o", str(tmp_path / "i.json"))
    assert r.returncode == 2 and not (tmp_path / "i.json").exists()
    assert r.stderr == (
        f"forensics: error: {packed}: gzip-compressed, not a pasted text; 'forensics show' and "
        "'forensics diff' read a compressed snapshot as it is, a compressed text needs gunzip first\n"
    )
