"""DDTree verify attention over an MLA latent KV cache: shapes, inputs, the torch reference, and
the NSPLIT chooser.  torch only (no Triton); runs on the CPU.

The problem (Kimi K2.6 per TP8 rank: 8 of its 64 query heads, MLA latent rows of 576;
``docs/measurement.md``, "Kimi K2.6 per TP8 rank", and ``docs/verify-attention.md``):

- A paged latent KV cache shared by every head: rows of ``D_K = 576`` (``kv_lora_rank`` 512 +
  ``qk_rope_head_dim`` 64); V is the first ``D_V = 512`` of each row (MLA with the up-projections
  absorbed into the queries, as DeepSeek-V2 §2.1 and FlashMLA do for decode).  Layout
  ``kv_cache[num_pages, page_size, 576]`` and ``page_table[B, max_pages]`` (page ids, int32).
- Each sequence ``b`` has ``ctx_lens[b]`` cached tokens, then its draft tree of ``T`` nodes,
  written to the cache right after them (positions ``ctx_lens[b] + i``), as the verify pass of
  speculative decoding does before attention.
- Queries ``q[B, T, H, 576]``: one per tree node and head (8 or 16 heads per rank).
- Node ``i`` attends to every cached token and to the tree nodes on its path from the root
  (its ancestors and itself): the ancestor-only mask, from the parent array ``parents[B, T]``
  (``-1`` for a root, else an earlier node).
- ``out[B, T, H, 512] = softmax(q k^T * sm_scale + mask) v``, ``sm_scale = 1/sqrt(192)``
  (``qk_nope_head_dim`` 128 + ``qk_rope_head_dim`` 64 of DeepSeek-V3 / Kimi K2: the scale of the
  attention before absorption).

Bytes that must move (``kv_bytes``): each sequence's ``(ctx_len + T)`` cache rows of 576 bf16
once; queries and outputs are small next to it at long context.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

from tealeaves.kernels_bench.verify_args import KERNEL_NAMES, MAX_ROWS

D_K = 576
D_V = 512
D_ROPE = D_K - D_V
#: Softmax scale: 1 / sqrt(qk_nope_head_dim + qk_rope_head_dim) = 1 / sqrt(128 + 64).
SM_SCALE = 1.0 / math.sqrt(192.0)


class VerifyShapeError(ValueError):
    """Inputs that do not fit the problem (the message names the argument)."""


# MAX_ROWS (from verify_args, which needs no torch): the largest cache length (context + tree
# nodes) of one sequence, 2**31 - 2**23: int32 positions on the GPU, with room for the
# kernels' split arithmetic.


def whole(name: str, value, least: int = 1, most: int | None = None) -> int:
    """``value`` as a Python ``int`` (a numpy integer too), refused unless it is a whole number
    in ``[least, most]``.

    Raises:
        VerifyShapeError: naming ``name`` (a bool, float, string, None, or out of range).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise VerifyShapeError(f"{name} must be a whole number, got {value!r}")
    v = int(value)
    if v < least or (most is not None and v > most):
        top = "" if most is None else f" and at most {most}"
        raise VerifyShapeError(f"{name} must be at least {least}{top}, got {v}")
    return v


def tree_mask(parents: torch.Tensor) -> torch.Tensor:
    """The ancestor-only mask of draft trees.

    Args:
        parents: int tensor ``[B, T]`` (or ``[T]``): ``parents[b, i]`` is ``-1`` for a root or
            the index ``< i`` of node ``i``'s parent (nodes in topological order).

    Returns:
        bool ``[B, T, T]`` (``[T, T]`` for 1-D input): ``mask[b, i, j]`` is True when node ``j``
        is node ``i`` or one of its ancestors.

    Raises:
        VerifyShapeError: a parent that is not ``-1`` or an earlier node.
    """
    one = parents.dim() == 1
    p = parents.view(1, -1) if one else parents
    if p.dim() != 2:
        raise VerifyShapeError(f"parents: expected [B, T], got shape {tuple(parents.shape)}")
    B, T = p.shape
    idx = torch.arange(T, device=p.device)
    bad = (p < -1) | (p >= idx)
    if bool(bad.any()):
        b, i = (int(x) for x in bad.nonzero()[0])
        raise VerifyShapeError(f"parents[{b}, {i}] = {int(p[b, i])}: a parent must be -1 or an "
                               f"earlier node (< {i})")
    mask = torch.zeros(B, T, T, dtype=torch.bool, device=p.device)
    mask[:, idx, idx] = True
    for i in range(T):  # row i = row parent(i) + itself (parents come first)
        par = p[:, i]
        has = par >= 0
        if bool(has.any()):
            mask[has, i] |= mask[has, par[has]]
    return mask[0] if one else mask


