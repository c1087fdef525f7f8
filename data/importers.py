"""Importers: turn telemetry files written by other tools into the sample frame.

Every importer yields a frame in the sample schema (``data.schema``: long form, one row per
GPU per instant, UTC epoch seconds, NaN for missing, never 0) plus a record of every input line
that was not data and was skipped, as ``(line number, reason)``.  Line numbers start at 1.
Blank lines and the formats' own header lines are structure, not skipped data, and are not
recorded.

Formats (the names :func:`detect_format` returns and ``format=`` accepts):

``nvidia_smi_dmon``
    ``nvidia-smi dmon`` text, any ``-s`` set, with or without ``-o D``/``-o T``/``-o TD``.
``nvidia_smi_query``
    ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``.
``nvidia_smi_table``
    the plain ``nvidia-smi`` table (``data.smi_table``): one instant per table, dated by the
    line printed above it; the GPUs' names, power caps and memory sizes go to ``devices``.
``dcgm_exporter``
    dcgm-exporter's Prometheus text exposition (one scrape or several concatenated).
``dcgmi_dmon``
    ``dcgmi dmon -e ...`` text.
``tealeaves_parquet`` / ``tealeaves_csv``
    tealeaves' own traces (``data.traces.read_trace``) and CSV with the schema's column names.

SGLang and vLLM server logs are recognised (``sglang_log``, ``vllm_log``) but refused here:
they are parsed by the server-log parser, not by these importers.

Modules.  This one holds the entry points (:func:`import_file`, :func:`import_text`,
:func:`load_trace`, :func:`stream_file`) and re-exports the format names and column maps;
detection is ``data.detect``, each format's parser its own module (``data.dmon`` with
``data.dmon_passes``, ``data.import_query``, ``data.import_table``, ``data.import_exporter``,
``data.import_dcgmi``, ``data.import_csv``), the shared parts ``data.import_common``.

Units.  Conversions to the schema's units, and where each comes from:

* nvidia-smi ``dmon`` prints ``fb`` in "MB" and ``rxpci``/``txpci`` in "MB/s".  These are
  binary megabytes (MiB, 2**20 B): ``dmon``'s ``fb`` is the same number ``--query-gpu`` prints
  for ``memory.used`` with the explicit unit ``MiB`` (nvidia-smi(1) lists memory in MiB), and
  ``rxpci``/``txpci`` come from ``nvmlDeviceGetPcieThroughput``, documented in NVML as KB/s with
  NVML's binary KB, scaled by 1024.  tealeaves takes 1 MB = 2**20 B for every dmon column (the
  same convention the schema uses for GPM's MiB/s NVLink values).  So ``rxpci 217`` is
  ``217 * 2**20`` B/s.
* ``--query-gpu`` ``memory.used`` is in MiB (unit printed in the header/values): x 2**20.
* DCGM ``DCGM_FI_DEV_FB_USED`` (dcgmi ``FBUSD``) is in MiB (DCGM field docs): x 2**20.
* DCGM profiling ratios ``DCGM_FI_PROF_SM_ACTIVE``, ``SM_OCCUPANCY``, ``PIPE_TENSOR_ACTIVE``,
  ``DRAM_ACTIVE`` (dcgmi ``SMACT``, ``SMOCC``, ``TENSO``, ``DRAMA``) are ratios 0-1 (DCGM
  profiling-metrics docs): x 100 to %.
* DCGM ``DCGM_FI_PROF_PCIE_*_BYTES`` / ``NVLINK_*_BYTES`` (dcgmi ``PCITX`` ... ``NVLRX``) are
  already bytes per second (DCGM docs): x 1.
* Power is W, clocks MHz, utilizations % everywhere: x 1.
* A ``--query-gpu`` header's unit is honoured (``_UNIT_FACTORS``): ``memory.used [KiB]`` is
  read in KiB, ``[GiB]``/``[MB]``/``[GB]`` likewise, ``power.draw [kW]``/``[mW]``,
  ``clocks.sm [GHz]``/``[kHz]``; a unit it cannot convert (``temperature.gpu [F]``) refuses
  the file, naming the field.  A header naming one field twice is refused too.

Time.  nvidia-smi prints wall-clock local time without a zone; ``tz`` says which zone it was
(default UTC).  Files without timestamps get synthetic ones: each cycle of GPU indices (or each
header block) is one instant, ``interval`` seconds apart (defaults: dmon 1 s = ``dmon -d``
default, dcgmi 1 s = ``dcgmi dmon -d 1000`` default, query 1 s, dcgm-exporter 30 s = its
default collect interval).  ``start_time`` pins the first instant; without it the *last*
instant is the file's modification time (the moment the last line was written);
``ImportResult.placed`` (and ``dated``, for a ``dmon -o T`` file's date) says which,
``placed_at`` when and ``interval``/``interval_assumed`` how far apart, so the caller can
say so (``tealeaves import`` does, loudly).  Rows without a time in a file whose other rows
(or tables) carry theirs are refused, not placed, unless ``start_time`` is given.

GPUs.  A ``--query-gpu`` CSV without ``index`` tells GPUs apart by ``uuid``/``pci.bus_id``
(a row with both blank is refused), else by place among the rows of one timestamp, and
then only in full sweeps: the rows of a shorter sweep (a GPU missing or replaced by
nvidia-smi's error line) are refused, never renumbered.

Values are checked, not trusted: a data line with the wrong number of fields, an unparsable
or non-finite number, a negative value or a percentage outside 0-100 (ratio outside 0-1) is
skipped whole and recorded, so a mangled line never shifts a value into the wrong column.
A field the tool marks as no reading (``N/A``, ``-``, ``ERR!``, ``[Unknown Error]``,
``[GPU is lost]`` ...) is a blank: NaN, counted in ``blanks``; the row's other values kept.
"""

