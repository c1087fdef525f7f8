"""The ribbon's 0.1-s phase segments in Chromium: a followed page extends one bar per 0.1-s slot,
a zoom draws the segments as bars of their own widths (typed arrays in a ``Patch``), and a
hover over the ribbon names the segment and its window.  Skipped without Chromium."""

from __future__ import annotations

import itertools
import math
import time
from datetime import UTC, datetime

import pytest

from tealeaves.app import figures as F
from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.server import start_in_thread

GD = "document.querySelector('#tl-graph .js-plotly-plot')"


def _page(browser, url: str, keys: list):
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    lane = keys.index(("lane", "power_w", 0))
    page.wait_for_function(f"() => {{ const gd = {GD}; return gd && gd._fullData && "
                           f"gd._fullData[{lane}]._length > 20 }}", timeout=30_000)
    return page, errors


def _ribbon(page, keys: list) -> list[dict]:
    idx = [keys.index(("phase", p)) for p in F.RIBBON_PHASES]
    return page.evaluate(f"""() => {[*idx]}.map(i => {{ const t = {GD}._fullData[i];
        const w = t.width;
        return {{x: Array.from(t.x || []), lit: Array.from(t.y || []).filter(
                    v => v !== null && !Number.isNaN(v)).length,
                 width: (w !== null && typeof w === 'object') ? Array.from(w) : w}} }})""")


def test_followed_ribbon_extends_a_bar_per_slot(browser):
    keys = F.trace_keys([0, 1])
    url, shutdown = start_in_thread(force_replay=True, speed=2.0)
    try:
        page, errors = _page(browser, url, keys)
        page.wait_for_function(f"() => document.querySelector('#{ids.VIEW_NOTE}').innerText"
                               f".includes('0.1-s phase segments')", timeout=15_000)
        first = _ribbon(page, keys)
        # each phase trace holds only its own slots: together, one bar per slot; wait until
        # 30 new 0.1-s slots were appended (a state; about 1.5 s at 2x)
        n0 = sum(len(tr["x"]) for tr in first)
        idx = [keys.index(("phase", p)) for p in F.RIBBON_PHASES]
        page.wait_for_function(f"() => {idx}.reduce((n, i) => n + ({GD}._fullData[i].x || [])"
                               f".length, 0) >= {n0 + 30}", timeout=60_000)
        later = _ribbon(page, keys)
        xs = sorted(x for tr in later for x in tr["x"])
        assert len(xs) >= n0 + 30
        for tr in later:
            assert tr["lit"] == len(tr["x"])  # no placeholder bars
            if tr["x"]:  # (a trace with no bar has no width either)
                assert tr["width"] == pytest.approx(100.0)
        gaps = {round(b - a, 1) for a, b in itertools.pairwise(xs)}
        assert min(gaps) == 100.0  # one phase per slot, slots 0.1 s apart
        assert not errors, errors
        page.close()
    finally:
        shutdown()


def test_a_followed_view_keeps_its_span_when_a_phase_leaves_it(browser):
    """A phase trace holds only its bars, trimmed to what is in view: once a phase has left
    the view none of its bars may linger (a lingering bar stretched the autoranged axis to
    it, 11.6 -> 38 s of a "10 s" view); nor may the load heatmap keep columns the bands no
    longer have (it kept two more windows: 11 -> 12.35 s)."""
    keys = F.trace_keys([0, 1])
    url, shutdown = start_in_thread(force_replay=True, speed=2.0)
    try:
        page, errors = _page(browser, url, keys)
        page.click(f"#{ids.PRESET_10S}")
        page.wait_for_function(f"() => document.querySelector('#{ids.VIEW_NOTE}').innerText"
                               f".startsWith('last 10 s')", timeout=15_000)
        heat, band = keys.index(("heat",)), keys.index(("band", 0))
        lane = keys.index(("lane", "power_w", 0))
        newest = f"() => {{ const x = {GD}.data[{lane}].x; return x[x.length - 1] }}"
        for _ in range(5):
            # the view moved on 2 s of the trace (states, not a clock)
            was = page.evaluate(newest)
            page.wait_for_function(f"() => ({newest})() >= {was} + 2000", timeout=60_000)
            # the heatmap holds the windows the bands hold (no pause here: no blank column)
            n_heat, n_band = page.evaluate(f"() => [{GD}.data[{heat}].x.length, "
                                           f"{GD}.data[{band}].x.length]")
            assert n_heat == n_band, (n_heat, n_band)
            # every trace spans the 10-s view, and so do the window traces together (phase
            # bars, hot marks): a lingering phase bar stretched that to 26-38 s.  Not the
            # union with the lanes: the window traces lag the lanes (a window is labelled once
            # complete) by more on a loaded machine, which is no fault
            ext = page.evaluate(f"() => {GD}.data.map(t => {{ const x = Array.from(t.x || [])"
                                f".filter(v => typeof v === 'number'); return x.length ? "
                                f"[Math.min(...x), Math.max(...x)] : null }})")
            for k, e in zip(keys, ext):
                assert e is None or e[1] - e[0] <= 11_000, (k, e)
            win = [e for k, e in zip(keys, ext) if e and k[0] in ("phase", "hot", "ribbon_hot")]
            assert max(e[1] for e in win) - min(e[0] for e in win) <= 11_000, win
        assert not errors, errors
        page.close()
    finally:
        shutdown()


