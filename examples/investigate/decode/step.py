"""The user's step in the remembered-baseline scenarios (a stand-in for a decode loop): project the hidden
state onto the vocabulary and pick the next token, through ``decode.sampler.next_token``.

Sizes: batch 64, hidden 2048, vocabulary 131072 on a GPU (bf16); 8 x 256 x 4096 on CPU (float32, a
try-out only). It prints one JSON line per timing of ITERATIONS steps, as ``forensics investigate --cmd``
reads: ``{"metric": "decode_ms", "value": 0.21}``.
"""

import json
import os
import time

import torch
from decode.sampler import next_token

TIMINGS = 10
ITERATIONS = int(os.environ.get("DECODE_ITERATIONS", "200"))


def main():
    gpu = torch.cuda.is_available()
    dev = torch.device("cuda:0" if gpu else "cpu")
    batch, hidden, vocab = (64, 2048, 131072) if gpu else (8, 256, 4096)
    dtype = torch.bfloat16 if gpu else torch.float32
    if not gpu:
        torch.set_num_threads(1)
    gen = torch.Generator(device=dev).manual_seed(0)
    h = torch.randn(batch, hidden, device=dev, dtype=dtype, generator=gen)
    w = torch.randn(vocab, hidden, device=dev, dtype=dtype, generator=gen) / hidden**0.5
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    for _ in range(20):  # warm-up: CUDA context, cuBLAS heuristics, the allocator's first blocks
        next_token(h, w)
    sync()
    for _ in range(TIMINGS):
        sync()
        t0 = time.perf_counter()
        for _ in range(ITERATIONS):
            next_token(h, w)
        sync()
        ms = (time.perf_counter() - t0) * 1e3 / ITERATIONS
        print(json.dumps({"metric": "decode_ms", "value": round(ms, 5)}), flush=True)


if __name__ == "__main__":
    main()
