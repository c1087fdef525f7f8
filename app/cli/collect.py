"""``tealeaves collect``: sweep the GPUs (or replay a trace) into a store, optionally serving
``/metrics`` and following the server's log and metrics."""

from __future__ import annotations

import argparse
import signal
import socket
from pathlib import Path

from tealeaves.app.cli.args import DAY, add_model, gpu_indices, port_number, upto
from tealeaves.app.cli.common import (
    EXIT_NO_GPU,
    EXIT_SAMPLES_LOST,
    fail,
    out_path_problem,
    package_version,
    plural,
    shown,
    write_atomically,
)
from tealeaves.data.jsontext import dumps as json_dumps


def cmd_collect(args: argparse.Namespace) -> int:
    """``tealeaves collect``: collect until ``--duration``, Ctrl-C or SIGTERM, then print a
    summary line.  Returns the exit status (0; 2 bad input, store or port; 3 no GPU; 4 samples
    collected but not stored, counted in the summary and ``dropped_samples``)."""
    from tealeaves.app.session import Session
    from tealeaves.collectors.bench import CpuMeter, rss_mb
    from tealeaves.data.device_facts import DeviceConflictError
    from tealeaves.data.server_log import ServerLogError
    from tealeaves.data.store import StoreError

    refused = _refuse_options(args)
    if refused is not None:
        return refused
    opened = _open_source(args)
    if isinstance(opened, int):
        return opened
    collector, devices = opened
    try:
        session = Session.open(collector, args.store, devices=devices)
    except StoreError as exc:
        return fail(str(exc))
    with session:
        try:  # the facts first: another GPU's under a stored (host, GPU) is refused up front
            session.store.put_devices(devices)
        except DeviceConflictError as exc:
            return fail(f"{exc} (nothing was collected)")
        start_cursor = session.store.cursor()
        # Ctrl-C and SIGTERM end the collection cleanly: the last batch is stored, then the
        # summary.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: session.stop_event.set())
        rss: list[tuple[float, float]] = []
        meter = CpuMeter().start()

        def sample_rss(_batch) -> None:
            t = meter.stop()[1]
            if not rss or t - rss[-1][0] >= 5.0:
                rss.append((round(t, 2), rss_mb()))

        sample_rss(None)
        if args.prometheus_port is not None:
            try:
                port = session.serve_metrics(args.prometheus_port, args.prometheus_host,
                                             hostname=args.host)
            except OSError as exc:
                return fail(f"--prometheus-port {args.prometheus_port}: {exc.strerror or exc}")
            print(f"serving /metrics on http://{args.prometheus_host}:{port}/metrics",
                  flush=True)
        try:
            session.follow_server(server_log=args.server_log,
                                  from_start=args.server_log_from_start, tz=args.tz,
                                  server_metrics=args.server_metrics,
                                  interval_s=args.server_metrics_interval,
                                  health=session.health)
        except ServerLogError as exc:  # nothing was collected yet
            return fail(str(exc))
        n = session.run(duration=args.duration, on_batch=sample_rss)
        session.halt()
        cpu_s, elapsed = meter.stop()
        rss.append((round(elapsed, 2), rss_mb()))
        try:
            _finish(args, session, n, start_cursor, {"elapsed_s": elapsed, "cpu_s": cpu_s,
                                                     "rss_mb": rss})
        except OSError as exc:  # the samples are in the store; the file is not half-written
            return fail(f"{exc.filename or 'output'}: could not be written "
                        f"({exc.strerror or exc}); the {n} samples collected are in "
                        f"{args.store}")
        lost = session.collector.health["dropped_samples"]
        side = server_not_stored(session.health)
    if lost:
        return fail(f"{args.store}: {plural(lost, 'sample')} collected but not stored "
                    f"({plural(session.collector.health['store_errors'], 'write error')}; "
                    f"a full disk or a store made read-only?)", EXIT_SAMPLES_LOST)
    if side:
        return fail(f"{args.store}: {side}; a full disk or a store made read-only?",
                    EXIT_SAMPLES_LOST)
    return 0


def _refuse_options(args: argparse.Namespace) -> int | None:
    """The exit status (2, one error) when ``--tz`` or an output file of ``args`` is refused
    before anything is opened (an output naming the store or the other output); else None."""
    from tealeaves.data.server_log import ServerLogError, resolve_tz

    if args.server_log is not None:  # a bad --tz is refused before anything is opened
        try:
            resolve_tz(args.tz)
        except ServerLogError as exc:
            return fail(f"--tz: {exc}")
    for option, path in (("--parquet", args.parquet), ("--stats-json", args.stats_json)):
        problem = path is not None and out_path_problem(option, path)
        if problem:  # refused before anything is collected
            return fail(problem)
        if path is not None and _same_file(path, args.store):
            return fail(f"{option} {path}: is the store; give another file name")
    if args.parquet is not None and args.stats_json is not None and \
            _same_file(args.parquet, args.stats_json):
        return fail(f"--stats-json {args.stats_json}: is the --parquet file; give another name")
    return None


