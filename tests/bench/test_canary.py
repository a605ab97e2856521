"""The canary on CPU: 2 gloo ranks, fresh processes, a valid bench file; and its settings."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from forensics.bench import document, run_for_snapshot
from forensics.bench.config import CanaryConfig
from forensics.cli import main
from forensics.errors import BadInputError

TINY = {
    "device": "cpu",
    "tp": 2,
    "layers": 1,
    "hidden": 32,
    "heads": 2,
    "ffn": 64,
    "kv_len": 16,
    "batch": 1,
    "blocks": 3,
    "block_ms": 1.0,
    "warmup_s": 0.01,
    "matmul_n": 32,
    "busbw_bytes": 4096,
}


@pytest.mark.slow
def test_snapshot_canary_on_cpu_with_two_gloo_ranks(tmp_path):
    doc = run_for_snapshot({**TINY, "processes": 1})
    path = tmp_path / "b.json"
    document.save(doc, path)
    loaded = document.load(path)
    names = [r["name"] for r in loaded["results"]]
    assert names[:2] == ["canary.verify_step_ms", "canary.verified_tokens_per_s"]
    assert {
        "canary.compute_ms",
        "canary.allreduce_us",
        "component.matmul_tflops",
        "component.allreduce_busbw_gbps",
    } <= set(names)
    step = loaded["results"][0]
    assert (
        step["unit"] == "ms"
        and step["higher_is_better"] is False
        and len(step["process_medians"]) == 1
    )
    assert "compute" in step["description"] and "2 x all-reduce" in step["description"]
    cfg = loaded["config"]
    assert cfg["tp"] == 2 and cfg["dtype"] == "float32" and cfg["message_bytes"] == 1 * 5 * 32 * 4
    assert loaded["telemetry"]["missing"] == "not_applicable"
    proc = loaded["processes"][0]
    assert len(proc["pids"]) == 2 and set(proc["metrics"]) == {
        "compute",
        "allreduce",
        "allreduce_busbw",
        "matmul",
    }
    assert loaded["summary"].startswith("canary.verify_step_ms ")


@pytest.mark.slow
def test_cli_canary_interleaved_b_side_writes_two_files(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    r = CliRunner().invoke(
        main,
        [
            "bench",
            "-q",
            "--device",
            "cpu",
            "--tp",
            "2",
            "--layers",
            "1",
            "--hidden",
            "32",
            "--heads",
            "2",
            "--ffn",
            "64",
            "--kv-len",
            "16",
            "--batch",
            "1",
            "--blocks",
            "3",
            "--block-ms",
            "1",
            "--warmup",
            "0.01",
            "--processes",
            "1",
            "-o",
            str(a),
            "--b-env",
            "FORENSICS_X=1",
            "--b-output",
            str(b),
        ],
    )
    assert r.exit_code == 3, r.output  # one process a side can never support a verdict
    assert "too few processes" in r.output
    assert document.load(b)["config"]["env"] == {"FORENSICS_X": "1"}
    assert document.load(a)["config"]["env"] == {}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"heads": 3}, "--hidden 128 is not a multiple of --heads 3"),
        ({"tp": 3}, "must both divide by --tp 3"),
        ({"layers": 0}, "--layers must be at least 1"),
        ({"block_ms": 0.5}, "at least 1 ms"),
        ({"variant": "graph"}, "--cuda-graph needs a GPU"),
    ],
)
def test_bad_sizes_are_refused(change, message):
    cfg = CanaryConfig.defaults("cpu", 2)
    for k, v in change.items():
        setattr(cfg, k, v)
    with pytest.raises(BadInputError, match=message):
        cfg.validate()


def test_gpu_defaults_and_message_size():
    cfg = CanaryConfig.defaults("cuda", 2).validate()
    assert (
        cfg.layers,
        cfg.hidden,
        cfg.heads,
        cfg.ffn,
        cfg.draft_tokens,
        cfg.batch,
        cfg.kv_len,
    ) == (16, 4096, 32, 14336, 4, 4, 2048)
    assert cfg.dtype == "bfloat16" and cfg.variant == "split"
    assert cfg.message_bytes == 4 * 5 * 4096 * 2  # batch x (k+1) x hidden x bf16
    assert cfg.allreduces_per_step == 32
    assert CanaryConfig.defaults("cuda", 1).allreduces_per_step == 0


def test_cli_refuses_graph_on_cpu():
    r = CliRunner().invoke(main, ["bench", "--device", "cpu", "--cuda-graph"])
    assert (
        r.exit_code == 2
        and r.output.strip() == "forensics: error: --cuda-graph needs a GPU (device cuda)"
    )


@pytest.mark.slow
def test_a_failing_rank_is_one_clear_error():
    # a GPU canary on this CPU-only torch: every rank fails in torch.cuda; no hang, one line
    from forensics.bench.harness import launch

    cfg = CanaryConfig.defaults("cuda", 2)
    with pytest.raises(BadInputError) as exc:
        launch(cfg, timeout_s=120)
    msg = str(exc.value)
    assert msg.startswith("canary process failed (rank exited with status 1: ")
    assert "\n" not in msg and "CUDA is not available to torch" in msg and "use --device cpu" in msg


class _FakeSampler:
    summary = {
        "duration_s": 1.0,
        "interval_s": 0.1,
        "gpus": {"GPU-0": {"index": 0, "reason_fraction": {}}},
    }

    def __init__(self, interval_s):
        assert interval_s == 0.1

    def start(self):
        return self

    def stop(self):
        return dict(self.summary)


class _BrokenSampler(_FakeSampler):
    def start(self):
        raise RuntimeError("NVML_ERROR_UNINITIALIZED")


def test_telemetry_records_the_sampler_summary_or_why_not(monkeypatch):
    from forensics.bench import session

    monkeypatch.setattr(session, "Sampler", _FakeSampler)
    with session.telemetry(True) as tel:
        pass
    assert tel["gpus"]["GPU-0"]["index"] == 0
    monkeypatch.setattr(session, "Sampler", _BrokenSampler)
    with session.telemetry(True) as tel:
        pass
    assert tel == {"missing": "error", "detail": "sampler did not start: NVML_ERROR_UNINITIALIZED"}
