"""Component ids of the dashboard, in one place so layout, callbacks and tests agree.

Every id is a plain string; the browser test finds elements with ``#<id>``.
"""

from __future__ import annotations

#: The single live figure: phase ribbon, per-GPU lanes and imbalance strip on one time axis.
GRAPH = "tl-graph"
#: ``dcc.Interval`` that drives live updates.
TICK = "tl-tick"
#: ``dcc.Store`` holding the live cursor (what the page already shows).
CURSOR = "tl-cursor"
#: ``dcc.Store`` the page bumps to ask for an update, only when none is in flight.
PULL = "tl-pull"
#: ``dcc.Store``: when the page's update request in flight was sent (ms), or null.
BUSY = "tl-busy"

#: Header cells.
HEADER = "tl-header"
PHASE = "tl-phase"
IMBALANCE = "tl-imbalance"
HOT_GPU = "tl-hot-gpu"
STRAGGLER = "tl-straggler"
#: The header cell naming what the header describes (newest window or the range on screen).
HEADER_RANGE = "tl-header-range"
#: The header cell naming what the verdicts stood on (counters and sampling rate).
INPUTS = "tl-inputs"
#: The hover panel's line of the window's phase shares and verdict.
HOVER_SHARES = "tl-hover-shares"
HOVER_RIBBON = "tl-hover-ribbon"
HOVER_LABELLING = "tl-hover-labelling"
HOVER_WHY = "tl-hover-why"
#: The small source / sample-count / last-sample-age line.
STATUS = "tl-status"
#: The status line's source piece when it is a replay: when it was recorded, the shift.
REPLAY = "tl-replay"
#: The phase-colour legend.
LEGEND = "tl-legend"
#: The server-signals part of the status line (log offset found, URL scraped).
SERVER = "tl-server"

#: Toolbar: range presets, follow/pause, the time-range picker, the load bands' order.
PRESET_10S = "tl-preset-10s"
PRESET_1MIN = "tl-preset-1min"
PRESET_10MIN = "tl-preset-10min"
PRESET_ALL = "tl-preset-all"
FOLLOW = "tl-follow"
RANGE_FROM = "tl-range-from"
RANGE_TO = "tl-range-to"
RANGE_GO = "tl-range-go"
ORDER = "tl-order"
#: Session picker: the runs of samples between pauses (``History.sessions``).
SESSION = "tl-session"
#: What the view draws (range, resolution) and the measured sample-to-screen latency.
VIEW_NOTE = "tl-view-note"
LATENCY = "tl-latency"
#: ``dcc.Store``: the page's newest user action (zoom, preset, follow, range, order).
ACTION = "tl-action"
#: ``dcc.Store``: time under the cursor / of the last click (epoch ms).
HOVER_T = "tl-hover-t"
CLICK_T = "tl-click-t"
#: ``dcc.Store``: start (epoch s) of the selected window, or null.
SELECTED = "tl-selected"
#: Side panels: values at the cursor; the selected window's features and reasons.
HOVER_PANEL = "tl-hover-panel"
WINDOW_PANEL = "tl-window-panel"

