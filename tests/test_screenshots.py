"""Screenshots: file-name and metadata times, safety checks, keeping them in the store, and
verdicts, comparisons and regions from real labelled windows; no browser."""

from __future__ import annotations

import io
import math
import struct
import zlib
from datetime import UTC, datetime

import pytest
from PIL import Image, PngImagePlugin

from tealeaves.app.dashboard.screenshots.model import (
    compare_table,
    halves,
    region_from_shape,
    verdict,
)
from tealeaves.classifier import classify_samples
from tealeaves.data import bundled_trace_path
from tealeaves.data.screen.screenshots import (
    ScreenshotError,
    capture_time,
    inspect_image,
    parse_creation_time,
    time_from_name,
    to_epoch,
)
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import read_trace

T = datetime(2026, 5, 31, 18, 31, 15)


@pytest.mark.parametrize("name,tool", [
    ("2026-05-31-183115_3335x1907_scrot.png", "scrot"),
    ("2026-05-31-183115_3335x1907_scrot_000.png", "scrot"),
    ("2026-05-31-183115_1920x1080_scrot_012.jpg", "scrot"),
    ("Screenshot from 2026-05-31 18-31-15.png", "gnome-screenshot / GNOME Shell"),
    ("Screenshot from 2026-05-31 18-31-15-2.png", "gnome-screenshot / GNOME Shell"),
    ("Screenshot_20260531_183115.png", "Spectacle"),
    ("Screenshot 2026-05-31 at 18.31.15.png", "macOS"),
    ("Screen Shot 2026-05-31 at 6.31.15 PM.png", "macOS"),
    ("Screenshot 2026-05-31 at 6.31.15\u202fPM.png", "macOS"),
    ("Screenshot 2026-05-31 183115.png", "Windows Snipping Tool"),
    ("/home/me/Pictures/2026-05-31-183115_3335x1907_scrot.png", "scrot"),
    ("C:\\Users\\me\\Screenshot 2026-05-31 183115.png", "Windows Snipping Tool"),
])
def test_every_tools_default_name_gives_the_time(name, tool):
    t = time_from_name(name)
    assert t is not None and t.source == f"file name ({tool})"
    assert t.local == T and t.instant is None


def test_flameshot_names_have_minute_resolution():
    t = time_from_name("2026-05-31_18-31.png")
    assert t.local == datetime(2026, 5, 31, 18, 31) and t.resolution_s == 60.0


@pytest.mark.parametrize("name", ["holiday.png", "2026-13-45-183115_10x10_scrot.png",
                                  "Screenshot (12).png", "2026-05-31-183115_3335x1907_scrot.gif",
                                  ""])
def test_names_without_a_time(name):
    assert time_from_name(name) is None


def _png(size=(64, 48), text: dict | None = None, exif: bytes | None = None,
         fmt: str = "PNG") -> bytes:
    img = Image.new("RGB", size, (30, 120, 200))
    buf = io.BytesIO()
    if fmt == "PNG":
        info = PngImagePlugin.PngInfo()
        for k, v in (text or {}).items():
            if k.startswith("i:"):
                info.add_itxt(k[2:], v)
            else:
                info.add_text(k, v)
        img.save(buf, "PNG", pnginfo=info, **({"exif": exif} if exif else {}))
    else:
        img.save(buf, "JPEG", **({"exif": exif} if exif else {}))
    return buf.getvalue()


def _exif(original: str, offset: str | None = None) -> bytes:
    ex = Image.Exif()
    sub = ex.get_ifd(0x8769)
    sub[36867] = original
    if offset:
        sub[36881] = offset
    return ex.tobytes()


