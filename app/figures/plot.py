"""Pure figure builders for the dashboard: frames in, ``go.Figure`` or ``extendData`` out.

The live figure is ONE plotly figure with shared-x subplots, top to bottom:

1. the **phase ribbon**: one coloured bar per classifier window (idle / prefill / decode), or
   per 0.1-s slot of the finer phase segments (``classifier.segments``: labels that change
   where the counters change) when ``slots`` are given, diagonal stripes in the colour of the
   phase a window is mixed with where its verdict is mixed (no phase holds 70 % of its time),
   and a thin red bar above windows flagged imbalanced;
2. one **lane per metric** (``LANES``: SM, tensor and DRAM activity in %, PCIe tx/rx in MB/s,
   board power in W) with one line per GPU (PCIe: two, tx solid and rx dotted);
3. the **imbalance strip**: each GPU's share of the summed load per window (%), a fair-share line
   at ``100 / n_gpus`` and a red highlight on the share of every GPU of the window's hot set
   in every flagged window (its hover names the hot set and its shares of the work).

When the store holds inference-server signals (log events or ``/metrics`` scrapes) a **server
lane** sits right under the ribbon (``rows(server=True)``): generation tokens/s (and prompt
tokens/s where the server reports it) on the left axis, running requests and speculative accept
length on the right axis, and one **prefill marker** per server prefill batch (sized by its new
tokens) along the lane's top edge, under the ribbon's prefill bands.  The server lane is drawn
from **cells** (``server_cells``): one point per ``window_s`` cell and series, so it is appended
with ``extendData`` like the window traces.

The x axis is real time: every ``x`` here is ``epoch seconds * 1000``.  plotly.js reads a number
on a date axis as milliseconds since the epoch and shows it in the *browser's* time zone (it goes
through a JS ``Date``; plotly.js has no time-zone setting), so the axis title names that zone
(``time_zone``, which the page reports) and everything else on the page uses it too.

Lanes are drawn from **bins**: the samples' mean per ``bin_s``-second bin and GPU
(``bin_lanes``).  Binning gives every lane trace exactly one point per bin, so the live view can
append with ``extendData`` and bound every trace with the same ``maxPoints`` and still have all
lanes cover the same time span.  GPM columns (``sm_active`` ...) are NaN on the samples between
two GPM refreshes; the bin mean skips NaN, and a bin left without any reading holds the previous
bin's value for at most ``hold_s`` seconds.  Longer holes stay NaN and are sent as ``None``:
they show as gaps, never as 0.

Nothing here touches a store, a clock or Dash callbacks; ``app.dashboard`` does that.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tealeaves.app.figures.binning import gpu_shares, hot_members, mixed_with, prefill_size_class
from tealeaves.app.figures.geometry import (
    BAND_SCALE,
    BAND_TICK,
    COLUMN_DASH,
    COLUMN_SHORT,
    HEAT_COLORSCALE,
    HOT_COLOR,
    LABELLING_ROWS,
    LABELLING_TEXT,
    LANES,
    MARKER_Y,
    MIXED_PATTERN,
    MIXED_PHASES,
    PHASE_COLORS,
    PREFILL_SIZES,
    RIBBON_HOT_BASE,
    RIBBON_HOT_HEIGHT,
    RIBBON_PHASES,
    SERVER_LINES,
    SHOT_COLOR,
    SHOT_Y,
    Rows,
    band_slots,
    gpu_color,
    heat_rows,
    is_window_key,
    rows,
    trace_keys,
)
from tealeaves.app.figures.header import fmt_value, hot_set_text
from tealeaves.data.schema import entity_name, entity_short, is_mig


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


def _points(bins: pd.DataFrame, windows: pd.DataFrame, gpus: list[int], bin_s: float,
            window_s: float, server: pd.DataFrame | None = None,
            order: list[int] | None = None, slots: tuple | None = None,
            hop_s: float = 0.1, after_j: int | None = None,
            labelling: dict[str, tuple[float, float]] | None = None
            ) -> dict[tuple, tuple[list, list, list]]:
    """``{trace key: (x, y, text)}`` for every key of ``trace_keys(gpus, server is not None)``:
    one point per bin (lanes) or window (the rest), ``None`` where unknown.  ``order`` is the
    load bands' GPU order (top first; default ``gpus``).  With ``slots`` (``(slot indices,
    phases)`` of ``hop_s`` slots, ``history.segment_slots``) the ribbon's phase bars are one
    point per slot instead of per window.  The heatmap's entry is ``(x, z columns, [])``
    (``heat_columns``; ``after_j`` as there).  ``labelling`` maps a ``LABELLING_ROWS`` row
    to ``(t_from, t_to)`` (epoch s): its "labelling…" mark's stretch (``labelling_points``);
    a row not in it gets no points.
    """

    band_rows = band_slots(list(gpus) if order is None else list(order))
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
    mixed = mixed_with(windows) if n else np.array([], dtype=object)
    for p in MIXED_PHASES:
        m = mixed == p
        out[("mixed", p)] = (np.asarray(wx, dtype=float)[m].tolist(), [1.0] * int(m.sum()), [])
    why = [f"hot set {st}: max/mean work {fmt_value(r, '.2f')}x, straggler tax {fmt_value(t, '.0%')}"
           if f else "" for f, st, r, t in zip(flagged, set_text, ratio, tax)]
    out[("ribbon_hot",)] = (wx, [RIBBON_HOT_HEIGHT if f else None for f in flagged], [])
    out[("selected",)] = ([], [], [])
    out[("shots",)] = ([], [], [])
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
    if server is not None:
        out.update(_server_points(server, window_s))
    top = {"ribbon": 1.0, "bands": max(len(gpus), 1) - 0.05, "strip": share_axis_top(len(gpus))}
    for r in LABELLING_ROWS:
        span = (labelling or {}).get(r)
        out[("labelling", r)] = ([], [], []) if span is None else labelling_points(
            span[0], span[1], top[r])
    return out


def labelling_points(t_from: float, t_to: float, top: float) -> tuple[list, list, list]:
    """The closed outline ``(x ms, y, text)`` of a "labelling…" mark: a box from ``t_from`` to
    ``t_to`` (epoch s; none wide when ``t_to <= t_from``) and from 0 to ``top`` in its row's
    y units.  Always five points, so a live ``extendData`` with ``maxPoints`` 5 replaces it."""
    a = float(t_from) * 1000.0
    b = max(a, float(t_to) * 1000.0)
    return [a, b, b, a, a], [0.0, 0.0, top, top, 0.0], [LABELLING_TEXT] * 5


# -- the figure ------------------------------------------------------------------------------


def build_figure(bins: pd.DataFrame, windows: pd.DataFrame, gpus: list[int], *,
                 bin_s: float = 0.1, window_s: float = 0.5, height: int = 780,
                 uirevision: str = "tealeaves-live",
                 server: pd.DataFrame | None = None,
                 order: list[int] | None = None,
                 shots: pd.DataFrame | None = None,
                 time_zone: str = "UTC", slots: tuple | None = None,
                 hop_s: float = 0.1,
                 labelling: dict[str, tuple[float, float]] | None = None) -> go.Figure:
    """The whole live figure from binned lanes and classifier windows.

    Args:
        bins: ``bin_lanes`` output (may be empty).
        windows: ``classify_samples`` output (may be empty); ``start`` in epoch s.
        gpus: GPU indices, one line per lane and GPU, in this order.
        bin_s: width of the bins (s), for the bin-centre x values.
        window_s: classifier window length (s), the ribbon's bar width and the server cells'
            width.
        height: figure height in pixels.
        uirevision: kept constant so zoom and legend toggles survive updates.
        server: ``server_cells`` output (cells of ``window_s``; may be empty) to draw the
            server lane under the ribbon; None: no server lane (``rows(False)``).
        order: GPU order of the load bands, top first (default ``gpus``).
        shots: ``SampleStore.screenshots`` rows to mark on the ribbon (None: none).
        time_zone: IANA name of the zone the browser shows the time axis in (its title).
        slots: ``(slot indices, phases)`` of the phase segments' ``hop_s`` slots: the
            ribbon's phase bars are one per slot (``hop_s`` wide) instead of per window.
        labelling: ``{row: (t_from, t_to)}`` epoch s, a followed view's "labelling…" marks
            (``LABELLING_ROWS``: from where the row's labels stop to the view's edge); None:
            none drawn (a range view).

    Returns:
        A figure whose traces follow ``trace_keys(gpus, server is not None)``; x values are
        epoch milliseconds on date axes.
    """
    has_server = server is not None
    fig, R = _subplots(gpus, has_server)
    order = list(gpus) if order is None else list(order)
    pts = _points(bins, windows, gpus, bin_s, window_s, server, order, slots, hop_s,
                  labelling=labelling)
    widths = (window_s * 1000.0, (hop_s if slots is not None else window_s) * 1000.0)
    axes = _server_axes(fig, R) if has_server else {}
    for key in trace_keys(gpus, has_server):
        x, y, text = pts[key]
        if key[0] in ("server", "prefill"):
            trace, where = _server_trace(key, x, y, text, R, axes)
        elif key[0] == "heat":
            trace, where = heat_trace(x, y, order), {"row": R.bands, "col": 1}
        else:
            trace, where = _view_trace(key, x, y, text, R, widths, shots)
        fig.add_trace(trace, **where)
    _style(fig, gpus, height, uirevision, R, order, time_zone)
    for shape in shot_lines(shots):
        fig.add_shape(shape)
    return fig


def _subplots(gpus: list[int], has_server: bool) -> tuple[go.Figure, Rows]:
    """The empty figure: one shared-x subplot per row of ``rows(has_server)``, the bands' height
    growing with the number of GPUs."""
    R = rows(has_server)
    n_lanes = len(LANES)
    band_h = min(0.24, max(0.08, 0.03 * len(gpus)))
    if has_server:
        heights = ([0.045, 0.11, band_h] + [(0.72 - band_h) / n_lanes] * n_lanes + [0.125])
        specs = [[{}], [{"secondary_y": True}]] + [[{}]] * (n_lanes + 2)
    else:
        heights = [0.05, band_h] + [(0.82 - band_h) / n_lanes] * n_lanes + [0.13]
        specs = None
    fig = make_subplots(rows=R.n, cols=1, shared_xaxes=True, vertical_spacing=0.016,
                        row_heights=heights, specs=specs)
    return fig, R


def _server_axes(fig: go.Figure, R: Rows) -> dict[str, str]:
    """Add the server lane's two overlaying y axes (prefill markers on 0..1, accept length on
    its own right-hand scale); returns their names and the lane's x axis name."""
    sub = fig.get_subplot(R.server, 1)
    n_y = sum(1 for k in fig.layout if str(k).startswith("yaxis"))
    primary = sub.yaxis.plotly_name.replace("axis", "")
    fig.layout[f"yaxis{n_y + 1}"] = {"overlaying": primary, "range": [0, 1],
                                     "visible": False, "fixedrange": True}
    acc = next(sl for sl in SERVER_LINES if sl.key == "accept_len")
    fig.layout[f"yaxis{n_y + 2}"] = {  # accept length: its own scale, right of the req axis
        "overlaying": primary, "side": "right", "anchor": "free", "position": 1.0,
        "autoshift": False, "shift": 40, "rangemode": "tozero", "showgrid": False,
        "fixedrange": True, "nticks": 3, "zeroline": False,
        "tickfont": {"size": 10, "color": acc.color},
        "title": {"text": "tok/step", "font": {"size": 10, "color": acc.color},
                  "standoff": 2}}
    return {"marker": f"y{n_y + 1}", "accept": f"y{n_y + 2}",
            "x": sub.xaxis.plotly_name.replace("axis", "")}


