"""MoE expert imbalance across GPUs, per decode window.

Terms (SGLang's and vLLM's EPLB use ``balancedness`` = mean/max load over ranks):

- ``balancedness`` = mean / max of the GPUs' load (``features.gpu_load``: ``sm_active``, else
  ``gpu_util``); 1.0 = perfectly balanced.
- ``imbalance_ratio`` = max / mean load = 1 / balancedness.
- ``straggler_tax`` = 1 - mean / max of the GPUs' busy time (``gpu_util``): the share of
  GPU-time spent waiting for the slowest rank at the per-step barrier.
- ``hot_gpu``: the GPU holding the max load; ``persistence``: ``persistent`` when the previous
  flagged window (at most ``2 x min_windows`` windows back) had the same hot GPU, ``rotating``
  when it had another, ``new`` otherwise.

A decode window is flagged ``imbalanced`` when its ``imbalance_ratio`` exceeds ``threshold``
and it sits in a run of at least ``min_windows`` such consecutive windows; both are chosen on
the training split (``ImbalanceDetector.fit``).  With one GPU, or a mean load under
``min_load`` %, the ratios are NaN and nothing is flagged.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd


def _gpu_columns(features: pd.DataFrame, prefix: str) -> list[str]:
    return [c for c in features.columns if c.startswith(prefix) and c[len(prefix):].isdigit()]


def imbalance_terms(features: pd.DataFrame, min_load: float = 10.0) -> pd.DataFrame:
    """``imbalance_ratio``, ``balancedness``, ``straggler_tax`` and ``top_gpu`` per window.

    Args:
        features: ``WindowFeatures`` rows (``load_g<i>`` and ``busy_g<i>`` columns, %).
        min_load: mean load (%) under which the ratios are NaN (ratios of idle GPUs are noise).
    """
    load = features[_gpu_columns(features, "load_g")].to_numpy(dtype=float)
    busy_cols = _gpu_columns(features, "busy_g")
    busy = features[busy_cols].to_numpy(dtype=float) if busy_cols else np.full_like(load, np.nan)
    n = np.sum(np.isfinite(load), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: NaN is the answer
        lmean = np.nanmean(load, axis=1)
        lmax = np.nanmax(load, axis=1)
        bmean = np.nanmean(busy, axis=1)
        bmax = np.nanmax(busy, axis=1)
        ok = (n >= 2) & (lmean >= min_load)
        ratio = np.where(ok, lmax / lmean, np.nan)
        tax = np.where(ok & (bmax > 0), 1.0 - bmean / bmax, np.nan)
    top = np.full(len(load), np.nan)
    has = np.isfinite(load).any(axis=1)
    if has.any():
        top[has] = np.nanargmax(np.where(np.isfinite(load[has]), load[has], -np.inf), axis=1)
    gpu_ids = np.array([int(c[len("load_g"):]) for c in _gpu_columns(features, "load_g")])
    top_ids = np.where(np.isfinite(top), gpu_ids[np.nan_to_num(top).astype(int)]
                       if len(gpu_ids) else np.nan, np.nan)
    return pd.DataFrame({"imbalance_ratio": ratio, "balancedness": 1.0 / ratio,
                         "straggler_tax": tax, "top_gpu": top_ids}, index=features.index)


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


class ImbalanceDetector:
    """Flags imbalanced decode windows and names the hot GPU.

    Args:
        threshold: ``imbalance_ratio`` above which a decode window is a candidate.
        min_windows: shortest run of candidate windows that is flagged.
        min_load: mean load (%) under which nothing is flagged.
    """

    THRESHOLDS = tuple(np.round(np.arange(1.04, 1.41, 0.02), 2))
    MIN_WINDOWS = (1, 2, 3)

    def __init__(self, threshold: float = 1.15, min_windows: int = 1,
                 min_load: float = 10.0) -> None:
        self.threshold = threshold
        self.min_windows = min_windows
        self.min_load = min_load

    def detect(self, features: pd.DataFrame, phase: pd.Series | np.ndarray) -> pd.DataFrame:
        """Imbalance columns per window: the ``imbalance_terms``, ``imbalanced`` (bool),
        ``hot_gpu`` (NaN unless flagged) and ``persistence``."""
        terms = imbalance_terms(features, self.min_load)
        decode = np.asarray(phase) == "decode"
        cand = decode & (terms["imbalance_ratio"].to_numpy() > self.threshold)
        flag = _runs_at_least(cand, self.min_windows)
        hot = np.where(flag, terms["top_gpu"].to_numpy(), np.nan)
        persistence = np.full(len(flag), "", dtype=object)
        last_i, last_hot = -(10**9), np.nan
        for i in np.flatnonzero(flag):
            if i - last_i <= 2 * self.min_windows:
                persistence[i] = "persistent" if hot[i] == last_hot else "rotating"
            else:
                persistence[i] = "new"
            last_i, last_hot = i, hot[i]
        out = terms.drop(columns="top_gpu")
        out["hot_gpu"] = hot
        out["imbalanced"] = flag
        out["persistence"] = persistence
        return out

    def fit(self, features: pd.DataFrame, true_phase: np.ndarray, true_hot: np.ndarray,
            groups: np.ndarray | None = None) -> ImbalanceDetector:
        """Choose ``threshold`` and ``min_windows`` maximising the imbalance F1 on labelled
        windows (true decode with a finite ``true_hot`` = imbalanced), using the true phase so
        the choice does not depend on the phase model.  ``groups`` (one id per trace) keeps
        runs from spanning two traces."""
        terms = imbalance_terms(features, self.min_load)
        ratio = terms["imbalance_ratio"].to_numpy()
        decode = np.asarray(true_phase) == "decode"
        truth = decode & np.isfinite(np.asarray(true_hot, dtype=float))
        groups = np.zeros(len(ratio)) if groups is None else np.asarray(groups)
        best = (-1.0, self.threshold, self.min_windows)
        for thr in self.THRESHOLDS:
            cand = decode & (ratio > thr)
            for mw in self.MIN_WINDOWS:
                flag = np.zeros_like(cand)
                for g in np.unique(groups):
                    m = groups == g
                    flag[m] = _runs_at_least(cand[m], mw)
                tp = np.sum(flag & truth)
                f1 = 2 * tp / max(np.sum(flag) + np.sum(truth), 1)
                if f1 > best[0] + 1e-12:
                    best = (f1, float(thr), int(mw))
        _, self.threshold, self.min_windows = best
        return self