#: Pages (``app.dashboard.pages``): the pages' location (Dash pages' own ``dcc.Location``, in
#: ``dash.page_container``), the navigation's links and the pages' bodies.
LOCATION = "_pages_location"
#: ``dcc.Store``: the pages' paths, in the order of ``TAB_*`` / ``*_PAGE`` (``assets/pages.js``).
NAV_CONFIG = "tl-nav-config"
TAB_LIVE = "tl-tab-live"
TAB_SHOTS = "tl-tab-shots"
LIVE_PAGE = "tl-live-page"
SHOTS_PAGE = "tl-shots-page"
#: Screenshots page.
SHOT_UPLOAD = "tl-shot-upload"
SHOT_MSG = "tl-shot-msg"
SHOT_TZ = "tl-shot-tz"
SHOT_LIST = "tl-shot-list"
#: ``dcc.Store`` bumped whenever the kept screenshots change.
SHOTS_VERSION = "tl-shots-version"
#: ``dcc.Store``: hash of the opened screenshot.
SHOT_SELECTED = "tl-shot-selected"
SHOT_DETAIL = "tl-shot-detail"
SHOT_DETAIL_TITLE = "tl-shot-detail-title"
SHOT_IMAGE = "tl-shot-image"
SHOT_VIEW = "tl-shot-view"
SHOT_VERDICTS = "tl-shot-verdicts"
#: What was read from the opened picture itself (numbers, verdict per region), and the tick
#: that asks again while it is being read.
SHOT_READ = "tl-shot-read"
SHOT_READ_TICK = "tl-shot-read-tick"
SHOT_TIME = "tl-shot-time"
SHOT_ZONE = "tl-shot-zone"
SHOT_OFFSETS = "tl-shot-offsets"
SHOT_SAVE = "tl-shot-save"
#: One click: move a screenshot with no telemetry by the zone shift that reaches the data.
SHOT_FIX = "tl-shot-fix"
SHOT_SPLIT = "tl-shot-split"
SHOT_CLEAR = "tl-shot-clear"
SHOT_SPAN = "tl-shot-span"
SHOT_CMP = "tl-shot-cmp"
SHOT_COMPARE = "tl-shot-compare"
#: Pattern-matching id types: a row's open / delete buttons, a region's offset input.
SHOT_OPEN = "tl-shot-open"
SHOT_DEL = "tl-shot-del"
REGION_OFFSET = "tl-region-offset"
#: ``dcc.Store``: the files of the last drop, as the browser passes them on (oversize ones
#: named, not sent).
SHOT_BATCH = "tl-shot-batch"
#: ``dcc.Store``: the screenshot-list version the upload's own answer already listed (the
#: list callback then only redraws the figure's marks).
SHOT_LISTED = "tl-shot-listed"
#: Screenshots page: a dummy output of the clientside callback that scrolls the opened
#: screenshot into view.
SHOT_SCROLL = "tl-shot-scroll"
#: Screenshots page: ``dcc.Store`` of what its clientside functions (assets/screenshots.js)
#: need from the server: element ids and the upload limits.
SHOT_CONFIG = "tl-shot-config"
#: The browser's IANA time zone (plotly shows the time axis in it; every time on the page
#: follows), and its label in the toolbar.
PAGE_TZ = "tl-page-tz"
TZ_LABEL = "tl-tz-label"
#: Report export (toolbar): format, button, the download, and its status line.
REPORT_FORMAT = "tl-report-format"
REPORT_GO = "tl-report-go"
REPORT_DOWNLOAD = "tl-report-download"
REPORT_MSG = "tl-report-msg"
#: Cluster overview (several hosts in the store): panel, node picker, figure, its refresh.
CLUSTER_PANEL = "tl-cluster-panel"
HOST = "tl-host"
CLUSTER_GRAPH = "tl-cluster-graph"
CLUSTER_TICK = "tl-cluster-tick"
#: The live page's constants for its clientside code (assets/live.js): the stuck-request limit
#: and the range presets' spans.
CLIENT_CONFIG = "tl-client-config"
#: The server panel beside the lanes (DP-rank spread, SGLang's expert balance): the panel,
#: its text and its expert figure.
SERVER_PANEL = "tl-server-panel"
SERVER_BODY = "tl-server-body"
EXPERT_GRAPH = "tl-expert-graph"
#: What the page's balance panel shows (its range and data), so an unchanged one is not sent.
SERVER_KEY = "tl-server-key"
#: ``dcc.Store``s of the balance panel's refresh: the cluster tick asks for one (``PANEL_PULL``)
#: only while none is in flight (``PANEL_BUSY``: when it was asked, None once answered).
PANEL_PULL = "tl-panel-pull"
PANEL_BUSY = "tl-panel-busy"
