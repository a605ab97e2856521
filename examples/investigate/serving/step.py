"""The user's step in the investigate scenarios (a stand-in for serving code): KV-cache block writes.

Each iteration allocates a 64 MiB block (1 MiB on CPU), fills it and frees it, through
``serving.kv_cache.write_block``: the allocation-heavy pattern that
``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` slows down (every iteration then goes to cudaMalloc/cudaFree).
Measured on one H200 (2026-12-01): 0.074 ms per iteration normally, 0.141 ms with the variable set.
It prints one JSON line per timing of 300 iterations, as ``forensics bench --cmd`` and
``forensics investigate --cmd`` read:

    {"metric": "block_write_ms", "value": 0.074}
"""

import json
import time

import torch
from serving.kv_cache import write_block

TIMINGS = 12
ITERATIONS = 300


def main():
    gpu = torch.cuda.is_available()
    dev = torch.device("cuda:0" if gpu else "cpu")
    nbytes = 64 << (20 if gpu else 10)  # 64 MiB; 64 KiB on CPU (malloc reuses it: no page faults)
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    if not gpu:
        torch.set_num_threads(1)  # a CPU fill of 64 KiB: one thread is steadier than a pool
    for _ in range(50):  # warm-up: CUDA context, the allocator's first blocks
        write_block(nbytes, dev)
    sync()
    for _ in range(TIMINGS):
        sync()
        t0 = time.perf_counter()
        for _ in range(ITERATIONS):
            write_block(nbytes, dev)
        sync()
        ms = (time.perf_counter() - t0) * 1e3 / ITERATIONS
        print(json.dumps({"metric": "block_write_ms", "value": round(ms, 5)}), flush=True)


if __name__ == "__main__":
    main()
