"""Inference-server logs: SGLang scheduler lines and vLLM periodic stats, parsed into events.

Two kinds of line carry the server's own view of what it is doing:

* **SGLang** scheduler lines, one per prefill batch and one every ``--decode-log-interval``
  decode iterations (default 40)::

      [2025-03-24 02:56:26 TP0] Prefill batch. #new-seq: 30, #new-token: 3810, ..., #queue-req: 68,
      [2026-04-05 20:02:51.123 DP0 TP0] Decode batch, #running-req: 32, #token: 11179, ...

  The prefix is ``[YYYY-mm-dd HH:MM:SS(.mmm)?( DPn)?( PPn)?( TPn)?( EPn)?]``; a custom logging
  configuration may replace it with anything, as long as the message is intact.  ``batch.``
  (<= 0.5.2) and ``batch,`` (0.5.5+) are both read; fields are read by name.

* **vLLM** stats lines every 5-10 s (V0 and V1, ``Engine 000:`` on V1) and speculative-decoding
  lines (``SpecDecoding metrics: ...`` on V1, ``Speculative metrics: ...`` on V0)::

      (APIServer pid=3646) INFO 05-19 10:13:31 [loggers.py:271] Engine 000: Avg prompt
      throughput: 12068.8 tokens/s, Avg generation throughput: 734.9 tokens/s, Running: 18 reqs,
      Waiting: 33 reqs, GPU KV cache usage: 87.7%, Prefix cache hit rate: 0.0%

  vLLM's default date has no year (``MM-DD HH:MM:SS``).

Every line that is not one of these (HTTP access lines, warnings, blank lines, lines whose
message is damaged beyond recognition) is skipped and counted, never an error.  A value that
is no reading (a blank code such as 4294967295 or 2**47, a numeral of thousands of digits, a
throughput beyond ``data.server_lines.FIELD_BOUNDS``) is left out of its event (missing) and
counted (``ParseResult.refused``, said by ``ParseResult.value_note``).

Field names (keys of ``ServerEvent.fields``), the log's names, and units:

* ``new_seq`` (``#new-seq``, requests), ``new_token`` (``#new-token``, tokens),
  ``cached_token`` (``#cached-token``, tokens), ``pending_token`` (``#pending-token``, tokens)
* ``running_req`` (``#running-req`` / vLLM ``Running``, requests), ``queue_req``
  (``#queue-req`` / vLLM ``Waiting``, V0 ``Pending``, requests)
* ``token`` (``#token``: tokens held by the running requests), ``token_usage`` (``token usage``:
  fraction of the KV pool, 0-1), ``cuda_graph`` (``cuda graph``, bool)
* ``accept_len`` (``accept len`` / vLLM ``Mean acceptance length``: tokens per verify step)
* ``gen_throughput_tok_s`` (``gen throughput (token/s)`` / vLLM ``Avg generation throughput``),
  ``input_throughput_tok_s`` (``input throughput (token/s)``), ``prompt_throughput_tok_s``
  (vLLM ``Avg prompt throughput``): tokens/s
* ``kv_cache_usage_pct`` (vLLM ``GPU KV cache usage``), ``prefix_cache_hit_rate_pct``
  (``Prefix cache hit rate``): %, 0-100
* ``spec_accepted_tokens``, ``spec_drafted_tokens`` (vLLM ``Accepted``/``Drafted``: tokens in
  the interval), ``spec_accepted_tok_s``, ``spec_drafted_tok_s``,
  ``spec_draft_acceptance_rate_pct``

(plus a few more vLLM ones, see ``_VLLM_STATS``/``_VLLM_SPEC``).  Any other ``name: value``
field goes to ``ServerEvent.extra`` under its name as written, as an int, float, bool or string.
A known field whose value is not a number (a damaged line) goes to ``extra`` as a string.

Timestamps are converted from the log's local time (no zone in either server's default format)
with the ``tz`` argument, then ``clock_offset_s`` is added: ``timestamp = local(tz) -> UTC
epoch s + clock_offset_s``.  A custom prefix with an explicit zone (``...Z``, ``+02:00``) uses
that zone instead of ``tz``.

The collector follows a live log with this parser (``collectors.server_log``); the
classifier derives phase intervals from its events (``classifier.server_phases``).
Nothing here imports another room of tealeaves than ``data``.
"""

from __future__ import annotations

