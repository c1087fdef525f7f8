"""Issue 35: what the dashboard's view, hover and times say is what is on screen.

In Chromium (Debian's, through Playwright), every test waiting for states of the page, never
for time:

- a followed 10-s view: every row (ribbon, load heatmap and bands, lanes, share strip) starts
  at the same left edge; the lanes end at the x axis' right edge (the newest sample's bin); each
  row labelled later (ribbon, heatmap and bands, strip) ends at its own cursor and a hatched
  "labelling…" mark covers from there to the edge, paused too; a click on a window while
  following pauses the view, says so, and the window stays selected and on screen;
- the hover names the ribbon's phase under the cursor first and says plainly why the window's
  label differs from it where it does;
- a replay says when its trace was recorded and by how much it is shifted to now;
- the session picker says "now" only while the store is being written.
"""

from __future__ import annotations

import math
import re
import threading
from datetime import UTC, datetime

import pytest
from conftest import caught_up_store

from tealeaves.app import figures as F
from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.server import start_in_thread
from tealeaves.data import bundled_trace_path
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import read_trace

GD = "document.querySelector('#tl-graph .js-plotly-plot')"
GPUS = [0, 1]  # the bundled trace holds two H200s
KEYS = F.trace_keys(GPUS)
LANE = KEYS.index(("lane", "power_w", 0))
WINDOW_S, BIN_S = 0.5, 0.1


def _open(browser, url: str, width: int = 1440, height: int = 900):
    """A page at ``url`` in UTC (the page's times are the browser's zone) once its figure has
    lane data; returns ``(page, errors)``."""
    page = browser.new_page(viewport={"width": width, "height": height}, timezone_id="UTC")
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_function(f"() => {{ const gd = {GD}; return gd && gd.data && "
                           f"gd.data.length === {len(KEYS)} && gd.data[{LANE}].x.length > 0 }}",
                           timeout=60_000)
    return page, errors


def _text(page, sel: str) -> str:
    return page.inner_text(sel)


def _wait_text(page, sel: str, part: str, timeout: int = 30_000) -> None:
    page.wait_for_function(f"() => {{ const e = document.querySelector({sel!r}); "
                           f"return e && e.innerText.includes({part!r}) }}", timeout=timeout)


#: Each drawn row's data extent, ms: bars from their left to their right edge, the heatmap's
#: cells likewise (a window wide), lines from their first to their last point; and the x axis.
EXTENTS = f"""() => {{
    const gd = {GD}, keys = {[list(k) for k in KEYS]!r}, rows = {{}};
    gd._fullData.forEach((t, i) => {{
        const xs = Array.from(t.x || []).filter((v) => v !== null && v !== undefined)
            .map(Number).filter(Number.isFinite);
        if (!xs.length) return;
        let lo = Infinity, hi = -Infinity;
        xs.forEach((x, n) => {{
            let half = 0;
            if (t.type === 'bar') half = (ArrayBuffer.isView(t.width) || Array.isArray(t.width) ? t.width[n] : t.width) / 2;
            if (t.type === 'heatmap') half = {WINDOW_S * 500};
            lo = Math.min(lo, x - half); hi = Math.max(hi, x + half);
        }});
        const k = keys[i][0] === 'labelling' ? 'labelling:' + keys[i][1] : keys[i][0];
        const r = rows[k] = rows[k] || [Infinity, -Infinity];
        r[0] = Math.min(r[0], lo); r[1] = Math.max(r[1], hi);
    }});
    const xa = gd._fullLayout.xaxis;
    return {{rows: rows, range: [xa.r2l(xa.range[0]), xa.r2l(xa.range[1])]}};
}}"""


