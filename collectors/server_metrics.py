"""Inference-server ``/metrics`` endpoints (SGLang, vLLM): scraped, parsed, counters made rates.

SGLang (``--enable-metrics``) and vLLM expose Prometheus text on ``GET /metrics``.  This module
polls that endpoint with the standard library (``urllib``), parses it with
``prometheus_client.parser.text_string_to_metric_families`` and turns cumulative counters into
per-second rates between successive scrapes.  The server's gauges (``sglang:num_running_reqs``,
``sglang:token_usage``, ``sglang:gen_throughput``...) only move when the scheduler writes a log
line; counters (``sglang:realtime_tokens_total``, ``vllm:generation_tokens_total``...) are the
better clock, so :func:`summary` derives token rates from counters.

Samples (:class:`MetricSample`) keep the sample name as exposed, colons included
(``sglang:num_running_reqs``, ``sglang:realtime_tokens_total``,
``sglang:time_to_first_token_seconds_bucket``), every label (``dp_rank``, ``tp_rank``,
``pp_rank``, ``engine``, ``model_name``, ``mode``, ``category``, ``le``, ...), the value, the
family type (``counter``, ``gauge``, ``histogram``, ``summary``, ``unknown``...) and the scrape
time ``t`` (UTC epoch s).  ``*_created`` series that prometheus_client writes next to each
counter/histogram/summary (creation timestamps, exposed as gauges) are dropped by default.

Frames (:meth:`RateTracker.update`, :meth:`MetricsScraper.stream`) have one row per sample:

* ``timestamp``: scrape time, UTC epoch s (float)
* ``name``: sample name as exposed (str)
* ``labels``: all labels as one stable string, keys sorted, ``key=value`` joined by ``,``
  (``dp_rank=0,mode=decode,tp_rank=0``; ``""`` when there are none).  ``\\``, ``,`` and ``=``
  inside values are escaped with a backslash; :func:`parse_labels` reads it back to a dict.
* ``value``: the sample value as exposed (float)
* ``rate_per_s``: per-second rate since the previous scrape for monotonic series (counter
  ``*_total``, histogram/summary ``_sum``/``_count``, histogram ``_bucket``, and ``*_total``
  of untyped families); NaN for everything else (gauges, summary quantiles), for the first
  scrape of a series, and for an interval across which the counter went down (a reset).
* ``kind``: the family type (str)

:func:`summary` maps a frame to the server-event field names of
:mod:`tealeaves.collectors.server_log` where the meaning is the same (``running_req``,
``queue_req``, ``token_usage``, ``gen_throughput_tok_s``, ``accept_len``) plus
``prefill_tokens_per_s`` and ``decode_tokens_per_s``.

Nothing here imports ``app``.
"""

from __future__ import annotations

import math
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

from tealeaves.data.server_lines import no_reading

__all__ = [
    "DEFAULT_PREFIXES",
    "FRAME_COLUMNS",
    "SUMMARY_FIELDS",
    "MetricSample",
    "MetricsScraper",
    "RateTracker",
    "ScrapeHealth",
    "is_monotonic",
    "labels_string",
    "parse_labels",
    "parse_metrics",
    "read_page",
    "samples_frame",
    "summary",
]

DEFAULT_PREFIXES: tuple[str, ...] = ("sglang:", "vllm:")
FRAME_COLUMNS = ["timestamp", "name", "labels", "value", "rate_per_s", "kind"]
SUMMARY_FIELDS = ["running_req", "queue_req", "token_usage", "gen_throughput_tok_s",
                  "accept_len", "prefill_tokens_per_s", "decode_tokens_per_s"]

_NAN = float("nan")
#: The largest ``/metrics`` body read (bytes) and the most series kept from one scrape: an
#: SGLang or vLLM server exposes a few hundred series (a few hundred kB), plus SGLang's eplb
#: heatmap histogram, layers x (GPU ranks + 3) series (100 layers x 256 ranks: 25,900); far
#: more is a misconfigured endpoint that would fill the store (10 MB a second is 36 GB an
#: hour), so the scrape is refused and counted instead.
MAX_BODY_BYTES = 8 << 20
MAX_SERIES = 40_000


# --------------------------------------------------------------------------------------------
# samples and parsing


