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

import csv
import json
import math
import re
import time as _time
from collections.abc import Sequence
from datetime import datetime, tzinfo
from pathlib import Path

import numpy as np
import pandas as pd

from tealeaves.data import import_common, pasted, server_lines, smi_table
from tealeaves.data.dmon import DMON_COLUMNS, NotStreamable  # noqa: F401
from tealeaves.data.dmon_passes import DmonImport, FileLines, text_lines
from tealeaves.data.import_common import (  # noqa: F401 - public here too (importers.X)
    _BLANK_TEXT,
    _CHUNK,
    _EXPECTED,
    _RE_INDEX,
    _RE_NUMBER,
    _UNTIMED_AMONG_TIMED,
    BLANK,
    MAX_FILE_BYTES,
    MAX_LINE_BYTES,
    ImportFormatError,
    ImportResult,
    _anchor,
    _binary_kind,
    _Blank,
    _check_header,
    _Cycles,
    _file_kind,
    _gpu_index,
    _HeaderError,
    _LineBound,
    _lines,
    _number,
    _read_bytes,
    _refusals,
    _scaled,
    _short,
    _summary,
    regular_file,
)
from tealeaves.data.metrics import (
    MIB,  # noqa: F401 - public here too (tests, callers: importers.MIB)
    dcgm_fields,
    dcgmi_fields,
    smi_query_fields,
)
from tealeaves.data.schema import (
    COLUMNS,
    DEVICE_COLUMNS,
    MAX_GPUS,
    METRIC_BY_NAME,
    METRIC_NAMES,
    SchemaError,
    conform,
    empty_frame,
    mig_entity,
    valid_entity,
)
from tealeaves.data.traces import Trace, TraceError, read_trace
from tealeaves.data.wallclock import LocalClock, parse_zone, zone_name

__all__ = [
    "FORMATS",
    "LOG_FORMATS",
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
    "SERVER_METRICS_FORMAT",
    "ImportFormatError",
    "ImportResult",
    "detect_format",
    "detect_text",
    "import_file",
    "import_text",
    "read_text",
    "regular_file",
]

#: Formats the importers turn into samples.
FORMATS: tuple[str, ...] = (
    "nvidia_smi_dmon",
    "nvidia_smi_query",
    "nvidia_smi_table",
    "dcgm_exporter",
    "dcgmi_dmon",
    "tealeaves_parquet",
    "tealeaves_csv",
)
#: Formats recognised but handled by the server-log parser, not here.
LOG_FORMATS: tuple[str, ...] = ("sglang_log", "vllm_log")
#: A saved SGLang/vLLM ``/metrics`` page (Prometheus text of ``sglang:``/``vllm:`` series):
#: server signals, read by ``data.server_metrics.read_page``, not here.
SERVER_METRICS_FORMAT = "server_metrics"

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
_SCAN_LINES = 4000


# --------------------------------------------------------------------------- detection

_RE_DCGMI_HEADER = re.compile(r"^#\s*Entity\b", re.IGNORECASE)
_RE_DMON_HEADER = re.compile(r"^#\s*(?:date[\s,]+)?(?:time[\s,]+)?gpu\b", re.IGNORECASE)
#: ``nvidia-smi pmon``'s header (per process: its sm/mem are a process's share, not a GPU's).
_RE_PMON_HEADER = re.compile(r"^#\s*gpu\s+pid\b", re.IGNORECASE)
_RE_PROM_DCGM = re.compile(r"^(?:#\s*(?:HELP|TYPE)\s+)?DCGM_\w+")
_RE_SERVER_METRICS = re.compile(r"^(?:#\s*(?:HELP|TYPE)\s+)?(?:sglang|vllm):[A-Za-z_]")
#: A --query-gpu field name as nvidia-smi documents it (``--help-query-gpu``), any case: most
#: are lower-case, some camelCase (``pci.baseClass``, ``...heterogenous_multivGPU``).
_RE_QUERY_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*(?:\s*\[[^\]]*\])?$")
_RE_QUERY_TS = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?$", re.ASCII)
_RE_QUERY_UNIT_VALUE = re.compile(r"^\d+(?:\.\d+)? (?:%|MiB|W|MHz)$", re.ASCII)


