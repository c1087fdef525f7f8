"""nvtop's chart lines as the samples nvtop plotted: one value per update interval.

nvtop (``src/plot.c``, ``nvtop_line_plot``) interleaves a chart's series: with ``n`` series
(``GPU0 %`` and ``GPU0 mem%``: 2) sample ``j`` of series ``k`` is drawn in text column
``j * n + k``, and the other series' levels are carried through that column.  So one sample
of a series spans ``n`` text columns, and where a series' level changes nvtop draws a corner
and a vertical stroke in the middle of that sample's first column: the line's vertical strokes
mark where its samples begin.  A line read pixel column by pixel column
(``nvtop.read_charts``) therefore holds, between two strokes, a whole number of
samples, each ``n`` glyphs wide; around a stroke it also holds what the stroke and the ``+``
nvtop draws where a line crosses another (a whole text cell) put there.

``to_samples`` turns each series into those samples: the pixel columns between two of its
strokes cut into equal samples (as many as the stroke distance holds sample widths), each
sample's value the median of its columns away from the strokes, and its age the number of
samples between it and the newest one times the update interval.  A sample is one NVML
reading nvtop took at one moment, so it has one age, not the spread of ages its pixel
columns would give.
"""

from __future__ import annotations

import itertools

import numpy as np

from tealeaves.data.screen.nvtop_chart import DEFAULT_INTERVAL_S, Chart, _ages
from tealeaves.data.screen.nvtop_lines import _longest_runs
from tealeaves.data.screen.nvtop_plot import _glyph_width
from tealeaves.data.screen.nvtop_scales import _cell_height, lattice_agreement

#: Update intervals nvtop accepts are whole tenths of a second (``-d`` in tenths).
INTERVAL_QUANTUM_S = 0.1
#: The intervals people run nvtop with (its default 1 s, halved, doubled ...), taken when the
#: ticks' reading is within ``COMMON_TOL`` of one; else a tenth within ``TENTH_TOL``.
COMMON_INTERVALS_S = (0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 5.0)
COMMON_TOL = 0.08
TENTH_TOL = 0.04
#: How late nvtop 3.0.1's refresh comes after its update interval on a real GPU (s): one H200,
#: frames every 0.548, 1.052 and 2.050 s at ``-d 5, 10, 20`` (the recordings in
#: tests/pictures/nvtop/captures/h200_run1; its NVML queries).  The chart's samples are one
#: per refresh, so the picture's own clock (samples x interval) runs this much short a sample.
REFRESH_LATE_S = 0.05
#: A stroke is a vertical run of the series' colour at least this share of a text row high
#: (a one-row step draws a corner on each of two rows: one row of vertical line, less the
#: pixel or two xterm leaves between rows; a legend's glyph is shorter, and blanked).
STROKE_ROWS = 0.8
#: Colour distance (per channel) within which a pixel is the series' ink.
INK_TOL = 60


def cell_width(words) -> float | None:
    """The terminal's cell width, px, from where its words start: every word of a terminal
    starts on the cell lattice, so the pitch (within 0.85-1.3x of the words' width per
    character, ``nvtop_plot._glyph_width``, which Tesseract's tight boxes make a few per
    cent short) whose phases the words' left edges agree on best
    (``nvtop_scales.lattice_agreement``); None with fewer than 8 words or no agreement
    (< 0.5)."""
    xs = np.asarray([w.left for w in words if len(w.text) >= 2], dtype=float)
    if len(xs) < 8:
        return None
    guess = _glyph_width(words)
    pitches = np.arange(0.85 * guess, 1.3 * guess, 0.002 * guess)
    agree = lattice_agreement(xs, pitches)
    k = int(np.argmax(agree))
    return float(pitches[k]) if agree[k] >= 0.5 else None


def _round_interval(raw: float) -> tuple[float, float] | None:
    """The update interval ``raw`` (s, from the ticks' seconds per pixel) stands for, and
    how far off it is (share): one of ``COMMON_INTERVALS_S`` within ``COMMON_TOL``, else the
    nearest tenth within ``TENTH_TOL`` (a tick strip read a few per cent off cannot tell
    1.0 s from 1.1 s, but nvtop's users mostly keep its default or halve or double it)."""
    common = min(COMMON_INTERVALS_S, key=lambda c: abs(c - raw) / c)
    if abs(common - raw) <= COMMON_TOL * common:
        return common, abs(common - raw) / common
    step = round(max(1, round(raw / INTERVAL_QUANTUM_S)) * INTERVAL_QUANTUM_S, 3)
    off = abs(step - raw) / step
    return (step, off) if off <= TENTH_TOL else None


