"""Read a screenshot of a GPU monitor: which tool it shows and each GPU's printed values.

Pictures of ``nvidia-smi`` (its default table), ``nvidia-smi dmon``, ``nvitop`` (its device
panel) and ``gpustat`` are read with Tesseract (Debian's ``tesseract-ocr``, through
``pytesseract``): the picture is made dark-on-light and enlarged (terminal text is 10-14 px
tall; Tesseract reads best at 20-30 px), read line by line with each word's confidence, and
the lines are parsed by the tool's own layout.  The same parsers read the tool's text as
printed (:func:`parse_text`), which is how the test pictures' printed values are known.

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
from tealeaves.data.screen.nvtop import Chart, is_nvtop, name_lines, parse_nvtop, read_charts
from tealeaves.data.screen.nvtop_samples import to_samples
from tealeaves.data.screen.values import (
    _NUM,
    FIELDS,  # noqa: F401  (re-exported: the readers' units)
    GpuReading,
    _fields_conf,
    _n,
)

#: The tools recognised, by the marks they print.
TOOLS: tuple[str, ...] = ("nvidia-smi", "nvidia-smi dmon", "nvitop", "nvtop", "gpustat",
                          "tealeaves report", "tealeaves dashboard")
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
    """What a picture shows: ``tool`` (one of ``TOOLS``, or None), ``gpus`` (in the order
    printed), the text read and ``notes`` (what was not read, and why)."""

    tool: str | None
    gpus: list[GpuReading]
    text: str = ""
    notes: list[str] = field(default_factory=list)
    #: nvtop's charts, digitised (``screen_nvtop.read_charts``); empty for other tools.
    charts: list[Chart] = field(default_factory=list)
    #: the picture's ``(width, height)`` in pixels (None for text).
    size: tuple[int, int] | None = None
    #: two nvtop screens pasted into one picture (``_two_captures``): ``(name, box, reading)``
    #: each, the box in fractions of this picture; empty otherwise.
    captures: list = field(default_factory=list)


# -- text ----------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b(?:\[[0-9;?>=]*[A-Za-z]|P[^\x1b]*\x1b\\|\][^\x07]*\x07|[()][A-Z0-9])")
def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (colours, cursor queries, DCS strings)."""
    return _ANSI.sub("", text).replace("\r", "")


def which_tool(text: str) -> str | None:
    """The monitor whose marks ``text`` carries (``TOOLS``), or None."""
    t = text.upper()
    if "TEALEAVES IMBALANCE REPORT" in t or re.search(r"\bBUSY\s+LOAD\s+SM\s+TENSOR\b", t):
        return "tealeaves report"
    if "TEALEAVES" in t and ("LOAD BY GPU" in t or "STRAGGLER TAX" in t):
        return "tealeaves dashboard"
    if "NVITOP" in t:
        return "nvitop"
    if is_nvtop(text):  # before dmon: nvtop's chart ticks and process table read like it
        return "nvtop"
    if "NVIDIA-SMI" in t or ("PWR:USAGE/CAP" in t.replace(" ", "") and "MEMORY-USAGE" in t):
        return "nvidia-smi"
    if re.search(r"#\s*(?:TIME\s+|DATE\s+)?GPU\s+(?:PWR|SM)\b", t) or any(
            _dmon_likeness(ln) >= 4 for ln in text.splitlines()):
        return "nvidia-smi dmon"
    if re.search(r"\[\s*" + _NUM + r"{0,2}\s*\]\s+\S.*\|\s*" + _NUM + r"+\s*°?\s*[C©]", t):
        return "gpustat"
    return None


