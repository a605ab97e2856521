#!/bin/sh
# The acceptance runs of issue 6 on a 2 x H200 machine (the bench files in this folder).
# Usage: OUT=<folder> sh examples/h200x2/bench/run.sh ; then compare with `forensics bench compare`.
# Every run uses the canary's defaults (TP over both GPUs, 6 fresh processes, 60 s budget).
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
t0=$(date +%s)
stamp() { echo "$1 rc=$2 at +$(( $(date +%s) - t0 )) s"; }
forensics bench -q -o "$OUT/a1.json"; stamp "a1 (baseline)" $?
# (c) a second process loads GPU 0 with back-to-back bf16 matmuls during this run only
python3 -c '
import time, torch
a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
end = time.time() + 120
while time.time() < end:
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
' &
LOAD=$!
sleep 5
forensics bench -q -o "$OUT/load.json"; stamp "load (GPU 0 shared)" $?
kill "$LOAD"; wait "$LOAD" 2>/dev/null
forensics bench -q -o "$OUT/a2.json"; stamp "a2 (baseline again)" $?
# (b) a real NCCL change: no peer-to-peer (NVLink) transport
forensics bench -q --env NCCL_P2P_DISABLE=1 -o "$OUT/p2p.json"; stamp "p2p (NCCL_P2P_DISABLE=1)" $?
