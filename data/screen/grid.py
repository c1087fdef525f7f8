"""A terminal screenshot as its character grid, read again cell by cell.

A terminal draws every character in a cell of the same size, so a screenshot of one is a grid:
find its pitch and phase, cut each cell out, and classify it against the glyphs of the same
picture.  Tesseract (``data.screen.read``) reads most of a terminal well but fails on a few
glyphs in a systematic way (a dotted zero, a thin ``7``, a pale yellow digit on white) and on
its own line and word finding; the grid reader learns each glyph's look *from the words
Tesseract read confidently in this picture* (same font, same size, same rendering) and then
reads every cell, including those Tesseract lost.  Nothing about a font is built in.

Steps (:func:`read_grid`):

1. ``ink``: each pixel's distance from the background colour (the most common colour), 0-1;
   coloured text on any ground is ink.  A picture with no dominant background colour (a
   photo) has no grid.
2. ``fit_grid``: the column pitch from the confident words (their ink width grows by one
   pitch per character: a least-squares line of width on length), the row pitch from the
   spacing of their lines; both refined, with the phase, on the ink's column and row profiles
   (the peak of their Fourier magnitude near the first estimate).
3. ``cells``: each cell's ink sampled on a ``CELL_H`` x ``CELL_W`` raster after a blur of half
   a sample (a cell off by a pixel still matches).
4. ``train``: the mean look of each character that confident words put in a cell; a sample
   nearer another character's mean than its own is dropped (Tesseract's rare confident
   mistake).
5. ``transcribe``: each inked cell is the character whose mean it is nearest (cosine), when
   at least ``MIN_SIMILARITY`` and ahead of the runner-up; else Tesseract's character of that
   cell, else ``?``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Samples per cell (rows x columns) a glyph is compared on.
CELL_H, CELL_W = 16, 10
#: Lowest Tesseract confidence (0-100) of a word whose characters teach the glyphs.
TEACH_CONF = 80.0
#: Lowest Tesseract confidence (0-100) of a word whose character stands for a cell no
#: glyph matches (below it the cell is ``?``: ``98%`` read as ``987`` at 40 is no reading).
TESS_FALLBACK_CONF = 60.0
#: Lowest cosine similarity of a cell to a glyph's mean for the cell to be read as it ...
MIN_SIMILARITY = 0.80
#: ... and by how much it must beat the next glyph's.
MIN_MARGIN = 0.02
#: Cosine similarity of two glyphs' means at which they are one glyph, when they are a pair
#: terminal fonts draw alike (``LOOKALIKES``: a slashed zero read as ``Q``).
SAME_GLYPH = 0.97
LOOKALIKES = frozenset({"0O", "0Q", "0D", "0o", "1l", "1I", "1|", "Il", "l|", "I|", "OQ"})
#: In a number, a cell is read as the nearest number glyph when the nearest glyph of all is
#: at most this much nearer (a thin ``1`` a shade nearer ``H``; an ``i`` of ``MiB`` is far
#: nearer ``i`` than ``1`` and stays).
DIGIT_LEAD = 0.06
#: A cell whose glyph leads the runner-up by this much cosine similarity is sure (1).
MARGIN_SURE = 0.05
#: Highest confidence of a cell read as an ambiguous glyph (``train``).
AMBIGUOUS_SURE = 0.2
#: Confidence of a cell read as Tesseract read it (no glyph matched it well).
FALLBACK_SURE = 0.3
#: Share of the picture the background colour must cover for it to be a screen grab.
MIN_BACKGROUND = 0.35
#: A cell with less ink than this share of its area is blank.
BLANK_INK = 0.008


@dataclass(frozen=True)
class Word:
    """One word Tesseract read: its text, confidence (0-100) and box in the picture's own
    pixels (``left``, ``top``, ``width``, ``height``), and the line it belongs to."""

    text: str
    conf: float
    left: float
    top: float
    width: float
    height: float
    line: tuple


@dataclass(frozen=True)
class Grid:
    """The character grid: the top-left corner of cell (0, 0) at (``x0``, ``y0``) px, cells
    ``px`` wide and ``py`` tall (fractional for a scaled picture), ``rows`` x ``cols``."""

    x0: float
    y0: float
    px: float
    py: float
    rows: int
    cols: int

    def cell_of(self, x: float, y: float) -> tuple[int, int]:
        """The (row, column) of the cell holding pixel (x, y)."""
        return int(np.floor((y - self.y0) / self.py)), int(np.floor((x - self.x0) / self.px))


def _undot_zeros(g: np.ndarray) -> np.ndarray:
    """``g`` (dark text on light, 0-255) without the dot or slash inside a zero: terminal
    fonts (DejaVu Sans Mono, Liberation Mono) dot their zeros, and Tesseract reads a dotted
    zero as ``4)``, ``@`` or ``®``.  A small stroke wholly inside the hole of another glyph is
    such a dot; a decimal point or a colon is inside no hole and stays."""
    from scipy import ndimage

    mask = g < 128
    labels, n = ndimage.label(mask)
    if n < 3:
        return g
    sizes = np.bincount(labels.ravel())[1:]
    small_ids = np.flatnonzero(sizes < 0.3 * np.median(sizes)) + 1
    if not len(small_ids):
        return g
    small = np.isin(labels, small_ids)
    holes = ndimage.binary_fill_holes(mask & ~small) & ~(mask & ~small)
    inside = ndimage.sum(holes, labels, small_ids) == sizes[small_ids - 1]
    drop = np.isin(labels, small_ids[inside])
    return np.where(drop, 255.0, g)


def ink(img) -> np.ndarray | None:
    """Each pixel's ink, 0-1: its largest channel distance from the background colour (the
    most common colour), scaled so the strongest text is 1.  None when no colour covers
    ``MIN_BACKGROUND`` of the picture (a photo, not a screen grab).  Shape (height, width)."""
    a = np.asarray(img.convert("RGB"), dtype=np.int32)
    code = (a[..., 0] << 16) | (a[..., 1] << 8) | a[..., 2]
    values, counts = np.unique(code, return_counts=True)
    top = int(np.argmax(counts))
    if counts[top] < MIN_BACKGROUND * code.size:
        return None
    bg = np.array([(values[top] >> s) & 255 for s in (16, 8, 0)], dtype=np.int32)
    d = np.abs(a - bg).max(axis=2).astype(np.float32)
    strong = d[d > 40]
    if strong.size == 0:
        return None
    return np.clip(d / max(np.percentile(strong, 90), 1.0), 0.0, 1.0)


def _refine(profile: np.ndarray, p0: float) -> tuple[float, float]:
    """The period near ``p0`` (within 8 %) whose Fourier magnitude in ``profile`` is largest,
    and the position of the profile's peaks for it (px, modulo the period)."""
    x = np.arange(len(profile), dtype=np.float64)
    prof = profile - profile.mean()
    periods = np.arange(0.92 * p0, 1.08 * p0, 0.0005 * p0)
    whole = np.round(periods)
    periods = np.unique(np.concatenate([periods, whole[np.abs(periods - whole) < 0.02 * p0]]))
    spectrum = np.exp(-2j * np.pi * np.outer(1.0 / periods, x)) @ prof
    mag = np.abs(spectrum)
    k = int(np.argmax(mag))
    # an unscaled screenshot's cells are whole pixels: a whole period within 0.6 % of the
    # peak and 70 % as strong is the one (a few lines of text make a broad peak: 9.975 px
    # for 10 drifts a quarter cell over a 121-column row)
    near = np.flatnonzero((periods == np.round(periods)) &
                          (np.abs(periods - periods[k]) <= 0.006 * periods[k]) &
                          (mag >= 0.7 * mag[k]))
    if len(near):
        k = int(near[np.argmax(mag[near])])
    p = float(periods[k])
    return p, float((-np.angle(spectrum[k]) * p / (2 * np.pi)) % p)


