"""One collection session: source -> store -> exporter -> server signals -> collection loop.

``tealeaves collect`` and ``tealeaves dashboard`` (``app.dashboard.server.start``) both run one:

1. the source: a collector (``NvmlCollector``, ``ReplayCollector``, ``PrometheusCollector`` ...),
   opened by the caller or left for the loop to open;
2. the store: opened and claimed for the source's host (one writer per host and store,
   ``collectors.claim_store``) by ``Session.open``;
3. the Prometheus exporter (``app.exporter.serve``), when asked: ``Session.serve_metrics``;
4. the server signals, a followed log and a scraped ``/metrics`` URL
   (``collectors.start_server_signals``): ``Session.follow_server``;
5. the collection loop (``collectors.run_to_store``), in the caller's thread (``run``) or a
   thread of its own (``start_loop``).

``halt`` stops what runs in reverse order (loop, server signals, exporter) and keeps the store
open for a summary; ``stop`` (also the context manager's exit) halts, then closes the store and
the source.  The exporter starts before the server signals, as ``collect`` always did: a port
that cannot be bound ends the session before anything is followed.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Self

import pandas as pd

from tealeaves.collectors import claim_store, run_to_store, start_server_signals
from tealeaves.data.store import SampleStore


class Session:
    """A store being filled from one source, and what runs beside it.

    Attributes:
        collector: the source (``open`` / ``stream`` / ``close`` / ``health``).
        store: the open ``SampleStore``.
        devices: the device rows when the caller opened the collector, else None (the loop
            opens it).
        stop_event: set to end the loop and the server signals (``halt`` sets it; ``collect``
            sets it on Ctrl-C and SIGTERM).
        health: the loop thread's record (``start_loop``): ``running`` (bool), ``error`` (str
            or None), ``samples`` (int stored); ``server_metrics`` (the scraper's
            ``ScrapeHealth``) once ``follow_server(health=session.health)`` scrapes.
    """

    def __init__(self, collector, store: SampleStore, devices: pd.DataFrame | None = None):
        self.collector = collector
        self.store = store
        self.devices = devices
        self.stop_event = threading.Event()
        self.health: dict = {"running": True, "error": None, "samples": 0}
        self._exporter = None
        self._side: list[threading.Thread] = []
        self._loop: threading.Thread | None = None
        self._loop_ran = False
        self._halted = False
        self._closed = False

    @classmethod
    def open(cls, collector, store_path: str | Path, *, devices: pd.DataFrame | None = None,
             readonly: bool = False, claim: bool = True) -> Self:
        """Open the store at ``store_path`` for ``collector`` and claim it (unless ``claim`` is
        False: a store only read).

        Args:
            collector: the source; closed here when the store cannot be opened or claimed.
            store_path: SQLite store file (made when missing, unless ``readonly``).
            devices: the device rows if the caller already opened ``collector``.
            readonly: open the store read-only (browsing a store on a read-only mount).
            claim: take the store's collector lock for the source's host.

        Raises:
            data.store.StoreError: the store cannot be opened, is not a tealeaves store, or
                another collector writes that host into it.
        """
        try:
            store = SampleStore(store_path, readonly=readonly)
        except BaseException:
            collector.close()
            raise
        try:
            if claim:  # a source that writes: one writer per host and store
                claim_store(store, collector, devices)
        except BaseException:
            store.close()
            collector.close()
            raise
        return cls(collector, store, devices)

    def serve_metrics(self, port: int, host: str = "127.0.0.1",
                      hostname: str | None = None) -> int:
        """Serve ``/metrics`` for the store (``app.exporter.serve``), collector health
        included, from a daemon thread until ``halt``.

        Args:
            port: TCP port (0 picks a free one).
            host: address to bind.
            hostname: the node's host label (None: the samples').

        Returns:
            The port bound.

        Raises:
            OSError: the port cannot be bound.
        """
        from tealeaves.app.exporter import serve

        self._exporter = serve(self.store, port, host, health=lambda: self.collector.health,
                               hostname=hostname)
        return self._exporter[0].server_port

    def follow_server(self, *, server_log: str | Path | None = None, from_start: bool = False,
                      tz: str = "UTC", server_metrics: str | None = None,
                      interval_s: float = 1.0, health: dict | None = None) -> None:
        """Follow a server log and scrape a ``/metrics`` URL into the store until ``halt``
        (``collectors.start_server_signals``, same arguments; nothing when both are None)."""
        self._side = start_server_signals(self.store, self.stop_event, server_log=server_log,
                                          from_start=from_start, tz=tz,
                                          server_metrics=server_metrics,
                                          interval_s=interval_s, health=health)

    def run(self, duration: float | None = None, on_batch=None) -> int:
        """Run the collection loop in this thread (``collectors.run_to_store``) until
        ``duration`` seconds pass, ``stop_event`` is set or the source ends; the loop closes
        the source when it ends.

        Returns:
            Samples stored.
        """
        self._loop_ran = True
        return run_to_store(self.collector, self.store, duration=duration,
                            stop=self.stop_event, devices=self.devices, on_batch=on_batch)

    def start_loop(self) -> threading.Thread:
        """Run the collection loop in a daemon thread (``tealeaves-collector``); it keeps
        ``health`` (``samples`` stored; ``error`` and a line on stderr when it fails;
        ``running`` False when it ends).

        Returns:
            The started thread (``halt`` joins it).
        """
        def loop() -> None:
            try:
                self.health["samples"] = self.run()
            except Exception as exc:  # noqa: BLE001 - reported on the page and on stderr
                self.health["error"] = f"{type(exc).__name__}: {exc}"
                print(f"tealeaves: collector stopped: {self.health['error']}", file=sys.stderr)
            finally:
                self.health["running"] = False

        self._loop_ran = True
        self._loop = threading.Thread(target=loop, name="tealeaves-collector", daemon=True)
        self._loop.start()
        return self._loop

    def halt(self) -> None:
        """Stop what runs, in reverse order: the loop, the server signals, the exporter (each
        thread waited for up to 5 s).  The store stays open; idempotent."""
        if self._halted:
            return
        self._halted = True
        self.stop_event.set()
        if self._loop is not None:
            self._loop.join(timeout=5)
        for t in self._side:
            t.join(timeout=5)
        if self._exporter is not None:
            self._exporter[0].shutdown()

    def stop(self) -> None:
        """``halt``, then close the store and the source (the source only when no loop ran:
        the loop closes it); idempotent."""
        self.halt()
        if self._closed:
            return
        self._closed = True
        self.store.close()
        if not self._loop_ran:
            self.collector.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
