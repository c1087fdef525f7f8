"""Finer time (issue 18, point 3): the 0.1-s phase segments in ``tealeaves classify``, the
history and the dashboard's ribbon, on a real bundled H200 trace and a synthetic sharp phase
change; no browser."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import caught_up_store

from tealeaves import classifier as C
from tealeaves.app import cli
from tealeaves.app import figures as F
from tealeaves.app.dashboard.config import DashboardConfig
from tealeaves.app.dashboard.history import History
from tealeaves.app.dashboard.live import LiveView
from tealeaves.app.dashboard.panels import follow_note
from tealeaves.app.figures.series.downsample import window_traces
from tealeaves.classifier import segments as segments_mod
from tealeaves.classifier.evaluate import time_accuracy
from tealeaves.classifier.incremental import merge_runs, segment_slots
from tealeaves.classifier.segments import classify_segments, hop_features, segments_at
from tealeaves.data import TRACES_DIR
from tealeaves.data.schema import METRIC_NAMES
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import label_at, read_labels, read_trace

TRACE = TRACES_DIR / "h200x2_bursts.parquet"
LABELS = TRACES_DIR / "h200x2_bursts.labels.csv"
W, HOP = 0.5, 0.1


@pytest.fixture(scope="module")
def bursts():
    return read_trace(TRACE), read_labels(LABELS)


@pytest.fixture(scope="module")
def batch(bursts):
    """Windows and segments of the whole trace, as ``tealeaves classify`` makes them."""
    trace, _ = bursts
    return C.classify_with_segments(trace.samples, trace.devices, W)


@pytest.fixture(scope="module")
def filled(bursts, tmp_path_factory):
    """A store holding the whole trace and a history caught up with it."""
    store, h = caught_up_store(bursts[0], tmp_path_factory.mktemp("segments") / "s.db")
    yield store, h
    store.close()


def _off_grid(t: np.ndarray, grid: float = W) -> np.ndarray:
    r = np.mod(np.asarray(t, dtype=float), grid)
    return (r > 1e-3) & (r < grid - 1e-3)


# -- the segments of a real trace ------------------------------------------------------------


def test_one_pass_helper_gives_the_windows_and_the_segments_of_the_separate_passes(
        bursts, batch, monkeypatch):
    trace, _ = bursts
    s = trace.samples
    windows, segs = batch
    pd.testing.assert_frame_equal(windows, C.classify_samples(s, trace.devices, W))
    base = C.WindowFeatures(W, trace.devices).fit_transform(s)
    ref = classify_segments(hop_features(s, trace.devices, W, base=base), None, W,
                            times=s["timestamp"].to_numpy())
    pd.testing.assert_frame_equal(segs, ref)
    # no segment where there is no sample (the slots are clipped to the data)
    t = s["timestamp"].to_numpy()
    assert segs["start"].min() >= np.floor(t.min() / 0.1) * 0.1 - 1e-6
    assert segs["end"].max() <= np.floor(t.max() / 0.1) * 0.1 + 0.1 + 1e-6
    # the live path: a short frame, the five grids in one feature pass
    part = s[s["timestamp"] < float(s["timestamp"].min()) + 6.0]
    monkeypatch.setattr(segments_mod, "ONE_PASS_ROWS", 10**9)
    w1, s1 = C.classify_with_segments(part, trace.devices, W)
    monkeypatch.setattr(segments_mod, "ONE_PASS_ROWS", 0)
    w2, s2 = C.classify_with_segments(part, trace.devices, W)
    pd.testing.assert_frame_equal(w1, w2)
    pd.testing.assert_frame_equal(s1, s2)


def test_segments_of_a_real_trace_tile_the_labelled_time_and_beat_the_windows(bursts, batch):
    _, labels = bursts
    windows, segs = batch
    start = segs["start"].to_numpy()
    end = segs["end"].to_numpy()
    assert len(segs) > 10 and (end > start).all()
    # contiguous and not overlapping: each segment starts where the last ended
    np.testing.assert_allclose(start[1:], end[:-1], atol=1e-6)
    assert (segs["phase"].to_numpy()[1:] != segs["phase"].to_numpy()[:-1]).all()
    assert ((segs["confidence"] >= 0) & (segs["confidence"] <= 1)).all()
    # boundaries on the 0.1-s grid, and some of them off the windows' 0.5-s grid
    assert not _off_grid(start, HOP).any()
    assert _off_grid(start[1:]).any()
    # every labelled 0.1-s tick lies in a segment
    ticks = np.concatenate([np.arange(r.start + 0.05, r.end, 0.1)
                            for r in labels.itertuples(index=False)])
    assert pd.notna(segments_at(segs, ticks)).all()
    seg_acc = time_accuracy(segs, labels)["time_accuracy"]
    win_acc = time_accuracy(windows, labels)["time_accuracy"]
    assert seg_acc >= win_acc, (seg_acc, win_acc)


# -- a sharp phase change --------------------------------------------------------------------

T0 = 1_796_000_000.0  # a multiple of the window


def _levels(bursts) -> dict[str, np.ndarray]:
    """Median readings of the trace's labelled idle and prefill time (real H200 levels)."""
    trace, labels = bursts
    s = trace.samples
    phase = label_at(labels, s["timestamp"].to_numpy())["phase"].to_numpy()
    return {p: s[phase == p][list(METRIC_NAMES)].median().to_numpy(dtype=float)
            for p in ("idle", "prefill")}