from __future__ import annotations

import math
import time as _time
from collections.abc import Sequence
from datetime import datetime, tzinfo
from pathlib import Path

import pandas as pd

from tealeaves.data import pasted
from tealeaves.data.detect import (
    _SCAN_LINES,
    FORMATS,
    LOG_FORMATS,
    SERVER_METRICS_FORMAT,
    _decode,
    _detect_bytes,
    _refuse_not_samples,
    detect_format,
    detect_text,
    other_tool,
    plain_head,
    read_text,
)
from tealeaves.data.dmon import DMON_COLUMNS, NotStreamable
from tealeaves.data.dmon_passes import DmonImport, FileLines, text_lines
from tealeaves.data.import_common import (
    _EXPECTED,
    MAX_FILE_BYTES,
    MAX_LINE_BYTES,
    ImportFormatError,
    ImportResult,
    _csv_fields,
    _frame,
    _HeaderError,
    _placed_among_dated,
    _read_bytes,
    _screen,
    _summary,
    regular_file,
)
from tealeaves.data.import_csv import _parse_tealeaves_csv
from tealeaves.data.import_dcgmi import DCGMI_FIELDS, _parse_dcgmi
from tealeaves.data.import_exporter import DCGM_METRICS, _parse_exporter
from tealeaves.data.import_query import QUERY_COLUMNS, _is_query_header, _parse_query
from tealeaves.data.import_table import _parse_table
from tealeaves.data.metrics import MIB
from tealeaves.data.schema import (
    DEVICE_COLUMNS,
    METRIC_BY_NAME,
)
from tealeaves.data.traces import Trace, TraceError, read_trace
from tealeaves.data.wallclock import LocalClock, parse_zone, zone_name

