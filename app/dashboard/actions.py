"""What a user's action does to a page (``act``: presets, zoom, "all", typed range, session,
follow/pause, band order), the range a page shows and the report of that range."""

from __future__ import annotations

import math
from datetime import datetime
from zoneinfo import ZoneInfo

import dash
from dash import html

from tealeaves.app.dashboard.config import LATEST_TS
from tealeaves.app.dashboard.cursor import Action, Cursor
from tealeaves.app.dashboard.live import LiveView
from tealeaves.app.dashboard.live_step import Step
from tealeaves.app.dashboard.panels import follow_note
from tealeaves.app.dashboard.timefmt import parse_time
from tealeaves.data.schema import EARLIEST_TS


def shown_range(live: LiveView, state: Cursor) -> tuple[float, float]:
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


def export_report(live: LiveView, state: Cursor, fmt: str) -> tuple[str, bytes]:
    """File name and bytes of the imbalance report (``app.report``) of the range the page
    shows, read from the dashboard's store as ``tealeaves report --store`` would.

    Raises:
        ValueError (``ReportError``): nothing in the range, or PDF/PNG without Chromium.
    """
    from tealeaves.app.report.model import build_report, read_store
    from tealeaves.app.report.out import report_bytes

    t0, t1 = shown_range(live, state)
    path = getattr(live.store, "path", None)
    inp = read_store(live.store, t0, t1, progress=False, path=path)
    report = build_report(inp, window_s=live.config.window_s, progress=False)
    stamp = datetime.fromtimestamp(t0, tz=ZoneInfo("UTC")).strftime("%Y%m%d-%H%M%S")
    return f"tealeaves-report-{stamp}.{fmt}", report_bytes(report, fmt)


def act(live: LiveView, action: Action, state: Cursor, selected) -> tuple[Step, object]:
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
        if not want:  # paused: the header describes what stays on screen
            st = {**state, "follow": False, "paused_by": action.get("why") or "button"}
            try:
                t0, t1 = shown_range(live, st)
            except ValueError:
                return Step(state=st), nu
            note = follow_note(st, c) if st.get("mode") == "follow" else nu
            return Step(state=st, summary=live.range_summary(t0, t1)), note
        if state.get("follow") and state.get("mode") == "follow":
            return Step(state=state), nu
        if state.get("preset") == "all" and state.get("mode") == "range":
            return act(live, {"kind": "all", "px": px}, state, selected)
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
