"""DDTree verify attention (kernels_bench.verify_*): the torch reference against a dense float64
attention written out plainly, the tree-mask builder, the NSPLIT chooser's rules, and the
Triton kernels against the reference (on a CUDA GPU; under Triton's CPU interpreter where
Triton is installed without a GPU; skipped otherwise, saying why)."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip(
    "torch", reason="the verify-attention reference is written in torch: pip install -e "
                    "'.[bench]' (CPU torch is enough for these tests)")

from tealeaves.kernels_bench.verify_ref import (
    D_V,
    MAX_ROWS,
    SM_SCALE,
    SPLIT_COST_ROWS_64,
    WIDE_KERNEL,
    WIDE_KERNELS,
    WIDE_ROWS,
    VerifyShapeError,
    block_rows,
    choose_nsplit,
    choose_plan,
    kv_bytes,
    make_inputs,
    random_tree,
    relative_error,
    split_blocks,
    tree_bits,
    tree_mask,
    verify_reference,
)


def test_tree_mask_of_a_chain_a_star_and_a_bushy_tree():
    chain = tree_mask(torch.tensor([-1, 0, 1, 2]))
    assert torch.equal(chain, torch.tril(torch.ones(4, 4, dtype=torch.bool)))
    star = tree_mask(torch.tensor([-1, 0, 0, 0]))
    assert star.sum().item() == 4 + 3 and star[:, 0].all() and not star[1, 2]
    #        0
    #      1   2
    #     3     4
    #           5
    m = tree_mask(torch.tensor([[-1, 0, 0, 1, 2, 4]]))[0]
    assert m[5].nonzero().flatten().tolist() == [0, 2, 4, 5]
    assert m[3].nonzero().flatten().tolist() == [0, 1, 3]
    assert not m[3, 2] and not m[4, 1]
    for bad in ([-1, 1], [-1, 0, 5], [0, -1], [-1, -2]):
        with pytest.raises(VerifyShapeError, match="parent"):
            tree_mask(torch.tensor(bad))


def test_random_trees_are_topological_and_rooted():
    g = torch.Generator().manual_seed(1)
    for T in (1, 2, 16, 200):
        p = random_tree(T, g)
        assert p[0] == -1 and all(-1 <= int(p[i]) < i for i in range(T))
        assert tree_mask(p).diagonal().all()


def _dense(inp) -> torch.Tensor:
    """Attention written out element by element from the definition: the cache rows looked up
    one position at a time, the mask as a full [T, N] matrix, softmax by exp and sum."""
    B, T, H = inp.shape
    out = torch.zeros(B, T, H, D_V, dtype=torch.float64)
    for b in range(B):
        L = int(inp.ctx_lens[b])
        rows = []
        for pos in range(L + T):
            page = int(inp.page_table[b, pos // inp.page_size])
            rows.append(inp.kv_cache[page, pos % inp.page_size].double())
        k = torch.stack(rows)
        allowed = torch.zeros(T, L + T, dtype=torch.bool)
        for i in range(T):
            allowed[i, :L] = True
            j = i
            while j >= 0:  # walk up the tree: itself, parent, grandparent, ...
                allowed[i, L + j] = True
                j = int(inp.parents[b, j])
        for i in range(T):
            for h in range(H):
                s = (k @ inp.q[b, i, h].double()) * SM_SCALE
                s[~allowed[i]] = -math.inf
                w = torch.exp(s - s.max())
                out[b, i, h] = (w / w.sum()) @ k[:, :D_V]
    return out


@pytest.mark.parametrize("batch,context,tree,heads,page,scattered,ragged", [
    (1, 37, 16, 8, 1, True, False),
    (2, 50, 5, 16, 4, True, True),
    (3, 9, 20, 2, 64, False, True),
    (1, 1, 1, 1, 1, True, False),
])
def test_reference_matches_dense_float64_attention(batch, context, tree, heads, page, scattered,
                                                   ragged):
    inp = make_inputs(batch, context, tree, heads, page, scattered=scattered, ragged=ragged,
                      dtype=torch.float64, seed=batch * 100 + context)
    assert relative_error(verify_reference(inp), _dense(inp)) < 1e-12


def test_reference_does_not_depend_on_where_pages_sit():
    inp = make_inputs(2, 70, 9, 4, 8, scattered=False, dtype=torch.float64, seed=3)
    perm = torch.randperm(inp.kv_cache.shape[0], generator=torch.Generator().manual_seed(5))
    moved = make_inputs(2, 70, 9, 4, 8, scattered=False, dtype=torch.float64, seed=3)
    moved.kv_cache = torch.empty_like(inp.kv_cache)
    moved.kv_cache[perm] = inp.kv_cache
    moved.page_table = perm[inp.page_table.long()].to(torch.int32)
    assert relative_error(verify_reference(moved), verify_reference(inp)) < 1e-14
    assert kv_bytes(inp) == (2 * 70 + 2 * 9) * 576 * 8


def test_bad_shapes_are_refused_by_name():
    with pytest.raises(VerifyShapeError, match="page_size"):
        make_inputs(1, 10, 4, 8, 3)
    with pytest.raises(VerifyShapeError, match="heads"):
        make_inputs(1, 10, 4, 0, 1)
    with pytest.raises(VerifyShapeError, match="context"):
        choose_nsplit(1, 8, 16, 0, 132)


def test_chooser_fills_the_gpu_without_tiny_splits():
    sms = 132
    # one tile of 32 rows (4 nodes x 8 heads): one program per SM, 132 -> 128
    assert choose_nsplit(1, 8, 4, 65536, sms) == 128
    assert choose_nsplit(1, 8, 4, 4096, sms) == 64      # no split under 64 rows
    assert choose_nsplit(1, 8, 16, 65536, sms) == 32    # four 32-row tiles (Gluon)
    assert choose_nsplit(1, 8, 16, 65536, sms, block_m=64) == 64  # two 64-row tiles
    assert choose_nsplit(8, 8, 4, 200000, sms) == 16    # eight sequences
    assert choose_nsplit(8, 16, 64, 65536, sms) == 1    # 256 tiles fill the GPU already
    assert choose_nsplit(1, 8, 4, 100, sms) == 1        # 104 rows: one split
    assert choose_nsplit(1, 8, 4, 200, sms) == 2        # 204 rows: two of 102, not four of 51
    assert choose_nsplit(1, 8, 2, 262144, sms) == 128   # 16-row tiles: one program per SM too
    # waves: 12 tiles x 8 = 96 programs leave 36 SMs idle; x 32 = 384 fill three waves
    assert choose_nsplit(3, 8, 16, 65536, sms) == 32
    for ctx in (1, 1000, 4096, 65536, 200000):
        for b in (1, 2, 8):
            v = choose_nsplit(b, 8, 16, ctx, sms)
            assert v & (v - 1) == 0 and 1 <= v <= 256
            assert (ctx + 16) / v >= 64 or v == 1
    assert [choose_nsplit(1, 8, 16, c, sms) for c in (64, 512, 4096, 65536)] == sorted(
        choose_nsplit(1, 8, 16, c, sms) for c in (64, 512, 4096, 65536))
    with pytest.raises(VerifyShapeError, match="sms"):
        choose_nsplit(1, 8, 4, 65536, 0)


def test_the_plan_takes_the_wide_kernel_for_large_trees():
    sms = 132
    # 4 nodes x 8 heads = 32 rows: one 32-row tile of the one-warpgroup kernel
    assert choose_plan(1, 8, 4, 65536, sms) == ("gluon", choose_nsplit(1, 8, 4, 65536, sms))
    for tree, heads in ((8, 8), (16, 8), (64, 8), (256, 16), (5, 16), (8, 16), (15, 8)):
        kernel, ns = choose_plan(1, heads, tree, 65536, sms)
        assert kernel == (WIDE_KERNEL if tree * heads >= WIDE_ROWS else "gluon")
        if kernel == WIDE_KERNEL:  # its NSPLIT is counted in 64-row tiles
            assert ns == choose_nsplit(1, heads, tree, 65536, sms, 64, SPLIT_COST_ROWS_64)
    # 64-node trees, 8 heads: eight row tiles, so 16 splits fill 128 of 132 SMs
    assert choose_plan(1, 8, 64, 200000, sms) == (WIDE_KERNEL, 16)
    assert choose_plan(1, 8, 16, 65536, sms)[0] == WIDE_KERNEL
    assert WIDE_KERNEL in WIDE_KERNELS
    for k in WIDE_KERNELS:  # either wide kernel can be asked for; the same 64-row tiles
        assert choose_plan(1, 8, 64, 200000, sms, kernel=k) == (k, 16)
    assert choose_plan(1, 8, 64, 65536, sms, hopper=False)[0] == "triton"
    assert choose_plan(1, 8, 64, 65536, sms, kernel="gluon") == (
        "gluon", choose_nsplit(1, 8, 64, 65536, sms, 32))
    with pytest.raises(VerifyShapeError, match="kernel"):
        choose_plan(1, 8, 64, 65536, sms, kernel="cuda")
    with pytest.raises(VerifyShapeError, match="batch"):
        choose_plan(0, 8, 64, 65536, sms)
    # not a whole number: named, never a bare ValueError / OverflowError from the maths
    for bad in (float("nan"), float("inf"), 65536.5, None, "65536", True):
        with pytest.raises(VerifyShapeError, match="context"):
            choose_plan(1, 8, 64, bad, sms)
    with pytest.raises(VerifyShapeError, match="sms"):
        choose_nsplit(1, 8, 64, 65536, float("inf"))
    with pytest.raises(VerifyShapeError, match="tree"):
        choose_plan(1, 8, "16", 65536, sms)
    # int32 cache positions: a context that could wrap in the kernels' split arithmetic
    # (cdiv(N, NSPLIT) rounded up to tiles, times NSPLIT) is refused, never wrapped
    assert MAX_ROWS == 2**31 - 2**23
    assert choose_nsplit(1, 8, 4, MAX_ROWS - 4, sms) >= 1
    for n in (1, 3, 255, 65535):  # the largest split's end stays within int32
        chunk = math.ceil(math.ceil(MAX_ROWS / n) / 64) * 64   # the kernels' chunk of rows
        assert MAX_ROWS + n - 1 < 2**31 and n * chunk < 2**31
    for huge in (MAX_ROWS - 3, 2**31 - 1, 2**31, 2**32 + 5, 10**30):
        with pytest.raises(VerifyShapeError, match="context"):
            choose_nsplit(1, 8, 4, huge, sms)
        with pytest.raises(VerifyShapeError, match="context"):
            make_inputs(1, huge, 4, 8, 1)
    # numpy integers are whole numbers, taken as Python ints (no fixed-width overflow)
    np = pytest.importorskip("numpy")
    assert choose_plan(np.int32(1), np.int16(200), np.int16(300), np.int32(MAX_ROWS - 300),
                       np.int64(sms)) == choose_plan(1, 200, 300, MAX_ROWS - 300, sms)
    with pytest.raises(VerifyShapeError, match="fixed_rows must be at least 0"):
        choose_nsplit(1, 8, 4, 65536, sms, fixed_rows=-1)


def test_tree_bits_hold_the_mask_bit_for_bit():
    """The seesaw kernel's packed mask: bit ``p % 32`` of word ``p // 32 - L // 32`` for
    cache position ``p = L + j``, for every pair of nodes, with contexts at every offset
    in a word (ragged), trees crossing word boundaries, and a 300-node tree."""
    for B, L, T, seed in ((3, 100, 37, 1), (4, 31, 33, 2), (1, 64, 300, 3), (2, 5, 1, 4)):
        inp = make_inputs(B, L, T, 2, 4, seed=seed, ragged=True)
        bits = tree_bits(inp.mask, inp.ctx_lens)
        assert bits.dtype == torch.int32 and bits.shape == (B, T, T // 32 + 2)
        pos = inp.ctx_lens.long()[:, None] + torch.arange(T)                 # [B, T]
        word = pos // 32 - inp.ctx_lens.long()[:, None] // 32
        got = (bits.long().gather(2, word[:, None, :].expand(B, T, T))
               >> (pos % 32)[:, None, :]) & 1
        assert torch.equal(got.bool(), inp.mask.bool())
        # no bit set outside the tree: the words hold exactly the mask's ones
        ones = sum((int(w) & 0xFFFFFFFF).bit_count() for w in bits.flatten())
        assert ones == int(inp.mask.sum())
    mask = torch.ones(2, 3, 3, dtype=torch.bool)
    for bad_mask, lens, why in ((torch.ones(2, 3, 4, dtype=torch.bool), torch.tensor([5, 6]),
                                 "expected mask"),
                                (mask, torch.tensor([5]), "expected mask"),
                                (mask, torch.tensor([-1, 6]), "0 or more"),
                                (mask, torch.tensor([1.0, 2.0]), "integers"),
                                (mask, torch.tensor([True, False]), "integers")):
        with pytest.raises(ValueError, match=f"tree_bits: .*{why}"):
            tree_bits(bad_mask, lens)
    with pytest.raises(TypeError, match="tree_bits: expected tensors"):
        tree_bits([[[1]]], torch.tensor([1]))


def test_a_hopper_kernel_refuses_inputs_off_the_gpu():
    pytest.importorskip("triton", reason="Triton is not installed (SplitPlan lives beside "
                                         "the Triton kernels)")
    from tealeaves.kernels_bench.verify_triton import SplitPlan

    inp = make_inputs(2, 100, 5, 4, 16)  # on the CPU
    for kernel in ("gluon", "gluon64", "seesaw"):
        with pytest.raises(VerifyShapeError, match=f"the {kernel} kernel runs on a Hopper GPU"):
            SplitPlan(inp, 2, kernel=kernel)
    assert SplitPlan(inp, 2, kernel="triton").grid == (2, 1, 2)


def test_the_large_tree_sweep_reads_the_done_when_points_first():
    from tealeaves.kernels_bench.verify_bench import TREE_VALIDATION_POINTS, tree_points

    pts = tree_points()
    assert len(pts) == len(set(pts)) == 135
    assert [(p.batch, p.context, p.tree, p.heads, p.page_size) for p in pts[:6]] == [
        (1, c, t, 8, 1) for c in (65536, 200000) for t in (16, 32, 64)]
    assert {p.tree for p in pts} == {16, 32, 64, 128, 256}
    assert {p.batch for p in pts} == {1, 4} and {p.page_size for p in pts} == {1, 16, 64}
    # the validation shapes are none of the sweep's
    assert not set(TREE_VALIDATION_POINTS) & set(pts)
    assert tree_points(validate=True) == list(TREE_VALIDATION_POINTS)


def test_tile_settings_per_kernel():
    assert block_rows(16) == 16 and block_rows(32) == 32 and block_rows(33) == 32
    assert block_rows(16, "triton") == 16 and block_rows(33, "triton") == 64
    g = split_blocks(128, "gluon")
    assert g == {"block_m": 32, "block_n": 64, "num_warps": 4, "num_stages": 1}
    assert split_blocks(8, "gluon")["block_m"] == 16
    for rows in (8, 16, 32, 64, 512):
        t = split_blocks(rows, "triton")
        assert t["block_m"] == block_rows(rows, "triton") and t["num_stages"] >= 3
    for k in WIDE_KERNELS:
        assert split_blocks(128, k) == {"block_m": 64, "block_n": 64, "num_warps": 4,
                                        "num_stages": 1}
        assert block_rows(8, k) == 64
    with pytest.raises(VerifyShapeError, match="kernel"):
        split_blocks(32, "cuda")


_KERNEL_CHECK = r"""
import torch, sys
from tealeaves.kernels_bench.verify_ref import make_inputs, verify_reference, relative_error
from tealeaves.kernels_bench.verify_triton import gluon_ready, verify_split, verify_unsplit
dev = sys.argv[1]
dt = torch.bfloat16 if dev == "cuda" else torch.float32
cases = [(1, 300, 16, 8, 1, 4), (2, 500, 7, 16, 16, 8), (3, 130, 33, 8, 64, 3),
         (2, 70, 1, 8, 2, 2)]
