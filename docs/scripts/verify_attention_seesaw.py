"""The run behind docs/results/verify_attention_seesaw.json (docs/verify-attention.md, "The
seesaw schedule, tried"): on a Hopper GPU, the matmul ceilings (burst and sustained, twice
each after two idle seconds) and the copy bandwidth, then the six batch-1 large-tree points
(64k and 200k context, trees of 16/32/64 nodes, 8 heads, page 1), ``gluon64`` and ``seesaw``
at ``gluon64``'s chooser NSPLIT, each timed twice, interleaved.

Usage, from the repository root with the project installed (``pip install -e '.[bench]'``)::

    python3 docs/scripts/verify_attention_seesaw.py OUT_DIR
"""

import json
import statistics
import sys
import time
from pathlib import Path

import torch

from tealeaves.kernels_bench import verify_bench as vb
from tealeaves.kernels_bench.verify_ref import choose_plan, kv_bytes
from tealeaves.kernels_bench.verify_triton import SplitPlan

KERNELS = ("gluon64", "seesaw")


def main(out: Path) -> None:
    got = vb.ceilings()
    mm, mms, bw = (statistics.median(got[k]) for k in ("burst", "sustained", "copy"))
    rows = []
    for ctx in (65536, 200000):
        for tree in (16, 32, 64):
            copies = vb.rotating_inputs(vb.Point(1, ctx, tree, 8, 1))
            first = copies[0]
            nb = kv_bytes(first)
            fm = nb / (bw * 1e9)
            fx, fxs = vb._flops(first) / (mm * 1e12), vb._flops(first) / (mms * 1e12)
            ns = choose_plan(1, 8, tree, ctx, torch.cuda.get_device_properties(0)
                             .multi_processor_count, kernel="gluon64")[1]
            plans = {k: [SplitPlan(i, ns, kernel=k) for i in copies] for k in KERNELS}
            line = []
            for rep in range(2):
                for k in KERNELS:
                    t = vb.time_calls([p.__call__ for p in plans[k]])
                    rows.append({"batch": 1, "context": ctx, "tree": tree, "heads": 8,
                                 "page_size": 1, "kernel": k, "nsplit": ns, "rep": rep,
                                 "time_us": round(t * 1e6, 2),
                                 "floor_mem_us": round(fm * 1e6, 2),
                                 "floor_matmul_us": round(fx * 1e6, 2),
                                 "floor_matmul_sustained_us": round(fxs * 1e6, 2),
                                 "roofline_share": round(max(fm, fx) / t, 4),
                                 "roofline_share_sustained": round(max(fm, fxs) / t, 4)})
                    line.append(f"{k} {t * 1e6:.1f} us {max(fm, fx) / t:.1%}")
            print(f"context {ctx}, tree {tree}, NSPLIT {ns}: " + " | ".join(line), flush=True)
            del plans, copies, first
            torch.cuda.empty_cache()
    out.mkdir(parents=True, exist_ok=True)
    (out / "verify_attention_seesaw.json").write_text(json.dumps({
        "machine": vb.machine(), "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "ceilings_tflops_gbps": {k: [round(v, 1) for v in vs] for k, vs in got.items()},
        "copy_gbps": round(bw, 1), "matmul_tflops": round(mm, 1),
        "matmul_sustained_tflops": round(mms, 1), "rows": rows}, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