@dataclass(frozen=True)
class MetricSample:
    """One exposed sample at one scrape.

    ``name`` is the sample name as exposed (``sglang:realtime_tokens_total``,
    ``..._bucket``/``_sum``/``_count`` for histograms), ``family`` the family name the parser
    gives (``_total``/``_bucket``... stripped), ``labels`` all labels, ``value`` a float,
    ``kind`` the family type, ``t`` the scrape time (UTC epoch s).
    """

    name: str
    labels: dict[str, str]
    value: float
    kind: str
    t: float
    family: str = ""

    @property
    def labels_str(self) -> str:
        """The labels as the stable string used in frames (see :func:`labels_string`)."""
        return labels_string(self.labels)


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def labels_string(labels: dict[str, str]) -> str:
    """Labels as one stable string: keys sorted, ``k=v`` joined by ``,``; ``""`` if none.

    Backslash, comma and equals sign inside keys or values are escaped with a backslash, so
    :func:`parse_labels` gives the dict back exactly.
    """
    return ",".join(f"{_esc(k)}={_esc(str(labels[k]))}" for k in sorted(labels))


def parse_labels(s: str) -> dict[str, str]:
    """Inverse of :func:`labels_string`.

    Raises ``ValueError`` if a ``k=v`` pair has no unescaped ``=``.
    """
    out: dict[str, str] = {}
    if not s:
        return out
    key: str | None = None
    buf: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            buf.append(s[i + 1])
            i += 2
            continue
        if c == "=" and key is None:
            key, buf = "".join(buf), []
        elif c == ",":
            if key is None:
                raise ValueError(f"label pair without '=' in {s!r}")
            out[key], key, buf = "".join(buf), None, []
        else:
            buf.append(c)
        i += 1
    if key is None:
        raise ValueError(f"label pair without '=' in {s!r}")
    out[key] = "".join(buf)
    return out


#: Series that carry a server-log field, bounded as it is (``data.server_lines.FIELD_BOUNDS``).
_FIELD_OF = {"sglang:num_running_reqs": "running_req", "vllm:num_requests_running": "running_req",
             "sglang:num_queue_reqs": "queue_req", "vllm:num_requests_waiting": "queue_req",
             "sglang:token_usage": "token_usage", "vllm:kv_cache_usage_perc": "token_usage",
             "vllm:gpu_cache_usage_perc": "token_usage",
             "sglang:gen_throughput": "gen_throughput_tok_s",
             "sglang:spec_accept_length": "accept_len"}


def parse_metrics(text: str, t: float, prefixes: Sequence[str] | None = DEFAULT_PREFIXES,
                  keep_created: bool = False, own_times: bool = False,
                  refused: dict[tuple[str, str], int] | None = None) -> list[MetricSample]:
    """Parse Prometheus text exposition into samples stamped with the scrape time.

    Args:
        text: the body of a ``/metrics`` response (Prometheus text format 0.0.4).
        t: scrape time, UTC epoch s; given to every sample (timestamps inside the text, if
            any, are ignored).
        prefixes: keep only families whose name starts with one of these (default
            ``("sglang:", "vllm:")``); ``None`` keeps every family.
        keep_created: keep the ``<family>_created`` gauges that prometheus_client writes
            next to counters, histograms and summaries (creation times, epoch s).
        own_times: a sample that carries its own timestamp (exposition's optional
            milliseconds after the value) keeps it instead of ``t`` (a saved page).
        refused: when given, counts values that are no reading under ``(sample name,
            "blank" | "impossible")``: a blank code (``data.server_lines.BLANK_CODES``:
            4294967295, 2**47, 2**64-1 ...), +-Inf (a numeral too long reads as one), or a
            value outside the bounds of the server-log field the series carries
            (``sglang:gen_throughput`` over 1e8 tok/s ...).  Such a value is NaN.

    Returns:
        The samples in exposition order.

    Raises:
        ValueError: the text is not valid exposition (from prometheus_client's parser).
    """
    families = list(text_string_to_metric_families(text))
    created: set[str] = set()
    if not keep_created:
        created = {f"{fam.name}_created" for fam in families
                   if fam.type in ("counter", "histogram", "summary", "gaugehistogram")}
    pref = tuple(prefixes) if prefixes is not None else None
    out: list[MetricSample] = []
    for fam in families:
        if pref is not None and not fam.name.startswith(pref):
            continue
        if fam.name in created:
            continue
        for s in fam.samples:
            if not keep_created and s.name.endswith("_created") and fam.type != "gauge" \
                    and fam.type != "unknown":
                continue
            ts = float(s.timestamp) if own_times and s.timestamp is not None else float(t)
            value = float(s.value)
            why = None if math.isnan(value) else no_reading(_FIELD_OF.get(s.name), value)
            if why is not None:
                value = _NAN
                if refused is not None:
                    refused[(s.name, why)] = refused.get((s.name, why), 0) + 1
            out.append(MetricSample(name=s.name, labels=dict(s.labels), value=value,
                                    kind=fam.type, t=ts, family=fam.name))
    return out


