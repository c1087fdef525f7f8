"""The dashboard's server lane: figure builder with and without server signals, a replayed
SGLang log aligned to the bundled trace, and the lane in Chromium next to the phase ribbon."""

from __future__ import annotations

import datetime as dt
import math
import os
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_align import sglang_lines

from tealeaves.app import figures as F
from tealeaves.app.dashboard.config import DashboardConfig
from tealeaves.app.dashboard.live import LiveView
from tealeaves.app.dashboard.server import align_server_log, start_in_thread
from tealeaves.classifier import classify_samples
from tealeaves.collectors.replay import ReplayCollector
from tealeaves.data import bundled_labels_path, bundled_trace_path
from tealeaves.data.server_log import parse_lines
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import read_labels, read_trace

WINDOW_S = 0.5
TRUE_OFFSET = 3.0  # the synthetic server clock runs 3 s behind the GPU clock


@pytest.fixture(scope="module")
def trace():
    return read_trace(bundled_trace_path())


@pytest.fixture(scope="module")
def labels():
    return read_labels(bundled_labels_path())


def decode_lines(labels, true_offset_s: float, every_s: float = 1.0) -> list[str]:
    """SGLang decode lines (gen throughput, running requests, accept length) for the labelled
    decode stretches, on the same lagging whole-second server clock as ``sglang_lines``."""
    out = []
    for r in labels.itertuples():
        if r.phase != "decode":
            continue
        for i, t in enumerate(np.arange(r.start + every_s, r.end, every_s)):
            s = dt.datetime.fromtimestamp(t - true_offset_s, dt.UTC)
            out.append(f"[{s:%Y-%m-%d %H:%M:%S} TP0] Decode batch, #running-req: {24 + i % 9}, "
                       f"#token: 90000, token usage: 0.40, accept len: {2.2 + 0.1 * (i % 5):.2f}, "
                       f"cuda graph: True, gen throughput (token/s): {1800 + 40 * (i % 7):.2f}, "
                       f"#queue-req: 0, ")
    return out


def synthetic_log(labels, path: Path, offset: float = TRUE_OFFSET) -> Path:
    lines = sglang_lines(labels, offset) + decode_lines(labels, offset)
    lines.sort(key=lambda line: line[1:20])  # by stamp, like a real log
    path.write_text("\n".join(lines) + "\n")
    return path


def _events_frame(events) -> pd.DataFrame:
    """Events as ``SampleStore.server_events`` returns them (one column per field)."""
    rows = [{"timestamp": e.timestamp, "start": e.start, "kind": e.kind, **e.fields}
            for e in events]
    return pd.DataFrame(rows)


# -- figure builder -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def minute(trace, labels):
    s = trace.samples
    t0 = float(s["timestamp"].min())
    samples = s[s["timestamp"] < t0 + 60.0].reset_index(drop=True)
    windows = classify_samples(samples, trace.devices, window_s=WINDOW_S)
    ev = parse_lines(sglang_lines(labels, 0.0) + decode_lines(labels, 0.0)).events
    ev = [e for e in ev if e.timestamp < t0 + 60.0]
    return samples, windows, _events_frame(ev)


def _bins(samples, gpus):
    ts = samples["timestamp"].to_numpy()
    return F.bin_lanes(samples, gpus, F.bin_index(ts.min(), 0.1) + 1, F.bin_index(ts.max(), 0.1))


def test_no_server_signals_no_server_row(minute):
    samples, windows, _ = minute
    fig = F.build_figure(_bins(samples, [0, 1]), windows, [0, 1])
    assert len(fig.data) == len(F.trace_keys([0, 1]))
    assert not any(t.name and t.name.startswith("server") for t in fig.data)
    assert F.rows(False).n == F.N_ROWS and F.rows(False).server is None