def _check_edges(ext: dict, span_s: float) -> None:
    """A followed view of ``span_s`` seconds: the x axis ends where the lanes' newest bin ends
    and spans at most ``span_s`` (its left edge a window boundary within a window of
    ``edge - span_s``); every row starts at that left edge (bars, heatmap cells and bins at
    it, the band and strip lines, a point per window centre, half a window inside); each row
    labelled after the samples (ribbon, heatmap and bands, strip) ends at its own cursor, never
    past the edge, and its "labelling…" mark runs from exactly there to the edge."""
    rows, (r0, r1) = ext["rows"], ext["range"]
    half = {"lane": BIN_S * 500, "band": WINDOW_S * 500, "share": WINDOW_S * 500}
    lane_hi = rows["lane"][1]
    assert lane_hi + half["lane"] == pytest.approx(r1, abs=1), ext  # the lanes end at the edge
    assert span_s * 1000 - WINDOW_S * 1000 - 1 <= r1 - r0 <= span_s * 1000 + 1, ext
    for key in ("lane", "phase", "heat", "band", "share"):  # one left edge
        assert rows[key][0] - half.get(key, 0.0) == pytest.approx(r0, abs=1), (key, ext)
    for key, mark in (("phase", "ribbon"), ("heat", "bands"), ("band", "bands"),
                      ("share", "strip")):
        end = rows[key][1] + half.get(key, 0.0)  # where the row's labels stop
        a, b = rows[f"labelling:{mark}"]
        assert end <= r1 + 1, (key, ext)
        assert a == pytest.approx(end, abs=1) and b == pytest.approx(r1, abs=1), (key, ext)
    for key in ("ribbon_hot", "hot"):  # never past the edge
        if key in rows:
            assert rows[key][1] <= r1 + 1, (key, ext)


def _wait_edges(page, span_s: float, tries: int = 40) -> dict:
    """Wait for the page to show ``_check_edges``' state (the figure may be read between an
    ``extendData`` and the redraw it triggers): the extents, once it holds; the last failure
    when it never does."""
    for n in range(tries):
        ext = page.evaluate(EXTENTS)
        try:
            _check_edges(ext, span_s)
            return ext
        except AssertionError:
            if n == tries - 1:
                raise
            page.wait_for_timeout(250)
    raise AssertionError("unreachable")


#: The ribbon's "labelling…" mark is drawn (wider than nothing) and says what it is.
MARK_SHOWN = f"""() => {{
    const gd = {GD}, i = {KEYS.index(("labelling", "ribbon"))}, t = gd._fullData[i];
    const x = Array.from(t.x || []).map(Number);
    return x.length === 5 && Math.max(...x) - Math.min(...x) > 50 &&
        String(t.meta).startsWith('not labelled yet') && t.fill === 'toself';
}}"""


@pytest.fixture(scope="module")
def replay():
    """The dashboard replaying the bundled trace (shifted to now): ``(url, store path)``."""
    import tempfile
    from pathlib import Path

    db = Path(tempfile.mkdtemp(prefix="tl-truth-")) / "replay.db"
    url, shutdown = start_in_thread(force_replay=True, speed=1.0, store_path=db)
    yield url, db
    shutdown()


def test_a_followed_10s_view_ends_at_the_lanes_and_marks_what_is_not_labelled_yet(browser,
                                                                                  replay):
    url, _ = replay
    page, errors = _open(browser, url)
    page.click(f"#{ids.PRESET_10S}")
    _wait_text(page, f"#{ids.VIEW_NOTE}", "last 10 s")
    newest = f"() => {{ const x = {GD}._fullData[{LANE}].x; return x[x.length - 1] }}"
    # the lanes hold the whole 10 s (the replay began more than 10 s ago) ...
    page.wait_for_function(f"() => {{ const x = {GD}._fullData[{LANE}].x; "
                           f"return x[x.length - 1] - x[0] > 9350 }}", timeout=60_000)
    first = page.evaluate(newest)
    # ... and the page followed for 3 s more of data
    page.wait_for_function(f"() => {{ const x = {GD}._fullData[{LANE}].x; "
                           f"return x[x.length - 1] > {first} + 3000 }}", timeout=30_000)
    page.wait_for_function(MARK_SHOWN, timeout=30_000)  # the segments lag the samples
    _wait_edges(page, 10.0)

    # a click on a window while following: paused, said so, the window selected and on screen
    power_row = F.FIRST_LANE_ROW + [ln.key for ln in F.LANES].index("power")
    box = page.locator(f"#tl-graph .draglayer g.x{power_row}y{power_row} rect.nsewdrag")
    box.scroll_into_view_if_needed()
    bb = box.bounding_box()
    page.mouse.click(bb["x"] + bb["width"] * 0.5, bb["y"] + bb["height"] / 2)
    _wait_text(page, f"#{ids.WINDOW_PANEL}", "Selected window")
    _wait_text(page, f"#{ids.FOLLOW}", "paused")
    _wait_text(page, f"#{ids.VIEW_NOTE}", "paused by your click on a window")
    frozen = page.evaluate(newest)
    sel = KEYS.index(("selected",))
    # the page keeps asking (its status line's sample count moves on), the view stays
    status = _text(page, f"#{ids.STATUS}")
    count = re.search(r"([\d,]+) samples stored", status).group(1)
    page.wait_for_function(f"() => {{ const m = document.querySelector('#{ids.STATUS}')"
                           f".innerText.match(/([\\d,]+) samples stored/); return m && "
                           f"m[1] !== {count!r} }}", timeout=30_000)
    assert page.evaluate(newest) == frozen
    ext = _wait_edges(page, 10.0)  # paused: the same rule at the frozen edge
    # the hover panel names a time under the ribbon's "labelling…" mark as not labelled yet
    a, b = ext["rows"]["labelling:ribbon"]
    if b - a >= 300:  # (the frozen moment may have caught the segments up with the samples)
        px = page.evaluate(f"""() => {{ const gd = {GD}, xa = gd._fullLayout.xaxis{power_row};
            return gd.getBoundingClientRect().left + xa._offset + xa.l2p({(a + b) / 2}) }}""")
        page.mouse.move(px, bb["y"] + bb["height"] / 2)
        _wait_text(page, f"#{ids.HOVER_LABELLING}", "not labelled yet")
    x_sel = page.evaluate(f"() => Array.from({GD}._fullData[{sel}].x)")
    assert len(x_sel) == 1 and ext["range"][0] < x_sel[0] < ext["range"][1], (x_sel, ext)
    # following again: the note says so
    page.click(f"#{ids.FOLLOW}")
    _wait_text(page, f"#{ids.FOLLOW}", "following")
    page.wait_for_function(f"() => {{ const x = {GD}._fullData[{LANE}].x; "
                           f"return x[x.length - 1] > {frozen} + 1000 }}", timeout=30_000)
    assert "paused" not in _text(page, f"#{ids.VIEW_NOTE}")
    assert not errors, errors
    page.close()


