"""Issue 26's incident pairs (examples/incidents/*): the report leads with the root cause.

Each folder holds before.json and after.json (real H200 snapshots edited as its SOURCE.md says,
built by examples/incidents/make_incidents.py) and expect.json: ``top`` (the root cause, or null
for an A/A pair), ``mechanism`` (a hypothesis that must be reported as explained by the top, under
it, never first), ``first_sentence_has`` (words the verdict must hold), ``known_issue`` (a
catalog entry that must match without unchecked conditions), ``ruled_out`` and ``inconclusive``
(hypotheses that must be so, an inconclusive one naming the command that would tell) and ``repo``
(the make_incidents.py function that rebuilds the user's repository, read with ``--repo``).
"""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import pytest

from forensics import snapshot as snap
from forensics.diff.ledger import analyse
from forensics.hypotheses import HYPOTHESES, LINKS
from forensics.model import HypothesisStatus, Severity
from forensics.render.report import render_html, render_json, render_markdown
from forensics.render.summary import print_diff_summary
from tests.conftest import ROOT

INCIDENTS = ROOT / "examples" / "incidents"
CASES = sorted(p for p in INCIDENTS.iterdir() if (p / "expect.json").is_file())


def _load(case: Path):
    return snap.load(case / "before.json"), snap.load(case / "after.json")