def test_server_row_with_prefill_markers_at_prefill_times(minute):
    samples, windows, events = minute
    gpus = [0, 1]
    j0 = math.ceil(windows["start"].min() / WINDOW_S - 1e-9)
    j1 = F.bin_index(float(windows["end"].max()), WINDOW_S)
    cells = F.server_cells(events, None, j0, j1, WINDOW_S)
    fig = F.build_figure(_bins(samples, gpus), windows, gpus, server=cells)
    keys = F.trace_keys(gpus, server=True)
    assert len(fig.data) == len(keys)
    R = F.rows(True)
    assert R.server == 2 and R.bands == 3 and R.first_lane == 4 and R.n == F.N_ROWS + 1
    sub = fig.get_subplot(R.server, 1)
    gen = fig.data[keys.index(("server", "gen_tok_s"))]
    run = fig.data[keys.index(("server", "running_req"))]
    acc = fig.data[keys.index(("server", "accept_len"))]
    assert gen.yaxis == sub.yaxis.plotly_name.replace("axis", "")
    sec = fig.get_subplot(R.server, 1, secondary_y=True).yaxis.plotly_name.replace("axis", "")
    assert run.yaxis == sec != gen.yaxis and acc.yaxis not in (sec, gen.yaxis)
    # values in units where the log has them; None (a gap), never 0, where it has none
    g = [v for v in gen.y if v is not None]
    assert g and min(g) >= 1800 and max(g) <= 2100
    assert {v for v in acc.y if v is not None} <= {2.2, 2.3, 2.4, 2.5, 2.6}
    assert None in gen.y and 0 not in gen.y and 0.0 not in acc.y
    t0 = float(samples["timestamp"].min())
    idle = [v for x, v in zip(gen.x, gen.y) if t0 + 1 < x / 1000 < t0 + 5]  # idle: no lines
    assert idle and all(v is None for v in idle)
    # one prefill marker per cell holding prefill batches, at the first batch's time
    xs = []
    for i in range(len(F.PREFILL_SIZES)):
        t = fig.data[keys.index(("prefill", i))]
        assert t.yaxis not in (gen.yaxis, run.yaxis) and t.xaxis == gen.xaxis
        xs += [x / 1000 for x, y in zip(t.x, t.y) if y is not None]
    pf = events.loc[events["kind"] == "prefill", "timestamp"].to_numpy()
    in_span = pf[(pf >= j0 * WINDOW_S) & (pf < j1 * WINDOW_S)]
    assert len(xs) == len({F.bin_index(t, WINDOW_S) for t in in_span}) > 10
    assert all(np.min(np.abs(in_span - x)) < 1e-3 for x in xs)
    big = fig.data[keys.index(("prefill", 1))]  # 4096 new tokens per cell: the middle size
    assert any("4,096 new + 0 cached tok, queue 0" in t for t in big.text)
    # the lane is labelled with its units
    mid = sum(sub.yaxis.domain) / 2
    label = [a.text for a in fig.layout.annotations if abs(a.y - mid) < 1e-9]
    assert label and "Server" in label[0] and "tok/s" in label[0]
    # appending later cells gives what a rebuild would draw
    split = (j0 + j1) // 2
    head = F.server_cells(events, None, j0, split, WINDOW_S)
    tail = F.server_cells(events, None, split, j1, WINDOW_S)
    pd.testing.assert_frame_equal(pd.concat([head, tail]), cells)
    payload = F.extend_data(_bins(samples, gpus).iloc[:0], windows.iloc[:0], gpus, server=tail)
    assert payload[1] == list(range(len(keys)))
    assert payload[2]["x"][keys.index(("prefill", 0))] == 240


def test_metrics_feed_the_lane_when_the_log_does_not():
    t = 1_800_000_000.0
    rows = []
    for i in range(6):
        ts = t + i
        rows += [(ts, "sglang:num_running_reqs", "tp_rank=0", 10.0 + i, math.nan, "gauge"),
                 (ts, "sglang:gen_throughput", "tp_rank=0", 500.0 if i != 3 else math.nan,
                  math.nan, "gauge")]
    m = pd.DataFrame(rows, columns=["timestamp", "name", "labels", "value", "rate_per_s",
                                    "kind"])
    c0 = F.bin_index(t, WINDOW_S)
    cells = F.server_cells(pd.DataFrame(), m, c0, c0 + 12, WINDOW_S)
    assert cells["running_req"].iloc[0] == 10 and cells["running_req"].iloc[-1] == 15
    assert cells["gen_tok_s"].dropna().eq(500.0).all()
    assert cells["pf_t"].isna().all()


# -- replay: the log aligned and replayed on the trace's clock -----------------------------


def test_replayed_log_is_aligned_and_lands_on_the_replay_clock(tmp_path, trace, labels):
    log = synthetic_log(labels, tmp_path / "sglang.log")
    events, note = align_server_log(log, trace.samples)
    assert "offset" in note and "no confident" not in note
    off = float(note.split(": ")[1].split(" s")[0])
    assert off == pytest.approx(TRUE_OFFSET, abs=1.0)
    truth = [(r.start, r.end) for r in labels.itertuples() if r.phase == "prefill"]
    pf = [e.timestamp for e in events if e.kind == "prefill"]
    assert np.mean([any(a - 1 <= t <= b + 1 for a, b in truth) for t in pf]) > 0.95

    store = SampleStore(tmp_path / "s.db")
    rc = ReplayCollector(trace, speed=200.0, rebase=True, loop=True, events=events,
                         on_events=store.put_server_events)
    stop = threading.Event()
    from tealeaves.collectors import run_to_store

    th = threading.Thread(target=run_to_store, args=(rc, store), kwargs={"stop": stop,
                                                                        "batch_s": 0.05})
    th.start()
    deadline = time.time() + 10
    span = float(trace.samples["timestamp"].max() - trace.samples["timestamp"].min())
    while time.time() < deadline:  # until well into the second pass
        got = store.time_span()
        if got is not None and got[1] - got[0] > span * 1.3:
            break
        time.sleep(0.05)
    stop.set()
    th.join(5)
    stored = store.server_events()
    samples = store.read_range()
    store.close()
    ts = np.unique(trace.samples["timestamp"].to_numpy())
    t_end = ts[-1] + np.median(np.diff(ts))  # a pass covers [first sample, last + one period)
    in_trace = [e for e in events if ts[0] <= e.timestamp < t_end]
    assert len(stored) > len(in_trace)  # the whole first pass, then more of the second
    # every stored event sits where its aligned trace time was replayed: within 0.1 s of a
    # sample of the same trace moment (the replay moves samples and events by one offset)
    s_ts = np.sort(samples["timestamp"].unique())
    ev_ts = stored["timestamp"].to_numpy()
    i = np.clip(np.searchsorted(s_ts, ev_ts), 1, len(s_ts) - 1)
    near = np.minimum(np.abs(s_ts[i] - ev_ts), np.abs(s_ts[i - 1] - ev_ts))
    assert near.max() < 0.1
    t_first = float(trace.samples["timestamp"].min())
    replay_offset = float(s_ts[0]) - t_first
    first = stored["timestamp"].to_numpy()[: len(in_trace)]
    np.testing.assert_allclose(first, np.sort([e.timestamp for e in in_trace]) + replay_offset,
                               atol=1e-4)


