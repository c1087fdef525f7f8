"""Triton kernels for DDTree verify attention over the paged MLA latent cache (the problem and
its reference: ``verify_ref``).

- ``verify_unsplit``: the baseline the case started from, one program per (sequence, head),
  each walking the whole cache (and so reading every cache row once per head): at batch 1 and
  8 heads that is 8 programs for a 132-SM GPU.
- ``verify_split``: split-KV (flash-decoding, Dao et al. 2023): every head and tree node of a
  sequence are the rows of one matrix (MLA shares the cache across heads, so a cache tile is
  read once for all of them), the cache range is cut into ``nsplit`` pieces, each program
  attends its rows to one piece and writes a partial output and its log-sum-exp, and a second
  kernel merges the pieces (out = sum_s exp(lse_s - lse) * o_s).  The same kernel takes any
  page size from 1 (a gather per row) to 64 (``PAGE`` is a compile-time constant, so the
  page arithmetic is shifts).  ``SplitPlan(kernel="gluon")`` runs ``verify_gluon``'s Hopper
  kernel instead, with the same partial outputs and merge.

Both keep the softmax online (Milakov & Gimelshein 2018; FlashAttention), in base 2 with the
scale folded into log2(e).  Needs a CUDA GPU and Triton, imported lazily by the callers; runs
under ``TRITON_INTERPRET=1`` on the CPU for small checks.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from tealeaves.kernels_bench.verify_ref import (
    D_K,
    D_ROPE,
    D_V,
    HOPPER_KERNELS,
    KERNELS,
    WIDE_KERNELS,
    VerifyInputs,
    VerifyShapeError,
    split_blocks,
    tree_bits,
    whole,
)

_LOG2E = 1.4426950408889634


@triton.jit
def _attend(acc, m_i, l_i, q_nope, q_rope, node, row_ok, KV, PT, MASK, b, T, L, n_lo, n_hi,
            pt_stride, qk_scale, PAGE: tl.constexpr, BLOCK_N: tl.constexpr,
            D_V: tl.constexpr, D_R: tl.constexpr, D_K: tl.constexpr, MASKED: tl.constexpr):
    """Attend rows (``q_nope``/``q_rope``, tree node ``node`` each) to cache positions
    ``[n_lo, n_hi)`` of sequence ``b``.  ``MASKED``: the positions are tree nodes
    (``>= L``), kept where ``MASK[b, node, pos - L]``; else cached tokens, all kept."""
    dv = tl.arange(0, D_V)
    dr = tl.arange(0, D_R)
    # page ids one tile ahead, carried by the loop: a cache load whose address comes from a
    # load in the same iteration is not multi-buffered by Triton 3.6's pipeliner (the copies
    # of a tile are all awaited before its products: no overlap); one whose address is
    # carried in is (one tile in flight with num_stages=3)
    nxt = n_lo + tl.arange(0, BLOCK_N)
    page = tl.load(PT + b * pt_stride + nxt // PAGE, mask=nxt < n_hi, other=0)
    for start in range(n_lo, n_hi, BLOCK_N):
        pos = start + tl.arange(0, BLOCK_N)
        ok = pos < n_hi
        base = KV + (page.to(tl.int64) * PAGE + pos % PAGE) * D_K
        k_nope = tl.load(base[:, None] + dv[None, :], mask=ok[:, None], other=0.0)
        k_rope = tl.load(base[:, None] + D_V + dr[None, :], mask=ok[:, None], other=0.0)
        nxt = pos + BLOCK_N
        page = tl.load(PT + b * pt_stride + nxt // PAGE, mask=nxt < n_hi, other=0)
        s = tl.dot(q_nope, tl.trans(k_nope))
        s = tl.dot(q_rope, tl.trans(k_rope), s) * qk_scale
        if MASKED:
            j = pos - L
            keep = tl.load(MASK + (b * T + node[:, None]) * T + j[None, :],
                           mask=row_ok[:, None] & ok[None, :], other=0)
            s = tl.where(ok[None, :] & (keep != 0), s, float("-inf"))
        else:
            s = tl.where(ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        # V is the same rows again, loaded on its own (an L2 hit): a tile that feeds one dot
        # only can be pipelined straight into shared memory
        v = tl.load(base[:, None] + dv[None, :], mask=ok[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _split_kernel(Q, KV, PT, LENS, MASK, O_PART, LSE_PART, qk_scale, T, M, nsplit, pt_stride,
                  H: tl.constexpr, PAGE: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, D_V: tl.constexpr, D_R: tl.constexpr,
                  D_K: tl.constexpr):
    b = tl.program_id(0)
    mt = tl.program_id(1)
    sp = tl.program_id(2)
    L = tl.load(LENS + b)
    N = L + T
    chunk = tl.cdiv(tl.cdiv(N, nsplit), BLOCK_N) * BLOCK_N
    n_lo = sp * chunk
    n_hi = tl.minimum(N, n_lo + chunk)
    rows = mt * BLOCK_M + tl.arange(0, BLOCK_M)  # row = node * H + head
    row_ok = rows < M
    node = rows // H
    dv = tl.arange(0, D_V)
    dr = tl.arange(0, D_R)
    qb = Q + (b * M + rows).to(tl.int64) * D_K
    q_nope = tl.load(qb[:, None] + dv[None, :], mask=row_ok[:, None], other=0.0)
    q_rope = tl.load(qb[:, None] + D_V + dr[None, :], mask=row_ok[:, None], other=0.0)
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D_V], tl.float32)
    acc, m_i, l_i = _attend(acc, m_i, l_i, q_nope, q_rope, node, row_ok, KV, PT, MASK, b, T,
                            L, n_lo, tl.minimum(n_hi, L), pt_stride, qk_scale, PAGE, BLOCK_N,
                            D_V, D_R, D_K, False)
    acc, m_i, l_i = _attend(acc, m_i, l_i, q_nope, q_rope, node, row_ok, KV, PT, MASK, b, T,
                            L, tl.maximum(n_lo, L), n_hi, pt_stride, qk_scale, PAGE, BLOCK_N,
                            D_V, D_R, D_K, True)
    has = l_i > 0
    lse = tl.where(has, m_i + tl.math.log2(tl.where(has, l_i, 1.0)), float("-inf"))
    o = acc / tl.where(has, l_i, 1.0)[:, None]
    part = (b * nsplit + sp) * M + rows
    tl.store(LSE_PART + part, lse, mask=row_ok)
    tl.store(O_PART + part.to(tl.int64)[:, None] * D_V + dv[None, :],
             o.to(O_PART.dtype.element_ty), mask=row_ok[:, None])


@triton.jit
def _combine_kernel(O_PART, LSE_PART, OUT, M, nsplit, D_V: tl.constexpr,
                    BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    """out[b, r, d-block] = sum_s w_s o_s with w_s = exp2(lse_s - max) / sum: every split of
    one row's ``BLOCK_D`` columns loaded at once (no serial walk over the splits)."""
    pid = tl.program_id(0)
    b = pid // M
    r = pid % M
    s = tl.arange(0, BLOCK_S)
    ok = s < nsplit
    lse = tl.load(LSE_PART + (b * nsplit + s) * M + r, mask=ok, other=float("-inf"))
    w = tl.where(ok, tl.math.exp2(lse - tl.max(lse, 0)), 0.0)
    w = w / tl.sum(w, 0)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    o = tl.load(O_PART + ((b * nsplit + s) * M + r).to(tl.int64)[:, None] * D_V + d[None, :],
                mask=ok[:, None], other=0.0)
    out = tl.sum(o.to(tl.float32) * w[:, None], 0)
    tl.store(OUT + (b * M + r).to(tl.int64) * D_V + d, out.to(OUT.dtype.element_ty))