def _builder():
    """examples/incidents/make_incidents.py as a module (it edits JSON only; its repository builders run git)."""
    spec = importlib.util.spec_from_file_location("make_incidents", INCIDENTS / "make_incidents.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _repo(expect: dict, tmp_path: Path) -> dict:
    """``analyse``'s ``repo`` for a case whose pull must be read: the same commits rebuilt under ``tmp_path``
    (the snapshots name a placeholder path that is not on this machine)."""
    if not expect.get("repo"):
        return {}
    dest = tmp_path / "clone"
    getattr(_builder(), expect["repo"])(dest)
    return {"repo": dest}


def test_every_incident_cites_its_source():
    assert len(CASES) >= 9
    for case in CASES:
        text = (case / "SOURCE.md").read_text()
        assert "https://github.com/" in text and "Taken:" in text and "Chosen:" in text, case.name


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_verdict_leads_with_the_root_cause(case, tmp_path):
    expect = json.loads((case / "expect.json").read_text())
    before, after = _load(case)
    a = analyse(before, after, **_repo(expect, tmp_path))
    doc = json.loads(render_json(a))
    for hid in expect.get("ruled_out", []):
        h = next(x for x in doc["hypotheses"] if x["id"] == hid)
        assert h["status"] == "ruled-out", h
    for hid in expect.get("inconclusive", []):
        h = next(x for x in doc["hypotheses"] if x["id"] == hid)
        assert h["status"] == "inconclusive" and "to tell: " in h["summary"], h
        assert f"{hid} (" not in doc["verdict"]
    verdict = doc["verdict"]
    top = expect["top"]
    if top is None:
        assert [h["id"] for h in doc["hypotheses"] if h["status"] == "implicated"] == [], verdict
        return
    first = doc["hypotheses"][0]
    assert first["id"] == top and first["status"] == "implicated", verdict
    assert first["explained_by"] is None
    named = [
        h for h in HYPOTHESES if f"{h} (" in verdict
    ]  # the verdict names a hypothesis as "id (summary)"
    assert min(named, key=lambda h: verdict.index(f"{h} (")) == top, verdict
    for words in expect.get("first_sentence_has", []):
        assert words in verdict, (words, verdict)
    html = render_html(a)
    assert html[html.index('class="hid">') :].startswith(f'class="hid">{top}<')
    mech = expect.get("mechanism")
    if mech:
        h = next(x for x in doc["hypotheses"] if x["id"] == mech)
        assert h["status"] == "implicated" and h["explained_by"], h
        chain, cur = [mech], h
        while cur["explained_by"]:  # the mechanism's chain ends at the top
            chain.append(cur["explained_by"])
            cur = next(x for x in doc["hypotheses"] if x["id"] == cur["explained_by"])
        assert chain[-1] == top
        assert f"{mech} (" in verdict and verdict.index(f"{top} (") < verdict.index(f"{mech} (")
        assert mech in next(x for x in doc["hypotheses"] if x["id"] == chain[1])["explains"]
        assert f'class="hid-mech">{mech}<' in html and f'class="hid">{mech}<' not in html
        md = render_markdown(a)
        assert f"explained by `{chain[1]}`, not a separate cause): **`{mech}`**" in md
        from rich.console import Console

        out = io.StringIO()
        print_diff_summary(Console(file=out, width=200, color_system=None), a)
        assert f"-> {mech}" in out.getvalue() and "mechanism (explained by" in out.getvalue()
    if expect.get("known_issue"):
        ki = [
            k
            for x in doc["hypotheses"]
            for k in x["known_issues"]
            if k["id"] == expect["known_issue"]
        ]
        assert ki and not ki[0]["possible"] and ki[0]["unchecked"] == [], ki


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_side_against_itself_implicates_only_standing_problems(case):
    """A snapshot against itself: only what is wrong on both sides (a standing ACS redirect, a collective
    failing on both sides) may stay implicated, and it says so; nothing is a change."""
    for side in ("before.json", "after.json"):
        doc = snap.load(case / side)
        a = analyse(doc, snap.load(case / side))
        found = [
            f.summary
            for h in a.hypotheses
            for f in h.findings
            if f.status is HypothesisStatus.IMPLICATED and f.severity.weight > 0
        ]
        assert all("standing" in s for s in found), (case.name, side, found)


def test_a_docs_only_pull_is_ruled_out_under_a_flash_attn_upgrade(tmp_path):
    """Dao-AILab/flash-attention#1743 with a docs-only pull the same morning (issue 26, family 2)."""
    case = INCIDENTS / "flash-attn-upgrade-docs-pull"
    before, after = _load(case)
    a = analyse(before, after, **_repo({"repo": "docs_pull_repo"}, tmp_path))
    assert a.verdict.startswith(
        "Measured 1.47x slower; most likely cause: python.packages (1 GPU-stack package(s) "
        "changed: flash-attn: 2.4.2 -> 2.7.4.post1)."
    ), a.verdict
    assert a.top.severity is Severity.HIGH and "code.change" not in a.verdict
    code = next(h for h in a.hypotheses if h.id == "code.change")
    assert code.status is HypothesisStatus.RULED_OUT
    assert "no commit changes what the step runs (2 x documentation)" in code.summary, code.summary
    assert any(
        '"docs: how the decode step uses the KV cache": no behaviour change: documentation' in e
        for e in code.evidence
    ), code.evidence
    # the commits cannot be read without the clone: unknown, never high, and the package still leads
    a = analyse(before, after)
    code = next(h for h in a.hypotheses if h.id == "code.change")
    assert code.status is HypothesisStatus.INCONCLUSIVE and "--repo CLONE" in code.summary
    assert a.top.id == "python.packages"


def test_a_pull_whose_repository_is_elsewhere_does_not_outrank_the_driver():
    """bmaltais/kohya_ss#884: update.bat pulled the repository and the driver went 530 -> 535 the same day."""
    before, after = _load(INCIDENTS / "driver-update-pull-elsewhere")
    a = analyse(before, after)
    assert a.top.id == "driver.version" and a.verdict.startswith(
        "Measured 1.93x slower; most likely cause: driver.version (NVIDIA driver 530.41.03 -> 535.54.03)."
    ), a.verdict
    code = next(h for h in a.hypotheses if h.id == "code.change")
    assert code.status is HypothesisStatus.INCONCLUSIVE and code.severity is not Severity.HIGH
    assert "what its commits changed is unknown" in code.summary
    assert (
        "to tell: git clone https://github.com/bmaltais/kohya_ss.git CLONE, then forensics diff BEFORE AFTER "
        "--repo CLONE"
    ) in code.summary, code.summary
    md = render_markdown(a)
    assert "git clone https://github.com/bmaltais/kohya_ss.git CLONE" in md


def test_torchrun_defaults_are_facts_not_problems():
    case = INCIDENTS / "torchrun-defaults-aa"
    before, after = _load(case)
    a = analyse(before, after)
    prop = next(h for h in a.hypotheses if h.id == "nccl.env-propagation")
    assert prop.status is HypothesisStatus.RULED_OUT
    assert any(
        "OMP_NUM_THREADS=1" in line and "torchrun's own default" in line for line in prop.evidence
    )
    # a value the user exported that torchrun's worker does not see is still a problem
    for r in after["probes"]["nccl_env"]["data"]["launcher"]["ranks"]:
        for d in r["differs"]:
            if d["name"] == "OMP_NUM_THREADS":
                d["parent"] = "8"
    after["probes"]["nccl_env"]["data"]["parent"]["env"]["OMP_NUM_THREADS"] = "8"
    a = analyse(before, after)
    prop = next(h for h in a.hypotheses if h.id == "nccl.env-propagation")
    assert prop.status is HypothesisStatus.IMPLICATED and "OMP_NUM_THREADS" in prop.summary


def test_the_causal_table_is_acyclic_and_names_known_ids():
    edges = {}
    for link in LINKS:
        assert link.cause in HYPOTHESES and link.effect in HYPOTHESES and link.cause != link.effect
        edges.setdefault(link.cause, set()).add(link.effect)

    def reaches(a, b, seen=()):
        return any(
            x == b or (x not in seen and reaches(x, b, seen + (x,))) for x in edges.get(a, ())
        )

    assert not any(reaches(h, h) for h in edges)


def test_the_links_are_documented():
    text = (ROOT / "docs" / "diagnosis.md").read_text()
    for link in LINKS:
        assert f"`{link.cause}` -> `{link.effect}`" in text, link
