"""Fixed windows over a sample frame, and per-window per-GPU means.

Windows are aligned to multiples of ``window_s`` in epoch time (``floor(t / w) * w``), so the
same instant falls in the same window whether it comes from a live store or a file, and a live
labeller can re-cut only the newest windows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tealeaves.data.schema import DEFAULT_WINDOW_S, METRIC_NAMES

#: Metrics whose readings per window are counted (the source's rate, ``shares.inputs_of``).
RATE_METRICS = ("sm_active", "gpu_util", "power_w")


def window_start(timestamps: np.ndarray | pd.Series, window_s: float) -> np.ndarray:
    """Start time (epoch s) of the window holding each timestamp."""
    t = np.asarray(timestamps, dtype=float)
    return np.floor(t / window_s) * window_s


def per_gpu_means(samples: pd.DataFrame, window_s: float = DEFAULT_WINDOW_S,
                  spread: bool = False) -> pd.DataFrame:
    """NaN-aware mean of every metric per (window, GPU).

    Args:
        samples: a frame in the sample schema.
        window_s: window length in seconds (> 0).

    Returns:
        Frame indexed by (``start``, ``gpu``) with one column per metric and ``n`` (samples
        in the window for that GPU).  A metric with no reading in a window is NaN.  With
        ``spread``, also ``<metric>_std``: the population standard deviation of the window's
        readings (NaN under two readings), and ``<metric>_n`` for ``RATE_METRICS``: how many
        readings the window holds.

    Raises:
        ValueError: ``window_s`` is not positive.
    """
    if not window_s > 0:
        raise ValueError(f"window_s must be positive, got {window_s}")
    if samples.empty:
        idx = pd.MultiIndex.from_arrays([[], []], names=["start", "gpu"])
        return pd.DataFrame(columns=[*METRIC_NAMES, "n"], index=idx, dtype=float)
    frame = samples.reindex(columns=["gpu", *METRIC_NAMES])  # absent metrics: NaN
    frame["start"] = np.round(window_start(samples["timestamp"], window_s), 6)
    grouped = frame.groupby(["start", "gpu"], sort=True)
    means = grouped[list(METRIC_NAMES)].mean()
    means["n"] = grouped.size()
    if spread:
        std = grouped[list(METRIC_NAMES)].std(ddof=0)
        counts = grouped[list(METRIC_NAMES)].count()
        std = std.where(counts >= 2)
        means = means.join(std.add_suffix("_std"))
        means = means.join(counts[list(RATE_METRICS)].add_suffix("_n"))
    return means