def heat_trace(x, z, order: list[int]) -> go.Heatmap:
    """The load heatmap under the bands: ``z`` one column per window (``heat_columns``), a
    row per GPU behind its band (``heat_rows(order)``); no hover of its own (the cursor panel
    names every GPU's values)."""
    y, _ = heat_rows(order)
    return go.Heatmap(x=x, y=y, z=z, transpose=True, colorscale=[list(c) for c in HEAT_COLORSCALE],
                      zmin=0.0, zmax=100.0, showscale=False, hoverinfo="skip", ygap=1,
                      name="load heatmap", showlegend=False)


def _view_trace(key: tuple, x, y, text, R: Rows, widths: tuple[float, float],
                shots: pd.DataFrame | None) -> tuple[go.Bar | go.Scatter, dict]:
    """The trace of one ribbon, band, lane or strip key and where it goes (``add_trace``
    keywords); ``widths`` = (window bar width, phase bar width) in ms."""
    kind = key[0]
    width_ms, phase_width_ms = widths
    if kind == "labelling":  # hatched grey: labels not made yet, the samples are there
        row = {"ribbon": R.ribbon, "bands": R.bands, "strip": R.strip}[key[1]]
        return go.Scatter(
            x=x, y=y, text=text, mode="lines", fill="toself", name="labelling…",
            fillcolor="rgba(148,163,184,0.22)",
            fillpattern={"shape": "/", "fgcolor": "#94a3b8", "bgcolor": "rgba(0,0,0,0)",
                         "size": 7, "solidity": 0.25},
            line={"width": 0.8, "color": "#94a3b8", "dash": "dot"}, showlegend=False,
            # the page's hover panel says it (plotly's own label, hovermode "x" with no
            # distance limit, would stand over the whole figure)
            hoverinfo="skip", meta=LABELLING_TEXT), {"row": row, "col": 1}
    if kind == "phase":
        p = key[1]
        return go.Bar(
            x=x, y=y, text=text, base=0.0, width=phase_width_ms, name=p,
            marker={"color": PHASE_COLORS[p], "line": {"width": 0}},
            textposition="none", hoverinfo="none",
            showlegend=False, legendgroup="phases"), {"row": R.ribbon, "col": 1}
    if kind == "mixed":  # stripes in the colour of the phase the window is mixed with
        p = key[1]
        return go.Bar(
            x=x, y=y, text=text, base=0.0, width=width_ms, name=f"mixed with {p}",
            marker={"color": "rgba(0,0,0,0)", "line": {"width": 0},
                    "pattern": {**MIXED_PATTERN, "fgcolor": PHASE_COLORS[p],
                                "bgcolor": "rgba(0,0,0,0)", "fgopacity": 1.0}},
            textposition="none", hoverinfo="none",
            showlegend=False, legendgroup="phases"), {"row": R.ribbon, "col": 1}
    if kind == "ribbon_hot":
        return go.Bar(
            x=x, y=y, text=text, base=RIBBON_HOT_BASE, width=width_ms,
            name="imbalanced", marker={"color": HOT_COLOR, "line": {"width": 0}},
            textposition="none", hoverinfo="none",
            showlegend=False), {"row": R.ribbon, "col": 1}
    if kind == "selected":
        return go.Bar(
            x=x, y=y, text=text, base=-0.06, width=width_ms, name="selected window",
            marker={"color": "rgba(0,0,0,0)", "line": {"width": 2.5, "color": "#111827"}},
            hoverinfo="skip", showlegend=False), {"row": R.ribbon, "col": 1}
    if kind == "shots":
        sx, sy, stext, sdata = shot_points(shots)
        return go.Scatter(
            x=sx, y=sy, text=stext, customdata=sdata, mode="markers", name="screenshot",
            marker={"symbol": "triangle-down", "size": 13, "color": SHOT_COLOR,
                    "line": {"width": 1, "color": "white"}},
            cliponaxis=False, showlegend=False,
            hovertemplate="screenshot %{text}<br>click to open<extra></extra>"), {
                "row": R.ribbon, "col": 1}
    if kind == "band":
        g = key[1]
        return go.Scatter(
            x=x, y=y, text=text, mode="lines", name=f"{entity_name(g)} load", legendgroup=f"gpu{g}",
            showlegend=False, connectgaps=False, hoverinfo="none",
            line={"color": gpu_color(g), "width": 1.4}, fill="none"), {"row": R.bands, "col": 1}
    if kind == "lane":
        col, g = key[1], key[2]
        li = next(i for i, lane in enumerate(LANES) if col in lane.columns)
        lane = LANES[li]
        suffix = f" {COLUMN_SHORT[col]}" if col in COLUMN_SHORT else ""
        return go.Scatter(
            x=x, y=y, text=text, mode="lines", name=entity_name(g),
            legendgroup=f"gpu{g}", showlegend=(li == 0 and col == lane.columns[0]),
            line={"color": gpu_color(g), "width": 1.4, "dash": COLUMN_DASH.get(col, "solid")},
            connectgaps=False, hoverinfo="none", meta=f"{entity_name(g)}{suffix}"), {
                "row": R.first_lane + li, "col": 1}
    g = key[1]
    if kind == "share":
        return go.Scatter(
            x=x, y=y, text=text, mode="lines", name=f"{entity_name(g)} share",
            legendgroup=f"gpu{g}", showlegend=False, connectgaps=False,
            line={"color": gpu_color(g), "width": 1.6}, hoverinfo="none"), {
                "row": R.strip, "col": 1}
    # "hot": a wide translucent red stroke under a hot GPU's share
    return go.Scatter(
        x=x, y=y, text=text, mode="lines", name=f"{entity_name(g)} hot",
        legendgroup=f"gpu{g}", showlegend=False, connectgaps=False, opacity=0.45,
        line={"color": HOT_COLOR, "width": 7}, hoverinfo="skip"), {"row": R.strip, "col": 1}


