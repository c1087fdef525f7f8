"""The Dash app factory: ``create_app(store, config) -> dash.Dash``, a Dash multi-page app
(``use_pages=True``) whose pages are ``app.dashboard.pages`` (``live`` at ``/``,
``screenshots`` at ``/screenshots``: one module each with its layout and its callbacks),
registered here with ``dash.register_page``; the header with the one navigation (links made
from the pages' registry), the stores the pages share, and ``dash.page_container`` (the pages'
location).  The pages' rooms: ``live`` (the live view and its cursor), ``actions`` (what a
user's action does), ``panels`` (header, hover and window panels, legend, toolbar, status
line), ``cluster``, ``screenshots``; browser-side code in ``assets/*.js``.

Every page's body is drawn once, when the page is loaded, and the one whose path the location
shows is displayed (``assets/pages.js``): the live figure keeps following (and shows the
screenshots' marks) while the Screenshots page is open; the router's swap of
``page_container``'s content would unmount it.

No module-level state: everything lives on the app object or in the browser, so two apps can run
in one process (tests do).

One ``History`` per app (``app.dashboard.history``) holds the session binned and labelled; every page
reads from it.  A page is in one of two modes (its cursor ``state["mode"]``):

- **follow** (the default; range presets "10 s", "1 min", "10 min"): the page shows the last
  ``span`` seconds and new data is appended with ``extendData``, each trace bounded by
  ``maxPoints`` (``span`` worth of points), so nothing already on the page is re-sent.  Spans
  longer than ``MAX_LIVE_POINTS`` bins are drawn with coarser live bins (means of
  ``factor`` 0.1-s bins) so a trace never holds more than ``MAX_LIVE_POINTS`` points.
  While the lanes are 0.1-s bins (``factor`` 1) the ribbon draws the history's 0.1-s phase
  segments, one bar per 0.1-s slot (``History.slots``; they settle one window behind the
  windows), else one bar per window.
  A whole new figure is sent on entering follow mode, when the set of GPUs changes, when the
  server lane appears and when the page has fallen more than ``span`` behind.
- **range** (a zoom or pan with the mouse, the "all" preset or the time-range picker): the
  server answers with a ``dash.Patch`` holding only the traces' new data for that range,
  downsampled to the plot's width (``app.figures.series.downsample``: MinMaxLTTB for lines,
  bucketed phase shares for the ribbon, or its 0.1-s phase segments when every window gets a
  bar, every raw sample when the range holds few enough).  Following stops; the "follow live" button (or a preset)
  resumes it.  "all" keeps refreshing while data arrives.

Every request from the page goes through one server callback, so a newer request (a zoom)
supersedes an older one still in flight (a tick): Dash drops the answer of a callback fired
again before it returned (plotly/dash#1613), which is also why the interval only asks for an
update when none is in flight (``BUSY``).

Hover and click are answered from the history too: the hover panel lists every GPU's values in
the 0.1-s bin under the cursor and the window's phase and confidence; a click selects the
window under the cursor and the window panel shows its features and why it got its label
(``app.dashboard.explain``).

Sample-to-screen latency is measured in the page: on every ``plotly_afterplot`` (a redraw) in
follow mode, each bin drawn for the first time counts ``paint - offset - bin centre`` (the
bin's samples are stamped by the collector's clock, the server's).  ``offset`` (browser clock
minus server clock) is taken as 0 unless causality contradicts it: each answer carries the
server's clock when it was made (``sent``) and the browser's when it was asked (``asked``); an
answer made "before" it was asked or arriving "before" it was made gives the smallest offset
that explains it.
"""

from __future__ import annotations

from pathlib import Path

import dash
from dash import ClientsideFunction, Input, Output, State, dcc, html

from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.config import IDLE_TICK_MS, PACE, PRESETS, STUCK_MS, DashboardConfig
from tealeaves.app.dashboard.cursor import page_state
from tealeaves.app.dashboard.guard import guard_callbacks
from tealeaves.app.dashboard.header_panel import header_cells
from tealeaves.app.dashboard.live import LiveView
from tealeaves.app.dashboard.live_patch import axis_names
from tealeaves.app.dashboard.pages import live as live_page
from tealeaves.app.dashboard.pages import screenshots as shots_page
from tealeaves.app.dashboard.panels import legend
from tealeaves.data.store import SampleStore

ASSETS = Path(__file__).resolve().parent / "assets"

#: The pages, in the navigation's order: (module, link id, body id).
PAGES = ((live_page, ids.TAB_LIVE, ids.LIVE_PAGE), (shots_page, ids.TAB_SHOTS, ids.SHOTS_PAGE))

__all__ = ["create_app", "page_layout"]