import datetime as dt
import gzip
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tealeaves.data.server_lines import (
    ANSI_RE as _ANSI_RE,
)
from tealeaves.data.server_lines import (
    PID_RE as _PID_RE,
)
from tealeaves.data.server_lines import (
    SGLANG_FIELDS as _SGLANG_FIELDS,
)
from tealeaves.data.server_lines import (
    SGLANG_MSG_RE as _SGLANG_MSG_RE,
)
from tealeaves.data.server_lines import (
    SGLANG_PREFIX_RE as _SGLANG_PREFIX_RE,
)
from tealeaves.data.server_lines import (
    TAG_RE as _TAG_RE,
)
from tealeaves.data.server_lines import (
    VLLM_MSG_RE as _VLLM_MSG_RE,
)
from tealeaves.data.server_lines import (
    VLLM_SPEC as _VLLM_SPEC,
)
from tealeaves.data.server_lines import (
    VLLM_SPEC_V0 as _VLLM_SPEC_V0,
)
from tealeaves.data.server_lines import (
    VLLM_STATS as _VLLM_STATS,
)
from tealeaves.data.server_lines import (
    fields as _fields,
)
from tealeaves.data.wallclock import LocalClock, parse_zone

__all__ = [
    "FORMATS",
    "ParseResult",
    "ServerEvent",
    "ServerLogError",
    "ServerLogParser",
    "events_frame",
    "parse_file",
    "parse_lines",
    "read_log",
    "refused_note",
    "resolve_tz",
]

FORMATS: tuple[str, ...] = ("sglang", "vllm")
_CANONICAL = {key for table in (_SGLANG_FIELDS, _VLLM_STATS, _VLLM_SPEC, _VLLM_SPEC_V0)
              for key, _ in table.values()}
_RANK_KEYS: tuple[str, ...] = ("dp", "pp", "tp", "ep")


class ServerLogError(ValueError):
    """A bad argument (format, time zone) or an unreadable log file; the message says which."""


@dataclass
class ServerEvent:
    """One scheduler or stats line of an inference server.

    Attributes:
        timestamp: when the line was written, UTC epoch seconds (``clock_offset_s`` added);
            None when the line carries no readable date-time.
        start: start of the interval the line covers, UTC epoch s.  SGLang decode lines and
            vLLM stats lines cover the time since the previous line of the same kind and rank
            (None for the first one); SGLang prefill lines are instants (``start ==
            timestamp``).
        rank: parallel ranks from the line's tags, keys among ``dp``, ``pp``, ``tp``, ``ep``
            (ints); absent when not tagged.  vLLM's ``Engine NNN`` is its data-parallel rank
            and appears as ``dp``.
        kind: ``'prefill'`` or ``'decode'`` (SGLang batches) or ``'stats'`` (vLLM stats and
            speculative-decoding lines).
        fields: known fields by their canonical keys (see the module docstring); counts are
            ints, rates and fractions floats, ``cuda_graph`` a bool.  A value that is no
            reading (a blank code, a value past its bounds) is absent, and counted by the
            parser (``ServerLogParser.refused``).
        source_line: 1-based line number in the input (in ``follow``: counted across rotations).
        extra: fields this parser does not know, under their names as written in the log.
    """

    timestamp: float | None
    start: float | None
    rank: dict[str, int]
    kind: str
    fields: dict[str, float | bool | str]
    source_line: int
    extra: dict[str, float | bool | str] = field(default_factory=dict)


