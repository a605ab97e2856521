#!/bin/sh
# Scenario 3: a busy GPU. Usage: run.sh OUTDIR [BEFORE.json]  (needs a GPU)
# Before: the idle machine (pass an idle snapshot with bench to reuse it, e.g. the A/A one).
# After: another process runs bf16 matmuls on GPU 0 while the snapshot and its canary run.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
out=${1:?usage: run.sh OUTDIR [BEFORE.json]}; mkdir -p "$out"
if [ -n "${2:-}" ]; then cp "$2" "$out/before.json"; else snap "$out" before; fi
python3 "$here/load.py" & load=$!
trap 'kill $load 2>/dev/null || true' EXIT
sleep 8   # let the load start and reach its power limit
snap "$out" after
kill $load; wait $load 2>/dev/null || true
report "$out"
