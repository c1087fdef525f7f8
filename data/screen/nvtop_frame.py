"""An nvtop chart's box and axes in the picture's pixels: the background and the frame's
ink, the 100 % and 0 % rows (``_scale_rows``), the plot's right end, and the time ticks
under it read into seconds per pixel (``_tick_words``, ``_time_scale``)."""

from __future__ import annotations

import re

import numpy as np

from tealeaves.data.screen.nvtop_chart import _GPU_WORD, DEFAULT_INTERVAL_S, TICK_OCR_CONFIG


def _background(a: np.ndarray) -> float:
    """The picture's background brightness (0-255): the median of a sparse pixel grid."""
    return float(np.median(a[::8, ::8, :].mean(axis=2)))


def _frame_ink(px: np.ndarray, bg: float) -> np.ndarray:
    """Which pixels of ``px`` (rows, cols, RGB) look like nvtop's box lines: grey (channels
    within 30) and set off from the background ``bg`` by more than 60 (light lines on a dark
    screen, dark ones on a white one)."""
    return (np.abs(px - px.mean(axis=-1, keepdims=True)).max(axis=-1) < 30) & \
        (np.abs(px.mean(axis=-1) - bg) > 60)


def _grey_rows(a: np.ndarray, x0: int, x1: int, r0: int, r1: int, bg: float) -> np.ndarray:
    """The rows in ``[r0, r1)`` that are mostly (over half of ``x0..x1``) grey frame ink."""
    r0, r1 = max(0, r0), min(a.shape[0], r1)
    if r1 <= r0 or x1 <= x0:
        return np.array([], dtype=int)
    grey = _frame_ink(a[r0:r1, x0:x1, :], bg)
    return r0 + np.flatnonzero(grey.mean(axis=1) > 0.5)


def _scale_rows(a, ticks, x_left, x_right, y100, y0, bg, words=()
                ) -> tuple[float, float, int]:
    """The pixel rows of 100 % and 0 %.  nvtop draws 100 on the plot's top text row and 0 on
    its bottom row, but puts the 75/50/25 labels on rounded rows (on a 12-row plot, rows 3,
    6, 9 of 0-11): a line fitted through them misplaces 0 by up to a row.  So the read 100
    and 0 ticks are taken as they are; a missing one is placed one text row inside the box's
    frame (the top and bottom border lines, a row above 100 and below 0), the row's height
    being the read tick's distance from its border; with neither, the first legend (written
    on the 100 row) stands for the 100 tick; without any of these, the fit stays.  The third
    value says which (``Chart.scale_from``: 3, 2, 1, 0)."""
    vals = {t[0]: t[1] for t in ticks}
    span = y0 - y100
    tops = _grey_rows(a, x_left, x_right, int(y100 - 0.25 * span), int(y100) - 1, bg)
    bots = _grey_rows(a, x_left, x_right, int(y0 - 0.1 * span), int(y0 + 0.25 * span), bg)
    top = float(tops[-1]) if len(tops) else None
    # the border nearest the fitted 0 (the next chart's top border may lie a row further);
    # the box's left side ends on it: a grey line at 0 % (a monochrome screen's) is not it
    end = _side_end(a, x_left, int(y0 - 0.1 * span), int(y0 + 0.25 * span), bg)
    if end is not None and len(bots):
        at_end = [r for r in bots if abs(r - end) <= 3]
        bots = np.asarray(at_end) if at_end else bots
    bot = float(min(bots, key=lambda r: abs(r - y0))) if len(bots) else None
    if 100.0 in vals and 0.0 in vals:
        return vals[100.0], vals[0.0], 3
    if 100.0 in vals and top is not None and bot is not None and vals[100.0] > top:
        return vals[100.0], bot - (vals[100.0] - top), 2
    if 0.0 in vals and top is not None and bot is not None and bot > vals[0.0]:
        return top + (bot - vals[0.0]), vals[0.0], 2
    if top is not None and bot is not None and words:
        # neither read: the first legend ("GPU0 %") is written on the 100 row
        legend = [w.top + w.height / 2 for w in words
                  if re.search(_GPU_WORD, w.text) and x_left - 40 <= w.left <= x_right
                  and top < w.top + w.height / 2 < top + 0.3 * (bot - top)]
        if legend:
            first = min(legend)
            return first, bot - (first - top), 1
    return y100, y0, 0


