"""nvtop's screen: its per-GPU header and its charts over time.

nvtop 3.0.1 (Debian bookworm's ``contrib``; ``src/interface.c``) prints, per GPU, three header
lines, side by side when the terminal is wide enough for several devices::

    Device 0 [NVIDIA H200] PCIe GEN 5@16x RX: 104.4 MiB/s TX: 22.79 MiB/s
    GPU 1980MHz MEM 3201MHz TEMP  48°C FAN N/A% POW 504 / 700 W
    GPU[||||||||||||||||||||||95%] MEM[|||        13.221Gi/140.401Gi]

(``ENC[...%]``/``DEC[...%]`` bars are added while a codec works), then a chart box per group of
GPUs: y ticks ``100 75 50 25 0`` on the left (``-r`` draws time the other way), each series a
step line in its legend's colour (``GPU0 %`` is NVML's utilization.gpu, ``GPU0 mem%`` the share
of its memory in use: it holds while the GPU idles with memory allocated, picture 17), and time
ticks ``77s 57s 38s 19s 0s`` under the box: seconds before the
newest sample, which is how the picture gives the seconds per column.

``parse_nvtop`` reads the header lines (text as printed, or OCR lines with confidences);
``read_charts`` digitises the charts from the picture's pixels, given Tesseract's words (for the
tick labels and legends).  A value not printed or not read is absent, never 0: ``FAN N/A%`` is
no fan reading.
"""

from __future__ import annotations

import itertools
import re
import warnings
from dataclasses import dataclass, field

import numpy as np

from tealeaves.data.screen.values import _NUM, GpuReading, _fields_conf, _n

#: Bytes per unit of nvtop's PCIe rates (it prints binary units: ``KiB/s``, ``MiB/s``).
_RATE_UNIT = {"": 1.0, "K": 2.0**10, "M": 2.0**20, "G": 2.0**30, "T": 2.0**40}
#: MiB per unit of nvtop's memory figures (``13.221Gi/140.401Gi``).
_MEM_UNIT = {"K": 2.0**-10, "M": 1.0, "G": 2.0**10, "T": 2.0**20}
_F = _NUM + r"+(?:[.,]" + _NUM + r"+)?"  # a number, decimals allowed

# a rate as OCR reads it: "102-5 M1iB/sS" is 102.5 MiB/s
_RATE = r"(" + _NUM + r"+(?:[.,-]" + _NUM + r"+)?)\s*([KMGT]?)[i1l]{0,2}B\s*/\s*[sS]{1,2}"
_DEVICE = re.compile(
    r"Dev[il1]ce\s*(" + _NUM + r"{1,2})?\s*\[([^\]\[]{1,48})\]?"
    # "GEN 5@16x": the "@" read as anything up to three characters ("5it16x", "5Q16x", the
    # grid reader's "5816?"), or lost ("516x")
    r"(?:\s*PC[Il1|?]e\s*[G6?]EN\s*(" + _NUM + r")\s*\S{0,3}?(" + _NUM +
    r"{1,2})\s*[xX%?])?"
    # "RX:" and "TX:" as OCR reads them ("RX.", "P¥-", "IX:", "T%:", the grid's "T??"); a
    # rate's "B/s" is what tells it
    r"(?:\s*(?:[RP]\S{0,2}|\?{1,3})\s*" + _RATE + r")?"
    r"(?:\s*(?:[TI]\S{0,2}|\?{1,3})\s*" + _RATE + r")?")
_MHZ = r"\s*MH[zZ2]{1,3}"
_CLOCKS = re.compile(
    r"GPU\s*(" + _NUM + r"+)" + _MHZ + r"\s*MEM\s*(" + _NUM + r"+)" + _MHZ +
    r"(?:\s*TEMP\s*(" + _NUM + r"+)\s*[°º*o0f]?\s*[C©])?"
    r"(?:\s*FAN\s*(N/?A|" + _NUM + r"+)\s*[*.%X?]{0,2})?"
    r"(?:\s*P[O0]W\s*(N/?A|" + _NUM + r"+)\s*/\s*(" + _NUM + r"+)\s*W)?")
# the bars: the number printed at a bar's right end, before "%]" (plain digits: the bar's
# own "|" marks read as 1s stand right before it)
# (not a chart's legend, "GPU6 %": a bar's GPU word is never followed by its index)
_GPU_BAR = re.compile(r"GPU(?!\s*[0-9OQ])\s*\S(?:(?!GPU).){0,90}?(100|\d{1,2}|(?<=\s)[QO])\s*[%?]\s*"
                      r"(?:[\]|)}J1l?]|(?=\S?\s*M[E£?]M))")
# nvtop prints memory with three decimals (13.221Gi); Tesseract may read "Gi" as "61"
_GI = r"(?:([KMGT])[i1l]|G?(6)1)"
# (the decimal point read as "," or "-", or lost to a space: "140 40161")
_MEM_BAR = re.compile(r"(" + _NUM + r"*\s*[.,-]\s*" + _NUM + r"{3})\s*" + _GI + r"\s*/\s*(" +
                      _NUM + r"+(?:\s*[.,-]\s*|\s+)" + _NUM + r"{3})\s*" + _GI)