def _decode(data: bytes, name: str) -> tuple[str, list[str]]:
    """The text of a file's bytes and what its encoding took (``pasted.decode``: UTF-16 from
    PowerShell, a byte-order mark), else UTF-8.

    Raises:
        ImportFormatError: the bytes are an image, an archive or other binary data.
    """
    text, notes = pasted.decode(data)
    if text is not None:
        return text, notes
    kind = _binary_kind(data)
    if kind:
        raise ImportFormatError(f"{name}: is {kind}, not telemetry text; expected {_EXPECTED}")
    text = data.decode("utf-8", errors="replace")
    if text and text.count("\ufffd") > max(8, len(text) // 100):
        raise ImportFormatError(f"{name}: is binary data, not telemetry text; expected {_EXPECTED}")
    return text.removeprefix("\ufeff"), []


def _csv_fields(line: str) -> list[str]:
    try:
        return [f.strip() for f in next(csv.reader([line], skipinitialspace=True))]
    except (csv.Error, StopIteration):
        return []


def _is_query_header(fields: Sequence[str]) -> bool:
    if len(fields) < 1 or not all(_RE_QUERY_NAME.match(f) for f in fields):
        return False
    names = [_split_unit(f)[0] for f in fields]
    known = sum(1 for n in names if n in _QUERY_KNOWN or n.split(".")[0] in _QUERY_PREFIXES)
    # a few known names suffice: the full field list (200+) is mostly names tealeaves does not
    # read (pci.baseClass, vgpu_driver_capability..., driver_version)
    return known >= max(1, min(3, len(names) // 2)) and (
        "." in "".join(names) or "timestamp" in names or "index" in names or "uuid" in names)


def _is_tealeaves_header(fields: Sequence[str]) -> bool:
    return "timestamp" in fields and "gpu" in fields and all(f in COLUMNS for f in fields)


def detect_text(text: str) -> str | None:
    """Name the format of ``text`` (see ``FORMATS``/``LOG_FORMATS``), or None when unknown.

    Looks at the first few thousand lines for each format's signature: the ``#Entity`` header
    of dcgmi, the ``# gpu`` header of nvidia-smi dmon, ``DCGM_`` metric lines, a header of
    schema columns, a ``--query-gpu`` header of query names, SGLang/vLLM log lines, then
    header-less ``--query-gpu`` values (``2024/01/16 14:44:16.977``, ``0 %``, ``21 MiB``).
    """
    flags: set[str] = set()
    first_fields: list[str] | None = None
    for n, raw in enumerate(text.split("\n")):
        if n >= _SCAN_LINES:
            break
        line = raw.strip()
        if not line:
            continue
        if first_fields is None and not line.startswith(("$", "#")):
            first_fields = _csv_fields(line)
        if smi_table.is_table(line):
            flags.add("nvidia_smi_table")
        elif _RE_DCGMI_HEADER.match(line):
            flags.add("dcgmi_dmon")
        elif _RE_DMON_HEADER.match(line) and not _RE_PMON_HEADER.match(line):
            flags.add("nvidia_smi_dmon")
        elif _RE_PROM_DCGM.match(line):
            flags.add("dcgm_exporter")
        elif _RE_SERVER_METRICS.match(line):
            flags.add(SERVER_METRICS_FORMAT)
        elif ("batch" in line or "metrics" in line or "throughput" in line) and (
                log := server_lines.line_format(line)):
            flags.add(f"{log}_log")  # the parser's own recogniser (``data.server_lines``)
        elif "," in line:
            fields = _csv_fields(line)
            if _is_tealeaves_header(fields):
                flags.add("tealeaves_csv")
            elif _is_query_header(fields):
                flags.add("query_header")
            elif len(fields) >= 2 and any(_RE_QUERY_TS.match(f) or _RE_QUERY_UNIT_VALUE.match(f)
                                          or f in ("[N/A]", "[Not Supported]") for f in fields):
                flags.add("query_values")
    for fmt in ("dcgmi_dmon", "nvidia_smi_dmon", "dcgm_exporter", "tealeaves_csv"):
        if fmt in flags:
            return fmt
    if "query_header" in flags:
        return "nvidia_smi_query"
    if "nvidia_smi_table" in flags:
        return "nvidia_smi_table"
    for fmt in (*LOG_FORMATS, SERVER_METRICS_FORMAT):
        if fmt in flags:
            return fmt
    if "query_values" in flags:
        return "nvidia_smi_query"
    return None


#: Outputs of other tools and other nvidia-smi modes, named in a refusal: (pattern, name).
#: Looked for only when no importable format was found.
_OTHER_TOOLS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"ROCm System Management Interface|^\s*=+\s*ROCm SMI|rocm-smi", re.MULTILINE | re.IGNORECASE),
     "AMD rocm-smi output"),
    (re.compile(r"\bamd-smi\b|AMDSMI|^\s*GPU\s+POWER\s+GPU_T|\bGFX_(?:UTIL|ACTIVITY)\b"
                r"|^\s*ASIC:\s*$", re.MULTILINE),
     "AMD amd-smi output"),
    (re.compile(r"xpu-smi|intel-gpu-top|intel_gpu_top", re.IGNORECASE), "Intel GPU tool output"),
    (re.compile(r"=+\s*NVSMI LOG\s*=+"), "nvidia-smi -q (the long query report)"),
    (re.compile(r"^\s*GPU0(?:\t|\s+)(?:X|GPU1|NV\d+|PIX|PXB|SYS|NODE)\b.*$|CPU Affinity"
                r"|^\s*X\s+=\s+Self", re.MULTILINE),
     "nvidia-smi topo -m (the topology matrix)"),
    (re.compile(r"^\s*#\s*gpu\s+pid\s+type\b", re.MULTILINE | re.IGNORECASE),
     "nvidia-smi pmon (per-process use, not per-GPU counters)"),
    (re.compile(r"^GPU \d+: .+\(UUID: GPU-", re.MULTILINE), "nvidia-smi -L (the GPU list, no readings)"),
    (re.compile(r"^\[\d+\] .+\|\s*\d+\s*°?'?C,\s*\d+\s*%", re.MULTILINE), "gpustat output"),
    (re.compile(r"^# (?:HELP|TYPE) [a-zA-Z_:][\w:]* ", re.MULTILINE),
     "Prometheus text without dcgm-exporter's DCGM_ series or SGLang/vLLM's"),
)


def other_tool(text: str) -> str | None:
    """The tool whose output ``text`` is when it is not an importable format (``_OTHER_TOOLS``:
    AMD's rocm-smi and amd-smi, nvidia-smi -q / topo -m / pmon / -L, gpustat, ...), else
    None."""
    head = text[:200_000]
    for pat, what in _OTHER_TOOLS:
        if pat.search(head):
            return what
    return None


def read_text(path: str | Path) -> tuple[str, list[str]]:
    """A text file as the importers read it: decoded (UTF-16, byte-order marks) and with what
    pasting did undone (``data.pasted``).

    Returns:
        ``(text, notes)``: the plain text and what was undone (empty for a plain file).

    Raises:
        ImportFormatError: missing, a directory, unreadable, or binary.
    """
    path = Path(path)
    text, decoded = _decode(_read_bytes(path), str(path))
    plain = pasted.normalise(text)
    return plain.text, [*decoded, *plain.notes]