# a "/" between two numbers, as OCR may read it (or a cell no glyph matched: "?")
_SLASH = r"\s*[/?*#]{1,2}\s*"
# the index line of a GPU holds its PCI bus id (00000000:00:06.0), the steadiest mark on it
_BUS_ID = re.compile(r"[0-9A-FO]{4,8}:[0-9A-FO]{2}:[0-9A-FO]{2}[.\s]?[0-9]")
_INDEX = re.compile(r"^\W{0,3}\s*(" + _NUM + r"{1,2})\s")
# a memory unit as OCR may read it (MiB as Mi8, M1B)
_UNIT = r"[MG][i1l][B8]|B"
# a cell the tool printed blank: N/A ([N/A], as OCR may read it: N/4, NIA) or ERR!; its value is
# left out of the reading (no number is made of it), the GPU kept
_BLANK = r"\[?N\s?[/|Il1]?\s?[A4]\]?|ERR!?"
# the table's second line of a GPU: fan, temp, perf, power/cap | memory | util; any of temp,
# power, cap and util may be blank
_SMI_ROW2 = re.compile(
    r"(?:" + _BLANK + r"|" + _NUM + r"+\s*%)\s+(?:(" + _NUM + r"+)\s*[C©]|" + _BLANK +
    r")\s+P\s*" + _NUM + r"+\s+"
    r"(?:(" + _NUM + r"+)\s*[Ww?]{1,2}|" + _BLANK + r")" + _SLASH +
    r"(?:(" + _NUM + r"+)\s*[Ww?]|" + _BLANK + r").*?"
    r"(" + _NUM + r"+(?:\.\d+)?)\s*(" + _UNIT + r")\s*/\s*(" + _NUM + r"+(?:\.\d+)?)\s*(" +
    _UNIT + r")"
    r".*?(?:(" + _NUM + r"+)\s*[%?]|" + _BLANK + r")")
_SMI_ROW1 = re.compile(r"^[|│!\[{(]?\s*(" + _NUM + r"{1,2})?\s+[^\s|│]?(?:NVIDIA|Tesla|Quadro|"
                       r"H\d|A\d|GeForce|RTX|L\d|B\d|GH|GB)(?!-SMI)", re.IGNORECASE)
# gpustat prints a power it could not read as "??" (its ``_repr(v, '??')``)
_UNKNOWN = r"\?\?|" + _BLANK
_GPUSTAT = re.compile(
    r"^\W{0,2}(" + _NUM + r"{1,2})?\W{0,2}\s.*?\|\s*(" + _NUM + r"+)\s*°?\s*[C©],?\s*(" +
    _NUM + r"+)\s*[%?](\s*[,.£*?]?\s*(?:(" + _NUM + r"+)|" + _UNKNOWN + r")" + _SLASH +
    r"(?:(" + _NUM + r"+)|" + _UNKNOWN + r")\s*[Ww?]+)?\s*[|?]\s*(" + _NUM + r"+)" + _SLASH +
    r"(" + _NUM + r"+)\s*MB")

#: A word that is a number with its unit (``47°C,``, ``12923MiB``, ``90%,``), not a name
#: holding digits (``H200``, ``python3(12914M)``).
_NUMERIC_WORD = re.compile(r"[\[(]?\d[\d.,:/]*[%°]?[A-Za-z]{0,3}[\]),]?")

_UNIT_MIB = {"M": 1.0, "G": 1024.0, "B": 1.0 / 2**20}


