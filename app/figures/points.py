"""The points every trace of the live figure is drawn from (``trace_points``): lanes from
bins, the ribbon, bands, heatmap and strip from windows, the server lane from cells, the
"labelling…" marks; plain lists, shared by the whole figure (``plot.build_figure``) and its
``extendData`` (``plot.extend_data``).  Nothing here builds a plotly object or reads a store.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tealeaves.app.figures.geometry import (
    BAND_SCALE,
    LABELLING_ROWS,
    LABELLING_TEXT,
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
from tealeaves.app.figures.header import fmt_value, hot_set_text
from tealeaves.app.figures.series.binning import (
    gpu_shares,
    hot_members,
    mixed_with,
    prefill_size_class,
)
from tealeaves.data.schema import entity_name


def _ms(seconds: np.ndarray) -> list[float]:
    return np.round(np.asarray(seconds, dtype=float) * 1000.0, 1).tolist()


def _values(a: np.ndarray, digits: int = 3) -> list:
    a = np.asarray(a, dtype=float)
    return [None if not math.isfinite(v) else round(v, digits) for v in a.tolist()]


def _segments(starts: np.ndarray, window_s: float, y: np.ndarray,
              text: list[str]) -> tuple[list, list, list]:
    """Three points per window: a flat segment across it at ``y`` and a break (None)."""
    x: list = []
    ys: list = []
    txt: list = []
    for s0, v, t in zip(np.asarray(starts, dtype=float), _values(y, 2), text):
        x += [round(s0 * 1000.0, 1), round((s0 + window_s) * 1000.0, 1), None]
        ys += [v, v, None]
        txt += [t, t, ""]
    return x, ys, txt


def heat_columns(starts: np.ndarray, loads: np.ndarray, window_s: float,
                 after_j: int | None = None) -> tuple[list, list]:
    """The load heatmap's columns: ``(x, z)`` with ``x`` the windows' centres (epoch ms) and
    ``z`` one list of loads (0-100 %, one decimal, None where unknown) per window, rows in
    ``heat_rows`` order.

    Args:
        starts: window starts (epoch s), ascending, shape ``(n,)``.
        loads: load per window and row, shape ``(n, rows)``.
        window_s: window length (s).
        after_j: index of the window the page expects next (``floor(start / window_s)``);
            None: unknown.

    Blank columns (every row None) go where windows are missing (a pause, a session's end,
    or before the first new window when it is not ``after_j``): one in the first missing
    window and one in the last (``heat_blanks``).  plotly.js widens a heatmap's cells to
    meet their neighbours, so without them the windows either side of a gap would be painted
    across it.
    """
    x: list = []
    z: list = []
    if not len(starts):
        return x, z
    j = np.floor(np.asarray(starts, dtype=float) / window_s + 1e-6).astype(np.int64)
    vals = np.asarray(loads, dtype=float)
    vals = np.round(np.clip(np.where(np.isfinite(vals), vals, np.nan), 0.0, 100.0), 1)
    blank = [None] * vals.shape[1]
    prev = None if after_j is None else int(after_j) - 1
    for jj, row in zip(j.tolist(), vals.tolist()):
        if prev is not None and jj > prev + 1:
            for b in sorted({prev + 1, jj - 1}):  # the gap's first and last missing window
                x.append(round((b + 0.5) * window_s * 1000.0, 1))
                z.append(blank)
        x.append(round((jj + 0.5) * window_s * 1000.0, 1))
        z.append([None if not math.isfinite(v) else v for v in row])
        prev = jj
    return x, z


def heat_blanks(j: np.ndarray) -> int:
    """Blank columns ``heat_columns`` puts between windows of indices ``j`` (ascending): one
    per gap of a single missing window, two per longer gap."""
    d = np.diff(np.asarray(j, dtype=np.int64))
    return int(np.sum(d == 2) + 2 * np.sum(d > 2))


def _server_points(cells: pd.DataFrame, cell_s: float) -> dict[tuple, tuple[list, list, list]]:
    """``{trace key: (x, y, text)}`` of the server lane's traces, one point per cell."""
    out: dict[tuple, tuple[list, list, list]] = {}
    n = len(cells)
    cx = _ms((cells.index.to_numpy(dtype=float) + 0.5) * cell_s) if n else []
    for line in SERVER_LINES:
        vals = cells[line.key].to_numpy(dtype=float) if n else np.array([])
        out[("server", line.key)] = (cx, _values(vals, 2), [])
    pf_t = cells["pf_t"].to_numpy(dtype=float) if n else np.array([])
    has = np.isfinite(pf_t)
    px = [round(t * 1000.0, 1) if h else x for t, h, x in zip(pf_t, has, cx)]
    text = []
    cls = []
    for r, h in zip(cells.itertuples(), has) if n else []:
        if not h:
            text.append("")
            cls.append(-1)
            continue
        batches = f"{r.pf_batches} batches" if r.pf_batches > 1 else "1 batch"
        text.append(f"prefill {batches}: {fmt_value(r.pf_new, ',.0f')} new + "
                    f"{fmt_value(r.pf_cached, ',.0f')} cached tok, queue {fmt_value(r.pf_queue, '.0f')}, "
                    f"running {fmt_value(r.pf_running, '.0f')}")
        cls.append(prefill_size_class(r.pf_new))
    for i in range(len(PREFILL_SIZES)):
        mine = [k == i for k in cls]
        out[("prefill", i)] = (px, [MARKER_Y if m else None for m in mine],
                               [t if m else "" for t, m in zip(text, mine)])
    return out


