"""Pure figure builders for the dashboard: frames in, ``go.Figure`` or ``extendData`` out.

The live figure is ONE plotly figure with shared-x subplots, top to bottom:

1. the **phase ribbon**: one coloured bar per classifier window (idle / prefill / decode), with a
   thin red bar above windows flagged imbalanced;
2. one **lane per metric** (``LANES``: SM, tensor and DRAM activity in %, PCIe tx/rx in MB/s,
   board power in W) with one line per GPU (PCIe: two, tx solid and rx dotted);
3. the **imbalance strip**: each GPU's share of the summed load per window (%), a fair-share line
   at ``100 / n_gpus`` and a red highlight on the hot GPU's share in every flagged window.

The x axis is real time: plotly date axes read numbers as milliseconds since the epoch (UTC), so
every ``x`` here is ``epoch seconds * 1000``.

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
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

# -- what is drawn ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Lane:
    """One metric lane of the figure.

    Attributes:
        key: short id of the lane.
        title: label shown left of the lane.
        columns: sample-frame columns drawn in the lane (one line per column and GPU).
        unit: unit of the plotted values (axis label).
        scale: multiplier from the column's unit to ``unit`` (B/s -> MB/s: 1e-6).
        y_range: fixed y range, or None for autorange from 0.
    """

    key: str
    title: str
    columns: tuple[str, ...]
    unit: str
    scale: float = 1.0
    y_range: tuple[float, float] | None = None


LANES: tuple[Lane, ...] = (
    Lane("sm_active", "SM active", ("sm_active",), "%", 1.0, (0.0, 105.0)),
    Lane("tensor_active", "Tensor active", ("tensor_active",), "%", 1.0, (0.0, 105.0)),
    Lane("dram_active", "DRAM active", ("dram_active",), "%", 1.0, (0.0, 105.0)),
    Lane("pcie", "PCIe", ("pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"), "MB/s", 1e-6),
    Lane("power", "Power", ("power_w",), "W", 1.0),
)

#: Every sample column a lane draws.
LANE_COLUMNS: tuple[str, ...] = tuple(c for lane in LANES for c in lane.columns)

#: Phases drawn in the ribbon, in order.  ``mixed`` is kept for classifiers that emit it.
RIBBON_PHASES: tuple[str, ...] = ("idle", "prefill", "decode", "mixed")

PHASE_COLORS: dict[str, str] = {
    "idle": "#cfd4dc",
    "prefill": "#f28e2b",
    "decode": "#3b7dd8",
    "mixed": "#b07aa1",
}

#: One line explaining each phase colour (the page's legend).
PHASE_HELP: dict[str, str] = {
    "idle": "busiest GPU under ~10 % load",
    "prefill": "compute-bound: tensor > DRAM",
    "decode": "memory-bound: DRAM > tensor (incl. spec. verify)",
    "mixed": "prefill and decode in one window (chunked prefill)",
}

HOT_COLOR = "#d62728"

#: Line colours of GPU 0, 1, ... (repeats after 10 GPUs); chosen apart from the phase colours.
GPU_COLORS: tuple[str, ...] = (
    "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#a6761d", "#1f78b4", "#e6ab02", "#666666",
    "#8c564b", "#17becf",
)

#: Line dash per column of a multi-column lane (PCIe: tx solid, rx dotted).
COLUMN_DASH: dict[str, str] = {"pcie_tx_bytes_per_s": "solid", "pcie_rx_bytes_per_s": "dot"}
COLUMN_SHORT: dict[str, str] = {"pcie_tx_bytes_per_s": "tx", "pcie_rx_bytes_per_s": "rx"}

RIBBON_ROW = 1
FIRST_LANE_ROW = 2
STRIP_ROW = FIRST_LANE_ROW + len(LANES)
N_ROWS = STRIP_ROW

#: Windows whose mean load (%) is under this have no meaningful shares (noise over ~0).
MIN_SHARE_LOAD = 10.0

_RIBBON_HOT_BASE = 1.08
_RIBBON_HOT_HEIGHT = 0.32


def gpu_color(gpu: int) -> str:
    """Line colour of GPU index ``gpu``."""
    return GPU_COLORS[int(gpu) % len(GPU_COLORS)]


def trace_keys(gpus: list[int]) -> list[tuple]:
    """The figure's traces, in order, as keys.

    ``("phase", p)`` ribbon bars of phase ``p``; ``("ribbon_hot",)`` the imbalance bar;
    ``("lane", column, gpu)`` one lane line; ``("share", gpu)`` the strip line of a GPU;
    ``("hot", gpu)`` the strip's red highlight of a GPU's share while it is the hot GPU
    (three points per window: a segment and a break).  ``build_figure`` creates traces in this
    order and ``extend_data`` addresses them by their position.
    """
    keys: list[tuple] = [("phase", p) for p in RIBBON_PHASES]
    keys.append(("ribbon_hot",))
    for lane in LANES:
        for g in gpus:
            for col in lane.columns:
                keys.append(("lane", col, g))
    keys += [("share", g) for g in gpus]
    keys += [("hot", g) for g in gpus]
    return keys


def _is_window_key(key: tuple) -> bool:
    return key[0] in ("phase", "ribbon_hot", "share", "hot")


# -- data preparation ----------------------------------------------------------------------


def bin_index(t: float | np.ndarray, bin_s: float) -> np.ndarray | int:
    """Index of the ``bin_s``-second bin holding epoch time ``t`` (``floor(t / bin_s)``).

    A tiny epsilon absorbs float error so that ``k * bin_s`` falls in bin ``k``.
    """
    out = np.floor(np.asarray(t, dtype=float) / bin_s + 1e-9).astype(np.int64)
    return int(out) if out.ndim == 0 else out


def bin_lanes(samples: pd.DataFrame, gpus: list[int], k_start: int, k_end: int,
              bin_s: float = 0.1, hold_s: float = 0.35) -> pd.DataFrame:
    """Mean of every lane column per bin and GPU, on a complete bin grid.

    Args:
        samples: sample frame (``data.schema``); may start before bin ``k_start`` (those
            samples only seed the hold of empty bins) and must hold every sample of the
            emitted bins.
        gpus: GPU indices to emit columns for (absent GPUs give all-NaN columns).
        k_start: first bin index to emit (``bin_index``); bins cover ``[k*bin_s, (k+1)*bin_s)``.
        k_end: one past the last bin index to emit.
        bin_s: bin width in seconds (> 0).
        hold_s: an empty bin takes the previous bin's value when that is at most this many
            seconds back; GPM refreshes at 10 Hz leave some 0.1-s bins empty.

    Returns:
        Frame indexed by bin index ``k`` (``k_start .. k_end-1``, every bin present), columns a
        MultiIndex ``(column, gpu)`` over ``LANE_COLUMNS`` x ``gpus``, values in the column's
        unit (not scaled), NaN where there is no reading.

    Raises:
        ValueError: ``bin_s`` is not positive.
    """
    if not bin_s > 0:
        raise ValueError(f"bin_s must be positive, got {bin_s}")
    cols = pd.MultiIndex.from_product([LANE_COLUMNS, list(gpus)], names=["column", "gpu"])
    index = pd.RangeIndex(k_start, max(k_end, k_start), name="k")
    if samples.empty or not len(index) or not gpus:
        return pd.DataFrame(np.nan, index=index, columns=cols)
    frame = samples[["gpu", *LANE_COLUMNS]].copy()
    frame["k"] = bin_index(samples["timestamp"].to_numpy(), bin_s)
    frame = frame[(frame["k"] < k_end) & frame["gpu"].isin(gpus)]
    means = frame.groupby(["k", "gpu"])[list(LANE_COLUMNS)].mean().unstack("gpu")
    means.columns = means.columns.set_names(["column", "gpu"])
    k_lo = int(min(k_start, means.index.min())) if len(means) else k_start
    full = means.reindex(index=pd.RangeIndex(k_lo, k_end, name="k"), columns=cols)
    hold = math.floor(hold_s / bin_s + 1e-9)
    if hold > 0:
        full = full.ffill(limit=hold)
    return full.loc[k_start:k_end - 1]


def gpu_shares(windows: pd.DataFrame, gpus: list[int],
               min_load: float = MIN_SHARE_LOAD) -> pd.DataFrame:
    """Each GPU's share of the summed load per window, in %.

    Args:
        windows: classifier windows (``load_g<i>`` columns, ``load_mean``).
        gpus: GPU indices (a GPU without a ``load_g<i>`` column is NaN).
        min_load: windows whose ``load_mean`` (%) is under this get NaN shares: the split of
            near-zero load is noise.

    Returns:
        Frame with one column per GPU (``gpus``), rows aligned with ``windows``; rows sum to
        100 where defined.
    """
    load = pd.DataFrame({g: windows.get(f"load_g{g}", pd.Series(np.nan, index=windows.index))
                         for g in gpus}, index=windows.index).astype(float)
    total = load.sum(axis=1, min_count=1)
    share = load.div(total.where(total > 0), axis=0) * 100.0
    busy = windows.get("load_mean", pd.Series(np.nan, index=windows.index)).astype(float)
    share.loc[~(busy >= min_load).to_numpy()] = np.nan
    return share


def _ms(seconds: np.ndarray) -> list[float]:
    return np.round(np.asarray(seconds, dtype=float) * 1000.0, 1).tolist()


def _values(a: np.ndarray, digits: int = 3) -> list:
    a = np.asarray(a, dtype=float)
    return [None if not math.isfinite(v) else round(v, digits) for v in a.tolist()]


def _fmt(v: float, spec: str, missing: str = "n/a") -> str:
    return format(v, spec) if v is not None and math.isfinite(v) else missing


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


def _points(bins: pd.DataFrame, windows: pd.DataFrame, gpus: list[int], bin_s: float,
            window_s: float) -> dict[tuple, tuple[list, list, list]]:
    """``{trace key: (x, y, text)}`` for every key of ``trace_keys(gpus)``."""
    out: dict[tuple, tuple[list, list, list]] = {}
    bx = _ms((bins.index.to_numpy(dtype=float) + 0.5) * bin_s) if len(bins) else []
    for lane in LANES:
        for g in gpus:
            for col in lane.columns:
                vals = (bins[(col, g)].to_numpy(dtype=float) * lane.scale if len(bins)
                        else np.array([]))
                out[("lane", col, g)] = (bx, _values(vals), [])
    n = len(windows)
    if n:
        starts = windows["start"].to_numpy(dtype=float)
        wx = _ms(starts + window_s / 2.0)
        phase = windows["phase"].astype(str).to_numpy()
        conf = windows["confidence"].to_numpy(dtype=float)
        ratio = windows["imbalance_ratio"].to_numpy(dtype=float)
        hot = windows["hot_gpu"].to_numpy(dtype=float)
        flagged = windows["imbalanced"].fillna(False).to_numpy(dtype=bool) & np.isfinite(hot)
        tax = windows["straggler_tax"].to_numpy(dtype=float)
    else:
        wx, phase, starts = [], np.array([], dtype=str), np.array([], dtype=float)
        conf = ratio = hot = tax = np.array([], dtype=float)
        flagged = np.array([], dtype=bool)
    for p in RIBBON_PHASES:
        m = phase == p
        text = [f"{p} ({_fmt(c, '.0%')} sure), max/mean load {_fmt(r, '.2f')}x" if mi else ""
                for mi, c, r in zip(m, conf, ratio)]
        out[("phase", p)] = (wx, [1.0 if mi else None for mi in m], text)
    hot_text = [f"GPU {int(h)} hot: max/mean load {_fmt(r, '.2f')}x, straggler tax "
                f"{_fmt(t, '.0%')}" if f else "" for f, h, r, t in zip(flagged, hot, ratio, tax)]
    out[("ribbon_hot",)] = (wx, [_RIBBON_HOT_HEIGHT if f else None for f in flagged], hot_text)
    shares = gpu_shares(windows, gpus) if n else pd.DataFrame(columns=gpus, dtype=float)
    for g in gpus:
        s = shares[g].to_numpy(dtype=float) if n else np.array([])
        out[("share", g)] = (wx, _values(s, 2), [])
        is_hot = flagged & (hot == g)
        out[("hot", g)] = _segments(starts, window_s, np.where(is_hot, s, np.nan),
                                    [t if h else "" for t, h in zip(hot_text, is_hot)])
    return out


# -- the figure ------------------------------------------------------------------------------


def build_figure(bins: pd.DataFrame, windows: pd.DataFrame, gpus: list[int], *,
                 bin_s: float = 0.1, window_s: float = 0.5, height: int = 780,
                 uirevision: str = "tealeaves-live") -> go.Figure:
    """The whole live figure from binned lanes and classifier windows.

    Args:
        bins: ``bin_lanes`` output (may be empty).
        windows: ``classify_samples`` output (may be empty); ``start`` in epoch s.
        gpus: GPU indices, one line per lane and GPU, in this order.
        bin_s: width of the bins (s), for the bin-centre x values.
        window_s: classifier window length (s), the ribbon's bar width.
        height: figure height in pixels.
        uirevision: kept constant so zoom and legend toggles survive updates.

    Returns:
        A figure whose traces follow ``trace_keys(gpus)``; x values are epoch milliseconds on
        date axes (UTC).
    """
    n_lanes = len(LANES)
    heights = [0.055] + [0.79 / n_lanes] * n_lanes + [0.155]
    fig = make_subplots(rows=N_ROWS, cols=1, shared_xaxes=True, vertical_spacing=0.018,
                        row_heights=heights)
    pts = _points(bins, windows, gpus, bin_s, window_s)
    width_ms = window_s * 1000.0
    for key in trace_keys(gpus):
        x, y, text = pts[key]
        kind = key[0]
        if kind == "phase":
            p = key[1]
            fig.add_trace(go.Bar(
                x=x, y=y, text=text, base=0.0, width=width_ms, name=p,
                marker={"color": PHASE_COLORS[p], "line": {"width": 0}},
                textposition="none", hovertemplate="%{text}<extra></extra>",
                showlegend=False, legendgroup="phases"), row=RIBBON_ROW, col=1)
        elif kind == "ribbon_hot":
            fig.add_trace(go.Bar(
                x=x, y=y, text=text, base=_RIBBON_HOT_BASE, width=width_ms,
                name="imbalanced", marker={"color": HOT_COLOR, "line": {"width": 0}},
                textposition="none", hovertemplate="%{text}<extra></extra>",
                showlegend=False), row=RIBBON_ROW, col=1)
        elif kind == "lane":
            col, g = key[1], key[2]
            li = next(i for i, lane in enumerate(LANES) if col in lane.columns)
            lane = LANES[li]
            suffix = f" {COLUMN_SHORT[col]}" if col in COLUMN_SHORT else ""
            fig.add_trace(go.Scatter(
                x=x, y=y, text=text, mode="lines", name=f"GPU {g}",
                legendgroup=f"gpu{g}", showlegend=(li == 0 and col == lane.columns[0]),
                line={"color": gpu_color(g), "width": 1.4, "dash": COLUMN_DASH.get(col, "solid")},
                connectgaps=False,
                hovertemplate=f"GPU {g}{suffix}: %{{y:.1f}} {lane.unit}<extra></extra>"),
                row=FIRST_LANE_ROW + li, col=1)
        elif kind == "share":
            g = key[1]
            fig.add_trace(go.Scatter(
                x=x, y=y, text=text, mode="lines", name=f"GPU {g} share",
                legendgroup=f"gpu{g}", showlegend=False, connectgaps=False,
                line={"color": gpu_color(g), "width": 1.6},
                hovertemplate=f"GPU {g}: %{{y:.0f}} % of load<extra></extra>"),
                row=STRIP_ROW, col=1)
        else:  # hot highlight: a wide translucent red stroke under the hot GPU's share
            g = key[1]
            fig.add_trace(go.Scatter(
                x=x, y=y, text=text, mode="lines", name=f"GPU {g} hot",
                legendgroup=f"gpu{g}", showlegend=False, connectgaps=False, opacity=0.45,
                line={"color": HOT_COLOR, "width": 7}, hoverinfo="skip"),
                row=STRIP_ROW, col=1)
    _style(fig, gpus, height, uirevision)
    return fig


def share_axis_top(n_gpus: int) -> float:
    """Top of the share strip's y axis, %: three fair shares (100 for 1-3 GPUs), so eight
    GPUs' 12.5 % lines are not squashed at the bottom of a 0-100 axis."""
    return 100.0 if n_gpus <= 3 else 300.0 / n_gpus