def _server_trace(key: tuple, x, y, text, R: Rows, axes: dict[str, str]
                  ) -> tuple[go.Scatter, dict]:
    """The trace of one server-lane key (a series or a prefill-size class of markers) and where
    it goes (``add_trace`` keywords); ``axes`` is ``_server_axes``' answer."""
    if key[0] == "server":
        line = next(sl for sl in SERVER_LINES if sl.key == key[1])
        fmt = ".2f" if line.key == "accept_len" else ",.0f"
        trace = go.Scatter(
            x=x, y=y, text=text, mode="lines+markers", name=f"server {line.title}",
            showlegend=True, connectgaps=False,
            line={"color": line.color, "width": 1.6, "dash": line.dash, "shape": "hv"},
            marker={"size": 3, "color": line.color}, hoverinfo="none",
            meta=f"server {line.title} ({fmt}, {line.unit})")
        if line.key == "accept_len":
            return trace.update(xaxis=axes["x"], yaxis=axes["accept"]), {}
        return trace, {"row": R.server, "col": 1, "secondary_y": line.right}
    i = key[1]  # prefill markers along the top of the server lane
    _, label, size = PREFILL_SIZES[i]
    return go.Scatter(
        x=x, y=y, text=text, mode="markers",
        name=("server prefill batch (size: new tokens)" if i == 1
              else f"server prefill {label} tokens"),
        legendgroup="prefill", showlegend=i == 1, xaxis=axes["x"], yaxis=axes["marker"],
        marker={"size": size, "color": PHASE_COLORS["prefill"], "symbol": "circle",
                "opacity": 0.9, "line": {"color": "#7a3d00", "width": 1}},
        cliponaxis=False, hovertemplate="%{text}<extra></extra>"), {}