def create_app(store: SampleStore, config: DashboardConfig | None = None,
               on_progress=None) -> dash.Dash:
    """Build the dashboard for ``store``.

    Args:
        store: the sample store the collector writes (read-only use here).
        config: settings; default ``DashboardConfig()``.
        on_progress: ``History.on_progress`` while the history is first read (the layout's
            first snapshot reads and labels the whole store), then unset.

    Returns:
        A ``dash.Dash`` app (its ``LiveView`` is ``app.tealeaves_live``); serve
        ``app.server`` (a Flask WSGI app) with any WSGI server.
    """
    config = config or DashboardConfig()
    live = LiveView(store, config)
    app = dash.Dash(__name__, title=config.title, update_title=None,
                    assets_folder=str(ASSETS), serve_locally=True,
                    use_pages=True, pages_folder="", include_pages_meta=False)
    app.tealeaves_live = live
    _register_pages(config)
    for server in (False, True):  # off the first request's path
        axis_names(server)
    live.history.on_progress = on_progress
    try:
        app.layout = lambda: page_layout(live, config)  # (dash draws it once here)
    finally:
        live.history.on_progress = None
    _register_nav(app)
    live_page.register(app, live, config)
    shots_page.register(app, live)
    guard_callbacks(app)  # a malformed callback request: 400 and one log line
    _not_found_off_the_pages(app)
    return app


def _not_found_off_the_pages(app: dash.Dash) -> None:
    """A path that is no page (``PAGES``) answers 404: Dash's catch-all route serves the app
    for any path, so ``/nonexistent`` read as the live page with status 200."""
    from flask import abort, request

    paths = {page.PATH.rstrip("/") or "/" for page, _link, _body in PAGES}

    @app.server.before_request
    def _only_pages():
        rule = request.url_rule
        if rule is not None and rule.rule == "/<path:path>" and \
                (request.path.rstrip("/") or "/") not in paths:
            abort(404)


def _drawn_by_the_app(**_query) -> list:
    """A page's content in ``page_container``: none, every page's body is drawn once by
    ``page_layout`` and shown by its path (see the module's docstring)."""
    return []


def _register_pages(config: DashboardConfig) -> None:
    """``dash.register_page`` for each of ``PAGES`` (path, name, order, title)."""
    for order, (page, _link, _body) in enumerate(PAGES):
        dash.register_page(page.__name__, path=page.PATH, name=page.NAME, order=order,
                           title=config.title, layout=_drawn_by_the_app)


def _nav() -> html.Span:
    """The one navigation: a link to each registered page, in the registry's order."""
    links = {page.__name__: link for page, link, _body in PAGES}
    pages = sorted((p for p in dash.page_registry.values() if p["module"] in links),
                   key=lambda p: p["order"])
    return html.Span(className="tl-tabs", children=[
        dcc.Link(p["name"], href=p["relative_path"], id=links[p["module"]],
                 className="tl-tab tl-tab-on" if p["path"] == live_page.PATH else "tl-tab")
        for p in pages])


def _register_nav(app: dash.Dash) -> None:
    """The page whose path the location shows is displayed and its link marked
    (``assets/pages.js``, namespace ``pages``); an unknown path shows the live page."""
    app.clientside_callback(
        ClientsideFunction(namespace="pages", function_name="show"),
        *[Output(body, "style") for _page, _link, body in PAGES],
        *[Output(link, "className") for _page, link, _body in PAGES],
        Input(ids.LOCATION, "pathname"), State(ids.NAV_CONFIG, "data"))


def page_layout(live: LiveView, config: DashboardConfig) -> html.Div:
    """The whole app as a new visitor gets it: header (navigation, status line, header cells,
    legend), every page's body, the stores the callbacks share and ``dash.page_container``."""
    step = live.snapshot()
    state = page_state(step.state, config)
    return html.Div(className="tl-page", children=[
        html.Header(className="tl-top", children=[
            html.Div(className="tl-brand", children=[
                html.Span("tealeaves", className="tl-logo"),
                _nav(),
                html.Span(live.status(state), id=ids.STATUS, className="tl-status"),
            ]),
            html.Div(header_cells(step.summary), id=ids.HEADER, className="tl-cells"),
            legend(state.get("gpus")),
        ]),
        live_page.layout(step.figure, state, config),
        shots_page.layout(config),
        dcc.Interval(id=ids.TICK, interval=int(config.interval_ms), n_intervals=0),
        dcc.Store(id=ids.CURSOR, data=state),
        dcc.Store(id=ids.CLIENT_CONFIG, data={"stuck_ms": STUCK_MS, "pace": PACE,
                                              "idle_ms": IDLE_TICK_MS,
                                              "pace_id": ids.PULL, "graph_id": ids.GRAPH,
                                              "presets": [span for _, _, span in PRESETS]}),
        *[dcc.Store(id=sid, data=None) for sid in (
            ids.BUSY, ids.ACTION, ids.HOVER_T, ids.CLICK_T, ids.SELECTED, ids.SHOT_SELECTED,
            ids.SHOT_BATCH, ids.PAGE_TZ, ids.SERVER_KEY, ids.PANEL_BUSY)],
        dcc.Store(id=ids.PULL, data=0),
        dcc.Store(id=ids.PANEL_PULL, data=0),
        dcc.Store(id=ids.NAV_CONFIG, data={"paths": [p.PATH for p, _l, _b in PAGES]}),
        dcc.Store(id=ids.SHOTS_VERSION, data=0),
        dcc.Interval(id=ids.CLUSTER_TICK, interval=3000, n_intervals=0),
        dash.page_container,
    ])
