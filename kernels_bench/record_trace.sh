#!/usr/bin/env bash
# Record a labelled trace: the NVML collector at HZ in one process, the labelled workload in
# another, on every visible GPU.  Usage (on a GPU host, project installed):
#   kernels_bench/record_trace.sh OUTDIR NAME [HZ] [workload args...]
# Workload args go to `tealeaves bench workload` (e.g. --scenario bursts --seed 1), or, when the
# first is --hf-moe, the rest go to `python -m tealeaves.kernels_bench.hf_moe` (a transformers
# MoE model serving generate() requests, labelled by forward hooks), or, when it is
# --hf-serving, to `python -m tealeaves.kernels_bench.hf_serving` (transformers' continuous
# batching or assisted generation, labelled by the engine's own forwards), or, when it is
# --serving-loop, to `python -m tealeaves.kernels_bench.serving_loop` (a scheduler with CUDA-graph
# decode, chunked prefill and draft-tree verify, labelled per forward; it writes NAME.sglang.log
# and NAME.metrics.prom itself).
# Writes OUTDIR/NAME.parquet, OUTDIR/NAME.labels.csv and OUTDIR/NAME.log (pass
# --sglang-log OUTDIR/NAME.sglang.log among the workload args for a server log of the run).
set -euo pipefail
out=$1; name=$2; hz=${3:-20}; shift 3 || shift $#
mkdir -p "$out"
db=$(mktemp -d)/store.db
# The collector starts first and stops after the workload, so idle margins frame the labels.
tealeaves collect --hz "$hz" --store "$db" --parquet "$out/$name.parquet" --duration 100000 \
    > "$out/$name.collect.log" 2>&1 &
cpid=$!
sleep 3
if [[ "${1:-}" == --hf-moe ]]; then
    shift
    python3 -m tealeaves.kernels_bench.hf_moe --labels "$out/$name.labels.csv" "$@" 2>&1 \
        | tee "$out/$name.log"
elif [[ "${1:-}" == --hf-serving ]]; then
    shift
    python3 -m tealeaves.kernels_bench.hf_serving --labels "$out/$name.labels.csv" "$@" 2>&1 \
        | grep -v "will be dropped" | tee "$out/$name.log"
elif [[ "${1:-}" == --serving-loop ]]; then
    shift
    python3 -m tealeaves.kernels_bench.serving_loop --labels "$out/$name.labels.csv" "$@" 2>&1 \
        | tee "$out/$name.log"
else
    tealeaves bench workload --labels "$out/$name.labels.csv" "$@" 2>&1 | tee "$out/$name.log"
fi
sleep 3
kill -TERM "$cpid"; wait "$cpid" || true
cat "$out/$name.collect.log"
