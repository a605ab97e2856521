"""A number thousands of digits long in a snapshot (a damaged or hostile file): Python refuses to read an
integer of more than 4,300 digits with a ValueError that json.loads and PyYAML pass on; it was an internal
error (exit 4) in show, diff and fleet report. Now the file is named as damaged, exit 2."""

from __future__ import annotations

import json

from tests.conftest import EXAMPLES, run_cli

SNAP = EXAMPLES / "incidents" / "power-limit-capped" / "after.json"
HUGE = "1" + "0" * 5000


def _damaged(tmp_path, name: str) -> tuple:
    text = json.dumps(json.loads(SNAP.read_text())).replace(
        '"schema": ', f'"junk": {HUGE}, "schema": ', 1
    )
    path = tmp_path / name
    path.write_text(text)  # JSON is YAML: the .yaml copy goes through PyYAML's int constructor
    return path


def test_show_and_diff_name_the_file_as_damaged(tmp_path):
    for name in ("huge.json", "huge.yaml"):
        path = _damaged(tmp_path, name)
        for args in (
            ("show", str(path)),
            ("diff", str(SNAP), str(path), "-o", str(tmp_path / "r.html")),
        ):
            r = run_cli(*args)
            assert r.returncode == 2, r.stderr
            assert r.stderr == (
                f"forensics: error: {path}: holds a number thousands of digits long, which no "
                "snapshot has; the file is damaged\n"
            )


def test_fleet_report_lists_the_node_as_missing_with_the_reason(tmp_path):
    folder = tmp_path / "snaps"
    folder.mkdir()
    _damaged(folder, "gpu-a17.json")
    (folder / "gpu-a18.json").write_text(SNAP.read_text())
    r = run_cli("fleet", "report", str(folder), "-o", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stderr
    (missing,) = json.loads((tmp_path / "r.json").read_text())["missing"]
    assert missing["node"] == "gpu-a17"
    assert missing["reason"].endswith(
        "gpu-a17.json: holds a number thousands of digits long, which no snapshot has; "
        "the file is damaged"
    )