__all__ = [
    "DCGMI_FIELDS",
    "DCGM_METRICS",
    "DMON_COLUMNS",
    "FORMATS",
    "LOG_FORMATS",
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
    "MIB",
    "QUERY_COLUMNS",
    "SERVER_METRICS_FORMAT",
    "ImportFormatError",
    "ImportResult",
    "detect_format",
    "detect_text",
    "import_file",
    "import_text",
    "load_trace",
    "other_tool",
    "read_text",
    "regular_file",
    "stream_file",
]


_ALIASES = {
    "dmon": "nvidia_smi_dmon",
    "nvidia-smi-dmon": "nvidia_smi_dmon",
    "query": "nvidia_smi_query",
    "table": "nvidia_smi_table",
    "nvidia-smi": "nvidia_smi_table",
    "smi": "nvidia_smi_table",
    "query_gpu": "nvidia_smi_query",
    "query-gpu": "nvidia_smi_query",
    "nvidia-smi-query": "nvidia_smi_query",
    "prometheus": "dcgm_exporter",
    "dcgm-exporter": "dcgm_exporter",
    "dcgmi": "dcgmi_dmon",
    "dcgmi-dmon": "dcgmi_dmon",
    "parquet": "tealeaves_parquet",
    "csv": "tealeaves_csv",
}


_DEFAULT_INTERVAL = {"nvidia_smi_dmon": 1.0, "nvidia_smi_query": 1.0, "dcgmi_dmon": 1.0,
                     "dcgm_exporter": 30.0, "nvidia_smi_table": 1.0}


def _epoch(t: float | datetime | None, zone: tzinfo) -> float | None:
    if t is None:
        return None
    if isinstance(t, datetime):
        return (t if t.tzinfo else t.replace(tzinfo=zone)).timestamp()
    return float(t)


def _normalise_format(fmt: str) -> str:
    f = fmt.strip().lower()
    f = _ALIASES.get(f, f)
    if f not in FORMATS and f not in LOG_FORMATS and f != SERVER_METRICS_FORMAT:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return f


def _parse_format(fmt: str, text: str, *, host: str, zone: tzinfo, start: float | None,
                  end: float, interval: float, columns: Sequence[str] | None,
                  clock: LocalClock) -> tuple[list[dict], int, list[tuple[int, str]], dict]:
    """Run ``fmt``'s parser (any but ``nvidia_smi_dmon``, read as columns by
    :func:`_parse_dmon`), its local times through ``clock``: ``(records, rows read, skipped,
    extra facts)``.

    Raises:
        _HeaderError: the file's header cannot be read (``import_text`` names the file).
    """
    h, step = host, interval
    extra: dict = {}
    if fmt == "nvidia_smi_query":
        records, nread, skipped, extra = _parse_query(text, host=h, zone=zone, start=start,
                                                      end=end, interval=step, columns=columns,
                                                      clock=clock)
    elif fmt == "nvidia_smi_table":
        records, nread, skipped, extra = _parse_table(text, host=h, zone=clock, start=start,
                                                      end=end, interval=step)
    elif fmt == "dcgm_exporter":
        unread_series: set[str] = set()
        facts: dict = {}
        records, nread, skipped = _parse_exporter(text, host=h, start=start, end=end,
                                                  interval=step, not_read=unread_series,
                                                  facts=facts)
        extra = {"not_read": sorted(unread_series),
                 "devices": [{"host": fh, "gpu": g, **f} for (fh, g), f in sorted(facts.items())]}
    elif fmt == "dcgmi_dmon":
        unread: set[str] = set()
        records, nread, skipped = _parse_dcgmi(text, host=h, zone=zone, start=start, end=end,
                                               interval=step, clock=clock, not_read=unread)
        extra = {"not_read": sorted(unread)}
    else:
        records, nread, skipped = _parse_tealeaves_csv(text, host=h)
    kept = records if start is not None else _placed_among_dated(records, skipped)
    return kept, nread - (len(records) - len(kept)), skipped, extra