def random_tree(T: int, generator: torch.Generator | None = None, width: int = 4) -> torch.Tensor:
    """A random draft tree of ``T`` nodes in topological order (``parents`` ``[T]``): node 0 is
    the root; each later node hangs under one of the last ``width * 2`` nodes (a bushy tree a
    few levels deep, like a DDTree / EAGLE draft)."""
    parents = torch.full((T,), -1, dtype=torch.int32)
    for i in range(1, T):
        lo = max(0, i - 2 * width)
        parents[i] = int(torch.randint(lo, i, (1,), generator=generator))
    return parents


@dataclass
class VerifyInputs:
    """One verify problem (``make_inputs``); tensors on one device."""

    q: torch.Tensor            # [B, T, H, 576]
    kv_cache: torch.Tensor     # [num_pages, page_size, 576]
    page_table: torch.Tensor   # [B, max_pages] int32
    ctx_lens: torch.Tensor     # [B] int32 (cached tokens before the tree)
    parents: torch.Tensor      # [B, T] int32
    mask: torch.Tensor         # [B, T, T] bool (tree_mask(parents))
    page_size: int
    sm_scale: float = SM_SCALE

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(B, T, H)``."""
        B, T, H, _ = self.q.shape
        return B, T, H


def make_inputs(batch: int, context: int, tree: int, heads: int, page_size: int,
                scattered: bool = True, dtype=torch.bfloat16, device="cpu",
                seed: int = 0, ragged: bool = False) -> VerifyInputs:
    """Random inputs (normal values, never zeros): ``batch`` sequences of ``context`` cached
    tokens (``ragged``: lengths drawn in [context/2, context]) plus a ``tree``-node draft tree,
    ``heads`` query heads, pages of ``page_size`` tokens, the page table a random permutation of
    the pages (``scattered``) or in order.

    Raises:
        VerifyShapeError: a size not a whole number from 1 (context + tree at most
            ``MAX_ROWS``), or a page size not a power of two up to 64.
    """
    batch, tree, heads = whole("batch", batch), whole("tree", tree), whole("heads", heads)
    context = whole("context", context, most=MAX_ROWS - tree)
    page_size = whole("page_size", page_size)
    if page_size > 64 or page_size & (page_size - 1):
        raise VerifyShapeError(f"page_size must be a power of two from 1 to 64, got {page_size}")
    g = torch.Generator().manual_seed(seed)
    gd = torch.Generator(device=device).manual_seed(seed + 1)  # big tensors made in place
    if ragged:
        lens = torch.randint(max(1, context // 2), context + 1, (batch,), generator=g)
    else:
        lens = torch.full((batch,), context)
    lens = lens.to(torch.int32)
    pages_per = [math.ceil((int(n) + tree) / page_size) for n in lens]
    max_pages = max(pages_per)
    total = sum(pages_per)
    order = torch.randperm(total, generator=g) if scattered else torch.arange(total)
    table = torch.zeros(batch, max_pages, dtype=torch.int32)
    at = 0
    for b, n in enumerate(pages_per):
        table[b, :n] = order[at:at + n].to(torch.int32)
        at += n
    kv = torch.empty(total, page_size, D_K, dtype=dtype, device=device)
    for i in range(0, total, 4096):  # in pieces: no float32 copy of a 2-GB cache
        kv[i:i + 4096] = torch.randn(kv[i:i + 4096].shape, generator=gd, device=device)
    q = torch.randn(batch, tree, heads, D_K, generator=gd, device=device).to(dtype)
    parents = torch.stack([random_tree(tree, g) for _ in range(batch)])
    return VerifyInputs(q, kv, table.to(device), lens.to(device), parents.to(device),
                        tree_mask(parents).to(device), page_size)


def gather_kv(inp: VerifyInputs, b: int) -> torch.Tensor:
    """Sequence ``b``'s cache rows in order, ``[ctx_len + T, 576]`` (through the page
    table)."""
    _, T, _ = inp.shape
    n = int(inp.ctx_lens[b]) + T
    pos = torch.arange(n, device=inp.kv_cache.device)
    pages = inp.page_table[b, pos // inp.page_size].long()
    return inp.kv_cache[pages, pos % inp.page_size]


def tree_bits(mask: torch.Tensor, ctx_lens: torch.Tensor) -> torch.Tensor:
    """The tree mask packed as the ``seesaw`` kernel reads it: ``bits[B, T, W]`` int32 with
    bit ``p % 32`` of word ``p // 32 - L // 32`` set when query node ``i`` may see the tree
    node at cache position ``p = L + j`` (``L = ctx_lens[b]``), ``W = T // 32 + 2`` words
    (enough for any ``L``).  Packed bit masks are what FlashInfer's tree attention takes
    too; a kernel's 64-column tile then needs two words per row, not 64 bytes.

    Args:
        mask: ``[B, T, T]`` bool or uint8, ``mask[b, i, j]``: node ``i`` sees node ``j``.
        ctx_lens: ``[B]`` integer cached tokens per sequence (0 or more), on ``mask``'s device.

    Raises:
        TypeError: either is not a tensor.
        ValueError: ``mask`` not ``[B, T, T]``, ``ctx_lens`` not ``[B]`` whole numbers from
            0, or the two on different devices (the messages name ``tree_bits``).
    """
    if not (isinstance(mask, torch.Tensor) and isinstance(ctx_lens, torch.Tensor)):
        raise TypeError(f"tree_bits: expected tensors, got {type(mask).__name__} and "
                         f"{type(ctx_lens).__name__}")
    if mask.dim() != 3 or mask.shape[1] != mask.shape[2] or ctx_lens.shape != mask.shape[:1]:
        raise ValueError(f"tree_bits: expected mask [B, T, T] and ctx_lens [B], got "
                         f"{tuple(mask.shape)} and {tuple(ctx_lens.shape)}")
    dt = ctx_lens.dtype
    if dt == torch.bool or dt.is_floating_point or dt.is_complex:
        raise ValueError(f"tree_bits: ctx_lens must be integers, got {ctx_lens.dtype}")
    if ctx_lens.device != mask.device:
        raise ValueError(f"tree_bits: mask on {mask.device}, ctx_lens on {ctx_lens.device}")
    if ctx_lens.numel() and int(ctx_lens.min()) < 0:
        raise ValueError(f"tree_bits: ctx_lens must be 0 or more, got {int(ctx_lens.min())}")
    B, T, _ = mask.shape
    L = ctx_lens.to(torch.int64)
    pos = L[:, None] + torch.arange(T, device=mask.device)              # [B, T] (node j)
    word = (pos // 32 - L[:, None] // 32)[:, None, :].expand(B, T, T)   # [B, i, j]
    val = (mask != 0).to(torch.int64) << (pos % 32)[:, None, :]
    bits = torch.zeros(B, T, T // 32 + 2, dtype=torch.int64, device=mask.device)
    bits.scatter_add_(2, word, val)      # distinct bits per word: the sum is the bitwise or
    return torch.where(bits >= 2**31, bits - 2**32, bits).to(torch.int32)


def verify_reference(inp: VerifyInputs, dtype=torch.float64) -> torch.Tensor:
    """The verify attention computed plainly in ``dtype``: ``out[B, T, H, 512]``.

    Each sequence's rows are gathered through the page table; scores over the cached tokens are
    all kept, scores over the tree keep the ancestors (``inp.mask``).
    """
    B, T, H = inp.shape
    out = torch.empty(B, T, H, D_V, dtype=dtype, device=inp.q.device)
    for b in range(B):
        k = gather_kv(inp, b).to(dtype)                       # [N, 576]
        L = int(inp.ctx_lens[b])
        s = torch.einsum("thd,nd->thn", inp.q[b].to(dtype), k) * inp.sm_scale
        keep = torch.ones(T, k.shape[0], dtype=torch.bool, device=k.device)
        keep[:, L:] = inp.mask[b]
        s = s.masked_fill(~keep[:, None, :], float("-inf"))
        out[b] = torch.einsum("thn,nd->thd", torch.softmax(s, dim=-1), k[:, :D_V])
    return out


def kv_bytes(inp: VerifyInputs) -> int:
    """Bytes of cache rows the verify pass must read: every sequence's ``ctx_len + T`` rows of
    576 elements, once."""
    _, T, _ = inp.shape
    rows = int(inp.ctx_lens.sum()) + T * inp.ctx_lens.numel()
    return rows * D_K * inp.kv_cache.element_size()


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``||out - ref|| / ||ref||`` in float64 (NaN anywhere gives NaN)."""
    o, r = out.double(), ref.double()
    if not bool(torch.isfinite(o).all()):
        return math.nan
    return float(torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r))


