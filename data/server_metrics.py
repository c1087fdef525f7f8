"""Inference-server ``/metrics`` text (SGLang, vLLM): parsed, counters made rates, saved pages read.

SGLang (``--enable-metrics``) and vLLM expose Prometheus text on ``GET /metrics``.  The
collector polls that endpoint (``collectors.server_metrics.MetricsScraper``); this module parses
the text with ``prometheus_client.parser.text_string_to_metric_families``, turns cumulative
counters into per-second rates between successive scrapes, and reads saved pages (one scrape
or many appended: :func:`read_page`).  The server's gauges (``sglang:num_running_reqs``,
``sglang:token_usage``, ``sglang:gen_throughput``...) only move when the scheduler writes a log
line; counters (``sglang:realtime_tokens_total``, ``vllm:generation_tokens_total``...) are the
better clock, so ``classifier.server_summary.summary`` derives token rates from counters.

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

Nothing here imports another room of tealeaves than ``data``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

from tealeaves.data.server_lines import no_reading

__all__ = [
    "DEFAULT_PREFIXES",
    "FRAME_COLUMNS",
    "MAX_SERIES",
    "MetricSample",
    "PageRead",
    "RateTracker",
    "is_monotonic",
    "labels_string",
    "parse_labels",
    "parse_metrics",
    "read_page",
    "samples_frame",
]

DEFAULT_PREFIXES: tuple[str, ...] = ("sglang:", "vllm:")
FRAME_COLUMNS = ["timestamp", "name", "labels", "value", "rate_per_s", "kind"]

_NAN = float("nan")
#: The most series kept from one scrape (``collectors.server_metrics.MAX_BODY_BYTES`` caps its
#: bytes): an SGLang or vLLM server exposes a few hundred series (a few hundred kB), plus
#: SGLang's eplb heatmap histogram, layers x (GPU ranks + 3) series (100 layers x 256 ranks:
#: 25,900); far more is a misconfigured endpoint that would fill the store (10 MB a second is
#: 36 GB an hour), so the scrape (or a saved page's scrape) is refused and counted instead.
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