@triton.jit
def _unsplit_kernel(Q, KV, PT, LENS, MASK, OUT, qk_scale, T, pt_stride, H: tl.constexpr,
                    PAGE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    D_V: tl.constexpr, D_R: tl.constexpr, D_K: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    L = tl.load(LENS + b)
    N = L + T
    dv = tl.arange(0, D_V)
    dr = tl.arange(0, D_R)
    for m0 in range(0, T, BLOCK_M):  # one head's tree nodes, a tile at a time
        node = m0 + tl.arange(0, BLOCK_M)
        row_ok = node < T
        rows = node * H + h
        qb = Q + (b * T * H + rows).to(tl.int64) * D_K
        q_nope = tl.load(qb[:, None] + dv[None, :], mask=row_ok[:, None], other=0.0)
        q_rope = tl.load(qb[:, None] + D_V + dr[None, :], mask=row_ok[:, None], other=0.0)
        m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, D_V], tl.float32)
        acc, m_i, l_i = _attend(acc, m_i, l_i, q_nope, q_rope, node, row_ok, KV, PT, MASK, b,
                                T, L, 0, L, pt_stride, qk_scale, PAGE, BLOCK_N, D_V, D_R,
                                D_K, False)
        acc, m_i, l_i = _attend(acc, m_i, l_i, q_nope, q_rope, node, row_ok, KV, PT, MASK, b,
                                T, L, L, N, pt_stride, qk_scale, PAGE, BLOCK_N, D_V, D_R,
                                D_K, True)
        o = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
        tl.store(OUT + (b * T * H + rows).to(tl.int64)[:, None] * D_V + dv[None, :],
                 o.to(OUT.dtype.element_ty), mask=row_ok[:, None])


