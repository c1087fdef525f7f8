"""One nvtop chart found and digitised: its y ticks (``_y_ticks``), then its plot area, time
scale, legends and each series' line (``_one_chart``)."""

from __future__ import annotations

import re

import numpy as np

from tealeaves.data.screen.nvtop_chart import (
    _MEM_WORD,
    DEFAULT_INTERVAL_S,
    Chart,
    ChartSeries,
    _ages,
)
from tealeaves.data.screen.nvtop_frame import (
    _frame_ink,
    _scale_rows,
    _tick_words,
    _time_scale,
    _top_border_end,
)
from tealeaves.data.screen.nvtop_lines import (
    _hidden_under,
    _legends,
    _levels,
    _saturation,
    _two_lines,
    _under_legends,
)


def _glyph_width(words) -> float:
    """The page's glyph width, px: the median width per character of the words of three or
    more characters (a terminal's every cell is one width); 8 without any."""
    sizes = [w.width / len(w.text) for w in words if len(w.text) >= 3]
    return float(np.median(sizes)) if sizes else 8.0


def _y_ticks(words, cw: float | None = None) -> list[list[tuple[float, float, float]]]:
    """Groups of y-tick words ``(value, centre y, right x)``, one per chart: the largest set
    of words reading 100, 75, 50, 25 or 0 whose right edges line up and whose rows fall on
    one straight value-to-row line within about half a text row (nvtop puts 75/50/25 on
    rounded rows; a misread tick, a stray ``0`` elsewhere, falls off it), at least three
    distinct values each.  A two-digit word starting 2, 5 or 7 stands for 25, 50 or 75
    (its second digit misread, "59")."""
    cands = []
    cw = cw or _glyph_width(words)  # the page's glyph width
    for w in words:
        head = re.split(r"[|/}x\]\[]", w.text)[0]  # a tick read together with the frame
        if not re.fullmatch(r"\d{1,3}", head):
            continue
        v = float(head)
        if len(head) == 2 and head[0] in "257" and v not in (25.0, 50.0, 75.0):
            # a tick's 0 or 5 misread ("59" for 50): its first digit says which; a stray
            # number elsewhere would have to line up with the other ticks and their rows
            v = {"2": 25.0, "5": 50.0, "7": 75.0}[head[0]]
        if v in (100.0, 75.0, 50.0, 25.0, 0.0):
            cands.append((v, w.top + w.height / 2, w.left + cw * len(head), w.height))
    groups = []
    while len(cands) >= 3:
        best: list[tuple] = []
        for i, p in enumerate(cands):
            for q in cands[i + 1:]:
                if q[0] == p[0] or abs(q[2] - p[2]) > 3 * cw:
                    continue
                slope = (q[1] - p[1]) / (q[0] - p[0])
                if slope >= 0:  # 100 is above 0
                    continue
                fit = [c for c in cands if abs(c[2] - p[2]) <= 3 * cw
                       and abs(p[1] + slope * (c[0] - p[0]) - c[1]) <= 1.2 * c[3]]
                if len({c[0] for c in fit}) > len({c[0] for c in best}):
                    best = fit
        if len({c[0] for c in best}) < 3:
            break
        groups.append(sorted(best, key=lambda c: c[1]))
        cands = [c for c in cands if c not in best]
    return [[(v, y, x) for v, y, x, _h in g] for g in sorted(groups, key=lambda g: g[0][1])]


def _one_chart(a: np.ndarray, words, ticks, bg: float, glyph_w: float,
               limit: int | None = None) -> Chart | None:
    """One chart from its y ``ticks`` (``_y_ticks``' group): the plot area right of them
    (``_plot_area``), its time scale (``_read_time_scale``), what the picture's edges cut off
    (``_edge_notes``), and a series per legend read (``_legend_series``), each line's level per
    pixel column; a monochrome chart's two lines are followed apart (``_monochrome_pair``).
    ``limit``: the x where the next chart's y ticks start (a chart beside this one), px.
    None where the ticks do not fall from 100 to 0 down the picture."""
    area = _plot_area(a, words, ticks, bg, limit)
    if area is None:
        return None
    x_left, x_right, y100, y0, scale_from, right, end = area
    slope, icpt = (y0 - y100) / -100.0, y0
    sec_px, source, newest_right, edge_ago = _read_time_scale(a, words, x_left, x_right, y0)
    chart = Chart((x_left, int(y100), x_right, int(y0)), sec_px, source, newest_right,
                  newest_s_ago=edge_ago, scale_from=scale_from)
    _edge_notes(chart, a, y100, y0, right, end, edge_ago, source)
    legends = _legends(a, words, x_left, x_right, y100, y0, bg, glyph_w)
    if not legends:
        chart.notes.append("no legend read: the series are not named")
        return chart
    colours = [c for _l, c, _b in legends]
    mono = len({tuple(c) for c in colours}) < len(colours) or any(
        _saturation(c) < 40 for c in colours)
    ago = _ages(x_left, x_right, sec_px, newest_right, edge_ago)
    # the legend words are drawn in their series' colours: no level is read off them
    masked, covered, boxes = _mask_legends(a, legends, bg, glyph_w, x_left, len(ago))
    chart.legend_boxes = boxes
    _legend_series(chart, legends, masked, ago, slope, icpt)
    if mono and len(chart.series) == 2 and chart.series[0].gpu == chart.series[1].gpu:
        return _monochrome_pair(chart, masked, colours[0], covered, boxes, slope, icpt)
    if mono:
        chart.monochrome = "together"
        chart.notes.append("the series share one colour (a monochrome screen): which line is "
                           "which cannot be told; the lines are read together")
    _hidden_under(chart.series, covered)
    held = _under_legends(masked, chart.series, boxes, x_left,
                          int(y100), int(y0), slope, icpt)
    for sr in chart.series:
        if not np.isfinite(sr.values).any():
            chart.notes.append(f"{sr.legend}: no line seen in its legend's colour (erased, "
                               f"recoloured or off the chart): its values are unknown")
    if held:
        chart.notes.append(f"{held} columns under a legend's text read as the level the line "
                           f"enters it at (no line of that colour leaves the legend's rows "
                           f"there)")
    return chart