def share_axis_top(n_gpus: int) -> float:
    """Top of the share strip's y axis, %: three fair shares (100 for 1-3 GPUs), so eight
    GPUs' 12.5 % lines are not squashed at the bottom of a 0-100 axis."""
    return 100.0 if n_gpus <= 3 else 300.0 / n_gpus


def base_shapes(fig: go.Figure, gpus: list[int], R: Rows) -> list[dict]:
    """The figure's fixed shapes: the fair-share line of the load-share strip (``100 / n``
    %), none without GPUs."""
    if not gpus:
        return []
    sub = fig.get_subplot(R.strip, 1)
    xa, ya = sub.xaxis.plotly_name.replace("axis", ""), sub.yaxis.plotly_name.replace("axis", "")
    fair = 100.0 / len(gpus)
    return [{"type": "line", "xref": f"{xa} domain", "x0": 0, "x1": 1, "yref": ya, "y0": fair,
             "y1": fair, "line": {"color": "#999", "width": 1, "dash": "dash"}}]


def shot_lines(shots: pd.DataFrame | None) -> list[dict]:
    """A thin vertical line across every lane at each screenshot's capture time (the marker
    on the ribbon is ``shot_points``)."""
    x, _, _, _ = shot_points(shots)
    return [{"type": "line", "xref": "x", "x0": t, "x1": t, "yref": "paper", "y0": 0,
             "y1": 1, "layer": "below",
             "line": {"color": SHOT_COLOR, "width": 1, "dash": "dot"}} for t in x]


