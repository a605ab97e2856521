#!/bin/sh
# Scenario 1: NCCL tuning lost in the workers. Usage: run.sh OUTDIR  (needs 2 GPUs)
# Before: NCCL_ALGO/NCCL_PROTO set in the launching process and passed through the launch path.
# After: the same variables set, but the launch path drops them. The NCCL env probe (with a
# real NCCL communicator, --nccl-init) and the canary both start their workers through it.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
out=${1:?usage: run.sh OUTDIR}; mkdir -p "$out"
export NCCL_ALGO=Ring NCCL_PROTO=Simple
snap "$out" before --nccl-init --launcher "$here/keep-env.sh"
snap "$out" after --nccl-init --launcher "$here/drop-nccl-tuning.sh"
report "$out"
