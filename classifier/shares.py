"""Phase shares: each window's share of time in idle, prefill and decode, calibrated.

A 0.5-s window of a real server often holds more than one phase (a 30-300 ms prefill between
decode steps, an idle gap shorter than the window, a packed mixed step), so a window carries
three shares that sum to 1 instead of one label, and a verdict names a phase only where its
share is at least ``NAMED_SHARE`` (otherwise it says "mixed: decode 55 % · prefill 30 %").

**Truth** (``window_shares``): the share of the window's labelled time that each phase's label
intervals cover (engine truth per step: the token majority of a packed step; a gap of 0.05 s
or more is idle; ``docs/measurement.md``, "Terms").

**Model** (``ShareModel``): gradient boosting over the window features trained on soft labels:
each window enters three times, once per phase, weighted by its true share, with no class
weighting.  The cross-entropy minimiser over soft targets is the conditional mean of the
target, so ``predict`` estimates E[share | features]: calibrated by construction on the
training distribution (checked held out by ``calibration_error``).  Trained on every corpus
trace in several **input kinds** (``INPUT_KINDS``: the full counters, and thin versions with
columns dropped and the samples thinned to 4 Hz), the trees learn a branch for each missing
counter (missing readings stay NaN: the trees route them, none is read as 0).

**Scores**: ``share_error`` is the mean total-variation distance between predicted and true
shares (0.5 * sum |p - t|, 0 = exact, 1 = disjoint); ``calibration_error`` the expected
calibration error over the three phases' shares (10 equal-width bins of the predicted share,
the gap between the mean predicted and mean true share in each bin, weighted by the bin's
windows; Naeini, Cooper & Hauskrecht 2015, applied to shares instead of hits).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tealeaves.classifier.rules import PHASE_ORDER

#: Columns of the shares in the windows frame, in ``PHASE_ORDER``.
SHARE_COLUMNS = tuple(f"share_{p}" for p in PHASE_ORDER)
#: A verdict names one phase only where its share is at least this.
NAMED_SHARE = 0.7
#: A confident window: confidence at least this (``share_corpus`` holds a source's
#: confidence under it where it does not carry across families).
CONFIDENT = 0.9
#: A window needs this share of its time labelled for its true shares to count.
MIN_LABELLED = 0.5

#: Input kinds a corpus trace is also scored (and the share model trained) as: the metrics
#: kept (None: all) and the per-GPU sampling rate they are thinned to (None: as recorded).
#: ``nvml``: what nvidia-smi ``--query-gpu`` gives (no GPM); ``power+util``: the public vLLM
#: A100 recordings' fields; ``power`` and ``util`` alone, as issue 34 asks.
INPUT_KINDS: dict[str, tuple[tuple[str, ...] | None, float | None]] = {
    "full": (None, None),
    "nvml_4hz": (("gpu_util", "mem_copy_util", "power_w", "sm_clock_mhz", "mem_used_bytes"),
                 4.0),
    "power+util_4hz": (("gpu_util", "power_w"), 4.0),
    "util_4hz": (("gpu_util",), 4.0),
    "power_4hz": (("power_w",), 4.0),
}


def thin_samples(samples: pd.DataFrame, keep: tuple[str, ...] | None,
                 rate_hz: float | None) -> pd.DataFrame:
    """A sample frame as a thinner source would give it: only the ``keep`` metric columns
    (others dropped, so NaN downstream; rows holding none of them dropped), and per GPU at
    most one sample per ``1/rate_hz`` s: each metric's first reading in the slot, on one row
    stamped with the slot's first time (a poller at that rate reads every field at once).

    Args:
        samples: a frame in the sample schema.
        keep: metric columns to keep (None: all).
        rate_hz: per-GPU rate to thin to (None: as is).
    """
    from tealeaves.data.schema import METRIC_NAMES

    out = samples
    if keep is not None:
        drop = [c for c in METRIC_NAMES if c in out.columns and c not in keep]
        out = out.drop(columns=drop)
        # rows left with no kept reading (a buffered power row in a util-only source) are
        # not samples of that source
        kept = [c for c in keep if c in out.columns]
        out = out[out[kept].notna().any(axis=1)] if kept else out.iloc[:0]
    if rate_hz:
        # one row per GPU and slot holding each metric's first reading in the slot (a poller
        # reads every field at once; the store keeps some fields on rows of their own)
        slot = np.floor(out["timestamp"].to_numpy(dtype=float) * rate_hz)
        out = (out.assign(_slot=slot).sort_values(["gpu", "timestamp"], kind="stable")
               .groupby(["gpu", "_slot"], sort=True, as_index=False).first()
               .drop(columns="_slot").sort_values(["timestamp", "gpu"], kind="stable"))
    return out.reset_index(drop=True)


def window_shares(starts: np.ndarray, labels: pd.DataFrame, window_s: float) -> np.ndarray:
    """True shares per window.

    Args:
        starts: (n,) window starts, epoch s.
        labels: label intervals (``start``, ``end``, ``phase``), not overlapping.
        window_s: window length, s.

    Returns:
        (n, 3) shares in ``PHASE_ORDER`` summing to 1 over the labelled part of each window;
        NaN rows where under ``MIN_LABELLED`` of the window is labelled.
    """
    starts = np.asarray(starts, dtype=float)
    ends = starts + window_s
    cover = np.zeros((len(starts), len(PHASE_ORDER)))
    ls = labels["start"].to_numpy(dtype=float)
    le = labels["end"].to_numpy(dtype=float)
    lp = labels["phase"].to_numpy()
    order = np.argsort(ls)
    ls, le, lp = ls[order], le[order], lp[order]
    # every interval overlapping a window: those starting before its end and ending after its
    # start (intervals do not overlap, so their ends are sorted too)
    lo = np.searchsorted(le, starts, side="right")
    hi = np.searchsorted(ls, ends, side="left")
    idx = {p: i for i, p in enumerate(PHASE_ORDER)}
    for w in range(len(starts)):
        for j in range(lo[w], hi[w]):
            k = idx.get(lp[j])
            if k is not None:
                cover[w, k] += max(0.0, min(ends[w], le[j]) - max(starts[w], ls[j]))
    total = cover.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = cover / total[:, None]
    out[total < MIN_LABELLED * window_s] = np.nan
    return out


def share_error(pred: np.ndarray, true: np.ndarray) -> float:
    """Mean total-variation distance between predicted and true shares ((n, 3) each) over the
    rows where both are known; NaN when none is."""
    ok = np.isfinite(pred).all(axis=1) & np.isfinite(true).all(axis=1)
    if not ok.any():
        return float("nan")
    return float(0.5 * np.abs(pred[ok] - true[ok]).sum(axis=1).mean())


def calibration_error(pred: np.ndarray, true: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error of the shares (module docstring): every (window, phase) pair
    is one prediction; NaN when no row is known."""
    ok = np.isfinite(pred).all(axis=1) & np.isfinite(true).all(axis=1)
    if not ok.any():
        return float("nan")
    p, t = pred[ok].ravel(), true[ok].ravel()
    b = np.minimum((p * bins).astype(int), bins - 1)
    err = 0.0
    for k in range(bins):
        m = b == k
        if m.any():
            err += m.sum() * abs(p[m].mean() - t[m].mean())
    return float(err / len(p))


