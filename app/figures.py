"""Pure figure builders for the dashboard: frames in, ``go.Figure`` or ``extendData`` out.

The live figure is ONE plotly figure with shared-x subplots, top to bottom:

1. the **phase ribbon**: one coloured bar per classifier window (idle / prefill / decode), or
   per 0.1-s slot of the finer phase segments (``classifier.segments``: labels that change
   where the counters change) when ``slots`` are given, with a thin red bar above windows
   flagged imbalanced;
2. one **lane per metric** (``LANES``: SM, tensor and DRAM activity in %, PCIe tx/rx in MB/s,
   board power in W) with one line per GPU (PCIe: two, tx solid and rx dotted);
3. the **imbalance strip**: each GPU's share of the summed load per window (%), a fair-share line
   at ``100 / n_gpus`` and a red highlight on the share of every GPU of the window's hot set
   in every flagged window (its hover names the hot set and its shares of the work).

When the store holds inference-server signals (log events or ``/metrics`` scrapes) a **server
lane** sits right under the ribbon (``rows(server=True)``): generation tokens/s (and prompt
tokens/s where the server reports it) on the left axis, running requests and speculative accept
length on the right axis, and one **prefill marker** per server prefill batch (sized by its new
tokens) along the lane's top edge, under the ribbon's prefill bands.  The server lane is drawn
from **cells** (``server_cells``): one point per ``window_s`` cell and series, so it is appended
with ``extendData`` like the window traces.

The x axis is real time: every ``x`` here is ``epoch seconds * 1000``.  plotly.js reads a number
on a date axis as milliseconds since the epoch and shows it in the *browser's* time zone (it goes
through a JS ``Date``; plotly.js has no time-zone setting), so the axis title names that zone
(``time_zone``, which the page reports) and everything else on the page uses it too.

Lanes are drawn from **bins**: the samples' mean per ``bin_s``-second bin and GPU
(``bin_lanes``).  Binning gives every lane trace exactly one point per bin, so the live view can
append with ``extendData`` and bound every trace with the same ``maxPoints`` and still have all
lanes cover the same time span.  GPM columns (``sm_active`` ...) are NaN on the samples between
two GPM refreshes; the bin mean skips NaN, and a bin left without any reading holds the previous
bin's value for at most ``hold_s`` seconds.  Longer holes stay NaN and are sent as ``None``:
they show as gaps, never as 0.

Nothing here touches a store, a clock or Dash callbacks; ``app.dashboard`` does that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

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
_RIBBON_HOT_BASE = 1.08
RIBBON_HOT_HEIGHT = 0.32


def band_slots(order: list[int]) -> dict[int, int]:
    """Row of each GPU in the load bands: the first GPU of ``order`` on top (slot n-1)."""
    n = len(order)
    return {g: n - 1 - i for i, g in enumerate(order)}


#: Share of a band's height the load line spans (so neighbouring bands do not touch).
BAND_SCALE = 0.85


def gpu_color(gpu: int) -> str:
    """Line colour of GPU index ``gpu``."""
    return GPU_COLORS[int(gpu) % len(GPU_COLORS)]


def trace_keys(gpus: list[int], server: bool = False) -> list[tuple]:
    """The figure's traces, in order, as keys.

    ``("phase", p)`` ribbon bars of phase ``p``; ``("ribbon_hot",)`` the imbalance bar;
    ``("selected",)`` the outline of the window the user clicked; ``("shots",)`` a marker per
    uploaded screenshot at its capture time (``customdata`` its hash); ``("band", gpu)`` the GPU's
    load line in its band; ``("lane", column, gpu)`` one lane line; ``("share", gpu)`` the strip line of a GPU;
    ``("hot", gpu)`` the strip's red highlight of a GPU's share while it is in the hot set
    (three points per window: a segment and a break).  With ``server``, the server lane's
    traces follow at the end (so the others keep their positions): ``("server", key)`` per
    ``SERVER_LINES`` and ``("prefill", i)`` prefill markers of size class ``i``
    (``PREFILL_SIZES``).  ``build_figure`` creates traces in this order and ``extend_data``
    addresses them by their position.
    """
    keys: list[tuple] = [("phase", p) for p in RIBBON_PHASES]
    keys.append(("ribbon_hot",))
    keys.append(("selected",))
    keys.append(("shots",))
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
    return keys


def _is_window_key(key: tuple) -> bool:
    return key[0] in ("phase", "ribbon_hot", "selected", "shots", "band", "share", "hot",
                      "server", "prefill")


# -- data preparation ----------------------------------------------------------------------


def bin_index(t: float | np.ndarray, bin_s: float) -> np.ndarray | int:
    """Index of the ``bin_s``-second bin holding epoch time ``t`` (``floor(t / bin_s)``).

    A tiny epsilon absorbs float error so that ``k * bin_s`` falls in bin ``k``.
    """
    out = np.floor(np.asarray(t, dtype=float) / bin_s + 1e-9).astype(np.int64)
    return int(out) if out.ndim == 0 else out


def bin_lanes(samples: pd.DataFrame, gpus: list[int], k_start: int, k_end: int,
              bin_s: float = 0.1, hold_s: float = 0.35, dense: bool = False) -> pd.DataFrame:
    """Mean of every lane column per bin and GPU.

    Cost follows the samples, never ``k_end - k_start``: only bins holding a reading (and
    the held bins after them) are made, unless ``dense`` asks for every bin of the range.

    Args:
        samples: sample frame (``data.schema``); may start before bin ``k_start`` (those
            samples only seed the hold of empty bins) and must hold every sample of the
            emitted bins.
        gpus: GPU indices to emit columns for (absent GPUs give all-NaN columns).
        k_start: first bin index to emit (``bin_index``); bins cover ``[k*bin_s, (k+1)*bin_s)``.
        k_end: one past the last bin index to emit.
        bin_s: bin width in seconds (> 0).
        hold_s: an empty bin takes the previous bin's value when that is at most this many
            seconds back; GPM refreshes at 10 Hz leave some 0.1-s bins empty.
        dense: emit every bin ``k_start .. k_end-1`` (NaN rows where nothing was read);
            memory then follows the range, so only for ranges known to be short.

    Returns:
        Frame indexed by bin index ``k`` (increasing, within ``k_start .. k_end-1``; the bins
        that hold a reading or a held one, or every bin with ``dense``), columns a MultiIndex
        ``(column, gpu)`` over ``LANE_COLUMNS`` x ``gpus``, values in the column's unit (not
        scaled), NaN where there is no reading.

    Raises:
        ValueError: ``bin_s`` is not positive.
    """
    if not bin_s > 0:
        raise ValueError(f"bin_s must be positive, got {bin_s}")
    cols = pd.MultiIndex.from_product([LANE_COLUMNS, list(gpus)], names=["column", "gpu"])
    empty = pd.RangeIndex(k_start, max(k_end, k_start), name="k") if dense else \
        pd.Index([], dtype=np.int64, name="k")
    if samples.empty or k_end <= k_start or not gpus:
        return pd.DataFrame(np.nan, index=empty, columns=cols)
    frame = samples[["gpu", *LANE_COLUMNS]].copy()
    frame["k"] = bin_index(samples["timestamp"].to_numpy(), bin_s)
    frame = frame[(frame["k"] < k_end) & frame["gpu"].isin(gpus)]
    means = frame.groupby(["k", "gpu"])[list(LANE_COLUMNS)].mean().unstack("gpu")
    means.columns = means.columns.set_names(["column", "gpu"])
    means = means.reindex(columns=cols)
    hold = math.floor(hold_s / bin_s + 1e-9)
    ks = means.index.to_numpy(dtype=np.int64)
    # the bins to emit: each bin with a reading and the ``hold`` bins after it
    want = np.unique((ks[:, None] + np.arange(hold + 1)[None, :]).ravel()) if len(ks) else ks
    if dense:
        want = np.arange(k_start, k_end, dtype=np.int64)
    want = want[(want >= k_start) & (want < k_end)]
    grid = np.union1d(ks, want)
    full = means.reindex(pd.Index(grid, name="k"))
    if hold > 0 and len(full):
        # forward fill by bin distance, not by row: a value holds at most ``hold`` bins
        vals = full.to_numpy(dtype=np.float64)
        seen = np.where(np.isfinite(vals), grid[:, None].astype(np.float64), np.nan)
        last_k = pd.DataFrame(seen).ffill().to_numpy()
        filled = pd.DataFrame(vals).ffill().to_numpy()
        ok = np.isfinite(vals) | (grid[:, None] - last_k <= hold)
        full = pd.DataFrame(np.where(ok, filled, np.nan), index=full.index, columns=cols)
    full = full.reindex(pd.Index(want, name="k"))
    return full if dense else full[full.notna().any(axis=1)]


def gpu_shares(windows: pd.DataFrame, gpus: list[int],
               min_load: float = MIN_SHARE_LOAD) -> pd.DataFrame:
    """Each GPU's share of the summed load per window, in %.

    Args:
        windows: classifier windows (``load_g<i>`` columns, ``load_mean``).
        gpus: GPU indices (a GPU without a ``load_g<i>`` column is NaN).
        min_load: windows whose ``load_mean`` (%) is under this get NaN shares: the split of
            near-zero load is noise.

    Returns:
        Frame with one column per GPU (``gpus``), rows aligned with ``windows``; rows sum to
        100 where defined.
    """
    load = pd.DataFrame({g: windows.get(f"load_g{g}", pd.Series(np.nan, index=windows.index))
                         for g in gpus}, index=windows.index).astype(float)
    total = load.sum(axis=1, min_count=1)
    share = load.div(total.where(total > 0), axis=0) * 100.0
    busy = windows.get("load_mean", pd.Series(np.nan, index=windows.index)).astype(float)
    share.loc[~(busy >= min_load).to_numpy()] = np.nan
    return share


def hot_members(windows: pd.DataFrame, gpus: list[int]) -> np.ndarray:
    """``(len(windows), len(gpus))`` bool: GPU ``gpus[i]`` is in the window's hot set (every
    hot GPU of a flagged window; ``classifier.summary.window_hot_sets``)."""
    from ..classifier.imbalance import hot_set_of
    from ..classifier.summary import window_hot_sets

    if not len(windows):
        return np.zeros((0, len(gpus)), dtype=bool)
    if "hot_set" not in windows:
        sets = window_hot_sets(windows)
        return np.array([[g in hs for g in gpus] for hs in sets], dtype=bool)
    # a few distinct sets over many windows: one membership row per distinct cell
    codes, cells = pd.factorize(windows["hot_set"], use_na_sentinel=True)
    rows = np.array([[g in hot_set_of(c) for g in gpus] for c in cells] + [[False] * len(gpus)],
                    dtype=bool).reshape(len(cells) + 1, len(gpus))
    flag = (windows["imbalanced"].eq(True).to_numpy() if "imbalanced" in windows
            else np.ones(len(windows), dtype=bool))
    return rows[codes] & flag[:, None]  # code -1 (NaN): the last, empty row


def hot_set_text(hot_set, hot_share: float = math.nan, cold_share: float = math.nan) -> str:
    """A hot set in words: ``"GPUs 1, 3, 5, 7 — 18 % each vs 7 %"`` or ``"GPU 1 — 71 % vs
    29 %"`` (``imbalance.format_hot_set`` after ``GPU``/``GPUs``); ``""`` for none."""
    from ..classifier.imbalance import format_hot_set

    hs = [int(g) for g in (hot_set or ())]
    if not hs:
        return ""
    share = [_float(hot_share), _float(cold_share)]
    return f"GPU{'s' if len(hs) > 1 else ''} {format_hot_set(hs, *share)}"


