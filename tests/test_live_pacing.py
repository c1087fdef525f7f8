"""A page asks only for what can change on it (issue 35: sample-to-screen with four pages on
two cores).

Measured before this (``bench speed``'s latency row, docs/benchmarks.md): a paused page burnt a
third of a core answering ten ticks a second that changed nothing, and four followed pages
queued behind each other's redraws.  Now:

- an answer that changes nothing names only ``busy`` (and the status line once a second);
- a page that does not follow asks once per ``IDLE_TICK_MS``;
- a followed page asks no sooner than ``PACE`` times its last update's cost after its last
  redraw.

Browser tests wait for states; the counts they assert are of requests, bounded by generous
margins (a request per second allowed where the old page sent ten).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import dash
import pytest

from tealeaves.app import figures as F
from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.config import IDLE_TICK_MS, PACE, DashboardConfig
from tealeaves.app.dashboard.live_step import Step
from tealeaves.app.dashboard.pages.live import STATUS_EVERY_S, page_update
from tealeaves.app.dashboard.server import start_in_thread

GD = "document.querySelector('#tl-graph .js-plotly-plot')"


class _Live:
    """The two things ``page_update`` reads of a ``LiveView``: its settings and status line."""

    def __init__(self) -> None:
        self.config = DashboardConfig()
        self.asked = 0

    def status(self, state):
        self.asked += 1
        return [f"status {self.asked}"]


def _cursor(**kw) -> dict:
    return {"mode": "follow", "follow": True, "span": 60.0, "factor": 1, "k": 100, "j": 20,
            "gpus": [0, 1], "sent": 1.0, "ts_last": 10.0, "cursor": 5, **kw}


def test_an_answer_that_changes_nothing_names_only_busy_and_the_status_once_a_second():
    live, nu = _Live(), dash.no_update
    before = _cursor(status_at=time.time())
    st = {**before, "sent": 2.0, "ts_last": 10.1, "cursor": 6}
    out = page_update(live, Step(state=st), st, nu, False, "UTC", before)
    assert out["busy"] is None
    assert all(out[k] is nu for k in out if k not in ("busy", "presets"))
    assert all(p is nu for p in out["presets"])
    assert live.asked == 0
    # a second later the status line (samples stored, age of the newest) goes out, with the
    # cursor that says when
    before = _cursor(status_at=time.time() - STATUS_EVERY_S - 0.01)
    out = page_update(live, Step(state=st), st, nu, False, "UTC", before)
    assert out["status"] == ["status 1"] and out["cursor"]["status_at"] > before["status_at"]
    assert out["cursor"]["k"] == before["k"] and out["extend"] is nu
    # new bins: the whole answer, status or not
    moved = {**st, "k": 102}
    out = page_update(live, Step(state=moved, extend=[{"x": [[1]]}, [0], 600]), moved, nu,
                      False, "UTC", _cursor(status_at=time.time()))
    assert out["extend"] is not nu and out["cursor"]["k"] == 102 and out["status"] is nu
    # an action always answers in full
    out = page_update(live, Step(state=st), st, nu, True, "UTC", _cursor(status_at=time.time()))
    assert out["cursor"] is not nu and out["status"] != nu and out["follow_label"] is not nu


@pytest.fixture(scope="module")
def replay():
    db = Path(tempfile.mkdtemp(prefix="tl-pace-")) / "replay.db"
    url, shutdown = start_in_thread(force_replay=True, speed=1.0, store_path=db)
    yield url
    shutdown()


def _pulls(page) -> list[float]:
    """Times (monotonic s) of the page's live update requests, appended as they go."""
    sent: list[float] = []
    page.on("request", lambda r: sent.append(time.monotonic())
            if "_dash-update-component" in r.url and f'"{ids.PULL}.data"' in (r.post_data or "")
            else None)
    return sent


def _open(browser, url):
    page = browser.new_page(viewport={"width": 1440, "height": 900}, timezone_id="UTC")
    page.goto(url)
    lane = F.trace_keys([0, 1]).index(("lane", "power_w", 0))
    page.wait_for_function(f"() => {{ const gd = {GD}; return gd && gd._fullData && "
                           f"gd._fullData[{lane}]._length > 10 }}", timeout=60_000)
    return page, lane


def test_a_paused_page_asks_once_a_second_and_its_status_line_still_moves(browser, replay):
    page, _ = _open(browser, replay)
    try:
        page.click(f"#{ids.FOLLOW}")
        page.wait_for_function(f"() => document.querySelector('#{ids.FOLLOW}')"
                               f".innerText.includes('paused')", timeout=15_000)
        sent = _pulls(page)
        status0 = page.inner_text(f"#{ids.STATUS}")
        # wait for the status line to change (samples stored grows), then count
        page.wait_for_function(f"() => document.querySelector('#{ids.STATUS}').innerText "
                               f"!== {status0!r}", timeout=20_000)
        t0 = time.monotonic()
        n0 = len(sent)
        while time.monotonic() - t0 < 4.0:
            page.wait_for_timeout(250)
        asked = len(sent) - n0
        # one per IDLE_TICK_MS (4 in 4 s), with room for a late first and a retry; the page
        # before this asked on every 100-ms tick (about 40)
        assert asked <= 4.0 / (IDLE_TICK_MS / 1000) + 3, asked
        assert asked >= 1
    finally:
        page.close()


def test_a_followed_page_waits_its_pace_after_a_redraw_then_asks_again(browser, replay):
    page, lane = _open(browser, replay)
    try:
        sent = _pulls(page)
        page.wait_for_function("() => window.__tlPace && window.__tlPace.cost > 0",
                               timeout=20_000)
        # make the last update look 4 s expensive: the page must not ask for PACE x 4 s
        page.evaluate("() => { const P = window.__tlPace; P.cost = 4000; P.done = Date.now(); "
                      "P.askedAt = Date.now(); }")
        t0 = time.monotonic()
        n0 = len(sent)
        while time.monotonic() - t0 < min(3.0, PACE * 4.0 - 0.5):
            page.wait_for_timeout(200)
        # (one request may already have been on its way when the cost was set)
        assert len(sent) - n0 <= 1
        # a cheap update again: the page asks and draws new bins
        x0 = page.evaluate(f"() => {{ const x = {GD}._fullData[{lane}].x; "
                           f"return x[x.length - 1] }}")
        page.evaluate("() => { window.__tlPace.cost = 0; }")
        page.wait_for_function(f"() => {{ const x = {GD}._fullData[{lane}].x; "
                               f"return x[x.length - 1] > {x0} }}", timeout=20_000)
        assert len(sent) > n0
    finally:
        page.close()
