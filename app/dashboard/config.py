"""The dashboard's settings (``DashboardConfig``) and the constants every part of it shares:
range presets, the live loop's limits, the latest time a view may show."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tealeaves.app.dashboard import ids
from tealeaves.classifier.windows import DEFAULT_WINDOW_S

#: An update request unanswered this long (ms) is given up and a new one sent.
STUCK_MS = 10_000


#: A followed page asks for its next update no sooner than this many times its last
#: update's cost (asking to drawn) after its last redraw: on a loaded machine pages ask less
#: often instead of queueing behind each other (``assets/live.js`` ``tick``; bench speed).
PACE = 0.5

#: A page that does not follow the live edge (paused, a zoomed range) asks this often (ms):
#: only its status line can change.
IDLE_TICK_MS = 1000


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


#: The served dashboard reads new samples into its history this often (s), beside the pages'
#: ticks (``LiveView.start_updates``); the history's own ``min_update_s`` is the same 0.1 s.
UPDATE_PERIOD_S = 0.1


#: ... and stops doing so when no page has ticked for this long (s): nobody is watching.
UPDATER_IDLE_S = 5.0


@dataclass
class DashboardConfig:
    """Settings of one dashboard.

    Attributes:
        source: one line naming where samples come from ("live NVML, 2 GPUs",
            "replay of h200x2_workload_v1.parquet"), shown in the status line.
        view_s: seconds shown when the page opens (follow mode).
        interval_ms: how often (ms) a page's interval fires; a followed page asks for an
            update on the first firing ``PACE`` times its last update's cost after its last
            redraw (each firing costs the page a store update: 100 ms burnt ~15 % of a core
            per page on a two-core machine, bench speed).
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
        replay: for a replay, a callable giving what the page says about its times
            (``timefmt.replay_text``): a dict with ``file`` (name), ``t0`` / ``t1`` (the
            recorded first and last sample, epoch s) and ``offset`` (seconds added to the
            recorded stamps in the current pass, NaN before the replay starts); None when
            the samples are not a replay.
    """

    source: str = "sample store"
    view_s: float = 60.0
    interval_ms: int = 200
    bin_s: float = 0.1
    window_s: float = DEFAULT_WINDOW_S
    hold_s: float = 0.35
    height: int | None = None
    title: str = "tealeaves"
    health: Callable[[], dict] | None = field(default=None, repr=False)
    server: str = ""
    server_lag_s: float = 1.5
    store_temporary: bool = False
    replay: Callable[[], dict] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.view_s > 0 or not self.bin_s > 0 or not self.window_s > 0:
            raise ValueError("view_s, bin_s and window_s must be positive")
        if not self.interval_ms > 0:
            raise ValueError(f"interval_ms must be positive, got {self.interval_ms}")
        ratio = self.window_s / self.bin_s
        if abs(ratio - round(ratio)) > 1e-9:
            raise ValueError("window_s must be a whole multiple of bin_s")


#: The latest time a view may show (2100-01-01 UTC); the earliest is ``schema.EARLIEST_TS``.
LATEST_TS = 4_102_444_800.0
