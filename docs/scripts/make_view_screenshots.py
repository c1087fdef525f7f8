"""The README's views of issue 21, made in headless Chromium from stores built here:

- ``docs/dashboard_8gpu_1920.png`` and ``docs/dashboard_8gpu_1366.png``: ten minutes of eight
  GPUs (``app.bench.dashboard.build_store``: a 4-vs-4 split while decoding) at two window sizes;
- ``docs/dashboard_range_header.png``: the bundled trace zoomed (typed range) onto its decode
  stretch with GPU 1 hot: the header speaks of that range;
- ``docs/screenshots_no_telemetry.png``: a picture whose scrot name is an hour off the store's
  data: the page says what the store holds and offers the one-click shift.

Run: ``.venv/bin/python docs/scripts/make_view_screenshots.py [OUT_DIR]`` (default ``docs/``).
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from playwright.sync_api import sync_playwright

from tealeaves.app.bench.dashboard import build_store
from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.server import start_in_thread
from tealeaves.data import bundled_labels_path, bundled_trace_path
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import read_labels, read_trace

CHROMIUM = "/usr/bin/chromium"
GRAPH = "#tl-graph .js-plotly-plot"


def eight_gpus(b, out: Path, tmp: Path) -> None:
    db = tmp / "eight.db"
    build_store(db, seconds=600.0, n_gpus=8, log=lambda *a: None)
    url, stop = start_in_thread(store_path=db, collect=False)
    try:
        for w, h in ((1920, 1080), (1366, 768)):
            page = b.new_page(viewport={"width": w, "height": h})
            page.goto(url)
            page.wait_for_selector(GRAPH)
            time.sleep(4)
            page.screenshot(path=str(out / f"dashboard_8gpu_{w}.png"))
            page.close()
    finally:
        stop()


def range_header_and_no_telemetry(b, out: Path, tmp: Path) -> None:
    db = tmp / "bundled.db"
    samples = read_trace(bundled_trace_path()).samples
    with SampleStore(db) as store:
        store.append(samples)
    labels = read_labels(bundled_labels_path())
    row = labels[(labels["phase"] == "decode") & (labels["hot_gpu"] == 1)].iloc[0]
    url, stop = start_in_thread(store_path=db, collect=False)
    try:
        page = b.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(url)
        page.wait_for_selector(GRAPH)
        page.fill(f"#{ids.RANGE_FROM}", f"{float(row['start']) + 1.0:.3f}")
        page.fill(f"#{ids.RANGE_TO}", f"{float(row['end']) - 1.0:.3f}")
        page.click(f"#{ids.RANGE_GO}")
        page.wait_for_function(f"() => document.querySelector('#{ids.HEADER_RANGE}')"
                               f".innerText.includes('range on screen')", timeout=30_000)
        time.sleep(1.5)
        page.screenshot(path=str(out / "dashboard_range_header.png"))
        # a picture named an hour before the data (its clock read in the wrong zone)
        at = datetime.fromtimestamp(float(samples["timestamp"].min()) + 40.0 - 3600.0, tz=UTC)
        pic = tmp / f"{at:%Y-%m-%d-%H%M%S}_1600x1000_scrot.png"
        pic.write_bytes((out / "dashboard.png").read_bytes())
        page.click(f"#{ids.TAB_SHOTS}")
        page.set_input_files(f"#{ids.SHOT_UPLOAD} input[type=file]", str(pic))
        page.wait_for_selector(".tl-no-telemetry", timeout=30_000)
        time.sleep(1.5)
        page.locator(f"#{ids.SHOT_DETAIL}").screenshot(
            path=str(out / "screenshots_no_telemetry.png"))
        page.close()
    finally:
        stop()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d, sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--headless"])
        eight_gpus(b, out, Path(d))
        range_header_and_no_telemetry(b, out, Path(d))
        b.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
