"""The Screenshots page: upload pictures, place them on the timeline, answer "prefill or decode?".

An engineer drops screenshots (nvtop, utilisation graphs) taken mid-investigation.  Each one is
checked and timed (``data.screenshots``), kept in the sample store (``SampleStore.put_screenshot``:
bytes by content hash, so it survives a restart with ``--store``), marked on the live figure's
phase ribbon, and shown next to the dashboard's view of the same moments with a **verdict**:
the phase the windows there were labelled, how sure, the imbalance ratio and the hot set.

- **Regions**: a screenshot of scrolling graphs shows different moments in different places
  (nvtop's history runs right to left).  The picture can be split into top and bottom halves or
  boxes drawn on it; each region has its own time offset from the capture time and its own
  verdict.
- **Compare**: two or more screenshots side by side, with the differences between their moments
  (phase shares, imbalance ratio, straggler tax, each GPU's load).

Pure parts (``verdict``, ``compare_table``, ``halves``, ``region_from_shape``) are tested
without a browser; ``register`` adds the page's callbacks and the picture route to an app.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import dash
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from dash import ALL, Input, Output, State, dcc, html

from ...classifier.rules import PHASE_ORDER
from ...classifier.summary import imbalance_summary
from ...data.screenshots import (
    FORMATS,
    MAX_BYTES,
    YEARS,
    ScreenshotError,
    capture_time,
    inspect_image,
    plausible,
    to_epoch,
    zone_name,
)
from ..figures import (
    PHASE_COLORS,
    base_shapes,
    build_figure,
    rows,
    shot_lines,
    shot_points,
    shots_between,
)
from . import ids

#: Default half-width (s) of the span a screenshot's verdict reads.
SPAN_S = 5.0
#: Largest request body the server reads (several screenshots at once, base64-encoded).
MAX_REQUEST_BYTES = 8 * MAX_BYTES
_SHA = re.compile(r"[0-9a-f]{64}")
#: Largest region time offset, seconds either way (a scrolling graph shows minutes, not days).
MAX_REGION_OFFSET_S = 86_400.0
#: Outline colours of regions 1, 2, ... (apart from the GPU and phase colours).
REGION_COLORS = ("#0f766e", "#b45309", "#7c3aed", "#be123c", "#0369a1", "#4d7c0f")


# -- pure: verdicts, comparisons, regions ---------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What the windows of a span say.

    Attributes:
        t0, t1: the span, epoch seconds.
        windows: labelled windows in it.
        phase: the phase of most windows (None without windows).
        shares: ``{phase: share of the windows}``.
        confidence: mean confidence of the windows labelled ``phase``.
        imbalance_ratio: mean max/mean load over the decode windows (NaN without any).
        straggler_tax: mean over the decode windows (NaN without any).
        hot_gpu: the GPU flagged hot in most flagged windows, or None.
        hot_share: share of the span's windows flagged with ``hot_gpu`` hot.
        loads: ``{gpu: mean load %}`` over the span.
        hot_set: the hot set flagged in most flagged windows (every hot GPU of it; empty
            when none).
    """

    t0: float
    t1: float
    windows: int
    phase: str | None
    shares: dict = field(default_factory=dict)
    confidence: float = math.nan
    imbalance_ratio: float = math.nan
    straggler_tax: float = math.nan
    hot_gpu: int | None = None
    hot_share: float = 0.0
    loads: dict = field(default_factory=dict)
    hot_set: tuple[int, ...] = ()

    def text(self) -> str:
        """One line: ``"prefill (0.97)"``, ``"decode (0.99), GPU 3 hot, ratio 1.80"`` or
        ``"decode (0.99), GPUs 1, 3, 5, 7 hot, ratio 1.43"``."""
        if self.phase is None:
            return "no labelled windows here"
        out = f"{self.phase} ({self.confidence:.2f})"
        if self.phase in ("decode", "mixed"):  # hot GPUs are flagged in decode windows
            if len(self.hot_set) > 1:
                out += f", GPUs {', '.join(map(str, self.hot_set))} hot"
            elif self.hot_gpu is not None:
                out += f", GPU {self.hot_gpu} hot"
            if math.isfinite(self.imbalance_ratio):
                out += f", ratio {self.imbalance_ratio:.2f}"
        mixed = {p: s for p, s in self.shares.items() if p != self.phase and s >= 0.2}
        if mixed:
            out += " · also " + ", ".join(f"{p} {s:.0%}" for p, s in mixed.items())
        return out


def verdict(windows: pd.DataFrame, gpus: list[int], t0: float, t1: float) -> Verdict:
    """The verdict of the windows that overlap ``[t0, t1]`` (``classify_samples`` columns)."""
    if windows is None or windows.empty:
        return Verdict(t0, t1, 0, None)
    w = windows[(windows["end"] > t0) & (windows["start"] < t1)]
    if w.empty:
        return Verdict(t0, t1, 0, None)
    counts = w["phase"].value_counts()
    shares = {p: float(counts.get(p, 0)) / len(w) for p in PHASE_ORDER if counts.get(p, 0)}
    phase = max(shares, key=lambda p: (shares[p], -PHASE_ORDER.index(p)))
    conf = float(w.loc[w["phase"] == phase, "confidence"].mean())
    dec = w[w["phase"] == "decode"]
    ratio = float(dec["imbalance_ratio"].mean()) if len(dec) else math.nan
    tax = float(dec["straggler_tax"].mean()) if len(dec) else math.nan
    flagged = w["hot_gpu"].dropna()
    hot, hot_share = None, 0.0
    if len(flagged):
        top = flagged.astype(int).value_counts()
        hot = int(top.index[0])
        hot_share = float(top.iloc[0]) / len(w)
    hot_set = tuple(imbalance_summary(w)["hot_set"])
    loads = {g: float(w[f"load_g{g}"].mean()) for g in gpus if f"load_g{g}" in w}
    return Verdict(t0, t1, len(w), phase, shares, conf, ratio, tax, hot, hot_share, loads,
                   hot_set)


