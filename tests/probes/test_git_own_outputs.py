"""The tool's own outputs written into the user's repository (``forensics-report.html`` from ``diff``,
``forensics-investigate.html``, ``forensics-before.json`` from ``snapshot``) are not the user's changes: the
git probe lists them as ``tool_outputs``, not ``untracked``, and the next diff or investigate does not see
a working tree that "became dirty"."""

from __future__ import annotations

import json

from tests.conftest import EXAMPLES, run_cli


def _git_record(path) -> dict:
    return json.loads(path.read_text())["probes"]["git"]["data"]["repos"][0]


def test_reports_and_snapshots_written_in_the_repository_are_not_dirt(tmp_path, git_repo):
    repo = git_repo("model", {"train.py": "step = 1\n"})
    out = tmp_path / "out"
    out.mkdir()
    assert (
        run_cli(
            "snapshot",
            "--probe",
            "git",
            "--repo",
            str(repo),
            "-o",
            str(out / "before.json"),
            cwd=repo,
        ).returncode
        == 0
    )
    # what a user does in their checkout: the default outputs land here
    assert (
        run_cli(
            "diff",
            str(EXAMPLES / "aa" / "before.json"),
            str(EXAMPLES / "aa" / "after.json"),
            "-q",
            cwd=repo,
        ).returncode
        == 0
    )
    assert run_cli("snapshot", "--probe", "host", "--label", "after", cwd=repo).returncode == 0
    assert sorted(p.name for p in repo.iterdir() if p.name != ".git") == [
        "forensics-after.json",
        "forensics-report.html",
        "train.py",
    ]
    proc = run_cli(
        "snapshot", "--probe", "git", "--repo", str(repo), "-o", str(out / "after.json"), cwd=repo
    )
    assert proc.returncode == 0, proc.stderr
    rec = _git_record(out / "after.json")
    assert rec["dirty"] is False and rec["untracked"] == [] and rec["untracked_count"] == 0
    assert sorted(rec["tool_outputs"]) == ["forensics-after.json", "forensics-report.html"]
    report = out / "r.json"
    proc = run_cli(
        "diff",
        str(out / "before.json"),
        str(out / "after.json"),
        "-o",
        str(report),
        "--repo",
        str(repo),
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(report.read_text())
    code = next(h for h in data["hypotheses"] if h["id"] == "code.change")
    assert code["status"] == "ruled-out", code
    assert not any(
        "dirty" in n
        for n in data["notes"] + [n for r in data["commits"] for n in r.get("notes", [])]
    )


def test_a_file_of_the_users_named_like_an_output_stays_untracked(tmp_path, git_repo):
    repo = git_repo("model", {"train.py": "step = 1\n"})
    (repo / "forensics-notes.md").write_text(
        "what I tried on Tuesday\n"
    )  # the user's, not the tool's
    out = tmp_path / "s.json"
    assert (
        run_cli("snapshot", "--probe", "git", "--repo", str(repo), "-o", str(out)).returncode == 0
    )
    rec = _git_record(out)
    assert (
        rec["dirty"] is True
        and rec["untracked"] == ["forensics-notes.md"]
        and rec["tool_outputs"] == []
    )


def test_outputs_named_with_o_in_the_repository_are_not_dirt(tmp_path, git_repo):
    # docs/investigate.md writes '-o report.html' and 'snapshot ... -o before.json' in the checkout: the
    # next investigate said 'your checkout has uncommitted changes ...; they are part of the measured
    # slowdown' and could not measure today's HEAD in a worktree
    repo = git_repo("model", {"train.py": "step = 1\n"})
    pair = (str(EXAMPLES / "aa" / "before.json"), str(EXAMPLES / "aa" / "after.json"))
    for name in ("report.html", "report.md", "report.json"):
        assert run_cli("diff", *pair, "-q", "-o", name, cwd=repo).returncode == 0
    for name in ("before.json", "before.yaml"):
        assert run_cli("snapshot", "-q", "--probe", "host", "-o", name, cwd=repo).returncode == 0
    # the user's own files, one even naming forensics, stay what they are
    (repo / "notes.md").write_text("# forensics notes\nthe step got slower on Tuesday\n")
    (repo / "config.json").write_text('{"schema": "mine", "lr": 0.1}\n')
    out = tmp_path / "s.json"
    proc = run_cli("snapshot", "--probe", "git", "--repo", str(repo), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    rec = _git_record(out)
    assert sorted(rec["tool_outputs"]) == [
        "before.json",
        "before.yaml",
        "report.html",
        "report.json",
        "report.md",
    ]
    assert rec["untracked"] == ["config.json", "notes.md"] and rec["dirty"] is True
