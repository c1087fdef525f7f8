"""Tile-setting calibration of the split-KV verify kernels on a GPU (run once; the choice is
written into ``verify_ref.split_blocks``): times each candidate (kernel, block_m, block_n,
warps, stages) at a few NSPLIT values on the shapes the done-when reads
(64k+ context, 8 heads), checks each against the reference, prints one line per timing with
the compiler's registers and spills, and writes ``calibrate.csv`` to the folder given (or
the current one).

``python -m tealeaves.kernels_bench.verify_calibrate [OUT]``; the environment variables
``VERIFY_CANDIDATES`` and ``VERIFY_SHAPES`` (JSON lists shaped like ``CANDIDATES`` and
``SHAPES``) replace the lists below, and then every candidate runs on every shape.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import torch

from tealeaves.kernels_bench.verify_bench import copy_bandwidth, time_calls
from tealeaves.kernels_bench.verify_ref import (
    kv_bytes,
    make_inputs,
    relative_error,
    verify_reference,
)
from tealeaves.kernels_bench.verify_triton import SplitPlan

#: (kernel, block_m, block_n, num_warps, num_stages): settings that fit the 227 KB of
#: shared memory of an H200 (sm_90, Triton 3.6) without spilling in the main loop.
CANDIDATES = [("gluon", 16, 64, 4, 1), ("gluon", 32, 64, 4, 1), ("triton", 16, 32, 4, 4),
              ("triton", 32, 64, 8, 3), ("triton", 64, 32, 8, 3)]
#: (batch, context, tree, heads, page_size, nsplits)
SHAPES = [(1, 65536, 4, 8, 1, (64, 128, 256)), (8, 200000, 4, 8, 1, (16, 32)),
          (1, 65536, 2, 8, 1, (128, 256)), (8, 65536, 4, 8, 64, (16, 32)),
          (1, 200000, 4, 8, 1, (128, 256)), (4, 65536, 8, 8, 1, (32, 64)),
          (1, 65536, 16, 8, 1, (64, 128))]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else Path(".")
    out.mkdir(parents=True, exist_ok=True)
    bw = copy_bandwidth()
    print(f"copy {bw / 1e9:.0f} GB/s", flush=True)
    rows = []
    given = "VERIFY_CANDIDATES" in os.environ
    candidates = json.loads(os.environ.get("VERIFY_CANDIDATES", "null")) or CANDIDATES
    shapes = json.loads(os.environ.get("VERIFY_SHAPES", "null")) or SHAPES
    for B, ctx, tree, heads, page, nsplits in shapes:
        inps = [make_inputs(B, ctx, tree, heads, page, device="cuda", seed=s)
                for s in range(max(1, min(8, (512 << 20) // (B * ctx * 1152) + 1)))]
        ref = verify_reference(inps[0], dtype=torch.float32)
        nb = kv_bytes(inps[0])
        for kind, bm, bn, w, st in candidates:
            if not given and bm > 16 and bm > tree * heads:
                continue
            if not given and bm < min(tree * heads, 64):
                continue  # several row tiles re-read the cache: only where rows need it
            for ns in nsplits:
                try:
                    plans = [SplitPlan(i, ns, block_m=bm, block_n=bn, num_warps=w,
                                       num_stages=st, kernel=kind) for i in inps]
                    plans[0].out.fill_(float("nan"))
                    err = relative_error(plans[0](), ref)
                    t = time_calls([p.__call__ for p in plans])
                    ts = time_calls([p.split_only for p in plans])
                except Exception as exc:  # noqa: BLE001 - out of resources: report, go on
                    print(f"B={B} ctx={ctx} T={tree} page={page} {kind} {bm}x{bn} w{w} "
                          f"s{st} ns={ns}: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:100]}", flush=True)
                    break
                c = plans[0].compiled
                r = {"batch": B, "context": ctx, "tree": tree, "heads": heads, "page": page,
                     "kernel": kind, "block_m": bm, "block_n": bn, "warps": w, "stages": st,
                     "nsplit": ns, "time_us": t * 1e6, "split_us": ts * 1e6,
                     "gbps": nb / t / 1e9, "copy_share": nb / t / bw, "rel_err": err,
                     "regs": getattr(c, "n_regs", None), "spills": getattr(c, "n_spills", None),
                     "smem": getattr(c.metadata, "shared", None)}
                rows.append(r)
                print(f"B={B} ctx={ctx:6d} T={tree:2d} page={page:2d} {r['kernel']:6s} "
                      f"{bm:2d}x{bn:2d} w{w} s{st} ns={ns:3d}: {t * 1e6:8.1f} us "
                      f"(split {ts * 1e6:8.1f}) {nb / t / 1e9:6.0f} GB/s {nb / t / bw:6.1%} "
                      f"err {err:.1e} regs {r['regs']} spills {r['spills']} smem {r['smem']}",
                      flush=True)
                del plans
        del inps, ref
        torch.cuda.empty_cache()
    with open(out / "calibrate.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
