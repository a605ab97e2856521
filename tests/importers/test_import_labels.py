"""Labels and default names of imported snapshots are redacted like every other field: ``--label``, and
the label and output name made from the files' names (``imported: env-hf_....txt``)."""

from __future__ import annotations

import json
import shutil

from tests.conftest import H200, run_cli

TOKEN = (
    "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm01234567"
)  # the shape of a Hugging Face token, not a real one


def _no_token_anywhere(tmp_path, proc) -> None:
    assert TOKEN not in proc.stdout and TOKEN not in proc.stderr, (proc.stdout, proc.stderr)
    for p in tmp_path.iterdir():
        assert TOKEN not in p.name or p.suffix == ".txt", p.name
        if p.suffix == ".json":
            assert TOKEN not in p.read_text(), p


def test_a_label_given_to_import_is_redacted(tmp_path):
    out = tmp_path / "s.json"
    proc = run_cli(
        "import",
        str(H200 / "collect_env.txt"),
        "--label",
        f"ticket 42 token={TOKEN}",
        "-o",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["label"].startswith("ticket 42") and "<redacted>" in doc["label"]
    assert any(r["where"] == "label" for r in doc["redactions"]), doc["redactions"]
    _no_token_anywhere(tmp_path, proc)


def test_the_default_label_and_output_name_made_from_a_file_name_are_redacted(tmp_path):
    text = tmp_path / f"env-{TOKEN}.txt"
    shutil.copy(H200 / "collect_env.txt", text)
    proc = run_cli("import", text.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = [p for p in tmp_path.iterdir() if p.suffix == ".json"]
    assert [p.name for p in written] == ["forensics-imported-env-redacted.json"], written
    doc = json.loads(written[0].read_text())
    assert doc["label"] == "imported: env-<redacted>.txt" and doc["import"]["files"] == [
        "env-<redacted>.txt"
    ]
    _no_token_anywhere(tmp_path, proc)


def test_a_ticket_text_diffed_directly_keeps_the_token_out_of_the_report(tmp_path):
    text = tmp_path / f"env-{TOKEN}.txt"
    shutil.copy(H200 / "collect_env.txt", text)
    report = tmp_path / "r.json"
    proc = run_cli(
        "diff", text.name, str(H200 / "collect_env.txt"), "-o", str(report), "-q", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert TOKEN not in report.read_text() and TOKEN not in proc.stdout


def test_snapshot_default_name_from_a_label_with_a_secret_is_redacted(tmp_path):
    proc = run_cli("snapshot", "--probe", "host", "--label", f"run {TOKEN}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["forensics-run-redacted.json"]
    assert TOKEN not in (tmp_path / "forensics-run-redacted.json").read_text()
