#!/usr/bin/env bash
# Record the screens of nvidia-smi, nvidia-smi dmon, nvitop and gpustat during a labelled
# workload, with the collector's trace of the same run (issue 23's ground truth).  Usage (on a
# GPU host, project installed, nvitop and gpustat on PATH):
#   kernels_bench/record_monitors.sh OUTDIR NAME [workload args...]
# Writes OUTDIR/NAME.parquet (the trace), OUTDIR/NAME.labels.csv, OUTDIR/NAME/captures.jsonl
# and OUTDIR/NAME/dmon.jsonl (kernels_bench/monitor_capture.py).
set -euo pipefail
out=$1; name=$2; shift 2
mkdir -p "$out/$name"
db=$(mktemp -d)/store.db
tealeaves collect --hz 10 --store "$db" --parquet "$out/$name.parquet" --duration 100000 \
    > "$out/$name.collect.log" 2>&1 &
cpid=$!
sleep 3
python3 -m tealeaves.kernels_bench.monitor_capture --out "$out/$name" --seconds 600 \
    --every 2 &
mpid=$!
tealeaves bench workload --labels "$out/$name.labels.csv" "$@" > "$out/$name.log" 2>&1
sleep 4
kill -TERM "$mpid" 2>/dev/null || true; wait "$mpid" 2>/dev/null || true
kill -TERM "$cpid"; wait "$cpid" || true
tail -3 "$out/$name.collect.log"
wc -l "$out/$name/captures.jsonl" "$out/$name/dmon.jsonl"
