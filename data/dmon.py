"""``nvidia-smi dmon`` files, read a chunk of lines at a time, each chunk as NumPy columns.

A dmon log runs for days (8 GPUs at 1 Hz is some 5 MB an hour), so its import must cost what
its lines cost and hold no more than a chunk of them.  ``data.dmon_passes.DmonImport`` reads a
file (or a text) in passes over its lines, every pass the same parse (this module's):

1. the *survey* pass finds what a row's time needs from the whole file: how many instants
   the rows without a time make (they end at the file's modification time), how many times a
   ``-o T`` clock rolled past midnight (its date counts back from the last row), whether rows
   without a time sit among rows with one (refused) and, per hour of rows, how many there are
   (a handful of rows a day away from the rest are strays, as ``import_common._refusals``
   says); a second survey pass does the hours when the first could not time its rows yet;
2. the *final* pass times every row, refuses what the survey found implausible, and hands
   each chunk over as a ``conform()``-ed sample frame (``DmonImport.frames``), to be
   stored as it comes or joined (``DmonImport.load``).

A chunk's rows are parsed column by column: each distinct token of a column is read once by
the same scalar code (``import_common._number``/``_scaled``/``_gpu_index``), and a row with
any bad token is read again by the scalar row reader for its message.  MIG rows (``gi``/``ci``
columns) are read row by row.

Memory: one chunk of lines and its columns, plus a few numbers per hour of rows; time: linear
in the lines (``python -m tealeaves.app.bench.import_size`` measures both).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo

import numpy as np
import pandas as pd

from tealeaves.data.import_common import (
    _UNTIMED_AMONG_TIMED,
    BLANK,
    _anchor,
    _check_header,
    _Cycles,
    _gpu_index,
    _number,
    _scaled,
    _short,
)
from tealeaves.data.metrics import smi_dmon_columns
from tealeaves.data.schema import (
    FUTURE_SLACK_S,
    METRIC_BY_NAME,
    mig_entity,
)
from tealeaves.data.wallclock import LocalClock

#: dmon column -> (schema column, factor), from the metric table (``data.metrics``, the rows'
#: ``smi_dmon``).  See ``data.importers``' module docstring for the units.
DMON_COLUMNS: dict[str, tuple[str, float]] = smi_dmon_columns()
#: Width of the buckets the survey counts rows in, s: under ``FUTURE_SLACK_S``, so a gap of
#: more than a day between rows is a gap between buckets.
_BUCKET_S = 3600.0
_RE_TIME = re.compile(r"(\d\d):(\d\d):(\d\d)", re.ASCII)
_RE_DATE = re.compile(r"\d{8}", re.ASCII)


def is_dmon_header(toks: Sequence[str]) -> bool:
    """Whether the lower-cased words of a ``#`` line are dmon's header: ``gpu`` first (after
    ``date`` and ``time`` with ``-o DT``), no word twice, and at least one other word a dmon
    column tealeaves knows (``#Setting the GPU core Clock ...`` is not)."""
    rest = list(toks)
    for lead in ("date", "time"):
        if rest and rest[0] == lead:
            rest = rest[1:]
    return (len(rest) >= 2 and rest[0] == "gpu" and "pid" not in rest
            and len(set(toks)) == len(toks)
            and any(t in DMON_COLUMNS or t in ("gi", "ci") for t in rest[1:]))


class NotStreamable(Exception):
    """A file that must be read whole (a paste to undo, not UTF-8): the caller reads it as
    text instead.  Raised by the survey pass only, before anything is handed over."""


# --------------------------------------------------------------------------- one chunk

@dataclass
class Part:
    """A chunk's rows as columns, each (n,): ``gpu``, ``line`` (1-based), ``tod`` (seconds
    into the day, -1: no time), ``day`` (date ordinal, -1: no date), ``instant`` (-1: timed),
    ``uuid`` (object), ``cols[metric]`` float64 (NaN: missing or blank), ``blank[metric]``
    bool (the source left it blank)."""

    gpu: np.ndarray
    line: np.ndarray
    tod: np.ndarray
    day: np.ndarray
    instant: np.ndarray
    uuid: np.ndarray
    cols: dict[str, np.ndarray] = field(default_factory=dict)
    blank: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.gpu)

    @classmethod
    def join(cls, parts: list[Part]) -> Part:
        """The rows of ``parts`` in order, one column set (NaN / False where a part lacks a
        metric)."""
        if not parts:
            z = np.zeros(0, dtype=np.int64)
            return cls(z, z, z, z, z, np.zeros(0, dtype=object))
        ints = {k: np.concatenate([getattr(p, k) for p in parts])
                for k in ("gpu", "line", "tod", "day", "instant", "uuid")}
        out = cls(**ints)
        for col in sorted({c for p in parts for c in p.cols}):
            out.cols[col] = np.concatenate([p.cols.get(col, np.full(p.n, np.nan))
                                            for p in parts])
            out.blank[col] = np.concatenate([p.blank.get(col, np.zeros(p.n, bool))
                                             for p in parts])
        return out


