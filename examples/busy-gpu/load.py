"""Another job on GPU 0: back-to-back bf16 8192^3 matmuls until killed (or 300 s)."""

import time

import torch

a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
t_end = time.time() + 300
while time.time() < t_end:
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
