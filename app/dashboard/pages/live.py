"""The live page (path ``/``): the cluster panel, toolbar, live figure and side panels, and
their callbacks: the one update callback every tick and action goes through (``page_update``,
``_answer``), the hover and window panels, the cluster panel, the balance panel, the report
export, and the browser-side callbacks of ``assets/live.js`` (namespace ``live``).  How the
page follows, zooms and measures latency is told in ``app.dashboard.factory``.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import time

import dash
from dash import ClientsideFunction, Input, Output, State, dcc, html

from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.actions import act, export_report
from tealeaves.app.dashboard.config import MIN_HEIGHT_PX, PRESETS, DashboardConfig
from tealeaves.app.dashboard.cursor import Action, Cursor, page_state
from tealeaves.app.dashboard.header_panel import header_cells
from tealeaves.app.dashboard.inflight import SingleFlight
from tealeaves.app.dashboard.live import LiveView
from tealeaves.app.dashboard.live_patch import selected_trace
from tealeaves.app.dashboard.live_step import Step, not_labelled_yet
from tealeaves.app.dashboard.panels import (
    cluster_panel,
    follow_button,
    follow_note,
    hover_panel,
    toolbar,
    window_panel,
)
from tealeaves.app.dashboard.timefmt import page_zone, picker_value, session_options
from tealeaves.app.figures import LABELLING_TEXT, extendable, trace_keys
from tealeaves.data.store import StoreError

#: The page's path and its name in the navigation (``dash.register_page``).
PATH = "/"
NAME = "Live"


def layout(figure, state: Cursor, config: DashboardConfig) -> html.Div:
    """The live page's body: cluster panel, toolbar, the figure ``figure`` (the first
    snapshot's) and the side panels, for the page cursor ``state``."""
    return html.Div(id=ids.LIVE_PAGE, children=[
        cluster_panel(), toolbar(state, config),
        html.Div(className="tl-main", children=[_graph(figure, config), side_panels()]),
    ])


def register(app: dash.Dash, live: LiveView, config: DashboardConfig) -> None:
    """Add the live page's callbacks to ``app`` (server side and ``assets/live.js``)."""
    _register_clientside(app)
    _register_update(app, live, config)
    _register_panels(app, live, config)
    _register_cluster(app, live)
    _register_server_panel(app, live)
    _register_export(app, live)


def _graph(figure, config: DashboardConfig) -> dcc.Graph:
    """The live figure's graph, as tall as the window (at least ``MIN_HEIGHT_PX``) unless
    ``config.height`` is set."""
    return dcc.Graph(id=ids.GRAPH, figure=extendable(figure), className="tl-graph",
                     clear_on_unhover=False,
                     config={"displaylogo": False, "responsive": True,
                             # a double-click autoranges (read as "all"), instead of going
                             # back to the range first drawn
                             "doubleClick": "autosize",
                             "modeBarButtonsToRemove": ["select2d", "lasso2d"]},
                     style={"height": (f"{config.height}px" if config.height else
                                       f"max({MIN_HEIGHT_PX}px, calc(100vh - 12px))")})


def side_panels() -> html.Aside:
    """The panels right of the figure: the values at the cursor and the clicked window."""
    return html.Aside(className="tl-side", children=[
        html.Div(className="tl-panel", children=[
            html.Div("At the cursor", className="tl-panel-title"),
            html.Div(id=ids.HOVER_PANEL, children=[html.Div(
                "Hover over the figure: every GPU's values at that instant and the window's "
                "phase show here.", className="tl-muted")]),
        ]),
        html.Div(className="tl-panel", children=[
            html.Div("Window", className="tl-panel-title"),
            html.Div(id=ids.WINDOW_PANEL, children=window_panel(None, [], "")),
        ]),
        html.Div(className="tl-panel", id=ids.SERVER_PANEL, style={"display": "none"},
                 children=[
                     html.Div("Balance: MIG instances, DP ranks, experts",
                              className="tl-panel-title"),
                     html.Div(id=ids.SERVER_BODY),
                     dcc.Graph(id=ids.EXPERT_GRAPH, config={"displaylogo": False},
                               style={"display": "none"}),
                 ]),
    ])


