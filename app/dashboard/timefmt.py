"""Times on the page: the page's time zone (the browser's, reported once), clock text in it,
hand-typed date-times read in it, the session picker's labels and the age of the newest sample."""

from __future__ import annotations

import math
import re
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pandas as pd

from tealeaves.app.figures import (
    fmt_span,
)
from tealeaves.data.screen.screenshots import ScreenshotError, zone_name


def page_zone(name: str | None) -> ZoneInfo:
    """The page's time zone: IANA ``name`` as the browser reports it (any case), UTC when
    None or not a zone here."""
    try:
        return ZoneInfo(zone_name(name or "UTC"))
    except ScreenshotError:
        return ZoneInfo("UTC")


def clock(t: float, zone: ZoneInfo, digits: int = 3) -> str:
    s = datetime.fromtimestamp(t, tz=zone).strftime("%H:%M:%S.%f")
    return s[: 9 + digits] if digits else s[:8]


def age_s(ts_last: float | None, mono_last: float | None) -> float | None:
    """Seconds since the newest sample: by the monotonic clock when its stamp is this boot's
    (it agrees with the wall clock within a minute: immune to a wall-clock step), else by the
    wall clock (a store from another boot or host, whose monotonic stamps mean nothing here)."""
    if ts_last is None:
        return None
    wall = time.time() - float(ts_last)
    if mono_last is not None:
        age = time.monotonic() - float(mono_last)
        if abs(age - wall) < 60.0:
            return max(age, 0.0)
    return max(wall, 0.0)


def fmt_age(age: float) -> str:
    if age < 60:
        return f"{age:.1f} s"
    if age < 3600:
        return f"{age / 60:.0f} min"
    return f"{age / 3600:.1f} h"


def parse_time(text: str | None, tz: str | None = None) -> float:
    """Epoch seconds of a date-time typed by hand: ``YYYY-MM-DD[ HH:MM[:SS[.fff]]]`` read in
    the page's zone ``tz`` (default UTC; a repeated autumn hour reads as its first pass),
    ISO 8601 with an offset (``...T18:31:15+02:00``, ``...Z``), or epoch seconds.

    Raises:
        ValueError: unreadable, or outside 1970-2200.
    """
    s = (text or "").strip()
    zone = page_zone(tz)
    why = (f"cannot read {text!r} as a date-time in {zone.key} (YYYY-MM-DD HH:MM:SS, ISO 8601 "
           f"with an offset, or epoch seconds)")
    if not s:
        raise ValueError(why)
    try:
        if re.fullmatch(r"\d{9,11}(\.\d*)?", s):
            t = float(s)
        else:
            if not re.match(r"\d{4}-\d{2}-\d{2}", s):  # no "now", "today", "May 5"
                raise ValueError(why)
            ts = pd.Timestamp(s)
            t = (ts.tz_localize(zone.key, ambiguous=True, nonexistent="shift_forward")
                 if ts.tzinfo is None else ts).timestamp()
    except (ValueError, OverflowError, TypeError):
        raise ValueError(why) from None
    if not (math.isfinite(t) and 0.0 <= t <= 7.26e9):
        raise ValueError(f"{text!r} is outside 1970-2200")
    return t


def session_options(sessions: list, tz: str | None = None, writing: bool = False) -> list[dict]:
    """The session picker's options: one per ``History.sessions`` run, oldest first, labelled
    with its start, end and length in the page's zone; the value is ``"t0,t1"`` (epoch s).
    Only while the store is being written (``writing``: ``LiveView.being_written``) does the
    newest session end "now", its value ``"t0,"`` (open: it still grows, and follows);
    otherwise it ends at its last sample like the others (a date too when it ends on
    another day than it starts)."""
    out = []
    for i, (t0, t1) in enumerate(sessions):
        last = i == len(sessions) - 1 and writing
        start = picker_value(t0, tz)[:19]
        full = picker_value(t1, tz)
        end = "now" if last else full[11:19] if full[:10] == start[:10] else full[:19]
        out.append({"label": f"{start} – {end} ({fmt_span(max(t1 - t0, 0.0))})",
                    "value": f"{t0:.3f}," if last else f"{t0:.3f},{t1:.3f}"})
    return out


def picker_value(t: float, tz: str | None = None) -> str:
    return datetime.fromtimestamp(t, tz=page_zone(tz)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def fmt_shift(s: float) -> str:
    """A clock shift in words, sign first: ``"+4 d 09:02:11.2"``, ``"+00:00:03.0"``,
    ``"-01:30:00.0"``; ``"n/a"`` for NaN."""
    if s is None or not math.isfinite(s):
        return "n/a"
    sign = "-" if s < 0 else "+"
    tenths = round(abs(s) * 10)
    d, rest = divmod(tenths, 864_000)
    h, rest = divmod(rest, 36_000)
    m, rest = divmod(rest, 600)
    sec = rest / 10
    return f"{sign}{f'{d} d ' if d else ''}{h:02d}:{m:02d}:{sec:04.1f}"


def replay_text(info: dict | None, tz: str | None = None) -> str:
    """What a replay's times are, for the status line: ``"replay of h200x2.parquet, recorded
    2026-11-30 14:09:03–14:10:42 UTC, shown shifted to now by +4 d 09:02:11.2 (recorded =
    shown - that; classify and report print recorded times)"``, dates in the page's zone
    ``tz``.  ``info`` is ``DashboardConfig.replay``'s answer (``file``, ``t0``, ``t1``,
    ``offset``); ``""`` for None."""
    if not info:
        return ""
    zone = page_zone(tz)
    t0, t1 = float(info.get("t0", math.nan)), float(info.get("t1", math.nan))
    what = f"replay of {info.get('file') or 'a trace'}"
    if math.isfinite(t0):
        d0 = datetime.fromtimestamp(t0, tz=zone)
        end = ""
        if math.isfinite(t1):
            d1 = datetime.fromtimestamp(t1, tz=zone)
            end = "–" + (d1.strftime("%H:%M:%S") if d1.date() == d0.date()
                         else d1.strftime("%Y-%m-%d %H:%M:%S"))
        what += f", recorded {d0:%Y-%m-%d %H:%M:%S}{end} {zone.key}"
    off = float(info.get("offset", math.nan))
    if not math.isfinite(off):
        return what + ", shown shifted to now (the shift is set when the replay starts)"
    return (f"{what}, shown shifted to now by {fmt_shift(off)} (recorded = shown − that; "
            f"classify and report print recorded times)")