def _side_end(a: np.ndarray, x_left: int, r0: int, r1: int, bg: float) -> int | None:
    """The row where the box's left side (the frame column just left of the plot, ``x_left``)
    ends, searched down from ``r0`` to ``r1``; None when no frame column is there."""
    r0, r1 = max(0, r0), min(a.shape[0], r1)
    c0 = max(0, x_left - 5)
    if r1 <= r0 or c0 >= x_left:
        return None
    side = _frame_ink(a[r0:r1, c0:x_left, :], bg)
    col = int(np.argmax(side.sum(axis=0)))
    inked = np.flatnonzero(side[:, col])
    if not len(inked) or inked[0] > 3:
        return None
    # (a terminal draws the side cell by cell: a faint row between cells is no end)
    breaks = np.flatnonzero(np.diff(inked) > 4)
    return r0 + int(inked[breaks[0]] if len(breaks) else inked[-1])


def _top_border_end(a: np.ndarray, x_left: int, y100: float, ticks, bg: float) -> int | None:
    """The x where a chart's top border ends: in the rows just above its 100 tick, the longest
    run of grey frame pixels from ``x_left`` (gaps of up to 6 px bridged: the box line may be
    drawn dashed); None when no such run of 40 px or more is found."""
    th = max(6.0, (ticks[-1][1] - ticks[0][1]) / 8.0)  # about one text row
    best = None
    for r in range(max(0, int(y100 - 2.0 * th)), max(0, int(y100 - 1))):
        grey = _frame_ink(a[r:r + 1, max(0, x_left - 6):, :], bg)[0]
        ink = np.flatnonzero(grey)
        if len(ink) < 10 or ink[0] > 12:
            continue
        gaps = np.flatnonzero(np.diff(ink) > 6)
        end = int(ink[gaps[0]] if len(gaps) else ink[-1]) + max(0, x_left - 6)
        if end - x_left >= 40 and (best is None or end > best):
            best = end
    return best


def _tick_words(a: np.ndarray, x_left: int, x_right: int, y0: float, words,
                nth: int = 0) -> list:
    """The words of the strip under the plot (the time ticks, ``77s``), read again on their
    own: the frame line they sit on erased (runs of ink longer than three glyphs), the strip
    enlarged and read by Tesseract as one line; ``nth`` > 0 takes the nth mostly-inked row
    after the first as the frame's (a monochrome line at 0 % runs just above it, as grey as
    the frame).  Falls back to ``words`` when Tesseract cannot be run."""
    from PIL import Image

    from tealeaves.data.screen.grid import Word, _undot_zeros

    # the frame's bottom line runs through the tick labels: the first row under the plot
    # that is mostly ink, then the glyph rows around it once the long runs are erased
    x_off = max(0, x_left - 1)
    below = a[int(y0) + 3:min(a.shape[0], int(y0) + 80), x_off:min(a.shape[1], x_right + 2)]
    if below.size == 0:
        return words
    lum = below.max(axis=2)
    ink = np.abs(lum - np.median(a[int(y0) - 40:int(y0), x_off:x_right].max(axis=2))) > 60
    # the frame is grey: a coloured series' line (a GPU at 0 %) right under the plot is not it
    greyish = (below.max(axis=2) - below.min(axis=2)) < 40
    full = np.flatnonzero((ink & greyish).mean(axis=1) > 0.5)
    starts = full[np.r_[True, np.diff(full) > 3]] if len(full) else full
    if len(starts) <= nth:
        return words
    frame_row = int(starts[nth])
    for r in range(ink.shape[0]):  # erase each row's long runs (the frame's line)
        row = ink[r]
        edges = np.flatnonzero(np.diff(np.r_[0, row.astype(int), 0]))
        for s0, s1 in zip(edges[::2], edges[1::2], strict=True):
            if s1 - s0 > 40:
                row[s0:s1] = False
    inked = ink.any(axis=1)
    b0 = b1 = frame_row
    while b0 > 0 and inked[b0 - 1]:
        b0 -= 1
    while b1 + 1 < len(inked) and inked[b1 + 1]:
        b1 += 1
    if b1 - b0 < 4:
        return words
    b0, b1 = max(0, b0 - 2), b1 + 3
    top = int(y0) + 3 + b0
    g = _undot_zeros(np.where(ink[b0:b1], 0, 255).astype(float)).astype(np.uint8)
    g = np.pad(g, 6, constant_values=255)
    top -= 6
    x_off -= 6
    scale = 3
    img = Image.fromarray(g).resize((g.shape[1] * scale, g.shape[0] * scale), Image.LANCZOS)
    try:
        import pytesseract

        d = pytesseract.image_to_data(img, config=TICK_OCR_CONFIG, timeout=30,
                                      output_type=pytesseract.Output.DICT)
    except (pytesseract.TesseractError, RuntimeError, OSError):  # no engine, its timeout
        return words
    return [Word(t, float(d["conf"][i]), x_off + d["left"][i] / scale,
                 top + d["top"][i] / scale, d["width"][i] / scale, d["height"][i] / scale,
                 (0, 0, 0))
            for i, t in enumerate(d["text"]) if t.strip()]