def server_not_stored(health: dict) -> str:
    """What of the server's signals the store refused while collecting
    (``collectors.start_server_signals``' ``server_not_stored`` count), in words; "" when
    everything was stored."""
    got = health.get("server_not_stored") or {}
    if not got.get("errors"):
        return ""
    return (f"{plural(got['events'], 'server event')} and "
            f"{plural(got['metric_rows'], 'server metric row')} not stored "
            f"({plural(got['errors'], 'store write error')})")


def _open_source(args: argparse.Namespace):
    """The collector of ``collect`` (a replay of ``--replay``, else NVML), opened
    (``collectors.source.open_source``): ``(collector, devices)``, or the exit status when it
    cannot be."""
    from tealeaves.collectors.source import open_source

    if args.replay is not None:
        from tealeaves.data.importers import ImportFormatError, load_trace
        from tealeaves.data.traces import TraceError

        try:
            tr = load_trace(args.replay)
        except (TraceError, ImportFormatError) as exc:
            return fail(str(exc))
        if args.gpus is not None:
            tr = _only_gpus(tr, args.gpus, args.replay)
            if isinstance(tr, int):
                return tr
        if args.host:
            tr.samples["host"] = args.host
            if len(tr.devices):
                tr.devices["host"] = args.host
        return open_source("replay", trace=tr, speed=args.speed, loop=args.loop)
    from tealeaves.collectors.nvml import UnknownGpus
    from tealeaves.collectors.nvml_shim import NvmlUnavailable

    try:
        return open_source("nvml", hz=args.hz, gpus=args.gpus, threads=args.threads,
                           pcie_hz=args.pcie_hz)
    except UnknownGpus as exc:
        return fail(f"--gpus: {exc}")
    except NvmlUnavailable as exc:
        return fail(f"{exc} (no GPU to collect from)", EXIT_NO_GPU)


def _only_gpus(tr, gpus: list[int], path: Path):
    """The trace ``tr`` cut to the GPU indices ``gpus`` (``--gpus`` with ``--replay``), or the
    exit status (2, one error naming them) when some are not in the trace."""
    held = sorted({int(g) for g in tr.samples["gpu"].unique()})
    missing = sorted(set(gpus) - set(held))
    if missing:
        many = len(missing) > 1
        return fail(f"--gpus: GPU{'s' if many else ''} {', '.join(map(str, missing))} "
                    f"{'are' if many else 'is'} not in the replayed trace {path} (it holds "
                    f"GPU{'s' if len(held) > 1 else ''} {', '.join(map(str, held))})")
    keep = tr.samples["gpu"].isin(gpus)
    tr.samples = tr.samples[keep].reset_index(drop=True)
    if len(tr.devices) and "gpu" in tr.devices:
        tr.devices = tr.devices[tr.devices["gpu"].isin(gpus)].reset_index(drop=True)
    return tr