def test_zoomed_ribbon_draws_segments_and_the_hover_names_them(browser, tmp_path):
    from tealeaves.app.bench.dashboard import build_store

    db = tmp_path / "seg.db"
    # the pattern's phase changes sit at a fixed offset from the 0.5-s window grid (the store
    # ends at a whole second + 0.37 s): with the end at a random instant, some runs had every
    # change on a window edge (+ 0.23 s does that) and so every segment a window long
    info = build_store(db, seconds=120.0, n_gpus=2, log=lambda *_: None,
                       end=math.floor(time.time()) + 0.37)
    keys = F.trace_keys([0, 1])
    url, shutdown = start_in_thread(store_path=db, collect=False)
    try:
        page, errors = _page(browser, url, keys)
        a = info["end"] - 60.0
        lo = datetime.fromtimestamp(a, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
        hi = datetime.fromtimestamp(a + 20, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
        page.fill(f"#{ids.RANGE_FROM}", lo)
        page.fill(f"#{ids.RANGE_TO}", hi)
        page.click(f"#{ids.RANGE_GO}")
        # the typed range's note (the followed view's says the same of its segments), then
        # the patch's bars, their widths decoded from the typed array (drawn after the note);
        # generous limits: a busy two-core CI machine runs the whole suite beside it
        page.wait_for_function(f"() => {{ const t = document.querySelector('#{ids.VIEW_NOTE}')"
                               f".innerText; return t.includes('(20 s)') && "
                               f"t.includes('ribbon: 0.1-s phase segments'); }}", timeout=30_000)
        page.wait_for_function(f"() => {GD}._fullData.slice(0, {len(F.RIBBON_PHASES)}).some("
                               f"t => t.width && typeof t.width === 'object' && "
                               f"t.width.length > 0)", timeout=30_000)
        ribbon = _ribbon(page, keys)
        widths = [w for tr in ribbon if isinstance(tr["width"], list) for w in tr["width"]]
        assert len(widths) >= 40 and max(widths) <= 500.0 + 1e-3
        assert len({round(w) for w in widths}) > 1  # bars of their own widths
        drawn = page.evaluate("() => document.querySelectorAll("
                              "'#tl-graph .barlayer .trace.bars .point path').length")
        assert drawn >= len(widths)
        # a hover over the power lane: the window's phase and the 0.1-s segment under it
        power_row = F.FIRST_LANE_ROW + [ln.key for ln in F.LANES].index("power")
        box = page.locator(f"#tl-graph .draglayer g.x{power_row}y{power_row} rect.nsewdrag")
        box.scroll_into_view_if_needed()
        bb = box.bounding_box()
        page.mouse.move(bb["x"] + bb["width"] * 0.5, bb["y"] + bb["height"] / 2)
        page.wait_for_function(f"() => document.querySelector('#{ids.HOVER_PANEL}')"
                               f".innerText.includes('0.1-s segment')", timeout=10_000)
        assert "window" in page.inner_text(f"#{ids.HOVER_PANEL}")
        assert not errors, errors
        page.close()
    finally:
        shutdown()
