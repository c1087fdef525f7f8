"""Lane geometry and colours every figure shares: the lanes drawn (``LANES``), the subplot rows
(``rows``), phase and GPU colours, the ribbon's marker heights, the band slots of the imbalance
strip and the order of a live figure's traces (``trace_keys``).

Constants and small pure functions only; the dashboard, the cluster view, the screenshots page
and the report read them from here, so no module reaches into another's privates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tealeaves.data.schema import mig_parent

# -- what is drawn ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Lane:
    """One metric lane of the figure.

    Attributes:
        key: short id of the lane.
        title: label shown left of the lane.
        columns: sample-frame columns drawn in the lane (one line per column and GPU).
        unit: unit of the plotted values (axis label).
        scale: multiplier from the column's unit to ``unit`` (B/s -> MB/s: 1e-6).
        y_range: fixed y range, or None for autorange from 0.
    """

    key: str
    title: str
    columns: tuple[str, ...]
    unit: str
    scale: float = 1.0
    y_range: tuple[float, float] | None = None


LANES: tuple[Lane, ...] = (
    Lane("sm_active", "SM active", ("sm_active",), "%", 1.0, (0.0, 105.0)),
    Lane("tensor_active", "Tensor active", ("tensor_active",), "%", 1.0, (0.0, 105.0)),
    Lane("dram_active", "DRAM active", ("dram_active",), "%", 1.0, (0.0, 105.0)),
    Lane("pcie", "PCIe", ("pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"), "MB/s", 1e-6),
    Lane("power", "Power", ("power_w",), "W", 1.0),
)

#: Every sample column a lane draws.
LANE_COLUMNS: tuple[str, ...] = tuple(c for lane in LANES for c in lane.columns)

#: Phases drawn in the ribbon, in order.  ``mixed`` is kept for classifiers that emit it.
RIBBON_PHASES: tuple[str, ...] = ("idle", "prefill", "decode", "mixed")

PHASE_COLORS: dict[str, str] = {
    "idle": "#cfd4dc",
    "prefill": "#f28e2b",
    "decode": "#3b7dd8",
    "mixed": "#b07aa1",
}

#: Phases a mixed window's stripes can name (``trace_keys``' ``("mixed", p)``): a window whose
#: verdict is mixed (no phase holds ``classifier.shares.NAMED_SHARE`` of its time) is drawn in
#: its phase's colour with diagonal stripes of the phase it is mixed with.
MIXED_PHASES: tuple[str, ...] = ("idle", "prefill", "decode")
#: The stripes' plotly bar pattern (``marker.pattern``; its colour is the phase's).
MIXED_PATTERN: dict = {"shape": "/", "size": 7, "solidity": 0.45, "fillmode": "replace"}

#: One line explaining each phase colour (the page's legend).
PHASE_HELP: dict[str, str] = {
    "idle": "no kernels running",
    "prefill": "prompt pass: compute-bound, tensor pipes busy",
    "decode": "token steps: memory-bound (incl. spec. verify, launch-bound)",
    "mixed": "prefill and decode in one window (chunked prefill)",
}

HOT_COLOR = "#d62728"
#: Screenshot markers on the ribbon.
SHOT_COLOR = "#111827"
#: Height of the screenshot markers on the ribbon's axis (above the imbalanced bar).
SHOT_Y = 1.52

#: Line colours of GPU 0, 1, ... (repeats after 10 GPUs); chosen apart from the phase colours.
GPU_COLORS: tuple[str, ...] = (
    "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#a6761d", "#1f78b4", "#e6ab02", "#666666",
    "#8c564b", "#17becf",
)

#: Line dash per column of a multi-column lane (PCIe: tx solid, rx dotted).
COLUMN_DASH: dict[str, str] = {"pcie_tx_bytes_per_s": "solid", "pcie_rx_bytes_per_s": "dot"}
COLUMN_SHORT: dict[str, str] = {"pcie_tx_bytes_per_s": "tx", "pcie_rx_bytes_per_s": "rx"}

RIBBON_ROW = 1


@dataclass(frozen=True)
class Rows:
    """Row numbers (1-based) of the figure's subplots.

    Attributes:
        ribbon: the phase ribbon.
        server: the server lane, or None when the figure has none.
        bands: the load bands (one band per GPU, reorderable).
        first_lane: the first GPU metric lane (``LANES`` follow in order).
        strip: the imbalance strip.
        n: number of rows (the bottom row carries the time axis).
    """

    ribbon: int
    server: int | None
    bands: int
    first_lane: int
    strip: int
    n: int


def rows(server: bool = False) -> Rows:
    """The figure's row layout, with or without the server lane (right under the ribbon)."""
    bands = RIBBON_ROW + (2 if server else 1)
    first = bands + 1
    strip = first + len(LANES)
    return Rows(RIBBON_ROW, RIBBON_ROW + 1 if server else None, bands, first, strip, strip)


