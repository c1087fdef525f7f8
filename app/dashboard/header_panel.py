"""The header's cells, pure Dash components from a ``HeaderSummary``: phase, imbalance ratio,
the hot set and its shares of the work, straggler tax, what the verdicts stood on and what the
cells describe (``header_cells``)."""

from __future__ import annotations

import math
from datetime import datetime
from zoneinfo import ZoneInfo

from dash import html

from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.panels import _f, _num
from tealeaves.app.dashboard.timefmt import clock, page_zone
from tealeaves.app.figures import (
    HOT_COLOR,
    PHASE_COLORS,
    HeaderSummary,
    fmt_span,
    gpu_color,
)
from tealeaves.data.schema import (
    entities_text,
    entity_key,
    entity_name,
    entity_short,
)


def _cell(label: str, value, sub: str, cid: str, style: dict | None = None) -> html.Div:
    return html.Div(className="tl-cell", id=cid, children=[
        html.Div(label, className="tl-cell-label"),
        html.Div(value, className="tl-cell-value", style=style or {}),
        html.Div(sub, className="tl-cell-sub"),
    ])


def _recent_text(counts: dict[int, int]) -> str:
    """``{gpu: windows}`` grouped by count, most first: ``"GPUs 1, 3, 5, 7 ×6, GPU 2 ×1"``."""
    by: dict[int, list[int]] = {}
    for g, n in counts.items():
        by.setdefault(n, []).append(g)
    return ", ".join(f"{entities_text(sorted(gs, key=entity_key))} ×{n}"
                     for n, gs in sorted(by.items(), key=lambda kv: -kv[0]))


def header_cells(s: HeaderSummary, tz: str | None = None) -> list:
    """Header cells (phase, imbalance ratio, the hot set with its shares of the work,
    straggler tax, what the verdicts stood on, and what they describe) for a summary; times
    in the page's zone ``tz``.

    A summary of the newest window (``header_summary``: following live) speaks of that
    window and the last ones; a summary of a range (``range_summary``: paused, zoomed, typed
    or a session) speaks of the range's windows and names the range."""
    zone = page_zone(tz)
    in_range = s.range is not None
    if s.phase is None:
        phase_value = html.Span("none" if in_range else "waiting", className="tl-pill",
                                style={"background": "#eef0f3", "color": "#6b7280"})
        phase_sub = "no labelled window in this range" if in_range else "no complete window yet"
    elif not in_range and s.verdict.startswith(("mixed", "cannot tell")):
        # the newest window split with no phase at 70 % of it: say so, as the ribbon's
        # stripes do, not a phase pill the window's shares do not carry ("DECODE, 0 % sure"
        # beside "idle 65 %"); the label the trees gave is in the line under it
        phase_value = html.Span("MIXED" if s.verdict.startswith("mixed") else "CANNOT TELL",
                                className="tl-pill",
                                style={"background": "#eef0f3", "color": "#1f2937"})
        phase_sub = (f"{s.verdict} · labelled {s.phase} "
                     f"({s.certainty or _num(s.confidence * 100, '.0f', ' %')}) · window to "
                     f"{clock(s.window_end, zone, 2)}")
    else:
        phase_value = html.Span(s.phase.upper(), className="tl-pill",
                                style={"background": PHASE_COLORS.get(s.phase, "#999"),
                                       "color": "#1f2937" if s.phase == "idle" else "white"})
        if in_range:  # two lines: the shares, and what they are of
            phase_sub = [" · ".join(f"{p} {v:.0%}" for p, v in s.shares.items()
                                    if v >= 0.005 or p == s.phase), html.Br(), _of(s)]
        else:
            phase_sub = (f"{s.certainty or _num(s.confidence * 100, '.0f', ' %')} · window to "
                         f"{clock(s.window_end, zone, 2)}"
                         + (f" · {s.verdict}" if s.verdict.startswith("mixed") else ""))
    idle = _idle(s)
    ratio = (f"{s.imbalance_ratio:.2f}×" if math.isfinite(s.imbalance_ratio)
             else "– (idle)" if idle else "–")
    tax = (f"{s.straggler_tax:.0%}" if math.isfinite(s.straggler_tax)
           else "– (idle)" if idle else "–")
    hot_set = s.hot_set or ((s.hot_gpu,) if s.hot_gpu is not None else ())
    over = (f"mean {s.figures}" if s.figures.startswith("over ") else s.figures
            or "mean over the range's decode windows") if in_range else None
    return [
        _cell("Phase", phase_value, phase_sub, ids.PHASE),
        _cell("Imbalance", ratio, over or "max / mean GPU work (1.00 = balanced)",
              ids.IMBALANCE),
        _cell("Hot set" if len(hot_set) > 1 else "Hot GPU", _hot_value(s, hot_set),
              _hot_sub(s), ids.HOT_GPU),
        _cell("Straggler tax", tax, over or "GPU time spent waiting for the slowest",
              ids.STRAGGLER),
        *_inputs_cell(s),
        _described(s, zone),
    ]


def _of(s: HeaderSummary) -> str:
    """What a range's phase shares are of: ``"of the time (calibrated shares)"``, ``"of the
    time (calibrated shares where known, else window labels)"`` or ``"of 120 windows"``."""
    if s.share_basis == "calibrated":
        return "of the time (calibrated shares)"
    if s.share_basis == "partly calibrated":
        return "of the time (calibrated shares where known, else window labels)"
    return f"of {s.windows} window{'s' if s.windows != 1 else ''}"


