"""The plain ``nvidia-smi`` table: the box-drawn summary everyone pastes.

One table is one instant.  Each GPU takes two rows of three cells (a third row on drivers that
print ``MIG M.``)::

    Tue Mar 12 10:11:12 2024
    +-----------------------------------------------------------------------------------------+
    | NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
    |-----------------------------------------+------------------------+----------------------+
    | GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
    | Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
    |                                         |                        |               MIG M. |
    |=========================================+========================+======================|
    |   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |
    | N/A   33C    P0             70W /  700W |       4MiB /  81559MiB |      0%      Default |
    |                                         |                        |             Disabled |
    +-----------------------------------------+------------------------+----------------------+

Drivers before ~510 print the same cells narrower (``Tesla V100-SXM2...  On   |``), R610 and
later name ``KMD Version`` / ``CUDA UMD Version`` in the banner, Windows prints ``WDDM``/``TCC``
for the persistence mode; a box redrawn with Unicode lines (``│ ─ ╪``) is read as ASCII.  A ``MIG devices`` section and a
``Processes`` section may follow; their rows are counted, not read as GPUs (a MIG instance's
row carries only its memory).  ``N/A`` (and ``ERR!``, ``[N/A]``) is a blank, never 0.

Read per GPU: ``gpu_util`` (GPU-Util %), ``mem_used_bytes`` (Memory-Usage used, MiB x 2**20),
``power_w`` (Pwr:Usage), ``gpu_temp_c`` (Temp); device facts: the name as printed (cut with ``...`` where the
table is too narrow), the power cap (``power_limit_w``), the memory size (``mem_total_bytes``)
and the bus id.  The fan and performance state are printed too but are not sample columns.

Time: the line above the table (``ctime`` form, the host's local time, no zone) dates the
instant, read in the caller's zone; a table without it is placed like the other untimed
formats (``data.import_table``).  Several tables in one text (``nvidia-smi -l``) are several
instants.

Nothing here imports other tealeaves rooms (``data.wallclock`` reads the date lines' local
time); ``data.import_table`` calls :func:`parse_tables`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, tzinfo

from tealeaves.data.wallclock import LocalClock

#: The banner line of a table: what :func:`is_table` looks for.
RE_BANNER = re.compile(r"NVIDIA-SMI\s+\d+\.\d+.*(?:Driver|KMD) Version", re.ASCII)
#: Box drawing some terminals and pastes put in place of nvidia-smi's ASCII box.
_BOX = str.maketrans({"│": "|", "┃": "|", "║": "|", "─": "-", "━": "-", "═": "=",
                      "┼": "+", "╪": "+", "┿": "+", "╋": "+", "├": "|", "┤": "|", "┌": "+",
                      "┐": "+", "└": "+", "┘": "+", "┬": "+", "┴": "+", "╞": "|", "╡": "|"})
#: The ``ctime`` date nvidia-smi prints above the table (``Tue Mar 12 10:11:12 2024``).
_RE_DATE = re.compile(r"^\s*(?:[A-Z][a-z]{2})\s+([A-Z][a-z]{2})\s+(\d{1,2})\s+"
                      r"(\d\d):(\d\d):(\d\d)\s+(\d{4})\s*$", re.ASCII)
_MONTHS = {m: i + 1 for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul",
                                           "Aug", "Sep", "Oct", "Nov", "Dec"))}
#: First row of a GPU: index, name, persistence mode (or Windows' driver model).
_RE_ROW1 = re.compile(r"^\s*(\d{1,3})\s+(.+?)\s+(On|Off|WDDM|TCC|MCDM|N/A)\s*$", re.ASCII)
_RE_BUS = re.compile(r"^\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])"
                     r"\s+(?:On|Off|N/A)\s*$", re.ASCII)
#: Second row, first cell: fan, temperature, performance state, power usage / cap.
_RE_ROW2 = re.compile(
    r"^\s*(?P<fan>\d+%|N/A|ERR!|\[N/A\])\s+(?P<temp>\d+C|N/A|ERR!)\s+(?P<perf>P\d+|N/A|ERR!)"
    r"(?:\s+\S+)?\s+(?P<pw>\d+(?:\.\d+)?W|N/A|ERR!)\s*/\s*(?P<cap>\d+(?:\.\d+)?W|N/A|ERR!)\s*$",
    re.ASCII)
_RE_MEM = re.compile(r"^\s*(?P<used>\d+|N/A)\s*MiB\s*/\s*(?P<total>\d+|N/A)\s*MiB\s*$|"
                     r"^\s*N/A\s*/\s*N/A\s*$", re.ASCII)
_RE_UTIL = re.compile(r"^\s*(?P<util>\d+%|N/A|ERR!)\s+(?P<mode>[A-Za-z][A-Za-z. _]*)\s*$",
                      re.ASCII)
#: A MIG devices row's first cell: GPU, GI id, CI id, MIG device.
_RE_MIG_ROW = re.compile(r"^\s*\d+\s+\d+\s+\d+\s+\d+\s*$", re.ASCII)
#: A process row: GPU, (GI, CI,) PID, type (C, G, C+G), name.
_RE_PROCESS_ROW = re.compile(r"^\s*\d+\s+(?:(?:N/A|\d+)\s+(?:N/A|\d+)\s+)?\d+\s+"
                             r"(?:C|G|C\+G|M|M\+C)\s+\S", re.ASCII)
MIB = 2**20
#: The sample columns a GPU row of the table gives (NaN where it prints N/A).
READINGS = ("gpu_util", "mem_used_bytes", "power_w", "gpu_temp_c")


@dataclass
class TableRead:
    """What :func:`parse_tables` read.

    Attributes:
        records: one dict per GPU per table: ``gpu``, ``_line`` (the GPU's first row),
            ``gpu_util`` / ``mem_used_bytes`` / ``power_w`` (float, ``math.nan`` for a blank,
            with ``blank`` naming those), ``_table`` (0-based table number) and, where the
            table was dated, ``timestamp`` (UTC epoch s).
        devices: one dict per GPU (the last table's facts): ``gpu``, ``name``,
            ``power_limit_w``, ``mem_total_bytes``, ``pci_bus_id``.
        skipped: ``(line, reason)`` of rows that are neither structure nor a GPU.
        tables: tables read; ``dated``: how many had their date line.
        mig_rows, process_rows: rows of the MIG devices and Processes sections (counted, not
            read).
        mig_enabled: GPUs whose ``MIG M.`` cell says ``Enabled``.
    """

    records: list[dict] = field(default_factory=list)
    devices: dict[int, dict] = field(default_factory=dict)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    tables: int = 0
    dated: int = 0
    mig_rows: int = 0
    process_rows: int = 0
    mig_enabled: set = field(default_factory=set)


def is_table(line: str) -> bool:
    """Whether ``line`` is an ``nvidia-smi`` table's banner (``| NVIDIA-SMI 550.54.15 ...
    Driver Version: ...``)."""
    return bool(RE_BANNER.search(line))


def _cells(line: str) -> list[str] | None:
    """The cells of a ``| a | b | c |`` row, or None for a rule or a line outside a box."""
    s = line.strip()
    if not (s.startswith("|") and s.endswith("|")) or len(s) < 3:
        return None
    inner = s[1:-1]
    if inner and set(inner) <= set("=-+ "):
        return None
    return [c for c in inner.split("|")]


def _watts(tok: str) -> float:
    return float(tok[:-1]) if tok.endswith("W") and tok[:-1].replace(".", "", 1).isdigit() \
        else math.nan


def _date(line: str, clock: LocalClock) -> float | str | None:
    """The epoch s of a date line (``Mon Dec  7 16:24:10 2026``), the reason it is refused
    (a local time the zone's clocks skipped), or None for another line."""
    m = _RE_DATE.match(line)
    if not m or m.group(1) not in _MONTHS:
        return None
    try:
        dt = datetime(int(m.group(6)), _MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)),
                      int(m.group(4)), int(m.group(5)))
        ts = clock.epoch(dt)
    except (ValueError, OverflowError, OSError):
        return None
    return clock.gap_reason(dt) if ts is None else ts


