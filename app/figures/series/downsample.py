"""Range views: a stretch of the history turned into at most a few hundred points per trace.

Pure functions (arrays and frames in, arrays out); ``app.dashboard`` feeds them from
``app.dashboard.history.History`` and ``app.figures.extend`` turns their output into a
``Patch``.

- **Lines** (GPU lanes, load bands, share strip, server lane) are downsampled with
  tsdownsample's MinMaxLTTB (Van Der Donckt et al., "MinMaxLTTB: Leveraging MinMax-Preselection
  to Scale LTTB", IEEE VIS 2023): it keeps each stretch's extremes, so a 300 ms spike in an hour
  stays visible.  Missing data stays missing: a hole longer than ``max_gap`` in the input gets a
  NaN point in the output (a break in the line, never a 0), and the points either side of it
  are always kept.
- **The phase ribbon** is categorical, so it is bucketed instead: when a range holds more
  windows than ``n_out``, ``f`` consecutive windows make one bucket (``f`` the smallest whole
  number that fits; buckets aligned to multiples of ``f`` so panning does not reshuffle them)
  and each phase's bar is its share of the bucket's time, stacked: the mean of the windows'
  calibrated shares where they carry them (``figures.ribbon_shares``), else the share of the
  bucket's windows it labelled.  A bucket of one window is the window itself; there, when the
  history has the 0.1-s phase segments (``classifier.segments``), the bars are the segments
  instead, cut at window edges (``ribbon_pieces``) so a hover over any bar still names its
  window, and a window whose verdict is mixed gets stripes of the phase it is mixed with.
- **Raw samples**: when a range holds no more samples per GPU than ``n_out``, the lanes show
  the samples themselves instead of 0.1-s bins (``lanes_from_samples``).

All times are epoch seconds here; ``figures`` turns them into the axis' milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from tsdownsample import MinMaxLTTBDownsampler

from tealeaves.app.figures.geometry import (
    BAND_SCALE,
    LANES,
    MARKER_Y,
    MIXED_PHASES,
    PREFILL_SIZES,
    RIBBON_HOT_HEIGHT,
    RIBBON_PHASES,
    SERVER_LINES,
    band_slots,
    heat_rows,
)
from tealeaves.app.figures.points import heat_columns
from tealeaves.app.figures.series.binning import (
    gpu_shares,
    hot_members,
    mixed_with,
    prefill_size_class,
    ribbon_shares,
)

#: Points per line trace for a plot ``px`` pixels wide: one per two pixels, within these bounds.
MIN_POINTS, MAX_POINTS = 200, 1000

_MINMAX_LTTB = MinMaxLTTBDownsampler()


def point_budget(px: float | None) -> int:
    """Points per line trace for a plot area ``px`` pixels wide (``px // 2`` clipped to
    ``MIN_POINTS .. MAX_POINTS``; ``MAX_POINTS`` // 2 when the width is unknown)."""
    if px is None or not math.isfinite(px) or px <= 0:
        return MAX_POINTS // 2
    return int(min(MAX_POINTS, max(MIN_POINTS, px // 2)))


@dataclass
class TraceData:
    """Data of one trace: x (epoch s), y, and for bars their width (s) and base.

    ``width`` and ``base`` are a scalar or an array like ``y``.
    """

    x: np.ndarray
    y: np.ndarray
    width: float | np.ndarray | None = None
    base: float | np.ndarray | None = None
    text: list | None = None
    extra: dict = field(default_factory=dict)
    #: a heatmap's columns (one list of row values per x; ``y`` then holds the rows)
    z: list | None = None

    def __len__(self) -> int:
        return len(self.x)


def _heat(windows: pd.DataFrame, order: list[int], bi: np.ndarray, ub: np.ndarray,
          width_s: float) -> TraceData:
    """The load heatmap of a range: per bucket (``ub``, each window's bucket position ``bi``)
    and GPU the mean load of the bucket's windows (NaN skipped; None where none), rows in
    ``heat_rows(order)`` order, blank columns where buckets are missing."""
    y, gpus = heat_rows(order)
    loads = np.full((len(ub), len(gpus)), np.nan)
    for i, g in enumerate(gpus):
        col = f"load_g{g}"
        if col not in windows:
            continue
        v = windows[col].to_numpy(dtype=float)
        ok = np.isfinite(v)
        num = np.bincount(bi, weights=np.where(ok, v, 0.0), minlength=len(ub))
        cnt = np.bincount(bi, weights=ok.astype(float), minlength=len(ub))
        loads[:, i] = np.where(cnt > 0, num / np.where(cnt > 0, cnt, 1.0), np.nan)
    hx, hz = heat_columns(ub * width_s, loads, width_s)
    return TraceData(np.asarray(hx, dtype=float) / 1000.0, np.asarray(y, dtype=float), z=hz)


def downsample_line(x: np.ndarray, y: np.ndarray, n_out: int, max_gap: float
                    ) -> tuple[np.ndarray, np.ndarray]:
    """At most about ``n_out`` points of the line ``(x, y)``, with its holes kept.

    Args:
        x: sorted times (s), shape (n,).
        y: values, shape (n,); NaN where unknown.
        n_out: points to keep (MinMaxLTTB); all of them when there are fewer.
        max_gap: a stretch longer than this (s) between two finite values is a hole.

    Returns:
        ``(x, y)`` float64 arrays: the kept points in time order, with one NaN point in the
        middle of each hole (plotly breaks the line there).  Holes add up to two points each
        beyond ``n_out`` (their edge points).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(y) & np.isfinite(x)
    xv, yv = x[ok], y[ok]
    n = len(xv)
    if n == 0:
        return np.empty(0), np.empty(0)
    if n > n_out >= 4:
        keep = np.asarray(_MINMAX_LTTB.downsample(xv, yv, n_out=int(n_out)), dtype=np.int64)
    else:
        keep = np.arange(n)
    holes = np.flatnonzero(np.diff(xv) > max_gap)
    if len(holes):
        keep = np.union1d(keep, np.concatenate([holes, holes + 1]))
    xs, ys = xv[keep], yv[keep]
    if len(holes):
        # a NaN point after each kept point that ends a hole's left edge
        at = np.flatnonzero(np.isin(keep, holes))
        mid = (xs[at] + xs[at + 1]) / 2.0
        xs = np.insert(xs, at + 1, mid)
        ys = np.insert(ys, at + 1, np.nan)
    return xs, ys


def lanes_from_bins(bins: pd.DataFrame, gpus: list[int], bin_s: float, n_out: int
                    ) -> dict[tuple, TraceData]:
    """Lane traces (``("lane", column, gpu)``) from history bins, downsampled.

    Args:
        bins: ``History.bins`` rows (index ``k``, columns ``(column, gpu)``), sparse or dense.
        gpus: GPU indices.
        bin_s: bin width (s); a bin sits at its centre and a jump of more than one bin is a
            hole.
        n_out: points per trace.
    """
    out: dict[tuple, TraceData] = {}
    k = bins.index.to_numpy(dtype=np.float64) if len(bins) else np.empty(0)
    x = (k + 0.5) * bin_s
    for lane in LANES:
        for g in gpus:
            for col in lane.columns:
                if len(bins) and (col, g) in bins.columns:
                    y = bins[(col, g)].to_numpy(dtype=np.float64) * lane.scale
                else:
                    y = np.full(len(x), np.nan)
                xs, ys = downsample_line(x, y, n_out, 1.5 * bin_s)
                out[("lane", col, g)] = TraceData(xs, ys)
    return out


def lanes_from_samples(samples: pd.DataFrame, gpus: list[int], n_out: int, hold_s: float
                       ) -> dict[tuple, TraceData]:
    """Lane traces from raw samples (``data.schema`` frame): every sample where the range is
    short enough, downsampled otherwise.  A hole is a stretch without a finite value longer
    than ``hold_s`` or three times the GPU's median sample interval, whichever is longer."""
    out: dict[tuple, TraceData] = {}
    by_gpu = {g: f for g, f in samples.groupby("gpu")} if len(samples) else {}
    for lane in LANES:
        for g in gpus:
            f = by_gpu.get(g)
            for col in lane.columns:
                if f is None or col not in f:
                    out[("lane", col, g)] = TraceData(np.empty(0), np.empty(0))
                    continue
                t = f["timestamp"].to_numpy(dtype=np.float64)
                dt = np.diff(t)
                gap = max(hold_s, 3.0 * float(np.median(dt))) if len(dt) else hold_s
                y = f[col].to_numpy(dtype=np.float64) * lane.scale
                xs, ys = downsample_line(t, y, n_out, gap)
                out[("lane", col, g)] = TraceData(xs, ys)
    return out


def bucket_factor(n_windows: int, n_out: int) -> int:
    """Windows per bucket so that ``n_windows`` fit in ``n_out`` buckets (1: no bucketing)."""
    return max(1, math.ceil(n_windows / max(n_out, 1)))


def load_order(windows: pd.DataFrame, gpus: list[int], by: str = "index") -> list[int]:
    """GPU order of the load bands: ``"index"`` (0, 1, ...) or ``"load"`` (busiest first:
    mean ``load_g<i>`` over ``windows``, unknown last, ties by index)."""
    if by != "load" or windows is None or windows.empty:
        return list(gpus)
    means = {}
    for g in gpus:
        col = f"load_g{g}"
        v = windows[col].to_numpy(dtype=float) if col in windows else np.array([])
        v = v[np.isfinite(v)]
        means[g] = float(v.mean()) if len(v) else -math.inf
    return sorted(gpus, key=lambda g: (-means[g], g))


def ribbon_pieces(windows: pd.DataFrame, segments: pd.DataFrame | None, window_s: float
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ribbon's bars for a range drawn one window per bar: the phase segments clipped to
    the windows' span and cut at window edges, then the windows past the segments' end (the
    newest, not settled yet) as they are.

    Args:
        windows: the range's windows (``start``, ``phase``), sorted.
        segments: the segments overlapping them (``start``, ``end``, ``phase``), sorted and
            not overlapping; None or empty: the windows alone.

    Returns:
        ``(start, end, phase)`` arrays, sorted.  Cost follows the windows and segments read.
    """
    w_start = windows["start"].to_numpy(dtype=float) if len(windows) else np.zeros(0)
    w_phase = (windows["phase"].astype(str).to_numpy() if len(windows)
               else np.zeros(0, dtype=str))
    if segments is None or segments.empty or not len(windows):
        return w_start, w_start + window_s, w_phase
    lo, hi = float(w_start.min()), float(w_start.max()) + window_s
    a = np.clip(segments["start"].to_numpy(dtype=float), lo, hi)
    b = np.clip(segments["end"].to_numpy(dtype=float), lo, hi)
    ph = segments["phase"].astype(str).to_numpy()
    keep = b > a + 1e-9
    a, b, ph = a[keep], b[keep], ph[keep]
    # cut at window edges: a bar's centre then lies in the window it belongs to
    ja = np.floor(a / window_s + 1e-9).astype(np.int64)
    jb = np.ceil(b / window_s - 1e-9).astype(np.int64)
    n = np.maximum(jb - ja, 1)
    j = np.repeat(ja, n) + (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n))
    ps = np.maximum(np.repeat(a, n), j * window_s)
    pe = np.minimum(np.repeat(b, n), (j + 1) * window_s)
    pp = np.repeat(ph, n)
    ok = pe > ps + 1e-9
    ps, pe, pp = ps[ok], pe[ok], pp[ok]
    cover = float(b.max()) if len(b) else lo
    tail = w_start + window_s > cover + 1e-9
    ts = np.maximum(w_start[tail], cover)
    return (np.r_[ps, ts], np.r_[pe, w_start[tail] + window_s],
            np.r_[pp, w_phase[tail]].astype(str))


def _ribbon(windows: pd.DataFrame, window_s: float, f: int, bi: np.ndarray,
            counts: np.ndarray, centre: np.ndarray, segments: pd.DataFrame | None
            ) -> dict[tuple, TraceData]:
    """``window_traces``' phase bars and mixed stripes (``("phase", p)``, ``("mixed", p)``)
    for windows in buckets of ``f`` (``bi`` each window's bucket position, ``counts`` the
    windows per bucket, ``centre`` the buckets' centres, epoch s)."""
    out: dict[tuple, TraceData] = {}
    fine = f == 1 and segments is not None and not segments.empty
    if fine:
        ps, pe, pp = ribbon_pieces(windows, segments, window_s)
        for p in RIBBON_PHASES:
            m = pp == p
            out[("phase", p)] = TraceData((ps[m] + pe[m]) / 2.0, np.ones(int(m.sum())),
                                          pe[m] - ps[m], 0.0)
    else:
        # each phase's share of the bucket's time: the mean of its windows' calibrated
        # shares where they carry them, else of their labels (figures.ribbon_shares); a
        # bucket of one window is a whole bar of its phase (its stripes say when mixed)
        if f > 1:
            per = ribbon_shares(windows)
        else:
            phase = windows["phase"].astype(str).to_numpy()
            per = np.column_stack([phase == p for p in RIBBON_PHASES]).astype(float)
        base = np.zeros(len(counts))
        for k, p in enumerate(RIBBON_PHASES):
            share = np.bincount(bi, weights=per[:, k], minlength=len(counts)) / counts
            y = np.where(share > 1e-9, share, np.nan)
            out[("phase", p)] = TraceData(centre, y, f * window_s,
                                          base.copy() if f > 1 else 0.0)
            base += share
    out[("phase", RIBBON_PHASES[0])].extra.update(factor=f, segments=fine)
    # one window per bar: a mixed window's stripes (in buckets the stacked shares show it)
    mixed = mixed_with(windows) if f == 1 else np.full(len(windows), "", dtype=object)
    starts = windows["start"].to_numpy(dtype=float)
    for p in MIXED_PHASES:
        m = mixed == p
        out[("mixed", p)] = TraceData(starts[m] + window_s / 2.0, np.ones(int(m.sum())),
                                      window_s)
    return out


def _no_window_traces(gpus: list[int], window_s: float, order: list[int], f: int
                      ) -> dict[tuple, TraceData]:
    """``window_traces`` of a range without windows: every trace empty (bars ``window_s``
    wide), the heatmap's rows in ``order``, ``extra["factor"]`` ``f``."""
    out: dict[tuple, TraceData] = {}
    empty = TraceData(np.empty(0), np.empty(0))
    for p in RIBBON_PHASES:
        out[("phase", p)] = TraceData(np.empty(0), np.empty(0), window_s, 0.0)
    for p in MIXED_PHASES:
        out[("mixed", p)] = TraceData(np.empty(0), np.empty(0), window_s)
    out[("ribbon_hot",)] = TraceData(np.empty(0), np.empty(0), window_s)
    for g in gpus:
        out[("band", g)] = empty
        out[("share", g)] = empty
        out[("hot", g)] = empty
    out[("heat",)] = TraceData(np.empty(0), np.asarray(heat_rows(order)[0]), z=[])
    out[("phase", RIBBON_PHASES[0])].extra["factor"] = f
    return out


def window_traces(windows: pd.DataFrame, gpus: list[int], window_s: float, n_out: int,
                  order: list[int] | None = None, segments: pd.DataFrame | None = None
                  ) -> dict[tuple, TraceData]:
    """Ribbon, load bands, share strip and hot marks for a range of labelled windows.

    Args:
        windows: ``History.windows`` rows (index ``j``, ``start`` ... ``load_g<i>``).
        gpus: GPU indices.
        window_s: window length (s).
        n_out: buckets / points per trace.
        order: GPU order of the load bands (top first); default ``gpus``.
        segments: the range's 0.1-s phase segments (``History.segments``): drawn instead of
            the windows' phases when every window gets its own bar (``ribbon_pieces``).

    Returns:
        ``{key: TraceData}`` for ``("phase", p)`` (bars: ``y`` the share of the bucket's
        time in ``p`` (``figures.ribbon_shares``: calibrated shares where the windows carry
        them, else their labels), ``base`` the shares of the phases stacked under it,
        ``width`` the bucket; with ``segments`` and one window per bucket, one bar of height
        1 per piece of a segment of phase ``p``, ``width`` an array), ``("mixed", p)`` (one
        window per bucket only: a bar of height 1 over each window whose verdict is mixed
        with ``p``, ``figures.mixed_with``), ``("ribbon_hot",)`` (a bar
        over buckets holding a flagged window), ``("band", g)`` (load line in the GPU's band:
        ``slot + BAND_SCALE * load / 100``),
        ``("share", g)`` (share of the summed load, %) and ``("hot", g)`` (segments over the
        buckets where ``g`` was in the hot set, at its mean share there).
        ``extra["factor"]`` is the windows per bucket and ``extra["segments"]`` whether the
        phase bars are segments.
    """
    order = list(gpus) if order is None else order
    slots = band_slots(order)
    n = len(windows)
    f = bucket_factor(n, n_out)
    out: dict[tuple, TraceData] = {}
    empty = TraceData(np.empty(0), np.empty(0))
    if n == 0:
        return _no_window_traces(gpus, window_s, order, f)
    j = windows.index.to_numpy(dtype=np.int64)
    b = j // f
    starts = windows["start"].to_numpy(dtype=float)
    members = hot_members(windows, gpus)
    flagged = members.any(axis=1)
    ub, counts = np.unique(b, return_counts=True)
    centre = (ub * f + f / 2.0) * window_s
    bi = np.searchsorted(ub, b)
    out.update(_ribbon(windows, window_s, f, bi, counts, centre, segments))
    n_flag = np.bincount(bi, weights=flagged.astype(float), minlength=len(ub))

    out[("ribbon_hot",)] = TraceData(centre, np.where(n_flag > 0, RIBBON_HOT_HEIGHT, np.nan),
                                     f * window_s)
    out[("heat",)] = _heat(windows, order, bi, ub, f * window_s)
    shares = gpu_shares(windows, gpus)
    x = starts + window_s / 2.0
    for g in gpus:
        col = f"load_g{g}"
        load = windows[col].to_numpy(dtype=float) if col in windows else np.full(n, np.nan)
        bx, by = downsample_line(x, load, n_out, 1.5 * window_s)
        out[("band", g)] = TraceData(bx, slots[g] + BAND_SCALE * np.clip(by, 0, 100) / 100.0)
        s = shares[g].to_numpy(dtype=float)
        sx, sy = downsample_line(x, s, n_out, 1.5 * window_s)
        out[("share", g)] = TraceData(sx, sy)
        is_hot = members[:, gpus.index(g)]
        if is_hot.any():
            hs = np.bincount(bi, weights=np.where(is_hot, np.nan_to_num(s), 0.0),
                             minlength=len(ub))
            hn = np.bincount(bi, weights=is_hot.astype(float), minlength=len(ub))
            sel = np.flatnonzero(hn > 0)
            lo = ub[sel] * f * window_s
            level = hs[sel] / hn[sel]
            hx = np.column_stack([lo, lo + f * window_s, np.full(len(sel), np.nan)]).ravel()
            hy = np.column_stack([level, level, np.full(len(sel), np.nan)]).ravel()
            out[("hot", g)] = TraceData(hx, hy)
        else:
            out[("hot", g)] = empty
    return out


def server_traces(cells: pd.DataFrame, window_s: float, n_out: int) -> dict[tuple, TraceData]:
    """Server lane traces for a range of cells (``History.cells``): lines downsampled like the
    lanes; prefill markers one per cell with a batch while they fit in ``n_out``, else summed
    over buckets of ``bucket_factor`` cells (tokens and batches added up)."""

    out: dict[tuple, TraceData] = {}
    c = cells.index.to_numpy(dtype=np.float64) if len(cells) else np.empty(0)
    x = (c + 0.5) * window_s
    for line in SERVER_LINES:
        y = cells[line.key].to_numpy(dtype=float) if len(cells) else np.empty(0)
        xs, ys = downsample_line(x, y, n_out, 1.5 * window_s)
        out[("server", line.key)] = TraceData(xs, ys)
    pf = cells[cells["pf_batches"] > 0] if len(cells) else cells
    f = bucket_factor(len(pf), n_out)
    if len(pf) and f > 1:
        b = pf.index.to_numpy(dtype=np.int64) // f
        g = pf.groupby(b)
        pf = pd.DataFrame({"pf_t": g["pf_t"].min(), "pf_new": g["pf_new"].sum(min_count=1),
                           "pf_cached": g["pf_cached"].sum(min_count=1),
                           "pf_batches": g["pf_batches"].sum()})
    px = pf["pf_t"].to_numpy(dtype=float) if len(pf) else np.empty(0)
    cls = [prefill_size_class(v) for v in (pf["pf_new"].to_numpy(dtype=float)
                                          if len(pf) else [])]
    text = []
    for r in pf.itertuples() if len(pf) else []:
        new = f"{r.pf_new:,.0f}" if math.isfinite(r.pf_new) else "n/a"
        text.append(f"prefill: {int(r.pf_batches)} batch{'es' if r.pf_batches > 1 else ''}, "
                    f"{new} new tokens")
    for i in range(len(PREFILL_SIZES)):
        m = np.array([k == i for k in cls], dtype=bool)
        out[("prefill", i)] = TraceData(px[m] if len(px) else np.empty(0),
                                        np.full(int(m.sum()), MARKER_Y),
                                        text=[t for t, mm in zip(text, m) if mm])
    return out