def test_live_view_adds_the_lane_when_server_events_arrive(tmp_path, trace, labels, minute):
    samples = minute[0]
    store = SampleStore(tmp_path / "s.db")
    store.put_devices(trace.devices)
    t0 = float(samples["timestamp"].min())
    store.append(samples[samples["timestamp"] < t0 + 30])
    live = LiveView(store, DashboardConfig(source="test", server="server log x: +3.0 s offset",
                                           server_lag_s=0.0))
    live.history.min_update_s = 0.0  # every call reads the store (no 0.1-s throttle)
    snap = live.snapshot()
    assert snap.state["s"] is None and len(snap.figure.data) == len(F.trace_keys([0, 1]))
    ev = parse_lines(sglang_lines(labels, 0.0)).events
    store.put_server_events([e for e in ev if e.timestamp < t0 + 35])
    store.append(samples[(samples["timestamp"] >= t0 + 30) & (samples["timestamp"] < t0 + 33)])
    step = live.advance(snap.state)
    assert step.figure is not None and step.state["s"] is not None  # rebuilt with the lane
    assert len(step.figure.data) == len(F.trace_keys([0, 1], server=True))
    store.append(samples[(samples["timestamp"] >= t0 + 33) & (samples["timestamp"] < t0 + 36)])
    nxt = live.advance(step.state)
    assert nxt.figure is None and nxt.extend is not None
    assert len(nxt.extend[1]) == len(F.trace_keys([0, 1], server=True))
    assert nxt.state["s"] > step.state["s"]
    text = str(live.status(nxt.state))
    assert "+3.0 s offset" in text
    store.close()


# -- in Chromium ---------------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--headless", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
GD = "document.querySelector('#tl-graph .js-plotly-plot')"


def test_browser_server_lane_markers_sit_on_prefill_bands(tmp_path, labels):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing")
    from playwright.sync_api import sync_playwright

    log = synthetic_log(labels, tmp_path / "sglang.log")
    keys = F.trace_keys([0, 1], server=True)
    url, shutdown = start_in_thread(force_replay=True, speed=4.0, server_log=log)
    try:
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = b.new_page(viewport={"width": 1440, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(url)
            # the first prefill stretch starts 6 s into the trace (1.5 s at 4x); wait until
            # the lane is there and the ribbon holds prefill and decode windows after it
            pf_idx = [keys.index(("prefill", i)) for i in range(len(F.PREFILL_SIZES))]
            page.wait_for_function(
                f"() => {{ const gd = {GD}; return gd && gd.data.length === {len(keys)} && "
                f"{pf_idx}.some(i => gd.data[i].y.filter(v => v !== null).length > 8) && "
                f"gd.data[{keys.index(('server', 'gen_tok_s'))}].y.filter(v => v !== null)"
                f".length > 8 }}", timeout=25_000)
            page.wait_for_timeout(1500)
            data = page.evaluate(f"() => {GD}.data.map(t => ({{x: t.x, y: t.y}}))")
            status = page.inner_text("#tl-status")
            page.mouse.move(5, 5)
            shot = Path(os.environ.get("TEALEAVES_SCREENSHOT") or tmp_path / "server_lane.png")
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot: {shot}")
            b.close()
    finally:
        shutdown()
    assert "sglang.log" in status and "offset, r=" in status, status
    off = float(status.split("sglang.log: ")[1].split(" s offset")[0])
    assert off == pytest.approx(TRUE_OFFSET, abs=1.0)
    pre = data[keys.index(("phase", "prefill"))]
    bands = np.array([x / 1000 for x, y in zip(pre["x"], pre["y"]) if y is not None])
    markers = np.array([x / 1000 for i in pf_idx for x, y in zip(data[i]["x"], data[i]["y"])
                        if y is not None])
    assert len(bands) > 5 and len(markers) > 8
    # every marker sits on (within 1 s of) a window the GPUs call prefill
    dist = np.array([np.min(np.abs(bands - m)) for m in markers])
    assert (dist <= 1.0).mean() > 0.9, dist
    assert not errors, errors