def _register_clientside(app: dash.Dash) -> None:
    """The page's browser-side callbacks (``assets/live.js``, namespace ``live``): the tick,
    every user action, hover/click times, the latency meter and the page's one time zone."""
    def js(name: str) -> ClientsideFunction:
        return ClientsideFunction(namespace="live", function_name=name)

    app.clientside_callback(
        js("tick"),
        Output(ids.PULL, "data"), Output(ids.BUSY, "data", allow_duplicate=True),
        Input(ids.TICK, "n_intervals"),
        State(ids.BUSY, "data"), State(ids.PULL, "data"), State(ids.CLIENT_CONFIG, "data"),
        prevent_initial_call=True)
    # Every user action becomes one ACTION (and marks a request in flight, so the interval
    # does not supersede it).  The order of the inputs is what assets/live.js reads.
    app.clientside_callback(
        js("action"),
        Output(ids.ACTION, "data"), Output(ids.BUSY, "data", allow_duplicate=True),
        Input(ids.GRAPH, "relayoutData"),
        *[Input(pid, "n_clicks") for pid, _, _ in PRESETS],
        Input(ids.FOLLOW, "n_clicks"),
        Input(ids.RANGE_GO, "n_clicks"),
        Input(ids.RANGE_FROM, "n_submit"),
        Input(ids.RANGE_TO, "n_submit"),
        Input(ids.ORDER, "value"),
        Input(ids.SESSION, "value"),
        Input(ids.CLICK_T, "data"),
        State(ids.RANGE_FROM, "value"), State(ids.RANGE_TO, "value"),
        State(ids.CURSOR, "data"), State(ids.CLIENT_CONFIG, "data"),
        prevent_initial_call=True)
    # the balance panel's refresh, gated as the live tick is: a refresh slower than the
    # cluster tick would otherwise be superseded by the next one, every time
    app.clientside_callback(
        js("tick"),
        Output(ids.PANEL_PULL, "data"), Output(ids.PANEL_BUSY, "data", allow_duplicate=True),
        Input(ids.CLUSTER_TICK, "n_intervals"),
        State(ids.PANEL_BUSY, "data"), State(ids.PANEL_PULL, "data"),
        State(ids.CLIENT_CONFIG, "data"),
        prevent_initial_call=True)
    # the browser's zone: plotly shows the time axis in it, so every time on the page uses it
    app.clientside_callback(js("zone"), Output(ids.PAGE_TZ, "data"), Input(ids.PAGE_TZ, "data"))
    app.clientside_callback(js("zoneLabel"), Output(ids.TZ_LABEL, "children"),
                            Input(ids.PAGE_TZ, "data"))
    app.clientside_callback(js("pointTime"), Output(ids.HOVER_T, "data"),
                            Input(ids.GRAPH, "hoverData"), prevent_initial_call=True)
    app.clientside_callback(js("pointTime"), Output(ids.CLICK_T, "data"),
                            Input(ids.GRAPH, "clickData"), prevent_initial_call=True)
    app.clientside_callback(js("latency"), Output(ids.LATENCY, "children"),
                            Input(ids.CURSOR, "data"), State(ids.GRAPH, "id"),
                            prevent_initial_call=True)


