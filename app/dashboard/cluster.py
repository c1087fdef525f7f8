"""The cluster overview: every host's phase and every GPU's load over the last minutes, one row
each, for a store that holds several hosts (``tealeaves dashboard --prometheus URL``).

Rows: per host, a phase strip (the phase most of its windows in each column had) above one row
per GPU (its mean load, %, in the column).  Columns are ``bucket_s`` seconds.  Built from each
host's ``History`` (``LiveView.host_history``), so the phases are the classifier's, also for
hosts only dcgm-exporter reports.  Missing data stays blank, never 0.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tealeaves.app.figures import PHASE_COLORS
from tealeaves.classifier.rules import PHASE_ORDER
from tealeaves.data.schema import entity_name

#: Seconds shown and column width.
OVERVIEW_S = 600.0
BUCKET_S = 5.0


def overview(histories: dict, t_end: float | None = None, span_s: float = OVERVIEW_S,
             bucket_s: float = BUCKET_S) -> tuple[list[str], np.ndarray, list[str], np.ndarray,
                                                  np.ndarray]:
    """The overview's grids.

    Args:
        histories: ``{host: History}`` (each brought up to date here).
        t_end: right edge, epoch s (default: the newest window of any host).
        span_s, bucket_s: seconds shown, column width.

    Returns:
        ``(hosts, phase_grid, gpu_rows, load_grid, column_centres)``: ``phase_grid[h, c]`` is
        the index in ``PHASE_ORDER`` of host h's most common phase in column c (NaN: no
        window); ``gpu_rows`` are ``"host · GPU g"`` labels; ``load_grid[r, c]`` the mean load
        (%) of that GPU (NaN: no window); ``column_centres`` epoch s.
    """
    frames = {}
    for host, h in sorted(histories.items()):
        h.update()
        frames[host] = h.windows()
    ends = [float(w["end"].max()) for w in frames.values() if w is not None and len(w)]
    starts = [float(w["start"].min()) for w in frames.values() if w is not None and len(w)]
    if t_end is None:
        t_end = max(ends) if ends else 0.0
    if starts and t_end - min(starts) < span_s:  # a young session: its whole span, finer
        span_s = max(t_end - min(starts), 1.0)
        bucket_s = max(0.5, span_s / 120.0)
    n = max(1, math.ceil(span_s / bucket_s))
    t0 = t_end - n * bucket_s
    centres = t0 + (np.arange(n) + 0.5) * bucket_s
    hosts = list(frames)
    phase = np.full((len(hosts), n), np.nan)
    rows, loads = [], []
    for i, host in enumerate(hosts):
        w = frames[host]
        if w is None or not len(w):
            continue
        w = w[(w["start"] >= t0) & (w["start"] < t_end)]
        col = ((w["start"].to_numpy(dtype=float) - t0) // bucket_s).astype(int)
        code = w["phase"].map({p: k for k, p in enumerate(PHASE_ORDER)}).to_numpy(dtype=float)
        for c in np.unique(col):
            vals = code[col == c]
            vals = vals[np.isfinite(vals)]
            if vals.size:
                phase[i, c] = np.bincount(vals.astype(int)).argmax()
        gpus = sorted(int(k[6:]) for k in w.columns if k.startswith("load_g") and k[6:].isdigit())
        for g in gpus:
            s = pd.Series(w[f"load_g{g}"].to_numpy(dtype=float)).groupby(col).mean()
            row = np.full(n, np.nan)
            row[s.index.to_numpy()] = s.to_numpy()
            rows.append(f"{host} · {entity_name(g)}")
            loads.append(row)
    load = np.vstack(loads) if loads else np.empty((0, n))
    return hosts, phase, rows, load, centres


def overview_figure(histories: dict, t_end: float | None = None, span_s: float = OVERVIEW_S,
                    bucket_s: float = BUCKET_S, selected: str | None = None) -> go.Figure:
    """The overview as a figure: phase strips (top), GPU load heatmap (bottom); the selected
    host's labels in bold.  x is UTC text (no browser zone shift for a strip of columns)."""
    hosts, phase, rows, load, centres = overview(histories, t_end, span_s, bucket_s)
    x = [pd.Timestamp(c, unit="s").strftime("%Y-%m-%d %H:%M:%S") for c in centres]
    n_ph = len(PHASE_ORDER)
    scale = []
    for k, p in enumerate(PHASE_ORDER):  # a stepped colour scale: one colour per phase code
        scale += [[k / n_ph, PHASE_COLORS[p]], [(k + 1) / n_ph, PHASE_COLORS[p]]]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        row_heights=[max(0.15, len(hosts) / max(1, len(hosts) + len(rows))),
                                     max(0.3, len(rows) / max(1, len(hosts) + len(rows)))])

    def bold(label: str, host: str) -> str:
        return f"<b>{label}</b>" if host == selected else label
    fig.add_trace(go.Heatmap(
        z=phase, x=x, y=[bold(h, h) for h in hosts], zmin=-0.5, zmax=n_ph - 0.5,
        colorscale=scale, showscale=False, xgap=1, ygap=2,
        customdata=np.array([[PHASE_ORDER[int(v)] if np.isfinite(v) else "no data"
                              for v in r] for r in phase], dtype=object)
        if len(hosts) else None,
        hovertemplate="%{y} %{x}: %{customdata}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Heatmap(
        z=load, x=x, y=[bold(r, r.split(" · ")[0]) for r in rows], zmin=0, zmax=100,
        colorscale="YlOrRd", xgap=1, ygap=1,
        colorbar={"title": {"text": "load %"}, "len": 0.6, "y": 0.3},
        hovertemplate="%{y} %{x}: %{z:.0f} %<extra></extra>"), row=2, col=1)
    fig.update_yaxes(autorange="reversed", fixedrange=True)
    fig.update_xaxes(type="date", fixedrange=True)
    fig.update_xaxes(title={"text": "time (UTC)", "font": {"size": 10}, "standoff": 2},
                     row=2, col=1)
    fig.update_layout(height=110 + 16 * (len(hosts) + len(rows)), template="plotly_white",
                      margin={"l": 150, "r": 20, "t": 8, "b": 24}, font={"size": 10},
                      uirevision="cluster")
    return fig


__all__ = ["BUCKET_S", "OVERVIEW_S", "overview", "overview_figure"]
