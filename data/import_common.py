"""What every importer shares (``data.importers`` and the per-format modules): the result and
error types, bounded file reading, CSV fields, number and blank parsing, the plausibility
screen of timestamps (``_screen``), untimed rows among timed ones refused
(``_placed_among_dated``) and records made a sample frame (``_frame``).  Imports nothing of
the format modules."""

from __future__ import annotations

import csv
import math
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from tealeaves.data.schema import (
    COLUMNS,
    EARLIEST_TS,
    FIELD_LIMITS,
    FUTURE_SLACK_S,
    MAX_GPUS,
    METRIC_BY_NAME,
    METRIC_NAMES,
    SchemaError,
    conform,
    empty_frame,
    gpus_in,
    is_blank,
    out_of_range,
)

_EXPECTED = ("the nvidia-smi table, nvidia-smi dmon output, nvidia-smi --query-gpu CSV, "
             "dcgm-exporter Prometheus text, dcgmi dmon output, or a tealeaves Parquet/CSV "
             "trace")


class ImportFormatError(ValueError):
    """A file is not in a format the importers read (or cannot be read); names the file."""


@dataclass
class ImportResult:
    """What an import produced.

    Attributes:
        samples: sample frame (``data.schema.COLUMNS``), ``conform()``-ed, sorted by
            (timestamp, gpu); may be empty when the file held no data rows.
        format: the format name used (one of ``FORMATS``).
        rows_read: source data rows accepted (lines for the line formats, metric samples for
            dcgm-exporter, rows for tealeaves files).
        skipped: ``(line number, reason)`` for every non-blank, non-header line not imported
            (a row with a value outside ``schema.FIELD_LIMITS`` or an implausible time too).
        source: the file name (or the name given to :func:`import_text`).
        gpus: sorted GPU indices present in ``samples``.
        time_span: ``(first, last)`` timestamp in UTC epoch seconds; ``(nan, nan)`` if empty.
        blanks: ``{column: n}``, the fields the source left blank (a ``schema.SENTINELS``
            code or a text marker such as ``[N/A]``), stored as NaN.
        out_of_range: ``{column: n}`` of a Parquet trace's values outside
            ``schema.FIELD_LIMITS``, stored as NaN (a text format refuses their rows instead).
        placed: how rows without a time of their own were placed: ``"start_time"`` (the
            caller's), ``"mtime"`` (the file's modification time is the last instant),
            ``"now"`` (no file time known) or None when every row carries its time.
        dated: like ``placed``, for rows with a time of day but no date (``dmon -o T``): where
            their date came from, or None.
        placed_at: the instant the file was placed at: its last instant for ``"mtime"`` and
            ``"now"``, its first for ``"start_time"``; NaN when ``placed`` and ``dated`` are
            None.
        normalised: what was undone of a paste before reading (``data.pasted``: "read as
            UTF-16 LE (byte-order mark)", "CR line ends read as line breaks", "quote prefix
            ('> ') removed from 7 lines", ...); empty for a plain file.
        devices: what the file states about each GPU (``data.schema.DEVICE_COLUMNS``: name,
            power limit, max SM clock, memory size, PCI bus id; NaN where it states nothing),
            one row per GPU; empty when it states nothing.
        zone: the zone wall-clock times without one were read in (``"UTC"`` by default, the
            ``tz`` given otherwise); None when no time of the file lacked a zone.
        gpu_key: how rows were told apart as GPUs: ``"index"``, ``"uuid"``,
            ``"pci.bus_id"``, ``"name and place"`` (a row's place among the rows printed
            with one timestamp), ``"name"`` (no id and no timestamp, but every GPU a
            different name), ``"single"`` (no id and no two rows share a timestamp:
            one GPU) or ``"none"`` (nothing tells GPUs apart: every row read as GPU 0);
            None where the format always names its GPU.
        not_read: the file's fields tealeaves does not read (outside the schema), by name.
        notes: other facts the summary must say (sections counted and not read, ...).
        interval: seconds between the instants of rows placed without a time of their own
            (``placed`` not None), else None.
        interval_assumed: True when ``interval`` is the format's default (``_DEFAULT_INTERVAL``:
            dcgm-exporter 30 s, the others 1 s), not one the caller gave: the file states
            none, so the spacing of its instants is a guess the summary must say.
        skipped_more: lines not imported beyond those listed in ``skipped``: a file read a
            chunk at a time (``data.dmon_passes``) lists its first ``SKIPPED_LISTED`` lines
            only, so a file of bad lines costs no more memory than a good one.
        n_samples: the samples handed over as frames (``data.dmon_passes.DmonImport.frames``, stored
            as they came) while ``samples`` stays empty; None when ``samples`` holds them.
    """

    samples: pd.DataFrame
    format: str
    rows_read: int
    skipped: list[tuple[int, str]] = field(default_factory=list)
    source: str = ""
    gpus: list[int] = field(default_factory=list)
    time_span: tuple[float, float] = (math.nan, math.nan)
    blanks: dict[str, int] = field(default_factory=dict)
    out_of_range: dict[str, int] = field(default_factory=dict)
    placed: str | None = None
    dated: str | None = None
    placed_at: float = math.nan
    normalised: list[str] = field(default_factory=list)
    devices: pd.DataFrame = field(default_factory=pd.DataFrame)
    zone: str | None = None
    gpu_key: str | None = None
    not_read: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    interval: float | None = None
    interval_assumed: bool = False
    n_samples: int | None = None
    skipped_more: int = 0

    @property
    def skipped_count(self) -> int:
        """Lines not imported: those listed in ``skipped`` and ``skipped_more`` beyond them."""
        return len(self.skipped) + self.skipped_more

    @property
    def sample_count(self) -> int:
        """Samples the import gave: ``len(samples)``, or ``n_samples`` where they were handed
        over as frames instead (``data.dmon_passes.DmonImport.frames``: ``samples`` left empty)."""
        return len(self.samples) if self.n_samples is None else self.n_samples

    @property
    def duration_s(self) -> float:
        """Last minus first timestamp in seconds (NaN when empty)."""
        return self.time_span[1] - self.time_span[0]