# "mem" of a mem% legend as OCR reads it ("mem", "men", "nen", "mom")
_MEM_WORD = r"[mn][eo][mn]"
# where a legend word ends: its "mem%" or its "%" (a line drawn right after it is read on)
_LEGEND_END = r"\s*(?:[_\W]?" + _MEM_WORD + r"[*_]?%?|[%*+])"
# "GPU" of a legend as OCR reads it: "GPU", "GpY", "PU" (the G lost)
_GPU_WORD = r"G?[Pp][UuVvYy]"
_CODEC_BAR = re.compile(r"(ENC|DEC)\s*\S.{0,40}?(100|\d{1,2})\s*%\s*[\]|)}J1l]")


def is_nvtop(text: str) -> bool:
    """Whether ``text`` carries nvtop's header marks: a ``Device N [name]`` line with its
    ``PCIe GEN`` or a clocks line ``GPU ...MHz MEM ...MHz``."""
    return bool(re.search(r"Dev[il1]ce\s*" + _NUM + r"{0,2}\s*\[", text)) and bool(
        re.search(r"PC[Il1|]e\s*[G6]EN|" + _NUM + r"+" + _MHZ + r"\s*MEM\s*" + _NUM + r"+" + _MHZ,
                  text))


def parse_nvtop(lines: list[tuple]) -> list[GpuReading]:
    """Each GPU's header values from nvtop's lines, ``(text, confidence, box, scores)``
    tuples (as ``screen_read._boxed`` gives).

    A device line opens one GPU per ``Device N [...]`` on it (left to right); the next clock
    line and bar line give their values to those GPUs in the same order.  Values (units in
    ``screen_values.FIELDS``): ``pcie_gen``, ``pcie_width``, ``pcie_rx_bytes_per_s``,
    ``pcie_tx_bytes_per_s``, ``sm_clock_mhz``, ``mem_clock_mhz``, ``temp_c``, ``fan_pct``,
    ``power_w``, ``power_limit_w``, ``util_pct`` (the GPU bar), ``mem_used_mib`` and
    ``mem_total_mib`` (the MEM bar), ``enc_pct``/``dec_pct``; each value's confidence is its
    characters' lowest (``_fields_conf``).  Returns the GPUs in the order printed.
    """
    out: list[GpuReading] = []
    row: list[GpuReading] = []  # the GPUs of the last device line
    starts: list[int] = []  # where on that line each begins (characters)
    for text, conf, box, scores in lines:
        devs, text = _finditer(_DEVICE, text, scores is not None)
        if devs:
            row = []
            starts = [m.start() for m in devs]
            for m in devs:
                # an index the OCR lost: the next one (nvtop lists devices in index order)
                index = int(_n(m.group(1))) if m.group(1) else (out[-1].gpu + 1 if out else 0)
                g = GpuReading(index, box=box, name=m.group(2).strip())
                _put(g, m, conf, scores, {
                    "pcie_gen": (3, 1.0), "pcie_width": (4, 1.0),
                    "pcie_rx_bytes_per_s": (5, _RATE_UNIT[m.group(6) or ""]),
                    "pcie_tx_bytes_per_s": (7, _RATE_UNIT[m.group(8) or ""])})
                row.append(g)
                out.append(g)
            continue
        if not row:
            continue
        clocks, text = _finditer(_CLOCKS, text, scores is not None)
        if clocks:
            for g, m in _owners(row, starts, clocks, text, scores is not None):
                _put(g, m, conf, scores, {"sm_clock_mhz": (1, 1.0), "mem_clock_mhz": (2, 1.0),
                                          "temp_c": (3, 1.0), "fan_pct": (4, 1.0),
                                          "power_w": (5, 1.0), "power_limit_w": (6, 1.0)})
            continue
        # a bars line carries its MEM bar too (a chart's legend line, "GPU6 % GPU6 mem%",
        # does not)
        bars = list(_GPU_BAR.finditer(text)) if re.search(r"M[E£?]M", text) else []
        mems = list(_MEM_BAR.finditer(text))
        if bars or mems:
            for g, m in _owners(row, starts, bars, text, scores is not None):
                _put(g, m, conf, scores, {"util_pct": (1, 1.0)})
            for g, m in _owners(row, starts, mems, text, scores is not None):
                _put(g, m, conf, scores, {
                    "mem_used_mib": (1, _MEM_UNIT[m.group(2) or "G"]),
                    "mem_total_mib": (4, _MEM_UNIT[m.group(5) or "G"])})
        for m in _CODEC_BAR.finditer(text):
            # a codec bar belongs to the device whose header column it sits under
            g = row[min(len(row) - 1, _column_of(m.start(), text, len(row)))]
            _put(g, m, conf, scores, {f"{m.group(1).lower()}_pct": (2, 1.0)})
    return out


def _finditer(pattern: re.Pattern, text: str, on_grid: bool) -> tuple[list, str]:
    """``pattern``'s matches in ``text`` and the text they are in: on the grid reader's
    lines, where none match, its unsure cells between words ("?Device?0?[NVIDIA H200]" on a
    JPEG) read as blanks (one character each: the columns stay where they were)."""
    found = list(pattern.finditer(text))
    if not found and on_grid and "?" in text:
        blanked = text.replace("?", " ")
        found = list(pattern.finditer(blanked))
        text = blanked if found else text
    return found, text


#: Where each device's part of a clocks or bars line starts: its "GPU" word.
_ANCHOR = re.compile(r"G[P?]U(?=[\s\[L|T(?])")


