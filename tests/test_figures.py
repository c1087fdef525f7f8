"""Figure builders and the live cursor logic, on the bundled real H200 trace; no browser."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from tealeaves.app import figures as F
from tealeaves.app.dashboard.config import DashboardConfig
from tealeaves.app.dashboard.live import LiveView
from tealeaves.classifier import classify_samples
from tealeaves.data import bundled_labels_path, bundled_trace_path
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import read_labels, read_trace

BIN_S = 0.1
WINDOW_S = 0.5


@pytest.fixture(scope="module")
def trace():
    return read_trace(bundled_trace_path())


@pytest.fixture(scope="module")
def first_minute(trace):
    """The first 60 s of the bundled trace: idle, prefill, decode, GPU 0 hot, GPU 1 hot."""
    s = trace.samples
    t0 = float(s["timestamp"].min())
    return s[s["timestamp"] < t0 + 60.0].reset_index(drop=True)


def _bins_for(samples: pd.DataFrame, gpus: list[int]) -> pd.DataFrame:
    ts = samples["timestamp"].to_numpy()
    k0 = F.bin_index(ts.min(), BIN_S) + 1
    k1 = F.bin_index(ts.max(), BIN_S)
    return F.bin_lanes(samples, gpus, k0, k1, BIN_S, 0.35)


@pytest.fixture(scope="module")
def built(first_minute, trace):
    gpus = [0, 1]
    bins = _bins_for(first_minute, gpus)
    windows = classify_samples(first_minute, trace.devices, window_s=WINDOW_S)
    fig = F.build_figure(bins, windows, gpus, bin_s=BIN_S, window_s=WINDOW_S)
    return fig, bins, windows


def _traces(fig: go.Figure, gpus: list[int], kind: str) -> list[tuple[tuple, object]]:
    return [(k, t) for k, t in zip(F.trace_keys(gpus), fig.data) if k[0] == kind]


def _row_yaxis(fig: go.Figure, row: int) -> str:
    anchor = fig.get_subplot(row, 1).yaxis.anchor  # the x axis; its y partner is ours
    return "y" + anchor[1:]


def test_one_lane_per_metric_with_one_trace_per_gpu(built):
    fig, bins, _ = built
    keys = F.trace_keys([0, 1])
    assert len(fig.data) == len(keys)
    for i, lane in enumerate(F.LANES):
        yaxis = _row_yaxis(fig, F.FIRST_LANE_ROW + i)
        in_lane = [t for t in fig.data if t.yaxis == yaxis]
        assert len(in_lane) == 2 * len(lane.columns), lane.key
        assert sorted({t.name for t in in_lane}) == ["GPU 0", "GPU 1"]
        for t in in_lane:
            assert len(t.x) == len(bins) > 500
            assert sum(v is not None for v in t.y) > 0.95 * len(bins), (lane.key, t.name)
    # every lane shares the one time axis, which is a date axis in real (UTC) time
    assert fig.layout.xaxis.type == "date"
    assert {t.xaxis for t in fig.data} <= {f"x{i}" if i > 1 else "x"
                                           for i in range(1, F.N_ROWS + 1)}
    first = fig.data[F.trace_keys([0, 1]).index(("lane", "power_w", 0))]
    assert pd.Timestamp(first.x[0], unit="ms").year >= 2024


def test_lane_values_in_units(built, first_minute):
    fig, _, _ = built
    keys = F.trace_keys([0, 1])
    pcie = fig.data[keys.index(("lane", "pcie_rx_bytes_per_s", 0))]
    raw = first_minute.loc[first_minute["gpu"] == 0, "pcie_rx_bytes_per_s"].max() / 1e6
    shown = max(v for v in pcie.y if v is not None)
    assert 0.3 * raw <= shown <= raw + 1e-6  # MB/s, a bin mean never above the raw maximum
    power = fig.data[keys.index(("lane", "power_w", 1))]
    assert 50 < max(v for v in power.y if v is not None) <= 750  # W on an H200
    for row, unit in ((F.FIRST_LANE_ROW, "%"), (F.FIRST_LANE_ROW + 3, "MB/s"),
                      (F.FIRST_LANE_ROW + 4, "W")):
        mid = sum(fig.get_subplot(row, 1).yaxis.domain) / 2
        label = [a.text for a in fig.layout.annotations if abs(a.y - mid) < 1e-9]
        assert label and unit in label[0]


def test_ribbon_covers_each_window_with_its_phase_colour(built):
    fig, _, windows = built
    ribbon = _traces(fig, [0, 1], "phase")
    assert [k[1] for k, _ in ribbon] == list(F.RIBBON_PHASES)
    centers = (windows["start"].to_numpy() + WINDOW_S / 2) * 1000
    # each phase trace holds only its own windows (no None placeholders: plotly styles every
    # bar point, gaps included), and together they cover every window exactly once
    drawn = np.zeros((len(ribbon), len(centers)), dtype=bool)
    for row, (key, t) in enumerate(ribbon):
        assert t.width == pytest.approx(WINDOW_S * 1000)
        assert all(y == 1.0 for y in t.y) and len(t.y) == len(t.x)
        i = np.searchsorted(centers, np.asarray(t.x, dtype=float) - 0.11)
        np.testing.assert_allclose(centers[i], np.asarray(t.x, dtype=float), atol=0.11)
        drawn[row, i] = True
        assert t.marker.color == F.PHASE_COLORS[key[1]]
        np.testing.assert_array_equal(drawn[row], windows["phase"].to_numpy() == key[1])
    assert (drawn.sum(axis=0) == 1).all(), "every window is exactly one band"
    assert {"idle", "prefill", "decode"} <= set(windows["phase"])
    assert len({F.PHASE_COLORS[p] for p in ("idle", "prefill", "decode")}) == 3
    # the imbalanced bar sits above exactly the flagged windows
    hot = _traces(fig, [0, 1], "ribbon_hot")[0][1]
    np.testing.assert_array_equal([y is not None for y in hot.y],
                                  windows["imbalanced"].to_numpy(dtype=bool))
    # the strip's red marks name the hot GPU of each flagged window
    for g in (0, 1):
        marks = _traces(fig, [0, 1], "hot")[g][1]
        assert any(f"GPU {g} hot" in t for t in marks.text)


def test_gpm_gaps_are_bridged_but_missing_data_is_not_zero(first_minute):
    gpus = [0, 1]
    # GPM columns are NaN on every other sample (20 Hz sweeps, 10 Hz GPM): no gaps from that
    bins = _bins_for(first_minute, gpus)
    assert first_minute["sm_active"].isna().mean() > 0.4
    assert bins[("sm_active", 0)].notna().all()
    # a real 3-s hole in GPU 1's SM activity stays a hole: NaN/None, never 0
    holed = first_minute.copy()
    t0 = float(holed["timestamp"].min())
    hole = (holed["gpu"] == 1) & holed["timestamp"].between(t0 + 30, t0 + 33)
    holed.loc[hole, "sm_active"] = np.nan
    fig = F.build_figure(_bins_for(holed, gpus), pd.DataFrame(), gpus)
    t = fig.data[F.trace_keys(gpus).index(("lane", "sm_active", 1))]
    x = np.asarray(t.x, dtype=float) / 1000 - t0
    y = list(t.y)
    inside = [v for xi, v in zip(x, y) if 30.5 < xi < 32.9]
    assert inside and all(v is None for v in inside)
    outside = [v for xi, v in zip(x, y) if 25 < xi < 29.5 or 33.5 < xi < 38]
    assert outside and all(v is not None and v > 10 for v in outside)
    # the other GPU is untouched
    t0_trace = fig.data[F.trace_keys(gpus).index(("lane", "sm_active", 0))]
    assert all(v is not None for v in t0_trace.y[1:])


def test_imbalance_strip_shares_and_hot_marks(built):
    fig, _, windows = built
    shares = F.gpu_shares(windows, [0, 1])
    busy = windows["load_mean"] >= F.MIN_SHARE_LOAD
    np.testing.assert_allclose(shares[busy].sum(axis=1), 100.0)
    assert shares[~busy].isna().all().all()
    hot1 = windows["hot_gpu"] == 1
    assert hot1.sum() > 5 and (shares.loc[hot1, 1] > shares.loc[hot1, 0]).all()
    strip_y = _row_yaxis(fig, F.STRIP_ROW)
    share_traces = [t for k, t in _traces(fig, [0, 1], "share")]
    assert all(t.yaxis == strip_y for t in share_traces)
    marks = {k[1]: t for k, t in _traces(fig, [0, 1], "hot")}
    n_marked = {g: sum(v is not None for v in t.y) // 2 for g, t in marks.items()}
    assert n_marked == {0: int((windows["hot_gpu"] == 0).sum()), 1: int(hot1.sum())}


def test_header_names_phase_and_hot_gpu(trace, first_minute):
    labels = read_labels(bundled_labels_path())
    stretch = labels[(labels["phase"] == "decode") & (labels["hot_gpu"] == 1)].iloc[0]
    until = (stretch["start"] + stretch["end"]) / 2
    part = first_minute[first_minute["timestamp"] < until]
    windows = classify_samples(part, trace.devices, window_s=WINDOW_S)
    s = F.header_summary(windows)
    assert s.phase == "decode" and s.hot_gpu == 1
    assert 1.15 < s.imbalance_ratio < 3 and 0 < s.straggler_tax < 1
    text = s.text()
    assert text.startswith("decode") and "hot GPU 1" in text and "imbalance 1." in text
    assert 1 in s.hot_recent
    # an idle window names no hot GPU
    idle = classify_samples(first_minute[first_minute["timestamp"]
                                         < first_minute["timestamp"].min() + 5],
                            trace.devices, window_s=WINDOW_S)
    s_idle = F.header_summary(idle)
    assert s_idle.phase == "idle" and s_idle.hot_gpu is None and "no hot GPU" in s_idle.text()
    assert F.header_summary(pd.DataFrame()).text().startswith("waiting")


def test_extend_data_appends_what_a_rebuild_would_draw(first_minute, trace):
    gpus = [0, 1]
    ts = first_minute["timestamp"].to_numpy()
    k0, k_mid, k1 = F.bin_index(ts.min(), BIN_S) + 1, F.bin_index(ts.min() + 40, BIN_S), \
        F.bin_index(ts.max(), BIN_S)
    whole = F.bin_lanes(first_minute, gpus, k0, k1, BIN_S)
    head = F.bin_lanes(first_minute, gpus, k0, k_mid, BIN_S)
    tail = F.bin_lanes(first_minute, gpus, k_mid, k1, BIN_S)
    pd.testing.assert_frame_equal(pd.concat([head, tail]), whole)
    windows = classify_samples(first_minute, trace.devices, window_s=WINDOW_S)
    split = ts.min() + 40
    w_head, w_tail = windows[windows["start"] < split], windows[windows["start"] >= split]
    fig = F.build_figure(head, w_head, gpus)
    payload = F.extend_data(tail, w_tail, gpus, view_s=120.0)
    update, indices, max_points = payload
    assert indices == list(range(len(fig.data)))
    assert set(update) == set(max_points) == {"x", "y", "text", "z"}
    keys = F.trace_keys(gpus)
    assert max_points["x"][keys.index(("lane", "power_w", 0))] == 1200
    assert max_points["x"][keys.index(("phase", "decode"))] == 240
    assert F.extend_point_count(payload) > 0
    ref = F.build_figure(whole, windows, gpus)
    heat = keys.index(("heat",))
    # the heatmap gains a column of every GPU's load per window; its rows stay
    assert update["y"][heat] == [] and len(update["z"][heat]) == len(w_tail)
    assert max_points["z"][heat] == max_points["x"][heat] == 240
    assert max_points["y"][heat] >= 10**6  # its rows are never trimmed
    cols = [list(c) for c in fig.data[heat].z] + update["z"][heat]
    assert cols == [list(c) for c in ref.data[heat].z]
    assert all(z == [] for i, z in enumerate(update["z"]) if i != heat)
    for i, key in enumerate(keys):
        if key[0] == "heat":
            assert list(fig.data[i].x) + update["x"][i] == list(ref.data[i].x)
            continue
        got_y = list(fig.data[i].y) + update["y"][i]
        assert got_y == list(ref.data[i].y), key
        assert list(fig.data[i].x) + update["x"][i] == list(ref.data[i].x), key
        if key[0] == "hot":  # the marks' text stays aligned with x
            assert len(update["text"][i]) == len(update["x"][i])


def _eight_gpus(first_minute: pd.DataFrame, base: float, step: float) -> pd.DataFrame:
    """The two real GPUs copied onto eight, GPU g's SM activity scaled by ``base + step*g``."""
    parts = []
    for g in range(8):
        p = first_minute[first_minute["gpu"] == g % 2].copy()
        p["gpu"] = g
        p["sm_active"] = p["sm_active"] * (base + step * g)
        parts.append(p)
    return pd.concat(parts).sort_values(["timestamp", "gpu"]).reset_index(drop=True)