def _float(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


def _col(frame: pd.DataFrame, name: str) -> np.ndarray:
    if frame is None or name not in frame.columns:
        return np.full(0 if frame is None else len(frame), np.nan)
    return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)


def server_series(events: pd.DataFrame | None, metrics: pd.DataFrame | None
                  ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each server-lane series as ``{key: (time, value, hold_s)}``, sorted by time.

    Log events (``SampleStore.server_events`` frame) are preferred; a series the events do not
    carry is taken from the ``/metrics`` scrapes (``SampleStore.server_metrics`` frame, turned
    into fields by ``collectors.server_metrics.summary``).  Keys: ``gen_tok_s`` (SGLang decode
    ``gen throughput``, vLLM ``Avg generation throughput``, metrics gen throughput or decode
    token rate), ``prompt_tok_s`` (vLLM ``Avg prompt throughput``, SGLang ``input
    throughput``, metrics prefill token rate), ``running_req``, ``queue_req``, ``accept_len``.
    ``hold_s`` is how long each value stands: the line's interval (``timestamp - start``)
    clipped to ``SERVER_HOLD_S``.  NaN values are dropped, never turned into 0.
    """
    lo, hi = SERVER_HOLD_S
    sources = {
        "gen_tok_s": (("gen_throughput_tok_s",), ("gen_throughput_tok_s", "decode_tokens_per_s")),
        "prompt_tok_s": (("prompt_throughput_tok_s", "input_throughput_tok_s"),
                         ("prefill_tokens_per_s",)),
        "running_req": (("running_req",), ("running_req",)),
        "queue_req": (("queue_req",), ("queue_req",)),
        "accept_len": (("accept_len",), ("accept_len",)),
    }
    summ = None
    if metrics is not None and not metrics.empty:
        from ..collectors.server_metrics import summary

        summ = summary(metrics).sort_values("timestamp")
    ev = None
    if events is not None and not events.empty:
        ev = events[pd.notna(events["timestamp"])].sort_values("timestamp", kind="stable")
    out: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for key, (ev_cols, m_cols) in sources.items():
        t = v = hold = np.empty(0)
        if ev is not None:
            et = ev["timestamp"].to_numpy(dtype=float)
            st = _col(ev, "start")
            val = np.full(len(ev), np.nan)
            for c in ev_cols:
                val = np.where(np.isfinite(val), val, _col(ev, c))
            ok = np.isfinite(val)
            t, v = et[ok], val[ok]
            hold = np.nan_to_num(np.clip((et - st)[ok], lo, hi), nan=2.0)
        if not len(t) and summ is not None and len(summ):
            mt = summ["timestamp"].to_numpy(dtype=float)
            val = np.full(len(summ), np.nan)
            for c in m_cols:
                val = np.where(np.isfinite(val), val, _col(summ, c))
            gap = np.diff(mt, prepend=np.nan)
            ok = np.isfinite(val)
            t, v = mt[ok], val[ok]
            hold = np.nan_to_num(np.clip(gap[ok] * 1.5, lo, hi), nan=2.0)
        out[key] = (t, v, hold)
    return out


def server_cells(events: pd.DataFrame | None, metrics: pd.DataFrame | None, c_start: int,
                 c_end: int, cell_s: float = 0.5) -> pd.DataFrame:
    """The server lane on the cell grid: one row per ``cell_s``-second cell.

    Args:
        events: ``SampleStore.server_events`` frame (may be empty or None); must hold every
            event of the emitted cells and, for the held values, those up to
            ``SERVER_HOLD_S[1]`` seconds before.
        metrics: ``SampleStore.server_metrics`` frame (may be empty or None), same span.
        c_start, c_end: cell indices to emit (``bin_index(t, cell_s)``), ``c_end`` excluded.
        cell_s: cell width in seconds (the classifier window, so cells extend like windows).

    Returns:
        Frame indexed by cell ``c`` with ``SERVER_CELL_COLUMNS``: the line values
        (``gen_tok_s`` ... ``accept_len``: the newest value at or before the cell's end, while
        it stands; NaN otherwise) and the cell's prefill batches (``pf_t`` time of the first
        one, epoch s; ``pf_new`` / ``pf_cached`` summed new and cached tokens; ``pf_queue`` /
        ``pf_running`` of the last one; ``pf_batches`` count; NaN / 0 without any).
    """
    index = pd.RangeIndex(c_start, max(c_end, c_start), name="c")
    out = pd.DataFrame(np.nan, index=index, columns=list(SERVER_CELL_COLUMNS))
    out["pf_batches"] = 0
    if not len(index):
        return out
    c = index.to_numpy(dtype=float)
    lo, hi = c * cell_s, (c + 1) * cell_s
    for key, (t, v, hold) in server_series(events, metrics).items():
        if not len(t):
            continue
        i = np.searchsorted(t, hi - 1e-9, side="left") - 1
        ok = i >= 0
        ic = np.clip(i, 0, None)
        ok &= t[ic] + hold[ic] >= lo
        out[key] = np.where(ok, v[ic], np.nan)
    if events is not None and not events.empty and "kind" in events.columns:
        pf = events[(events["kind"] == "prefill") & pd.notna(events["timestamp"])]
        if len(pf):
            pf = pf.sort_values("timestamp", kind="stable")
            pt = pf["timestamp"].to_numpy(dtype=float)
            pc = bin_index(pt, cell_s)
            f = pd.DataFrame({"c": pc, "t": pt, "new": _col(pf, "new_token"),
                              "cached": _col(pf, "cached_token"), "queue": _col(pf, "queue_req"),
                              "running": _col(pf, "running_req")})
            f = f[(f["c"] >= c_start) & (f["c"] < c_end)]
            if len(f):
                g = f.groupby("c")
                agg = pd.DataFrame({
                    "pf_t": g["t"].min(), "pf_new": g["new"].sum(min_count=1),
                    "pf_cached": g["cached"].sum(min_count=1), "pf_queue": g["queue"].last(),
                    "pf_running": g["running"].last(), "pf_batches": g["t"].size()})
                out.loc[agg.index, list(agg.columns)] = agg.to_numpy(dtype=float)
    out["pf_batches"] = out["pf_batches"].astype(int)
    return out


def prefill_size_class(new_tokens: float) -> int:
    """Index into ``PREFILL_SIZES`` for a cell's new prefill tokens (unknown: the smallest)."""
    if new_tokens is None or not math.isfinite(new_tokens):
        return 0
    return next(i for i, (top, _, _) in enumerate(PREFILL_SIZES) if new_tokens < top)


