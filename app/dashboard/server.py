"""Serve the dashboard: pick a source, collect into a store in the background, serve with werkzeug.

``serve`` is what ``tealeaves dashboard`` runs; ``start`` and ``start_in_thread`` do the same
without blocking (tests start the whole thing on port 0 and stop it again).

Source: live NVML when GPUs answer (unless ``force_replay`` or a trace is given), else a looping
replay of ``trace`` or of the bundled real H200 trace, timestamps moved to now.

Source, store, server signals and the collection loop run as one ``app.session.Session`` (as in
``tealeaves collect``); the werkzeug server and the temporary store are this module's.

Server signals (``server_log``, ``server_metrics``): with live NVML the log is followed (new
lines only) and the ``/metrics`` URL scraped into the store (``Session.follow_server``).
With a replay the whole log is parsed (``data.server_log.read_log``), its clock offset
against the trace estimated (``classifier.align.align_events``), its events moved onto the
trace's clock and replayed in step with the samples (``ReplayCollector(events=...)``); the
offset found is shown in the status line.  The dashboard draws a server lane once the store
holds server events or metrics.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from werkzeug.serving import WSGIRequestHandler, make_server

from tealeaves.app.dashboard.guard import DISPATCH
from tealeaves.app.session import Session
from tealeaves.collectors.nvml import health_summary
from tealeaves.data import bundled_trace_path
from tealeaves.data.importers import load_trace
from tealeaves.data.store import SampleStore, StoreError


@dataclass
class Source:
    """Where samples come from.

    Attributes:
        collector: a ``collectors.source.Source`` (``run_to_store`` drives it).
        label: one line for people: "live NVML, 2 GPUs" or "replay of <file>".
        kind: ``"nvml"`` or ``"replay"``.
        devices: device rows when the collector was already opened (to probe for GPUs).
    """

    collector: object
    label: str
    kind: str
    devices: pd.DataFrame | None = None


def choose_source(trace: str | Path | None = None, speed: float = 1.0, hz: float = 10.0,
                  force_replay: bool = False, reading: dict | None = None) -> Source:
    """Pick the sample source the way ``tealeaves dashboard`` does.

    Live NVML is tried unless ``force_replay`` or ``trace`` is given; when NVML is unavailable
    (no driver, no GPU) the bundled trace is replayed instead.  ``reading``: how ``trace`` is
    read (``columns``, ``start_time``, ``tz``: ``data.importers.load_trace``'s keywords).

    Raises:
        ValueError: ``trace`` is missing or not a readable trace (``TraceError``), or ``speed``
            / ``hz`` is not positive.
    """
    from tealeaves.collectors.source import open_source

    if trace is None and not force_replay:
        from tealeaves.collectors.nvml_shim import NvmlUnavailable

        try:  # open_source releases NVML if it started but found no GPU
            collector, devices = open_source("nvml", hz=hz)
        except NvmlUnavailable:
            pass
        else:
            n = len(devices)
            return Source(collector, f"live NVML, {n} GPU{'s' if n != 1 else ''}", "nvml",
                          devices)
    path = Path(trace) if trace is not None else bundled_trace_path()
    tr = load_trace(path, **(reading or {})) if trace is not None else load_trace(path)
    label = f"replay of {path.name}" + (f" at {speed:g}x" if speed != 1.0 else "")
    # no device rows: the replay's writer lock is "replay", as before (claim_store)
    return Source(open_source("replay", trace=tr, speed=speed, loop=True)[0], label, "replay")


def align_server_log(server_log: str | Path, samples: pd.DataFrame, tz: str = "UTC",
                     max_offset_s: float = 60.0) -> tuple[list, str]:
    """Parse a whole server log and move its events onto the clock of ``samples``.

    The log is read by ``data.server_log.read_log``; the offset is estimated by
    ``classifier.align.align_events`` (``estimate_offset``: prefill lines against
    tensor activity), at the log's timestamp resolution (whole seconds unless a stamp has a
    fraction).  With a confident offset the events are shifted by it; otherwise they are kept
    as stamped.

    Args:
        server_log: SGLang or vLLM log file (``.gz`` read compressed).
        samples: the GPU samples (trace clock) to align against.
        tz: time zone of the log's timestamps.
        max_offset_s: largest offset searched, seconds.

    Returns:
        ``(events, note)``: the (shifted) events and one line for the status, e.g.
        ``"server log sglang.log: +3.2 s offset, r=0.97"`` or
        ``"server log sglang.log: no confident offset (r=0.12), shown unshifted"``.

    Raises:
        ValueError: the log is missing or unreadable (``ServerLogError``), holds no SGLang or
            vLLM line, or ``tz`` is unknown.
    """
    import math

    from tealeaves.classifier.align import align_events
    from tealeaves.data.server_log import read_log

    events, a = align_events(read_log(server_log, tz=tz).events, samples,
                             max_offset_s=max_offset_s)
    name = Path(server_log).name
    if not a.confident:
        why = a.reason or (f"r={a.correlation:.2f}" if math.isfinite(a.correlation) else "")
        return events, (f"server log {name}: no confident offset"
                        f"{f' ({why})' if why else ''}, shown unshifted")
    return events, f"server log {name}: {a.offset_s:+.1f} s offset, r={a.correlation:.2f}"


class _NoCollector:
    """The collector of ``start(collect=False)``: nothing to open, stream or close."""

    health = None

    def close(self) -> None:
        pass


class _QuietHandler(WSGIRequestHandler):
    """Request handler that does not log every request (the page polls twice a second)."""

    def log_request(self, code="-", size="-") -> None:
        # a refused callback request was said in one line already (``guard``)
        if str(code) == "400" and self.path.endswith(DISPATCH):
            return
        if str(code).startswith(("4", "5")):
            super().log_request(code, size)


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``.

    Raises:
        RuntimeError: the address cannot be bound (in use, not local, no permission).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, int(port)), family=family, backlog=128)
    except OSError as exc:
        raise RuntimeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


@dataclass
class RunningDashboard:
    """A started dashboard: its collection session, Dash app and werkzeug server.

    Attributes:
        url: where the page is served (``http://host:port/``).
        source: the sample source.
        store: the sample store the collector writes.
        app: the ``dash.Dash`` app.
        server: the werkzeug server (call ``serve_forever`` or use ``start_in_thread``).
        session: the ``app.session.Session`` (source, store, server signals, collection loop).
        health: ``running`` (bool), ``error`` (str or None), ``samples`` (int) of the
            collector thread (the session's ``health``).
    """

    url: str
    source: Source
    store: SampleStore
    app: object
    server: object
    session: Session
    health: dict
    server_note: str = ""
    _tmpdir: str | None = None
    _serving_thread: threading.Thread | None = None
    _closed: bool = field(default=False)

    def shutdown(self) -> None:
        """Stop serving, then the session (collector, server signals, store); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._serving_thread is not None:
            self.server.shutdown()
            self._serving_thread.join(timeout=5)
        self.server.server_close()
        self.app.tealeaves_live.stop_updates()
        self.session.stop()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)


def _stored_source(store_path: str | Path | None, trace, server_log, server_metrics) -> Source:
    """The source of ``start(collect=False)``: none, after checking ``store_path`` is an
    existing tealeaves store (read-only).

    Raises:
        ValueError: a trace, log or metrics URL given, no store, or not a tealeaves store.
    """
    if trace is not None or server_log is not None or server_metrics:
        raise ValueError("--no-collect serves a store as it is: no --trace, --server-log "
                         "or --server-metrics")
    if store_path is None:
        raise ValueError("--no-collect needs the store to serve: --store FILE")
    if not Path(store_path).is_file():
        what = "is a directory" if Path(store_path).is_dir() else "does not exist"
        raise ValueError(f"{store_path}: {what}; --no-collect serves an existing store")
    try:  # a tealeaves store, checked read-only before anything is written to it
        SampleStore(store_path, readonly=True).close()
    except StoreError as exc:
        raise ValueError(str(exc)) from None
    return Source(_NoCollector(), f"store {Path(store_path).name} (not collecting)", "store")


def _prometheus_source(url: str, step_s: float, lookback_s: float, trace, server_log,
                       config: dict) -> Source:
    """A ``collectors.prometheus.PrometheusCollector`` reading the cluster at ``url``, opened;
    sets ``config["hold_s"]`` (a reading stands until the next step) unless given.

    Raises:
        ValueError: a trace or log given, or Prometheus refused (``PrometheusError``).
    """
    from tealeaves.collectors.prometheus import PrometheusError
    from tealeaves.collectors.source import open_source

    if trace is not None or server_log is not None:
        raise ValueError("--prometheus reads the cluster from Prometheus: no --trace or "
                         "--server-log")
    try:
        pc, devices = open_source("prometheus", url=url, step_s=step_s, lookback_s=lookback_s)
    except PrometheusError as exc:
        raise ValueError(str(exc)) from None
    # a reading stands until the next step (lanes hold it, not gaps between points)
    config.setdefault("hold_s", max(0.3, 1.5 * step_s))
    return Source(pc, f"Prometheus {url}", "prometheus", devices)


def _server_notes(source: Source, server_log, server_metrics, tz: str) -> list[str]:
    """Status notes on the server signals; with a replay, the whole log is aligned to the
    trace and handed to the replay (``align_server_log``).  The source is closed when the
    log is refused (``ValueError``, as ``align_server_log``)."""
    notes: list[str] = []
    try:
        if server_log is not None and source.kind == "replay":
            events, note = align_server_log(server_log, source.collector.trace.samples, tz=tz)
            source.collector.events = events
            notes.append(note)
        elif server_log is not None:
            notes.append(f"following {'stdin' if str(server_log) == '-' else Path(server_log).name}")
    except BaseException:
        source.collector.close()
        raise
    if server_metrics:
        notes.append(f"scraping {server_metrics}")
    return notes


def replay_info(source: Source):
    """For a replay source: a callable giving ``DashboardConfig.replay``'s dict (the file
    named in its label, the recorded first and last sample, and the replay's current shift
    ``ReplayCollector.offset``: NaN until it starts, larger by the trace's span each pass)."""
    rc = source.collector
    ts = rc.trace.samples["timestamp"]
    t0, t1 = float(ts.min()), float(ts.max())
    file = source.label.removeprefix("replay of ").split(" at ")[0]

    def info() -> dict:
        off = float(rc.offset)
        if off == 0.0 and rc.rebase:  # not started: a rebased replay's shift is never 0
            off = math.nan
        return {"file": file, "t0": t0, "t1": t1, "offset": off}
    return info


def _open_session(source: Source, store_path: str | Path | None) -> tuple[Session, str | None]:
    """Open the store (a temporary one, in a new folder, when ``store_path`` is None) and the
    session around it: ``(session, tmpdir or None)``.  On failure the source is closed and
    the temporary folder removed.

    Raises:
        data.store.StoreError: the store cannot be opened or claimed.
    """
    tmpdir = None
    try:
        if store_path is None:
            tmpdir = tempfile.mkdtemp(prefix="tealeaves-")
            store_path = Path(tmpdir) / "samples.db"
        # a store to browse on a read-only mount (or a file we may not write) opens read-only
        readonly = source.kind == "store" and not (
            os.access(store_path, os.W_OK) and os.access(Path(store_path).parent, os.W_OK))
    except BaseException:
        source.collector.close()
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
        raise
    try:  # Session.open closes the source when it fails
        session = Session.open(source.collector, store_path, devices=source.devices,
                               readonly=readonly, claim=source.kind != "store")
    except BaseException:
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
        raise
    return session, tmpdir


def _app_and_server(session: Session, source: Source, collect: bool, host: str, port: int,
                    config: dict, on_progress: Callable[[int, int], None] | None = None):
    """The Dash app on ``session``'s store and a werkzeug server bound to ``host:port`` (not
    serving yet): ``(app, server, cfg)``.  Starts loading the phase model off the request
    path (reading it takes a few seconds).

    Raises:
        RuntimeError: the address cannot be bound.
    """
    from tealeaves.app.dashboard.factory import DashboardConfig, create_app
    from tealeaves.classifier import default_labeller

    t_start = time.monotonic()
    health = session.health

    def health_now() -> dict:
        return {**health, "collector": health_summary(source.collector.health,
                                                      time.monotonic() - t_start)}

    if source.kind == "replay" and collect:
        config.setdefault("replay", replay_info(source))
    cfg = DashboardConfig(source=source.label, health=health_now if collect else None, **config)
    app = create_app(session.store, cfg, on_progress=on_progress)
    threading.Thread(target=default_labeller, name="tealeaves-model-load", daemon=True).start()
    app.tealeaves_live.start_updates()  # followed pages' ticks then only read
    sock = _listen(host, port)
    try:
        server = make_server(host, sock.getsockname()[1], app.server, threaded=True,
                             request_handler=_QuietHandler, fd=sock.fileno())
    finally:
        sock.close()  # werkzeug holds its own duplicate of the descriptor
    return app, server, cfg


def start(trace: str | Path | None = None, host: str = "127.0.0.1", port: int = 8050,
          speed: float = 1.0, store_path: str | Path | None = None, hz: float = 10.0,
          force_replay: bool = False, server_log: str | Path | None = None, tz: str = "UTC",
          server_metrics: str | None = None, collect: bool = True,
          prometheus: str | None = None, prometheus_step: float = 0.5,
          prometheus_lookback: float = 5.0, reading: dict | None = None,
          on_progress: Callable[[int, int], None] | None = None,
          **config) -> RunningDashboard:
    """Pick the source, open the store, start collecting and bind the server (not serving yet).

    Args:
        trace, speed, hz, force_replay, reading: as for ``choose_source``.
        on_progress: ``History.on_progress`` while the store's history is first read and
            labelled (``serve`` gives a progress bar).
        host, port: address to bind; port 0 picks a free one.
        store_path: SQLite store to write; a temporary file (removed at shutdown) when None.
        server_log: SGLang/vLLM log.  Live: followed from its end ("-": standard input).
            Replay: parsed whole, aligned to the trace (``align_server_log``) and replayed
            with the samples.
        tz: time zone of the log's timestamps.
        server_metrics: URL of the server's ``/metrics`` endpoint, scraped every second.
        collect: False: collect nothing, serve what ``store_path`` holds (and whatever another
            process, e.g. ``tealeaves collect``, keeps writing to it).
        prometheus: read a cluster from this Prometheus server instead (its tealeaves and
            dcgm-exporter series, ``collectors.prometheus``), every host in the store and the
            cluster overview on the page; ``prometheus_step`` is the resolution asked, s;
            ``prometheus_lookback`` how old a reading may be before it counts as missing, s.
        **config: overrides of ``app.dashboard.DashboardConfig`` fields (``view_s``,
            ``interval_ms`` ...).

    Raises:
        ValueError: bad trace, speed or hz; a missing, unreadable or empty server log or an
            unknown ``tz``.
        RuntimeError: the store cannot be opened (``StoreError``) or the address not bound.
    """
    from tealeaves.data.server_log import resolve_tz

    resolve_tz(tz)  # a bad zone is refused before anything starts
    if not collect:
        source = _stored_source(store_path, trace, server_log, server_metrics)
    elif prometheus:
        source = _prometheus_source(prometheus, prometheus_step, prometheus_lookback, trace,
                                    server_log, config)
    else:
        source = choose_source(trace, speed=speed, hz=hz, force_replay=force_replay,
                               reading=reading)
    notes = _server_notes(source, server_log, server_metrics, tz)
    replay_log = server_log is not None and source.kind == "replay"
    session, tmpdir = _open_session(source, store_path)
    if replay_log:  # the replay stores the log's events as their samples come due
        source.collector.on_events = session.store.put_server_events
    try:
        if collect:
            session.store.set_meta("source", source.label)
        config.setdefault("server", " · ".join(notes))
        # replayed events are stored with their samples; a followed log may lag its stamps
        config.setdefault("server_lag_s", 0.0 if source.kind == "replay" else 1.5)
        config.setdefault("store_temporary", tmpdir is not None)
        app, server, cfg = _app_and_server(session, source, collect, host, port, config,
                                           on_progress)
    except BaseException:
        session.stop()
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
        raise
    session.follow_server(server_log=None if replay_log else server_log, tz=tz,
                          server_metrics=server_metrics, health=session.health)
    if collect:
        session.start_loop()
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{server.port}/"
    return RunningDashboard(url=url, source=source, store=session.store, app=app,
                            server=server, session=session, health=session.health,
                            server_note=cfg.server, _tmpdir=tmpdir)


def start_in_thread(**kwargs) -> tuple[str, Callable[[], None]]:
    """Start the whole dashboard and serve it from a daemon thread.

    Takes ``start``'s arguments (default ``port=0``, ``host="127.0.0.1"``).

    Returns:
        ``(url, shutdown)``: the page's URL and a function that stops server, collector and
        store (idempotent).
    """
    kwargs.setdefault("port", 0)
    running = start(**kwargs)
    t = threading.Thread(target=running.server.serve_forever, kwargs={"poll_interval": 0.1},
                         name="tealeaves-http", daemon=True)
    running._serving_thread = t
    t.start()
    return running.url, running.shutdown


#: Stored samples from which ``serve`` shows the first reading and labelling of a store as a
#: progress bar (fewer take a second or two on two cores; an hour of eight GPUs at 20 Hz,
#: 575,000 samples, 5-30 s: docs/benchmarks.md, "Start-up and command speed").
PROGRESS_FROM_ROWS = 50_000


class _HistoryBar:
    """``History.on_progress`` for ``serve``: a bar on stderr while a large store's history is
    first read, binned and labelled (before the page can be served), then one line."""

    def __init__(self) -> None:
        self.bar = None
        self.t0 = time.monotonic()
        self.rows = 0

    def __call__(self, done: int, total: int) -> None:
        if total < PROGRESS_FROM_ROWS:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="tealeaves: reading and labelling the store",
                            unit=" samples", unit_scale=True, file=sys.stderr, leave=False)
        self.rows = total
        self.bar.update(max(0, done - self.bar.n))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            print(f"tealeaves: {self.rows:,} stored samples read and labelled in "
                  f"{time.monotonic() - self.t0:.1f} s", flush=True)
            self.bar = None