def _smi(lines: list[tuple]) -> list[GpuReading]:
    """nvidia-smi's and nvitop's device blocks: an index line, then the values line.  A
    values line not under an index line (the OCR lost it) is left out."""
    out: list[GpuReading] = []
    index: int | None = None
    for line, conf, box, scores in lines:
        m1 = _SMI_ROW1.search(line.strip()) or _BUS_ID.search(line)
        if m1:
            # an index the OCR lost: the next one (the tools list GPUs in index order)
            m0 = _INDEX.match(line)
            index = (int(_n(m0.group(1))) if m0 else (out[-1].gpu + 1 if out else 0))
            continue
        m2 = _SMI_ROW2.search(line)
        if m2 and index is not None:
            temp, pw, cap, used, u_unit, total, t_unit, util = m2.groups()
            vals = {"mem_used_mib": _n(used) * _UNIT_MIB[u_unit[0]],
                    "mem_total_mib": _n(total) * _UNIT_MIB[t_unit[0]]}
            # a blank cell (N/A, ERR!) gives no value: the GPU is kept without it
            vals.update({k: _n(v) for k, v in (("temp_c", temp), ("power_w", pw),
                                               ("power_limit_w", cap), ("util_pct", util))
                         if v is not None})
            cf = _fields_conf(m2, {"temp_c": 1, "power_w": 2, "power_limit_w": 3,
                                   "mem_used_mib": 4, "mem_total_mib": 6, "util_pct": 8},
                              scores, conf)
            blank = tuple(k for k in ("util_pct", "power_w", "power_limit_w", "temp_c")
                          if k not in vals)
            out.append(GpuReading(index, vals, cf, box, blank=blank))
            index = None
    return out


def _gpustat(lines: list[tuple]) -> list[GpuReading]:
    out: list[GpuReading] = []
    for line, conf, box, scores in lines:
        off = len(line) - len(line.lstrip())
        m = _GPUSTAT.search(line.strip())
        if not m:
            continue
        g, temp, util, power, pw, cap, used, total = m.groups()
        # "[7]" the OCR read as "4" or lost: the next index (gpustat lists them in order)
        index = int(_n(g)) if g and "[" in line[:3] else (out[-1].gpu + 1 if out else 0)
        vals = {"temp_c": _n(temp), "util_pct": _n(util), "mem_used_mib": _n(used),
                "mem_total_mib": _n(total)}
        # power not shown, or shown blank ("??"): no value, the GPU kept
        vals.update({k: _n(v) for k, v in (("power_w", pw), ("power_limit_w", cap))
                     if v is not None})
        cf = _fields_conf(m, {"temp_c": 2, "util_pct": 3, "power_w": 5, "power_limit_w": 6,
                              "mem_used_mib": 7, "mem_total_mib": 8}, scores, conf, off)
        # power shown (``power``: gpustat -P) but a side of it blank: that side is blank
        blank = tuple(k for k in ("power_w", "power_limit_w")
                      if power is not None and k not in vals)
        out.append(GpuReading(index, vals, cf, box, blank=blank))
    return out


#: ``nvidia-smi dmon``'s columns, in the order it prints them (``-s pucvmet`` and the
#: newer ``jpg``/``ofa``; ``nvidia-smi dmon --help``).
DMON_COLUMNS: tuple[str, ...] = (
    "gpu", "pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk", "pclk",
    "pviol", "tviol", "fb", "bar1", "ccpm", "sbecc", "dbecc", "pci", "rxpci", "txpci")


def _dmon_likeness(line: str) -> int:
    """How many words of ``line`` read as ``nvidia-smi dmon``'s own column names (by
    likeness alone: a process table's ``GPU GI CI PID`` is not a dmon header)."""
    import difflib

    toks = line.lstrip("#?* ").lower().split()
    if "gpu" not in toks[:3]:
        return 0
    return sum(bool(difflib.get_close_matches(t, DMON_COLUMNS[1:], n=1, cutoff=0.75))
               for t in toks)


def _dmon_names(line: str) -> list[str] | None:
    """A ``dmon`` header line's column names, each OCR-garbled name (``gtenp``, ``sn``) put
    right by its likeness to ``DMON_COLUMNS`` or, failing that, by its place after the
    previous column; None when the line is not the header (no ``gpu`` column)."""
    import difflib

    toks = line.lstrip("#?* ").lower().split()
    if "gpu" not in toks or toks.index("gpu") > 2:
        return None
    names: list[str] = []
    for t in toks:
        best = difflib.get_close_matches(t, DMON_COLUMNS, n=1, cutoff=0.6)
        if best and best[0] not in names:
            names.append(best[0])
            continue
        prev = names[-1] if names else ""
        nxt = (DMON_COLUMNS.index(prev) + 1) if prev in DMON_COLUMNS else len(DMON_COLUMNS)
        names.append(DMON_COLUMNS[nxt] if nxt < len(DMON_COLUMNS) and
                     DMON_COLUMNS[nxt] not in names else t)
    return names