def _register_update(app: dash.Dash, live: LiveView, config: DashboardConfig) -> None:
    """The one server callback every page request goes through (ticks and actions), and the
    session picker's options."""

    @app.callback(
        output={"options": Output(ids.SESSION, "options"),
                "placeholder": Output(ids.SESSION, "placeholder")},
        # every 3 s (the cluster tick), not every live tick: one request fewer per tick
        inputs={"_n": Input(ids.CLUSTER_TICK, "n_intervals"),
                "page_tz": Input(ids.PAGE_TZ, "data")},
        state={"have": State(ids.SESSION, "options")},
        prevent_initial_call=True,
    )
    def _sessions(_n, page_tz, have):
        opts = session_options(live.history.sessions, page_zone(page_tz).key,
                               live.being_written())
        if len(opts) <= 1:
            opts = []
        if opts == (have or []):
            raise dash.exceptions.PreventUpdate
        return {"options": opts,
                "placeholder": f"{len(opts)} sessions: pick one" if opts else "one session"}

    flights = SingleFlight()  # a retry of a slow action joins it (app.dashboard.inflight)

    @app.callback(
        output={
            "figure": Output(ids.GRAPH, "figure"),
            "extend": Output(ids.GRAPH, "extendData"),
            "cursor": Output(ids.CURSOR, "data"),
            "header": Output(ids.HEADER, "children"),
            "status": Output(ids.STATUS, "children"),
            "busy": Output(ids.BUSY, "data", allow_duplicate=True),
            "note": Output(ids.VIEW_NOTE, "children"),
            "follow_label": Output(ids.FOLLOW, "children"),
            "follow_class": Output(ids.FOLLOW, "className"),
            "range_from": Output(ids.RANGE_FROM, "value"),
            "range_to": Output(ids.RANGE_TO, "value"),
            "presets": [Output(pid, "className") for pid, _, _ in PRESETS],
        },
        inputs={"_pull": Input(ids.PULL, "data"), "action": Input(ids.ACTION, "data")},
        state={"state": State(ids.CURSOR, "data"), "selected": State(ids.SELECTED, "data"),
               "asked": State(ids.BUSY, "data"), "page_tz": State(ids.PAGE_TZ, "data")},
        prevent_initial_call=True,
    )
    def _update(_pull, action, state, selected, asked, page_tz):
        tz = page_zone(page_tz).key
        try:
            step, note, acted, applied = _answer(live, action, state, selected, tz, flights)
        except (sqlite3.ProgrammingError, StoreError):  # the server is shutting down
            raise dash.exceptions.PreventUpdate from None
        done_n = (state or {}).get("act_n")
        st: Cursor = {**page_state(step.state, config), "asked": asked,
                      "act_n": action.get("n") if applied else done_n}
        return page_update(live, step, st, note, acted, tz, state)


def _answer(live: LiveView, action: Action | None, state: Cursor | None, selected,
            tz: str, flights: SingleFlight | None = None) -> tuple[Step, object, bool, bool]:
    """Carry out one request of a page: its time zone changed (redraw), a user action not
    done yet, or a tick.  Returns the step, the view note (or ``dash.no_update``), whether the
    page's view was changed on purpose (``acted``) and whether ``action`` was carried out.

    An action is acted on once, whichever input fired: dash-renderer keeps only the newest
    request of a callback, so a tick fired while a zoom was on its way replaces the zoom's
    request, and it must carry the zoom out (the page's cursor names the last action done,
    ``act_n``).

    A redraw or an action slower than the page's ``STUCK_MS`` is asked again by the page's
    tick, with the same cursor: through ``flights`` the retry waits for the computation
    already running instead of starting it again (else every retry supersedes the last and
    the action never lands).
    """
    flights = flights or SingleFlight(keep=0)
    done_n = (state or {}).get("act_n")
    pending = bool(action) and action.get("n") is not None and action.get("n") != done_n
    key = json.dumps([action if pending else None, state, selected, tz], sort_keys=True,
                     default=str)
    if state and state.get("tz", "UTC") != tz:  # the page told its zone: redraw
        step = flights.run(("redraw", key), lambda: live.redraw({**state, "tz": tz},
                                                                selected))
        return step, dash.no_update, state.get("mode") == "range", False  # (an action waits)
    if pending:
        step, note = flights.run(("act", key), lambda: act(
            live, action, {**(state or {}), "tz": tz}, selected))
        return step, note, True, True
    return live.advance(state), dash.no_update, False, False


#: Cursor keys that change on every answer without changing what the page shows.
VOLATILE = frozenset({"sent", "asked", "ts_last", "mono_last", "cursor", "status_at"})

#: The status line (samples stored, age of the newest sample) is sent at most this often (s)
#: to a page whose view did not change: each answer the page applies costs it a render.
STATUS_EVERY_S = 1.0


