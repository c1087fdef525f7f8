"""The run behind docs/results/verify_attention_bounds.json (docs/verify-attention.md, "How far
70 % is"): on a Hopper GPU, in one run,

1. the ceilings: bf16 matmul rate (burst and sustained) and copy bandwidth, twice each;
2. the tensor cores' rate on the ``wgmma`` shapes the verify kernels issue, operands in
   shared memory, nothing loaded from global memory (``_mma_loop``: one program per SM, each
   issuing the same product ``reps`` times);
3. the launch floor: a CUDA-graph replay of two empty kernels (grids of 128 and 512
   programs, as a split kernel and its merge), per call;
4. at the six batch-1 large-tree points (64k and 200k context, trees of 16/32/64 nodes,
   8 heads, page 1):
   - cuBLAS on dense, contiguous matrices with the verify's own FLOPs: the two products
     alone (``s = q k^T``, ``o = s v``, no softmax, no mask, no page table), and one product
     ``[rows, 1088] x [1088, context]`` with the same FLOPs in a single call;
   - ``gluon64`` at the chooser's NSPLIT: the call, its split kernel alone, the call with
     bf16 partial outputs (and its error against the float32 reference), and the fixed cost
     (the same grid and NSPLIT over a context of one 64-row tile per split);
   - at 64k context, the call at every NSPLIT within 4 of the chooser's pick (the pick is a
     power of two; the tree's rows can add a 64-row tile to every split).

Usage, from the repository root with the project installed (``pip install -e '.[bench]'``)::

    python3 docs/scripts/verify_attention_bounds.py OUT_DIR
"""

import functools
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from tealeaves.kernels_bench import verify_bench as vb
from tealeaves.kernels_bench.verify_ref import (
    D_K,
    D_V,
    choose_plan,
    kv_bytes,
    make_inputs,
    relative_error,
    verify_reference,
)
from tealeaves.kernels_bench.verify_triton import SplitPlan

#: (name, rows M, columns N, depth K, second depth K2, B stored K-major, warps): the
#: products of one cache tile in the verify kernels (scores 576 deep: 512 + 64, as the
#: kernels issue them), and a GEMM-like tile for comparison.
SHAPES = (
    ("scores 64x64, K 512+64 (gluon64, seesaw)", 64, 64, 512, 64, True, 4),
    ("scores 128x64, K 512+64 (two warpgroups)", 128, 64, 512, 64, True, 8),
    ("scores 64x128, K 512+64", 64, 128, 512, 64, True, 4),
    ("scores 64x256, K 256", 64, 256, 256, 0, True, 4),
    ("p v half 64x256, K 64 (gluon64)", 64, 256, 64, 0, False, 4),
    ("p v 128x256, K 64 (two warpgroups)", 128, 256, 64, 0, False, 8),
    ("GEMM-like 128x256, K 64", 128, 256, 64, 0, True, 8),
)


