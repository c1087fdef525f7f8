"""Replay collector: plays a stored trace through the same interface as the NVML collector.

Samples come out in their recorded order at real time (``speed=1``) or faster, with their
timestamps moved so that the trace starts now (``rebase=True``) and, with ``loop=True``,
starting over after the end, each pass shifted by the trace's span plus one sample period.

Server events (``data.server_log.ServerEvent``, already on the trace's clock) can be
replayed in step with the samples: each batch's events (those stamped within the trace time the
batch covers) are shifted by the current pass's ``offset`` and handed to ``on_events`` (e.g.
``SampleStore.put_server_events``) just before the batch is yielded, so a reader that sees a
batch's samples also sees its events.  Only events within the trace's span are replayed (each
pass replays them again, shifted like the samples).
"""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd

from tealeaves.collectors.health import CollectorHealth, new_health
from tealeaves.data.traces import Trace


class ReplayCollector:
    """Replays a ``Trace``.

    Args:
        trace: the trace to play (``data.traces.read_trace``).
        speed: playback speed; 1.0 is real time, 10.0 ten times faster.
        rebase: shift timestamps so the first sample is stamped at ``open`` time.
        loop: start over at the end instead of stopping.
        events: server events on the trace's clock to replay with the samples (None: none).
        on_events: called with each batch's events (a non-empty list of shifted copies)
            before the batch is yielded; a ``sqlite3.Error`` it raises is counted in
            ``health['store_errors']`` and the events are dropped.

    Attributes:
        offset: seconds added to the trace's timestamps in the current pass.
        events_replayed: server events handed to ``on_events`` so far.

    Raises:
        ValueError: ``speed`` is not positive.
    """

    def __init__(self, trace: Trace, speed: float = 1.0, rebase: bool = True,
                 loop: bool = False, events: list | None = None,
                 on_events: Callable[[list], None] | None = None) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be positive, got {speed}")
        self.trace = trace
        self.speed = float(speed)
        self.rebase = rebase
        self.loop = loop
        self.offset = 0.0
        self.events = list(events or [])
        self.on_events = on_events
        self.events_replayed = 0
        self.health: CollectorHealth = new_health()

    def _emit_events(self, ev: list, ev_ts: np.ndarray, lo: float, hi: float) -> None:
        """Hand the events stamped in ``[lo, hi)`` (trace clock), shifted by ``offset``."""
        if self.on_events is None or not len(ev):
            return
        a, b = np.searchsorted(ev_ts, [lo, hi], side="left")
        if b <= a:
            return
        off = self.offset
        batch = [dataclasses.replace(e, timestamp=e.timestamp + off,
                                     start=None if e.start is None else e.start + off)
                 for e in ev[a:b]]
        try:
            self.on_events(batch)
        except sqlite3.Error:
            self.health["store_errors"] += 1
            return
        self.events_replayed += len(batch)

    def open(self) -> pd.DataFrame:
        """Device rows of the trace (may be empty)."""
        return self.trace.devices.copy()

    def close(self) -> None:
        """Nothing to release."""

    def stream(self, stop: threading.Event | None = None, duration: float | None = None,
               batch_s: float = 0.25) -> Iterator[pd.DataFrame]:
        """Yield the trace's samples in batches as their (scaled) time comes.

        Yields:
            Sample frames; ``monotonic`` is replaced by the replaying host's clock.
        """
        stop = stop or threading.Event()
        samples = self.trace.samples
        ts = samples["timestamp"].to_numpy()
        t_first, t_last = float(ts[0]), float(ts[-1])
        step = float(np.median(np.diff(np.unique(ts)))) if len(np.unique(ts)) > 1 else 0.1
        span = t_last - t_first + step
        ev = sorted((e for e in self.events if e.timestamp is not None
                     and t_first <= e.timestamp < t_first + span), key=lambda e: e.timestamp)
        ev_ts = np.array([e.timestamp for e in ev], dtype=float)
        ev_from = t_first  # trace time up to which this pass's events were handed on
        wall0, mono0 = time.time(), time.monotonic()
        self.offset = (wall0 - t_first) if self.rebase else 0.0
        pass_no = 0
        i = 0
        rows_of: dict = {}  # rows handed on per GPU, this stream
        sweeps0 = self.health["sweeps"]
        while not stop.is_set():
            elapsed = (time.monotonic() - mono0) * self.speed
            if duration is not None and time.monotonic() - mono0 >= duration:
                return
            trace_now = t_first + elapsed - pass_no * span
            j = int(np.searchsorted(ts, trace_now, side="right"))
            if j > i:
                batch = samples.iloc[i:j].copy()
                batch["timestamp"] = batch["timestamp"] + self.offset
                batch["monotonic"] = mono0 + (batch["timestamp"] - self.offset - t_first
                                              + pass_no * span) / self.speed
                # one sweep = one reading of every GPU (each GPU row has its own stamp, and a
                # batch's edge may fall inside a sweep): the most rows one GPU has had so far
                for g, n in batch["gpu"].value_counts().items():
                    rows_of[g] = rows_of.get(g, 0) + int(n)
                self.health["sweeps"] = sweeps0 + max(rows_of.values())
                i = j
                ev_to = t_first + span if i >= len(ts) else float(ts[j - 1]) + 1e-9
                self._emit_events(ev, ev_ts, ev_from, ev_to)
                ev_from = ev_to
                yield batch
            if i >= len(ts):
                if not self.loop:
                    return
                ev_from = t_first
                pass_no += 1
                self.offset += span
                i = 0
                continue
            stop.wait(batch_s)