@dataclass
class ParseResult:
    """What ``parse_lines``/``parse_file`` found.

    Attributes:
        events: the server events in line order.
        skipped: ``(line number, line)`` of every line that is not an event (1-based).
        format: ``'sglang'`` or ``'vllm'``; None when no line of either was found and no
            format was given.
        zone: the zone times without one were read in (``tz``'s name); None when every
            event's time carried its zone (or none was read).
        year_assumed: the year given to year-less ``MM-DD`` dates (vLLM's default) when none
            was passed; None when no such date was read.
        clock_note: the zone's clock changes met (``data.wallclock.LocalClock.note``: times
            of a repeated hour and which pass each was read as, times of a skipped hour
            refused: their events carry no timestamp); ``""`` when none.
        refused: values that are no reading (``data.server_lines.no_reading``: blank codes
            such as 4294967295 or 2**47, numerals too long, values outside the field's
            bounds), left out of the events (missing, NaN in ``events_frame``): ``(field,
            "blank" | "impossible")`` -> count.
    """

    events: list[ServerEvent]
    skipped: list[tuple[int, str]]
    format: str | None
    zone: str | None = None
    year_assumed: int | None = None
    clock_note: str = ""
    refused: dict[tuple[str, str], int] = field(default_factory=dict)

    def value_note(self) -> str:
        """The values left out as no reading, for a summary line (``""`` when none):
        ``"values read as missing (no reading): gen_throughput_tok_s 1 impossible value,
        running_req 2 blank codes"`` (``refused_note``)."""
        return refused_note(self.refused)

    def notes(self) -> str:
        """``time_note`` and ``value_note`` joined, for the summary line of a log."""
        return "; ".join(x for x in (self.time_note(), self.value_note()) if x)

    def time_note(self) -> str:
        """How the log's times were read, for a summary line: the zone given to times that
        carry none, the year given to vLLM's year-less ``MM-DD`` dates and the zone's clock
        changes met (``""`` when every time read carried its zone and year)."""
        parts = []
        if self.zone:
            parts.append(f"times read as {self.zone} (the log prints no zone; --tz to change)")
        if self.year_assumed is not None:
            parts.append(f"year-less dates (MM-DD) dated {self.year_assumed}, the year of the "
                         f"import")
        if self.clock_note:
            parts.append(self.clock_note)
        return "; ".join(parts)


def refused_note(refused: dict[tuple[str, str], int]) -> str:
    """A summary of values left out as no reading (``ServerLogParser.refused``): ``"values
    read as missing (no reading): running_req 2 blank codes, token 1 impossible value"``;
    ``""`` when none."""
    if not refused:
        return ""
    parts = [f"{k} {n} {'blank code' if why == 'blank' else 'impossible value'}"
             f"{'s' if n != 1 else ''}" for (k, why), n in sorted(refused.items())]
    return "values read as missing (no reading): " + ", ".join(parts)


# --------------------------------------------------------------------------------------------
# time zones and date-times

def resolve_tz(tz: str | dt.tzinfo | None) -> dt.tzinfo:
    """Turn a time-zone argument into a ``tzinfo`` (``data.wallclock.parse_zone``, the one
    reading of ``--tz``).

    Args:
        tz: an IANA name (``"Europe/Berlin"``), ``"UTC"``/``"Z"``/None, a fixed offset
            (``"+02:00"``, ``"-0530"``, ``"UTC+2"``), or a ``tzinfo``.

    Raises:
        ServerLogError: unknown name or offset beyond +-24 h.
    """
    try:
        return parse_zone(tz)
    except ValueError as exc:
        raise ServerLogError(str(exc)) from None


_ISO_RE = re.compile(
    r"(?<![0-9])(?P<Y>[0-9]{4})-(?P<m>[0-9]{2})-(?P<d>[0-9]{2})[T ]"
    r"(?P<H>[0-9]{2}):(?P<M>[0-9]{2}):(?P<S>[0-9]{2})(?:[.,](?P<f>[0-9]{1,9}))?(?![0-9])"
    r"(?:\s?(?P<z>Z|[+-][0-9]{2}:?[0-9]{2})(?![0-9]))?", re.ASCII)
_MD_RE = re.compile(
    r"(?<![0-9-])(?P<m>[0-9]{2})-(?P<d>[0-9]{2}) (?P<H>[0-9]{2}):(?P<M>[0-9]{2}):(?P<S>[0-9]{2})"
    r"(?:[.,](?P<f>[0-9]{1,9}))?(?![0-9])", re.ASCII)


def _naive(year: int, m: re.Match) -> dt.datetime | None:
    """A naive datetime from a date-time match; None when the date is impossible."""
    frac = m.group("f") or ""
    micro = int((frac + "000000")[:6]) if frac else 0
    try:
        return dt.datetime(year, int(m.group("m")), int(m.group("d")), int(m.group("H")),
                           int(m.group("M")), int(m.group("S")), micro)
    except ValueError:
        return None


def _zone_of(z: str | None, default: dt.tzinfo) -> dt.tzinfo:
    """The zone a time stamp's suffix names (``Z``, ``+02:00``, ``-0530``), read by
    ``data.wallclock.parse_zone``; ``default`` without a suffix or for an offset out of
    range."""
    if not z:
        return default
    try:
        return parse_zone(z)
    except ValueError:
        return default