#: A plain decimal number, ASCII digits only (``float()`` also takes "1_0" and non-ASCII digits).
_RE_NUMBER = re.compile(r"^\+?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$", re.ASCII)


_RE_INDEX = re.compile(r"^\d{1,6}$", re.ASCII)


#: Largest file the importers read, bytes: a bound on what one file may cost, not a format
#: limit (two hours of ``nvidia-smi dmon`` on 8 GPUs at 1 Hz is some 5 MB); split a larger
#: file (``split -l``) and import the parts.
MAX_FILE_BYTES = 2 * 2**30


#: Bytes read at a time.
_CHUNK = 4 * 2**20


#: Longest line of a text file the importers read, bytes (its line end not counted).  The
#: formats' lines are short (a dmon row ~150 bytes, a 60-field ``--query-gpu`` row ~2 kB, a
#: labelled dcgm-exporter line ~1 kB); a longer one is not telemetry, and parsing a line of
#: 150 MB cost minutes and gigabytes: the file is refused, naming the line.
MAX_LINE_BYTES = 2**20


def _file_kind(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file)."""
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return None if stat.S_ISREG(mode) else "not a regular file"


def regular_file(path: str | Path) -> Path:
    """``path`` when it is a regular file (links followed) the importers may read.

    A FIFO would block the read until a writer comes, and a device (``/dev/zero``) never
    ends: both are refused before anything is opened.

    Raises:
        ImportFormatError: missing, a directory, a FIFO, a device or a socket, or larger than
            ``MAX_FILE_BYTES``; the message names the path.
    """
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ImportFormatError(f"{path}: no such file") from None
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    kind = _file_kind(st.st_mode)
    if kind:
        raise ImportFormatError(f"{path}: is {kind}, not a regular file; give a file")
    if st.st_size > MAX_FILE_BYTES:
        raise ImportFormatError(f"{path}: is {st.st_size:,} bytes, over the "
                                f"{MAX_FILE_BYTES:,}-byte limit of one import; split it "
                                f"(e.g. `split -l`) and import the parts")
    return path


class _LineBound:
    """Checks, chunk by chunk as a file is read, that no line is longer than
    ``MAX_LINE_BYTES``.  Lines are numbered as the importers number them once
    ``pasted.normalise`` has read ``\r\n`` and a lone ``\r`` as one line break each.
    Linear in the bytes, vectorised (NumPy)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.run = 0  # bytes of the line under way, from earlier chunks
        self.breaks = 0  # line breaks before this chunk
        self.last_cr = False  # the previous chunk ended in \r

    def feed(self, chunk: bytes) -> None:
        """Check one more chunk.

        Raises:
            ImportFormatError: a line passed ``MAX_LINE_BYTES`` (names the file and line).
        """
        b = np.frombuffer(chunk, dtype=np.uint8)
        nl, cr = b == 10, b == 13
        brk = nl | cr
        brk[1:] &= ~(cr[:-1] & nl[1:])  # the \n of \r\n ends no line of its own
        if len(b) and self.last_cr and nl[0]:
            brk[0] = False
        self.last_cr = bool(len(b) and cr[-1])
        # a line's bytes: from after the previous break (less the \n of a \r\n, which can
        # only come first) to its own break
        pair_nl = nl & ~brk
        ends = np.flatnonzero(brk)
        if len(ends):
            starts = np.concatenate(([0], ends[:-1] + 1))
            lengths = ends - starts - pair_nl[starts]
            lengths[0] += self.run
            long = np.flatnonzero(lengths > MAX_LINE_BYTES)
            if len(long):
                self._refuse(self.breaks + int(long[0]))
            tail = int(ends[-1]) + 1
            self.run = len(b) - tail - int(tail < len(b) and pair_nl[tail])
        else:
            self.run += len(b) - int(len(b) > 0 and pair_nl[0])
        self.breaks += len(ends)
        if self.run > MAX_LINE_BYTES:
            self._refuse(self.breaks)

    def _refuse(self, newlines_before: int) -> None:
        raise ImportFormatError(f"{self.name}: line {newlines_before + 1} is longer than "
                                f"{MAX_LINE_BYTES:,} bytes, the longest line tealeaves reads "
                                f"(MAX_LINE_BYTES): not telemetry")


