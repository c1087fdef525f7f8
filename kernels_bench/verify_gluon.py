"""The split-KV verify kernels written in Gluon (Triton's lower-level language, shipped with
Triton as ``triton.experimental.gluon``), for Hopper (sm_90): the designs the plain-Triton
kernels in ``verify_triton`` cannot reach (docs/verify-attention.md says why).

- ``_split_kernel_g`` (kernel ``"gluon"``): one warpgroup over 16 or 32 query rows, for small
  trees (bandwidth-bound); described below.
- ``_split_kernel_ws`` (kernel ``"gluon64"``): warp-specialised, two warpgroups over 64 query
  rows, for trees of 16+ nodes (compute-bound); see its docstring and
  ``_ws_scores``/``_ws_values``.
- ``_split_kernel_ss`` (kernel ``"seesaw"``): FlashMLA's seesaw schedule, three warpgroups
  over 64 query rows; correct, but 4-10 % slower than ``gluon64`` at the large-tree points
  on the H200, so opt-in only (``--kernels seesaw``; docs/verify-attention.md, "The seesaw
  schedule, tried").

One warpgroup (4 warps) per program; one program per (sequence, row tile, split), as in
``verify_triton._split_kernel``.  Per 64-row cache tile:

- the tile (``[64, 512]`` latent part and ``[64, 64]`` rope part) is copied from global memory
  into shared memory with ``cp.async`` (16-byte pieces, page ids looked up per row, so any
  page size from 1 works), double-buffered: tile ``i + 1``'s copies are issued before tile
  ``i``'s products, and the page ids two tiles ahead, so no load waits in line;
- scores ``s^T[64, rows] = k q^T`` and output ``o^T[512, rows] += v^T p^T`` are both ``wgmma``
  with the cache tile read straight from shared memory (the first as the row-major A operand,
  the second through a transposed view of the same buffer), the query rows (few: tree nodes x
  heads) as the narrow B operand, kept in shared memory for the whole program;
- the online softmax runs on the score registers (base 2, scale folded into log2(e)).

Partial outputs and log-sum-exps go to the same buffers as ``verify_triton``'s split kernel,
and its merge kernel combines them.  Needs a Hopper GPU; import is lazy (``SplitPlan``).
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    async_copy,
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)


@gluon.jit
def _issue_tile(kn_buf, kr_buf, KV, page, rows, n_hi, PAGE: gl.constexpr, D_V: gl.constexpr,
                D_R: gl.constexpr, D_K: gl.constexpr, LD: gl.constexpr, LDR: gl.constexpr):
    """cp.async of cache rows ``rows`` (pages ``page``, both ``SliceLayout(1, LD)``) into one
    buffer pair; rows at or past ``n_hi`` are zero-filled without reading memory."""
    ok = rows < n_hi
    base = KV + (page.to(gl.int64) * PAGE + rows % PAGE) * D_K
    cols = gl.arange(0, D_V, layout=gl.SliceLayout(0, LD))
    async_copy.async_copy_global_to_shared(kn_buf, base[:, None] + cols[None, :],
                                           mask=ok[:, None])
    base_r = gl.convert_layout(base, gl.SliceLayout(1, LDR))
    ok_r = gl.convert_layout(ok, gl.SliceLayout(1, LDR))
    cols_r = gl.arange(0, D_R, layout=gl.SliceLayout(0, LDR))
    async_copy.async_copy_global_to_shared(kr_buf, base_r[:, None] + D_V + cols_r[None, :],
                                           mask=ok_r[:, None])


@gluon.jit
def _issue_part(buf, KV, page, rows, n_hi, col0: gl.constexpr, WIDTH: gl.constexpr,
                PAGE: gl.constexpr, D_K: gl.constexpr, LAY: gl.constexpr):
    """cp.async of columns ``[col0, col0 + WIDTH)`` of cache rows ``rows`` (pages ``page``,
    both ``SliceLayout(1, LAY)``) into ``buf``; rows at or past ``n_hi`` are zero-filled."""
    base = KV + (page.to(gl.int64) * PAGE + rows % PAGE) * D_K + col0
    cols = gl.arange(0, WIDTH, layout=gl.SliceLayout(0, LAY))
    async_copy.async_copy_global_to_shared(buf, base[:, None] + cols[None, :],
                                           mask=(rows < n_hi)[:, None])


@gluon.jit
def _split_kernel_g(Q, KV, PT, LENS, MASK, O_PART, LSE_PART, qk_scale, T, M, nsplit, pt_stride,
                    H: gl.constexpr, PAGE: gl.constexpr, BLOCK_M: gl.constexpr,
                    BLOCK_N: gl.constexpr, D_V: gl.constexpr, D_R: gl.constexpr,
                    D_K: gl.constexpr, KN_SL: gl.constexpr, KR_SL: gl.constexpr,
                    QN_SL: gl.constexpr, QR_SL: gl.constexpr, P_SL: gl.constexpr,
                    num_warps: gl.constexpr):
    """One (sequence ``b``, row tile ``mt``, split ``sp``) program: attends its ``BLOCK_M``
    query rows (``Q[b, T, H, 576]`` flattened, row = node * H + head) to cache positions
    ``[sp * chunk, (sp + 1) * chunk)`` of ``L + T`` and writes ``O_PART[b, sp, row, 512]``
    (normalised partial output) and ``LSE_PART[b, sp, row]`` (log2-sum-exp2, ``-inf`` for an
    empty split), as ``verify_triton._split_kernel`` does.  ``*_SL``: ``shared_layouts``."""
    LD: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [num_warps, 1], [1, 0])
    LDR: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BLOCK_M, 16])
    ROW: gl.constexpr = gl.SliceLayout(0, MMA)   # a value per query row
    TOK: gl.constexpr = gl.SliceLayout(1, MMA)   # a value per cache row of the tile
    LROW: gl.constexpr = gl.SliceLayout(1, LD)

    b = gl.program_id(0)
    mt = gl.program_id(1)
    sp = gl.program_id(2)
    L = gl.load(LENS + b)
    N = L + T
    chunk = gl.cdiv(gl.cdiv(N, nsplit), BLOCK_N) * BLOCK_N
    n_lo = sp * chunk
    n_hi = gl.minimum(N, n_lo + chunk)
    n_tiles = gl.cdiv(n_hi - n_lo, BLOCK_N)

    # the query rows (row = node * H + head), in shared memory for the whole program
    q_rows = mt * BLOCK_M + gl.arange(0, BLOCK_M, layout=LROW)
    q_ok = q_rows < M
    qb = Q + (b * M + q_rows).to(gl.int64) * D_K
    qn = gl.load(qb[:, None] + gl.arange(0, D_V, layout=gl.SliceLayout(0, LD))[None, :],
                 mask=q_ok[:, None], other=0.0)
    qn_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_M, D_V], QN_SL, qn)
    qr = gl.load(gl.convert_layout(qb, gl.SliceLayout(1, LDR))[:, None] + D_V
                 + gl.arange(0, D_R, layout=gl.SliceLayout(0, LDR))[None, :],
                 mask=gl.convert_layout(q_ok, gl.SliceLayout(1, LDR))[:, None], other=0.0)
    qr_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_M, D_R], QR_SL, qr)
    kn_smem = gl.allocate_shared_memory(gl.bfloat16, [2, BLOCK_N, D_V], KN_SL)
    kr_smem = gl.allocate_shared_memory(gl.bfloat16, [2, BLOCK_N, D_R], KR_SL)
    p_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_N, BLOCK_M], P_SL)

    rows_ok = (mt * BLOCK_M + gl.arange(0, BLOCK_M, layout=ROW)) < M
    node = (mt * BLOCK_M + gl.arange(0, BLOCK_M, layout=ROW)) // H
    m_i = gl.full([BLOCK_M], -1.0e30, gl.float32, layout=ROW)
    l_i = gl.zeros([BLOCK_M], gl.float32, layout=ROW)
    acc = gl.zeros([D_V, BLOCK_M], gl.float32, layout=MMA)
    s_zero = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=MMA)

    # prologue: tile 0 in flight, page ids of tile 1 on their way
    rows = n_lo + gl.arange(0, BLOCK_N, layout=LROW)
    page = gl.load(PT + b * pt_stride + rows // PAGE, mask=rows < n_hi, other=0)
    _issue_tile(kn_smem.index(0), kr_smem.index(0), KV, page, rows, n_hi, PAGE, D_V, D_R, D_K,
                LD, LDR)
    async_copy.commit_group()
    rows = rows + BLOCK_N
    page = gl.load(PT + b * pt_stride + rows // PAGE, mask=rows < n_hi, other=0)
    for it in range(n_tiles):
        cur = it % 2
        start = n_lo + it * BLOCK_N
        # tile it + 1 into the other buffers (their last reader, tile it - 1, is done: the
        # barrier closing the previous iteration), then the page ids of tile it + 2
        _issue_tile(kn_smem.index(1 - cur), kr_smem.index(1 - cur), KV, page, rows, n_hi,
                    PAGE, D_V, D_R, D_K, LD, LDR)
        async_copy.commit_group()
        rows = rows + BLOCK_N
        page = gl.load(PT + b * pt_stride + rows // PAGE, mask=rows < n_hi, other=0)
        async_copy.wait_group(1)      # this thread's copies of tile it have landed
        fence_async_shared()          # ... and are visible to the tensor cores
        gl.thread_barrier()           # ... for every thread's copies
        kn = kn_smem.index(cur)
        s = warpgroup_mma(kn, qn_smem.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        s = warpgroup_mma(kr_smem.index(cur), qr_smem.permute((1, 0)), s, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s, ))
        pos = start + gl.arange(0, BLOCK_N, layout=TOK)
        s = gl.where((pos < n_hi)[:, None], s * qk_scale, float("-inf"))
        if start + BLOCK_N > L:  # the tile reaches the tree: ancestors only
            j = pos - L
            keep = gl.load(MASK + (b * T + node[None, :]) * T + j[:, None],
                           mask=rows_ok[None, :] & (j >= 0)[:, None] & (pos < n_hi)[:, None],
                           other=0)
            s = gl.where((keep != 0) | (j < 0)[:, None], s, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(s, 0))
        alpha = gl.exp2(m_i - m_new)
        p = gl.exp2(s - m_new[None, :])
        l_i = l_i * alpha + gl.sum(p, 0)
        acc = acc * alpha[None, :]
        m_i = m_new
        p_smem.store(p.to(gl.bfloat16))
        fence_async_shared()
        gl.thread_barrier()
        acc = warpgroup_mma(kn.permute((1, 0)), p_smem, acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        gl.thread_barrier()           # tile it's buffers and p are free again
    async_copy.wait_group(0)

    has = l_i > 0
    lse = gl.where(has, m_i + gl.log2(gl.where(has, l_i, 1.0)), float("-inf"))
    o = acc / gl.where(has, l_i, 1.0)[None, :]
    part = (b * nsplit + sp) * M + mt * BLOCK_M + gl.arange(0, BLOCK_M, layout=ROW)
    gl.store(LSE_PART + part, lse, mask=rows_ok)
    dv = gl.arange(0, D_V, layout=TOK)
    gl.store(O_PART + part.to(gl.int64)[None, :] * D_V + dv[:, None],
             o.to(O_PART.dtype.element_ty), mask=rows_ok[None, :])


@gluon.jit
def _ws_scores(qn_smem, qr_smem, kn_smem, kr_smem, p_smem, a_smem, l_smem, bars, MASK, O_PART,
               LSE_PART, qk_scale, b, T, M, L, mt, sp, nsplit, n_lo, n_hi, n_tiles,
               H: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
               D_V: gl.constexpr):
    """The default partition of ``_split_kernel_ws`` (warpgroup 0): per cache tile, the
    scores ``q k^T`` (all 64 columns: the row reductions stay inside each warp), the online
    softmax, ``p`` and the rescale factor handed to warpgroup 1 through shared memory, and
    the left half of ``o += p v`` (output columns 0-255); then the partial output's left half
    and the log-sum-exp."""
    kv_ready, kv_free, p_ready, p_free, fin = bars
    S_L: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                  instr_shape=[16, BLOCK_N, 16])
    O_L: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                  instr_shape=[16, D_V // 2, 16])
    ROW: gl.constexpr = gl.SliceLayout(1, S_L)
    TOK: gl.constexpr = gl.SliceLayout(0, S_L)
    OROW: gl.constexpr = gl.SliceLayout(1, O_L)
    r_idx = mt * BLOCK_M + gl.arange(0, BLOCK_M, layout=ROW)
    rows_ok = r_idx < M
    node = r_idx // H
    m_i = gl.full([BLOCK_M], -1.0e30, gl.float32, layout=ROW)
    l_i = gl.zeros([BLOCK_M], gl.float32, layout=ROW)
    acc = gl.zeros([BLOCK_M, D_V // 2], gl.float32, layout=O_L)
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=S_L)
    for it in range(n_tiles):
        cur = it % 2
        start = n_lo + it * BLOCK_N
        mbarrier.wait(kv_ready.index(cur), (it // 2) & 1)
        fence_async_shared()
        kn = kn_smem.index(cur)
        s = warpgroup_mma(qn_smem, kn.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        s = warpgroup_mma(qr_smem, kr_smem.index(cur).permute((1, 0)), s, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s, ))
        pos = start + gl.arange(0, BLOCK_N, layout=TOK)
        s = gl.where((pos < n_hi)[None, :], s * qk_scale, float("-inf"))
        if start + BLOCK_N > L:  # the tile reaches the tree: ancestors only
            j = pos - L
            keep = gl.load(MASK + (b * T + node[:, None]) * T + j[None, :],
                           mask=rows_ok[:, None] & (j >= 0)[None, :] & (pos < n_hi)[None, :],
                           other=0)
            s = gl.where((keep != 0) | (j < 0)[None, :], s, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(s, 1))
        alpha = gl.exp2(m_i - m_new)
        p = gl.exp2(s - m_new[:, None])
        m_i = m_new
        # p and alpha to warpgroup 1, once it is done with the last tile's
        mbarrier.wait(p_free, (it & 1) ^ 1)
        p_smem.store(p.to(gl.bfloat16))
        a_smem.store(alpha)
        fence_async_shared()
        mbarrier.arrive(p_ready, count=1)
        l_i = l_i * alpha + gl.sum(p, 1)
        acc = acc * gl.convert_layout(alpha, OROW)[:, None]
        acc = warpgroup_mma(p_smem, kn.slice(0, D_V // 2, dim=1), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.arrive(kv_free.index(cur), count=1)
    has = l_i > 0
    l_safe = gl.where(has, l_i, 1.0)
    l_smem.store(l_safe)
    mbarrier.arrive(fin, count=1)
    lse = gl.where(has, m_i + gl.log2(l_safe), float("-inf"))
    part = (b * nsplit + sp) * M + r_idx
    gl.store(LSE_PART + part, lse, mask=rows_ok)
    o = acc / gl.convert_layout(l_safe, OROW)[:, None]
    part_o = gl.convert_layout(part, OROW)
    dv = gl.arange(0, D_V // 2, layout=gl.SliceLayout(0, O_L))
    gl.store(O_PART + part_o.to(gl.int64)[:, None] * D_V + dv[None, :],
             o.to(O_PART.dtype.element_ty), mask=(part_o < (b * nsplit + sp + 1) * M)[:, None])


@gluon.jit
def _ws_copy_tile(kn_buf, kr_buf, ready, KV, PT, b, pt_stride, row0, n_hi, PAGE: gl.constexpr,
                  BLOCK_N: gl.constexpr, D_V: gl.constexpr, D_R: gl.constexpr,
                  D_K: gl.constexpr, LD: gl.constexpr, LDR: gl.constexpr):
    """``_ws_values``' copy of one cache tile, rows ``row0 ..`` (page ids looked up per row;
    rows at or past ``n_hi`` zero-filled), into one buffer pair (latent part in layout ``LD``,
    rope part in ``LDR``); each copying thread arrives on ``ready`` once its copies land."""
    rows = row0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, LD))
    rows_r = row0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, LDR))
    page = gl.load(PT + b * pt_stride + rows // PAGE, mask=rows < n_hi, other=0)
    page_r = gl.load(PT + b * pt_stride + rows_r // PAGE, mask=rows_r < n_hi, other=0)
    _issue_part(kn_buf, KV, page, rows, n_hi, 0, D_V, PAGE, D_K, LD)
    _issue_part(kr_buf, KV, page_r, rows_r, n_hi, D_V, D_R, PAGE, D_K, LDR)
    async_copy.mbarrier_arrive(ready, increment_count=False)


@gluon.jit
def _ws_values(kn_smem, kr_smem, p_smem, a_smem, l_smem, bars, KV, PT, O_PART, b, M, mt, sp,
               nsplit, pt_stride, n_lo, n_hi, n_tiles, PAGE: gl.constexpr,
               BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, D_V: gl.constexpr,
               D_R: gl.constexpr, D_K: gl.constexpr):
    """The worker partition of ``_split_kernel_ws`` (warpgroup 1): the ``cp.async`` copies of
    the cache tiles (page ids looked up per row, two buffers, each released by both
    warpgroups), and the right half of ``o += p v`` (output columns 256-511), rescaled by the
    factor warpgroup 0 hands over; then the partial output's right half."""
    kv_ready, kv_free, p_ready, p_free, fin = bars
    LD: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [4, 1], [1, 0])
    LDR: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    O_L: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                  instr_shape=[16, D_V // 2, 16])
    OROW: gl.constexpr = gl.SliceLayout(1, O_L)
    # the first two tiles: both buffers start free; a split of fewer tiles (or none: a trailing
    # split past the cache's end) issues no copies it would never wait for
    for t in gl.static_range(2):
        if t < n_tiles:
            _ws_copy_tile(kn_smem.index(t), kr_smem.index(t), kv_ready.index(t), KV, PT, b,
                          pt_stride, n_lo + t * BLOCK_N, n_hi, PAGE, BLOCK_N, D_V, D_R, D_K,
                          LD, LDR)
    acc = gl.zeros([BLOCK_M, D_V // 2], gl.float32, layout=O_L)
    for it in range(n_tiles):
        cur = it % 2
        mbarrier.wait(p_ready, it & 1)
        mbarrier.wait(kv_ready.index(cur), (it // 2) & 1)
        fence_async_shared()
        alpha = a_smem.load(OROW)
        acc = acc * alpha[:, None]
        acc = warpgroup_mma(p_smem, kn_smem.index(cur).slice(D_V // 2, D_V // 2, dim=1), acc,
                            is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.arrive(p_free, count=1)
        mbarrier.arrive(kv_free.index(cur), count=1)
        # tile it + 2 into this buffer once both warpgroups are done with tile it
        nxt = n_lo + (it + 2) * BLOCK_N
        if nxt < n_hi:
            mbarrier.wait(kv_free.index(cur), (it // 2) & 1)
            _ws_copy_tile(kn_smem.index(cur), kr_smem.index(cur), kv_ready.index(cur), KV, PT,
                          b, pt_stride, nxt, n_hi, PAGE, BLOCK_N, D_V, D_R, D_K, LD, LDR)
    mbarrier.wait(fin, 0)
    o = acc / l_smem.load(OROW)[:, None]
    part = (b * nsplit + sp) * M + mt * BLOCK_M + gl.arange(0, BLOCK_M, layout=OROW)
    dv = D_V // 2 + gl.arange(0, D_V // 2, layout=gl.SliceLayout(0, O_L))
    gl.store(O_PART + part.to(gl.int64)[:, None] * D_V + dv[None, :],
             o.to(O_PART.dtype.element_ty), mask=(part < (b * nsplit + sp + 1) * M)[:, None])


@gluon.jit
def _split_kernel_ws(Q, KV, PT, LENS, MASK, O_PART, LSE_PART, qk_scale, T, M, nsplit, pt_stride,
                     H: gl.constexpr, PAGE: gl.constexpr, BLOCK_M: gl.constexpr,
                     BLOCK_N: gl.constexpr, D_V: gl.constexpr, D_R: gl.constexpr,
                     D_K: gl.constexpr, KN_SL: gl.constexpr, KR_SL: gl.constexpr,
                     QN_SL: gl.constexpr, QR_SL: gl.constexpr, P_SL: gl.constexpr,
                     num_warps: gl.constexpr):
    """The warp-specialised wide-tile kernel (as FlashMLA splits 128-head decode): one
    (row tile of 64 query rows, split, sequence) program, warpgroup 0 (``_ws_scores``) and
    warpgroup 1 (``_ws_values``) working on different cache tiles at once, handing over
    through mbarriers: while warpgroup 0 computes tile ``i + 1``'s scores and softmax,
    warpgroup 1 finishes tile ``i``'s right half of ``p v`` and copies tile ``i + 2``.
    Grid ``(row tiles, NSPLIT, batch)``, the row tile the fastest axis so the programs reading
    one cache range run side by side (all but the first read it from L2).  Partial outputs
    and log-sum-exps as ``_split_kernel_g`` writes them (merged by
    ``verify_triton._combine_kernel``).  ``num_warps`` 4 (warpgroup 0; the worker adds 4)."""
    LD: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [num_warps, 1], [1, 0])
    LDR: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    mt = gl.program_id(0)
    sp = gl.program_id(1)
    b = gl.program_id(2)
    L = gl.load(LENS + b)
    N = L + T
    chunk = gl.cdiv(gl.cdiv(N, nsplit), BLOCK_N) * BLOCK_N
    n_lo = sp * chunk
    n_hi = gl.minimum(N, n_lo + chunk)
    n_tiles = gl.cdiv(n_hi - n_lo, BLOCK_N)

    q_rows = mt * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, LD))
    qb = Q + (b * M + q_rows).to(gl.int64) * D_K
    qn = gl.load(qb[:, None] + gl.arange(0, D_V, layout=gl.SliceLayout(0, LD))[None, :],
                 mask=(q_rows < M)[:, None], other=0.0)
    qn_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_M, D_V], QN_SL, qn)
    q_rows_r = mt * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, LDR))
    qr = gl.load(Q + (b * M + q_rows_r).to(gl.int64)[:, None] * D_K + D_V
                 + gl.arange(0, D_R, layout=gl.SliceLayout(0, LDR))[None, :],
                 mask=(q_rows_r < M)[:, None], other=0.0)
    qr_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_M, D_R], QR_SL, qr)
    kn_smem = gl.allocate_shared_memory(gl.bfloat16, [2, BLOCK_N, D_V], KN_SL)
    kr_smem = gl.allocate_shared_memory(gl.bfloat16, [2, BLOCK_N, D_R], KR_SL)
    p_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_M, BLOCK_N], P_SL)
    VEC: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    a_smem = gl.allocate_shared_memory(gl.float32, [BLOCK_M], VEC)
    l_smem = gl.allocate_shared_memory(gl.float32, [BLOCK_M], VEC)
    kv_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    kv_free = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    one = gl.allocate_shared_memory(gl.int64, [3, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(kv_ready.index(i), count=128)   # every copying thread, once its copies land
        mbarrier.init(kv_free.index(i), count=2)      # both warpgroups
    for i in gl.static_range(3):
        mbarrier.init(one.index(i), count=1)
    fence_async_shared()
    gl.thread_barrier()
    bars = (kv_ready, kv_free, one.index(0), one.index(1), one.index(2))
    gl.warp_specialize([
        (_ws_scores, (qn_smem, qr_smem, kn_smem, kr_smem, p_smem, a_smem, l_smem, bars, MASK,
                      O_PART, LSE_PART, qk_scale, b, T, M, L, mt, sp, nsplit, n_lo, n_hi,
                      n_tiles, H, BLOCK_M, BLOCK_N, D_V)),
        (_ws_values, (kn_smem, kr_smem, p_smem, a_smem, l_smem, bars, KV, PT, O_PART, b, M, mt,
                      sp, nsplit, pt_stride, n_lo, n_hi, n_tiles, PAGE, BLOCK_M, BLOCK_N, D_V,
                      D_R, D_K)),
    ], [4], [232])



@gluon.jit
def _ss_piece(qn_smem, qr_op, kn, kr, ready, first: gl.constexpr, phase, s, k: gl.constexpr,
              use_acc: gl.constexpr, PIECE: gl.constexpr, NPIECE: gl.constexpr):
    """Scores ``s += q k^T`` over piece ``k`` of a cache tile (latent columns
    ``[k * PIECE, (k + 1) * PIECE)``, or the rope part for ``k = NPIECE``) once its copies
    have landed; the ``wgmma`` is left in flight."""
    mbarrier.wait(ready.index(first + k), phase)
    fence_async_shared()
    if k == NPIECE:
        s = warpgroup_mma(qr_op, kr.permute((1, 0)), s, use_acc=use_acc, is_async=True)
    else:
        s = warpgroup_mma(qn_smem.slice(k * PIECE, PIECE, dim=1),
                          kn.slice(k * PIECE, PIECE, dim=1).permute((1, 0)), s,
                          use_acc=use_acc, is_async=True)
    return s


@gluon.jit
def _ss_scores(qn_smem, qr_op, kn, kr, ready, first: gl.constexpr, phase, s_zero,
               PIECE: gl.constexpr, NPIECE: gl.constexpr, HI_FIRST: gl.constexpr):
    """``q k^T`` of one cache tile for 64 query rows (``s_zero``'s layout), each of the tile's
    pieces multiplied as soon as its copies land (``ready[first + k]``: ``NPIECE`` latent
    pieces of ``PIECE`` columns, then the rope piece ``k = NPIECE``), in the order the
    copying warpgroup issues them: the low half (output columns 0-255) first, or with
    ``HI_FIRST`` the high half and the rope piece first.  The query's latent part is read
    from shared memory, its rope part ``qr_op`` from registers (the shared memory is full;
    loading it from L1 per tile instead ran 3-13 % slower on the H200)."""
    s = s_zero
    if HI_FIRST:
        for k in gl.static_range(NPIECE // 2, NPIECE + 1):
            s = _ss_piece(qn_smem, qr_op, kn, kr, ready, first, phase, s, k, k > NPIECE // 2,
                          PIECE, NPIECE)
        for k in gl.static_range(NPIECE // 2):
            s = _ss_piece(qn_smem, qr_op, kn, kr, ready, first, phase, s, k, True, PIECE,
                          NPIECE)
    else:
        for k in gl.static_range(NPIECE + 1):
            s = _ss_piece(qn_smem, qr_op, kn, kr, ready, first, phase, s, k, k > 0, PIECE,
                          NPIECE)
    return warpgroup_mma_wait(num_outstanding=0, deps=(s, ))


@gluon.jit
def _ss_query_rope(Q, b, M, mt, BLOCK_M: gl.constexpr, D_V: gl.constexpr, D_R: gl.constexpr,
                   D_K: gl.constexpr, S_L: gl.constexpr):
    """The rope part of 64 query rows, ``[64, 64]`` bf16, loaded straight into ``wgmma``'s
    register A operand layout for scores in layout ``S_L`` (rows past ``M`` are zero)."""
    LQ: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=S_L, k_width=2)
    rows = mt * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, LQ))
    cols = gl.arange(0, D_R, layout=gl.SliceLayout(0, LQ))
    return gl.load(Q + (b * M + rows).to(gl.int64)[:, None] * D_K + D_V + cols[None, :],
                   mask=(rows < M)[:, None], other=0.0)


@gluon.jit
def _ss_start(Q, b, M, mt, H: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
              D_V: gl.constexpr, D_R: gl.constexpr, D_K: gl.constexpr, S_L: gl.constexpr,
              O_L: gl.constexpr):
    """A computing warpgroup's starting state for row tile ``mt``: its query row ids
    ``[64]``, which are real (``< M``), their tree nodes, running max (-1e30) and row sum
    (0), its output half ``[64, 256]`` (0, layout ``O_L``), a zero score tile (``S_L``) and
    the query's rope part in registers (``_ss_query_rope``)."""
    ROW: gl.constexpr = gl.SliceLayout(1, S_L)
    r_idx = mt * BLOCK_M + gl.arange(0, BLOCK_M, layout=ROW)
    return (r_idx, r_idx < M, r_idx // H, gl.full([BLOCK_M], -1.0e30, gl.float32, layout=ROW),
            gl.zeros([BLOCK_M], gl.float32, layout=ROW),
            gl.zeros([BLOCK_M, D_V // 2], gl.float32, layout=O_L),
            gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=S_L),
            _ss_query_rope(Q, b, M, mt, BLOCK_M, D_V, D_R, D_K, S_L))


@gluon.jit
def _ss_mask(s, start, n_hi, L, BITS, W, b, T, node, rows_ok, qk_scale, BLOCK_N: gl.constexpr,
             TOK: gl.constexpr):
    """Scaled scores of the tile starting at cache row ``start`` (a multiple of 64): ``-inf``
    past ``n_hi`` and, in the tree part, where the query node is not a descendant of the
    cached node.  The tree mask comes packed (``tree_bits``): 32-bit words per node, bit
    ``p % 32`` of word ``p // 32 - L // 32`` for cache position ``p``; two words per row
    cover a tile, so the lookup takes four loads per thread, not 32."""
    pos = start + gl.arange(0, BLOCK_N, layout=TOK)
    s = gl.where((pos < n_hi)[None, :], s * qk_scale, float("-inf"))
    if start + BLOCK_N > L:  # the tile reaches the tree: ancestors only
        w0 = start // 32 - L // 32
        row = BITS + (b * T + node) * W
        lo = gl.load(row + w0, mask=rows_ok & (w0 >= 0) & (w0 < W), other=0)
        hi = gl.load(row + w0 + 1, mask=rows_ok & (w0 + 1 >= 0) & (w0 + 1 < W), other=0)
        word = gl.where((pos % 64 < 32)[None, :], lo[:, None], hi[:, None])
        keep = ((word >> (pos % 32)[None, :]) & 1) != 0
        s = gl.where(keep | (pos < L)[None, :], s, float("-inf"))
    return s


@gluon.jit
def _ss_finish(acc, l_own, l_mine, l_other, fin_mine, fin_other, m_i, O_PART, LSE_PART, part0,
               r_idx, rows_ok, col0: gl.constexpr, WRITE_LSE: gl.constexpr, ROW: gl.constexpr,
               O_L: gl.constexpr, D_V: gl.constexpr):
    """One warpgroup's end of ``_split_kernel_ss``: the row sums of both warpgroups added
    (through shared memory), its half of the partial output (columns ``col0`` on)
    normalised and written, and (``WRITE_LSE``) the log-sum-exp."""
    OROW: gl.constexpr = gl.SliceLayout(1, O_L)
    l_mine.store(l_own)
    mbarrier.arrive(fin_mine, count=1)
    mbarrier.wait(fin_other, 0)
    l_i = l_own + l_other.load(ROW)
    has = l_i > 0
    l_safe = gl.where(has, l_i, 1.0)
    if WRITE_LSE:
        gl.store(LSE_PART + part0 + r_idx, gl.where(has, m_i + gl.log2(l_safe), float("-inf")),
                 mask=rows_ok)
    o = acc / gl.convert_layout(l_safe, OROW)[:, None]
    part_o = part0 + gl.convert_layout(r_idx, OROW)
    dv = col0 + gl.arange(0, D_V // 2, layout=gl.SliceLayout(0, O_L))
    gl.store(O_PART + part_o.to(gl.int64)[:, None] * D_V + dv[None, :],
             o.to(O_PART.dtype.element_ty), mask=gl.convert_layout(rows_ok, OROW)[:, None])


@gluon.jit
def _ss_left(qn_smem, Q, kn_smem, kr_smem, sp0, sp1, sm0, sm1, sl0, sl1, bars, BITS, W,
             O_PART, LSE_PART, qk_scale, b, T, M, L, mt, sp, nsplit, n_lo, n_hi, n_pairs,
             H: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
             D_V: gl.constexpr, D_R: gl.constexpr, D_K: gl.constexpr, PIECE: gl.constexpr,
             NPIECE: gl.constexpr, S_L: gl.constexpr, O_L: gl.constexpr):
    """Warpgroup 0 of ``_split_kernel_ss`` (the default partition): output columns 0-255,
    the scores of the even tiles of each pair."""
    ready, free, m0_ready, m1_ready, p0_ready, p1_ready, fin0, fin1 = bars
    P_OP: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=O_L, k_width=2)
    ROW: gl.constexpr = gl.SliceLayout(1, S_L)
    TOK: gl.constexpr = gl.SliceLayout(0, S_L)
    OROW: gl.constexpr = gl.SliceLayout(1, O_L)
    r_idx, rows_ok, node, m_i, l_i, acc, s_zero, qr_op = _ss_start(
        Q, b, M, mt, H, BLOCK_M, BLOCK_N, D_V, D_R, D_K, S_L, O_L)
    for i in range(n_pairs):
        ph = i & 1
        s = _ss_scores(qn_smem, qr_op, kn_smem.index(0), kr_smem.index(0), ready, 0, ph,
                       s_zero, PIECE, NPIECE, False)
        mbarrier.arrive(free.index(1), count=1)      # buffer 0's high half: done with it
        s = _ss_mask(s, n_lo + 2 * i * BLOCK_N, n_hi, L, BITS, W, b, T, node, rows_ok,
                     qk_scale, BLOCK_N, TOK)
        m0 = gl.maximum(m_i, gl.max(s, 1))
        sm0.store(m0)
        mbarrier.arrive(m0_ready, count=1)
        sc0 = gl.exp2(m_i - m0)
        p = gl.exp2(s - m0[:, None])
        l_i = l_i * sc0 + gl.sum(p, 1)
        pb = p.to(gl.bfloat16)
        acc = acc * gl.convert_layout(sc0, OROW)[:, None]
        acc = warpgroup_mma(gl.convert_layout(pb, P_OP),
                            kn_smem.index(0).slice(0, D_V // 2, dim=1), acc, is_async=True)
        # p rescaled to warpgroup 1's running max, for its half of this tile's p v
        mbarrier.wait(m1_ready, ph)
        m1 = sm1.load(ROW)
        sc1 = gl.exp2(m0 - m1)
        sp0.store((pb.to(gl.float32) * sc1[:, None]).to(gl.bfloat16))
        fence_async_shared()
        mbarrier.arrive(p0_ready, count=1)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.arrive(free.index(0), count=1)      # buffer 0's low half: its next copies
        l_i = l_i * sc1
        acc = acc * gl.convert_layout(sc1, OROW)[:, None]
        mbarrier.wait(p1_ready, ph)
        fence_async_shared()
        acc = warpgroup_mma(sp1, kn_smem.index(1).slice(0, D_V // 2, dim=1), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.arrive(free.index(2), count=1)      # buffer 1's low half
        m_i = m1
    _ss_finish(acc, l_i, sl0, sl1, fin0, fin1, m_i, O_PART, LSE_PART, (b * nsplit + sp) * M,
               r_idx, rows_ok, 0, True, ROW, O_L, D_V)


@gluon.jit
def _ss_right(qn_smem, Q, kn_smem, kr_smem, sp0, sp1, sm0, sm1, sl0, sl1, bars, BITS, W,
              O_PART, LSE_PART, qk_scale, b, T, M, L, mt, sp, nsplit, n_lo, n_hi, n_pairs,
              H: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
              D_V: gl.constexpr, D_R: gl.constexpr, D_K: gl.constexpr, PIECE: gl.constexpr,
              NPIECE: gl.constexpr, S_L: gl.constexpr, O_L: gl.constexpr):
    """Warpgroup 1 of ``_split_kernel_ss``: output columns 256-511, the scores of the odd
    tiles of each pair."""
    ready, free, m0_ready, m1_ready, p0_ready, p1_ready, fin0, fin1 = bars
    P_OP: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=O_L, k_width=2)
    ROW: gl.constexpr = gl.SliceLayout(1, S_L)
    TOK: gl.constexpr = gl.SliceLayout(0, S_L)
    OROW: gl.constexpr = gl.SliceLayout(1, O_L)
    r_idx, rows_ok, node, m_i, l_i, acc, s_zero, qr_op = _ss_start(
        Q, b, M, mt, H, BLOCK_M, BLOCK_N, D_V, D_R, D_K, S_L, O_L)
    for i in range(n_pairs):
        ph = i & 1
        s = _ss_scores(qn_smem, qr_op, kn_smem.index(1), kr_smem.index(1), ready,
                       NPIECE + 1, ph, s_zero, PIECE, NPIECE, True)
        mbarrier.arrive(free.index(2), count=1)      # buffer 1's low half: done with it
        s = _ss_mask(s, n_lo + (2 * i + 1) * BLOCK_N, n_hi, L, BITS, W, b, T, node, rows_ok,
                     qk_scale, BLOCK_N, TOK)
        mbarrier.wait(m0_ready, ph)
        m0 = sm0.load(ROW)
        m1 = gl.maximum(m0, gl.max(s, 1))
        sm1.store(m1)
        mbarrier.arrive(m1_ready, count=1)
        p = gl.exp2(s - m1[:, None])
        pb = p.to(gl.bfloat16)
        sp1.store(pb)
        fence_async_shared()
        mbarrier.arrive(p1_ready, count=1)
        sc = gl.exp2(m_i - m1)
        l_i = l_i * sc + gl.sum(p, 1)
        acc = acc * gl.convert_layout(sc, OROW)[:, None]
        acc = warpgroup_mma(gl.convert_layout(pb, P_OP),
                            kn_smem.index(1).slice(D_V // 2, D_V // 2, dim=1), acc,
                            is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.arrive(free.index(3), count=1)      # buffer 1's high half: its next copies
        mbarrier.wait(p0_ready, ph)
        fence_async_shared()
        acc = warpgroup_mma(sp0, kn_smem.index(0).slice(D_V // 2, D_V // 2, dim=1), acc,
                            is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.arrive(free.index(1), count=1)      # buffer 0's high half
        m_i = m1
    _ss_finish(acc, l_i, sl1, sl0, fin1, fin0, m_i, O_PART, LSE_PART, (b * nsplit + sp) * M,
               r_idx, rows_ok, D_V // 2, False, ROW, O_L, D_V)


@gluon.jit
def _ss_issue(kn, kr, ready, first: gl.constexpr, KV, page, rows, n_hi, HI: gl.constexpr,
              PAGE: gl.constexpr, D_V: gl.constexpr, D_R: gl.constexpr, D_K: gl.constexpr,
              PIECE: gl.constexpr, NPIECE: gl.constexpr, LD: gl.constexpr):
    """``cp.async`` of one half of a cache tile into buffer ``kn``/``kr``: the low latent
    pieces, or (``HI``) the high ones and the rope piece; each piece's barrier
    (``ready[first + k]``) arrives once this thread's copies so far have landed."""
    for k in gl.static_range(NPIECE // 2 * HI, NPIECE // 2 * (1 + HI) + HI):
        if k == NPIECE:
            _issue_part(kr, KV, page, rows, n_hi, D_V, D_R, PAGE, D_K, LD)
        else:
            for h in gl.static_range(PIECE // D_R):
                _issue_part(kn.slice(k * PIECE + h * D_R, D_R, dim=1), KV, page, rows, n_hi,
                            k * PIECE + h * D_R, D_R, PAGE, D_K, LD)
        async_copy.mbarrier_arrive(ready.index(first + k), increment_count=False)


@gluon.jit
def _ss_loader(kn_smem, kr_smem, bars, KV, PT, b, pt_stride, n_lo, n_hi, n_pairs,
               PAGE: gl.constexpr, BLOCK_N: gl.constexpr, D_V: gl.constexpr,
               D_R: gl.constexpr, D_K: gl.constexpr, PIECE: gl.constexpr,
               NPIECE: gl.constexpr):
    """The copying warpgroup of ``_split_kernel_ss``: each pair's tiles into buffers 0 and
    1 half by half, each half as soon as the warpgroups that read it have released it
    (FlashMLA's split release): buffer 0's low half is read only by warpgroup 0 (its scores
    and ``p v``), buffer 1's high half and rope piece only by warpgroup 1, so those two are
    copied first, while the other halves are still in use.  Rows past ``n_hi`` (the odd
    tile of a last pair) are zero-filled without reading."""
    ready, free = bars[0], bars[1]
    LD: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])   # [16, 64] per pass
    LROW: gl.constexpr = gl.SliceLayout(1, LD)
    NB: gl.constexpr = NPIECE + 1
    for i in range(n_pairs):
        ph = (i + 1) & 1           # the phase the warpgroups completed in pair i - 1
        rows0 = n_lo + 2 * i * BLOCK_N + gl.arange(0, BLOCK_N, layout=LROW)
        rows1 = rows0 + BLOCK_N
        page0 = gl.load(PT + b * pt_stride + rows0 // PAGE, mask=rows0 < n_hi, other=0)
        page1 = gl.load(PT + b * pt_stride + rows1 // PAGE, mask=rows1 < n_hi, other=0)
        if i > 0:
            mbarrier.wait(free.index(0), ph)
        _ss_issue(kn_smem.index(0), kr_smem.index(0), ready, 0, KV, page0, rows0, n_hi, False,
                  PAGE, D_V, D_R, D_K, PIECE, NPIECE, LD)
        if i > 0:
            mbarrier.wait(free.index(3), ph)
        _ss_issue(kn_smem.index(1), kr_smem.index(1), ready, NB, KV, page1, rows1, n_hi, True,
                  PAGE, D_V, D_R, D_K, PIECE, NPIECE, LD)
        if i > 0:
            mbarrier.wait(free.index(1), ph)
        _ss_issue(kn_smem.index(0), kr_smem.index(0), ready, 0, KV, page0, rows0, n_hi, True,
                  PAGE, D_V, D_R, D_K, PIECE, NPIECE, LD)
        if i > 0:
            mbarrier.wait(free.index(2), ph)
        _ss_issue(kn_smem.index(1), kr_smem.index(1), ready, NB, KV, page1, rows1, n_hi, False,
                  PAGE, D_V, D_R, D_K, PIECE, NPIECE, LD)


@gluon.jit
def _split_kernel_ss(Q, KV, PT, LENS, BITS, O_PART, LSE_PART, qk_scale, T, M, nsplit, pt_stride, W,
                     H: gl.constexpr, PAGE: gl.constexpr, BLOCK_M: gl.constexpr,
                     BLOCK_N: gl.constexpr, D_V: gl.constexpr, D_R: gl.constexpr,
                     D_K: gl.constexpr, KN_SL: gl.constexpr, KR_SL: gl.constexpr,
                     QN_SL: gl.constexpr, QR_SL: gl.constexpr, P_SL: gl.constexpr,
                     num_warps: gl.constexpr):
    """The seesaw kernel (kernel ``"seesaw"``; FlashMLA's schedule for 128-head decode,
    docs/20250422-new-kernel-deep-dive.md there): one (row tile of 64 query rows, split,
    sequence) program of three warpgroups.  Cache tiles go in pairs (two shared-memory
    buffers); warpgroup 0 owns output columns 0-255 and computes the scores of each pair's
    first tile, warpgroup 1 owns columns 256-511 and the second tile's scores, so one
    warpgroup's softmax runs while the other's products do.  Per pair, with running max
    ``m``: warpgroup 0 takes ``m0 = max(m, rowmax s0)``, ``p0 = exp2(s0 - m0)``,
    ``o_L = o_L exp2(m - m0) + p0 v0_L``; warpgroup 1 takes ``m1 = max(m0, rowmax s1)``,
    ``p1 = exp2(s1 - m1)``, ``o_R = o_R exp2(m - m1) + p1 v1_R + p0 exp2(m0 - m1) v0_R``;
    warpgroup 0 ends with ``o_L = o_L exp2(m0 - m1) + p1 v1_L``.  Each keeps the row sum of
    its own ``p``s in the same frame; they are added at the end.  A third warpgroup
    (``_ss_loader``) copies the tiles.  Grid ``(row tiles, NSPLIT, batch)``; partial outputs
    and log-sum-exps as the other split kernels write them.  ``num_warps`` 4; launched with
    ``maxnreg=168`` (three warpgroups share 64K registers)."""
    PIECE: gl.constexpr = 128
    NPIECE: gl.constexpr = D_V // PIECE
    # the computing warpgroups' layouts: scores [64, 64] and an output half [64, 256]
    S_L: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                  instr_shape=[16, BLOCK_N, 16])
    O_L: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                  instr_shape=[16, D_V // 2, 16])
    LD: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [num_warps, 1], [1, 0])
    mt = gl.program_id(0)
    sp = gl.program_id(1)
    b = gl.program_id(2)
    L = gl.load(LENS + b)
    N = L + T
    chunk = gl.cdiv(gl.cdiv(N, nsplit), BLOCK_N) * BLOCK_N
    n_lo = sp * chunk
    n_hi = gl.minimum(N, n_lo + chunk)
    n_pairs = gl.cdiv(gl.cdiv(gl.maximum(n_hi - n_lo, 0), BLOCK_N), 2)

    q_rows = mt * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, LD))
    qb = Q + (b * M + q_rows).to(gl.int64) * D_K
    qn = gl.load(qb[:, None] + gl.arange(0, D_V, layout=gl.SliceLayout(0, LD))[None, :],
                 mask=(q_rows < M)[:, None], other=0.0)
    qn_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_M, D_V], QN_SL, qn)
    kn_smem = gl.allocate_shared_memory(gl.bfloat16, [2, BLOCK_N, D_V], KN_SL)
    kr_smem = gl.allocate_shared_memory(gl.bfloat16, [2, BLOCK_N, D_R], KR_SL)
    sp0 = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_M, BLOCK_N], P_SL)
    sp1 = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_M, BLOCK_N], P_SL)
    VEC: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    sm0 = gl.allocate_shared_memory(gl.float32, [BLOCK_M], VEC)
    sm1 = gl.allocate_shared_memory(gl.float32, [BLOCK_M], VEC)
    sl0 = gl.allocate_shared_memory(gl.float32, [BLOCK_M], VEC)
    sl1 = gl.allocate_shared_memory(gl.float32, [BLOCK_M], VEC)
    ready = gl.allocate_shared_memory(gl.int64, [2 * (NPIECE + 1), 1], mbarrier.MBarrierLayout())
    free = gl.allocate_shared_memory(gl.int64, [4, 1], mbarrier.MBarrierLayout())
    one = gl.allocate_shared_memory(gl.int64, [6, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2 * (NPIECE + 1)):
        mbarrier.init(ready.index(i), count=128)   # every copying thread, once its copies land
    # buffer halves released: 0 buffer 0 low (warpgroup 0), 1 buffer 0 high (both),
    # 2 buffer 1 low (both), 3 buffer 1 high (warpgroup 1)
    for i in gl.static_range(4):
        mbarrier.init(free.index(i), count=2 if i == 1 or i == 2 else 1)
    for i in gl.static_range(6):
        mbarrier.init(one.index(i), count=1)
    fence_async_shared()
    gl.thread_barrier()
    bars = (ready, free, one.index(0), one.index(1), one.index(2), one.index(3), one.index(4),
            one.index(5))
    gl.warp_specialize([
        (_ss_left, (qn_smem, Q, kn_smem, kr_smem, sp0, sp1, sm0, sm1, sl0, sl1, bars, BITS, W,
                    O_PART, LSE_PART, qk_scale, b, T, M, L, mt, sp, nsplit, n_lo, n_hi,
                    n_pairs, H, BLOCK_M, BLOCK_N, D_V, D_R, D_K, PIECE, NPIECE, S_L, O_L)),
        (_ss_right, (qn_smem, Q, kn_smem, kr_smem, sp0, sp1, sm0, sm1, sl0, sl1, bars, BITS, W,
                     O_PART, LSE_PART, qk_scale, b, T, M, L, mt, sp, nsplit, n_lo, n_hi,
                     n_pairs, H, BLOCK_M, BLOCK_N, D_V, D_R, D_K, PIECE, NPIECE, S_L, O_L)),
        (_ss_loader, (kn_smem, kr_smem, (ready, free), KV, PT, b, pt_stride, n_lo, n_hi,
                      n_pairs, PAGE, BLOCK_N, D_V, D_R, D_K, PIECE, NPIECE)),
    ], [4, 4], [232, 40])


#: Registers per thread the seesaw kernel is launched with: 64K shared by its three
#: warpgroups (384 threads), then moved by ``setmaxnreg`` to the two computing ones (232
#: each) from the copying one (40).
SEESAW_MAXNREG = 168


def shared_layouts(block_m: int, block_n: int, d_v: int, d_r: int) -> dict:
    """The shared-memory layouts (wgmma-compatible swizzles) of the kernel's buffers."""
    def lay(shape):
        return gl.NVMMASharedLayout.get_default_for(shape, gl.bfloat16)
    return {"KN_SL": lay([block_n, d_v]), "KR_SL": lay([block_n, d_r]),
            "QN_SL": lay([block_m, d_v]), "QR_SL": lay([block_m, d_r]),
            "P_SL": lay([block_n, block_m])}


__all__ = ["SEESAW_MAXNREG", "shared_layouts"]