def fit_grid(ink_img: np.ndarray, words: list[Word]) -> Grid | None:
    """The grid of a terminal screenshot (see the module's steps), or None when the words
    read confidently are too few to measure it (fewer than 8, or on one line)."""
    sure = [w for w in words if w.conf >= TEACH_CONF and len(w.text) >= 1
            and w.width > 0 and w.height > 0]
    if len(sure) < 8:
        return None
    n = np.array([len(w.text) for w in sure], dtype=np.float64)
    width = np.array([w.width for w in sure], dtype=np.float64)
    if np.ptp(n) < 2:
        return None
    px0 = float(np.polyfit(n, width, 1)[0])
    centres: dict[tuple, list[float]] = {}
    for w in sure:
        centres.setdefault(w.line, []).append(w.top + w.height / 2)
    ys = np.sort([np.median(v) for v in centres.values()])
    h = float(np.median([w.height for w in sure]))
    gaps = np.diff(ys)
    gaps = gaps[(gaps > 0.9 * h) & (gaps < 3.0 * h)]
    if len(ys) < 2 or not len(gaps) or not 2 <= px0 <= 200:
        return None
    py0 = float(gaps[gaps <= 1.3 * gaps.min()].mean())
    px, cx = _refine(ink_img.mean(axis=0), px0)
    py, cy = _refine(ink_img.mean(axis=1), py0)
    x0, y0 = (cx - px / 2) % px, (cy - py / 2) % py
    rows = int((ink_img.shape[0] - y0) // py)
    cols = int((ink_img.shape[1] - x0) // px)
    if rows < 1 or cols < 1:
        return None
    return Grid(x0, y0, px, py, rows, cols)


def cells(ink_img: np.ndarray, grid: Grid) -> np.ndarray:
    """Every cell's ink on a ``CELL_H`` x ``CELL_W`` raster: shape (rows, cols, CELL_H *
    CELL_W), each sample the ink blurred over half a sample's spacing."""
    from scipy import ndimage

    sy, sx = grid.py / CELL_H, grid.px / CELL_W
    blurred = ndimage.gaussian_filter(ink_img, (0.5 * sy, 0.5 * sx))
    ys = grid.y0 + (np.arange(grid.rows)[:, None] + (np.arange(CELL_H)[None, :] + 0.5)
                    / CELL_H) * grid.py
    xs = grid.x0 + (np.arange(grid.cols)[:, None] + (np.arange(CELL_W)[None, :] + 0.5)
                    / CELL_W) * grid.px
    yy = np.broadcast_to(ys[:, None, :, None], (grid.rows, grid.cols, CELL_H, CELL_W))
    xx = np.broadcast_to(xs[None, :, None, :], (grid.rows, grid.cols, CELL_H, CELL_W))
    out = ndimage.map_coordinates(blurred, [yy.ravel(), xx.ravel()], order=1, mode="constant")
    return out.reshape(grid.rows, grid.cols, CELL_H * CELL_W).astype(np.float32)


def _unit(v: np.ndarray) -> np.ndarray:
    v = v - v.mean(axis=-1, keepdims=True)
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-6)


def word_cells(grid: Grid, w: Word) -> list[tuple[int, int]] | None:
    """The cells of a word's characters, or None when its box does not span exactly one cell
    per character (a word Tesseract split or merged)."""
    i, j0 = grid.cell_of(w.left + 0.1 * grid.px, w.top + w.height / 2)
    _, j1 = grid.cell_of(w.left + w.width - 0.1 * grid.px, w.top + w.height / 2)
    if j1 - j0 + 1 != len(w.text) or not 0 <= i < grid.rows or j0 < 0 or j1 >= grid.cols:
        return None
    return [(i, j) for j in range(j0, j1 + 1)]


def train(grid: Grid, vectors: np.ndarray,
          words: list[Word]) -> tuple[list[str], np.ndarray, frozenset[str]]:
    """The glyphs taught by the confident words: their characters (one per look: a glyph
    drawn bold and plain is listed twice), unit mean looks (shape (looks, CELL_H * CELL_W))
    and the ambiguous ones: every digit when no word taught a
    ``0`` (every monitor prints zeros: at half size Tesseract reads them as ``8``); a cell
    read as one is doubtful."""
    samples: dict[str, list[np.ndarray]] = {}
    for w in words:
        if w.conf < TEACH_CONF:
            continue
        where = word_cells(grid, w)
        for ch, (i, j) in zip(w.text, where or (), strict=False):
            v = vectors[i, j]
            if v.sum() > BLANK_INK * v.size:
                samples.setdefault(ch, []).append(v)
    if not samples:
        return [], np.zeros((0, CELL_H * CELL_W), np.float32), frozenset()
    chars = sorted(samples)
    means = _unit(np.stack([np.mean(samples[c], axis=0) for c in chars]))
    # two "glyphs" that look the same are one, named as most samples name it (a slashed
    # zero some words read as Q or O)
    same = means @ means.T
    for a, b in sorted(zip(*np.nonzero(np.triu(same >= SAME_GLYPH, 1))),
                       key=lambda ab: -same[ab]):
        ca, cb = chars[a], chars[b]
        if ca in samples and cb in samples and (ca + cb in LOOKALIKES or cb + ca in LOOKALIKES):
            keep, gone = (ca, cb) if len(samples[ca]) >= len(samples[cb]) else (cb, ca)
            samples[keep].extend(samples.pop(gone))
    chars = sorted(samples)
    means = _unit(np.stack([np.mean(samples[c], axis=0) for c in chars]))
    # drop samples nearer another glyph than their own, then average again; a glyph drawn
    # two ways (bold and plain: gpustat's busy GPUs) keeps both looks
    looks, kept = [], []
    for k, c in enumerate(chars):
        s = _unit(np.stack(samples[c]))
        best = np.argmax(s @ means.T, axis=1)
        good = s[best == k]
        for m in _looks(good) if len(good) else [means[k]]:
            looks.append(c)
            kept.append(m)
    ambiguous = frozenset(c for c in chars if c.isdigit()) if "0" not in chars else frozenset()
    return looks, np.stack(kept), ambiguous  # (every monitor prints zeros: none read, no
    # digit is sure)


#: Cosine similarity under which two groups of one glyph's samples are two looks of it.
TWO_LOOKS = 0.95


def _looks(s: np.ndarray) -> list[np.ndarray]:
    """The unit mean look(s) of one glyph's unit samples ``s`` (n, d): two when 2-means
    splits them into groups of at least 2 samples and 10 % each whose centres are under
    ``TWO_LOOKS`` alike (a digit bold and plain), else one."""
    one = [_unit(s.mean(axis=0))]
    if len(s) < 4:
        return one
    c = np.stack([s[0], s[int(np.argmin(s @ s[0]))]])
    for _ in range(8):
        lab = np.argmax(s @ c.T, axis=1)
        if lab.min() == lab.max():
            return one
        c = _unit(np.stack([s[lab == 0].mean(axis=0), s[lab == 1].mean(axis=0)]))
    n1 = int(lab.sum())
    if min(n1, len(s) - n1) < max(2, 0.1 * len(s)) or float(c[0] @ c[1]) >= TWO_LOOKS:
        return one
    return [c[0], c[1]]


def transcribe(grid: Grid, vectors: np.ndarray, chars: list[str], means: np.ndarray,
               words: list[Word], size: tuple[int, int],
               ambiguous: frozenset[str] = frozenset()) -> list[tuple]:
    """Each grid row as text, one character per cell, with the lowest confidence of its
    number cells (0-1, ``cell_confidence``), the box of its inked cells (fractions of ``size``, the picture's
    width and height; None for a blank row) and each character's confidence; a cell no glyph
    matches well takes Tesseract's character there, else ``?``."""
    tess: dict[tuple[int, int], str] = {}
    for w in words:
        if w.conf < TESS_FALLBACK_CONF:
            continue  # a doubtful word's character is no better than "?"
        for ch, cell in zip(w.text, word_cells(grid, w) or (), strict=False):
            tess[cell] = ch
    inked = vectors.sum(axis=2) > BLANK_INK * vectors.shape[2]
    if not len(chars):
        return [("".join(tess.get((i, j), "?") if inked[i, j] else " "
                         for j in range(grid.cols)).rstrip(), 0.0, None, None)
                for i in range(grid.rows)]
    by_look = _unit(vectors) @ means.T
    # a glyph's similarity is its nearest look's
    names = sorted(set(chars))
    sims = np.full(by_look.shape[:2] + (len(names),), -2.0, dtype=np.float32)
    for k, c in enumerate(chars):
        u = names.index(c)
        sims[..., u] = np.maximum(sims[..., u], by_look[..., k])
    chars = names
    digits = np.array([c in NUMBER_GLYPHS for c in chars])
    out = []
    for i in range(grid.rows):
        line = [" "] * grid.cols
        score = np.ones(grid.cols)
        for j in np.flatnonzero(inked[i]):
            line[j], score[j] = _pick(sims[i, j], chars, None, tess.get((i, j), "?"))
            if line[j] in ambiguous:
                score[j] = min(score[j], AMBIGUOUS_SURE)
        # a run holding a digit is a number: its cells are read among the number glyphs
        # (a thin 1 nearer an H or a | than any digit in the whole alphabet is a 1 here)
        numbers = [run for run in _runs(inked[i]) if any(line[j].isdigit() for j in run)]
        for run in numbers if digits.any() else ():
            for j in run:
                if j == run[-1] and line[j] in UNIT_GLYPHS:
                    continue  # the number's unit (``98%``, ``700W``), not a digit
                if sims[i, j][digits].max() >= sims[i, j].max() - DIGIT_LEAD:
                    d = np.sort(np.where(digits, sims[i, j], -2.0))[::-1]
                    k = int(np.argmax(np.where(digits, sims[i, j], -2.0)))
                    line[j] = chars[k]
                    score[j] = cell_confidence(float(d[0]), float(d[1]) if len(d) > 1
                                               else -1.0)
                    if chars[k] in ambiguous:
                        score[j] = min(score[j], AMBIGUOUS_SURE)
        # the line's confidence is its numbers' (a frame or a name says nothing of them)
        sure = score[np.concatenate(numbers)] if numbers else score
        cols = np.flatnonzero(inked[i])
        box = None if not len(cols) else (
            (grid.x0 + cols[0] * grid.px) / size[0], (grid.y0 + i * grid.py) / size[1],
            (grid.x0 + (cols[-1] + 1) * grid.px) / size[0],
            (grid.y0 + (i + 1) * grid.py) / size[1])
        text = "".join(line).rstrip()
        out.append((text, float(sure.min()), box, [float(x) for x in score[:len(text)]]))
    return out


#: The units a number ends with on a monitor's screen (never read as a digit there).
UNIT_GLYPHS = frozenset("%WCBb°")
#: The glyphs a number is written with (a run of cells holding a digit is read among these).
NUMBER_GLYPHS = frozenset("0123456789.,:/%")


def cell_confidence(s1: float, s2: float) -> float:
    """How sure a cell's reading is, 0-1, from its similarity to the glyph read (``s1``) and
    to the runner-up (``s2``): the lower of how far ``s1`` is above ``MIN_SIMILARITY`` (a
    glyph drawn as taught is near 1) and how far it leads (``MARGIN_SURE`` or more: sure).
    A ``0`` half the size it was taught at, nearer an ``8`` than anything, scores low."""
    near = (s1 - MIN_SIMILARITY) / (1.0 - MIN_SIMILARITY)
    return float(np.clip(min(near, (s1 - s2) / MARGIN_SURE), 0.0, 1.0))


def _pick(sim: np.ndarray, chars: list[str], allowed: np.ndarray | None,
          fallback: str) -> tuple[str, float]:
    """The glyph a cell is (``sim``: its similarity to each glyph), among ``allowed`` ones,
    and its confidence (``cell_confidence``); ``fallback`` (confidence ``FALLBACK_SURE``) when
    no glyph is near enough or clearly ahead."""
    s = np.where(allowed, sim, -2.0) if allowed is not None else sim
    order = np.argsort(s)[::-1]
    s1 = float(s[order[0]])
    s2 = float(s[order[1]]) if len(order) > 1 else -1.0
    if s1 >= MIN_SIMILARITY and s1 - s2 >= MIN_MARGIN:
        return chars[order[0]], cell_confidence(s1, s2)
    return fallback, FALLBACK_SURE if fallback != "?" else 0.0


def _runs(inked: np.ndarray) -> list[np.ndarray]:
    """The runs of inked cells of one row (words), as arrays of column indices."""
    cols = np.flatnonzero(inked)
    if not len(cols):
        return []
    return np.split(cols, np.flatnonzero(np.diff(cols) > 1) + 1)


def read_grid(img, words: list[Word]) -> list[tuple[str, float, tuple]] | None:
    """A terminal screenshot's rows read cell by cell (see the module's steps), as
    ``(text, confidence, box)`` (``transcribe``), or None when the picture has no grid (a photo, a picture
    with too little confident text to learn from)."""
    k = ink(img)
    if k is None:
        return None
    grid = fit_grid(k, words)
    if grid is None or grid.rows * grid.cols > 400_000:
        return None
    vectors = cells(k, grid)
    chars, means, ambiguous = train(grid, vectors, words)
    if len(chars) < 5:
        return None
    return transcribe(grid, vectors, chars, means, words, img.size, ambiguous)