def band_axis(order: list[int]) -> dict:
    """Tick positions and labels of the load bands' y axis for a GPU order (top first); the
    labels sit left of the plot area, where no band's line crosses them."""

    slots = band_slots(order)
    return {"range": [-0.08, max(len(order), 1) - 0.02],
            "tickvals": [slots[g] + BAND_TICK for g in order],
            # a MIG instance as "0 · GI 1": the band's label stays as short as "GPU 0"
            "ticktext": [f"<span style='color:{gpu_color(g)}'><b>"
                         f"{entity_short(g) if is_mig(g) else entity_name(g)}</b></span>"
                         for g in order],
            "ticklabelposition": "outside"}


def _style(fig: go.Figure, gpus: list[int], height: int, uirevision: str, R: Rows,
           order: list[int], time_zone: str = "UTC") -> None:
    fig.update_layout(
        height=height, uirevision=uirevision, template="plotly_white",
        barmode="overlay", bargap=0, hovermode="x", hoverdistance=-1, spikedistance=-1,
        hoverlabel={"font_size": 11, "namelength": -1},
        # t: the plotly toolbar (about 30 px) sits above the ribbon, not over its red bar
        margin={"l": 124, "r": 84 if R.server else 16, "t": 42, "b": 36},
        font={"family": "Inter, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif", "size": 11},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.005, "xanchor": "left", "x": 0.0,
                    "font": {"size": 11}, "itemclick": "toggle", "itemdoubleclick": "toggleothers",
                    "title": {"text": "GPU (click to hide):", "font": {"size": 11}}},
        paper_bgcolor="white", plot_bgcolor="white",
    )
    fig.update_xaxes(type="date", showgrid=True, gridcolor="#eef0f3", showspikes=True,
                     spikemode="across", spikethickness=1, spikecolor="#888", spikedash="dot",
                     showline=False, ticks="", hoverformat="%H:%M:%S.%L")
    fig.update_xaxes(title={"text": f"time ({time_zone})", "font": {"size": 11}, "standoff": 4},
                     tickformatstops=[
                         {"dtickrange": [None, 1000], "value": "%H:%M:%S.%L"},
                         {"dtickrange": [1000, 86_400_000], "value": "%H:%M:%S"},
                         {"dtickrange": [86_400_000, None], "value": "%b %d"}],
                     row=R.n, col=1)
    fig.update_yaxes(showgrid=True, gridcolor="#eef0f3", zeroline=False, tickfont={"size": 10},
                     nticks=4, fixedrange=True)
    fig.update_yaxes(range=[0, SHOT_Y + 0.1], showticklabels=False,
                     showgrid=False, row=R.ribbon, col=1)
    labels = [(R.ribbon, "<b>phase</b>", "")]
    fig.update_yaxes(showgrid=False, nticks=None, row=R.bands, col=1, **band_axis(order),
                     tickfont={"size": 9})
    labels.append((R.bands, "<b>load by GPU</b>", "SM/GR active %<br>line and shade"))
    if R.server:
        fig.update_yaxes(rangemode="tozero", autorange=True, row=R.server, col=1,
                         secondary_y=False)
        fig.update_yaxes(rangemode="tozero", autorange=True, showgrid=False, row=R.server,
                         col=1, secondary_y=True,
                         title={"text": "req", "font": {"size": 10, "color": "#4b5563"},
                                "standoff": 2})
        key = (f"<span style='color:{PHASE_COLORS['prefill']}'>●</span> prefill batch"
               f"<br>right: req, tok/step")
        labels.append((R.server, "<b>Server</b>", f"tok/s<br>{key}"))
    for i, lane in enumerate(LANES):
        row = R.first_lane + i
        if lane.y_range is not None:
            fig.update_yaxes(range=list(lane.y_range), tickvals=[0, 50, 100], row=row, col=1)
        else:
            fig.update_yaxes(rangemode="tozero", autorange=True, row=row, col=1)
        sub = "<br>tx solid, rx dotted" if len(lane.columns) > 1 else ""
        labels.append((row, f"<b>{lane.title}</b>", lane.unit + sub))
    fair = 100.0 / len(gpus) if gpus else 50.0
    top = share_axis_top(len(gpus))
    fig.update_yaxes(range=[0, top], tickvals=sorted({0, round(fair, 1), round(top, 1)}),
                     row=R.strip, col=1)
    hot_key = f"<span style='color:{HOT_COLOR}'>red</span>: hot set"
    labels.append((R.strip, "<b>load share</b>", f"% of all load<br>{hot_key}"))
    for shape in base_shapes(fig, gpus, R):
        fig.add_shape(shape)
    for row, title, unit in labels:
        axis = fig.get_subplot(row, 1).yaxis
        domain = axis.domain
        mid = (domain[0] + domain[1]) / 2.0
        text = title + (f"<br><span style='font-size:10px;color:#6b7280'>{unit}</span>"
                        if unit else "")
        fig.add_annotation(text=text, xref="paper", yref="paper", x=0, y=mid, xshift=-34,
                           xanchor="right", yanchor="middle", showarrow=False, align="right",
                           font={"size": 11, "color": "#1f2937"})


