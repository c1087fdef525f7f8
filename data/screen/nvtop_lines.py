"""The lines of an nvtop chart in its pixels: the legends and their colours (``_legends``),
each colour's level per column (``_levels``), two lines of one colour followed apart
(``_two_lines``), and the columns a legend or another line hides (``_under_legends``,
``_hidden_under``)."""

from __future__ import annotations

import itertools
import re
import warnings

import numpy as np

from tealeaves.data.screen.nvtop_chart import _GPU_WORD, _LEGEND_END, ChartSeries
from tealeaves.data.screen.values import _n


def _under_legends(masked: np.ndarray, series: list[ChartSeries], boxes: list[tuple],
                   x_left: int, y100: int, y0: int, slope: float, icpt: float) -> int:
    """Fill, in place, the columns where a series' line runs under a legend's text (nvtop
    draws the legend over the plot's top rows, so a GPU at 95 % is hidden there): a step
    line that left the legend's rows would draw a vertical stroke outside them, seen in the
    picture (``masked``: the legends' boxes blanked), so where none of the series' colour
    is in those columns and the line enters the legend at a level inside the legend's rows,
    it held that level.  ``slope``/``icpt``: row = icpt + slope * value.  Returns the number
    of columns filled (over all series)."""
    filled = 0
    for s in series:
        n = len(s.values)
        cover = np.zeros(n, dtype=bool)
        rows = []
        for x0, t, x1, b in boxes:
            # (and 3 px either side: the glyphs' edges hide a column or two more)
            i0, i1 = max(0, int(x0) - 4 - x_left), min(n, int(x1) + 5 - x_left)
            if i1 > i0:
                cover[i0:i1] = True
                rows.append((t, b))
        if not rows:
            continue
        # the values the legends' rows stand for (a row's band of a glyph's height)
        top, bottom = min(r[0] for r in rows) - 2, max(r[1] for r in rows) + 2
        band_hi, band_lo = (top - icpt) / slope, (bottom - icpt) / slope
        gap = np.isnan(s.values) & cover
        edges = np.flatnonzero(np.diff(np.r_[0, gap.astype(int), 0]))
        colour = np.asarray(s.colour, dtype=float)
        for i0, i1 in zip(edges[::2], edges[1::2], strict=True):  # run i0..i1-1
            # the level the line has where it leaves the legend (the nearest column seen
            # within 12 px of either end: a glyph's edge may hide a few more)
            band = (band_lo - 3, band_hi + 3)
            before = _nearest_seen(s.values, range(i0 - 1, max(-1, i0 - 13), -1), band)
            after = _nearest_seen(s.values, range(i1, min(n, i1 + 12)), band)
            sides = [s.values[i] for i in (before, after) if i is not None
                     and band[0] <= s.values[i] <= band[1]]
            if not sides:
                continue
            if _stepped_at_edge(masked, colour, s.values, (before, after), x_left,
                                (top, bottom), (slope, icpt)):
                continue  # the line reached that side's level from the legend's rows
            left = s.values[before] if before is not None else None
            right = s.values[after] if after is not None else None
            i0 = before + 1 if before is not None else i0  # (the columns between are
            i1 = after if after is not None else i1  # checked for strokes too)
            r_top = max(0, y100 - 4)
            part = masked[r_top:y0 + 5, x_left + i0:x_left + i1].astype(float)
            ink = np.abs(part - colour).max(axis=2) < 60
            for o in series:  # (another line of the same colour, a monochrome screen's,
                if o is s or np.abs(np.subtract(o.colour, s.colour)).max() > 40:
                    continue  # is no stroke of this one where that one is seen)
                rows = icpt + slope * o.values[i0:i1]
                for j in np.flatnonzero(np.isfinite(rows)):
                    lo = max(0, int(rows[j]) - 3 - r_top)
                    ink[lo:int(rows[j]) + 4 - r_top, j] = False
            # (only ink outside the legends' rows tells the line left them: inside, a
            # glyph's edge or the line's own corner where it enters is no stroke)
            ink[max(0, int(top) - r_top):max(0, int(bottom) + 1 - r_top)] = False
            if ink.size and _longest_runs(ink).max() >= 3:  # (specks, a glyph's edge or the
                continue  # frame's tick dots, are not) a stroke: the line moved under it
            for i in range(i0, i1):
                near = left if right is None or (left is not None and i - i0 < i1 - i) \
                    else right
                s.values[i] = near if near is not None else sides[0]
            filled += i1 - i0
    return filled