def test_eight_gpus(first_minute):
    """Plan for TP8: eight GPUs, eight distinct colours, one trace per GPU in every lane."""
    samples = _eight_gpus(first_minute, 0.6, 0.05)
    gpus = list(range(8))
    windows = classify_samples(samples, None, window_s=WINDOW_S)
    assert [c for c in windows.columns if c.startswith("load_g")] == [f"load_g{g}"
                                                                      for g in gpus]
    fig = F.build_figure(_bins_for(samples, gpus), windows, gpus)
    yaxis = _row_yaxis(fig, F.FIRST_LANE_ROW)
    lane = [t for t in fig.data if t.yaxis == yaxis]
    assert [t.name for t in lane] == [f"GPU {g}" for g in gpus]
    assert len({t.line.color for t in lane}) == 8
    assert sum(bool(t.showlegend) for t in fig.data) == 8
    shares = F.gpu_shares(windows, gpus).dropna()
    np.testing.assert_allclose(shares.sum(axis=1), 100.0)
    # copies of one real GPU scaled up by GPU index keep that order in their shares
    evens, odds = shares[[0, 2, 4, 6]].to_numpy(), shares[[1, 3, 5, 7]].to_numpy()
    assert (np.diff(evens, axis=1) > 0).all() and (np.diff(odds, axis=1) > 0).all()


