"""The v0 phase labeller (rules) and the decode imbalance flag.

Rules, read off the bundled two-GPU H200 traces (``docs/classifier_v0_rules.md`` has the per-phase
means they come from):

- **idle**: the busiest GPU's load (``sm_active``, else ``gpu_util``) under ``idle_load`` %.
  Idle H200s read 1-3 %; the lightest decode window read 28 %.
- **prefill**: compute-bound. With GPM: ``tensor_active`` above ``dram_active`` (prefill
  76 % tensor / 15 % DRAM; decode 2-5 % tensor / 29-80 % DRAM). Without GPM (nvidia-smi
  files): the memory-copy share of busy time under ``copy_ratio`` (prefill 0.23, decode 0.95).
- **decode**: everything else that is busy (memory-bound verify and expert GEMVs).

Imbalance (SGLang / vLLM EPLB terms): ``balancedness`` = mean/max load, ``imbalance_ratio`` =
max/mean, ``straggler_tax`` = 1 - mean/max (the share of GPU-time spent waiting for the
slowest rank); a decode window is flagged ``imbalanced`` when ``imbalance_ratio`` exceeds
``imbalance_threshold`` and the hot GPU is the one holding the max.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

PHASE_ORDER = ("idle", "prefill", "decode")


class RulePhaseLabeller:
    """Rules over ``WindowFeatures`` rows; scikit-learn style (``fit`` / ``predict``).

    Args:
        idle_load: busiest-GPU load (%) under which a window is idle.
        copy_ratio: without GPM, ``mem_copy_util / gpu_util`` under which a busy window is
            prefill.
        imbalance_threshold: ``imbalance_ratio`` above which a decode window is flagged.
        min_load: windows whose mean load is under this (%) are never flagged (ratios of
            near-zero loads are noise).
    """

    def __init__(self, idle_load: float = 10.0, copy_ratio: float = 0.5,
                 imbalance_threshold: float = 1.15, min_load: float = 10.0) -> None:
        self.idle_load = idle_load
        self.copy_ratio = copy_ratio
        self.imbalance_threshold = imbalance_threshold
        self.min_load = min_load

    def fit(self, features: pd.DataFrame, y=None) -> RulePhaseLabeller:
        """Rules learn nothing; returns self."""
        return self

    def predict_proba(self, features: pd.DataFrame) -> pd.DataFrame:
        """Scores in [0, 1] per phase (columns ``PHASE_ORDER``), rows summing to 1.

        The score is a logistic of each rule's margin, so a window far from every threshold
        gets a confidence near 1 and one on a threshold near 0.5.
        """
        f = features
        busy = f["load_max"].to_numpy(dtype=float)
        p_busy = _sigmoid((busy - self.idle_load) / 3.0)
        tensor = f["tensor_active_mean"].to_numpy(dtype=float)
        dram = f["dram_active_mean"].to_numpy(dtype=float)
        gpm_margin = (tensor - dram) / 5.0
        util = f["gpu_util_mean"].to_numpy(dtype=float)
        copy = f["mem_copy_util_mean"].to_numpy(dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = copy / np.where(util > 0, util, np.nan)
        nvml_margin = (self.copy_ratio - ratio) / 0.1
        margin = np.where(np.isfinite(gpm_margin), gpm_margin, nvml_margin)
        p_prefill_given_busy = _sigmoid(np.nan_to_num(margin, nan=-np.inf))
        p_busy = np.nan_to_num(p_busy, nan=0.0)
        out = pd.DataFrame({
            "idle": 1.0 - p_busy,
            "prefill": p_busy * p_prefill_given_busy,
            "decode": p_busy * (1.0 - p_prefill_given_busy),
        }, index=f.index)
        return out

    def predict(self, features: pd.DataFrame) -> pd.Series:
        """Phase per window (``idle`` / ``prefill`` / ``decode``)."""
        proba = self.predict_proba(features)
        return proba.idxmax(axis=1).rename("phase")

    def imbalance(self, features: pd.DataFrame, phase: pd.Series) -> pd.DataFrame:
        """Imbalance terms per window.

        Returns:
            Frame with ``imbalance_ratio``, ``balancedness``, ``straggler_tax``, ``hot_gpu``
            (NaN unless flagged) and ``imbalanced`` (bool: decode, enough load, ratio over
            the threshold).  The ratios are NaN where the mean load is under ``min_load``.
        """
        from .imbalance import imbalance_terms

        # The same terms as the trained model's detector (``imbalance.imbalance_terms``): NaN
        # (unknown) with one GPU or under ``min_load``, the straggler tax from busy time.
        terms = imbalance_terms(features, self.min_load)
        ratio = terms["imbalance_ratio"]
        flagged = ((phase == "decode") & (ratio > self.imbalance_threshold)).fillna(False)
        return pd.DataFrame({
            "imbalance_ratio": ratio,
            "balancedness": terms["balancedness"],
            "straggler_tax": terms["straggler_tax"],
            "hot_gpu": terms["top_gpu"].where(flagged),
            "imbalanced": flagged.astype(bool),
        }, index=features.index)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))
