#!/bin/sh
# Issue 14's facts on the GPU machine. Usage: run.sh OUTDIR   (1 GPU is enough; about 2 minutes)
# (a) a snapshot with the new facts: ACS on the bridges above each GPU, IOMMU mode, kernel command line,
#     each NCCL rank's CPU/NUMA binding against its GPU's node (--nccl-init), the host's interfaces;
# (b) gpu.memory from a --sample window while a step holds 93% of the GPU's memory and computes;
# (c) the spin signature is not raised by an ordinary loaded GPU (bf16 matmul window).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run.sh OUTDIR}; mkdir -p "$out"
: "${FORENSICS:=forensics}"
: "${PYTHON:=python3}"
export NCCL_NVLS_ENABLE=0
t0=$(date +%s)
$FORENSICS snapshot --label facts --nccl-init --timeout 20 -o "$out/snapshot-facts.json" >"$out/snapshot-facts.txt" 2>&1 || true
window() {  # window NAME MODE: start the step, sample 6 s of it with the gpu probe, wait for the step
    $PYTHON "$here/load.py" "$2" 16 >"$out/$1-step.json" & pid=$!
    sleep 7   # torch import, allocation, warm-up
    $FORENSICS snapshot --label "$1" --probe gpu --sample 6 -o "$out/$1.json" >"$out/$1.txt" 2>&1 || true
    wait $pid || true
}
window matmul matmul
window fill fill
$FORENSICS diff "$out/matmul.json" "$out/fill.json" -o "$out/diff-matmul-to-fill.json" >/dev/null 2>&1 || true
$FORENSICS diff "$out/matmul.json" "$out/fill.json" -o "$out/diff-matmul-to-fill.md" >/dev/null 2>&1 || true
rc=0
$PYTHON "$here/summary.py" "$out" >"$out/summary.txt" 2>&1 || rc=$?
cat "$out/summary.txt"
echo "took $(( $(date +%s) - t0 )) s; summary exit $rc" | tee -a "$out/summary.txt"
exit $rc