def test_heatmap_shades_each_gpu_behind_its_band_in_the_band_order(first_minute):
    """Eight GPUs, busiest first: the heatmap's row behind each band holds that GPU's load per
    window (the same numbers as the band line), rows ascending, unknown load blank."""
    samples = _eight_gpus(first_minute, 0.3, 0.1)
    gpus = list(range(8))
    windows = classify_samples(samples, None, window_s=WINDOW_S)
    order = [7, 6, 5, 4, 3, 2, 1, 0]  # busiest (GPU 7) on top
    fig = F.build_figure(_bins_for(samples, gpus), windows, gpus, order=order)
    keys = F.trace_keys(gpus)
    heat = fig.data[keys.index(("heat",))]
    assert heat.type == "heatmap" and heat.transpose and not heat.showscale
    ys, row_gpus = F.heat_rows(order)
    assert list(heat.y) == ys == sorted(ys)
    assert row_gpus[-1] == 7 and row_gpus[0] == 0  # the top row is the top band's GPU
    slots = F.band_slots(order)
    for y, g in zip(ys, row_gpus):  # each row sits inside its GPU's band
        assert slots[g] <= y <= slots[g] + 1
    assert len(heat.z) == len(heat.x) == len(windows)
    for col, (_, w) in zip(heat.z, windows.iterrows()):
        want = [None if not np.isfinite(w[f"load_g{g}"]) else
                round(float(np.clip(w[f"load_g{g}"], 0, 100)), 1) for g in row_gpus]
        assert list(col) == want
    busy = np.nanmean(np.array([[np.nan if v is None else v for v in c] for c in heat.z],
                               dtype=float), axis=0)
    assert busy[-1] > busy[0]  # GPU 7 (top row) is shaded darker than GPU 0


