"""The Dash app factory: ``create_app(store, config) -> dash.Dash``.

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
  downsampled to the plot's width (``app.dashboard.views``: MinMaxLTTB for lines, bucketed phase shares
  for the ribbon, or its 0.1-s phase segments when every window gets a bar, every raw sample
  when the range holds few enough).  Following stops; the "follow live" button (or a preset)
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

import itertools
import math
import re
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import dash
import numpy as np
import pandas as pd
from dash import Input, Output, State, dcc, html

from ...classifier.summary import window_hot_sets
from ...data.schema import EARLIEST_TS
from ...data.screenshots import ScreenshotError, zone_name
from ...data.store import HostView, SampleStore, StoreError
from ..figures import (
    HOT_COLOR,
    MIN_SHARE_LOAD,
    PHASE_COLORS,
    PHASE_HELP,
    HeaderSummary,
    band_axis,
    bin_index,
    build_figure,
    certainty,
    extend_data,
    extend_point_count,
    fmt_span,
    gpu_color,
    header_summary,
    hot_counts,
    hot_set_text,
    range_update,
    shots_between,
    trace_keys,
)
from . import ids
from .explain import explain_window, row_hot_set, window_ceilings
from .history import History
from .screenshots import page as shots_page
from .screenshots import register as register_screenshots
from .views import (
    TraceData,
    bucket_factor,
    lanes_from_bins,
    lanes_from_samples,
    load_order,
    point_budget,
    server_traces,
    window_traces,
)

ASSETS = Path(__file__).resolve().parent / "assets"

#: An update request unanswered this long (ms) is given up and a new one sent.
STUCK_MS = 10_000
#: Most points a lane trace holds in follow mode; longer spans use coarser live bins.
MAX_LIVE_POINTS = 1200
#: Range presets: (button id, label, span in seconds or None for the whole session).
PRESETS: tuple[tuple[str, str, float | None], ...] = (
    (ids.PRESET_10S, "10 s", 10.0), (ids.PRESET_1MIN, "1 min", 60.0),
    (ids.PRESET_10MIN, "10 min", 600.0), (ids.PRESET_ALL, "all", None),
)
#: Smallest figure height (px) when it follows the window's height.
MIN_HEIGHT_PX = 640
#: The "all" view, while following, is refreshed at most this often (s).
ALL_REFRESH_S = 5.0


@dataclass
class DashboardConfig:
    """Settings of one dashboard.

    Attributes:
        source: one line naming where samples come from ("live NVML, 2 GPUs",
            "replay of h200x2_workload_v1.parquet"), shown in the status line.
        view_s: seconds shown when the page opens (follow mode).
        interval_ms: live update period in ms (250-1000 is sensible).
        bin_s: lane resolution in seconds (one point per bin and GPU).
        window_s: classifier window in seconds (one ribbon bar per window).
        hold_s: an empty bin holds the previous value for at most this long (GPM gaps).
        height: figure height in pixels; None: the browser window's height (at least
            ``MIN_HEIGHT_PX``), so a laptop screen shows every lane at once.
        title: browser tab title.
        health: optional callable returning the collector's state, a dict with ``running``
            (bool) and ``error`` (str or None); shown when the collector stopped.
        server: one line about the server signals (log offset found, URL scraped), shown in
            the status line; "" for none.
        server_lag_s: the server lane's cells are made this many seconds after the windows
            (0 for a replay, whose events are stored with their samples).
        store_temporary: the store is removed when the dashboard stops (the Screenshots page
            says that its uploads will not survive a restart).
    """

    source: str = "sample store"
    view_s: float = 60.0
    interval_ms: int = 250
    bin_s: float = 0.1
    window_s: float = 0.5
    hold_s: float = 0.35
    height: int | None = None
    title: str = "tealeaves"
    health: Callable[[], dict] | None = field(default=None, repr=False)
    server: str = ""
    server_lag_s: float = 1.5
    store_temporary: bool = False

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
    """One answer to the page: what changes on it.

    Attributes:
        state: the page's new cursor (JSON-able dict).
        figure: a whole new figure (rebuild), else None.
        extend: an ``extendData`` payload, else None.
        patch: a ``dash.Patch`` of the figure (range view), else None.
        summary: the header's new summary, else None (unchanged).
    """

    state: dict
    figure: object = None
    extend: list | None = None
    patch: object = None
    summary: HeaderSummary | None = None


@dataclass
class RangeView:
    """A range of the history ready to draw (``LiveView.range_view``).

    Attributes:
        t0, t1: the range, epoch seconds.
        traces: ``{trace key: TraceData}`` for every trace of the figure.
        order: GPU order of the load bands (top first).
        raw: the lanes hold raw samples (else 0.1-s bins, downsampled when many).
        n_out: points per line trace asked for.
        factor: windows per ribbon bar.
        empty: neither samples nor windows in the range.
        segments: the ribbon draws the 0.1-s phase segments (``factor`` 1).
    """

    t0: float
    t1: float
    traces: dict
    order: list[int]
    raw: bool
    n_out: int
    factor: int
    empty: bool = False
    segments: bool = False


def live_factor(span_s: float, bin_s: float) -> int:
    """0.1-s bins per live point so that ``span_s`` holds at most ``MAX_LIVE_POINTS``."""
    return max(1, math.ceil(span_s / bin_s / MAX_LIVE_POINTS))


def coarse_bins(bins: pd.DataFrame, factor: int) -> pd.DataFrame:
    """Means of ``factor`` consecutive bins (NaN skipped), indexed by ``k // factor``."""
    if factor <= 1 or bins.empty:
        return bins
    return bins.groupby(bins.index // factor).mean()


def _now_ms() -> float:
    return time.time() * 1000.0


class LiveView:
    """Turns the shared history into figures, increments, range patches and panels.

    Args:
        store: the sample store (read from Dash's request threads; ``SampleStore`` gives each
            thread its own connection).
        config: the dashboard settings.
        history: the history to read (default: a new one over ``store``).

    The page's cursor (``state``) is a dict: ``mode`` (``"follow"`` / ``"range"``),
    ``follow`` (bool: following the live edge), ``span`` (seconds shown while following;
    None: the whole session), ``factor`` (0.1-s bins per live point), ``k`` next bin index
    (in 0.1-s bins, a multiple of ``factor``), ``j`` next window index, ``s`` next server
    cell (None without a server lane), ``m`` next 0.1-s segment slot on the page (None: the
    ribbon draws windows), ``gpus``, ``server`` (bool), ``order`` and
    ``order_by`` (load bands), ``gen`` (history generation), ``range`` ([t0, t1] in range
    mode), ``edge``/``sent`` (latency stamps, ms), ``ts_last``/``mono_last`` (newest
    sample) and ``hot_tail``.
    """

    HOT_TAIL = 20

    def __init__(self, store: SampleStore, config: DashboardConfig,
                 history: History | None = None) -> None:
        self.store = store
        self.base_store = store
        self.config = config
        self.history = history or self._new_history(store)
        self.host: str | None = None  # the node shown when the store holds several
        self._views: dict[str, tuple] = {}
        self._hosts: list[str] = []
        self._hosts_at = -math.inf
        self._hosts_cursor = 0
        self._rev = 0
        self._shots: pd.DataFrame | None = None
        self._shots_at = -math.inf

    # -- hosts ---------------------------------------------------------------------------
    def _new_history(self, store) -> History:
        c = self.config
        return History(store, bin_s=c.bin_s, window_s=c.window_s, hold_s=c.hold_s,
                       server_lag_s=c.server_lag_s)

    def hosts(self) -> list[str]:
        """The hosts in the store, sorted (new rows looked at most every 2 s: only the rows
        stored since the last look are read)."""
        now = time.monotonic()
        if now - self._hosts_at > 2.0:
            try:
                cursor = self.base_store.cursor()
                new = self.base_store.hosts(since=self._hosts_cursor)
                self._hosts = sorted(set(self._hosts) | set(new))
                self._hosts_cursor = cursor
            except (sqlite3.Error, StoreError):
                pass
            self._hosts_at = now
        return self._hosts

    def host_history(self, host: str) -> History:
        """The history of one host of a cluster's store (made on first use)."""
        if host not in self._views:
            view = HostView(self.base_store, host)
            self._views[host] = (view, self._new_history(view))
        return self._views[host][1]

    def select_host(self, host: str | None) -> None:
        """Show node ``host`` (a store with several hosts: their GPU indices repeat, so the
        lanes show one node at a time); None or an unknown host: keep the current one."""
        if host is None or host == self.host or host not in self.hosts():
            return
        self.host_history(host)
        self.store, self.history = self._views[host]
        self.host = host

    def _auto_host(self) -> None:
        """With several hosts in the store and none chosen yet, show the first."""
        if self.host is None:
            hosts = self.hosts()
            if len(hosts) > 1:
                self.select_host(hosts[0])

    # -- helpers -------------------------------------------------------------------------
    def shots(self) -> pd.DataFrame:
        """The stored screenshots (``SampleStore.screenshots``), read at most once a second
        (every tick of every followed page asks which are in view) unless ``shots_changed``
        was called."""
        now = time.monotonic()
        if self._shots is None or now - self._shots_at > 1.0:
            self._shots, self._shots_at = self.store.screenshots(), now
        return self._shots

    def shots_changed(self) -> None:
        """Forget the cached screenshot list (one was uploaded, edited or deleted)."""
        self._shots_at = -math.inf

    def _follow_shots(self, edge_s: float, span: float) -> tuple[pd.DataFrame, list[str]]:
        """The screenshots a followed view of the ``span`` seconds up to ``edge_s`` (epoch s)
        marks, and their hashes. A followed figure's x axis autoranges, so a marker outside
        the span would stretch the view; the page is redrawn when this set changes."""
        on = shots_between(self.shots(), edge_s - span, edge_s)
        return on, sorted(on["sha256"]) if on is not None and len(on) else []

    def _tail(self, windows: pd.DataFrame, tail: list) -> list:
        """The hot sets of the last ``HOT_TAIL`` windows (lists of GPUs, ``[]`` when not
        flagged: JSON for the page's cursor), ``tail`` then ``windows``."""
        new = [list(hs) for hs in window_hot_sets(windows)]
        old = [[h] if isinstance(h, int) else list(h or []) for h in tail]  # older pages: ints
        return (old + new)[-self.HOT_TAIL:]

    def _summary(self, windows: pd.DataFrame, tail: list) -> HeaderSummary:
        s = header_summary(windows)
        return replace(s, hot_recent=hot_counts(tail), windows=len(tail))

    def _gpus(self) -> list[int]:
        h = self.history
        if h.gpus:
            return list(h.gpus)
        devs = self.store.devices()
        return sorted({int(g) for g in devs["gpu"].dropna()}) if not devs.empty else []

    def _meta(self, state: dict) -> dict:
        h = self.history
        return {**state, "ts_last": h.t_newest, "mono_last": h.mono_newest,
                "cursor": h.cursor, "sent": _now_ms()}

    # -- follow mode ---------------------------------------------------------------------
    def snapshot(self, span: float | None = None, order_by: str = "index",
                 selected: float | None = None, tz: str | None = None) -> Step:
        """A whole new figure following the live edge: the last ``span`` seconds (default
        ``config.view_s``) and a fresh cursor; ``tz`` is the page's time zone (IANA name,
        default UTC), named on the time axis."""
        self._auto_host()
        c, h = self.config, self.history
        h.update()
        span = float(span or c.view_s)
        f = live_factor(span, c.bin_s)
        gpus = self._gpus()
        self._rev += 1
        rev = f"follow-{self._rev}"
        tz = page_zone(tz).key
        base = {"mode": "follow", "follow": True, "span": span, "preset": span, "factor": f,
                "gpus": gpus, "tz": tz, "host": self.host,
                "order_by": order_by, "gen": h.generation, "range": None, "rev": rev}
        if h.k_next is None:
            fig = build_figure(pd.DataFrame(), pd.DataFrame(), gpus, bin_s=c.bin_s,
                               window_s=c.window_s, height=c.height, uirevision=rev,
                               time_zone=tz)
            state = {**base, "k": None, "j": None, "m": None, "s": None, "server": False,
                     "order": gpus, "edge": None, "hot_tail": []}
            return Step(state=self._meta(state), figure=fig,
                        summary=header_summary(pd.DataFrame()))
        k_end = (h.k_next // f) * f
        k_first = (bin_index(h.t_first, c.bin_s) // f) * f
        k_start = max(k_first, k_end - math.ceil(span / c.bin_s / f) * f)
        bins = coarse_bins(h.bins(k_start, k_end, dense=True), f)
        j_end = h.j_next
        j_start = max(math.ceil(h.t_first / c.window_s - 1e-9),
                      j_end - math.ceil(span / c.window_s))
        windows = h.windows(j_start, j_end)
        order = load_order(windows, gpus, order_by)
        server = h.cells(j_start, h.s_next) if h.has_server else None
        shots, shots_on = self._follow_shots(k_end * c.bin_s, span)
        m_end = self._slot_cursor(f)
        slots = None
        if m_end is not None:
            hop = h.hop_s
            per = round(c.window_s / hop)
            slots = h.slots(max(j_start * per, m_end - math.ceil(span / hop - 1e-9)), m_end)
        fig = build_figure(bins, windows, gpus, bin_s=c.bin_s * f, window_s=c.window_s,
                           height=c.height, uirevision=rev, server=server, order=order,
                           shots=shots, time_zone=tz, slots=slots, hop_s=h.hop_s or 0.1)
        if selected is not None:
            sel = selected_trace(selected, c.window_s)
            fig.data[trace_keys(gpus, server is not None).index(("selected",))].update(
                x=np.asarray(sel.x) * 1000.0, y=sel.y)
        tail = self._tail(windows, [])
        state = {**base, "k": k_end, "j": j_end, "m": m_end, "s": h.s_next,
                 "server": h.has_server,
                 "order": order, "edge": k_end * c.bin_s * 1000.0, "hot_tail": tail,
                 "shots_on": shots_on}
        return Step(state=self._meta(state), figure=fig, summary=self._summary(windows, tail))

    def _slot_cursor(self, factor: int) -> int | None:
        """The history's next segment slot when a followed view with live bins of ``factor``
        0.1-s bins draws the ribbon from segments (factor 1 and segments made), else None."""
        h = self.history
        if factor != 1 or h.hop_s is None or h.m_next is None:
            return None
        return int(h.m_next)

    def _resnap(self, state: dict) -> Step:
        """A new followed figure for a page whose cursor is ``state`` (same span, band order
        and time zone)."""
        return self.snapshot(state.get("span"), state.get("order_by", "index"),
                             tz=state.get("tz"))

    def redraw(self, state: dict, selected: float | None = None) -> Step:
        """A whole new figure of what the page whose cursor is ``state`` shows (its time
        zone changed: the axis title and every time on the page follow it)."""
        if state.get("mode") == "range" and state.get("range"):
            t0, t1 = state["range"]
            return self.range_step(state, float(t0), float(t1), state.get("px"),
                                   follow=bool(state.get("follow")), selected=selected,
                                   rebuild=True)
        return self.snapshot(state.get("span"), state.get("order_by", "index"), selected,
                             tz=state.get("tz"))

    def advance(self, state: dict | None) -> Step:
        """Answer one tick of a page whose cursor is ``state``.

        Returns a ``Step`` with an ``extend`` payload for new complete bins/windows, a new
        ``figure`` when a rebuild is due, a ``patch`` when following the whole session, or
        just a new ``state``.
        """
        self._auto_host()
        c, h = self.config, self.history
        if not state:
            return self.snapshot()
        if state.get("host") != self.host:  # another node was chosen: draw it
            return self.redraw({**state, "host": self.host})
        h.update()
        if state.get("k") is None and state.get("mode") == "follow":
            if h.k_next is None:
                return Step(state=self._meta(state))
            return self._resnap(state)
        rebuild = (state.get("gen") != h.generation or list(state.get("gpus") or []) != h.gpus
                   or bool(state.get("server")) != h.has_server)
        if not state.get("follow"):
            if rebuild and state.get("mode") == "follow":
                return self._resnap(state)
            return Step(state=self._meta(state))
        if state.get("span") is None:  # following the whole session: refresh now and then
            if rebuild or _now_ms() - float(state.get("drawn") or 0) > ALL_REFRESH_S * 1000:
                span = h.span()
                if span is None:
                    return Step(state=self._meta(state))
                return self.range_step(state, span[0], span[1], state.get("px"),
                                       follow=True, rebuild=rebuild)
            return Step(state=self._meta(state))
        if rebuild:
            return self._resnap(state)
        f, k, j = int(state["factor"]), int(state["k"]), int(state["j"])
        k_end = (h.k_next // f) * f
        if (k_end - k) * c.bin_s > state["span"]:
            return self._resnap(state)
        if self._follow_shots(max(k, k_end) * c.bin_s, state["span"])[1] != list(
                state.get("shots_on") or []):  # a screenshot came into view or left it
            return self._resnap(state)
        m = state.get("m")
        m_now = self._slot_cursor(f)
        if m is None and m_now is not None:  # the segments began after the page was drawn
            return self._resnap(state)
        m_end = None if m is None else max(int(m), m_now if m_now is not None else int(m))
        if k_end <= k and h.j_next <= j and (m is None or m_end <= int(m)):
            return Step(state=self._meta(state))
        bins = coarse_bins(h.bins(k, k_end, dense=True), f)
        windows = h.windows(j, h.j_next)
        slots = None if m is None else h.slots(int(m), m_end)
        s = state.get("s")
        cells = None
        if h.has_server:
            s = h.s_next if s is None else int(s)
            cells = h.cells(s, h.s_next)
            s = h.s_next
        tail = self._tail(windows, state.get("hot_tail", []))
        new_state = {**state, "k": max(k, k_end), "j": h.j_next, "m": m_end, "s": s,
                     "hot_tail": tail, "edge": max(k, k_end) * c.bin_s * 1000.0}
        payload = extend_data(bins, windows, state["gpus"], bin_s=c.bin_s * f,
                              window_s=c.window_s, view_s=state["span"], server=cells,
                              order=state.get("order"), slots=slots, hop_s=h.hop_s or 0.1)
        return Step(state=self._meta(new_state),
                    extend=payload if extend_point_count(payload) else None,
                    summary=self._summary(windows, tail) if len(windows) else None)

    # -- range mode ----------------------------------------------------------------------
    def range_view(self, t0: float, t1: float, px: float | None = None,
                   order_by: str = "index", selected: float | None = None) -> RangeView:
        """The traces of ``[t0, t1]`` (epoch s) for a plot ``px`` pixels wide.

        Lanes hold every raw sample when the range has at most ``point_budget(px)`` samples
        per GPU (read from the store), else the history's 0.1-s bins, downsampled with
        MinMaxLTTB when there are more than that.
        """
        c, h = self.config, self.history
        h.update()
        t0, t1 = (t1, t0) if t1 < t0 else (t0, t1)
        n_out = point_budget(px)
        gpus = self._gpus()
        rate = h.samples_per_s
        raw = math.isfinite(rate) and rate * (t1 - t0) <= n_out
        if raw:
            samples = self.store.read_range(t0 - c.hold_s, t1 + c.hold_s)
            traces = lanes_from_samples(samples, gpus, n_out, c.hold_s)
        else:
            bins = h.bins(bin_index(t0, c.bin_s) - 1, bin_index(t1, c.bin_s) + 2)
            traces = lanes_from_bins(bins, gpus, c.bin_s, n_out)
        w = c.window_s
        j0, j1 = bin_index(t0, w) - 1, bin_index(t1, w) + 2
        windows = h.windows(j0, j1)
        order = load_order(windows, gpus, order_by)
        # every window gets a bar: the ribbon draws the finer segments (their rows in range)
        segs = h.segments(j0 * w, j1 * w) if bucket_factor(len(windows), n_out) == 1 else None
        wt = window_traces(windows, gpus, w, n_out, order, segs)
        factor = int(wt[("phase", "idle")].extra.get("factor", 1))
        fine = bool(wt[("phase", "idle")].extra.get("segments"))
        traces.update(wt)
        if h.has_server:
            cells = h.cells(bin_index(t0, w) - 1, bin_index(t1, w) + 2)
            traces.update(server_traces(cells, w, n_out))
        traces[("selected",)] = selected_trace(selected, w)
        empty = windows.empty and not any(
            np.isfinite(td.y).any() for k, td in traces.items() if k[0] == "lane")
        return RangeView(t0, t1, traces, order, raw, n_out, factor, empty, fine)

    def range_step(self, state: dict, t0: float, t1: float, px: float | None,
                   follow: bool = False, selected: float | None = None,
                   rebuild: bool = False) -> Step:
        """Answer a range request: a ``Patch`` of the page's figure (a whole figure when the
        page's figure has other traces than the history needs, or ``rebuild``)."""
        c, h = self.config, self.history
        order_by = state.get("order_by", "index")
        v = self.range_view(t0, t1, px, order_by, selected)
        gpus = self._gpus()
        server = h.has_server
        new_state = {**state, "mode": "range", "follow": follow, "host": self.host,
                     "preset": "all" if follow else None,
                     "span": None if follow else state.get("span"), "range": [v.t0, v.t1],
                     "px": px, "order": v.order, "gpus": gpus, "server": server,
                     "gen": h.generation, "edge": None,
                     "view": view_note(v, c, state.get("tz"), self.history.sessions),
                     "drawn": _now_ms(),
                     "k": h.k_next, "j": h.j_next, "s": h.s_next}
        summary = None
        if follow:  # following the whole session: the header follows the newest windows
            w = h.windows(h.j_next - self.HOT_TAIL, h.j_next) if h.j_next is not None else None
            if w is not None and len(w):
                summary = self._summary(w, self._tail(w, []))
        if rebuild or list(state.get("gpus") or []) != gpus or bool(state.get("server")) != server:
            self._rev += 1
            fig = self.range_figure(v, height=c.height, uirevision=f"range-{self._rev}",
                                    shots=self.shots(), tz=state.get("tz"))
            return Step(state=self._meta(new_state), figure=fig, summary=summary)
        return Step(state=self._meta(new_state), patch=range_patch(v, gpus, server),
                    summary=summary)

    def range_figure(self, v: RangeView, *, height: int | None, uirevision: str,
                     shots: pd.DataFrame | None = None, tz: str | None = None):
        """A whole figure showing range view ``v`` (the history's GPUs and server lane), its
        time axis named for the page's zone ``tz`` (default UTC)."""
        c, h = self.config, self.history
        gpus, server = self._gpus(), h.has_server
        fig = build_figure(pd.DataFrame(), pd.DataFrame(), gpus, bin_s=c.bin_s,
                           window_s=c.window_s, height=height, uirevision=uirevision,
                           server=h.cells(0, 0) if server else None, order=v.order,
                           shots=shots, time_zone=page_zone(tz).key)
        for i, upd in range_update(v.traces, gpus, server, encode=False).items():
            fig.data[i].update(upd)
        fig.update_xaxes(range=[v.t0 * 1000.0, v.t1 * 1000.0], autorange=False)
        return fig

    # -- panels --------------------------------------------------------------------------
    def at(self, t: float) -> dict:
        """What the history knows at epoch time ``t``: ``bin`` ({(column, gpu): value} of
        the 0.1-s bin holding ``t``, or the nearest within ``hold_s``), ``window`` (the
        labelled window holding ``t`` as a dict, or None), ``segment`` (the 0.1-s phase
        segment holding ``t``, or None) and ``gpus``."""
        c, h = self.config, self.history
        k = bin_index(t, c.bin_s)
        reach = max(1, math.floor(c.hold_s / c.bin_s))
        b = h.bins(k - reach, k + reach + 1)
        row = None
        if len(b):
            near = np.abs(b.index.to_numpy() - k)
            row = b.iloc[int(np.argmin(near))]
        j = bin_index(t, c.window_s)
        w = h.windows(j, j + 1)
        return {"t": t, "bin": None if row is None else row.to_dict(),
                "window": None if w.empty else w.iloc[0].to_dict(),
                "segment": h.segment_at(t), "gpus": self._gpus()}

    def ceilings(self, row: dict | None) -> dict[int, dict]:
        """Why, per hot GPU of window ``row``: the ceiling each GPU of its hot set leans on
        (``explain.window_ceilings`` over the window's stored samples); empty when the window
        is not flagged or its samples cannot be read."""
        if row is None or not row_hot_set(row):
            return {}
        t0 = float(row["start"])
        try:
            samples = self.store.read_range(t0, t0 + self.config.window_s)
            devices = self.store.devices()
        except (sqlite3.Error, StoreError):
            return {}
        return window_ceilings(row, samples, self.config.window_s,
                               devices if len(devices) else None)

    def status(self, state: dict | None) -> list:
        """The status line: source, GPUs, samples stored, history held, age of the newest
        sample, collector health."""
        c, h = self.config, self.history
        parts: list = [html.Span(c.source, className="tl-source")]
        gpus = (state or {}).get("gpus") or []
        parts.append(f" · {len(gpus)} GPU{'s' if len(gpus) != 1 else ''}")
        if self.host is not None:
            parts.append(f" on {self.host} ({len(self.hosts())} hosts)")
        parts.append(f" · {h.cursor:,} samples stored")
        sp = h.span()
        if sp is not None:
            parts.append(f" · history {fmt_span(sp[1] - sp[0])}")
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


def selected_trace(t_start: float | None, window_s: float) -> TraceData:
    """The selected window's outline: one bar over the window starting at ``t_start``."""
    if t_start is None or not math.isfinite(float(t_start)):
        return TraceData(np.empty(0), np.empty(0), window_s)
    return TraceData(np.array([float(t_start) + window_s / 2.0]), np.array([1.45]), window_s)


def range_patch(v: RangeView, gpus: list[int], server: bool) -> dash.Patch:
    """A ``dash.Patch`` putting range view ``v`` into the page's figure: every trace's data
    (typed arrays), the x range of every axis and the load bands' GPU order."""
    p = dash.Patch()
    for i, upd in range_update(v.traces, gpus, server).items():
        for attr, val in upd.items():
            p["data"][i][attr] = val
    names = axis_names(server)
    for ax in names["x"]:
        p["layout"][ax]["range"] = [v.t0 * 1000.0, v.t1 * 1000.0]
        p["layout"][ax]["autorange"] = False
    for attr, val in band_axis(v.order).items():
        p["layout"][names["bands"]][attr] = val
    return p


_AXES: dict[bool, dict] = {}


def axis_names(server: bool) -> dict:
    """Layout names of the figure's axes: ``x`` (every x axis) and ``bands`` (the load
    bands' y axis), for a figure with or without the server lane."""
    if server not in _AXES:
        from ..figures import rows

        fig = build_figure(pd.DataFrame(), pd.DataFrame(), [0], server=(
            pd.DataFrame(columns=["pf_batches"]) if server else None))
        xs = sorted((k for k in fig.layout if str(k).startswith("xaxis")),
                    key=lambda k: int(k[5:] or 1))
        band = fig.get_subplot(rows(server).bands, 1).yaxis.plotly_name
        _AXES[server] = {"x": xs, "bands": band}
    return _AXES[server]


def view_note(v: RangeView, c: DashboardConfig, tz: str | None = None,
              sessions: list | None = None) -> str:
    """One line saying what the range view draws (dates in the page's zone ``tz``, span,
    resolution of lanes and ribbon), or that the range holds no data; when the range holds
    more than one of ``sessions`` (``History.sessions``), how many and the longest pause."""
    span = fmt_span(v.t1 - v.t0)
    zone = page_zone(tz)
    d0 = datetime.fromtimestamp(v.t0, tz=zone)
    d1 = datetime.fromtimestamp(v.t1, tz=zone)
    t0 = d0.strftime("%Y-%m-%d %H:%M:%S.%f")[:-4]
    t1 = d1.strftime("%H:%M:%S.%f")[:-4] if d1.date() == d0.date() else \
        d1.strftime("%Y-%m-%d %H:%M:%S.%f")[:-4]
    if v.empty:
        return f"{t0}–{t1} {zone.key} ({span}) · no data in this range"
    lanes = ("every sample" if v.raw else
             f"{c.bin_s:g}-s bins, MinMaxLTTB to ≤ {v.n_out} points")
    ribbon = ("0.1-s phase segments" if v.segments else "one bar per window"
              if v.factor == 1 else f"{v.factor} windows per bar (phase shares stacked)")
    note = f"{t0}–{t1} {zone.key} ({span}) · lanes: {lanes} · ribbon: {ribbon}"
    inside = [(a, b) for a, b in (sessions or []) if b >= v.t0 and a <= v.t1]
    if len(inside) > 1:
        pause = max(b0 - a1 for (_, a1), (b0, _) in itertools.pairwise(inside))
        note += (f" · {len(inside)} sessions, pauses up to {fmt_span(pause)} drawn as gaps: "
                 f"pick one under session")
    return note


# -- panels ----------------------------------------------------------------------------------


def _num(v, spec: str, unit: str = "") -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "–"
    return f"{format(f, spec)}{unit}" if math.isfinite(f) else "–"


def page_zone(name: str | None) -> ZoneInfo:
    """The page's time zone: IANA ``name`` as the browser reports it (any case), UTC when
    None or not a zone here."""
    try:
        return ZoneInfo(zone_name(name or "UTC"))
    except ScreenshotError:
        return ZoneInfo("UTC")


def _clock(t: float, zone: ZoneInfo, digits: int = 3) -> str:
    s = datetime.fromtimestamp(t, tz=zone).strftime("%H:%M:%S.%f")
    return s[: 9 + digits] if digits else s[:8]


def _phase_pill(row: dict) -> list:
    """The window's phase as a coloured pill, then how sure (``figures.certainty``)."""
    phase = str(row.get("phase"))
    return [html.Span(phase.upper(), className="tl-pill tl-pill-sm",
                      style={"background": PHASE_COLORS.get(phase, "#999"),
                             "color": "#1f2937" if phase == "idle" else "white"}),
            html.Span(f" {certainty(row)}")]


def hover_panel(info: dict, order: list[int] | None, tz: str | None = None) -> list:
    """The hover panel: time (in the page's zone ``tz``), the window's phase and confidence,
    the 0.1-s phase segment under the cursor, and one row per GPU (in the load bands' order)
    with every lane's value in the 0.1-s bin and the GPU's load share."""
    t = info["t"]
    zone = page_zone(tz)
    win = info.get("window")
    gpus = list(order or info.get("gpus") or [])
    head: list = [html.Div(f"{datetime.fromtimestamp(t, tz=zone):%Y-%m-%d} {_clock(t, zone)} "
                           f"{zone.key}", className="tl-panel-time")]
    hot_set = row_hot_set(win)
    if win is not None:
        hot_s = (" · hot " + hot_set_text(hot_set, win.get("hot_share"), win.get("cold_share"))
                 if hot_set else "")
        head.append(html.Div([*_phase_pill(win),
                              html.Span(f" · window {_clock(win['start'], zone, 1)}–"
                                        f"{_clock(win['end'], zone, 1)} · max/mean "
                                        f"{_num(win.get('imbalance_ratio'), '.2f', '×')}"
                                        f"{hot_s}")], className="tl-panel-phase"))
    else:
        head.append(html.Div("no labelled window here", className="tl-muted"))
    seg = info.get("segment")
    if seg is not None:
        head.append(html.Div(f"0.1-s segment: {seg['phase']} {_clock(seg['start'], zone, 1)}–"
                             f"{_clock(seg['end'], zone, 1)} ({fmt_span(seg['end'] - seg['start'])}"
                             f", {float(seg['confidence']):.0%} sure)", className="tl-muted"))
    b = info.get("bin") or {}
    loads = {g: float(win.get(f"load_g{g}", math.nan)) if win else math.nan for g in gpus}
    # shares of near-zero load are noise (figures.MIN_SHARE_LOAD, as in the share strip)
    busy = win is not None and float(win.get("load_mean", math.nan)) >= MIN_SHARE_LOAD
    total = sum(v for v in loads.values() if math.isfinite(v)) if busy else 0.0
    cols = [("SM", "sm_active", 1.0, ".0f"), ("Tensor", "tensor_active", 1.0, ".0f"),
            ("DRAM", "dram_active", 1.0, ".0f"), ("PCIe tx", "pcie_tx_bytes_per_s", 1e-6, ",.0f"),
            ("rx", "pcie_rx_bytes_per_s", 1e-6, ",.0f"), ("Power", "power_w", 1.0, ".0f")]
    units = ["%", "%", "%", "MB/s", "MB/s", "W", "%"]
    header = html.Tr([html.Th("GPU")] + [html.Th([n, html.Br(), html.Span(u, className="tl-unit")])
                                        for (n, *_), u in zip(cols, units)]
                     + [html.Th(["share", html.Br(), html.Span("%", className="tl-unit")])])
    body = []
    for g in gpus:
        cells = [html.Td([html.Span(className="tl-dot", style={"background": gpu_color(g)}),
                          f"{g}"])]
        for _, col, scale, spec in cols:
            v = b.get((col, g))
            cells.append(html.Td(_num(None if v is None else v * scale, spec)))
        share = loads[g] / total * 100 if total > 0 and math.isfinite(loads[g]) else None
        hot = g in hot_set
        cells.append(html.Td(_num(share, ".0f"), className="tl-hot" if hot else None))
        body.append(html.Tr(cells))
    return head + [html.Table([html.Thead(header), html.Tbody(body)], className="tl-table")]


def window_panel(row: dict | None, gpus: list[int], labeller: str,
                 tz: str | None = None, ceilings: dict[int, dict] | None = None) -> list:
    """The selected window: its time (in the page's zone ``tz``), phase, scores, features
    and why it got its label; with ``ceilings`` (``LiveView.ceilings``), the ceiling each
    hot GPU leans on."""
    if row is None:
        return [html.Div("Click the figure to select a window: its features and why it got "
                         "its label show here.", className="tl-muted")]
    ex = explain_window(row, gpus, labeller, ceilings)
    zone = page_zone(tz)
    when = f"{_clock(row['start'], zone, 1)}–{_clock(row['end'], zone, 1)} {zone.key}"
    return [
        html.Div([html.B("Selected window "), when], className="tl-panel-time"),
        html.Div([*_phase_pill(row), html.Span(f" · labelled by the {ex.labeller}")],
                 className="tl-panel-phase"),
        html.Ul([html.Li(r) for r in ex.reasons], className="tl-reasons"),
        html.Table([html.Tbody([html.Tr([html.Td(k), html.Td(v, className="tl-num")])
                                for k, v in ex.features])], className="tl-table tl-kv"),
    ]


def _labeller_label() -> str:
    """Which phase model labels the windows: the trained one, or the rules as fallback."""
    from ...classifier import default_labeller, labeller_name

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
    if h.get("source_errors"):  # a Prometheus that stopped answering
        ok = h.get("source_last_ok")
        since = f"last good poll {_fmt_age(time.time() - ok)} ago" if ok else "no good poll yet"
        out.append(html.Span(f" · source: {h['source_errors']} failed polls, {since} "
                             f"({h.get('source_last_error')})", className="tl-stale",
                             title=str(h.get("source_last_error"))))
    for key, what in (("blank_values", "blank"), ("out_of_range_values", "impossible")):
        counts = h.get(key) or {}
        if counts:
            top = ", ".join(f"{c} {n}" for c, n in sorted(counts.items(), key=lambda x: -x[1]))
            out.append(f" · {sum(counts.values())} {what} values read as no reading ({top})")
    out.extend(_scrape_health((health or {}).get("server_metrics")))
    return out


def _scrape_health(sh) -> list:
    """Status-line piece for a ``/metrics`` scraper that fails: age of the last good scrape,
    failures and the last error."""
    if sh is None or not getattr(sh, "failures", 0):
        return []
    ok = sh.last_ok
    since = f"last good scrape {_fmt_age(time.time() - ok)} ago" if ok else "no good scrape yet"
    cls = "tl-stale" if sh.consecutive_failures else ""
    return [html.Span(f" · /metrics: {since}, {sh.failures} of {sh.scrapes} failed "
                      f"(last: {sh.last_error})", className=cls, title=str(sh.last_error))]


def _age_s(ts_last: float | None, mono_last: float | None) -> float | None:
    """Seconds since the newest sample: by the monotonic clock when its stamp is this boot's
    (it agrees with the wall clock within a minute: immune to a wall-clock step), else by the
    wall clock (a store from another boot or host, whose monotonic stamps mean nothing here)."""
    if ts_last is None:
        return None
    wall = time.time() - float(ts_last)
    if mono_last is not None:
        age = time.monotonic() - float(mono_last)
        if abs(age - wall) < 60.0:
            return max(age, 0.0)
    return max(wall, 0.0)


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


def _recent_text(counts: dict[int, int]) -> str:
    """``{gpu: windows}`` grouped by count, most first: ``"GPUs 1, 3, 5, 7 ×6, GPU 2 ×1"``."""
    by: dict[int, list[int]] = {}
    for g, n in counts.items():
        by.setdefault(n, []).append(g)
    return ", ".join(f"GPU{'s' if len(gs) > 1 else ''} {', '.join(map(str, sorted(gs)))} ×{n}"
                     for n, gs in sorted(by.items(), key=lambda kv: -kv[0]))


def header_cells(s: HeaderSummary, tz: str | None = None) -> list:
    """Header cells (phase, imbalance ratio, the hot set with its shares of the work,
    straggler tax) for a summary; times in the page's zone ``tz``."""
    if s.phase is None:
        phase_value = html.Span("waiting", className="tl-pill",
                                style={"background": "#eef0f3", "color": "#6b7280"})
        phase_sub = "no complete window yet"
    else:
        phase_value = html.Span(s.phase.upper(), className="tl-pill",
                                style={"background": PHASE_COLORS.get(s.phase, "#999"),
                                       "color": "#1f2937" if s.phase == "idle" else "white"})
        end = _clock(s.window_end, page_zone(tz), 2)
        phase_sub = (f"{s.certainty or _num(s.confidence * 100, '.0f', ' %')} · window to "
                     f"{end}")
    ratio = f"{s.imbalance_ratio:.2f}×" if math.isfinite(s.imbalance_ratio) else "–"
    tax = f"{s.straggler_tax:.0%}" if math.isfinite(s.straggler_tax) else "–"
    hot_set = s.hot_set or ((s.hot_gpu,) if s.hot_gpu is not None else ())
    if hot_set:
        pill = {"color": "white", "boxShadow": f"0 0 0 2px {HOT_COLOR}", "marginRight": "3px"}
        hot_value = [html.Span(f"GPU {g}" if len(hot_set) == 1 else f"{g}", className="tl-pill",
                               title=f"GPU {g}", style={**pill, "background": gpu_color(g)})
                     for g in hot_set]
        shares = hot_set_text(hot_set, s.hot_share, s.cold_share).partition(" — ")[2]
        if shares:
            hot_value.append(html.Span(f" {shares}", className="tl-hot-share"))
    else:
        hot_value = html.Span("none", className="tl-muted")
    hot_sub = (f"hot in the last {s.windows} windows: {_recent_text(s.hot_recent)}"
               if s.hot_recent else f"none hot in the last {s.windows} windows" if s.windows
               else "")
    return [
        _cell("Phase", phase_value, phase_sub, ids.PHASE),
        _cell("Imbalance", ratio, "max / mean GPU work (1.00 = balanced)", ids.IMBALANCE),
        _cell("Hot set" if len(hot_set) > 1 else "Hot GPU", hot_value, hot_sub, ids.HOT_GPU),
        _cell("Straggler tax", tax, "GPU time spent waiting for the slowest", ids.STRAGGLER),
    ]


def legend(gpus: list[int] | None = None) -> html.Div:
    """The phase-colour legend (plus the imbalance and PCIe line-style keys)."""
    items = []
    for phase in ("idle", "prefill", "decode"):
        items.append(html.Span(className="tl-key", title=PHASE_HELP[phase], children=[
            html.Span(className="tl-swatch", style={"background": PHASE_COLORS[phase]}),
            html.B(phase), html.Span(f" {PHASE_HELP[phase]}", className="tl-key-help"),
        ]))
    items.append(html.Span(className="tl-key", children=[
        html.Span(className="tl-swatch tl-swatch-thin", style={"background": HOT_COLOR}),
        html.B("imbalanced"), html.Span(" decode window with hot GPUs (red in the share strip)",
                                        className="tl-key-help"),
    ]))
    items.append(html.Span(className="tl-key", children=[
        html.Span(className="tl-swatch tl-swatch-stack", style={"background": (
            f"linear-gradient({PHASE_COLORS['decode']} 0 60%, {PHASE_COLORS['prefill']} 60%)")}),
        html.B("stacked bar"), html.Span(" zoomed out: share of the bar's windows in each phase",
                                         className="tl-key-help"),
    ]))
    items.append(html.Span(className="tl-key", children=[
        html.Span(className="tl-swatch tl-swatch-outline"),
        html.B("selected"), html.Span(" the window clicked (details on the right)",
                                      className="tl-key-help"),
    ]))
    items.append(html.Span(className="tl-key", children=[
        *[html.Span(className="tl-dot", style={"background": gpu_color(g)})
          for g in (gpus or [0])],
        html.B(f" GPU {', '.join(map(str, gpus or [0]))}"),
        html.Span(" line colours; PCIe tx solid, rx dotted; gaps: no data",
                  className="tl-key-help"),
    ]))
    return html.Div(id=ids.LEGEND, className="tl-legend", children=items)


# -- the factory -----------------------------------------------------------------------------

_ACTION_JS = """function(relayout, n10, n60, n600, nall, nfollow, ngo, sfrom, sto, order,
                          session, tfrom, tto, state) {
    const nu = window.dash_clientside.no_update;
    const ctx = window.dash_clientside.callback_context;
    const trig = ctx.triggered.length ? ctx.triggered[0].prop_id.split('.')[0] : '';
    const gd = document.querySelector('#%(graph)s .js-plotly-plot');
    const px = gd && gd._fullLayout && gd._fullLayout._size ? gd._fullLayout._size.w : null;
    const toMs = %(local_ms)s;
    let a = null;
    if (trig === '%(graph)s') {
        if (!relayout) return [nu, nu];
        let r0 = null, r1 = null, auto = false;
        for (const k in relayout) {
            if (/^xaxis\\d*\\.range\\[0\\]$/.test(k)) r0 = relayout[k];
            else if (/^xaxis\\d*\\.range\\[1\\]$/.test(k)) r1 = relayout[k];
            else if (/^xaxis\\d*\\.range$/.test(k)) { r0 = relayout[k][0]; r1 = relayout[k][1]; }
            else if (/^xaxis\\d*\\.autorange$/.test(k) && relayout[k]) auto = true;
        }
        if (r0 !== null && r1 !== null) a = {kind: 'range', t0: toMs(r0), t1: toMs(r1)};
        // a double-click resets a zoomed range to the whole session; plotly also reports
        // autorange when a followed figure is drawn, which is no request
        else if (auto && state && state.mode === 'range') a = {kind: 'all'};
        else return [nu, nu];
    } else if (trig === '%(p10)s') a = {kind: 'preset', span: 10};
    else if (trig === '%(p60)s') a = {kind: 'preset', span: 60};
    else if (trig === '%(p600)s') a = {kind: 'preset', span: 600};
    else if (trig === '%(pall)s') a = {kind: 'all'};
    else if (trig === '%(follow)s') a = {kind: 'follow', want: !(state && state.follow)};
    else if (trig === '%(go)s' || trig === '%(from)s' || trig === '%(to)s') {
        a = {kind: 'go', from: tfrom, to: tto};
    }
    else if (trig === '%(order)s') a = {kind: 'order', by: order};
    else if (trig === '%(session)s') {
        if (!session) return [nu, nu];
        a = {kind: 'session', value: session};
    }
    else return [nu, nu];
    a.px = px; a.n = Date.now();
    return [a, Date.now()];
}"""

_TICK_JS = """function(n, busy, pull) {
    const now = Date.now();
    if (busy !== null && busy !== undefined && now - busy < %(stuck)d) {
        return [window.dash_clientside.no_update, window.dash_clientside.no_update];
    }
    return [(pull || 0) + 1, now];
}"""

# Epoch ms of a time-axis value. plotly.js shows a number on a date axis in the browser's zone
# (through a JS Date) and reports axis positions as that wall-clock text, so the text is read
# back in the same zone: new Date(y, m, d, ...) is local time.
_LOCAL_MS_JS = """(v) => {
        if (typeof v === 'number') return v;
        const m = String(v).trim().match(
            /^(\\d{4})-(\\d{2})-(\\d{2})(?:[ T](\\d{2}):(\\d{2})(?::(\\d{2}))?(?:\\.(\\d+))?)?$/);
        if (!m) return NaN;
        const frac = m[7] ? Number('0.' + m[7]) * 1000 : 0;
        return new Date(+m[1], +m[2] - 1, +m[3], +(m[4] || 0), +(m[5] || 0), +(m[6] || 0))
            .getTime() + frac;
    }"""

_POINT_T_JS = """function(data) {
    if (!data || !data.points || !data.points.length) return window.dash_clientside.no_update;
    const t = (LOCAL_MS)(data.points[0].x);
    return Number.isFinite(t) ? t : window.dash_clientside.no_update;
}""".replace("LOCAL_MS", _LOCAL_MS_JS)

# Sample-to-screen latency, measured in the page (see the module docstring).
_LATENCY_JS = """function(state) {
    const L = window.__tlLat = window.__tlLat ||
        {lat: [], offs: [], edge: null, follow: false, bin: 100, lane: 0, off: 0};
    const nu = window.dash_clientside.no_update;
    if (!state || state.sent === null || state.sent === undefined) return nu;
    // browser clock minus server clock: 0 unless causality says otherwise (an answer made
    // before it was asked, or arriving before it was made, by the browser's clock)
    L.offs.push([state.asked === null || state.asked === undefined ? -Infinity
                 : state.asked - state.sent, Date.now() - state.sent]);
    if (L.offs.length > 200) L.offs.shift();
    const ahead = Math.max.apply(null, L.offs.map(o => o[0]));
    const behind = Math.min.apply(null, L.offs.map(o => o[1]));
    L.off = ahead > 0 ? ahead : (behind < 0 ? behind : 0);
    L.follow = state.mode === 'follow' && !!state.follow;
    L.bin = state.bin_ms || 100;
    L.lane = state.lane || 0;
    const gd = document.querySelector('#%(graph)s .js-plotly-plot');
    if (gd && gd.on && !gd.__tlLatency) {
        gd.__tlLatency = true;
        // every redraw: the bins drawn for the first time are on screen now
        gd.on('plotly_afterplot', () => {
            const t = gd._fullData && gd._fullData[L.lane];
            const x = t && t.x;
            if (!L.follow || !x || !x.length) { L.edge = null; return; }
            const edge = x[x.length - 1] + L.bin / 2;
            if (L.edge !== null && edge > L.edge && edge - L.edge < 5000) {
                const paint = Date.now() - L.off;
                for (let e = L.edge + L.bin; e <= edge + 0.5; e += L.bin) {
                    L.lat.push(paint - (e - L.bin / 2));
                }
                while (L.lat.length > 600) L.lat.shift();  // the last minute of bins
            }
            L.edge = edge;
        });
    }
    if (!L.follow) return 'sample → screen: measured while following (10 s, 1 min, 10 min)';
    if (L.lat.length < 5) return 'sample → screen: measuring…';
    const s = L.lat.slice().sort((a, b) => a - b);
    if (s[0] < -1000) return 'sample → screen: n/a (sample stamps run ahead of the clock: ' +
                             'a replay faster than real time)';
    const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
    return 'sample → screen p50 ' + Math.round(q(0.5)) + ' ms · p95 ' + Math.round(q(0.95)) +
           ' ms (last ' + s.length + ' bins)';
}"""


def parse_time(text: str | None, tz: str | None = None) -> float:
    """Epoch seconds of a date-time typed by hand: ``YYYY-MM-DD[ HH:MM[:SS[.fff]]]`` read in
    the page's zone ``tz`` (default UTC; a repeated autumn hour reads as its first pass),
    ISO 8601 with an offset (``...T18:31:15+02:00``, ``...Z``), or epoch seconds.

    Raises:
        ValueError: unreadable, or outside 1970-2200.
    """
    s = (text or "").strip()
    zone = page_zone(tz)
    why = (f"cannot read {text!r} as a date-time in {zone.key} (YYYY-MM-DD HH:MM:SS, ISO 8601 "
           f"with an offset, or epoch seconds)")
    if not s:
        raise ValueError(why)
    try:
        if re.fullmatch(r"\d{9,11}(\.\d*)?", s):
            t = float(s)
        else:
            if not re.match(r"\d{4}-\d{2}-\d{2}", s):  # no "now", "today", "May 5"
                raise ValueError(why)
            ts = pd.Timestamp(s)
            t = (ts.tz_localize(zone.key, ambiguous=True, nonexistent="shift_forward")
                 if ts.tzinfo is None else ts).timestamp()
    except (ValueError, OverflowError, TypeError):
        raise ValueError(why) from None
    if not (math.isfinite(t) and 0.0 <= t <= 7.26e9):
        raise ValueError(f"{text!r} is outside 1970-2200")
    return t


def session_options(sessions: list, tz: str | None = None) -> list[dict]:
    """The session picker's options: one per ``History.sessions`` run, oldest first, labelled
    with its start, end and length in the page's zone; the value is ``"t0,t1"`` (epoch s),
    the newest session's ``"t0,"`` (open: it may still grow, and follows)."""
    out = []
    for i, (t0, t1) in enumerate(sessions):
        last = i == len(sessions) - 1
        start = _picker_value(t0, tz)[:19]
        end = "now" if last else _picker_value(t1, tz)[11:19]
        out.append({"label": f"{start} – {end} ({fmt_span(max(t1 - t0, 0.0))})",
                    "value": f"{t0:.3f}," if last else f"{t0:.3f},{t1:.3f}"})
    return out


def _picker_value(t: float, tz: str | None = None) -> str:
    return datetime.fromtimestamp(t, tz=page_zone(tz)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def create_app(store: SampleStore, config: DashboardConfig | None = None) -> dash.Dash:
    """Build the dashboard for ``store``.

    Args:
        store: the sample store the collector writes (read-only use here).
        config: settings; default ``DashboardConfig()``.

    Returns:
        A ``dash.Dash`` app (its ``LiveView`` is ``app.tealeaves_live``); serve
        ``app.server`` (a Flask WSGI app) with any WSGI server.
    """
    config = config or DashboardConfig()
    live = LiveView(store, config)
    app = dash.Dash(__name__, title=config.title, update_title=None,
                    assets_folder=str(ASSETS), serve_locally=True)
    app.tealeaves_live = live
    for server in (False, True):  # off the first request's path
        axis_names(server)

    def layout() -> html.Div:
        step = live.snapshot()
        state = _page_state(step.state, config)
        return html.Div(className="tl-page", children=[
            html.Header(className="tl-top", children=[
                html.Div(className="tl-brand", children=[
                    html.Span("tealeaves", className="tl-logo"),
                    html.Span(className="tl-tabs", children=[
                        html.Button("Live", id=ids.TAB_LIVE, n_clicks=0,
                                    className="tl-tab tl-tab-on"),
                        html.Button("Screenshots", id=ids.TAB_SHOTS, n_clicks=0,
                                    className="tl-tab"),
                    ]),
                    html.Span(live.status(state), id=ids.STATUS, className="tl-status"),
                ]),
                html.Div(header_cells(step.summary), id=ids.HEADER, className="tl-cells"),
                legend(state.get("gpus")),
            ]),
            html.Div(id=ids.LIVE_PAGE, children=[cluster_panel(), toolbar(state, config),
                                                 html.Div(className="tl-main", children=[
                dcc.Graph(id=ids.GRAPH, figure=step.figure, className="tl-graph",
                          clear_on_unhover=False,
                          config={"displaylogo": False, "responsive": True,
                                  # a double-click autoranges (read as "all"), instead of
                                  # going back to the range first drawn
                                  "doubleClick": "autosize",
                                  "modeBarButtonsToRemove": ["select2d", "lasso2d"]},
                          style={"height": (f"{config.height}px" if config.height else
                                            f"max({MIN_HEIGHT_PX}px, calc(100vh - 12px))")}),
                html.Aside(className="tl-side", children=[
                    html.Div(className="tl-panel", children=[
                        html.Div("At the cursor", className="tl-panel-title"),
                        html.Div(id=ids.HOVER_PANEL, children=[html.Div(
                            "Hover over the figure: every GPU's values at that instant and "
                            "the window's phase show here.", className="tl-muted")]),
                    ]),
                    html.Div(className="tl-panel", children=[
                        html.Div("Window", className="tl-panel-title"),
                        html.Div(id=ids.WINDOW_PANEL,
                                 children=window_panel(None, [], "")),
                    ]),
                ]),
            ])]),
            shots_page(config.store_temporary),
            dcc.Interval(id=ids.TICK, interval=int(config.interval_ms), n_intervals=0),
            dcc.Store(id=ids.CURSOR, data=state),
            dcc.Store(id=ids.PULL, data=0),
            dcc.Store(id=ids.BUSY, data=None),
            dcc.Store(id=ids.ACTION, data=None),
            dcc.Store(id=ids.HOVER_T, data=None),
            dcc.Store(id=ids.CLICK_T, data=None),
            dcc.Store(id=ids.SELECTED, data=None),
            dcc.Store(id=ids.PAGE, data="live"),
            dcc.Store(id=ids.SHOTS_VERSION, data=0),
            dcc.Store(id=ids.SHOT_SELECTED, data=None),
            dcc.Store(id=ids.SHOT_BATCH, data=None),
            dcc.Store(id=ids.PAGE_TZ, data=None),
            dcc.Interval(id=ids.CLUSTER_TICK, interval=3000, n_intervals=0),
        ])

    app.layout = layout

    app.clientside_callback(
        _TICK_JS % {"stuck": STUCK_MS},
        Output(ids.PULL, "data"),
        Output(ids.BUSY, "data", allow_duplicate=True),
        Input(ids.TICK, "n_intervals"),
        State(ids.BUSY, "data"),
        State(ids.PULL, "data"),
        prevent_initial_call=True,
    )
    # Every user action becomes one ACTION (and marks a request in flight, so the interval
    # does not supersede it).
    app.clientside_callback(
        _ACTION_JS % {"graph": ids.GRAPH, "p10": ids.PRESET_10S, "p60": ids.PRESET_1MIN,
                      "p600": ids.PRESET_10MIN, "pall": ids.PRESET_ALL, "follow": ids.FOLLOW,
                      "go": ids.RANGE_GO, "order": ids.ORDER, "from": ids.RANGE_FROM,
                      "to": ids.RANGE_TO, "session": ids.SESSION, "local_ms": _LOCAL_MS_JS},
        Output(ids.ACTION, "data"),
        Output(ids.BUSY, "data", allow_duplicate=True),
        Input(ids.GRAPH, "relayoutData"),
        Input(ids.PRESET_10S, "n_clicks"),
        Input(ids.PRESET_1MIN, "n_clicks"),
        Input(ids.PRESET_10MIN, "n_clicks"),
        Input(ids.PRESET_ALL, "n_clicks"),
        Input(ids.FOLLOW, "n_clicks"),
        Input(ids.RANGE_GO, "n_clicks"),
        Input(ids.RANGE_FROM, "n_submit"),
        Input(ids.RANGE_TO, "n_submit"),
        Input(ids.ORDER, "value"),
        Input(ids.SESSION, "value"),
        State(ids.RANGE_FROM, "value"),
        State(ids.RANGE_TO, "value"),
        State(ids.CURSOR, "data"),
        prevent_initial_call=True,
    )

    n_presets = len(PRESETS)

    @app.callback(
        Output(ids.SESSION, "options"),
        Output(ids.SESSION, "placeholder"),
        Input(ids.CURSOR, "data"),
        State(ids.SESSION, "options"),
        State(ids.PAGE_TZ, "data"),
        prevent_initial_call=True,
    )
    def _sessions(_state, have, page_tz):
        opts = session_options(live.history.sessions, page_zone(page_tz).key)
        if len(opts) <= 1:
            opts = []
        if opts == (have or []):
            raise dash.exceptions.PreventUpdate
        return opts, f"{len(opts)} sessions: pick one" if opts else "one session"

    @app.callback(
        Output(ids.GRAPH, "figure"),
        Output(ids.GRAPH, "extendData"),
        Output(ids.CURSOR, "data"),
        Output(ids.HEADER, "children"),
        Output(ids.STATUS, "children"),
        Output(ids.BUSY, "data", allow_duplicate=True),
        Output(ids.VIEW_NOTE, "children"),
        Output(ids.FOLLOW, "children"),
        Output(ids.FOLLOW, "className"),
        Output(ids.RANGE_FROM, "value"),
        Output(ids.RANGE_TO, "value"),
        *[Output(pid, "className") for pid, _, _ in PRESETS],
        Input(ids.PULL, "data"),
        Input(ids.ACTION, "data"),
        State(ids.CURSOR, "data"),
        State(ids.SELECTED, "data"),
        State(ids.BUSY, "data"),
        State(ids.PAGE_TZ, "data"),
        prevent_initial_call=True,
    )
    def _update(_pull, action, state, selected, asked, page_tz):
        nu = dash.no_update
        note = nu
        # An action is acted on once, whichever input fired: dash-renderer keeps only the
        # newest request of a callback, so a tick fired while a zoom was on its way replaces
        # the zoom's request, and it must carry the zoom out (the page's cursor names the
        # last action done, ``act_n``).
        done_n = (state or {}).get("act_n")
        pending = bool(action) and action.get("n") is not None and action.get("n") != done_n
        applied = False
        tz = page_zone(page_tz).key
        try:
            if state and state.get("tz", "UTC") != tz:  # the page told its zone: redraw
                step = live.redraw({**state, "tz": tz}, selected)  # (an action waits a tick)
                acted = state.get("mode") == "range"
            elif pending:
                step, note = _act(live, action, {**(state or {}), "tz": tz}, selected)
                acted = applied = True
            else:
                step = live.advance(state)
                acted = False
        except (sqlite3.ProgrammingError, StoreError):  # the server is shutting down
            raise dash.exceptions.PreventUpdate from None
        st = {**_page_state(step.state, config), "asked": asked,
              "act_n": action.get("n") if applied else done_n}
        if step.figure is not None:
            fig = step.figure
        elif step.patch is not None:
            fig = step.patch
        else:
            fig = nu
        if note is nu and st.get("mode") == "range" and (step.patch is not None
                                                          or step.figure is not None):
            note = st.get("view", "")
        elif note is nu and step.figure is not None:
            note = follow_note(st, config)
        # the picker shows a range the user asked for; a refresh of "all" does not overwrite
        # what they may be typing
        rng = st.get("range") if st.get("mode") == "range" and acted else None
        follow_label, follow_cls = _follow_button(st)
        preset = st.get("span") if st.get("mode") == "follow" else (
            "all" if st.get("follow") else "none")
        classes = [("tl-btn tl-btn-on" if (span is None and preset == "all")
                    or (span is not None and preset == span) else "tl-btn")
                   for _, _, span in PRESETS]
        return (
            fig,
            step.extend if step.extend is not None else nu,
            st,
            header_cells(step.summary, tz) if step.summary is not None else nu,
            live.status(st),
            None,
            note,
            follow_label,
            follow_cls,
            _picker_value(rng[0], tz) if rng else ("" if acted and st.get("mode") == "follow"
                                                   else nu),
            _picker_value(rng[1], tz) if rng else ("" if acted and st.get("mode") == "follow"
                                                   else nu),
            *classes[:n_presets],
        )

    # the browser's zone: plotly shows the time axis in it, so every time on the page uses it
    app.clientside_callback(
        """function(v) { if (v) return window.dash_clientside.no_update;
           try { return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'; }
           catch (e) { return 'UTC'; } }""",
        Output(ids.PAGE_TZ, "data"), Input(ids.PAGE_TZ, "data"))
    app.clientside_callback("function(z) { return z || 'UTC'; }",
                            Output(ids.TZ_LABEL, "children"), Input(ids.PAGE_TZ, "data"))
    app.clientside_callback(_POINT_T_JS, Output(ids.HOVER_T, "data"),
                            Input(ids.GRAPH, "hoverData"), prevent_initial_call=True)
    app.clientside_callback(_POINT_T_JS, Output(ids.CLICK_T, "data"),
                            Input(ids.GRAPH, "clickData"), prevent_initial_call=True)
    app.clientside_callback(_LATENCY_JS % {"graph": ids.GRAPH}, Output(ids.LATENCY, "children"),
                            Input(ids.CURSOR, "data"), prevent_initial_call=True)

    @app.callback(Output(ids.HOVER_PANEL, "children"), Input(ids.HOVER_T, "data"),
                  State(ids.CURSOR, "data"), prevent_initial_call=True)
    def _hover(t_ms, state):
        if t_ms is None:
            raise dash.exceptions.PreventUpdate
        st = state or {}
        return hover_panel(live.at(float(t_ms) / 1000.0), st.get("order"), st.get("tz"))

    @app.callback(Output(ids.WINDOW_PANEL, "children"),
                  Output(ids.SELECTED, "data"),
                  Output(ids.GRAPH, "figure", allow_duplicate=True),
                  Input(ids.CLICK_T, "data"),
                  State(ids.CURSOR, "data"),
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
        return (window_panel(row, info["gpus"], live.history.labeller, st.get("tz"),
                             live.ceilings(row)), start, patch)

    register_screenshots(app, live)

    @app.callback(Output(ids.CLUSTER_PANEL, "style"), Output(ids.CLUSTER_GRAPH, "figure"),
                  Output(ids.HOST, "options"), Output(ids.HOST, "value"),
                  Input(ids.CLUSTER_TICK, "n_intervals"), Input(ids.HOST, "value"),
                  Input(ids.CLUSTER_GRAPH, "clickData"))
    def _cluster(_n, host, click):
        from .cluster import overview_figure

        nu = dash.no_update
        hosts = live.hosts()
        if len(hosts) <= 1:
            return {"display": "none"}, nu, nu, nu
        trig = dash.ctx.triggered_id
        if trig == ids.HOST and host:
            live.select_host(host)
        elif trig == ids.CLUSTER_GRAPH and click and click.get("points"):
            label = re.sub(r"</?b>", "", str(click["points"][0].get("y", "")))
            live.select_host(label.split(" · ")[0])
        live._auto_host()
        fig = overview_figure({h: live.host_history(h) for h in hosts}, selected=live.host)
        return {}, fig, [{"label": h, "value": h} for h in hosts], live.host

    @app.callback(Output(ids.REPORT_DOWNLOAD, "data"), Output(ids.REPORT_MSG, "children"),
                  Input(ids.REPORT_GO, "n_clicks"), State(ids.REPORT_FORMAT, "value"),
                  State(ids.CURSOR, "data"), prevent_initial_call=True)
    def _export(n, fmt, state):
        if not n:
            raise dash.exceptions.PreventUpdate
        try:
            name, data = export_report(live, state or {}, fmt or "html")
        except ValueError as exc:  # ReportError and bad ranges
            return dash.no_update, html.Span(f"✗ {exc}", className="tl-stale")
        return dcc.send_bytes(data, name), f"✓ {name} ({len(data) / 1024:,.0f} KB)"
    return app


def shown_range(live: LiveView, state: dict) -> tuple[float, float]:
    """The range (epoch s) a page whose cursor is ``state`` shows: its zoomed range, the
    followed span up to the live edge, or the whole session.

    Raises:
        ValueError: nothing stored yet.
    """
    if state.get("mode") == "range" and state.get("range"):
        t0, t1 = state["range"]
        return float(t0), float(t1)
    live.history.update()
    span = live.history.span()
    if span is None:
        raise ValueError("nothing stored yet")
    if state.get("span") and state.get("edge") is not None:
        edge = float(state["edge"]) / 1000.0
        return max(span[0], edge - float(state["span"])), edge
    return span


def export_report(live: LiveView, state: dict, fmt: str) -> tuple[str, bytes]:
    """File name and bytes of the imbalance report (``app.report``) of the range the page
    shows, read from the dashboard's store as ``tealeaves report --store`` would.

    Raises:
        ValueError (``ReportError``): nothing in the range, or PDF/PNG without Chromium.
    """
    from ..report.model import build_report, read_store
    from ..report.out import report_bytes

    t0, t1 = shown_range(live, state)
    path = getattr(live.store, "path", None)
    inp = read_store(live.store, t0, t1, progress=False, path=path)
    report = build_report(inp, window_s=live.config.window_s, progress=False)
    stamp = datetime.fromtimestamp(t0, tz=ZoneInfo("UTC")).strftime("%Y%m%d-%H%M%S")
    return f"tealeaves-report-{stamp}.{fmt}", report_bytes(report, fmt)


#: The latest time a view may show (2100-01-01 UTC); the earliest is ``schema.EARLIEST_TS``.
LATEST_TS = 4_102_444_800.0


def _act(live: LiveView, action: dict, state: dict, selected) -> tuple[Step, object]:
    """Carry out one user action (``ACTION`` store); returns the step and the view note (or
    ``dash.no_update``)."""
    c, h = live.config, live.history
    kind = action.get("kind")
    px = action.get("px")
    order_by = state.get("order_by", "index")
    tz = state.get("tz")
    nu = dash.no_update
    if kind == "preset":
        return live.snapshot(float(action["span"]), order_by, selected, tz), nu
    if kind == "all":
        h.update()
        span = h.span()
        if span is None:
            return live.snapshot(None, order_by, selected, tz), nu
        return live.range_step({**state, "preset": "all"}, span[0], span[1], px, follow=True,
                               selected=selected), nu
    if kind == "range":
        try:
            t0, t1 = float(action["t0"]) / 1000.0, float(action["t1"]) / 1000.0
        except (KeyError, TypeError, ValueError):
            t0 = t1 = math.nan
        if not (math.isfinite(t0) and math.isfinite(t1)) or t1 == t0:
            return Step(state=state), "could not read the zoomed range"
        # a zoom out past any plausible time shows 2000-2100 at most
        t0, t1 = (min(max(t, EARLIEST_TS), LATEST_TS) for t in (t0, t1))
        return live.range_step(state, t0, t1, px, follow=False, selected=selected), nu
    if kind == "session":  # "t0,t1" epoch s; an open end is the newest sample
        h.update()
        try:
            a, _, b = str(action.get("value", "")).partition(",")
            t0 = float(a)
            t1 = float(b) if b else (h.span() or (t0, t0 + 1.0))[1]
            if not all(EARLIEST_TS <= t <= LATEST_TS for t in (t0, t1)):
                raise ValueError(a)
        except ValueError:
            return Step(state=state), "could not read the session"
        return live.range_step(state, t0, max(t1, t0 + 1.0), px, follow=not b,
                               selected=selected), nu
    if kind == "go":
        try:
            t0 = parse_time(action.get("from"), state.get("tz"))
            t1 = parse_time(action.get("to"), state.get("tz"))
        except ValueError as exc:
            return Step(state=state), html.Span(f"time range: {exc}", className="tl-stale")
        if not t1 > t0:
            return Step(state=state), html.Span("time range: 'to' must be after 'from'",
                                                className="tl-stale")
        return live.range_step(state, t0, t1, px, follow=False, selected=selected), nu
    if kind == "follow":
        # "want" is what the page showed the user when they clicked (the opposite of it),
        # so a click answered late or twice still does what the button said
        want = action.get("want", not state.get("follow"))
        if not want:
            return Step(state={**state, "follow": False}), nu
        if state.get("follow") and state.get("mode") == "follow":
            return Step(state=state), nu
        if state.get("preset") == "all" and state.get("mode") == "range":
            return _act(live, {"kind": "all", "px": px}, state, selected)
        return live.snapshot(state.get("span") or c.view_s, order_by, selected, tz), nu
    if kind == "order":
        by = "load" if action.get("by") == "load" else "index"
        state = {**state, "order_by": by}
        if state.get("mode") == "follow":
            return live.snapshot(state.get("span"), by, selected, tz), nu
        t0, t1 = state.get("range") or (None, None)
        if t0 is None:
            return live.snapshot(None, by, selected, tz), nu
        return live.range_step(state, t0, t1, state.get("px") or px,
                               follow=bool(state.get("follow")), selected=selected), nu
    return Step(state=state), nu


def _page_state(state: dict, c: DashboardConfig) -> dict:
    """The cursor plus what the page's latency meter reads: ``bin_ms`` (width of a live
    point) and ``lane`` (index of the trace whose newest point it watches)."""
    gpus = state.get("gpus") or [0]
    keys = trace_keys(gpus, bool(state.get("server")))
    return {**state, "bin_ms": state.get("factor", 1) * c.bin_s * 1000,
            "lane": keys.index(("lane", "power_w", gpus[0]))}


def _follow_button(state: dict) -> tuple[str, str]:
    if state.get("follow"):
        return "● following live", "tl-btn tl-follow tl-follow-on"
    return "❚❚ paused · follow live", "tl-btn tl-follow tl-follow-off"


def follow_note(state: dict, c: DashboardConfig) -> str:
    """One line saying what the follow view draws."""
    f = int(state.get("factor", 1))
    ribbon = ("0.1-s phase segments" if state.get("m") is not None
              else f"one bar per {c.window_s:g}-s window")
    return (f"last {fmt_span(float(state.get('span') or c.view_s))}, following · lanes: "
            f"{c.bin_s * f:g}-s bins (mean) · ribbon: {ribbon}")


def cluster_panel() -> html.Div:
    """The cluster overview (shown when the store holds several hosts): the node picker and
    every host's phase and GPUs' load over the last 10 minutes (``app.dashboard.cluster``)."""
    return html.Div(id=ids.CLUSTER_PANEL, className="tl-panel", style={"display": "none"},
                    children=[
        html.Div([html.Span("Cluster: each host's phase and each GPU's load, up to the last "
                            "10 min · the lanes below show node ", className="tl-panel-title"),
                  dcc.Dropdown(id=ids.HOST, clearable=False, searchable=True,
                               className="tl-host-pick"),
                  html.Span(" (pick one, or click its row)", className="tl-muted")],
                 className="tl-cluster-head"),
        dcc.Graph(id=ids.CLUSTER_GRAPH, config={"displaylogo": False, "displayModeBar": False}),
    ])


def toolbar(state: dict, config: DashboardConfig) -> html.Div:
    """Range presets, follow/pause, the time-range picker, band order, view note, latency."""
    label, cls = _follow_button(state)
    span = state.get("span")
    return html.Div(className="tl-toolbar", children=[
        html.Div(className="tl-group", children=[
            html.Span("show", className="tl-group-label"),
            *[html.Button(text, id=pid, n_clicks=0,
                          className="tl-btn tl-btn-on" if s == span else "tl-btn",
                          title=("the whole session" if s is None else
                                 f"the last {text}, following live"))
              for pid, text, s in PRESETS],
            html.Button(label, id=ids.FOLLOW, n_clicks=0, className=cls,
                        title="pause or resume following the newest data"),
        ]),
        html.Div(className="tl-group", children=[
            html.Span("from", className="tl-group-label"),
            dcc.Input(id=ids.RANGE_FROM, type="text", debounce=True, className="tl-time",
                      placeholder="YYYY-MM-DD HH:MM:SS"),
            html.Span("to", className="tl-group-label"),
            dcc.Input(id=ids.RANGE_TO, type="text", debounce=True, className="tl-time",
                      placeholder="YYYY-MM-DD HH:MM:SS"),
            html.Span("UTC", id=ids.TZ_LABEL, className="tl-group-label",
                      title="times on this page are in the browser's time zone"),
            html.Button("show range", id=ids.RANGE_GO, n_clicks=0, className="tl-btn"),
        ]),
        html.Div(className="tl-group", children=[
            html.Span("session", className="tl-group-label",
                      title="runs of samples between pauses of over a minute"),
            dcc.Dropdown(id=ids.SESSION, options=[], clearable=False, searchable=False,
                         placeholder="one session", className="tl-session"),
        ]),
        html.Div(className="tl-group", children=[
            html.Span("report", className="tl-group-label"),
            dcc.Dropdown(id=ids.REPORT_FORMAT, value="html", clearable=False, searchable=False,
                         options=[{"label": f, "value": f}
                                  for f in ("html", "pdf", "png", "csv", "json")],
                         className="tl-report-format"),
            html.Button("export this range", id=ids.REPORT_GO, n_clicks=0, className="tl-btn",
                        title="an imbalance report of the range on screen (the same as "
                              "`tealeaves report --store ... --from ... --to ...`)"),
            dcc.Loading(html.Span(id=ids.REPORT_MSG, className="tl-muted"), type="dot"),
            dcc.Download(id=ids.REPORT_DOWNLOAD),
        ]),
        html.Div(className="tl-group", children=[
            html.Span("GPU bands", className="tl-group-label"),
            dcc.RadioItems(id=ids.ORDER, value=state.get("order_by", "index"), inline=True,
                           options=[{"label": "by index", "value": "index"},
                                    {"label": "busiest first", "value": "load"}],
                           className="tl-radio"),
        ]),
        html.Div(className="tl-viewline", children=[
            html.Span(follow_note(state, config) if state.get("span") else "",
                      id=ids.VIEW_NOTE, className="tl-view-note"),
            html.Span("sample → screen: measuring…", id=ids.LATENCY, className="tl-latency"),
        ]),
    ])