# -- live updates ----------------------------------------------------------------------------


def extend_data(bins: pd.DataFrame, windows: pd.DataFrame, gpus: list[int], *,
                bin_s: float = 0.1, window_s: float = 0.5, view_s: float = 120.0,
                server: pd.DataFrame | None = None, order: list[int] | None = None,
                slots: tuple | None = None, hop_s: float = 0.1,
                phases_in_view: dict[str, int] | None = None,
                after_j: int | None = None, heat_in_view: int | None = None,
                mixed_in_view: dict[str, int] | None = None,
                lanes_in_view: int | None = None,
                windows_in_view: int | None = None,
                labelling: dict[str, tuple[float, float]] | None = None) -> list:
    """The ``dcc.Graph.extendData`` value that appends new bins and windows to the figure.

    Args:
        bins: new complete bins (``bin_lanes`` output), none already on the page.
        windows: new complete classifier windows, none already on the page.
        gpus: the same GPU list the figure was built with.
        bin_s, window_s: as for ``build_figure``.
        view_s: seconds of history each trace keeps (its ``maxPoints`` is
            ``view_s / bin_s`` for lanes and ``view_s / window_s`` for window traces and the
            server lane's cells).
        server: new ``server_cells`` (none already on the page) when the figure has a server
            lane (may be empty), else None.
        order: the load bands' GPU order the figure was built with.
        slots: new segment slots (``(slot indices, phases)``, none already on the page) for a
            figure built with ``slots``: the phase bars then keep ``view_s / hop_s`` points.
        phases_in_view: ``{phase: bars of that phase in the view once extended}`` (the last
            ``view_s / hop_s`` slots, or ``view_s / window_s`` windows without ``slots``).
            A phase trace holds only its own bars, so this is its ``maxPoints``: what scrolled
            out of view is dropped.  None: the placeholder-free bound above (a phase trace
            then keeps up to that many bars, some of them off screen).
        after_j: the window index the page expects next (its cursor's ``j``): a blank
            heatmap column marks missing windows before the first new one.
        heat_in_view: the heatmap's columns in the view once extended (its windows there
            and the blank columns between them): its ``maxPoints``.  None: ``view_s /
            window_s``, as the other window traces.
        mixed_in_view: ``{phase: mixed windows striped with it in the view once
            extended}``: the ``("mixed", phase)`` traces' ``maxPoints`` (they too hold only
            their own bars).  None: ``view_s / window_s``.
        lanes_in_view: the lanes' bins in the view once extended (from its left edge, on the
            window grid, to the newest bin): their ``maxPoints``.  None: ``view_s / bin_s``.
        windows_in_view: the windows in the view once extended (from that left edge): the
            ``maxPoints`` of the imbalance bar, the bands and the strip (``hot``: three per
            window).  None: ``view_s / window_s``.
        labelling: the "labelling…" marks now, as for ``build_figure``: each replaces the
            mark on the page (``maxPoints`` 5); a row not in it keeps its mark.

    Returns:
        ``[update, indices, max_points]``: ``update`` maps ``x``, ``y``, ``text`` and ``z`` to
        one list per trace, ``indices`` lists every trace index, ``max_points`` has the same
        shape as ``update`` (plotly's per-trace form).  Only the heatmap (``("heat",)``) gains
        ``z`` columns, and it gains no ``y`` (its rows are fixed); plotly.js extends an
        attribute only on traces that have it as an array, so every trace of a followed
        figure carries a ``z`` list (``extendable``).
    """
    keys = trace_keys(gpus, server is not None)
    pts = _points(bins, windows, gpus, bin_s, window_s, server, order, slots, hop_s, after_j,
                  labelling)
    lane_max = math.ceil(view_s / bin_s) if lanes_in_view is None else max(1, lanes_in_view)
    win_max = math.ceil(view_s / window_s)
    in_view = win_max if windows_in_view is None else max(0, int(windows_in_view))
    slot_max = math.ceil(view_s / hop_s - 1e-9)
    update: dict[str, list] = {"x": [], "y": [], "text": [], "z": []}
    limits: list[int] = []
    for key in keys:
        x, y, text = pts[key]
        update["x"].append(x)
        if key[0] == "heat":  # its y are the rows: x and z gain a column per window
            update["y"].append([])
            update["z"].append(y)
        else:
            update["y"].append(y)
            update["z"].append([])
        update["text"].append(text)
        if key[0] == "heat":
            limits.append(win_max if heat_in_view is None else max(0, int(heat_in_view)))
        elif key[0] == "hot":
            limits.append(3 * in_view)
        elif key[0] in ("ribbon_hot", "band", "share"):
            limits.append(in_view)
        elif key[0] == "phase" and phases_in_view is not None:
            limits.append(int(phases_in_view.get(key[1], 0)))  # 0: none left in view
        elif key[0] == "phase" and slots is not None:
            limits.append(slot_max)
        elif key[0] == "mixed" and mixed_in_view is not None:
            limits.append(int(mixed_in_view.get(key[1], 0)))
        elif key[0] == "labelling":  # its five points replace the mark
            limits.append(5)
        elif key[0] == "shots":  # never appended to: keep every marker
            limits.append(10**7)
        else:
            limits.append(win_max if is_window_key(key) else lane_max)
    keep = 10**7  # never trimmed: the heatmap's fixed rows and (empty) text, others' empty z
    heat = keys.index(("heat",))
    max_points = {k: list(limits) for k in update}
    max_points["y"][heat] = max_points["text"][heat] = keep
    max_points["z"] = [limits[i] if i == heat else keep for i in range(len(keys))]
    return [update, list(range(len(keys))), max_points]