def _plot_area(a: np.ndarray, words, ticks, bg: float, limit: int | None) -> tuple | None:
    """A chart's plot area from its y ``ticks``: ``(x_left, x_right, y100, y0, scale_from,
    right, end)``, px: the columns inside its frame, the 100 % and 0 % rows and what they rest
    on (``_scale_rows``), ``right`` the frame columns found right of the plot (empty: none)
    and ``end`` where its top border ends (``_top_border_end``, None unfound).  None where
    the ticks do not fall from 100 to 0 down the picture."""
    vals = np.array([t[0] for t in ticks])
    ys = np.array([t[1] for t in ticks])
    slope, icpt = np.polyfit(vals, ys, 1)  # y pixel of a value
    if slope >= 0:
        return None
    y100, y0 = icpt + 100 * slope, icpt
    x_left = int(max(t[2] for t in ticks)) + 2
    h, w = a.shape[:2]
    lo_y, hi_y = int(max(0, y100 - 2)), int(min(h - 1, y0 + 2))
    # the plot area's right edge: the box's frame, the last column with a long vertical run
    grey = _frame_ink(a[lo_y:hi_y, :, :], bg)
    frame_cols = np.flatnonzero(grey.mean(axis=0) > 0.8)
    right = [c for c in frame_cols if x_left + 20 < c < (limit or w)]
    # charts side by side: this chart's own right frame is where its top border ends (the
    # box line above the 100 tick, grey like the frame); without one, the last frame column
    end = _top_border_end(a, x_left, y100, ticks, bg)
    if end is not None and right:
        near = min(right, key=lambda c: abs(c - end))
        right = [near] if abs(near - end) <= 12 else right
    x_right = min(int(right[-1]) - 2 if right else (limit or w) - 1,
                  (limit or w) - 5)  # _levels looks 4 px out
    x_left = int(frame_cols[(frame_cols >= x_left - 4) & (frame_cols < x_left + 20)].max()
                 + 2) if ((frame_cols >= x_left - 4) & (frame_cols < x_left + 20)).any() \
        else x_left
    y100, y0, scale_from = _scale_rows(a, ticks, x_left, x_right, y100, y0, bg, words)
    return x_left, x_right, y100, y0, scale_from, right, end


def _read_time_scale(a: np.ndarray, words, x_left: int, x_right: int,
                     y0: float) -> tuple[float, str, bool, float]:
    """``_time_scale`` of the strip of time ticks under the plot: ``(seconds per px, source,
    newest_right, newest edge's seconds ago)``."""
    # the strip's reading hangs on where it is cut: a few pixels lower or higher make "0s"
    # read as "s"; where the ticks do not agree, the strip is cut again
    for nth, shift in ((0, 0), (0, 3), (0, -3), (0, 6), (1, 0)):
        sec_px, source, newest_right, edge_ago = _time_scale(
            _tick_words(a, x_left, x_right, y0 + shift, words, nth), x_left, x_right, y0)
        if source == "ticks":
            break
    return sec_px, source, newest_right, edge_ago