def detect_format(path: str | Path) -> str:
    """Detect the format of the file at ``path`` from its content.

    Returns:
        One of ``FORMATS``, ``LOG_FORMATS`` or ``SERVER_METRICS_FORMAT``.

    Raises:
        ImportFormatError: the file is missing, empty, binary (PNG, random bytes...), JSON,
            or text in none of the formats; the message names the file and what was expected.
    """
    path = Path(path)
    data = _read_bytes(path)
    return _detect_bytes(data, str(path))


def _detect_bytes(data: bytes, name: str) -> str:
    if not data.strip():
        raise ImportFormatError(f"{name}: file is empty; expected {_EXPECTED}")
    if data.startswith(b"PAR1"):
        return "tealeaves_parquet"
    text = pasted.normalise(_decode(data, name)[0]).text
    fmt = detect_text(text)
    if fmt is None:
        tool = other_tool(text)
        if tool is not None:
            raise ImportFormatError(f"{name}: is {tool}: not supported; tealeaves imports "
                                    f"{_EXPECTED}")
        what = "text in no known format"
        stripped = text.lstrip()
        if stripped[:1] in ("{", "["):
            try:
                json.loads(stripped)
                what = "JSON"
            except ValueError:
                pass
        raise ImportFormatError(f"{name}: is {what}, not telemetry tealeaves can import; "
                                f"expected {_EXPECTED}")
    return fmt


# --------------------------------------------------------------------------- helpers


def _tz(tz: str | tzinfo | None) -> tzinfo:
    """``tz`` as a zone: an IANA name, UTC or a fixed offset (``data.wallclock.parse_zone``,
    as ``--tz`` takes it).  Raises ValueError naming ``tz``."""
    return parse_zone(tz)


def _epoch(t: float | datetime | None, zone: tzinfo) -> float | None:
    if t is None:
        return None
    if isinstance(t, datetime):
        return (t if t.tzinfo else t.replace(tzinfo=zone)).timestamp()
    return float(t)


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


def _entity(tok: str) -> int:
    """A tealeaves file's ``gpu`` cell: a GPU index or a MIG entity number
    (``data.schema.mig_entity``).

    Raises:
        ValueError: neither (names the value).
    """
    t = tok.strip()
    if re.fullmatch(r"\d{1,9}", t, re.ASCII) and valid_entity(np.array([float(t)]))[0]:
        return int(t)
    raise ValueError(f"gpu {tok!r} is neither a GPU index 0-{MAX_GPUS - 1} nor a MIG entity "
                     f"number")


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


# --------------------------------------------------------------------------- nvidia-smi dmon


# --------------------------------------------------------------------------- --query-gpu CSV

#: query name -> (schema column, factor, expected unit, priority: lower wins), from the metric
#: table (``data.metrics``, the rows' ``smi_query``).
QUERY_COLUMNS: dict[str, tuple[str, float, str, int]] = smi_query_fields()
_QUERY_ID = {"timestamp", "index", "uuid", "gpu_uuid", "name", "pci.bus_id"}
_QUERY_KNOWN = set(QUERY_COLUMNS) | _QUERY_ID | {"pstate", "count", "serial", "gpu_name",
                                                  "driver_version", "vbios_version"}
_QUERY_PREFIXES = {"utilization", "memory", "power", "clocks", "temperature", "fan", "pcie",
                   "clocks_throttle_reasons", "clocks_event_reasons", "ecc", "enforced",
                   "pci", "mig", "compute_mode", "persistence_mode", "display_mode", "gom",
                   "inforom", "retired_pages", "encoder", "accounting", "driver_model"}
#: --query-gpu fields that state a device fact: (query name, ``DEVICE_COLUMNS`` column,
#: factor from the printed unit).  ``memory.total`` is MiB like ``memory.used``.
_QUERY_FACTS: tuple[tuple[str, str, float], ...] = (
    ("name", "name", 1.0), ("gpu_name", "name", 1.0),
    ("power.limit", "power_limit_w", 1.0), ("enforced.power.limit", "power_limit_w", 1.0),
    ("power.max_limit", "_max_power_w", 1.0),
    ("clocks.max.sm", "max_sm_clock_mhz", 1.0), ("clocks.max.graphics", "_max_gr_mhz", 1.0),
    ("memory.total", "mem_total_bytes", float(2**20)),
)
_QUERY_FACT_UNITS = {"power.limit": "W", "enforced.power.limit": "W", "power.max_limit": "W",
                     "clocks.max.sm": "MHz", "clocks.max.graphics": "MHz",
                     "memory.total": "MiB"}
_QUERY_TS_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S")
_RE_VALUE_UNIT = re.compile(r"^([0-9.eE+-]+)\s*([A-Za-z%/]+)?$")


def _split_unit(field_name: str) -> tuple[str, str | None]:
    m = re.match(r"^(.*?)\s*\[([^\]]*)\]\s*$", field_name)
    if m:
        return m.group(1).strip().lower(), m.group(2).strip()
    return field_name.strip().lower(), None


#: A unit a --query-gpu header may print -> its factor to the unit tealeaves reads the field
#: in (the metric table's ``smi_query`` unit; ``""`` for temperature.gpu, read in degrees C).
#: Binary prefixes are powers of 2**10, decimal ones of 10**3 (MB = 10**6 B).
_UNIT_FACTORS: dict[str, dict[str, float]] = {
    "MiB": {"MiB": 1.0, "KiB": 2.0**-10, "GiB": 2.0**10, "B": 2.0**-20,
            "MB": 1e6 / 2**20, "GB": 1e9 / 2**20},
    "W": {"W": 1.0, "kW": 1e3, "mW": 1e-3},
    "MHz": {"MHz": 1.0, "GHz": 1e3, "kHz": 1e-3},
    "%": {"%": 1.0},
    "": {"": 1.0, "C": 1.0, "°C": 1.0},
}


