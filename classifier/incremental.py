"""Windows labelled as samples arrive, a range at a time: the samples a range of windows is
labelled from (``context_samples``: ``CONTEXT_WINDOWS`` earlier windows of context), the
range's windows indexed by window number with where their shares came from and what their
verdicts stood on (``windows_by_index``), the phase-segment slots a range settles
(``settle_slots``, ``settle_end``), and the settled pieces read back (``merge_runs``,
``segment_slots``).  Pure functions of frames; the caller keeps the state (the dashboard's
history, ``app.dashboard.history.History``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tealeaves.classifier.segments import DEFAULT_LAG_S, hop_for

#: Windows of history labelled with each new window (the phase model's receptive field is
#: 6 windows either side).
CONTEXT_WINDOWS = 8
#: A windows frame's per-window column naming where its shares came from (``"calibrated"``
#: or ``"rules' scores"``: ``classify_samples``' ``attrs["shares"]``), for frames put
#: together from several classifications (the dashboard's history).
SHARES_SOURCE_COLUMN = "shares_source"
#: A windows frame's per-window column holding what its verdict stood on
#: (``attrs["inputs"]["text"]``: ``"sm_active, tensor_active, ... at 10 Hz per GPU"``).
INPUTS_COLUMN = "inputs"


def context_samples(frame: pd.DataFrame, j0: int, j1: int, window_s: float) -> pd.DataFrame:
    """The rows of the sample frame ``frame`` that windows ``j0 <= j < j1`` (of ``window_s``
    seconds, ``j = floor(t / window_s)``) are labelled from: theirs and those of the
    ``CONTEXT_WINDOWS`` windows before them."""
    w = window_s
    ts = frame["timestamp"].to_numpy()
    return frame[(ts >= (j0 - CONTEXT_WINDOWS) * w - 1e-9) & (ts < j1 * w - 1e-9)]


def settle_end(j1: int, final: bool, window_s: float) -> int:
    """The window up to whose start a classification of windows ``< j1`` settles the segment
    slots: ``j1``, or past every slot the session has when it is the session's end
    (``final``: no later window will cover them)."""
    return j1 + 2 + math.ceil(DEFAULT_LAG_S / window_s) if final else j1


def windows_by_index(windows: pd.DataFrame, j0: int, j1: int, window_s: float
                     ) -> pd.DataFrame:
    """The rows of ``classify_samples``' ``windows`` with ``j0 <= j < j1``, indexed by ``j``
    (name ``"j"``), each with ``SHARES_SOURCE_COLUMN`` and ``INPUTS_COLUMN`` from the frame's
    attrs; ``windows`` itself when empty."""
    w = window_s
    if windows.empty:
        return windows
    j = np.floor(windows["start"].to_numpy(dtype=float) / w + 1e-6).astype(np.int64)
    keep = (j >= j0) & (j < j1)
    out = windows[keep].copy()
    out.index = pd.Index(j[keep], name="j")
    # where each window's shares came from and what its verdict stood on: per window, as
    # the history joins many classifications (a frame's attrs do not survive the join)
    out[SHARES_SOURCE_COLUMN] = windows.attrs.get("shares") or ""
    out[INPUTS_COLUMN] = (windows.attrs.get("inputs") or {}).get("text") or ""
    return out


def settle_slots(segs: pd.DataFrame, j1: int, m0: int | None, window_s: float
                 ) -> tuple[pd.DataFrame | None, int | None]:
    """The slots of the segments ``segs`` (``classify_with_segments``) from slot ``m0`` up to
    the last one every covering window of which ends by window ``j1``'s start.

    Returns:
        ``(piece, m_next)``: the settled rows (``start``, ``end``, ``phase``,
        ``confidence``; None when none) and the next slot not yet settled.  Both unchanged
        (``None``, ``m0``) when ``window_s`` makes no segments (``segments.hop_for``).
    """
    h = hop_for(window_s)
    if h is None:
        return None, m0
    per = round(window_s / h)
    m_end = j1 * per - per - round(DEFAULT_LAG_S / h) + 1
    piece = None
    if len(segs):
        a = np.round(segs["start"].to_numpy(dtype=float) / h).astype(np.int64)
        b = np.round(segs["end"].to_numpy(dtype=float) / h).astype(np.int64)
        if m0 is not None:
            a = np.maximum(a, m0)
        b = np.minimum(b, m_end)
        keep = b > a
        if keep.any():
            piece = pd.DataFrame({
                "start": np.round(a[keep] * h, 6), "end": np.round(b[keep] * h, 6),
                "phase": segs["phase"].to_numpy()[keep],
                "confidence": segs["confidence"].to_numpy(dtype=float)[keep]})
    return piece, (m_end if m0 is None else max(m0, m_end))


def merge_runs(segments: pd.DataFrame) -> pd.DataFrame:
    """Adjacent rows of one phase (one ending where the next starts) made one row; its
    confidence the duration-weighted mean.  Cost follows the rows."""
    n = len(segments)
    if n < 2:
        return segments.reset_index(drop=True)
    start = segments["start"].to_numpy(dtype=float)
    end = segments["end"].to_numpy(dtype=float)
    phase = segments["phase"].to_numpy()
    new = np.r_[True, (phase[1:] != phase[:-1]) | (np.abs(start[1:] - end[:-1]) > 1e-6)]
    if new.all():
        return segments.reset_index(drop=True)
    ids = np.cumsum(new) - 1
    dur = end - start
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, n - 1]
    conf = segments["confidence"].to_numpy(dtype=float)
    wsum = np.bincount(ids, weights=dur)
    return pd.DataFrame({"start": start[first], "end": end[last], "phase": phase[first],
                         "confidence": np.bincount(ids, weights=conf * dur)
                         / np.where(wsum > 0, wsum, 1.0)})


def segment_slots(segments: pd.DataFrame, hop_s: float, m0: int | None = None,
                  m1: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``hop_s`` slots segments cover, as ``(slot indices, phases)`` sorted by slot;
    only ``m0 <= m < m1`` when given.  Cost follows the slots."""
    if segments.empty:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object)
    a = np.round(segments["start"].to_numpy(dtype=float) / hop_s).astype(np.int64)
    b = np.round(segments["end"].to_numpy(dtype=float) / hop_s).astype(np.int64)
    if m0 is not None:
        a = np.maximum(a, m0)
    if m1 is not None:
        b = np.minimum(b, m1)
    n = np.clip(b - a, 0, None)
    total = int(n.sum())
    offs = np.arange(total) - np.repeat(np.cumsum(n) - n, n)
    return (np.repeat(a, n) + offs,
            np.repeat(segments["phase"].to_numpy(dtype=object), n))