def _style(fig: go.Figure, gpus: list[int], height: int, uirevision: str) -> None:
    fig.update_layout(
        height=height, uirevision=uirevision, template="plotly_white",
        barmode="overlay", bargap=0, hovermode="x unified",
        hoverlabel={"font_size": 11, "namelength": -1},
        margin={"l": 124, "r": 16, "t": 30, "b": 36},
        font={"family": "Inter, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif", "size": 11},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.005, "xanchor": "left", "x": 0.0,
                    "font": {"size": 11}, "itemclick": "toggle", "itemdoubleclick": "toggleothers",
                    "title": {"text": "GPU (click to hide):", "font": {"size": 11}}},
        paper_bgcolor="white", plot_bgcolor="white",
    )
    fig.update_xaxes(type="date", showgrid=True, gridcolor="#eef0f3", showspikes=True,
                     spikemode="across", spikethickness=1, spikecolor="#888", spikedash="dot",
                     showline=False, ticks="", hoverformat="%H:%M:%S.%L")
    fig.update_xaxes(title={"text": "time (UTC)", "font": {"size": 11}, "standoff": 4},
                     tickformat="%H:%M:%S", row=N_ROWS, col=1)
    fig.update_yaxes(showgrid=True, gridcolor="#eef0f3", zeroline=False, tickfont={"size": 10},
                     nticks=4, fixedrange=True)
    fig.update_yaxes(range=[0, _RIBBON_HOT_BASE + _RIBBON_HOT_HEIGHT], showticklabels=False,
                     showgrid=False, row=RIBBON_ROW, col=1)
    labels = [(RIBBON_ROW, "<b>phase</b>", "")]
    for i, lane in enumerate(LANES):
        row = FIRST_LANE_ROW + i
        if lane.y_range is not None:
            fig.update_yaxes(range=list(lane.y_range), tickvals=[0, 50, 100], row=row, col=1)
        else:
            fig.update_yaxes(rangemode="tozero", autorange=True, row=row, col=1)
        sub = "<br>tx solid, rx dotted" if len(lane.columns) > 1 else ""
        labels.append((row, f"<b>{lane.title}</b>", lane.unit + sub))
    fair = 100.0 / len(gpus) if gpus else 50.0
    top = share_axis_top(len(gpus))
    fig.update_yaxes(range=[0, top], tickvals=sorted({0, round(fair, 1), round(top, 1)}),
                     row=STRIP_ROW, col=1)
    hot_key = f"<span style='color:{HOT_COLOR}'>red</span>: hot GPU"
    labels.append((STRIP_ROW, "<b>load share</b>", f"% of all load<br>{hot_key}"))
    if gpus:
        fig.add_hline(y=fair, line={"color": "#999", "width": 1, "dash": "dash"}, row=STRIP_ROW,
                      col=1)
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
                bin_s: float = 0.1, window_s: float = 0.5, view_s: float = 120.0) -> list:
    """The ``dcc.Graph.extendData`` value that appends new bins and windows to the figure.

    Args:
        bins: new complete bins (``bin_lanes`` output), none already on the page.
        windows: new complete classifier windows, none already on the page.
        gpus: the same GPU list the figure was built with.
        bin_s, window_s: as for ``build_figure``.
        view_s: seconds of history each trace keeps (its ``maxPoints`` is
            ``view_s / bin_s`` for lanes and ``view_s / window_s`` for window traces).

    Returns:
        ``[update, indices, max_points]``: ``update`` maps ``x``, ``y`` and ``text`` to one list
        per trace, ``indices`` lists every trace index, ``max_points`` has the same shape as
        ``update`` (plotly's per-trace form).
    """
    keys = trace_keys(gpus)
    pts = _points(bins, windows, gpus, bin_s, window_s)
    lane_max = math.ceil(view_s / bin_s)
    win_max = math.ceil(view_s / window_s)
    update: dict[str, list] = {"x": [], "y": [], "text": []}
    limits: list[int] = []
    for key in keys:
        x, y, text = pts[key]
        update["x"].append(x)
        update["y"].append(y)
        update["text"].append(text)
        if key[0] == "hot":
            limits.append(3 * win_max)
        else:
            limits.append(win_max if _is_window_key(key) else lane_max)
    return [update, list(range(len(keys))), {k: list(limits) for k in update}]