def _ms(seconds: np.ndarray) -> list[float]:
    return np.round(np.asarray(seconds, dtype=float) * 1000.0, 1).tolist()


def _values(a: np.ndarray, digits: int = 3) -> list:
    a = np.asarray(a, dtype=float)
    return [None if not math.isfinite(v) else round(v, digits) for v in a.tolist()]


def _fmt(v: float, spec: str, missing: str = "n/a") -> str:
    return format(v, spec) if v is not None and math.isfinite(v) else missing


def _segments(starts: np.ndarray, window_s: float, y: np.ndarray,
              text: list[str]) -> tuple[list, list, list]:
    """Three points per window: a flat segment across it at ``y`` and a break (None)."""
    x: list = []
    ys: list = []
    txt: list = []
    for s0, v, t in zip(np.asarray(starts, dtype=float), _values(y, 2), text):
        x += [round(s0 * 1000.0, 1), round((s0 + window_s) * 1000.0, 1), None]
        ys += [v, v, None]
        txt += [t, t, ""]
    return x, ys, txt


def _server_points(cells: pd.DataFrame, cell_s: float) -> dict[tuple, tuple[list, list, list]]:
    """``{trace key: (x, y, text)}`` of the server lane's traces, one point per cell."""
    out: dict[tuple, tuple[list, list, list]] = {}
    n = len(cells)
    cx = _ms((cells.index.to_numpy(dtype=float) + 0.5) * cell_s) if n else []
    for line in SERVER_LINES:
        vals = cells[line.key].to_numpy(dtype=float) if n else np.array([])
        out[("server", line.key)] = (cx, _values(vals, 2), [])
    pf_t = cells["pf_t"].to_numpy(dtype=float) if n else np.array([])
    has = np.isfinite(pf_t)
    px = [round(t * 1000.0, 1) if h else x for t, h, x in zip(pf_t, has, cx)]
    text = []
    cls = []
    for r, h in zip(cells.itertuples(), has) if n else []:
        if not h:
            text.append("")
            cls.append(-1)
            continue
        batches = f"{r.pf_batches} batches" if r.pf_batches > 1 else "1 batch"
        text.append(f"prefill {batches}: {_fmt(r.pf_new, ',.0f')} new + "
                    f"{_fmt(r.pf_cached, ',.0f')} cached tok, queue {_fmt(r.pf_queue, '.0f')}, "
                    f"running {_fmt(r.pf_running, '.0f')}")
        cls.append(prefill_size_class(r.pf_new))
    for i in range(len(PREFILL_SIZES)):
        mine = [k == i for k in cls]
        out[("prefill", i)] = (px, [MARKER_Y if m else None for m in mine],
                               [t if m else "" for t, m in zip(text, mine)])
    return out


