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