def trace_points(bins: pd.DataFrame, windows: pd.DataFrame, gpus: list[int], bin_s: float,
            window_s: float, server: pd.DataFrame | None = None,
            order: list[int] | None = None, slots: tuple | None = None,
            hop_s: float = 0.1, after_j: int | None = None,
            labelling: dict[str, tuple[float, float]] | None = None
            ) -> dict[tuple, tuple[list, list, list]]:
    """``{trace key: (x, y, text)}`` for every key of ``trace_keys(gpus, server is not None)``:
    one point per bin (lanes) or window (the rest), ``None`` where unknown.  ``order`` is the
    load bands' GPU order (top first; default ``gpus``).  With ``slots`` (``(slot indices,
    phases)`` of ``hop_s`` slots, ``classifier.incremental.segment_slots``) the ribbon's phase
    bars are one point per slot instead of per window.  The heatmap's entry is ``(x, z columns, [])``
    (``heat_columns``; ``after_j`` as there).  ``labelling`` maps a ``LABELLING_ROWS`` row
    to ``(t_from, t_to)`` (epoch s): its "labelling…" mark's stretch (``labelling_points``);
    a row not in it gets no points.
    """

    out = _lane_points(bins, gpus, bin_s)
    wc = _window_columns(windows, gpus, window_s)
    out.update(_ribbon_points(windows, wc, slots, hop_s))
    out.update(_gpu_points(windows, gpus, wc, window_s, order, after_j))
    if server is not None:
        out.update(_server_points(server, window_s))
    top = {"ribbon": 1.0, "bands": max(len(gpus), 1) - 0.05, "strip": share_axis_top(len(gpus))}
    for r in LABELLING_ROWS:
        span = (labelling or {}).get(r)
        out[("labelling", r)] = ([], [], []) if span is None else labelling_points(
            span[0], span[1], top[r])
    return out


def _lane_points(bins: pd.DataFrame, gpus: list[int], bin_s: float
                 ) -> dict[tuple, tuple[list, list, list]]:
    """``trace_points``' lane traces: one point per bin and GPU, NaN (a gap) where unknown."""
    out: dict[tuple, tuple[list, list, list]] = {}
    bx = _ms((bins.index.to_numpy(dtype=float) + 0.5) * bin_s) if len(bins) else []
    for lane in LANES:
        for g in gpus:
            for col in lane.columns:
                if len(bins) and (col, g) in bins.columns:
                    vals = bins[(col, g)].to_numpy(dtype=float) * lane.scale
                else:  # no reading of this lane (a source without it): a gap, not an error
                    vals = np.full(len(bx), np.nan)
                out[("lane", col, g)] = (bx, _values(vals), [])
    return out


def _window_columns(windows: pd.DataFrame, gpus: list[int], window_s: float) -> dict:
    """The windows' columns ``trace_points`` draws from: ``n``, ``starts`` (epoch s), ``wx``
    (window centres, ms), ``phase``, ``members`` (hot set, windows x GPUs), ``flagged`` and
    ``why`` (the hot set's hover line, empty when not flagged)."""
    n = len(windows)
    if n:
        starts = windows["start"].to_numpy(dtype=float)
        wx = _ms(starts + window_s / 2.0)
        phase = windows["phase"].astype(str).to_numpy()
        ratio = windows["imbalance_ratio"].to_numpy(dtype=float)
        members = hot_members(windows, gpus)
        flagged = members.any(axis=1)
        tax = windows["straggler_tax"].to_numpy(dtype=float)
        sets = [tuple(g for g, m in zip(gpus, row) if m) for row in members]
        nan = pd.Series(np.nan, index=windows.index)
        hs = windows.get("hot_share", nan).to_numpy(dtype=float)
        cs = windows.get("cold_share", nan).to_numpy(dtype=float)
        set_text = [hot_set_text(st, h, c) for st, h, c in zip(sets, hs, cs)]
    else:
        wx, phase, starts = [], np.array([], dtype=str), np.array([], dtype=float)
        ratio = tax = np.array([], dtype=float)
        members = np.zeros((0, len(gpus)), dtype=bool)
        flagged = np.array([], dtype=bool)
        set_text = []
    why = [f"hot set {st}: max/mean work {fmt_value(r, '.2f')}x, straggler tax {fmt_value(t, '.0%')}"
           if f else "" for f, st, r, t in zip(flagged, set_text, ratio, tax)]
    return {"n": n, "starts": starts, "wx": wx, "phase": phase, "members": members,
            "flagged": flagged, "why": why}


