"""One rank of one fresh canary process: build, warm up, time blocks, write JSON.

Run by the harness as ``python -m forensics.bench.worker CONFIG.json OUT.json``
with ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` set (one
process per GPU; gloo processes on CPU). Imports torch: never imported by
the CLI or the snapshot.

Timing: a *block* is ``n`` back-to-back calls between two CUDA events
(``torch.cuda.Event(enable_timing=True)``; ``time.perf_counter`` on CPU),
sized to ``block_ms`` (>= 1 ms). Before each block the ranks meet at a
barrier. For the all-reduce and copy loops on GPU the stream first runs a
``torch.cuda._sleep`` spin, so the host has queued the whole block before the
start event fires: the block measures GPU execution, not launch rate
(``host_bound_blocks`` counts blocks whose start fired before queueing ended).
Warm-up is checked: at least ``warmup_s``, then windows of 5 blocks until the
medians of the last two windows differ by < 2% (``converged``), at most
``5 x warmup_s + 0.5 s``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import threading
import time
from typing import Callable, Mapping

import torch
import torch.distributed as dist

from forensics.bench.config import CanaryConfig, Variant

WINDOW = 5


class Rank:
    """This process's rank, device and timer."""

    def __init__(self, cfg: CanaryConfig):
        self.cfg = cfg
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.cuda = cfg.device == "cuda"
        if self.cuda and not torch.cuda.is_available():
            raise SystemExit(
                f"CUDA is not available to torch {torch.__version__} in this process (no GPU, a "
                "CPU-only build, or CUDA_VISIBLE_DEVICES hides it); use --device cpu"
            )
        if self.cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", self.rank)))
            self.device = torch.device("cuda", torch.cuda.current_device())
        else:
            self.device = torch.device("cpu")
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, self.world)))
        if self.world > 1:
            kw = {"device_id": self.device} if self.cuda else {}
            dist.init_process_group(
                "nccl" if self.cuda else "gloo", rank=self.rank, world_size=self.world, **kw
            )
        self.sleep_cycles = self._calibrate_sleep() if self.cuda else 0

    def _calibrate_sleep(self) -> float:
        """GPU clock cycles per ms of ``torch.cuda._sleep`` (measured with CUDA events)."""
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1_000_000)
        s.record()
        torch.cuda._sleep(2_000_000)
        e.record()
        e.synchronize()
        return 2_000_000 / max(s.elapsed_time(e), 1e-3)

    def barrier(self) -> None:
        """Meet the other ranks (``dist.barrier``) and drain this GPU (``torch.cuda.synchronize``)."""
        if self.world > 1:
            dist.barrier()
        if self.cuda:
            torch.cuda.synchronize()

    def block(
        self, fn: Callable[[], object], n: int, queue_ahead_ms: float = 0.0
    ) -> tuple[float, bool]:
        """Time ``n`` calls of ``fn``; returns (ms per call, host_bound)."""
        if not self.cuda:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            return (time.perf_counter() - t0) * 1e3 / n, False
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if queue_ahead_ms > 0:
            torch.cuda._sleep(int(queue_ahead_ms * self.sleep_cycles))
        start.record()
        for _ in range(n):
            fn()
        host_bound = queue_ahead_ms > 0 and start.query()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / n, bool(host_bound)

    def measure(self, fn: Callable[[], object], *, queue_ahead: bool = False) -> dict:
        """Calibrate, warm up (checked) and time ``cfg.blocks`` blocks of ``fn``."""
        cfg = self.cfg
        fn()
        self.barrier()
        one, _ = self.block(fn, 1)
        ahead = 0.0
        if queue_ahead and self.cuda:
            # host time to enqueue 10 calls (no sync inside): the spin must outlast enqueueing a block
            self.barrier()
            t0 = time.perf_counter()
            for _ in range(10):
                fn()
            enqueue_ms = (time.perf_counter() - t0) * 1e3 / 10
            self.barrier()
            one, _ = self.block(fn, 10, min(50.0, 1.0 + 30 * enqueue_ms))
        # collectives and copies queue ahead behind a spin; shorter blocks keep the spin short
        target = max(1.0, min(cfg.block_ms, 2.0)) if queue_ahead and self.cuda else cfg.block_ms
        n = self._agree(max(1, math.ceil(target / max(one, 1e-4))))
        if queue_ahead and self.cuda:
            ahead = float(self._agree(math.ceil(min(50.0, 1.0 + 2 * n * enqueue_ms))))
        warm: list[float] = []
        t_start = time.perf_counter()
        converged = False
        limit = 5 * cfg.warmup_s + 0.5
        while True:
            self.barrier()
            warm.append(self.block(fn, n, ahead)[0])
            elapsed = time.perf_counter() - t_start
            done = False
            if elapsed >= cfg.warmup_s and len(warm) >= 2 * WINDOW:
                a = statistics.median(warm[-2 * WINDOW : -WINDOW])
                b = statistics.median(warm[-WINDOW:])
                converged = abs(b / a - 1) < 0.02
                done = converged or elapsed >= limit
            if self._agree(int(done), op="min"):
                break
        per_call, host_bound = [], 0
        for _ in range(cfg.blocks):
            self.barrier()
            ms, hb = self.block(fn, n, ahead)
            per_call.append(ms)
            host_bound += hb
        return {
            "per_call_ms": per_call,
            "calls_per_block": n,
            "queue_ahead_ms": ahead,
            "host_bound_blocks": host_bound,
            "warmup": {
                "blocks": len(warm),
                "converged": converged,
                "seconds": round(time.perf_counter() - t_start, 3),
            },
        }

    def _agree(self, value: int, op: str = "max") -> int:
        """The max (or min) of ``value`` over ranks, so every rank runs the same loop."""
        if self.world == 1:
            return value
        t = torch.tensor([value], dtype=torch.int64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.MIN)
        return int(t.item())


