"""Finer time: phase segments that change where the counters change, not on the 0.5-s grid.

The phase model scores 0.5-s windows (``windows.DEFAULT_WINDOW_S``: enough GPM readings at
10 Hz to be reliable).  A window that holds a phase change is ambiguous, and real servers
change phase every 0.1-1 s.  So the same windows are cut again at a hop of ``hop_s`` (0.1 s:
five overlapping grids), every window is scored, and each ``hop_s`` slot gets the mean
log-posterior of the windows that cover it, read ``lag_s`` later (the counters lag the work:
NVML's utilization refreshes about 6 times a second, GPM 10 times, so a change shows 0.1-0.25 s
after it happens, as measured on an H200: ``docs/measurement.md``, "NVML on an H200"; but see
``DEFAULT_LAG_S``).  A Viterbi pass over the slots with the model's window transitions spread
over the slots of a window (an off-diagonal probability divided by ``window_s / hop_s``) picks
the path; runs of one phase are the segments.

Cost follows the samples: ``window_s / hop_s`` feature passes over the same samples, and
one slot per ``hop_s`` of covered time (never per second of an empty span).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tealeaves.classifier.features import WindowFeatures
from tealeaves.classifier.labellers import WindowModel
from tealeaves.classifier.model import viterbi_log
from tealeaves.classifier.rules import PHASE_ORDER
from tealeaves.classifier.windows import DEFAULT_WINDOW_S

#: Up to this many sample rows ``hop_features`` cuts its grids in one feature pass.
ONE_PASS_ROWS = 50_000
#: Slot length, seconds.
DEFAULT_HOP_S = 0.1
#: How much later the counters show a slot's work, seconds.  Chosen by the held-out
#: time-weighted accuracy (``tealeaves evaluate --corpus``, leave-one-family-out, 2026-12-01):
#: 0.1 s gave 0.938 and a 0.27-s median boundary delay, 0.0 s 0.936 and 0.30 s.  (Scored by
#: the model trained on all traces, 0.0 looked better: in-sample, and not what counts.)  A
#: window holding a fifth of a new phase already scores it, so onsets come out 0.1-0.3 s early
#: on a sharp synthetic step (``tests/test_segments.py``).
DEFAULT_LAG_S = 0.1

SEGMENT_COLUMNS = ("start", "end", "phase", "confidence")


def hop_for(window_s: float, hop_s: float = DEFAULT_HOP_S) -> float | None:
    """``hop_s`` when ``window_s`` is a whole number (>= 1) of such hops, else None (no
    segments can be cut)."""
    if not (hop_s > 0 and window_s > 0):
        return None
    k = window_s / hop_s
    return hop_s if round(k) >= 1 and abs(k - round(k)) < 1e-6 else None


def hop_features(samples: pd.DataFrame, devices: pd.DataFrame | None = None,
                 window_s: float = DEFAULT_WINDOW_S, hop_s: float = DEFAULT_HOP_S,
                 base: pd.DataFrame | None = None) -> pd.DataFrame:
    """``WindowFeatures`` of ``window_s`` windows starting every ``hop_s`` seconds.

    A short frame (up to ``ONE_PASS_ROWS`` rows, the live path) has its grids cut in one
    feature pass: the shifted copies of the samples are laid end to end, each far enough
    from the last that no window or slope spans two, so the pass costs about what one grid
    does (its fixed cost dominates at a few hundred rows); the rows are the same.

    Args:
        samples: sample frame (one host).
        devices: device rows for normalisation.
        base: the features of the grid at offset 0, when already computed (reused).

    Returns:
        Feature rows indexed by window start (epoch s, rounded to 1 µs), sorted.

    Raises:
        ValueError: ``window_s`` or ``hop_s`` is not positive, or ``window_s`` is not a
            whole multiple of ``hop_s``.
    """
    if not (hop_s > 0 and window_s > 0):
        raise ValueError(f"window {window_s:g} s and hop {hop_s:g} s must be positive")
    if hop_for(window_s, hop_s) is None:
        raise ValueError(f"window {window_s:g} s is not a whole number of {hop_s:g}-s hops")
    k = window_s / hop_s
    if base is None and 0 < len(samples) <= ONE_PASS_ROWS:
        return _one_pass(samples, devices, window_s, hop_s, round(k))
    parts = [base if base is not None else
             WindowFeatures(window_s, devices).fit_transform(samples)]
    for i in range(1, round(k)):
        shifted = samples.assign(timestamp=samples["timestamp"] - i * hop_s)
        f = WindowFeatures(window_s, devices).fit_transform(shifted)
        f.index = pd.Index(np.round(f.index.to_numpy(dtype=float) + i * hop_s, 6), name="start")
        parts.append(f)
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame()
    return pd.concat(parts).sort_index()


def on_grid(feats: pd.DataFrame, window_s: float = DEFAULT_WINDOW_S) -> pd.DataFrame:
    """The rows of ``hop_features`` output on the offset-0 grid (what ``WindowFeatures``
    alone gives: window starts at whole multiples of ``window_s``)."""
    q = feats.index.to_numpy(dtype=float) / window_s
    return feats[np.abs(q - np.round(q)) < 1e-6]


def _one_pass(samples: pd.DataFrame, devices, window_s: float, hop_s: float,
              per: int) -> pd.DataFrame:
    ts = samples["timestamp"].to_numpy(dtype=float)
    t_min = float(ts.min())
    block = (math.ceil((float(ts.max()) - t_min) / window_s) + 4) * window_s
    grids = pd.concat([samples.assign(timestamp=ts - i * hop_s + i * block)
                       for i in range(per)], ignore_index=True)
    feats = WindowFeatures(window_s, devices).fit_transform(grids)
    if feats.empty:
        return feats
    start = feats.index.to_numpy(dtype=float)
    grid = np.clip(np.floor((start - t_min + 2 * window_s) / block), 0, per - 1)
    feats.index = pd.Index(np.round(start - grid * block + grid * hop_s, 6), name="start")
    return feats.sort_index()


def slot_transition(window_transition: np.ndarray, slots_per_window: int) -> np.ndarray:
    """Per-slot transitions from per-window ones: each off-diagonal probability divided by
    the slots in a window, the rest on the diagonal (a first-order approximation of the
    matrix root, exact for rare changes)."""
    t = np.asarray(window_transition, dtype=float) / max(slots_per_window, 1)
    np.fill_diagonal(t, 0.0)
    np.fill_diagonal(t, 1.0 - t.sum(axis=1))
    return t


def slot_posteriors(starts: np.ndarray, proba: np.ndarray, window_s: float, hop_s: float,
                    lag_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-slot log-posteriors: the mean log-posterior of the windows covering the slot's
    time plus ``lag_s``.

    Args:
        starts: (n,) window starts, epoch s, on a ``hop_s`` grid.
        proba: (n, k) window posteriors.

    Returns:
        ``(slot_starts, log_post)``: (m,) slot starts (sorted) and (m, k).
    """
    if len(starts) == 0:
        return np.zeros(0), np.zeros((0, proba.shape[1]))
    tick = np.round(np.asarray(starts, dtype=float) / hop_s).astype(np.int64)
    per = round(window_s / hop_s)
    lag = round(lag_s / hop_s)
    logp = np.log(np.clip(proba, 1e-6, 1.0))
    # a window starting at tick w covers counter ticks w..w+per-1, i.e. slots w-lag..
    slot = (tick[:, None] + np.arange(per)[None, :] - lag).ravel()
    vals = np.repeat(logp, per, axis=0)
    uniq, inv = np.unique(slot, return_inverse=True)
    sums = np.zeros((len(uniq), proba.shape[1]))
    np.add.at(sums, inv, vals)
    counts = np.bincount(inv, minlength=len(uniq)).astype(float)
    return uniq * hop_s, sums / counts[:, None]