def _dmon(lines: list[tuple]) -> list[GpuReading]:
    """The last sweep on screen: the newest row of each GPU under the last header."""
    names: list[str] | None = None
    latest: dict[int, GpuReading] = {}
    for line, conf, box, scores in lines:
        s = line.strip()
        header = _dmon_names(s) if s[:1] in "#?*" or "gpu" in s.lower().split()[:3] else None
        if header:
            names = header
            continue
        if names is None or s.startswith("#"):
            continue
        # a cell of the frame or of no glyph read is no column
        toks = [t for t in s.split() if t.strip("?")] if len(s.split()) > len(names) \
            else s.split()
        if len(toks) != len(names):
            continue
        row = dict(zip(names, toks, strict=True))
        # each column's confidence: its characters' (the grid reader's), else the line's
        spans = [mm.span() for mm in re.finditer(r"\S+", line) if mm.group().strip("?")] \
            if len(line.split()) > len(names) else [mm.span() for mm in re.finditer(r"\S+", line)]
        col_conf = {n: (min(scores[a:b]) if scores is not None and b <= len(scores) else conf)
                    for n, (a, b) in zip(names, spans, strict=False)}
        try:
            g = int(_n(row["gpu"]))
            vals, blank = {}, []
            for col, key in (("pwr", "power_w"), ("gtemp", "temp_c"), ("sm", "util_pct"),
                             ("fb", "mem_used_mib")):
                if col in row and row[col] in ("-", "N/A"):
                    blank.append(key)
                elif col in row:
                    vals[key] = _n(row[col])
        except (ValueError, KeyError):
            continue
        col = {"power_w": "pwr", "temp_c": "gtemp", "util_pct": "sm", "mem_used_mib": "fb"}
        latest[g] = GpuReading(g, vals, {k: col_conf.get(col[k], conf) for k in vals}, box,
                               blank=tuple(blank))
    return [latest[g] for g in sorted(latest)]


_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s+%")
_SLASHED = re.compile(r"(\S+)\s*/\s*(\S+)")


def _report(lines: list[tuple]) -> list[GpuReading]:
    """tealeaves report's Per GPU table (``app/report/html.py``): GPU, name, busy, load, SM,
    tensor, DRAM, PCIe tx/rx, NVLink tx/rx, power, hot s.  ``load`` (the cell after the
    first share, busy) is the utilization (%), ``power`` (the cell before the last) the mean
    power (W); a value printed as a dash is absent."""
    out: list[GpuReading] = []
    header = False
    for line, conf, box, scores in lines:
        low = line.lower()
        if re.search(r"\bbusy\s+load\s+sm\b", low):
            header = True
            continue
        m = re.match(r"^\W{0,2}(?:gpu\s*)?(\d{1,4})\s+\S", low)
        if not header or not m:
            continue
        toks = _SLASHED.sub(r"\1/\2", _PERCENT.sub(r"\1%", line)).split()
        # busy is the first share printed, load the next cell (a share, or a dash: absent);
        # power the cell before the last (hot s), whatever the OCR made of the link columns
        first = next((k for k, t in enumerate(toks) if re.fullmatch(r"\d+(?:\.\d+)?%", t)),
                     None)
        if first is None or len(toks) < first + 4:
            continue
        vals = {}
        for key, tok in (("util_pct", toks[first + 1]), ("power_w", toks[-2])):
            num = re.fullmatch(r"(\d+(?:\.\d+)?)" + ("%" if key == "util_pct" else ""), tok)
            if num:
                vals[key] = float(num.group(1))
        if vals:
            out.append(GpuReading(int(m.group(1)), vals, dict.fromkeys(vals, conf), box))
    return out