def moment_verdict(history, t: float | None, span: float) -> Verdict:
    """The verdict of ``t +- span`` (epoch s) from a ``History``'s windows."""
    if t is None or not (math.isfinite(t) and math.isfinite(span) and plausible(t)):
        return Verdict(math.nan, math.nan, 0, None)
    w = history.windows(math.floor((t - span) / history.window_s) - 1,
                        math.ceil((t + span) / history.window_s) + 1)
    return verdict(w, history.gpus, t - span, t + span)


def compare_table(names: list[str], verdicts: list[Verdict], gpus: list[int]) -> list[list]:
    """Rows ``[quantity, value per screenshot ..., last - first]`` comparing verdicts (the
    moments of two or more screenshots): phase shares (%), imbalance ratio, straggler tax (%),
    hot GPU (``"GPUs 1, 3, 5, 7"`` for a hot set of several), and each GPU's mean load (%).
    Unknown values are NaN; the difference is between the first and last screenshots with a
    value (NaN with fewer than two); the hot GPU row has none."""
    def pct(v):
        return 100.0 * v if v is not None and math.isfinite(v) else math.nan

    rows: list[list] = [["moment", *names, "Δ last − first"]]
    quantities: list[tuple[str, list[float]]] = []
    for p in PHASE_ORDER:
        quantities.append((f"{p} share (%)", [pct(v.shares.get(p, 0.0)) if v.windows else
                                               math.nan for v in verdicts]))
    quantities.append(("imbalance ratio (max/mean)", [v.imbalance_ratio for v in verdicts]))
    quantities.append(("straggler tax (%)", [pct(v.straggler_tax) for v in verdicts]))
    for g in gpus:
        quantities.append((f"GPU {g} load (%)", [v.loads.get(g, math.nan) for v in verdicts]))
    for name, vals in quantities:
        known = [v for v in vals if v is not None and math.isfinite(v)]
        delta = known[-1] - known[0] if len(known) > 1 else math.nan
        rows.append([name, *vals, delta])
    rows.insert(5, ["hot GPU", *[f"GPUs {', '.join(map(str, v.hot_set))}"
                                 if len(v.hot_set) > 1 else v.hot_gpu for v in verdicts], None])
    return rows


def halves() -> list[dict]:
    """Two regions: the top and bottom halves, both at the capture time (offset 0)."""
    return [{"name": "top", "box": [0.0, 0.0, 1.0, 0.5], "offset_s": 0.0},
            {"name": "bottom", "box": [0.0, 0.5, 1.0, 1.0], "offset_s": 0.0}]


def region_from_shape(shape: dict, width: int, height: int, n: int) -> dict | None:
    """A region from a rectangle drawn on the picture (plotly shape in pixel coordinates),
    as fractions of the picture, clipped to it; None for a shape that is not a rectangle of
    some size."""
    try:
        x0, x1 = sorted((float(shape["x0"]), float(shape["x1"])))
        y0, y1 = sorted((float(shape["y0"]), float(shape["y1"])))
    except (KeyError, TypeError, ValueError):
        return None
    box = [max(0.0, x0 / width), max(0.0, y0 / height), min(1.0, x1 / width),
           min(1.0, y1 / height)]
    if box[2] - box[0] < 0.01 or box[3] - box[1] < 0.01:
        return None
    return {"name": f"box {n}", "box": [round(b, 4) for b in box], "offset_s": 0.0}


def parse_regions(text: str | None) -> list[dict]:
    """The stored regions (JSON), or [] when none or unreadable; an offset that is not a
    number within ``MAX_REGION_OFFSET_S`` reads as 0."""
    try:
        regions = json.loads(text) if text else []
    except (TypeError, ValueError):
        return []
    if not isinstance(regions, list):
        return []
    out = []
    for r in regions:
        if isinstance(r, dict) and "box" in r:
            try:
                off = region_offset(r.get("offset_s", 0.0))
            except ValueError:
                off = 0.0
            out.append({**r, "offset_s": off, "name": str(r.get("name", "region"))})
    return out


