"""Each GPU monitor's text parsed by its own layout: which tool a screen shows, and each GPU's
printed values.

``nvidia-smi`` (its default table), ``nvidia-smi dmon``, ``nvitop`` (its device panel),
``gpustat``, ``nvtop`` (``data.screen.nvtop``) and tealeaves' own report are told apart by the
marks they print (:func:`which_tool`); :func:`parse_lines` reads OCR lines with their
confidences (``data.screen.read``), :func:`parse_text` the tool's text as printed, which is how
the test pictures' printed values are known.
"""

from __future__ import annotations

import re

from tealeaves.data.screen.nvtop import is_nvtop, parse_nvtop
from tealeaves.data.screen.values import (
    _NUM,
    GpuReading,
    _fields_conf,
    _n,
)

#: The tools recognised, by the marks they print.
TOOLS: tuple[str, ...] = ("nvidia-smi", "nvidia-smi dmon", "nvitop", "nvtop", "gpustat",
                          "tealeaves report", "tealeaves dashboard")

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
