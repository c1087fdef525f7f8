"""Range views, the shared history and the window explanation: pure functions and a real store
filled from the bundled H200 trace; no browser."""

from __future__ import annotations

import base64
import math
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest
from conftest import caught_up_store

from tealeaves.app import figures as F
from tealeaves.app.dashboard.config import DashboardConfig
from tealeaves.app.dashboard.explain import explain_window
from tealeaves.app.dashboard.history import History
from tealeaves.app.dashboard.live import LiveView
from tealeaves.app.dashboard.live_step import live_factor
from tealeaves.app.figures.series import downsample as V
from tealeaves.data import bundled_trace_path
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import read_trace


@pytest.fixture(scope="module")
def trace():
    return read_trace(bundled_trace_path())


@pytest.fixture(scope="module")
def filled(trace, tmp_path_factory):
    """A store holding the whole bundled trace and a history caught up with it."""
    store, h = caught_up_store(trace, tmp_path_factory.mktemp("views") / "s.db")
    yield store, h
    store.close()


# -- downsampling ----------------------------------------------------------------------------


def test_downsample_keeps_spikes_and_holes_and_invents_no_zeros():
    x = np.arange(20_000) * 0.1
    rng = np.random.default_rng(0)
    y = 40 + rng.normal(0, 2, len(x))
    y[7_777] = 99.0  # one 0.1-s spike in half an hour
    y[3_000:3_050] = np.nan  # a 5-s hole
    xs, ys = V.downsample_line(x, y, 500, max_gap=0.15)
    finite = np.isfinite(ys)
    assert finite.sum() <= 500 + 2  # the hole's two edge points may come on top
    assert np.nanmax(ys) == 99.0 and np.nanmin(ys) == np.nanmin(y)
    assert not (ys[finite] == 0).any()
    # the hole is one NaN between its edges, and nothing is drawn inside it
    holes = np.flatnonzero(~finite)
    assert len(holes) == 1
    i = holes[0]
    assert xs[i - 1] == pytest.approx(299.9) and xs[i + 1] == pytest.approx(305.0)
    # every kept point is an input point
    kept = np.isin(np.round(xs[finite], 6), np.round(x, 6))
    assert kept.all()


def test_downsample_leaves_short_lines_alone():
    x = np.arange(50) * 0.1
    y = np.sin(x)
    xs, ys = V.downsample_line(x, y, 500, 0.15)
    np.testing.assert_allclose(xs, x)
    np.testing.assert_allclose(ys, y)
    assert V.downsample_line(np.arange(3.0), np.full(3, np.nan), 10, 1.0)[0].size == 0


def test_point_budget_follows_the_plot_width():
    assert V.point_budget(1060) == 530
    assert V.point_budget(100) == V.MIN_POINTS
    assert V.point_budget(10_000) == V.MAX_POINTS
    assert V.point_budget(None) == V.MAX_POINTS // 2


# -- the history -----------------------------------------------------------------------------


def test_history_built_in_pieces_equals_one_catch_up(trace, filled, tmp_path):
    _, whole = filled
    s = trace.samples
    store = SampleStore(tmp_path / "pieces.db")
    store.put_devices(trace.devices)
    h = History(store, server_lag_s=0.0, min_update_s=0.0)
    t0 = float(s["timestamp"].min())
    for cut in np.arange(t0 + 7.3, float(s["timestamp"].max()) + 7.3, 7.3):
        store.append(s[(s["timestamp"] >= cut - 7.3) & (s["timestamp"] < cut)])
        h.update()
    assert h.k_next == whole.k_next and h.j_next == whole.j_next
    a = h.bins(0, 10**13)
    b = whole.bins(0, 10**13)
    assert len(a) == len(b) > 900  # the bundled trace is 99 s long
    pd.testing.assert_frame_equal(a, b)
    wa, wb = h.windows(), whole.windows()
    assert len(wa) == len(wb) > 180
    agree = (wa["phase"].to_numpy() == wb["phase"].to_numpy()).mean()
    assert agree > 0.97, agree  # labels made with 8 windows of context, not the whole trace
    store.close()