def _owners(row: list[GpuReading], starts: list[int], matches: list[re.Match], text: str,
            on_grid: bool):
    """Pair each match of a clocks or bars line with the device (of ``row``, the GPUs of the
    device line above, left to right, their ``Device`` words at characters ``starts``)
    whose part of the line it is in.  On the character grid (``on_grid``) the lines share
    their columns, so a match belongs to the device at or left of its column; in
    Tesseract's text the line's "GPU" words (``_ANCHOR``) split it into one part per device
    when there are as many as devices, else a match's place along the line tells.  A part
    the OCR garbled is skipped, never given its neighbour's values.  Yields
    ``(gpu, match)``, each device at most once."""
    if not on_grid:
        anchors = [a.start() for a in _ANCHOR.finditer(text)]
        starts = anchors if len(anchors) == len(row) else None
    taken = set()
    for m in matches:
        at = m.start(1) if m.group(1) is not None else m.start()  # where its value is
        if starts is None:
            k = _column_of(at, text, len(row))
        else:
            k = max((i for i, a in enumerate(starts) if a <= at + 1), default=None)
        if k is not None and k not in taken:
            taken.add(k)
            yield row[k], m


def _column_of(pos: int, text: str, n: int) -> int:
    """Which of ``n`` side-by-side device columns character ``pos`` of ``text`` falls in."""
    return int(n * pos / max(1, len(text)))


def _put(g: GpuReading, m: re.Match, conf: float, scores, spec: dict) -> None:
    """Store, in place, ``spec``'s values of match ``m`` (``{key: (group, factor)}``) on
    ``g`` with their confidences; a group not matched or printed ``N/A`` is no value."""
    keys = {}
    for key, (grp, factor) in spec.items():
        tok = m.group(grp)
        if tok is None or tok.upper().replace("/", "") == "NA":
            continue
        try:
            if not re.search(r"[.,-]", tok):  # "140 401": memory's point lost to a space
                tok = re.sub(r"(?<=\S)\s+(?=\S{3}$)", ".", tok)
            tok = re.sub(r"\s+", "", tok)
            # a decimal point read as "," or "-" (rates and memory print decimals)
            tok = re.sub(r"(?<=\d)[,-](?=\d)", ".", tok)
            g.values[key] = _n(tok) * factor
        except ValueError:
            continue
        keys[key] = grp
    g.confidence.update(_fields_conf(m, keys, scores, conf))


# -- the charts ----------------------------------------------------------------------------

#: nvtop's default seconds between samples (``-d 10``: tenths of a second), used when the
#: picture's time ticks cannot be read.
DEFAULT_INTERVAL_S = 1.0
#: Tesseract's settings for the strip of time ticks: one line, only digits and ``s``.
TICK_OCR_CONFIG = "--psm 7 -c tessedit_char_whitelist=0123456789s"


@dataclass
class ChartSeries:
    """One plotted line of an nvtop chart, digitised.

    Attributes:
        legend: its legend as read (``GPU0 %``, ``GPU3 mem%``), or ``line N`` unread.
        gpu: the GPU index the legend names (None when unread).
        metric: ``gpu_util`` (``GPU%``) or ``mem_util`` (``mem%``), None when unread.
        colour: its RGB colour in the picture.
        seconds_ago: (n,) seconds before the newest sample, one per picture column read.
        values: (n,) the plotted percentage at each, NaN where the line is not seen.
        hidden: how many of those columns were read off the line drawn over it.
    """

    legend: str
    gpu: int | None
    metric: str | None
    colour: tuple[int, int, int]
    seconds_ago: np.ndarray
    values: np.ndarray
    #: columns whose value is the line drawn over this one (``_hidden_under``).
    hidden: int = 0


@dataclass
class Chart:
    """One chart box: where it is (pixels ``x0, y0, x1, y1`` of the plot area), its time
    step, the direction of time and its series; ``notes`` say what could not be told."""

    box: tuple[int, int, int, int]
    seconds_per_px: float
    interval_source: str
    newest_right: bool
    series: list[ChartSeries] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: seconds before the newest sample at the plot's newest edge (0 unless cropped).
    newest_s_ago: float = 0.0
    #: points of the value scale (0-100) the picture's edge cuts off, below and above (0
    #: unless cropped through the chart): a line there is unseen, its columns NaN.
    unseen_points: tuple[float, float] = (0.0, 0.0)
    #: a monochrome chart's lines: "" (coloured), "together" (not two lines of one GPU:
    #: read as one), "unnamed" (followed apart, which is which not yet told:
    #: ``name_lines``), "named".
    monochrome: str = ""
    #: the chart's text rows above its 0 % row (``_to_levels``), None where not found.
    rows: int | None = None
    #: the picture's edges that cut through the plot area ("bottom", "top", "right"): its
    #: lines may run where they are not seen, so no stretch is judged on them.
    cut_edges: tuple[str, ...] = ()
    #: what the 100 % and 0 % rows rest on (``_scale_rows``): 3 both ticks read, 2 one tick
    #: and the box's borders, 1 the first legend and the borders, 0 the ticks' line fit.
    scale_from: int = 0
    #: nvtop's update interval, s, where its samples were told apart
    #: (``nvtop_samples.to_samples``: one value per sample); None: one value per pixel column.
    interval_s: float | None = None
    #: the legends' boxes (x0, y0, x1, y1 px): their text is no line.
    legend_boxes: list[tuple] = field(default_factory=list)