def _ribbon_points(windows: pd.DataFrame, wc: dict, slots: tuple | None, hop_s: float
                   ) -> dict[tuple, tuple[list, list, list]]:
    """``trace_points``' ribbon traces (phase bars per window or per slot, mixed stripes, the
    imbalance bar) and the empty selected-window and screenshot traces."""
    out: dict[tuple, tuple[list, list, list]] = {}
    wx, phase, flagged = wc["wx"], wc["phase"], wc["flagged"]
    # The phase bars hold only their own slots or windows, no None placeholders: plotly
    # styles every point of a bar trace, gaps included, and four traces of placeholders cost
    # a followed eight-GPU page about 80 ms per redraw (docs/benchmarks.md).
    if slots is not None:
        idx, sphase = slots
        sx = np.asarray(_ms((np.asarray(idx, dtype=float) + 0.5) * hop_s), dtype=float)
        sphase = np.asarray(sphase, dtype=object).astype(str)
        for p in RIBBON_PHASES:
            m = sphase == p
            out[("phase", p)] = (sx[m].tolist(), [1.0] * int(m.sum()), [])
    else:
        wxa = np.asarray(wx, dtype=float)
        for p in RIBBON_PHASES:
            m = phase == p
            out[("phase", p)] = (wxa[m].tolist(), [1.0] * int(m.sum()), [])
    # a mixed window: stripes of the phase it is mixed with over its bar (its own points only)
    mixed = mixed_with(windows) if wc["n"] else np.array([], dtype=object)
    for p in MIXED_PHASES:
        m = mixed == p
        out[("mixed", p)] = (np.asarray(wx, dtype=float)[m].tolist(), [1.0] * int(m.sum()), [])
    out[("ribbon_hot",)] = (wx, [RIBBON_HOT_HEIGHT if f else None for f in flagged], [])
    out[("selected",)] = ([], [], [])
    out[("shots",)] = ([], [], [])
    return out


def _gpu_points(windows: pd.DataFrame, gpus: list[int], wc: dict, window_s: float,
                order: list[int] | None, after_j: int | None
                ) -> dict[tuple, tuple[list, list, list]]:
    """``trace_points``' per-GPU window traces: the load heatmap, the load bands (in ``order``),
    the shares of the imbalance strip and their hot highlights."""
    out: dict[tuple, tuple[list, list, list]] = {}
    n, starts, wx, members, why = wc["n"], wc["starts"], wc["wx"], wc["members"], wc["why"]
    band_rows = band_slots(list(gpus) if order is None else list(order))
    _, heat_gpus = heat_rows(list(gpus) if order is None else list(order))
    heat_load = np.column_stack([
        windows[f"load_g{g}"].to_numpy(dtype=float) if n and f"load_g{g}" in windows
        else np.full(n, np.nan) for g in heat_gpus]) if heat_gpus else np.zeros((n, 0))
    hx, hz = heat_columns(starts, heat_load, window_s, after_j)
    out[("heat",)] = (hx, hz, [])
    shares = gpu_shares(windows, gpus) if n else pd.DataFrame(columns=gpus, dtype=float)
    for g in gpus:
        col = f"load_g{g}"
        load = (windows[col].to_numpy(dtype=float) if n and col in windows
                else np.full(n, np.nan))
        out[("band", g)] = (wx, _values(band_rows[g] + BAND_SCALE * np.clip(load, 0, 100) / 100, 3),
                            [])
        s = shares[g].to_numpy(dtype=float) if n else np.array([])
        out[("share", g)] = (wx, _values(s, 2), [])
        is_hot = members[:, gpus.index(g)] if n else np.array([], dtype=bool)
        out[("hot", g)] = _segments(starts, window_s, np.where(is_hot, s, np.nan),
                                    [f"{entity_name(g)} hot · {t}" if h else ""
                                     for t, h in zip(why, is_hot)])
    return out


def labelling_points(t_from: float, t_to: float, top: float) -> tuple[list, list, list]:
    """The closed outline ``(x ms, y, text)`` of a "labelling…" mark: a box from ``t_from`` to
    ``t_to`` (epoch s; none wide when ``t_to <= t_from``) and from 0 to ``top`` in its row's
    y units.  Always five points, so a live ``extendData`` with ``maxPoints`` 5 replaces it."""
    a = float(t_from) * 1000.0
    b = max(a, float(t_to) * 1000.0)
    return [a, b, b, a, a], [0.0, 0.0, top, top, 0.0], [LABELLING_TEXT] * 5


# -- the figure ------------------------------------------------------------------------------


def share_axis_top(n_gpus: int) -> float:
    """Top of the share strip's y axis, %: three fair shares (100 for 1-3 GPUs), so eight
    GPUs' 12.5 % lines are not squashed at the bottom of a 0-100 axis."""
    return 100.0 if n_gpus <= 3 else 300.0 / n_gpus