def _stepped_at_edge(masked, colour, values, sides, x_left, rows, scale) -> bool:
    """Whether, beside a legend, the line's level on a side (``sides``: column indices, None
    where unseen) lies off the legends' ``rows`` (top, bottom px) and a stroke of ``colour``
    (3 px or more) joins it to them in that column (+-2 px): nvtop's corner column is the new
    level's first, so a line that stepped out of the legend's rows right at its edge shows
    its stroke there, and the level under the legend is not that side's.  ``scale``: (slope,
    intercept) with row = intercept + slope * value."""
    top, bottom = rows
    for c in sides:
        if c is None or not np.isfinite(values[c]):
            continue
        r = scale[1] + scale[0] * values[c]
        lo, hi = (int(bottom), int(r)) if r > bottom else (int(r), int(top))
        if hi - lo < 2:
            continue
        part = masked[max(0, lo):hi + 1, x_left + c - 2:x_left + c + 3].astype(float)
        ink = np.abs(part - np.asarray(colour, dtype=float)).max(axis=2) < 60
        if ink.size and _longest_runs(ink).max() >= 3:
            return True
    return False


def _longest_runs(ink: np.ndarray) -> np.ndarray:
    """Per column of ``ink`` (rows, columns) bool, the longest run of True down it."""
    rows = np.arange(ink.shape[0])[:, None]
    # the run ending at each row: the row less the last row without ink above it
    return (rows - np.maximum.accumulate(np.where(ink, -1, rows), axis=0)).max(axis=0)


def _nearest_seen(values: np.ndarray, span: range, band: tuple[float, float]) -> int | None:
    """The first index of ``span`` whose value is seen and inside ``band`` (lo, hi), else the
    first seen, else None: beside a legend, a column by a glyph's edge may read a level
    between the line's and the glyph's (picture 24)."""
    seen = [i for i in span if np.isfinite(values[i])]
    inside = [i for i in seen if band[0] <= values[i] <= band[1]]
    return (inside or seen or [None])[0]


def _hidden_under(series: list[ChartSeries], covered: np.ndarray) -> None:
    """Fill, in place, the columns where a line is not seen but every other line drawn
    there is at one level: nvtop draws the series one over another, so an unseen line lies
    under the one drawn (the mem% line hides a GPU% line at the same level).  Columns where
    no line is drawn, or several at different levels, or that a legend covers (``covered``:
    the line may be under the legend) stay NaN, and so does a series seen in fewer than
    ``HIDDEN_MIN_SEEN`` of the columns: a line seen nowhere is missing (recoloured, erased),
    not hidden, and the other line is no reading of it; ``hidden`` counts filled columns per
    series."""
    if len(series) < 2:
        return
    grid = np.vstack([s.values for s in series])
    for k, s in enumerate(series):
        if np.isfinite(s.values).mean() < HIDDEN_MIN_SEEN:
            continue
        others = np.delete(grid, k, axis=0)
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            lo, hi = np.nanmin(others, axis=0), np.nanmax(others, axis=0)
        one = np.isnan(s.values) & np.isfinite(lo) & (hi - lo < 1.0) & ~covered
        s.hidden = int(one.sum())
        s.values = np.where(one, lo, s.values)


#: ``_hidden_under``: a series seen in fewer than this share of its chart's columns is not
#: read off the line drawn over it.
HIDDEN_MIN_SEEN = 0.1


def _saturation(c) -> float:
    c = np.asarray(c, dtype=float)
    return float(c.max() - c.min())