@gluon.jit
def _mma_loop(OUT, reps, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
              BK2: gl.constexpr, A_SL: gl.constexpr, B_SL: gl.constexpr, A2_SL: gl.constexpr,
              B2_SL: gl.constexpr, B_KMAJOR: gl.constexpr, num_warps: gl.constexpr):
    """``reps`` products ``acc[BM, BN] += a[BM, BK] b[BK, BN]`` by ``wgmma``, both operands in
    shared memory, one in flight while the next is issued (as a GEMM's main loop); with
    ``BK2`` > 0 each rep adds a second product of depth ``BK2`` (the rope part of a 576-deep
    score: 512 + 64).  Writes a sum of the accumulator to ``OUT[program]`` so nothing is
    optimised away."""
    LD: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    a_smem = gl.allocate_shared_memory(gl.bfloat16, [BM, BK], A_SL,
                                       gl.full([BM, BK], 0.001, gl.bfloat16, LD))
    if B_KMAJOR:
        b_smem = gl.allocate_shared_memory(gl.bfloat16, [BN, BK], B_SL,
                                           gl.full([BN, BK], 0.001, gl.bfloat16, LD))
        b_op = b_smem.permute((1, 0))
    else:
        b_smem = gl.allocate_shared_memory(gl.bfloat16, [BK, BN], B_SL,
                                           gl.full([BK, BN], 0.001, gl.bfloat16, LD))
        b_op = b_smem
    if BK2 > 0:
        a2_smem = gl.allocate_shared_memory(gl.bfloat16, [BM, BK2], A2_SL,
                                            gl.full([BM, BK2], 0.001, gl.bfloat16, LD))
        b2_smem = gl.allocate_shared_memory(gl.bfloat16, [BN, BK2], B2_SL,
                                            gl.full([BN, BK2], 0.001, gl.bfloat16, LD))
    fence_async_shared()
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 16])
    acc = gl.zeros([BM, BN], gl.float32, ACC)
    for _ in range(reps):
        acc = warpgroup_mma(a_smem, b_op, acc, is_async=True)
        if BK2 > 0:
            acc = warpgroup_mma(a2_smem, b2_smem.permute((1, 0)), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
    gl.store(OUT + gl.program_id(0), gl.sum(gl.sum(acc, 1), 0))


def mma_rates(sms: int, mm: float) -> list[dict]:
    """TFLOP/s of each of ``SHAPES`` over ``sms`` programs (one per SM), median of 10 calls of
    about 3 ms (6 ms for the two-warpgroup shapes), and the share of the matmul ceiling ``mm``
    (TFLOP/s)."""
    rows = []
    out = torch.empty(sms, device="cuda")
    for name, bm, bn, bk, bk2, kmajor, warps in SHAPES:
        lay = {k: gl.NVMMASharedLayout.get_default_for(v, gl.bfloat16) for k, v in (
            ("a", [bm, bk]), ("b", [bn, bk] if kmajor else [bk, bn]),
            ("a2", [bm, max(bk2, 16)]), ("b2", [bn, max(bk2, 16)]))}
        per = 2 * bm * bn * (bk + bk2)
        reps = max(1, int(2.2e10 / per * (warps // 4)))
        call = functools.partial(_mma_loop[(sms, )], out, reps, bm, bn, bk, bk2, lay["a"],
                                 lay["b"], lay["a2"], lay["b2"], kmajor, num_warps=warps)

        call()
        torch.cuda.synchronize()
        t = vb._median_seconds(call, 10)
        rate = sms * reps * per / t / 1e12
        rows.append({"shape": name, "m": bm, "n": bn, "k": bk + bk2, "warps": warps,
                     "time_ms": round(t * 1e3, 3), "tflops": round(rate, 1),
                     "of_matmul_ceiling": round(rate / mm, 4)})
        print(f"{name}: {rate:.0f} TFLOP/s, {rate / mm:.1%} of {mm:.0f}", flush=True)
    return rows


def _cublas_pair(rows_q: int, ctx: int, g: torch.Generator) -> float:
    """Seconds of ``s = q k^T`` then ``o = s v`` by cuBLAS (bf16, ``v`` the first 512 columns
    of ``k``), ``rows_q`` query rows over ``ctx`` cache rows."""
    q = torch.randn(rows_q, D_K, device="cuda", dtype=torch.bfloat16, generator=g) * 0.05
    kv = torch.randn(ctx, D_K, device="cuda", dtype=torch.bfloat16, generator=g)
    s = torch.empty(rows_q, ctx, device="cuda", dtype=torch.bfloat16)
    o = torch.empty(rows_q, D_V, device="cuda", dtype=torch.bfloat16)

    def pair():
        torch.mm(q, kv.t(), out=s)
        torch.mm(s, kv[:, :D_V], out=o)

    return vb.time_calls([pair])


def cublas_bounds(rows_q: int, ctx: int) -> dict:
    """Seconds of cuBLAS on dense bf16 matrices with the verify's FLOPs at ``rows_q`` query
    rows over ``ctx`` cache rows: ``pair`` (``_cublas_pair``), and ``one`` product of depth
    1088 (= 576 + 512), ``[rows_q, 1088] x [1088, ctx]``, the faster of its two
    orientations."""
    g = torch.Generator(device="cuda").manual_seed(0)
    t_pair = _cublas_pair(rows_q, ctx, g)
    a = torch.randn(rows_q, D_K + D_V, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(ctx, D_K + D_V, device="cuda", dtype=torch.bfloat16, generator=g)
    c = torch.empty(rows_q, ctx, device="cuda", dtype=torch.bfloat16)
    ct = torch.empty(ctx, rows_q, device="cuda", dtype=torch.bfloat16)
    t_one = min(vb.time_calls([lambda: torch.mm(a, b.t(), out=c)]),
                vb.time_calls([lambda: torch.mm(b, a.t(), out=ct)]))
    return {"pair": t_pair, "one": t_one}


def gluon64_parts(ctx: int, tree: int, sms: int) -> dict:
    """``gluon64`` at the chooser's NSPLIT: the cache bytes and FLOPs; seconds of the call, of
    its split kernel alone, of the call with bf16 partials, of the call over one 64-row tile
    per split (the fixed cost); both calls' relative errors against the float32 reference
    (partial outputs poisoned with NaN first); at 64k, the calls at nearby NSPLITs."""
    ns = choose_plan(1, 8, tree, ctx, sms, kernel="gluon64")[1]
    copies = vb.rotating_inputs(vb.Point(1, ctx, tree, 8, 1))
    first = copies[0]
    nb = kv_bytes(first)
    plans = [SplitPlan(i, ns, kernel="gluon64") for i in copies]
    half = [SplitPlan(i, ns, kernel="gluon64", partial_dtype=torch.bfloat16) for i in copies]
    got = {"nsplit": ns, "kv_bytes": nb, "flops": vb._flops(first),
           "call": vb.time_calls([p.__call__ for p in plans]),
           "split_only": vb.time_calls([p.split_only for p in plans]),
           "call_bf16_partials": vb.time_calls([p.__call__ for p in half])}
    ref = verify_reference(first, dtype=torch.float32)
    for plan in (plans[0], half[0]):
        plan.o_part.fill_(float("nan"))
        plan.lse_part.fill_(float("nan"))
    got["rel_err"] = relative_error(plans[0](), ref)
    got["rel_err_bf16_partials"] = relative_error(half[0](), ref)
    del plans, half, ref
    small = [make_inputs(1, ns * 64 - tree, tree, 8, 1, device="cuda", seed=7 + i)
             for i in range(4)]
    fixed = [SplitPlan(i, ns, kernel="gluon64") for i in small]
    got["fixed_call"] = vb.time_calls([p.__call__ for p in fixed])
    got["fixed_split_only"] = vb.time_calls([p.split_only for p in fixed])
    got["tiles_per_split"] = math.ceil(math.ceil((ctx + tree) / ns) / 64)
    if ctx < 100000:
        got["nsplit_sweep_us"] = {}
        for n2 in range(ns - 4, ns + 5):
            p2 = [SplitPlan(i, n2, kernel="gluon64") for i in copies]
            got["nsplit_sweep_us"][n2] = round(vb.time_calls([p.__call__ for p in p2]) * 1e6, 2)
            del p2
    del copies, first
    torch.cuda.empty_cache()
    return got


@triton.jit
def _nop(X):
    """Writes one zero per program: an all-but-empty kernel."""
    tl.store(X + tl.program_id(0), 0.0)


def launch_floor() -> float:
    """Seconds per call of two all-but-empty kernels (128 programs of 8 warps, then 512 of 4:
    a split kernel's grid at the six points, and its merge's), CUDA-graph replays of 4 calls."""
    x = torch.zeros(512, device="cuda")

    def pair():
        _nop[(128, )](x, num_warps=8)
        _nop[(512, )](x, num_warps=4)

    return vb.time_calls([pair] * 4)


def main(out: Path) -> None:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    got = vb.ceilings()
    mm, mms, bw = (statistics.median(got[k]) for k in ("burst", "sustained", "copy"))
    mma = mma_rates(sms, mm)
    floor_launch = launch_floor()
    print(f"two empty kernels: {floor_launch * 1e6:.2f} us per call", flush=True)
    points = []
    for ctx in (65536, 200000):
        for tree in (16, 32, 64):
            g64 = gluon64_parts(ctx, tree, sms)
            cb = cublas_bounds(8 * tree, ctx + tree)
            floor = max(g64["kv_bytes"] / (bw * 1e9), g64["flops"] / (mm * 1e12))
            pt = {"context": ctx, "tree": tree, "heads": 8, "page_size": 1,
                  "floor_us": round(floor * 1e6, 2)}
            for k, v in list(cb.items()) + list(g64.items()):
                if k in ("pair", "one") or k.startswith(("call", "split", "fixed")):
                    name = f"cublas_{k}" if k in cb else f"gluon64_{k}"
                    pt[f"{name}_us"] = round(v * 1e6, 2)
                    if not k.startswith("fixed"):  # a share of the whole problem's floor
                        pt[f"{name}_share"] = round(floor / v, 4)
                else:
                    pt[k] = v
            points.append(pt)
            print(json.dumps(pt), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "verify_attention_bounds.json").write_text(json.dumps({
        "machine": vb.machine(), "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "ceilings_tflops_gbps": {k: [round(v, 1) for v in vs] for k, vs in got.items()},
        "copy_gbps": round(bw, 1), "matmul_tflops": round(mm, 1),
        "matmul_sustained_tflops": round(mms, 1), "wgmma_rates": mma,
        "launch_floor_us": round(floor_launch * 1e6, 2), "points": points},
        indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