def _check(inp: VerifyInputs) -> None:
    if inp.q.shape[-1] != D_K or inp.kv_cache.shape[-1] != D_K:
        raise ValueError(f"q and kv_cache rows must be {D_K} wide")
    if not inp.q.is_contiguous() or not inp.kv_cache.is_contiguous():
        raise ValueError("q and kv_cache must be contiguous")


def verify_unsplit(inp: VerifyInputs, block_m: int = 16, block_n: int = 32,
                   num_warps: int = 4, num_stages: int = 2) -> torch.Tensor:
    """The unsplit baseline: ``out[B, T, H, 512]``, one program per (sequence, head)."""
    _check(inp)
    B, T, H = inp.shape
    out = torch.empty(B, T, H, D_V, dtype=inp.q.dtype, device=inp.q.device)
    mask = inp.mask.to(torch.uint8) if inp.mask.dtype == torch.bool else inp.mask
    _unsplit_kernel[(B, H)](
        inp.q, inp.kv_cache, inp.page_table, inp.ctx_lens, mask, out,
        inp.sm_scale * _LOG2E, T, inp.page_table.stride(0), H=H, PAGE=inp.page_size,
        BLOCK_M=block_m, BLOCK_N=block_n, D_V=D_V, D_R=D_ROPE, D_K=D_K,
        num_warps=num_warps, num_stages=num_stages)
    return out


