"""MoE expert load per layer and per GPU, from SGLang's ``logical_count`` (NumPy only).

Input: ``count``, token counts ``[passes, layers, experts]`` as returned by
``data.experts.load_expert_dump`` (a token counts once for each of its top-k experts).

Layout model (SGLang's defaults, no expert replication):

- ``n_gpus`` GPUs = the TP size.  Expert parallelism ``ep_size`` divides ``n_gpus``; each EP
  rank is a group of ``n_gpus / ep_size`` GPUs (GPU ``g`` is in EP rank
  ``g // (n_gpus / ep_size)``) that share that rank's experts by TP slicing, so each of them
  does ``1 / (n_gpus / ep_size)`` of the rank's expert work.
- Experts are split into ``ep_size`` contiguous blocks: expert ``e`` lives on EP rank
  ``e // (E / ep_size)``.
- Pure TP (``ep_size == 1``): every GPU holds a ``1 / n_gpus`` slice of every expert, so every GPU
  does the same expert work and balancedness across GPUs is 1.0 whatever the skew; the skew is
  then read per layer over experts (``layer_expert_max_over_mean``).

Terms (``docs/measurement.md``, "Terms"): **balancedness** = mean / max of per-GPU load (1.0 =
perfect; the definition SGLang's and vLLM's EPLB report), **hot GPU** = the GPU holding the max.

Missing is NaN, never 0: a layer with no routed token (a dense layer) has NaN ratios.
"""

from __future__ import annotations

import warnings

import numpy as np

from tealeaves.data.experts import check_logical_count

__all__ = [
    "balancedness",
    "expert_summary",
    "expert_to_ep_rank",
    "gpu_loads",
    "greedy_placement",
    "layer_loads",
]

ESTIMATE_NOTE = (
    "The greedy what-if is an estimate: it re-places each layer's experts by the "
    "longest-processing-time rule (Graham 1969) over the same recorded counts, with exactly "
    "E/ep_size experts per EP rank and no expert replication (SGLang's EPLB can also replicate "
    "hot experts and would do at least as well). It counts routed tokens only: it ignores "
    "attention, the shared expert, all-to-all traffic and kernel efficiency, and assumes the "
    "future traffic routes like the recorded one."
)


def _check_positive_int(value, name: str) -> int:
    if isinstance(value, bool) or int(value) != value or int(value) < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _as_layer_load(layer_load) -> np.ndarray:
    arr = np.asarray(layer_load, dtype=np.float64)
    if arr.ndim != 2 or 0 in arr.shape:
        raise ValueError(
            f"layer_load: expected [layers, experts] with both at least 1, got shape {arr.shape}"
        )
    return arr


def layer_loads(count) -> np.ndarray:
    """Token counts per layer and expert, summed over forward passes.

    Args:
        count: ``[passes, layers, experts]`` token counts (``logical_count``).

    Returns:
        float64 ``[layers, experts]``, units: tokens routed to the expert (over all passes).

    Raises:
        ValueError: ``count`` is not 3-D.
    """
    arr = np.asarray(count, dtype=np.float64)
    if arr.ndim != 3:
        raise ValueError(f"count: expected [passes, layers, experts], got shape {arr.shape}")
    return arr.sum(axis=0)


def expert_to_ep_rank(n_experts: int, ep_size: int) -> np.ndarray:
    """SGLang's default placement: expert ``e`` on EP rank ``e // (n_experts / ep_size)``.

    Args:
        n_experts: number of logical experts ``E`` (Kimi K2.6: 384).
        ep_size: expert-parallel size (1 = pure TP).

    Returns:
        int64 ``[n_experts]``: the EP rank of each expert (contiguous blocks of
        ``n_experts / ep_size``).

    Raises:
        ValueError: either is not a positive integer, or ``ep_size`` does not divide
            ``n_experts`` (the message names both).
    """
    n_experts = _check_positive_int(n_experts, "n_experts")
    ep_size = _check_positive_int(ep_size, "ep_size")
    if n_experts % ep_size:
        raise ValueError(f"ep_size {ep_size} does not divide the {n_experts} experts")
    return np.arange(n_experts, dtype=np.int64) // (n_experts // ep_size)