def verdict(shares: np.ndarray, named: float = NAMED_SHARE) -> list[str]:
    """Words per window from its shares ((n, 3), ``PHASE_ORDER``): the phase alone where its
    share is at least ``named`` ("decode"), else "mixed: decode 55 % · prefill 30 %" (the
    phases over 5 %, largest first); "" where the shares are unknown."""
    out = []
    for row in np.asarray(shares, dtype=float):
        if not np.isfinite(row).all():
            out.append("")
            continue
        top = int(np.argmax(row))
        if row[top] >= named:
            out.append(PHASE_ORDER[top])
            continue
        parts = [f"{PHASE_ORDER[k]} {row[k]:.0%}".replace("%", " %")
                 for k in np.argsort(-row) if row[k] >= 0.05]
        out.append("mixed: " + " · ".join(parts))
    return out


def share_estimator(seed: int = 0):
    """The share model's configuration: ``model.hgb_estimator``'s trees without class weights
    (balanced weights would skew the soft targets' means)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(
        max_iter=150, learning_rate=0.08, max_leaf_nodes=15, min_samples_leaf=20,
        l2_regularization=1.0, early_stopping=False, random_state=seed)


class ShareModel:
    """Calibrated phase shares per window (module docstring).

    Args:
        columns: the feature columns it reads (default ``share_columns()``).
        seed: the trees' seed.

    Attributes:
        estimator_: the fitted ``HistGradientBoostingClassifier`` (after ``fit``).
        classes_: the phases it saw, a subset of ``PHASE_ORDER``.
    """

    def __init__(self, columns: tuple[str, ...] | None = None, seed: int = 0) -> None:
        self.columns = tuple(columns or share_columns())
        self.seed = seed

    def fit(self, features: list[pd.DataFrame], shares: list[np.ndarray],
            weights: list[float] | None = None) -> ShareModel:
        """Fit on per-trace feature rows and their true shares ((n_i, 3) each, NaN rows
        skipped); ``weights`` scale each trace's rows (default 1).  Returns self."""
        from threadpoolctl import threadpool_limits

        X, y, w = [], [], []
        weights = weights or [1.0] * len(features)
        for f, s, tw in zip(features, shares, weights, strict=True):
            ok = np.isfinite(s).all(axis=1)
            x = f[list(self.columns)].to_numpy(dtype=float)[ok]
            s = s[ok]
            for k, p in enumerate(PHASE_ORDER):
                m = s[:, k] > 1e-6
                X.append(x[m])
                y.append(np.full(int(m.sum()), p))
                w.append(s[m, k] * tw)
        Xa, ya, wa = np.vstack(X), np.concatenate(y), np.concatenate(w)
        with threadpool_limits(1, user_api="openmp"):
            self.estimator_ = share_estimator(self.seed).fit(Xa, ya, sample_weight=wa)
        self.classes_ = tuple(self.estimator_.classes_)
        return self

    def predict(self, features: pd.DataFrame) -> np.ndarray:
        """(n, 3) shares in ``PHASE_ORDER`` (rows sum to 1); a window with no reading in any
        column the model reads gets NaN shares."""
        from threadpoolctl import threadpool_limits

        X = features.reindex(columns=list(self.columns)).to_numpy(dtype=float)
        out = np.full((len(X), len(PHASE_ORDER)), np.nan)
        known = np.isfinite(X).any(axis=1)
        if known.any():
            with threadpool_limits(1, user_api="openmp"):
                q = self.estimator_.predict_proba(X[known])
            got = np.zeros((int(known.sum()), len(PHASE_ORDER)))
            for j, c in enumerate(self.estimator_.classes_):
                got[:, PHASE_ORDER.index(c)] = q[:, j]
            out[known] = got
        return out