def _header_units(fields: Sequence[str], line: int | None) -> dict[str, tuple[str, float]]:
    """The units a --query-gpu header prints for the fields tealeaves reads: ``{query name:
    (unit its values may print, factor to the field's unit)}``; a field without a unit is
    left out (read in its own unit).

    Raises:
        _HeaderError: a read field's unit is not one ``_UNIT_FACTORS`` converts (names the
            field, its unit and the units known).
    """
    out: dict[str, tuple[str, float]] = {}
    for raw in fields:
        name, unit = _split_unit(raw)
        if unit is None:
            continue
        want = (QUERY_COLUMNS[name][2] if name in QUERY_COLUMNS
                else _QUERY_FACT_UNITS.get(name))
        if want is None:
            continue
        known = _UNIT_FACTORS.get(want, {want: 1.0})
        if unit not in known:
            where = f"line {line}: " if line else ""
            raise _HeaderError(f"{where}field {raw.strip()!r}: unit {unit!r} is not one "
                               f"tealeaves converts (it reads {name} in "
                               f"{', '.join(repr(u) for u in known if u)})")
        out[name] = (unit, known[unit])
    return out


def _query_value(tok: str, unit: str) -> float:
    t = tok.strip()
    if _blank_text(t):
        return BLANK
    m = _RE_VALUE_UNIT.match(t)
    if not m:
        raise ValueError(f"not a number: {tok!r}")
    if m.group(2) is not None and m.group(2) != unit:
        raise ValueError(f"unit {m.group(2)!r}, expected {unit!r}")
    return _number(m.group(1))


def _parse_query(text: str, *, host: str, zone: tzinfo, start: float | None, end: float,
                 interval: float, columns: Sequence[str] | None,
                 clock: LocalClock | None = None
                 ) -> tuple[list[dict], int, list[tuple[int, str]]]:
    clock = clock or LocalClock(zone)
    header: list[str] | None = ([_split_unit(c)[0] for c in columns] if columns else None)
    units = _header_units(columns, None) if columns else {}
    if header:
        _check_header(header, None)
    records: list[dict] = []
    skipped: list[tuple[int, str]] = []
    cycles = _Cycles()
    uuid_order: dict[tuple, int] = {}
    names_seen: dict[str, int] = {}
    instant: list | None = None
    keys: set[str] = set()
    devices: dict[int, dict] = {}
    fact_rows: list[dict] = []
    for n, line in _lines(text):
        s = line.strip()
        if not s:
            continue
        fields = _csv_fields(s)
        if "," in s and _is_query_header(fields):
            header = [_split_unit(f)[0] for f in fields]
            _check_header(header, n)
            units = _header_units(fields, n)
            cycles.new_block()
            continue
        if header is None:
            skipped.append((n, f"not data (no --query-gpu header; give --columns): {_short(s)}"))
            continue
        if len(fields) != len(header):
            skipped.append((n, f"expected {len(header)} fields, got {len(fields)}: {_short(s)}"))
            continue
        row = dict(zip(header, fields, strict=True))
        try:
            rec: dict = {"host": host, "uuid": row.get("uuid", row.get("gpu_uuid", "")),
                         "_line": n}
            best: dict[str, int] = {}
            for name, (target, factor, unit, prio) in QUERY_COLUMNS.items():
                if name in row and prio < best.get(target, 99):
                    unit, conv = units.get(name, (unit, 1.0))
                    rec[target] = _scaled(target, _query_value(row[name], unit), factor * conv)
                    best[target] = prio
            ts = None
            if "timestamp" in row:
                if not _RE_QUERY_TS.match(row["timestamp"]):
                    raise ValueError(f"bad timestamp {row['timestamp']!r}")
                for fmt in _QUERY_TS_FORMATS:
                    try:
                        dt = datetime.strptime(row["timestamp"], fmt)
                        break
                    except ValueError:
                        continue
                else:
                    raise ValueError(f"bad timestamp {row['timestamp']!r}")
                ts = clock.epoch(dt)
                if ts is None:
                    raise ValueError(clock.gap_reason(dt))
            bus = row.get("pci.bus_id", "")
            if "index" in row:
                gpu = _gpu_index(row["index"])
                keys.add("index")
            elif ids := [k for k in (("uuid", rec["uuid"]), ("bus", bus))
                         if k[1] and not _blank_text(k[1])]:
                gpu = _gpu_by_id(uuid_order, ids)
                keys.add("uuid" if ids[0][0] == "uuid" else "pci.bus_id")
            elif {"uuid", "gpu_uuid", "pci.bus_id"} & row.keys():
                # the file tells GPUs apart by id: a row whose id is blank is no GPU known
                raise ValueError("its uuid / pci.bus_id is blank: which GPU it is is not "
                                 "known")
            elif ts is not None:
                # one query instant: a run of rows printed with the same timestamp (one
                # sweep over the GPUs); a GPU is its place in the run
                if instant is None or row["timestamp"] != instant[0]:
                    instant = [row["timestamp"], 0, n]
                gpu = instant[1]
                instant[1] += 1
                rec["_sweep"] = instant[2]
                keys.add("name and place" if gpu else "single")
            else:
                name = row.get("name", row.get("gpu_name", ""))
                if name and name not in names_seen:
                    names_seen[name] = len(names_seen)
                gpu = names_seen.get(name, 0) if len(names_seen) > 1 else 0
                keys.add("name" if len(names_seen) > 1 else "none")
            if gpu >= MAX_GPUS:
                raise ValueError(f"GPU {gpu} of one instant is past the {MAX_GPUS} read")
            rec["gpu"] = gpu
            if ts is not None:
                rec["timestamp"] = ts
                rec["_wall"] = True
            else:
                rec["_instant"] = cycles.place(gpu)
            facts = {}
            for qname, col, factor in _QUERY_FACTS:
                if qname in row and not _blank_text(row[qname]):
                    if col == "name":
                        facts[col] = row[qname].strip()
                    else:
                        unit, conv = units.get(qname, (_QUERY_FACT_UNITS.get(qname, ""), 1.0))
                        try:
                            v = _query_value(row[qname], unit) if unit else _number(row[qname])
                        except ValueError:
                            continue
                        if v is not BLANK and math.isfinite(v):
                            facts[col] = v * factor * conv
            if bus and not _blank_text(bus):
                facts["pci_bus_id"] = bus
            if facts:
                devices.setdefault(gpu, {}).update(facts)
            fact_rows.append(facts)
        except (ValueError, OverflowError) as exc:
            skipped.append((n, f"bad value ({exc}): {_short(s)}"))
            continue
        records.append(rec)
    records = _short_sweeps(records, skipped)
    t0 = _anchor(start, end, cycles.count, interval)
    for r in records:
        if "_instant" in r:
            r["timestamp"] = t0 + r.pop("_instant") * interval
            r["_placed"] = True
    key = next((k for k in ("index", "uuid", "pci.bus_id", "name and place", "name",
                            "single", "none") if k in keys), None)
    read = set(header or []) if records else set()
    known = set(QUERY_COLUMNS) | _QUERY_ID | {f[0] for f in _QUERY_FACTS}
    not_read = sorted(f for f in read if f not in known and f.split(".")[0] != "timestamp")
    metrics = any(k in METRIC_BY_NAME for r in records for k in r)
    if key == "none" and not metrics and len(fact_rows) > 1 and all(fact_rows):
        # an inventory (name, memory.total, ... and no reading): one sweep, a row per GPU
        devices = dict(enumerate(fact_rows))
        key = "inventory"
    devs = [{"host": host, "gpu": g, "uuid": "", **d} for g, d in sorted(devices.items())]
    return records, len(records), skipped, {"gpu_key": key, "not_read": not_read,
                                            "devices": devs, "fields": sorted(read)}


