"""Which format a file or text is in: the format names (``FORMATS``, ``LOG_FORMATS``,
``SERVER_METRICS_FORMAT``), each format's signature (``detect_text``, ``detect_format``), the
other tools' outputs named in a refusal (``other_tool``) and a text file read as the importers
read it (``read_text``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tealeaves.data import import_common, pasted, server_lines, smi_table
from tealeaves.data.import_common import (
    _EXPECTED,
    ImportFormatError,
    _binary_kind,
    _csv_fields,
    _read_bytes,
    regular_file,
)
from tealeaves.data.import_csv import _is_tealeaves_header
from tealeaves.data.import_dcgmi import _RE_DCGMI_HEADER
from tealeaves.data.import_query import _RE_QUERY_TS, _is_query_header

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


_SCAN_LINES = 4000


_RE_DMON_HEADER = re.compile(r"^#\s*(?:date[\s,]+)?(?:time[\s,]+)?gpu\b", re.IGNORECASE)
#: ``nvidia-smi pmon``'s header (per process: its sm/mem are a process's share, not a GPU's).
_RE_PMON_HEADER = re.compile(r"^#\s*gpu\s+pid\b", re.IGNORECASE)
_RE_PROM_DCGM = re.compile(r"^(?:#\s*(?:HELP|TYPE)\s+)?DCGM_\w+")
_RE_SERVER_METRICS = re.compile(r"^(?:#\s*(?:HELP|TYPE)\s+)?(?:sglang|vllm):[A-Za-z_]")


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
    path = regular_file(path)
    fmt = _detect_head(path)
    if fmt is not None:
        return fmt
    data = _read_bytes(path)
    return _detect_bytes(data, str(path))


def plain_head(path: Path, *, strict: bool) -> tuple[str, bool] | None:
    """The first read of ``path`` (``import_common._CHUNK`` bytes) as plain text, cut at its
    last line end unless it is the whole file: ``(text, whole)``, or None when the head is
    blank, Parquet, binary, a wide encoding or a byte-order mark, or, in a larger file, holds
    fewer than the ``_SCAN_LINES`` lines :func:`detect_text` looks at (the caller reads the
    whole file then).  ``strict``: the head must be UTF-8 with no paste to undo
    (``pasted.normalise`` notes nothing), as a file read a chunk at a time must be, and
    ``text`` is as read; else a few invalid bytes are replaced (none in a hundred
    characters) and ``text`` is the paste undone, as detection reads it."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(import_common._CHUNK)
    except OSError:
        return None
    whole = size <= len(head)
    if not head.strip() or head.startswith(b"PAR1") or _binary_kind(head) \
            or pasted.decode(head)[0] is not None:
        return None
    cut = head if whole else head[:head.rfind(b"\n") + 1]
    if strict:
        try:
            text = cut.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if pasted.normalise(text).notes:
            return None
    else:
        text = cut.decode("utf-8", errors="replace")
        if text.count("\ufffd") > max(8, len(text) // 100):
            return None
        text = pasted.normalise(text).text
    if not whole and text.count("\n") < _SCAN_LINES:
        return None
    return text, whole


def _detect_head(path: Path) -> str | None:
    """The format of a file larger than one read (``import_common._CHUNK`` bytes) from its
    first read alone (``plain_head``); None otherwise (the caller reads the whole file).
    Detecting a 600 MB log read it whole: 2.7 GB at peak."""
    head = plain_head(path, strict=False)
    return None if head is None or head[1] else detect_text(head[0])


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


def _server_log_message(name: str, fmt: str) -> str:
    """Why a server log is refused, and where it goes instead."""
    return (f"{name}: is a server log ({fmt}), not GPU telemetry; give it as --server-log "
            f"FILE to classify, report, dashboard or collect")


def _page_message(name: str) -> str:
    """Why a saved ``/metrics`` page is not read as GPU samples, and where it goes."""
    return (f"{name}: is a saved /metrics page (server signals), not GPU telemetry; "
            f"`tealeaves import {name}` stores it as server metrics")


def _refuse_not_samples(fmt: str, name: str) -> None:
    """Refuse a server log or a saved ``/metrics`` page: not GPU samples.

    Raises:
        ImportFormatError: ``fmt`` is one of ``LOG_FORMATS`` or ``SERVER_METRICS_FORMAT``
            (says where the file goes instead).
    """
    if fmt in LOG_FORMATS:
        raise ImportFormatError(_server_log_message(name, fmt))
    if fmt == SERVER_METRICS_FORMAT:
        raise ImportFormatError(_page_message(name))