def _word_num(text: str, suffix: str = "") -> float | None:
    m = re.fullmatch(r"\W*(" + _NUM + r"{1,4})" + suffix + r"\W*", text)
    if not m:
        return None
    try:
        return _n(m.group(1))
    except ValueError:
        return None


def read_charts(img, words, header: set[int] | None = None) -> list[Chart]:
    """Digitise nvtop's charts in ``img`` (a PIL image) given Tesseract's ``words``
    (``screen_grid.Word``, boxes in the picture's pixels).

    A chart is found by its y ticks: words reading ``100``, ``75``, ``50``, ``25`` (and ``0``)
    stacked in one column, the plot area right of them.  The value scale is the line through
    the ticks' centres (least squares); the time scale comes from the ``Ns`` tick words under
    the plot (seconds per pixel, and which side is newest); without two of them, nvtop's
    default interval with one column per sample is assumed and said.  Each legend word
    (``GPU<n>`` then ``%`` or ``mem%``) gives a series its colour (the most saturated pixels
    of the word); in every pixel column of the plot the rows of that colour that continue a
    horizontal run are the line's level there.  A picture whose series share one colour
    (``-C``, monochrome) has one undistinguished line, said in the notes.

    ``header``: the GPU indices the picture's header shows, when read: a chart's legend index
    is taken as a misread only when the header does not show it (``_one_gpu_per_chart``).

    Returns:
        The charts found, top to bottom (empty when none).
    """
    a = np.asarray(img.convert("RGB"), dtype=np.int16)
    glyph_w = _glyph_width(words)
    ticks = _y_ticks(words, glyph_w)
    # the frame is told from it in every chart; the terminal's own ground, where its words
    # are (a picture padded with a border, or a desktop around the window, is not it)
    if words:
        bx0, by0 = int(min(w.left for w in words)), int(min(w.top for w in words))
        bx1 = int(max(w.left + w.width for w in words))
        by1 = int(max(w.top + w.height for w in words))
        bg = _background(a[max(0, by0):by1 + 1, max(0, bx0):bx1 + 1]) \
            if bx1 > bx0 + 16 and by1 > by0 + 16 else _background(a)
    else:
        bg = _background(a)
    made = []
    for col in ticks:
        # a chart side by side with the next one ends before that one's y ticks (its own
        # right frame missed, it would run over the next chart's plot)
        x_left = max(t[2] for t in col)
        nxt = [max(t[2] for t in o) for o in ticks if o is not col
               and max(t[2] for t in o) > x_left + 10 * glyph_w
               and min(t[1] for t in o) < max(t[1] for t in col)
               and max(t[1] for t in o) > min(t[1] for t in col)]
        limit = int(min(nxt) - 4 * glyph_w) if nxt else None
        chart = _one_chart(a, words, col, bg, glyph_w, limit)
        if chart is not None:
            made.append((col, limit, chart))
    charts = [_rows_from_beside(a, words, bg, glyph_w, one, made) for one in made]
    _share_scales(charts)
    _one_gpu_per_chart(a, charts, header)
    cell = _cell_height(words)
    spans: list[list[Chart]] = []  # charts of one height share their rows
    for c in charts:
        same = next((g for g in spans if abs((g[0].box[3] - g[0].box[1])
                                              - (c.box[3] - c.box[1])) <= 3), None)
        if same is None:
            spans.append([c])
        else:
            same.append(c)
    for group in spans if cell else []:
        _to_levels(group, cell)
    return charts


def _rows_from_beside(a, words, bg: float, glyph_w: float, one: tuple, made: list[tuple]) -> Chart:
    """``one`` chart (``(ticks, limit, chart)``) read again on the 100 % and 0 % rows of a
    chart beside it whose rows rest on more of what it read (``Chart.scale_from``: both ticks
    read over a tick and the borders, over a legend, over the ticks' fit), when those differ
    by more than 3 px: nvtop draws the charts of a row on one height, and a chart whose 100
    tick was lost placed its 100 % row a text row off (picture 40: GPU 1's line at 100 %
    above its plot, unread).  Else the chart as it was."""
    col, limit, c = one
    row = [o for _t, _l, o in made if o is not c and
           abs(o.box[1] - c.box[1]) < 0.5 * (c.box[3] - c.box[1]) and
           abs((o.box[3] - o.box[1]) - (c.box[3] - c.box[1])) < 0.3 * (c.box[3] - c.box[1])]
    better = [o for o in row if o.scale_from > c.scale_from]
    if not better:
        return c
    o = max(better, key=lambda r: r.scale_from)
    if abs(o.box[1] - c.box[1]) <= 3 and abs(o.box[3] - c.box[3]) <= 3:
        return c
    x = max(t[2] for t in col)
    again = _one_chart(a, words, [t for t in col if t[0] not in (100.0, 0.0)] +
                       [(100.0, float(o.box[1]), x), (0.0, float(o.box[3]), x)],
                       bg, glyph_w, limit)
    if again is None:
        return c
    again.scale_from = c.scale_from
    again.notes.append(f"its 100 % and 0 % rows taken from the chart beside it (x "
                       f"{o.box[0]}-{o.box[2]} px), which read them off more of its ticks")
    return again


