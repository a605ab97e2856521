#!/bin/sh
# Scenario 2: a silent `git pull`. Usage: run.sh OUTDIR [all|snapshots|bisect]
# (needs 2 GPUs; runs on CPU too, slowly). Commit dates are fixed, so the commit hashes are the
# same on every run: the snapshots and the bisect can run in separate sessions (~3 + ~6 min on 2 x H200).
# A small repository stands in for the user's serving code (serving/ here). A second clone
# ("upstream") gets three commits; one routes the all-reduce out of place with an extra
# copy and all-reduce per layer. The user's clone does a real `git pull` (fast-forward)
# between the two snapshots. The environment is unchanged. Then `forensics bisect` runs
# the controlled experiment on the pulled range.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
out=${1:?usage: run.sh OUTDIR [all|snapshots|bisect]}; stage=${2:-all}; mkdir -p "$out"
case $stage in all|snapshots|bisect) ;; *) echo "run.sh: unknown stage '$stage' (all, snapshots or bisect)" >&2; exit 2 ;; esac
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
user_repo "$work" "$here/serving" 2026-11-02T09:00:00Z "serving: tensor-parallel verify step"   # (lib.sh)

# Upstream moves on: three commits, one of them slows the all-reduce path.
echo "Timings are printed per block of 10 steps." >>"$work/upstream/README.md"
upstream_commit "$work" 2026-11-03T10:15:00Z "docs: say how step timings are printed"
sed -i 's/^OUT_OF_PLACE = False/OUT_OF_PLACE = True/' "$work/upstream/distributed/comm.py"
upstream_commit "$work" 2026-11-03T14:40:00Z "comm: all-reduce out of place to keep the input buffer intact"
printf 'log_every: 50\n' >"$work/upstream/config.yaml"
upstream_commit "$work" 2026-11-04T08:05:00Z "config: log every 50 steps" config.yaml

cd "$work/serving"
[ "$stage" = bisect ] || snap "$out" before --repo . --bench-cmd "python3 step.py"
git -c pull.rebase=false pull -q                       # the silent pull: a fast-forward
[ "$stage" = bisect ] || snap "$out" after --repo . --bench-cmd "python3 step.py"
[ "$stage" = bisect ] || report "$out" --repo .
git log --oneline -5 >"$out/git-log.txt"
git reflog -3 >"$out/git-reflog.txt"
[ "$stage" != snapshots ] || exit 0
rc=0
$FORENSICS bisect --repo . --good 'HEAD@{1}' --bad HEAD --cmd "python3 step.py" --processes "$BENCH_PROCESSES" \
    --max-processes $((2 * BENCH_PROCESSES)) \
    -o "$out/bisect.html" -o "$out/bisect.md" -o "$out/bisect.json" 2>"$out/bisect-progress.txt" || rc=$?
echo "bisect exit code: $rc" >"$out/bisect-exit-code.txt"
