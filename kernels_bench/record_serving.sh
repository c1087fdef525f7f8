#!/usr/bin/env bash
# Record the third-party serving-engine traces of the corpus (issue 18): transformers'
# continuous batching and assisted generation (kernels_bench/hf_serving.py) on architectures
# the corpus had not seen, each with the collector at 50 Hz beside it.
# ENGINE=--serving-loop records kernels_bench/serving_loop.py instead (issue 34), HZ sets the
# collector's rate (default 50).
# Usage (on a GPU host, project installed): kernels_bench/record_serving.sh OUTDIR PREFIX RUN...
# where RUN is NAME:ARGS, ARGS the hf_serving options joined by commas, e.g.
#   dsv3_poisson:--arch,deepseek_v3,--pattern,poisson,--sampling,--seed,41
set -uo pipefail
out=$1; prefix=$2; shift 2
here=$(dirname "$0")
mkdir -p "$out"
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,power.limit,clocks.max.sm \
      --format=csv; date -u; uname -r
  python3 -c 'import torch, transformers; print(torch.__version__, transformers.__version__)'
} > "$out/$prefix.machine.txt" 2>&1
# BUDGET_S: start no run after this many seconds (a lease's command limit)
for run in "$@"; do
    name=${prefix}_${run%%:*}
    if (( SECONDS > ${BUDGET_S:-1000000} )); then echo "== $name skipped (budget)"; continue; fi
    IFS=, read -r -a args <<< "${run#*:}"
    echo "== $name $(date -u +%T) ${args[*]}"
    timeout 200 "$here/record_trace.sh" "$out" "$name" "${HZ:-50}" "${ENGINE:---hf-serving}" \
        "${args[@]}" \
        > "$out/$name.record.txt" 2>&1
    echo "   rc=$? $(grep -v '^\[' "$out/$name.record.txt" | tail -n 4 | tr '\n' ' ')"
done
