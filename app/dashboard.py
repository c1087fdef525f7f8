"""The Dash app factory: ``create_app(store, config) -> dash.Dash``.

No module-level state: everything lives on the app object or in the browser, so two apps can run
in one process (tests do).  Callbacks are registered with ``app.callback``.

How the page stays live (``LiveView``):

- ``dcc.Interval`` ticks every ``config.interval_ms`` (250 ms).  The browser sends its cursor
  (``dcc.Store``): the next bin index and window index it lacks, and the store's row-id cursor.
- If the store's row-id cursor has not moved, only the status line (sample count, last-sample
  age) changes.  Otherwise the server reads the samples newer than the page's time cursor (minus
  ``hold_s`` of context) with ``SampleStore.read_range``, bins the lanes, classifies the new
  complete 0.5-s windows with ``classifier.classify_samples`` and answers with an
  ``extendData`` payload (``figures.extend_data``) bounded by ``maxPoints`` = ``view_s`` worth
  of bins / windows, so the browser keeps ``view_s`` seconds and the server never re-sends them.
- A bin or window is sent once it is *complete*: every GPU that reported in the last second has
  a sample at or after its end.  A new sample therefore reaches the page within one tick plus
  one bin after it is stored.
- The whole figure is rebuilt (``figures.build_figure`` over the last ``view_s`` seconds) on
  page load, when the set of GPUs changes, when the page has fallen more than ``view_s`` behind,
  or when the clock went backwards.  ``uirevision`` keeps zoom and legend choices across that.
- Server lane: the figure has one only while the store holds server events or ``/metrics``
  scrapes within the view (checked on every tick that brings samples; the first ones cause a
  rebuild).  It is drawn from ``figures.server_cells`` (one cell per classifier window) and
  extended like the windows, ``server_lag_s`` behind them (a followed log line may be written up
  to a second after its whole-second stamp); the cursor's ``s`` is the next cell it lacks.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import dash
import numpy as np
import pandas as pd
from dash import Input, Output, State, dcc, html

from ..classifier import classify_samples
from ..data.schema import gpus_in
from ..data.store import SampleStore, StoreError
from . import ids
from .figures import (
    HOT_COLOR,
    PHASE_COLORS,
    PHASE_HELP,
    SERVER_HOLD_S,
    HeaderSummary,
    bin_index,
    bin_lanes,
    build_figure,
    extend_data,
    extend_point_count,
    gpu_color,
    header_summary,
    server_cells,
)

ASSETS = Path(__file__).resolve().parent / "assets"

#: A GPU that has not reported for this many seconds no longer holds back completion.
STALE_S = 1.0
#: An update request unanswered this long (ms) is given up and a new one sent.
STUCK_MS = 10_000
#: Windows of history read with each update so new windows are labelled in context
#: (the phase model's receptive field is 6 windows either side).
CONTEXT_WINDOWS = 8


@dataclass
class DashboardConfig:
    """Settings of one dashboard.

    Attributes:
        source: one line naming where samples come from ("live NVML, 2 GPUs",
            "replay of h200x2_workload_v1.parquet"), shown in the status line.
        view_s: seconds of history on the page (and classified on a rebuild).
        interval_ms: live update period in ms (250-1000 is sensible).
        bin_s: lane resolution in seconds (one point per bin and GPU).
        window_s: classifier window in seconds (one ribbon bar per window).
        hold_s: an empty bin holds the previous value for at most this long (GPM gaps).
        height: figure height in pixels.
        title: browser tab title.
        health: optional callable returning the collector's state, a dict with ``running``
            (bool) and ``error`` (str or None); shown when the collector stopped.
        server: one line about the server signals (log offset found, URL scraped), shown in
            the status line; "" for none.
        server_lag_s: the server lane's cells are sent this many seconds after the windows
            (0 for a replay, whose events are stored with their samples).
    """

    source: str = "sample store"
    view_s: float = 120.0
    interval_ms: int = 250
    bin_s: float = 0.1
    window_s: float = 0.5
    hold_s: float = 0.35
    height: int = 780
    title: str = "tealeaves"
    health: Callable[[], dict] | None = field(default=None, repr=False)
    server: str = ""
    server_lag_s: float = 1.5

    def __post_init__(self) -> None:
        if not self.view_s > 0 or not self.bin_s > 0 or not self.window_s > 0:
            raise ValueError("view_s, bin_s and window_s must be positive")
        if not self.interval_ms > 0:
            raise ValueError(f"interval_ms must be positive, got {self.interval_ms}")
        ratio = self.window_s / self.bin_s
        if abs(ratio - round(ratio)) > 1e-9:
            raise ValueError("window_s must be a whole multiple of bin_s")


@dataclass
class Step:
    """One tick's answer (``LiveView.advance``): what changes on the page.

    Attributes:
        state: the page's new cursor (JSON-able dict).
        figure: a whole new figure (rebuild), else None.
        extend: an ``extendData`` payload, else None.
        summary: the header's new summary, else None (unchanged).
    """

    state: dict
    figure: object = None
    extend: list | None = None
    summary: HeaderSummary | None = None


class LiveView:
    """Turns the store into figure rebuilds and increments for one app.

    Args:
        store: the sample store (read from Dash's request threads; ``SampleStore`` gives each
            thread its own connection).
        config: the dashboard settings.

    The page's cursor (``state``) is a dict: ``k`` next bin index, ``j`` next window index
    (``None`` before any data), ``s`` next server cell index (``None`` while the figure has no
    server lane), ``cursor`` store row id seen, ``gpus``, ``ts_last`` and ``mono_last``
    (newest sample's wall and monotonic stamps) and ``hot_tail`` (hot GPU or None of the last
    20 windows, for the header).
    """

    #: Seconds of metrics scrapes read before the first new cell (their values stand ~1.5 s).
    METRICS_BACK_S = 5.0

    HOT_TAIL = 20

    def __init__(self, store: SampleStore, config: DashboardConfig) -> None:
        self.store = store
        self.config = config

    # -- helpers -------------------------------------------------------------------------
    def _gpus(self, frame: pd.DataFrame) -> list[int]:
        devs = self.store.devices()
        known = {int(g) for g in devs["gpu"].dropna()} if not devs.empty else set()
        if not frame.empty:
            known |= set(gpus_in(frame))
        return sorted(known)

    @staticmethod
    def _complete_until(frame: pd.DataFrame) -> float:
        """Epoch time up to which every recently reporting GPU has delivered its samples."""
        last = frame.groupby("gpu")["timestamp"].max()
        newest = float(last.max())
        active = last[last >= newest - STALE_S]
        return float(active.min())

    def _classify(self, frame: pd.DataFrame, j0: int, j1: int) -> pd.DataFrame:
        w = self.config.window_s
        if j1 <= j0 or frame.empty:
            return pd.DataFrame()
        ts = frame["timestamp"].to_numpy()
        if not (ts < j1 * w - 1e-9).any() or not (ts >= j0 * w - 1e-9).any():
            return pd.DataFrame()
        # The model reads each window in its context (slopes, the sequence model's receptive
        # field): classify from CONTEXT_WINDOWS earlier, keep only the new windows.
        part = frame[(ts >= (j0 - CONTEXT_WINDOWS) * w - 1e-9) & (ts < j1 * w - 1e-9)]
        windows = classify_samples(part, self.store.devices(), window_s=w)
        if windows.empty:
            return windows
        j = np.floor(windows["start"].to_numpy(dtype=float) / w + 1e-6).astype(np.int64)
        return windows[(j >= j0) & (j < j1)].reset_index(drop=True)

    def _server_since(self, t: float) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Server events from ``t - SERVER_HOLD_S[1]`` and scrapes from ``t - METRICS_BACK_S``
        (the values held into the first cell come from before it)."""
        ev = self.store.server_events(t - SERVER_HOLD_S[1])
        m = self.store.server_metrics(t - self.METRICS_BACK_S)
        return ev, m

    def _has_server(self, t: float) -> bool:
        """True when the store holds server events or scrapes stamped at or after ``t``."""
        return (not self.store.server_events(t).empty
                or not self.store.server_metrics(t).empty)

    def _server_cells(self, s0: int, t_done: float, ev: pd.DataFrame, m: pd.DataFrame
                      ) -> tuple[pd.DataFrame, int]:
        """Cells ``s0 ..`` up to ``t_done - server_lag_s``; returns them and the next index."""
        w = self.config.window_s
        s1 = max(s0, bin_index(t_done - self.config.server_lag_s, w))
        return server_cells(ev, m, s0, s1, w), s1

    def _tail(self, windows: pd.DataFrame, tail: list) -> list:
        new = [None if not math.isfinite(h) else int(h)
               for h in windows["hot_gpu"].to_numpy(dtype=float)] if len(windows) else []
        return (list(tail) + new)[-self.HOT_TAIL:]

    def _summary(self, windows: pd.DataFrame, tail: list) -> HeaderSummary:
        s = header_summary(windows)
        counts: dict[int, int] = {}
        for h in tail:
            if h is not None:
                counts[h] = counts.get(h, 0) + 1
        return HeaderSummary(s.phase, s.confidence, s.imbalance_ratio, s.straggler_tax,
                             s.hot_gpu, s.window_end, dict(sorted(counts.items())), len(tail))

    # -- the two answers -----------------------------------------------------------------
    def snapshot(self) -> Step:
        """Rebuild: the whole figure over the last ``view_s`` seconds and a fresh cursor."""
        c = self.config
        cursor = self.store.cursor()
        span = self.store.time_span()
        if span is None:
            gpus = self._gpus(pd.DataFrame())
            fig = build_figure(pd.DataFrame(), pd.DataFrame(), gpus, bin_s=c.bin_s,
                               window_s=c.window_s, height=c.height)
            state = {"k": None, "j": None, "s": None, "cursor": cursor, "gpus": gpus,
                     "ts_last": None, "mono_last": None, "hot_tail": []}
            return Step(state=state, figure=fig, summary=header_summary(pd.DataFrame()))
        t_newest = span[1]
        t0 = max(t_newest - c.view_s, span[0])
        frame = self.store.read_range(t0 - c.hold_s, None)
        gpus = self._gpus(frame)
        t_done = self._complete_until(frame)
        k0, k1 = bin_index(t0, c.bin_s) + 1, bin_index(t_done, c.bin_s)
        j0 = math.ceil(t0 / c.window_s - 1e-9)
        j1 = bin_index(t_done, c.window_s)
        bins = bin_lanes(frame, gpus, k0, k1, c.bin_s, c.hold_s)
        windows = self._classify(frame, j0, j1)
        server, s_next = None, None
        # the same test ``advance`` makes (signals since ``view_s`` before the newest bin),
        # so a replay whose server events start before its first sample does not re-snapshot
        # on every tick
        t_lo = max(k0, k1) * c.bin_s - c.view_s  # advance's bound for the state returned
        ev, m = self._server_since(min(j0 * c.window_s, t_lo))
        if (len(ev) and (ev["timestamp"] >= t_lo).any()) or (len(m) and
                                                             (m["timestamp"] >= t_lo).any()):
            server, s_next = self._server_cells(j0, t_done, ev, m)
        fig = build_figure(bins, windows, gpus, bin_s=c.bin_s, window_s=c.window_s,
                           height=c.height, server=server)
        tail = self._tail(windows, [])
        state = {"k": max(k0, k1), "j": max(j0, j1), "s": s_next, "cursor": cursor,
                 "gpus": gpus,
                 "ts_last": float(frame["timestamp"].max()),
                 "mono_last": float(frame["monotonic"].max()), "hot_tail": tail}
        return Step(state=state, figure=fig, summary=self._summary(windows, tail))

    def advance(self, state: dict | None) -> Step:
        """Answer one tick of a page whose cursor is ``state``.

        Returns a ``Step`` with an ``extend`` payload for new complete bins/windows, a new
        ``figure`` when a rebuild is due, or just a new ``state`` when nothing is new.
        """
        c = self.config
        if not state or state.get("k") is None:
            if self.store.cursor() == (state or {}).get("cursor", -1) and state:
                return Step(state=state)
            return self.snapshot()
        cursor = self.store.cursor()
        if cursor == state["cursor"]:
            return Step(state=state)
        k, j = int(state["k"]), int(state["j"])
        frame = self.store.read_range(
            min(k * c.bin_s - c.hold_s, (j - CONTEXT_WINDOWS) * c.window_s) - 1e-6, None)
        if frame.empty:
            span = self.store.time_span()
            if span is not None and span[1] < k * c.bin_s - 5.0:  # clock went back: restart
                return self.snapshot()
            return Step(state={**state, "cursor": cursor})
        gpus = self._gpus(frame)
        t_newest = float(frame["timestamp"].max())
        if gpus != list(state["gpus"]) or t_newest - k * c.bin_s > c.view_s:
            return self.snapshot()
        t_done = self._complete_until(frame)
        k1 = max(k, bin_index(t_done, c.bin_s))
        j1 = max(j, bin_index(t_done, c.window_s))
        s = state.get("s")
        server = None
        if s is None:
            if self._has_server(k * c.bin_s - c.view_s):  # first server signals: add the lane
                return self.snapshot()
        else:
            ev, m = self._server_since(int(s) * c.window_s)
            server, s = self._server_cells(int(s), t_done, ev, m)
        bins = bin_lanes(frame, gpus, k, k1, c.bin_s, c.hold_s)
        windows = self._classify(frame, j, j1)
        tail = self._tail(windows, state.get("hot_tail", []))
        new_state = {**state, "k": k1, "j": j1, "s": s, "cursor": cursor, "ts_last": t_newest,
                     "mono_last": float(frame["monotonic"].max()), "hot_tail": tail}
        payload = extend_data(bins, windows, gpus, bin_s=c.bin_s, window_s=c.window_s,
                              view_s=c.view_s, server=server)
        return Step(state=new_state,
                    extend=payload if extend_point_count(payload) else None,
                    summary=self._summary(windows, tail) if len(windows) else None)

    def status(self, state: dict | None) -> list:
        """The small status line: source, GPUs, samples stored, age of the newest sample."""
        c = self.config
        n = self.store.cursor()  # rows are never deleted, so the newest id is the count
        parts: list = [html.Span(c.source, className="tl-source")]
        gpus = (state or {}).get("gpus") or []
        parts.append(f" · {len(gpus)} GPU{'s' if len(gpus) != 1 else ''}")
        parts.append(f" · {n:,} samples stored")
        parts.append(f" · phases: {_labeller_label()}")
        if c.server:
            parts.append(html.Span(f" · {c.server}", className="tl-server", id=ids.SERVER))
        age = _age_s((state or {}).get("ts_last"), (state or {}).get("mono_last"))
        if age is not None:
            cls = "tl-age tl-stale" if age > 5 else "tl-age"
            parts.append(html.Span(f" · last sample {_fmt_age(age)} ago", className=cls))
        health = c.health() if c.health is not None else None
        parts.extend(_collector_health(health))
        if health is not None and not health.get("running", True):
            err = health.get("error")
            parts.append(html.Span(f" · collector stopped{': ' + err if err else ''}",
                                   className="tl-stale"))
        return parts


