"""The page's cursor: what one browser page shows and how far it has read (``Cursor``).

The cursor lives in the page (a ``dcc.Store``, so JSON: lists, not tuples) and comes back with
every request; ``LiveView`` answers from it and returns the next one.  It is a ``TypedDict``, so
the JSON the page holds and the type the server code reads are the same object.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from tealeaves.app.dashboard.config import DashboardConfig
from tealeaves.app.figures import trace_keys


class Cursor(TypedDict, total=False):
    """One page's cursor (every key optional: a page's first request has none).

    View:
        mode: ``"follow"`` (the last ``span`` seconds, appended live) or ``"range"`` (a zoom,
            "all", a typed range or a session).
        follow: following the live edge (in range mode: the whole session, refreshed).
        span: seconds shown while following; None: the whole session.
        preset: the preset button lit: a span in seconds, ``"all"`` or None.
        range: ``[t0, t1]`` epoch seconds shown in range mode, else None.
        px: plot width in pixels the range was drawn for (None: unknown).
        view: the view note of a range (what it draws).
        tz: IANA name of the page's time zone (the browser's).
        host: the node shown when the store holds several (None: the only one).
        rev: the figure's ``uirevision``.
        drawn: when the range was drawn (browser-comparable epoch ms).
        ribbon: what the ribbon draws: ``"segments"`` (the 0.1-s phase segments),
            ``"windows"`` (a bar per window) or ``"bars"`` (several windows per bar).
        paused_by: why a followed view stopped following: ``"button"`` (pause) or
            ``"select"`` (a click on a window while following: it stays on screen).
    Figure layout:
        gpus: GPU indices drawn, in lane order.
        server: the figure has the server lane.
        order: GPU order of the load bands, top first; order_by: ``"index"`` or ``"load"``.
        factor: 0.1-s bins per live point.
        gen: the history generation drawn (a rebuild starts a new one).
    Read position (follow mode):
        k: next bin index (0.1-s bins, a multiple of ``factor``); j: next window index;
        s: next server cell (None without a server lane); m: next 0.1-s segment slot (None:
        the ribbon draws windows).
        hot_tail: hot sets of the last windows (lists of GPUs; ``[]`` when not flagged).
        shots_on: hashes of the screenshots marked in the followed span.
    Latency and freshness:
        edge: x of the newest live bin's right edge (epoch ms); sent: server clock when the
        answer was made (ms); asked: browser clock when it was asked (ms); bin_ms: width of a
        live point (ms); lane: index of the trace the latency meter watches; ts_last /
        mono_last: wall and monotonic stamps of the newest sample (s); cursor: store rows read.
    Actions:
        act_n: the ``n`` of the last user action carried out (an action is done once).
    """

    mode: Literal["follow", "range"]
    follow: bool
    span: float | None
    preset: float | str | None
    range: list[float] | None
    px: float | None
    view: str
    tz: str
    host: str | None
    rev: str
    drawn: float
    paused_by: str
    ribbon: str
    gpus: list[int]
    server: bool
    order: list[int]
    order_by: Literal["index", "load"]
    factor: int
    gen: int
    k: int | None
    j: int | None
    s: int | None
    m: int | None
    hot_tail: list[list[int]]
    shots_on: list[str]
    edge: float | None
    sent: float
    asked: float | None
    bin_ms: float
    lane: int
    ts_last: float | None
    mono_last: float | None
    cursor: int
    act_n: int | None


def page_state(state: Cursor, c: DashboardConfig) -> Cursor:
    """The cursor plus what the page's latency meter reads: ``bin_ms`` (width of a live
    point) and ``lane`` (index of the trace whose newest point it watches)."""
    gpus = state.get("gpus") or [0]
    keys = trace_keys(gpus, bool(state.get("server")))
    return {**state, "bin_ms": state.get("factor", 1) * c.bin_s * 1000,
            "lane": keys.index(("lane", "power_w", gpus[0]))}


#: One user action, as the page's action script sends it (``ACTION`` store; ``actions.act``
#: carries it out): ``kind`` is ``"preset"`` (``span`` s), ``"all"``, ``"range"`` (``t0``,
#: ``t1`` epoch ms), ``"session"`` (``value`` ``"t0,t1"`` epoch s, open end: the newest),
#: ``"go"`` (typed ``from``/``to`` text), ``"follow"`` (``want``: follow or pause) or
#: ``"order"`` (``by``: ``"index"``/``"load"``); a ``"follow"`` pause carries ``why``
#: (``"select"``: a click on a window while following); every action carries ``px`` (plot width) and
#: ``n`` (its browser-clock stamp, ms: an action is done once).
Action = TypedDict("Action", {
    "kind": Literal["preset", "all", "range", "session", "go", "follow", "order"],
    "span": float, "t0": float, "t1": float, "value": str, "from": str, "to": str,
    "want": bool, "why": str, "by": str, "px": float | None, "n": float,
}, total=False)