def _check_layout(n_gpus, ep_size) -> tuple[int, int]:
    if isinstance(n_gpus, bool) or int(n_gpus) != n_gpus or int(n_gpus) < 1:
        raise ValueError(f"n_gpus must be at least 1, got {n_gpus!r}")
    ep_size = _check_positive_int(ep_size, "ep_size")
    if int(n_gpus) % ep_size:
        raise ValueError(f"ep_size {ep_size} does not divide n_gpus {int(n_gpus)}")
    return int(n_gpus), ep_size


def _rank_loads(load: np.ndarray, placement: np.ndarray, ep_size: int) -> np.ndarray:
    """``[layers, ep_size]`` expert work per EP rank; ``placement`` is ``[layers, experts]``."""
    onehot = placement[:, :, None] == np.arange(ep_size)[None, None, :]
    return np.einsum("le,ler->lr", load, onehot.astype(np.float64))


def _placement_2d(placement, n_layers: int, n_experts: int, ep_size: int) -> np.ndarray:
    p = np.asarray(placement)
    if p.ndim == 1:
        p = np.broadcast_to(p, (n_layers, p.shape[0]))
    if p.shape != (n_layers, n_experts):
        raise ValueError(
            f"placement: expected [experts] = ({n_experts},) or [layers, experts] ="
            f" ({n_layers}, {n_experts}), got shape {np.asarray(placement).shape}"
        )
    if not np.issubdtype(p.dtype, np.integer):
        if not np.all(np.isfinite(p)) or np.any(p != np.round(p)):
            raise ValueError("placement: EP ranks must be integers")
        p = p.astype(np.int64)
    if p.min() < 0 or p.max() >= ep_size:
        raise ValueError(
            f"placement: EP ranks must lie in [0, {ep_size - 1}], got {int(p.min())}.."
            f"{int(p.max())}"
        )
    return p


def gpu_loads(layer_load, n_gpus: int, ep_size: int, placement=None) -> np.ndarray:
    """Each GPU's expert work per layer under an EP layout.

    GPU ``g`` belongs to EP rank ``g // (n_gpus / ep_size)`` and does
    ``1 / (n_gpus / ep_size)`` of the summed load of that rank's experts (TP slicing inside the
    rank).  At pure TP (``ep_size == 1``) every GPU gets ``layer total / n_gpus``.

    Args:
        layer_load: ``[layers, experts]`` tokens per expert (``layer_loads``).
        n_gpus: GPUs (= TP size), at least 1.
        ep_size: EP size, dividing ``n_gpus``.
        placement: EP rank of each expert, ``[experts]`` (same for every layer) or
            ``[layers, experts]``; default ``expert_to_ep_rank(E, ep_size)`` (contiguous).

    Returns:
        float64 ``[layers, n_gpus]``, units: tokens routed (expert-token work, TP-sliced);
        each row sums to the layer's total.

    Raises:
        ValueError: ``n_gpus < 1``; ``ep_size`` does not divide ``n_gpus`` (or, with the
            default placement, ``E``); a bad ``layer_load`` or ``placement`` shape or rank.
    """
    load = _as_layer_load(layer_load)
    n_gpus, ep_size = _check_layout(n_gpus, ep_size)
    n_layers, n_experts = load.shape
    if placement is None:
        placement = expert_to_ep_rank(n_experts, ep_size)
    p = _placement_2d(placement, n_layers, n_experts, ep_size)
    per_rank = _rank_loads(load, p, ep_size)
    gpus_per_rank = n_gpus // ep_size
    rank_of_gpu = np.arange(n_gpus) // gpus_per_rank
    return per_rank[:, rank_of_gpu] / gpus_per_rank


