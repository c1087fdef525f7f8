"""The real dashboard in Chromium: replay of the bundled trace, werkzeug on 127.0.0.1:0.

Checks that the ribbon and the GPU lanes render with data, that every stored sample reaches the
page promptly, pause / follow, a click while following, and the history view (zoom asks the
server, raw samples when zoomed in far, hover, click, double-click); ``TEALEAVES_SCREENSHOT``
saves a picture.
"""

from __future__ import annotations

import json
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path

from tealeaves.app import figures as F
from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.server import start_in_thread
from tealeaves.data.store import SampleStore

# The README's screenshot is refreshed only on request (TEALEAVES_SCREENSHOT=docs/dashboard.png),
# so a test run leaves the checkout clean.
SCREENSHOT_ENV = "TEALEAVES_SCREENSHOT"
GPUS = [0, 1]  # the bundled trace holds two H200s
KEYS = F.trace_keys(GPUS)
LANE = KEYS.index(("lane", "power_w", 0))
N_ROWS = F.N_ROWS  # the bottom x axis; the other lanes' x axes match it
GD = "document.querySelector('#tl-graph .js-plotly-plot')"


def _open(browser, url: str):
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_function(f"() => {{ const gd = {GD}; return gd && gd.data && "
                           f"gd.data.length === {len(KEYS)} && gd.data[{LANE}].x.length > 0 }}",
                           timeout=20_000)
    return page, errors


def _counts(page) -> list[int]:
    return page.evaluate(f"() => {GD}.data.map(t => t.y.filter(v => v !== null).length)")


def _drawn(page, key: tuple) -> int:
    return _counts(page)[KEYS.index(key)]