_PARSERS = {"tealeaves report": _report, "tealeaves dashboard": lambda lines: [],
            "nvidia-smi": _smi, "nvitop": _smi, "gpustat": _gpustat, "nvidia-smi dmon": _dmon,
            "nvtop": parse_nvtop}


def _boxed(lines) -> list[tuple]:
    """``(text, confidence[, box[, scores]])`` lines as 4-tuples (missing parts: None);
    ``scores`` is each character's confidence (the grid reader's), else None."""
    return [(ln[0], ln[1], ln[2] if len(ln) > 2 else None, ln[3] if len(ln) > 3 else None)
            for ln in lines]


def parse_lines(lines) -> tuple[str | None, list[GpuReading]]:
    """The tool and the GPUs of a screen given as ``(line, confidence[, box])`` tuples (box:
    where the line is, fractions of the picture, as ``GpuReading.box``)."""
    lines = _boxed(lines)
    text = "\n".join(ln[0] for ln in lines)
    tool = which_tool(text)
    if tool is None:
        return None, []
    return tool, _PARSERS[tool](lines)


def parse_text(text: str) -> tuple[str | None, list[GpuReading]]:
    """The tool and the GPUs of a monitor's text as printed (escapes are removed first);
    every confidence is 1."""
    return parse_lines([(ln, 1.0) for ln in strip_ansi(text).splitlines()])


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
#: Confidence given to a value the other GPUs contradict, or to a renumbered index's values.
DOUBTFUL = 0.25


def _renumber(gpus: list[GpuReading]) -> list[str]:
    """Put back, in place, GPU indices out of order: every tool lists its GPUs by index, so
    a run read as 8, 1, 2, ... 7 was 0, 1, 2, ... 7 (a 0 read as an 8).  Only when one index
    breaks an otherwise consecutive run; its values become doubtful (``DOUBTFUL``).  Returns
    notes saying what was changed, and duplicate indices (two screens in one picture?)."""
    idx = [g.gpu for g in gpus]
    notes = []
    if len(idx) >= 3 and len(set(idx)) == len(idx):
        for k, g in enumerate(gpus):
            want = (idx[k + 1] - 1) if k + 1 < len(idx) else idx[k - 1] + 1
            others = [i for j, i in enumerate(idx) if j != k]
            base = others[0] - (1 if k == 0 else 0)
            run = list(range(base, base + len(idx)))
            if idx[:k] + [want] + idx[k + 1:] == run and g.gpu != want:
                notes.append(f"GPU {g.gpu} read out of order: taken as GPU {want}")
                g.gpu = want
                g.confidence = dict.fromkeys(g.confidence, DOUBTFUL)
                break
    dup = sorted({i for i in idx if idx.count(i) > 1})
    if dup:
        notes.append(f"GPU {', '.join(map(str, dup))} read more than once (two screens in "
                     f"one picture?): each reading kept; split the picture into regions to "
                     f"judge each screen")
    return notes


def _agree(gpus: list[GpuReading]) -> list[str]:
    """Mark doubtful, in place, a power limit or memory total that differs from what most of
    the GPUs read (one machine's GPUs share them: 788 W among seven 700 W limits is a
    misread digit); returns notes naming them."""
    notes = []
    for key in ("power_limit_w", "mem_total_mib"):
        vals = [g.values[key] for g in gpus if key in g.values]
        if len(vals) < 3:
            continue
        common = max(set(vals), key=vals.count)
        if vals.count(common) * 2 <= len(vals):
            continue
        for g in gpus:
            if key in g.values and g.values[key] != common:
                g.confidence[key] = min(g.confidence.get(key, 1.0), DOUBTFUL)
                notes.append(f"GPU {g.gpu} {key} {g.values[key]:g} differs from the other "
                             f"GPUs' {common:g}: doubtful")
    return notes