def extendable(fig: go.Figure) -> dict:
    """``fig`` as the dict a page receives, every trace given an empty ``z`` (and ``text``)
    list where it has none, so the live ``extendData`` (``extend_data``: ``z`` for the
    heatmap's new columns) finds an array to extend on every trace (plotly.js refuses a
    missing one)."""
    out = fig.to_plotly_json()
    for trace in out["data"]:
        trace.setdefault("z", [])
        trace.setdefault("text", [])
    return out


def typed_array(a, dtype: str = "f8") -> dict:
    """A plotly.js typed-array spec (``{"dtype", "bdata"}``: base64 of the little-endian
    values) for a 1-d array; NaN stays NaN (a gap).  f8 for epoch milliseconds (f4 would round
    them to ~2 min), f4 for values (7 significant digits)."""
    import base64

    arr = np.ascontiguousarray(np.asarray(a, dtype=np.dtype(dtype).newbyteorder("<")))
    return {"dtype": dtype, "bdata": base64.b64encode(arr.tobytes()).decode("ascii")}


def range_update(traces: dict, gpus: list[int], server: bool, encode: bool = True
                 ) -> dict[int, dict]:
    """Per-trace attribute updates (``{trace index: {attr: value}}``) that put a range view
    (``app.dashboard.views`` ``TraceData`` per key) into a figure built by ``build_figure``.

    Args:
        traces: ``{key: TraceData}``; keys of ``trace_keys(gpus, server)`` not in it are left
            as they are.
        gpus, server: what the figure was built with.
        encode: typed arrays (``typed_array``; x f8 ms, y/base f4) for a ``Patch``; False:
            plain numpy arrays (for ``go.Figure.update``).

    Returns:
        Updates of ``x``, ``y`` (and ``width`` / ``base`` for bars, ``text`` where given).
    """
    keys = trace_keys(gpus, server)
    out: dict[int, dict] = {}
    for i, key in enumerate(keys):
        td = traces.get(key)
        if td is None:
            continue
        x = np.asarray(td.x, dtype=np.float64) * 1000.0
        y = np.asarray(td.y, dtype=np.float64)
        upd: dict = ({"x": typed_array(x, "f8"), "y": typed_array(y, "f4")} if encode
                     else {"x": x, "y": y})
        if td.width is not None:
            if np.ndim(td.width):  # one width per bar (the ribbon's phase segments)
                wd = np.asarray(td.width, dtype=np.float64) * 1000.0
                upd["width"] = typed_array(wd, "f4") if encode else wd
            else:
                upd["width"] = float(td.width) * 1000.0
        if td.z is not None:  # a heatmap: its columns (plain lists, None where unknown)
            upd["z"] = td.z
        if td.base is not None:
            if np.ndim(td.base):
                b = np.asarray(td.base, dtype=np.float64)
                upd["base"] = typed_array(b, "f4") if encode else b
            else:
                upd["base"] = float(td.base)
        if td.text is not None:
            upd["text"] = list(td.text)
        out[i] = upd
    return out