def test_heat_columns_leave_missing_windows_blank():
    """A pause in the windows gets a blank column (plotly.js would stretch the last cell across
    it), and so does a skip before the first new window of a live extension."""
    w = 0.5
    starts = np.array([10.0, 10.5, 12.0, 13.0])  # windows 20, 21, then 24 (22, 23 missing), 26
    loads = np.array([[10.0, np.nan], [120.0, 30.0], [-5.0, 50.0], [1.0, 2.0]])
    x, z = F.heat_columns(starts, loads, w)
    blank = [None, None]
    # a blank in the first and in the last missing window of each gap (one if only one is
    # missing): plotly.js meets neighbouring cells halfway, so neither side spills over
    assert z == [[10.0, None], [100.0, 30.0], blank, blank, [0.0, 50.0], blank, [1.0, 2.0]]
    assert x == [10250.0, 10750.0, 11250.0, 11750.0, 12250.0, 12750.0, 13250.0]
    assert F.heat_blanks(np.array([20, 21, 24, 26])) == 3 == len(x) - len(starts)
    x2, z2 = F.heat_columns(starts[:1], loads[:1], w, after_j=18)
    assert z2 == [blank, blank, [10.0, None]] and x2 == [9250.0, 9750.0, 10250.0]
    assert F.heat_columns(starts[:1], loads[:1], w, after_j=20)[1] == [[10.0, None]]
    assert F.heat_columns(np.array([]), np.zeros((0, 2)), w) == ([], [])
    # an infinite load is no reading (blank), not a full or empty cell
    assert F.heat_columns(starts[:1], np.array([[np.inf, -np.inf]]), w)[1] == [[None, None]]