def _binary_kind(data: bytes) -> str | None:
    """Name a binary payload that is certainly not text, or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "a PNG image"
    if data[:3] == b"\xff\xd8\xff":
        return "a JPEG image"
    if data[:4] in (b"GIF8", b"%PDF") or data[:2] == b"PK" or data[:3] == b"\x1f\x8b\x08":
        return "a binary document or archive"
    if b"\x00" in data[:65536]:
        return "binary data"
    return None


class _Cycles:
    """Groups rows without timestamps into instants: a new instant on a repeated key."""

    def __init__(self) -> None:
        self.index = 0
        self.seen: set = set()
        self.used = False
        self.last = 0

    def new_block(self) -> None:
        if self.seen:
            self.index += 1
            self.seen = set()

    def place(self, key) -> int:
        if key in self.seen:
            self.index += 1
            self.seen = set()
        self.seen.add(key)
        self.used = True
        self.last = self.index
        return self.index

    @property
    def count(self) -> int:
        """Instants that hold a row (a header after the last row opens none)."""
        return self.last + 1 if self.used else 0


def _anchor(start: float | None, end: float, n_instants: int, interval: float) -> float:
    """Time of instant 0: ``start``, or ``end`` minus the span of the instants."""
    if start is not None:
        return start
    return end - max(n_instants - 1, 0) * interval


class _Blank(float):
    """A field the source left blank (a text marker or a ``schema.SENTINELS`` code): NaN that
    remembers it was a blank, so the import can count it."""


#: The one blank value; ``v is BLANK`` tells a blank from a plain missing value.
BLANK = _Blank("nan")


#: Text the tools print instead of a reading (nvidia-smi, dcgmi): a blank.  ``ERR!`` is
#: nvidia-smi's mark for a field whose NVML call failed (the table, ``--query-gpu`` and
#: ``dmon`` print it alike); bracketed notes (``[Unknown Error]``, ``[GPU is lost]``) are
#: blanks by their brackets.
_BLANK_TEXT = frozenset({"-", "N/A", "n/a", "NA", "", "ERR!"})


def _number(tok: str) -> float:
    """Parse one numeric field; '-', 'N/A', 'ERR!' and bracketed notes ('[N/A]',
    '[Not Supported]', '[Unknown Error]') are ``BLANK``.

    Raises:
        ValueError: not a finite, non-negative number.
    """
    t = tok.strip()
    if t in _BLANK_TEXT or (t.startswith("[") and t.endswith("]")):
        return BLANK
    if not _RE_NUMBER.match(t):
        raise ValueError(f"not a number: {tok!r}")
    v = float(t)
    if not math.isfinite(v):
        raise ValueError(f"not finite: {tok!r}")
    if v < 0:
        raise ValueError(f"negative: {tok!r}")
    return v


def _scaled(col: str, raw: float, factor: float) -> float:
    """``raw`` in ``col``'s unit: a blank (``BLANK`` or a ``schema.SENTINELS`` code) stays
    ``BLANK``; otherwise ``raw * factor``, checked against ``schema.FIELD_LIMITS``.

    Raises:
        ValueError: the value lies outside the column's valid range (the row is refused).
    """
    if raw is BLANK or (not math.isnan(raw) and is_blank(raw)):
        return BLANK
    v = raw * factor
    if not math.isnan(v) and out_of_range(col, v):
        low, high = FIELD_LIMITS[col]
        unit = METRIC_BY_NAME[col].unit
        raise ValueError(f"{col} {v:.12g} {unit} is outside its valid range "
                         f"{low:g}-{high:g} {unit}")
    return v


def _implausible(ts: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
    """Timestamps ``ts`` (n,) no GPU reading can have, each on its own: not finite, before
    ``EARLIEST_TS`` or more than ``FUTURE_SLACK_S`` after ``now``.  Returns the bool mask
    (n,) and each row's rule in words (object (n,); meaningful where the mask is set)."""
    bad = ~np.isfinite(ts) | (ts < EARLIEST_TS) | (ts > now + FUTURE_SLACK_S)
    why = np.where(ts < EARLIEST_TS, "before 2000", "more than a day after now").astype(object)
    return bad, why