def _legends(a, words, x_left, x_right, y100, y0, bg: float = 0.0, glyph_w: float | None = None
             ) -> list[tuple[str, np.ndarray, tuple]]:
    """``(legend, colour, box)`` of each legend word inside the plot (``GPU<n> %``, ``GPU<n>
    mem%``), its colour the median of its most saturated (else brightest) pixels, its box
    ``glyph_w`` px per character (``_glyph_width``).  A word whose colour is the background's (``bg``, brightness 0-255: OCR noise over a line, read
    "GPU?") is no legend."""
    out = []
    ws = sorted((w for w in words if w.left + w.width > x_left and w.left <= x_right
                 and y100 - w.height <= w.top <= y0), key=lambda w: (w.top, w.left))
    for w in ws:
        # "GPU0" as OCR reads it: "GPUO", "GpyQ", "PUO" (the G lost), "GPU" (the index lost)
        m = re.search(_GPU_WORD + r"[Oo0-9DQ]{0,2}", w.text)
        if not m or w.top > y100 + LEGEND_ROWS_SHARE * (y0 - y100):
            continue  # (nvtop writes its legends on the plot's top rows, one a series)
        # its "%"/"mem%": the next word to the right on its line, within two glyphs
        # (the page's glyph width: a word run on into the line has fewer letters than cells)
        cw = glyph_w or w.width / max(1, len(w.text))
        # (on its line: its box overlaps the word's rows; a word run on into the line's
        # dashes and underscores is taller, its centre lower, picture 37)
        after = [o for o in ws if o.top < w.top + 0.8 * w.height
                 and o.top + o.height > w.top + 0.2 * w.height
                 and w.left + w.width <= o.left <= w.left + w.width + 2.5 * cw]
        tail = min(after, key=lambda o: o.left).text if after else ""
        if m.group().lower().startswith("pu") and len(m.group()) < 3 and \
                not re.match(_LEGEND_END, tail, re.IGNORECASE):
            continue  # "PU" alone is noise; "PU mem%" a legend whose G the line ran into
        digits = re.sub("^" + _GPU_WORD, "", m.group())
        index = str(int(_n(digits))) if digits else "?"
        # a line drawn right after the legend is read into it ("GPU5 %—__—___"): the legend
        # is its first "%"/"mem%" and its box ends there
        rest = w.text[m.end():]
        cut = re.match(_LEGEND_END, rest, re.IGNORECASE)
        keep = m.end() + (cut.end() if cut else min(len(rest), 5))
        right = w.left + cw * keep
        if keep < len(w.text):
            rest = rest[:keep - m.end()]
            after, tail = [], ""
        elif after and len(tail) > 5:  # the "%" word ran on into the line
            t = re.match(_LEGEND_END, tail, re.IGNORECASE)
            keep_t = t.end() if t else 5
            o = min(after, key=lambda o: o.left)
            right = o.left + cw * keep_t
            tail, after = tail[:keep_t], []
        legend = f"GPU{index} {rest}{tail}".strip().strip("|")
        # the legend's own glyphs (a y tick or the frame read into the word is left out)
        left = w.left + cw * m.start()
        if m.start() and keep >= len(w.text):
            # a line run into the word's front ("———GPU0", picture 24): its few dashes
            # stand for many cells, so the legend starts its own glyphs before the end
            left = max(left, w.left + w.width - cw * (len(w.text) - m.start()))
            right = max(right, w.left + w.width)
        box = a[int(w.top):int(w.top + w.height), int(left):int(right)]
        px = box.reshape(-1, 3).astype(float)
        sat = px.max(axis=1) - px.min(axis=1)
        bright = px.max(axis=1)
        # (no colour: the glyphs are what is far from the ground, dark on a light one)
        far = np.abs(bright - bg)
        pick = px[sat >= np.percentile(sat, 90)] if sat.max() > 40 else \
            px[far >= np.percentile(far, 90)]
        colour = np.median(pick, axis=0)
        if abs(float(colour.max() if bg < 128 else colour.min()) - bg) < 80:
            continue  # no ink of its own: not a legend
        out.append((legend, colour,
                    (left, w.top, (after[0].left + after[0].width) if after else right,
                     w.top + w.height)))
    return out


#: ``_legends``: a legend word starts in this top share of the plot (nvtop writes one a series
#: on its top rows; text lower down is a line's OCR noise, "PU1 %" mid-plot).
LEGEND_ROWS_SHARE = 0.3