def _ranks(text: str) -> dict[str, int]:
    rank: dict[str, int] = {}
    for tag, num in _TAG_RE.findall(text):
        rank.setdefault(tag.lower(), int(num))
    return rank


class ServerLogParser:
    """Stateful line parser: keeps line numbers, the detected format and, per rank, the last
    decode/stats timestamp that starts the next interval.  Feed it lines in order.

    Args:
        fmt: ``'sglang'``, ``'vllm'`` or None to detect from the first recognised line; lines
            of the other server are then skipped.
        tz: zone of the log's local time stamps (see ``resolve_tz``), default UTC.
        clock_offset_s: seconds added to every timestamp (the logging host's clock error).
        year: year for vLLM's year-less ``MM-DD`` dates; None: the current year in ``tz``, the
            previous one for a date more than a day in the future, and one more each time the
            dates jump back by more than half a year (December -> January).

    Raises:
        ServerLogError: unknown ``fmt`` or ``tz``.
    """

    def __init__(self, fmt: str | None = None, tz: str | dt.tzinfo | None = "UTC",
                 clock_offset_s: float = 0.0, year: int | None = None) -> None:
        if fmt is not None and fmt not in FORMATS:
            raise ServerLogError(f"fmt must be one of {', '.join(FORMATS)} or None, got {fmt!r}")
        self.format: str | None = fmt
        self._fixed_fmt = fmt
        self.tz = resolve_tz(tz)
        #: the log's zone-less times, in line order, around the zone's clock changes
        self.clock = LocalClock(self.tz)
        self.clock_offset_s = float(clock_offset_s)
        self._year_arg = year
        self._year: int | None = year
        self._last_md: dt.datetime | None = None
        self._prev: dict[tuple, float] = {}
        self.lines_seen = 0
        self.skipped_count = 0
        #: values that are no reading, left out of the events: ``(field, "blank" |
        #: "impossible")`` -> count (``data.server_lines.fields``)
        self.refused: dict[tuple[str, str], int] = {}
        #: a time was read without a zone (in ``tz``); the year given to MM-DD dates
        self.zoneless = False
        self.year_assumed: int | None = None

    # -- public --------------------------------------------------------------------------
    def feed(self, lines: Iterable[str]) -> tuple[list[ServerEvent], list[tuple[int, str]]]:
        """Parse more lines (trailing newlines allowed).

        Returns:
            ``(events, skipped)``: the events found, and ``(line number, line)`` of the lines
            that are not events.  Never raises on line content.
        """
        events: list[ServerEvent] = []
        skipped: list[tuple[int, str]] = []
        for raw in lines:
            self.lines_seen += 1
            lineno = self.lines_seen
            line = raw.rstrip("\r\n")
            got = self.parse_line(line, lineno)
            if got is None:
                skipped.append((lineno, line))
                self.skipped_count += 1
            else:
                events.append(got)
        return events, skipped

    def parse_line(self, line: str, lineno: int = 0) -> ServerEvent | None:
        """One line -> an event, or None when it is not a (wanted) server line."""
        clean = _ANSI_RE.sub("", line)
        found: tuple[str, ServerEvent, tuple, dict] | None = None
        if self._fixed_fmt in (None, "sglang"):
            found = self._sglang(clean, lineno)
        if found is None and self._fixed_fmt in (None, "vllm"):
            found = self._vllm(clean, lineno)
        if found is None:
            return None
        fmt, ev, chain, refused = found
        if self.format is None:
            self.format = fmt
        elif fmt != self.format:
            return None
        for k, n in refused.items():  # counted only for a line taken as an event
            self.refused[k] = self.refused.get(k, 0) + n
        if chain:
            ev.start = self._prev.get(chain) if ev.timestamp is not None else None
            if ev.timestamp is not None:
                self._prev[chain] = ev.timestamp
        return ev

    # -- helpers -------------------------------------------------------------------------
    def _stamp(self, naive: dt.datetime | None, zone: dt.tzinfo) -> float | None:
        if naive is None:
            return None
        try:
            if zone is self.tz:
                self.zoneless = True
                t = self.clock.epoch(naive)  # None: a time the zone's clocks skipped
            else:
                t = naive.replace(tzinfo=zone).timestamp()
        except (OverflowError, ValueError, OSError):
            return None
        return None if t is None else t + self.clock_offset_s

    def _iso_stamp(self, prefix: str) -> float | None:
        m = _ISO_RE.search(prefix)
        if m is None:
            return None
        return self._stamp(_naive(int(m.group("Y")), m), _zone_of(m.group("z"), self.tz))

    def _sglang(self, line: str, lineno: int):
        m = _SGLANG_MSG_RE.search(line)
        if m is None:
            return None
        refused: dict[tuple[str, str], int] = {}
        known, extra = _fields(line[m.end():].rstrip(" ,."), _SGLANG_FIELDS, refused)
        if not known and not extra and not refused:
            return None
        prefix = line[:m.start()]
        p = _SGLANG_PREFIX_RE.match(prefix)
        if p is not None:
            ts = self._stamp(_naive(int(p.group("Y")), p), self.tz)
            rank = _ranks(p.group("tags"))
        else:
            ts = self._iso_stamp(prefix)
            rank = _ranks(prefix)
        kind = "prefill" if m.group("kind") == "Prefill" else "decode"
        ev = ServerEvent(timestamp=ts, start=ts if kind == "prefill" else None, rank=rank,
                         kind=kind, fields=known, source_line=lineno, extra=extra)
        chain = ("sglang-decode", *sorted(rank.items())) if kind == "decode" else ()
        return "sglang", ev, chain, refused

    def _vllm_stamp(self, prefix: str) -> float | None:
        iso = _ISO_RE.search(prefix)
        if iso is not None:
            return self._iso_stamp(prefix)
        m = _MD_RE.search(prefix)
        if m is None:
            return None
        if self._year is None:
            now = dt.datetime.now(self.tz).replace(tzinfo=None)
            self._year = now.year
            first = _naive(self._year, m)
            if first is not None and first > now + dt.timedelta(days=1):
                self._year -= 1
        naive = _naive(self._year, m)
        if naive is None:
            return None
        if self._year_arg is None and self._last_md is not None \
                and naive < self._last_md - dt.timedelta(days=183):
            self._year += 1
            naive = _naive(self._year, m)
            if naive is None:
                return None
        self._last_md = naive
        if self._year_arg is None:
            self.year_assumed = self._year
        return self._stamp(naive, self.tz)

    def _vllm(self, line: str, lineno: int):
        m = _VLLM_MSG_RE.search(line)
        if m is None:
            return None
        msg = m.group("msg")
        if msg.startswith("Avg"):
            body, table, chain_kind = line[m.start("msg"):], _VLLM_STATS, "vllm-stats"
        elif msg.startswith("SpecDecoding"):
            body, table, chain_kind = line[m.end():], _VLLM_SPEC, "vllm-spec"
        else:
            body, table, chain_kind = line[m.end():], _VLLM_SPEC_V0, "vllm-spec"
        refused: dict[tuple[str, str], int] = {}
        known, extra = _fields(body.rstrip(" ,."), table, refused)
        if not known and not any(k in _CANONICAL for k, _ in refused):
            return None
        prefix = line[:m.start()]
        rank: dict[str, int] = {}
        if m.group("eng") is not None:
            rank["dp"] = int(m.group("eng"))
        pid = _PID_RE.search(prefix)
        if pid is not None:
            extra.setdefault("process", pid.group("proc"))
            extra.setdefault("pid", int(pid.group("pid")))
            dp = re.search(r"_DP([0-9]{1,6})$", pid.group("proc"), re.ASCII)
            if dp is not None:
                rank.setdefault("dp", int(dp.group(1)))
        ts = self._vllm_stamp(prefix)
        ev = ServerEvent(timestamp=ts, start=None, rank=rank, kind="stats", fields=known,
                         source_line=lineno, extra=extra)
        return "vllm", ev, (chain_kind, *sorted(rank.items())), refused