def _inputs_cell(s: HeaderSummary) -> list:
    """The header cell naming what the verdicts stood on: the sampling rate as its value,
    the counters under it (all of them in its tooltip); none when unknown."""
    if not s.inputs:
        return []
    counters, at, rate = s.inputs.rpartition(" at ")
    if not at:  # no rate known: the counters alone
        counters, rate = s.inputs, "rate n/a"
    return [html.Div(className="tl-cell", id=ids.INPUTS, title=f"stood on {s.inputs}",
                     children=[html.Div("Verdicts stood on", className="tl-cell-label"),
                               html.Div(rate, className="tl-cell-value tl-cell-value-sm"),
                               html.Div(counters, className="tl-cell-sub")])]


def _idle(s: HeaderSummary) -> bool:
    """The summary has no imbalance figures because its windows are idle: the newest window
    under ``classifier.imbalance.IDLE_LOAD``, or a range whose decode windows all are."""
    if s.range is not None:
        return s.figures.startswith("idle")
    return s.phase is not None and not math.isfinite(s.imbalance_ratio) and \
        _f(s.load_mean) < _idle_load()


def _idle_load() -> float:
    from tealeaves.classifier.imbalance import IDLE_LOAD

    return IDLE_LOAD


def _pills(gpus, one: bool) -> list:
    """GPU-coloured pills ringed in the hot colour, sorted (``GPU 1`` alone, else ``1``)."""
    from tealeaves.data.schema import entity_key

    pill = {"color": "white", "boxShadow": f"0 0 0 2px {HOT_COLOR}", "marginRight": "3px"}
    return [html.Span(entity_name(g) if one else entity_short(g), className="tl-pill",
                      title=entity_name(g), style={**pill, "background": gpu_color(g)})
            for g in sorted(gpus, key=entity_key)]


def _hot_value(s: HeaderSummary, hot_set: tuple[int, ...]) -> list | html.Span:
    """The hot set as GPU-coloured pills and its work against the rest's
    (``classifier.hot_set.share_words``), or "none"; a range whose hot set rotates shows
    the sets it rotates between (``ROTATION_SETS`` at most), " / " between them."""
    from tealeaves.classifier.hot_set import ROTATION_SETS, share_words

    story = s.story() if s.range is not None else None
    if story is not None and story.pattern == "rotates":
        value: list = [html.Span("rotates: ", className="tl-hot-share")]
        for i, part in enumerate(story.parts[:ROTATION_SETS]):
            if i:
                value.append(html.Span(" / ", className="tl-muted"))
            value += _pills(part.gpus, False)
        if len(story.parts) > ROTATION_SETS:
            value.append(html.Span(" / …", className="tl-muted"))
        return value
    if not hot_set:  # (following live: the newest window's; the last windows' are below)
        return html.Span("none" if s.range is not None else "none in the newest window",
                         className="tl-muted")
    value = _pills(hot_set, len(hot_set) == 1)
    shares = share_words(s.hot_share, s.cold_share, len(hot_set))
    if shares:
        value.append(html.Span(f" at {shares}", className="tl-hot-share"))
    return value


def _hot_sub(s: HeaderSummary) -> str:
    """Whether the hot set stays or rotates (``classifier.hot_set``), over the range's
    flagged windows or the last windows (live)."""
    story = s.story()
    if s.range is not None:
        if not s.flagged:
            return f"no imbalanced window of {s.windows}" if s.windows else ""
        head = f"{s.flagged} of {s.windows} window{'s' if s.windows != 1 else ''} imbalanced"
        return f"{head}; {_story_sub(story)}" if story is not None else head
    if s.hot_recent:
        last = f"in the last {s.windows} windows"
        if story is not None and story.pattern != "none":
            # the value names the newest window's set; when it has none, this line names
            # the last windows' own (never "stays" without saying which GPUs stay hot)
            shown = s.hot_set or ((s.hot_gpu,) if s.hot_gpu is not None else ())
            return f"{last}: {_story_sub(story) if shown else story.text()}"
        return f"hot {last}: {_recent_text(s.hot_recent)}"
    return f"none hot in the last {s.windows} windows" if s.windows else ""


def _story_sub(story) -> str:
    """The header's line on how the hot set behaves: ``"stays: 34 of 34 imbalanced
    windows"`` or ``"rotates between GPUs 0, 2, 4, 6 (34 windows, 2.6x the rest) and ..."``
    (``HotSetStory.text`` less the set and shares the cell's value shows)."""
    text = story.text()
    return "stays" + text.partition(", stays")[2] if story.pattern == "stays" else text


def _described(s: HeaderSummary, zone: ZoneInfo) -> html.Div:
    """The cell naming what the header describes: the newest window (following live) or the
    range on screen, with its dates in the page's zone."""
    if s.range is None:
        return _cell("Describes", "newest window", "following live", ids.HEADER_RANGE)
    t0, t1 = s.range
    d0 = datetime.fromtimestamp(t0, tz=zone)
    d1 = datetime.fromtimestamp(t1, tz=zone)
    end = d1.strftime("%H:%M:%S") if d1.date() == d0.date() else d1.strftime("%Y-%m-%d %H:%M:%S")
    return _cell("Describes", f"{d0:%H:%M:%S}–{end}",
                 f"the range on screen, {d0:%Y-%m-%d} {zone.key} ({fmt_span(t1 - t0)}); "
                 f"follow live for the newest window", ids.HEADER_RANGE)