def test_live_page_renders_and_every_stored_sample_reaches_it(browser, tmp_path):
    db = tmp_path / "live.db"
    url, shutdown = start_in_thread(force_replay=True, speed=1.0, store_path=db)
    try:
        page, errors = _open(browser, url)
        page.wait_for_function(f"() => {GD}.data.slice(0, 3).some(t => t.y.some(v => v === 1))",
                               timeout=10_000)
        counts = _counts(page)
        for key, n in zip(KEYS, counts):
            if key[0] == "lane":
                assert n > 0, key
        assert sum(counts[KEYS.index(("phase", p))] for p in F.RIBBON_PHASES) > 0
        assert "replay of h200x2_workload_v1.parquet" in page.inner_text("#tl-status")
        assert page.inner_text("#tl-phase")
        # the plotly toolbar (shown on hover) sits above the plot area, not over the ribbon
        box = page.query_selector("#tl-graph").bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 150)
        bar = page.wait_for_selector("#tl-graph .modebar", state="visible").bounding_box()
        top = page.evaluate(f"() => {GD}._fullLayout._size.t")
        assert bar["y"] + bar["height"] <= box["y"] + top, (bar, box, top)
        # the load heatmap under the bands grows a column per window as the page follows
        heat = KEYS.index(("heat",))
        n0 = page.evaluate(f"() => {GD}.data[{heat}].z.length")
        page.wait_for_function(f"() => {{ const t = {GD}.data[{heat}]; return t.type === "
                               f"'heatmap' && t.z.length >= {n0} + 2 && "
                               f"t.z.length === t.x.length && t.z[t.z.length - 1].length "
                               f"=== 2 }}", timeout=15_000)

        # Every stored sample reaches the page: three times, note the newest sample the store
        # holds and wait until the page's newest bin holds it (states, not a clock: how fast
        # is `tealeaves bench dashboard`'s sample-to-screen figure, docs/benchmarks.md).
        newest = f"() => {{ const x = {GD}._fullData[{LANE}].x; return x[x.length - 1] }}"
        ro = SampleStore(db, readonly=True)
        first_shown = page.evaluate(newest)
        for _ in range(3):
            ts = ro.time_span()[1]
            page.wait_for_function(f"() => ({newest})() + {F_BIN_S / 2 * 1000} > {ts * 1000}",
                                   timeout=30_000)
        # ... and the page moved on over new seconds as it did
        page.wait_for_function(f"() => ({newest})() > {first_shown} + 3000", timeout=30_000)

        # pause: the page stops moving while samples keep arriving; follow: it catches up
        sent: list[str] = []
        answered: list[int] = []
        page.on("request", lambda r: sent.append(r.post_data)
                if "_dash-update-component" in r.url else None)
        page.on("requestfinished", lambda r: answered.append(1)
                if "_dash-update-component" in r.url and f'"{ids.PULL}.data"'
                in (r.post_data or "") else None)
        page.click(f"#{ids.FOLLOW}")
        try:
            page.wait_for_function(f"() => document.querySelector('#{ids.FOLLOW}')"
                                   f".innerText.includes('paused')", timeout=15_000)
        except Exception:
            print("actions sent:", _action_kinds(sent), "errors:", errors)
            raise
        frozen = page.evaluate(newest)
        n_answered = len(answered)
        # while paused: samples 1.5 s past what the page shows are stored, and the page's
        # ticks were answered several times since; it still shows what it showed
        deadline = time.monotonic() + 60
        while not (ro.time_span()[1] * 1000 > frozen + 1500
                   and len(answered) >= n_answered + 5):
            assert time.monotonic() < deadline, "no new samples or ticks while paused"
            page.wait_for_timeout(100)
        ro.close()
        assert page.evaluate(newest) == frozen
        page.click(f"#{ids.FOLLOW}")
        page.wait_for_function(f"() => {{ const x = {GD}._fullData[{LANE}].x; "
                               f"return x[x.length - 1] > {frozen} + 1500 }}", timeout=10_000)
        assert "following" in page.inner_text(f"#{ids.FOLLOW}")
        # a click while following selects a window and pauses the page (so the window stays
        # on screen, tests/test_view_truth.py); following again resumes
        power_row = F.FIRST_LANE_ROW + [ln.key for ln in F.LANES].index("power")
        box = page.locator(f"#tl-graph .draglayer g.x{power_row}y{power_row} rect.nsewdrag")
        box.scroll_into_view_if_needed()
        bb = box.bounding_box()
        page.mouse.click(bb["x"] + bb["width"] * 0.6, bb["y"] + bb["height"] / 2)
        page.wait_for_function(f"() => document.querySelector('#{ids.WINDOW_PANEL}')"
                               f".innerText.includes('Selected window')", timeout=10_000)
        page.wait_for_function(f"() => document.querySelector('#{ids.FOLLOW}')"
                               f".innerText.includes('paused')", timeout=15_000)
        clicked = page.evaluate(newest)
        page.click(f"#{ids.FOLLOW}")
        page.wait_for_function(f"() => {{ const x = {GD}._fullData[{LANE}].x; "
                               f"return x[x.length - 1] > {clicked} + 1000 }}", timeout=10_000)
        # the page's own latency meter (assets/live.js) reads figures while it follows
        page.wait_for_function(f"() => document.querySelector('#{ids.LATENCY}')"
                               f".innerText.includes('p95')", timeout=15_000)
        assert re.search(r"sample → screen p50 -?\d+ ms · p95 -?\d+ ms",
                         page.inner_text(f"#{ids.LATENCY}"))
        # a preset follows that span; the band order is an action of its own
        page.click(f"#{ids.PRESET_10S}")
        page.wait_for_function(f"() => document.querySelector('#{ids.VIEW_NOTE}')"
                               f".innerText.startsWith('last 10 s')", timeout=15_000)
        assert "tl-btn-on" in page.get_attribute(f"#{ids.PRESET_10S}", "class")
        assert "tl-btn-on" not in page.get_attribute(f"#{ids.PRESET_1MIN}", "class")
        page.click(f"#{ids.ORDER} input[value='load']")
        page.wait_for_function(f"() => document.querySelector('#{ids.VIEW_NOTE}')"
                               f".innerText.startsWith('last 10 s')", timeout=15_000)
        deadline = time.monotonic() + 30
        while "order" not in _action_kinds(sent):  # the order action was sent
            assert time.monotonic() < deadline, _action_kinds(sent)
            page.wait_for_timeout(100)
        assert "tl-btn-on" in page.get_attribute(f"#{ids.PRESET_10S}", "class")
        assert not errors, errors
        page.close()
    finally:
        shutdown()


