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

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tealeaves.app.figures.geometry import (
    BAND_TICK,
    COLUMN_DASH,
    COLUMN_SHORT,
    HEAT_COLORSCALE,
    HOT_COLOR,
    LABELLING_TEXT,
    LANES,
    MIXED_PATTERN,
    PHASE_COLORS,
    PREFILL_SIZES,
    RIBBON_HOT_BASE,
    SERVER_LINES,
    SHOT_COLOR,
    SHOT_Y,
    Rows,
    band_slots,
    gpu_color,
    heat_rows,
    rows,
    trace_keys,
)
from tealeaves.app.figures.points import (
    share_axis_top,
    trace_points,
)
from tealeaves.classifier.windows import DEFAULT_WINDOW_S
from tealeaves.data.schema import entity_name, entity_short, is_mig


def build_figure(bins: pd.DataFrame, windows: pd.DataFrame, gpus: list[int], *,
                 bin_s: float = 0.1, window_s: float = DEFAULT_WINDOW_S, height: int = 780,
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
    pts = trace_points(bins, windows, gpus, bin_s, window_s, server, order, slots, hop_s,
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
    if kind in _RIBBON_KINDS:
        return _ribbon_trace(key, x, y, text, R, widths, shots)
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


#: The keys ``_ribbon_trace`` draws: the ribbon's rows and every row's "labelling…" mark.
_RIBBON_KINDS = frozenset({"labelling", "phase", "mixed", "ribbon_hot", "selected", "shots"})


def _ribbon_trace(key: tuple, x, y, text, R: Rows, widths: tuple[float, float],
                  shots: pd.DataFrame | None) -> tuple[go.Bar | go.Scatter, dict]:
    """``_view_trace`` of a ``_RIBBON_KINDS`` key: a ribbon trace (phase bars, mixed stripes,
    imbalance bar, selected window, screenshot markers) or a "labelling…" mark."""
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
    # "shots"
    sx, sy, stext, sdata = shot_points(shots)
    return go.Scatter(
        x=sx, y=sy, text=stext, customdata=sdata, mode="markers", name="screenshot",
        marker={"symbol": "triangle-down", "size": 13, "color": SHOT_COLOR,
                "line": {"width": 1, "color": "white"}},
        cliponaxis=False, showlegend=False,
        hovertemplate="screenshot %{text}<br>click to open<extra></extra>"), {
            "row": R.ribbon, "col": 1}


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


def pauses_text(gaps: list[tuple[float, float]], when, count: int | None = None,
                total_s: float | None = None) -> str:
    """A range's stretches with no sample (``classifier.summary.pauses``: ``[(a, b), ...]``,
    epoch s, the longest of them at least) in words for the line that states the range: "" with
    none, else "; 1 gap with no sample (2.0 h: from A to B)" or "; 3 gaps with no sample
    (5.1 h in all; the longest 2.0 h: from A to B)"; ``when(t)`` writes an epoch-s instant;
    ``count`` and ``total_s``: how many gaps and their seconds in all, where ``gaps`` lists
    only some (a report's ``gap_count``, ``gap_s``)."""
    if not gaps:
        return ""
    lengths = [b - a for a, b in gaps]
    count = len(gaps) if count is None else count
    total_s = sum(lengths) if total_s is None else total_s
    a, b = gaps[max(range(len(gaps)), key=lengths.__getitem__)]
    where = f"{fmt_span(b - a)}: from {when(a)} to {when(b)}"
    if count == 1:
        return f"; 1 gap with no sample ({where})"
    return (f"; {count:,} gaps with no sample ({fmt_span(total_s)} in all; "
            f"the longest {where})")


def partial_text(parts: list[dict], when) -> str:
    """The GPUs that cover only part of a range (``classifier.summary.partial_gpus``) in
    words for the line that states it: "" with none, else "; GPU 2 only from A to B"
    (several joined by ", "); ``when(t)`` writes an epoch-s instant."""
    from tealeaves.data.schema import entity_name

    if not parts:
        return ""
    return "; " + ", ".join(f"{entity_name(p['gpu'])} only from {when(p['first'])} to "
                            f"{when(p['last'])}" for p in parts)
