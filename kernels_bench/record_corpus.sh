#!/usr/bin/env bash
# Record corpus traces for the classifier (data/traces/MANIFEST.csv says which ran where).
# Usage (on a GPU host, project installed): kernels_bench/record_corpus.sh OUTDIR PREFIX SEED
#   SCENARIO...   (a scenario of kernels_bench/workload.py, or hf_moe)
# Each trace: the collector at 50 Hz (the rate the H200s hold), the workload writing its labels
# and an SGLang-style log (stamped in the host's zone, whole seconds, as SGLang writes them).
set -uo pipefail
out=$1; prefix=$2; seed=$3; shift 3
here=$(dirname "$0")
mkdir -p "$out"
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,power.limit,clocks.max.sm \
      --format=csv; date -u; date +%Z; uname -r
  python3 -c 'import torch, pynvml; print(torch.__version__, pynvml.__file__)'
  python3 -c 'import transformers; print("transformers", transformers.__version__)' || true
} > "$out/$prefix.machine.txt" 2>&1
for sc in "$@"; do
    name=${prefix}_${sc}
    echo "== $name $(date -u +%T)"
    if [[ $sc == hf_moe ]]; then
        "$here/record_trace.sh" "$out" "$name" 50 --hf-moe --seconds 60 --seed "$seed" \
            > "$out/$name.record.txt" 2>&1
    else
        "$here/record_trace.sh" "$out" "$name" 50 --scenario "$sc" --seed "$seed" \
            --sglang-log "$out/$name.sglang.log" > "$out/$name.record.txt" 2>&1
    fi
    echo "   rc=$? $(tail -n 3 "$out/$name.record.txt" | tr '\n' ' ')"
done
