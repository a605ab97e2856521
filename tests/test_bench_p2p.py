"""The GPU-to-GPU P2P canary component's plumbing (no GPU here: rank results as the worker writes them)."""

from forensics.bench.config import CanaryConfig
from forensics.bench.document import canary_results, p2p_note


def process(p2p_ms, lat_ms, peer_access=True):
    ranks = []
    for rank in (0, 1):
        ranks.append({"rank": rank, "p2p_peer": 1 - rank, "p2p_access": peer_access, "metrics": {
            "step": {"per_call_ms": [2.0] * 5},
            "p2p": {"per_call_ms": [p2p_ms + 0.01 * rank] * 5},
            "p2p_latency": {"per_call_ms": [lat_ms] * 5}}})
    return {"ranks": ranks, "wall_s": 9.0, "pids": [1, 2]}


def test_p2p_components_from_two_ranks():
    cfg = CanaryConfig.defaults("cuda", 2)
    res = {r["name"]: r for r in canary_results(cfg, [process(0.25, 0.006)] * 5)}
    bw = res["component.p2p_gbps"]
    # 64 MiB in the slowest rank's 0.26 ms
    assert abs(bw["median"] - cfg.p2p_bytes / 0.26e-3 / 1e9) < 1e-6 and bw["higher_is_better"] is True
    assert abs(res["component.p2p_latency_us"]["median"] - 6.0) < 1e-9
    assert p2p_note([process(0.25, 0.006)]) == {"measured": True, "peer_access": [True]}


def test_one_gpu_skips_with_the_reason():
    cfg = CanaryConfig.defaults("cuda", 1)
    one = {"ranks": [{"rank": 0, "metrics": {"step": {"per_call_ms": [2.0] * 5}},
                      "p2p_skipped": "one rank (tp=1): GPU-to-GPU copies need a second GPU"}]}
    names = {r["name"] for r in canary_results(cfg, [one] * 5)}
    assert not any("p2p" in n for n in names)
    note = p2p_note([one])
    assert note["measured"] is False and "second GPU" in note["reason"]


def test_cpu_defaults_have_no_p2p():
    assert CanaryConfig.defaults("cpu", 2).p2p_bytes == 0