def _fmt_shift_s(text: str) -> float:
    m = re.search(r"shifted to now by ([+-])(?:(\d+) d )?(\d\d):(\d\d):(\d\d\.\d)", text)
    assert m, text
    sign = -1 if m.group(1) == "-" else 1
    d = int(m.group(2) or 0)
    return sign * (d * 86400 + int(m.group(3)) * 3600 + int(m.group(4)) * 60
                   + float(m.group(5)))


def test_a_replay_says_when_it_was_recorded_and_how_far_it_is_shifted(browser, replay):
    url, db = replay
    page, errors = _open(browser, url)
    _wait_text(page, f"#{ids.REPLAY}", "shifted to now by")
    text = _text(page, f"#{ids.REPLAY}")
    ts = read_trace(bundled_trace_path()).samples["timestamp"]
    t0, t1 = float(ts.min()), float(ts.max())
    d0 = datetime.fromtimestamp(t0, tz=UTC)
    d1 = datetime.fromtimestamp(t1, tz=UTC)
    assert (f"replay of {bundled_trace_path().name}, recorded {d0:%Y-%m-%d %H:%M:%S}–"
            f"{d1:%H:%M:%S} UTC") in text, text
    # the shift on screen is the one applied: shown first sample - recorded first sample
    with SampleStore(db, readonly=True) as ro:
        first_shown = float(ro.read_range(0, 1e10)["timestamp"].min())
    assert _fmt_shift_s(text) == pytest.approx(first_shown - t0, abs=0.06), text
    assert "classify and report print recorded times" in text
    assert not errors, errors
    page.close()


def _differing_instants(h) -> list[tuple[float, str, str]]:
    """``(t, window phase, segment phase)`` at slot centres where the 0.1-s segment and the
    window holding it disagree."""
    out = []
    for _, r in h.windows().iterrows():
        for dt in (0.05, 0.15, 0.25, 0.35, 0.45):
            seg = h.segment_at(float(r["start"]) + dt)
            if seg is not None and seg["phase"] != r["phase"]:
                out.append((float(r["start"]) + dt, str(r["phase"]), str(seg["phase"])))
    return out


RIBBON_AT = f"""(t) => {{
    const gd = {GD}, keys = {[list(k) for k in KEYS]!r};
    for (let i = 0; i < gd._fullData.length; i++) {{
        if (keys[i][0] !== 'phase') continue;
        const tr = gd._fullData[i], xs = Array.from(tr.x || []);
        for (let n = 0; n < xs.length; n++) {{
            const w = ArrayBuffer.isView(tr.width) || Array.isArray(tr.width) ? tr.width[n]
                : tr.width;
            if (Math.abs(Number(xs[n]) - t) < w / 2 - 0.5) return keys[i][1];
        }}
    }}
    return null;
}}"""