def is_monotonic(sample: MetricSample) -> bool:
    """True for series that only go up (until a reset) and so get a rate.

    Counter ``*_total``, histogram/summary ``_sum`` and ``_count``, histogram ``_bucket``, and
    ``*_total`` samples of untyped (``unknown``) families.
    """
    n, k = sample.name, sample.kind
    if k == "counter":
        return n.endswith("_total") or n == sample.family
    if k == "histogram":
        return n.endswith(("_sum", "_count", "_bucket"))
    if k == "summary":
        return n.endswith(("_sum", "_count"))
    if k == "unknown":
        return n.endswith("_total")
    return False


# --------------------------------------------------------------------------------------------
# rates


def samples_frame(samples: Sequence[MetricSample],
                  rates: Sequence[float] | None = None) -> pd.DataFrame:
    """Samples as a frame with :data:`FRAME_COLUMNS`; ``rates`` aligned to ``samples``
    (NaN everywhere when ``None``)."""
    if rates is None:
        rates = [_NAN] * len(samples)
    frame = pd.DataFrame({
        "timestamp": pd.Series([s.t for s in samples], dtype=float),
        "name": pd.Series([s.name for s in samples], dtype=object),
        "labels": pd.Series([s.labels_str for s in samples], dtype=object),
        "value": pd.Series([s.value for s in samples], dtype=float),
        "rate_per_s": pd.Series(list(rates), dtype=float),
        "kind": pd.Series([s.kind for s in samples], dtype=object),
    })
    return frame[FRAME_COLUMNS]


class RateTracker:
    """Per-second rates of monotonic series across successive scrapes.

    Series are keyed by ``(name, labels)``.  For each series that :func:`is_monotonic`, the
    rate is ``(value - previous value) / (t - previous t)`` in units per second, with the
    previous reading taken from the last scrape in which the series appeared.  The rate is NaN
    for the first reading of a series, when the value went down (a counter reset: the new
    value becomes the baseline, rates resume at the next scrape), when time did not advance,
    and when either value is NaN.  Series absent from a scrape are forgotten (a later
    reappearance starts again with NaN).  Gauges and other series pass through with NaN.
    """

    def __init__(self) -> None:
        self._prev: dict[tuple[str, str], tuple[float, float]] = {}
        self.resets = 0
        """Number of counter resets seen."""

    def rates(self, samples: Sequence[MetricSample]) -> list[float]:
        """Feed one scrape; return the rates aligned to ``samples`` (units/s or NaN)."""
        prev, nxt = self._prev, {}
        out: list[float] = []
        for s in samples:
            if not is_monotonic(s):
                out.append(_NAN)
                continue
            key = (s.name, s.labels_str)
            nxt[key] = (s.t, s.value)
            p = prev.get(key)
            rate = _NAN
            if p is not None:
                pt, pv = p
                dt, dv = s.t - pt, s.value - pv
                if dv < 0:
                    self.resets += 1
                elif dt > 0 and not math.isnan(dv):
                    rate = dv / dt
            out.append(rate)
        self._prev = nxt
        return out

    def update(self, samples: Sequence[MetricSample]) -> pd.DataFrame:
        """Feed one scrape; return its frame (:data:`FRAME_COLUMNS`, see the module doc)."""
        return samples_frame(samples, self.rates(samples))

    def reset(self) -> None:
        """Forget every series (the next scrape gives NaN rates)."""
        self._prev = {}


# --------------------------------------------------------------------------------------------
# saved pages

#: A sample line of the exposition: series (name and labels), value, optional timestamp (ms).
_RE_SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*(?:\{.*\})?)\s+(\S+)(?:\s+(-?\d{1,19}))?\s*$")
_RE_HELP = re.compile(r"^#\s*HELP\s+(\S+)")
_EARLIEST_S = 946_684_800.0  # 2000-01-01: an older sample timestamp is a misread one
_FUTURE_SLACK_S = 86_400.0  # a sample more than a day after now is a misread one too