def test_bin_lanes_rejects_bad_width(first_minute):
    with pytest.raises(ValueError, match="bin_s"):
        F.bin_lanes(first_minute, [0, 1], 0, 10, 0.0)


# -- the live cursor (app.dashboard.LiveView) on a real store, no browser --------------------


def test_live_view_sends_only_new_complete_bins(tmp_path, trace, first_minute):
    store = SampleStore(tmp_path / "s.db")
    store.put_devices(trace.devices)
    t0 = float(first_minute["timestamp"].min())
    store.append(first_minute[first_minute["timestamp"] < t0 + 30])
    live = LiveView(store, DashboardConfig(source="test"))
    live.history.min_update_s = 0.0  # every call reads the store (no 0.1-s throttle)
    snap = live.snapshot()
    st = snap.state
    assert snap.figure is not None and st["gpus"] == [0, 1]
    lane_i = F.trace_keys([0, 1]).index(("lane", "power_w", 0))
    n_before = len(snap.figure.data[lane_i].x)
    assert 280 <= n_before <= 300
    # nothing new: no payload, the cursor stays
    same = live.advance(st)
    assert same.extend is None and same.figure is None and same.state["k"] == st["k"]
    # five more seconds: about 50 bins and 10 windows, continuing exactly where the page is
    store.append(first_minute[(first_minute["timestamp"] >= t0 + 30)
                              & (first_minute["timestamp"] < t0 + 35)])
    step = live.advance(st)
    assert step.figure is None and step.extend is not None
    update = step.extend[0]
    new_x = update["x"][lane_i]
    assert 45 <= len(new_x) <= 52
    assert new_x[0] == pytest.approx(snap.figure.data[lane_i].x[-1] + BIN_S * 1000, abs=0.2)
    ph = F.trace_keys([0, 1]).index(("phase", "decode"))
    assert st["m"] is not None  # the ribbon draws the 0.1-s segments: a point per slot
    assert 45 <= len(update["x"][ph]) <= 52
    assert step.state["m"] - st["m"] == len(update["x"][ph])
    assert step.state["k"] > st["k"] and step.state["j"] > st["j"]
    assert step.summary is not None and step.summary.phase == "decode"
    # a page that fell far behind gets a whole new figure
    stale = {**step.state, "k": step.state["k"] - 2000, "cursor": 0}
    assert live.advance(stale).figure is not None
    store.close()