def _points(bins: pd.DataFrame, windows: pd.DataFrame, gpus: list[int], bin_s: float,
            window_s: float, server: pd.DataFrame | None = None,
            order: list[int] | None = None, slots: tuple | None = None,
            hop_s: float = 0.1) -> dict[tuple, tuple[list, list, list]]:
    """``{trace key: (x, y, text)}`` for every key of ``trace_keys(gpus, server is not None)``:
    one point per bin (lanes) or window (the rest), ``None`` where unknown.  ``order`` is the
    load bands' GPU order (top first; default ``gpus``).  With ``slots`` (``(slot indices,
    phases)`` of ``hop_s`` slots, ``history.segment_slots``) the ribbon's phase bars are one
    point per slot instead of per window.
    """

    band_rows = band_slots(list(gpus) if order is None else list(order))
    out: dict[tuple, tuple[list, list, list]] = {}
    bx = _ms((bins.index.to_numpy(dtype=float) + 0.5) * bin_s) if len(bins) else []
    for lane in LANES:
        for g in gpus:
            for col in lane.columns:
                if len(bins) and (col, g) in bins.columns:
                    vals = bins[(col, g)].to_numpy(dtype=float) * lane.scale
                else:  # no reading of this lane (a source without it): a gap, not an error
                    vals = np.full(len(bx), np.nan)
                out[("lane", col, g)] = (bx, _values(vals), [])
    n = len(windows)
    if n:
        starts = windows["start"].to_numpy(dtype=float)
        wx = _ms(starts + window_s / 2.0)
        phase = windows["phase"].astype(str).to_numpy()
        ratio = windows["imbalance_ratio"].to_numpy(dtype=float)
        members = hot_members(windows, gpus)
        flagged = members.any(axis=1)
        tax = windows["straggler_tax"].to_numpy(dtype=float)
        sets = [tuple(g for g, m in zip(gpus, row) if m) for row in members]
        nan = pd.Series(np.nan, index=windows.index)
        hs = windows.get("hot_share", nan).to_numpy(dtype=float)
        cs = windows.get("cold_share", nan).to_numpy(dtype=float)
        set_text = [hot_set_text(st, h, c) for st, h, c in zip(sets, hs, cs)]
    else:
        wx, phase, starts = [], np.array([], dtype=str), np.array([], dtype=float)
        ratio = tax = np.array([], dtype=float)
        members = np.zeros((0, len(gpus)), dtype=bool)
        flagged = np.array([], dtype=bool)
        set_text = []
    if slots is not None:
        idx, sphase = slots
        sx = _ms((np.asarray(idx, dtype=float) + 0.5) * hop_s)
        sphase = np.asarray(sphase, dtype=object).astype(str)
        for p in RIBBON_PHASES:
            out[("phase", p)] = (sx, [1.0 if mi else None for mi in sphase == p], [])
    else:
        for p in RIBBON_PHASES:
            m = phase == p
            out[("phase", p)] = (wx, [1.0 if mi else None for mi in m], [])
    why = [f"hot set {st}: max/mean work {_fmt(r, '.2f')}x, straggler tax {_fmt(t, '.0%')}"
           if f else "" for f, st, r, t in zip(flagged, set_text, ratio, tax)]
    out[("ribbon_hot",)] = (wx, [RIBBON_HOT_HEIGHT if f else None for f in flagged], [])
    out[("selected",)] = ([], [], [])
    out[("shots",)] = ([], [], [])
    shares = gpu_shares(windows, gpus) if n else pd.DataFrame(columns=gpus, dtype=float)
    for g in gpus:
        col = f"load_g{g}"
        load = (windows[col].to_numpy(dtype=float) if n and col in windows
                else np.full(n, np.nan))
        out[("band", g)] = (wx, _values(band_rows[g] + BAND_SCALE * np.clip(load, 0, 100) / 100, 3),
                            [])
        s = shares[g].to_numpy(dtype=float) if n else np.array([])
        out[("share", g)] = (wx, _values(s, 2), [])
        is_hot = members[:, gpus.index(g)] if n else np.array([], dtype=bool)
        out[("hot", g)] = _segments(starts, window_s, np.where(is_hot, s, np.nan),
                                    [f"GPU {g} hot · {t}" if h else ""
                                     for t, h in zip(why, is_hot)])
    if server is not None:
        out.update(_server_points(server, window_s))
    return out


