"""collectors: sources of samples (NVML on live GPUs, replay of stored traces).

Every collector is a ``collectors.source.Source``: ``open() -> devices frame``,
``stream(stop, duration, batch_s)`` yielding sample frames, ``close()`` and a ``health`` dict
(``collectors.source.open_source`` opens one); ``run_to_store`` drives any of them into a
``data.store.SampleStore``.  Nothing here imports ``app``.
"""

from __future__ import annotations

import math
import sqlite3
import sys
import threading
from collections import deque
from pathlib import Path

import pandas as pd

from tealeaves.collectors.source import HostSource, ProcessSource, Source
from tealeaves.data.schema import FIELD_LIMITS, is_blank_scaled, screen_frame
from tealeaves.data.store import SampleStore, StoreError

#: Samples held in memory while the store cannot be written (about 10 min of 8 GPUs at 20 Hz);
#: past this the oldest are dropped and counted in ``health['dropped_samples']``.
MAX_BUFFERED_SAMPLES = 100_000


def run_to_store(collector: Source, store: SampleStore, *, duration: float | None = None,
                 stop: threading.Event | None = None, batch_s: float = 0.25,
                 on_batch=None, devices=None,
                 max_buffered: int = MAX_BUFFERED_SAMPLES) -> int:
    """Open ``collector``, store its device rows, then append every batch until it ends.

    Each batch is one store transaction, at least every ``batch_s`` seconds (so a ``kill -9``
    loses at most that much).  When a write fails (disk full, database locked or read-only)
    the samples wait in a bounded in-memory buffer and are retried with the next batch;
    beyond ``max_buffered`` the oldest are dropped, and what still waits when the loop ends
    (after one last try) is dropped too.  Failures and drops are counted in
    ``collector.health`` (a ``collectors.health.CollectorHealth``: ``store_errors``,
    ``dropped_samples``, ``buffered_for_store``; blanks and impossible values in
    ``blank_values`` / ``out_of_range_values``), never fatal.

    Args:
        collector: any ``collectors.source.Source`` (NVML, replay, Prometheus); its process
            rows are stored too when it is a ``ProcessSource``.
        store: the writable store.
        duration: stop after this many seconds (None: until ``stop`` or the source ends).
        stop: an event that ends collection when set.
        batch_s: seconds of samples per store transaction (<= 1 s).
        on_batch: optional callable(batch) after each stored batch (progress display).
        devices: the device rows if the caller already called ``collector.open()``.
        max_buffered: most samples held while the store cannot be written.

    Returns:
        Number of samples stored.
    """
    if devices is None:
        devices = collector.open()
    health = collector.health
    health.setdefault("blank_values", {})
    health.setdefault("out_of_range_values", {})
    health.setdefault("buffered_for_store", 0)
    backlog: deque[pd.DataFrame | list[dict]] = deque()
    stored = 0
    pending_devices = devices
    pop = collector.pop_processes if isinstance(collector, ProcessSource) else None
    try:
        for batch in collector.stream(stop=stop, duration=duration, batch_s=batch_s):
            if pending_devices is not None:
                try:
                    store.put_devices(pending_devices)
                    pending_devices = None
                except sqlite3.Error:
                    health["store_errors"] += 1
            screen_batch(batch, health["blank_values"], health["out_of_range_values"])
            backlog.append(batch)
            health["buffered_for_store"] += len(batch)
            while health["buffered_for_store"] > max_buffered and len(backlog) > 1:
                _drop(health, backlog.popleft())
            stored += _flush(store, backlog, health)
            if pop is not None:
                try:
                    store.put_processes(pop())
                except sqlite3.Error:
                    health["store_errors"] += 1
            if on_batch is not None:
                on_batch(batch)
        stored += _flush(store, backlog, health)  # a last try for what still waits
        return stored
    finally:
        while backlog:  # never stored: counted, never lost in silence
            _drop(health, backlog.popleft())
        collector.close()


def _drop(health, batch) -> None:
    """Count the samples of ``batch`` as dropped (never stored) and no longer waiting."""
    health["dropped_samples"] += len(batch)
    health["buffered_for_store"] = max(0, health["buffered_for_store"] - len(batch))


def _flush(store: SampleStore, backlog: deque, health) -> int:
    """Append the waiting batches oldest first until one fails (counted in
    ``health['store_errors']``; it and the later ones keep waiting); returns samples stored."""
    stored = 0
    while backlog:
        try:
            store.append(backlog[0])
        except sqlite3.Error:
            health["store_errors"] += 1
            break
        done = backlog.popleft()
        health["buffered_for_store"] = max(0, health["buffered_for_store"] - len(done))
        stored += len(done)
    return stored


#: ``FIELD_LIMITS`` as the hot path reads them (the high end with conform's tolerance).
_LIMITS = tuple((c, lo, hi * (1 + 1e-9)) for c, (lo, hi) in FIELD_LIMITS.items())


