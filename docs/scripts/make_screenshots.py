"""Make the dashboard screenshots in docs/ (not a test; needs Chromium and playwright).

    python docs/scripts/make_screenshots.py [OUT_DIR]   (default: docs/)

1. ``dashboard_history.png``: one hour of eight GPUs (``tealeaves bench dashboard``'s store:
   the bundled real H200 recording repeated to an hour, eight GPUs), the "all" view, load bands
   busiest first.
2. ``dashboard_verify_zoom.png``: the real two-GPU H200 run of draft-tree verify steps
   (``data/traces/h200x2_verify_trees.parquet``) zoomed to 1.5 s around the onset of the first
   verify run after idle, where the lanes show every raw sample; one window selected.
3. ``dashboard_hover.png``: the hour, zoomed to a minute, with the hover panel filled in.
4. ``dashboard_laptop.png``: the hour's follow view on a 1366x768 laptop screen.
5. ``dashboard.png`` (the README's first picture): the bundled trace replayed at 4x, 20 s in.
6. ``dashboard_h200_aligned.png``: a real two-GPU run replayed at 4x with the SGLang-format log
   the workload wrote, aligned by the estimated offset (``data/traces/h200x2_bursts.*``).
7. ``screenshots_detail.png`` and ``screenshots_compare.png``: the Screenshots page with two
   pictures of GPU graphs (``docs/dashboard.png`` and ``dashboard_h200_aligned.png``,
   uploaded under scrot and GNOME default names) placed on the bundled trace moved to
   2026-05-31, browser in Europe/Berlin: one opened with top/bottom regions, then both compared.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd
from playwright.sync_api import sync_playwright

from tealeaves.app.bench.dashboard import build_store
from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.server import start_in_thread
from tealeaves.data.importers import load_trace
from tealeaves.data.store import SampleStore

ROOT = Path(__file__).resolve().parents[2]
GD = "document.querySelector('#tl-graph .js-plotly-plot')"
ARGS = ["--no-sandbox", "--disable-gpu", "--headless"]


def _wait_note(page, text: str) -> None:
    page.wait_for_function(f"() => document.querySelector('#{ids.VIEW_NOTE}').innerText"
                           f".includes({text!r})", timeout=60_000)


def _show(page, t0: float, t1: float) -> None:
    from datetime import UTC, datetime

    def fmt(t):
        return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    page.fill(f"#{ids.RANGE_FROM}", fmt(t0))
    page.fill(f"#{ids.RANGE_TO}", fmt(t1))
    page.click(f"#{ids.RANGE_GO}")
    page.wait_for_timeout(1500)


def _hover_lane(page, frac: float, row: int) -> dict:
    name = "xy" if row == 1 else f"x{row}y{row}"
    box = page.locator(f"#tl-graph .draglayer g.{name} rect.nsewdrag")
    box.scroll_into_view_if_needed()
    bb = box.bounding_box()
    return {"x": bb["x"] + bb["width"] * frac, "y": bb["y"] + bb["height"] / 2}


def _trace_store(trace: Path, store: Path) -> Path:
    """A fresh SQLite store holding ``trace``'s samples and device rows."""
    if store.exists():
        store.unlink()
    tr = load_trace(trace)
    with SampleStore(store) as s:
        s.put_devices(tr.devices)
        s.append(tr.samples)
    return store