FIRST_LANE_ROW = rows(False).first_lane
STRIP_ROW = rows(False).strip
N_ROWS = rows(False).n


@dataclass(frozen=True)
class ServerLine:
    """One line of the server lane.

    Attributes:
        key: column of ``server_cells`` drawn.
        title: legend / hover name.
        unit: unit of the values.
        right: drawn on the lane's right (secondary) axis.
        color, dash: line style.
    """

    key: str
    title: str
    unit: str
    right: bool
    color: str
    dash: str = "solid"


SERVER_LINES: tuple[ServerLine, ...] = (
    ServerLine("gen_tok_s", "gen tok/s", "tok/s", False, "#1f5fae"),
    ServerLine("prompt_tok_s", "prompt tok/s", "tok/s", False, "#c2610f", "dot"),
    ServerLine("running_req", "running req", "req", True, "#4b5563"),
    ServerLine("accept_len", "accept len", "tok/step", True, "#8e44ad", "dash"),
)

#: Prefill marker classes by new tokens per cell: (upper bound, label, marker size px).
PREFILL_SIZES: tuple[tuple[float, str, int], ...] = (
    (2048.0, "< 2k", 7), (16384.0, "2k-16k", 10), (math.inf, "≥ 16k", 14),
)

#: Columns of ``server_cells``.
SERVER_CELL_COLUMNS: tuple[str, ...] = (
    "gen_tok_s", "prompt_tok_s", "running_req", "queue_req", "accept_len",
    "pf_t", "pf_new", "pf_cached", "pf_queue", "pf_running", "pf_batches",
)

#: A server value is held forward for its line's interval (time since the previous line),
#: clipped to this range in seconds (2 s when the interval is unknown).
SERVER_HOLD_S: tuple[float, float] = (1.0, 15.0)

#: Top of the server lane's hidden marker axis and the markers' height on it.
MARKER_Y = 0.86

#: Windows whose mean load (%) is under this have no meaningful shares (noise over ~0).
MIN_SHARE_LOAD = 10.0

#: The ribbon's "hot" strip: its base and height on the ribbon's axis.
RIBBON_HOT_BASE = 1.08
RIBBON_HOT_HEIGHT = 0.32


def band_slots(order: list[int]) -> dict[int, int]:
    """Row of each GPU in the load bands: the first GPU of ``order`` on top (slot n-1)."""
    n = len(order)
    return {g: n - 1 - i for i, g in enumerate(order)}


#: Share of a band's height the load line spans (so neighbouring bands do not touch).
BAND_SCALE = 0.85
#: Where in its band a GPU's label (the axis tick) sits: a share of the band above its
#: bottom.
BAND_TICK = 0.42

#: Shade of the load heatmap under the bands (``("heat",)``): a GPU x window grid of SM
#: active, pale grey at 0 % to mid grey at 100 %, light enough that the GPUs' coloured lines
#: on top stay readable; a window without a reading is left blank (white: NaN, never the
#: 0 % shade).
HEAT_COLORSCALE: tuple[tuple[float, str], ...] = ((0.0, "#eceef2"), (1.0, "#7f8898"))