@dataclass
class PageRead:
    """A saved ``/metrics`` page, read (``read_page``).

    Attributes:
        frame: every scrape's samples (:data:`FRAME_COLUMNS`; counters' rates between the
            page's scrapes), oldest first.
        scrapes: scrapes found in the page (a series seen again starts the next one).
        stamped: where the scrapes' times came from: ``"file"`` (the samples' own
            timestamps), ``"start_time"`` (the caller's first instant, ``interval`` apart) or
            ``"end"`` (the last scrape at the caller's ``end``: the file's modification time).
        engine: ``"sglang"``, ``"vllm"`` or both joined with ``+``.
        skipped: ``(line number, line)`` of every non-blank line that is neither a comment
            nor a sample (a prompt, a ``date`` between scrapes, a ``---``, a sample whose
            timestamp has more than 19 digits): left out.
        refused: values that are no reading, stored as NaN (``parse_metrics``' ``refused``).
        stamps_refused: why the samples' own timestamps were not used (misread ones, with
            ``start`` given), else None.
    """

    frame: pd.DataFrame
    scrapes: int
    stamped: str
    engine: str
    skipped: list[tuple[int, str]] = field(default_factory=list)
    refused: dict[tuple[str, str], int] = field(default_factory=dict)
    stamps_refused: str | None = None


def _sample_line(s: str) -> bool:
    m = _RE_SAMPLE.match(s)
    if not m:
        return False
    try:
        float(m.group(2))
    except ValueError:
        return False
    return True


def _drop_strays(text: str) -> tuple[str, list[tuple[int, str]]]:
    """The page with every line that is neither blank, a comment nor a sample blanked (kept
    as an empty line), and those lines ``(number, text)``."""
    lines = text.split("\n")
    skipped = []
    for i, ln in enumerate(lines):
        s = ln.strip()
        if s and not s.startswith("#") and not _sample_line(s):
            skipped.append((i + 1, s if len(s) <= 60 else s[:57] + "..."))
            lines[i] = ""
    last = lines[-1].strip() if lines else ""
    if last and not last.startswith("#") and lines[-1]:  # no line end after it: cut off?
        why = f"{last[:40]} (the page ends inside this line: a cut-off value is not read)"
        skipped.append((len(lines), why))
        lines[-1] = ""
    return "\n".join(lines), skipped


def _split_scrapes(text: str) -> list[str]:
    """The page cut into scrapes: a scrape ends where a ``# HELP`` family or a sample series
    it already holds appears again (pages saved by appending ``curl /metrics`` in a loop)."""
    chunks: list[list[str]] = [[]]
    helps: set[str] = set()
    series: set[str] = set()
    for line in text.splitlines():
        s = line.strip()
        m = _RE_HELP.match(s)
        key = None
        if m:
            key = ("help", m.group(1))
            repeat = m.group(1) in helps
        else:
            ms = _RE_SAMPLE.match(s) if s and not s.startswith("#") else None
            repeat = bool(ms) and ms.group(1) in series
            if ms:
                key = ("series", ms.group(1))
        if repeat and (helps or series):
            chunks.append([])
            helps, series = set(), set()
        if key is not None:
            (helps if key[0] == "help" else series).add(key[1])
        chunks[-1].append(line)
    # a piece of comments alone (a page cut inside its last HELP) is no scrape
    return ["\n".join(c) + "\n" for c in chunks
            if any(x.strip() and not x.strip().startswith("#") for x in c)]


def _stamp_range(chunk: str) -> tuple[float, float] | None:
    """The oldest and newest sample timestamps written in a scrape (epoch s), or None."""
    stamps = [int(m.group(3)) for ln in chunk.splitlines()
              if (m := _RE_SAMPLE.match(ln.strip())) and m.group(3) is not None]
    return (min(stamps) / 1000.0, max(stamps) / 1000.0) if stamps else None


def _bad_stamps(ranges: list[tuple[float, float]]) -> str | None:
    """Why a page's sample timestamps (``_stamp_range`` of each scrape) are misread ones, or
    None when they are all from 2000 to a day after now."""
    if min(r[0] for r in ranges) < _EARLIEST_S:
        return ("before 2000 (written in seconds? the exposition format's are "
                "milliseconds)")
    newest = max(r[1] for r in ranges)
    if newest > time.time() + _FUTURE_SLACK_S:
        return (f"more than a day after now (up to epoch {newest:.0f} s: a misread or "
                f"mistyped number?)")
    return None