def classify_segments(feats: pd.DataFrame, labeller=None, window_s: float = DEFAULT_WINDOW_S,
                      hop_s: float = DEFAULT_HOP_S, lag_s: float = DEFAULT_LAG_S,
                      transition: np.ndarray | None = None,
                      times: np.ndarray | None = None) -> pd.DataFrame:
    """Phase segments from ``hop_features`` rows.

    Args:
        feats: ``hop_features`` output.
        labeller: a ``PhaseModel`` or ``RulePhaseLabeller`` (default: the shipped model).
        transition: window transitions (default: the model's; a sticky matrix for the rules).
        times: the samples' timestamps (epoch s): when given, segments cover only the time
            from the first to the last sample of each run of samples (a gap longer than a
            window ends a run), so no phase is drawn where there is no data (O(samples)).

    Returns:
        One row per segment: ``start``, ``end`` (epoch s), ``phase``, ``confidence`` (the
        mean posterior of the phase over the segment's slots, 0-1).  Windows with no reading
        at all are left out; a gap of more than one slot between covered slots ends a
        segment.
    """
    from tealeaves.classifier.labellers import default_labeller

    labeller = default_labeller() if labeller is None else labeller
    fcols = [c for c in feats.columns if c.startswith("f_")]
    if fcols and not feats.empty:
        feats = feats[feats[fcols].notna().any(axis=1)]
    if feats.empty:
        return pd.DataFrame(columns=list(SEGMENT_COLUMNS))
    proba = labeller.predict_proba(feats).reindex(columns=list(PHASE_ORDER)).to_numpy()
    slots, logp = slot_posteriors(feats.index.to_numpy(dtype=float), proba, window_s, hop_s,
                                  lag_s)
    if times is not None and len(slots):
        keep = _covered(slots, hop_s, np.asarray(times, dtype=float), window_s)
        slots, logp = slots[keep], logp[keep]
        if not len(slots):
            return pd.DataFrame(columns=list(SEGMENT_COLUMNS))
    if transition is None:
        transition = (getattr(labeller, "transition", None)
                      if isinstance(labeller, WindowModel) else None)
    if transition is None:
        transition = np.full((3, 3), 0.05) + np.eye(3) * 0.85
    trans = slot_transition(transition, round(window_s / hop_s))
    breaks = np.r_[True, np.diff(slots) > 1.5 * hop_s]
    path = viterbi_log(logp, np.log(trans), breaks)
    post = np.exp(logp - logp.max(axis=1, keepdims=True))
    post /= post.sum(axis=1, keepdims=True)
    change = np.r_[True, (path[1:] != path[:-1]) | breaks[1:]]
    ids = np.cumsum(change) - 1
    first = np.flatnonzero(change)
    last = np.r_[first[1:] - 1, len(path) - 1]
    conf = np.bincount(ids, weights=post[np.arange(len(path)), path]) / np.bincount(ids)
    return pd.DataFrame({"start": slots[first], "end": slots[last] + hop_s,
                         "phase": np.asarray(PHASE_ORDER)[path[first]],
                         "confidence": conf})


