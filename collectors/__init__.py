"""collectors: sources of samples (NVML on live GPUs, replay of stored traces).

Every collector has ``open() -> devices frame``, ``stream(stop, duration, batch_s)`` yielding
sample frames, ``close()`` and a ``health`` dict; ``run_to_store`` drives any of them into a
``data.store.SampleStore``.  Nothing here imports ``app``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import deque

import pandas as pd

from ..data.store import SampleStore

#: Samples held in memory while the store cannot be written (about 10 min of 8 GPUs at 20 Hz);
#: past this the oldest are dropped and counted in ``health['dropped_samples']``.
MAX_BUFFERED_SAMPLES = 100_000


def run_to_store(collector, store: SampleStore, *, duration: float | None = None,
                 stop: threading.Event | None = None, batch_s: float = 0.25,
                 on_batch=None, devices=None,
                 max_buffered: int = MAX_BUFFERED_SAMPLES) -> int:
    """Open ``collector``, store its device rows, then append every batch until it ends.

    Each batch is one store transaction, at least every ``batch_s`` seconds (so a ``kill -9``
    loses at most that much).  When a write fails (disk full, database locked or read-only)
    the samples wait in a bounded in-memory buffer and are retried with the next batch;
    beyond ``max_buffered`` the oldest are dropped.  Failures and drops are counted in
    ``collector.health`` (``store_errors``, ``dropped_samples``, ``buffered_for_store``),
    never fatal.

    Args:
        collector: an ``NvmlCollector`` or ``ReplayCollector`` (or anything alike).
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
    backlog: deque[pd.DataFrame | list[dict]] = deque()
    backlog_rows = 0
    stored = 0
    pending_devices = devices
    try:
        for batch in collector.stream(stop=stop, duration=duration, batch_s=batch_s):
            if pending_devices is not None:
                try:
                    store.put_devices(pending_devices)
                    pending_devices = None
                except sqlite3.Error:
                    health["store_errors"] += 1
            backlog.append(batch)
            backlog_rows += len(batch)
            while backlog_rows > max_buffered and len(backlog) > 1:
                dropped = backlog.popleft()
                backlog_rows -= len(dropped)
                health["dropped_samples"] += len(dropped)
            while backlog:
                try:
                    store.append(backlog[0])
                except sqlite3.Error:
                    health["store_errors"] += 1
                    break
                done = backlog.popleft()
                backlog_rows -= len(done)
                stored += len(done)
            health["buffered_for_store"] = backlog_rows
            pop = getattr(collector, "pop_processes", None)
            if pop is not None:
                try:
                    store.put_processes(pop())
                except sqlite3.Error:
                    health["store_errors"] += 1
            if on_batch is not None:
                on_batch(batch)
        return stored
    finally:
        collector.close()
