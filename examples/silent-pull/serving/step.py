"""The user's serving step in the "silent git pull" scenario (a stand-in for real serving code).

A tensor-parallel decoder step: each of 2 ranks holds half of every layer's
weights, multiplies, and all-reduces the partial result through
``distributed.comm.tp_all_reduce`` (as Megatron-style row-parallel layers do).
It prints one JSON line per timed block of steps (slowest rank), as
``forensics bench --cmd`` and ``forensics bisect --cmd`` expect:

    {"metric": "step_ms", "value": 3.21}

Runs on 2 GPUs with NCCL, or on CPU with gloo. The ranks are forked from this
process (CUDA is not initialised before the fork), so torch is imported once.
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from distributed.comm import tp_all_reduce

LAYERS = 24
HIDDEN = 8192
TOKENS = 512  # enough work per launch that the GPU, not host launch jitter, sets the step time
BLOCKS = 20
STEPS_PER_BLOCK = 10


def layer(x, w1, w2):
    return tp_all_reduce((x @ w1) @ w2)


def worker(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    gpu = torch.cuda.is_available() and torch.cuda.device_count() >= world
    dev = torch.device(f"cuda:{rank}") if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(dev)
    dist.init_process_group(
        "nccl" if gpu else "gloo", rank=rank, world_size=world, device_id=dev if gpu else None
    )
    dtype = torch.bfloat16 if gpu else torch.float32
    hidden = HIDDEN if gpu else 256
    torch.manual_seed(rank)
    ws = [
        (
            torch.randn(hidden, hidden // world, device=dev, dtype=dtype) * 0.02,
            torch.randn(hidden // world, hidden, device=dev, dtype=dtype) * 0.02,
        )
        for _ in range(LAYERS)
    ]
    x = torch.randn(TOKENS if gpu else 8, hidden, device=dev, dtype=dtype)

    def step():
        y = x
        for w1, w2 in ws:
            y = layer(y, w1, w2)
        return y

    blocks, steps = (BLOCKS, STEPS_PER_BLOCK) if gpu else (5, 2)  # gloo on CPU is ~100x slower
    for _ in range(20 if gpu else 3):
        step()
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    sync()
    for _ in range(blocks):
        dist.barrier()
        sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        ms = torch.tensor(
            [(time.perf_counter() - t0) * 1e3 / steps], device=dev, dtype=torch.float64
        )
        dist.all_reduce(ms, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(json.dumps({"metric": "step_ms", "value": round(ms.item(), 4)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    world = 2
    port = 29500 + os.getpid() % 1000
    mp.start_processes(worker, args=(world, port), nprocs=world, join=True, start_method="fork")
    sys.exit(0)