# -- the figure ------------------------------------------------------------------------------


def build_figure(bins: pd.DataFrame, windows: pd.DataFrame, gpus: list[int], *,
                 bin_s: float = 0.1, window_s: float = 0.5, height: int = 780,
                 uirevision: str = "tealeaves-live",
                 server: pd.DataFrame | None = None,
                 order: list[int] | None = None,
                 shots: pd.DataFrame | None = None,
                 time_zone: str = "UTC", slots: tuple | None = None,
                 hop_s: float = 0.1) -> go.Figure:
    """The whole live figure from binned lanes and classifier windows.

    Args:
        bins: ``bin_lanes`` output (may be empty).
        windows: ``classify_samples`` output (may be empty); ``start`` in epoch s.
        gpus: GPU indices, one line per lane and GPU, in this order.
        bin_s: width of the bins (s), for the bin-centre x values.
        window_s: classifier window length (s), the ribbon's bar width and the server cells'
            width.
        height: figure height in pixels.
        uirevision: kept constant so zoom and legend toggles survive updates.
        server: ``server_cells`` output (cells of ``window_s``; may be empty) to draw the
            server lane under the ribbon; None: no server lane (``rows(False)``).
        order: GPU order of the load bands, top first (default ``gpus``).
        shots: ``SampleStore.screenshots`` rows to mark on the ribbon (None: none).
        time_zone: IANA name of the zone the browser shows the time axis in (its title).
        slots: ``(slot indices, phases)`` of the phase segments' ``hop_s`` slots: the
            ribbon's phase bars are one per slot (``hop_s`` wide) instead of per window.

    Returns:
        A figure whose traces follow ``trace_keys(gpus, server is not None)``; x values are
        epoch milliseconds on date axes.
    """
    has_server = server is not None
    R = rows(has_server)
    n_lanes = len(LANES)
    band_h = min(0.24, max(0.08, 0.03 * len(gpus)))
    if has_server:
        heights = ([0.045, 0.11, band_h] + [(0.72 - band_h) / n_lanes] * n_lanes + [0.125])
        specs = [[{}], [{"secondary_y": True}]] + [[{}]] * (n_lanes + 2)
    else:
        heights = [0.05, band_h] + [(0.82 - band_h) / n_lanes] * n_lanes + [0.13]
        specs = None
    fig = make_subplots(rows=R.n, cols=1, shared_xaxes=True, vertical_spacing=0.016,
                        row_heights=heights, specs=specs)
    order = list(gpus) if order is None else list(order)
    pts = _points(bins, windows, gpus, bin_s, window_s, server, order, slots, hop_s)
    width_ms = window_s * 1000.0
    phase_width_ms = (hop_s if slots is not None else window_s) * 1000.0
    marker_axis = None
    if has_server:
        sub = fig.get_subplot(R.server, 1)
        n_y = sum(1 for k in fig.layout if str(k).startswith("yaxis"))
        marker_axis = f"y{n_y + 1}"
        primary = sub.yaxis.plotly_name.replace("axis", "")
        fig.layout[f"yaxis{n_y + 1}"] = {"overlaying": primary, "range": [0, 1],
                                         "visible": False, "fixedrange": True}
        accept_axis = f"y{n_y + 2}"  # accept length: its own scale, right of the req axis
        acc = next(sl for sl in SERVER_LINES if sl.key == "accept_len")
        fig.layout[f"yaxis{n_y + 2}"] = {
            "overlaying": primary, "side": "right", "anchor": "free", "position": 1.0,
            "autoshift": False, "shift": 40, "rangemode": "tozero", "showgrid": False,
            "fixedrange": True, "nticks": 3, "zeroline": False,
            "tickfont": {"size": 10, "color": acc.color},
            "title": {"text": "tok/step", "font": {"size": 10, "color": acc.color},
                      "standoff": 2}}
        marker_x = sub.xaxis.plotly_name.replace("axis", "")
    for key in trace_keys(gpus, has_server):
        x, y, text = pts[key]
        kind = key[0]
        if kind == "phase":
            p = key[1]
            fig.add_trace(go.Bar(
                x=x, y=y, text=text, base=0.0, width=phase_width_ms, name=p,
                marker={"color": PHASE_COLORS[p], "line": {"width": 0}},
                textposition="none", hoverinfo="none",
                showlegend=False, legendgroup="phases"), row=R.ribbon, col=1)
        elif kind == "ribbon_hot":
            fig.add_trace(go.Bar(
                x=x, y=y, text=text, base=_RIBBON_HOT_BASE, width=width_ms,
                name="imbalanced", marker={"color": HOT_COLOR, "line": {"width": 0}},
                textposition="none", hoverinfo="none",
                showlegend=False), row=R.ribbon, col=1)
        elif kind == "selected":
            fig.add_trace(go.Bar(
                x=x, y=y, text=text, base=-0.06, width=width_ms, name="selected window",
                marker={"color": "rgba(0,0,0,0)", "line": {"width": 2.5, "color": "#111827"}},
                hoverinfo="skip", showlegend=False), row=R.ribbon, col=1)
        elif kind == "shots":
            sx, sy, stext, sdata = shot_points(shots)
            fig.add_trace(go.Scatter(
                x=sx, y=sy, text=stext, customdata=sdata, mode="markers", name="screenshot",
                marker={"symbol": "triangle-down", "size": 13, "color": SHOT_COLOR,
                        "line": {"width": 1, "color": "white"}},
                cliponaxis=False, showlegend=False,
                hovertemplate="screenshot %{text}<br>click to open<extra></extra>"),
                row=R.ribbon, col=1)
        elif kind == "band":
            g = key[1]
            fig.add_trace(go.Scatter(
                x=x, y=y, text=text, mode="lines", name=f"GPU {g} load", legendgroup=f"gpu{g}",
                showlegend=False, connectgaps=False, hoverinfo="none",
                line={"color": gpu_color(g), "width": 1.4}, fill="none"),
                row=R.bands, col=1)
        elif kind == "lane":
            col, g = key[1], key[2]
            li = next(i for i, lane in enumerate(LANES) if col in lane.columns)
            lane = LANES[li]
            suffix = f" {COLUMN_SHORT[col]}" if col in COLUMN_SHORT else ""
            fig.add_trace(go.Scatter(
                x=x, y=y, text=text, mode="lines", name=f"GPU {g}",
                legendgroup=f"gpu{g}", showlegend=(li == 0 and col == lane.columns[0]),
                line={"color": gpu_color(g), "width": 1.4, "dash": COLUMN_DASH.get(col, "solid")},
                connectgaps=False, hoverinfo="none", meta=f"GPU {g}{suffix}"),
                row=R.first_lane + li, col=1)
        elif kind == "share":
            g = key[1]
            fig.add_trace(go.Scatter(
                x=x, y=y, text=text, mode="lines", name=f"GPU {g} share",
                legendgroup=f"gpu{g}", showlegend=False, connectgaps=False,
                line={"color": gpu_color(g), "width": 1.6}, hoverinfo="none"),
                row=R.strip, col=1)
        elif kind == "hot":  # a wide translucent red stroke under a hot GPU's share
            g = key[1]
            fig.add_trace(go.Scatter(
                x=x, y=y, text=text, mode="lines", name=f"GPU {g} hot",
                legendgroup=f"gpu{g}", showlegend=False, connectgaps=False, opacity=0.45,
                line={"color": HOT_COLOR, "width": 7}, hoverinfo="skip"),
                row=R.strip, col=1)
        elif kind == "server":
            line = next(sl for sl in SERVER_LINES if sl.key == key[1])
            fmt = ".2f" if line.key == "accept_len" else ",.0f"
            trace = go.Scatter(
                x=x, y=y, text=text, mode="lines+markers", name=f"server {line.title}",
                showlegend=True, connectgaps=False,
                line={"color": line.color, "width": 1.6, "dash": line.dash, "shape": "hv"},
                marker={"size": 3, "color": line.color}, hoverinfo="none",
                meta=f"server {line.title} ({fmt}, {line.unit})")
            if line.key == "accept_len":
                fig.add_trace(trace.update(xaxis=marker_x, yaxis=accept_axis))
            else:
                fig.add_trace(trace, row=R.server, col=1, secondary_y=line.right)
        else:  # prefill markers along the top of the server lane
            i = key[1]
            _, label, size = PREFILL_SIZES[i]
            fig.add_trace(go.Scatter(
                x=x, y=y, text=text, mode="markers",
                name=("server prefill batch (size: new tokens)" if i == 1
                      else f"server prefill {label} tokens"),
                legendgroup="prefill", showlegend=i == 1, xaxis=marker_x, yaxis=marker_axis,
                marker={"size": size, "color": PHASE_COLORS["prefill"], "symbol": "circle",
                        "opacity": 0.9, "line": {"color": "#7a3d00", "width": 1}},
                cliponaxis=False, hovertemplate="%{text}<extra></extra>"))
    _style(fig, gpus, height, uirevision, R, order, time_zone)
    for shape in shot_lines(shots):
        fig.add_shape(shape)
    return fig