def _gpu_by_id(numbers: dict[tuple[str, str], int], ids: list[tuple[str, str]]) -> int:
    """The GPU number of a --query-gpu row told apart by its ids (``("uuid", ...)``,
    ``("bus", ...)``, the non-blank ones): the number either id already has, else the next
    free one (0, 1, ... in order of first appearance).  Both ids are recorded, so a GPU whose
    uuid is blank in one row keeps its number by its bus id."""
    gpu = next((numbers[k] for k in ids if k in numbers), None)
    if gpu is None:
        gpu = len(set(numbers.values()))
    for k in ids:
        numbers.setdefault(k, gpu)
    return gpu


def _short_sweeps(records: list[dict], skipped: list[tuple[int, str]]) -> list[dict]:
    """Refuse the rows of short sweeps of a --query-gpu CSV whose GPUs are numbered by place.

    Without an index, uuid or pci.bus_id field a row's GPU is its place among the rows
    printed with one timestamp (``_sweep``: the sweep's first line).  A sweep with fewer rows
    than the file's fullest one lacks a GPU (nvidia-smi printed an error line instead, or the
    row was refused), and which one is not known: numbering its rows by place would store a
    GPU's readings as another's.  Its rows are appended to ``skipped`` with the reason.

    Returns:
        The records kept (``_sweep`` removed).
    """
    sizes: dict[int, int] = {}
    for r in records:
        if "_sweep" in r:
            sizes[r["_sweep"]] = sizes.get(r["_sweep"], 0) + 1
    full = max(sizes.values(), default=0)
    kept = []
    for r in records:
        sweep = r.pop("_sweep", None)
        if sweep is not None and sizes[sweep] < full:
            why = (f"the sweep from line {sweep} (one timestamp) holds {sizes[sweep]} rows, "
                   f"a full one {full}, and the file has no index, uuid or pci.bus_id field: "
                   f"which GPU each row is is not known; row refused")
            skipped.append((r["_line"], why))
            continue
        kept.append(r)
    return kept


def _blank_text(tok: str) -> bool:
    t = tok.strip()
    return t in _BLANK_TEXT or (t.startswith("[") and t.endswith("]"))


# --------------------------------------------------------------------------- nvidia-smi table

def _parse_table(text: str, *, host: str, zone: tzinfo | LocalClock, start: float | None,
                 end: float, interval: float) -> tuple[list[dict], int, list[tuple[int, str]], dict]:
    """The plain ``nvidia-smi`` table(s) in ``text`` (``data.smi_table``): records, rows read,
    skipped lines and ``{"devices": [...], "notes": [...]}``.  An undated table is one
    instant placed like the other untimed formats (``_anchor``)."""
    read = smi_table.parse_tables(text, zone)
    skipped = list(read.skipped)
    if start is None:  # a start time given places them where the caller says
        read.records = _undated_among_dated(read.records, skipped)
    undated = sorted({r["_table"] for r in read.records if "timestamp" not in r})
    t0 = _anchor(start, end, len(undated), interval)
    slot = {t: i for i, t in enumerate(undated)}
    records = []
    for r in read.records:
        rec = {"host": host, "gpu": r["gpu"], "uuid": "", "_line": r["_line"]}
        for col in smi_table.READINGS:
            rec[col] = BLANK if col in r["blank"] else r[col]
        if "timestamp" in r:
            rec["timestamp"] = r["timestamp"]
        else:
            rec["timestamp"] = t0 + slot[r["_table"]] * interval
            rec["_placed"] = True
        records.append(rec)
    devices = [{"host": host, "uuid": "", "max_sm_clock_mhz": math.nan, **d}
               for d in read.devices.values()]
    notes = []
    if read.tables > 1:
        notes.append(f"{read.tables} tables read, one instant each")
    if read.mig_rows:
        notes.append(f"MIG devices section: {read.mig_rows} instance row"
                     f"{'s' if read.mig_rows != 1 else ''} counted, not read (a row carries "
                     f"only the instance's memory)")
    if read.process_rows:
        notes.append(f"Processes section: {read.process_rows} process"
                     f"{'es' if read.process_rows != 1 else ''} not read")
    if records:
        notes.append("fan and performance state are printed but not stored (not sample "
                     "columns)")
    return records, len(records), skipped, {"devices": devices, "notes": notes,
                                                 "dated": read.dated}


