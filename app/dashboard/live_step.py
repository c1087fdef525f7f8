"""What the live view hands out and the small rules of following: ``Step`` (one answer to a
page), ``RangeView`` (a range ready to draw), ``FollowEnds`` (a followed view's right edges),
``live_factor`` and ``coarse_bins`` (coarser live bins for long spans), ``not_labelled_yet``."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import pandas as pd

from tealeaves.app.dashboard.config import MAX_LIVE_POINTS
from tealeaves.app.dashboard.cursor import Cursor
from tealeaves.app.figures import HeaderSummary


@dataclass
class Step:
    """One answer to the page: what changes on it.

    Attributes:
        state: the page's new cursor (JSON-able dict).
        figure: a whole new figure (rebuild), else None.
        extend: an ``extendData`` payload, else None.
        patch: a ``dash.Patch`` of the figure (range view), else None.
        summary: the header's new summary, else None (unchanged).
    """

    state: Cursor
    figure: object = None
    extend: list | None = None
    patch: object = None
    summary: HeaderSummary | None = None


@dataclass
class RangeView:
    """A range of the history ready to draw (``LiveView.range_view``).

    Attributes:
        t0, t1: the range, epoch seconds.
        traces: ``{trace key: TraceData}`` for every trace of the figure.
        order: GPU order of the load bands (top first).
        raw: the lanes hold raw samples (else 0.1-s bins, downsampled when many).
        n_out: points per line trace asked for.
        factor: windows per ribbon bar.
        empty: neither samples nor windows in the range.
        segments: the ribbon draws the 0.1-s phase segments (``factor`` 1).
    """

    t0: float
    t1: float
    traces: dict
    order: list[int]
    raw: bool
    n_out: int
    factor: int
    empty: bool = False
    segments: bool = False


@dataclass(frozen=True)
class FollowEnds:
    """The right edges of a followed view (``LiveView._ends``).

    ``t`` (epoch s) is the view's edge: the end of the newest complete live bin, where the
    lanes end (so a sample is on screen as soon as its bin is complete).  ``k`` is the next bin
    (0.1-s bins, ``k * bin_s == t``); ``j`` the next window, ``m`` the next segment slot and
    ``s`` the next server cell to draw, each at its own cursor, never past ``t`` (None: that
    row is not drawn from the history's slots / cells).  The rows labelled after the samples
    stop at their cursor and a "labelling…" mark covers from there to ``t`` (``labelling``).
    """

    k: int
    j: int
    m: int | None
    s: int | None
    t: float

    def labelling(self, window_s: float, hop_s: float, left: float = -math.inf
                  ) -> dict[str, tuple[float, float]]:
        """``{row: (t_from, t_to)}`` epoch s of each ``LABELLING_ROWS`` row's "labelling…"
        mark: from where its labels stop (the ribbon: the segment slot cursor ``m`` of
        ``hop_s`` slots, else the window cursor; the load heatmap and bands and the imbalance
        strip: the window cursor ``j`` of ``window_s`` windows), at the earliest the view's
        left edge ``left``, to the edge ``t``."""
        w_end = min(max(self.j * window_s, left), self.t)
        r_end = w_end if self.m is None else min(max(self.m * hop_s, left), self.t)
        return {"ribbon": (r_end, self.t), "bands": (w_end, self.t), "strip": (w_end, self.t)}

    def left(self, span_s: float, window_s: float) -> float:
        """The view's left edge, epoch s, shared by every row: the first window boundary at or
        after ``t - span_s`` (so the lanes, windows and segments all start there)."""
        return math.ceil((self.t - span_s) / window_s - 1e-6) * window_s


def not_labelled_yet(state: Cursor, t: float, window_s: float, hop_s: float) -> bool:
    """Whether time ``t`` (epoch s) lies under a "labelling…" mark of the followed page whose
    cursor is ``state``: past where its ribbon's labels stop (segment slot ``m`` of ``hop_s``
    slots, else window ``j`` of ``window_s`` windows) and not past its edge (``edge``, ms)."""
    if state.get("mode") != "follow" or state.get("j") is None or not state.get("edge"):
        return False
    j_t = int(state["j"]) * window_s
    m = state.get("m")
    start = min(j_t, int(m) * hop_s) if m is not None else j_t
    return start <= t <= float(state["edge"]) / 1000.0


def live_factor(span_s: float, bin_s: float) -> int:
    """0.1-s bins per live point so that ``span_s`` holds at most ``MAX_LIVE_POINTS``."""
    return max(1, math.ceil(span_s / bin_s / MAX_LIVE_POINTS))


def coarse_bins(bins: pd.DataFrame, factor: int) -> pd.DataFrame:
    """Means of ``factor`` consecutive bins (NaN skipped), indexed by ``k // factor``."""
    if factor <= 1 or bins.empty:
        return bins
    return bins.groupby(bins.index // factor).mean()


def now_ms() -> float:
    return time.time() * 1000.0
