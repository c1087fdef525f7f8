"""The passes of an ``nvidia-smi dmon`` import (``data.dmon`` parses and times a chunk): the
sources of numbered lines (:func:`text_lines`, :class:`FileLines`, ``LINES_A_CHUNK`` lines a
chunk) and :class:`DmonImport`, which runs the survey pass, then the final pass handing each
chunk over as a sample frame."""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import tzinfo
from pathlib import Path

import numpy as np
import pandas as pd

from tealeaves.data import import_common, pasted
from tealeaves.data.dmon import DmonParser, NotStreamable, Part, Survey, _Timer
from tealeaves.data.import_common import (
    ImportFormatError,
    ImportResult,
    _binary_kind,
    _implausible,
    _LineBound,
    _refusal_text,
    regular_file,
)
from tealeaves.data.schema import (
    COLUMNS,
    METRIC_NAMES,
    SchemaError,
    conform,
    empty_frame,
    gpus_in,
)
from tealeaves.data.wallclock import LocalClock, zone_name

#: Lines parsed as one chunk: the import holds this many lines and their columns at a time.
#: Lines skipped a streamed import lists (the first ones); the rest are counted
#: (``ImportResult.skipped_more``).
SKIPPED_LISTED = 10_000
LINES_A_CHUNK = 65_536


# --------------------------------------------------------------------------- lines

#: A source of numbered lines: called once a pass, it yields ``(first line number, lines)``.
Lines = Callable[[], Iterator[tuple[int, list[str]]]]


def text_lines(text: str) -> Lines:
    """The lines of ``text`` (split at ``\\n``, numbered from 1), ``LINES_A_CHUNK`` a chunk."""
    lines = text.split("\n")

    def chunks() -> Iterator[tuple[int, list[str]]]:
        for i in range(0, len(lines), LINES_A_CHUNK):
            yield i + 1, lines[i:i + LINES_A_CHUNK]
    return chunks


