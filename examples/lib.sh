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

# The scenario repositories: a fixed author and fixed commit dates, so the hashes are the same on every run.
user_repo() {  # user_repo WORK SRC DATE MESSAGE: WORK/upstream holds SRC's files in one commit at DATE;
               # WORK/serving is its clone (the user's checkout)
    export GIT_AUTHOR_NAME="A. Developer" GIT_AUTHOR_EMAIL="dev@example.invalid"
    export GIT_COMMITTER_NAME="A. Developer" GIT_COMMITTER_EMAIL="dev@example.invalid"
    mkdir "$1/upstream"
    cp -r "$2/." "$1/upstream/"
    git -C "$1/upstream" init -q -b main
    git -C "$1/upstream" add -A
    upstream_commit "$1" "$3" "$4"
    git clone -q "$1/upstream" "$1/serving"
}

upstream_commit() {  # upstream_commit WORK DATE MESSAGE [NEW FILE...]: commit what changed in WORK/upstream
                     # (and the new files) at DATE
    w=$1; d=$2; m=$3; shift 3
    [ $# -eq 0 ] || git -C "$w/upstream" add "$@"
    GIT_AUTHOR_DATE=$d GIT_COMMITTER_DATE=$d git -C "$w/upstream" commit -q -am "$m"
}
