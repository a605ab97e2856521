"""User text (commit subjects, notes, verdicts) in the Markdown reports is HTML-escaped, as in the diff
report's: a Markdown renderer may pass raw HTML through. The investigate and bisect templates printed
subjects as they are ('slow <script>alert(1)</script>')."""

from __future__ import annotations

import sys

from tests._stepkit import busy_step, run_investigate, take_baseline
from tests.conftest import commit, make_repo

SUBJECT = 'serving: <script>alert("x")</script> & more'


def test_investigate_markdown_escapes_a_commit_subject(tmp_path):
    repo = make_repo(tmp_path / "repo", {"step.py": busy_step("2", "1")}, "serving: step")
    cmd = f"{sys.executable} step.py"
    base = take_baseline(tmp_path / "before.json", repo, cmd)
    commit(repo, {"step.py": busy_step("2", "1.5")}, SUBJECT)
    r = run_investigate(
        repo,
        *("--baseline", str(base), "--cmd", cmd, "--plan", "--no-canary"),
        *("-o", str(tmp_path / "r.md"), "-o", str(tmp_path / "r.html")),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    md = (tmp_path / "r.md").read_text()
    assert "<script>" not in md and "&lt;script>" in md
    assert (
        'serving: &lt;script>alert("x")&lt;/script> &amp; more' in md
    )  # the plan's commit experiment
    html = (tmp_path / "r.html").read_text()
    assert "<script>alert" not in html
