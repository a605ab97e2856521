#!/bin/sh
# Fleet mode on one GPU machine, as a user would run it: torchrun with one rank per GPU and --bench,
# then the report (HTML, Markdown, JSON, Prometheus). Also times the plain node snapshot next to
# torch's collect_env (the speed target of issue 17). Usage: run.sh OUTDIR
# Needs: forensics and torch (CUDA build) in the Python on PATH, `torchrun` on PATH. About 1-2 minutes.
# NPROC=2 on a 2-GPU machine gives a two-rank fleet of one node.
set -eu
out=${1:?usage: run.sh OUTDIR}; mkdir -p "$out"; out=$(cd "$out" && pwd)
: "${NPROC:=1}"
: "${PYTHON:=python3}"
export NCCL_NVLS_ENABLE=0
cd "$out"
now() { "$PYTHON" -c 'import time; print(f"{time.time():.3f}")'; }
took() { "$PYTHON" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f} s')" "$1" "$2"; }
: >timings.txt
{ nvidia-smi --query-gpu=index,name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader || true; } >gpus.txt 2>&1

t=$(now); rc=0
torchrun --standalone --nproc-per-node "$NPROC" -m forensics fleet snapshot --bench -o fleet.json \
    >fleet-snapshot.out 2>fleet-snapshot.err || rc=$?
echo "torchrun --nproc-per-node $NPROC -m forensics fleet snapshot --bench: $(took "$t" "$(now)"), exit $rc" >>timings.txt

t=$(now); rc=0
forensics fleet report fleet.json -o report.html --prom fleet.prom >fleet-report.out 2>&1 || rc=$?
echo "forensics fleet report fleet.json -o report.html --prom fleet.prom: $(took "$t" "$(now)"), exit $rc" >>timings.txt
forensics fleet report fleet.json -o report.md >/dev/null 2>&1 || true
forensics fleet report fleet.json -o report.json >/dev/null 2>&1 || true

for i in 1 2 3; do
    t=$(now); forensics snapshot -q -o "node-snapshot-$i.json" >/dev/null 2>&1 || true
    echo "forensics snapshot (default probes) run $i: $(took "$t" "$(now)")" >>timings.txt
done
for i in 1 2; do
    t=$(now); "$PYTHON" -m torch.utils.collect_env >collect_env.txt 2>&1 || true
    echo "python -m torch.utils.collect_env run $i: $(took "$t" "$(now)")" >>timings.txt
done
"$PYTHON" - <<'PY' >>timings.txt
import json
d = json.load(open("node-snapshot-3.json"))
print("per-probe wall time in node-snapshot-3.json:",
      ", ".join(f"{k} {v.get('duration_s', 0):.3f} s" for k, v in sorted(d["probes"].items())))
for line in open("fleet.json").read().splitlines()[1:-1]:
    r = json.loads(line.rstrip(","))
    figs = {k: round(v["value"], 1) for k, v in ((r.get("bench") or {}).get("figures") or {}).items()}
    print(f"rank {r['rank']} on {r['node']}: bench {figs}, record {r['duration_s']} s, errors {r['errors']}")
PY
cat timings.txt