def _check_series(chunks: list[str], name: str) -> None:
    """Refuse a page with a scrape of more ``sglang:``/``vllm:`` series than ``MAX_SERIES``
    (the cap of a live scrape), counted before anything is parsed."""
    for i, chunk in enumerate(chunks):
        n = sum(1 for ln in chunk.splitlines() if ln.lstrip().startswith(DEFAULT_PREFIXES))
        if n > MAX_SERIES:
            raise ValueError(f"{name}: scrape {i + 1} of the page holds {n} sglang:/vllm: "
                             f"series, over the cap of {MAX_SERIES} a scrape may hold (an "
                             f"SGLang or vLLM server exposes a few hundred; a live scrape "
                             f"this large is refused too); nothing was read from it")


def read_page(text: str, *, start: float | None = None, end: float | None = None,
              interval: float = 1.0, name: str = "<page>") -> PageRead:
    """Read a saved SGLang/vLLM ``/metrics`` page: one scrape or many appended.

    Args:
        text: the page (Prometheus text exposition; pasted forms already undone).
        start: UTC epoch s of the first scrape when the samples carry no timestamps, or
            carry ones before 2000 or more than a day after now (misread: refused without
            ``start``).
        end: UTC epoch s of the last scrape when neither the samples nor ``start`` give one
            (the file's modification time); default now.
        interval: seconds between scrapes placed by ``start`` or ``end``.
        name: the file name, for messages.

    Returns:
        A ``PageRead``.

    Lines that are neither comments nor samples (a prompt, a ``date`` printed between
    scrapes, a ``---``) are left out and listed in ``skipped``.

    Raises:
        ValueError: the page holds no ``sglang:``/``vllm:`` series, a scrape is not valid
            exposition, or a scrape holds more than ``MAX_SERIES`` series (the live cap;
            the message names the file and the scrape).
    """
    text, skipped = _drop_strays(text)
    chunks = _split_scrapes(text)
    _check_series(chunks, name)
    ranges = [_stamp_range(c) for c in chunks]
    stamped = bool(ranges) and all(r is not None for r in ranges)
    bad = _bad_stamps(ranges) if stamped else None
    if bad is not None and start is None:
        raise ValueError(f"{name}: its sample timestamps read as {bad}; give --start-time to "
                         f"place its scrapes instead")
    if stamped and bad is None:
        times, how = [r[1] for r in ranges], "file"
    elif start is not None:
        times, how = [start + i * interval for i in range(len(chunks))], "start_time"
    else:
        last = time.time() if end is None else float(end)
        times = [last - (len(chunks) - 1 - i) * interval for i in range(len(chunks))]
        how = "end"
    tracker = RateTracker()
    frames = []
    refused: dict[tuple[str, str], int] = {}
    for i, (chunk, t) in enumerate(zip(chunks, times, strict=True)):
        try:
            # with stamps in the file each sample keeps its own: a page cut into scrapes
            # where a series repeats need not start at a scrape's first line
            samples = parse_metrics(chunk, t, own_times=how == "file", refused=refused)
        except ValueError as exc:
            raise ValueError(f"{name}: scrape {i + 1} is not Prometheus text ({exc})") from None
        frames.append(tracker.update(samples))
    frame = (pd.concat(frames, ignore_index=True) if frames
             else samples_frame([]))
    if frame.empty:
        raise ValueError(f"{name}: holds no sglang: or vllm: series")
    engines = sorted({n.split(":", 1)[0] for n in frame["name"].unique()})
    return PageRead(frame=frame, scrapes=len(chunks), stamped=how, engine="+".join(engines),
                    skipped=skipped, refused=refused, stamps_refused=bad)


# --------------------------------------------------------------------------------------------
# scraping


