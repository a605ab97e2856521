"""The per-GPU canary components, run in-process by every rank of ``fleet snapshot --bench``.

Each rank times, on its own device, the canary's single-GPU components
(:mod:`forensics.bench.worker` does the timing: blocks of >= 1 ms between CUDA
events, a checked warm-up, ``blocks`` timed blocks; the copies are queued
behind a ``torch.cuda._sleep`` spin so a block measures the GPU, not launch
rate):

- ``matmul_tflops``: square bf16 matmul of ``matmul_n`` (8192 on GPU), TFLOP/s = 2 n^3 / time;
  on CPU fp32 n = 128, reported as ``matmul_gflops``;
- ``h2d_gbps`` / ``d2h_gbps``: pinned host<->device copies of 64 MiB (GPU only), GB/s (1e9 bytes/s).

No collective runs here (NCCL may be the thing that is broken); the fleet
report compares these figures across peers of the same GPU model. Each
figure is the median over blocks, with the blocks' IQR/median as its noise.
Imports torch (only ``--bench`` loads this module).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from forensics.bench.config import CanaryConfig


def _device_uuid(torch: Any, index: int) -> str | None:
    """``GPU-<uuid>`` of CUDA device ``index`` (``torch.cuda.get_device_properties().uuid``), or None."""
    try:
        raw = str(torch.cuda.get_device_properties(index).uuid)
    except Exception:
        return None
    return raw if raw.startswith("GPU-") else f"GPU-{raw}"


def _summary(per_call_ms: list[float], scale: float) -> dict[str, float]:
    """Median figure (``scale / ms``) over blocks and the blocks' IQR/median."""
    vals = sorted(scale / max(ms, 1e-9) for ms in per_call_ms)
    med = statistics.median(vals)
    q = statistics.quantiles(vals, n=4) if len(vals) >= 2 else [med, med, med]
    return {
        "value": med,
        "noise_iqr_over_median": (q[2] - q[0]) / med if med else 0.0,
        "blocks": len(vals),
    }


def run(local_rank: int, local_world: int = 1, device: str | None = None) -> dict[str, Any]:
    """Time this rank's components on its device.

    Args:
        local_rank: selects the CUDA device (``torch.cuda.set_device(local_rank)``,
            as torchrun's convention); ignored on CPU.
        local_world: ranks on this node; on CPU each gets ``cpu_count // local_world`` threads.
        device: ``cuda`` or ``cpu``; default ``cuda`` when ``torch.cuda.is_available()``.

    Returns:
        ``{"device": "cuda"|"cpu", "device_name", "gpu_uuid", "cuda_index", "torch",
        "config": {...}, "figures": {name: {"value", "unit", "noise_iqr_over_median", "blocks"}},
        "duration_s"}``.

    Raises:
        RuntimeError: CUDA asked for but not available, or a local rank beyond the visible devices.
    """
    import torch

    from forensics.bench.worker import Rank

    t0 = time.perf_counter()
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    cfg = CanaryConfig.defaults(device, 1)
    r = _LocalRank(cfg, local_rank, local_world, torch)
    out: dict[str, Any] = {
        "device": device,
        "torch": torch.__version__,
        "config": {
            "matmul_n": cfg.matmul_n,
            "copy_bytes": cfg.copy_bytes,
            "dtype": cfg.dtype,
            "blocks": cfg.blocks,
            "block_ms": cfg.block_ms,
        },
    }
    if r.cuda:
        out.update(
            device_name=torch.cuda.get_device_name(r.device),
            cuda_index=r.device.index,
            gpu_uuid=_device_uuid(torch, r.device.index),
        )
    figs: dict[str, Any] = {}
    dtype = getattr(torch, cfg.dtype)
    with torch.inference_mode():
        n = cfg.matmul_n
        a = torch.randn(n, n, device=r.device).to(dtype)
        b = torch.randn(n, n, device=r.device).to(dtype)
        m = Rank.measure(r, lambda: a @ b)
        if r.cuda:
            figs["matmul_tflops"] = {
                **_summary(m["per_call_ms"], 2 * n**3 / 1e9),
                "unit": "TFLOP/s",
            }
        else:
            figs["matmul_gflops"] = {
                **_summary(m["per_call_ms"], 2 * n**3 / 1e6),
                "unit": "GFLOP/s",
            }
        a = b = None  # free both before the next figure
        if r.cuda and cfg.copy_bytes > 0:
            host = torch.empty(cfg.copy_bytes, dtype=torch.uint8, pin_memory=True)
            dev = torch.empty(cfg.copy_bytes, dtype=torch.uint8, device=r.device)
            for name, fn in (
                ("h2d_gbps", lambda: dev.copy_(host, non_blocking=True)),
                ("d2h_gbps", lambda: host.copy_(dev, non_blocking=True)),
            ):
                m = Rank.measure(r, fn, queue_ahead=True)
                figs[name] = {**_summary(m["per_call_ms"], cfg.copy_bytes / 1e6), "unit": "GB/s"}
            del host, dev
    out["figures"] = figs
    out["duration_s"] = round(time.perf_counter() - t0, 3)
    return out


class _LocalRank:
    """A one-rank stand-in for :class:`forensics.bench.worker.Rank` (no process group: world 1).

    ``Rank.measure``/``block``/``barrier`` read only these attributes; with world 1 they never
    call a collective.
    """

    def __init__(self, cfg: CanaryConfig, local_rank: int, local_world: int, torch: Any):
        from forensics.bench.worker import Rank

        self.cfg = cfg
        self.rank = 0
        self.world = 1
        self.cuda = cfg.device == "cuda"
        if self.cuda:
            if not torch.cuda.is_available():
                raise RuntimeError("CUDA is not available to torch in this rank")
            count = torch.cuda.device_count()
            if local_rank >= count:
                raise RuntimeError(
                    f"local rank {local_rank} but only {count} CUDA device(s) visible"
                )
            torch.cuda.set_device(local_rank)
            self.device = torch.device("cuda", local_rank)
        else:
            self.device = torch.device("cpu")
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_world)))
        self.sleep_cycles = Rank._calibrate_sleep(self) if self.cuda else 0
        self._rank = Rank

    def barrier(self) -> None:
        self._rank.barrier(self)

    def block(self, fn, n, queue_ahead_ms=0.0):
        return self._rank.block(self, fn, n, queue_ahead_ms)

    def _agree(self, value: int, op: str = "max") -> int:
        return value