# --------------------------------------------------------------------------------------------
# whole inputs


def parse_lines(lines: Iterable[str], fmt: str | None = None,
                tz: str | dt.tzinfo | None = "UTC", clock_offset_s: float = 0.0,
                year: int | None = None) -> ParseResult:
    """Parse SGLang scheduler or vLLM stats lines.

    Args:
        lines: the log's lines, with or without newlines.
        fmt: ``'sglang'``, ``'vllm'``, or None to detect from the first recognised line.
        tz: zone of the log's time stamps (IANA name, ``+HH:MM`` offset, or ``tzinfo``).
        clock_offset_s: seconds added to every timestamp after conversion to UTC.
        year: year of vLLM's ``MM-DD`` dates (None: current year, see ``ServerLogParser``).

    Returns:
        ``ParseResult``; lines that are not server events are in ``skipped``.

    Raises:
        ServerLogError: unknown ``fmt`` or ``tz``.  Line content never raises.
    """
    parser = ServerLogParser(fmt=fmt, tz=tz, clock_offset_s=clock_offset_s, year=year)
    events, skipped = parser.feed(lines)
    return ParseResult(events=events, skipped=skipped, format=parser.format,
                       zone=_zone_label(parser.tz) if parser.zoneless else None,
                       year_assumed=parser.year_assumed, clock_note=parser.clock.note(),
                       refused=dict(parser.refused))


