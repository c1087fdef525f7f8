"""The live view: ``LiveView`` turns the shared ``History`` into whole figures, ``extendData``
increments (follow mode) and ``Patch`` answers (range mode), and answers hover and click.

A page is in one of two modes (its cursor's ``mode``, ``cursor.Cursor``): **follow** shows the
last ``span`` seconds and appends new bins with ``extendData`` (spans longer than
``MAX_LIVE_POINTS`` bins use coarser live bins); **range** (a zoom, "all", the time-range picker
or the session picker) gets a ``dash.Patch`` of that range downsampled to the plot's width.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
import time
from dataclasses import replace

import numpy as np
import pandas as pd

from tealeaves.app.dashboard.config import (
    ALL_REFRESH_S,
    UPDATE_PERIOD_S,
    UPDATER_IDLE_S,
    DashboardConfig,
)
from tealeaves.app.dashboard.cursor import Cursor
from tealeaves.app.dashboard.explain import row_hot_set, window_ceilings
from tealeaves.app.dashboard.history import History
from tealeaves.app.dashboard.live_patch import (
    selected_trace,
)
from tealeaves.app.dashboard.live_range import RangeMode
from tealeaves.app.dashboard.live_step import (
    FollowEnds,
    Step,
    coarse_bins,
    live_factor,
    now_ms,
)
from tealeaves.app.dashboard.panels import status_line
from tealeaves.app.dashboard.timefmt import age_s, page_zone
from tealeaves.app.figures import (
    MIXED_PHASES,
    HeaderSummary,
    bin_index,
    build_figure,
    extend_data,
    extend_point_count,
    header_summary,
    heat_blanks,
    hot_counts,
    mixed_with,
    shots_between,
    trace_keys,
)
from tealeaves.app.figures.series.downsample import (
    load_order,
)
from tealeaves.classifier.summary import window_hot_sets
from tealeaves.data.store import HostView, SampleStore, StoreError

#: A store counts as being written ("now" in the session picker) while its newest sample is
#: at most this old and new rows arrived within this many seconds.
WRITING_AGE_S = 5.0


class LiveView(RangeMode):
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
        self._updater: threading.Thread | None = None
        self._stop_updates = threading.Event()
        self._ticked_at = -math.inf
        self._grew: dict[int, tuple[int, float]] = {}  # history id: (cursor, when it moved)

    # -- keeping the history current -----------------------------------------------------
    def start_updates(self, period_s: float = UPDATE_PERIOD_S) -> None:
        """Keep the shown history current from a background thread, every ``period_s``
        seconds while a page ticked in the last ``UPDATER_IDLE_S`` seconds.

        A followed page's tick then only reads: the store is read, binned and labelled
        beside the page's request and the browser's redraw rather than inside the request
        (a window's classifier pass is tens of ms that every tick would otherwise wait for;
        docs/benchmarks.md).  Without it (``LiveView`` used directly) each tick updates the
        history itself.  Idempotent; ``stop_updates`` ends the thread.
        """
        if self._updater is not None and self._updater.is_alive():
            return
        self._stop_updates.clear()

        def run() -> None:
            while not self._stop_updates.wait(period_s):
                if time.monotonic() - self._ticked_at > UPDATER_IDLE_S:
                    continue  # nobody is watching: the next tick catches up
                try:
                    self.history.update(wait=False)
                except Exception:
                    # the thread ends: the pages' ticks update again themselves, and the
                    # error reaches them (and the page) as it did before the thread
                    logging.getLogger(__name__).exception(
                        "the dashboard's history update failed; pages update it themselves")
                    return
        self._updater = threading.Thread(target=run, name="tealeaves-history", daemon=True)
        self._updater.start()

    def stop_updates(self) -> None:
        """End the thread ``start_updates`` started (waits for it; idempotent)."""
        self._stop_updates.set()
        if self._updater is not None:
            self._updater.join(timeout=10)
            if not self._updater.is_alive():  # (a long update still running keeps its name)
                self._updater = None

    def _tick_update(self) -> None:
        """The history update of a followed page's tick: none while the background thread
        keeps it current (and was told a page is watching), else here."""
        self._ticked_at = time.monotonic()
        if self._updater is None or not self._updater.is_alive():
            self.history.update()

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

    def auto_host(self) -> None:
        """With several hosts in the store and none chosen yet, show the first."""
        if self.host is None:
            hosts = self.hosts()
            if len(hosts) > 1:
                self.select_host(hosts[0])

    # -- is the store being written? ----------------------------------------------------
    def being_written(self) -> bool:
        """Whether the store is being written now: its newest sample is at most
        ``WRITING_AGE_S`` old (``timefmt.age_s``) and the history read new rows in the last
        ``WRITING_AGE_S`` seconds (a store nobody writes, however fresh its last sample, is
        not "now").  Reads new rows first (``History.update``)."""
        h = self.history
        try:
            h.update(wait=False)
        except (sqlite3.Error, StoreError):
            return False
        now = time.monotonic()
        seen = self._grew.get(id(h))
        if seen is None or h.cursor != seen[0]:
            # the first look at a history counts as growth only when it was just read
            self._grew[id(h)] = (h.cursor, now if seen is not None else -math.inf)
            seen = self._grew[id(h)]
        age = age_s(h.t_newest, h.mono_newest)
        return (age is not None and age <= WRITING_AGE_S
                and now - seen[1] <= WRITING_AGE_S)

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

    def _meta(self, state: Cursor) -> Cursor:
        h = self.history
        return {**state, "ts_last": h.t_newest, "mono_last": h.mono_newest,
                "cursor": h.cursor, "sent": now_ms()}

    # -- follow mode ---------------------------------------------------------------------
    def snapshot(self, span: float | None = None, order_by: str = "index",
                 selected: float | None = None, tz: str | None = None) -> Step:
        """A whole new figure following the live edge: the last ``span`` seconds (default
        ``config.view_s``) and a fresh cursor; ``tz`` is the page's time zone (IANA name,
        default UTC), named on the time axis."""
        self.auto_host()
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
        ends = self._ends(f)
        if ends is None:  # the history is being rebuilt: nothing labelled to draw yet
            ends = FollowEnds(h.k_next // f * f, h.j_next or 0, None, None,
                              h.k_next // f * f * c.bin_s)
        k_end, j_end, m_end, s_end = ends.k, ends.j, ends.m, ends.s
        # every row starts at one left edge, a window boundary (``FollowEnds.left``)
        t_left = ends.left(span, c.window_s)
        k_first = (bin_index(h.t_first, c.bin_s) // f) * f
        k_start = max(k_first, math.ceil(t_left / c.bin_s / f - 1e-6) * f)
        bins = coarse_bins(h.bins(k_start, k_end, dense=True), f)
        j_start = max(math.ceil(h.t_first / c.window_s - 1e-9),
                      round(t_left / c.window_s))
        windows = h.windows(j_start, j_end)
        order = load_order(windows, gpus, order_by)
        server = h.cells(j_start, s_end) if h.has_server and s_end is not None else None
        shots, shots_on = self._follow_shots(ends.t, span)
        slots = None
        if m_end is not None:
            hop = h.hop_s
            per = round(c.window_s / hop)
            slots = h.slots(j_start * per, m_end)
        fig = build_figure(bins, windows, gpus, bin_s=c.bin_s * f, window_s=c.window_s,
                           height=c.height, uirevision=rev, server=server, order=order,
                           shots=shots, time_zone=tz, slots=slots, hop_s=h.hop_s or 0.1,
                           labelling=ends.labelling(c.window_s, h.hop_s or 0.1, t_left))
        if selected is not None:
            sel = selected_trace(selected, c.window_s)
            # plain lists: plotly sends numpy arrays as typed-array specs, which extendData
            # cannot extend (the page's "cannot extend ... attribute: x")
            fig.data[trace_keys(gpus, server is not None).index(("selected",))].update(
                x=[float(v) * 1000.0 for v in sel.x], y=[float(v) for v in sel.y])
        tail = self._tail(windows, [])
        state = {**base, "k": k_end, "j": j_end, "m": m_end, "s": s_end,
                 "ribbon": "segments" if m_end is not None else "windows",
                 "server": server is not None,
                 "order": order, "edge": ends.t * 1000.0, "hot_tail": tail,
                 "shots_on": shots_on}
        return Step(state=self._meta(state), figure=fig, summary=self._summary(windows, tail))

    def _in_view(self, t_left: float, m_end: int | None, j_end: int
                 ) -> tuple[dict[str, int], int, dict[str, int], int]:
        """What a followed view whose left edge is ``t_left`` (epoch s, a window boundary,
        ``FollowEnds.left``) holds of the traces trimmed by count once extended: ``({phase:
        ribbon bars}, load heatmap columns, {phase: mixed windows striped with it},
        windows)``.  The bars are its segment slots (``m_end``: slot cursor) or else its
        windows (``j_end``: window cursor); the columns are its windows and the blank columns
        between them."""
        h = self.history
        w = h.windows(round(t_left / self.config.window_s), j_end)
        if m_end is not None and h.hop_s:
            _, phases = h.slots(math.ceil(t_left / h.hop_s - 1e-6), m_end)
        else:
            phases = w["phase"].to_numpy() if len(w) else np.zeros(0, dtype=object)
        names, counts = np.unique(np.asarray(phases, dtype=object).astype(str),
                                  return_counts=True)
        heat = len(w) + heat_blanks(w.index.to_numpy()) if len(w) else 0
        mixed = mixed_with(w)
        striped = {p: int((mixed == p).sum()) for p in MIXED_PHASES}
        return dict(zip(names.tolist(), counts.tolist())), heat, striped, len(w)

    def _ends(self, factor: int) -> FollowEnds | None:
        """Where a followed view with live bins of ``factor`` 0.1-s bins ends: its edge is the
        lanes' (the newest complete live bin: the samples are on screen as soon as binned);
        the windows, segment slots (when the ribbon draws them) and server cells each end at
        their own cursor, at most that edge (the windows are labelled a little after their
        bins complete, the segments settle about a window later still; the gap is drawn as a
        "labelling…" mark, ``FollowEnds.labelling``).  Each cursor is read once (the update
        thread moves them meanwhile).  None while the history is being rebuilt (no cursor)."""
        c, h = self.config, self.history
        k_next, j_next, s_next = h.k_next, h.j_next, h.s_next
        if k_next is None or j_next is None:
            return None
        m_next = self._slot_cursor(factor)
        hop = h.hop_s or 0.1
        k = (k_next // factor) * factor
        t = k * c.bin_s
        eps = 1e-6

        def upto(step: float) -> int:
            return math.floor(t / step + eps)

        return FollowEnds(k, min(j_next, upto(c.window_s)),
                          None if m_next is None else min(m_next, upto(hop)),
                          None if s_next is None else min(s_next, upto(c.window_s)), t)

    def _slot_cursor(self, factor: int) -> int | None:
        """The history's next segment slot when a followed view with live bins of ``factor``
        0.1-s bins draws the ribbon from segments (factor 1 and segments made), else None."""
        h = self.history
        if factor != 1 or h.hop_s is None or h.m_next is None:
            return None
        return int(h.m_next)

    def _resnap(self, state: Cursor) -> Step:
        """A new followed figure for a page whose cursor is ``state`` (same span, band order
        and time zone)."""
        return self.snapshot(state.get("span"), state.get("order_by", "index"),
                             tz=state.get("tz"))

    def redraw(self, state: Cursor, selected: float | None = None) -> Step:
        """A whole new figure of what the page whose cursor is ``state`` shows (its time
        zone changed: the axis title and every time on the page follow it)."""
        if state.get("mode") == "range" and state.get("range"):
            t0, t1 = state["range"]
            return self.range_step(state, float(t0), float(t1), state.get("px"),
                                   follow=bool(state.get("follow")), selected=selected,
                                   rebuild=True)
        return self.snapshot(state.get("span"), state.get("order_by", "index"), selected,
                             tz=state.get("tz"))

    def advance(self, state: Cursor | None) -> Step:
        """Answer one tick of a page whose cursor is ``state``.

        Returns a ``Step`` with an ``extend`` payload for new complete bins/windows, a new
        ``figure`` when a rebuild is due, a ``patch`` when following the whole session, or
        just a new ``state``.
        """
        self.auto_host()
        c, h = self.config, self.history
        if not state:
            return self.snapshot()
        if state.get("host") != self.host:  # another node was chosen: draw it
            return self.redraw({**state, "host": self.host})
        self._tick_update()
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
            if rebuild or now_ms() - float(state.get("drawn") or 0) > ALL_REFRESH_S * 1000:
                span = h.span()
                if span is None:
                    return Step(state=self._meta(state))
                return self.range_step(state, span[0], span[1], state.get("px"),
                                       follow=True, rebuild=rebuild)
            return Step(state=self._meta(state))
        if rebuild:
            return self._resnap(state)
        f, k, j = int(state["factor"]), int(state["k"]), int(state["j"])
        ends = self._ends(f)
        if ends is None:  # the history is being rebuilt: draw it anew
            return self._resnap(state)
        k_end, j_end = ends.k, ends.j
        if (k_end - k) * c.bin_s > state["span"]:
            return self._resnap(state)
        edge_s = max(ends.t, float(state.get("edge") or 0.0) / 1000.0)
        if self._follow_shots(edge_s, state["span"])[1] != list(
                state.get("shots_on") or []):  # a screenshot came into view or left it
            return self._resnap(state)
        m = state.get("m")
        m_now = ends.m
        if m is None and m_now is not None:  # the segments began after the page was drawn
            return self._resnap(state)
        m_end = None if m is None else max(int(m), m_now if m_now is not None else int(m))
        if k_end <= k and j_end <= j and (m is None or m_end <= int(m)):
            return Step(state=self._meta(state))
        return self._extend(state, ends, f, edge_s, m_end)

    def _extend(self, state: Cursor, ends: FollowEnds, f: int, edge_s: float,
                m_end: int | None) -> Step:
        """``advance``'s answer when new bins, windows or slots are due: their ``extendData``
        payload, the cursor moved to ``ends`` and the header's summary of the new windows."""
        c, h = self.config, self.history
        k, j, m = int(state["k"]), int(state["j"]), state.get("m")
        k_end, j_end, s_end = ends.k, ends.j, ends.s
        bins = coarse_bins(h.bins(k, k_end, dense=True), f)
        windows = h.windows(j, j_end)
        slots = None if m is None else h.slots(int(m), m_end)
        s = state.get("s")
        cells = None
        if h.has_server and s_end is not None:
            s = s_end if s is None else int(s)
            cells = h.cells(s, s_end)
            s = max(s, s_end)
        tail = self._tail(windows, state.get("hot_tail", []))
        new_state = {**state, "k": max(k, k_end), "j": max(j, j_end), "m": m_end, "s": s,
                     "hot_tail": tail, "edge": edge_s * 1000.0}
        new_k = max(k, k_end)
        t_left = FollowEnds(new_k, j_end, m_end, s_end, new_k * c.bin_s).left(
            float(state["span"]), c.window_s)
        phases_in_view, heat_in_view, mixed_in_view, n_windows = self._in_view(t_left, m_end,
                                                                                j_end)
        now_ends = FollowEnds(new_k, max(j, j_end), m_end, s, new_k * c.bin_s)
        k_left = math.ceil(t_left / c.bin_s / f - 1e-6) * f
        payload = extend_data(bins, windows, state["gpus"], bin_s=c.bin_s * f,
                              window_s=c.window_s, view_s=state["span"], server=cells,
                              order=state.get("order"), slots=slots, hop_s=h.hop_s or 0.1,
                              phases_in_view=phases_in_view, after_j=j,
                              heat_in_view=heat_in_view, mixed_in_view=mixed_in_view,
                              windows_in_view=n_windows, lanes_in_view=(new_k - k_left) // f,
                              labelling=now_ends.labelling(c.window_s, h.hop_s or 0.1, t_left))
        return Step(state=self._meta(new_state),
                    extend=payload if extend_point_count(payload) else None,
                    summary=self._summary(windows, tail) if len(windows) else None)

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

    def status(self, state: Cursor | None) -> list:
        """The status line (``panels.status_line``) for a page whose cursor is ``state``."""
        health = self.config.health() if self.config.health is not None else None
        return status_line(self.config, self.history, state, health,
                           self.host, len(self.hosts()) if self.host is not None else 0)
