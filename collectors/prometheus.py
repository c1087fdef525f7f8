"""Prometheus as a sample source: a cluster's GPUs read back through the HTTP API
(``/api/v1/query_range``), tealeaves' own series and, where present, dcgm-exporter's
``DCGM_FI_PROF_*`` / ``DCGM_FI_DEV_*`` ones, mapped onto the sample schema.

For each host and GPU the tealeaves exporter's series are used where it runs
(``app.exporter``: ``tealeaves_sm_active_ratio`` ... in base units), else dcgm-exporter's (the
DCGM fields of the metric table ``data.metrics``: profiling ratios x 100, ``FB_USED`` MiB x
2**20), so a site with DCGM already deployed gets phases without running tealeaves'
collector.  Series are identified by dcgm-exporter's labels (``Hostname``, ``gpu``, ``UUID``,
``modelName``).

``PrometheusCollector`` polls the server every ``poll_s`` and yields the new samples like the
NVML and replay collectors do, so ``collectors.run_to_store`` and the dashboard take it as is.
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator

import pandas as pd

from tealeaves.collectors.health import CollectorHealth, new_health
from tealeaves.data.metrics import dcgm_fields, exported_names
from tealeaves.data.schema import DEVICE_COLUMNS, conform, empty_frame, mig_entity

#: tealeaves exporter metric -> (schema column, factor to the schema's unit): the inverse of
#: the exporter's gauges, from the metric table (``data.metrics.exported_names``).
TEALEAVES_METRICS: dict[str, tuple[str, float]] = exported_names()
#: dcgm-exporter series (DCGM field name) -> (schema column, factor), from the metric table
#: (``data.metrics.dcgm_fields``; the same map the dcgm-exporter importer reads).
DCGM_METRICS: dict[str, tuple[str, float]] = dcgm_fields()
#: Most points one ``query_range`` may return per series (Prometheus refuses over 11,000).
MAX_POINTS = 10_000
#: Most bytes one HTTP answer may hold (a cap, not a guess: 10,000 points of a series are
#: about 0.3 MB of JSON, so 64 MiB is some 200 GPUs at ``MAX_POINTS``); past it the answer is
#: dropped and the query refused, asking for a coarser step or a smaller range.
MAX_ANSWER_BYTES = 64 * 2**20
#: Seconds one ``PrometheusReader.samples`` call (all its queries) may take in all, whatever
#: the server does: a server dripping bytes never trips a per-read socket timeout.
DEADLINE_S = 30.0


class PrometheusError(RuntimeError):
    """The Prometheus server cannot be reached or refused a query (the message names the URL
    and Prometheus' own error)."""


class AnswerTooBig(PrometheusError):
    """An HTTP answer went past its byte cap (the message names the URL and the cap)."""


def _cut(conn: http.client.HTTPConnection, expired: threading.Event) -> None:
    """The deadline passed: mark it and shut the connection's socket, so a read blocked in
    the other thread returns at once."""
    expired.set()
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except (OSError, ValueError):
            pass


def bounded_get(url: str, *, timeout: float, t_end: float, max_bytes: int,
                what: str | None = None, deadline: str = "the total deadline"
                ) -> tuple[int, bytes]:
    """GET ``url`` (http or https) and return ``(status, body)``, read in chunks and bounded.

    Bounds, whatever the server does: each socket operation waits at most ``timeout`` s, the
    whole exchange (connect, headers, body) ends by ``t_end`` (``time.monotonic()`` seconds;
    a watchdog shuts the socket then, so a server dripping a byte every second cannot hold
    it), and at most ``max_bytes`` of body are read (a larger declared ``Content-Length`` is
    refused before reading).  No proxy is used and redirects are not followed.

    Raises:
        AnswerTooBig: the body is larger than ``max_bytes``.
        PrometheusError: unreachable, a broken answer, or ``t_end`` passed (the message names
            ``what``, default the URL, and the bound that stopped it, ``deadline`` in
            words for the deadline).
    """
    what = what or url
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 -- a port that is no number raises here
    except ValueError as exc:
        raise PrometheusError(f"{what}: not a usable URL ({exc})") from None
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    left = t_end - time.monotonic()
    if left <= 0:
        raise PrometheusError(f"{what}: not asked: {deadline} has passed")
    conn = cls(parts.hostname or "", parts.port, timeout=max(0.001, min(timeout, left)))
    expired = threading.Event()
    watchdog = threading.Timer(left, _cut, (conn, expired))
    watchdog.daemon = True
    watchdog.start()
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    try:
        conn.connect()
        if expired.is_set():  # the watchdog fired before there was a socket to shut
            raise TimeoutError
        conn.request("GET", target, headers={"Accept": "application/json",
                                             "Accept-Encoding": "identity"})
        resp = conn.getresponse()
        declared = resp.getheader("Content-Length")
        if declared and declared.strip().isdigit() and int(declared) > max_bytes:
            raise AnswerTooBig(f"{what}: the answer is {int(declared):,} bytes, over the "
                               f"{max_bytes:,}-byte cap; not read")
        body = bytearray()
        while chunk := resp.read1(65536):
            body += chunk
            if len(body) > max_bytes:
                raise AnswerTooBig(f"{what}: the answer passed the {max_bytes:,}-byte cap; "
                                   f"reading stopped there")
        if expired.is_set():  # the shut socket read as the end of the answer
            raise TimeoutError
        return resp.status, bytes(body)
    except AnswerTooBig:
        raise
    except (OSError, ValueError, http.client.HTTPException) as exc:
        if expired.is_set() or (isinstance(exc, TimeoutError)
                                and time.monotonic() >= t_end):
            raise PrometheusError(f"{what}: no complete answer within {deadline} (reading "
                                  f"stopped; the server is too slow or stalled)") from None
        if isinstance(exc, TimeoutError):
            raise PrometheusError(f"{what}: nothing received for {timeout:g} s (reading "
                                  f"stopped)") from None
        raise PrometheusError(f"{what}: cannot read ({exc or type(exc).__name__})") from None
    finally:
        watchdog.cancel()
        conn.close()


class PrometheusReader:
    """Reads GPU series from a Prometheus server's HTTP API.

    Args:
        url: the server's base URL, e.g. ``http://127.0.0.1:9090``.
        timeout: seconds one socket operation may wait (connect, or a read receiving nothing).
        lookback_s: a reading older than this at a query point counts as missing (Prometheus
            itself would repeat the last one for 5 minutes, drawing a flat line over an
            outage); set it above the scrape interval.
        deadline_s: seconds one :meth:`samples` call (all its queries, bytes received or not)
            may take in all (default ``DEADLINE_S``).
        max_bytes: most bytes one answer may hold (default ``MAX_ANSWER_BYTES``).

    Raises:
        PrometheusError: ``url`` is not http(s).
    """

    def __init__(self, url: str, timeout: float = 10.0, lookback_s: float = 5.0,
                 deadline_s: float | None = None, max_bytes: int | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise PrometheusError(f"{url}: not an http(s) URL")
        try:
            urllib.parse.urlsplit(url).port  # noqa: B018 -- a bad host or port raises
        except ValueError as exc:
            raise PrometheusError(f"{url}: not a usable URL ({exc})") from None
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.lookback_s = float(lookback_s)
        self.deadline_s = float(DEADLINE_S if deadline_s is None else deadline_s)
        self.max_bytes = int(MAX_ANSWER_BYTES if max_bytes is None else max_bytes)
        self._t_end: float | None = None  # the deadline of the samples() call under way

    def _get(self, path: str, params: list[tuple[str, str]],
             t_end: float | None = None) -> dict:
        """The ``data`` of one API answer, read within ``t_end`` (``time.monotonic``; default
        ``deadline_s`` from now) and ``max_bytes``.

        Raises:
            PrometheusError: unreachable, too slow, too big, not JSON, or refused.
        """
        if t_end is None:
            t_end = time.monotonic() + self.deadline_s
        full = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        status, body = bounded_get(full, timeout=self.timeout, t_end=t_end,
                                   max_bytes=self.max_bytes, what=f"{self.url}: {path}",
                                   deadline=f"the total deadline ({self.deadline_s:g} s for "
                                            f"all queries of one read)")
        try:
            doc = json.loads(body.decode())
        except (ValueError, UnicodeDecodeError):
            if status != 200:
                raise PrometheusError(f"{self.url}: {path} answered {status}") from None
            raise PrometheusError(f"{self.url}: {path}: the answer is not JSON") from None
        if not isinstance(doc, dict):
            raise PrometheusError(f"{self.url}: {path}: the answer is not a JSON object")
        if status != 200:
            raise PrometheusError(f"{self.url}: {path} answered {status}: "
                                  f"{doc.get('error', doc)}")
        if doc.get("status") != "success":
            raise PrometheusError(f"{self.url}: {path}: {doc.get('error', doc)}")
        return doc["data"]

    def _range(self, metric: str, start: float, end: float, step: float) -> list[dict]:
        query = f"last_over_time({metric}[{max(self.lookback_s, 1.0):g}s])"
        try:
            return self._get("/api/v1/query_range", [
                ("query", query), ("start", f"{start:.3f}"), ("end", f"{end:.3f}"),
                ("step", f"{step:g}")], self._t_end)["result"]
        except AnswerTooBig as exc:
            raise PrometheusError(f"{exc} ({metric} over {end - start:g} s at a {step:g} s "
                                  f"step); ask for a coarser step or a smaller range") from None

    def samples(self, start: float, end: float, step: float = 1.0) -> tuple[pd.DataFrame,
                                                                           pd.DataFrame]:
        """Every host's GPU series over ``[start, end]`` at ``step`` seconds, as samples.

        Returns:
            ``(samples, devices)``: a frame in the sample schema (``timestamp`` = Prometheus'
            evaluation times; ``monotonic`` NaN) and device rows (host, gpu, uuid, name).

        Raises:
            PrometheusError: unreachable, refused, past ``deadline_s`` in all, or an answer
                over ``max_bytes`` (the message asks for a coarser step or a smaller range).
        """
        if end <= start:
            return empty_frame(), pd.DataFrame(columns=list(DEVICE_COLUMNS))
        self._t_end = time.monotonic() + self.deadline_s  # for every query of this call
        step = max(step, (end - start) / MAX_POINTS)
        rows: dict[tuple, dict] = {}
        seen_tl: set[tuple] = set()  # (host, gpu) served by tealeaves' exporter
        devices: dict[tuple, dict] = {}
        for source, table in (("tealeaves", TEALEAVES_METRICS), ("dcgm", DCGM_METRICS)):
            for metric, (col, factor) in table.items():
                for series in self._range(metric, start, end, step):
                    m = series.get("metric", {})
                    try:
                        if m.get("GPU_I_ID"):  # a MIG instance: its own entity (schema); an
                            # instance of an unnamed GPU is exported without a gpu label
                            gpu = mig_entity(int(m["gpu"]) if m.get("gpu") else None,
                                             int(m["GPU_I_ID"]))
                        else:
                            gpu = int(m.get("gpu"))
                    except (TypeError, ValueError):
                        continue
                    host = str(m.get("Hostname") or m.get("instance") or "")
                    uuid = m.get("UUID", "")
                    if m.get("GPU_I_ID"):
                        uuid = f"MIG-{uuid or 'GPU'}/{m['GPU_I_ID']}"
                    key = (host, gpu)
                    if source == "tealeaves":
                        seen_tl.add(key)
                    elif key in seen_tl:
                        continue  # tealeaves' own reading of this GPU wins
                    devices.setdefault(key, {"host": host, "gpu": gpu, "uuid": uuid,
                                             "name": m.get("modelName", "")})
                    for ts, val in series.get("values", ()):
                        try:
                            v = float(val) * factor
                        except (TypeError, ValueError):
                            v = math.nan
                        r = rows.setdefault((float(ts), host, gpu), {
                            "timestamp": float(ts), "monotonic": math.nan, "host": host,
                            "gpu": gpu, "uuid": uuid})
                        r[col] = v if math.isfinite(v) else math.nan
        frame = pd.DataFrame(list(rows.values()))
        if not len(frame):
            return empty_frame(), pd.DataFrame(columns=["host", "gpu", "uuid", "name"])
        screened: dict = {}
        samples = conform(frame, source=self.url, counts=screened).sort_values(
            ["timestamp", "host", "gpu"], ignore_index=True)
        samples.attrs["screened"] = screened  # blanks and impossible values read as NaN
        dev = pd.DataFrame(list(devices.values()), columns=["host", "gpu", "uuid", "name"])
        return samples, dev


class PrometheusCollector:
    """Polls a Prometheus server and yields new samples (the collector interface of
    ``collectors.nvml.NvmlCollector``).

    Args:
        url: the server's base URL.
        step_s: resolution asked of ``query_range`` (the scrape interval is the useful floor).
        poll_s: seconds between polls.
        backfill_s: history read at ``open`` (the dashboard starts with it).
        lag_s: how far behind now the newest point asked is (the last scrape may be pending).
        lookback_s: as for ``PrometheusReader``.
    """

    def __init__(self, url: str, step_s: float = 1.0, poll_s: float = 2.0,
                 backfill_s: float = 600.0, lag_s: float = 2.0,
                 lookback_s: float = 5.0) -> None:
        self.reader = PrometheusReader(url, lookback_s=lookback_s)
        self.step_s, self.poll_s = float(step_s), float(poll_s)
        self.backfill_s, self.lag_s = float(backfill_s), float(lag_s)
        self.health: CollectorHealth = new_health()
        self.driver = None
        self._next: float | None = None
        self._devices = pd.DataFrame()

    def open(self) -> pd.DataFrame:
        """Check the server answers and return the device rows seen in the backfill range.

        Raises:
            PrometheusError: the server cannot be reached.
        """
        now = time.time() - self.lag_s
        _, self._devices = self.reader.samples(now - 60.0, now, self.step_s)
        self._next = now - self.backfill_s
        return self._devices

    def close(self) -> None:
        """Nothing held."""

    def stream(self, stop: threading.Event | None = None, duration: float | None = None,
               batch_s: float = 0.25) -> Iterator[pd.DataFrame]:
        """Yield the samples newer than the last poll, every ``poll_s``, until ``stop`` is
        set or ``duration`` passes.  A failed poll is counted in ``health['source_errors']``
        (its message in ``source_last_error``) and retried."""
        stop = stop or threading.Event()
        t_end = None if duration is None else time.time() + duration
        h = self.health
        while not stop.is_set() and (t_end is None or time.time() < t_end):
            now = time.time() - self.lag_s
            start = self._next if self._next is not None else now - self.backfill_s
            # after a long outage catch up at most ``backfill_s``: the work of a poll follows
            # what the dashboard keeps, never the length of the outage
            start = max(start, now - self.backfill_s)
            if now - start >= self.step_s:
                end = start + math.floor((now - start) / self.step_s) * self.step_s
                try:
                    samples, dev = self.reader.samples(start, end, self.step_s)
                except PrometheusError as exc:
                    h["source_errors"] += 1
                    if h.get("source_last_error") is None or h.get("_ok_since_error"):
                        print(f"tealeaves: {exc} (retrying every {self.poll_s:g} s)",
                              file=sys.stderr)
                    h["source_last_error"] = str(exc)
                    h["_ok_since_error"] = False
                else:
                    if h.get("source_last_error") and not h.get("_ok_since_error"):
                        print(f"tealeaves: {self.reader.url}: answering again", file=sys.stderr)
                    h["_ok_since_error"] = True
                    h["source_last_ok"] = time.time()
                    h["sweeps"] += 1
                    blanks = samples.attrs.get("screened", {})
                    for col, c in blanks.items():
                        for kind, key in (("blank", "blank_values"),
                                          ("out_of_range", "out_of_range_values")):
                            if c.get(kind):
                                h[key][col] = h[key].get(col, 0) + c[kind]
                    self._next = end + self.step_s
                    if len(dev):
                        self._devices = dev
                    if len(samples):
                        yield samples
            stop.wait(self.poll_s)


__all__ = ["DCGM_METRICS", "DEADLINE_S", "MAX_ANSWER_BYTES", "MAX_POINTS",
           "TEALEAVES_METRICS", "AnswerTooBig", "PrometheusCollector", "PrometheusError",
           "PrometheusReader", "bounded_get"]