def region_offset(value) -> float:
    """A region's time offset, seconds, from an input's value (None or blank: 0).

    Raises:
        ValueError: not a number, or beyond ``MAX_REGION_OFFSET_S`` either way.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return 0.0
    try:
        off = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a number of seconds") from None
    if not math.isfinite(off) or abs(off) > MAX_REGION_OFFSET_S:
        raise ValueError(f"{value!r} is not within ±{MAX_REGION_OFFSET_S:,.0f} s")
    return off


def region_color(i: int) -> str:
    """Outline colour of region ``i`` (0-based)."""
    return REGION_COLORS[i % len(REGION_COLORS)]


# -- layout --------------------------------------------------------------------------------


def page(store_temporary: bool) -> html.Div:
    """The Screenshots page (hidden until its tab is chosen)."""
    note = ("This dashboard's store is temporary: screenshots go when it stops. Start it with "
            "--store FILE to keep them." if store_temporary else
            "Screenshots are kept in the store and come back after a restart.")
    return html.Div(id=ids.SHOTS_PAGE, className="tl-shots", style={"display": "none"}, children=[
        html.Div(className="tl-panel tl-upload-row", children=[
            dcc.Upload(id=ids.SHOT_UPLOAD, multiple=True, className="tl-upload",
                       accept="image/png,image/jpeg,.png,.jpg,.jpeg",
                       children=html.Div(["Drop screenshots here or ", html.B("pick files"),
                                          html.Br(),
                                          html.Span(f"PNG or JPEG, up to {MAX_BYTES >> 20} MB "
                                                    f"each", className="tl-muted")])),
            html.Div(className="tl-upload-side", children=[
                html.Div([html.Span("time zone of the pictures' clocks ",
                                    className="tl-group-label"),
                          dcc.Input(id=ids.SHOT_TZ, type="text", debounce=True,
                                    className="tl-time", placeholder="the browser's")]),
                html.Div(note, className="tl-muted"),
                html.Div(id=ids.SHOT_MSG, className="tl-shot-msg"),
            ]),
        ]),
        html.Div(className="tl-panel", children=[
            html.Div("Screenshots", className="tl-panel-title"),
            html.Div(id=ids.SHOT_LIST),
        ]),
        detail_skeleton(),
        html.Div(className="tl-panel", children=[
            html.Div("Compare", className="tl-panel-title"),
            dcc.Checklist(id=ids.SHOT_CMP, options=[], value=[], inline=True,
                          className="tl-radio tl-cmp-pick"),
            dcc.Store(id=ids.SHOT_SCROLL),
            html.Div(id=ids.SHOT_COMPARE),
        ]),
    ])


def detail_skeleton() -> html.Div:
    """The opened screenshot's panel: title, picture, verdicts, its moment in the dashboard,
    and the time / region controls (filled by a callback; hidden while none is open)."""
    empty = go.Figure().update_layout(height=40, margin={"l": 0, "r": 0, "t": 0, "b": 0},
                                      xaxis={"visible": False}, yaxis={"visible": False})
    return html.Div(id=ids.SHOT_DETAIL, className="tl-panel", style={"display": "none"}, children=[
        html.Div(id=ids.SHOT_DETAIL_TITLE, className="tl-panel-title"),
        html.Div(className="tl-shot-detail", children=[
            html.Div(className="tl-shot-pic", children=[
                dcc.Graph(id=ids.SHOT_IMAGE, figure=empty,
                          config={"displaylogo": False, "scrollZoom": True,
                                  "modeBarButtonsToAdd": ["drawrect"]}),
                html.Div("Scroll to zoom; draw a rectangle to add a region.",
                         className="tl-muted"),
            ]),
            html.Div(className="tl-shot-side", children=[
                html.Div(id=ids.SHOT_VERDICTS, className="tl-verdicts"),
                dcc.Graph(id=ids.SHOT_VIEW, figure=empty, config={"displaylogo": False},
                          className="tl-shot-view"),
            ]),
        ]),
        html.Div(className="tl-shot-controls", children=[
            html.Span("capture time ", className="tl-group-label"),
            dcc.Input(id=ids.SHOT_TIME, type="text", debounce=True, className="tl-time",
                      placeholder="YYYY-MM-DD HH:MM:SS"),
            html.Span(" in ", className="tl-group-label"),
            dcc.Input(id=ids.SHOT_ZONE, type="text", debounce=True, className="tl-time"),
            html.Span(id=ids.SHOT_OFFSETS),
            html.Button("save time and offsets", id=ids.SHOT_SAVE, n_clicks=0,
                        className="tl-btn"),
            html.Button("split top / bottom", id=ids.SHOT_SPLIT, n_clicks=0, className="tl-btn"),
            html.Button("clear regions", id=ids.SHOT_CLEAR, n_clicks=0, className="tl-btn"),
        ]),
        html.Div([html.Span("verdict over ± ", className="tl-group-label"),
                  dcc.Input(id=ids.SHOT_SPAN, type="number", step="any",
                            value=SPAN_S, debounce=True, className="tl-num-input"),
                  html.Span(" s around each moment", className="tl-group-label")],
                 className="tl-span-row"),
    ])


def _picture(sha: str, width: int, height: int, regions: list[dict]) -> go.Figure:
    """The screenshot as a zoomable figure (pixel axes, y down) with its regions outlined;
    rectangles drawn on it become regions."""
    # a layout image (go.Image takes data URIs only): served by URL, zoomable with the axes
    fig = go.Figure(go.Scatter(x=[0, width], y=[0, height], mode="markers",
                               marker={"opacity": 0}, hoverinfo="skip", showlegend=False))
    fig.add_layout_image(source=f"/tealeaves/screenshots/{sha}", xref="x", yref="y", x=0, y=0,
                         sizex=width, sizey=height, sizing="stretch", layer="below",
                         xanchor="left", yanchor="top")
    for i, r in enumerate(regions):
        x0, y0, x1, y1 = r["box"]
        fig.add_shape(type="rect", x0=x0 * width, x1=x1 * width, y0=y0 * height,
                      y1=y1 * height, line={"color": region_color(i), "width": 3},
                      fillcolor="rgba(0,0,0,0)", editable=False)
        fig.add_annotation(x=x0 * width, y=y0 * height, text=f"<b>{i + 1}</b> {r['name']}",
                           showarrow=False, xanchor="left", yanchor="top",
                           bgcolor="rgba(255,255,255,0.85)", font={"size": 12})
    fig.update_layout(margin={"l": 0, "r": 0, "t": 0, "b": 0}, dragmode="drawrect",
                      plot_bgcolor="white",
                      newshape={"line": {"color": "#d62728", "width": 3}},
                      height=max(260, min(620, int(560 * height / max(width, 1)))),
                      uirevision=sha)
    fig.update_xaxes(visible=False, range=[0, width])
    fig.update_yaxes(visible=False, range=[height, 0], scaleanchor="x")
    return fig


def _fmt_local(ts: float | None, tz: str | None) -> str:
    if ts is None or not math.isfinite(ts):
        return "unknown"
    try:
        zone = ZoneInfo(tz or "UTC")
    except Exception:  # noqa: BLE001 - a zone that no longer resolves: show UTC
        zone = UTC
    try:
        loc = datetime.fromtimestamp(ts, tz=zone)
        utc = datetime.fromtimestamp(ts, tz=UTC)
    except (ValueError, OverflowError, OSError):
        return f"out of range ({ts:g})"
    return f"{loc:%Y-%m-%d %H:%M:%S} {tz or 'UTC'} ({utc:%H:%M:%S} UTC)"


def _verdict_line(v: Verdict) -> html.Span:
    color = PHASE_COLORS.get(v.phase or "", "#9ca3af")
    return html.Span([html.Span("●", style={"color": color}), f" {v.text()}"],
                     className="tl-verdict")


# -- callbacks -----------------------------------------------------------------------------


def register(app: dash.Dash, live) -> None:
    """Add the Screenshots page's callbacks and the picture route to ``app``.

    Args:
        app: the dashboard's Dash app (``create_app``).
        live: its ``app.dashboard.LiveView`` (store and history).
    """
    store = live.store
    server = app.server
    server.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES

    @server.route("/tealeaves/screenshots/<sha>")
    def _picture_bytes(sha: str):
        from flask import Response, abort

        if not _SHA.fullmatch(sha or ""):
            abort(404)
        data = store.screenshot_data(sha)
        if data is None:
            abort(404)
        row = store.screenshots()
        fmt = row.loc[row["sha256"] == sha, "format"]
        mime = "image/jpeg" if len(fmt) and fmt.iloc[0] == "JPEG" else "image/png"
        resp = Response(data, mimetype=mime)
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Cache-Control"] = "private, max-age=31536000, immutable"
        return resp

    def span_verdict(t: float | None, span: float) -> Verdict:
        live.history.update()
        return moment_verdict(live.history, t, span)

    # the browser's time zone, once
    app.clientside_callback(
        """function(v) { if (v) return window.dash_clientside.no_update;
           try { return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'; }
           catch (e) { return 'UTC'; } }""",
        Output(ids.SHOT_TZ, "value"), Input(ids.SHOT_TZ, "value"))

    # tabs: live / screenshots
    app.clientside_callback(
        """function(page) {
            const live = page !== 'shots';
            return [{display: live ? '' : 'none'}, {display: live ? 'none' : ''},
                    live ? 'tl-tab tl-tab-on' : 'tl-tab', live ? 'tl-tab' : 'tl-tab tl-tab-on'];
        }""",
        Output(ids.LIVE_PAGE, "style"), Output(ids.SHOTS_PAGE, "style"),
        Output(ids.TAB_LIVE, "className"), Output(ids.TAB_SHOTS, "className"),
        Input(ids.PAGE, "data"))
    app.clientside_callback(
        """function(a, b) {
            const t = window.dash_clientside.callback_context.triggered;
            return (t.length && t[0].prop_id.startsWith('TAB')) ? 'shots' : 'live';
        }""".replace("TAB", ids.TAB_SHOTS),
        Output(ids.PAGE, "data"), Input(ids.TAB_LIVE, "n_clicks"),
        Input(ids.TAB_SHOTS, "n_clicks"), prevent_initial_call=True)
    # a click on a screenshot marker in the live figure opens it
    app.clientside_callback(
        """function(data) {
            const nu = window.dash_clientside.no_update;
            if (!data || !data.points) return [nu, nu];
            for (const p of data.points) {
                if (typeof p.customdata === 'string' && /^[0-9a-f]{64}$/.test(p.customdata)) {
                    return [p.customdata, 'shots'];
                }
            }
            return [nu, nu];
        }""",
        Output(ids.SHOT_SELECTED, "data", allow_duplicate=True),
        Output(ids.PAGE, "data", allow_duplicate=True),
        Input(ids.GRAPH, "clickData"), prevent_initial_call=True)

    # an opened screenshot (list, marker or upload) is scrolled into view once shown
    app.clientside_callback(
        """function(sha) {
            if (!sha) return window.dash_clientside.no_update;
            let tries = 0;
            const go = () => {
                const el = document.getElementById('DETAIL');
                if (el && el.offsetParent !== null && el.style.display !== 'none') {
                    el.scrollIntoView({behavior: 'smooth', block: 'start'});
                } else if (++tries < 40) { setTimeout(go, 100); }
            };
            setTimeout(go, 150);
            return sha;
        }""".replace("DETAIL", ids.SHOT_DETAIL),
        Output(ids.SHOT_SCROLL, "data"), Input(ids.SHOT_SELECTED, "data"),
        prevent_initial_call=True)

    # The browser keeps back what the server would refuse unread (a file over the size limit;
    # files beyond what one request may carry), so it is named in the messages instead of
    # failing the whole request (HTTP 413).
    app.clientside_callback(
        """function(contents, names, modified) {
            const nu = window.dash_clientside.no_update;
            if (!contents) return nu;
            if (typeof contents === 'string') {
                contents = [contents]; names = [names]; modified = [modified];
            }
            const files = [];
            let total = 0;
            for (let i = 0; i < contents.length; i++) {
                const c = contents[i] || '';
                const bytes = Math.floor((c.length - c.indexOf(',') - 1) * 3 / 4);
                const f = {name: (names || [])[i] || ('upload ' + (i + 1)),
                           modified: (modified || [])[i], bytes: bytes, content: null};
                if (bytes > MAXFILE) f.why = 'over';
                else if (total + c.length > MAXREQ) f.why = 'batch';
                else { f.content = c; total += c.length; }
                files.push(f);
            }
            return {files: files, n: Date.now()};
        }""".replace("MAXFILE", str(MAX_BYTES)).replace("MAXREQ", str(MAX_REQUEST_BYTES // 2)),
        Output(ids.SHOT_BATCH, "data"), Input(ids.SHOT_UPLOAD, "contents"),
        State(ids.SHOT_UPLOAD, "filename"), State(ids.SHOT_UPLOAD, "last_modified"),
        prevent_initial_call=True)

    @app.callback(
        Output(ids.SHOT_MSG, "children"),
        Output(ids.SHOTS_VERSION, "data", allow_duplicate=True),
        Output(ids.SHOT_SELECTED, "data", allow_duplicate=True),
        Output(ids.SHOT_UPLOAD, "contents"),
        Input(ids.SHOT_BATCH, "data"),
        State(ids.SHOT_TZ, "value"),
        State(ids.SHOTS_VERSION, "data"),
        prevent_initial_call=True,
    )
    def _upload(batch, tz, version):
        files = (batch or {}).get("files") or []
        if not files:
            raise dash.exceptions.PreventUpdate
        try:
            tz = zone_name(tz or "UTC")
        except ScreenshotError as exc:
            return ([html.Div(f"✗ {exc}: set the time zone, then drop the files again; nothing "
                              f"was stored", className="tl-stale")], dash.no_update,
                    dash.no_update, None)
        msgs, last = [], dash.no_update
        for f in files:
            name = re.split(r"[\\/]", str(f.get("name") or "upload"))[-1]
            try:
                if f.get("why") == "over":
                    raise ScreenshotError(f"{name}: {f.get('bytes', 0) / 2**20:.1f} MB is over "
                                          f"the {MAX_BYTES >> 20} MB limit")
                if f.get("why") == "batch":
                    raise ScreenshotError(f"{name}: not sent, this drop is over "
                                          f"{MAX_REQUEST_BYTES // 2 >> 20} MB in all; drop it "
                                          f"again on its own")
                msgs.append(_accept(store, f.get("content"), name, f.get("modified"), tz))
                last = msgs[-1].title
            except ScreenshotError as exc:
                msgs.append(html.Div(f"✗ {exc}", className="tl-stale"))
        return msgs, (version or 0) + 1, last, None

    @app.callback(
        Output(ids.SHOT_LIST, "children"),
        Output(ids.SHOT_CMP, "options"),
        Output(ids.GRAPH, "figure", allow_duplicate=True),
        Input(ids.SHOTS_VERSION, "data"),
        State(ids.CURSOR, "data"),
        prevent_initial_call="initial_duplicate",
    )
    def _list(_version, state):
        live.shots_changed()
        shots = store.screenshots()
        rows = []
        for r in shots.itertuples():
            ts = r.capture_ts if pd.notna(r.capture_ts) else None
            v = span_verdict(ts, SPAN_S)
            rows.append(html.Tr([
                html.Td(html.Img(src=f"/tealeaves/screenshots/{r.sha256}", className="tl-thumb")),
                html.Td([html.B(r.name), html.Br(),
                         html.Span(f"{r.width} x {r.height} px · {r.nbytes / 1024:,.0f} KB",
                                   className="tl-muted")]),
                html.Td([_fmt_local(ts, r.tz), html.Br(),
                         html.Span(f"from {r.time_source}", className="tl-muted")]),
                html.Td(_verdict_line(v) if ts is not None else
                        html.Span("set its time to place it", className="tl-stale")),
                html.Td([html.Button("open", id={"type": ids.SHOT_OPEN, "sha": r.sha256},
                                     className="tl-btn"),
                         html.Button("delete", id={"type": ids.SHOT_DEL, "sha": r.sha256},
                                     className="tl-btn tl-btn-danger")]),
            ], className="tl-shot-row"))
        table = (html.Table([html.Tbody(rows)], className="tl-table tl-shot-table") if rows
                 else html.Div("No screenshots yet.", className="tl-muted"))
        options = [{"label": f" {r.name}", "value": r.sha256} for r in shots.itertuples()]
        patch = dash.Patch()
        st = state or {}
        from ..figures import trace_keys

        keys = trace_keys(st.get("gpus") or [], bool(st.get("server")))
        if ("shots",) in keys:
            if st.get("mode") == "follow" and st.get("span") and st.get("edge") is not None:
                # a followed x axis autoranges: mark only what is in view (the page is
                # redrawn when that changes)
                edge = float(st["edge"]) / 1000.0
                shots = shots_between(shots, edge - float(st["span"]), edge)
            x, y, text, sha = shot_points(shots)
            i = keys.index(("shots",))
            patch["data"][i]["x"] = x
            patch["data"][i]["y"] = y
            patch["data"][i]["text"] = text
            patch["data"][i]["customdata"] = sha
            patch["layout"]["shapes"] = fixed_shapes(st) + shot_lines(shots)
        return table, options, patch

    @app.callback(
        Output(ids.SHOT_SELECTED, "data", allow_duplicate=True),
        Output(ids.SHOTS_VERSION, "data", allow_duplicate=True),
        Input({"type": ids.SHOT_OPEN, "sha": ALL}, "n_clicks"),
        Input({"type": ids.SHOT_DEL, "sha": ALL}, "n_clicks"),
        State(ids.SHOT_SELECTED, "data"),
        State(ids.SHOTS_VERSION, "data"),
        prevent_initial_call=True,
    )
    def _row_action(_open, _del, selected, version):
        trig = dash.ctx.triggered_id
        if not trig or not any(t.get("value") for t in dash.ctx.triggered):
            raise dash.exceptions.PreventUpdate
        sha = trig["sha"]
        if trig["type"] == ids.SHOT_DEL:
            store.delete_screenshot(sha)
            return (None if selected == sha else dash.no_update), (version or 0) + 1
        return sha, dash.no_update

    @app.callback(
        Output(ids.SHOT_DETAIL, "style"),
        Output(ids.SHOT_DETAIL_TITLE, "children"),
        Output(ids.SHOT_IMAGE, "figure"),
        Output(ids.SHOT_VERDICTS, "children"),
        Output(ids.SHOT_VIEW, "figure"),
        Output(ids.SHOT_VIEW, "style"),
        Output(ids.SHOT_TIME, "value"),
        Output(ids.SHOT_ZONE, "value"),
        Output(ids.SHOT_OFFSETS, "children"),
        Input(ids.SHOT_SELECTED, "data"),
        Input(ids.SHOTS_VERSION, "data"),
        Input(ids.SHOT_SPAN, "value"),
        State(ids.PAGE_TZ, "data"),
        prevent_initial_call=True,
    )
    def _detail(sha, _version, span, page_tz):
        shots = store.screenshots()
        row = shots[shots["sha256"] == sha] if sha else shots.iloc[0:0]
        if row.empty:
            return ({"display": "none"}, *[dash.no_update] * 8)
        out = list(detail(live, row.iloc[0], _span(span), page_tz))
        note = span_note(span)
        if note:
            out[2] = [html.Div(note, className="tl-stale"), *out[2]]
        return ({}, *out)

    @app.callback(
        Output(ids.SHOTS_VERSION, "data", allow_duplicate=True),
        Output(ids.SHOT_MSG, "children", allow_duplicate=True),
        Output(ids.SHOT_IMAGE, "relayoutData"),
        Input(ids.SHOT_SAVE, "n_clicks"),
        Input(ids.SHOT_SPLIT, "n_clicks"),
        Input(ids.SHOT_CLEAR, "n_clicks"),
        Input(ids.SHOT_IMAGE, "relayoutData"),
        State(ids.SHOT_SELECTED, "data"),
        State(ids.SHOT_TIME, "value"),
        State(ids.SHOT_ZONE, "value"),
        State({"type": ids.REGION_OFFSET, "i": ALL}, "value"),
        State(ids.SHOTS_VERSION, "data"),
        prevent_initial_call=True,
    )
    def _edit(_save, _split, _clear, relayout, sha, when, zone, offsets, version):
        trig = dash.ctx.triggered_id
        shots = store.screenshots()
        row = shots[shots["sha256"] == sha]
        if not sha or row.empty:
            raise dash.exceptions.PreventUpdate
        r = row.iloc[0]
        regions = parse_regions(r.regions)
        fields: dict = {}
        if trig == ids.SHOT_SAVE:
            try:
                fields.update(edited_time(r, when, zone))
                new = []
                for i, (reg, off) in enumerate(zip(regions, offsets or [])):
                    try:
                        new.append({**reg, "offset_s": region_offset(off)})
                    except ValueError as exc:
                        raise ScreenshotError(f"{r['name']}: region {i + 1} offset: "
                                              f"{exc}") from None
            except ScreenshotError as exc:
                return dash.no_update, html.Div(f"✗ {exc}", className="tl-stale"), None
            if regions:
                fields["regions"] = json.dumps(new)
        elif trig == ids.SHOT_SPLIT:  # drawn boxes stay; halves already there are replaced
            boxes = [g for g in regions if g["name"] not in ("top", "bottom")]
            fields["regions"] = json.dumps([*halves(), *boxes])
        elif trig == ids.SHOT_CLEAR:
            fields["regions"] = json.dumps([])
        elif trig == ids.SHOT_IMAGE:
            shape = None
            for k, v in (relayout or {}).items():
                if k == "shapes" and isinstance(v, list) and v:
                    shape = v[-1]
            if shape is None:
                raise dash.exceptions.PreventUpdate
            reg = region_from_shape(shape, int(r.width), int(r.height), len(regions) + 1)
            if reg is None:
                raise dash.exceptions.PreventUpdate
            fields["regions"] = json.dumps([*regions, reg])
        else:
            raise dash.exceptions.PreventUpdate
        if fields:
            store.update_screenshot(sha, **fields)
        # relayoutData is emptied so the same rectangle drawn again still reaches here
        return (version or 0) + 1, [], None

    @app.callback(
        Output(ids.SHOT_COMPARE, "children"),
        Input(ids.SHOT_CMP, "value"),
        Input(ids.SHOTS_VERSION, "data"),
        Input(ids.SHOT_SPAN, "value"),
        prevent_initial_call=True,
    )
    def _compare(chosen, _version, span):
        shots = store.screenshots()
        chosen = [s for s in (chosen or []) if s in set(shots["sha256"])]
        if len(chosen) < 2:
            return html.Div("Tick two or more screenshots to compare their moments.",
                            className="tl-muted")
        sub = shots.set_index("sha256").loc[chosen]
        sub = sub.sort_values("capture_ts", na_position="last")
        half = _span(span)
        vs = [span_verdict(t if pd.notna(t) else None, half) for t in sub["capture_ts"]]
        names = [f"{n}" for n in sub["name"]]
        cards = [html.Div(className="tl-cmp-card", children=[
            html.Img(src=f"/tealeaves/screenshots/{sha}", className="tl-cmp-img"),
            html.Div(html.B(n)),
            html.Div(_fmt_local(t if pd.notna(t) else None, tz), className="tl-muted"),
            _verdict_line(v)]) for sha, n, t, tz, v in zip(sub.index, names, sub["capture_ts"],
                                                            sub["tz"], vs)]
        rows = compare_table(names, vs, live.history.gpus)

        def cell(v):
            if v is None:
                return "–"
            if isinstance(v, str):
                return v
            if isinstance(v, int | np.integer):
                return f"GPU {v}"
            return f"{v:.2f}" if math.isfinite(v) else "–"
        head = html.Tr([html.Th(c) for c in rows[0]])
        body = []
        for r in rows[1:]:
            tds = [html.Td(r[0])] + [html.Td(cell(v)) for v in r[1:-1]]
            d = r[-1]
            tds.append(html.Td("–" if d is None or (isinstance(d, float) and not math.isfinite(d))
                               else f"{d:+.2f}", className="tl-delta"))
            body.append(html.Tr(tds))
        return [html.Div(cards, className="tl-cmp-cards"),
                html.Table([html.Thead(head), html.Tbody(body)],
                           className="tl-table tl-cmp-table")]


def edited_time(r, when: str | None, zone: str | None) -> dict:
    """The store fields for the capture time and zone typed for screenshot row ``r``:
    ``when`` is local ``YYYY-MM-DD HH:MM[:SS]`` in ``zone`` (IANA, any case). Nothing when
    both are what is stored, so the time keeps its source.

    Raises:
        ScreenshotError: unreadable, outside ``YEARS``, skipped by a clock change, or an
            unknown zone.
    """
    zone = zone_name(zone or r.tz or "UTC")
    text = " ".join((when or "").strip().replace("T", " ").split())
    if not text:
        raise ScreenshotError(f"{r['name']}: enter the capture time as YYYY-MM-DD HH:MM:SS")
    local = None
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"):
        try:
            local = datetime.strptime(text, fmt)
            break
        except ValueError:
            continue
    if local is None:
        raise ScreenshotError(f"{r['name']}: cannot read {text[:40]!r} as a local time "
                              f"(YYYY-MM-DD HH:MM:SS)")
    if not plausible(local):
        raise ScreenshotError(f"{r['name']}: {text!r} is outside {YEARS[0]}-{YEARS[1]}")
    ts = to_epoch(local, zone, strict=True)
    old = float(r.capture_ts) if pd.notna(r.capture_ts) else None
    if old is not None and abs(old - ts) < 1.0 and zone == (r.tz or "UTC"):
        return {}
    return {"capture_ts": ts, "capture_local": local.isoformat(sep=" "), "tz": zone,
            "time_source": "set by the user"}


def fixed_shapes(state: dict) -> list[dict]:
    """The live figure's own shapes for a page whose cursor is ``state`` (kept when the
    screenshot lines are replaced)."""
    gpus = list(state.get("gpus") or [])
    server = bool(state.get("server"))
    skeleton = build_figure(pd.DataFrame(), pd.DataFrame(), gpus,
                            server=pd.DataFrame(columns=["pf_batches"]) if server else None)
    return base_shapes(skeleton, gpus, rows(server))


def span_note(value) -> str | None:
    """Why the verdict span typed is not the one used (None when it is)."""
    if value is None or value == "":
        return f"verdict span: using {SPAN_S:g} s"
    try:
        v = float(value)
    except (TypeError, ValueError):
        return f"verdict span {value!r} is not a number of seconds: using {SPAN_S:g} s"
    if not math.isfinite(v) or not 0.5 <= v <= 600.0:
        return f"verdict span {value!r} is outside 0.5-600 s: using {_span(value):g} s"
    return None


def _span(value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return SPAN_S
    return min(max(v, 0.5), 600.0) if math.isfinite(v) else SPAN_S


def detail(live, r, span: float, page_tz: str | None = None) -> tuple:
    """What the opened screenshot's panel shows: title, picture (regions outlined), verdicts
    (whole picture and each region), its moment in the dashboard (time axis in the browser's
    zone ``page_tz``), the capture time and zone for editing, and the regions' offset
    inputs."""
    h = live.history
    ts = float(r.capture_ts) if pd.notna(r.capture_ts) else None
    regions = parse_regions(r.regions)
    tz = r.tz or "UTC"
    local_value = ""
    if ts is not None:
        try:
            local_value = datetime.fromtimestamp(ts, tz=ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M:%S")
        except Exception:  # noqa: BLE001 - unknown stored zone: show UTC
            local_value = datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    verdicts: list = []
    view, view_style = dash.no_update, {"display": "none"}
    if ts is None:
        verdicts.append(html.Div("No capture time: set it below to place this screenshot.",
                                 className="tl-stale"))
    else:
        h.update()
        verdicts.append(html.Div([html.B("whole picture: "),
                                  _verdict_line(moment_verdict(h, ts, span))]))
        for i, reg in enumerate(regions):
            off = float(reg.get("offset_s", 0.0))
            verdicts.append(html.Div([html.B(f"region {i + 1} ({reg['name']}, {off:+g} s): "),
                                      _verdict_line(moment_verdict(h, ts + off, span))]))
        view, view_style = moment_figure(live, ts, span, regions, page_tz), {}
    offsets = [html.Span([html.Span(f"region {i + 1} ({reg['name']}) offset",
                                    className="tl-group-label",
                                    style={"color": region_color(i)}),
                          # step "any" and no min/max: a browser turns a value its checks
                          # refuse into None, which would read as 0; the server checks it
                          dcc.Input(id={"type": ids.REGION_OFFSET, "i": i}, type="number",
                                    value=float(reg.get("offset_s", 0.0)), step="any",
                                    className="tl-num-input"),
                          html.Span("s", className="tl-group-label")],
                         className="tl-offset-group")
               for i, reg in enumerate(regions)]
    title = f"{r['name']} · {_fmt_local(ts, tz)} · time from {r.time_source}"
    return (title, _picture(r.sha256, int(r.width), int(r.height), regions), verdicts, view,
            view_style, local_value, tz, offsets)


def moment_figure(live, ts: float, span: float, regions: list[dict],
                  page_tz: str | None = None) -> go.Figure:
    """The dashboard's figure over ``ts ± span`` (range view), the capture time and each
    region's moment marked; its time axis named for the browser's zone ``page_tz``."""
    v = live.range_view(ts - span, ts + span, px=700)
    fig = live.range_figure(v, height=560, uirevision=f"moment-{ts}", tz=page_tz)
    fig.add_vline(x=ts * 1000.0, line={"color": "#111827", "width": 2})
    for i, reg in enumerate(regions):
        off = float(reg.get("offset_s", 0.0))
        if off:
            fig.add_vline(x=(ts + off) * 1000.0, line={"color": region_color(i), "width": 2,
                                                        "dash": "dash"})
    fig.update_layout(showlegend=False, margin={"l": 124, "r": 10, "t": 10, "b": 30})
    return fig


def _accept(store, content: str, name: str, last_modified, tz: str) -> html.Div:
    """Check, time and keep one upload; returns its line for the message area (``title`` is
    its hash).

    Raises:
        ScreenshotError: refused (the message says why); nothing is kept.
    """
    label = re.split(r"[\\/]", name)[-1]
    header, _, b64 = (content or "").partition(",")
    if not header.startswith("data:") or ";base64" not in header:
        raise ScreenshotError(f"{label}: the upload did not arrive as a file")
    try:
        data = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise ScreenshotError(f"{label}: the upload is damaged (bad base64)") from None
    info = inspect_image(data, label)
    mod = None
    try:
        mod = float(last_modified) if last_modified is not None else None
    except (TypeError, ValueError):
        mod = None
    if mod is not None and mod > 1e11:  # milliseconds from some browsers
        mod /= 1000.0
    when = capture_time(info.meta_time, label, mod)
    ts = when.resolve(tz)
    row = {"sha256": info.sha256, "name": label, "nbytes": info.nbytes, "width": info.width,
           "height": info.height, "format": info.format, "uploaded": time.time(),
           "capture_ts": ts, "capture_local": when.local.isoformat(sep=" ") if when.local
           else None, "tz": tz, "time_source": when.source, "regions": json.dumps([]),
           "note": None}
    new = store.put_screenshot(row, data)
    if not new:  # the stored copy keeps its name, time and regions
        kept = store.screenshots()
        kept = kept[kept["sha256"] == info.sha256]
        name_kept = str(kept["name"].iloc[0]) if len(kept) else label
        div = html.Div(f"= {label}: the same picture is already here as {name_kept}; kept "
                       f"that one", className="tl-ok")
    elif ts is None:
        div = html.Div(f"✓ {label}: no capture time in its metadata or name: open it and "
                       f"set the time", className="tl-ok")
    else:
        div = html.Div(f"✓ {label}: {_fmt_local(ts, tz)} (from {when.source})",
                       className="tl-ok")
    div.title = info.sha256
    return div


__all__ = ["FORMATS", "Verdict", "compare_table", "edited_time", "halves", "page",
           "region_from_shape", "region_offset", "register", "verdict"]