def _step(levels: dict, at: float, seconds: float = 20.0) -> pd.DataFrame:
    """Two GPUs at 20 Hz: idle readings, then prefill readings from ``at`` s on."""
    t = np.arange(0.0, seconds, 0.05)
    vals = np.where((t >= at - 1e-9)[:, None], levels["prefill"], levels["idle"])
    parts = []
    for g in (0, 1):
        f = pd.DataFrame(vals, columns=list(METRIC_NAMES))
        f.insert(0, "gpu", g)
        f.insert(0, "timestamp", T0 + t)
        parts.append(f)
    return pd.concat(parts, ignore_index=True).sort_values(["timestamp", "gpu"],
                                                           ignore_index=True)


def _changes(frame: pd.DataFrame) -> np.ndarray:
    ph = frame["phase"].to_numpy()
    return frame["start"].to_numpy()[1:][ph[1:] != ph[:-1]] - T0


def test_segments_put_a_sharp_change_where_it_happens_windows_round_it(bursts):
    trace, _ = bursts
    levels = _levels(bursts)
    # The work starts at 10.3 s; the counters show it 0.15 s later (NVML utilisation
    # refreshes ~6 times a second, GPM 10: a change shows 0.1-0.25 s after it happens, the
    # lag the segments read ahead by).
    windows, segs = C.classify_with_segments(_step(levels, 10.3 + 0.15), trace.devices, W)
    seg_at, win_at = _changes(segs), _changes(windows)
    assert len(seg_at) == 1 and len(win_at) == 1
    assert abs(seg_at[0] - 10.3) <= 0.25, seg_at
    assert win_at[0] in (pytest.approx(10.0), pytest.approx(10.5)), win_at
    assert list(segs["phase"]) == ["idle", "prefill"]
    # Moving the change inside one window moves the segment boundary with it, 0.1 s at a
    # time (offset by the lag and by a window holding a few busy readings already scoring
    # busy); the window boundary stays on its 0.5-s grid.
    offsets, grid = [], []
    for at in (10.1, 10.2, 10.3, 10.4):
        w, sg = C.classify_with_segments(_step(levels, at), trace.devices, W)
        (b,), (wb,) = _changes(sg), _changes(w)
        offsets.append(b - at)
        grid.append(wb)
    assert max(offsets) - min(offsets) <= 0.1 + 1e-6, offsets
    assert all(abs(o) <= 0.35 for o in offsets), offsets
    assert all(g in (pytest.approx(10.0), pytest.approx(10.5)) for g in grid), grid


# -- the history and the ribbon --------------------------------------------------------------


def test_history_settles_the_same_segments_live_one_window_behind(bursts, batch, tmp_path):
    trace, labels = bursts
    s = trace.samples
    _, ref = batch
    store = SampleStore(tmp_path / "live.db")
    store.put_devices(trace.devices)
    h = History(store, server_lag_s=0.0, min_update_s=0.0)
    t0, t1 = float(s["timestamp"].min()), float(s["timestamp"].max())
    for cut in np.arange(t0 + 1.7, t1 + 1.7, 1.7):
        store.append(s[(s["timestamp"] >= cut - 1.7) & (s["timestamp"] < cut)])
        h.update()
        if h.m_next is not None:  # settled up to one window behind the newest window
            assert h.m_next * HOP == pytest.approx((h.j_next - 1) * W)
    live = h.segments()
    pieces = h.segments(merge=False)
    assert len(pieces) > len(live)  # stored as each update settled them, read merged
    np.testing.assert_allclose(live["start"].to_numpy()[1:], live["end"].to_numpy()[:-1],
                               atol=1e-6)
    ticks = np.arange(float(live["start"].min()) + 0.05, float(live["end"].max()), 0.1)
    agree = np.mean(segments_at(live, ticks) == segments_at(ref, ticks))
    assert agree >= 0.97, agree  # labelled with 8 windows of context, not the whole trace
    assert time_accuracy(live, labels)["time_accuracy"] >= \
        time_accuracy(h.windows(), labels)["time_accuracy"]
    store.close()