class SplitPlan:
    """Buffers and launch settings of one split-KV verify for one input shape, reused across
    timed launches and CUDA-graph replays.

    Args:
        inp: the problem (``verify_ref.make_inputs``).
        nsplit: pieces the cache range of each sequence is cut into (``choose_nsplit``).
        kernel: ``"gluon"``, ``"gluon64"`` or ``"seesaw"`` (``verify_gluon``'s kernels of
            one, two and three warpgroups, Hopper only; ``seesaw`` reads the tree mask
            packed by ``verify_ref.tree_bits``, done here once per plan: a plan reused after
            ``inp.mask`` or ``inp.ctx_lens`` change in place must be built again) or
            ``"triton"``
            (this module's ``_split_kernel``, any CUDA GPU and Triton's CPU interpreter).
        block_m, block_n, num_warps, num_stages: tile settings; ``None`` takes
            ``verify_ref.split_blocks`` (the settings timed best on the H200).
        partial_dtype: dtype of the partial outputs merged by the second kernel.

    Raises:
        ValueError: rows not 576 wide, or non-contiguous ``q``/``kv_cache``.
        VerifyShapeError: an unknown kernel, a Hopper kernel with inputs off the GPU, Gluon
            tiles it does not take, or an NSPLIT or batch over a grid axis's 65,535.
    """

    def __init__(self, inp: VerifyInputs, nsplit: int, kernel: str = "triton",
                 block_m: int | None = None, block_n: int | None = None,
                 num_warps: int | None = None, num_stages: int | None = None,
                 partial_dtype: torch.dtype = torch.float32) -> None:
        _check(inp)
        B, T, H = inp.shape
        if kernel not in KERNELS:
            raise VerifyShapeError(f"kernel: expected one of {', '.join(KERNELS)}, got {kernel!r}")
        if kernel in HOPPER_KERNELS and inp.q.device.type != "cuda":
            raise VerifyShapeError(f"the {kernel} kernel runs on a Hopper GPU (sm_90); the "
                                   f"inputs are on {inp.q.device.type} (kernel 'triton' runs "
                                   "under Triton's CPU interpreter)")
        cfg = split_blocks(T * H, kernel)
        for k, v in (("block_m", block_m), ("block_n", block_n), ("num_warps", num_warps),
                     ("num_stages", num_stages)):
            if v is not None:
                cfg[k] = v
        if kernel == "gluon" and (cfg["block_n"] != 64 or cfg["num_warps"] != 4
                                  or cfg["block_m"] not in (16, 32)):
            raise VerifyShapeError("the Gluon kernel takes tiles of 64 cache rows, 16 or 32 "
                                   "query rows and 4 warps (one warpgroup)")
        if kernel in WIDE_KERNELS and (cfg["block_n"] != 64 or cfg["num_warps"] != 4
                                       or cfg["block_m"] != 64):
            raise VerifyShapeError(f"the {kernel} kernel takes tiles of 64 cache rows, 64 query "
                                   "rows and 4 warps (its first warpgroup; more are added)")
        nsplit = whole("nsplit", nsplit, most=65535)  # a grid axis
        if kernel in WIDE_KERNELS and B > 65535:
            raise VerifyShapeError(f"{kernel} takes up to 65535 sequences (a grid axis), got {B}")
        self.inp, self.nsplit, self.kernel = inp, nsplit, kernel
        self.block_m, self.block_n = cfg["block_m"], cfg["block_n"]
        self.num_warps, self.num_stages = cfg["num_warps"], cfg["num_stages"]
        self.M = T * H
        dev = inp.q.device
        self.mask = inp.mask.to(torch.uint8) if inp.mask.dtype == torch.bool else inp.mask
        if kernel == "seesaw":
            self.bits = tree_bits(inp.mask, inp.ctx_lens)
        self.o_part = torch.empty(B, self.nsplit, self.M, D_V, dtype=partial_dtype, device=dev)
        self.lse_part = torch.empty(B, self.nsplit, self.M, dtype=torch.float32, device=dev)
        self.out = torch.empty(B, T, H, D_V, dtype=inp.q.dtype, device=dev)

    @property
    def settings(self) -> dict:
        """The tile settings in use (for result rows)."""
        return {"block_m": self.block_m, "block_n": self.block_n,
                "num_warps": self.num_warps, "num_stages": self.num_stages}

    @property
    def grid(self) -> tuple[int, int, int]:
        """Programs of the split kernel: ``(B, ceil(M / block_m), nsplit)``; for ``gluon64``
        and ``seesaw`` ``(ceil(M / 64), nsplit, B)``, the row tiles that read one cache range
        side by side."""
        B = self.inp.q.shape[0]
        if self.kernel in WIDE_KERNELS:
            return (math.ceil(self.M / self.block_m), self.nsplit, B)
        return (B, math.ceil(self.M / self.block_m), self.nsplit)

    def split_only(self) -> None:
        """Launch the split kernel alone (timing its share)."""
        self._split()

    def __call__(self) -> torch.Tensor:
        """Both launches (split, merge); returns ``out[B, T, H, 512]`` (reused buffer)."""
        self._split()
        inp = self.inp
        B = inp.q.shape[0]
        bs = triton.next_power_of_2(self.nsplit)
        bd = max(16, min(D_V, 8192 // bs))
        _combine_kernel[(B * self.M, D_V // bd)](
            self.o_part, self.lse_part, self.out, self.M, self.nsplit, D_V=D_V,
            BLOCK_S=bs, BLOCK_D=bd, num_warps=4)
        return self.out

    def _split(self) -> None:
        inp = self.inp
        _B, T, H = inp.shape
        args = (inp.q, inp.kv_cache, inp.page_table, inp.ctx_lens, self.mask, self.o_part,
                self.lse_part, inp.sm_scale * _LOG2E, T, self.M, self.nsplit,
                inp.page_table.stride(0))
        shape = {"H": H, "PAGE": inp.page_size, "BLOCK_M": self.block_m,
                 "BLOCK_N": self.block_n, "D_V": D_V, "D_R": D_ROPE, "D_K": D_K}
        if self.kernel == "seesaw":
            from tealeaves.kernels_bench.verify_gluon import (
                SEESAW_MAXNREG,
                _split_kernel_ss,
                shared_layouts,
            )

            args = args[:4] + (self.bits,) + args[5:] + (self.bits.shape[2],)
            self.compiled = _split_kernel_ss[self.grid](
                *args, **shape, **shared_layouts(self.block_m, self.block_n, D_V, D_ROPE),
                num_warps=self.num_warps, maxnreg=SEESAW_MAXNREG)
        elif self.kernel in ("gluon", "gluon64"):
            from tealeaves.kernels_bench.verify_gluon import (
                _split_kernel_g,
                _split_kernel_ws,
                shared_layouts,
            )

            fn = _split_kernel_g if self.kernel == "gluon" else _split_kernel_ws
            self.compiled = fn[self.grid](
                *args, **shape, **shared_layouts(self.block_m, self.block_n, D_V, D_ROPE),
                num_warps=self.num_warps)
        else:
            self.compiled = _split_kernel[self.grid](*args, **shape, num_warps=self.num_warps,
                                                     num_stages=self.num_stages)


def verify_split(inp: VerifyInputs, nsplit: int, **kw) -> torch.Tensor:
    """Split-KV verify attention: ``out[B, T, H, 512]`` (``SplitPlan`` arguments in ``kw``)."""
    return SplitPlan(inp, nsplit, **kw)()


def gluon_ready() -> str | None:
    """``None`` when the Gluon kernel can run here (a Hopper GPU, Triton with Gluon), else
    why not, in one line."""
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    major, minor = torch.cuda.get_device_capability()
    if major != 9:
        return f"the Gluon kernel is written for Hopper (sm_90); this GPU is sm_{major}{minor}"
    try:
        import triton.experimental.gluon
    except ImportError:
        return f"Triton {triton.__version__} has no Gluon (triton.experimental.gluon)"
    return None


__all__ = ["SplitPlan", "gluon_ready", "verify_split", "verify_unsplit"]