if dev == "cuda":
    cases += [(1, 65536, 16, 8, 1, 128), (4, 20000, 64, 16, 1, 16), (2, 4096, 4, 8, 64, 32),
              (8, 65536, 4, 8, 1, 16), (1, 5000, 2, 8, 32, 256)]
kernels = ["triton"] + (["gluon", "gluon64", "seesaw"] if dev == "cuda" and gluon_ready() is None
                        else [])
print("split kernels:", kernels, "gluon:", gluon_ready() or "ready")
for seed, (B, L, T, H, ps, ns) in enumerate(cases):
    inp = make_inputs(B, L, T, H, ps, dtype=dt, device=dev, seed=seed, ragged=True)
    ref = verify_reference(inp, dtype=torch.float32 if dev == "cuda" else torch.float64)
    kw = {} if dev == "cuda" else {"block_m": 16, "block_n": 16, "num_stages": 1}
    outs = [(f"split_{k}", verify_split(inp, ns, kernel=k, **kw)) for k in kernels]
    outs.append(("unsplit", verify_unsplit(inp, **{k: v for k, v in kw.items()
                                                   if k != "num_stages"})))
    for name, out in outs:
        err = relative_error(out, ref)
        print(name, B, L, T, H, ps, ns, f"{err:.2e}")
        assert err < (2e-2 if dev == "cuda" else 1e-5), (name, err)
print("ok")
"""


def test_triton_kernels_agree_with_the_reference():
    if importlib.util.find_spec("triton") is None:
        pytest.skip("Triton is not installed (the kernels run on the GPU machine: "
                    "pip install triton, or run there)")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    env = dict(os.environ)
    if dev == "cpu":
        env["TRITON_INTERPRET"] = "1"  # Triton's interpreter, on the CPU, small shapes
    r = subprocess.run([sys.executable, "-c", _KERNEL_CHECK, dev], capture_output=True,
                       text=True, env=env, timeout=1200, check=False)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
    if dev == "cuda" and "gluon: ready" not in r.stdout:
        pytest.skip("the Triton kernel passed; the Gluon kernel needs a Hopper GPU: "
                    + r.stdout.splitlines()[0])