def claim_store(store: SampleStore, collector: Source, devices=None) -> None:
    """Take ``store``'s collector lock for the host ``collector`` writes (its ``host`` when it
    is a ``HostSource``, or the hosts of its device rows for a replay).

    Raises:
        data.store.StoreError: another collector writes that host into that store.
    """
    host = collector.host if isinstance(collector, HostSource) else None
    if not host and devices is not None and len(devices) and "host" in devices:
        host = "+".join(sorted({str(h) for h in devices["host"]}))
    store.claim_writer(host or "replay")


def screen_batch(batch, blanks: dict[str, int], out_of_range: dict[str, int]) -> None:
    """Make blank codes and impossible values of a collector batch NaN, in place, counting
    them per column (``data.schema.FIELD_LIMITS`` and ``SENTINELS``).

    Args:
        batch: a list of row dicts (the NVML collector's) or a sample frame (a replay's).
        blanks, out_of_range: ``{column: count}`` to add to.
    """
    if isinstance(batch, pd.DataFrame):
        counts: dict = {}
        screen_frame(batch, counts)
        for col, c in counts.items():
            for n, into in ((c["blank"], blanks), (c["out_of_range"], out_of_range)):
                if n:
                    into[col] = into.get(col, 0) + n
        return
    for row in batch:
        for col, low, high in _LIMITS:
            v = row.get(col)
            # NaN compares False both ways: only a number outside the range gets here
            if v is not None and (v < low or v > high):
                row[col] = math.nan
                if is_blank_scaled(v):
                    blanks[col] = blanks.get(col, 0) + 1
                else:
                    out_of_range[col] = out_of_range.get(col, 0) + 1


class _CountingWriter:
    """Writes server batches to the store; what the store refuses is counted in ``lost``
    (``{"events", "metric_rows", "errors"}``), the first error said once on stderr."""

    def __init__(self) -> None:
        self.lost = {"events": 0, "metric_rows": 0, "errors": 0}
        self._lock = threading.Lock()

    def __call__(self, write, batch, key: str, what: str) -> None:
        """``write(batch)``; a refusal adds ``len(batch)`` to ``lost[key]``."""
        try:
            write(batch)
        except (sqlite3.Error, StoreError, OSError) as exc:
            with self._lock:
                first = not self.lost["errors"]
                self.lost["errors"] += 1
                self.lost[key] += len(batch)
            if first:
                print(f"tealeaves: {what} not stored ({exc}); counted, collection goes on",
                      file=sys.stderr)


def start_server_signals(store: SampleStore, stop: threading.Event, *,
                         server_log: str | Path | None = None, from_start: bool = False,
                         tz: str = "UTC", server_metrics: str | None = None,
                         interval_s: float = 1.0, health: dict | None = None
                         ) -> list[threading.Thread]:
    """Start daemon threads that follow a server log and scrape a ``/metrics`` URL into the
    store (``put_server_events`` / ``put_server_metrics``) until ``stop`` is set.

    Args:
        store: the writable store.
        stop: ends both threads.
        server_log: SGLang/vLLM log file, or "-" for standard input (None: no log).
        from_start: read the existing log from its start, not only new lines.
        tz: time zone of the log's timestamps.
        server_metrics: URL of the server's Prometheus endpoint (None: no scraping).
        interval_s: seconds between scrapes.
        health: when given, ``health["server_metrics"]`` is set to the scraper's live
            ``ScrapeHealth`` (the dashboard's status line reads it), and
            ``health["server_not_stored"]`` counts what the store refused (a full disk):
            ``{"events", "metric_rows", "errors"}``, the first error said once on stderr.

    Returns:
        The started threads (join them after setting ``stop``).  A failing log or endpoint
        is reported once on stderr (the scraper counts failures and goes on); never fatal.
        A batch the store cannot take is counted and the threads go on (nothing is lost
        without a count).
    """
    threads = []
    put = _CountingWriter()
    if health is not None:
        health["server_not_stored"] = put.lost

    if server_log is not None:
        from tealeaves.collectors.server_log import follow
        from tealeaves.data.server_log import ServerLogParser, refused_note

        parser = ServerLogParser(tz=tz)

        def tail() -> None:
            try:
                for events in follow(str(server_log), stop_event=stop, parser=parser,
                                     from_start=from_start):
                    put(store.put_server_events, events, "events", "server events")
            except Exception as exc:  # noqa: BLE001 - reported, collection goes on
                print(f"tealeaves: server log {server_log}: {exc}", file=sys.stderr)
            note = "; ".join(x for x in (refused_note(parser.refused), parser.clock.note())
                             if x)
            if note:
                print(f"tealeaves: server log {server_log}: {note}", file=sys.stderr)

        threads.append(threading.Thread(target=tail, name="tealeaves-server-log", daemon=True))
    if server_metrics:
        from tealeaves.collectors.server_metrics import MetricsScraper

        scraper = MetricsScraper(server_metrics, interval_s=interval_s,
                                 report=lambda line: print(f"tealeaves: {line}",
                                                           file=sys.stderr))
        if health is not None:
            health["server_metrics"] = scraper.health

        def scrape() -> None:
            for frame in scraper.stream(stop):
                put(store.put_server_metrics, frame, "metric_rows", "server metrics")

        threads.append(threading.Thread(target=scrape, name="tealeaves-metrics", daemon=True))
    for t in threads:
        t.start()
    return threads
