"""A GPU step for examples/facts/run.sh: ``load.py matmul SECONDS`` or ``load.py fill SECONDS [FRACTION]``.

``matmul``: back-to-back bf16 8192^3 matmuls (an ordinary compute-bound load: on the H200 100% SM and
21-23% memory utilization). ``fill``: first allocate GPU memory up to FRACTION of the total (default 0.93,
torch.cuda.mem_get_info), then the same matmul loop, so memory stays near full while the GPU works.
Prints one JSON line: mode, steps done, memory used/total at the end. Without a GPU it runs on the CPU
(small matrices) so the script's plumbing can be tried anywhere.
"""

import json
import sys
import time

import torch

mode, seconds = sys.argv[1], float(sys.argv[2])
fraction = float(sys.argv[3]) if len(sys.argv) > 3 else 0.93
cuda = torch.cuda.is_available()
dev = "cuda:0" if cuda else "cpu"
hold = None
if mode == "fill" and cuda:
    free, total = torch.cuda.mem_get_info()
    want = int(total * fraction) - (total - free)
    if want > 0:
        hold = torch.empty(want, dtype=torch.uint8, device=dev)
        hold.fill_(1)
n = 8192 if cuda else 256
dtype = torch.bfloat16 if cuda else torch.float32
a = torch.randn(n, n, device=dev, dtype=dtype)
b = torch.randn(n, n, device=dev, dtype=dtype)
steps, t_end = 0, time.time() + seconds
while time.time() < t_end:
    for _ in range(20):
        a @ b
    steps += 20
    if cuda:
        torch.cuda.synchronize()
out = {"mode": mode, "device": dev, "steps": steps, "seconds": seconds}
if cuda:
    free, total = torch.cuda.mem_get_info()
    out.update(mem_used_mib=(total - free) // 2**20, mem_total_mib=total // 2**20)
print(json.dumps(out), flush=True)