def share_axis_top(n_gpus: int) -> float:
    """Top of the share strip's y axis, %: three fair shares (100 for 1-3 GPUs), so eight
    GPUs' 12.5 % lines are not squashed at the bottom of a 0-100 axis."""
    return 100.0 if n_gpus <= 3 else 300.0 / n_gpus


def base_shapes(fig: go.Figure, gpus: list[int], R: Rows) -> list[dict]:
    """The figure's fixed shapes: the fair-share line of the load-share strip (``100 / n``
    %), none without GPUs."""
    if not gpus:
        return []
    sub = fig.get_subplot(R.strip, 1)
    xa, ya = sub.xaxis.plotly_name.replace("axis", ""), sub.yaxis.plotly_name.replace("axis", "")
    fair = 100.0 / len(gpus)
    return [{"type": "line", "xref": f"{xa} domain", "x0": 0, "x1": 1, "yref": ya, "y0": fair,
             "y1": fair, "line": {"color": "#999", "width": 1, "dash": "dash"}}]


def shot_lines(shots: pd.DataFrame | None) -> list[dict]:
    """A thin vertical line across every lane at each screenshot's capture time (the marker
    on the ribbon is ``shot_points``)."""
    x, _, _, _ = shot_points(shots)
    return [{"type": "line", "xref": "x", "x0": t, "x1": t, "yref": "paper", "y0": 0,
             "y1": 1, "layer": "below",
             "line": {"color": SHOT_COLOR, "width": 1, "dash": "dot"}} for t in x]


def band_axis(order: list[int]) -> dict:
    """Tick positions and labels of the load bands' y axis for a GPU order (top first)."""

    slots = band_slots(order)
    return {"range": [-0.08, max(len(order), 1) - 0.02],
            "tickvals": [slots[g] + 0.42 for g in order],
            "ticktext": [f"<span style='color:{gpu_color(g)}'><b>GPU {g}</b></span>"
                         for g in order],
            "ticklabelposition": "inside"}