#: The share model's feature columns: the phase model's (``features.MODEL_COLUMNS``) and NVML's
#: memory-copy share, which a source without the profiling counters still has (nvidia-smi's
#: ``utilization.memory``: decode's weight reads keep it high, prefill's GEMMs low).
def share_columns() -> tuple[str, ...]:
    """``features.MODEL_COLUMNS`` plus the ``f_mem_copy_util_*`` features."""
    from tealeaves.classifier.features import MODEL_COLUMNS

    extra = tuple(f"f_mem_copy_util_{k}" for k in ("mean", "max", "min", "std", "slope"))
    return tuple(MODEL_COLUMNS) + extra


#: Counters a verdict can stand on (what the phase trees and the share model read), by the
#: feature stem that reads them.  PCIe, NVLink and the SM clock are collected and shown, but
#: no phase feature reads them (``features.MODEL_PIPES``).
_COUNTER_OF = {"sm_active": "sm_active", "sm_occupancy": "sm_occupancy",
               "tensor_active": "tensor_active", "dram_active": "dram_active",
               "gpu_util": "gpu_util", "mem_copy_util": "mem_copy_util", "power": "power_w"}
_PROFILING = ("sm_active", "tensor_active", "dram_active")


def inputs_of(feats: pd.DataFrame, window_s: float, rate_hz: float | None = None) -> dict:
    """What a verdict stood on: the counters the models read that have a reading in the
    windows, the per-GPU rate of the first of sm_active, gpu_util, power_w the source reads
    (``rate_hz`` when given: ``evidence.sample_rate_hz``, 1 / the median interval between a
    GPU's readings; else estimated from the windows: the median readings per window over the
    window where that is 2 or more, else the readings after the first over the time from the
    first window to the last; NaN for a single reading), and the input kind its confidence
    map is taken from (``confidence_kind``).  Power read without a power limit is named as
    not used.

    Returns:
        ``{"counters": [...], "rate_hz": float, "kind": str, "text": "sm_active,
        tensor_active, ... at 20 Hz per GPU"}`` (``text`` says "a single reading per GPU"
        where there is one).
    """
    present = [stem for stem in _COUNTER_OF
               if f"f_{stem}_mean" in feats and feats[f"f_{stem}_mean"].notna().any()]
    counters = [_COUNTER_OF[s] for s in present]
    if "power" not in present and "power_w_mean" in feats and \
            feats["power_w_mean"].notna().any():
        counters.append("power_w (no power limit: not used)")
    rate, single = np.nan, False
    for m in ("sm_active", "gpu_util", "power_w"):  # the first counter the source reads
        n = feats[f"n_{m}"].to_numpy(dtype=float) if f"n_{m}" in feats else np.zeros(0)
        if (n > 0).any():
            st = feats.index.to_numpy(dtype=float)[n > 0]
            span = float(st.max() - st.min())
            total = float(n[n > 0].sum())
            single = total <= 1.0 + 1e-9
            med = float(np.median(n[n > 0]))
            if med >= 2:  # several readings a window: their count over the window
                rate = med / window_s
            elif not single:  # sparser: readings after the first over the time they span
                rate = (total - 1.0) / (span if span > 0 else window_s)
            break
    if rate_hz is not None and not single:
        rate = float(rate_hz)
    kind = confidence_kind(present)
    rate_txt = (" (a single reading per GPU)" if single else
                f" at {rate:.2g} Hz per GPU" if np.isfinite(rate) else "")
    return {"counters": counters, "rate_hz": rate, "kind": kind,
            "text": (", ".join(counters) or "no counter") + rate_txt}


def confidence_kind(present: list[str]) -> str:
    """The ``INPUT_KINDS`` name whose held-out confidence map fits a source with the feature
    stems ``present``: ``full`` with any profiling counter, else the thin kind with the same
    counters (``nvml_4hz`` where the memory-copy share is read too)."""
    if any(p in present for p in _PROFILING):
        return "full"
    util, power = "gpu_util" in present, "power" in present
    if util and power:
        return "nvml_4hz" if "mem_copy_util" in present else "power+util_4hz"
    return "util_4hz" if util else "power_4hz" if power else "none"
