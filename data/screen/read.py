"""Read a screenshot of a GPU monitor: which tool it shows and each GPU's printed values.

Pictures of ``nvidia-smi`` (its default table), ``nvidia-smi dmon``, ``nvitop`` (its device
panel) and ``gpustat`` are read with Tesseract (Debian's ``tesseract-ocr``, through
``pytesseract``): the picture is made dark-on-light and enlarged (terminal text is 10-14 px
tall; Tesseract reads best at 20-30 px), read line by line with each word's confidence, and
the lines are parsed by the tool's own layout (``data.screen.tools``, which reads the tool's
text as printed too: ``parse_text``); the readings are made sound (``data.screen.reconcile``).

Values (``FIELDS``): ``util_pct`` (GPU-Util / sm %), ``power_w`` and ``power_limit_w``,
``mem_used_mib`` and ``mem_total_mib``, ``temp_c``.  Each comes with a confidence, 0-1: the
lowest Tesseract word confidence of its line.  A value not printed, or not read, is absent:
never a guess, never 0.

OCR confusions inside numbers are undone where a number must stand (``O``/``o``/``@``/``©``
for ``0``, ``l``/``I``/``|`` for ``1``, ``S`` for ``5``, ``B`` for ``8``); nothing else is
corrected.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

import numpy as np

from tealeaves.data.screen.grid import Word, _undot_zeros, read_grid
from tealeaves.data.screen.nvtop import read_charts
from tealeaves.data.screen.nvtop_chart import Chart
from tealeaves.data.screen.nvtop_names import name_lines
from tealeaves.data.screen.nvtop_samples import to_samples
from tealeaves.data.screen.reconcile import (
    _agree,
    _merge,
    _misfit,
    _plausible,
    _reindex,
    _renumber,
)
from tealeaves.data.screen.tools import _PARSERS, parse_lines, which_tool
from tealeaves.data.screen.values import (
    FIELDS,  # noqa: F401  (re-exported: the readers' units)
    GpuReading,
)

#: Scale factor applied before OCR (terminal glyphs of 10-14 px become 30-42 px).
OCR_SCALE = 4
#: Tesseract's settings: one block of text (``--psm 6``), and no glyph a monitor's numbers
#: never hold that a dotted or slashed zero is misread as (``@``, ``®``, ``©``, ``)``): the
#: engine then takes its next guess, ``0``.
OCR_CONFIG = "--psm 6 -c tessedit_char_blacklist=@®©()"
#: The most pixels the OCR reads (a 4K screen enlarged twice): a larger picture is enlarged
#: less, or not at all.
OCR_MAX_PIXELS = 4 * 3840 * 2160
#: The most pixels a picture is read at (a 5K screen); a larger one is read shrunk to it.
MAX_READ_PIXELS = 5120 * 2880
#: Seconds Tesseract may take on one picture before it is given up (a terminal screenshot
#: takes 1-4 s on one core; a photo of noise would take minutes).
OCR_TIMEOUT_S = 90.0
#: OpenMP threads Tesseract may use (``OMP_THREAD_LIMIT``), unless the environment already
#: says.  Its threads wait for each other in many small parallel loops: on a busy two-core
#: machine one picture took 15 s with the default threads and 3 s with one (Tesseract's
#: issues #898 and #3109 describe the same), and pictures read side by side (the scorer's
#: ``--jobs``) each want a core of their own.
OCR_THREADS = 1


class ScreenReadError(ValueError):
    """A picture that cannot be read at all (not an image, no OCR engine); names what."""


@dataclass
class PictureReading:
    """What a picture shows: ``tool`` (one of ``tools.TOOLS``, or None), ``gpus`` (in the order
    printed), the text read and ``notes`` (what was not read, and why)."""

    tool: str | None
    gpus: list[GpuReading]
    text: str = ""
    notes: list[str] = field(default_factory=list)
    #: nvtop's charts, digitised (``nvtop.read_charts``); empty for other tools.
    charts: list[Chart] = field(default_factory=list)
    #: the picture's ``(width, height)`` in pixels (None for text).
    size: tuple[int, int] | None = None
    #: two nvtop screens pasted into one picture (``_two_captures``): ``(name, box, reading)``
    #: each, the box in fractions of this picture; empty otherwise.
    captures: list = field(default_factory=list)


#: A word that is a number with its unit (``47°C,``, ``12923MiB``, ``90%,``), not a name
#: holding digits (``H200``, ``python3(12914M)``).
_NUMERIC_WORD = re.compile(r"[\[(]?\d[\d.,:/]*[%°]?[A-Za-z]{0,3}[\]),]?")

# -- pictures ------------------------------------------------------------------------------

def _prepare(img) -> tuple[object, float]:
    """Dark text on a light ground, enlarged ``OCR_SCALE`` times (less for a large picture),
    and the factor used: the brightest channel of each pixel (coloured text on a dark
    terminal reads as text), inverted when the ground is dark."""
    from PIL import Image

    a = np.asarray(img.convert("RGB"), dtype=np.float32)
    lum = a.max(axis=2)
    if np.median(lum) < 128:  # a dark terminal: text is what is bright
        g = 255.0 - np.clip(lum * 1.4, 0, 255)
    else:
        g = a.min(axis=2)
    g = _undot_zeros(g)
    out = Image.fromarray(g.astype(np.uint8))
    scale = max(1.0, min(OCR_SCALE, (OCR_MAX_PIXELS / (out.width * out.height)) ** 0.5))
    size = (round(out.width * scale), round(out.height * scale))
    big = out.resize(size, Image.LANCZOS)
    # handed to Tesseract as an uncompressed PGM (pytesseract writes the image's format):
    # compressing 20-30 M pixels as PNG took a second and a half
    big.format = "PPM"
    return big, size[0] / out.width


def ocr_words(img, scale: float = 1.0) -> list[Word]:
    """Tesseract's words of a prepared picture (``_prepare``), their boxes divided by
    ``scale`` (the picture's own pixels).  Tesseract runs once, on ``OCR_THREADS`` threads
    (``OMP_THREAD_LIMIT`` is set in this process's environment when it is not set).

    Raises:
        ScreenReadError: Tesseract is not installed.
    """
    import os

    import pytesseract

    # pytesseract starts Tesseract with this process's environment
    os.environ.setdefault("OMP_THREAD_LIMIT", str(OCR_THREADS))
    try:
        d = pytesseract.image_to_data(img, config=OCR_CONFIG, timeout=OCR_TIMEOUT_S,
                                      output_type=pytesseract.Output.DICT)
    except pytesseract.TesseractNotFoundError as exc:
        raise ScreenReadError("Tesseract is not installed: apt-get install tesseract-ocr") \
            from exc
    return [Word(w, float(d["conf"][i]), d["left"][i] / scale, d["top"][i] / scale,
                 d["width"][i] / scale, d["height"][i] / scale,
                 (d["block_num"][i], d["par_num"][i], d["line_num"][i]))
            for i, w in enumerate(d["text"]) if w.strip()]


def lines_of(words: list[Word], size: tuple[int, int] = (1, 1)) -> list[tuple[str, float, tuple]]:
    """The words' lines, left to right, each with the lowest confidence (0-1) of its number
    words (of all its words when it has none: a frame character's or a coloured name's
    confidence says nothing of the numbers) and its box in fractions of ``size`` (the
    picture's width and height, px)."""
    lines: dict[tuple, list[Word]] = {}
    for w in words:
        lines.setdefault(w.line, []).append(w)
    out = []
    for key in sorted(lines):
        ws = sorted(lines[key], key=lambda w: w.left)
        nums = [w.conf for w in ws if _NUMERIC_WORD.fullmatch(w.text)] or [w.conf for w in ws]
        box = (min(w.left for w in ws) / size[0], min(w.top for w in ws) / size[1],
               max(w.left + w.width for w in ws) / size[0],
               max(w.top + w.height for w in ws) / size[1])
        out.append((" ".join(w.text for w in ws), max(0.0, min(nums)) / 100.0, box))
    return out


def read_picture(data: bytes, name: str = "", graphs=None) -> PictureReading:
    """Read a screenshot's bytes (PNG or JPEG): the tool, each GPU's values, the text.

    The picture is checked as an upload is (``data.screen.screenshots.inspect_image``: size,
    format, pixels from the header before decoding); a large one is enlarged less, so the OCR never
    works on more than ``OCR_MAX_PIXELS``; Tesseract gives up after ``OCR_TIMEOUT_S``.
    Values a GPU cannot print (``_plausible``) are left out, not shown; GPU indices out of
    the order every tool prints them in are put back in it (``_renumber``), and a limit or a
    memory total unlike the other GPUs' is marked doubtful (``_agree``).  ``graphs`` reads
    the GPUs of a picture of tealeaves' own dashboard (``app.figures.read_back``: its
    geometry is the app's), given the picture and Tesseract's words.

    Raises:
        ScreenReadError: not a picture that can be read (names ``name``), or no OCR engine.
    """
    from PIL import Image

    from tealeaves.data.screen.screenshots import ScreenshotError, inspect_image

    try:
        inspect_image(data, name or "picture")
        img = Image.open(io.BytesIO(data))
        img.load()
    except ScreenshotError as exc:
        raise ScreenReadError(str(exc)) from None
    except (OSError, Image.DecompressionBombError) as exc:
        raise ScreenReadError(f"{name or 'picture'}: not a picture that can be read "
                              f"({type(exc).__name__})") from None
    if img.width * img.height > MAX_READ_PIXELS:  # a 64-Mpx blank would take gigabytes
        k = (MAX_READ_PIXELS / (img.width * img.height)) ** 0.5
        img = img.resize((max(1, round(img.width * k)), max(1, round(img.height * k))))
    two = _two_captures(img, name, graphs)
    if two is not None:
        return two
    return _read_image(img, name, graphs)


#: Two captures are told apart only where each band of background is at least this share of
#: the picture (a chart's own rows, a status bar, are shorter).
CAPTURE_MIN_SHARE = 0.25


def _two_captures(img, name: str, graphs) -> PictureReading | None:
    """Two screenshots pasted one above the other (as people paste "top" and "bottom"): the
    picture's rows fall into two long bands of different background colour (each at least
    ``CAPTURE_MIN_SHARE`` of the height; the background of a row is its median colour), and
    each band read on its own is nvtop.  Returns the reading with ``captures`` (each its own
    moment, its own verdict), or None when the picture is one screen.  Two captures on one
    background, or side by side, are not told apart (said nowhere: read as one screen)."""
    import numpy as np

    a = np.asarray(img.convert("RGB"), dtype=np.int16)[:, ::4]
    if a.shape[0] < 200:
        return None
    bg = np.median(a, axis=1)  # (rows, 3)
    # runs of one background; a short run (a frame line, a highlighted row, the gap between
    # the two) belongs to the run before it
    runs: list[list] = []
    for y, c in enumerate(bg):
        if runs and np.abs(runs[-1][2] - c).max() <= 60:
            runs[-1][1] = y + 1
        else:
            runs.append([y, y + 1, c])
    short = 0.03 * len(bg)
    merged: list[list] = []
    for r in runs:
        if merged and (r[1] - r[0] < short or np.abs(merged[-1][2] - r[2]).max() <= 60):
            merged[-1][1] = r[1]
        else:
            merged.append(list(r))
    merged = [r for r in merged if r[1] - r[0] >= short]  # a first row of its own
    bands = [(r[0], r[1]) for r in merged if r[1] - r[0] >= CAPTURE_MIN_SHARE * len(bg)]
    if len(bands) != 2 or len(merged) != 2:
        return None
    cut = bands[1][0]
    parts = []
    for label, (y0, y1) in (("top", (0, cut)), ("bottom", (cut, img.height))):
        sub = _read_image(img.crop((0, y0, img.width, y1)), f"{name} ({label})", graphs)
        if sub.tool != "nvtop":
            return None
        parts.append((f"capture {len(parts) + 1} ({label})",
                      (0.0, y0 / img.height, 1.0, y1 / img.height), sub))
    notes = [(f"two nvtop captures in one picture (split at row {cut} of {img.height}, "
              f"where the background changes): each is read as its own moment")]
    return PictureReading("nvtop", [], "\n".join(p[2].text for p in parts), notes, [],
                          img.size, parts)


def _read_image(img, name: str, graphs) -> PictureReading:
    """``read_picture``'s reading of a decoded picture (one screen)."""
    try:
        words = ocr_words(*_prepare(img))
    except RuntimeError as exc:  # pytesseract's timeout
        why = f"the OCR gave up after {OCR_TIMEOUT_S:.0f} s ({exc}): nothing read"
        return PictureReading(None, [], "", [why])
    lines = lines_of(words, img.size)
    tool, gpus = parse_lines(lines)
    notes = _renumber(gpus)
    # a terminal's character grid (not a browser's proportional text)
    grid = read_grid(img, words) if tool is None or tool in TERMINAL_TOOLS else None
    if grid:
        tool = tool or which_tool("\n".join(ln[0] for ln in grid))
        if tool:
            on_grid = _PARSERS[tool](grid)
            if _misfit(on_grid, gpus):  # a grid fitted a cell off: its text is noise
                on_grid, grid = [], None
                notes.append("the character grid did not fit this picture: read by OCR only")
            reindexed = _reindex(on_grid, gpus)
            if on_grid:  # the steadier reading's notes (Tesseract's own misread indices
                notes = _renumber(on_grid)  # would read as two screens)
            notes += reindexed
            gpus = _merge(on_grid, gpus)
            lines = grid or lines
    if tool == "tealeaves dashboard" and graphs is not None:
        gpus = graphs(img, words) or []
    charts = read_charts(img, words, {g.gpu for g in gpus}) if tool == "nvtop" else []
    if charts:
        to_samples(np.asarray(img.convert("RGB"), dtype=np.int16), charts, words)
    notes += [f"{_chart_name(c)}: {n}" for c in charts for n in c.notes]
    notes += name_lines(charts, {g.gpu: g.values for g in gpus})
    dropped = _plausible(gpus)
    if dropped:
        notes.append(f"left out as impossible readings: {', '.join(dropped)}")
    notes += _agree(gpus)
    if tool is None:
        notes.append("no GPU monitor recognised (nvidia-smi, nvidia-smi dmon, nvitop, "
                     "nvtop, gpustat): nothing read")
    elif not gpus:
        notes.append(f"{tool} recognised, but no GPU line could be read (cropped, blurred "
                     f"or too small?)")
    return PictureReading(tool, gpus, "\n".join(ln[0] for ln in lines), notes, charts,
                          img.size)


def _chart_name(chart: Chart) -> str:
    """``"chart of GPUs 0, 1"`` (the GPUs its legends name), or where it is when none."""
    named = sorted({s.gpu for s in chart.series if s.gpu is not None})
    if named:
        return f"chart of GPU{'s' if len(named) > 1 else ''} {', '.join(map(str, named))}"
    return f"chart at x {chart.box[0]}-{chart.box[2]}, y {chart.box[1]}-{chart.box[3]} px"


#: The tools printed in a terminal (read again on the character grid).
TERMINAL_TOOLS = ("nvidia-smi", "nvidia-smi dmon", "nvitop", "gpustat", "nvtop")