def balancedness(loads, axis: int = -1):
    """Balancedness = mean / max of the loads along ``axis`` (1.0 = perfectly balanced).

    The definition SGLang's and vLLM's EPLB report (``docs/measurement.md``, "Terms").

    Args:
        loads: array of non-negative loads (e.g. ``[layers, n_gpus]``).
        axis: the axis holding the GPUs (or ranks).

    Returns:
        float64 array with ``axis`` removed (a Python float for 1-D input); NaN where the max is
        0 or any load along ``axis`` is NaN (missing, never 0).
    """
    arr = np.asarray(loads, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = arr.mean(axis=axis)
        mx = arr.max(axis=axis)
        out = np.where(np.isfinite(mx) & (mx > 0), mean / np.where(mx > 0, mx, 1.0), np.nan)
    if out.ndim == 0:
        return float(out)
    return out


def greedy_placement(layer_load, ep_size: int) -> np.ndarray:
    """Per layer, a balanced placement of experts on EP ranks by the LPT greedy rule.

    Longest-processing-time first (R. L. Graham, "Bounds on multiprocessing timing
    anomalies", SIAM J. Appl. Math. 17(2), 1969): take the layer's experts in descending load
    (ties: lower expert index first) and give each to the EP rank with the least load so far
    (ties: lower rank) among those that still have room; each rank holds exactly
    ``E / ep_size`` experts, as SGLang's layout requires.  Graham's 4/3 bound is for the
    unconstrained problem; with the equal-count constraint LPT is a heuristic, so where it
    does not make a layer's busiest rank lighter than the contiguous default, that layer keeps
    the contiguous placement: the result is never worse than SGLang's default.

    This is an estimate without expert replication: SGLang's EPLB can also replicate hot
    experts onto several ranks, which can balance further than any placement here.

    Args:
        layer_load: ``[layers, experts]`` tokens per expert (``layer_loads``).
        ep_size: EP size, dividing ``E``.

    Returns:
        int64 ``[layers, experts]``: the EP rank of each expert in each layer (usable as
        ``gpu_loads(..., placement=)``).

    Raises:
        ValueError: ``ep_size`` does not divide ``E`` (the message names both), or a bad
            ``layer_load`` shape.
    """
    load = _as_layer_load(layer_load)
    n_layers, n_experts = load.shape
    contiguous = expert_to_ep_rank(n_experts, ep_size)
    ep_size = int(ep_size)
    if ep_size == 1:
        return np.zeros((n_layers, n_experts), dtype=np.int64)
    cap = n_experts // ep_size
    safe = np.nan_to_num(load, nan=0.0)
    order = np.argsort(-safe, axis=1, kind="stable")  # [layers, experts], heaviest first
    rows = np.arange(n_layers)
    rank_load = np.zeros((n_layers, ep_size))
    rank_count = np.zeros((n_layers, ep_size), dtype=np.int64)
    out = np.empty((n_layers, n_experts), dtype=np.int64)
    for k in range(n_experts):
        expert = order[:, k]
        masked = np.where(rank_count < cap, rank_load, np.inf)
        rank = np.argmin(masked, axis=1)
        out[rows, expert] = rank
        rank_load[rows, rank] += safe[rows, expert]
        rank_count[rows, rank] += 1
    default = np.broadcast_to(contiguous, (n_layers, n_experts))
    default_max = _rank_loads(safe, default, ep_size).max(axis=1)
    keep = rank_load.max(axis=1) >= default_max
    out[keep] = default[keep]
    return out


def _nanmean(x: np.ndarray) -> float:
    """The mean of the finite values of ``x``; NaN when there is none (no warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(np.nanmean(x)) if np.isfinite(x).any() else float("nan")


def _tokens(arr: np.ndarray) -> int | float:
    """The total of the counts ``arr``: an int when they are whole numbers, else a float."""
    total = float(arr.sum())
    return int(total) if np.all(arr == np.round(arr)) else total


def _hot_gpu(total_now: np.ndarray, ep_size: int) -> int | None:
    """The GPU with the largest summed load (``[n_gpus]``), None at pure TP or all equal."""
    if ep_size > 1 and total_now.max() > total_now.min():
        return int(np.argmax(total_now))
    return None


def expert_summary(count, n_gpus: int, ep_size: int) -> dict:
    """Expert skew per layer, per-GPU expert work now, and a greedy re-placement what-if.

    Args:
        count: ``[passes, layers, experts]`` token counts (``logical_count``).
        n_gpus: GPUs (= TP size).
        ep_size: EP size dividing ``n_gpus`` and ``E`` (1 = pure TP).

    Returns:
        dict of plain Python / NumPy values (arrays float64 unless said; NaN = missing):

        - ``passes``, ``layers``, ``experts``, ``n_gpus``, ``ep_size`` (int).
        - ``tokens``: total of ``count`` (int when the counts are integers, else float):
          token-to-expert routings over all passes, layers and experts (= tokens x top-k x
          MoE layers).
        - ``layer_tokens``: ``[layers]`` routings per layer.
        - ``layer_expert_max_over_mean``: ``[layers]`` max / mean over experts of the layer's
          count (1.0 = uniform routing; NaN for a layer with no routed token).  This is the
          skew that matters at pure TP.
        - ``gpu_load``: ``[layers, n_gpus]`` each GPU's share of the layer's expert work under
          the contiguous layout (each row sums to 1; NaN rows for empty layers).
        - ``layer_balancedness``: ``[layers]`` balancedness across GPUs, contiguous layout.
        - ``layer_balancedness_greedy``: ``[layers]`` the same under ``greedy_placement``.
        - ``balancedness`` / ``balancedness_greedy`` (float): balancedness of the per-GPU
          loads summed over layers (the whole-model view; hides per-layer skew, since each
          layer waits for its own slowest GPU).
        - ``balancedness_layer_mean`` / ``balancedness_greedy_layer_mean`` (float): the mean
          over non-empty layers of the per-layer values (the per-step view).
        - ``gpu_load_total``: ``[n_gpus]`` share of all expert work per GPU (sums to 1).
        - ``hot_gpu``: int index of the GPU with the largest summed load (the lowest index of
          the hottest EP rank: GPUs of one rank tie), or None at pure TP / when all equal.
        - ``pure_tp`` (bool): ``ep_size == 1``.
        - ``estimate_note`` (str): what the greedy what-if assumes.

    Raises:
        data.experts.ExpertDumpError (a ValueError): a bad ``count`` (see
            ``check_logical_count``).
        ValueError: ``n_gpus < 1`` or ``ep_size`` not dividing ``n_gpus`` or ``E``.
    """
    arr = check_logical_count(count, "count")
    n_gpus, ep_size = _check_layout(n_gpus, ep_size)
    passes, n_layers, n_experts = arr.shape
    expert_to_ep_rank(n_experts, ep_size)  # raises when ep_size does not divide E
    load = layer_loads(arr)
    layer_total = load.sum(axis=1)
    has = layer_total > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_e = load.mean(axis=1)
        skew = np.where(has, load.max(axis=1) / np.where(has, mean_e, 1.0), np.nan)

    now = gpu_loads(load, n_gpus, ep_size)
    greedy = gpu_loads(load, n_gpus, ep_size, placement=greedy_placement(load, ep_size))
    share = np.where(has[:, None], now / np.where(has, layer_total, 1.0)[:, None], np.nan)
    layer_bal = np.where(has, balancedness(now, axis=1), np.nan)
    layer_bal_greedy = np.where(has, balancedness(greedy, axis=1), np.nan)
    total_now = now.sum(axis=0)
    total_greedy = greedy.sum(axis=0)
    return {
        "passes": int(passes),
        "layers": int(n_layers),
        "experts": int(n_experts),
        "n_gpus": n_gpus,
        "ep_size": ep_size,
        "tokens": _tokens(arr),
        "layer_tokens": layer_total,
        "layer_expert_max_over_mean": skew,
        "gpu_load": share,
        "layer_balancedness": layer_bal,
        "layer_balancedness_greedy": layer_bal_greedy,
        "balancedness": float(balancedness(total_now)),
        "balancedness_greedy": float(balancedness(total_greedy)),
        "balancedness_layer_mean": _nanmean(layer_bal),
        "balancedness_greedy_layer_mean": _nanmean(layer_bal_greedy),
        "gpu_load_total": total_now / total_now.sum(),
        "hot_gpu": _hot_gpu(total_now, ep_size),
        "pure_tp": ep_size == 1,
        "estimate_note": ESTIMATE_NOTE,
    }
