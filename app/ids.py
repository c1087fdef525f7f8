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
#: The small source / sample-count / last-sample-age line.
STATUS = "tl-status"
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