def _refusals(ts: np.ndarray, lines: np.ndarray, now: float
              ) -> tuple[np.ndarray, list[tuple[int, str]]]:
    """The rows of timestamps ``ts`` (n,) refused as implausible (see :func:`_screen`): a bool
    mask (n,) and ``[(line, reason)]`` in row order, ``lines`` (n,) the rows' line numbers."""
    bad, why = _implausible(ts, now)
    # rows cut off from the bulk of the file by a jump of over a day, in a small group (at
    # most 3 rows or 1 %), are strays: before the bulk or after it
    good = np.flatnonzero(~bad)
    if len(good) > 1:
        order = good[np.argsort(ts[good], kind="stable")]
        cuts = np.flatnonzero(np.diff(ts[order]) > FUTURE_SLACK_S) + 1
        if len(cuts):
            groups = np.split(order, cuts)
            bulk = max(range(len(groups)), key=lambda i: len(groups[i]))
            small = max(3, len(good) // 100)
            for i, grp in enumerate(groups):
                if i != bulk and len(grp) <= small:
                    bad[grp] = True
                    why[grp] = ("more than a day before the file's other rows" if i < bulk
                                else "more than a day after the file's other rows")
    refused = [(int(lines[i]), _refusal_text(float(ts[i]), why[i])) for i in np.flatnonzero(bad)]
    return bad, refused


def _refusal_text(t: float, why: str) -> str:
    """Why a row of timestamp ``t`` (UTC epoch s) is refused, ``why`` its rule."""
    when = (datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            if math.isfinite(t) and -6e10 < t < 2.5e11 else "out of any calendar")
    return f"timestamp {t:.17g} ({when}) is {why}: row refused"


def _gpu_index(tok: str, what: str = "gpu index") -> int:
    """A GPU index (or, with ``what``, a MIG instance id) 0..``MAX_GPUS``-1 from its text.

    Raises:
        ValueError: not a whole number, or out of range (names ``what``).
    """
    if not _RE_INDEX.match(tok.strip()):
        raise ValueError(f"{what} {tok!r} is not a whole number 0-{MAX_GPUS - 1}")
    g = int(tok)
    if not 0 <= g < MAX_GPUS:
        raise ValueError(f"{what} {tok!r} out of range 0-{MAX_GPUS - 1}")
    return g


def _summary(df: pd.DataFrame, fmt: str, rows_read: int, skipped, name: str,
             blanks: dict[str, int] | None = None) -> ImportResult:
    span = ((float(df["timestamp"].min()), float(df["timestamp"].max())) if len(df)
            else (math.nan, math.nan))
    return ImportResult(samples=df, format=fmt, rows_read=rows_read,
                        skipped=sorted(skipped), source=name,
                        gpus=gpus_in(df) if len(df) else [], time_span=span,
                        blanks=dict(sorted((blanks or {}).items())))


def _lines(text: str) -> Iterable[tuple[int, str]]:
    for n, raw in enumerate(text.split("\n"), start=1):
        yield n, raw.rstrip("\r")


def _short(line: str, width: int = 60) -> str:
    s = line.strip()
    return s if len(s) <= width else s[: width - 3] + "..."


class _HeaderError(ValueError):
    """A header the file cannot be read by (a field named twice, a unit tealeaves cannot
    convert); :func:`import_text` names the file and refuses it whole."""


def _check_header(names: Sequence[str], line: int | None) -> None:
    """Refuse a header that names one field twice (the columns' values would be read into
    one field, the last one silently winning).

    Raises:
        _HeaderError: names the field, and the header's line when known.
    """
    seen: set[str] = set()
    for f in names:
        if f in seen:
            where = f"line {line}: " if line else ""
            raise _HeaderError(f"{where}the header names the field {f!r} twice: which of "
                               f"its columns holds the reading is not known")
        seen.add(f)


#: Why a row without a time of its own is refused in a file whose other rows carry theirs.
_UNTIMED_AMONG_TIMED = ("row without a timestamp in a file whose other rows carry theirs: its "
                        "time is not known; row refused")
def _read_bytes(path: Path) -> bytes:
    """The bytes of a regular file, read in chunks and at most ``MAX_FILE_BYTES`` (a file
    growing past it while read is refused too).

    Raises:
        ImportFormatError: as :func:`regular_file`, or unreadable.
    """
    path = regular_file(path)
    parts: list[bytes] = []
    total = 0
    lines = _LineBound(str(path))
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                total += len(chunk)
                if total > MAX_FILE_BYTES:
                    raise ImportFormatError(f"{path}: passed the {MAX_FILE_BYTES:,}-byte limit "
                                            f"of one import while read; split it and import "
                                            f"the parts")
                if not parts and (chunk.startswith(b"PAR1") or _binary_kind(chunk)):
                    lines = None  # Parquet or binary: no lines to bound (refused later if
                    # not a trace)
                if lines is not None:
                    lines.feed(chunk)
                parts.append(chunk)
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return b"".join(parts)


def _csv_fields(line: str) -> list[str]:
    try:
        return [f.strip() for f in next(csv.reader([line], skipinitialspace=True))]
    except (csv.Error, StopIteration):
        return []


def _blank_text(tok: str) -> bool:
    t = tok.strip()
    return t in _BLANK_TEXT or (t.startswith("[") and t.endswith("]"))


def _screen(records: list[dict], now: float) -> tuple[list[dict], list[tuple[int, str]],
                                                         dict[str, int]]:
    """Refuse rows whose time is implausible; count the blanks of the rest.

    A timestamp before ``schema.EARLIEST_TS`` (2000), more than ``FUTURE_SLACK_S`` past
    ``now``, or cut off from the bulk of the file by a jump of more than that (a handful of
    rows, at most 3 or 1 %, before or after the bulk) is refused with its line number.

    Returns:
        ``(kept records, refused [(line, reason)], blanks {column: count})``.
    """
    if not records:
        return records, [], {}
    ts = np.array([r["timestamp"] for r in records], dtype=np.float64)
    lines = np.array([int(r.get("_line", 0)) for r in records], dtype=np.int64)
    bad, refused = _refusals(ts, lines, now)
    kept: list[dict] = []
    blanks: dict[str, int] = {}
    for r, b in zip(records, bad, strict=True):
        if b:
            continue
        for k, v in r.items():
            if v is BLANK:
                blanks[k] = blanks.get(k, 0) + 1
        kept.append(r)
    return kept, refused, blanks


def _frame(records: list[dict], name: str) -> pd.DataFrame:
    if not records:
        return empty_frame()
    df = pd.DataFrame.from_records(records)
    for col in METRIC_NAMES:
        if col not in df.columns:
            df[col] = np.nan
    try:
        return conform(df[[c for c in df.columns if c in COLUMNS]], source=name)
    except SchemaError as exc:  # a bug, not bad input; still report it as an import failure
        raise ImportFormatError(f"{name}: rows do not fit the sample schema ({exc})") from exc


# --------------------------------------------------------------------------- public entry


def _placed_among_dated(records: list[dict], skipped: list[tuple[int, str]]) -> list[dict]:
    """Refuse the rows without a time of their own (``_placed``, placed by the file's mtime:
    no start time given) of a file whose other rows carry full timestamps (a dmon block without ``-o DT`` after one with it, dcgmi lines with
    and without a leading time, a --query-gpu block without ``timestamp``...).

    The file has its own clock: placing the untimed rows at its modification time (or a
    start time) would put them anywhere relative to the rest, and the note would falsely say
    the file has no timestamps.  Their lines are appended to ``skipped`` with the reason.

    Returns:
        The records kept (all of them unless both kinds are present).
    """
    if not any("_placed" in r for r in records) or not any(
            "_placed" not in r and "_dated" not in r for r in records):
        return records
    why = _UNTIMED_AMONG_TIMED
    skipped.extend((int(r.get("_line", 0)), why) for r in records if "_placed" in r)
    return [r for r in records if "_placed" not in r]