def import_text(text: str, format: str, *, name: str = "<text>",
                start_time: float | datetime | None = None, end_time: float | None = None,
                host: str | None = None, columns: Sequence[str] | None = None,
                tz: str | tzinfo | None = None, interval: float | None = None
                ) -> ImportResult:
    """Import telemetry ``text`` of a known ``format`` (see :func:`import_file`).

    Args:
        text: the file's content.
        format: one of ``FORMATS`` except ``tealeaves_parquet`` (or an alias: ``dmon``,
            ``query``, ``prometheus``, ``dcgmi``, ``csv``).
        name: the name used in messages.
        start_time: UTC epoch seconds (or a datetime) of the first instant of files without
            timestamps, and the date of ``dmon -o T`` files.
        end_time: UTC epoch seconds of the last instant when ``start_time`` is None (the
            file's mtime for :func:`import_file`); default: now.
        host: host name for sources that do not name one (default "localhost").
        columns: query names of a header-less ``--query-gpu`` CSV, in order.
        tz: time zone of wall-clock times printed by nvidia-smi/dcgmi (default UTC).
        interval: seconds between synthetic instants (default per format; see module doc).

    Returns:
        An :class:`ImportResult`.

    Raises:
        ImportFormatError: ``format`` is a server log, or no row was read and the text does
            not look like ``format`` at all.
        ValueError: ``format`` or ``tz`` is unknown.
    """
    fmt = _normalise_format(format)
    _refuse_not_samples(fmt, name)
    if fmt == "tealeaves_parquet":
        raise ImportFormatError(f"{name}: Parquet is binary; use import_file")
    zone = parse_zone(tz)  # the one reading of --tz (data.wallclock)
    start = _epoch(start_time, zone)
    plain = pasted.normalise(text)
    text = plain.text
    end = float(end_time) if end_time is not None else _time.time()
    step = float(interval) if interval is not None else _DEFAULT_INTERVAL.get(fmt, 1.0)
    if not math.isfinite(step) or step <= 0:
        raise ValueError(f"interval must be positive, got {interval!r}")
    h = host or "localhost"
    extra: dict = {}
    clock = LocalClock(zone)  # one per file: its times in order, around clock changes
    how = "start_time" if start is not None else ("mtime" if end_time is not None else "now")
    if fmt == "nvidia_smi_dmon":  # a chunk of lines at a time, as columns
        imp = DmonImport(text_lines(text), name=name, host=h, zone=zone, start=start, end=end,
                         interval=step, how=how, now=_time.time(), assumed=interval is None,
                         normalised=plain.notes)
        _surveyed(imp, name, text)
        return imp.load()
    try:
        records, nread, skipped, extra = _parse_format(fmt, text, host=h, zone=zone,
                                                       start=start, end=end, interval=step,
                                                       columns=columns, clock=clock)
    except _HeaderError as exc:
        raise ImportFormatError(f"{name}: {exc}") from exc
    records, facts_only = _readings_or_facts(records, skipped, extra, fmt, name, text)
    placed = how if any(r.get("_placed") for r in records) else None
    dated = how if any(r.get("_dated") for r in records) else None
    records, refused, blanks = _screen(records, _time.time())
    res = _summary(_frame(records, name), fmt, nread - len(refused), [*skipped, *refused],
                   name, blanks)
    res.placed, res.dated = placed, dated
    if placed:
        res.interval, res.interval_assumed = step, interval is None
    res.normalised = plain.notes
    _add_facts(res, extra, clock, zone, records, facts_only)
    if placed or dated:
        # the time a row was actually stored at: the first placed row from a start time,
        # else the last (the file's modification time unless rows were refused)
        at = [r["timestamp"] for r in records if r.get("_placed") or r.get("_dated")]
        res.placed_at = (min(at) if start is not None else max(at)) if at else (
            start if start is not None else end)
    return res