F_BIN_S = 0.1  # the dashboard's default lane resolution (DashboardConfig.bin_s)


def _parse_ms(s) -> float:
    """Milliseconds since the epoch of a plotly date-axis range value (UTC string or ms)."""
    if isinstance(s, int | float):
        return float(s)
    s = s.replace("Z", "").replace("T", " ")
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in s else "%Y-%m-%d %H:%M:%S"
    return datetime.strptime(s, fmt).replace(tzinfo=UTC).timestamp() * 1000


def test_screenshot_shows_phases_and_a_hot_gpu(browser, tmp_path):
    """Replay at 4x until idle, prefill, decode and both hot GPUs are on the page (~17 s,
    about 68 s of the trace); save the screenshot the README embeds."""
    url, shutdown = start_in_thread(force_replay=True, speed=4.0)
    try:
        page, errors = _open(browser, url)
        # until the replay has shown every phase and both hot GPUs (a state; about 17 s at 4x)
        want = {KEYS.index(("phase", p)): 4 for p in ("idle", "prefill", "decode")}
        want |= {KEYS.index(("ribbon_hot",)): 4, KEYS.index(("hot", 0)): 1,
                 KEYS.index(("hot", 1)): 1}
        lanes = [i for i, k in enumerate(KEYS) if k[0] == "lane"]
        page.wait_for_function(
            f"() => {{ const d = {GD}.data; const n = (i) => d[i].y.filter(v => v !== null)"
            f".length; return Object.entries({json.dumps(want)}).every(([i, m]) => n(+i) >= m)"
            f" && {json.dumps(lanes)}.every(i => d[i].x.length > 500) }}", timeout=120_000)
        counts = _counts(page)
        for phase in ("idle", "prefill", "decode"):
            assert counts[KEYS.index(("phase", phase))] >= 4, phase
        assert counts[KEYS.index(("ribbon_hot",))] >= 4
        assert counts[KEYS.index(("hot", 0))] > 0 and counts[KEYS.index(("hot", 1))] > 0
        # every lane trace spans the same bins (one point per bin and GPU)
        lengths = page.evaluate(f"() => {GD}.data.map(t => t.x.length)")
        lane_lengths = {n for k, n in zip(KEYS, lengths) if k[0] == "lane"}
        assert len(lane_lengths) == 1 and lane_lengths.pop() > 500
        header = page.inner_text("#tl-header")
        assert any(p in header for p in ("IDLE", "PREFILL", "DECODE"))
        assert "Imbalance" in header or "IMBALANCE" in header
        shot = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path / "dashboard.png")
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 50_000
        assert not errors, errors
        page.close()
    finally:
        shutdown()


def _action_kinds(requests: list[str]) -> list[str]:
    """Kinds of the user actions the page sent to the server (``tl-action`` inputs)."""
    kinds = []
    for body in requests:
        try:
            req = json.loads(body)
        except (TypeError, ValueError):
            continue
        if f"{ids.ACTION}.data" not in req.get("changedPropIds", []):
            continue
        for inp in req.get("inputs", []):
            if inp.get("id") == ids.ACTION and inp.get("value"):
                kinds.append(inp["value"]["kind"])
    return kinds


def _lane(page, key: tuple, keys: list) -> dict:
    """x (ms) and y of a trace as plotly holds them (typed arrays decoded)."""
    return page.evaluate(f"""() => {{ const t = {GD}._fullData[{keys.index(key)}];
        return {{x: Array.from(t.x || []), y: Array.from(t.y || []).map(
            v => (v === null || Number.isNaN(v)) ? null : v)}} }}""")


