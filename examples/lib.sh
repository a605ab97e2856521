# Shared by the scenario scripts: run forensics the same way in each, write reports beside the snapshots.
# Usage: source lib.sh; then snap OUT NAME [snapshot options...]; report OUT
set -eu
: "${FORENSICS:=forensics}"
# How many fresh processes each embedded benchmark runs (5 is the fewest with which
# Mann-Whitney U can reach p <= 0.01); override for a quick try.
: "${BENCH_PROCESSES:=5}"
# NVLink multicast stays off on shared machines (see the device notes): set it everywhere.
export NCCL_NVLS_ENABLE=0

snap() {  # snap OUTDIR before|after [options...]
    out=$1; label=$2; shift 2
    $FORENSICS snapshot --label "$label" --bench --bench-processes "$BENCH_PROCESSES" -o "$out/$label.json" "$@"
}

report() {  # report OUTDIR [diff options...]: HTML, Markdown and JSON reports of before -> after
    out=$1; shift
    rc=0
    $FORENSICS diff "$out/before.json" "$out/after.json" -o "$out/report.html" "$@" || rc=$?
    $FORENSICS diff "$out/before.json" "$out/after.json" -o "$out/report.md" "$@" >/dev/null || true
    $FORENSICS diff "$out/before.json" "$out/after.json" -o "$out/report.json" "$@" >/dev/null || true
    echo "diff exit code: $rc" >"$out/diff-exit-code.txt"
}
