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
slowest rank); a decode window is flagged ``imbalanced`` when some GPU's work exceeds the fair
share by ``imbalance_threshold`` and ``imbalance_floor`` (``imbalance.py``: every such GPU is in
the hot set).
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
        imbalance_floor: a GPU is hot only when its work exceeds the mean by this many
            percentage points too (``imbalance.ImbalanceDetector``'s ``floor``).
        idle_power_frac: without a load reading, the power / power-limit fraction around
            which a window turns busy (idle H200s draw 0.10-0.12 of their 700-W limit in the
            bundled traces, the lightest decode windows 0.2 and up).
    """

    def __init__(self, idle_load: float = 10.0, copy_ratio: float = 0.5,
                 imbalance_threshold: float = 1.15, imbalance_floor: float = 1.0,
                 idle_power_frac: float = 0.2) -> None:
        self.idle_load = idle_load
        self.idle_power_frac = idle_power_frac
        self.copy_ratio = copy_ratio
        self.imbalance_threshold = imbalance_threshold
        self.imbalance_floor = imbalance_floor

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
        # No load reading (a power-only source): the power fraction over the idle floor
        # where the limit is known, held to 0.15-0.85 (power alone cannot tell a light
        # decode from a warm idle GPU), else 0.5: a missing load is never read as 0.
        pf = f["power_frac_mean"].to_numpy(dtype=float) if "power_frac_mean" in f \
            else np.full(len(f), np.nan)
        by_power = np.clip(_sigmoid((pf - self.idle_power_frac) / 0.03), 0.15, 0.85)
        p_busy = np.where(np.isfinite(p_busy), p_busy,
                          np.where(np.isfinite(by_power), by_power, 0.5))
        tensor = f["tensor_active_mean"].to_numpy(dtype=float)
        dram = f["dram_active_mean"].to_numpy(dtype=float)
        gpm_margin = (tensor - dram) / 5.0
        util = f["gpu_util_mean"].to_numpy(dtype=float)
        copy = f["mem_copy_util_mean"].to_numpy(dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = copy / np.where(util > 0, util, np.nan)
        nvml_margin = (self.copy_ratio - ratio) / 0.1
        margin = np.where(np.isfinite(gpm_margin), gpm_margin, nvml_margin)
        # no reading to tell the two apart: even odds, not decode by default
        p_prefill_given_busy = np.where(np.isfinite(margin), _sigmoid(margin), 0.5)
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

    def imbalance(self, features: pd.DataFrame, phase: pd.Series,
                  groups=None) -> pd.DataFrame:
        """Imbalance columns per window: ``imbalance.ImbalanceDetector.detect`` with this
        labeller's threshold and floor and no minimum run (the same terms as the trained
        model's detector: NaN with one GPU, the straggler tax from busy time), judged within
        ``groups`` (serving groups of GPU ids; None: one group)."""
        from tealeaves.classifier.imbalance import ImbalanceDetector

        det = ImbalanceDetector(self.imbalance_threshold, 1, self.imbalance_floor)
        return det.detect(features, np.asarray(phase), groups)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))
