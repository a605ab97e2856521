#!/bin/sh
# Issue 13's three-way verdicts on the GPU: the canary A/A, and a user step made 1% and 2% slower by
# scaling its work (step.py, STEP_SCALE). Usage: run.sh OUTDIR   (about 4 minutes on one H200)
# Each comparison is an interleaved A/B in one `forensics bench` call (--b-env), 6 fresh processes a side.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run.sh OUTDIR}; mkdir -p "$out"
: "${FORENSICS:=forensics}"
: "${PROCESSES:=6}"
export NCCL_NVLS_ENABLE=0
t0=$(date +%s)
step="${PYTHON:-python3} $here/step.py"
$FORENSICS bench --processes "$PROCESSES" -o "$out/canary-aa-a.json" --b-output "$out/canary-aa-b.json" --b-env FORENSICS_AA=1 >"$out/canary-aa.txt" 2>&1 || true
for pct in 0 1 2; do
    scale=$(${PYTHON:-python3} -c "print(1 + $pct / 100)")
    $FORENSICS bench --cmd "$step" --metric step_ms --processes "$PROCESSES" \
        --b-env STEP_SCALE="$scale" -o "$out/step-plus$pct-a.json" --b-output "$out/step-plus$pct-b.json" >"$out/step-plus$pct.txt" 2>&1 || true
done
echo "took $(( $(date +%s) - t0 )) s" | tee "$out/timings.txt"
grep -h -iE "slower|faster|same|small|inconclusive" "$out"/*.txt | head -40
