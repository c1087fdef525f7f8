"""Tile-setting calibration of the split-KV verify kernel on a GPU (run once; the choice is
written into ``verify_bench.split_blocks``): times each candidate (block_m, block_n, warps,
stages) at NSPLIT 32..256 on 64k context, 8 heads, batch 1, page 1, for trees of 4, 16 and 64
nodes, and prints the best."""

from __future__ import annotations

import sys

import torch

from .verify_bench import copy_bandwidth, time_calls
from .verify_ref import kv_bytes, make_inputs, relative_error, verify_reference
from .verify_triton import SplitPlan

CANDIDATES = [(16, 64, 4, 2), (16, 64, 4, 3), (32, 64, 4, 3), (32, 64, 8, 3), (32, 32, 4, 4),
              (64, 64, 8, 2), (64, 64, 8, 3), (64, 32, 8, 4)]


def main() -> int:
    bw = copy_bandwidth()
    print(f"copy {bw / 1e9:.0f} GB/s")
    for tree in (4, 16):
        inps = [make_inputs(1, 65536, tree, 8, 1, device="cuda", seed=s) for s in range(8)]
        ref = verify_reference(inps[0], dtype=torch.float32)
        nb = kv_bytes(inps[0])
        for bm, bn, w, st in CANDIDATES:
            if bm > 16 and bm > tree * 8 * 2:
                continue
            for ns in (64, 128, 256):
                try:
                    plans = [SplitPlan(i, ns, block_m=bm, block_n=bn, num_warps=w, num_stages=st)
                             for i in inps]
                    err = relative_error(plans[0](), ref)
                    t = time_calls([p.__call__ for p in plans])
                    ts = time_calls([p.split_only for p in plans])
                except Exception as exc:  # noqa: BLE001 - out of resources: report and go on
                    print(f"T={tree} {bm}x{bn} w{w} s{st} ns={ns}: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:100]}")
                    break
                c = plans[0].compiled
                print(f"T={tree:3d} bm={bm:3d} bn={bn:3d} w={w} st={st} ns={ns:3d}: "
                      f"{t * 1e6:7.1f} us (split {ts * 1e6:7.1f}) {nb / t / 1e9:6.0f} GB/s "
                      f"{nb / t / bw:6.1%} err {err:.1e} regs {getattr(c, 'n_regs', '?')} "
                      f"spills {getattr(c, 'n_spills', '?')} smem "
                      f"{getattr(c.metadata, 'shared', '?')} async "
                      f"{str(c.asm.get('ttgir', '')).count('async_copy_global_to_local')} "
                      f"wgmma {str(c.asm.get('ttgir', '')).count('warp_group_dot')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