def _read_unique(column: np.ndarray, read: Callable[[str], object]
                 ) -> tuple[np.ndarray, np.ndarray, list]:
    """``read`` each distinct token of ``column`` (object (n,)) once: ``(codes (n,), bad
    (k,) bool, values [k])`` where ``bad[j]`` says ``read`` raised ValueError on token j."""
    codes, uniq = pd.factorize(column, sort=False)
    values: list = []
    bad = np.zeros(len(uniq), dtype=bool)
    for j, tok in enumerate(uniq):
        try:
            values.append(read(tok))
        except ValueError:
            bad[j] = True
            values.append(None)
    return codes, bad, values


def _tod(tok: str) -> int:
    m = _RE_TIME.fullmatch(tok)
    if not m:
        raise ValueError(f"bad time {tok!r}")
    hh, mm, ss = (int(x) for x in m.groups())
    if not (0 <= hh < 24 and 0 <= mm < 60 and 0 <= ss < 61):
        raise ValueError(f"bad time {tok!r}")
    return hh * 3600 + mm * 60 + min(ss, 59)


def _day(tok: str) -> int:
    if not _RE_DATE.fullmatch(tok):
        raise ValueError(f"bad date {tok!r}")
    return date(int(tok[:4]), int(tok[4:6]), int(tok[6:])).toordinal()


