"""Make ``docs/verify_attention_dashboard.png`` (not a test; needs Chromium and playwright):
the collector's recording of a sustained verify loop (``docs/results/verify_attention_trace.parquet``,
``tealeaves bench verify-attention --sustain 25``) in the dashboard, the whole recording on
screen and one window inside the verify stretch selected, so the verdict panel shows how the
shipped phase model labels it.

    python docs/scripts/make_verify_trace_screenshot.py [OUT_DIR]   (default: docs/)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

from tealeaves.app.dashboard.server import start_in_thread

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_screenshots import ARGS, _hover_lane, _open, _show, _trace_store

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "docs/results/verify_attention_trace.parquet"
MARKS = ROOT / "docs/results/verify_attention_trace.marks.json"


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    Path("/tmp/tealeaves-shots").mkdir(exist_ok=True)
    store = _trace_store(TRACE, Path("/tmp/tealeaves-shots/verify_attention.db"))
    marks = json.loads(MARKS.read_text())
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        url, stop = start_in_thread(store_path=store, collect=False)
        try:
            page = _open(b, url)
            _show(page, marks["idle_start"] - 2, marks["idle_end"] + 2)
            span = marks["idle_end"] + 2 - (marks["idle_start"] - 2)
            mid = (marks["decode_start"] + marks["decode_end"]) / 2
            pt = _hover_lane(page, (mid - marks["idle_start"] + 2) / span, 1)
            page.mouse.click(pt["x"], pt["y"])
            page.wait_for_timeout(1500)
            page.mouse.move(3, 3)
            page.screenshot(path=str(out / "verify_attention_dashboard.png"), full_page=True)
        finally:
            stop()
        b.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs")
