"""The split-KV verify kernels written in Gluon (Triton's lower-level language, shipped with
Triton as ``triton.experimental.gluon``), for Hopper (sm_90): the designs the plain-Triton
kernels in ``verify_triton`` cannot reach (docs/verify-attention.md says why).

- ``_split_kernel_g`` (kernel ``"gluon"``): one warpgroup over 16 or 32 query rows, for small
  trees (bandwidth-bound); described below.
- ``_split_kernel_ws`` (kernel ``"gluon64"``): warp-specialised, two warpgroups over 64 query
  rows, for trees of 16+ nodes (compute-bound); see its docstring and
  ``_ws_scores``/``_ws_values``.

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
    LROW: gl.constexpr = gl.SliceLayout(1, LD)
    LRROW: gl.constexpr = gl.SliceLayout(1, LDR)
    # the first two tiles: both buffers start free (with fewer tiles, the masked copies of the
    # missing ones write zeros and are never awaited: docs/verify-attention.md, "Correctness")
    for t in gl.static_range(2):
        rows = n_lo + t * BLOCK_N + gl.arange(0, BLOCK_N, layout=LROW)
        rows_r = n_lo + t * BLOCK_N + gl.arange(0, BLOCK_N, layout=LRROW)
        page = gl.load(PT + b * pt_stride + rows // PAGE, mask=rows < n_hi, other=0)
        page_r = gl.load(PT + b * pt_stride + rows_r // PAGE, mask=rows_r < n_hi, other=0)
        _issue_part(kn_smem.index(t), KV, page, rows, n_hi, 0, D_V, PAGE, D_K, LD)
        _issue_part(kr_smem.index(t), KV, page_r, rows_r, n_hi, D_V, D_R, PAGE, D_K, LDR)
        async_copy.mbarrier_arrive(kv_ready.index(t), increment_count=False)
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
            rows = nxt + gl.arange(0, BLOCK_N, layout=LROW)
            rows_r = nxt + gl.arange(0, BLOCK_N, layout=LRROW)
            page = gl.load(PT + b * pt_stride + rows // PAGE, mask=rows < n_hi, other=0)
            page_r = gl.load(PT + b * pt_stride + rows_r // PAGE, mask=rows_r < n_hi, other=0)
            _issue_part(kn_smem.index(cur), KV, page, rows, n_hi, 0, D_V, PAGE, D_K, LD)
            _issue_part(kr_smem.index(cur), KV, page_r, rows_r, n_hi, D_V, D_R, PAGE, D_K, LDR)
            async_copy.mbarrier_arrive(kv_ready.index(cur), increment_count=False)
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


def shared_layouts(block_m: int, block_n: int, d_v: int, d_r: int) -> dict:
    """The shared-memory layouts (wgmma-compatible swizzles) of the kernel's buffers."""
    def lay(shape):
        return gl.NVMMASharedLayout.get_default_for(shape, gl.bfloat16)
    return {"KN_SL": lay([block_n, d_v]), "KR_SL": lay([block_n, d_r]),
            "QN_SL": lay([block_m, d_v]), "QR_SL": lay([block_m, d_r]),
            "P_SL": lay([block_n, block_m])}


__all__ = ["shared_layouts"]