def _covered(slots: np.ndarray, hop_s: float, times: np.ndarray,
             max_gap_s: float) -> np.ndarray:
    """(m,) bool: the slot ``[s, s + hop_s)`` meets a run of samples (runs split where two
    samples are more than ``max_gap_s`` apart)."""
    t = np.sort(times[np.isfinite(times)])
    if not len(t):
        return np.zeros(len(slots), bool)
    cut = np.flatnonzero(np.diff(t) > max_gap_s)
    r0 = np.r_[t[0], t[cut + 1]]
    r1 = np.r_[t[cut], t[-1]]
    i = np.searchsorted(r0, slots + hop_s, side="left") - 1  # last run starting before the end
    ok = i >= 0
    return ok & (slots <= r1[np.clip(i, 0, None)])


def segments_at(segments: pd.DataFrame, times: np.ndarray) -> np.ndarray:
    """The segment phase at each time (None where no segment covers it)."""
    t = np.asarray(times, dtype=float)
    if segments.empty:
        return np.full(len(t), None, dtype=object)
    starts = segments["start"].to_numpy(dtype=float)
    ends = segments["end"].to_numpy(dtype=float)
    i = np.searchsorted(starts, t, side="right") - 1
    ok = (i >= 0) & (t < ends[np.clip(i, 0, None)])
    return np.where(ok, segments["phase"].to_numpy()[np.clip(i, 0, None)], None)


__all__ = ["DEFAULT_HOP_S", "DEFAULT_LAG_S", "SEGMENT_COLUMNS", "classify_segments",
           "hop_features", "segments_at", "slot_posteriors", "slot_transition"]