def test_history_zoom_pan_hover_and_click(browser, tmp_path):
    """Ten minutes of four GPUs in a store served without collecting: "all" and zooms ask the
    server for their range and get it downsampled; a far zoom gets every raw sample; the hover
    and window panels fill in."""
    from tealeaves.app.bench.dashboard import build_store
    from tealeaves.app.figures.series.downsample import point_budget

    db = tmp_path / "history.db"
    build_store(db, seconds=600.0, n_gpus=4, log=lambda *_: None)
    gpus = [0, 1, 2, 3]
    keys = F.trace_keys(gpus)
    lane = ("lane", "power_w", 0)
    url, shutdown = start_in_thread(store_path=db, collect=False)
    shots = os.environ.get("TEALEAVES_SCREENSHOT_DIR")
    try:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        errors: list[str] = []
        sent: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: sent.append(r.post_data)
                if "_dash-update-component" in r.url else None)
        page.goto(url)
        page.wait_for_function(f"() => {{ const gd = {GD}; return gd && gd._fullData && "
                               f"gd._fullData[{keys.index(lane)}]._length > 100 }}",
                               timeout=30_000)
        px = page.evaluate(f"() => {GD}._fullLayout._size.w")
        n_out = point_budget(px)
        ro = SampleStore(db, readonly=True)

        # the whole session: the server answers with a downsampled patch
        page.click(f"#{ids.PRESET_ALL}")
        page.wait_for_function(f"() => document.querySelector('#{ids.VIEW_NOTE}').innerText"
                               f".includes('MinMaxLTTB')", timeout=20_000)
        assert "all" in _action_kinds(sent)
        whole = _lane(page, lane, keys)
        raw_total = int((ro.read_range()["gpu"] == 0).sum())
        assert 0.8 * n_out <= sum(v is not None for v in whole["y"]) <= n_out + 10 < raw_total
        assert "windows per bar" in page.inner_text(f"#{ids.VIEW_NOTE}")
        if shots:
            page.mouse.move(5, 5)
            page.screenshot(path=str(Path(shots) / "dashboard_history.png"), full_page=True)

        # a drag over the power lane: that range, asked of the server; following stops
        power_row = F.FIRST_LANE_ROW + [ln.key for ln in F.LANES].index("power")
        box = page.locator(f"#tl-graph .draglayer g.x{power_row}y{power_row} rect.nsewdrag")
        box.scroll_into_view_if_needed()
        bb = box.bounding_box()
        y = bb["y"] + bb["height"] / 2
        n_before = len(_action_kinds(sent))
        page.mouse.move(bb["x"] + bb["width"] * 0.40, y)
        page.mouse.down()
        page.mouse.move(bb["x"] + bb["width"] * 0.45, y, steps=4)
        page.mouse.move(bb["x"] + bb["width"] * 0.50, y, steps=4)
        page.mouse.up()
        page.wait_for_function(f"() => document.querySelector('#{ids.FOLLOW}')"
                               f".innerText.includes('paused')", timeout=10_000)
        page.wait_for_function(f"() => document.querySelector('#{ids.VIEW_NOTE}').innerText"
                               f".includes('(1.0 min)') || document.querySelector("
                               f"'#{ids.VIEW_NOTE}').innerText.includes(' s)')", timeout=10_000)
        assert "range" in _action_kinds(sent)[n_before:]
        rng = page.evaluate(f"() => {GD}.layout.xaxis{N_ROWS}.range")
        t0, t1 = _parse_ms(rng[0]), _parse_ms(rng[1])
        zoom = _lane(page, lane, keys)
        xs = [x for x, v in zip(zoom["x"], zoom["y"]) if v is not None]
        assert 40_000 < t1 - t0 < 80_000
        assert min(xs) >= t0 - 1000 and max(xs) <= t1 + 1000
        assert len(xs) <= n_out + 10
        page.wait_for_timeout(1500)  # nothing moves it: the zoom stays
        assert page.evaluate(f"() => {GD}.layout.xaxis{N_ROWS}.range") == rng

        # a 3-s range typed into the picker: every raw sample, at full resolution
        mid = (t0 + t1) / 2 / 1000
        lo = datetime.fromtimestamp(mid, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
        hi = datetime.fromtimestamp(mid + 3, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
        page.fill(f"#{ids.RANGE_FROM}", lo)
        page.fill(f"#{ids.RANGE_TO}", hi)
        page.click(f"#{ids.RANGE_GO}")
        page.wait_for_function(f"() => document.querySelector('#{ids.VIEW_NOTE}').innerText"
                               f".includes('every sample')", timeout=10_000)
        a = datetime.strptime(lo, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
        raw = ro.read_range(a - 0.35, a + 3 + 0.35)
        fine = _lane(page, lane, keys)
        assert sum(v is not None for v in fine["y"]) == int((raw["gpu"] == 0).sum()) > 50

        # hover: every GPU's values at that instant and the window's phase
        page.mouse.move(bb["x"] + bb["width"] * 0.5, y)
        page.wait_for_function(f"() => document.querySelector('#{ids.HOVER_PANEL}')"
                               f".innerText.includes('UTC')", timeout=10_000)
        page.wait_for_timeout(500)
        hover = page.inner_text(f"#{ids.HOVER_PANEL}")
        assert "sure" in hover and any(p in hover for p in ("IDLE", "PREFILL", "DECODE"))
        rows = page.locator(f"#{ids.HOVER_PANEL} tbody tr")
        assert rows.count() == len(gpus)
        cells = rows.nth(0).locator("td").all_inner_texts()
        assert cells[-2] != "–" and float(cells[-2].replace(",", "")) > 50  # power, W
        if shots:
            page.screenshot(path=str(Path(shots) / "dashboard_hover.png"), full_page=True)

        # click: that window is selected; its features and reasons are listed
        page.mouse.click(bb["x"] + bb["width"] * 0.5, y)
        page.wait_for_function(f"() => document.querySelector('#{ids.WINDOW_PANEL}')"
                               f".innerText.includes('Selected window')", timeout=10_000)
        panel = page.inner_text(f"#{ids.WINDOW_PANEL}")
        assert "scores:" in panel and "load mean / max" in panel
        sel = _lane(page, ("selected",), keys)
        assert len(sel["x"]) == 1
        # a double-click on a zoomed view shows the whole session again
        page.mouse.dblclick(bb["x"] + bb["width"] * 0.3, y)
        page.wait_for_function(f"() => document.querySelector('#{ids.VIEW_NOTE}').innerText"
                               f".includes('(10.0 min)')", timeout=10_000)
        assert _action_kinds(sent)[-1] == "all"
        ro.close()
        assert not errors, errors
        page.close()
    finally:
        shutdown()


def test_a_typed_decode_range_gets_its_own_verdict_in_the_header(browser, tmp_path):
    """Type the range of a labelled decode stretch with GPU 1 hot (the bundled trace, stored
    at its own times, nothing collecting): the header reads DECODE, hot GPU 1 and names the
    range; pausing a followed view also describes what stays on screen."""
    from tealeaves.data import bundled_labels_path, bundled_trace_path
    from tealeaves.data.traces import read_labels, read_trace

    db = tmp_path / "s.db"
    with SampleStore(db) as store:
        store.append(read_trace(bundled_trace_path()).samples)
    labels = read_labels(bundled_labels_path())
    row = labels[(labels["phase"] == "decode") & (labels["hot_gpu"] == 1)].iloc[0]
    t0, t1 = float(row["start"]) + 1.0, float(row["end"]) - 1.0
    url, shutdown = start_in_thread(store_path=db, collect=False)
    try:
        page, errors = _open(browser, url)
        # the load bands' labels sit left of the plot area: no line crosses them (issue 21)
        boxes = page.evaluate(f"""() => {{
            const gd = {GD};
            const left = gd.querySelector('.nsewdrag').getBoundingClientRect().left;
            return Array.from(gd.querySelectorAll('.yaxislayer-above text'))
                .filter(t => t.textContent.startsWith('GPU '))
                .map(t => [t.textContent, t.getBoundingClientRect().right, left]);
        }}""")
        assert len(boxes) == 2 and all(right <= left + 1 for _, right, left in boxes), boxes
        page.fill(f"#{ids.RANGE_FROM}", f"{t0:.3f}")
        page.fill(f"#{ids.RANGE_TO}", f"{t1:.3f}")
        page.click(f"#{ids.RANGE_GO}")
        page.wait_for_function(f"() => document.querySelector('#{ids.HEADER_RANGE}')"
                               f".innerText.includes('range on screen')", timeout=20_000)
        stamp = datetime.fromtimestamp(t0, tz=UTC).strftime("%H:%M:%S")
        assert stamp in page.inner_text(f"#{ids.HEADER_RANGE}")
        assert "DECODE" in page.inner_text(f"#{ids.PHASE}")
        assert "GPU 1" in page.inner_text(f"#{ids.HOT_GPU}")
        assert "decode windows" in page.inner_text(f"#{ids.IMBALANCE}")
        # back to following: the header describes the newest window again
        page.click(f"#{ids.PRESET_1MIN}")
        page.wait_for_function(f"() => document.querySelector('#{ids.HEADER_RANGE}')"
                               f".innerText.includes('following live')", timeout=20_000)
        assert "newest window" in page.inner_text(f"#{ids.HEADER_RANGE}")
        # pause: the header and the note describe the range that stays on screen
        page.click(f"#{ids.FOLLOW}")
        page.wait_for_function(f"() => document.querySelector('#{ids.HEADER_RANGE}')"
                               f".innerText.includes('range on screen')", timeout=20_000)
        assert "paused" in page.inner_text(f"#{ids.VIEW_NOTE}")
        assert not errors, errors
        page.close()
    finally:
        shutdown()


def _mixed_near_prefill(classify):
    """``classify_with_segments`` as with a share model: calibrated shares, every window all
    of its phase, but a window next to a prefill one and not prefill itself 55 % its phase,
    40 % prefill, 5 % the third (its verdict "mixed: ...")."""
    import numpy as np

    from tealeaves.classifier.shares import verdict

    def run(*args, **kwargs):
        windows, segments = classify(*args, **kwargs)
        if windows.empty:
            return windows, segments
        phase = windows["phase"].to_numpy()
        sh = np.column_stack([phase == p for p in ("idle", "prefill", "decode")]).astype(float)
        near = (phase != "prefill") & ((np.roll(phase, 1) == "prefill")
                                       | (np.roll(phase, -1) == "prefill"))
        sh[near] = np.where(sh[near] > 0, 0.55, 0.05)
        sh[near, 1] = 0.40
        for k, p in enumerate(("idle", "prefill", "decode")):
            windows[f"share_{p}"] = sh[:, k]
        windows["verdict"] = verdict(sh)
        windows.attrs["shares"] = "calibrated"
        return windows, segments
    return run


def test_mixed_windows_are_striped_and_the_header_and_hover_give_the_shares(
        browser, tmp_path, monkeypatch):
    """Issue 34, with a classifier that gives calibrated shares (windows beside a prefill
    mixed with it): a typed range's header gives the phases' shares of its time and what the
    verdicts stood on, the ribbon stripes the mixed windows, and the hover names the window's
    verdict; a followed view draws the stripes too."""
    from tealeaves.app.dashboard import history
    from tealeaves.data import bundled_labels_path, bundled_trace_path
    from tealeaves.data.traces import read_labels, read_trace

    monkeypatch.setattr(history, "classify_with_segments",
                        _mixed_near_prefill(history.classify_with_segments))
    db = tmp_path / "s.db"
    tr = read_trace(bundled_trace_path())
    with SampleStore(db) as store:
        store.put_devices(tr.devices)
        store.append(tr.samples)
    labels = read_labels(bundled_labels_path())
    edge = float(labels[labels["phase"] == "prefill"].iloc[0]["end"])  # prefill -> next
    t0, t1 = edge - 8.0, edge + 8.0
    stripes = KEYS.index(("mixed", "prefill"))
    url, shutdown = start_in_thread(store_path=db, collect=False)
    shots = os.environ.get("TEALEAVES_SCREENSHOT_DIR")
    try:
        page, errors = _open(browser, url)
        page.fill(f"#{ids.RANGE_FROM}", f"{t0:.3f}")
        page.fill(f"#{ids.RANGE_TO}", f"{t1:.3f}")
        page.click(f"#{ids.RANGE_GO}")
        page.wait_for_function(f"() => document.querySelector('#{ids.HEADER_RANGE}')"
                               f".innerText.includes('range on screen')", timeout=20_000)
        phase = page.inner_text(f"#{ids.PHASE}")
        assert "of the time (calibrated shares)" in phase and "prefill" in phase, phase
        inputs = page.inner_text(f"#{ids.INPUTS}")
        assert "10 Hz per GPU" in inputs and "sm_active" in inputs, inputs
        assert "stood on" in page.get_attribute(f"#{ids.INPUTS}", "title")
        # the ribbon: stripes over the mixed windows, in the prefill colour
        page.wait_for_function(f"() => {GD}._fullData[{stripes}]._length > 0", timeout=10_000)
        drawn = page.evaluate(f"""() => {{ const t = {GD}._fullData[{stripes}];
            return [t.marker.pattern.shape, t.marker.pattern.fgcolor, Array.from(t.x)]; }}""")
        assert drawn[0] == "/" and drawn[1] == F.PHASE_COLORS["prefill"]
        assert all(t0 * 1000 <= x <= t1 * 1000 for x in drawn[2])
        assert page.locator("#tl-graph pattern").count() > 0  # plotly drew the stripes
        # hover a striped window: the panel names its verdict and that its shares are calibrated
        x_ms = drawn[2][0]
        xy = page.evaluate(f"""() => {{ const gd = {GD}; const r = gd.getBoundingClientRect();
            const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
            return [r.left + xa._offset + xa.l2p({x_ms}), r.top + ya._offset + ya._length / 2];
            }}""")
        page.mouse.move(xy[0], xy[1])
        page.wait_for_function(f"() => {{ const e = document.querySelector('#{ids.HOVER_SHARES}');"
                               f" return e && e.innerText.includes('mixed:') }}", timeout=10_000)
        hover = page.inner_text(f"#{ids.HOVER_SHARES}")
        assert "prefill 40 %" in hover and "calibrated shares of its time" in hover, hover
        if shots:
            page.screenshot(path=str(Path(shots) / "dashboard_shares.png"), full_page=False)
        # following the last minute: the whole new figure draws the stripes as well
        page.click(f"#{ids.PRESET_1MIN}")
        page.wait_for_function(f"() => document.querySelector('#{ids.HEADER_RANGE}')"
                               f".innerText.includes('following live')", timeout=20_000)
        page.wait_for_function(f"() => {GD}.data.length === {len(KEYS)} && "
                               f"{GD}._fullData[{stripes}]._length > 0", timeout=20_000)
        assert not errors, errors
        page.close()
    finally:
        shutdown()


def test_a_preset_click_batched_with_a_redraws_relayout_still_lands(browser, tmp_path):
    """A click on "all" that reaches the page in the same batch as plotly's relayout of a
    redraw (a followed figure reports an autorange, which is no request): the click is the
    action sent, and the view lands on the whole session.  Reading only the first input that
    fired lost such a click (CI 12-05 and 12-07: a loaded page, the view still following
    150 s later)."""
    from tealeaves.app.bench.dashboard import build_store

    db = tmp_path / "batched.db"
    build_store(db, seconds=120.0, n_gpus=2, log=lambda *_: None)
    url, shutdown = start_in_thread(store_path=db, collect=False)
    try:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        sent: list[str] = []
        page.on("request", lambda r: sent.append(r.post_data)
                if "_dash-update-component" in r.url else None)
        page.goto(url)
        page.wait_for_function(f"() => {{ const gd = {GD}; return gd && gd._fullData && "
                               f"gd._fullData.length > 0 }}", timeout=30_000)
        # both events in one task: dash-renderer hands them to the action callback together
        # (the relayout first, as the graph is its first input)
        page.evaluate(f"() => {{ const gd = {GD}; "
                      f"gd.emit('plotly_relayout', {{'xaxis.autorange': true}}); "
                      f"document.querySelector('#{ids.PRESET_ALL}').click(); }}")
        page.wait_for_function(
            f"() => document.querySelector('#{ids.PRESET_ALL}').className.includes('tl-btn-on')",
            timeout=60_000)
        assert "all" in _action_kinds(sent)
    finally:
        shutdown()