def _undated_among_dated(records: list[dict], skipped: list[tuple[int, str]]) -> list[dict]:
    """Refuse the GPU rows of undated tables in a file whose other tables are dated (when no
    start time is given: those rows would be placed by the file's mtime).

    Such a file carries its own times: placing an undated table at the file's modification
    time (or a start time) would put it hours or months away from the rest, and where it
    falls among the dated tables is not known.  Its rows are appended to ``skipped`` with
    the reason; a file with no dated table keeps them all (placed like other untimed files).

    Returns:
        The records kept.
    """
    if not any("timestamp" in r for r in records):
        return records
    kept = []
    for r in records:
        if "timestamp" in r:
            kept.append(r)
        else:
            why = (f"GPU {r['gpu']} row of table {r['_table'] + 1}, which has no date line "
                   f"while the file's other tables do: its time is not known; row refused")
            skipped.append((r["_line"], why))
    return kept


# --------------------------------------------------------------------------- dcgm-exporter

#: DCGM field (dcgm-exporter metric name) -> (schema column, factor), from the metric table
#: (``data.metrics``, the rows' ``dcgm``).
DCGM_METRICS: dict[str, tuple[str, float]] = dcgm_fields()
#: dcgm-exporter's Kubernetes labels: a series per pod that uses the GPU.
_POD_LABELS = ("pod", "namespace", "container")
_PROM_SPECIAL = frozenset({"NaN", "+Inf", "-Inf", "Inf"})
_TS_MIN, _TS_MAX = 946684800.0, 4102444800.0  # 2000-01-01 .. 2100-01-01


def _parse_exporter(text: str, *, host: str, start: float | None, end: float, interval: float
                    ) -> tuple[list[dict], int, list[tuple[int, str]]]:
    # Each sample line goes through prometheus_client's parser on its own, so one mangled line
    # costs only itself and is recorded with its line number.  HELP/TYPE are not needed: the
    # sample name and labels carry everything (the file may start mid-family).
    from prometheus_client.parser import text_string_to_metric_families

    skipped: list[tuple[int, str]] = []
    rows: dict[tuple, dict] = {}
    scrape = _Cycles()
    accepted = 0
    for n, line in _lines(text):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        try:
            samples = [smp for fam in text_string_to_metric_families(s + "\n")
                       for smp in fam.samples]
        except Exception as exc:  # noqa: BLE001 - the library raises assorted types
            skipped.append((n, f"not a Prometheus sample ({type(exc).__name__}): {_short(s)}"))
            continue
        if len(samples) != 1:
            skipped.append((n, f"not one Prometheus sample: {_short(s)}"))
            continue
        smp = samples[0]
        labels = smp.labels
        tail = s[s.rfind("}") + 1:] if "}" in s else s[len(smp.name):]
        toks = tail.split()
        if not toks or not all(_RE_NUMBER.match(t.lstrip("-")) or t in _PROM_SPECIAL
                               for t in toks[:2]):
            skipped.append((n, f"bad Prometheus value or timestamp: {_short(s)}"))
            continue
        try:
            if "gpu" not in labels:
                raise ValueError("no gpu label")
            gpu = _gpu_index(labels["gpu"])
            mig = labels.get("GPU_I_ID", "").strip()
            if mig:  # a MIG GPU instance: its own entity under GPU ``gpu``
                gpu = mig_entity(gpu, _gpu_index(mig, "GPU_I_ID"))
            value = float(smp.value)
            if math.isinf(value) or value < 0:
                raise ValueError(f"value {smp.value!r} out of range")
            ts = smp.timestamp
            if ts is not None:
                ts = float(ts)
                if not _TS_MIN <= ts <= _TS_MAX:
                    raise ValueError(f"implausible timestamp {ts!r}")
            target = DCGM_METRICS.get(smp.name)
            scaled = _scaled(target[0], value, target[1]) if target else None
        except (ValueError, TypeError, OverflowError) as exc:
            skipped.append((n, f"bad sample ({exc}): {_short(s)}"))
            continue
        h = labels.get("Hostname") or labels.get("hostname") or host
        uuid = labels.get("UUID") or labels.get("uuid") or ""
        if mig:
            uuid = f"MIG-{uuid or 'GPU'}/{mig}"
        if ts is None:
            # pods sharing a GPU (MPS, time slicing) each get the GPU's series in one scrape:
            # the same instant, not one instant per pod
            who = tuple(labels.get(k, "") for k in _POD_LABELS)
            key = ("scrape", scrape.place((h, gpu, uuid, smp.name, who)))
        else:
            key = ("ts", ts)
        row = rows.setdefault((key, h, gpu), {"_key": key, "host": h, "gpu": gpu, "uuid": uuid,
                                              "_line": n})
        if uuid and not row["uuid"]:
            row["uuid"] = uuid
        if target:
            row[target[0]] = scaled
        accepted += 1
    t0 = _anchor(start, end, scrape.count, interval)
    records = []
    for row in rows.values():
        kind, val = row.pop("_key")
        row["timestamp"] = val if kind == "ts" else t0 + val * interval
        if kind != "ts":
            row["_placed"] = True
        records.append(row)
    return records, accepted, skipped