def serve(trace: str | Path | None = None, host: str = "127.0.0.1", port: int = 8050,
          speed: float = 1.0, store_path: str | Path | None = None, hz: float = 10.0,
          force_replay: bool = False, server_log: str | Path | None = None, tz: str = "UTC",
          server_metrics: str | None = None, collect: bool = True,
          prometheus: str | None = None, prometheus_step: float = 0.5,
          prometheus_lookback: float = 5.0, reading: dict | None = None) -> int:
    """Serve the dashboard until Ctrl-C (or SIGTERM); what ``tealeaves dashboard`` runs.

    Arguments as for ``start``.  Prints one line: the URL and the source (and a second one
    about the server log / metrics when given).

    Returns:
        0 after a clean stop.

    Raises:
        ValueError: missing or corrupt ``trace`` (one-line message), bad ``speed`` / ``hz``.
        RuntimeError: the store cannot be opened or the address not bound.
    """
    bar = _HistoryBar()
    try:
        running = start(trace=trace, host=host, port=port, speed=speed, store_path=store_path,
                        hz=hz, force_replay=force_replay, server_log=server_log, tz=tz,
                        server_metrics=server_metrics, collect=collect, prometheus=prometheus,
                        prometheus_step=prometheus_step, prometheus_lookback=prometheus_lookback,
                        reading=reading, on_progress=bar)
    finally:
        bar.close()
    print(f"tealeaves dashboard on {running.url} ({running.source.label}); Ctrl-C stops",
          flush=True)
    if running.server_note:
        print(f"tealeaves: {running.server_note}", flush=True)
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"tealeaves: warning: bound to {host}: other machines can reach this dashboard "
              f"(it has no login)", file=sys.stderr, flush=True)
    previous = None
    if threading.current_thread() is threading.main_thread():
        def _term(*_):
            raise KeyboardInterrupt
        previous = signal.signal(signal.SIGTERM, _term)
    try:
        running.server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        running.shutdown()
    return 0