def test_background_updates_keep_the_history_and_the_tick_only_reads(tmp_path, trace,
                                                                        first_minute):
    """The served dashboard's thread (``start_updates``) reads new samples while a page is
    watching; a tick then reads the history without updating it; a failing update ends the
    thread and the ticks update (and fail) themselves again."""
    import time as _time

    store = SampleStore(tmp_path / "bg.db")
    store.put_devices(trace.devices)
    t0 = float(first_minute["timestamp"].min())
    store.append(first_minute[first_minute["timestamp"] < t0 + 20])
    live = LiveView(store, DashboardConfig(source="test"))
    h = live.history
    st = live.snapshot().state
    k0 = h.k_next
    live.start_updates(period_s=3600.0)  # alive, but not due: only the ticks could update
    try:
        store.append(first_minute[(first_minute["timestamp"] >= t0 + 20)
                                  & (first_minute["timestamp"] < t0 + 25)])
        h._last_update = -math.inf
        step = live.advance(st)
        assert h.k_next == k0 and step.extend is None  # the tick read, it did not update
    finally:
        live.stop_updates()
    live.start_updates(period_s=0.05)
    try:
        live.advance(st)  # a page is watching
        deadline = _time.monotonic() + 10
        # a followed view ends at the lanes' edge (``LiveView._ends``: the newest bin); the
        # labelled rows stop at their own cursors, a "labelling…" mark to that edge
        k_drawn = int(st["k"])
        while live._ends(1).k < k_drawn + 45 and _time.monotonic() < deadline:
            _time.sleep(0.05)
        assert h.k_next >= k0 + 45  # the 5 s appended above, read by the thread alone
        step = live.advance(st)
        assert step.extend is not None and k_drawn + 45 <= step.state["k"] <= h.k_next
        # a failing update ends the thread; the next tick updates itself and raises
        store.append(first_minute[(first_minute["timestamp"] >= t0 + 25)
                                  & (first_minute["timestamp"] < t0 + 30)])

        def broken(*a, **k):
            raise RuntimeError("store gone")
        h._catch_up = broken
        live._updater.join(timeout=10)
        assert not live._updater.is_alive()
        h._last_update = -math.inf
        with pytest.raises(RuntimeError, match="store gone"):
            live.advance(step.state)
    finally:
        live.stop_updates()
        store.close()


def test_live_view_on_empty_store_waits(tmp_path):
    store = SampleStore(tmp_path / "empty.db")
    live = LiveView(store, DashboardConfig())
    snap = live.snapshot()
    assert snap.state["k"] is None and snap.summary.phase is None
    assert live.advance(snap.state).figure is None  # still nothing stored
    store.close()


def test_config_validation():
    with pytest.raises(ValueError):
        DashboardConfig(bin_s=0.3, window_s=0.5)
    with pytest.raises(ValueError):
        DashboardConfig(view_s=0)
    assert math.isclose(DashboardConfig().window_s / DashboardConfig().bin_s, 5)


def test_fmt_span_picks_its_unit_after_rounding():
    cases = {0.85: "850 ms", 0.9996: "1.0 s", 4.24: "4.2 s", 119.6: "2.0 min", 7199: "2.0 h",
             172799: "2.0 d", 35: "35 s"}
    assert {s: F.fmt_span(s) for s in cases} == cases
    assert {F.fmt_span(v) for v in (float("nan"), -1.0, None)} == {"n/a"}


def test_history_rows_lose_no_piece_when_read_while_appended():
    """The update thread appends pieces while pages read: every piece stays (a read's
    concatenation once replaced the parts list after an append it had not included)."""
    import threading

    from tealeaves.app.dashboard.history import _Rows

    rows = _Rows()
    n = 3000
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            rows.frame()

    readers = [threading.Thread(target=read) for _ in range(2)]
    for r in readers:
        r.start()
    try:
        for i in range(n):
            rows.append(pd.DataFrame({"v": [i]}, index=[i]))
    finally:
        done.set()
        for r in readers:
            r.join()
    f = rows.frame()
    assert len(f) == n and f["v"].tolist() == list(range(n))


def test_a_tick_sends_every_window_even_when_the_update_thread_moves_the_history(
        tmp_path, trace):
    """The update thread can finish an update while a tick reads: the tick must send every
    window up to the cursor it returns (it once read ``j_next`` twice and skipped those the
    thread added in between)."""
    s = trace.samples
    t0 = float(s["timestamp"].min())
    store = SampleStore(tmp_path / "race.db")
    store.put_devices(trace.devices)
    store.append(s[s["timestamp"] < t0 + 20])
    live = LiveView(store, DashboardConfig(source="test"))
    h = live.history
    st = live.snapshot(60.0).state
    live.start_updates(period_s=3600.0)  # alive: ticks only read
    try:
        store.append(s[(s["timestamp"] >= t0 + 20) & (s["timestamp"] < t0 + 22)])
        h.update(force=True)
        store.append(s[(s["timestamp"] >= t0 + 22) & (s["timestamp"] < t0 + 24)])
        orig, sent = h.windows, []

        def windows(j0=None, j1=None):
            out = orig(j0, j1)
            if not sent:  # the thread finishes an update right here
                sent.extend(int(j) for j in out.index)
                h.update(force=True)
            return out
        h.windows = windows
        step = live.advance(st)
        assert sent and step.state["j"] == sent[-1] + 1  # nothing skipped
        h.windows = orig
        nxt = live.advance(step.state)  # the next tick sends what the thread added
        assert nxt.extend is not None and nxt.state["j"] > step.state["j"]
    finally:
        live.stop_updates()
        store.close()