def _finish(args: argparse.Namespace, session, n: int, start_cursor, cost: dict) -> None:
    """After the loop: the store's meta, the summary line, ``--stats-json`` (its ``health`` a
    ``HealthSummary``: ``unsupported`` lists the metrics never answered, ``intermittent``
    those that failed some reads, with their counts) and ``--parquet``, each file written
    whole or not at all (``write_atomically``).
    ``cost``: ``elapsed_s``, ``cpu_s`` (s) and ``rss_mb`` (``[(s, MB), ...]``).

    Raises:
        OSError: a file cannot be written (its ``filename`` the option's path).
    """
    import sqlite3
    import sys

    from tealeaves.collectors.health import intermittent, intermittent_text
    from tealeaves.collectors.nvml import health_summary
    from tealeaves.collectors.source import DriverSource

    collector, store = session.collector, session.store
    h = collector.health
    meta = {"collector": "replay" if args.replay else "nvml", "hz": args.hz,
            "driver": collector.driver if isinstance(collector, DriverSource) else None,
            "hostname": socket.gethostname(), "tealeaves": package_version()}
    try:
        for k, v in meta.items():
            store.set_meta(k, str(v))
    except sqlite3.Error as exc:  # a full disk: the samples stored stay, only the notes go
        print(f"tealeaves: {args.store}: the collector's settings were not recorded ({exc})",
              file=sys.stderr)
    # a metric that answered but failed some reads is intermittent (with its counts), never
    # unsupported: "intermittent: gpu0:dram_active failed 1 of 1344 reads"
    flaky = intermittent_text(intermittent(h))
    print(f"stored {n} samples in {shown(args.store)}: {h['sweeps']} sweeps, "
          f"{h['missed_deadlines']} missed deadlines, max lateness "
          f"{h['max_lateness_s'] * 1e3:.1f} ms, unsupported: "
          f"{', '.join(sorted(h['unsupported'])) or 'none'}"
          + (f", intermittent: {flaky}" if flaky else "")
          + (f"; NOT STORED: {h['dropped_samples']} samples ({h['store_errors']} store write "
             f"errors)" if h["dropped_samples"] else "")
          + (f"; NOT STORED: {side}" if (side := server_not_stored(session.health)) else ""),
          flush=True)
    if args.stats_json:
        elapsed, cpu_s = cost["elapsed_s"], cost["cpu_s"]
        stats = json_dumps({
            "hz": args.hz, "pcie_hz": args.pcie_hz, "threads": args.threads,
            "gpus": len(session.devices), "stored": n,
            "dropped_samples": h["dropped_samples"],
            "server_not_stored": session.health.get("server_not_stored"),
            "elapsed_s": elapsed, "cpu_s": cpu_s,
            "cpu_pct_one_core": 100.0 * cpu_s / max(elapsed, 1e-9), "rss_mb": cost["rss_mb"],
            "health": health_summary(h, elapsed)})
        write_atomically(args.stats_json, lambda tmp: _named(args.stats_json, Path.write_text,
                                                             tmp, stats))
    if args.parquet:
        from tealeaves.data.traces import Trace, write_trace

        samples, _ = store.read_since(start_cursor)
        devs = store.devices()
        write_atomically(args.parquet, lambda tmp: _named(args.parquet, write_trace, tmp,
                                                          Trace(samples, devs, meta)))
        print(f"wrote {len(samples)} samples to {shown(args.parquet)}")


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file (a link, a hard link or ``..`` included)."""
    if a.exists() and b.exists():
        return a.samefile(b)
    return a.resolve() == b.resolve()


def _named(path: Path, write, tmp: Path, *what) -> None:
    """``write(tmp, *what)``, an ``OSError`` of it naming ``path`` (not the temporary file)."""
    try:
        write(tmp, *what)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None


def add_parser(sub) -> None:
    """Add ``collect`` to the top-level subparsers ``sub``."""
    c = sub.add_parser("collect", help="collect NVML samples into the store",
                       description="Sweep every GPU through NVML and store the samples.")
    c.add_argument("--store", type=Path, default=Path("tealeaves.db"),
                   help="SQLite store (default tealeaves.db)")
    c.add_argument("--hz", type=upto(1000, "the sweep rate (Hz)"), default=10.0, help="sweeps per second (default 10)")
    c.add_argument("--duration", type=upto(366 * DAY, "the duration (s)"), help="seconds to collect (default: until Ctrl-C)")
    c.add_argument("--gpus", type=gpu_indices, help="comma-separated GPU indices (default: all); one not on the host (or "
                        "not in the --replay trace) is refused")
    c.add_argument("--parquet", type=Path, help="also write the collected samples as a trace")
    c.add_argument("--pcie-hz", type=upto(1000, "the PCIe rate (Hz)"), default=10.0,
                   help="PCIe byte-counter reads per second (default 10; each read costs "
                        "~0.7 ms of CPU per GPU)")
    c.add_argument("--server-log", type=Path,
                   help="follow this SGLang/vLLM log (or - for stdin) into the store")
    c.add_argument("--server-log-from-start", action="store_true",
                   help="read the existing log from its start, not only new lines")
    c.add_argument("--tz", default="UTC",
                   help="time zone of the server log's timestamps (default UTC)")
    c.add_argument("--server-metrics",
                   help="scrape this SGLang/vLLM /metrics URL into the store")
    c.add_argument("--server-metrics-interval", type=upto(3600, "the interval (s)"), default=1.0,
                   help="seconds between scrapes (default 1)")
    c.add_argument("--threads", action="store_true",
                   help="read the GPUs of each sweep in parallel threads")
    c.add_argument("--stats-json", type=Path,
                   help="write CPU time, RSS and collector health to this JSON file "
                        "(health.unsupported: metrics never answered; health.intermittent: "
                        "those that failed some reads, with the counts)")
    c.add_argument("--prometheus-port", type=port_number,
                   help="also serve /metrics on this port: per-GPU window aggregates, the "
                        "node's phase and imbalance, collector health (labels as "
                        "dcgm-exporter's)")
    c.add_argument("--prometheus-host", default="127.0.0.1",
                   help="address /metrics binds (default 127.0.0.1; 0.0.0.0 for a remote "
                        "Prometheus)")
    c.add_argument("--replay", type=Path, metavar="TRACE",
                   help="collect from this trace played back in real time instead of NVML "
                        "(demos, tests; any importable file)")
    c.add_argument("--speed", type=upto(1000, "the replay speed"), default=1.0, help="replay speed (default 1)")
    c.add_argument("--loop", action="store_true", help="replay: start over at the end")
    c.add_argument("--host", help="replay: the host name to give the samples (default: the "
                                  "trace's)")
    add_model(c)
    c.set_defaults(func=cmd_collect)