# --------------------------------------------------------------------------- dcgmi dmon

#: dcgmi dmon field short name -> (schema column, factor), from the metric table
#: (``data.metrics``, the rows' ``dcgmi``, at the DCGM field's scale).  GRACT
#: (DCGM_FI_PROF_GR_ENGINE_ACTIVE) is its own column, ``gr_engine_active``, not gpu_util: it
#: is a different counter (and the one DCGM gives per MIG instance, where GPU_UTIL is N/A).
DCGMI_FIELDS: dict[str, tuple[str, float]] = dcgmi_fields()
_RE_DCGMI_ROW = re.compile(r"^([A-Za-z][A-Za-z-]*)\s+(\d+)(?:\s+(.*))?$", re.ASCII)
_RE_LEADING_TS = re.compile(
    r"^\[?(\d{4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)\]?\s+(?=[A-Za-z#])", re.ASCII)


def _leading_stamp(s: str, clock: LocalClock) -> tuple[float | None, str, str | None]:
    """A line's leading date-time (a ``dcgmi dmon`` line under ``ts``/``date``): ``(UTC epoch
    s or None, the rest of the line, why it is refused: a time the zone's clocks skipped)``."""
    m = _RE_LEADING_TS.match(s)
    if not m:
        return None, s, None
    try:
        dt = datetime.fromisoformat(m.group(1).replace("/", "-"))
    except ValueError:
        return None, s, None
    ts = clock.epoch(dt)
    return ts, s[m.end():], (clock.gap_reason(dt) if ts is None else None)


def _parse_dcgmi(text: str, *, host: str, zone: tzinfo, start: float | None, end: float,
                 interval: float, clock: LocalClock | None = None
                 ) -> tuple[list[dict], int, list[tuple[int, str]]]:
    clock = clock or LocalClock(zone)
    fields: list[str] | None = None
    records: list[dict] = []
    skipped: list[tuple[int, str]] = []
    cycles = _Cycles()
    whole: set[int] = set()  # the GPU (not GPU-I) entities of the file
    for n, line in _lines(text):
        s = line.strip()
        if not s:
            continue
        ts, s, why = _leading_stamp(s, clock)
        if why:
            skipped.append((n, why))
            continue
        if _RE_DCGMI_HEADER.match(s):
            names = s.lstrip("#").split()[1:]
            _check_header([f.upper() for f in names], n)
            if names:
                fields = [f.upper() for f in names]
                cycles.new_block()
            else:
                skipped.append((n, f"bad #Entity header: {_short(s)}"))
            continue
        if s.split()[0].upper() == "ID":
            continue  # the units line under #Entity ("ID", or "Id" in older dcgmi)
        mrow = _RE_DCGMI_ROW.match(s)
        if fields is None or not mrow:
            skipped.append((n, f"not data: {_short(s)}"))
            continue
        entity, ident, rest = mrow.group(1), mrow.group(2), (mrow.group(3) or "")
        kind = entity.upper().replace("_", "-")
        if kind not in ("GPU", "GPU-I"):
            what = "compute instance" if kind == "GPU-CI" else "entity"
            skipped.append((n, f"{what} {entity} {ident} not imported (GPU and GPU-I rows are)"))
            continue
        toks = rest.split()
        if len(toks) != len(fields):
            skipped.append((n, f"expected {len(fields)} fields, got {len(toks)}: {_short(s)}"))
            continue
        try:
            gpu = _gpu_index(ident, "GPU-I entity id" if kind == "GPU-I" else "gpu index")
            rec: dict = {"host": host, "gpu": gpu, "uuid": "", "_line": n}
            if kind == "GPU-I":  # its parent GPU is settled below, once every row is read
                rec["_gi"] = gpu
                gpu = ("GPU-I", gpu)
            else:
                whole.add(gpu)
            for name, tok in zip(fields, toks, strict=True):
                if name in DCGMI_FIELDS:
                    target, factor = DCGMI_FIELDS[name]
                    rec[target] = _scaled(target, _number(tok), factor)
        except ValueError as exc:
            skipped.append((n, f"bad value ({exc}): {_short(s)}"))
            continue
        if ts is not None:
            rec["timestamp"] = ts
        else:
            rec["_instant"] = cycles.place(gpu)
        records.append(rec)
    t0 = _anchor(start, end, cycles.count, interval)
    # dcgmi prints a GPU-I row without its GPU: with one GPU in the file it is that GPU's,
    # with several (or none) the parent is not known (DCGM numbers GPU-I entities host-wide)
    parent = next(iter(whole)) if len(whole) == 1 else None
    for r in records:
        if "_instant" in r:
            r["timestamp"] = t0 + r.pop("_instant") * interval
            r["_placed"] = True
        if "_gi" in r:
            gi = r.pop("_gi")
            r["gpu"] = mig_entity(parent, gi)
            r["uuid"] = f"MIG-GPU/{gi}"
    return records, len(records), skipped


# --------------------------------------------------------------------------- tealeaves CSV

