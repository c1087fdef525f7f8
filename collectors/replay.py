"""Replay collector: plays a stored trace through the same interface as the NVML collector.

Samples come out in their recorded order at real time (``speed=1``) or faster, with their
timestamps moved so that the trace starts now (``rebase=True``) and, with ``loop=True``,
starting over after the end, each pass shifted by the trace's span plus one sample period.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pandas as pd

from ..data.traces import Trace
from .nvml import new_health


class ReplayCollector:
    """Replays a ``Trace``.

    Args:
        trace: the trace to play (``data.traces.read_trace``).
        speed: playback speed; 1.0 is real time, 10.0 ten times faster.
        rebase: shift timestamps so the first sample is stamped at ``open`` time.
        loop: start over at the end instead of stopping.

    Attributes:
        offset: seconds added to the trace's timestamps in the current pass.

    Raises:
        ValueError: ``speed`` is not positive.
    """

    def __init__(self, trace: Trace, speed: float = 1.0, rebase: bool = True,
                 loop: bool = False) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be positive, got {speed}")
        self.trace = trace
        self.speed = float(speed)
        self.rebase = rebase
        self.loop = loop
        self.offset = 0.0
        self.health: dict = new_health()

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
        wall0, mono0 = time.time(), time.monotonic()
        self.offset = (wall0 - t_first) if self.rebase else 0.0
        pass_no = 0
        i = 0
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
                self.health["sweeps"] += int(batch["timestamp"].nunique())
                i = j
                yield batch
            if i >= len(ts):
                if not self.loop:
                    return
                pass_no += 1
                self.offset += span
                i = 0
                continue
            stop.wait(batch_s)