class FileLines:
    """A regular file's lines, read ``import_common._CHUNK`` bytes at a time (the callable
    :data:`Lines`).  The first pass checks what reading the file whole would (its size and
    line lengths against ``MAX_FILE_BYTES``/``MAX_LINE_BYTES``) and that it can be read a
    chunk at a time, and notes a checksum of each chunk; a later pass reads the same bytes
    and refuses a file that changed in between.  A file that grew (a live log) is read up
    to the size the first pass found, and ``growth_note`` says so.

    Raises (from the iterator):
        NotStreamable: first pass only: a byte-order mark, a wide encoding, binary data,
            bytes that are not UTF-8, or a paste to undo (``pasted.normalise`` has notes).
        ImportFormatError: unreadable, over the limits, or changed since the first pass.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = regular_file(path)
        self.name = str(path)
        self.crcs: list[int] | None = None
        self.size = 0
        self.open_end = False  # the last line read had no line end
        self.grown = 0  # bytes the file grew by while imported (checked after the last pass)

    def __call__(self) -> Iterator[tuple[int, list[str]]]:
        first = self.crcs is None
        crcs: list[int] = []
        bound = _LineBound(self.name) if first else None
        total, carry, lineno = 0, b"", 1
        try:
            with open(self.path, "rb") as f:
                while chunk := f.read(import_common._CHUNK if first
                                    else min(import_common._CHUNK, self.size - total)):
                    if first:
                        self._first_checks(chunk, total, bound)
                        crcs.append(zlib.crc32(chunk))
                    elif zlib.crc32(chunk) != self.crcs[len(crcs)]:
                        raise self._changed()
                    else:
                        crcs.append(0)
                    total += len(chunk)
                    data = carry + chunk
                    cut = data.rfind(b"\n") + 1
                    carry = data[cut:]
                    if cut:
                        lines = self._text(data[:cut], first).split("\n")[:-1]
                        for i in range(0, len(lines), LINES_A_CHUNK):
                            yield lineno + i, lines[i:i + LINES_A_CHUNK]
                        lineno += len(lines)
        except OSError as exc:
            raise ImportFormatError(f"{self.name}: cannot be read ({exc.strerror or exc})"
                                    ) from None
        if carry:
            yield lineno, [self._text(carry, first)]
        if first:
            self.crcs, self.size, self.open_end = crcs, total, bool(carry)
        elif total != self.size:
            raise self._changed()
        else:
            try:
                self.grown = max(os.stat(self.path).st_size - self.size, 0)
            except OSError:
                self.grown = 0

    def growth_note(self) -> str | None:
        """What the import did not read of a file that grew while it was imported (a live
        log): None when it did not grow."""
        if not self.grown:
            return None
        last = (" (its last line then had no line end: it may have been cut short)"
                if self.open_end else "")
        return (f"the file grew by {self.grown:,} bytes while it was imported: those lines "
                f"were not read, only its first {self.size:,} bytes{last}; import it again "
                f"to add them (the rows stored now are passed over)")

    def _first_checks(self, chunk: bytes, total: int, bound: _LineBound) -> None:
        limit = import_common.MAX_FILE_BYTES
        if total + len(chunk) > limit:
            raise ImportFormatError(f"{self.name}: passed the {limit:,}-byte limit of "
                                    f"one import while read; split it and import the parts")
        if not total and (chunk.startswith(b"PAR1") or _binary_kind(chunk)
                          or pasted.decode(chunk)[0] is not None):
            raise NotStreamable
        bound.feed(chunk)

    def _text(self, data: bytes, first: bool) -> str:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise NotStreamable from None
        if first and pasted.normalise(text).notes:
            raise NotStreamable
        return text

    def _changed(self) -> ImportFormatError:
        return ImportFormatError(f"{self.name}: changed while it was imported (read twice: "
                                 f"to survey it, then to store it); nothing was imported from "
                                 f"it, import it again once written")


# --------------------------------------------------------------------------- passes

class DmonImport:
    """A dmon file's (or text's) import, pass by pass (see the module docstring).

    Args:
        lines: the source of lines (:func:`text_lines`, :class:`FileLines`).
        name: the file's name, for messages.
        host, zone, start, end, interval, how: as ``data.importers.import_text`` takes them
            (``how``: ``"start_time"``, ``"mtime"`` or ``"now"``, said by ``placed``).
        now: UTC epoch s the plausibility screen measures "after now" from.
        assumed: ``interval`` is the format's default, not the caller's
            (``ImportResult.interval_assumed``).
        normalised: what was undone of a paste before reading (``ImportResult.normalised``).
    """

    def __init__(self, lines: Lines, *, name: str, host: str, zone: tzinfo,
                 start: float | None, end: float, interval: float, how: str,
                 now: float, assumed: bool = False, normalised: Sequence[str] = ()) -> None:
        self.lines, self.name, self.host, self.zone = lines, name, host, zone
        self.start, self.end, self.interval, self.how, self.now = start, end, interval, how, now
        self.assumed, self.normalised = assumed, list(normalised)
        self.info: Survey | None = None
        self.clock: LocalClock | None = None
        self.result: ImportResult | None = None

    def _pass(self, survey: Survey) -> Iterator[tuple[Part, list, tuple]]:
        """Parse and time every chunk: ``(part, skipped, times)`` (``_Timer.times``)."""
        parser = DmonParser()
        self.clock = LocalClock(self.zone)
        timer = _Timer(zone=self.zone, start=self.start, end=self.end, interval=self.interval,
                       survey=survey, clock=self.clock)
        for first, lines in self.lines():
            part, skipped = parser.parse(first, lines)
            yield part, skipped, timer.times(part)
        survey.instants = parser.cycles.count
        survey.day_off = timer.rolls

    def _plausible(self, ts: np.ndarray) -> np.ndarray:
        return ~_implausible(ts, self.now)[0]

    def survey(self) -> Survey:
        """The survey pass (twice when rows' times need the whole file first).

        Raises:
            NotStreamable: a :class:`FileLines` source that must be read whole.
            import_common._HeaderError: a header names a field twice.
            ImportFormatError: rows read, but none with a reading tealeaves stores.
        """
        if self.info is not None:
            return self.info
        info = Survey()
        for part, _, (ts, gap, *_) in self._pass(info):
            info.count(part)
            ok = ~gap & self._plausible(ts)
            info.add_times(ts[ok])
        if self.start is None and (info.has_untimed or info.has_undated):
            exact, info.buckets = replace(info, buckets={}), {}
            for _, _, (ts, gap, *_) in self._pass(exact):
                info.add_times(ts[~gap & self._plausible(ts)])
        if info.rows and not info.metric:
            raise ImportFormatError(
                f"{self.name}: holds no reading tealeaves stores; it reads utilization, "
                f"memory used, power, SM clock, PCIe/NVLink throughput and DCGM's profiling "
                f"ratios; nothing was stored")
        info.find_strays()
        self.info = info
        return info

    def frames(self) -> Iterator[pd.DataFrame]:
        """The final pass: each chunk's kept rows as a ``conform()``-ed sample frame (chunks
        with none kept yield nothing).  Once exhausted, ``result`` is the import's
        ``ImportResult`` (its ``samples`` empty: the frames are the samples, ``n_samples``
        counts them).

        Raises:
            As :meth:`survey`; ImportFormatError: the file changed since the survey.
        """
        info = self.survey()
        res = ImportResult(samples=empty_frame(), format="nvidia_smi_dmon", rows_read=0,
                           source=self.name)
        skipped: list[tuple[int, str]] = []
        blanks: dict[str, int] = {}
        gpus: set[int] = set()
        lo, hi, at = math.inf, -math.inf, []
        placed_any = dated_any = zoned = False
        count = 0
        for part, parse_skips, (ts, gap, why, placed, dated) in self._pass(
                replace(info, buckets={}, strays=[])):
            skipped.extend(parse_skips)
            skipped.extend((int(part.line[i]), w) for i, w in why.items())
            keep, refused = self._screen(ts, gap, part.line)
            skipped.extend(refused)
            if len(skipped) > 2 * SKIPPED_LISTED:  # the first lines are listed, the rest counted
                skipped.sort()
                res.skipped_more += len(skipped) - SKIPPED_LISTED
                del skipped[SKIPPED_LISTED:]
            res.rows_read += part.n - int(gap.sum()) - len(refused)
            placed_any = placed_any or bool((placed & ~gap).any())
            dated_any = dated_any or bool((dated & ~gap).any())
            if not keep.any():
                continue
            zoned = zoned or bool((part.tod[keep] >= 0).any())
            for c, b in part.blank.items():
                n = int(np.count_nonzero(b & keep))
                if n:
                    blanks[c] = blanks.get(c, 0) + n
            when = ts[keep & (placed | dated)]
            if len(when):
                at.append(float(when.min() if self.start is not None else when.max()))
            df = self._frame(part, ts, keep)
            gpus.update(gpus_in(df))
            lo, hi = min(lo, float(df["timestamp"].min())), max(hi, float(df["timestamp"].max()))
            count += len(df)
            yield df
        skipped.sort()
        res.skipped_more += max(len(skipped) - SKIPPED_LISTED, 0)
        res.skipped, res.blanks = skipped[:SKIPPED_LISTED], dict(sorted(blanks.items()))
        res.gpus, res.n_samples = sorted(gpus), count
        res.time_span = (lo, hi) if count else (math.nan, math.nan)
        res.placed = self.how if placed_any else None
        res.dated = self.how if dated_any else None
        res.zone = zone_name(self.zone) if zoned else None
        if res.placed or res.dated:
            res.placed_at = ((min(at) if self.start is not None else max(at)) if at
                             else (self.start if self.start is not None else self.end))
        if res.placed:
            res.interval, res.interval_assumed = self.interval, self.assumed
        res.normalised = list(self.normalised)
        if self.clock.note():
            res.notes.append(self.clock.note())
        grown = getattr(self.lines, "growth_note", lambda: None)()
        if grown:
            res.notes.append(grown)
        self.result = res

    def _screen(self, ts: np.ndarray, gap: np.ndarray, lines: np.ndarray
                ) -> tuple[np.ndarray, list[tuple[int, str]]]:
        """The rows kept, and those refused for their time ``[(line, reason)]`` (as
        ``import_common._refusals``, the strays from the survey)."""
        bad, whys = _implausible(ts, self.now)
        bad &= ~gap
        for a, b, w in self.info.strays:
            hit = ~gap & ~bad & (ts >= a) & (ts <= b)
            bad |= hit
            whys[hit] = w
        refused = [(int(lines[i]), _refusal_text(float(ts[i]), whys[i]))
                   for i in np.flatnonzero(bad)]
        return ~gap & ~bad, refused

    def _frame(self, part: Part, ts: np.ndarray, keep: np.ndarray) -> pd.DataFrame:
        df = pd.DataFrame({"host": self.host, "gpu": part.gpu[keep], "uuid": part.uuid[keep],
                           **{c: v[keep] for c, v in part.cols.items()},
                           "timestamp": ts[keep]})
        for col in METRIC_NAMES:
            if col not in df.columns:
                df[col] = np.nan
        try:
            return conform(df[[c for c in df.columns if c in COLUMNS]], source=self.name)
        except SchemaError as exc:  # a bug, not bad input
            raise ImportFormatError(f"{self.name}: rows do not fit the sample schema ({exc})"
                                    ) from exc

    def load(self) -> ImportResult:
        """Survey and final pass, the frames joined: the ``ImportResult`` with its
        ``samples`` (sorted by timestamp and GPU, file order among equals)."""
        frames = list(self.frames())
        res = self.result
        if frames:
            res.samples = pd.concat(frames, ignore_index=True).sort_values(
                ["timestamp", "gpu"], kind="stable").reset_index(drop=True)
        res.n_samples = None
        return res