# -- phase shares of time (issue 34) ---------------------------------------------------------


def _calibrated_mixed(windows: pd.DataFrame) -> tuple[pd.DataFrame, pd.Index]:
    """``windows`` as a share model would give them (``attrs["shares"] == "calibrated"``):
    every window all of its phase, but a window next to a prefill one and not prefill itself
    55 % its phase, 40 % prefill, 5 % the third ("mixed"); returns the frame and the mixed
    windows' index."""
    from tealeaves.classifier.shares import verdict

    w = windows.copy()
    phase = w["phase"].to_numpy()
    sh = np.column_stack([phase == p for p in ("idle", "prefill", "decode")]).astype(float)
    near = (phase != "prefill") & ((np.roll(phase, 1) == "prefill")
                                   | (np.roll(phase, -1) == "prefill"))
    sh[near] = np.where(sh[near] > 0, 0.55, 0.05)
    sh[near, 1] = 0.40
    for k, p in enumerate(("idle", "prefill", "decode")):
        w[f"share_{p}"] = sh[:, k]
    w["verdict"] = verdict(sh)
    w.attrs["shares"] = "calibrated"
    return w, w.index[near]


def test_a_mixed_window_is_striped_with_the_phase_it_is_mixed_with(built, first_minute):
    """Issue 34: a window whose verdict is mixed keeps its phase's bar and gets stripes in the
    colour of the phase it is mixed with, in the whole figure and in each live append."""
    _, bins, windows = built
    w, mixed = _calibrated_mixed(windows)
    assert len(mixed) >= 2
    assert list(F.mixed_with(w)[w.index.isin(mixed)]) == ["prefill"] * len(mixed)
    assert not F.mixed_with(w)[~w.index.isin(mixed)].any()
    fig = F.build_figure(bins, w, [0, 1], bin_s=BIN_S, window_s=WINDOW_S)
    keys = F.trace_keys([0, 1])
    stripes = fig.data[keys.index(("mixed", "prefill"))]
    centres = np.round((w.loc[mixed, "start"].to_numpy() + WINDOW_S / 2) * 1000, 1)
    assert list(stripes.x) == list(centres) and set(stripes.y) == {1.0}
    assert stripes.marker.pattern.shape == "/"
    assert stripes.marker.pattern.fgcolor == F.PHASE_COLORS["prefill"]
    assert stripes.width == WINDOW_S * 1000 and stripes.yaxis == fig.data[0].yaxis
    for p in ("idle", "decode"):  # nothing mixed with them
        assert len(fig.data[keys.index(("mixed", p))].x) == 0
    # the windows' own bars are unchanged: every window one whole bar of its phase
    decode = fig.data[keys.index(("phase", "decode"))]
    assert len(decode.x) == int((w["phase"] == "decode").sum())
    # windows without verdicts (a classifier before issue 34) draw no stripes
    old = F.build_figure(bins, w.drop(columns=["verdict"]), [0, 1], bin_s=BIN_S,
                         window_s=WINDOW_S)
    assert all(len(old.data[keys.index(("mixed", p))].x) == 0 for p in F.MIXED_PHASES)
    update, _, max_points = F.extend_data(bins.iloc[:0], w, [0, 1], bin_s=BIN_S,
                                          window_s=WINDOW_S, mixed_in_view={"prefill": 3})
    i = keys.index(("mixed", "prefill"))
    assert update["x"][i] == list(centres) and max_points["x"][i] == 3


