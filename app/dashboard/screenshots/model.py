"""The Screenshots page's pure parts, tested without a browser: verdicts of a span of windows,
comparisons between screenshots' moments, regions of a picture and their time offsets, the
capture time a user types, the verdict span, and times shown in a screenshot's zone.

Nothing here imports dash; the page's layout is ``layout``, what its callbacks draw ``views``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pandas as pd

from tealeaves.classifier.rules import PHASE_ORDER
from tealeaves.classifier.summary import imbalance_summary
from tealeaves.data.screen.screenshots import (
    MAX_BYTES,
    YEARS,
    ScreenshotError,
    plausible,
    to_epoch,
    zone_name,
)

#: Default half-width (s) of the span a screenshot's verdict reads.
SPAN_S = 5.0
#: Bounds (s) of the verdict span a user may type; beyond them the nearest bound is used.
SPAN_MIN_S, SPAN_MAX_S = 0.5, 600.0
#: Largest request body the server reads (several screenshots at once, base64-encoded).
MAX_REQUEST_BYTES = 8 * MAX_BYTES
#: Largest region time offset, seconds either way (a scrolling graph shows minutes, not days).
MAX_REGION_OFFSET_S = 86_400.0
#: Where the server serves a kept picture's bytes: ``PICTURE_ROUTE + sha256``.
PICTURE_ROUTE = "/tealeaves/screenshots/"
#: Outline colours of regions 1, 2, ... (apart from the GPU and phase colours).
REGION_COLORS = ("#0f766e", "#b45309", "#7c3aed", "#be123c", "#0369a1", "#4d7c0f")


def picture_url(sha: str) -> str:
    """The URL path of the kept picture whose SHA-256 (hex) is ``sha``."""
    return f"{PICTURE_ROUTE}{sha}"


# -- verdicts and comparisons ---------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What the windows of a span say.

    Attributes:
        t0, t1: the span, epoch seconds.
        windows: labelled windows in it.
        phase: the phase of most windows (None without windows).
        shares: ``{phase: share of the windows}``.
        confidence: mean confidence of the windows labelled ``phase``.
        imbalance_ratio: mean max/mean load over the decode windows (NaN without any).
        straggler_tax: mean over the decode windows (NaN without any).
        hot_gpu: the GPU flagged hot in most flagged windows, or None.
        hot_share: share of the span's windows flagged with ``hot_gpu`` hot.
        loads: ``{gpu: mean load %}`` over the span.
        hot_set: the hot set flagged in most flagged windows (every hot GPU of it; empty
            when none).
        hot_text: the hot set in words (``classifier.hot_set``: the set, its share against
            the rest, whether it stays or rotates); empty when none.
        imbalance_ratio and straggler_tax are over the decode windows with load
        (``classifier.summary.imbalance_summary``): NaN when the span has none.
    """

    t0: float
    t1: float
    windows: int
    phase: str | None
    shares: dict = field(default_factory=dict)
    confidence: float = math.nan
    imbalance_ratio: float = math.nan
    straggler_tax: float = math.nan
    hot_gpu: int | None = None
    hot_share: float = 0.0
    loads: dict = field(default_factory=dict)
    hot_set: tuple[int, ...] = ()
    hot_text: str = ""

    def text(self) -> str:
        """One line: ``"prefill (0.97)"``, ``"decode (0.99), GPU 3 hot, ratio 1.80"`` or
        ``"decode (0.99), GPUs 1, 3, 5, 7 hot, ratio 1.43"``."""
        if self.phase is None:
            return "no labelled windows here"
        out = f"{self.phase} ({self.confidence:.2f})"
        if self.phase in ("decode", "mixed"):  # hot GPUs are flagged in decode windows
            if self.hot_text:  # the hot set in the words of every surface (classifier.hot_set)
                out += f", hot: {self.hot_text}"
            elif len(self.hot_set) > 1:
                out += f", GPUs {', '.join(map(str, self.hot_set))} hot"
            elif self.hot_gpu is not None:
                out += f", GPU {self.hot_gpu} hot"
            if math.isfinite(self.imbalance_ratio):
                out += f", ratio {self.imbalance_ratio:.2f}"
        mixed = {p: s for p, s in self.shares.items() if p != self.phase and s >= 0.2}
        if mixed:
            out += " · also " + ", ".join(f"{p} {s:.0%}" for p, s in mixed.items())
        return out


