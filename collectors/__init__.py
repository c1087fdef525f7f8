"""collectors: sources of samples (NVML on live GPUs, replay of stored traces).

Every collector has ``open() -> devices frame``, ``stream(stop, duration, batch_s)`` yielding
sample frames, ``close()`` and a ``health`` dict; ``run_to_store`` drives any of them into a
``data.store.SampleStore``.  Nothing here imports ``app``.
"""

from __future__ import annotations

import threading

from ..data.store import SampleStore


def run_to_store(collector, store: SampleStore, *, duration: float | None = None,
                 stop: threading.Event | None = None, batch_s: float = 0.25,
                 on_batch=None, devices=None) -> int:
    """Open ``collector``, store its device rows, then append every batch until it ends.

    Args:
        collector: an ``NvmlCollector`` or ``ReplayCollector`` (or anything alike).
        store: the writable store.
        duration: stop after this many seconds (None: until ``stop`` or the source ends).
        stop: an event that ends collection when set.
        batch_s: seconds of samples per store transaction.
        on_batch: optional callable(frame) after each stored batch (progress display).
        devices: the device rows if the caller already called ``collector.open()``.

    Returns:
        Number of samples stored.
    """
    if devices is None:
        devices = collector.open()
    try:
        store.put_devices(devices)
        n = 0
        for batch in collector.stream(stop=stop, duration=duration, batch_s=batch_s):
            store.append(batch)
            n += len(batch)
            if on_batch is not None:
                on_batch(batch)
        return n
    finally:
        collector.close()
