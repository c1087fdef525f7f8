"""The live view's range mode (``RangeMode``, a part of ``live.LiveView``): a range of the
history drawn for a plot's width (``range_view``), the answer to a range request
(``range_step``: a ``Patch`` or a whole figure), the header's summary of a range and a whole
figure of a range view."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tealeaves.app.dashboard.config import LATEST_TS
from tealeaves.app.dashboard.cursor import Cursor
from tealeaves.app.dashboard.live_patch import mark_shots, range_patch, selected_trace, view_note
from tealeaves.app.dashboard.live_step import RangeView, Step, now_ms
from tealeaves.app.dashboard.timefmt import page_zone
from tealeaves.app.figures import (
    LABELLING_ROWS,
    HeaderSummary,
    bin_index,
    build_figure,
    range_summary,
    range_update,
)
from tealeaves.app.figures.series.downsample import (
    TraceData,
    bucket_factor,
    lanes_from_bins,
    lanes_from_samples,
    load_order,
    point_budget,
    server_traces,
    window_traces,
)
from tealeaves.data.schema import EARLIEST_TS


class RangeMode:
    """``LiveView``'s range-mode methods; they read the view's ``config``, ``history``,
    ``store``, ``host`` and its helpers (``_gpus``, ``_meta``, ``_summary``, ``_tail``,
    ``shots``)."""

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
        for r in LABELLING_ROWS:  # a range view is drawn from what is labelled: no marks
            traces[("labelling", r)] = TraceData(np.zeros(0), np.zeros(0), text=[])
        empty = windows.empty and not any(
            np.isfinite(td.y).any() for k, td in traces.items() if k[0] == "lane")
        return RangeView(t0, t1, traces, order, raw, n_out, factor, empty, fine)

    def range_step(self, state: Cursor, t0: float, t1: float, px: float | None,
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
                     "ribbon": ("segments" if v.segments else "windows" if v.factor == 1
                                else "bars"),
                     "drawn": now_ms(),
                     "k": h.k_next, "j": h.j_next, "s": h.s_next}
        summary = None
        if follow:  # following the whole session: the header follows the newest windows
            w = h.windows(h.j_next - self.HOT_TAIL, h.j_next) if h.j_next is not None else None
            if w is not None and len(w):
                summary = self._summary(w, self._tail(w, []))
        else:  # a range held still: the header describes it
            summary = self.range_summary(v.t0, v.t1)
        if rebuild or list(state.get("gpus") or []) != gpus or bool(state.get("server")) != server:
            self._rev += 1
            fig = self.range_figure(v, height=c.height, uirevision=f"range-{self._rev}",
                                    shots=self.shots(), tz=state.get("tz"))
            return Step(state=self._meta(new_state), figure=fig, summary=summary)
        patch = mark_shots(range_patch(v, gpus, server), self.shots(), new_state)
        return Step(state=self._meta(new_state), patch=patch, summary=summary)

    def range_summary(self, t0: float, t1: float) -> HeaderSummary:
        """The header's summary of ``[t0, t1]`` (epoch s, either order; clamped to 2000-2100,
        a non-finite bound read as 2000): the history's windows there
        (``figures.range_summary``)."""
        t0, t1 = sorted(min(max(float(t), EARLIEST_TS), LATEST_TS)
                        if math.isfinite(float(t)) else EARLIEST_TS for t in (t0, t1))
        w = self.config.window_s
        return range_summary(self.history.windows(bin_index(t0, w) - 1, bin_index(t1, w) + 2),
                             t0, t1)

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