def gpu_color(gpu: int) -> str:
    """Line colour of GPU index ``gpu`` (a MIG instance: the colour after its GPU's, one
    more per instance id)."""
    parts = mig_parent(gpu)
    if parts is not None:
        return GPU_COLORS[((parts[0] or 0) + parts[1] + 1) % len(GPU_COLORS)]
    return GPU_COLORS[int(gpu) % len(GPU_COLORS)]


#: Rows of the figure drawn from labels made after the samples (windows, 0.1-s segments):
#: in a followed view each stops at its own cursor and a "labelling…" mark runs from there to
#: the view's edge (``trace_keys``' ``("labelling", row)``).
LABELLING_ROWS = ("ribbon", "bands", "strip")

#: The hover text of a "labelling…" mark.
LABELLING_TEXT = "not labelled yet: the 0.1-s segments settle ~1 s after the samples"


def trace_keys(gpus: list[int], server: bool = False) -> list[tuple]:
    """The figure's traces, in order, as keys.

    ``("phase", p)`` ribbon bars of phase ``p``; ``("mixed", p)`` stripes in ``p``'s colour
    over each window whose verdict is mixed with ``p`` (``binning.mixed_with``);
    ``("ribbon_hot",)`` the imbalance bar;
    ``("selected",)`` the outline of the window the user clicked; ``("shots",)`` a marker per
    uploaded screenshot at its capture time (``customdata`` its hash); ``("heat",)`` the load
    heatmap under the bands (one column of every GPU's load per window, rows in band order);
    ``("band", gpu)`` the GPU's load line in its band; ``("lane", column, gpu)`` one lane line; ``("share", gpu)`` the strip line of a GPU;
    ``("hot", gpu)`` the strip's red highlight of a GPU's share while it is in the hot set
    (three points per window: a segment and a break).  With ``server``, the server lane's
    traces follow at the end (so the others keep their positions): ``("server", key)`` per
    ``SERVER_LINES`` and ``("prefill", i)`` prefill markers of size class ``i``
    (``PREFILL_SIZES``).  Last come the "labelling…" marks, ``("labelling", row)`` per
    ``LABELLING_ROWS``: a hatched grey shape from where a row that is labelled after the samples
    (ribbon, load heatmap and bands, imbalance strip) stops to the followed view's edge (the
    newest sample's bin).  ``build_figure`` creates traces in this order and ``extend_data``
    addresses them by their position.
    """
    keys: list[tuple] = [("phase", p) for p in RIBBON_PHASES]
    keys += [("mixed", p) for p in MIXED_PHASES]
    keys.append(("ribbon_hot",))
    keys.append(("selected",))
    keys.append(("shots",))
    keys.append(("heat",))
    keys += [("band", g) for g in gpus]
    for lane in LANES:
        for g in gpus:
            for col in lane.columns:
                keys.append(("lane", col, g))
    keys += [("share", g) for g in gpus]
    keys += [("hot", g) for g in gpus]
    if server:
        keys += [("server", line.key) for line in SERVER_LINES]
        keys += [("prefill", i) for i in range(len(PREFILL_SIZES))]
    keys += [("labelling", r) for r in LABELLING_ROWS]
    return keys


def is_window_key(key: tuple) -> bool:
    """Whether a ``trace_keys`` key is drawn per window (or cell), not per bin."""
    return key[0] in ("phase", "mixed", "ribbon_hot", "selected", "shots", "heat", "band", "share",
                      "hot", "server", "prefill")


def heat_rows(order: list[int]) -> tuple[list[float], list[int]]:
    """The load heatmap's rows for a band order (top first): ``(y centres, ascending, of the
    bands' slots; the GPU of each row)``, so row ``i`` of a heatmap column is the load of
    GPU ``gpus[i]`` and sits behind that GPU's band."""
    slots = band_slots(order)
    gpus = sorted(order, key=lambda g: slots[g])
    return [slots[g] + 0.5 for g in gpus], gpus

