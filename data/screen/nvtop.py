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

import re

import numpy as np

from tealeaves.data.screen.nvtop_chart import Chart
from tealeaves.data.screen.nvtop_frame import _background
from tealeaves.data.screen.nvtop_plot import _glyph_width, _one_chart, _y_ticks
from tealeaves.data.screen.nvtop_scales import (
    _cell_height,
    _one_gpu_per_chart,
    _share_scales,
    _to_levels,
)
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

_CODEC_BAR = re.compile(r"(ENC|DEC)\s*\S.{0,40}?(100|\d{1,2})\s*%\s*[\]|)}J1l]")


def is_nvtop(text: str) -> bool:
    """Whether ``text`` carries nvtop's header marks: a ``Device N [name]`` line with its
    ``PCIe GEN`` or a clocks line ``GPU ...MHz MEM ...MHz``."""
    return bool(re.search(r"Dev[il1]ce\s*" + _NUM + r"{0,2}\s*\[", text)) and bool(
        re.search(r"PC[Il1|]e\s*[G6]EN|" + _NUM + r"+" + _MHZ + r"\s*MEM\s*" + _NUM + r"+" + _MHZ,
                  text))


def parse_nvtop(lines: list[tuple]) -> list[GpuReading]:
    """Each GPU's header values from nvtop's lines, ``(text, confidence, box, scores)``
    tuples (as ``tools._boxed`` gives).

    A device line opens one GPU per ``Device N [...]`` on it (left to right); the next clock
    line and bar line give their values to those GPUs in the same order.  Values (units in
    ``values.FIELDS``): ``pcie_gen``, ``pcie_width``, ``pcie_rx_bytes_per_s``,
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


def read_charts(img, words, header: set[int] | None = None) -> list[Chart]:
    """Digitise nvtop's charts in ``img`` (a PIL image) given Tesseract's ``words``
    (``grid.Word``, boxes in the picture's pixels).

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