#: The split kernels: ``"gluon"``, ``"gluon64"`` and ``"seesaw"`` (``verify_gluon``, Hopper:
#: one warpgroup over 16- or 32-row tiles, two or three over 64-row tiles) and ``"triton"``
#: (``verify_triton._split_kernel``, portable); named in ``verify_args``, which needs no torch.
KERNELS = KERNEL_NAMES
#: The kernels over 64-row query tiles with several warpgroups (``verify_gluon``):
#: ``gluon64`` (two) and ``seesaw`` (three: FlashMLA's seesaw schedule).
WIDE_KERNELS = ("gluon64", "seesaw")
#: The kernels written in Gluon for Hopper (sm_90) only.
HOPPER_KERNELS = ("gluon", "gluon64", "seesaw")

#: The chooser's cost model, from the H200 runs in docs/verify-attention.md.  Every setting of
#: ``split_blocks`` holds one program per SM (their shared memory, 131-192 KB, leaves no room
#: for a second), so programs run in waves of ``sms``; a split costs its cache rows (rounded
#: up to whole 64-row tiles) plus this many rows' worth of fixed cost (loading its queries,
#: the first tile's latency, writing a partial output and its log-sum-exp, merging it): 384,
#: from batch 1, 64k context, 4-node trees, where NSPLIT 64 took 52.1 us and 128 took
#: 33.1 us in one wave each, (1024 + c) / (512 + c) = 1.574.
SPLIT_COST_ROWS = 384
#: No split shorter than this many cache rows (one Gluon tile).
MIN_SPLIT_ROWS = 64
#: Largest split count tried.
MAX_NSPLIT = 256