def page_update(live: LiveView, step: Step, st: Cursor, note, acted: bool, tz: str,
                before: Cursor | None = None) -> dict:
    """The update callback's answer, by output name (``_register_update``): the figure (whole,
    a ``Patch`` or unchanged), its ``extendData``, the new cursor, header, status line, view
    note, follow button, the range picker's text and the presets' classes.

    ``before`` is the cursor the page sent.  A tick that changes nothing on the page (no new
    bins, windows or figure, no action) answers only ``busy`` (and the status line once per
    ``STATUS_EVERY_S``): a page applying an answer re-renders every output it names, which on
    a two-core machine with four pages open cost a third of a core per idle page.
    """
    nu = dash.no_update
    c = live.config
    now = time.time()
    last_status = float((before or {}).get("status_at") or 0.0)
    status_due = acted or now - last_status >= STATUS_EVERY_S
    idle = (not acted and note is nu and step.figure is None and step.patch is None
            and step.extend is None and step.summary is None and before is not None
            and {k: v for k, v in st.items() if k not in VOLATILE}
            == {k: v for k, v in before.items() if k not in VOLATILE})
    if idle:
        if not status_due:
            return {**{k: nu for k in _OUTPUT_NAMES}, "presets": [nu] * len(PRESETS),
                    "busy": None}
        st = {**before, **{k: st[k] for k in VOLATILE if k in st}, "status_at": now}
        return {**{k: nu for k in _OUTPUT_NAMES}, "presets": [nu] * len(PRESETS),
                "busy": None, "cursor": st, "status": live.status(st)}
    st = {**st, "status_at": now if status_due else last_status}
    # a whole figure goes out with a z list on every trace: the live extendData extends z
    fig = extendable(step.figure) if step.figure is not None else (
        step.patch if step.patch is not None else nu)
    if note is nu and st.get("mode") == "range" and (step.patch is not None
                                                      or step.figure is not None):
        note = st.get("view", "")
    elif note is nu and step.figure is not None:
        note = follow_note(st, c)
    # the picker shows a range the user asked for; a refresh of "all" does not overwrite what
    # they may be typing
    rng = st.get("range") if st.get("mode") == "range" and acted else None
    cleared = "" if acted and st.get("mode") == "follow" else nu
    follow_label, follow_cls = follow_button(st)
    preset = st.get("span") if st.get("mode") == "follow" else (
        "all" if st.get("follow") else "none")
    return {
        "figure": fig,
        "extend": step.extend if step.extend is not None else nu,
        "cursor": st,
        "header": header_cells(step.summary, tz) if step.summary is not None else nu,
        "status": live.status(st) if status_due else nu,
        "busy": None,
        "note": note,
        "follow_label": follow_label,
        "follow_class": follow_cls,
        "range_from": picker_value(rng[0], tz) if rng else cleared,
        "range_to": picker_value(rng[1], tz) if rng else cleared,
        "presets": [("tl-btn tl-btn-on" if (span is None and preset == "all")
                     or (span is not None and preset == span) else "tl-btn")
                    for _, _, span in PRESETS],
    }


#: The update callback's outputs other than ``presets`` (``_register_update``).
_OUTPUT_NAMES = ("figure", "extend", "cursor", "header", "status", "busy", "note",
                 "follow_label", "follow_class", "range_from", "range_to")


