"""``tealeaves dashboard``: serve the live dashboard (``app.dashboard.server.serve``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tealeaves.app.cli.args import DAY, add_file_reading, add_model, file_reading, port_number, upto
from tealeaves.app.cli.common import fail


def cmd_dashboard(args: argparse.Namespace) -> int:
    """``tealeaves dashboard``: serve until Ctrl-C.  Returns the exit status (0; 2 when the
    source, store, server log or address is refused)."""
    from tealeaves.app.dashboard.server import serve

    try:
        return serve(trace=args.trace, host=args.host, port=args.port, speed=args.speed,
                     store_path=args.store, hz=args.hz, force_replay=args.replay,
                     server_log=args.server_log, tz=args.tz, server_metrics=args.server_metrics,
                     collect=not args.no_collect, prometheus=args.prometheus,
                     prometheus_step=args.prometheus_step,
                     prometheus_lookback=args.prometheus_lookback,
                     reading=file_reading(args))
    except (ValueError, RuntimeError) as exc:
        return fail(str(exc))


def add_parser(sub) -> None:
    """Add ``dashboard`` to the top-level subparsers ``sub``."""
    d = sub.add_parser("dashboard", help="serve the live dashboard",
                       description="Serve the dashboard: live from NVML when GPUs are found, "
                                   "else a replay of the bundled real H200 trace.")
    d.add_argument("--trace", type=Path, help="replay this file instead: a tealeaves trace or "
                                              "any file `tealeaves import` reads")
    d.add_argument("--replay", action="store_true",
                   help="replay (the bundled trace unless --trace) even when GPUs are found")
    d.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    d.add_argument("--port", type=port_number, default=8050, help="port (default 8050; 0 picks one)")
    d.add_argument("--speed", type=upto(1000, "the replay speed"), default=1.0, help="replay speed (default 1.0)")
    d.add_argument("--hz", type=upto(1000, "the sweep rate (Hz)"), default=10.0, help="live sweep rate (default 10)")
    d.add_argument("--store", type=Path, help="SQLite store to write/read (default: temporary)")
    d.add_argument("--no-collect", action="store_true",
                   help="collect nothing: browse what --store holds (while `tealeaves collect "
                        "--store` may keep writing to it)")
    d.add_argument("--server-log", type=Path,
                   help="SGLang/vLLM log: followed live; with a replay, aligned to the trace "
                        "(offset estimated from the data) and replayed with it")
    d.add_argument("--tz", default="UTC",
                   help="time zone of the server log's timestamps and of the --trace file's "
                        "wall-clock times (default UTC)")
    add_file_reading(d, "the --trace file", start_note="; the replay itself runs at the "
                     "current time, so the page shows the file's times shifted to now")
    d.add_argument("--prometheus", metavar="URL",
                   help="read a cluster from this Prometheus server: tealeaves' exporters' and "
                        "dcgm-exporter's series, every host, with a cluster overview; each "
                        "poll's queries must all be answered within 30 s in total and each "
                        "answer within 64 MiB, else the poll is refused and counted "
                        "(collectors.prometheus DEADLINE_S, MAX_ANSWER_BYTES)")
    d.add_argument("--prometheus-step", type=upto(3600, "the step (s)"), default=0.5,
                   help="resolution asked of Prometheus, s (default 0.5, the classifier's "
                        "window; each point is the newest scrape at that time)")
    d.add_argument("--prometheus-lookback", type=upto(DAY, "the lookback (s)"), default=5.0,
                   help="a reading older than this (s) counts as missing, not repeated "
                        "(default 5; set above the scrape interval)")
    d.add_argument("--server-metrics", metavar="URL",
                   help="scrape this SGLang/vLLM /metrics endpoint")
    add_model(d)
    d.set_defaults(func=cmd_dashboard)