def verdict(windows: pd.DataFrame, gpus: list[int], t0: float, t1: float) -> Verdict:
    """The verdict of the windows that overlap ``[t0, t1]`` (epoch s).

    Args:
        windows: ``classify_samples`` columns (``start``, ``end``, ``phase``, ``confidence``,
            ``imbalance_ratio``, ``straggler_tax``, ``hot_gpu``, ``load_g<i>`` ...); None or
            empty gives an empty verdict.
        gpus: the GPU indices whose mean loads the verdict holds.
    """
    if windows is None or windows.empty:
        return Verdict(t0, t1, 0, None)
    w = windows[(windows["end"] > t0) & (windows["start"] < t1)]
    w = w[w["phase"].notna()]  # windows that cannot be told give no verdict
    if w.empty:
        return Verdict(t0, t1, 0, None)
    counts = w["phase"].value_counts()
    shares = {p: float(counts.get(p, 0)) / len(w) for p in PHASE_ORDER if counts.get(p, 0)}
    phase = max(shares, key=lambda p: (shares[p], -PHASE_ORDER.index(p)))
    conf = float(w.loc[w["phase"] == phase, "confidence"].mean())
    summ = imbalance_summary(w)  # ratio and tax over the decode windows with load only
    ratio, tax = float(summ["imbalance_ratio"]), float(summ["straggler_tax"])
    flagged = w["hot_gpu"].dropna()
    hot, hot_share = None, 0.0
    if len(flagged):
        top = flagged.astype(int).value_counts()
        hot = int(top.index[0])
        hot_share = float(top.iloc[0]) / len(w)
    hot_set = tuple(summ["hot_set"])
    loads = {g: float(w[f"load_g{g}"].mean()) for g in gpus if f"load_g{g}" in w}
    return Verdict(t0, t1, len(w), phase, shares, conf, ratio, tax, hot, hot_share, loads,
                   hot_set, summ["hot_text"] if summ["hot_pattern"] != "none" else "")


def moment_verdict(history, t: float | None, span: float) -> Verdict:
    """The verdict of ``t +- span`` (epoch s) from a ``History``'s windows; an empty one
    (NaN span) for a missing, non-finite or implausible ``t``."""
    if t is None or not (math.isfinite(t) and math.isfinite(span) and plausible(t)):
        return Verdict(math.nan, math.nan, 0, None)
    w = history.windows(math.floor((t - span) / history.window_s) - 1,
                        math.ceil((t + span) / history.window_s) + 1)
    return verdict(w, history.gpus, t - span, t + span)


def compare_table(names: list[str], verdicts: list[Verdict], gpus: list[int]) -> list[list]:
    """Rows ``[quantity, value per screenshot ..., last - first]`` comparing verdicts (the
    moments of two or more screenshots): phase shares (%), imbalance ratio, straggler tax (%),
    hot GPU (``"GPUs 1, 3, 5, 7"`` for a hot set of several), and each GPU's mean load (%).
    The first row is the header (``"moment"``, the names, ``"Δ last − first"``).
    Unknown values are NaN; the difference is between the first and last screenshots with a
    value (NaN with fewer than two); the hot GPU row has none."""
    def pct(v):
        return 100.0 * v if v is not None and math.isfinite(v) else math.nan

    rows: list[list] = [["moment", *names, "Δ last − first"]]
    quantities: list[tuple[str, list[float]]] = []
    for p in PHASE_ORDER:
        quantities.append((f"{p} share (%)", [pct(v.shares.get(p, 0.0)) if v.windows else
                                               math.nan for v in verdicts]))
    quantities.append(("imbalance ratio (max/mean)", [v.imbalance_ratio for v in verdicts]))
    quantities.append(("straggler tax (%)", [pct(v.straggler_tax) for v in verdicts]))
    for g in gpus:
        quantities.append((f"GPU {g} load (%)", [v.loads.get(g, math.nan) for v in verdicts]))
    for name, vals in quantities:
        known = [v for v in vals if v is not None and math.isfinite(v)]
        delta = known[-1] - known[0] if len(known) > 1 else math.nan
        rows.append([name, *vals, delta])
    rows.insert(5, ["hot GPU", *[f"GPUs {', '.join(map(str, v.hot_set))}"
                                 if len(v.hot_set) > 1 else v.hot_gpu for v in verdicts], None])
    return rows