@dataclass
class ScrapeHealth:
    """Scrape counts: ``scrapes`` attempted, ``failures`` among them, ``consecutive_failures``
    since the last success, ``last_error`` (``"Type: message"`` of the latest failure, or
    ``None`` before any), ``last_ok`` (UTC epoch s of the latest success, or ``None``),
    ``errors`` (failure count per exception type name, e.g. ``HTTPError``, ``TimeoutError``,
    ``ConnectionRefusedError``, ``ValueError`` for a body that is not exposition text),
    ``refused`` (values that were no reading, kept as NaN: ``(sample name, "blank" |
    "impossible")`` -> count, see :func:`parse_metrics`)."""

    scrapes: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    last_error: str | None = None
    last_ok: float | None = None
    errors: dict[str, int] = field(default_factory=dict)
    refused: dict[tuple[str, str], int] = field(default_factory=dict)


def _metrics_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
    if parts.path in ("", "/"):
        parts = parts._replace(path="/metrics")
    return urllib.parse.urlunsplit(parts)


class MetricsScraper:
    """Polls an SGLang/vLLM ``/metrics`` endpoint over HTTP.

    Args:
        url: the endpoint, e.g. ``http://127.0.0.1:30000/metrics``; a URL without a path (or
            ``host:port`` without a scheme) gets ``/metrics`` (and ``http://``).
        interval_s: seconds between scrapes in :meth:`stream`.
        timeout_s: limit for one scrape (connect, and the whole body read), seconds.
        prefixes: family name prefixes to keep (see :func:`parse_metrics`); ``None`` = all.
        clock: wall clock giving the scrape time, UTC epoch s (``time.time``; tests inject).
        report: called with one line when scraping starts failing (the reason) and when it
            recovers, once per outage (``start_server_signals`` prints it on stderr).

    Failures (connection refused, timeout, HTTP status other than 2xx, a body that is not
    exposition text or too large) never raise: they are counted in :attr:`health` and
    :meth:`scrape_once` returns ``None``.  Proxy environment variables are ignored (metrics
    endpoints are local to the cluster).
    """

    def __init__(self, url: str, interval_s: float = 1.0, timeout_s: float = 2.0,
                 prefixes: Sequence[str] | None = DEFAULT_PREFIXES,
                 clock: Callable[[], float] = time.time,
                 report: Callable[[str], None] | None = None) -> None:
        if interval_s <= 0 or timeout_s <= 0:
            raise ValueError("interval_s and timeout_s must be > 0")
        self.url = _metrics_url(url)
        self.interval_s = float(interval_s)
        self.timeout_s = float(timeout_s)
        self.prefixes = tuple(prefixes) if prefixes is not None else None
        self.clock = clock
        self.health = ScrapeHealth()
        self.tracker = RateTracker()
        self.report = report
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _fetch(self) -> tuple[str, float]:
        req = urllib.request.Request(self.url, headers={
            "Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1",
            "Accept-Encoding": "identity", "User-Agent": "tealeaves"})
        start = time.monotonic()
        with self._opener.open(req, timeout=self.timeout_s) as resp:
            t = self.clock()
            chunks, size = [], 0
            while True:
                # read1: what has arrived, so a server dripping bytes meets the deadline
                # below (read(n) would wait for n bytes, each within the socket timeout)
                chunk = resp.read1(1 << 16)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise ValueError(f"body larger than {MAX_BODY_BYTES} bytes")
                chunks.append(chunk)
                if time.monotonic() - start > self.timeout_s:
                    raise TimeoutError(f"body not read within {self.timeout_s} s")
        body = b"".join(chunks)
        charset = resp.headers.get_content_charset() or "utf-8"
        return body.decode(charset), t

    def scrape_once(self) -> list[MetricSample] | None:
        """One scrape: the parsed samples (possibly empty), or ``None`` on failure.

        Never raises for network, HTTP or parse errors; see :attr:`health`.  Does not touch
        :attr:`tracker` (:meth:`stream` does).
        """
        h = self.health
        h.scrapes += 1
        try:
            text, t = self._fetch()
            samples = parse_metrics(text, t, self.prefixes, refused=h.refused)
            if len(samples) > MAX_SERIES:
                raise ValueError(f"{len(samples)} series in one scrape, over the cap of "
                                 f"{MAX_SERIES}: not stored")
        except urllib.error.HTTPError as e:
            self._fail(e)
            return None
        except urllib.error.URLError as e:  # connection refused, DNS, timeout while connecting
            self._fail(e.reason if isinstance(e.reason, BaseException) else e)
            return None
        except Exception as e:  # noqa: BLE001 - OSError, HTTPException, ValueError...: never raise
            self._fail(e)
            return None
        if h.consecutive_failures and self.report is not None:
            self.report(f"{self.url}: scraping again after {h.consecutive_failures} failed "
                        f"scrape{'s' if h.consecutive_failures != 1 else ''}")
        h.consecutive_failures = 0
        h.last_ok = t
        return samples

    def _fail(self, e: BaseException) -> None:
        h = self.health
        h.failures += 1
        h.consecutive_failures += 1
        name = type(e).__name__
        h.errors[name] = h.errors.get(name, 0) + 1
        h.last_error = f"{name}: {e}"
        if h.consecutive_failures == 1 and self.report is not None:
            self.report(f"{self.url}: scrape failed ({h.last_error}); retrying every "
                        f"{self.interval_s:g} s, shown in the status line")

    def stream(self, stop_event: threading.Event,
               duration: float | None = None) -> Iterator[pd.DataFrame]:
        """Scrape every ``interval_s`` and yield one frame per successful scrape.

        Frames have :data:`FRAME_COLUMNS` with rates from :attr:`tracker` (a failed scrape
        yields nothing; the next success's rates span the gap).  Stops when ``stop_event`` is
        set or after ``duration`` seconds (monotonic clock, ``None`` = no limit).  Never
        raises for scrape failures.
        """
        t0 = time.monotonic()
        nxt = t0
        while not stop_event.is_set():
            if duration is not None and time.monotonic() - t0 >= duration:
                return
            samples = self.scrape_once()
            if samples is not None:
                yield self.tracker.update(samples)
            nxt += self.interval_s
            now = time.monotonic()
            nxt = max(nxt, now)  # fell behind (slow scrape or consumer): do not burst
            wait = nxt - now
            if duration is not None:
                wait = min(wait, max(0.0, t0 + duration - now))
            if stop_event.wait(wait):
                return


