"""The causal-link rules of forensics/diff/causes.py on ledger lines built from the real incident pairs."""

from __future__ import annotations

from forensics import snapshot as snap
from forensics.diff import causes
from forensics.diff.ledger import analyse
from forensics.hypotheses import FACT_LIMIT_LOWERED, LINKS, Link
from forensics.model import HypothesisStatus
from tests.conftest import ROOT

INCIDENTS = ROOT / "examples" / "incidents"


def _ledger(name):
    return analyse(
        snap.load(INCIDENTS / name / "before.json"), snap.load(INCIDENTS / name / "after.json")
    )


def test_the_cause_takes_its_mechanisms_score_and_both_say_why():
    a = _ledger("power-limit-capped")
    cfg, thr = (
        next(h for h in a.hypotheses if h.id == i) for i in ("gpu.config", "gpu.throttling")
    )
    assert (
        cfg.score >= thr.score
        and thr.explained_by == "gpu.config"
        and cfg.explains == ["gpu.throttling"]
    )
    assert any(line.startswith("explains gpu.throttling (") for line in cfg.evidence)
    assert any(line.startswith("mechanism of gpu.config (") for line in thr.evidence)
    assert a.causes == [cfg] and a.mechanisms(cfg) == [thr]
    assert (
        FACT_LIMIT_LOWERED
        in next(f for f in cfg.findings if f.status is HypothesisStatus.IMPLICATED).fields
    )


def test_a_link_whose_fact_is_missing_does_not_hold():
    a = _ledger("power-limit-capped")
    cfg = next(h for h in a.hypotheses if h.id == "gpu.config")
    thr = next(h for h in a.hypotheses if h.id == "gpu.throttling")
    row = next(x for x in LINKS if (x.cause, x.effect) == ("gpu.config", "gpu.throttling"))
    assert causes.holds(row, cfg.findings, thr.findings)
    for f in cfg.findings:
        f.fields = [
            x for x in f.fields if x != FACT_LIMIT_LOWERED
        ]  # a raised limit carries no such tag
    assert not causes.holds(row, cfg.findings, thr.findings)


def test_a_probes_own_links_are_used_and_a_cycle_is_dropped():
    class Plugin:
        links = (Link("nccl.transport", "nccl.version", "which", "a made-up reverse row"),)

    rows = causes.all_links([Plugin()])
    assert rows[: len(LINKS)] == list(LINKS) and rows[-1] is Plugin.links[0]
    a = _ledger("nccl-upgrade-p2p-to-shm")
    hyps = list(a.hypotheses)
    parent = causes.link(
        hyps, rows
    )  # version -> transport and transport -> version: one of them is dropped
    assert not ("nccl.version" in parent and "nccl.transport" in parent)
    assert (
        len([h for h in hyps if h.id in ("nccl.version", "nccl.transport") and not h.explained_by])
        == 1
    )


def test_without_a_link_nothing_is_explained():
    a = _ledger("pcie-x8-lanes-shared")
    assert all(not h.explained_by and not h.explains for h in a.hypotheses)