def _labeller_label() -> str:
    """Which phase model labels the windows: the trained one, or the rules as fallback."""
    from ..classifier import default_labeller, labeller_name

    if default_labeller.cache_info().currsize == 0:  # still loading (server start preloads it)
        return "loading the model"
    return "trained model" if labeller_name(default_labeller()) == "trained" else "v0 rules"


def _collector_health(health: dict | None) -> list:
    """Status-line pieces for the collector's health: sweep rate, jitter (p99 lateness of a
    sweep against its deadline), missed deadlines, offline GPUs, store drops."""
    h = (health or {}).get("collector")
    if not h:
        return []
    out: list = []
    if h.get("sweeps_per_s"):
        out.append(f" · {h['sweeps_per_s']:.1f} sweeps/s")
    p99 = h.get("lateness_ms_p99")
    if p99 is not None and not math.isnan(p99):
        out.append(f" · jitter p99 {p99:.1f} ms")
    if h.get("missed_deadlines"):
        out.append(f" · {h['missed_deadlines']} missed deadlines")
    if h.get("offline"):
        out.append(html.Span(f" · GPU {', '.join(map(str, h['offline']))} offline",
                             className="tl-stale"))
    bad = h.get("dropped_samples", 0) + h.get("store_errors", 0)
    if bad:
        out.append(html.Span(f" · store: {h['store_errors']} write errors, "
                             f"{h['dropped_samples']} samples dropped", className="tl-stale"))
    return out