def shots_between(shots: pd.DataFrame | None, t0: float, t1: float) -> pd.DataFrame | None:
    """The rows of ``shots`` (``SampleStore.screenshots``) captured within ``[t0, t1]``
    (epoch s); rows without a capture time are left out."""
    if shots is None or shots.empty:
        return shots
    ts = pd.to_numeric(shots["capture_ts"], errors="coerce")
    return shots[(ts >= t0) & (ts <= t1)]


def fmt_span(s: float) -> str:
    """A duration for people: "850 ms", "4.2 s", "35 s", "12.5 min", "3.0 h", "30.0 d"; each
    unit is chosen after rounding (119.6 s reads "2.0 min", not "120 s"); "n/a" for NaN or a
    negative duration."""
    if s is None or not math.isfinite(s) or s < 0:
        return "n/a"
    if round(s * 1000) < 1000:
        return f"{s * 1000:.0f} ms"
    if round(s, 1) < 10:
        return f"{s:.1f} s"
    if round(s) < 120:
        return f"{s:.0f} s"
    if round(s / 60, 1) < 120:
        return f"{s / 60:.1f} min"
    if round(s / 3600, 1) < 48:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def shot_points(shots: pd.DataFrame | None) -> tuple[list, list, list, list]:
    """x (epoch ms), y, text (file name and time source) and customdata (hash) of the
    screenshot markers: one per screenshot with a known capture time."""
    if shots is None or shots.empty:
        return [], [], [], []
    known = shots[pd.notna(shots["capture_ts"])]
    x = [round(float(t) * 1000.0, 1) for t in known["capture_ts"]]
    text = [f"{n} ({src})" for n, src in zip(known["name"], known["time_source"])]
    return x, [SHOT_Y] * len(x), text, list(known["sha256"])


def extend_point_count(payload: list) -> int:

    """Number of new x values in an ``extend_data`` payload (0: nothing to send)."""
    return sum(len(x) for x in payload[0]["x"])