# --------------------------------------------------------------------------------------------
# summary

# (field, sample name, label filter or None, use rate?, how replicas combine)
_GAUGES = [
    ("running_req", "sglang:num_running_reqs", "sum"),
    ("running_req", "vllm:num_requests_running", "sum"),
    ("queue_req", "sglang:num_queue_reqs", "sum"),
    ("queue_req", "vllm:num_requests_waiting", "sum"),
    ("token_usage", "sglang:token_usage", "mean"),
    ("token_usage", "vllm:kv_cache_usage_perc", "mean"),
    ("token_usage", "vllm:gpu_cache_usage_perc", "mean"),
    ("gen_throughput_tok_s", "sglang:gen_throughput", "sum"),
    ("accept_len", "sglang:spec_accept_length", "mean"),
]
_RATES = [
    ("prefill_tokens_per_s", "sglang:realtime_tokens_total", "prefill_compute"),
    ("decode_tokens_per_s", "sglang:realtime_tokens_total", "decode"),
    ("prefill_tokens_per_s", "vllm:prompt_tokens_total", None),
    ("decode_tokens_per_s", "vllm:generation_tokens_total", None),
    ("_vllm_accepted", "vllm:spec_decode_num_accepted_tokens_total", None),
    ("_vllm_drafts", "vllm:spec_decode_num_drafts_total", None),
]
# labels that tell apart processes of one scheduler (collapsed), and the selector label
_WITHIN_KEYS = ("tp_rank", "pp_rank", "pid", "mode")


def _rank_num(v: str | None) -> float:
    try:
        return float(v) if v is not None else -1.0
    except ValueError:
        return math.inf


def _strict_sum(s: pd.Series) -> float:
    return float(s.sum()) if len(s) and s.notna().all() else _NAN