def update_interval(chart: Chart, cell_w: float) -> tuple[float, int] | None:
    """nvtop's update interval of ``chart``, s, and how many series it interleaves: one sample
    is as many cells wide as the chart has series, so the interval is ``seconds_per_px *
    cell_w * n`` (``_round_interval``).  ``n`` is the legends read when two or more and that
    rounds, else nvtop's default two (GPU % and mem%: one legend read, the other lost under a
    line or blanked, picture 00 so made read 0.5 s for 1 s); None when neither does
    (a time scale misread: picture 24's "0s" read "6s" would round to 1.1 s over four)."""
    if cell_w <= 0 or chart.seconds_per_px <= 0:
        return None
    read = len(chart.series)
    # (fewer than two legends read: one lost, nvtop draws GPU % and mem% by default)
    for n in dict.fromkeys([max(read, 2), read]):
        got = _round_interval(chart.seconds_per_px * cell_w * n) if 1 <= n <= 4 else None
        if got is not None:
            return got[0], n
    return None


def _strokes(a: np.ndarray, colour, box, cell_h: float, blank: list[tuple]) -> list[float]:
    """x (px, centres) of the vertical strokes of ``colour`` in the plot ``box`` (x0, y100,
    x1, y0): columns where the colour runs down at least ``STROKE_ROWS`` of a text row
    ``cell_h``, adjacent columns one stroke; ``blank``: legend boxes left out."""
    x0, y100, x1, y0 = box
    r0, r1 = max(0, y100 - 4), min(a.shape[0], y0 + 5)
    part = a[r0:r1, x0:x1 + 1].astype(float)
    ink = np.abs(part - np.asarray(colour, dtype=float)).max(axis=2) < INK_TOL
    for bx0, by0, bx1, by1 in blank:
        ink[max(0, int(by0) - 1 - r0):max(0, int(by1) + 2 - r0),
            max(0, int(bx0) - 1 - x0):max(0, int(bx1) + 2 - x0)] = False
    # (xterm leaves a pixel or two between the cells of a stroke: gaps up to 4 px closed)
    closed = ink.copy()
    for d in (1, 2):
        closed[d:] |= ink[:-d]
        closed[:-d] |= ink[d:]
    longest = _longest_runs(closed) - 4  # (less what closing the gaps added at its ends)
    cols = (np.flatnonzero(longest >= STROKE_ROWS * cell_h) + x0).tolist()
    out: list[list[int]] = []
    for c in cols:
        if out and c - out[-1][-1] <= 2:
            out[-1].append(c)
        else:
            out.append([c])
    return [float(np.mean(g)) for g in out]


def _bounds(strokes: list[float], x0: int, x1: int, width: float) -> np.ndarray:
    """Where samples begin (px), from ``x0`` to ``x1``: every stroke, the distance between two
    strokes cut into as many equal samples as it holds ``width``, and whole widths beyond the
    first and last stroke (from the plot's right edge when there is no stroke: the line is
    level, only its ages hang on it)."""
    if not strokes:
        b = list(np.arange(x1 + 1 - width, x0 - width, -width))[::-1]
        return np.asarray(b, dtype=float)
    b: list[float] = []
    t = strokes[0]
    while t - width > x0 - width:
        t -= width
        b.insert(0, t)
    for s, e in itertools.pairwise(strokes):
        m = max(1, round((e - s) / width))
        b += [s + i * (e - s) / m for i in range(m)]
    t = strokes[-1]
    while t <= x1:
        b.append(t)
        t += width
    return np.asarray(b, dtype=float)


def _sample_values(values: np.ndarray, xs: np.ndarray, strokes: list[float], width: float,
                   guard: float) -> list[float]:
    """One value per sample of a line read per pixel column (``values`` at the columns
    ``xs``), oldest-left order: the samples begin at ``_bounds``; each is the median of its
    columns farther than ``guard`` px from a stroke (all its columns where none of those saw
    the line), NaN where none did."""
    edges = np.r_[np.clip(_bounds(strokes, int(xs[0]), int(xs[-1]), width), xs[0],
                          xs[-1] + 1), xs[-1] + 1]
    near = np.zeros(len(xs), dtype=bool)
    for st in strokes:
        near |= np.abs(xs - st) <= guard
    out = []
    for lo, hi in itertools.pairwise(edges):
        if hi - lo < 1:
            continue
        inside = (xs >= lo) & (xs < hi)
        away = values[inside & ~near]
        pick = away if np.isfinite(away).any() else values[inside]
        pick = pick[np.isfinite(pick)]
        out.append(float(np.median(pick)) if len(pick) else np.nan)
    return out