def test_history_keeps_no_empty_bins_and_reads_them_back_dense(filled):
    _, h = filled
    k0 = h.k_next - 50
    dense = h.bins(k0, h.k_next, dense=True)
    assert list(dense.index) == list(range(k0, h.k_next))
    assert h.bins(k0, h.k_next).notna().any(axis=1).all()
    assert math.isclose(h.samples_per_s, 20.0, rel_tol=0.1)


# -- range views -----------------------------------------------------------------------------


def test_range_view_bins_downsampled_then_raw_when_zoomed(filled):
    store, h = filled
    live = LiveView(store, DashboardConfig(server_lag_s=0.0), history=h)
    first, last = h.span()
    whole = live.range_view(first, last, px=600)
    n_bins = len(h.bins(0, 10**13))
    lane = whole.traces[("lane", "power_w", 0)]
    assert not whole.raw and n_bins > 2 * whole.n_out
    assert np.isfinite(lane.y).sum() <= whole.n_out + 10 < n_bins
    assert whole.factor == 1  # 198 windows fit: one bar each
    # more windows than bars: each bar's phase shares stack up to 1
    w = h.windows()
    tr = V.window_traces(w, h.gpus, 0.5, 50)
    f = tr[("phase", "idle")].extra["factor"]
    assert f == math.ceil(len(w) / 50)
    tops = sum(np.nan_to_num(tr[("phase", p)].y) for p in F.RIBBON_PHASES)
    np.testing.assert_allclose(tops, 1.0)
    dec = tr[("phase", "decode")]
    assert np.ndim(dec.base) == 1 and len(dec.base) == len(dec.y) <= 51
    assert dec.width == pytest.approx(f * 0.5)
    # a bar's decode share is the share of its windows labelled decode
    b0 = w.index[0] // f
    in_bar = w[w.index // f == b0]
    assert dec.y[0] == pytest.approx((in_bar["phase"] == "decode").mean()) or \
        not (in_bar["phase"] == "decode").any()
    # a 10-s zoom: every raw sample of the range (20 Hz), one bar per window
    mid = (first + last) / 2
    zoom = live.range_view(mid, mid + 10, px=600)
    assert zoom.raw and zoom.factor == 1
    raw = store.read_range(mid - 0.35, mid + 10.35)
    n_raw = int((raw["gpu"] == 0).sum())
    pw = zoom.traces[("lane", "power_w", 0)]
    assert np.isfinite(pw.y).sum() == n_raw
    # the ribbon: the 0.1-s segments cut at window edges, so at least one bar per window
    # (20 windows and one of margin each side)
    assert zoom.segments
    assert 20 <= sum(len(zoom.traces[("phase", p)].y) for p in F.RIBBON_PHASES) <= 40


def test_range_update_encodes_typed_arrays_plotly_reads(filled):
    store, h = filled
    live = LiveView(store, DashboardConfig(server_lag_s=0.0), history=h)
    first, last = h.span()
    v = live.range_view(first, last, px=800)
    upd = F.range_update(v.traces, h.gpus, False)
    keys = F.trace_keys(h.gpus)
    i = keys.index(("lane", "sm_active", 1))
    spec = upd[i]["x"]
    assert spec["dtype"] == "f8"
    x = np.frombuffer(base64.b64decode(spec["bdata"]), dtype="<f8")
    np.testing.assert_allclose(x, v.traces[("lane", "sm_active", 1)].x * 1000.0)
    y = np.frombuffer(base64.b64decode(upd[i]["y"]["bdata"]), dtype="<f4")
    np.testing.assert_allclose(y, v.traces[("lane", "sm_active", 1)].y, rtol=1e-6)
    ph = keys.index(("phase", "prefill"))
    if v.segments:  # one width per bar: the 0.1-s segments, cut at window edges
        wd = np.frombuffer(base64.b64decode(upd[ph]["width"]["bdata"]), dtype="<f4")
        np.testing.assert_allclose(wd, v.traces[("phase", "prefill")].width * 1000.0,
                                   rtol=1e-6)
        assert wd.max() <= 500.0 + 1e-3
    else:
        assert upd[ph]["width"] == pytest.approx(v.factor * 500.0)


def test_a_followed_figure_sends_only_plain_lists_extendData_can_extend(filled):
    """A followed figure is extended in place: a trace sent as a typed-array spec cannot be
    (plotly.js: "cannot extend missing or non-array attribute: x"), the selected window's
    outline included when a preset redraws the page with a window selected."""
    import json

    store, h = filled
    live = LiveView(store, DashboardConfig(server_lag_s=0.0), history=h)
    _first, last = h.span()
    step = live.snapshot(10.0, selected=last - 5.0)
    data = json.loads(step.figure.to_json())["data"]
    keys = F.trace_keys(step.state["gpus"], step.state["server"])
    assert len(data[keys.index(("selected",))]["x"]) == 1
    typed = [k for k, tr in zip(keys, data) if isinstance(tr.get("x"), dict)
             or isinstance(tr.get("y"), dict)]
    assert typed == []


def test_bands_order_busiest_first(filled):
    _, h = filled
    w = h.windows()
    means = {g: w[f"load_g{g}"].mean() for g in h.gpus}
    order = V.load_order(w, h.gpus, "load")
    assert order[0] == max(means, key=means.get)
    assert V.load_order(w, h.gpus, "index") == h.gpus
    tr = V.window_traces(w, h.gpus, 0.5, 400, order)
    top = tr[("band", order[0])].y
    assert np.nanmin(top) >= len(order) - 1 - 1e-9  # the busiest GPU's band is the top one


def test_a_range_heatmap_holds_each_buckets_mean_load_per_gpu(filled):
    """Zoomed out (several windows per bucket), each heatmap cell is the mean load of its
    bucket's windows for that GPU; the patch carries the columns as z."""
    _, h = filled
    w = h.windows()
    order = V.load_order(w, h.gpus, "load")
    tr = V.window_traces(w, h.gpus, 0.5, 20, order)
    heat = tr[("heat",)]
    ys, row_gpus = F.heat_rows(order)
    np.testing.assert_allclose(heat.y, ys)
    f = tr[("phase", "idle")].extra["factor"]
    assert f > 1 and len(heat.z) == len(heat.x) <= len(w) // f + 2
    b = w.index.to_numpy() // f
    for x, col in zip(heat.x, heat.z):
        k = int(np.floor(x / (f * 0.5)))
        sel = w[b == k]
        for g, v in zip(row_gpus, col):
            m = sel[f"load_g{g}"].mean()
            if np.isfinite(m):
                assert v == pytest.approx(min(max(m, 0), 100), abs=0.06)
            else:
                assert v is None
    upd = F.range_update({("heat",): heat}, h.gpus, False)
    i = F.trace_keys(h.gpus).index(("heat",))
    assert upd[i]["z"] == heat.z


def test_live_factor_bounds_follow_traces():
    assert live_factor(60, 0.1) == 1
    assert live_factor(600, 0.1) == 5


# -- the window panel ------------------------------------------------------------------------


def test_explanations_name_what_the_labeller_saw(filled):
    _, h = filled
    w = h.windows()
    decode = w[(w["phase"] == "decode") & w["imbalanced"]].iloc[0].to_dict()
    ex = explain_window(decode, h.gpus, "trained")
    text = " ".join(ex.reasons)
    assert "memory-bound" in text and "flagged imbalanced" in text
    assert f"GPU {int(decode['hot_gpu'])}" in text
    prefill = w[w["phase"] == "prefill"].iloc[len(w[w["phase"] == "prefill"]) // 2].to_dict()
    assert "compute-bound" in " ".join(explain_window(prefill, h.gpus, "trained").reasons)
    idle = w[w["phase"] == "idle"].iloc[0].to_dict()
    assert "idle line" in " ".join(explain_window(idle, h.gpus, "rules").reasons)
    names = dict(ex.features)
    assert names["GPU 0 load"].endswith("%") and "phase scores" in names


# -- user actions without a browser ---------------------------------------------------------


def test_time_range_typed_by_hand_is_read_in_the_pages_zone_or_refused(filled):
    from tealeaves.app.dashboard.actions import act
    from tealeaves.app.dashboard.timefmt import parse_time, picker_value

    assert parse_time("2026-11-30 12:00:00") == parse_time("2026-11-30T12:00:00.000")
    assert parse_time("2026-11-30 12:00:01.5") - parse_time("2026-11-30 12:00") == 1.5
    assert parse_time("2026-11-30 12:00:00") == datetime(2026, 11, 30, 12, tzinfo=UTC).timestamp()
    # a Berlin page reads typed times as Berlin time (CEST in May), offsets as written
    berlin = parse_time("2026-05-31 18:31:15", "Europe/Berlin")
    assert berlin == datetime(2026, 5, 31, 16, 31, 15, tzinfo=UTC).timestamp()
    assert parse_time("2026-05-31T18:31:15Z", "Europe/Berlin") == berlin + 7200
    assert picker_value(berlin, "Europe/Berlin") == "2026-05-31 18:31:15.000"
    assert parse_time("2026-05-31 18:31:15", "Not/AZone") == berlin + 7200  # unknown: UTC
    with pytest.raises(ValueError, match="date-time in UTC"):
        parse_time("yesterday noon")
    store, h = filled
    live = LiveView(store, DashboardConfig(server_lag_s=0.0), history=h)
    state = live.snapshot().state
    step, note = act(live, {"kind": "go", "from": "noon", "to": "2026-11-30 12:00"}, state, None)
    assert step.figure is None and step.patch is None and "cannot read 'noon'" in str(note)
    step, note = act(live, {"kind": "go", "from": "2026-11-30 12:00:05",
                             "to": "2026-11-30 12:00:00"}, state, None)
    assert step.patch is None and "after 'from'" in str(note)
    first, _ = h.span()
    lo = datetime.fromtimestamp(first + 10, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    hi = datetime.fromtimestamp(first + 20, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    step, _ = act(live, {"kind": "go", "from": lo, "to": hi, "px": 800}, state, None)
    assert step.patch is not None and step.state["mode"] == "range"
    assert not step.state["follow"] and step.state["range"][1] - step.state["range"][0] == 10
    # pause keeps the figure; follow again rebuilds it at the live edge
    paused, _ = act(live, {"kind": "follow"}, {**state, "follow": True}, None)
    assert paused.figure is None and paused.state["follow"] is False
    again, _ = act(live, {"kind": "follow", "want": False}, paused.state, None)
    assert again.figure is None and again.state["follow"] is False  # a second pause: paused
    resumed, _ = act(live, {"kind": "follow"}, step.state, None)
    assert resumed.figure is not None and resumed.state["mode"] == "follow"


def test_history_widens_when_a_gpu_appears(trace, tmp_path):
    s = trace.samples
    t0 = float(s["timestamp"].min())
    store = SampleStore(tmp_path / "late.db")  # no device rows: GPUs known from samples only
    h = History(store, server_lag_s=0.0, min_update_s=0.0)
    store.append(s[(s["timestamp"] < t0 + 10) & (s["gpu"] == 0)])
    h.update()
    assert h.gpus == [0]
    store.append(s[(s["timestamp"] >= t0 + 10) & (s["timestamp"] < t0 + 20)])
    h.update()
    assert h.gpus == [0, 1]
    b = h.bins(0, 10**13)
    assert ("power_w", 1) in b.columns
    early = b[b.index < F.bin_index(t0 + 9, 0.1)]
    late = b[b.index > F.bin_index(t0 + 11, 0.1)]
    assert early[("power_w", 1)].isna().all() and early[("power_w", 0)].notna().mean() > 0.9
    assert late[("power_w", 1)].notna().mean() > 0.9
    store.close()


def test_sample_age_trusts_the_monotonic_clock_only_when_it_is_this_boots():
    import time

    from tealeaves.app.dashboard.timefmt import age_s

    now, mono = time.time(), time.monotonic()
    assert age_s(now - 2.0, mono - 2.0) == pytest.approx(2.0, abs=0.2)
    # a store from another boot: its monotonic stamps say 440 s, the wall clock 3.4 h
    assert age_s(now - 3.4 * 3600, 440.0) == pytest.approx(3.4 * 3600, abs=5)
    assert age_s(None, None) is None


def _shot(store, sha: str, ts: float) -> None:
    store.put_screenshot({"sha256": sha * 64, "name": f"{sha}.png", "nbytes": 1, "width": 1,
                          "height": 1, "format": "PNG", "uploaded": 0.0, "capture_ts": ts,
                          "tz": "UTC", "time_source": "file name (scrot)", "regions": "[]"},
                         b"x")


def test_followed_view_marks_only_screenshots_in_view_and_redraws_when_that_changes(
        trace, tmp_path):
    """A followed x axis autoranges: a marker outside the span would stretch it."""
    s = trace.samples
    t0 = float(s["timestamp"].min())
    store = SampleStore(tmp_path / "follow.db")
    store.put_devices(trace.devices)
    store.append(s[s["timestamp"] < t0 + 30])
    h = History(store, server_lag_s=0.0, min_update_s=0.0)
    live = LiveView(store, DashboardConfig(server_lag_s=0.0), history=h)
    _shot(store, "a", t0 + 1.0)    # long before the followed 10 s
    _shot(store, "b", t0 + 25.0)   # in view
    _shot(store, "c", t0 + 32.0)   # ahead of the live edge
    live.shots_changed()
    step = live.snapshot(10.0)
    keys = F.trace_keys(step.state["gpus"], bool(step.state["server"]))
    marks = step.figure.data[keys.index(("shots",))]
    assert [round(x / 1000.0 - t0, 1) for x in marks.x] == [25.0]
    assert len(step.figure.layout.shapes) == 1 + 1  # the fair-share line and one shot line
    assert step.state["shots_on"] == ["b" * 64]
    store.append(s[(s["timestamp"] >= t0 + 30) & (s["timestamp"] < t0 + 31)])
    nxt = live.advance(step.state)  # nothing entered or left the view: extend only
    assert nxt.figure is None and nxt.extend is not None
    store.append(s[(s["timestamp"] >= t0 + 31) & (s["timestamp"] < t0 + 36)])
    later = live.advance(nxt.state)  # "b" left the view, "c" came into it: redrawn
    assert later.figure is not None
    marks = later.figure.data[keys.index(("shots",))]
    assert [round(x / 1000.0 - t0, 1) for x in marks.x] == [32.0]
    assert later.state["shots_on"] == ["c" * 64]
    assert later.state["edge"] - 10_000 <= marks.x[0] <= later.state["edge"]
    ribbon = later.figure.layout[later.figure.get_subplot(F.rows(False).ribbon, 1)
                                 .yaxis.plotly_name]
    assert ribbon.range[0] <= F.SHOT_Y <= ribbon.range[1]  # markers inside the ribbon
    store.close()


def test_the_header_of_a_range_describes_that_range(filled):
    """Paused, zoomed or typed, the header summarises the range on screen (issue 21): a
    decode stretch with GPU 0 hot reads DECODE and hot GPU 0, an idle one IDLE, and the
    summary names its range; following live it describes the newest window again."""
    from tealeaves.app.dashboard.header_panel import header_cells
    from tealeaves.data import bundled_labels_path
    from tealeaves.data.traces import read_labels

    store, h = filled
    live = LiveView(store, DashboardConfig(server_lag_s=0.0), history=h)
    labels = read_labels(bundled_labels_path())
    hot0 = labels[(labels["phase"] == "decode") & (labels["hot_gpu"] == 0)].iloc[0]
    idle = labels[labels["phase"] == "idle"].iloc[0]
    t0, t1 = float(hot0["start"]) + 1.0, float(hot0["end"]) - 1.0
    s = live.range_summary(t0, t1)
    assert s.range == (t0, t1) and s.phase == "decode" and s.shares["decode"] > 0.8
    assert s.hot_set == (0,) and s.imbalance_ratio > 1.1 and s.flagged > 0
    text = str(header_cells(s, "UTC"))
    assert "DECODE" in text and "the range on screen" in text and "GPU 0" in text
    s_idle = live.range_summary(float(idle["start"]) + 0.5, float(idle["end"]) - 0.5)
    assert s_idle.phase == "idle" and s_idle.hot_set == () and s_idle.flagged == 0
    # a range action puts that summary in the header; following live gives the newest window
    step = live.range_step({"tz": "UTC"}, t0, t1, 800)
    assert step.summary is not None and step.summary.range == (t0, t1)
    assert live.snapshot(60.0).summary.range is None
    assert "newest window" in str(header_cells(live.snapshot(60.0).summary, "UTC"))
    # either order; non-finite or absurd bounds are clamped, never an exception
    assert live.range_summary(t1, t0).phase == "decode"
    for a, b in ((math.nan, t1), (t0, math.inf), (-1e12, 1e12)):
        header_cells(live.range_summary(a, b), "UTC")
    inside = math.floor(t0 * 2) / 2 + 0.2  # within one 0.5-s window
    one = live.range_summary(inside, inside + 0.1)
    assert one.windows == 1 and "of 1 window" in str(header_cells(one, "UTC"))
    assert "of 1 windows" not in str(header_cells(one, "UTC"))
    empty = live.range_summary(t0 - 10 * 86400, t0 - 9 * 86400)
    assert empty.phase is None and "no labelled window in this range" in str(
        header_cells(empty, "UTC"))


def test_every_view_but_a_followed_one_marks_every_screenshot(trace, tmp_path):
    """Screenshot markers (issue 21): a followed view marks the screenshots of its span only
    (its x axis autoranges), "all", a zoom or a typed range mark every screenshot, so one
    taken long before the followed minute shows in "all"."""
    store, h = caught_up_store(trace, tmp_path / "s.db")
    try:
        live = LiveView(store, DashboardConfig(server_lag_s=0.0), history=h)
        first, last = h.span()
        for i, ts in enumerate((first + 1.0, last - 2.0)):
            store.put_screenshot({"sha256": f"{i:064x}", "name": f"shot{i}.png", "nbytes": 1,
                                  "width": 1, "height": 1, "format": "PNG", "uploaded": ts,
                                  "capture_ts": ts, "tz": "UTC", "time_source": "test",
                                  "regions": "[]"}, b"x")
        live.shots_changed()

        def marked(patch) -> list[float]:
            keys = F.trace_keys(h.gpus, h.has_server)
            i = keys.index(("shots",))
            ops = patch.to_plotly_json()["operations"]
            return [x for op in ops if op["location"] == ["data", i, "x"]
                    for x in op["params"]["value"]]

        follow = live.snapshot(10.0)
        step = live.range_step(follow.state, first, last, 800, follow=True)
        assert step.patch is not None
        assert sorted(marked(step.patch)) == pytest.approx([(first + 1.0) * 1000.0,
                                                           (last - 2.0) * 1000.0])
        zoom = live.range_step(step.state, first, first + 5.0, 800)
        assert len(marked(zoom.patch)) == 2  # off-screen ones are simply off screen
        from tealeaves.app.dashboard.live_patch import shots_patch

        assert marked(shots_patch(store.screenshots(), follow.state)) == pytest.approx(
            [(last - 2.0) * 1000.0])
    finally:
        store.close()


def test_the_history_keeps_where_each_windows_shares_came_from_and_what_it_stood_on(filled):
    """Issue 34: the history joins many classifications, so each window carries where its
    shares came from and what its verdict stood on; the header of a range says both."""
    from tealeaves.app.dashboard.header_panel import header_cells
    from tealeaves.classifier.incremental import INPUTS_COLUMN, SHARES_SOURCE_COLUMN

    store, h = filled
    w = h.windows()
    assert set(w[SHARES_SOURCE_COLUMN]) <= {"calibrated", "rules' scores"}
    assert set(w[INPUTS_COLUMN]) == {w[INPUTS_COLUMN].iloc[0]}
    assert w[INPUTS_COLUMN].iloc[0].endswith(" at 10 Hz per GPU")
    assert {"share_idle", "share_prefill", "share_decode", "verdict"} <= set(w.columns)
    live = LiveView(store, DashboardConfig(server_lag_s=0.0), history=h)
    t0, t1 = float(w["start"].min()), float(w["end"].max())
    s = live.range_summary(t0, t1)
    cal = (w[SHARES_SOURCE_COLUMN] == "calibrated").all()
    assert s.share_basis == ("calibrated" if cal else "windows")
    assert s.inputs == w[INPUTS_COLUMN].iloc[0]
    mean = w["share_decode"].mean() if cal else (w["phase"] == "decode").mean()
    assert s.shares["decode"] == pytest.approx(mean)
    text = str(header_cells(s, "UTC"))
    assert "Verdicts stood on" in text and "10 Hz per GPU" in text
    assert "newest window" in str(header_cells(live.snapshot(60.0).summary, "UTC"))
    assert live.snapshot(60.0).summary.inputs == s.inputs  # following live, too
