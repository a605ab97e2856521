#!/bin/sh
# Acceptance of `forensics import` on a GPU machine: this machine's own texts (collect_env, nvidia-smi,
# nvidia-smi -q, nvidia-smi -q -x, pip list) imported and diffed against its live snapshot.
# Expected: nothing implicated by a version (same driver, CUDA, torch, NCCL on both sides); what the
# texts hold is ruled out, what they cannot hold is inconclusive "not in ... output".
# Usage: run.sh OUTDIR   (about 30 s; collect_env alone takes 5-10 s)
set -eu
: "${FORENSICS:=forensics}"
: "${PYTHON:=python3}"
out=${1:?usage: run.sh OUTDIR}; mkdir -p "$out"
$FORENSICS snapshot --label live -o "$out/live.json" -q
$PYTHON -m torch.utils.collect_env >"$out/collect_env.txt" 2>/dev/null || echo "collect_env failed" >&2
nvidia-smi >"$out/nvidia-smi.txt"
nvidia-smi -q >"$out/nvidia-smi-q.txt"
nvidia-smi -q -x >"$out/nvidia-smi-q.xml"
$PYTHON -m pip list >"$out/pip-list.txt" 2>/dev/null
# one paste holding three parts, as tickets do
{ printf 'My environment:\n\n```text\n'; cat "$out/collect_env.txt"; printf '```\n\n'
  cat "$out/nvidia-smi.txt"; printf '\n'; cat "$out/pip-list.txt"; } >"$out/ticket.txt"
$FORENSICS import "$out/ticket.txt" -o "$out/imported-ticket.json" -q
$FORENSICS import "$out/nvidia-smi-q.txt" -o "$out/imported-q.json" -q
$FORENSICS import "$out/nvidia-smi-q.xml" -o "$out/imported-xml.json" -q
for side in ticket q xml; do
    $FORENSICS diff "$out/imported-$side.json" "$out/live.json" -o "$out/report-$side.md" -q >"$out/verdict-$side.txt" || true
    $FORENSICS diff "$out/imported-$side.json" "$out/live.json" -o "$out/report-$side.json" -q >/dev/null || true
done
# diff and show read the texts directly too
$FORENSICS diff "$out/ticket.txt" "$out/live.json" -o "$out/report-direct.md" -q >/dev/null
$FORENSICS show "$out/nvidia-smi-q.xml" >"$out/show-xml.txt"
$PYTHON - "$out" <<'PY'
import json, sys
out = sys.argv[1]
for side in ("ticket", "q", "xml"):
    d = json.load(open(f"{out}/report-{side}.json"))
    st = {h["id"]: h["status"] for h in d["hypotheses"]}
    imp = [h["id"] + ": " + h["summary"] for h in d["hypotheses"] if h["status"] == "implicated"]
    print(f"{side}: implicated {len(imp)}, ruled out {sum(s == 'ruled-out' for s in st.values())}, "
          f"inconclusive {sum(s == 'inconclusive' for s in st.values())}")
    for line in imp:
        print("   ", line)
PY
