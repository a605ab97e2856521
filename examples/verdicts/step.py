"""A GPU-bound user step whose work scales with STEP_SCALE (1.0 = as it was; 1.01 = 1% more work).

Each timed block runs round(200 * STEP_SCALE) bf16 4096x4096 matmuls (so 1.01 and 1.02 are exact: 202, 204);
prints one JSON line per block, {"metric": "step_ms", "value": ms}, timed with CUDA events.
On a machine without CUDA it runs float32 512x512 matmuls on the CPU (for trying the script only).
"""

import json
import os
import time

import torch

scale = float(os.environ.get("STEP_SCALE", "1.0"))
cuda = torch.cuda.is_available()
n = 4096 if cuda else 512
dev = "cuda" if cuda else "cpu"
x = torch.randn(n, n, device=dev, dtype=torch.bfloat16 if cuda else torch.float32)
iters = round(200 * scale) if cuda else round(100 * scale)


def block():
    for _ in range(iters):
        torch.mm(x, x)


for _ in range(20):
    block()
for _ in range(30):
    if cuda:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        block()
        e.record()
        e.synchronize()
        ms = s.elapsed_time(e)
    else:
        t = time.perf_counter()
        block()
        ms = (time.perf_counter() - t) * 1e3
    print(json.dumps({"metric": "step_ms", "value": ms}), flush=True)