def summary(frame: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Server-event fields from a metrics frame, one row per scrape time (and ``by`` group).

    Columns: ``timestamp`` (UTC epoch s), the ``by`` label columns, then :data:`SUMMARY_FIELDS`:

    * ``running_req``, ``queue_req`` (requests): ``sglang:num_running_reqs`` /
      ``vllm:num_requests_running``, ``sglang:num_queue_reqs`` / ``vllm:num_requests_waiting``
    * ``token_usage`` (fraction of the KV pool, 0-1): ``sglang:token_usage`` /
      ``vllm:kv_cache_usage_perc`` (a 0-1 fraction despite the name; older
      ``vllm:gpu_cache_usage_perc``)
    * ``gen_throughput_tok_s`` (tokens/s): the ``sglang:gen_throughput`` gauge, else the
      rate of ``vllm:generation_tokens_total``
    * ``accept_len`` (tokens per verify step): ``sglang:spec_accept_length``, else
      ``1 + rate(vllm:spec_decode_num_accepted_tokens_total) /
      rate(vllm:spec_decode_num_drafts_total)``
    * ``prefill_tokens_per_s``, ``decode_tokens_per_s`` (tokens/s, from counter rates):
      ``sglang:realtime_tokens_total{mode=prefill_compute}`` / ``{mode=decode}`` (prefix-cache
      hits, ``mode=prefill_cache``, are not counted), else ``vllm:prompt_tokens_total`` (which
      includes prefix-cache hits) / ``vllm:generation_tokens_total``.

    Ranks: series differing only in ``tp_rank``/``pp_rank``/``pid`` describe one scheduler, so
    the one with the lowest ``(tp_rank, pp_rank)`` is used (TP0 is the rank that logs).  Replicas
    (``dp_rank``, vLLM ``engine``) are then combined: requests and token rates are summed
    (NaN if any replica's value is NaN), ``token_usage`` and ``accept_len`` averaged.  Pass
    ``by=("dp_rank",)`` to keep replicas apart instead.  A field with no source is NaN.

    Raises ``KeyError`` if ``frame`` lacks the :data:`FRAME_COLUMNS`.
    """
    by = tuple(by)
    cols = ["timestamp", *by, *SUMMARY_FIELDS]
    missing = [c for c in FRAME_COLUMNS if c not in frame.columns]
    if missing:
        raise KeyError(f"frame lacks columns {missing}")
    wanted = {n for _, n, _ in _GAUGES} | {n for _, n, _ in _RATES}
    f = frame[frame["name"].isin(wanted)]
    if f.empty:
        return pd.DataFrame(columns=cols).astype({c: float for c in SUMMARY_FIELDS})
    rows = []
    for ts, name, lab, value, rate in zip(f["timestamp"], f["name"], f["labels"], f["value"],
                                          f["rate_per_s"], strict=True):
        labels = parse_labels(lab)
        for fld, src, extra in [*_GAUGES, *_RATES]:
            if src != name:
                continue
            if src in {n for _, n, _ in _RATES}:
                if extra is not None and labels.get("mode") != extra:
                    continue
                v, how = rate, "sum"
            else:
                v, how = value, extra
            scheduler = {k: x for k, x in labels.items() if k not in _WITHIN_KEYS}
            rows.append({"timestamp": ts, "field": fld, "src": src, "how": how, "v": v,
                         "tp": _rank_num(labels.get("tp_rank")),
                         "pp": _rank_num(labels.get("pp_rank")),
                         "series": labels_string(scheduler),
                         **{k: labels.get(k, "") for k in by}})
    long = pd.DataFrame(rows)
    # one scheduler per (timestamp, src, series): lowest (tp_rank, pp_rank)
    long = long.sort_values(["tp", "pp"], kind="stable").drop_duplicates(
        ["timestamp", "field", "src", "series"], keep="first")
    keys = ["timestamp", *by]
    parts = []
    for (fld, src, how), g in long.groupby(["field", "src", "how"], sort=False):
        agg = _strict_sum if how == "sum" else "mean"
        parts.append(g.groupby(keys, sort=True)["v"].agg(agg).rename(f"{fld}|{src}"))
    wide = pd.concat(parts, axis=1)
    out = pd.DataFrame(index=wide.index)
    for fld in [*SUMMARY_FIELDS, "_vllm_accepted", "_vllm_drafts"]:
        srcs = [c for c in wide.columns if c.split("|", 1)[0] == fld]
        col = pd.Series(_NAN, index=wide.index, dtype=float)
        for c in srcs:  # the first source listed wins where it has a value
            col = col.fillna(wide[c].astype(float))
        out[fld] = col
    dec = wide.get("decode_tokens_per_s|vllm:generation_tokens_total")
    if dec is not None:
        out["gen_throughput_tok_s"] = out["gen_throughput_tok_s"].fillna(dec)
    acc, drafts = out.pop("_vllm_accepted"), out.pop("_vllm_drafts")
    out["accept_len"] = out["accept_len"].fillna(1.0 + acc / drafts.where(drafts > 0))
    out = out.reset_index()
    return out[cols].astype({c: float for c in SUMMARY_FIELDS})
