"""The evidence table (forensics.diff.evidence): every rule fires on the readings it names and only there.

Benchmark effects come from real H200 bench files (examples/h200x2/bench, examples/*/before|after.json);
where a component must move alone, one real side is scaled by the ratio a real case showed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.bench.effect import compare_bench
from forensics.diff import evidence as ev
from forensics.model import Finding, HypothesisStatus, Severity, implicated
from tests.conftest import ROOT

BENCH = ROOT / "examples" / "h200x2" / "bench"


def _bench(path: Path) -> dict:
    doc = json.loads(path.read_text())
    return {"bench": doc.get("bench") if "probes" in doc else doc}


def _scaled(path: Path, factors: dict[str, float]) -> dict:
    doc = _bench(path)
    for r in doc["bench"]["results"]:
        if r["name"] in factors:
            r["process_medians"] = [v * factors[r["name"]] for v in r["process_medians"]]
    return doc


def _p2p(scale: float) -> dict:
    # a2's readings plus a GPU-to-GPU copy component at a2's H2D spread (the P2P component was added after a2)
    doc = _bench(BENCH / "a2.json")
    h2d = next(r for r in doc["bench"]["results"] if r["name"] == "component.h2d_gbps")
    doc["bench"]["results"].append(
        {
            "name": "component.p2p_gbps",
            "kind": "component",
            "unit": "GB/s",
            "higher_is_better": True,
            "process_medians": [v * 5 * scale for v in h2d["process_medians"]],
        }
    )
    return doc


def _effect(before, after):
    return compare_bench(before, after)


EFFECTS = {
    "aa": lambda: _effect(_bench(BENCH / "a1.json"), _bench(BENCH / "a2.json")),
    "p2p": lambda: _effect(_bench(BENCH / "a2.json"), _bench(BENCH / "p2p.json")),
    "busy": lambda: _effect(
        _bench(ROOT / "examples/busy-gpu/before.json"),
        _bench(ROOT / "examples/busy-gpu/after.json"),
    ),
    "pull": lambda: _effect(
        _bench(ROOT / "examples/silent-pull/before.json"),
        _bench(ROOT / "examples/silent-pull/after.json"),
    ),
    # case02's Gen2 link: ~50 -> ~8 GB/s host-to-device; nothing else moved
    # a P2P copy path through the host (ACS redirect): the GPU-to-GPU copy at half its bandwidth, nothing else moved
    "p2p-copy": lambda: _effect(_p2p(1.0), _p2p(0.5)),
    "copies": lambda: _effect(
        _bench(BENCH / "a2.json"),
        _scaled(BENCH / "a2.json", {"component.h2d_gbps": 8 / 50, "component.d2h_gbps": 8 / 50}),
    ),
}


def _facts(effect: str, hyps=(), fields=()) -> ev.Facts:
    found = [implicated(h, Severity.MEDIUM, f"{h} changed", fields=list(fields)) for h in hyps]
    return ev.Facts(
        EFFECTS[effect]() if effect else None, {f.hypothesis: [f] for f in found}, found
    )


RULE = {r.name: r for r in ev.RULES}

# rule -> (facts where it fires, facts where it does not)
CASES = {
    "allreduce-moved": (lambda: _facts("p2p"), lambda: _facts("copies")),
    "compute-moved": (lambda: _facts("busy"), lambda: _facts("p2p")),
    "copies-moved": (lambda: _facts("copies"), lambda: _facts("aa")),
    "allreduce-flat": (lambda: _facts_canary_compute_only(), lambda: _facts("p2p")),
    "compute-flat": (lambda: _facts("p2p"), lambda: _facts("busy")),
    "user-step-only": (lambda: _facts("pull"), lambda: _facts("p2p")),
    "canary-moved": (lambda: _facts("p2p"), lambda: _facts("pull")),
    "contention-then-throttle": (
        lambda: _facts("", ["gpu.contention", "gpu.throttling"]),
        lambda: _facts("", ["gpu.throttling"]),
    ),
    "memory-full-driver": (
        lambda: _facts("", ["driver.version", "gpu.memory"]),
        lambda: _facts("", ["driver.version"]),
    ),
    "p2p-moved": (lambda: _facts("p2p-copy"), lambda: _facts("p2p")),
    "transport-with-nccl": (
        lambda: _facts("", ["nccl.transport", "nccl.version"]),
        lambda: _facts("", ["nccl.transport"]),
    ),
    "gpu-stack": (
        lambda: _facts("", ["python.packages"], ["packages", ev.GPU_STACK_FIELD]),
        lambda: _facts("", ["python.packages"], ["packages"]),
    ),
}


def _facts_canary_compute_only() -> ev.Facts:
    # the canary's compute 2x slower (busy-gpu's ratio) while its all-reduce and busbw stay as measured in a2
    eff = _effect(
        _bench(BENCH / "a1.json"),
        _scaled(
            BENCH / "a2.json",
            {
                "canary.verify_step_ms": 1.99,
                "canary.verified_tokens_per_s": 1 / 1.99,
                "canary.compute_ms": 1.99,
                "component.matmul_tflops": 1 / 2.2,
            },
        ),
    )
    return ev.Facts(eff, {}, [])


def test_every_rule_has_a_case():
    assert set(CASES) == set(RULE)


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_fires_only_on_its_evidence(name):
    fires, quiet = CASES[name]
    assert RULE[name].fires(fires()), f"{name} did not fire on its evidence"
    assert not RULE[name].fires(quiet()), f"{name} fired without its evidence"


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_moves_the_scores_it_names(name):
    facts = CASES[name][0]()
    for hyp, factor in RULE[name].factors.items():
        f = [implicated(hyp, Severity.MEDIUM, "changed")]
        with_rule = ev.score(hyp, f, facts)
        assert with_rule.factors.get(name) == factor
        assert any(line.startswith(f"evidence {name} x{factor:g}") for line in with_rule.lines)


def test_priors_cover_every_hypothesis_id_and_the_new_ones():
    from forensics.hypotheses import HYPOTHESES

    assert set(HYPOTHESES) <= set(ev.PRIORS)
    assert {"gpu.topology", "gpu.memory", "host.numa", "nccl.transport"} <= set(ev.PRIORS)
    assert all(0 < p <= 1 and why for p, why in ev.PRIORS.values())


def test_decoy_the_component_that_moved_decides_between_two_changes():
    # a fast-forward pull (high) and a driver change (medium) together: the judges' severities alone favour the pull
    pull = [implicated("code.change", Severity.HIGH, "fast-forward pull", relevance=0.9)]
    driver = [
        implicated("driver.version", Severity.MEDIUM, "driver 580.95 -> 580.159", relevance=0.6)
    ]
    none = ev.Facts(None, {"code.change": pull, "driver.version": driver}, pull + driver)
    assert (
        ev.score("code.change", pull, none).score > ev.score("driver.version", driver, none).score
    )
    # the canary's compute and matmul slowed (busy-gpu readings): the environment, so the driver leads
    env = ev.Facts(EFFECTS["busy"](), none.implicated, none.findings)
    assert ev.score("driver.version", driver, env).score > ev.score("code.change", pull, env).score
    # only the user's step slowed (silent-pull readings): the pull leads, further ahead than without a benchmark
    code = ev.Facts(EFFECTS["pull"](), none.implicated, none.findings)
    assert (
        ev.score("code.change", pull, code).score
        > 3 * ev.score("driver.version", driver, code).score
    )


def test_co_changing_versions_the_allreduce_decides():
    # torch, NCCL and the CUDA runtime changed together, all `high`: only the all-reduce moved (p2p readings)
    fs = {
        h: [implicated(h, Severity.HIGH, f"{h} changed", relevance=0.9)]
        for h in ("torch.version", "nccl.version", "cuda.version")
    }
    facts = ev.Facts(EFFECTS["p2p"](), fs, [f for v in fs.values() for f in v])
    ranked = sorted(fs, key=lambda h: -ev.score(h, fs[h], facts).score)
    assert ranked[0] == "nccl.version"


def test_info_findings_score_nothing():
    f = [Finding("gpu.config", HypothesisStatus.IMPLICATED, Severity.INFO, "idle clocks differ")]
    assert ev.score("gpu.config", f, _facts("busy")).score == 0


def test_docs_print_the_table():
    text = (ROOT / "docs" / "diagnosis.md").read_text()
    for rule in ev.RULES:
        assert f"`{rule.name}`" in text and rule.when in text
        for hyp, factor in rule.factors.items():
            assert f"`{hyp}` x{factor:g}" in text
    for hyp, (p, why) in ev.PRIORS.items():
        assert f"| `{hyp}` | {p:g} | {why} |" in text