def _assume_default(chart: Chart, cell_w: float) -> None:
    """A chart whose time ticks were not read: nvtop's default interval over a sample as wide
    as its series' cells (two, GPU % and mem%, where fewer legends were read), not a guessed
    pixel pitch, and time running away from the legends (nvtop writes them over the oldest
    samples: on the left, on the right with ``-r``); the series' ages recomputed (the chart's
    notes say the times are assumed)."""
    n = max(2, len(chart.series))
    chart.seconds_per_px = DEFAULT_INTERVAL_S / (n * cell_w)
    if chart.legend_boxes:  # nvtop writes the legends on the oldest side (-r: the right)
        mid = (chart.box[0] + chart.box[2]) / 2
        right = np.mean([(b[0] + b[2]) / 2 for b in chart.legend_boxes]) > mid
        if right == chart.newest_right:
            chart.newest_right = not right
            chart.notes.append("time ticks not read: the newest sample taken on the side "
                               "away from the legends (nvtop writes them on the oldest side)")
    ago = _ages(chart.box[0], chart.box[2], chart.seconds_per_px, chart.newest_right,
                chart.newest_s_ago)
    for sr in chart.series:
        if len(sr.values) == len(ago):
            sr.seconds_ago = ago


def to_samples(a: np.ndarray, charts: list[Chart], words) -> None:
    """``samples_of`` with the terminal's cell width (``cell_width``, else the words' width
    per character) and text row height (``nvtop_scales._cell_height``) read off ``words``
    (Tesseract's, ``grid.Word``)."""
    samples_of(a, charts, cell_width(words) or _glyph_width(words), _cell_height(words))


def samples_of(a: np.ndarray, charts: list[Chart], glyph_w: float,
               cell_h: float | None) -> None:
    """Turn, in place, each chart's series (one value per pixel column) into nvtop's samples
    (module docstring): ``seconds_ago`` becomes ``newest_s_ago + k * interval`` for the
    k-th sample from the newest edge, ``values`` each sample's median level, NaN where none
    of its columns saw the line.  ``a``: the picture (rows, columns, RGB); ``glyph_w`` and
    ``cell_h``: the terminal's cell width and text row height, px.  A chart whose interval
    cannot be told (``update_interval`` None) or without a row height keeps its pixel
    columns; ``Chart.interval_s`` says which.  Every chart takes the interval most charts
    read (nvtop has one), with the series count that gives it; a chart whose time ticks were
    read nowhere takes nvtop's default (``_assume_default``; its notes say so).
    """
    timed = [c for c in charts if c.interval_source in ("ticks", "ticks (another chart)")]
    got = {id(c): update_interval(c, glyph_w) for c in timed}
    # nvtop draws every chart with one interval: the one most charts read (a chart whose
    # legend count was misread may round to half or twice it)
    steps = [g[0] for g in got.values() if g is not None]
    common = max(set(steps), key=steps.count) if steps else None
    for c in charts:  # (no ticks read on any chart: the default, assumed and said)
        if c.interval_source == "default" and glyph_w > 0:
            _assume_default(c, glyph_w)
            got[id(c)] = (DEFAULT_INTERVAL_S, max(2, len(c.series)))
            timed.append(c)
    for c in timed:
        if got[id(c)] is None or not cell_h:
            continue
        step, n_series = got[id(c)]
        if step != common and c.interval_source != "default":
            n_fit = common / (c.seconds_per_px * glyph_w)
            if abs(n_fit - round(n_fit)) > 0.1 * n_fit or not 1 <= round(n_fit) <= 4:
                continue
            step, n_series = common, round(n_fit)
        c.interval_s = step
        width = step / c.seconds_per_px
        xs = np.arange(c.box[0], c.box[2] + 1)
        # the cell a stroke or a crossing's '+' fills (nvtop draws a whole text cell)
        guard = 2.0 + (glyph_w / 2 if n_series > 1 else 0.0)
        shared: dict[tuple, list[float]] = {}
        for s in c.series:
            if len(s.values) != len(xs):
                continue
            key = tuple(s.colour)
            if key not in shared:
                shared[key] = _strokes(a, s.colour, c.box, cell_h, c.legend_boxes)
            vals = _sample_values(s.values, xs, shared[key], width, guard)
            if vals:
                k = np.arange(len(vals))
                ages = c.newest_s_ago + (k[::-1] if c.newest_right else k) * step
                s.values, s.seconds_ago = np.asarray(vals), ages.astype(float)
        c.notes.append(f"read as nvtop's samples: one every {step:g} s (the update interval: "
                       f"{n_series} series interleaved, each sample {width:.1f} px), "
                       f"cut at the lines' vertical strokes; ages on nvtop's own clock "
                       f"(samples x interval): on real GPUs each refresh comes about "
                       f"{1000 * REFRESH_LATE_S:.0f} ms late, so ages may read up to "
                       f"{100 * REFRESH_LATE_S / step:.0f} % young")