def _readings_or_facts(records: list[dict], skipped: list[tuple[int, str]], extra: dict,
                       fmt: str, name: str, text: str) -> tuple[list[dict], bool]:
    """The records of a parsed text checked for readings: ``(records, facts only)``; a file
    of device facts only (an inventory) keeps no record.

    Raises:
        ImportFormatError: no row read and the text is not ``fmt`` (a forced format), rows
            without a reading tealeaves stores and no device facts, or an nvidia-smi table
            without a GPU row.
    """
    if not records and detect_text(text) != fmt:
        raise ImportFormatError(f"{name}: holds no {fmt} data (forced format); "
                                f"expected {_EXPECTED}")
    facts_only = False
    if records and not any(k in METRIC_BY_NAME for r in records for k in r):
        fields = extra.get("fields") or []
        listed = f" (its fields: {', '.join(fields)})" if fields else ""
        if extra.get("devices"):  # an inventory (name, memory.total, power.limit ...)
            facts_only = True
            records = []
        else:
            raise ImportFormatError(
                f"{name}: holds no reading tealeaves stores{listed}; it reads utilization, "
                f"memory used, power, SM clock, PCIe/NVLink throughput and DCGM's profiling "
                f"ratios; nothing was stored")
    if fmt == "nvidia_smi_table" and not records:
        raise ImportFormatError(f"{name}: an nvidia-smi table without a GPU row read "
                                f"({len(skipped)} row{'s' if len(skipped) != 1 else ''} not "
                                f"understood); nothing was stored")
    return records, facts_only


def _add_facts(res: ImportResult, extra: dict, clock: LocalClock, zone: tzinfo,
               records: list[dict], facts_only: bool) -> None:
    """Fill in what the parser found beside the records (``extra``: device facts, notes, how
    GPUs were told apart, the fields not read) and the clock's note, the zone used."""
    if extra.get("devices"):
        res.devices = pd.DataFrame([{k: v for k, v in d.items() if not k.startswith("_")}
                                    for d in extra["devices"]])
    res.notes = list(extra.get("notes", []))
    if clock.note():
        res.notes.append(clock.note())
    if facts_only:
        res.notes.append("no readings in the file (device facts only): no samples stored")
    res.gpu_key = extra.get("gpu_key")
    res.not_read = list(extra.get("not_read", []))
    if extra.get("dated") or any(r.get("_wall") for r in records):
        res.zone = zone_name(zone)


def _surveyed(imp: DmonImport, name: str, head: str) -> None:
    """Run a dmon import's survey; a file without a dmon row is refused unless it looks
    like dmon output (a forced format on another file).

    Raises:
        ImportFormatError: a header the file cannot be read by, no reading, or no dmon data.
        NotStreamable: as ``DmonImport.survey``.
    """
    try:
        info = imp.survey()
    except _HeaderError as exc:
        raise ImportFormatError(f"{name}: {exc}") from exc
    if not info.rows and detect_text(head) != "nvidia_smi_dmon":
        raise ImportFormatError(f"{name}: holds no nvidia_smi_dmon data (forced format); "
                                f"expected {_EXPECTED}")


