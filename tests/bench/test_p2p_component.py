"""The GPU-to-GPU P2P canary component's plumbing (no GPU here: rank results as the worker writes them)."""

import pytest

from forensics.bench.config import CanaryConfig
from forensics.bench.document import canary_results, p2p_note


def process(p2p_ms, lat_ms, peer_access=True):
    ranks = []
    for rank in (0, 1):
        ranks.append(
            {
                "rank": rank,
                "p2p_peer": 1 - rank,
                "p2p_access": peer_access,
                "metrics": {
                    "step": {"per_call_ms": [2.0] * 5},
                    "p2p": {"per_call_ms": [p2p_ms + 0.01 * rank] * 5},
                    "p2p_latency": {"per_call_ms": [lat_ms] * 5},
                },
            }
        )
    return {"ranks": ranks, "wall_s": 9.0, "pids": [1, 2]}


def test_p2p_components_from_two_ranks():
    cfg = CanaryConfig.defaults("cuda", 2)
    res = {r["name"]: r for r in canary_results(cfg, [process(0.25, 0.006)] * 5)}
    bw = res["component.p2p_gbps"]
    # 64 MiB in the slowest rank's 0.26 ms
    assert (
        abs(bw["median"] - cfg.p2p_bytes / 0.26e-3 / 1e9) < 1e-6 and bw["higher_is_better"] is True
    )
    assert abs(res["component.p2p_latency_us"]["median"] - 6.0) < 1e-9
    assert p2p_note([process(0.25, 0.006)]) == {"measured": True, "peer_access": [True]}


def test_one_gpu_skips_with_the_reason():
    cfg = CanaryConfig.defaults("cuda", 1)
    one = {
        "ranks": [
            {
                "rank": 0,
                "metrics": {"step": {"per_call_ms": [2.0] * 5}},
                "p2p_skipped": "one rank (tp=1): GPU-to-GPU copies need a second GPU",
            }
        ]
    }
    names = {r["name"] for r in canary_results(cfg, [one] * 5)}
    assert not any("p2p" in n for n in names)
    note = p2p_note([one])
    assert note["measured"] is False and "second GPU" in note["reason"]


def test_cpu_defaults_have_no_p2p():
    assert CanaryConfig.defaults("cpu", 2).p2p_bytes == 0


def test_no_caching_allocator_runs_the_step_eagerly_and_says_why():
    # On the H200 (torch 2.11) graph capture failed under PYTORCH_NO_CUDA_MEMORY_CACHING=1 and the canary
    # process died with only "Compile with TORCH_USE_CUDA_DSA..." as its message.
    pytest.importorskip("torch")
    from forensics.bench.worker import graph_blocker

    assert (
        graph_blocker({}) is None and graph_blocker({"PYTORCH_NO_CUDA_MEMORY_CACHING": "0"}) is None
    )
    reason = graph_blocker({"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
    assert reason.startswith("PYTORCH_NO_CUDA_MEMORY_CACHING=1 turns off the caching allocator")
    cfg = CanaryConfig.defaults("cuda", 1)
    graph = {"ranks": [{"rank": 0, "metrics": {"step": {"per_call_ms": [2.0] * 5}}}]}
    eager = {
        "ranks": [
            {"rank": 0, "metrics": {"step": {"per_call_ms": [2.6] * 5}}, "graph_skipped": reason}
        ]
    }
    a = {r["name"]: r for r in canary_results(cfg, [graph] * 5)}["canary.verify_step_ms"]
    b = {r["name"]: r for r in canary_results(cfg, [eager] * 5)}["canary.verify_step_ms"]
    assert a["method"] == "split" and b["method"] == "eager"
    assert (
        "launched eagerly" in b["description"]
        and "PYTORCH_NO_CUDA_MEMORY_CACHING=1" in b["description"]
    )

    from forensics.bench.compare import method_changes

    assert b["method_reason"] == reason and "method_reason" not in a  # the reason in its own field
    notes = method_changes(
        {"canary.verify_step_ms": a}, {"canary.verify_step_ms": b}, ["canary.verify_step_ms"]
    )
    assert len(notes) == 1 and "split on A and eager on B" in notes[0]
    assert f"({reason})" in notes[0]
    old = {
        k: v for k, v in b.items() if k != "method_reason"
    }  # a bench file written before the field
    assert (
        method_changes(
            {"canary.verify_step_ms": a}, {"canary.verify_step_ms": old}, ["canary.verify_step_ms"]
        )
        == notes
    )


def test_a_rank_failure_names_the_cuda_error_not_the_hint_after_it():
    from forensics.bench.harness import failure_line

    # the tail torch prints for a CUDA error (c10/cuda/CUDAException), as a failed graph capture ends
    stderr = (
        'Traceback (most recent call last):\n  File "worker.py", line 266, in _graph\n'
        "torch.AcceleratorError: CUDA error: operation not permitted when stream is capturing\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
        "below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n\n"
    )
    assert (
        failure_line(stderr)
        == "torch.AcceleratorError: CUDA error: operation not permitted when stream is capturing"
    )
    assert failure_line("warming up\nkilled by the OOM killer\n") == "killed by the OOM killer"
    assert failure_line("") == "no output on stderr"
