"""Window features: per-GPU levels normalised by the device's limits, and cross-GPU dispersion.

``WindowFeatures`` follows scikit-learn's transformer contract (configuration in ``__init__``,
``fit`` learns nothing yet, ``transform`` is pure), so the same windows feed evaluation and the
live labeller, and a trained model can replace the rules later.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .windows import DEFAULT_WINDOW_S, per_gpu_means

#: Metrics in percent, used as-is (0-100).
PERCENT_METRICS = ("gpu_util", "mem_copy_util", "sm_active", "sm_occupancy", "tensor_active",
                   "dram_active")


def gpu_load(per_gpu: pd.DataFrame) -> pd.Series:
    """Load of each GPU in each window, in %: ``sm_active`` (GPM), else ``gpu_util`` (NVML).

    ``sm_active`` measures how many SMs are busy; ``gpu_util`` only whether any kernel ran,
    so it is the fallback for GPUs or files without GPM/DCGM profiling fields.
    """
    return per_gpu["sm_active"].fillna(per_gpu["gpu_util"])


class WindowFeatures:
    """Turns a sample frame into one feature row per window.

    Args:
        window_s: window length, seconds.
        devices: device rows (``power_limit_w``, ``max_sm_clock_mhz`` per GPU) for
            normalisation; missing limits leave the normalised features NaN.

    Output columns (one row per window, index ``start``):
        ``<metric>_mean``, ``<metric>_max``, ``<metric>_min`` across GPUs for every percent
        metric; ``power_frac_mean`` (power / power limit), ``sm_clock_frac_mean``;
        ``load_g<i>`` (``gpu_load`` of GPU i); ``load_mean``, ``load_max``, ``load_cv``
        (coefficient of variation); ``imbalance_ratio`` (max/mean load, 1.0 = balanced);
        ``hot_gpu`` (index of the max load; NaN when no load is known); ``n_gpus``.
    """

    def __init__(self, window_s: float = DEFAULT_WINDOW_S,
                 devices: pd.DataFrame | None = None) -> None:
        self.window_s = window_s
        self.devices = devices

    def fit(self, samples: pd.DataFrame, y=None) -> WindowFeatures:
        """Nothing to learn; returns self (scikit-learn contract)."""
        return self

    def _limits(self, gpus: pd.Index) -> tuple[pd.Series, pd.Series]:
        nan = pd.Series(np.nan, index=gpus)
        if self.devices is None or self.devices.empty:
            return nan, nan
        dev = self.devices.drop_duplicates("gpu")
        dev = dev.set_index(dev["gpu"].astype(int))
        power = dev.get("power_limit_w", nan).reindex(gpus).astype(float)
        clock = dev.get("max_sm_clock_mhz", nan).reindex(gpus).astype(float)
        return power, clock

    def transform(self, samples: pd.DataFrame) -> pd.DataFrame:
        """Feature rows, one per window holding at least one sample."""
        per_gpu = per_gpu_means(samples, self.window_s)
        if per_gpu.empty:
            return pd.DataFrame()
        out = pd.DataFrame(index=per_gpu.index.get_level_values("start").unique())
        out.index.name = "start"
        by_window = per_gpu.groupby(level="start")
        for m in PERCENT_METRICS:
            g = by_window[m]
            out[f"{m}_mean"] = g.mean()
            out[f"{m}_max"] = g.max()
            out[f"{m}_min"] = g.min()
        gpus = per_gpu.index.get_level_values("gpu")
        power_lim, clock_max = self._limits(pd.Index(sorted(set(gpus))))
        frac = per_gpu["power_w"] / power_lim.reindex(gpus).to_numpy()
        out["power_frac_mean"] = frac.groupby(level="start").mean()
        cfrac = per_gpu["sm_clock_mhz"] / clock_max.reindex(gpus).to_numpy()
        out["sm_clock_frac_mean"] = cfrac.groupby(level="start").mean()
        out["power_w_mean"] = by_window["power_w"].mean()

        load = gpu_load(per_gpu).unstack("gpu")
        for g in load.columns:
            out[f"load_g{int(g)}"] = load[g]
        lmean = load.mean(axis=1)
        lmax = load.max(axis=1)
        out["load_mean"] = lmean
        out["load_max"] = lmax
        out["load_cv"] = load.std(axis=1, ddof=0) / lmean.where(lmean > 0)
        out["imbalance_ratio"] = lmax / lmean.where(lmean > 0)
        has = load.notna().any(axis=1)
        hot = pd.Series(np.nan, index=load.index)
        hot[has] = load[has].idxmax(axis=1).astype(float)
        out["hot_gpu"] = hot
        out["n_gpus"] = load.notna().sum(axis=1)
        return out

    def fit_transform(self, samples: pd.DataFrame, y=None) -> pd.DataFrame:
        return self.fit(samples).transform(samples)
