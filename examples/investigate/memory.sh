#!/bin/sh
# forensics investigate from where the user stands (issue 25). Usage: memory.sh OUTDIR [pull] [two] [docs]
#
# The user's code is a small repository made here from decode/ (step.py: logits over a 131072-token
# vocabulary, softmax, argmax; bf16 on a GPU), cloned as the user's checkout. Its upstream gets a pull
# of 9 commits: one small slow commit (softmax in float32, one line) among decoys that touch the same
# hot file (type hints, a docstring, renames of local names, comments) and two others (docs, config).
#
#   pull  the silent pull, NO baseline snapshot: `forensics investigate --cmd STEP` alone measures the
#         HEAD before the pull (reflog HEAD@{1}) in a private worktree and must name and confirm the commit
#   two   a baseline snapshot of the step before the pull; then the pull AND CUDA_LAUNCH_BLOCKING=1 left set:
#         both causes named, each with its share, and the residual
#   docs  A/A: a pull of behaviour-free commits only (type hints, a docstring, documentation), no baseline:
#         "No regression", exit 0, no experiment
#
# Each scenario writes OUTDIR/<name>/: report.html, report.md, report.json, console.txt (stdout and
# stderr), exit-code.txt and timings.txt; OUTDIR/timings.md sums them up.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
out=${1:?usage: memory.sh OUTDIR [pull] [two] [docs]}; shift
scenarios=${*:-pull two docs}
mkdir -p "$out"; out=$(cd "$out" && pwd)
: "${BUDGET:=8m}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset CUDA_LAUNCH_BLOCKING
echo "GPU: $(python3 -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")' 2>/dev/null)" | tee "$out/setup.txt"

user_repo "$work" "$here/decode" 2026-11-30T09:00:00Z "decode: greedy next token"   # (lib.sh)
S="$work/upstream/decode/sampler.py"
edit() { python3 - "$S" "$1" "$2" <<'PY'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
assert old in text, old
open(path, "w").write(text.replace(old, new))
PY
}
edit 'def next_token(hidden, weight):' 'def next_token(hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:'
upstream_commit "$work" 2026-11-30T09:20:00Z "sampler: type hints"
edit '    """Greedy next token: logits over the vocabulary, softmax, argmax."""' '    """Greedy next token: logits over the vocabulary, softmax, argmax.

    Args:
        hidden: [batch, hidden] last hidden states.
        weight: [vocab, hidden] output embedding.

    Returns:
        [batch] token ids.
    """'
upstream_commit "$work" 2026-11-30T09:40:00Z "sampler: document next_token"
echo "Timings are per decode step, in ms." >>"$work/upstream/README.md" 2>/dev/null || echo "Timings are per decode step, in ms." >"$work/upstream/README.md"
upstream_commit "$work" 2026-11-30T10:00:00Z "docs: say what a timing covers" README.md
docs_head=$(git -C "$work/upstream" rev-parse HEAD)
edit '    logits = hidden @ weight.t()
    probs = torch.softmax(logits, dim=-1)
    return probs.argmax(dim=-1)' '    scores = hidden @ weight.t()
    probabilities = torch.softmax(scores, dim=-1)
    return probabilities.argmax(dim=-1)'
upstream_commit "$work" 2026-11-30T10:20:00Z "sampler: clearer local names"
edit '    probabilities = torch.softmax(scores, dim=-1)' '    probabilities = torch.softmax(scores.float(), dim=-1)'
upstream_commit "$work" 2026-11-30T10:40:00Z "sampler: softmax in float32 for stable probabilities"
printf 'log_every: 50\n' >"$work/upstream/config.yaml"
upstream_commit "$work" 2026-11-30T11:00:00Z "config: log every 50 steps" config.yaml
edit '    scores = hidden @ weight.t()' '    # greedy decoding: the most likely token, no sampling temperature
    scores = hidden @ weight.t()'
upstream_commit "$work" 2026-11-30T11:20:00Z "sampler: say it is greedy"
edit 'import torch' '# Next-token selection only; batching lives in the step.
import torch'
upstream_commit "$work" 2026-11-30T11:40:00Z "sampler: module comment"
edit '    probabilities = torch.softmax(scores.float(), dim=-1)
    return probabilities.argmax(dim=-1)' '    token_probabilities = torch.softmax(scores.float(), dim=-1)
    return token_probabilities.argmax(dim=-1)'
upstream_commit "$work" 2026-11-30T12:00:00Z "sampler: name the probabilities for what they are"
git -C "$work/upstream" log --oneline >"$out/upstream-log.txt"
cd "$work/serving"
base=$(git rev-parse HEAD)

investigate() {  # investigate NAME [options...]
    name=$1; shift
    d="$out/$name"; mkdir -p "$d"
    t=$(date +%s); rc=0
    $FORENSICS investigate --cmd "python3 step.py" --budget "$BUDGET" \
        -o "$d/report.html" -o "$d/report.md" -o "$d/report.json" "$@" >"$d/console.txt" 2>&1 || rc=$?
    echo "$rc" >"$d/exit-code.txt"
    echo "$name: $(( $(date +%s) - t )) s, exit $rc" | tee "$d/timings.txt" | tee -a "$out/timings.txt"
    head -3 "$d/console.txt"
}

for s in $scenarios; do
    git reset -q --hard "$base"
    case $s in
    pull)
        git -c pull.rebase=false pull -q
        investigate pull ;;
    two)
        mkdir -p "$out/two"
        t=$(date +%s)
        $FORENSICS snapshot --label baseline --bench --bench-cmd "python3 step.py" --repo . \
            -o "$out/two/baseline.json" >"$out/two/baseline-console.txt" 2>&1
        echo "two: baseline snapshot $(( $(date +%s) - t )) s" | tee -a "$out/timings.txt"
        git -c pull.rebase=false pull -q
        (export CUDA_LAUNCH_BLOCKING=1; investigate two --baseline "$out/two/baseline.json" --repo .) ;;
    docs)
        git fetch -q origin
        git merge -q --ff-only "$docs_head"
        investigate docs ;;
    *) echo "memory.sh: unknown scenario '$s' (pull, two, docs)" >&2; exit 2 ;;
    esac
done
python3 - "$out" $scenarios >"$out/timings.md" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print("| scenario | exit | total s | snapshot s | experiments s | experiments (outcome, s) | shares |")
print("| --- | --- | ---: | ---: | ---: | --- | --- |")
for name in sys.argv[2:]:
    f = out / name / "report.json"
    if not f.exists():
        print(f"| {name} | - | | | | (no report) | |")
        continue
    r = json.loads(f.read_text())
    t = r.get("timings", {})
    exps = ", ".join(f"{e['id']} {e['outcome']} {e['elapsed_s']:.0f}" for e in r.get("experiments", [])) or "none"
    print(f"| {name} | {r.get('exit_code')} | {t.get('total_s', 0):.0f} | {t.get('snapshot_s', 0):.0f} | "
          f"{t.get('experiments_s', 0):.0f} | {exps} | {(r.get('accounting') or '').replace('|', '/')} |")
PY
cat "$out/timings.md"
