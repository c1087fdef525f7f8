"""The Screenshots page's components: upload row, screenshot list, the opened screenshot's
panel (filled by ``callbacks``), the compare panel, and the settings its clientside functions
read (``js_config``)."""

from __future__ import annotations

import plotly.graph_objects as go
from dash import dcc, html

from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.screenshots.model import MAX_REQUEST_BYTES, SPAN_S
from tealeaves.data.screen.screenshots import MAX_BYTES

#: The page's path (``app.dashboard.pages.screenshots`` registers it).
PATH = "/screenshots"


def js_config() -> dict:
    """What ``assets/screenshots.js`` needs from the server (kept in ``ids.SHOT_CONFIG``):
    ``path`` (the page's path, where a click on a screenshot marker goes), ``detail`` (an
    element id), ``max_file`` (bytes one picture may have) and ``max_batch`` (characters of
    base64 one drop may send, half the request limit)."""
    return {"path": PATH, "detail": ids.SHOT_DETAIL,
            "max_file": MAX_BYTES, "max_batch": MAX_REQUEST_BYTES // 2}


def page(store_temporary: bool) -> html.Div:
    """The Screenshots page (hidden until its path is chosen): upload row, list, the opened
    screenshot's panel, the compare panel and the settings of its clientside functions.

    Args:
        store_temporary: the dashboard's store goes when it stops (no ``--store``); the page
            says so.
    """
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
            dcc.Store(id=ids.SHOT_LISTED, data=None),
            dcc.Store(id=ids.SHOT_CONFIG, data=js_config()),
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
                # responsive: the panel is hidden until a picture opens, and plotly would
                # otherwise keep the default 700 px width it measured while hidden
                dcc.Graph(id=ids.SHOT_IMAGE, figure=empty, style={"width": "100%"},
                          config={"displaylogo": False, "scrollZoom": True, "responsive": True,
                                  "modeBarButtonsToAdd": ["drawrect"]}),
                html.Div("Scroll to zoom; draw a rectangle to add a region.",
                         className="tl-muted"),
            ]),
            html.Div(className="tl-shot-side", children=[
                html.Div(id=ids.SHOT_VERDICTS, className="tl-verdicts"),
                html.Div(id=ids.SHOT_READ, className="tl-shot-read"),
                dcc.Interval(id=ids.SHOT_READ_TICK, interval=1000, disabled=True),
                html.Button(id=ids.SHOT_FIX, n_clicks=0, className="tl-btn",
                            style={"display": "none"}),
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


__all__ = ["detail_skeleton", "js_config", "page"]
