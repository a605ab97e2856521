"""A user step whose work scales exactly with STEP_SCALE: a loop of bf16 matmuls (fp32 on CPU).

Prints one JSON line per timed block, {"metric": "step_ms", "value": ms}: what
`forensics bench --cmd` reads. The loop runs round(ITERS x STEP_SCALE) matmuls of
N x N, so STEP_SCALE=1.01 is 1% more work. On the GPU each block is timed with CUDA
events; on the CPU (a trial run) with perf_counter. STEP_N, STEP_ITERS and
STEP_BLOCKS size it (defaults: 4096, 400, 12 on GPU; 128, 40, 6 on CPU).
"""

import json
import os
import time

import torch

cuda = torch.cuda.is_available()
scale = float(os.environ.get("STEP_SCALE", "1.0"))
n = int(os.environ.get("STEP_N", "4096" if cuda else "128"))
iters = round(int(os.environ.get("STEP_ITERS", "400" if cuda else "40")) * scale)
blocks = int(os.environ.get("STEP_BLOCKS", "12" if cuda else "6"))
dev = "cuda" if cuda else "cpu"
dtype = torch.bfloat16 if cuda else torch.float32
torch.manual_seed(0)
a = torch.randn(n, n, device=dev, dtype=dtype)
b = torch.randn(n, n, device=dev, dtype=dtype)
c = torch.empty(n, n, device=dev, dtype=dtype)


def block() -> float:
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            torch.matmul(a, b, out=c)
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    t0 = time.perf_counter()
    for _ in range(iters):
        torch.matmul(a, b, out=c)
    return (time.perf_counter() - t0) * 1e3


for _ in range(3):  # warm-up: cuBLAS heuristics, clocks
    block()
for _ in range(blocks):
    print(json.dumps({"metric": "step_ms", "value": block()}), flush=True)