def _age_s(ts_last: float | None, mono_last: float | None) -> float | None:
    """Seconds since the newest sample: by the monotonic clock (both collectors stamp this
    host's), else by the wall clock when the monotonic stamp is implausible here."""
    if ts_last is None:
        return None
    if mono_last is not None:
        age = time.monotonic() - float(mono_last)
        if -1.0 <= age <= 7 * 86400:
            return max(age, 0.0)
    return max(time.time() - float(ts_last), 0.0)


def _fmt_age(age: float) -> str:
    if age < 60:
        return f"{age:.1f} s"
    if age < 3600:
        return f"{age / 60:.0f} min"
    return f"{age / 3600:.1f} h"


# -- layout pieces ---------------------------------------------------------------------------


def _cell(label: str, value, sub: str, cid: str, style: dict | None = None) -> html.Div:
    return html.Div(className="tl-cell", id=cid, children=[
        html.Div(label, className="tl-cell-label"),
        html.Div(value, className="tl-cell-value", style=style or {}),
        html.Div(sub, className="tl-cell-sub"),
    ])


def header_cells(s: HeaderSummary) -> list:
    """Header cells (phase, imbalance ratio, hot GPU, straggler tax) for a summary."""
    if s.phase is None:
        phase_value = html.Span("waiting", className="tl-pill",
                                style={"background": "#eef0f3", "color": "#6b7280"})
        phase_sub = "no complete window yet"
    else:
        phase_value = html.Span(s.phase.upper(), className="tl-pill",
                                style={"background": PHASE_COLORS.get(s.phase, "#999"),
                                       "color": "#1f2937" if s.phase == "idle" else "white"})
        end = datetime.fromtimestamp(s.window_end, tz=UTC).strftime("%H:%M:%S.%f")[:-4]
        phase_sub = f"{s.confidence:.0%} sure · window to {end} UTC"
    ratio = f"{s.imbalance_ratio:.2f}×" if math.isfinite(s.imbalance_ratio) else "–"
    tax = f"{s.straggler_tax:.0%}" if math.isfinite(s.straggler_tax) else "–"
    if s.hot_gpu is not None:
        hot_value = html.Span(f"GPU {s.hot_gpu}", className="tl-pill",
                              style={"background": gpu_color(s.hot_gpu), "color": "white",
                                     "boxShadow": f"0 0 0 2px {HOT_COLOR}"})
    else:
        hot_value = html.Span("none", className="tl-muted")
    recent = ", ".join(f"GPU {g} ×{n}" for g, n in s.hot_recent.items())
    hot_sub = (f"hot in the last {s.windows} windows: {recent}" if recent
               else f"none hot in the last {s.windows} windows" if s.windows else "")
    return [
        _cell("Phase", phase_value, phase_sub, ids.PHASE),
        _cell("Imbalance", ratio, "max / mean GPU load (1.00 = balanced)", ids.IMBALANCE),
        _cell("Hot GPU", hot_value, hot_sub, ids.HOT_GPU),
        _cell("Straggler tax", tax, "GPU time spent waiting for the slowest", ids.STRAGGLER),
    ]


