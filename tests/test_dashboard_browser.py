"""The real dashboard in Chromium: replay of the bundled trace, werkzeug on 127.0.0.1:0.

Checks that the ribbon and the GPU lanes render with data, that a stored sample reaches the page
within 1 s, that zoom survives live updates, and saves ``docs/dashboard.png``.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from tealeaves.app import figures as F
from tealeaves.app.server import start_in_thread
from tealeaves.data.store import SampleStore

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--headless", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
# The README's screenshot is refreshed only on request (TEALEAVES_SCREENSHOT=docs/dashboard.png),
# so a test run leaves the checkout clean.
SCREENSHOT_ENV = "TEALEAVES_SCREENSHOT"
GPUS = [0, 1]  # the bundled trace holds two H200s
KEYS = F.trace_keys(GPUS)
LANE = KEYS.index(("lane", "power_w", 0))
N_ROWS = F.N_ROWS  # the bottom x axis; the other lanes' x axes match it
GD = "document.querySelector('#tl-graph .js-plotly-plot')"


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (Debian's chromium package)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


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


def test_live_page_renders_and_updates_within_a_second(browser, tmp_path):
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

        # When is each stored sample first on the page?  Watch the store (read-only) and the
        # page's newest bin side by side; both clocks are this machine's wall clock.
        stored: list[tuple[float, float]] = []  # (wall time seen stored, newest sample stamp)
        stop = threading.Event()

        def watch() -> None:
            ro = SampleStore(db, readonly=True)
            cursor = ro.cursor()
            while not stop.is_set():
                frame, new = ro.read_since(cursor)
                if new != cursor:
                    stored.append((time.time(), float(frame["timestamp"].max())))
                    cursor = new
                stop.wait(0.01)
            ro.close()

        page.evaluate(f"""() => {{
            window.__tl = [];
            const gd = {GD};
            let last = null;
            window.__tlTimer = setInterval(() => {{
                const x = gd.data[{LANE}].x;
                const v = x[x.length - 1];
                if (v !== last) {{ last = v; window.__tl.push([Date.now() / 1000, v / 1000]); }}
            }}, 10);
        }}""")
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        time.sleep(5.0)
        stop.set()
        watcher.join(2)
        shown = page.evaluate("() => { clearInterval(window.__tlTimer); return window.__tl; }")
        assert len(shown) >= 5, shown  # the page moved many times in 5 s
        assert shown[-1][1] > shown[0][1] + 3.0  # ... and covers the new seconds
        half_bin = F_BIN_S / 2
        lags = []
        for t_stored, ts in stored:
            # the bin holding ``ts`` is on the page once the newest bin ends after ``ts``
            seen = [t for t, centre in shown if centre + half_bin > ts]
            if seen and t_stored < shown[-1][0] - 1.0:
                lags.append(min(seen) - t_stored)
        assert len(lags) >= 10, (stored, shown)
        lags.sort()
        print(f"stored-to-page lag over {len(lags)} batches: median {lags[len(lags) // 2]:.2f} s, "
              f"max {lags[-1]:.2f} s")
        # A new sample is on the page within a second (median); every one arrives. The bound on
        # the worst case is loose on purpose: a busy 2-core CI machine must not flake this test
        # (measured on an idle one: median 0.6 s, max 0.8 s).
        assert lags[len(lags) // 2] < 1.0, lags
        assert lags[-1] < 3.0, lags

        # zoom (a mouse drag over the power lane) survives live updates, appends continue
        power_row = F.FIRST_LANE_ROW + [lane.key for lane in F.LANES].index("power")
        box = page.locator(f"#tl-graph .draglayer g.x{power_row}y{power_row} rect.nsewdrag")
        bb = box.bounding_box()
        y = bb["y"] + bb["height"] / 2
        page.mouse.move(bb["x"] + bb["width"] * 0.5, y)
        page.mouse.down()
        page.mouse.move(bb["x"] + bb["width"] * 0.7, y, steps=5)
        page.mouse.move(bb["x"] + bb["width"] * 0.8, y, steps=5)
        page.mouse.up()
        page.mouse.move(5, 5)  # off the figure, so no hover label lingers
        zoomed = page.evaluate(f"() => {GD}.layout.xaxis{N_ROWS}.range.slice()")
        before = page.evaluate(f"() => {GD}.data[{LANE}].x.length")
        time.sleep(1.6)
        after = page.evaluate(f"() => {GD}.data[{LANE}].x.length")
        assert after >= before + 8, (before, after)  # still appending ...
        assert page.evaluate(f"() => {GD}.layout.xaxis{N_ROWS}.range") == zoomed  # ... kept zoom
        assert page.evaluate(f"() => {GD}.layout.xaxis{N_ROWS}.autorange") is False
        x = page.evaluate(f"() => {GD}.data[{LANE}].x")
        span_ms = _parse_ms(zoomed[1]) - _parse_ms(zoomed[0])
        assert 0 < span_ms < 0.5 * (x[-1] - x[0])
        assert not errors, errors
        page.close()
    finally:
        shutdown()


F_BIN_S = 0.1  # the dashboard's default lane resolution (DashboardConfig.bin_s)


def _parse_ms(s: str) -> float:
    """Milliseconds since the epoch of a plotly date-axis range string (UTC)."""
    s = s.replace("Z", "").replace("T", " ")
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in s else "%Y-%m-%d %H:%M:%S"
    return datetime.strptime(s, fmt).replace(tzinfo=UTC).timestamp() * 1000


def test_screenshot_shows_phases_and_a_hot_gpu(browser, tmp_path):
    """Replay at 4x for ~17 s (about 68 s of the trace): idle, prefill, decode and both hot
    GPUs are on the page; save the screenshot the README embeds."""
    url, shutdown = start_in_thread(force_replay=True, speed=4.0)
    try:
        page, errors = _open(browser, url)
        deadline = time.time() + 17.0
        while time.time() < deadline:
            page.wait_for_timeout(1000)
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