class DmonParser:
    """Reads dmon lines chunk after chunk, carrying what a line needs of the lines before it:
    the header in force, the instants of rows without a time (``import_common._Cycles``)
    and the compute instance read for each MIG GPU instance."""

    def __init__(self) -> None:
        self.names: list[str] | None = None
        self.comma = False
        self.cycles = _Cycles()
        self.cis: dict[int, str] = {}

    def parse(self, first: int, lines: Sequence[str]) -> tuple[Part, list[tuple[int, str]]]:
        """The rows of ``lines`` (numbered from ``first``) and the lines skipped
        ``[(line, reason)]``.

        Raises:
            import_common._HeaderError: a header names a field twice.
        """
        skipped: list[tuple[int, str]] = []
        parts: list[Part] = []
        seg: list[tuple[int, str]] = []
        for n, line in enumerate(lines, start=first):
            s = line.strip()
            if not s:
                continue
            if s[0] == "#":
                if seg:
                    parts.append(self._segment(seg, skipped))
                    seg = []
                self._header(n, s, skipped)
            elif self.names is None:
                skipped.append((n, f"not data (no dmon header yet): {_short(s)}"))
            else:
                seg.append((n, s))
        if seg:
            parts.append(self._segment(seg, skipped))
        return Part.join(parts), skipped

    def _header(self, n: int, s: str, skipped: list[tuple[int, str]]) -> None:
        body = s.lstrip("#").strip()
        self.comma = "," in body
        toks = [t.strip().lower() for t in (body.split(",") if self.comma else body.split())]
        if len(set(toks)) != len(toks) and is_dmon_header(list(dict.fromkeys(toks))):
            _check_header(toks, n)
        if is_dmon_header(toks):
            self.names = toks
            self.cycles.new_block()
        elif "idx" not in toks:  # not the units line: another command's message
            skipped.append((n, f"comment line, not a dmon header: {_short(s)}"))

    def _segment(self, seg: list[tuple[int, str]], skipped: list[tuple[int, str]]) -> Part:
        """The rows of data lines under one header."""
        names = self.names
        k = len(names)
        if self.comma:
            toks = [[t.strip() for t in s.split(",")] for _, s in seg]
        else:
            toks = [s.split() for _, s in seg]
        good = []
        for i, t in enumerate(toks):
            if len(t) == k:
                good.append(i)
            else:
                n, s = seg[i]
                skipped.append((n, f"expected {k} fields, got {len(t)}: {_short(s)}"))
        if "gi" in names or "ci" in names:  # MIG: row by row (a compute instance per GPU one)
            recs = [r for i in good if (r := self._row(toks[i], *seg[i], skipped)) is not None]
            return _part_of(recs)
        return self._columns([seg[i] for i in good], [toks[i] for i in good], skipped)

    def _columns(self, seg: list[tuple[int, str]], toks: list[list[str]],
                 skipped: list[tuple[int, str]]) -> Part:
        names = self.names
        m = len(toks)
        arr = np.empty((m, len(names)), dtype=object)
        if m:
            arr[:] = toks
        err = np.zeros(m, dtype=bool)

        def column(name: str, read: Callable[[str], object]) -> tuple[np.ndarray, list]:
            codes, bad, values = _read_unique(arr[:, names.index(name)], read)
            err[:] |= bad[codes]
            return codes, values

        codes, values = column("gpu", _gpu_index)
        gpu = np.array([-1 if v is None else v for v in values], dtype=np.int64)[codes] \
            if m else np.zeros(0, dtype=np.int64)
        cols: dict[str, np.ndarray] = {}
        blank: dict[str, np.ndarray] = {}
        for col, (target, factor) in DMON_COLUMNS.items():
            if col not in names:
                continue
            codes, values = column(col, lambda t, c=target, f=factor: _scaled(c, _number(t), f))
            v = np.array([math.nan if x is None else float(x) for x in values])
            cols[target] = v[codes] if m else np.zeros(0)
            b = np.array([x is BLANK for x in values], dtype=bool)
            blank[target] = b[codes] if m else np.zeros(0, dtype=bool)
        tod = np.full(m, -1, dtype=np.int64)
        day = np.full(m, -1, dtype=np.int64)
        if "time" in names:
            codes, values = column("time", _tod)
            tod = np.array([-1 if v is None else v for v in values], dtype=np.int64)[codes]
            if "date" in names:
                codes, values = column("date", _day)
                day = np.array([-1 if v is None else v for v in values],
                               dtype=np.int64)[codes]
        for i in np.flatnonzero(err):  # the scalar reader says why, as it always has
            rec = self._row(toks[i], *seg[i], skipped)
            assert rec is None, f"line {seg[i][0]} read by one reader and not the other"
        ok = ~err
        instant = np.full(int(ok.sum()), -1, dtype=np.int64)
        if "time" not in names:
            place = self.cycles.place
            instant = np.fromiter((place(g) for g in gpu[ok].tolist()), dtype=np.int64,
                                  count=len(instant))
        return Part(gpu=gpu[ok], line=np.array([n for n, _ in seg], dtype=np.int64)[ok]
                    if m else np.zeros(0, dtype=np.int64),
                    tod=tod[ok], day=day[ok], instant=instant,
                    uuid=np.full(len(instant), "", dtype=object),
                    cols={c: v[ok] for c, v in cols.items()},
                    blank={c: b[ok] for c, b in blank.items()})

    def _row(self, toks: list[str], n: int, s: str, skipped: list[tuple[int, str]]
             ) -> dict | None:
        """One data line read field by field (MIG rows, and the message of a bad row): its
        record, or None with the line skipped."""
        row = dict(zip(self.names, toks, strict=True))
        try:
            gpu = _gpu_index(row["gpu"])
            uuid = ""
            gi, ci = row.get("gi", "-"), row.get("ci", "-")
            if gi not in ("-", "N/A"):  # a MIG GPU instance: an entity under its GPU
                uuid = f"MIG-GPU/{gi}" + (f"/{ci}" if ci not in ("-", "N/A") else "")
                gpu = mig_entity(gpu, _gpu_index(gi, "gi (GPU instance id)"))
                first_ci = self.cis.setdefault(gpu, ci)
                if ci != first_ci:  # one entity per GPU instance: its first compute instance
                    why = (f"compute instance ci={ci} of GPU {row['gpu']} gi={gi} not "
                           f"imported (the GPU instance is read from its ci={first_ci} rows)")
                    skipped.append((n, why))
                    return None
            elif ci not in ("-", "N/A"):
                raise ValueError(f"compute instance {ci!r} without a GPU instance")
            rec: dict = {"gpu": gpu, "uuid": uuid, "_line": n}
            for col, (target, factor) in DMON_COLUMNS.items():
                if col in row:
                    rec[target] = _scaled(target, _number(row[col]), factor)
            if "time" in row:
                rec["_tod"] = _tod(row["time"])
                if "date" in row:
                    rec["_day"] = _day(row["date"])
            else:
                rec["_instant"] = self.cycles.place(gpu)
        except (ValueError, KeyError) as exc:
            skipped.append((n, f"bad value ({exc}): {_short(s)}"))
            return None
        return rec