def legend() -> html.Div:
    """The phase-colour legend (plus the imbalance and PCIe line-style keys)."""
    items = []
    for phase in ("idle", "prefill", "decode"):
        items.append(html.Span(className="tl-key", title=PHASE_HELP[phase], children=[
            html.Span(className="tl-swatch", style={"background": PHASE_COLORS[phase]}),
            html.B(phase), html.Span(f" {PHASE_HELP[phase]}", className="tl-key-help"),
        ]))
    items.append(html.Span(className="tl-key", children=[
        html.Span(className="tl-swatch tl-swatch-thin", style={"background": HOT_COLOR}),
        html.B("imbalanced"), html.Span(" decode window with a hot GPU (red in the share strip)",
                                        className="tl-key-help"),
    ]))
    return html.Div(id=ids.LEGEND, className="tl-legend", children=items)


# -- the factory -----------------------------------------------------------------------------


def create_app(store: SampleStore, config: DashboardConfig | None = None) -> dash.Dash:
    """Build the dashboard for ``store``.

    Args:
        store: the sample store the collector writes (read-only use here).
        config: settings; default ``DashboardConfig()``.

    Returns:
        A ``dash.Dash`` app; serve ``app.server`` (a Flask WSGI app) with any WSGI server.
    """
    config = config or DashboardConfig()
    live = LiveView(store, config)
    app = dash.Dash(__name__, title=config.title, update_title=None,
                    assets_folder=str(ASSETS), serve_locally=True)

    def layout() -> html.Div:
        step = live.snapshot()
        return html.Div(className="tl-page", children=[
            html.Header(className="tl-top", children=[
                html.Div(className="tl-brand", children=[
                    html.Span("tealeaves", className="tl-logo"),
                    html.Span(live.status(step.state), id=ids.STATUS, className="tl-status"),
                ]),
                html.Div(header_cells(step.summary), id=ids.HEADER, className="tl-cells"),
                legend(),
            ]),
            dcc.Graph(id=ids.GRAPH, figure=step.figure, className="tl-graph",
                      config={"displaylogo": False, "responsive": True,
                              "modeBarButtonsToRemove": ["select2d", "lasso2d"]},
                      style={"height": f"{config.height}px"}),
            dcc.Interval(id=ids.TICK, interval=int(config.interval_ms), n_intervals=0),
            dcc.Store(id=ids.CURSOR, data=step.state),
            dcc.Store(id=ids.PULL, data=0),
            dcc.Store(id=ids.BUSY, data=None),
        ])

    app.layout = layout

    # The interval only asks for an update when none is in flight: Dash drops the answer of a
    # callback fired again before it returned (plotly/dash#1613), so an interval-driven update
    # slower than the interval would never land.  A request older than STUCK_MS (an error
    # answered 500) is given up and a new one sent.
    app.clientside_callback(
        f"""function(n, busy, pull) {{
            const now = Date.now();
            if (busy !== null && busy !== undefined && now - busy < {STUCK_MS}) {{
                return [window.dash_clientside.no_update, window.dash_clientside.no_update];
            }}
            return [(pull || 0) + 1, now];
        }}""",
        Output(ids.PULL, "data"),
        Output(ids.BUSY, "data", allow_duplicate=True),
        Input(ids.TICK, "n_intervals"),
        State(ids.BUSY, "data"),
        State(ids.PULL, "data"),
        prevent_initial_call=True,
    )

    @app.callback(
        Output(ids.GRAPH, "figure"),
        Output(ids.GRAPH, "extendData"),
        Output(ids.CURSOR, "data"),
        Output(ids.HEADER, "children"),
        Output(ids.STATUS, "children"),
        Output(ids.BUSY, "data", allow_duplicate=True),
        Input(ids.PULL, "data"),
        State(ids.CURSOR, "data"),
        prevent_initial_call=True,
    )
    def _tick(_n: int, state: dict | None):
        try:
            step = live.advance(state)
        except (sqlite3.ProgrammingError, StoreError):  # the server is shutting down
            raise dash.exceptions.PreventUpdate from None
        nu = dash.no_update
        return (
            step.figure if step.figure is not None else nu,
            step.extend if step.extend is not None else nu,
            step.state,
            header_cells(step.summary) if step.summary is not None else nu,
            live.status(step.state),
            None,
        )

    return app
