#!/usr/bin/env bash
# Snapshot speed on this machine, this checkout against an earlier commit, interleaved run by run.
#   examples/speed/run.sh OUT_DIR [BASE_REV]     (BASE_REV default 857da02: main before the issue-17 speed work)
# PYTHON (default python3) must be the interpreter forensics is installed in (pip install -e .).
# The baseline is BASE_REV's tree put first on PYTHONPATH (its probes/ and reports/ linked under their
# installed names), so both sides use the same interpreter, packages and entry points.
# Writes OUT_DIR/run.txt (benchmarks/run.py) and OUT_DIR/probes.txt (per-probe duration_s medians).
set -euo pipefail
out=${1:?usage: examples/speed/run.sh OUT_DIR [BASE_REV]}
base=${2:-857da02}
py=$(command -v "${PYTHON:-python3}")
case $py in /*) ;; *) py="$PWD/$py" ;; esac  # the benchmarks run from a temp folder
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$root" archive "$base" | tar -x -C "$tmp"
ln -s probes "$tmp/forensics_probes"
ln -s reports "$tmp/forensics_reports"
printf '#!/bin/sh\nPYTHONPATH="%s${PYTHONPATH:+:$PYTHONPATH}" exec "%s" "$@"\n' "$tmp" "$py" > "$tmp/python"
chmod +x "$tmp/python"
cd "$root"
(cd / && "$tmp/python" -c 'import forensics, forensics_probes.libs.probe as p; print("baseline:", forensics.__file__, p.__file__)')
"$py" benchmarks/run.py --runs 9 --baseline "$tmp/python" | tee "$out/run.txt"
"$py" benchmarks/snapshot_probes.py --runs 9 --baseline "$tmp/python" | tee "$out/probes.txt"