def test_the_hover_names_the_ribbon_under_the_cursor_and_why_the_window_differs(browser,
                                                                               tmp_path):
    trace = read_trace(bundled_trace_path())
    db = tmp_path / "s.db"
    store, h = caught_up_store(trace, db)
    differ = _differing_instants(h)
    store.close()
    assert differ, "the bundled trace has no window whose segments disagree with it"
    t, _, _ = differ[len(differ) // 2]
    url, shutdown = start_in_thread(store_path=db, collect=False)
    try:
        page, errors = _open(browser, url)
        # a 3-s range around it: the ribbon draws the 0.1-s segments
        page.fill(f"#{ids.RANGE_FROM}", f"{t - 1.5:.3f}")
        page.fill(f"#{ids.RANGE_TO}", f"{t + 1.5:.3f}")
        page.click(f"#{ids.RANGE_GO}")
        _wait_text(page, f"#{ids.VIEW_NOTE}", "ribbon: 0.1-s phase segments")
        power_row = F.FIRST_LANE_ROW + [ln.key for ln in F.LANES].index("power")
        drag = page.locator(f"#tl-graph .draglayer g.x{power_row}y{power_row} rect.nsewdrag")
        drag.scroll_into_view_if_needed()
        bb = drag.bounding_box()
        xa = f"{GD}._fullLayout.xaxis"
        seen_why = False
        # every hover plotly makes, counted, with the time of its point
        listen = (f"() => {{ const gd = {GD}; window.__hov = window.__hov || {{n: 0, x: null}}; "
                  f"if (gd.__tlHov) return; gd.__tlHov = true; "
                  f"gd.on('plotly_hover', (d) => {{ window.__hov.n += 1; "
                  f"window.__hov.x = d.points[0].x; }}); }}")
        page.evaluate(listen)
        done: set = set()
        for dt in [k * 0.1 for k in range(-4, 5)]:
            for attempt in range(3):  # a hover plotly did not report (a redraw under it?)
                px = page.evaluate(f"(ms) => {xa}._offset + {xa}.l2p(ms)", (t + dt) * 1000)
                left = page.evaluate(f"() => {GD}.getBoundingClientRect().x")
                bb = drag.bounding_box()
                n = page.evaluate("() => window.__hov.n")
                page.mouse.move(1, 1)
                page.mouse.move(left + px, bb["y"] + bb["height"] / 2)
                try:
                    page.wait_for_function(f"() => window.__hov.n > {n}", timeout=30_000)
                    break
                except Exception:  # playwright's TimeoutError: look again, move again
                    if attempt == 2:
                        raise
                    page.evaluate(listen)  # a new graph element has no listener yet
            x = page.evaluate("() => window.__hov.x")
            if x in done:
                continue
            done.add(x)
            # the panel shows that point's instant (its time, to the ms)
            page.wait_for_function(
                f"(x) => {{ const e = document.querySelector('#{ids.HOVER_PANEL} "
                f".tl-panel-time'); if (!e) return false; const m = e.innerText.match("
                f"/(\\d+)-(\\d+)-(\\d+) (\\d+):(\\d+):(\\d+)\\.(\\d+)/); "
                f"if (!m) return false; const t = Date.UTC(+m[1], m[2] - 1, +m[3], +m[4], "
                f"+m[5], +m[6]) + Number(m[7]); const v = typeof x === 'number' ? x : "
                f"Date.parse(String(x).replace(' ', 'T') + 'Z'); "
                f"return Math.abs(t - v) < 2 }}", arg=x, timeout=10_000)
            shown = page.inner_text(f"#{ids.HOVER_PANEL} .tl-panel-time")
            when = datetime.strptime(shown.replace(" UTC", ""), "%Y-%m-%d %H:%M:%S.%f")
            t_h = when.replace(tzinfo=UTC).timestamp() * 1000
            drawn = page.evaluate(RIBBON_AT, t_h)
            if drawn is None:  # on a bar's edge: either phase is under the cursor
                continue
            ribbon = page.inner_text(f"#{ids.HOVER_RIBBON}")
            assert ribbon.startswith("ribbon here:") and drawn.upper() in ribbon, (ribbon,
                                                                                  drawn)
            panel = page.inner_text(f"#{ids.HOVER_PANEL}")
            win = re.search(r"0\.5-s window: (IDLE|PREFILL|DECODE)", panel)
            assert win, panel
            if win.group(1).lower() != drawn:  # they differ: the panel says why, plainly
                why = page.inner_text(f"#{ids.HOVER_WHY}")
                assert f"labelled {win.group(1).lower()}" in why and f"says {drawn}" in why
                assert f"The ribbon draws the segments: {drawn} here." in why
                seen_why = True
            else:
                assert page.query_selector(f"#{ids.HOVER_WHY}") is None, panel
        assert seen_why, "no hovered instant where the window and its segment differ"
        assert not errors, errors
        page.close()
    finally:
        shutdown()


def _two_sessions(tmp_path):
    """A store holding the bundled trace twice, 3 min apart: two sessions, nobody writing."""
    trace = read_trace(bundled_trace_path())
    db = tmp_path / "two.db"
    with SampleStore(db) as store:
        store.put_devices(trace.devices)
        store.append(trace.samples)
        later = trace.samples.copy()
        later["timestamp"] = later["timestamp"] + 300.0
        store.append(later)
    return db, trace


OPTION = ".dash-dropdown-option[role=option]"


def _options(page, n: int) -> list[str]:
    """The session picker's option texts, once it lists ``n``."""
    page.click(f"#{ids.SESSION}")
    page.wait_for_function(f"() => document.querySelectorAll({OPTION!r}).length == {n}",
                           timeout=30_000)
    opts = page.locator(OPTION).all_inner_texts()
    page.keyboard.press("Escape")
    return opts


def test_the_session_picker_says_now_only_while_the_store_is_written(browser, tmp_path):
    db, trace = _two_sessions(tmp_path)
    url, shutdown = start_in_thread(store_path=db, collect=False)
    stop = threading.Event()
    try:
        page, errors = _open(browser, url)
        page.wait_for_function(f"() => document.querySelector('#{ids.SESSION}')"
                               f".innerText.includes('2 sessions')", timeout=30_000)
        opts = _options(page, 2)
        assert len(opts) == 2 and not any("now" in o for o in opts), opts
        t_end = float(trace.samples["timestamp"].max()) + 300.0
        assert datetime.fromtimestamp(t_end, tz=UTC).strftime("%H:%M:%S") in opts[-1], opts

        # someone writes the store now: a third session, "– now" while it grows
        import time

        def write() -> None:
            s = trace.samples
            rel = s["timestamp"] - float(s["timestamp"].min())
            with SampleStore(db) as w:
                start, done = time.time(), 0.0
                while not stop.is_set():
                    now = time.time() - start
                    part = s[(rel >= done) & (rel < now)].copy()
                    part["timestamp"] = start + rel[part.index]
                    if len(part):
                        w.append(part)
                    done = now
                    stop.wait(0.2)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        page.wait_for_function(f"() => document.querySelector('#{ids.SESSION}')"
                               f".innerText.includes('3 sessions')", timeout=60_000)
        # "now" once the history saw the store grow: the open menu's options are redrawn
        page.click(f"#{ids.SESSION}")
        page.wait_for_function(f"() => Array.from(document.querySelectorAll({OPTION!r}))"
                               f".some(o => o.innerText.includes('– now'))", timeout=60_000)
        page.keyboard.press("Escape")
        opts = _options(page, 3)
        assert "– now" in opts[-1] and "now" not in opts[0], opts
        stop.set()
        writer.join(5)
        assert not errors, errors
        page.close()
    finally:
        stop.set()
        shutdown()


def test_a_stopped_store_gets_an_end_time_and_a_written_one_now():
    """``session_options``: "now" only while written, else the last session's end (with its
    date when it ends on another day)."""
    from tealeaves.app.dashboard.timefmt import session_options

    a = datetime(2026, 11, 30, 14, 0, tzinfo=UTC).timestamp()
    sessions = [(a, a + 60), (a + 3600, a + 3600 + 11 * 3600)]
    still = session_options(sessions, "UTC", writing=False)
    assert still[-1]["label"] == "2026-11-30 15:00:00 – 2026-12-01 02:00:00 (11.0 h)"
    assert still[-1]["value"].count(",") == 1 and not still[-1]["value"].endswith(",")
    live = session_options(sessions, "UTC", writing=True)
    assert live[-1]["label"].endswith("– now (11.0 h)") and live[-1]["value"].endswith(",")
    assert math.isfinite(float(live[-1]["value"].rstrip(",")))
