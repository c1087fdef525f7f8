"""What a time range adds up to: phase time, decode imbalance, the hot GPU, per-GPU activity
and the server's own figures, from the classifier's windows and the samples.

Everything here is read from the ``classify_samples`` windows of the range, so a report and the
dashboard's ribbon agree window for window:

- ``time_s[phase]`` = number of windows labelled ``phase`` x ``window_s``.
- decode ``imbalance_ratio`` (max/mean GPU load), ``balancedness`` (mean/max, SGLang's and
  vLLM's EPLB term) and ``straggler_tax`` (1 - mean/max of the GPUs' busy time: the share of
  GPU-time spent waiting for the slowest rank; ``classifier.imbalance``) are the means over the
  decode windows where they are defined.  Windows are of equal length, so the mean straggler tax
  is the share of the decode GPU-time lost to waiting.
- the hot GPU is the GPU flagged hot in most imbalanced windows; it *stays* when it holds at
  least ``STAYS_SHARE`` of them, else it *rotates*.

Missing values are NaN (None in the dicts made for JSON), never 0.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from .rules import PHASE_ORDER

#: Share of the imbalanced windows one GPU must hold for the hot GPU to "stay".
STAYS_SHARE = 0.8

#: Per-GPU columns of the sample schema averaged over the range, with their units.
GPU_COLUMNS: tuple[tuple[str, str], ...] = (
    ("gpu_util", "%"), ("sm_active", "%"), ("sm_occupancy", "%"), ("tensor_active", "%"),
    ("dram_active", "%"), ("pcie_tx_bytes_per_s", "B/s"), ("pcie_rx_bytes_per_s", "B/s"),
    ("nvlink_tx_bytes_per_s", "B/s"), ("nvlink_rx_bytes_per_s", "B/s"), ("power_w", "W"),
    ("sm_clock_mhz", "MHz"),
)
#: ``gpu_util`` at or above this (%) counts a sample as busy (a kernel ran).
BUSY_UTIL = 5.0


def _mean(x) -> float:
    a = np.asarray(x, dtype=float)
    a = a[np.isfinite(a)]
    return float(a.mean()) if a.size else math.nan


def phase_summary(windows: pd.DataFrame, window_s: float) -> dict:
    """Time and share of the range in each phase.

    Args:
        windows: ``classify_samples`` output for the range.
        window_s: window length, s.

    Returns:
        ``{"windows": n, "time_s": {phase: s}, "share": {phase: 0-1}}`` over ``PHASE_ORDER``
        (plus ``mixed`` when present); shares are NaN without windows.
    """
    counts = windows["phase"].value_counts() if len(windows) else pd.Series(dtype=int)
    phases = list(PHASE_ORDER) + [p for p in counts.index if p not in PHASE_ORDER]
    n = len(windows)
    return {"windows": n,
            "time_s": {p: float(counts.get(p, 0)) * window_s for p in phases},
            "share": {p: (float(counts.get(p, 0)) / n if n else math.nan) for p in phases}}


def imbalance_summary(windows: pd.DataFrame) -> dict:
    """Decode imbalance over a range, from its windows.

    Returns:
        ``decode_windows``; ``imbalance_ratio``, ``balancedness``, ``straggler_tax``: means
        over the decode windows where defined (NaN when none); ``imbalanced_windows`` (flagged);
        ``hot_gpus`` ({gpu: flagged windows}, most first); ``hot_gpu`` (most flagged, or None);
        ``hot_pattern``: ``"stays"`` (one GPU holds >= ``STAYS_SHARE`` of the flagged windows),
        ``"rotates"``, or ``"none"``; ``hot_changes``: times the flagged GPU changed between
        consecutive flagged windows.
    """
    dec = windows[windows["phase"] == "decode"] if len(windows) else windows
    flagged = windows[windows["imbalanced"].astype(bool)] if len(windows) else windows
    hot = flagged["hot_gpu"].dropna().astype(int) if len(flagged) else pd.Series(dtype=int)
    counts = hot.value_counts()
    hot_gpus = {int(g): int(n) for g, n in counts.items()}
    top = int(counts.index[0]) if len(counts) else None
    if top is None:
        pattern = "none"
    elif counts.iloc[0] / counts.sum() >= STAYS_SHARE:
        pattern = "stays"
    else:
        pattern = "rotates"
    seq = hot.to_numpy()
    return {
        "decode_windows": len(dec),
        "imbalance_ratio": _mean(dec["imbalance_ratio"]) if len(dec) else math.nan,
        "balancedness": _mean(dec["balancedness"]) if len(dec) else math.nan,
        "straggler_tax": _mean(dec["straggler_tax"]) if len(dec) else math.nan,
        "imbalanced_windows": len(flagged),
        "hot_gpus": hot_gpus,
        "hot_gpu": top,
        "hot_pattern": pattern,
        "hot_changes": int(np.count_nonzero(seq[1:] != seq[:-1])) if seq.size > 1 else 0,
    }


def top_imbalanced(windows: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The ``n`` decode windows with the highest imbalance ratio (flagged ones first), with
    ``start``, ``end``, ``imbalance_ratio``, ``straggler_tax``, ``hot_gpu`` (NaN unless
    flagged), ``top_gpu`` (the most loaded GPU) and ``imbalanced``."""
    cols = ["start", "end", "imbalance_ratio", "straggler_tax", "hot_gpu", "imbalanced"]
    if not len(windows):
        return pd.DataFrame(columns=cols + ["top_gpu"])
    dec = windows[(windows["phase"] == "decode") & np.isfinite(windows["imbalance_ratio"])]
    dec = dec.sort_values(["imbalanced", "imbalance_ratio"], ascending=[False, False]).head(n)
    loads = [c for c in dec.columns if c.startswith("load_g") and c[6:].isdigit()]
    out = dec[cols].copy()
    if loads and len(dec):
        arr = dec[loads].to_numpy(dtype=float)
        ids = np.array([int(c[6:]) for c in loads])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            best = np.nanargmax(np.where(np.isfinite(arr), arr, -np.inf), axis=1)
        out["top_gpu"] = ids[best]
    else:
        out["top_gpu"] = np.nan
    return out.reset_index(drop=True)