def _parse_tealeaves_csv(text: str, *, host: str
                         ) -> tuple[list[dict], int, list[tuple[int, str]]]:
    header: list[str] | None = None
    records: list[dict] = []
    skipped: list[tuple[int, str]] = []
    for n, line in _lines(text):
        s = line.strip()
        if not s:
            continue
        fields = _csv_fields(s)
        if header is None:
            if _is_tealeaves_header(fields):
                _check_header(fields, n)
                header = fields
            else:
                skipped.append((n, f"not data (no tealeaves CSV header yet): {_short(s)}"))
            continue
        if len(fields) != len(header):
            skipped.append((n, f"expected {len(header)} fields, got {len(fields)}: {_short(s)}"))
            continue
        row = dict(zip(header, fields, strict=True))
        try:
            if not _RE_NUMBER.match(row["timestamp"].lstrip("-")):
                raise ValueError(f"bad timestamp {row['timestamp']!r}")
            rec: dict = {"gpu": _entity(row["gpu"]), "timestamp": float(row["timestamp"]),
                         "host": row.get("host") or host, "uuid": row.get("uuid", ""),
                         "_line": n}
            if not math.isfinite(rec["timestamp"]):
                raise ValueError("timestamp not finite")
            if row.get("monotonic"):
                if not _RE_NUMBER.match(row["monotonic"].lstrip("-")):
                    raise ValueError(f"bad monotonic {row['monotonic']!r}")
                rec["monotonic"] = float(row["monotonic"])
            for col in METRIC_NAMES:
                if col in row:
                    v = math.nan if row[col] in ("", "nan", "NaN") else _number(row[col])
                    rec[col] = _scaled(col, v, 1.0)
        except ValueError as exc:
            skipped.append((n, f"bad value ({exc}): {_short(s)}"))
            continue
        records.append(rec)
    return records, len(records), skipped


# --------------------------------------------------------------------------- public entry

def _server_log_message(name: str, fmt: str) -> str:
    """Why a server log is refused, and where it goes instead."""
    return (f"{name}: is a server log ({fmt}), not GPU telemetry; give it as --server-log "
            f"FILE to classify, report, dashboard or collect")


def _page_message(name: str) -> str:
    """Why a saved ``/metrics`` page is not read as GPU samples, and where it goes."""
    return (f"{name}: is a saved /metrics page (server signals), not GPU telemetry; "
            f"`tealeaves import {name}` stores it as server metrics")


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
        records, nread, skipped = _parse_exporter(text, host=h, start=start, end=end,
                                                  interval=step)
    elif fmt == "dcgmi_dmon":
        records, nread, skipped = _parse_dcgmi(text, host=h, zone=zone, start=start, end=end,
                                               interval=step, clock=clock)
    else:
        records, nread, skipped = _parse_tealeaves_csv(text, host=h)
    kept = records if start is not None else _placed_among_dated(records, skipped)
    return kept, nread - (len(records) - len(kept)), skipped, extra


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
    if fmt in LOG_FORMATS:
        raise ImportFormatError(_server_log_message(name, fmt))
    if fmt == SERVER_METRICS_FORMAT:
        raise ImportFormatError(_page_message(name))
    if fmt == "tealeaves_parquet":
        raise ImportFormatError(f"{name}: Parquet is binary; use import_file")
    zone = _tz(tz)
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
    placed = how if any(r.get("_placed") for r in records) else None
    dated = how if any(r.get("_dated") for r in records) else None
    records, refused, blanks = _screen(records, _time.time())
    res = _summary(_frame(records, name), fmt, nread - len(refused), [*skipped, *refused],
                   name, blanks)
    res.placed, res.dated = placed, dated
    if placed:
        res.interval, res.interval_assumed = step, interval is None
    res.normalised = plain.notes
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
    if placed or dated:
        # the time a row was actually stored at: the first placed row from a start time,
        # else the last (the file's modification time unless rows were refused)
        at = [r["timestamp"] for r in records if r.get("_placed") or r.get("_dated")]
        res.placed_at = (min(at) if start is not None else max(at)) if at else (
            start if start is not None else end)
    return res


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
    try:
        with open(path, "rb") as f:
            head = f.read(import_common._CHUNK)
        st = path.stat()
    except OSError:
        return None  # import_file says why
    whole = st.st_size <= len(head)
    cut = len(head) if whole else head.rfind(b"\n") + 1
    if (not head.strip() or head.startswith(b"PAR1") or _binary_kind(head)
            or pasted.decode(head)[0] is not None):
        return None
    try:
        text = head[:cut].decode("utf-8")
    except UnicodeDecodeError:
        return None
    if pasted.normalise(text).notes or (not whole and text.count("\n") < _SCAN_LINES):
        return None  # detection reads the first _SCAN_LINES lines: all in the head
    if format is None and detect_text(text) != "nvidia_smi_dmon":
        return None
    zone = _tz(tz)
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
    if format is None:
        try:
            fmt = _detect_bytes(data, name)
        except ImportFormatError:
            if not columns:
                raise
            fmt = "nvidia_smi_query"
    else:
        fmt = _normalise_format(format)
        if not data.strip():
            raise ImportFormatError(f"{name}: file is empty; expected {_EXPECTED}")
    if fmt in LOG_FORMATS:
        raise ImportFormatError(_server_log_message(name, fmt))
    if fmt == SERVER_METRICS_FORMAT:
        raise ImportFormatError(_page_message(name))
    if fmt == "tealeaves_parquet":
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
        return res
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
        n = len(res.skipped)
        raise ImportFormatError(f"{path}: {res.format} file holds no samples "
                                f"({n} line{'' if n == 1 else 's'} skipped)")
    devices = (res.devices[[c for c in DEVICE_COLUMNS if c in res.devices.columns]]
               if len(res.devices) else pd.DataFrame())
    return Trace(samples=res.samples, devices=devices,
                 meta={"format": res.format, "source": str(path), "rows_read": res.rows_read,
                       "skipped": len(res.skipped),
                       "first_skipped": list(res.skipped[0]) if res.skipped else None,
                       "placed": res.placed,
                       "dated": res.dated, "placed_at": res.placed_at,
                       "interval": res.interval, "interval_assumed": res.interval_assumed})