def _edge_notes(chart: Chart, a: np.ndarray, y100: float, y0: float, right: list,
                end: int | None, edge_ago: float, source: str) -> None:
    """Set, in place, what the picture's edges cut off ``chart`` (``unseen_points``,
    ``cut_edges``) and note it, with a newest column before the 0 s tick (``edge_ago``) and
    an assumed time scale (``source`` "default")."""
    h, w = a.shape[:2]
    below = max(0.0, (y0 - (h - 2)) / (y0 - y100) * 100)
    above = max(0.0, (1 - y100) / (y0 - y100) * 100)
    chart.unseen_points = (below, above)
    for lost, edge, part in ((below, "bottom", "lowest"), (above, "top", "highest")):
        if lost > 0:
            chart.cut_edges += (edge,)
            chart.notes.append(f"the chart runs off the picture's {edge} edge: a line in its "
                               f"{part} {lost:.0f} points is unseen (left blank)")
    if not right:  # no frame right of the plot: the picture ends inside it, or the
        # frame is not a straight column (a rotated picture): either way its right end is
        # unknown
        chart.cut_edges += ("right",)
        where = "the chart runs off the picture's right edge (no frame closes it)" \
            if end is not None and end >= w - 8 else "the chart's right frame was not found"
        chart.notes.append(f"{where}: its newest samples may be unseen")
    if edge_ago:
        chart.notes.append(f"the chart's newest column is {edge_ago:.0f} s before its 0 s tick "
                           f"(a cropped picture?): its times are counted from that tick")
    if source == "default":
        chart.notes.append(f"time ticks not read: nvtop's default {DEFAULT_INTERVAL_S:g} s "
                           f"per sample assumed, a sample two text cells wide (GPU % and mem% "
                           f"interleaved)")


def _mask_legends(a: np.ndarray, legends: list, bg: float, glyph_w: float, x_left: int,
                  n: int) -> tuple[np.ndarray, np.ndarray, list[tuple]]:
    """The picture with the legends' boxes blanked, the (n,) plot columns a legend hides part
    of, and the boxes ``(x0, y0, x1, y1)`` px."""
    masked = a.copy()
    covered = np.zeros(n, dtype=bool)  # columns a legend hides part of
    # each legend's box with its '%' (a legend read without it still has its glyph there)
    # and half a glyph either side (where a line runs into a legend's first glyph,
    # Tesseract's box starts past the part of it the line touches, picture 18)
    boxes = [(x0 - glyph_w / 2, y0_,
              x1 + glyph_w * (0.5 if text.rstrip().endswith("%") else 1.5), y1)
             for text, _c, (x0, y0_, x1, y1) in legends]
    for x0, y0_, x1, y1 in boxes:
        # (the blank is the background's grey, never black: on a light screen black is a
        # line's colour)
        masked[int(y0_) - 1:int(y1) + 2, max(0, int(x0) - 1):int(x1) + 2] = round(bg)
        covered[max(0, int(x0) - 1 - x_left):max(0, int(x1) + 2 - x_left)] = True
    return masked, covered, boxes


def _legend_series(chart: Chart, legends: list, masked: np.ndarray, ago: np.ndarray,
                   slope: float, icpt: float) -> None:
    """Append, to ``chart``, a series per legend: its line's level in each column of the
    plot (``_levels`` in the legend's colour, on ``masked``), its GPU and metric from the
    legend's words (or their order: nvtop lists a GPU's GPU % before its mem%)."""
    x_left, y100, x_right, y0 = chart.box
    seen: dict[int, int] = {}
    known = sorted({int(g) for g in re.findall(r"^GPU(\d+)", "\n".join(
        lg for lg, _c, _b in legends), re.MULTILINE)})
    for legend, colour, _box in legends:
        level = _levels(masked, colour, x_left, x_right, int(y100) - 4, int(y0) + 4)
        values = np.clip((level - icpt) / slope, 0, 100)
        m = re.match(r"GPU(\d+)", legend)
        gpu = int(m.group(1)) if m else None
        if gpu is None and len(known) == 1:  # an index lost beside one GPU's legends
            gpu = known[0]
        # nvtop lists a GPU's "GPU%" legend, then its "mem%": the order tells a legend
        # whose "%"/"mem%" was not read
        nth = seen.get(gpu, 0)
        seen[gpu] = nth + 1
        metric = "mem_util" if re.search(_MEM_WORD, legend, re.IGNORECASE) else (
            "gpu_util" if "%" in legend else ("gpu_util", "mem_util", None)[min(nth, 2)])
        chart.series.append(ChartSeries(legend, gpu, metric, tuple(int(v) for v in colour),
                                        ago, values))


def _monochrome_pair(chart: Chart, masked: np.ndarray, colour, covered: np.ndarray,
                     boxes: list[tuple], slope: float, icpt: float) -> Chart:
    """``chart``, whose two series (one GPU's) share one colour: each line followed on its
    own through the chart (``_two_lines``), named later (``name_lines``)."""
    x_left, y100, x_right, y0 = chart.box
    # one colour for both: each line followed on its own through the chart, named later
    # by the header's GPU % and MEM (neither is always the upper one: nvtop's mem% line
    # runs above its GPU % line at times, as on picture 07)
    tracks = _two_lines(masked, colour, x_left, x_right, int(y100) - 4, int(y0) + 4,
                        covered)
    for sr, rows in zip(chart.series, tracks, strict=True):
        sr.values = np.clip((rows - icpt) / slope, 0, 100)
        sr.metric = None
    held = _under_legends(masked, chart.series, boxes, x_left,
                          int(y100), int(y0), slope, icpt)
    chart.monochrome = "unnamed"
    chart.notes.append("the series share one colour (a monochrome screen): each line "
                       "followed on its own through the chart"
                       + (f" ({held} columns under a legend's text held at the level the "
                          f"line enters it at)" if held else ""))
    return chart
