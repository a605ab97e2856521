#!/bin/sh
# Run the end-to-end scenarios on a machine with 2 GPUs. Usage: run_all.sh OUTDIR [aa busy-gpu nccl-lost silent-pull]
# The A/A scenario's second snapshot is reused as the busy-GPU scenario's "before" (both idle, with bench).
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run_all.sh OUTDIR [scenario...]}; shift
mkdir -p "$out"
[ $# -gt 0 ] || set -- aa busy-gpu nccl-lost silent-pull
for s in "$@"; do
    t0=$(date +%s)
    case $s in
        busy-gpu) if [ -f "$out/aa/after.json" ]; then sh "$here/busy-gpu/run.sh" "$out/busy-gpu" "$out/aa/after.json"
                  else sh "$here/busy-gpu/run.sh" "$out/busy-gpu"; fi ;;
        *) sh "$here/$s/run.sh" "$out/$s" ;;
    esac
    echo "$s: $(( $(date +%s) - t0 )) s" | tee -a "$out/timings.txt"
done