def test_merge_runs_and_slots():
    segs = pd.DataFrame({"start": [0.0, 0.3, 0.5, 1.0], "end": [0.3, 0.5, 1.0, 1.2],
                         "phase": ["idle", "idle", "decode", "decode"],
                         "confidence": [1.0, 0.5, 0.9, 0.6]})
    m = merge_runs(segs)
    assert list(m["phase"]) == ["idle", "decode"]
    assert list(m["end"]) == [0.5, 1.2]
    assert m["confidence"].iloc[0] == pytest.approx((0.3 * 1.0 + 0.2 * 0.5) / 0.5)
    idx, ph = segment_slots(segs, 0.1, 2, 11)
    assert list(idx) == list(range(2, 11))
    assert list(ph) == ["idle"] * 3 + ["decode"] * 6


def test_zoomed_ribbon_draws_segments_cut_at_window_edges(filled):
    store, h = filled
    live = LiveView(store, DashboardConfig(server_lag_s=0.0), history=h)
    first, _ = h.span()
    t0 = first + 10.0
    v = live.range_view(t0, t0 + 20.0, px=800)
    assert v.factor == 1 and v.segments
    fig = live.range_figure(v, height=700, uirevision="t")
    keys = F.trace_keys(h.gpus)
    lo, hi, centres = [], [], []
    for p in F.RIBBON_PHASES:
        tr = fig.data[keys.index(("phase", p))]
        x = np.asarray(tr.x, dtype=float) / 1000.0
        wd = np.broadcast_to(np.asarray(tr.width, dtype=float) / 1000.0, x.shape)
        lo.append(x - wd / 2)
        hi.append(x + wd / 2)
        centres.append(x)
    lo, hi, centres = np.concatenate(lo), np.concatenate(hi), np.concatenate(centres)
    assert len(lo) >= 40  # at least one bar per window of the range
    # phase changes off the 0.5-s grid, every bar inside one window, the bars tiling the range
    assert _off_grid(lo).any() and _off_grid(hi).any()
    assert (np.floor(lo / W + 1e-6) == np.floor((hi - 1e-6) / W)).all()
    order = np.argsort(lo)
    np.testing.assert_allclose(lo[order][1:], hi[order][:-1], atol=1e-3)
    # a hover over any bar names the window holding it, and the segment under it
    c = float(centres[len(centres) // 2])
    info = live.at(c)
    assert info["window"]["start"] <= c < info["window"]["end"]
    assert info["segment"]["start"] <= c < info["segment"]["end"]
    # a range of more windows than bars (a long "all") bins them: phase shares, no segments
    binned = window_traces(h.windows(), h.gpus, W, 50, segments=h.segments())
    extra = binned[("phase", "idle")].extra
    assert extra["factor"] == 3 and not extra["segments"]
    tops = sum(np.nan_to_num(binned[("phase", p)].y) for p in F.RIBBON_PHASES)
    np.testing.assert_allclose(tops, 1.0)


def test_followed_ribbon_draws_a_bar_per_slot_and_extends_by_slots(bursts, tmp_path):
    trace, _ = bursts
    s = trace.samples
    t0 = float(s["timestamp"].min())
    store = SampleStore(tmp_path / "follow.db")
    store.put_devices(trace.devices)
    store.append(s[s["timestamp"] < t0 + 30.0])
    live = LiveView(store, DashboardConfig(source="test", server_lag_s=0.0))
    live.history.min_update_s = 0.0
    snap = live.snapshot(20.0)
    st = snap.state
    keys = F.trace_keys(st["gpus"])
    assert st["m"] is not None
    bars = [snap.figure.data[keys.index(("phase", p))] for p in F.RIBBON_PHASES]
    assert all(b.width == pytest.approx(HOP * 1000.0) for b in bars)
    # each phase trace holds only its own slots; together one bar per slot
    xs = [np.asarray(b.x, dtype=float) / 1000.0 for b in bars]
    x = np.sort(np.concatenate(xs))
    assert 150 <= len(x) <= 200  # 20 s of 0.1-s slots, one window short of the edge
    assert len(np.unique(np.floor(x / HOP))) == len(x)  # one phase per slot
    kind = np.concatenate([np.full(len(v), i) for i, v in enumerate(xs)])[
        np.argsort(np.concatenate(xs), kind="stable")]
    starts = x - HOP / 2
    assert _off_grid(starts[1:][kind[1:] != kind[:-1]]).any()
    assert sum(len(v) > 0 for v in xs) >= 2
    assert "ribbon: 0.1-s phase segments" in follow_note(st, DashboardConfig())
    store.append(s[(s["timestamp"] >= t0 + 30.0) & (s["timestamp"] < t0 + 35.0)])
    step = live.advance(st)
    update, _, limits = step.extend
    new = step.state["m"] - st["m"]
    assert 45 <= new <= 52
    new_x = np.sort(np.concatenate([update["x"][keys.index(("phase", p))]
                                    for p in F.RIBBON_PHASES]))
    assert len(new_x) == new  # one bar per new slot, in the trace of its phase
    assert new_x[0] == pytest.approx((st["m"] + 0.5) * HOP * 1000.0, abs=0.1)
    # each phase trace keeps exactly its bars among the view's slots: from its left edge (a
    # window boundary within a window of the lanes' edge - 20 s) to the slot cursor
    t_left = math.ceil((step.state["k"] * 0.1 - 20.0) / W - 1e-6) * W
    _, in_view = live.history.slots(math.ceil(t_left / HOP - 1e-6), step.state["m"])
    for p in F.RIBBON_PHASES:
        i = keys.index(("phase", p))
        assert limits["x"][i] == int((np.asarray(in_view) == p).sum()), p  # 0: none left
    assert sum(limits["x"][keys.index(("phase", p))] for p in F.RIBBON_PHASES) == len(in_view)
    assert len(in_view) >= round(19.5 / HOP) - 15  # the segments lag the lanes' edge ~1 s
    # a 10-min view draws 0.5-s live bins: one ribbon bar per window, as before
    wide = live.snapshot(600.0)
    assert wide.state["m"] is None
    assert wide.figure.data[keys.index(("phase", "idle"))].width == pytest.approx(W * 1000.0)
    store.close()


# -- tealeaves classify ----------------------------------------------------------------------


def test_classify_json_and_text_carry_the_segments(capsys):
    assert cli.main(["classify", str(TRACE), "--labels", str(LABELS), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["windows"] and doc["phase_counts"]  # the windows are all still there
    segs = doc["segments"]
    assert len(segs) > 10
    assert set(segs[0]) == {"start", "end", "phase", "confidence"}
    assert all(math.isfinite(v) for sg in segs for v in (sg["start"], sg["end"],
                                                         sg["confidence"]))
    assert all(a["end"] == pytest.approx(b["start"]) for a, b in itertools.pairwise(segs))
    acc = doc["time_accuracy"]
    assert acc["segments"] >= acc["windows"] > 0.5
    assert doc["units"]["hot_share"].startswith("%") and "segments_note" not in doc
    assert cli.main(["classify", str(TRACE)]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("segments (0.1-s): "))
    assert f"segments (0.1-s): {len(segs)}, phase changes at +" in line
    assert cli.main(["classify", str(TRACE), "--window", "0.25", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["segments"] == [] and "0.1-s hops" in doc["segments_note"]


def test_segments_stop_at_a_gap_in_the_samples():
    trace = read_trace(TRACE)
    s = trace.samples
    t0 = float(s["timestamp"].min())
    late = s["timestamp"] >= t0 + 20
    gap = pd.concat([s[~late], s[late].assign(timestamp=s.loc[late, "timestamp"] + 3600)])
    _, segs = C.classify_with_segments(gap, trace.devices, W)  # an hour without samples
    last = float(s.loc[~late, "timestamp"].max())
    first = float(s.loc[late, "timestamp"].min()) + 3600
    inside = segs[(segs["end"] > last + 0.11) & (segs["start"] < first - 0.11)]
    assert inside.empty, inside
    assert segs["end"].max() > first and segs["start"].min() < last