def _open(browser, url: str, width: int = 1720, height: int = 1000):
    """A page on the dashboard at ``url``, once its timeline has drawn."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(url, timeout=120_000)
    page.wait_for_function(f"() => {GD} && {GD}._fullData", timeout=120_000)
    return page


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path("/tmp/tealeaves-shots")
    tmp.mkdir(exist_ok=True)
    hour = tmp / "hour.db"
    build_store(hour, 3600.0, 8)
    verify = _trace_store(ROOT / "data/traces/h200x2_verify_trees.parquet", tmp / "verify.db")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        url, stop = start_in_thread(store_path=hour, collect=False)
        try:
            page = _open(b, url)
            page.check(f"#{ids.ORDER} input[value='load']")
            page.wait_for_timeout(1500)
            page.click(f"#{ids.PRESET_ALL}")
            _wait_note(page, "MinMaxLTTB")
            page.mouse.move(3, 3)
            page.screenshot(path=str(out / "dashboard_history.png"), full_page=True)
            # a minute in the middle, hovered over a decode stretch
            first = page.evaluate(f"() => {GD}.layout.xaxis.range[0]")
            t0 = first / 1000 if isinstance(first, int | float) else time.time() - 3600
            _show(page, t0 + 1800, t0 + 1860)
            pt = _hover_lane(page, 0.62, 3)
            page.mouse.move(pt["x"], pt["y"])
            page.wait_for_timeout(1200)
            page.screenshot(path=str(out / "dashboard_hover.png"), full_page=True)
            lap = _open(b, url, 1366, 768)
            lap.wait_for_timeout(2000)
            lap.screenshot(path=str(out / "dashboard_laptop.png"), full_page=True)
        finally:
            stop()
        url, stop = start_in_thread(store_path=verify, collect=False)
        try:
            page = _open(b, url)
            # the first verify run that starts from idle: its onset, 0.5 s before to 1 s after
            lab = pd.read_csv(ROOT / "data/traces/h200x2_verify_trees.labels.csv")
            after_idle = lab["phase"].shift(1).eq("idle") & lab["workload"].str.startswith("verify")
            start = float(lab.loc[after_idle, "start"].iloc[0])
            print("verify step:", lab.loc[after_idle, "workload"].iloc[0])
            _show(page, start - 0.5, start + 1.0)
            _wait_note(page, "every sample")
            pt = _hover_lane(page, 0.5, 1)
            page.mouse.click(pt["x"], pt["y"])
            page.wait_for_timeout(1200)
            pt = _hover_lane(page, 0.45, 3)
            page.mouse.move(pt["x"], pt["y"])
            page.wait_for_timeout(1200)
            page.screenshot(path=str(out / "dashboard_verify_zoom.png"), full_page=True)
        finally:
            stop()
        for name, kwargs in (
                ("dashboard.png", {"force_replay": True, "speed": 4.0}),
                ("dashboard_h200_aligned.png", {
                    "trace": ROOT / "data/traces/h200x2_bursts.parquet", "speed": 4.0,
                    "server_log": ROOT / "data/traces/h200x2_bursts.sglang.log", "tz": "UTC"})):
            url, stop = start_in_thread(**kwargs)
            try:
                page = _open(b, url)
                page.wait_for_timeout(20_000)
                page.mouse.move(3, 3)
                page.screenshot(path=str(out / name), full_page=True)
            finally:
                stop()
        _screenshots_page(b, out, tmp)
        b.close()


def _screenshots_page(b, out: Path, tmp: Path) -> None:
    from datetime import UTC, datetime

    from tealeaves.data import bundled_trace_path
    from tealeaves.data.traces import read_trace

    at = datetime(2026, 5, 31, 16, 31, 15, tzinfo=UTC).timestamp()  # 18:31:15 in Berlin
    tr = read_trace(bundled_trace_path())
    s = tr.samples.copy()
    s["timestamp"] += at - 45.0 - float(s["timestamp"].min())
    db = tmp / "may31.db"
    if db.exists():
        db.unlink()
    with SampleStore(db) as store:
        store.put_devices(tr.devices)
        store.append(s)
    url, stop = start_in_thread(store_path=db, collect=False)
    try:
        ctx = b.new_context(timezone_id="Europe/Berlin", viewport={"width": 1600, "height": 1000})
        page = ctx.new_page()
        page.goto(url, timeout=120_000)
        page.wait_for_function(f"() => {GD} && {GD}._fullData", timeout=120_000)
        page.click(f"#{ids.TAB_SHOTS}")
        page.wait_for_timeout(1000)
        files = [("2026-05-31-183115_3335x1907_scrot.png", out / "dashboard.png"),
                 ("Screenshot from 2026-05-31 18-31-45.png", out / "dashboard_h200_aligned.png")]
        for name, path in files:
            page.set_input_files(f"#{ids.SHOT_UPLOAD} input[type=file]", files=[
                {"name": name, "mimeType": "image/png", "buffer": path.read_bytes()}])
            page.wait_for_timeout(2500)
        page.locator(f"#{ids.SHOT_LIST} button").first.click()  # open the first
        page.wait_for_timeout(1500)
        page.click(f"#{ids.SHOT_SPLIT}")
        page.wait_for_timeout(1500)
        page.screenshot(path=str(out / "screenshots_detail.png"), full_page=True)
        for box in page.locator(f"#{ids.SHOT_CMP} input[type=checkbox]").all():
            box.check()
        page.wait_for_timeout(2000)
        page.locator(f"#{ids.SHOT_COMPARE}").scroll_into_view_if_needed()
        page.locator(f"#{ids.SHOT_COMPARE}").screenshot(path=str(out / "screenshots_compare.png"))
    finally:
        stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs")
