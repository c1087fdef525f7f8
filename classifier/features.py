"""Window features: per-GPU levels normalised by the device's limits, and cross-GPU dispersion.

``WindowFeatures`` follows scikit-learn's transformer contract (configuration in ``__init__``,
``fit`` learns nothing yet, ``transform`` is pure), so the same windows feed evaluation and the
live labeller, and a trained model can replace the rules later.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from tealeaves.classifier.windows import DEFAULT_WINDOW_S, RATE_METRICS, per_gpu_means
from tealeaves.data.schema import peers

#: Metrics in percent, used as-is (0-100).
PERCENT_METRICS = ("gpu_util", "mem_copy_util", "sm_active", "sm_occupancy", "tensor_active",
                   "dram_active")

#: PCIe peak per direction, B/s: gen5 x16, 32 GT/s x 16 lanes x 128/130 / 8 (PCIe 5.0 base
#: spec); the H200s here report gen 5 x16 (``kernels_bench/results/h200x2_machine.txt``).
PCIE_PEAK_BPS = 32e9 * 16 * 128 / 130 / 8
#: NVLink peak per direction, B/s: 18 NVLink-4 links x 25 GB/s (H100/H200 SXM datasheet, 900
#: GB/s both directions).
NVLINK_PEAK_BPS = 450e9

#: Metrics the trained model sees, each as a fraction of the device's limit so a model fitted
#: on H200s carries to other GPUs.  ``mem_used_bytes`` is left out: it says how big the model
#: and cache are, not what phase runs.
MODEL_METRICS = ("gpu_util", "mem_copy_util", "sm_active", "sm_occupancy", "tensor_active",
                 "dram_active", "pcie_tx", "pcie_rx", "nvlink_tx", "nvlink_rx", "power",
                 "sm_clock")
#: Metrics whose spread across GPUs is a model feature (max/mean and coefficient of variation).
DISPERSION_METRICS = ("sm_active", "tensor_active", "dram_active", "gpu_util", "power")


def _feature_columns() -> tuple[str, ...]:
    cols = []
    for m in MODEL_METRICS:
        cols += [f"f_{m}_{k}" for k in ("mean", "max", "min", "std", "slope")]
    for m in DISPERSION_METRICS:
        cols += [f"f_{m}_maxmean", f"f_{m}_cv"]
    cols.append("f_compute_share")
    return tuple(cols)


#: Every model-ready feature ``WindowFeatures`` computes, in order (its output ends with them).
FEATURE_COLUMNS: tuple[str, ...] = _feature_columns()
#: The pipes that do work, and whether the GPU ran kernels: the metrics the phase model reads.
#: PCIe, NVLink and NVML's memory-copy share depend on the host, the topology and how a server
#: stages its data more than on the phase, and the SM clock and the power's spread on the
#: board; held out by family (``tealeaves evaluate --corpus``, 2026-12-01) the model without
#: them called a verify-attention kernel it never saw decode (macro-F1 0.82 for that family,
#: 0.49 with them) and scored 0.933 pooled against 0.927.
MODEL_PIPES = ("sm_active", "sm_occupancy", "tensor_active", "dram_active", "gpu_util")
#: Columns of the model's feature matrix, in order.
MODEL_COLUMNS: tuple[str, ...] = tuple(
    c for c in FEATURE_COLUMNS
    if any(c.startswith(f"f_{m}_") for m in MODEL_PIPES) or c == "f_compute_share"
) + ("f_power_mean", "f_power_std", "f_power_slope")


def gpu_load(per_gpu: pd.DataFrame) -> pd.Series:
    """Load of each GPU in each window, in %: ``sm_active`` (GPM), else ``gr_engine_active``
    (DCGM's GRACT), else ``gpu_util`` (NVML).

    ``sm_active`` measures how many SMs are busy; ``gpu_util`` only whether any kernel ran,
    so it is the fallback for GPUs or files without GPM/DCGM profiling fields.  GRACT stands
    in before it: DCGM gives it per MIG instance, where ``gpu_util`` is N/A.
    """
    load = per_gpu["sm_active"]
    if "gr_engine_active" in per_gpu:
        load = load.fillna(per_gpu["gr_engine_active"])
    return load.fillna(per_gpu["gpu_util"])


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
        ``hot_gpu`` (index of the max load; NaN when no load is known); ``n_gpus``;
        ``n_<metric>`` for ``windows.RATE_METRICS`` (readings per GPU in the window, mean
        over GPUs);
        ``busy_g<i>`` (``gpu_util`` of GPU i, the share of time a kernel ran);
        ``tensor_g<i>``, ``dram_g<i>``, ``pcie_g<i>``, ``nvlink_g<i>``, ``sm_g<i>`` (GPU i's
        pipe activity as a fraction of its limit: what ``imbalance`` weighs and explains);
        then the model's ``FEATURE_COLUMNS``: for each of ``MODEL_METRICS`` as a fraction of
        its limit (percent / 100; power / power limit; SM clock / max clock; PCIe and NVLink
        bytes over ``PCIE_PEAK_BPS`` / ``NVLINK_PEAK_BPS``), the across-GPU ``mean``, ``max``
        and ``min`` of the per-GPU window means, the within-window standard deviation
        (``std``, mean over GPUs) and the change from the previous window (``slope``, NaN
        after a gap); ``f_compute_share`` (mean tensor activity over mean tensor + DRAM
        activity); and for ``DISPERSION_METRICS`` the across-GPU ``maxmean`` (max/mean)
        and ``cv`` (std/mean).  A metric the source lacks leaves its features NaN.
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
        every = per_gpu_means(samples, self.window_s, spread=True)
        if every.empty:
            return pd.DataFrame()
        index = pd.Index(every.index.get_level_values("start").unique(), name="start")
        # across-GPU statistics, load and imbalance over the entities compared (a whole GPU
        # next to its own MIG instances is their sum: left out); per-GPU columns for all
        ids = every.index.get_level_values("gpu")
        per_gpu = every[ids.isin(peers(pd.unique(ids)))]
        by_window = per_gpu[list(PERCENT_METRICS) + ["power_w"]].groupby(level="start")
        stats = {k: f.reindex(index) for k, f in
                 (("mean", by_window.mean()), ("max", by_window.max()), ("min", by_window.min()))}
        cols: dict[str, np.ndarray] = {}
        for m in PERCENT_METRICS:
            for k in ("mean", "max", "min"):
                cols[f"{m}_{k}"] = stats[k][m].to_numpy(dtype=float)
        gpus = per_gpu.index.get_level_values("gpu")
        power_lim, clock_max = self._limits(pd.Index(sorted(set(gpus))))
        model = self._model_features(index, per_gpu, power_lim, clock_max)
        # the same fractions the model reads (power / limit, SM clock / max, mean over GPUs)
        cols["power_frac_mean"] = model["f_power_mean"].to_numpy()
        cols["sm_clock_frac_mean"] = model["f_sm_clock_mean"].to_numpy()
        cols["power_w_mean"] = stats["mean"]["power_w"].to_numpy(dtype=float)

        every_load = gpu_load(every).unstack("gpu").reindex(index)
        for g in every_load.columns:
            cols[f"load_g{int(g)}"] = every_load[g].to_numpy(dtype=float)
        load = every_load[[g for g in every_load.columns if g in set(peers(every_load.columns))]]
        L = load.to_numpy(dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows stay NaN
            lmean = np.nanmean(L, axis=1)
            lmax = np.nanmax(L, axis=1)
            pos = np.where(lmean > 0, lmean, np.nan)
            cols["load_mean"] = lmean
            cols["load_max"] = lmax
            cols["load_cv"] = np.nanstd(L, axis=1) / pos
            cols["imbalance_ratio"] = lmax / pos
        has = np.isfinite(L).any(axis=1)
        hot = np.full(len(L), np.nan)
        if has.any():
            top = np.nanargmax(np.where(np.isfinite(L[has]), L[has], -np.inf), axis=1)
            hot[has] = np.asarray(load.columns, dtype=float)[top]
        cols["hot_gpu"] = hot
        cols["n_gpus"] = np.isfinite(L).sum(axis=1)
        # readings per GPU in the window (the source's rate: what a verdict stood on)
        n_by = per_gpu[[f"{m}_n" for m in RATE_METRICS]].groupby(level="start").mean() \
            .reindex(index)
        for m in RATE_METRICS:
            cols[f"n_{m}"] = n_by[f"{m}_n"].to_numpy(dtype=float)
        busy = every["gpu_util"].unstack("gpu").reindex(index)
        B = busy.to_numpy(dtype=float)
        for n, g in enumerate(busy.columns):
            cols[f"busy_g{int(g)}"] = B[:, n]
        cols.update(self._pipes(index, every))
        out = pd.DataFrame(cols, index=index)
        return pd.concat([out, model], axis=1)

    @staticmethod
    def _pipes(index: pd.Index, per_gpu: pd.DataFrame) -> dict[str, np.ndarray]:
        """Per-GPU pipe activity, each a fraction of its limit (0-1): ``tensor_g<i>``,
        ``dram_g<i>``, ``pcie_g<i>`` (the busier direction over ``PCIE_PEAK_BPS``),
        ``nvlink_g<i>`` (over ``NVLINK_PEAK_BPS``), ``sm_g<i>`` (``sm_active``)."""
        frame = pd.DataFrame({
            "tensor": per_gpu["tensor_active"] / 100.0,
            "dram": per_gpu["dram_active"] / 100.0,
            "pcie": np.fmax(per_gpu["pcie_tx_bytes_per_s"],
                            per_gpu["pcie_rx_bytes_per_s"]) / PCIE_PEAK_BPS,
            "nvlink": np.fmax(per_gpu["nvlink_tx_bytes_per_s"],
                              per_gpu["nvlink_rx_bytes_per_s"]) / NVLINK_PEAK_BPS,
            "sm": per_gpu["sm_active"] / 100.0,
        }, index=per_gpu.index)
        wide = frame.unstack("gpu").reindex(index)
        return {f"{pipe}_g{int(g)}": wide[(pipe, g)].to_numpy(dtype=float)
                for pipe, g in wide.columns}

    def _model_features(self, index: pd.Index, per_gpu: pd.DataFrame,
                        power_lim: pd.Series, clock_max: pd.Series) -> pd.DataFrame:
        gpus = per_gpu.index.get_level_values("gpu")
        scale = {m: 100.0 for m in PERCENT_METRICS}
        scale.update({"pcie_tx": PCIE_PEAK_BPS, "pcie_rx": PCIE_PEAK_BPS,
                      "nvlink_tx": NVLINK_PEAK_BPS, "nvlink_rx": NVLINK_PEAK_BPS})
        source = {m: m for m in PERCENT_METRICS}
        source.update({"pcie_tx": "pcie_tx_bytes_per_s", "pcie_rx": "pcie_rx_bytes_per_s",
                       "nvlink_tx": "nvlink_tx_bytes_per_s",
                       "nvlink_rx": "nvlink_rx_bytes_per_s", "power": "power_w",
                       "sm_clock": "sm_clock_mhz"})
        per_gpu_limit = {"power": power_lim.reindex(gpus).to_numpy(),
                         "sm_clock": clock_max.reindex(gpus).to_numpy()}
        starts = index.to_numpy(dtype=float)
        prev_ok = np.r_[False, np.isclose(np.diff(starts), self.window_s)]
        # One frame of per-GPU levels and spreads, each as a fraction of its limit; then one
        # groupby per statistic over every metric at once (the live path runs this each tick).
        denom = np.column_stack([
            np.broadcast_to(per_gpu_limit.get(m, scale.get(m)), len(per_gpu)).astype(float)
            for m in MODEL_METRICS])
        level = pd.DataFrame(per_gpu[[source[m] for m in MODEL_METRICS]].to_numpy(dtype=float)
                             / denom, index=per_gpu.index, columns=list(MODEL_METRICS))
        spread = pd.DataFrame(
            per_gpu[[f"{source[m]}_std" for m in MODEL_METRICS]].to_numpy(dtype=float) / denom,
            index=per_gpu.index, columns=list(MODEL_METRICS))
        g = level.groupby(level="start")
        mean, mx, mn = (x.reindex(index) for x in (g.mean(), g.max(), g.min()))
        sd = g.std(ddof=0).reindex(index)
        within = spread.groupby(level="start").mean().reindex(index)
        cols: dict[str, np.ndarray] = {}
        for m in MODEL_METRICS:
            mu = mean[m].to_numpy(dtype=float)
            cols[f"f_{m}_mean"] = mu
            cols[f"f_{m}_max"] = mx[m].to_numpy(dtype=float)
            cols[f"f_{m}_min"] = mn[m].to_numpy(dtype=float)
            cols[f"f_{m}_std"] = within[m].to_numpy(dtype=float)
            cols[f"f_{m}_slope"] = np.where(prev_ok, np.r_[np.nan, np.diff(mu)], np.nan)
            if m in DISPERSION_METRICS:
                pos = np.where(mu > 0.02, mu, np.nan)  # ratios of near-zero readings are noise
                cols[f"f_{m}_maxmean"] = cols[f"f_{m}_max"] / pos
                cols[f"f_{m}_cv"] = sd[m].to_numpy(dtype=float) / pos
        # Which of the two roofline ceilings the window leans on (Williams, Waterman &
        # Patterson 2009): tensor-pipe activity over tensor + DRAM activity, NaN when both are
        # under 2 % together.  Prefill's GEMMs sit near 0.8, decode's GEMVs near 0.05; a
        # split-KV verify kernel near 0.23 (docs/verify-attention.md).
        busy = cols["f_tensor_active_mean"] + cols["f_dram_active_mean"]
        cols["f_compute_share"] = cols["f_tensor_active_mean"] / np.where(busy > 0.02, busy,
                                                                          np.nan)
        return pd.DataFrame(cols, index=index)[list(FEATURE_COLUMNS)]

    def fit_transform(self, samples: pd.DataFrame, y=None) -> pd.DataFrame:
        return self.fit(samples).transform(samples)