def _misfit(grid: list[GpuReading], ocr: list[GpuReading]) -> bool:
    """Whether the grid reader's GPUs contradict Tesseract's (a grid fitted half a cell off
    reads "Device 8 ... H288" for "Device 0 [NVIDIA H200]"): fewer than half of Tesseract's
    GPU indices read on the grid (of two or more), or fewer than half of the values both
    read surely (confidence 0.5 or more, at least four) within 1 % or 1 unit of each other."""
    if not grid or not ocr:
        return False
    theirs = {g.gpu: g for g in ocr}
    mine = {g.gpu for g in grid}
    if len(theirs) >= 2 and 2 * len(mine & set(theirs)) < len(theirs):
        return True
    n = agree = 0
    for g in grid:
        o = theirs.get(g.gpu)
        if o is None:
            continue
        for k, v in g.values.items():
            w = o.values.get(k)
            if w is None or min(g.confidence.get(k, 0), o.confidence.get(k, 0)) < 0.5:
                continue
            n += 1
            agree += abs(v - w) <= max(1.0, 0.01 * abs(w))
    return n >= 4 and 2 * agree < n


def _reindex(grid: list[GpuReading], ocr: list[GpuReading]) -> list[str]:
    """Give, in place, the grid reader's GPUs of a row the indices Tesseract read on that
    row, when the grid read one index twice there ("Device 3 ... Device 3 ... Device 5")
    and Tesseract read as many GPUs on the row, each index once; or where the grid read an
    index Tesseract read nowhere, in the place of one the grid read nowhere.  A row is the GPUs whose
    boxes' centres share a height; they pair up left to right (the order printed).
    Returns notes saying what was changed."""
    def rows(gpus):
        out: dict[float, list[GpuReading]] = {}
        for g in gpus:
            if g.box is not None:
                out.setdefault(round((g.box[1] + g.box[3]) / 2, 2), []).append(g)
        return out

    theirs = rows(ocr)
    all_mine, all_theirs = {g.gpu for g in grid}, {g.gpu for g in ocr}
    notes = []
    for y, mine in rows(grid).items():
        idx = [g.gpu for g in mine]
        other = next((o for yy, o in theirs.items() if abs(yy - y) <= 0.01), None)
        if other is None or len(other) != len(mine) or \
                len({g.gpu for g in other}) != len(other):
            continue
        twice = len(set(idx)) < len(idx)
        for g, o in zip(mine, other, strict=True):
            if g.gpu == o.gpu:
                continue
            if twice:
                notes.append(f"GPU {g.gpu} read twice on one row: taken as GPU {o.gpu}, "
                             f"as the OCR read it")
            elif g.gpu not in all_theirs and o.gpu not in all_mine:
                # ("Device?8" on the grid where Tesseract read "Device 0": the grid's index
                # appears nowhere in Tesseract's reading, nor Tesseract's in the grid's)
                notes.append(f"GPU {g.gpu} read by the character grid where the OCR read "
                             f"GPU {o.gpu} (no GPU {g.gpu} elsewhere): taken as GPU {o.gpu}")
            else:
                continue
            g.gpu = o.gpu
    return notes


#: In ``_merge``, a value of the steadier reading less sure than this ...
YIELD_BELOW = 0.3
#: ... gives way to the other reading's value of the same GPU when that one is this sure.
YIELD_TO = 0.6


