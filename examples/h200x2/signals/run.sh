#!/bin/sh
# Does a signal to `forensics bench` stop the canary's ranks? Usage: run.sh OUTDIR (needs a GPU).
# Starts the canary, waits until its ranks run, signals forensics, and counts what is left:
# rank processes, CUDA compute apps, and whether a half-written bench file remains.
# Note: a background job of a non-interactive sh ignores SIGINT (POSIX), so this script can only
# check SIGTERM; SIGINT is checked by tests/test_process_hygiene.py, which starts forensics itself.
out=${1:?usage: run.sh OUTDIR}; mkdir -p "$out"
forensics bench --processes 5 -q -o "$out/bench-TERM.json" >"$out/bench-TERM.out" 2>&1 & p=$!
for _ in $(seq 1 100); do pgrep -f "[f]orensics[.]bench[.]worker" >/dev/null && break; sleep 0.1; done
sleep 1
echo "ranks before SIGTERM: $(pgrep -f "[f]orensics[.]bench[.]worker" | wc -l)" >>"$out/checks.txt"
kill -TERM $p; wait $p; echo "bench exit code: $?" >>"$out/checks.txt"
echo "ranks after: $(pgrep -f "[f]orensics[.]bench[.]worker" | wc -l); CUDA compute apps: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l); bench file left: $(test -e "$out/bench-TERM.json" && echo yes || echo no)" >>"$out/checks.txt"
tail -1 "$out/bench-TERM.out" >>"$out/checks.txt"
