"""What the live view sends into a page's figure besides whole figures: the range view's
``dash.Patch`` (``range_patch``), the selected window's outline, the screenshots' marks
(``mark_shots``, ``shots_patch``), the figure's fixed shapes and axis names, and the range
view's one-line note (``view_note``)."""

from __future__ import annotations

import copy
import functools
import itertools
import math
from datetime import datetime

import dash
import numpy as np
import pandas as pd

from tealeaves.app.dashboard.config import DashboardConfig
from tealeaves.app.dashboard.cursor import Cursor
from tealeaves.app.dashboard.live_step import RangeView
from tealeaves.app.dashboard.timefmt import page_zone
from tealeaves.app.figures import (
    band_axis,
    base_shapes,
    build_figure,
    fmt_span,
    range_update,
    rows,
    shot_lines,
    shot_points,
    shots_between,
    trace_keys,
)
from tealeaves.app.figures.series.downsample import TraceData


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
        from tealeaves.app.figures import rows

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


def fixed_shapes(state: Cursor) -> list[dict]:
    """The live figure's own shapes for a page whose cursor is ``state`` (kept when the
    screenshot lines are replaced); a fresh copy, made once per GPU list and lane set."""
    shapes = _fixed_shapes(tuple(state.get("gpus") or []), bool(state.get("server")))
    return copy.deepcopy(list(shapes))


@functools.lru_cache(maxsize=64)
def _fixed_shapes(gpus: tuple[int, ...], server: bool) -> tuple[dict, ...]:
    # building the skeleton figure costs about 0.1 s for eight GPUs: once, not per request
    skeleton = build_figure(pd.DataFrame(), pd.DataFrame(), list(gpus),
                            server=pd.DataFrame(columns=["pf_batches"]) if server else None)
    return tuple(base_shapes(skeleton, list(gpus), rows(server)))


def mark_shots(patch: dash.Patch, shots: pd.DataFrame | None, state: Cursor | None) -> dash.Patch:
    """Put the screenshot markers of ``shots`` (``SampleStore.screenshots``) into ``patch``
    of the page's figure (cursor ``state``): the screenshot trace's points and the figure's
    shapes (its own and one line per screenshot).  A followed view marks only the screenshots
    of its span (its x axis autoranges, so one outside would stretch it); any other view
    (a zoom, "all", a typed range, a session) marks every screenshot: the ones outside its
    range are simply off screen.  Nothing when the figure has no screenshot trace."""
    st = state or {}
    keys = trace_keys(st.get("gpus") or [], bool(st.get("server")))
    if ("shots",) not in keys:
        return patch
    if st.get("mode") == "follow" and st.get("span") and st.get("edge") is not None:
        edge = float(st["edge"]) / 1000.0
        shots = shots_between(shots, edge - float(st["span"]), edge)
    x, y, text, sha = shot_points(shots)
    i = keys.index(("shots",))
    patch["data"][i]["x"] = x
    patch["data"][i]["y"] = y
    patch["data"][i]["text"] = text
    patch["data"][i]["customdata"] = sha
    patch["layout"]["shapes"] = fixed_shapes(st) + shot_lines(shots)
    return patch


def shots_patch(shots: pd.DataFrame | None, state: Cursor | None) -> dash.Patch:
    """A patch of the page's figure (cursor ``state``) marking ``shots`` (``mark_shots``)."""
    return mark_shots(dash.Patch(), shots, state)