def _time_scale(words, x_left: int, x_right: int, y0: float
                ) -> tuple[float, str, bool, float]:
    """(seconds per pixel, ``"ticks"``/``"default"``, newest on the right, seconds before the
    newest sample at the plot's newest edge) from the ``Ns`` words just under the plot.  The
    last is 0 unless the ticks put the newest edge well before ``0s`` (a picture cropped
    through its charts: its edge is then that many seconds old, not the newest sample)."""
    ticks = []  # (seconds, x, which word): a word may stand for two readings
    for n, w in enumerate(words):
        if w.top < y0 or w.top > y0 + 4 * w.height:
            continue
        # a tick is always "<n>s"; Tesseract reads its "s" as "5" as often as not, so
        # "145s" may be "14s" with its "s" read twice: both readings are tried
        m = re.fullmatch(r"\W*(\d{1,4})\s*[s5]\W*", w.text)
        if m:
            x = w.left + w.width / 2
            ticks.append((float(m.group(1)), x, n))
            if len(m.group(1)) > 1 and m.group(1).endswith("5") and w.text.rstrip(
                    "|_-—").endswith("s"):
                ticks.append((float(m.group(1)[:-1]), x, n))
    if len({t[2] for t in ticks}) >= 2:
        # the slope (seconds per pixel) most pairs of ticks agree on: a misread tick (the
        # corner glued to "77s" read "7s") agrees with none
        pairs = [(t0, t1) for k, t0 in enumerate(ticks) for t1 in ticks[k + 1:]
                 if t0[2] != t1[2] and abs(t1[1] - t0[1]) > 1 and t1[0] != t0[0]]
        slopes = [(s1 - s0) / (x1 - x0) for (s0, x0, _a), (s1, x1, _b) in pairs]
        if slopes:
            support = [sum(abs(v - u) <= 0.15 * abs(u) for v in slopes) for u in slopes]
            best = int(np.argmax(support))
            if len({t[2] for t in ticks}) == 2 or support[best] >= 3:  # three ticks in a line
                agree = [v for v in slopes if abs(v - slopes[best]) <= 0.15 * abs(slopes[best])]
                k = float(np.median(agree))
                # the line through the ticks that agree with it: its age at the newest edge
                on = [t0 - k * x0 for t0, x0, n0 in ticks
                      if sum(abs((t1 - t0) / (x1 - x0) - k) <= 0.15 * abs(k)
                             for t1, x1, n1 in ticks
                             if n1 != n0 and abs(x1 - x0) > 1 and t1 != t0) >= 1]
                edge = x_right if k < 0 else x_left
                at_edge = k * edge + float(np.median(on)) if on else 0.0
                # "0s" is printed a glyph or two inside the edge: only a gap of a tenth of the
                # chart's span is a crop
                if at_edge < 0.1 * abs(k) * (x_right - x_left):
                    at_edge = 0.0
                return abs(k), "ticks", k < 0, at_edge
    return DEFAULT_INTERVAL_S / 8.0, "default", True, 0.0