def _style(fig: go.Figure, gpus: list[int], height: int, uirevision: str, R: Rows,
           order: list[int], time_zone: str = "UTC") -> None:
    fig.update_layout(
        height=height, uirevision=uirevision, template="plotly_white",
        barmode="overlay", bargap=0, hovermode="x", hoverdistance=-1, spikedistance=-1,
        hoverlabel={"font_size": 11, "namelength": -1},
        margin={"l": 124, "r": 84 if R.server else 16, "t": 30, "b": 36},
        font={"family": "Inter, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif", "size": 11},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.005, "xanchor": "left", "x": 0.0,
                    "font": {"size": 11}, "itemclick": "toggle", "itemdoubleclick": "toggleothers",
                    "title": {"text": "GPU (click to hide):", "font": {"size": 11}}},
        paper_bgcolor="white", plot_bgcolor="white",
    )
    fig.update_xaxes(type="date", showgrid=True, gridcolor="#eef0f3", showspikes=True,
                     spikemode="across", spikethickness=1, spikecolor="#888", spikedash="dot",
                     showline=False, ticks="", hoverformat="%H:%M:%S.%L")
    fig.update_xaxes(title={"text": f"time ({time_zone})", "font": {"size": 11}, "standoff": 4},
                     tickformatstops=[
                         {"dtickrange": [None, 1000], "value": "%H:%M:%S.%L"},
                         {"dtickrange": [1000, 86_400_000], "value": "%H:%M:%S"},
                         {"dtickrange": [86_400_000, None], "value": "%b %d"}],
                     row=R.n, col=1)
    fig.update_yaxes(showgrid=True, gridcolor="#eef0f3", zeroline=False, tickfont={"size": 10},
                     nticks=4, fixedrange=True)
    fig.update_yaxes(range=[0, SHOT_Y + 0.1], showticklabels=False,
                     showgrid=False, row=R.ribbon, col=1)
    labels = [(R.ribbon, "<b>phase</b>", "")]
    fig.update_yaxes(showgrid=False, nticks=None, row=R.bands, col=1, **band_axis(order),
                     tickfont={"size": 9})
    labels.append((R.bands, "<b>load by GPU</b>", "SM active 0-100 %<br>per band"))
    if R.server:
        fig.update_yaxes(rangemode="tozero", autorange=True, row=R.server, col=1,
                         secondary_y=False)
        fig.update_yaxes(rangemode="tozero", autorange=True, showgrid=False, row=R.server,
                         col=1, secondary_y=True,
                         title={"text": "req", "font": {"size": 10, "color": "#4b5563"},
                                "standoff": 2})
        key = (f"<span style='color:{PHASE_COLORS['prefill']}'>●</span> prefill batch"
               f"<br>right: req, tok/step")
        labels.append((R.server, "<b>Server</b>", f"tok/s<br>{key}"))
    for i, lane in enumerate(LANES):
        row = R.first_lane + i
        if lane.y_range is not None:
            fig.update_yaxes(range=list(lane.y_range), tickvals=[0, 50, 100], row=row, col=1)
        else:
            fig.update_yaxes(rangemode="tozero", autorange=True, row=row, col=1)
        sub = "<br>tx solid, rx dotted" if len(lane.columns) > 1 else ""
        labels.append((row, f"<b>{lane.title}</b>", lane.unit + sub))
    fair = 100.0 / len(gpus) if gpus else 50.0
    top = share_axis_top(len(gpus))
    fig.update_yaxes(range=[0, top], tickvals=sorted({0, round(fair, 1), round(top, 1)}),
                     row=R.strip, col=1)
    hot_key = f"<span style='color:{HOT_COLOR}'>red</span>: hot set"
    labels.append((R.strip, "<b>load share</b>", f"% of all load<br>{hot_key}"))
    for shape in base_shapes(fig, gpus, R):
        fig.add_shape(shape)
    for row, title, unit in labels:
        axis = fig.get_subplot(row, 1).yaxis
        domain = axis.domain
        mid = (domain[0] + domain[1]) / 2.0
        text = title + (f"<br><span style='font-size:10px;color:#6b7280'>{unit}</span>"
                        if unit else "")
        fig.add_annotation(text=text, xref="paper", yref="paper", x=0, y=mid, xshift=-34,
                           xanchor="right", yanchor="middle", showarrow=False, align="right",
                           font={"size": 11, "color": "#1f2937"})


# -- live updates ----------------------------------------------------------------------------