# -- regions ---------------------------------------------------------------------------------


def halves() -> list[dict]:
    """Two regions: the top and bottom halves, both at the capture time (offset 0).

    A region is ``{"name": str, "box": [x0, y0, x1, y1] (fractions of the picture, y down),
    "offset_s": float}``."""
    return [{"name": "top", "box": [0.0, 0.0, 1.0, 0.5], "offset_s": 0.0},
            {"name": "bottom", "box": [0.0, 0.5, 1.0, 1.0], "offset_s": 0.0}]


def region_from_shape(shape: dict, width: int, height: int, n: int) -> dict | None:
    """A region named ``box n`` from a rectangle drawn on the picture (plotly shape in pixel
    coordinates of a ``width`` x ``height`` picture), as fractions of the picture, clipped to
    it; None for a shape that is not a rectangle of some size (1 % either way)."""
    try:
        x0, x1 = sorted((float(shape["x0"]), float(shape["x1"])))
        y0, y1 = sorted((float(shape["y0"]), float(shape["y1"])))
    except (KeyError, TypeError, ValueError):
        return None
    box = [max(0.0, x0 / width), max(0.0, y0 / height), min(1.0, x1 / width),
           min(1.0, y1 / height)]
    if box[2] - box[0] < 0.01 or box[3] - box[1] < 0.01:
        return None
    return {"name": f"box {n}", "box": [round(b, 4) for b in box], "offset_s": 0.0}


def parse_regions(text: str | None) -> list[dict]:
    """The stored regions (JSON), or [] when none or unreadable; an offset that is not a
    number within ``MAX_REGION_OFFSET_S`` reads as 0."""
    try:
        regions = json.loads(text) if text else []
    except (TypeError, ValueError):
        return []
    if not isinstance(regions, list):
        return []
    out = []
    for r in regions:
        if isinstance(r, dict) and "box" in r:
            try:
                off = region_offset(r.get("offset_s", 0.0))
            except ValueError:
                off = 0.0
            out.append({**r, "offset_s": off, "name": str(r.get("name", "region"))})
    return out