def stream_file(path: str | Path, format: str | None = None,
                start_time: float | datetime | None = None, host: str | None = None, *,
                tz: str | tzinfo | None = None, interval: float | None = None
                ) -> DmonImport | None:
    """An ``nvidia-smi dmon`` file's import, surveyed and ready to hand its samples over a
    chunk at a time (``DmonImport.frames``: memory bounded by a chunk, whatever the file's
    size); None when ``path`` is not a dmon file that can be read so (another format, a
    paste to undo, another encoding: read it with :func:`import_file`).  Arguments as for
    :func:`import_file`.

    Raises:
        ImportFormatError: as :func:`import_file` (the file is refused, naming it).
        ValueError: ``format`` or ``tz`` is unknown.
    """
    path = regular_file(path)
    if format is not None and _normalise_format(format) != "nvidia_smi_dmon":
        return None
    head = plain_head(path, strict=True)  # None: import_file reads it (and says why)
    try:
        st = path.stat()
    except OSError:
        return None
    if head is None:
        return None
    text = head[0]
    if format is None and detect_text(text) != "nvidia_smi_dmon":
        return None
    zone = parse_zone(tz)  # the one reading of --tz (data.wallclock)
    step = float(interval) if interval is not None else _DEFAULT_INTERVAL["nvidia_smi_dmon"]
    if not math.isfinite(step) or step <= 0:
        raise ValueError(f"interval must be positive, got {interval!r}")
    start = _epoch(start_time, zone)
    imp = DmonImport(FileLines(path), name=str(path), host=host or "localhost", zone=zone,
                     start=start, end=st.st_mtime, interval=step,
                     how="start_time" if start is not None else "mtime", now=_time.time(),
                     assumed=interval is None)
    try:
        _surveyed(imp, str(path), text)
    except NotStreamable:
        return None
    return imp


def import_file(path: str | Path, format: str | None = None,
                start_time: float | datetime | None = None, host: str | None = None,
                columns: Sequence[str] | None = None, *, tz: str | tzinfo | None = None,
                interval: float | None = None) -> ImportResult:
    """Import a telemetry file into the sample schema.

    Args:
        path: the file.
        format: force a format (``FORMATS`` or an alias); default: :func:`detect_format`.
        start_time: UTC epoch seconds (or datetime) of the first instant for files without
            timestamps (a ``dmon -c 1`` snapshot, dcgmi dmon, a dcgm-exporter scrape) and the
            date for ``dmon -o T``.  Default: the last instant is the file's mtime.
        host: host name where the source names none (default "localhost").
        columns: query names for a header-less ``--query-gpu`` CSV, e.g.
            ``["timestamp", "index", "utilization.gpu", "memory.used"]``.
        tz: zone of the wall-clock times nvidia-smi/dcgmi printed (default UTC).
        interval: seconds between synthetic instants (defaults: 1 s; dcgm-exporter 30 s).

    Returns:
        An :class:`ImportResult`: ``samples`` (conform()-ed, units of ``data.schema``),
        ``format``, ``rows_read``, ``skipped`` ``[(line, reason)]``, ``gpus``, ``time_span``.

    Raises:
        ImportFormatError (a ValueError): the file is missing, empty, binary, JSON, a server
            log, in no known format, a header-less query CSV without ``columns``, or a Parquet
            file that is not a tealeaves trace.  The message names the file.
        ValueError: ``format`` or ``tz`` is unknown.
    """
    streamed = stream_file(path, format, start_time, host, tz=tz, interval=interval)
    if streamed is not None:
        return streamed.load()
    path = Path(path)
    data = _read_bytes(path)
    name = str(path)
    fmt = _file_format(data, name, format, columns)
    _refuse_not_samples(fmt, name)
    if fmt == "tealeaves_parquet":
        return _import_parquet(path, name, host)
    text, decoded = _decode(data, name)
    plain = pasted.normalise(text)  # once: import_text finds nothing left to undo
    if fmt == "nvidia_smi_query" and not columns and not any(
            "," in ln and _is_query_header(_csv_fields(ln.strip()))
            for ln in plain.text.split("\n")[:_SCAN_LINES]):
        raise ImportFormatError(f"{name}: --query-gpu CSV without a header line; give its "
                                "--query-gpu names, in order, with --columns (columns= in "
                                "Python)")
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = None
    del data, text  # the file's bytes and raw text: only the plain text is read from here
    res = import_text(plain.text, fmt, name=name, start_time=start_time, end_time=mtime, host=host,
                      columns=columns, tz=tz, interval=interval)
    res.normalised = [*decoded, *plain.notes, *res.normalised]
    return res


