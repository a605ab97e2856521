#!/bin/sh
# Scenario 4: nothing changed (A/A). Usage: run.sh OUTDIR
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
out=${1:?usage: run.sh OUTDIR}; mkdir -p "$out"
snap "$out" before
sleep 20
snap "$out" after
report "$out"