def lattice_agreement(pos: np.ndarray, pitches: np.ndarray) -> np.ndarray:
    """How well positions ``pos`` (n,) px sit on a lattice of each pitch of ``pitches`` (m,)
    px, whatever its phase: the Rayleigh statistic ``|mean(exp(2 pi i pos / p))|`` (1 all on
    it, about ``1/sqrt(n)`` at random; Mardia & Jupp, *Directional Statistics*, 2000, §6.3).
    Returns (m,) in 0-1.  A terminal's text sits on its cell lattice, so the pitch they agree
    on is its cell width or row height."""
    return np.abs(np.exp(2j * np.pi * pos[None, :] / pitches[:, None]).mean(axis=1))


def _cell_height(words) -> float | None:
    """The terminal's text row height, px: every line of a terminal's text sits on the row
    lattice, so the pitch (0.9-3.2 glyph heights: a font may space its rows twice its
    glyphs' height apart) whose phases the words' centre rows agree on best
    (``lattice_agreement``, as ``nvtop_samples.cell_width`` for columns).
    A pitch's halves and thirds fit its lattice as well, so of the pitches within 85 % of the
    best agreement the largest peak is taken.  None without 8 words."""
    ys = np.asarray([w.top + w.height / 2 for w in words if len(w.text) >= 2], dtype=float)
    if len(ys) < 8:
        return None
    gh = float(np.median([w.height for w in words if len(w.text) >= 2]))
    pitches = np.arange(0.9 * gh, 3.2 * gh, 0.002 * gh)
    agree = lattice_agreement(ys, pitches)
    ok = np.flatnonzero(agree >= 0.85 * agree.max())
    breaks = np.flatnonzero(np.diff(ok) > 1)
    peak = ok[breaks[-1] + 1:] if len(breaks) else ok  # the largest pitches' run
    return float(pitches[peak[np.argmax(agree[peak])]])


def _to_levels(group: list[Chart], cell_h: float) -> None:
    """Read, in place, each plotted value as the middle of the range nvtop drew it for.
    nvtop's ``nvtop_line_plot`` (src/plot.c) draws a value ``v`` on the text row
    ``rows - floor(v / (100 / rows))`` of a plot ``rows + 1`` rows high: a line on the k-th
    row from the bottom stands for ``[k, k + 1) * 100 / rows`` (the top row for 100).  The
    rows are the plot's height over the text row height ``cell_h`` (``_cell_height``), the
    one of that and its two neighbours whose lattice from the 0 % row to the 100 % row the
    line rows seen fit best; where none fits them within a fifth of a row, the values stay
    as read.  ``group``: charts of one height (one rows count for all, fitted on all their
    lines)."""
    span = float(np.median([c.box[3] - c.box[1] for c in group]))
    series = [s for c in group for s in c.series]
    vals = np.concatenate([s.values for s in series]) if series else np.array([])
    vals = vals[np.isfinite(vals)]
    if span <= 0 or not len(vals):
        return
    seen = np.unique(np.round(span * (1 - vals / 100.0)))  # px below the 100 % row
    best = None
    guess = round(span / cell_h)
    for rows in range(max(2, guess - 1), guess + 2):
        cell = span / rows
        off = np.abs(seen / cell - np.round(seen / cell)) * cell
        score = float(np.percentile(off, 80))
        if best is None or score < best[0]:
            best = (score, rows)
    if best is None or best[0] > 0.2 * span / best[1]:
        return
    rows = best[1]
    inc = 100.0 / rows
    for s in series:
        k = np.round(s.values / inc)
        s.values = np.where(np.isfinite(s.values),
                            np.where(k >= rows, 100.0, (np.clip(k, 0, rows) + 0.5) * inc),
                            np.nan)
    for c in group:
        c.rows = rows
        c.notes.append(f"each value read as the middle of its text row's range (nvtop draws "
                       f"a value on row floor(value / {inc:.1f} %) of {rows} above 0 %)")


def _share_scales(charts: list[Chart]) -> None:
    """What one chart of a picture reads holds for the others: nvtop plots every chart with
    one update interval and one column per sample, so a chart whose time ticks were not read
    takes the seconds per pixel and direction the others' ticks agree on; charts side by side
    share their rows, so each takes its row's median 100 % and 0 % rows (a chart whose 100
    and 0 ticks were both missed is otherwise off by a row).  The values and ages are
    recomputed; the chart's notes say what was borrowed.  Charts whose ticks read seconds
    per pixel apart (``SCALE_AGREE``) take those most of them agree on; where no majority
    agrees, every chart's time scale is ``"ticks disagree"`` (no stretches are judged)."""
    read = [c for c in charts if c.interval_source == "ticks"]
    if len(read) >= 2:
        med = float(np.median([r.seconds_per_px for r in read]))
        agree = [r for r in read if abs(r.seconds_per_px - med) <= SCALE_AGREE * med]
        if len(agree) * 2 <= len(read):
            span = f"{min(r.seconds_per_px for r in read):.3f}-" \
                   f"{max(r.seconds_per_px for r in read):.3f}"
            for c in charts:
                c.interval_source = "ticks disagree"
                c.notes.append(f"the charts' time ticks disagree ({span} s per pixel; nvtop "
                               f"draws every chart on one scale): their times cannot be told")
            read = []
        else:
            sec = float(np.median([r.seconds_per_px for r in agree]))
            for c in read:
                if c not in agree:
                    c.notes.append(f"its time ticks read {c.seconds_per_px:.3f} s per pixel "
                                   f"against the other charts' {sec:.3f}: taken as theirs")
                    c.newest_s_ago = 0.0
                    _borrow_scale(c, agree)
            read = agree
    for c in charts:
        if c.interval_source == "default" and read:
            c.notes = [n for n in c.notes if not n.startswith("time ticks not read")]
            _borrow_scale(c, read)

    for c in charts:
        row = [r for r in charts if abs(r.box[1] - c.box[1]) < 0.5 * (c.box[3] - c.box[1])]
        if len(row) < 3:
            continue
        y100 = int(np.median([r.box[1] for r in row]))
        y0 = int(np.median([r.box[3] for r in row]))
        x0, o100, x1, o0 = c.box
        if (y100, y0) == (o100, o0) or y0 <= y100:
            continue
        for sr in c.series:  # the row each value stood for, read on the row's scale
            level = o0 - sr.values / 100.0 * (o0 - o100)
            sr.values = np.clip((y0 - level) / (y0 - y100) * 100.0, 0, 100)
        c.box = (x0, y100, x1, y0)