def _register_panels(app: dash.Dash, live: LiveView, config: DashboardConfig) -> None:
    """The hover panel (values under the cursor) and the window panel (a click selects the
    window under the cursor and outlines it on the ribbon)."""

    @app.callback(Output(ids.HOVER_PANEL, "children"), Input(ids.HOVER_T, "data"),
                  State(ids.CURSOR, "data"), prevent_initial_call=True)
    def _hover(t_ms, state):
        if t_ms is None:
            raise dash.exceptions.PreventUpdate
        st = state or {}
        panel = hover_panel(live.at(float(t_ms) / 1000.0), st.get("order"), st.get("tz"),
                            st.get("ribbon"))
        if not_labelled_yet(st, float(t_ms) / 1000.0, live.config.window_s,
                            live.history.hop_s or 0.1):
            panel = [html.Div(f"labelling… {LABELLING_TEXT}", className="tl-muted",
                              id=ids.HOVER_LABELLING), *panel]
        return panel

    @app.callback(output={"panel": Output(ids.WINDOW_PANEL, "children"),
                          "selected": Output(ids.SELECTED, "data"),
                          "figure": Output(ids.GRAPH, "figure", allow_duplicate=True)},
                  inputs={"t_ms": Input(ids.CLICK_T, "data")},
                  state={"state": State(ids.CURSOR, "data")},
                  prevent_initial_call=True)
    def _select(t_ms, state):
        if t_ms is None:
            raise dash.exceptions.PreventUpdate
        info = live.at(float(t_ms) / 1000.0)
        row = info["window"]
        start = float(row["start"]) if row is not None else None
        st = state or {}
        keys = trace_keys(st.get("gpus") or [], bool(st.get("server")))
        patch = dash.Patch()
        sel = selected_trace(start, config.window_s)
        if ("selected",) in keys:
            i = keys.index(("selected",))
            # plain lists: a followed figure extends this trace (extendTraces cannot extend a
            # typed-array spec)
            patch["data"][i]["x"] = [float(v) * 1000.0 for v in sel.x]
            patch["data"][i]["y"] = [float(v) for v in sel.y]
            patch["data"][i]["width"] = config.window_s * 1000.0
        return {"panel": window_panel(row, info["gpus"], live.history.labeller, st.get("tz"),
                                      live.ceilings(row)),
                "selected": start, "figure": patch}


def _register_cluster(app: dash.Dash, live: LiveView) -> None:
    """The cluster panel: shown when the store holds several hosts; a pick or a click on a
    host's row shows that node in the lanes."""

    @app.callback(output={"style": Output(ids.CLUSTER_PANEL, "style"),
                          "figure": Output(ids.CLUSTER_GRAPH, "figure"),
                          "options": Output(ids.HOST, "options"),
                          "value": Output(ids.HOST, "value")},
                  inputs={"_n": Input(ids.CLUSTER_TICK, "n_intervals"),
                          "host": Input(ids.HOST, "value"),
                          "click": Input(ids.CLUSTER_GRAPH, "clickData")})
    def _cluster(_n, host, click):
        from tealeaves.app.dashboard.cluster import overview_figure

        nu = dash.no_update
        hosts = live.hosts()
        if len(hosts) <= 1:
            return {"style": {"display": "none"}, "figure": nu, "options": nu, "value": nu}
        trig = dash.ctx.triggered_id
        if trig == ids.HOST and host:
            live.select_host(host)
        elif trig == ids.CLUSTER_GRAPH and click and click.get("points"):
            label = re.sub(r"</?b>", "", str(click["points"][0].get("y", "")))
            live.select_host(label.split(" · ")[0])
        live.auto_host()
        fig = overview_figure({h: live.host_history(h) for h in hosts}, selected=live.host)
        return {"style": {}, "figure": fig,
                "options": [{"label": h, "value": h} for h in hosts], "value": live.host}


