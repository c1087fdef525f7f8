"""What a collector is (``Source`` and its optional parts) and the one factory that opens one.

A source is anything with ``open() -> devices frame``, ``stream(stop, duration, batch_s)``
yielding sample batches, ``close()`` and a ``health`` record: the NVML collector, a replay of
a trace, a Prometheus cluster (``collectors.nvml``, ``collectors.replay``,
``collectors.prometheus``), or a test's stand-in.  ``run_to_store`` drives any of them.
Some sources have more (process lists, a host name, a driver version); the protocols below
name those parts, so callers ask ``isinstance`` instead of guessing attribute names.

``open_source`` builds and opens the source of ``tealeaves collect`` and of the dashboard.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import pandas as pd

if TYPE_CHECKING:
    from tealeaves.collectors.health import CollectorHealth
    from tealeaves.data.traces import Trace


@runtime_checkable
class Source(Protocol):
    """A collector: device rows at ``open``, then sample batches until it ends or is stopped.

    Attributes:
        health: the counts the source keeps while it runs (``collectors.health``).
    """

    health: CollectorHealth

    def open(self) -> pd.DataFrame:
        """Start the source; the device rows (``data.schema.DEVICE_COLUMNS``), maybe empty."""

    def stream(self, stop: threading.Event | None = None, duration: float | None = None,
               batch_s: float = 0.25) -> Iterator[pd.DataFrame | list[dict]]:
        """Yield sample batches (a sample frame, or the NVML collector's row dicts) until
        ``stop`` is set, ``duration`` seconds pass or the source ends."""

    def close(self) -> None:
        """Release what ``open`` took (idempotent)."""


@runtime_checkable
class ProcessSource(Source, Protocol):
    """A source that also lists the GPUs' compute processes (the NVML collector)."""

    def pop_processes(self) -> list[dict]:
        """The process rows read since the last call (``SampleStore.put_processes``)."""


@runtime_checkable
class HostSource(Source, Protocol):
    """A source that knows the host it reads (the NVML collector): the store's writer lock
    is taken for it."""

    host: str


@runtime_checkable
class DriverSource(Source, Protocol):
    """A source that knows the driver version it reads through (None or "" when not)."""

    driver: str | None


#: The kinds ``open_source`` opens.
SOURCE_KINDS = ("nvml", "replay", "prometheus")


def open_source(kind: str, *, hz: float = 10.0, gpus: list[int] | None = None,
                threads: bool = False, pcie_hz: float = 10.0, trace: Trace | None = None,
                speed: float = 1.0, loop: bool = False, url: str | None = None,
                step_s: float = 1.0, lookback_s: float = 5.0
                ) -> tuple[Source, pd.DataFrame]:
    """Build the source of ``kind`` and open it: ``(source, device rows)``.

    Args:
        kind: ``"nvml"`` (live GPUs: ``hz``, ``gpus``, ``threads``, ``pcie_hz`` as for
            ``NvmlCollector``), ``"replay"`` (``trace`` played at ``speed``, rebased to now,
            looping with ``loop``) or ``"prometheus"`` (the cluster at ``url``, read at
            ``step_s`` with ``lookback_s``).

    Raises:
        collectors.nvml_shim.NvmlUnavailable: no driver or no GPU (NVML is released again).
        collectors.nvml.UnknownGpus: ``gpus`` names a GPU NVML does not see.
        collectors.prometheus.PrometheusError: Prometheus cannot be reached.
        ValueError: an unknown ``kind``, no ``trace`` or ``url`` for it, or ``speed`` not
            positive.
    """
    if kind == "nvml":
        from tealeaves.collectors.nvml import NvmlCollector
        from tealeaves.collectors.nvml_shim import NvmlUnavailable

        collector = None
        try:
            collector = NvmlCollector(hz=hz, gpus=gpus, threads=threads, pcie_hz=pcie_hz)
            return collector, collector.open()
        except NvmlUnavailable:
            if collector is not None:  # release NVML if it started but found no GPU
                with contextlib.suppress(Exception):
                    collector.close()
            raise
    if kind == "replay":
        from tealeaves.collectors.replay import ReplayCollector

        if trace is None:
            raise ValueError("a replay needs a trace")
        replay = ReplayCollector(trace, speed=speed, rebase=True, loop=loop)
        return replay, replay.open()
    if kind == "prometheus":
        from tealeaves.collectors.prometheus import PrometheusCollector

        if url is None:
            raise ValueError("a Prometheus source needs a URL")
        pc = PrometheusCollector(url, step_s=step_s, lookback_s=lookback_s)
        return pc, pc.open()
    raise ValueError(f"unknown source kind {kind!r} (one of {', '.join(SOURCE_KINDS)})")