def test_zoomed_out_ribbon_bars_stack_the_calibrated_shares(built):
    """Issue 34: a bar of several windows shows each phase's share of the bar's time: the
    windows' calibrated shares where they carry them, the shares of their labels otherwise."""
    from tealeaves.app.figures.series.downsample import window_traces

    _, _, windows = built
    w, mixed = _calibrated_mixed(windows.reset_index(drop=True))
    n_out = math.ceil(len(w) / 4)  # four windows a bar
    cal = window_traces(w, [0, 1], WINDOW_S, n_out)
    assert cal[("phase", "idle")].extra["factor"] == 4
    bucket = w.index.to_numpy() // 4
    want = w.groupby(bucket)["share_prefill"].mean().to_numpy()
    got = np.nan_to_num(cal[("phase", "prefill")].y)
    np.testing.assert_allclose(got, want, atol=1e-9)
    assert not np.allclose(want, w.assign(p=w["phase"] == "prefill").groupby(bucket)["p"]
                           .mean().to_numpy())  # the mixed windows moved them
    total = sum(np.nan_to_num(cal[("phase", p)].y) for p in F.RIBBON_PHASES)
    np.testing.assert_allclose(total, 1.0)
    for p in F.MIXED_PHASES:  # several windows a bar: the stacked shares show the mix
        assert len(cal[("mixed", p)].x) == 0
    scores = windows.reset_index(drop=True)
    scores.attrs["shares"] = "rules' scores"  # no share model: the labels' shares
    plain = window_traces(scores, [0, 1], WINDOW_S, n_out)
    want = (scores["phase"] == "prefill").groupby(bucket).mean()
    np.testing.assert_allclose(np.nan_to_num(plain[("phase", "prefill")].y), want.to_numpy())
    # a bar per window: whole bars, and stripes over the mixed ones
    one = window_traces(w, [0, 1], WINDOW_S, 10 * len(w))
    assert set(np.nan_to_num(one[("phase", "decode")].y)) <= {0.0, 1.0}
    np.testing.assert_allclose(one[("mixed", "prefill")].x,
                               w.loc[mixed, "start"].to_numpy() + WINDOW_S / 2)


def test_the_header_of_a_range_gives_its_calibrated_shares_and_what_they_stood_on(built):
    """Issue 34: a range's header gives the phases' shares of its time (the windows' mean
    calibrated shares, saying so; window counts without them) and the counters and rate its
    verdicts stood on; the hover panel names the window's shares and verdict."""
    from tealeaves.app.dashboard import ids
    from tealeaves.app.dashboard.header_panel import header_cells
    from tealeaves.app.dashboard.panels import hover_panel

    _, _, windows = built
    w, mixed = _calibrated_mixed(windows)
    t0, t1 = float(w["start"].min()), float(w["end"].max())
    s = F.range_summary(w, t0, t1)
    assert s.share_basis == "calibrated" and s.inputs == w.attrs["inputs"]["text"]
    assert s.shares["prefill"] == pytest.approx(w["share_prefill"].mean())
    assert s.shares["prefill"] > (w["phase"] == "prefill").mean()  # time, not window counts
    assert s.phase == max(s.shares, key=s.shares.get)
    text = str(header_cells(s, "UTC"))
    assert "of the time (calibrated shares)" in text and f"'{ids.INPUTS}'" in text
    assert "Verdicts stood on" in text and "10 Hz per GPU" in text and "tensor_active" in text
    counts = F.range_summary(windows.assign(share_idle=np.nan), t0, t1)  # no shares known
    assert counts.share_basis == "windows"
    assert counts.shares["decode"] == pytest.approx((windows["phase"] == "decode").mean())
    assert f"of {len(windows)} windows" in str(header_cells(counts, "UTC"))
    row = w.loc[mixed[0]].to_dict()
    info = {"t": float(row["start"]) + 0.25, "window": {**row, "shares_source": "calibrated"},
            "bin": {}, "segment": None, "gpus": [0, 1]}
    hover = hover_panel(info, [0, 1], "UTC")
    assert row["verdict"].startswith("mixed: ") and " · prefill 40 %" in row["verdict"]
    assert f"verdict {row['verdict']} (calibrated shares of its time)" in _text(hover)
    assert "tl-mixed" in str(hover)  # marked mixed
    plain = {**info, "window": windows.loc[mixed[0]].to_dict()}  # the model's own verdict
    one = _text(hover_panel(plain, [0, 1], "UTC"))
    assert f"verdict {plain['window']['verdict']} · shares of its time: " in one


def _text(node) -> str:
    """The visible text of a Dash component tree (or list of them)."""
    if node is None:
        return ""
    if isinstance(node, str | int | float):
        return str(node)
    if isinstance(node, list | tuple):
        return "".join(_text(n) for n in node)
    return _text(getattr(node, "children", None))