def extend_data(bins: pd.DataFrame, windows: pd.DataFrame, gpus: list[int], *,
                bin_s: float = 0.1, window_s: float = 0.5, view_s: float = 120.0,
                server: pd.DataFrame | None = None, order: list[int] | None = None,
                slots: tuple | None = None, hop_s: float = 0.1) -> list:
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

    Returns:
        ``[update, indices, max_points]``: ``update`` maps ``x``, ``y`` and ``text`` to one list
        per trace, ``indices`` lists every trace index, ``max_points`` has the same shape as
        ``update`` (plotly's per-trace form).
    """
    keys = trace_keys(gpus, server is not None)
    pts = _points(bins, windows, gpus, bin_s, window_s, server, order, slots, hop_s)
    lane_max = math.ceil(view_s / bin_s)
    win_max = math.ceil(view_s / window_s)
    slot_max = math.ceil(view_s / hop_s - 1e-9)
    update: dict[str, list] = {"x": [], "y": [], "text": []}
    limits: list[int] = []
    for key in keys:
        x, y, text = pts[key]
        update["x"].append(x)
        update["y"].append(y)
        update["text"].append(text)
        if key[0] == "hot":
            limits.append(3 * win_max)
        elif key[0] == "phase" and slots is not None:
            limits.append(slot_max)
        elif key[0] == "shots":  # never appended to: keep every marker
            limits.append(10**7)
        else:
            limits.append(win_max if _is_window_key(key) else lane_max)
    return [update, list(range(len(keys))), {k: list(limits) for k in update}]


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
    (``app.dashboard.views`` ``TraceData`` per key) into a figure built by ``build_figure``.

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


def shots_between(shots: pd.DataFrame | None, t0: float, t1: float) -> pd.DataFrame | None:
    """The rows of ``shots`` (``SampleStore.screenshots``) captured within ``[t0, t1]``
    (epoch s); rows without a capture time are left out."""
    if shots is None or shots.empty:
        return shots
    ts = pd.to_numeric(shots["capture_ts"], errors="coerce")
    return shots[(ts >= t0) & (ts <= t1)]


def fmt_span(s: float) -> str:
    """A duration for people: "850 ms", "4.2 s", "35 s", "12.5 min", "3.0 h", "30.0 d"."""
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 120:
        return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    if s < 172_800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def shot_points(shots: pd.DataFrame | None) -> tuple[list, list, list, list]:
    """x (epoch ms), y, text (file name and time source) and customdata (hash) of the
    screenshot markers: one per screenshot with a known capture time."""
    if shots is None or shots.empty:
        return [], [], [], []
    known = shots[pd.notna(shots["capture_ts"])]
    x = [round(float(t) * 1000.0, 1) for t in known["capture_ts"]]
    text = [f"{n} ({src})" for n, src in zip(known["name"], known["time_source"])]
    return x, [SHOT_Y] * len(x), text, list(known["sha256"])


def extend_point_count(payload: list) -> int:

    """Number of new x values in an ``extend_data`` payload (0: nothing to send)."""
    return sum(len(x) for x in payload[0]["x"])


# -- the header ------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeaderSummary:
    """What the header says about the newest complete window.

    Attributes:
        phase: ``idle`` / ``prefill`` / ``decode`` (``mixed``), or None before any window.
        confidence: the phase's score in [0, 1] (NaN when unknown).
        imbalance_ratio: max / mean GPU work (1.0 = balanced; NaN when no load).
        straggler_tax: 1 - mean/max busy time, the share of GPU time spent waiting (NaN when
            no load).
        hot_gpu: the busiest GPU of the hot set, or None when the window is not flagged.
        window_end: end of the window, epoch seconds (NaN before any window).
        hot_recent: ``{gpu: windows}`` flagged hot (in the hot set) in the summarised span.
        windows: number of windows summarised for ``hot_recent``.
        certainty: how sure, in words (``certainty`` of the newest window).
        hot_set: every hot GPU of the window (empty when not flagged).
        hot_share: mean share (%) of the summed work a GPU of the hot set holds (NaN when
            not flagged).
        cold_share: mean share (%) another GPU holds (NaN when not flagged).
    """

    phase: str | None
    confidence: float
    imbalance_ratio: float
    straggler_tax: float
    hot_gpu: int | None
    window_end: float
    hot_recent: dict[int, int]
    windows: int
    certainty: str = ""
    hot_set: tuple[int, ...] = ()
    hot_share: float = math.nan
    cold_share: float = math.nan

    def hot_text(self) -> str:
        """The hot set in words: ``"GPUs 1, 3, 5, 7 — 18 % each vs 7 %"``, ``"GPU 1 — 71 %
        vs 29 %"``, or ``""`` when the window is not flagged."""
        hs = self.hot_set or ((self.hot_gpu,) if self.hot_gpu is not None else ())
        return hot_set_text(hs, self.hot_share, self.cold_share)

    def text(self) -> str:
        """One line, e.g. ``decode (97 %) | imbalance 1.43x | hot GPUs 1, 3, 5, 7 — 18 % each
        vs 7 % | straggler tax 28 %``."""
        if self.phase is None:
            return "waiting for the first complete window"
        hot = f"hot {self.hot_text()}" if self.hot_text() else "no hot GPU"
        return (f"{self.phase} ({_fmt(self.confidence * 100, '.0f')} %) | imbalance "
                f"{_fmt(self.imbalance_ratio, '.2f')}x | {hot} | straggler tax "
                f"{_fmt(self.straggler_tax * 100, '.0f')} %")


def hot_counts(sets) -> dict[int, int]:
    """``{gpu: windows}``: how many of the hot sets ``sets`` hold each GPU, by GPU."""
    counts: dict[int, int] = {}
    for hs in sets:
        for g in hs or ():
            counts[int(g)] = counts.get(int(g), 0) + 1
    return dict(sorted(counts.items()))


def header_summary(windows: pd.DataFrame, recent: int = 20) -> HeaderSummary:
    """Summarise the newest window of ``windows`` (classifier output, sorted by ``start``).

    Args:
        windows: classifier windows; may be empty.
        recent: how many trailing windows ``hot_recent`` counts over.
    """
    from ..classifier.summary import window_hot_sets

    if windows is None or windows.empty:
        return HeaderSummary(None, math.nan, math.nan, math.nan, None, math.nan, {}, 0)
    last = windows.iloc[-1]
    hot = last.get("hot_gpu")
    hot_i = int(hot) if hot is not None and math.isfinite(float(hot)) else None
    tail = windows.iloc[-recent:]
    sets = window_hot_sets(tail)
    hot_set = sets[-1]
    return HeaderSummary(
        phase=str(last["phase"]),
        confidence=float(last["confidence"]),
        imbalance_ratio=float(last["imbalance_ratio"]),
        straggler_tax=float(last["straggler_tax"]),
        hot_gpu=hot_i if hot_set else None,
        window_end=float(last["end"]),
        hot_recent=hot_counts(sets),
        windows=len(tail),
        certainty=certainty(last.to_dict()),
        hot_set=hot_set,
        hot_share=_float(last.get("hot_share")) if hot_set else math.nan,
        cold_share=_float(last.get("cold_share")) if hot_set else math.nan,
    )


def certainty(row: dict) -> str:
    """How sure the label of a window is, in words: ``"97 % sure"``, or, when the sequence
    smoothing chose another phase than the window's own scores (``p_<phase>``) favour,
    ``"by context (this window alone: decode 62 %)"``."""
    phase = str(row.get("phase"))
    scores = {}
    for p in RIBBON_PHASES:
        try:
            v = float(row.get(f"p_{p}", math.nan))
        except (TypeError, ValueError):
            v = math.nan
        if math.isfinite(v):
            scores[p] = v
    conf = row.get("confidence")
    if scores:
        top = max(scores, key=scores.get)
        if top != phase and scores[top] > scores.get(phase, 0.0) + 1e-9:
            return f"by context (this window alone: {top} {scores[top]:.0%})"
    try:
        c = float(conf)
    except (TypeError, ValueError):
        return ""
    return f"{c:.0%} sure" if math.isfinite(c) else ""