def block_rows(rows: int, kernel: str = "gluon") -> int:
    """Row tile of the split kernel for ``rows`` = tree nodes x heads.

    Gluon: 16 or 32 (its output accumulator, 512 x rows in float32, must fit one warpgroup's
    registers; more rows take several tiles).  gluon64: 64 (two warpgroups, 256 output
    columns each).  Triton: 16, 32 or 64.  The settings that ran
    fastest on the H200 (docs/verify-attention.md)."""
    if kernel == "gluon":
        return 16 if rows <= 16 else 32
    if kernel in WIDE_KERNELS:
        return 64
    return 16 if rows <= 16 else 32 if rows <= 32 else 64


def split_blocks(rows: int, kernel: str = "gluon") -> dict:
    """Tile settings of a split kernel for ``rows`` = tree nodes x heads: ``block_m``,
    ``block_n``, ``num_warps``, ``num_stages`` (the fastest that compile without spilling in
    the main loop and fit 227 KB of shared memory on the H200, sm_90, Triton 3.6;
    docs/verify-attention.md).

    Raises:
        VerifyShapeError: an unknown kernel.
    """
    if kernel not in KERNELS:
        raise VerifyShapeError(f"kernel: expected one of {', '.join(KERNELS)}, got {kernel!r}")
    bm = block_rows(rows, kernel)
    if kernel == "gluon":  # one warpgroup, 64-row cache tiles double-buffered by hand
        return {"block_m": bm, "block_n": 64, "num_warps": 4, "num_stages": 1}
    if kernel in WIDE_KERNELS:  # warpgroup 0 (num_warps) + worker warpgroups, 64 query rows
        return {"block_m": 64, "block_n": 64, "num_warps": 4, "num_stages": 1}
    if bm == 16:
        return {"block_m": 16, "block_n": 32, "num_warps": 4, "num_stages": 4}
    if bm == 32:
        return {"block_m": 32, "block_n": 64, "num_warps": 8, "num_stages": 3}
    return {"block_m": 64, "block_n": 32, "num_warps": 8, "num_stages": 3}