def _horizontal(a, colour, x0, x1, y0, y1) -> tuple[np.ndarray, int]:
    """Which pixels of rows ``y0..y1`` (clipped to the picture: a chart cropped by its edge)
    and columns ``x0..x1`` are near ``colour`` (within 60 per channel) with another such
    pixel within 3 px left or right (where two lines share a level nvtop's cells alternate
    them, drawing the line dashed in either colour): ``(rows, columns)`` bool and the first
    row's y."""
    y0, y1 = max(0, y0), min(a.shape[0] - 1, y1)
    part = a[y0:y1 + 1, x0 - 3:x1 + 4].astype(float)
    near = np.abs(part - np.asarray(colour, dtype=float)).max(axis=2) < 60
    w = near.shape[1] - 6
    side = np.zeros((near.shape[0], w), dtype=bool)
    for d in (1, 2, 3):
        side |= near[:, 3 - d:3 - d + w] | near[:, 3 + d:3 + d + w]
    return near[:, 3:3 + w] & side, y0


def _run_rows(a, colour, x0, x1, y0, y1) -> list[list[float]]:
    """Per pixel column of ``x0..x1`` the rows (y pixels) of each horizontal stroke of
    ``colour``: pixels of the colour with one within 3 px left or right, rows within 3 px of
    each other taken as one stroke (its mean row)."""
    horiz, y0 = _horizontal(a, colour, x0, x1, y0, y1)
    out = []
    for k in range(horiz.shape[1]):
        rows = np.flatnonzero(horiz[:, k]) + y0
        strokes: list[list[int]] = []
        for r in rows:
            if strokes and r - strokes[-1][-1] <= 3:
                strokes[-1].append(int(r))
            else:
                strokes.append([int(r)])
        out.append([float(np.mean(st)) for st in strokes])
    return out


def _two_lines(a, colour, x0, x1, y0, y1, covered=None) -> tuple[np.ndarray, np.ndarray]:
    """A monochrome chart's two lines told apart by following each (rows per pixel column
    of ``x0..x1``, NaN where unseen): from the right edge leftwards each column's strokes are
    given to the lines so that one line stays where it was (a step line changes one
    series at a time: of two pairings, the one whose smaller move is smaller), a single
    stroke goes to the nearer line (both where they met, or after 12 columns of one
    stroke: the lines run together, where a crossing hides one for a few; not in the
    ``covered`` columns, (n,) bool, where a
    legend's text may hide the other).  Line 0 is the upper one where first seen apart."""
    cols = _run_rows(a, colour, x0, x1, y0, y1)
    n = len(cols)
    out = np.full((2, n), np.nan)
    state: list[float | None] = [None, None]
    alone = 0  # columns in a row with one stroke
    for k in range(n - 1, -1, -1):  # newest (right) first; the order only seeds the lines
        rows = cols[k]
        if not rows:
            continue
        if state[0] is None:  # not yet seen apart: one stroke is both lines
            if len(rows) >= 2:
                state = [min(rows), max(rows)]
            out[:, k] = state if len(rows) >= 2 else rows[0]
            continue
        if len(rows) >= 2:
            alone = 0
            best = None
            for p, q in itertools.permutations(rows, 2):
                moves = sorted((abs(p - state[0]), abs(q - state[1])))
                if best is None or moves < best[0]:
                    best = (moves, p, q)
            state = [best[1], best[2]]
            out[:, k] = state
            continue
        r = rows[0]
        alone += 1
        near = 0 if abs(r - state[0]) <= abs(r - state[1]) else 1
        out[near, k] = r
        hidden = covered is not None and covered[k]
        if abs(r - state[1 - near]) <= 3 or (alone >= 12 and not hidden):
            state = [r, r]  # the lines run together
            out[1 - near, k] = r
        elif abs(r - state[near]) <= 3:
            state[near] = r
        # (else a column of a step's vertical stroke: which line moved is told by the
        # next column where both are seen, so the lines are not moved yet)
    return out[0], out[1]


def _levels(a, colour, x0, x1, y0, y1) -> np.ndarray:
    """Per pixel column of ``x0..x1`` the mean row of the pixels near ``colour`` that lie on
    a horizontal run (a pixel of the colour within 3 px left or right), NaN where none."""
    horiz, y0 = _horizontal(a, colour, x0, x1, y0, y1)
    rows = np.arange(y0, y0 + horiz.shape[0], dtype=float)[:, None]
    n = horiz.sum(axis=0)
    with np.errstate(invalid="ignore"):
        return np.where(n > 0, (horiz * rows).sum(axis=0) / np.maximum(n, 1), np.nan)
