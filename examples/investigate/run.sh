#!/bin/sh
# forensics investigate, end to end. Usage: run.sh OUTDIR [nothing] [env] [busy] [pull] [alone]  (default: all)
#
# One GPU is enough (the canary runs at TP=1); on a machine without a GPU it runs too (CPU canary,
# gloo; the "busy" scenario then loads the CPU instead of a GPU). The user's code is a small
# repository made here from serving/ (step.py: KV-cache block writes, allocation-heavy), cloned as
# the user's checkout, with an upstream that gets three commits.
#
#   baseline  `forensics snapshot --bench --bench-cmd STEP` while all is well (shared by the four;
#             each scenario folder gets a copy as baseline.json)
#   nothing   nothing changed: "No regression", no experiment runs (exit 0)
#   env       PYTORCH_NO_CUDA_MEMORY_CACHING=1 left in the environment: restoring it (unset) is
#             confirmed by an interleaved A/B of the step (exit 1)
#   busy      another process runs bf16 matmuls on GPU 0 (../busy-gpu/load.py): gpu.contention,
#             re-measured now and named, "still present" (exit 3: the tool never stops it)
#   pull      a silent `git pull` of three commits, one of which stages every KV block through a
#             copy: the commit confirmed against its parent in a private worktree (exit 1)
#   alone     no baseline: this machine against what its GPU model should give (ceilings.yaml)
#
# Each scenario writes OUTDIR/<name>/: baseline.json, now.json (the snapshot investigate took),
# report.html, report.md, report.json, console.txt (stdout and stderr), exit-code.txt and the
# wall time in timings.txt. Budgets are small (5 fresh processes a side, the fewest with which
# Mann-Whitney U reaches p <= 0.01). About 6-7 minutes on one H200 (alone adds ~30 s).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
out=${1:?usage: run.sh OUTDIR [nothing] [env] [busy] [pull] [alone]}; shift
scenarios=${*:-nothing env busy pull alone}
for s in $scenarios; do
    case $s in nothing|env|busy|pull|alone) ;; *) echo "run.sh: unknown scenario '$s' (nothing, env, busy, pull, alone)" >&2; exit 2 ;; esac
done
mkdir -p "$out"; out=$(cd "$out" && pwd)
: "${PROCESSES:=5}"
: "${BUDGET:=4m}"
work=$(mktemp -d)
load=""
cleanup() { [ -n "$load" ] && kill $load 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
unset PYTORCH_NO_CUDA_MEMORY_CACHING
gpu=0
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null && gpu=1
echo "GPU: $gpu (1 = CUDA visible), processes a side: $PROCESSES, budget per investigation: $BUDGET" | tee "$out/setup.txt"

user_repo "$work" "$here/serving" 2026-11-30T09:00:00Z "serving: KV-cache block writes"   # (lib.sh)
echo "Timings are per 300 block writes." >>"$work/upstream/README.md"
upstream_commit "$work" 2026-11-30T10:15:00Z "docs: say what a timing covers"
printf 'log_every: 50\n' >"$work/upstream/config.yaml"
upstream_commit "$work" 2026-11-30T11:40:00Z "config: log every 50 steps" config.yaml
sed -i 's/^STAGE_COPY = False/STAGE_COPY = True/' "$work/upstream/serving/kv_cache.py"
upstream_commit "$work" 2026-11-30T14:05:00Z "kv_cache: stage each block through a copy for the async writer"
cd "$work/serving"

t0=$(date +%s)
$FORENSICS snapshot --label baseline --bench --bench-processes "$PROCESSES" --bench-cmd "python3 step.py" --repo . \
    -o "$out/baseline.json" >"$out/baseline-console.txt" 2>&1
echo "baseline snapshot: $(( $(date +%s) - t0 )) s" | tee -a "$out/timings.txt"

investigate() {  # investigate NAME [options...]  (NAME alone: no baseline)
    name=$1; shift
    d="$out/$name"; mkdir -p "$d"; base=""
    if [ "$name" != alone ]; then cp "$out/baseline.json" "$d/baseline.json"; base="--baseline $d/baseline.json"; fi
    t=$(date +%s); rc=0
    $FORENSICS investigate $base --budget "$BUDGET" --processes "$PROCESSES" \
        --snapshot-processes "$PROCESSES" --snapshot-out "$d/now.json" \
        -o "$d/report.html" -o "$d/report.md" -o "$d/report.json" "$@" >"$d/console.txt" 2>&1 || rc=$?
    echo "$rc" >"$d/exit-code.txt"
    echo "$name: $(( $(date +%s) - t )) s, exit $rc" | tee "$d/timings.txt" | tee -a "$out/timings.txt"
    head -1 "$d/console.txt"
}

for s in $scenarios; do
    case $s in
    nothing) investigate nothing --cmd "python3 step.py" --repo . ;;
    env) (export PYTORCH_NO_CUDA_MEMORY_CACHING=1; investigate env --cmd "python3 step.py" --repo .) ;;
    busy)
        if [ $gpu = 1 ]; then
            python3 "$here/../busy-gpu/load.py" & load=$!
            sleep 8   # let the load start and reach its power limit
        else          # no GPU: load every CPU instead, so the CPU path of the script is exercised too
            n=$(nproc); load=""
            for i in $(seq "$n"); do python3 -c "while True: pass" & load="$load $!"; done
            sleep 1
        fi
        investigate busy --repo .   # no --cmd: the canary is the step the experiments measure
        kill $load 2>/dev/null; wait 2>/dev/null; load="" ;;
    pull)
        git -c pull.rebase=false pull -q                     # the silent pull: a fast-forward
        git log --oneline -5 >"$out/git-log.txt"
        investigate pull --cmd "python3 step.py" --repo .
        git reset -q --hard 'HEAD@{1}' ;;                   # back to the baseline's commit (our own clone)
    alone) investigate alone ;;
    esac
done
echo "total: $(( $(date +%s) - t0 )) s" | tee -a "$out/timings.txt"
# One table for docs/investigate.md: how long each investigation took and how much of it was experiments.
python3 - "$out" $scenarios >"$out/timings.md" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print("| scenario | exit | verdict | total s | snapshot now s | experiments s | experiments (outcome) |")
print("| --- | --- | --- | ---: | ---: | ---: | --- |")
for name in sys.argv[2:]:
    f = out / name / "report.json"
    if not f.exists():
        print(f"| {name} | - | (no report) | | | | |")
        continue
    r = json.loads(f.read_text())
    t = r.get("timings", {})
    exps = ", ".join(f"{e['id']} {e['outcome']}" for e in r.get("experiments", [])) or "none"
    verdict = r["verdict"].replace("|", "\\|")
    verdict = verdict if len(verdict) < 160 else verdict[:157] + "..."
    print(f"| {name} | {r.get('exit_code')} | {verdict} | {t.get('total_s', 0):.0f} | {t.get('snapshot_s', 0):.0f} "
          f"| {t.get('experiments_s', 0):.0f} | {exps} |")
PY
cat "$out/timings.md"
