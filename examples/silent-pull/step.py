"""The user's serving step in the "silent git pull" scenario (a stand-in for real serving code).

A tensor-parallel decoder step: each of 2 ranks holds half of every layer's
weights, multiplies, and all-reduces the partial result, once per layer half
(as Megatron-style column/row parallel layers do). It prints one JSON line per
timed block of steps, as `forensics bench --cmd` expects:

    {"metric": "step_ms", "value": 3.21}

The scenario's "slow" commit flips EXTRA_COPY_ALLREDUCE to True: an extra
out-of-place copy and all-reduce per layer, the kind of change that slips into
a communicator refactor. Runs on 2 GPUs with NCCL, or on CPU with gloo.
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

LAYERS = 24
HIDDEN = 4096
TOKENS = 8
BLOCKS = 20
STEPS_PER_BLOCK = 10
EXTRA_COPY_ALLREDUCE = False


def layer(x, w1, w2):
    h = x @ w1
    out = h @ w2
    dist.all_reduce(out)
    if EXTRA_COPY_ALLREDUCE:
        extra = out.clone()
        dist.all_reduce(extra)
        out = out + extra * 0
    return out


def worker(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    gpu = torch.cuda.is_available() and torch.cuda.device_count() >= world
    dev = torch.device(f"cuda:{rank}") if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(dev)
    dist.init_process_group("nccl" if gpu else "gloo", rank=rank, world_size=world, device_id=dev if gpu else None)
    dtype = torch.bfloat16 if gpu else torch.float32
    hidden = HIDDEN if gpu else 256
    g = torch.Generator(device="cpu").manual_seed(rank)
    ws = [(torch.randn(hidden, hidden // world, generator=g).to(dev, dtype) * 0.02,
           torch.randn(hidden // world, hidden, generator=g).to(dev, dtype) * 0.02) for _ in range(LAYERS)]
    x = torch.randn(TOKENS, hidden, generator=g).to(dev, dtype)

    def step():
        y = x
        for w1, w2 in ws:
            y = layer(y, w1, w2)
        return y

    for _ in range(20):
        step()
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    sync()
    for _ in range(BLOCKS):
        dist.barrier()
        sync()
        t0 = time.perf_counter()
        for _ in range(STEPS_PER_BLOCK):
            step()
        sync()
        ms = torch.tensor([(time.perf_counter() - t0) * 1e3 / STEPS_PER_BLOCK], device=dev, dtype=torch.float64)
        dist.all_reduce(ms, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(json.dumps({"metric": "step_ms", "value": round(ms.item(), 4)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    world = 2
    port = 29500 + os.getpid() % 1000
    mp.spawn(worker, args=(world, port), nprocs=world, join=True)
    sys.exit(0)
