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

import json
import math
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pandas as pd

from ..data.metrics import dcgm_fields, exported_names
from ..data.schema import DEVICE_COLUMNS, conform, empty_frame, mig_entity
from .health import CollectorHealth, new_health

#: tealeaves exporter metric -> (schema column, factor to the schema's unit): the inverse of
#: the exporter's gauges, from the metric table (``data.metrics.exported_names``).
TEALEAVES_METRICS: dict[str, tuple[str, float]] = exported_names()
#: dcgm-exporter series (DCGM field name) -> (schema column, factor), from the metric table
#: (``data.metrics.dcgm_fields``; the same map the dcgm-exporter importer reads).
DCGM_METRICS: dict[str, tuple[str, float]] = dcgm_fields()
#: Most points one ``query_range`` may return per series (Prometheus refuses over 11,000).
MAX_POINTS = 10_000


class PrometheusError(RuntimeError):
    """The Prometheus server cannot be reached or refused a query (the message names the URL
    and Prometheus' own error)."""


class PrometheusReader:
    """Reads GPU series from a Prometheus server's HTTP API.

    Args:
        url: the server's base URL, e.g. ``http://127.0.0.1:9090``.
        timeout: seconds per HTTP request.
        lookback_s: a reading older than this at a query point counts as missing (Prometheus
            itself would repeat the last one for 5 minutes, drawing a flat line over an
            outage); set it above the scrape interval.
    """

    def __init__(self, url: str, timeout: float = 10.0, lookback_s: float = 5.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise PrometheusError(f"{url}: not an http(s) URL")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.lookback_s = float(lookback_s)

    def _get(self, path: str, params: list[tuple[str, str]]) -> dict:
        full = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(full, timeout=self.timeout) as r:
                doc = json.loads(r.read().decode())
        except urllib.error.HTTPError as exc:
            try:
                why = json.loads(exc.read().decode()).get("error", exc.reason)
            except (ValueError, OSError):
                why = exc.reason
            raise PrometheusError(f"{self.url}: {path} answered {exc.code}: {why}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise PrometheusError(f"{self.url}: cannot read {path}: "
                                  f"{getattr(exc, 'reason', exc)}") from None
        if doc.get("status") != "success":
            raise PrometheusError(f"{self.url}: {path}: {doc.get('error', doc)}")
        return doc["data"]

    def _range(self, metric: str, start: float, end: float, step: float) -> list[dict]:
        query = f"last_over_time({metric}[{max(self.lookback_s, 1.0):g}s])"
        return self._get("/api/v1/query_range", [
            ("query", query), ("start", f"{start:.3f}"), ("end", f"{end:.3f}"),
            ("step", f"{step:g}")])["result"]

    def samples(self, start: float, end: float, step: float = 1.0) -> tuple[pd.DataFrame,
                                                                           pd.DataFrame]:
        """Every host's GPU series over ``[start, end]`` at ``step`` seconds, as samples.

        Returns:
            ``(samples, devices)``: a frame in the sample schema (``timestamp`` = Prometheus'
            evaluation times; ``monotonic`` NaN) and device rows (host, gpu, uuid, name).

        Raises:
            PrometheusError: unreachable or refused.
        """
        if end <= start:
            return empty_frame(), pd.DataFrame(columns=list(DEVICE_COLUMNS))
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


__all__ = ["DCGM_METRICS", "MAX_POINTS", "TEALEAVES_METRICS", "PrometheusCollector",
           "PrometheusError", "PrometheusReader"]
