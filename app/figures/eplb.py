"""SGLang's expert-balance figure (``sglang:eplb_gpu_physical_count``): a layer x GPU-rank
heatmap of each rank's share of the layer's expert selections, and the server's own
balancedness over time under it.  Drawn by the dashboard's server panel and the report."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tealeaves.app.figures.geometry import HEAT_COLORSCALE, HOT_COLOR


def eplb_figure(layers: list[int], ranks: list[int], counts, bal_t=(), bal=(),
                height: int | None = None) -> go.Figure:
    """The figure.

    Args:
        layers, ranks: the heatmap's rows (MoE layers) and columns (GPU ranks).
        counts: expert selections, shape (layers, ranks); a cell is drawn as its share of its
            layer's total, % (a layer without selections is blank, not 0 %).
        bal_t, bal: the server's balancedness (0-1) at times ``bal_t`` (epoch s); drawn when
            two or more values are finite.
        height: px (default: 260, 320 with the balancedness line).
    """
    c = np.asarray(counts, dtype=float).reshape(len(layers), len(ranks))
    tot = c.sum(axis=1, keepdims=True)
    share = np.where(tot > 0, 100.0 * c / np.where(tot > 0, tot, 1.0), np.nan)
    t = np.asarray(bal_t, dtype=float)
    b = np.asarray(bal, dtype=float)
    ok = np.isfinite(t) & np.isfinite(b) if len(b) else np.zeros(0, dtype=bool)
    two = int(ok.sum()) >= 2
    fig = make_subplots(rows=2 if two else 1, cols=1, row_heights=[0.72, 0.28] if two else [1],
                        vertical_spacing=0.22)
    fig.add_trace(go.Heatmap(
        x=[str(r) for r in ranks], y=[str(layer) for layer in layers],
        z=np.where(np.isfinite(share), share, None).tolist(), zmin=0,
        colorscale=[[0.0, HEAT_COLORSCALE[0][1]], [0.5, "#f6b26b"], [1.0, HOT_COLOR]],
        colorbar={"title": {"text": "% of<br>layer"}, "thickness": 8, "len": 0.6},
        hovertemplate="layer %{y}, GPU rank %{x}<br>%{z:.1f} % of the layer's "
                      "selections<extra></extra>", name="eplb"), row=1, col=1)
    fig.update_xaxes(title_text="GPU rank", row=1, col=1)
    fig.update_yaxes(title_text="layer", row=1, col=1)
    if two:
        fig.add_trace(go.Scatter(x=(t[ok] * 1000).tolist(), y=b[ok].tolist(),
                                 mode="lines+markers", name="balancedness",
                                 line={"color": "#1f5fae"}), row=2, col=1)
        fig.update_xaxes(type="date", row=2, col=1)
        fig.update_yaxes(range=[0, 1.05], title_text="bal.", row=2, col=1)
    fig.update_layout(height=height or (320 if two else 260), showlegend=False,
                      margin={"l": 40, "r": 8, "t": 6, "b": 30}, template="plotly_white")
    return fig