def gpu_table(samples: pd.DataFrame, windows: pd.DataFrame, window_s: float) -> pd.DataFrame:
    """One row per GPU: ``busy_share`` (share of samples with ``gpu_util`` >= ``BUSY_UTIL``,
    0-1), the mean of every ``GPU_COLUMNS`` column over the range (NaN where the source has
    none), ``energy_j`` (mean power x span), ``load_mean`` (mean window load, %) and
    ``hot_s`` (seconds flagged hot: flagged windows x ``window_s``).  Index: GPU."""
    if samples.empty:
        return pd.DataFrame(columns=["busy_share", *(c for c, _ in GPU_COLUMNS), "hot_s"])
    s = samples.copy()
    for col, _ in GPU_COLUMNS:
        if col not in s:
            s[col] = np.nan
    g = s.groupby("gpu")
    out = g[[c for c, _ in GPU_COLUMNS]].mean()
    util = s["gpu_util"].astype(float)
    busy = (util >= BUSY_UTIL).where(util.notna())
    out.insert(0, "busy_share", busy.groupby(s["gpu"]).mean())
    span = float(s["timestamp"].max() - s["timestamp"].min()) if len(s) > 1 else math.nan
    out["energy_j"] = out["power_w"] * (span if span > 0 else math.nan)  # unknown, not 0
    hot = (windows.loc[windows["imbalanced"].astype(bool), "hot_gpu"].dropna().astype(int)
           .value_counts() if len(windows) else pd.Series(dtype=int))
    out["load_mean"] = [_mean(windows[f"load_g{int(gpu)}"]) if f"load_g{int(gpu)}" in windows
                        else math.nan for gpu in out.index]
    out["hot_s"] = [float(hot.get(int(gpu), 0)) * window_s for gpu in out.index]
    out.index = out.index.astype(int)
    out.index.name = "gpu"
    return out


def server_summary(events: pd.DataFrame | None) -> dict | None:
    """The server's own figures over the range, from its log/metrics events
    (``collectors.server_log.events_frame`` or ``SampleStore.server_events`` rows).

    Returns:
        None without events; else ``events``, ``prefill_batches``, ``prefill_tokens`` (sum of
        ``#new-token``), ``gen_throughput_tok_s`` (mean of the decode lines' generation
        throughput), ``accept_len`` (mean accept length of the decode lines; NaN without
        speculative decoding), ``running_req`` (mean).
    """
    if events is None or len(events) == 0:
        return None
    kind = events["kind"] if "kind" in events else pd.Series("", index=events.index)

    def col(name: str, which: str | None = None) -> pd.Series:
        if name not in events:
            return pd.Series(dtype=float)
        v = pd.to_numeric(events[name], errors="coerce")
        return v[kind == which] if which else v

    pf = kind == "prefill"
    return {
        "events": len(events),
        "prefill_batches": int(pf.sum()),
        "prefill_tokens": float(col("new_token", "prefill").sum(min_count=1)),
        "gen_throughput_tok_s": _mean(col("gen_throughput_tok_s")),
        "accept_len": _mean(col("accept_len")),
        "running_req": _mean(col("running_req")),
    }


__all__ = ["BUSY_UTIL", "GPU_COLUMNS", "STAYS_SHARE", "gpu_table", "imbalance_summary",
           "phase_summary", "server_summary", "top_imbalanced"]
