# The measurement call: the default snapshot (table on a pty) of this work ("new") and of main before it
# ("old", fd71411), side by side with collect_env, interleaved, from the repository root (a git checkout),
# in two conditions: no .pyc, then everything compiled. Writes everything under $OUT.
set -u
PY=python3
R=$PWD
C=.carry-speed
L=$OUT/setup.txt
{ echo "repo root: $(git log --oneline -1 | cut -c1-60)"; $PY -VV; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $L 2>&1
for b in new old; do
  src=$C; [ $b = old ] && src=$C-old
  if ! $PY -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/$b .whl/*.whl ./$src >> $L 2>&1; then
    echo "pip --target failed for $b; laid out by hand" >> $L
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/$b .whl/*.whl >> $L 2>&1
    $PY $C/examples/snapshot-speed/local-cpu/layout.py ./$src /tmp/$b >> $L 2>&1
  fi
  ls /tmp/$b/bin >> $L
done
STDLIB=$($PY -c "import sysconfig;print(sysconfig.get_paths()['stdlib'])")
SP=$($PY -c "import sysconfig;print(sysconfig.get_paths()['purelib'])")
count() { for d in "$@"; do echo "  $d: $(find $d -name '*.pyc' | wc -l) .pyc / $(find $d -name '*.py' | wc -l) .py"; done; }
# --- condition 1: no .pyc (PYTHONDONTWRITEBYTECODE=1; the venv's, GitPython's and forensics' caches removed)
export PYTHONDONTWRITEBYTECODE=1
find $SP /tmp/new /tmp/old -name __pycache__ -type d -prune -exec rm -rf {} + 2>/dev/null
{ echo "condition no-pyc:"; count $STDLIB $SP /tmp/new /tmp/old; } >> $L
N="no .pyc: PYTHONDONTWRITEBYTECODE=1, no .pyc in the venv, GitPython or forensics; stdlib's own kept"
$PY $C/benchmarks/snapshot_interleaved.py --new /tmp/new --old /tmp/old --rounds 5 --quiet-too --condition "$N" --out $OUT/interleaved.txt > $OUT/runs.txt 2>&1
PYTHONPATH=/tmp/new $PY $C/benchmarks/snapshot_timeline.py --runs 5 > $OUT/timelines.txt 2>&1
# --- condition 2: compiled, as pip leaves a machine (compileall over the stdlib, the venv, GitPython, forensics)
unset PYTHONDONTWRITEBYTECODE
s=$(date +%s)
$PY -m compileall -q -j 16 $STDLIB $SP /tmp/new /tmp/old > /dev/null 2>&1
{ echo "compileall: $(( $(date +%s) - s )) s; condition compiled:"; count $STDLIB $SP /tmp/new /tmp/old; } >> $L
K="compiled: compileall over the stdlib, the venv, GitPython and forensics"
$PY $C/benchmarks/snapshot_interleaved.py --new /tmp/new --old /tmp/old --rounds 9 --quiet-too --condition "$K" --out $OUT/interleaved.txt >> $OUT/runs.txt 2>&1
PYTHONPATH=/tmp/new $PY $C/benchmarks/snapshot_timeline.py --runs 9 >> $OUT/timelines.txt 2>&1
# --- field by field: one default snapshot by each build, one after the other, and forensics diff of the two
PYTHONPATH=/tmp/old $PY /tmp/old/bin/forensics snapshot -q -o $OUT/before.json > /dev/null 2>&1
PYTHONPATH=/tmp/new $PY /tmp/new/bin/forensics snapshot -q -o $OUT/after.json > /dev/null 2>&1
{ $PY $C/examples/snapshot-speed/local-cpu/fields.py $OUT/before.json $OUT/after.json;
  PYTHONPATH=/tmp/new $PY /tmp/new/bin/forensics diff $OUT/before.json $OUT/after.json --format md -o $OUT/diff.md; echo "diff exit $?"; } > $OUT/fields.txt 2>&1
cat $L $OUT/interleaved.txt; grep -E "^snapshot|^wall|print|exit|Python start" $OUT/timelines.txt; tail -12 $OUT/fields.txt