def choose_nsplit(batch: int, heads: int, tree: int, context: int, sms: int,
                  block_m: int | None = None, fixed_rows: int = SPLIT_COST_ROWS) -> int:
    """The number of KV splits for the split-KV kernels.

    The grid is ``batch x ceil(tree * heads / block_m) x NSPLIT`` programs (``block_m``: the
    row tile, by default the Gluon kernel's ``block_rows``), one per SM at a time.  Among the
    powers of two in ``[1, MAX_NSPLIT]`` with splits of at least ``MIN_SPLIT_ROWS`` rows, the
    pick minimises ``waves x (rows per split, in whole 64-row tiles, + fixed_rows)``,
    ``waves = ceil(programs / sms)``: the estimated time of the last wave to finish; ties go
    to fewer splits.  ``fixed_rows``: a split's fixed cost in cache rows (``SPLIT_COST_ROWS``
    for the one-warpgroup kernels, ``SPLIT_COST_ROWS_64`` for ``gluon64``).

    Raises:
        VerifyShapeError: a size below 1 or not a whole number (the message names it).
    """
    batch, heads, tree, sms = (whole(n, v) for n, v in (("batch", batch), ("heads", heads),
                                                          ("tree", tree), ("sms", sms)))
    context = whole("context", context, most=MAX_ROWS - tree)
    fixed_rows = whole("fixed_rows", fixed_rows, least=0)
    block_m = block_rows(tree * heads) if block_m is None else whole("block_m", block_m)
    tiles = batch * math.ceil(tree * heads / block_m)
    rows = context + tree
    best, pick = math.inf, 1
    ns = 1
    while ns <= MAX_NSPLIT and (ns == 1 or rows / ns >= MIN_SPLIT_ROWS):
        waves = math.ceil(tiles * ns / sms)
        tile_rows = math.ceil(rows / ns / MIN_SPLIT_ROWS) * MIN_SPLIT_ROWS
        cost = waves * (tile_rows + fixed_rows)
        if cost < best:
            best, pick = cost, ns
        ns *= 2
    return pick


#: Query rows (tree nodes x heads) from which the chooser takes ``gluon64``, the
#: warp-specialised kernel over 64-row tiles: 128 (16-node trees at 8 heads), the smallest
#: row count where it was timed against the one-warpgroup ``gluon`` kernel on the H200, and
#: won at every such point (docs/verify-attention.md, "Large trees").  Below, ``gluon``,
#: whose 16- and 32-row tiles waste no tensor-core rows and whose small-tree figures stand.
WIDE_ROWS = 128
#: ``gluon64``'s fixed cost per split in cache rows (its 64 query rows, 72 KB, loaded and its
#: 128-KB partial output written and merged): 256, from the first H200 run (batch 1, 64k
#: context, 16-node trees: NSPLIT 64 took 71 us in one wave, 128 took 86 us in two); its
#: picks are within 1 % of the best NSPLIT at all 135 points of the large-tree sweep and
#: within 10 % on the 10 shapes outside it (docs/verify-attention.md).
SPLIT_COST_ROWS_64 = 256
#: The kernel the chooser takes from ``WIDE_ROWS`` query rows on Hopper.
WIDE_KERNEL = "gluon64"


def choose_plan(batch: int, heads: int, tree: int, context: int, sms: int,
                hopper: bool = True, kernel: str | None = None) -> tuple[str, int]:
    """The split kernel and NSPLIT for one verify shape: ``("gluon64", n)`` from
    ``WIDE_ROWS`` query rows (``tree * heads``) on Hopper, else ``("gluon", n)``, or
    ``("triton", n)`` off Hopper (``hopper=False``); ``n`` from ``choose_nsplit`` with that
    kernel's row tile and fixed cost.  ``kernel`` fixes the kernel (its NSPLIT is chosen).

    Raises:
        VerifyShapeError: a size below 1, or an unknown kernel.
    """
    tree, heads = whole("tree", tree), whole("heads", heads)
    if kernel is None:
        kernel = (WIDE_KERNEL if tree * heads >= WIDE_ROWS else "gluon") if hopper else "triton"
    elif kernel not in KERNELS:
        raise VerifyShapeError(f"kernel: expected one of {', '.join(KERNELS)}, got {kernel!r}")
    fixed = SPLIT_COST_ROWS_64 if kernel in WIDE_KERNELS else SPLIT_COST_ROWS
    bm = block_rows(tree * heads, kernel)
    return kernel, choose_nsplit(batch, heads, tree, context, sms, bm, fixed)


__all__ = ["D_K", "D_ROPE", "D_V", "HOPPER_KERNELS", "KERNELS", "MAX_NSPLIT", "MAX_ROWS",
           "MIN_SPLIT_ROWS", "SM_SCALE", "SPLIT_COST_ROWS", "SPLIT_COST_ROWS_64", "WIDE_KERNEL",
           "WIDE_KERNELS", "WIDE_ROWS", "VerifyInputs",
           "VerifyShapeError", "block_rows", "choose_nsplit", "choose_plan",
           "gather_kv", "kv_bytes", "make_inputs", "random_tree", "relative_error",
           "split_blocks", "tree_bits", "tree_mask", "verify_reference", "whole"]