def test_metadata_times_come_first_and_say_where_they_came_from():
    name = "2026-05-31-183115_3335x1907_scrot.png"  # the name says 18:31:15 ...
    gnome = inspect_image(_png(text={"Creation Time": "Sun 31 May 2026 06:40:00 PM CEST"}), name)
    assert gnome.meta_time.local == datetime(2026, 5, 31, 18, 40)  # ... the metadata wins
    when = capture_time(gnome.meta_time, name, None)
    assert when.source == "PNG Creation Time" and when.instant is None
    itxt = inspect_image(_png(text={"i:Creation Time": "2026-05-31T18:41:00+02:00"}), "a.png")
    assert itxt.meta_time.instant == datetime.fromisoformat("2026-05-31T16:41:00+00:00").timestamp()
    jpg = inspect_image(_png(exif=_exif("2026:05:31 18:42:00", "+02:00"), fmt="JPEG"), "b.jpg")
    assert jpg.format == "JPEG" and jpg.meta_time.source == "EXIF DateTimeOriginal"
    assert jpg.meta_time.resolve("America/New_York") == to_epoch(datetime(2026, 5, 31, 16, 42),
                                                                 "UTC")  # offset beats zone
    local = inspect_image(_png(exif=_exif("2026:05:31 18:43:00"), fmt="JPEG"), "c.jpg")
    assert local.meta_time.instant is None
    assert local.meta_time.resolve("Europe/Berlin") == to_epoch(datetime(2026, 5, 31, 16, 43),
                                                                "UTC")


def test_capture_time_order_name_then_last_modified_then_none():
    plain = inspect_image(_png(), "x.png")
    assert plain.meta_time is None
    by_name = capture_time(None, "2026-05-31-183115_3335x1907_scrot.png", 1_700_000_000.0)
    assert by_name.source == "file name (scrot)"
    assert by_name.resolve("Europe/Berlin") == to_epoch(T, "Europe/Berlin")
    assert to_epoch(T, "Europe/Berlin") == to_epoch(datetime(2026, 5, 31, 16, 31, 15), "UTC")
    by_mod = capture_time(None, "holiday.png", 1_780_000_000.0)
    assert by_mod.source == "browser last-modified" and by_mod.resolve("Asia/Tokyo") == 1.78e9
    none = capture_time(None, "holiday.png", None)
    assert none.source == "none" and none.resolve("UTC") is None
    with pytest.raises(ScreenshotError, match="unknown time zone"):
        by_name.resolve("Mars/Olympus")


@pytest.mark.parametrize("text,expect", [
    ("Sun 31 May 2026 06:31:15 PM CEST", (T, None)),
    ("Sun 31 May 2026 18:31:15", (T, None)),
    ("2026-05-31T18:31:15Z", (T, 0.0)),
    ("2026-05-31 18:31:15 +0200", (T, 7200.0)),
    ("nonsense", None),
    ("", None),
])
def test_png_creation_time_formats(text, expect):
    assert parse_creation_time(text) == expect


def _bomb(w=30_000, h=30_000) -> bytes:
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(b"\0" * (w + 1) * 4)) + chunk(b"IEND", b""))