def _part_of(recs: list[dict]) -> Part:
    """Records of :meth:`DmonParser._row` as a ``Part``."""
    p = Part(gpu=np.array([r["gpu"] for r in recs], dtype=np.int64),
             line=np.array([r["_line"] for r in recs], dtype=np.int64),
             tod=np.array([r.get("_tod", -1) for r in recs], dtype=np.int64),
             day=np.array([r.get("_day", -1) for r in recs], dtype=np.int64),
             instant=np.array([r.get("_instant", -1) for r in recs], dtype=np.int64),
             uuid=np.array([r["uuid"] for r in recs], dtype=object))
    for col in sorted({k for r in recs for k in r if k in METRIC_BY_NAME}):
        vals = [r.get(col, math.nan) for r in recs]
        p.blank[col] = np.array([v is BLANK for v in vals], dtype=bool)
        p.cols[col] = np.array(vals, dtype=np.float64)
    return p


# --------------------------------------------------------------------------- times

@dataclass
class Survey:
    """What the rows' times need from the whole file (the survey pass): ``instants`` made by
    rows without a time, ``day_off`` midnights a ``-o T`` clock rolled past, whether rows
    without a time sit among rows with a date of their own (``untimed_refused``: then they
    are refused unless a start time is given), and the rows read at all (``rows``, ``metric``:
    any with a reading tealeaves stores)."""

    instants: int = 0
    day_off: int = 0
    has_untimed: bool = False
    has_undated: bool = False
    has_dated: bool = False
    rows: int = 0
    metric: bool = False
    #: hour bucket -> [first timestamp, last timestamp, rows] of the plausible rows
    buckets: dict[int, list] = field(default_factory=dict)
    strays: list[tuple[float, float, str]] = field(default_factory=list)
    kept: int = 0

    def count(self, p: Part) -> None:
        """Add a parsed chunk's rows to the file-wide counts."""
        self.rows += p.n
        self.metric = self.metric or bool(p.cols)
        self.has_untimed = self.has_untimed or bool((p.instant >= 0).any())
        timed = p.tod >= 0
        self.has_undated = self.has_undated or bool((timed & (p.day < 0)).any())
        self.has_dated = self.has_dated or bool((timed & (p.day >= 0)).any())

    def add_times(self, ts: np.ndarray) -> None:
        """Count plausible timestamps ``ts`` (s) by hour."""
        if not len(ts):
            return
        keys = np.floor(ts / _BUCKET_S).astype(np.int64)
        order = np.argsort(keys, kind="stable")
        k, t = keys[order], ts[order]
        starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        ends = np.r_[starts[1:], len(k)]
        lo = np.minimum.reduceat(t, starts)
        hi = np.maximum.reduceat(t, starts)
        for key, a, b, c in zip(k[starts].tolist(), lo.tolist(), hi.tolist(),
                                (ends - starts).tolist(), strict=True):
            got = self.buckets.get(key)
            if got is None:
                self.buckets[key] = [a, b, c]
            else:
                got[0], got[1], got[2] = min(got[0], a), max(got[1], b), got[2] + c

    def find_strays(self) -> None:
        """The groups of rows cut off from the bulk of the file by a jump of over a day, in a
        small group (at most 3 rows or 1 %): ``strays`` ``[(first, last, why)]``, as
        ``import_common._refusals`` finds them row by row."""
        good = sum(b[2] for b in self.buckets.values())
        self.kept = good
        if good <= 1:
            return
        groups: list[list] = []  # [first, last, rows]
        for key in sorted(self.buckets):
            a, b, c = self.buckets[key]
            if groups and a - groups[-1][1] <= FUTURE_SLACK_S:
                groups[-1][1], groups[-1][2] = b, groups[-1][2] + c
            else:
                groups.append([a, b, c])
        if len(groups) == 1:
            return
        bulk = max(range(len(groups)), key=lambda i: groups[i][2])
        small = max(3, good // 100)
        for i, (a, b, c) in enumerate(groups):
            if i != bulk and c <= small:
                side = "before" if i < bulk else "after"
                self.strays.append((a, b, f"more than a day {side} the file's other rows"))
                self.kept -= c


class _Timer:
    """Times rows chunk after chunk, in file order (see ``data.importers``' module docstring:
    dates of ``-o T`` rows from ``start`` or counted back from ``end``, instants of rows
    without a time ``interval`` apart, local times through one ``LocalClock``)."""

    def __init__(self, *, zone: tzinfo, start: float | None, end: float, interval: float,
                 survey: Survey, clock: LocalClock) -> None:
        self.start, self.interval, self.clock = start, interval, clock
        self.anchor = _anchor(start, end, survey.instants, interval)
        if start is not None:
            self.base = datetime.fromtimestamp(start, zone).date().toordinal()
        else:
            self.base = datetime.fromtimestamp(end, zone).date().toordinal() - survey.day_off
        self.untimed_refused = (start is None and survey.has_untimed and survey.has_dated)
        self.prev_tod: int | None = None
        self.rolls = 0
        self.last_key: tuple[int, int] | None = None
        self.last: tuple[float, str] = (math.nan, "")

    def times(self, p: Part) -> tuple[np.ndarray, np.ndarray, dict[int, str], np.ndarray,
                                      np.ndarray]:
        """``(timestamps, gap, why, placed, dated)`` of a chunk's rows: ``gap`` marks rows
        refused once timed (a local time the clocks skipped; a row without a time among
        rows with their own), ``why`` their reasons by row; ``placed``/``dated`` the rows
        placed by instant / dated from ``start``/``end``."""
        ts = np.full(p.n, np.nan)
        placed = p.instant >= 0
        ts[placed] = self.anchor + p.instant[placed] * self.interval
        timed = np.flatnonzero(p.tod >= 0)
        undated = timed[p.day[timed] < 0]
        tod = p.tod[undated]
        if len(tod):
            prev = np.r_[self.prev_tod if self.prev_tod is not None else tod[0], tod[:-1]]
            offs = self.rolls + np.cumsum(tod < prev - 12 * 3600)
            self.rolls, self.prev_tod = int(offs[-1]), int(tod[-1])
        else:
            offs = np.zeros(0, dtype=np.int64)
        days = p.day.copy()
        days[undated] = self.base + offs
        gap = np.zeros(p.n, dtype=bool)
        why: dict[int, str] = {}
        if len(timed):
            d, t = days[timed], p.tod[timed]
            new = np.r_[True, (d[1:] != d[:-1]) | (t[1:] != t[:-1])]
            go_on = self.last_key == (int(d[0]), int(t[0]))  # the last chunk's run goes on
            new[0] = False
            starts = np.r_[0, np.flatnonzero(new)]
            vals = np.empty(len(starts))
            whys: list[str] = []
            for j, i in enumerate(starts.tolist()):  # one conversion a (day, time): the
                if j or not go_on:  # clock sees them in file order
                    key = (int(d[i]), int(t[i]))
                    dd = date.fromordinal(key[0])
                    local = datetime(dd.year, dd.month, dd.day) + timedelta(seconds=key[1])
                    got = self.clock.epoch(local)
                    self.last = (math.nan if got is None else got,
                                 self.clock.gap_reason(local) if got is None else "")
                    self.last_key = key
                vals[j] = self.last[0]
                whys.append(self.last[1])
            counts = np.diff(np.r_[starts, len(timed)])
            ts[timed] = np.repeat(vals, counts)
            for j in (j for j, w in enumerate(whys) if w):
                for r in timed[starts[j]:starts[j] + counts[j]].tolist():
                    gap[r] = True
                    why[r] = whys[j]
        if self.untimed_refused:
            for r in np.flatnonzero(placed).tolist():
                gap[r] = True
                why[r] = _UNTIMED_AMONG_TIMED
        dated = np.zeros(p.n, dtype=bool)
        dated[undated] = True
        return ts, gap, why, placed, dated