def extend_point_count(payload: list) -> int:
    """Number of new x values in an ``extend_data`` payload (0: nothing to send)."""
    return sum(len(x) for x in payload[0]["x"])


# -- the header ------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeaderSummary:
    """What the header says about the newest complete window.

    Attributes:
        phase: ``idle`` / ``prefill`` / ``decode`` (``mixed``), or None before any window.
        confidence: the phase's score in [0, 1] (NaN when unknown).
        imbalance_ratio: max / mean GPU load (1.0 = balanced; NaN when no load).
        straggler_tax: 1 - mean/max load, the share of GPU time spent waiting (NaN when no
            load).
        hot_gpu: index of the flagged hot GPU, or None when the window is not flagged.
        window_end: end of the window, epoch seconds (NaN before any window).
        hot_recent: ``{gpu: windows}`` flagged hot in the summarised span.
        windows: number of windows summarised for ``hot_recent``.
    """

    phase: str | None
    confidence: float
    imbalance_ratio: float
    straggler_tax: float
    hot_gpu: int | None
    window_end: float
    hot_recent: dict[int, int]
    windows: int

    def text(self) -> str:
        """One line, e.g. ``decode (97 %) | imbalance 1.42x | hot GPU 1 | straggler tax 30 %``."""
        if self.phase is None:
            return "waiting for the first complete window"
        hot = f"hot GPU {self.hot_gpu}" if self.hot_gpu is not None else "no hot GPU"
        return (f"{self.phase} ({_fmt(self.confidence * 100, '.0f')} %) | imbalance "
                f"{_fmt(self.imbalance_ratio, '.2f')}x | {hot} | straggler tax "
                f"{_fmt(self.straggler_tax * 100, '.0f')} %")


def header_summary(windows: pd.DataFrame, recent: int = 20) -> HeaderSummary:
    """Summarise the newest window of ``windows`` (classifier output, sorted by ``start``).

    Args:
        windows: classifier windows; may be empty.
        recent: how many trailing windows ``hot_recent`` counts over.
    """
    if windows is None or windows.empty:
        return HeaderSummary(None, math.nan, math.nan, math.nan, None, math.nan, {}, 0)
    last = windows.iloc[-1]
    hot = last.get("hot_gpu")
    hot_i = int(hot) if hot is not None and math.isfinite(float(hot)) else None
    tail = windows.iloc[-recent:]
    flagged = tail["hot_gpu"].dropna().astype(int)
    return HeaderSummary(
        phase=str(last["phase"]),
        confidence=float(last["confidence"]),
        imbalance_ratio=float(last["imbalance_ratio"]),
        straggler_tax=float(last["straggler_tax"]),
        hot_gpu=hot_i,
        window_end=float(last["end"]),
        hot_recent={int(g): int(c) for g, c in flagged.value_counts().sort_index().items()},
        windows=len(tail),
    )