_OFF_WORDS = ("", "0", "false", "no", "off")


def graph_blocker(env: Mapping[str, str]) -> str | None:
    """Why CUDA graphs cannot be captured in this environment, or ``None`` when they can.

    ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` turns PyTorch's caching allocator off, and
    ``torch.cuda.graph`` capture needs it (its private memory pool): capture fails
    with a CUDA error (seen on the H200 with torch 2.11). Source: the variable as
    this process sees it (``os.environ``); PyTorch documents it in "CUDA Environment
    Variables" ("If set to 1, disables caching of memory allocations in CUDA").
    """
    value = env.get("PYTORCH_NO_CUDA_MEMORY_CACHING")
    if value is None or value.strip().lower() in _OFF_WORDS:
        return None
    return (
        f"PYTORCH_NO_CUDA_MEMORY_CACHING={value} turns off the caching allocator that CUDA graph capture "
        "needs"
    )


def _allreduce(t: torch.Tensor) -> None:
    dist.all_reduce(t)


def run(cfg: CanaryConfig) -> dict:
    """Build the canary on this rank and time every metric; returns the rank's result."""
    t0 = time.perf_counter()
    r = Rank(cfg)
    info = {"rank": r.rank, "world": r.world, "torch": torch.__version__, "metrics": {}}
    if r.cuda:
        info["device_name"] = torch.cuda.get_device_name(r.device)
        info["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if r.world > 1 else None
    info["init_s"] = round(time.perf_counter() - t0, 3)
    m = info["metrics"]
    variant = cfg.variant
    with torch.inference_mode():
        full = variant != Variant.SPLIT.value and r.world > 1
        model = __import__("forensics.bench.canary", fromlist=["VerifyModel"]).VerifyModel(
            cfg, r.device, _allreduce if full else (lambda t: None)
        )
        no_graph = graph_blocker(os.environ) if r.cuda else None
        if no_graph and variant in (Variant.SPLIT.value, Variant.GRAPH.value):
            info["graph_skipped"] = no_graph  # launched eagerly instead; the document says so
            variant = Variant.SPLIT.value if variant == Variant.SPLIT.value else Variant.EAGER.value
        guard = (
            _guard(cfg.graph_timeout_s)
            if full and variant == Variant.GRAPH.value and not no_graph
            else None
        )
        if r.cuda and variant in (Variant.SPLIT.value, Variant.GRAPH.value) and not no_graph:
            step = _graph(model.step)
        else:
            step = model.step
        split = variant == Variant.SPLIT.value and r.world > 1
        m["compute" if split else "step"] = r.measure(step)
        if guard is not None:
            guard.cancel()
        if r.world > 1:
            msg = torch.randn(cfg.batch, cfg.tokens, cfg.hidden, device=r.device).to(model.dtype)
            m["allreduce"] = r.measure(lambda: dist.all_reduce(msg), queue_ahead=True)
            big = torch.ones(cfg.busbw_bytes // 4, device=r.device, dtype=torch.float32)
            m["allreduce_busbw"] = r.measure(lambda: dist.all_reduce(big), queue_ahead=True)
            del big
        a = torch.randn(cfg.matmul_n, cfg.matmul_n, device=r.device).to(model.dtype)
        bm = torch.randn(cfg.matmul_n, cfg.matmul_n, device=r.device).to(model.dtype)
        m["matmul"] = r.measure(lambda: a @ bm)
        a = bm = None  # free both before the next component
        _p2p(r, cfg, info)
        if r.cuda and cfg.copy_bytes > 0:
            host = torch.empty(cfg.copy_bytes, dtype=torch.uint8, pin_memory=True)
            dev = torch.empty(cfg.copy_bytes, dtype=torch.uint8, device=r.device)
            m["h2d"] = r.measure(lambda: dev.copy_(host, non_blocking=True), queue_ahead=True)
            m["d2h"] = r.measure(lambda: host.copy_(dev, non_blocking=True), queue_ahead=True)
    info["total_s"] = round(time.perf_counter() - t0, 3)
    if r.world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return info


P2P_LATENCY_BYTES = 4


def _p2p(r: Rank, cfg: CanaryConfig, info: dict) -> None:
    """GPU-to-GPU copies: each rank copies ``cfg.p2p_bytes`` (and 4 bytes, for latency) from its GPU to the
    next one (``device (i + 1) % count``), all ranks at once; skipped with a reason in ``info["p2p_skipped"]``.

    ``torch.cuda.can_device_access_peer`` is recorded: without peer access the copy is staged through
    host memory by the driver, and the bandwidth shows it.
    """
    if not r.cuda or cfg.p2p_bytes <= 0:
        info["p2p_skipped"] = "CPU run: no GPU-to-GPU copy" if not r.cuda else "p2p_bytes is 0"
        return
    if r.world < 2:
        info["p2p_skipped"] = "one rank (tp=1): GPU-to-GPU copies need a second GPU"
        return
    count = torch.cuda.device_count()
    if count < 2:
        info["p2p_skipped"] = (
            f"each rank sees {count} GPU (CUDA_VISIBLE_DEVICES per rank): no peer to copy to"
        )
        return
    me = r.device.index
    peer = torch.device("cuda", (me + 1) % count)
    info["p2p_peer"] = peer.index
    info["p2p_access"] = bool(torch.cuda.can_device_access_peer(me, peer.index))
    src = torch.empty(cfg.p2p_bytes, dtype=torch.uint8, device=r.device)
    dst = torch.empty(cfg.p2p_bytes, dtype=torch.uint8, device=peer)
    info["metrics"]["p2p"] = r.measure(lambda: dst.copy_(src, non_blocking=True), queue_ahead=True)
    src = dst = None  # free both before the latency buffers
    s1 = torch.empty(P2P_LATENCY_BYTES, dtype=torch.uint8, device=r.device)
    d1 = torch.empty(P2P_LATENCY_BYTES, dtype=torch.uint8, device=peer)
    info["metrics"]["p2p_latency"] = r.measure(
        lambda: d1.copy_(s1, non_blocking=True), queue_ahead=True
    )


def _guard(seconds: float) -> threading.Timer:
    """A watchdog that ends this process with status 124 after ``seconds`` (cancel it when done).

    Guards capturing and replaying a CUDA graph that holds torch.distributed
    all-reduces, which hung on torch 2.11 / NCCL 2.28.9.
    """

    def expire() -> None:
        sys.stderr.write(
            f"forensics-bench: the CUDA graph holding all-reduces did not capture and replay within "
            f"{seconds:g} s (known hang with torch.distributed collectives on some torch/NCCL "
            "versions); use the default split variant\n"
        )
        sys.stderr.flush()
        os._exit(124)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def _graph(fn: Callable[[], torch.Tensor]) -> Callable[[], object]:
    """Capture ``fn`` in a CUDA graph after 3 warm-up calls on a side stream; returns its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay()
    torch.cuda.synchronize()
    return g.replay


def main(argv: list[str]) -> int:
    """Entry point: ``worker CONFIG.json OUT.json``; writes this rank's result to OUT.json."""
    if len(argv) != 3:
        sys.stderr.write("usage: python -m forensics.bench.worker CONFIG.json OUT.json\n")
        return 2
    with open(argv[1], encoding="utf-8") as fh:
        cfg = CanaryConfig.from_json(json.load(fh))
    info = run(cfg)
    tmp = argv[2] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(info, fh)
    os.replace(tmp, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