#: ``_share_scales``: charts' seconds per pixel within this share of their median agree.
SCALE_AGREE = 0.08


def _borrow_scale(chart: Chart, donors: list[Chart]) -> None:
    """Give ``chart`` the seconds per pixel (median) and direction (majority) of the
    ``donors`` whose ticks were read, its series' ages recomputed."""
    chart.seconds_per_px = float(np.median([r.seconds_per_px for r in donors]))
    chart.newest_right = sum(r.newest_right for r in donors) * 2 >= len(donors)
    chart.interval_source = "ticks (another chart)"
    ago = _ages(chart.box[0], chart.box[2], chart.seconds_per_px, chart.newest_right,
                chart.newest_s_ago)
    for sr in chart.series:
        sr.seconds_ago = ago


def _colour_of(series: list[ChartSeries], metric: str) -> tuple | None:
    """The one colour the series whose legend was read as ``metric`` share (within 40 per
    channel), or None when they differ (a chart of several GPUs) or there are none."""
    pat = _MEM_WORD if metric == "mem_util" else r"^GPU\d+\s*%$"
    cs = [np.asarray(s.colour, dtype=float) for s in series
          if re.search(pat, s.legend, re.IGNORECASE)]
    if not cs or any(np.abs(c - cs[0]).max() > 40 for c in cs):
        return None
    return tuple(int(v) for v in np.median(cs, axis=0))