def _zone_label(zone: dt.tzinfo) -> str:
    key = getattr(zone, "key", None)
    return key if key else str(zone)


def parse_file(path: str | Path, fmt: str | None = None, tz: str | dt.tzinfo | None = "UTC",
               clock_offset_s: float = 0.0, year: int | None = None) -> ParseResult:
    """Parse a server log file (UTF-8, undecodable bytes replaced; ``.gz`` read compressed).

    Arguments as for ``parse_lines``.

    Raises:
        ServerLogError: the file is missing, a directory or unreadable (message names it), or a
            bad ``fmt``/``tz``.
    """
    path = Path(path)
    if not path.exists():
        raise ServerLogError(f"{path}: no such file")
    if path.is_dir():
        raise ServerLogError(f"{path}: is a directory, not a log file")
    parser = ServerLogParser(fmt=fmt, tz=tz, clock_offset_s=clock_offset_s, year=year)
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as fh:
            events, skipped = parser.feed(fh)
    except (OSError, EOFError) as exc:
        raise ServerLogError(f"{path}: cannot read ({exc})") from exc
    return ParseResult(events=events, skipped=skipped, format=parser.format,
                       zone=_zone_label(parser.tz) if parser.zoneless else None,
                       year_assumed=parser.year_assumed, clock_note=parser.clock.note(),
                       refused=dict(parser.refused))


def read_log(path: str | Path, tz: str | dt.tzinfo | None = "UTC") -> ParseResult:
    """Parse a whole server log that must hold scheduler lines (what alignment and ground truth
    need; ``parse_file`` accepts a log without any).

    Args:
        path: SGLang or vLLM log file (``.gz`` read compressed).
        tz: zone of the log's time stamps.

    Returns:
        ``ParseResult`` with at least one event; ``format`` is ``'sglang'`` or ``'vllm'``.

    Raises:
        ServerLogError: as ``parse_file`` (missing, a directory, unreadable, bad ``tz``), or
            the file holds no SGLang or vLLM scheduler line.
    """
    res = parse_file(path, tz=tz)
    if not res.events:
        n = len(res.skipped)
        raise ServerLogError(f"{path}: no SGLang or vLLM scheduler line found "
                             f"({n} line{'' if n == 1 else 's'} skipped)")
    return res


def events_frame(events: Iterable[ServerEvent]) -> pd.DataFrame:
    """One row per event.

    Columns: ``source_line``, ``kind``, ``timestamp``, ``start`` (UTC epoch s, NaN when
    unknown), the rank keys that occur (``dp``, ``pp``, ``tp``, ``ep``), every field key in
    order of first appearance, then unknown fields as ``extra.<name>``.  Missing values are NaN.
    """
    events = list(events)
    base = ["source_line", "kind", "timestamp", "start"]
    ranks: set[str] = set()
    keys: dict[str, None] = {}
    extras: dict[str, None] = {}
    rows = []
    for ev in events:
        row: dict = {"source_line": ev.source_line, "kind": ev.kind,
                     "timestamp": float("nan") if ev.timestamp is None else ev.timestamp,
                     "start": float("nan") if ev.start is None else ev.start}
        for k, v in ev.rank.items():
            ranks.add(k)
            row[k] = v
        for k, v in ev.fields.items():
            keys.setdefault(k)
            row[k] = v
        for k, v in ev.extra.items():
            extras.setdefault(f"extra.{k}")
            row[f"extra.{k}"] = v
        rows.append(row)
    rank_cols = [k for k in _RANK_KEYS if k in ranks] + sorted(ranks - set(_RANK_KEYS))
    columns = base + rank_cols + list(keys) + list(extras)
    frame = pd.DataFrame.from_records(rows, columns=columns) if rows \
        else pd.DataFrame(columns=columns)
    for col in ("timestamp", "start"):
        frame[col] = frame[col].astype(float)
    return frame