def test_bombs_truncated_and_non_images_are_refused_clearly():
    with pytest.raises(ScreenshotError, match="bomb.png: too many pixels"):
        inspect_image(_bomb(), "bomb.png")
    with pytest.raises(ScreenshotError, match="over the 4 M-pixel limit"):
        inspect_image(_bomb(3000, 2000), "big.png", max_pixels=4_000_000)
    good = _png((200, 150))
    with pytest.raises(ScreenshotError, match="half.png: the image is truncated"):
        inspect_image(good[: len(good) // 2], "half.png")
    with pytest.raises(ScreenshotError, match="notes.png: not a PNG or JPEG"):
        inspect_image(b"these are my notes\n", "notes.png")
    gif = io.BytesIO()
    Image.new("RGB", (10, 10)).save(gif, "GIF")
    with pytest.raises(ScreenshotError, match="not a PNG or JPEG"):
        inspect_image(gif.getvalue(), "anim.png")
    with pytest.raises(ScreenshotError, match="over the 0 MB limit"):
        inspect_image(good, "x.png", max_bytes=100)
    with pytest.raises(ScreenshotError, match="empty"):
        inspect_image(b"", "x.png")


def test_store_keeps_screenshots_across_a_reopen(tmp_path):
    data = _png()
    info = inspect_image(data, "a.png")
    row = {"sha256": info.sha256, "name": "../../etc/passwd", "nbytes": info.nbytes,
           "width": info.width, "height": info.height, "format": info.format,
           "capture_ts": 1.78e9, "tz": "UTC", "time_source": "user", "regions": "[]"}
    with SampleStore(tmp_path / "s.db") as s:
        assert s.put_screenshot(row, data) is True
        assert s.put_screenshot(row, data) is False  # the same picture twice: kept once
        s.update_screenshot(info.sha256, capture_ts=1.79e9, regions='[{"box": [0, 0, 1, 1]}]')
        with pytest.raises(ValueError, match="not screenshot fields"):
            s.update_screenshot(info.sha256, path="/etc/passwd")
    with SampleStore(tmp_path / "s.db", readonly=True) as s:
        rows = s.screenshots()
        assert len(rows) == 1 and rows.iloc[0]["capture_ts"] == 1.79e9
        assert rows.iloc[0]["name"] == "../../etc/passwd"  # shown, never a path
        assert s.screenshot_data(info.sha256) == data
    assert not (tmp_path / "etc").exists()
    with SampleStore(tmp_path / "s.db") as s:
        s.delete_screenshot(info.sha256)
        assert s.screenshots().empty and s.screenshot_data(info.sha256) is None


# -- verdicts on real labelled windows -------------------------------------------------------


@pytest.fixture(scope="module")
def windows():
    tr = read_trace(bundled_trace_path())
    return classify_samples(tr.samples, tr.devices, window_s=0.5)


def _inside(windows, mask) -> int:
    """Index of a window with two windows either side where ``mask`` holds too."""
    m = mask.to_numpy()
    return next(i for i in range(2, len(m) - 2) if m[i - 2:i + 3].all())


def test_verdict_names_the_phase_and_the_hot_gpu(windows):
    i = _inside(windows, windows["phase"] == "prefill")
    t = float(windows["start"].iloc[i]) + 0.25
    v = verdict(windows, [0, 1], t - 1, t + 1)
    assert v.phase == "prefill" and v.text() == f"prefill ({v.confidence:.2f})"
    assert v.confidence > 0.9 and v.shares == {"prefill": 1.0}
    i = _inside(windows, windows["imbalanced"])
    t = float(windows["start"].iloc[i]) + 0.25
    v = verdict(windows, [0, 1], t - 1, t + 1)
    g = int(windows["hot_gpu"].iloc[i])
    assert v.phase == "decode" and v.hot_gpu == g
    # the hot set in the words every surface uses (classifier.hot_set), then the ratio
    assert f"hot: GPU {g} at " in v.text() and "stays" in v.text()
    assert v.text().endswith(f", ratio {v.imbalance_ratio:.2f}")
    assert v.imbalance_ratio > 1.04 and v.loads[g] > v.loads[1 - g]
    empty = verdict(windows, [0, 1], 0.0, 10.0)
    assert empty.phase is None and empty.text() == "no labelled windows here"


def test_compare_table_differences(windows):
    idle = windows[windows["phase"] == "idle"]
    dec = windows[windows["imbalanced"]]
    a = verdict(windows, [0, 1], float(idle["start"].iloc[0]), float(idle["end"].iloc[0]))
    b = verdict(windows, [0, 1], float(dec["start"].iloc[0]), float(dec["end"].iloc[2]))
    rows = compare_table(["before", "after"], [a, b], [0, 1])
    assert rows[0] == ["moment", "before", "after", "Δ last − first"]
    by = {r[0]: r for r in rows[1:]}
    assert by["idle share (%)"][1:] == [100.0, 0.0, -100.0]
    assert by["decode share (%)"][3] == 100.0
    assert math.isnan(by["imbalance ratio (max/mean)"][1]) and by["imbalance ratio (max/mean)"][2] > 1
    assert by["hot GPU"][2] in (0, 1) and by["hot GPU"][3] is None
    assert by["GPU 0 load (%)"][3] == pytest.approx(b.loads[0] - a.loads[0])


def test_regions_halves_and_drawn_boxes():
    top, bottom = halves()
    assert top["box"] == [0.0, 0.0, 1.0, 0.5] and bottom["box"] == [0.0, 0.5, 1.0, 1.0]
    r = region_from_shape({"x0": 100, "x1": -20, "y0": 50, "y1": 250}, 400, 300, 3)
    assert r == {"name": "box 3", "box": [0.0, 0.1667, 0.25, 0.8333], "offset_s": 0.0}
    assert region_from_shape({"x0": 1, "x1": 2, "y0": 1, "y1": 2}, 400, 300, 1) is None
    assert region_from_shape({"type": "line"}, 400, 300, 1) is None


def test_implausible_metadata_falls_through_to_the_next_source():
    name = "2026-05-31-183115_3335x1907_scrot.png"
    bad_offset = inspect_image(_png(text={"Creation Time": "2026-05-31 18:40:00 +9999"}), name)
    assert bad_offset.meta_time.offset_s is None and bad_offset.meta_time.instant is None
    assert bad_offset.meta_time.local == datetime(2026, 5, 31, 18, 40)
    year0 = inspect_image(_png(exif=_exif("0000:00:00 00:00:00"), fmt="JPEG"), name)
    assert year0.meta_time is None
    assert capture_time(year0.meta_time, name, None).source == "file name (scrot)"
    far = inspect_image(_png(text={"Creation Time": "9999-01-01T00:00:00"}), "x.png")
    assert far.meta_time is None
    assert capture_time(None, "x.png", -5.0).source == "none"
    assert time_from_name("1900-05-31-183115_10x10_scrot.png") is None


def test_a_stored_time_out_of_range_is_shown_not_raised():
    from tealeaves.app.dashboard.screenshots.model import fmt_local as _fmt_local

    assert _fmt_local(-1e18, "UTC").startswith("out of range")
    assert _fmt_local(None, "UTC") == "unknown"
    at = to_epoch(datetime(2026, 5, 31, 18, 31, 15), "Europe/Berlin")
    assert _fmt_local(at, "Europe/Berlin") == ("2026-05-31 18:31:15 Europe/Berlin "
                                               "(16:31:15 UTC)")
    # in UTC the time is said once, not "16:31:15 UTC (16:31:15 UTC)"
    assert _fmt_local(at, "UTC") == "2026-05-31 16:31:15 UTC"
    assert _fmt_local(at, None) == "2026-05-31 16:31:15 UTC"
    assert _fmt_local(at, "Etc/UTC") == "2026-05-31 16:31:15 Etc/UTC"


# -- what a user types: zones, times, offsets --------------------------------------------------


def test_zone_names_any_case_and_bad_ones_refused_clearly():
    from tealeaves.data.screen.screenshots import zone_name

    assert zone_name(" europe/berlin ") == "Europe/Berlin"
    assert zone_name("UTC") == "UTC"
    for bad, words in [("Mars/Olympus", "unknown time zone"), ("x" * 300, "not a zone name"),
                       ("", "no time zone"), ("../../etc/passwd", "unknown time zone")]:
        with pytest.raises(ScreenshotError, match=words):
            zone_name(bad)
    with pytest.raises(ScreenshotError, match="not a zone name"):
        to_epoch(T, "y" * 255)  # ZoneInfo raises OSError (file name too long) for this
    with pytest.raises(ScreenshotError, match="unknown time zone"):
        to_epoch(T, "y" * 60)


def test_a_local_time_the_clocks_skipped_is_refused_when_typed():
    gap = datetime(2026, 3, 29, 2, 30)  # Europe/Berlin springs forward 02:00 -> 03:00
    with pytest.raises(ScreenshotError, match="does not exist in Europe/Berlin"):
        to_epoch(gap, "Europe/Berlin", strict=True)
    assert to_epoch(gap, "Europe/Berlin") == to_epoch(datetime(2026, 3, 29, 1, 30), "UTC")
    assert to_epoch(T, "Europe/Berlin", strict=True) == to_epoch(T, "Europe/Berlin")


def test_region_offsets_are_bounded_and_stored_junk_reads_as_zero():
    import json

    from tealeaves.app.dashboard.screenshots.model import parse_regions, region_offset

    assert region_offset("-2.5") == -2.5 and region_offset(None) == 0.0
    for bad in ("1e308", "inf", "nan", "abc", 86_401):
        with pytest.raises(ValueError):
            region_offset(bad)
    stored = json.dumps([{"name": "top", "box": [0, 0, 1, 0.5], "offset_s": 1e308},
                         {"name": "bottom", "box": [0, 0.5, 1, 1], "offset_s": -3},
                         "junk"])
    assert [r["offset_s"] for r in parse_regions(stored)] == [0.0, -3.0]
    assert parse_regions('{"box": 1}') == [] and parse_regions("not json") == []


def test_moment_verdict_of_an_absurd_moment_is_empty_not_an_error(windows):
    from tealeaves.app.dashboard.history import History
    from tealeaves.app.dashboard.screenshots.model import moment_verdict

    class Fixed(History):  # a History answering from the module's windows
        def __init__(self):
            self.window_s, self.gpus = 0.5, [0, 1]

        def windows(self, j0=None, j1=None):
            return windows

    for t in (1e308, -1e20, math.inf, math.nan):
        assert moment_verdict(Fixed(), t, 5.0).phase is None
    t = float(windows["start"].iloc[len(windows) // 2])
    assert moment_verdict(Fixed(), t, 5.0).phase is not None


def test_edited_time_keeps_the_source_unless_the_time_or_zone_changes():
    import pandas as pd

    from tealeaves.app.dashboard.screenshots.model import edited_time

    ts = to_epoch(T, "Europe/Berlin")
    r = pd.Series({"name": "a.png", "capture_ts": ts + 0.4, "tz": "Europe/Berlin"})
    assert edited_time(r, "2026-05-31 18:31:15", "Europe/Berlin") == {}
    moved = edited_time(r, "2026-05-31T18:32", "europe/berlin")
    assert moved["capture_ts"] == ts + 45 and moved["tz"] == "Europe/Berlin"
    assert moved["time_source"] == "set by the user"
    assert edited_time(r, "2026-05-31 18:31:15", "UTC")["capture_ts"] == ts + 7200
    for when, words in [(None, "enter the capture time"), ("31/05/2026", "cannot read"),
                        ("1066-10-14 09:00:00", "outside"),
                        ("2026-03-29 02:30:00", "does not exist")]:
        with pytest.raises(ScreenshotError, match=words):
            edited_time(r, when, "Europe/Berlin")


def test_compare_difference_skips_screenshots_without_a_time(windows):
    from tealeaves.app.dashboard.screenshots.model import Verdict

    dec = windows[windows["imbalanced"]]
    a = verdict(windows, [0, 1], float(dec["start"].iloc[0]), float(dec["end"].iloc[2]))
    none = Verdict(math.nan, math.nan, 0, None)
    rows = compare_table(["a", "b", "untimed"], [a, a, none], [0, 1])
    by = {r[0]: r for r in rows[1:]}
    assert by["decode share (%)"][1:] == [100.0, 100.0, by["decode share (%)"][3], 0.0]
    assert math.isnan(by["decode share (%)"][3])
    assert math.isnan(compare_table(["a", "x"], [a, none], [0, 1])[6][-1])


def test_verdict_names_a_hot_gpu_only_for_decode(windows):
    from tealeaves.app.dashboard.screenshots.model import Verdict

    idle = Verdict(0.0, 1.0, 4, "idle", {"idle": 1.0}, 1.0, hot_gpu=1, hot_share=0.25)
    assert idle.text() == "idle (1.00)"
    dec = Verdict(0.0, 1.0, 4, "decode", {"decode": 1.0}, 0.99, 1.8, 0.1, 3, 1.0)
    assert dec.text() == "decode (0.99), GPU 3 hot, ratio 1.80"


def test_a_verdict_span_out_of_bounds_says_which_span_is_used():
    from tealeaves.app.dashboard.screenshots.model import region_offset, span_note

    assert span_note(5) is None and span_note("12.5") is None
    assert "outside 0.5-600 s: using 600 s" in span_note(100000)
    assert "outside 0.5-600 s: using 0.5 s" in span_note(0)
    assert "not a number" in span_note("soon")
    assert region_offset(2.25) == 2.25  # not a multiple of the old 0.5-s input step


# -- the browser side lives in assets/screenshots.js ---------------------------------------------


def test_clientside_functions_are_in_the_assets_and_read_their_settings_from_the_server():
    import ast
    import re
    from pathlib import Path

    from tealeaves.app.dashboard import ids
    from tealeaves.app.dashboard.screenshots import callbacks, layout

    pkg = Path(callbacks.__file__).parent
    js = (pkg.parent / "assets" / "screenshots.js").read_text()
    assert "Object.assign({}, window.dash_clientside" in js  # other namespaces survive
    defined = set(re.findall(r"^\s{8}(\w+): function\(", js, re.MULTILINE))
    used = set(re.findall(r'_js\("(\w+)"\)', (pkg / "callbacks.py").read_text()))
    assert used and used <= defined, used - defined
    # the ids and limits the functions read come from the server, and are the ids' values
    config = layout.js_config()
    assert set(re.findall(r"\bcfg\.(\w+)", js)) <= set(config)
    assert config["path"] == "/screenshots" and config["detail"] == ids.SHOT_DETAIL
    assert config["max_batch"] * 2 == callbacks.MAX_REQUEST_BYTES
    # no JavaScript left in the package's Python strings
    for f in pkg.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not re.search(r"\bfunction\s*\(|=>", node.value), (f.name, node.value)


def test_a_moment_without_telemetry_says_what_the_store_holds_and_offers_the_zone_shift():
    from tealeaves.app.dashboard.screenshots.model import ZONE_SHIFTS_H, no_telemetry

    t0 = datetime(2026, 12, 1, 15, 10, 2, tzinfo=UTC).timestamp()
    sessions = [(t0, t0 + 15 * 60.0)]
    # read as Berlin time though the clock showed UTC: one hour early
    taken = t0 + 300.0 - 3600.0
    why = no_telemetry(taken, "Europe/Berlin", sessions, 15.0)
    assert why.text == ("no samples at 2026-12-01 15:15:02 (Europe/Berlin); this store holds "
                        "2026-12-01 16:10:02–16:25:02 (Europe/Berlin)")
    assert why.shift_h == 1.0 and why.fix_ts == pytest.approx(taken + 3600.0)
    assert "place it at 2026-12-01 16:15:02 (Europe/Berlin)" in why.fix_label
    # the smallest shift wins; half hours count (India, Newfoundland)
    assert no_telemetry(t0 + 60.0 - 5.5 * 3600, "UTC", sessions, 15.0).shift_h == 5.5
    assert ZONE_SHIFTS_H[:3] == (-0.25, 0.25, -0.5) and max(ZONE_SHIFTS_H) == 14.0
    # Kathmandu (+5:45) is reached too; times no clock shows, a huge span or a reversed
    # session neither fail nor invent a fix
    assert no_telemetry(t0 + 60.0 - 5.75 * 3600, "Asia/Kathmandu", sessions, 15.0).shift_h == 5.75
    for bad in (float("nan"), float("inf"), 1e12, -1e12):
        why = no_telemetry(bad, "UTC", sessions, 15.0)
        assert why.fix_ts is None and "unknown or outside" in why.text
    assert no_telemetry(t0 - 10 * 3600, "UTC", sessions, 1e9).shift_h == 10.0
    assert "15:10:02–15:25:02" in no_telemetry(t0 - 86400, "UTC", [(t0 + 900, t0)], 5.0).text
    # another day: no shift reaches the data; the store's sessions are still named
    far = no_telemetry(t0 - 3 * 86400, "UTC", [*sessions, (t0 + 7200, t0 + 7300)], 15.0)
    assert far.fix_ts is None and far.fix_label == ""
    assert "this store holds 2026-12-01 15:10:02–15:25:02 (UTC) and 1 other session" in far.text
    assert no_telemetry(t0, "UTC", [], 15.0).text.endswith("this store holds no samples yet")
    # an unknown stored zone reads as UTC instead of failing
    assert "(UTC)" in no_telemetry(taken, "Mars/Olympus", sessions, 15.0).text


def test_sizes_and_the_opened_picture_are_readable():
    from tealeaves.app.dashboard.screenshots.model import fmt_bytes
    from tealeaves.app.dashboard.screenshots.views import PICTURE_PANEL_PX, picture_height

    assert [fmt_bytes(n) for n in (0, 350, 1024, 3500, 5 * 2**20, 2**20 - 1, 5 * 2**30)] == [
        "0 B", "350 B", "1.0 KB", "3.4 KB", "5.0 MB", "1.0 MB", "5.0 GB"]
    assert {fmt_bytes(v) for v in (None, float("nan"), float("inf"), -5)} == {"size unknown"}
    # a 1920x1080 screenshot is drawn at the panel's width with its own aspect
    assert picture_height(1920, 1080) == PICTURE_PANEL_PX * 1080 // 1920
    assert picture_height(3335, 1907) > 700
    assert picture_height(200, 5000) == 1000 and picture_height(5000, 100) == 300