def parse_tables(text: str, zone: tzinfo | LocalClock) -> TableRead:
    """Read every ``nvidia-smi`` table in ``text``.

    Args:
        text: plain text (``data.pasted.normalise``-d).
        zone: the zone of the date printed above a table (nvidia-smi prints local time), or
            the file's ``data.wallclock.LocalClock`` (times read in order around clock
            changes; a date the zone's clocks skipped is refused into ``skipped``).

    Returns:
        A :class:`TableRead`.  Never raises on content: a GPU row that does not parse is
        recorded in ``skipped`` with its line number.
    """
    reader = _TableReader(zone if isinstance(zone, LocalClock) else LocalClock(zone))
    boxed = any(c in text for c in "│┃║")
    for n, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if boxed:
            line = line.translate(_BOX)
        reader.line(n, line)
    return reader.out


class _TableReader:
    """:func:`parse_tables` line after line: what it has read (``out``) and where it is: the
    date line waiting for its table, the table (``table``, -1 before the first) and its
    section (None before a GPU header, ``"gpus"``, ``"mig"``, ``"processes"``), the GPU whose
    rows are being read (``gpu``, its ``row`` read so far) and the last GPU read whole."""

    def __init__(self, clock: LocalClock) -> None:
        self.out = TableRead()
        self.clock = clock
        self.pending_date: float | None = None
        self.table = -1
        self.section: str | None = None
        self.gpu: dict | None = None
        self.row = 0
        self.stamp_of_table: float | None = None
        self.last = -1

    def line(self, n: int, line: str) -> None:
        """Read line ``n`` (its box drawn in ASCII)."""
        out = self.out
        stamp = _date(line, self.clock)
        if isinstance(stamp, str):
            out.skipped.append((n, stamp))
            return
        if stamp is not None:
            self.pending_date = stamp
            return
        if is_table(line):
            self.table += 1
            out.tables += 1
            self.section = None
            self.gpu = None
            if self.pending_date is not None:
                out.dated += 1
            self.stamp_of_table = self.pending_date
            self.pending_date = None
            return
        cells = _cells(line)
        if cells is None:
            return
        joined = " ".join(c.strip() for c in cells).strip()
        if not self._in_gpus(cells, joined):
            return
        first = _RE_ROW1.match(cells[0]) if len(cells) >= 3 else None
        if first is not None and _RE_BUS.match(cells[1]):
            g = int(first.group(1))
            self.gpu = {"gpu": g, "_line": n, "_table": self.table}
            if self.stamp_of_table is not None:
                self.gpu["timestamp"] = self.stamp_of_table
            out.devices[g] = {"gpu": g, "name": first.group(2).strip(),
                              "pci_bus_id": _RE_BUS.match(cells[1]).group(1),
                              "power_limit_w": math.nan, "mem_total_bytes": math.nan}
            self.row = 1
            return
        if self.gpu is None or self.row != 1:
            if (self.row == 2 and len(cells) >= 3 and not cells[0].strip()
                    and not cells[1].strip()):
                self.row = 3  # the MIG M. row under a GPU: its MIG mode
                if cells[2].strip() == "Enabled":
                    out.mig_enabled.add(self.last)
                return
            if any(c.strip() for c in cells):
                out.skipped.append((n, f"not a GPU row of the table: {joined[:60]}"))
            return
        self.row = 2
        self._second_row(n, cells, joined)

    def _in_gpus(self, cells: list[str], joined: str) -> bool:
        """Whether a row of cells is read as a GPU's row: False for the section headers and
        the rows of the MIG devices and Processes sections (counted), and rows outside a
        table's GPU section."""
        out = self.out
        if joined.startswith("MIG devices"):
            self.section, self.gpu = "mig", None
            return False
        if joined.startswith("Processes"):
            self.section, self.gpu = "processes", None
            return False
        if self.table < 0:
            return False
        if self.section in (None, "gpus") and (
                "Persistence-M" in joined or "TCC/WDDM" in joined
                or "Pwr:Usage/Cap" in joined or "MIG M." == joined
                or "Compute M." in joined):
            self.section = "gpus"
            return False
        if self.section == "mig":
            if _RE_MIG_ROW.match(cells[0]):
                out.mig_rows += 1
            return False
        if self.section == "processes":
            if _RE_PROCESS_ROW.match(joined):
                out.process_rows += 1
            return False
        return self.section == "gpus"

    def _second_row(self, n: int, cells: list[str], joined: str) -> None:
        """A GPU's second row (fan, temperature, perf, power / memory / GPU-Util): its
        readings and device facts, the GPU's record done; a cell that does not parse refuses
        the GPU's row into ``skipped``."""
        out, gpu = self.out, self.gpu
        second = _RE_ROW2.match(cells[0]) if len(cells) >= 3 else None
        mem = _RE_MEM.match(cells[1]) if len(cells) >= 3 else None
        util = _RE_UTIL.match(cells[2]) if len(cells) >= 3 else None
        if second is None or mem is None or util is None:
            bad = ("fan/temp/perf/power" if second is None else
                   "memory" if mem is None else "GPU-Util")
            why = f"GPU {gpu['gpu']}: its {bad} cell does not parse: {joined[:60]}"
            out.skipped.append((n, why))
            self.gpu = None
            return
        u = util.group("util")
        used = mem.group("used") if mem.group("used") else "N/A"
        gpu["gpu_util"] = float(u[:-1]) if u.endswith("%") else math.nan
        gpu["mem_used_bytes"] = float(used) * MIB if used.isdigit() else math.nan
        gpu["power_w"] = _watts(second.group("pw"))
        temp = second.group("temp")
        gpu["gpu_temp_c"] = float(temp[:-1]) if temp.endswith("C") else math.nan
        gpu["blank"] = [c for c in READINGS if math.isnan(gpu[c])]
        dev = out.devices[gpu["gpu"]]
        dev["power_limit_w"] = _watts(second.group("cap"))
        total = mem.group("total") if mem.group("total") else "N/A"
        dev["mem_total_bytes"] = float(total) * MIB if total.isdigit() else math.nan
        out.records.append(gpu)
        self.last = gpu["gpu"]
        self.gpu = None
