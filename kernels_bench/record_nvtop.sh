#!/usr/bin/env bash
# Record nvtop's screen (several sizes, update intervals, plot directions and colour modes, side
# by side) during a labelled workload, with the collector's trace of the same run: issue 37's
# ground truth for reading nvtop pictures.  Usage (on a GPU host, project installed, nvtop on
# PATH or NVTOP=/path/to/nvtop):
#   kernels_bench/record_nvtop.sh OUTDIR NAME [workload args...]
# Writes OUTDIR/NAME.parquet (the trace, 10 Hz), OUTDIR/NAME.labels.csv, and
# OUTDIR/NAME/<look>.nvtop.jsonl per look (kernels_bench/nvtop_capture.py).
set -euo pipefail
out=$1; name=$2; shift 2
nvtop=${NVTOP:-nvtop}
secs=${SECONDS_RECORDED:-150}
mkdir -p "$out/$name"
db=$(mktemp -d)/store.db
tealeaves collect --hz 10 --store "$db" --parquet "$out/$name.parquet" --duration 100000 \
    > "$out/$name.collect.log" 2>&1 &
cpid=$!
sleep 3
pids=()
# look: columns rows nvtop options
while read -r look cols rows opts; do
    # shellcheck disable=SC2086
    python3 -m tealeaves.kernels_bench.nvtop_capture --out "$out/$name" --name "$look" \
        --cols "$cols" --rows "$rows" --seconds "$secs" -- "$nvtop" -c "$out/$name/$look.ini" \
        $opts &
    pids+=($!)
done <<'EOF'
d10_160x48 160 48 -d 10
d5_rev_120x40 120 40 -d 5 -r
d20_200x55 200 55 -d 20
d10_mono_100x30 100 30 -d 10 -C
EOF
tealeaves bench workload --labels "$out/$name.labels.csv" "$@" > "$out/$name.log" 2>&1
for p in "${pids[@]}"; do wait "$p" || true; done
kill -TERM "$cpid"; wait "$cpid" || true
tail -3 "$out/$name.collect.log"
ls -la "$out/$name"
