#!/usr/bin/env bash
# Three-way verdicts on the GPU (issue 13): the canary A/A and a user step made 1% and 2% slower.
# usage: examples/three-way/run.sh OUTDIR        (1 GPU; about 4-5 minutes on an H200)
#   FORENSICS="python3 -m forensics" and PROCESSES=6 by default; TRIAL=1 runs tiny CPU budgets.
set -euo pipefail
out=${1:?usage: run.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
F=${FORENSICS:-python3 -m forensics}
P=${PROCESSES:-6}
canary_opts=()
if [[ "${TRIAL:-0}" == 1 ]]; then      # CPU trial: tiny canary and step
  canary_opts=(--device cpu --tp 1 --layers 1 --hidden 64 --heads 2 --ffn 128 --blocks 5 --block-ms 1 --warmup 0)
  export STEP_N=64 STEP_ITERS=20 STEP_BLOCKS=5 OMP_NUM_THREADS=1
fi
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$out/run.log"; }
status() { set +e; "$@"; echo "exit $?"; set -e; }

log "canary A/A, interleaved A B A B ($P processes a side; side B only sets an unused variable)"
$F bench "${canary_opts[@]}" --processes "$P" -q -o "$out/canary-a.json" --b-env FORENSICS_AA_MARK=1 \
  --b-output "$out/canary-b.json" > "$out/canary-aa-run.txt" 2>&1 || true
status $F bench compare "$out/canary-a.json" "$out/canary-b.json" > "$out/compare-canary-aa.txt" 2>&1

step="python3 $here/step.py"
for scale in 1.00 1.01 1.02 1.00; do
  name=step-$scale; [[ -e "$out/$name.json" ]] && name=step-$scale-again
  log "user step, STEP_SCALE=$scale ($P processes) -> $name.json"
  STEP_SCALE=$scale $F bench --cmd "$step" --processes "$P" -q -o "$out/$name.json" >> "$out/run.log" 2>&1
done
for b in step-1.01 step-1.02 step-1.00-again; do
  status $F bench compare "$out/step-1.00.json" "$out/$b.json" > "$out/compare-$b.txt" 2>&1
  $F bench compare --json "$out/step-1.00.json" "$out/$b.json" > "$out/compare-$b.json" 2>/dev/null || true
done

log "diff: snapshots carrying the canary A/A sides and the user step at 1.00 and 1.02"
$F snapshot -q -o "$out/snapshot.json" >> "$out/run.log" 2>&1
python3 "$here/embed.py" "$out/snapshot.json" "$out/canary-a.json" "$out/step-1.00.json" "$out/before.json"
python3 "$here/embed.py" "$out/snapshot.json" "$out/canary-b.json" "$out/step-1.02.json" "$out/after.json"
status $F diff "$out/before.json" "$out/after.json" -o "$out/report.md" -o "$out/report.json" -o "$out/report.html" \
  > "$out/diff.txt" 2>&1
status $F diff "$out/before.json" "$out/after.json" --fail-on any > "$out/diff-fail-on-any.txt" 2>&1
log "done: $(grep -h ': ' "$out"/compare-*.txt | grep -E '^(canary|user)\.[a-z_.]+: ' | tr '\n' ';')"
