"""Inference-server ``/metrics`` endpoints (SGLang, vLLM): scraped over HTTP, counters made rates.

:class:`MetricsScraper` polls the endpoint with the standard library (``urllib``) and hands
the text to ``data.server_metrics`` (``parse_metrics``, ``RateTracker``), which defines the
samples and the frames it yields (``FRAME_COLUMNS``).  Failures are counted, never raised
(:class:`ScrapeHealth`).

Nothing here imports ``app`` or ``classifier``.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pandas as pd

from tealeaves.data.server_metrics import (
    DEFAULT_PREFIXES,
    MAX_SERIES,
    MetricSample,
    RateTracker,
    parse_metrics,
)

__all__ = ["MAX_BODY_BYTES", "MetricsScraper", "ScrapeHealth"]

#: The largest ``/metrics`` body read (bytes; ``data.server_metrics.MAX_SERIES`` caps the series
#: kept from one scrape): an SGLang or vLLM server exposes a few hundred series (a few hundred
#: kB), plus SGLang's eplb heatmap histogram, layers x (GPU ranks + 3) series (100 layers x 256
#: ranks: 25,900); far more is a misconfigured endpoint that would fill the store (10 MB a
#: second is 36 GB an hour), so the scrape is refused and counted instead.
MAX_BODY_BYTES = 8 << 20


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

