"""MoE expert imbalance across GPUs, per decode window: every hot GPU, at any load.

Terms (SGLang's and vLLM's EPLB use ``balancedness`` = mean/max load over ranks):

- **work** of a GPU in a window: the activity of the pipes that do work, tensor + DRAM
  (GPM ``tensor_active`` + ``dram_active``, %), when every GPU of the window reads both; else
  ``sm_active``; else NVML's ``gpu_util``.  ``sm_active`` alone misleads: a rank that waits
  in an NCCL collective keeps its SMs "active" while it does no work.
- ``balancedness`` = mean / max of the GPUs' work; 1.0 = perfectly balanced.
- ``imbalance_ratio`` = max / mean work = 1 / balancedness.
- ``straggler_tax`` = 1 - mean / max of the GPUs' busy time (``gpu_util``): the share of
  GPU-time spent waiting for the slowest rank at the per-step barrier.
- the **hot set**: every GPU whose work exceeds the fair share (the mean) by more than
  ``threshold`` (relative) *and* ``floor`` percentage points (absolute) *and* ``noise_k`` x
  sqrt(mean) points (low loads are noisier, relatively, than high ones).  The absolute part
  is the noise of balanced windows: with no gate on the load itself, a decode stretch at 6 %
  mean activity with one GPU doing 12x the other's work is flagged, while two idle-ish GPUs
  reading 0.3 % and 0.1 % are not.  ``hot_share`` / ``cold_share``: the mean share of the
  summed work held by a hot GPU / by the others (e.g. 18 % each vs 7 %).
- ``hot_gpu``: the hot GPU with the most work (kept for one-GPU views and old readers);
  ``persistence``: ``persistent`` when the previous flagged window (at most
  ``2 x min_windows`` windows back) had the same hot set, ``rotating`` when another, ``new``
  otherwise.  ``hot_persistence`` in ``persistence_by_gpu`` counts it per GPU.

Every term is judged within a **serving group** (``classifier.groups``: the GPUs of one
server; ``groups=`` of ``imbalance_terms`` / ``ImbalanceDetector.detect``): a hot set, ratio or
straggler tax never spans two groups, and GPUs of different roles (a prefill-only GPU beside a
decode-only one) in groups of one each have none.  Without groups every GPU is one group.

A decode window is flagged ``imbalanced`` when its hot set is not empty and it sits in a run of
at least ``min_windows`` such consecutive windows.  ``threshold``, ``floor`` and
``min_windows`` are chosen on the training split (``ImbalanceDetector.fit``) from labelled
balanced and skewed decode windows, so the floor is the noise measured on balanced stretches.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from tealeaves.data.schema import entity_name, peers

#: Balanced decode windows under this mean work (%) measure the noise floor.
NOISE_LOAD = 10.0
#: A window (of a serving group) whose mean load (``load_g<i>``, %: the load the page and
#: the report show) is under this is idle: it carries no imbalance ratio, balancedness,
#: straggler tax or hot set (NaN / none).  Under 0.5 % an idle H200 reads counter noise
#: (the bundled trace's 0 % windows read max/mean up to 1.07x, and one ``gpu_util`` blip in
#: a 0 % window a straggler tax of 40 %; issue 35 saw 1.35x and 17 %), while every skewed
#: window of the low-load composite (``h200x2_composite_low_load``, real rows at 0.5-16 %
#: load) lies above it; ``NOISE_K_LOADS`` measures low-load noise from the same load up.
IDLE_LOAD = 0.5
#: Near idle, measured on idle H200s: a serving group's window whose mean work by the pipes
#: (tensor + DRAM activity, percentage points) is under ``IDLE_WORK`` while no GPU of it ran
#: kernels ``IDLE_BUSY`` % of the time or more (``gpu_util``) has nothing to be uneven about:
#: no ratio, straggler tax or hot set, however its near-zero readings scatter (issue 38: SM
#: 2 %, tensor/DRAM 0.3 % on 64 GPUs gave random hot sets of 12-18 GPUs).  Source: the
#: labelled idle stretches of the 33 bundled traces with labels (``data/traces``, H200,
#: driver 580; 546 GPU-windows of 0.5 s wholly inside an idle stretch): tensor + DRAM median
#: 0, 99th percentile and max 0.73 points (tensor max 0.30, DRAM max 0.43, SM active max 1.0
#: %), ``gpu_util`` 99th percentile 0.7 %, max 2.9 %; each bound is rounded up past the max.
#: The pipes alone do not say idle: launch-bound decode reads SM 0.13 % and tensor + DRAM
#: under 0.5 points with kernels running most of the time (``h200x2_launch_bound``), hence
#: the ``gpu_util`` gate; without ``gpu_util`` readings the pipes decide alone.
IDLE_WORK = 1.0
IDLE_BUSY = 5.0
#: Quantile of the balanced windows' spread taken as the noise (robust to the few windows
#: at a change that a stretch label calls balanced).
NOISE_QUANTILE = 0.9
#: The floor never goes under this (percentage points), nor defaults to other than this.
MIN_FLOOR = 0.25
DEFAULT_FLOOR = 1.0
#: The relative threshold stays within this range; the default without balanced windows.
THRESHOLD_RANGE = (1.04, 1.40)
DEFAULT_THRESHOLD = 1.15
#: Balanced decode windows between these mean works (%) measure ``noise_k``: real work, low
#: load.  The default (0.3) is what the low-load composite's balanced stretches measure.
NOISE_K_LOADS = (IDLE_LOAD, NOISE_LOAD)
DEFAULT_NOISE_K = 0.3
#: The pipes a hot GPU can lean on, in the order ``ceilings`` reports them.
PIPES = ("tensor", "dram", "pcie", "nvlink")
#: A window's busiest pipe under this fraction of its limit while kernels ran most of the
#: time: the GPU is launch-bound (kernels too small to fill any pipe).
LAUNCH_BOUND_PIPE = 0.10


def _gpu_columns(features: pd.DataFrame, prefix: str) -> list[str]:
    """The per-GPU columns ``<prefix><i>`` of the entities compared (``data.schema.peers``:
    a whole GPU whose MIG instances are present is left out)."""
    cols = {int(c[len(prefix):]): c for c in features.columns
            if c.startswith(prefix) and c[len(prefix):].isdigit()}
    return [cols[g] for g in peers(cols)]


def _matrix(features: pd.DataFrame, prefix: str, gpus: list[int]) -> np.ndarray:
    cols = [f"{prefix}{g}" for g in gpus]
    return features.reindex(columns=cols).to_numpy(dtype=float)


def gpu_work(features: pd.DataFrame) -> tuple[np.ndarray, list[int]]:
    """Work of each GPU in each window (%, see the module docstring) and the GPU ids.

    Args:
        features: ``WindowFeatures`` rows.

    Returns:
        ``(work, gpus)``: work has shape (n_windows, n_gpus), NaN where the GPU has no
        reading; the measure is chosen per window, the same for every GPU of the window.
    """
    gpus = [int(c[len("load_g"):]) for c in _gpu_columns(features, "load_g")]
    load = _matrix(features, "load_g", gpus)
    have = np.isfinite(load)
    pipes = (_matrix(features, "tensor_g", gpus) + _matrix(features, "dram_g", gpus)) * 100.0
    sm = _matrix(features, "sm_g", gpus) * 100.0
    busy = _matrix(features, "busy_g", gpus)

    def every(m: np.ndarray) -> np.ndarray:  # every GPU with a load reads this measure
        return (np.isfinite(m) | ~have).all(axis=1, keepdims=True) & have.any(axis=1,
                                                                             keepdims=True)

    work = np.where(every(pipes), pipes, np.where(every(sm), sm, np.where(every(busy), busy,
                                                                          load)))
    return np.where(have, work, np.nan), gpus


def imbalance_terms(features: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD,
                    floor: float = DEFAULT_FLOOR,
                    noise_k: float = DEFAULT_NOISE_K, groups=None) -> pd.DataFrame:
    """Imbalance terms per window, before any phase or run-length rule, judged within each
    serving group (``classifier.groups``).

    Args:
        features: ``WindowFeatures`` rows (``load_g<i>``, ``busy_g<i>`` and pipe columns).
        threshold: relative excess over the fair share (mean work) that makes a GPU hot.
        floor: absolute excess (percentage points of work) that makes a GPU hot.
        noise_k: the excess must also pass ``noise_k`` x sqrt(mean work) (points).
        groups: the serving groups, sequences of GPU ids (``groups.Grouping.groups``); None:
            one group of every GPU.  A GPU of the features in no group is judged alone
            (never hot); a group's GPU the features lack is left out.

    Returns:
        Frame on the features' index: ``imbalance_ratio`` (max / mean work within a group;
        with several groups the highest of the groups'), ``balancedness`` (its inverse),
        ``straggler_tax`` (1 - mean/max busy time within a group; with several groups the
        mean of the groups' weighted by their GPUs with a reading: the share of GPU-time
        spent waiting for the slowest rank *of one's own group*), all NaN where no group has
        two GPUs with a reading or work or every such group is idle (mean load under
        ``IDLE_LOAD``: an idle group has no ratio, tax or hot GPU); ``top_gpu`` (the most loaded GPU), ``hot_set``
        (tuple of GPU ids, every group's hot GPUs, empty when none is hot), ``hot_top`` (the
        hot GPU with the most work, NaN without one), ``hot_share`` and ``cold_share``
        (mean share, %, of its group's summed work held by a hot GPU / by another GPU of a
        group with a hot GPU; NaN without a hot set), ``work_mean`` (%, over every GPU).
    """
    work, gpus = gpu_work(features)
    busy = _matrix(features, "busy_g", gpus)
    load = _matrix(features, "load_g", gpus)
    members = _group_columns(gpus, groups)
    pipes = (_matrix(features, "tensor_g", gpus) + _matrix(features, "dram_g", gpus)) * 100.0
    parts = [_group_terms(work[:, idx], busy[:, idx], threshold, floor, noise_k, load[:, idx],
                          pipes[:, idx])
             for idx in members]
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: NaN is the answer
        wmean = np.nanmean(work, axis=1)
        if len(parts) == 1:  # one group: its terms as they are
            ratio, tax = parts[0]["ratio"], parts[0]["tax"]
        elif parts:
            ratio = np.nanmax(np.column_stack([p["ratio"] for p in parts]), axis=1)
            taxes = np.column_stack([p["tax"] for p in parts])
            weight = np.column_stack([p["n_busy"] for p in parts]) * np.isfinite(taxes)
            tax = np.where(weight.sum(axis=1) > 0,
                           np.nansum(np.where(weight > 0, taxes * weight, 0.0), axis=1)
                           / weight.sum(axis=1), np.nan)
        else:
            ratio = tax = np.full(len(work), np.nan)
        hot = np.zeros(work.shape, dtype=bool)
        share = np.full(work.shape, np.nan)
        cold = np.zeros(work.shape, dtype=bool)
        for idx, p in zip(members, parts, strict=True):
            hot[:, idx] = p["hot"]
            share[:, idx] = p["share"]
            cold[:, idx] = np.isfinite(work[:, idx]) & ~p["hot"] & \
                p["hot"].any(axis=1, keepdims=True)
        nh = hot.sum(axis=1)
        hot_share = np.where(nh > 0, np.nansum(np.where(hot, share, 0), axis=1) / nh, np.nan)
        cold_share = np.where((nh > 0) & (cold.sum(axis=1) > 0),
                              np.nansum(np.where(cold, share, 0), axis=1)
                              / cold.sum(axis=1), np.nan)
    ids = np.asarray(gpus, dtype=float)
    top = _busiest(work, np.isfinite(work), ids)
    hot_top = _busiest(work, hot, ids)
    hot_set = [tuple(int(g) for g in np.asarray(gpus)[row]) for row in hot]
    return pd.DataFrame({"imbalance_ratio": ratio, "balancedness": 1.0 / ratio,
                         "straggler_tax": tax, "top_gpu": top, "hot_set": hot_set,
                         "hot_top": hot_top, "hot_share": hot_share, "cold_share": cold_share,
                         "work_mean": wmean}, index=features.index)


def _busiest(work: np.ndarray, mask: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Per window, the id of the GPU with the most work among ``mask`` (NaN where none)."""
    out = np.full(len(work), np.nan)
    has = mask.any(axis=1)
    if has.any() and len(ids):
        out[has] = ids[np.nanargmax(np.where(mask[has] & np.isfinite(work[has]), work[has],
                                             -np.inf), axis=1)]
    return out


def _group_columns(gpus: list[int], groups) -> list[np.ndarray]:
    """Column positions (into ``gpus``) of each serving group: one group of all without
    ``groups``; a GPU in no group becomes a group of its own; empty groups are dropped."""
    if groups is None:
        return [np.arange(len(gpus))]
    pos = {g: i for i, g in enumerate(gpus)}
    out, seen = [], set()
    for grp in groups:
        idx = [pos[int(g)] for g in grp if int(g) in pos and int(g) not in seen]
        seen.update(int(g) for g in grp)
        if idx:
            out.append(np.asarray(idx))
    out += [np.asarray([i]) for g, i in pos.items() if g not in seen]
    return out


def _group_terms(work: np.ndarray, busy: np.ndarray, threshold: float, floor: float,
                 noise_k: float, load: np.ndarray | None = None,
                 pipes: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """One group's terms, (n_windows,) or (n_windows, n_gpus of the group): ``ratio``,
    ``tax``, ``hot``, ``share`` (% of the group's summed work), ``n_busy`` (GPUs with a
    busy reading).  Where the group's mean ``load`` is under ``IDLE_LOAD``, or the group is
    near idle by its ``pipes`` (tensor + DRAM, points) and ``busy`` (``near_idle``), every
    term is NaN, no GPU is hot and ``n_busy`` is 0; without ``load`` no window is idle."""
    idle = loaded_mask(load, invert=True) if load is not None else \
        np.zeros(len(work), dtype=bool)
    if pipes is not None:
        idle = idle | near_idle(pipes, busy)
    work = np.where(idle[:, None], np.nan, work)
    busy = np.where(idle[:, None], np.nan, busy)
    n = np.sum(np.isfinite(work), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: NaN is the answer
        wmean = np.nanmean(work, axis=1)
        wmax = np.nanmax(work, axis=1)
        wsum = np.nansum(work, axis=1)
        bmean = np.nanmean(busy, axis=1)
        bmax = np.nanmax(busy, axis=1)
        ok = (n >= 2) & (wmean > 0)
        ratio = np.where(ok, wmax / wmean, np.nan)
        tax = np.where((n >= 2) & (bmax > 0), 1.0 - bmean / bmax, np.nan)
        hot = _hot(work, threshold, floor, noise_k)
        share = work / wsum[:, None] * 100.0
    return {"ratio": ratio, "tax": tax, "hot": hot, "share": share,
            "n_busy": np.sum(np.isfinite(busy), axis=1)}


def near_idle(pipes: np.ndarray, busy: np.ndarray) -> np.ndarray:
    """(n_windows,) bool: nothing to be uneven about (``IDLE_WORK``, ``IDLE_BUSY``): the
    mean over the GPUs of ``pipes`` (n_windows, n_gpus: tensor + DRAM activity, points;
    NaN where unread) is under ``IDLE_WORK`` and no GPU's ``busy`` (``gpu_util``, %) reaches
    ``IDLE_BUSY`` (a window without any busy reading is judged by the pipes alone).  A
    window without a pipe reading is not near idle by this test."""
    pipes = np.asarray(pipes, dtype=float).reshape(len(pipes), -1)
    busy = np.asarray(busy, dtype=float).reshape(len(busy), -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: not near idle
        work = np.nanmean(pipes, axis=1)
        top = np.nanmax(busy, axis=1) if busy.shape[1] else np.full(len(busy), np.nan)
    return np.isfinite(work) & (work < IDLE_WORK) & ~(top >= IDLE_BUSY)


def loaded_mask(load: np.ndarray, invert: bool = False) -> np.ndarray:
    """(n_windows,) bool: the mean over the GPUs of ``load`` (n_windows, n_gpus; %, NaN where
    a GPU has no reading) is at least ``IDLE_LOAD`` (``invert``: under it, or no reading)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: not loaded
        mean = np.nanmean(np.asarray(load, dtype=float).reshape(len(load), -1), axis=1)
    ok = np.isfinite(mean) & (mean >= IDLE_LOAD)
    return ~ok if invert else ok


def _hot(work: np.ndarray, threshold: float, floor: float,
         noise_k: float = DEFAULT_NOISE_K) -> np.ndarray:
    """(n_windows, n_gpus) bool: the GPU's work exceeds the window's mean by ``threshold``
    (relative), ``floor`` (points) and ``noise_k`` x sqrt(mean) (the noise of low loads,
    which grows slower than the load), in windows of two or more GPUs with some work."""
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        n = np.sum(np.isfinite(work), axis=1, keepdims=True)
        mean = np.nanmean(work, axis=1, keepdims=True)
        excess = work - mean
        return (n >= 2) & (mean > 0) & (work > mean * threshold) & (excess > floor) & \
            (excess > noise_k * np.sqrt(np.maximum(mean, 0)))


def _runs_at_least(flag: np.ndarray, min_len: int) -> np.ndarray:
    """Keep only runs of True at least ``min_len`` long."""
    if min_len <= 1 or not flag.any():
        return flag
    out = np.zeros_like(flag)
    i, n = 0, len(flag)
    while i < n:
        if not flag[i]:
            i += 1
            continue
        j = i
        while j < n and flag[j]:
            j += 1
        if j - i >= min_len:
            out[i:j] = True
        i = j
    return out


def format_hot_set(hot_set, hot_share: float = np.nan, cold_share: float = np.nan) -> str:
    """One window's hot set in words, ``hot_set.window_words``: ``"GPUs 1, 3, 5, 7 at 2.6x
    the rest's work (18 % each vs 7 %)"`` (``""`` for an empty set; the shares only when
    known)."""
    from tealeaves.classifier.hot_set import window_words

    return window_words(hot_set, hot_share, cold_share)


class ImbalanceDetector:
    """Flags imbalanced decode windows and names every hot GPU.

    Args:
        threshold: relative excess over the fair share that makes a GPU hot (1.15 = 15 %
            more work than the mean).
        floor: absolute excess over the fair share (percentage points of work) that makes a
            GPU hot: the noise of balanced windows.
        min_windows: shortest run of candidate windows that is flagged.
    """

    MIN_WINDOWS = (1, 2, 3)

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, min_windows: int = 1,
                 floor: float = DEFAULT_FLOOR, noise_k: float = DEFAULT_NOISE_K) -> None:
        self.threshold = threshold
        self.min_windows = min_windows
        self.floor = floor
        self.noise_k = noise_k

    def detect(self, features: pd.DataFrame, phase: pd.Series | np.ndarray,
               groups=None) -> pd.DataFrame:
        """Imbalance columns per window: the ``imbalance_terms`` (less ``top_gpu``,
        ``hot_top`` and ``work_mean``), ``imbalanced`` (bool), ``hot_gpu`` (the busiest hot
        GPU, NaN unless flagged), ``hot_set`` (``"1,3,5,7"``, ``""`` unless flagged), and
        ``persistence``.  ``groups``: the serving groups to judge within (None: one group of
        every GPU; ``imbalance_terms``); GPUs of different roles in groups of one each
        leave every window without a hot set."""
        terms = imbalance_terms(features, self.threshold, self.floor, self.noise_k, groups)
        decode = np.asarray(phase) == "decode"
        cand = decode & (terms["hot_set"].map(len).to_numpy() > 0)
        flag = _runs_at_least(cand, self.min_windows)
        sets = [s if f else () for s, f in zip(terms["hot_set"], flag, strict=True)]
        hot = np.where(flag, terms["hot_top"].to_numpy(), np.nan)
        persistence = np.full(len(flag), "", dtype=object)
        last_i, last = -(10**9), ()
        for i in np.flatnonzero(flag):
            if i - last_i <= 2 * self.min_windows:
                persistence[i] = "persistent" if sets[i] == last else "rotating"
            else:
                persistence[i] = "new"
            last_i, last = i, sets[i]
        out = terms.drop(columns=["top_gpu", "hot_top", "work_mean", "hot_set"])
        out["hot_share"] = np.where(flag, out["hot_share"], np.nan)
        out["cold_share"] = np.where(flag, out["cold_share"], np.nan)
        out["hot_gpu"] = hot
        out["hot_set"] = [",".join(str(g) for g in s) for s in sets]
        out["imbalanced"] = flag
        out["persistence"] = persistence
        return out

    def fit(self, features: pd.DataFrame, true_phase: np.ndarray, true_hot: np.ndarray,
            groups: np.ndarray | None = None) -> ImbalanceDetector:
        """Fit on labelled windows from the noise of balanced decode (true decode, no hot GPU:
        the true phase, so the choice does not depend on the phase model).

        - ``floor``: the ``NOISE_QUANTILE`` of max - mean work over balanced decode windows
          at low load (mean work under ``NOISE_LOAD`` %), at least ``MIN_FLOOR``;
        - ``noise_k``: the ``NOISE_QUANTILE`` of (max - mean) / sqrt(mean) over balanced
          decode windows of real but low work (``NOISE_K_LOADS``);
        - ``threshold``: the ``NOISE_QUANTILE`` of max / mean work over balanced decode
          windows at higher load, within ``THRESHOLD_RANGE``;

        (each the default with fewer than 20 such windows), so no skewed example is needed
        and a workload family never seen still gets a detector measured on balanced noise.
        ``min_windows`` then maximises the imbalance F1 where skewed windows are labelled
        (ties to the shorter run; 1 without any).  ``groups`` (one id per trace) keeps runs
        from spanning two traces."""
        decode = np.asarray(true_phase) == "decode"
        truth = decode & np.isfinite(np.asarray(true_hot, dtype=float))
        groups = np.zeros(len(features)) if groups is None else np.asarray(groups)
        work, _ = gpu_work(features)
        with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            wmean = np.nanmean(work, axis=1)
            wmax = np.nanmax(work, axis=1)
        balanced = decode & ~truth & (np.sum(np.isfinite(work), axis=1) >= 2) & \
            np.isfinite(wmax) & (wmean > 0)
        quiet = balanced & (wmean < NOISE_LOAD)
        busy = balanced & (wmean >= NOISE_LOAD)
        self.floor = (max(MIN_FLOOR, float(np.quantile((wmax - wmean)[quiet],
                                                       NOISE_QUANTILE)))
                      if quiet.sum() >= 20 else DEFAULT_FLOOR)
        real = balanced & (wmean >= NOISE_K_LOADS[0]) & (wmean < NOISE_K_LOADS[1])
        self.noise_k = (float(np.quantile(((wmax - wmean) / np.sqrt(wmean))[real],
                                          NOISE_QUANTILE))
                        if real.sum() >= 20 else DEFAULT_NOISE_K)
        lo, hi = THRESHOLD_RANGE
        self.threshold = (float(np.clip(np.quantile((wmax / wmean)[busy], NOISE_QUANTILE),
                                        lo, hi)) if busy.sum() >= 20 else DEFAULT_THRESHOLD)
        best = None
        cand = decode & _hot(work, self.threshold, self.floor, self.noise_k).any(axis=1)
        for mw in self.MIN_WINDOWS if truth.any() else (1,):
            flag = np.zeros_like(cand)
            for g in np.unique(groups):
                m = groups == g
                flag[m] = _runs_at_least(cand[m], mw)
            f1 = 2 * np.sum(flag & truth) / max(np.sum(flag) + np.sum(truth), 1)
            key = (round(float(f1), 9), -mw)
            best = key if best is None or key > best else best
        self.min_windows = -best[1]
        return self


def ceilings(features: pd.DataFrame, hot_set: list[int] | tuple[int, ...]) -> dict:
    """Which ceiling each hot GPU leans on, next to the other GPUs, over some windows.

    Args:
        features: ``WindowFeatures`` rows of the windows to explain (one or many).
        hot_set: the GPUs to explain.

    Returns:
        ``{gpu: {"pipe": "tensor"|"dram"|"pcie"|"nvlink"|"launch-bound"|"unknown",
        "level": fraction of that pipe's limit (0-1), "others": the mean of the GPUs outside
        the hot set on that pipe, "pipes": {pipe: level}}}``.  The pipe is the one this GPU uses most above
        the others (its level minus theirs, each a fraction of its limit); ``launch-bound``
        when every pipe is under ``LAUNCH_BOUND_PIPE`` while its kernels ran over half the
        time (``gpu_util``); ``unknown`` without tensor or DRAM readings (no GPM/DCGM
        profiling fields: PCIe and NVLink alone cannot tell).
    """
    gpus = [int(c[len("load_g"):]) for c in _gpu_columns(features, "load_g")]
    out: dict[int, dict] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        level = {p: np.nanmean(_matrix(features, f"{p}_g", gpus), axis=0) for p in PIPES}
        busy = np.nanmean(_matrix(features, "busy_g", gpus), axis=0) / 100.0
    for g in hot_set:
        if g not in gpus:
            continue
        i = gpus.index(g)
        # compared with the GPUs outside the set (the rest of the set leans the same way)
        others = [j for j, h in enumerate(gpus) if h not in hot_set] or \
            [j for j in range(len(gpus)) if j != i]
        mine = {p: float(level[p][i]) for p in PIPES}
        theirs = {p: float(np.nanmean(level[p][others])) if others and
                  np.isfinite(level[p][others]).any() else np.nan for p in PIPES}
        known = {p: v for p, v in mine.items() if np.isfinite(v)}
        if not (np.isfinite(mine["tensor"]) or np.isfinite(mine["dram"])):
            # without the profiling pipes no verdict: PCIe and NVLink alone would call any
            # busy GPU launch-bound
            out[g] = {"pipe": "unknown", "level": np.nan, "others": np.nan, "pipes": mine}
            continue
        if max(known.values()) < LAUNCH_BOUND_PIPE and np.isfinite(busy[i]) and busy[i] > 0.5:
            out[g] = {"pipe": "launch-bound", "level": float(busy[i]),
                      "others": float(np.nanmean(busy[others])) if others else np.nan,
                      "pipes": mine}
            continue
        excess = {p: v - (theirs[p] if np.isfinite(theirs[p]) else 0.0)
                  for p, v in known.items()}
        pipe = max(excess, key=lambda p: (excess[p], known[p]))
        out[g] = {"pipe": pipe, "level": known[pipe], "others": theirs[pipe], "pipes": mine}
    return out


def describe_ceiling(gpu: int, c: dict) -> str:
    """One line for a ``ceilings`` entry: ``"GPU 1: DRAM 62 % of its limit (others 21 %)"``."""
    names = {"tensor": "tensor pipes", "dram": "DRAM bandwidth", "pcie": "PCIe",
             "nvlink": "NVLink"}
    if c["pipe"] == "unknown":
        return f"{entity_name(gpu)}: no tensor or DRAM readings (no profiling counters), no verdict"
    others = f"others {c['others'] * 100:.0f} %" if np.isfinite(c["others"]) else "others n/a"
    if c["pipe"] == "launch-bound":
        return (f"{entity_name(gpu)}: launch-bound (kernels ran {c['level'] * 100:.0f} % of the time, "
                f"every pipe under {LAUNCH_BOUND_PIPE:.0%}; {others})")
    return f"{entity_name(gpu)}: {names[c['pipe']]} {c['level'] * 100:.0f} % of its limit ({others})"


def hot_set_of(value) -> tuple[int, ...]:
    """The GPUs of one ``hot_set`` cell (``"1,3,5,7"``; ``""``, None or NaN: none), as a
    tuple of ints in the cell's order."""
    if isinstance(value, list | tuple | np.ndarray):
        return tuple(int(g) for g in value)
    if value is None or pd.isna(value):
        return ()
    return tuple(int(g) for g in str(value).split(",") if g.strip())


def persistence_by_gpu(windows: pd.DataFrame) -> dict[int, int]:
    """Flagged windows in which each GPU was hot (from ``hot_set``), most first."""
    counts: dict[int, int] = {}
    if "hot_set" not in windows or not len(windows):
        return counts
    for s in windows.loc[windows["imbalanced"].astype(bool), "hot_set"]:
        for g in hot_set_of(s):
            counts[g] = counts.get(g, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))