def _register_server_panel(app: dash.Dash, live: LiveView) -> None:
    """The balance panel: every 3 s, the MIG instances' balance, the DP-rank spread and
    SGLang's expert balance of the range on screen (from its windows and its stored
    ``/metrics`` scrapes); hidden when it holds none.  Recomputed only when the range, its
    windows or the scrapes in it change (the key of what a page shows is kept in the page).

    The cluster tick asks for a refresh only while none is in flight (``PANEL_PULL`` /
    ``PANEL_BUSY``, as the live tick): every answer clears ``PANEL_BUSY``, so none raises
    ``PreventUpdate``, and a retry after ``STUCK_MS`` joins the computation still running
    for the same range (``SingleFlight``) rather than superseding it."""
    from tealeaves.app.dashboard.actions import shown_range
    from tealeaves.app.dashboard.server_panel import server_panel
    from tealeaves.classifier.mig import load_balance
    from tealeaves.classifier.server_balance import BALANCE_SERIES

    @app.callback(output={"style": Output(ids.SERVER_PANEL, "style"),
                          "body": Output(ids.SERVER_BODY, "children"),
                          "figure": Output(ids.EXPERT_GRAPH, "figure"),
                          "graph_style": Output(ids.EXPERT_GRAPH, "style"),
                          "key": Output(ids.SERVER_KEY, "data"),
                          "busy": Output(ids.PANEL_BUSY, "data", allow_duplicate=True)},
                  inputs={"_pull": Input(ids.PANEL_PULL, "data")},
                  state={"state": State(ids.CURSOR, "data"), "tz": State(ids.PAGE_TZ, "data"),
                         "shown": State(ids.SERVER_KEY, "data")},
                  prevent_initial_call="initial_duplicate")  # drawn on page load too
    def _server(_pull, state, tz, shown):
        try:
            t0, t1 = shown_range(live, state or {})
        except ValueError:
            return {**hidden, "busy": None}
        # keep=0: only a retry running alongside joins (new scrapes may arrive later)
        return {**flights.run(repr((t0, t1, tz, shown)), lambda: _panel(t0, t1, tz, shown)),
                "busy": None}

    nu = dash.no_update
    hidden = {"style": {"display": "none"}, "body": [], "figure": nu, "graph_style": nu,
              "key": None}
    flights = SingleFlight(keep=0)

    def _panel(t0: float, t1: float, tz, shown) -> dict:
        frame = live.store.server_metrics(t0, t1, names=BALANCE_SERIES)
        loads = _mig_loads(live, t0, t1)
        key = (t0, t1, len(frame), float(frame["timestamp"].max()) if len(frame) else 0.0, tz,
               loads.shape)
        page_key = repr(key)
        if shown == page_key:  # this page shows it already
            return {"style": nu, "body": nu, "figure": nu, "graph_style": nu, "key": nu}
        out = server_panel(frame, page_zone(tz), load_balance(loads), (t0, t1))
        if out is None:
            return {**hidden, "key": page_key}
        body, fig = out
        return {"style": {}, "body": body, "figure": fig if fig is not None else nu,
                "graph_style": {"height": f"{fig.layout.height}px"} if fig is not None
                else {"display": "none"}, "key": page_key}


def _mig_loads(live: LiveView, t0: float, t1: float):
    """The MIG instances' loads in the windows of ``[t0, t1]`` (``classifier.mig.window_loads``
    of the history's windows of that range only); empty when no MIG instance is stored."""
    import pandas as pd

    from tealeaves.classifier.mig import window_loads
    from tealeaves.data.schema import is_mig

    if sum(1 for g in live.history.gpus if is_mig(g)) < 2:
        return pd.DataFrame()
    w_s = live.config.window_s
    w = live.history.windows(math.floor(t0 / w_s), math.floor(t1 / w_s) + 1)
    if not len(w):
        return pd.DataFrame()
    return window_loads(w[(w["start"] >= t0) & (w["start"] <= t1)])


def _register_export(app: dash.Dash, live: LiveView) -> None:
    """"export this range": the report of the range on screen, in the format picked."""

    @app.callback(output={"file": Output(ids.REPORT_DOWNLOAD, "data"),
                          "message": Output(ids.REPORT_MSG, "children")},
                  inputs={"n": Input(ids.REPORT_GO, "n_clicks")},
                  state={"fmt": State(ids.REPORT_FORMAT, "value"),
                         "state": State(ids.CURSOR, "data")},
                  prevent_initial_call=True)
    def _export(n, fmt, state):
        if not n:
            raise dash.exceptions.PreventUpdate
        try:
            name, data = export_report(live, state or {}, fmt or "html")
        except ValueError as exc:  # ReportError and bad ranges
            return {"file": dash.no_update,
                    "message": html.Span(f"✗ {exc}", className="tl-stale")}
        return {"file": dcc.send_bytes(data, name),
                "message": f"✓ {name} ({len(data) / 1024:,.0f} KB)"}