def _file_format(data: bytes, name: str, format: str | None,
                 columns: Sequence[str] | None) -> str:
    """The format a file's bytes are read in: ``format`` (normalised) when given, else the
    one detected (a --query-gpu CSV when undetected and ``columns`` are given).

    Raises:
        ImportFormatError: as :func:`detect_format`; an empty file with a forced format.
        ValueError: ``format`` is unknown.
    """
    if format is None:
        try:
            return _detect_bytes(data, name)
        except ImportFormatError:
            if not columns:
                raise
            return "nvidia_smi_query"
    fmt = _normalise_format(format)
    if not data.strip():
        raise ImportFormatError(f"{name}: file is empty; expected {_EXPECTED}")
    return fmt


def _import_parquet(path: Path, name: str, host: str | None) -> ImportResult:
    """A tealeaves Parquet trace imported: its samples, rows with an implausible time refused
    (named by row), the blanks and out-of-range values counted.

    Raises:
        ImportFormatError: not a tealeaves Parquet trace (``TraceError``'s message).
    """
    fmt = "tealeaves_parquet"
    counts: dict = {}
    try:
        trace = read_trace(path, counts=counts)
    except TraceError as exc:
        raise ImportFormatError(f"{exc}; expected a tealeaves Parquet trace") from exc
    df = trace.samples
    if host:
        df = df.assign(host=df["host"].where(df["host"] != "localhost", host))
    # a Parquet trace has no lines: a refused row is named by its row (1 = first, in
    # time order); values outside the field limits were read as NaN and are counted
    recs = [{"timestamp": t, "_line": i + 1} for i, t in enumerate(df["timestamp"])]
    kept, refused, _ = _screen(recs, _time.time())
    if refused:
        df = df.iloc[[r["_line"] - 1 for r in kept]].reset_index(drop=True)
    blanks = {c: v["blank"] for c, v in counts.items() if v["blank"]}
    res = _summary(df, fmt, len(df), [(n, "row " + why) for n, why in refused], name,
                   blanks)
    res.out_of_range = {c: v["out_of_range"] for c, v in counts.items()
                        if v["out_of_range"]}
    dev = trace.devices  # the trace's device facts (name, UUID, power limit ...) go with it
    if host and len(dev) and "host" in dev:
        dev = dev.assign(host=dev["host"].where(dev["host"] != "localhost", host))
    res.devices = dev.reset_index(drop=True)
    return res


def load_trace(path: str | Path, format: str | None = None, **kwargs) -> Trace:
    """Any importable file as a ``Trace``: a tealeaves Parquet trace keeps its device rows and
    facts; every other format gives its samples and the device facts it states
    (``ImportResult.devices``: an nvidia-smi table's power caps, a query CSV's
    ``power.limit`` ...), so power is normalised by the limit the file states.

    Args:
        path, format, **kwargs: as for :func:`import_file`.

    Raises:
        ImportFormatError: as :func:`import_file`; also when the file holds no samples.
        TraceError: a tealeaves Parquet trace that cannot be read.
    """
    fmt = format or detect_format(path)
    if fmt == "tealeaves_parquet":
        return read_trace(regular_file(path))
    res = import_file(path, format=fmt, **kwargs)
    if res.samples.empty:
        n = res.skipped_count
        raise ImportFormatError(f"{path}: {res.format} file holds no samples "
                                f"({n} line{'' if n == 1 else 's'} skipped)")
    devices = (res.devices[[c for c in DEVICE_COLUMNS if c in res.devices.columns]]
               if len(res.devices) else pd.DataFrame())
    return Trace(samples=res.samples, devices=devices,
                 meta={"format": res.format, "source": str(path), "rows_read": res.rows_read,
                       "skipped": res.skipped_count,
                       "first_skipped": list(res.skipped[0]) if res.skipped else None,
                       "placed": res.placed,
                       "dated": res.dated, "placed_at": res.placed_at,
                       "interval": res.interval, "interval_assumed": res.interval_assumed})