def _one_gpu_per_chart(a: np.ndarray, charts: list[Chart],
                       header: set[int] | None = None) -> None:
    """nvtop's layout of one chart per GPU (in device order, left to right, top to bottom,
    each with the same two colours) fills what a legend misread leaves out: a series' metric
    from its colour, a lost GPU index from the chart's place, and a ``GPU %`` line whose
    legend was not read at all, digitised in that colour.  Applied only when the read legends
    agree with that layout (each chart names at most its own place's GPU: consecutive
    indices along each row, a row cut by the picture's edge placed by the indices read in
    it; one chart naming no GPU of its place among at least two that do is a misread
    legend, renamed and said, unless the ``header`` shows the GPU it names (with a header
    that shows the place's GPU, one chart that does suffices)."""
    if len(charts) < 2:
        return
    series = [s for c in charts for s in c.series]
    util, mem = _colour_of(series, "gpu_util"), _colour_of(series, "mem_util")
    if util is None or mem is None or np.abs(np.subtract(util, mem)).max() <= 40:
        return
    rows: list[list[Chart]] = []
    for c in sorted(charts, key=lambda c: c.box[1]):
        if rows and abs(c.box[1] - rows[-1][0].box[1]) < 0.5 * (c.box[3] - c.box[1]):
            rows[-1].append(c)
        else:
            rows.append([c])
    # each row's charts are consecutive GPUs; the row's offset from the indices read in it
    # (a row cut by the picture's edge starts where its first read index says), else the
    # row before it continued
    # (a series' metric from its colour first: a legend read "nen%" is a mem% all the same)
    for s in series:
        near = {m: np.abs(np.subtract(s.colour, col)).max() for m, col in
                (("gpu_util", util), ("mem_util", mem))}
        best = min(near, key=near.get)
        if near[best] <= 40:
            s.metric = best
    # a chart's place in its row from where it stands (a chart not found leaves its slot
    # empty): the row's slots are its charts' width plus the gap between charts
    x_lo, x_hi = min(c.box[0] for c in charts), max(c.box[2] for c in charts)
    gaps = [b.box[0] - a.box[2] for r in rows for a, b in
            itertools.pairwise(sorted(r, key=lambda c: c.box[0]))]
    gap = float(np.median(gaps)) if gaps else 0.0
    places: list[tuple[int, Chart]] = []
    start, agree = 0, 0
    for r in rows:
        r = sorted(r, key=lambda c: c.box[0])
        pitch = float(np.median([c.box[2] - c.box[0] for c in r])) + gap
        slots = max(len(r), round((x_hi - x_lo + gap) / pitch))
        cols = [round((c.box[0] - x_lo) / pitch) for c in r]
        if len(set(cols)) < len(cols):
            return  # not nvtop's one-GPU-per-chart layout as read
        named = [{s.gpu for s in c.series if s.gpu is not None} for c in r]
        offs = [g - j for j, gs in zip(cols, named, strict=True) for g in gs]
        if offs:  # the row's offset: one that puts its charts on GPUs the header shows,
            # then the one most of its read indices give, then the rows before continued

            def rank_of(o, offs=offs, cols=cols, go_on=start):
                shown = not header or all(o + j in header for j in cols)
                return (shown, offs.count(o), o == go_on, -o)

            start = max({*offs, start}, key=rank_of)
            agree += offs.count(start)
        places += [(start + j, c) for j, c in zip(cols, r, strict=True)]
        start += slots
    if len({p for p, _c in places}) < len(places) or min(p for p, _c in places) < 0:
        return
    # at most one chart naming no GPU of its place, among at least two that do: that
    # chart's index, and any second index a chart's legends give, is a misread ('GPU8')
    lost = [c for rank, c in places if any(s.gpu is not None for s in c.series)
            and all(s.gpu != rank for s in c.series)]
    if len(lost) > 1 or agree < (1 if header else 2):  # (the header confirms the places)
        return  # not nvtop's one-GPU-per-chart layout as read
    if header and any(s.gpu in header or rank not in header for rank, c in places
                      for s in c.series if s.gpu is not None and s.gpu != rank):
        return  # the header shows that GPU: devices hidden in nvtop's setup, not a misread
    for rank, c in places:
        wrong = sorted({s.gpu for s in c.series if s.gpu is not None and s.gpu != rank})
        for s in c.series:
            if s.gpu is not None and s.gpu != rank:
                s.gpu = None
        if wrong:
            c.notes.append(f"legend read as GPU {', '.join(map(str, wrong))} at GPU {rank}'s "
                           f"place among the charts (one chart per GPU, in order): taken as "
                           f"GPU {rank}")
    for rank, c in places:
        for s in c.series:
            if s.gpu is None:
                s.gpu = rank
        if not any(s.metric == "gpu_util" for s in c.series):
            x0, y100, x1, y0 = c.box
            level = _levels(a, util, x0, x1, y100 - 4, y0 + 4)
            ago = _ages(x0, x1, c.seconds_per_px, c.newest_right, c.newest_s_ago)
            vals = np.clip((y0 - level) / max(1.0, y0 - y100) * 100.0, 0, 100)
            c.series.insert(0, ChartSeries(f"GPU{rank} %", rank, "gpu_util", util, ago, vals))
            c.notes.append(f"GPU{rank} %'s legend not read: its line is read in the colour of "
                           f"the other charts' GPU % (nvtop's one chart per GPU, chart {rank})")


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
    slope, icpt = (y0 - y100) / -100.0, y0
    # the strip's reading hangs on where it is cut: a few pixels lower or higher make "0s"
    # read as "s"; where the ticks do not agree, the strip is cut again
    for nth, shift in ((0, 0), (0, 3), (0, -3), (0, 6), (1, 0)):
        sec_px, source, newest_right, edge_ago = _time_scale(
            _tick_words(a, x_left, x_right, y0 + shift, words, nth), x_left, x_right, y0)
        if source == "ticks":
            break
    chart = Chart((x_left, int(y100), x_right, int(y0)), sec_px, source, newest_right,
                  newest_s_ago=edge_ago, scale_from=scale_from)
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
    legends = _legends(a, words, x_left, x_right, y100, y0, bg, glyph_w)
    if not legends:
        chart.notes.append("no legend read: the series are not named")
        return chart
    colours = [c for _l, c, _b in legends]
    mono = len({tuple(c) for c in colours}) < len(colours) or any(
        _saturation(c) < 40 for c in colours)
    ago = _ages(x_left, x_right, sec_px, newest_right, edge_ago)
    # the legend words are drawn in their series' colours: no level is read off them
    masked = a.copy()
    covered = np.zeros(len(ago), dtype=bool)  # columns a legend hides part of
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
    chart.legend_boxes = boxes
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
    if mono and len(chart.series) == 2 and chart.series[0].gpu == chart.series[1].gpu:
        # one colour for both: each line followed on its own through the chart, named later
        # by the header's GPU % and MEM (neither is always the upper one: nvtop's mem% line
        # runs above its GPU % line at times, as on picture 07)
        tracks = _two_lines(masked, colours[0], x_left, x_right, int(y100) - 4, int(y0) + 4,
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


def _ages(x0: int, x1: int, seconds_per_px: float, newest_right: bool,
          edge_s_ago: float = 0.0) -> np.ndarray:
    """Seconds before the newest sample of each pixel column ``x0..x1`` of a chart whose
    newest edge is ``edge_s_ago`` s old."""
    xs = np.arange(x0, x1 + 1)
    return edge_s_ago + ((x1 - xs) * seconds_per_px if newest_right else
                         (xs - x0) * seconds_per_px)


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


def name_lines(charts: list[Chart], header: dict[int, dict]) -> list[str]:
    """Name, in place, the two lines of each monochrome chart (``Chart.monochrome ==
    "unnamed"``) by the header of the picture's moment: nvtop's newest chart column is that
    moment, so the line nearer the GPU's ``util_pct`` there is ``GPU %`` and the other its
    ``mem%`` (``mem_used_mib / mem_total_mib``).  Only where the header's two values are at
    least ``NAME_APART`` points apart and the pairing fits within ``NAME_TOL`` points each.
    Where the header cannot tell, by how the lines move: memory in use steps only when
    memory is allocated or freed, so a line changing level at least ``STEADY_FACTOR`` times
    as often as the other, plus ``STEADY_MIN``, is GPU %; else the chart stays unnamed (left
    out of the stretches) and a note says why.

    Args:
        charts: ``read_charts``' charts.
        header: ``{gpu: values}`` read from the header (``GpuReading.values``).

    Returns:
        Notes, one per chart named or left unnamed.
    """
    notes = []
    for c in charts:
        if c.monochrome != "unnamed":
            continue
        gpu = c.series[0].gpu
        who = f"GPU {gpu}'s" if gpu is not None else \
            f"the chart at x {c.box[0]}-{c.box[2]} px (its GPU not read):"
        v = header.get(gpu, {}) if gpu is not None else {}
        util = v.get("util_pct", np.nan)
        mem = 100 * v.get("mem_used_mib", np.nan) / v.get("mem_total_mib", np.nan)
        newest = []
        for sr in c.series:
            order = np.argsort(sr.seconds_ago)
            vals = sr.values[order][np.isfinite(sr.values[order])]
            newest.append(float(vals[0]) if len(vals) else np.nan)
        why = None
        if not (np.isfinite(util) and np.isfinite(mem) and all(np.isfinite(newest))):
            why = "the header's GPU % and MEM or the lines' newest levels not read"
        else:
            fits = [max(abs(newest[0] - util), abs(newest[1] - mem)),
                    max(abs(newest[1] - util), abs(newest[0] - mem))]
            k = int(np.argmin(fits))
            if abs(util - mem) < NAME_APART or fits[k] > NAME_TOL:
                why = (f"the header's GPU % ({util:.0f}) and MEM ({mem:.0f} %) are too close "
                       f"or fit neither line's newest level ({newest[0]:.0f}, "
                       f"{newest[1]:.0f} %)")
        if why is None:
            how = (f"by the header: the one at {newest[k]:.0f} % at the newest column is "
                   f"GPU % (header {util:.0f} %), the other mem% (header {mem:.0f} %)")
        else:
            moves = [_level_changes(sr.values[np.argsort(sr.seconds_ago)]) for sr in c.series]
            k = int(np.argmax(moves))
            # (the header's GPU % still vetoes: the busier line must end where it reads)
            veto = np.isfinite(util) and np.isfinite(newest[k]) and \
                abs(newest[k] - util) > NAME_TOL
            if veto or moves[k] < STEADY_FACTOR * moves[1 - k] + STEADY_MIN:
                _agreed_only(c)
                also = (f"the line that moves more ends at {newest[k]:.0f} %, not the "
                        f"header's GPU % ({util:.0f})") if veto else \
                    f"the lines change level alike ({moves[0]} and {moves[1]} times)"
                notes.append(f"{who} monochrome lines not named: {why}, and {also}; its GPU % "
                             f"is given only where the two lines run together")
                continue
            how = (f"by how they move ({why}): the one that changes level {moves[k]} times "
                   f"is GPU %, the one that changes {moves[1 - k]} times mem% (memory in use "
                   f"changes only when memory is allocated or freed)")
        c.series[k].metric, c.series[1 - k].metric = "gpu_util", "mem_util"
        c.series[k].legend, c.series[1 - k].legend = f"GPU{gpu} %", f"GPU{gpu} mem%"
        c.series.sort(key=lambda sr: sr.metric != "gpu_util")
        c.monochrome = "named"
        notes.append(f"{who} monochrome lines named {how}")
    return notes


def _level_changes(values: np.ndarray) -> int:
    """How often a line (values oldest to newest, NaN unseen) changes level by more than
    ``AGREE_PTS`` between consecutive values seen."""
    v = values[np.isfinite(values)]
    return int((np.abs(np.diff(v)) > AGREE_PTS).sum())


def _agreed_only(chart: Chart) -> None:
    """An unnamed monochrome chart's values where its two lines run together (within
    ``AGREE_PTS``: there either is either series), NaN where they part; the series become
    ``gpu_util`` and ``mem_util`` in legend order, the chart stays ``unnamed``."""
    a, b = chart.series[0].values, chart.series[1].values
    with np.errstate(invalid="ignore"):
        same = np.abs(a - b) <= AGREE_PTS
    both = np.where(same, (a + b) / 2, np.nan)
    for sr, metric in zip(chart.series, ("gpu_util", "mem_util"), strict=True):
        sr.values, sr.metric = both.copy(), metric


#: ``_agreed_only``: two lines within this many points are one level.
AGREE_PTS = 3.0
#: ``name_lines``: the header's GPU % and MEM % must be this many points apart to name lines.
NAME_APART = 15.0
#: ``name_lines``: each line's newest level within this many points of its header value.
NAME_TOL = 12.0
#: ``name_lines`` without the header: the GPU % line changes level at least this many times
#: the mem% line's changes plus ``STEADY_MIN`` (memory in use steps only when memory is
#: allocated or freed; utilization follows the work: picture 08, 5 changes against 1).
STEADY_FACTOR = 2
STEADY_MIN = 2


def _levels(a, colour, x0, x1, y0, y1) -> np.ndarray:
    """Per pixel column of ``x0..x1`` the mean row of the pixels near ``colour`` that lie on
    a horizontal run (a pixel of the colour within 3 px left or right), NaN where none."""
    horiz, y0 = _horizontal(a, colour, x0, x1, y0, y1)
    rows = np.arange(y0, y0 + horiz.shape[0], dtype=float)[:, None]
    n = horiz.sum(axis=0)
    with np.errstate(invalid="ignore"):
        return np.where(n > 0, (horiz * rows).sum(axis=0) / np.maximum(n, 1), np.nan)