def region_offset(value) -> float:
    """A region's time offset, seconds, from an input's value (None or blank: 0).

    Raises:
        ValueError: not a number, or beyond ``MAX_REGION_OFFSET_S`` either way.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return 0.0
    try:
        off = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a number of seconds") from None
    if not math.isfinite(off) or abs(off) > MAX_REGION_OFFSET_S:
        raise ValueError(f"{value!r} is not within ±{MAX_REGION_OFFSET_S:,.0f} s")
    return off


def region_color(i: int) -> str:
    """Outline colour (``#rrggbb``) of region ``i`` (0-based)."""
    return REGION_COLORS[i % len(REGION_COLORS)]


# -- times and spans a user types -------------------------------------------------------------


def edited_time(r, when: str | None, zone: str | None) -> dict:
    """The store fields for the capture time and zone typed for screenshot row ``r``:
    ``when`` is local ``YYYY-MM-DD HH:MM[:SS]`` in ``zone`` (IANA, any case). Nothing when
    both are what is stored, so the time keeps its source.

    Raises:
        ScreenshotError: unreadable, outside ``YEARS``, skipped by a clock change, or an
            unknown zone.
    """
    zone = zone_name(zone or r.tz or "UTC")
    text = " ".join((when or "").strip().replace("T", " ").split())
    if not text:
        raise ScreenshotError(f"{r['name']}: enter the capture time as YYYY-MM-DD HH:MM:SS")
    local = None
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"):
        try:
            local = datetime.strptime(text, fmt)
            break
        except ValueError:
            continue
    if local is None:
        raise ScreenshotError(f"{r['name']}: cannot read {text[:40]!r} as a local time "
                              f"(YYYY-MM-DD HH:MM:SS)")
    if not plausible(local):
        raise ScreenshotError(f"{r['name']}: {text!r} is outside {YEARS[0]}-{YEARS[1]}")
    ts = to_epoch(local, zone, strict=True)
    old = float(r.capture_ts) if pd.notna(r.capture_ts) else None
    if old is not None and abs(old - ts) < 1.0 and zone == (r.tz or "UTC"):
        return {}
    return {"capture_ts": ts, "capture_local": local.isoformat(sep=" "), "tz": zone,
            "time_source": "set by the user"}


def span_note(value) -> str | None:
    """Why the verdict span typed is not the one used (None when it is)."""
    if value is None or value == "":
        return f"verdict span: using {SPAN_S:g} s"
    try:
        v = float(value)
    except (TypeError, ValueError):
        return f"verdict span {value!r} is not a number of seconds: using {SPAN_S:g} s"
    if not math.isfinite(v) or not SPAN_MIN_S <= v <= SPAN_MAX_S:
        return (f"verdict span {value!r} is outside 0.5-600 s: using {span_seconds(value):g} "
                f"s")
    return None


def span_seconds(value) -> float:
    """The verdict span (half-width, s) used for a typed ``value``: clamped to
    ``SPAN_MIN_S``-``SPAN_MAX_S``; ``SPAN_S`` for one that is not a finite number."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return SPAN_S
    return min(max(v, SPAN_MIN_S), SPAN_MAX_S) if math.isfinite(v) else SPAN_S


def fmt_local(ts: float | None, tz: str | None) -> str:
    """Epoch seconds ``ts`` as ``"YYYY-MM-DD HH:MM:SS <tz> (HH:MM:SS UTC)"`` in zone ``tz``
    (UTC for none or one that no longer resolves; the UTC time is not repeated when ``tz`` is
    UTC itself); ``"unknown"`` for no time and ``"out of range (...)"`` for one no clock
    shows."""
    if ts is None or not math.isfinite(ts):
        return "unknown"
    try:
        zone = ZoneInfo(tz or "UTC")
    except Exception:  # noqa: BLE001 - a zone that no longer resolves: show UTC
        zone = UTC
    try:
        loc = datetime.fromtimestamp(ts, tz=zone)
        utc = datetime.fromtimestamp(ts, tz=UTC)
    except (ValueError, OverflowError, OSError):
        return f"out of range ({ts:g})"
    name = tz or "UTC"
    if zone is UTC or name.upper() in _UTC_NAMES:  # "18:31:15 UTC (18:31:15 UTC)": once
        return f"{loc:%Y-%m-%d %H:%M:%S} {name}"
    return f"{loc:%Y-%m-%d %H:%M:%S} {name} ({utc:%H:%M:%S} UTC)"


#: Zone names that are UTC itself (its time is not repeated in ``fmt_local``).
_UTC_NAMES = frozenset({"UTC", "ETC/UTC", "UCT", "ETC/UCT", "GMT", "ETC/GMT", "Z", "ZULU",
                        "UNIVERSAL", "ETC/UNIVERSAL", "+00:00", "-00:00"})


__all__ = ["MAX_REGION_OFFSET_S", "MAX_REQUEST_BYTES", "PICTURE_ROUTE", "REGION_COLORS",
           "SPAN_S", "Verdict", "compare_table", "edited_time", "fmt_local", "halves",
           "moment_verdict", "parse_regions", "picture_url", "region_color",
           "region_from_shape", "region_offset", "span_note", "span_seconds", "verdict"]


#: Shifts (hours) tried when a screenshot's moment holds no telemetry: a clock or zone off by
#: whole, half or quarter hours (zones run from UTC-12 to UTC+14 in steps of 15 min at the
#: finest: Kathmandu +5:45, Chatham +12:45), smallest first.
ZONE_SHIFTS_H: tuple[float, ...] = tuple(sorted(
    (h / 4 for h in range(-56, 57) if h), key=lambda h: (abs(h), h)))


@dataclass(frozen=True)
class NoTelemetry:
    """Why a screenshot's moment has no verdict, and the one correction that would give it one.

    Attributes:
        text: ``"no samples at 2026-05-31 18:31:15 (Europe/Berlin); this store holds
            2026-12-01 16:10:02–16:25:40 (Europe/Berlin)"`` (and how many other sessions).
        fix_ts: the capture time (epoch s) a zone shift of ``shift_h`` hours gives, inside
            the store's data; None when no shift of at most 14 h reaches it.
        shift_h: that shift, hours (``fix_ts - t``), or None.
        fix_label: the correction in words, for its button (``""`` without one).
    """

    text: str
    fix_ts: float | None = None
    shift_h: float | None = None
    fix_label: str = ""


def no_telemetry(t: float, tz: str, sessions: list, span: float) -> NoTelemetry:
    """Say that ``t ± span`` (epoch s, shown in zone ``tz``) holds no sample, what the store
    holds instead (``History.sessions``: ``[(t0, t1), ...]`` epoch s), and the smallest shift of
    whole, half or quarter hours (``ZONE_SHIFTS_H``: zones sit at :30 and :45 too) that would put ``t`` inside a session: a picture
    whose time was read in the wrong zone."""
    try:
        zone = ZoneInfo(zone_name(tz or "UTC"))
    except ScreenshotError:  # a zone stored by an older version and unknown here
        zone = ZoneInfo("UTC")

    def when(x: float, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
        return datetime.fromtimestamp(x, tz=zone).strftime(fmt)

    sessions = sorted((min(a, b), max(a, b)) for a, b in sessions
                      if plausible(a) and plausible(b))
    span = min(max(span, 0.0), SPAN_MAX_S) if math.isfinite(span) else SPAN_S
    if not plausible(t):
        return NoTelemetry(f"no samples: the capture time is unknown or outside "
                           f"{YEARS[0]}-{YEARS[1]}; set it below")
    head = f"no samples at {when(t)} ({zone.key})"
    if not sessions:
        return NoTelemetry(f"{head}; this store holds no samples yet")
    t0, t1 = min(sessions, key=lambda s: min(abs(t - s[0]), abs(t - s[1])))
    end = when(t1, "%H:%M:%S") if when(t0, "%Y-%m-%d") == when(t1, "%Y-%m-%d") else when(t1)
    others = len(sessions) - 1
    text = (f"{head}; this store holds {when(t0)}–{end} ({zone.key})"
            + (f" and {others} other session{'s' if others > 1 else ''}" if others else ""))
    for h in ZONE_SHIFTS_H:
        ts = t + h * 3600.0
        if any(a - span <= ts <= b + span for a, b in sessions):
            return NoTelemetry(text, ts, h, f"taken {h:+g} h off? place it at {when(ts)} "
                                            f"({zone.key})")
    return NoTelemetry(text)


def fmt_bytes(n: float) -> str:
    """A file size in words: ``"350 B"``, ``"3.4 KB"``, ``"2.1 MB"``, ``"5.0 GB"`` (1 KB =
    1024 B; the unit chosen after rounding); never ``"0 KB"`` for a small file; ``"size
    unknown"`` for None, NaN or a negative size."""
    try:
        n = float(n)
    except (TypeError, ValueError):
        return "size unknown"
    if not math.isfinite(n) or n < 0:
        return "size unknown"
    if n < 1024:
        return f"{int(n)} B"
    for unit, scale in (("KB", 1024), ("MB", 1024**2), ("GB", 1024**3)):
        if round(n / scale, 1) < 1024 or unit == "GB":
            return f"{n / scale:.1f} {unit}"
    return ""  # not reached