def _merge(first: list[GpuReading], second: list[GpuReading]) -> list[GpuReading]:
    """The GPUs of two readings of one picture (``first`` the steadier): ``first``'s GPUs,
    every one of them (an index read twice there is two screens, both kept), each value
    missing there (or read less sure than ``YIELD_BELOW`` where ``second`` is at least
    ``YIELD_TO`` sure) taken from ``second``'s GPU of that index on the same row
    (``_same_place``: a value left blank is never filled from another row); ``second``'s GPUs of other
    indices added (only the first of an index: a duplicate there is a misread index), unless
    on a row ``first`` read (the same GPU, its index misread: ``_same_row``)."""
    by_index: dict[int, GpuReading] = {}
    for g in second:
        by_index.setdefault(g.gpu, g)
    out = list(first)
    for g in out:
        # only the same GPU's row fills a value: a blank (N/A) of GPU 1 never takes the
        # power of GPU 0's row that the OCR misread as GPU 1
        other = next((o for o in second if o.gpu == g.gpu and _same_place(o, g)), None)
        if other is not None:
            # a value ``first`` is unsure of (a glyph it never learned, read as a digit:
            # "47°C" as "477C") yields to ``second``'s sure reading
            got = {k: v for k, v in other.values.items() if k not in g.blank}
            keep = {k: v for k, v in g.values.items()
                    if not (k in other.values and g.confidence.get(k, 1.0) < YIELD_BELOW
                            and other.confidence.get(k, 0.0) >= YIELD_TO)}
            g.confidence = {**other.confidence,
                            **{k: c for k, c in g.confidence.items() if k in keep}}
            g.values = {**got, **keep}
            g.blank = tuple(k for k in g.blank if k not in g.values)
    have = {g.gpu for g in out}
    out += [g for k, g in by_index.items() if k not in have and not _same_row(g, first)]
    return sorted(out, key=lambda g: g.gpu)


def _same_place(g: GpuReading, other: GpuReading) -> bool:
    """Whether ``g`` and ``other`` may be one GPU's row: on one row (``_same_row``), or
    either placed nowhere."""
    return g.box is None or other.box is None or _same_row(g, [other])


def _same_row(g: GpuReading, others: list[GpuReading]) -> bool:
    """Whether ``g``'s values line is where one of ``others``' is (its centre inside that
    box's height): one GPU, its index read two ways."""
    if g.box is None:
        return False
    cy = (g.box[1] + g.box[3]) / 2
    return any(o.box is not None and o.box[1] <= cy <= o.box[3] for o in others)


#: The largest reading of each value a GPU prints (the schema's unit limits: 100 %, 5 kW,
#: 10 TB of memory; 150 °C is past any GPU's shutdown temperature).
_HIGH = {"util_pct": 100.0, "power_w": 5000.0, "power_limit_w": 5000.0,
         "mem_used_mib": 1e13 / 2**20, "mem_total_mib": 1e13 / 2**20, "temp_c": 150.0,
         # nvtop's header: clocks (MHz), fan and codec %, PCIe generation 1-7 (0 is no
         # reading: nvtop prints no link it cannot read), width to x32, 1 TB/s per direction
         "sm_clock_mhz": 5000.0, "mem_clock_mhz": 20000.0, "fan_pct": 100.0, "pcie_gen": 7.0,
         "pcie_width": 32.0, "pcie_rx_bytes_per_s": 1e12, "pcie_tx_bytes_per_s": 1e12,
         "enc_pct": 100.0, "dec_pct": 100.0}


def _plausible(gpus: list[GpuReading]) -> list[str]:
    """Drop, in place, values no GPU can print (over ``_HIGH``; draw over 1.25x its limit,
    more than a reading spikes; memory used over the total: a misread digit, as ``4911 W``
    for ``491 W`` cut at the edge); return what was dropped, as ``"GPU 0 power_w 4911"``."""
    out = []
    for g in gpus:
        v = g.values
        bad = {k for k, x in v.items() if not 0 <= x <= _HIGH[k]}
        if "power_w" in v and "power_limit_w" in v and v["power_w"] > 1.25 * v["power_limit_w"]:
            bad.add("power_w")
        if "mem_used_mib" in v and "mem_total_mib" in v and \
                v["mem_used_mib"] > v["mem_total_mib"] * 1.001:
            bad.add("mem_used_mib")
        for k in sorted(bad):
            out.append(f"GPU {g.gpu} {k} {v.pop(k):g}")
            g.confidence.pop(k, None)
    return out
