"""What a page's live figure receives after the first figure: the ``extendData`` that appends
new bins and windows to a followed figure (``extend_data``), a figure made extendable
(``extendable``), and a range view's per-trace updates for a ``Patch`` (``range_update``,
``typed_array``).  Pure: frames and trace data in, JSON-able values out.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from tealeaves.app.figures.geometry import is_window_key, trace_keys
from tealeaves.app.figures.points import trace_points
from tealeaves.classifier.windows import DEFAULT_WINDOW_S


def extend_data(bins: pd.DataFrame, windows: pd.DataFrame, gpus: list[int], *,
                bin_s: float = 0.1, window_s: float = DEFAULT_WINDOW_S, view_s: float = 120.0,
                server: pd.DataFrame | None = None, order: list[int] | None = None,
                slots: tuple | None = None, hop_s: float = 0.1,
                phases_in_view: dict[str, int] | None = None,
                after_j: int | None = None, heat_in_view: int | None = None,
                mixed_in_view: dict[str, int] | None = None,
                lanes_in_view: int | None = None,
                windows_in_view: int | None = None,
                labelling: dict[str, tuple[float, float]] | None = None) -> list:
    """The ``dcc.Graph.extendData`` value that appends new bins and windows to the figure.

    Args:
        bins: new complete bins (``bin_lanes`` output), none already on the page.
        windows: new complete classifier windows, none already on the page.
        gpus: the same GPU list the figure was built with.
        bin_s, window_s: as for ``build_figure``.
        view_s: seconds of history each trace keeps (its ``maxPoints`` is
            ``view_s / bin_s`` for lanes and ``view_s / window_s`` for window traces and the
            server lane's cells).
        server: new ``server_cells`` (none already on the page) when the figure has a server
            lane (may be empty), else None.
        order: the load bands' GPU order the figure was built with.
        slots: new segment slots (``(slot indices, phases)``, none already on the page) for a
            figure built with ``slots``: the phase bars then keep ``view_s / hop_s`` points.
        phases_in_view: ``{phase: bars of that phase in the view once extended}`` (the last
            ``view_s / hop_s`` slots, or ``view_s / window_s`` windows without ``slots``).
            A phase trace holds only its own bars, so this is its ``maxPoints``: what scrolled
            out of view is dropped.  None: the placeholder-free bound above (a phase trace
            then keeps up to that many bars, some of them off screen).
        after_j: the window index the page expects next (its cursor's ``j``): a blank
            heatmap column marks missing windows before the first new one.
        heat_in_view: the heatmap's columns in the view once extended (its windows there
            and the blank columns between them): its ``maxPoints``.  None: ``view_s /
            window_s``, as the other window traces.
        mixed_in_view: ``{phase: mixed windows striped with it in the view once
            extended}``: the ``("mixed", phase)`` traces' ``maxPoints`` (they too hold only
            their own bars).  None: ``view_s / window_s``.
        lanes_in_view: the lanes' bins in the view once extended (from its left edge, on the
            window grid, to the newest bin): their ``maxPoints``.  None: ``view_s / bin_s``.
        windows_in_view: the windows in the view once extended (from that left edge): the
            ``maxPoints`` of the imbalance bar, the bands and the strip (``hot``: three per
            window).  None: ``view_s / window_s``.
        labelling: the "labelling…" marks now, as for ``build_figure``: each replaces the
            mark on the page (``maxPoints`` 5); a row not in it keeps its mark.

    Returns:
        ``[update, indices, max_points]``: ``update`` maps ``x``, ``y``, ``text`` and ``z`` to
        one list per trace, ``indices`` lists every trace index, ``max_points`` has the same
        shape as ``update`` (plotly's per-trace form).  Only the heatmap (``("heat",)``) gains
        ``z`` columns, and it gains no ``y`` (its rows are fixed); plotly.js extends an
        attribute only on traces that have it as an array, so every trace of a followed
        figure carries a ``z`` list (``extendable``).
    """
    keys = trace_keys(gpus, server is not None)
    pts = trace_points(bins, windows, gpus, bin_s, window_s, server, order, slots, hop_s, after_j,
                  labelling)
    lane_max = math.ceil(view_s / bin_s) if lanes_in_view is None else max(1, lanes_in_view)
    win_max = math.ceil(view_s / window_s)
    in_view = win_max if windows_in_view is None else max(0, int(windows_in_view))
    slot_max = math.ceil(view_s / hop_s - 1e-9)
    update = _columns(keys, pts)
    limits = [_max_points(key, lane_max, win_max, in_view, slot_max, heat_in_view,
                          phases_in_view, mixed_in_view, slots is not None) for key in keys]
    keep = 10**7  # never trimmed: the heatmap's fixed rows and (empty) text, others' empty z
    heat = keys.index(("heat",))
    max_points = {k: list(limits) for k in update}
    max_points["y"][heat] = max_points["text"][heat] = keep
    max_points["z"] = [limits[i] if i == heat else keep for i in range(len(keys))]
    return [update, list(range(len(keys))), max_points]


def extendable(fig: go.Figure) -> dict:
    """``fig`` as the dict a page receives, every trace given an empty ``z`` (and ``text``)
    list where it has none, so the live ``extendData`` (``extend_data``: ``z`` for the
    heatmap's new columns) finds an array to extend on every trace (plotly.js refuses a
    missing one)."""
    out = fig.to_plotly_json()
    for trace in out["data"]:
        trace.setdefault("z", [])
        trace.setdefault("text", [])
    return out


def typed_array(a, dtype: str = "f8") -> dict:
    """A plotly.js typed-array spec (``{"dtype", "bdata"}``: base64 of the little-endian
    values) for a 1-d array; NaN stays NaN (a gap).  f8 for epoch milliseconds (f4 would round
    them to ~2 min), f4 for values (7 significant digits)."""
    import base64

    arr = np.ascontiguousarray(np.asarray(a, dtype=np.dtype(dtype).newbyteorder("<")))
    return {"dtype": dtype, "bdata": base64.b64encode(arr.tobytes()).decode("ascii")}


def range_update(traces: dict, gpus: list[int], server: bool, encode: bool = True
                 ) -> dict[int, dict]:
    """Per-trace attribute updates (``{trace index: {attr: value}}``) that put a range view
    (``app.figures.series.downsample`` ``TraceData`` per key) into a figure built by
    ``build_figure``.

    Args:
        traces: ``{key: TraceData}``; keys of ``trace_keys(gpus, server)`` not in it are left
            as they are.
        gpus, server: what the figure was built with.
        encode: typed arrays (``typed_array``; x f8 ms, y/base f4) for a ``Patch``; False:
            plain numpy arrays (for ``go.Figure.update``).

    Returns:
        Updates of ``x``, ``y`` (and ``width`` / ``base`` for bars, ``text`` where given).
    """
    keys = trace_keys(gpus, server)
    out: dict[int, dict] = {}
    for i, key in enumerate(keys):
        td = traces.get(key)
        if td is None:
            continue
        x = np.asarray(td.x, dtype=np.float64) * 1000.0
        y = np.asarray(td.y, dtype=np.float64)
        upd: dict = ({"x": typed_array(x, "f8"), "y": typed_array(y, "f4")} if encode
                     else {"x": x, "y": y})
        if td.width is not None:
            if np.ndim(td.width):  # one width per bar (the ribbon's phase segments)
                wd = np.asarray(td.width, dtype=np.float64) * 1000.0
                upd["width"] = typed_array(wd, "f4") if encode else wd
            else:
                upd["width"] = float(td.width) * 1000.0
        if td.z is not None:  # a heatmap: its columns (plain lists, None where unknown)
            upd["z"] = td.z
        if td.base is not None:
            if np.ndim(td.base):
                b = np.asarray(td.base, dtype=np.float64)
                upd["base"] = typed_array(b, "f4") if encode else b
            else:
                upd["base"] = float(td.base)
        if td.text is not None:
            upd["text"] = list(td.text)
        out[i] = upd
    return out


def extend_point_count(payload: list) -> int:

    """Number of new x values in an ``extend_data`` payload (0: nothing to send)."""
    return sum(len(x) for x in payload[0]["x"])


def _columns(keys: list[tuple], pts: dict) -> dict[str, list]:
    """``extend_data``'s ``update``: ``x``, ``y``, ``text`` and ``z``, one list per trace of
    ``keys`` from its points ``pts[key]``."""
    update: dict[str, list] = {"x": [], "y": [], "text": [], "z": []}
    for key in keys:
        x, y, text = pts[key]
        update["x"].append(x)
        if key[0] == "heat":  # its y are the rows: x and z gain a column per window
            update["y"].append([])
            update["z"].append(y)
        else:
            update["y"].append(y)
            update["z"].append([])
        update["text"].append(text)
    return update


def _max_points(key: tuple, lane_max: int, win_max: int, in_view: int, slot_max: int,
                heat_in_view: int | None, phases_in_view: dict[str, int] | None,
                mixed_in_view: dict[str, int] | None, slotted: bool) -> int:
    """``extend_data``'s ``maxPoints`` of the trace ``key`` (its arguments' bounds; ``slotted``:
    the phase bars are segment slots)."""
    if key[0] == "heat":
        return win_max if heat_in_view is None else max(0, int(heat_in_view))
    if key[0] == "hot":
        return 3 * in_view
    if key[0] in ("ribbon_hot", "band", "share"):
        return in_view
    if key[0] == "phase" and phases_in_view is not None:
        return int(phases_in_view.get(key[1], 0))  # 0: none left in view
    if key[0] == "phase" and slotted:
        return slot_max
    if key[0] == "mixed" and mixed_in_view is not None:
        return int(mixed_in_view.get(key[1], 0))
    if key[0] == "labelling":  # its five points replace the mark
        return 5
    if key[0] == "shots":  # never appended to: keep every marker
        return 10**7
    return win_max if is_window_key(key) else lane_max
