"""``tealeaves bench ...``: benchmarks and the labelled GPU workload; each subcommand's parser
sits next to its handler."""

from __future__ import annotations

import argparse
from pathlib import Path

from tealeaves.app.cli.args import DAY, count, gpu_indices, upto
from tealeaves.app.cli.common import EXIT_NO_GPU, fail
from tealeaves.data.jsontext import dumps as json_dumps


def add_parser(sub) -> None:
    """Add ``bench`` and its subcommands to the top-level subparsers ``sub``."""
    b = sub.add_parser("bench", help="benchmarks and labelled workloads")
    bsub = b.add_subparsers(dest="bench_command", required=True, metavar="BENCH")
    for add in (_add_workload, _add_classifier, _add_gaps, _add_dashboard, _add_speed,
                _add_collector, _add_prometheus, _add_verify_attention):
        add(bsub)


# -- workload --------------------------------------------------------------------------------
def cmd_bench_workload(args: argparse.Namespace) -> int:
    """``tealeaves bench workload``: run the labelled phases on the GPUs, writing labels (and an
    SGLang-style log).  Returns the exit status (0; 3 without torch+CUDA GPUs)."""
    from tealeaves.kernels_bench.workload import Workload, scenario_schedule

    try:
        wl = Workload(devices=args.gpus, hot_experts=args.hot_experts, seed=args.seed)
    except RuntimeError as exc:
        return fail(str(exc), EXIT_NO_GPU)
    schedule = scenario_schedule(args.scenario, len(wl.devices), seed=args.seed,
                                 scale=args.scale)
    total = sum(p.seconds for p in schedule)
    print(f"workload {args.scenario!r} on GPUs {wl.devices}: {len(schedule)} phases, "
          f"{total:.0f} s; labels -> {args.labels}", flush=True)
    writer = None
    if args.sglang_log:
        from tealeaves.kernels_bench.sglang_log import SglangLogWriter

        writer = SglangLogWriter(args.sglang_log)
    try:
        wl.run(schedule, args.labels, log=lambda s: print(s, flush=True), server_log=writer)
    finally:
        if writer is not None:
            writer.close()
    return 0


def _add_workload(bsub) -> None:
    from tealeaves.kernels_bench.workload import SCENARIOS

    w = bsub.add_parser("workload", help="run the labelled GPU workload (needs torch+CUDA)",
                        description="Run idle/prefill/decode/skewed-decode phases on every "
                                    "visible GPU and write ground-truth intervals.")
    w.add_argument("--labels", type=Path, default=Path("labels.csv"),
                   help="ground-truth CSV to write (default labels.csv)")
    w.add_argument("--gpus", type=gpu_indices,
                   help="comma-separated CUDA device indices (default: all)")
    w.add_argument("--scale", type=upto(100, "the scale"), default=1.0,
                   help="multiply every phase duration (default 1.0, ~95 s on two GPUs)")
    w.add_argument("--hot-experts", type=count(1_000_000, "--hot-experts", lo=0), default=48,
                   help="experts run by the hot GPU per decode step (balanced: 8)")
    w.add_argument("--scenario", default="default", choices=["default", *SCENARIOS],
                   help="which schedule to run (default: the bundled trace's); the others are "
                        "the classifier corpus' scenarios (kernels_bench/workload.py)")
    w.add_argument("--seed", type=int, default=0,
                   help="seed of the buffers and of the scenario's durations (default 0)")
    w.add_argument("--sglang-log", type=Path,
                   help="also write SGLang-style scheduler lines (local time) to this file, "
                        "as a server would, for alignment tests")
    w.set_defaults(func=cmd_bench_workload)


# -- classifier ------------------------------------------------------------------------------
def cmd_bench_classifier(args: argparse.Namespace) -> int:
    """``tealeaves bench classifier``: time the phase model and the rules.  Returns 0."""
    from tealeaves.classifier import bench as cbench

    res = cbench.run(args.seconds, args.gpus, args.repeat)
    if args.json:
        print(json_dumps(res))
    return 0


def _add_classifier(bsub) -> None:
    bk = bsub.add_parser("classifier", help="classify one hour of 8-GPU telemetry on one core",
                         description="Time the trained phase model and the v0 rules on one "
                                     "hour of eight-GPU telemetry at 20 Hz (tiled from the "
                                     "bundled real trace), pinned to one CPU core.")
    bk.add_argument("--seconds", type=upto(7 * DAY, "the length (s)"), default=3600.0,
                    help="telemetry length (default 3600)")
    bk.add_argument("--gpus", type=count(1024, "the GPU count"), default=8, help="GPUs (default 8)")
    bk.add_argument("--repeat", type=count(1000, "--repeat"), default=3,
                    help="runs, best kept (default 3)")
    bk.add_argument("--json", action="store_true", help="also print the figures as JSON")
    bk.set_defaults(func=cmd_bench_classifier)


# -- gaps ------------------------------------------------------------------------------------
def cmd_bench_gaps(args: argparse.Namespace) -> int:
    """``tealeaves bench gaps``: stores with and without a pause between sessions, side by side.
    Returns 0."""
    from tealeaves.app.bench import gaps as gap_bench

    res = gap_bench.run(args.gap_days, args.copies)
    if args.json:
        print(json_dumps(res))
    return 0


def _add_gaps(bsub) -> None:
    bg = bsub.add_parser("gaps", help="does a pause between sessions cost anything?",
                         description="Two stores with the same samples (copies of the bundled "
                                     "trace), end to end or with a gap of days: dashboard "
                                     "start, the \"all\" view and a report of each, side by "
                                     "side, each in a fresh process (seconds, peak RSS).")
    bg.add_argument("--gap-days", type=upto(3650, "the gap (days)"), default=30.0,
                    help="days between the first session and the rest (default 30)")
    bg.add_argument("--copies", type=count(100, "--copies"), default=2,
                    help="sessions, each one copy of the bundled trace (default 2)")
    bg.add_argument("--json", action="store_true", help="also print the figures as JSON")
    bg.set_defaults(func=cmd_bench_gaps)


# -- dashboard -------------------------------------------------------------------------------
def cmd_bench_dashboard(args: argparse.Namespace) -> int:
    """``tealeaves bench dashboard``: server time, payload, latency and memory of the dashboard.
    Returns the exit status (0; 2 when ``--store`` is a file this benchmark did not make)."""
    from tealeaves.app.bench import dashboard as dbench

    if args.store is not None and args.store.exists() and not dbench.made_by_bench(args.store):
        return fail(f"{args.store} exists and is not a store `tealeaves bench dashboard` made: "
                     f"give a new path (the benchmark overwrites it)")
    res = dbench.run(args.seconds, args.gpus, args.store, args.live_seconds, args.pages,
                     browser=not args.no_browser, resampler=not args.no_resampler)
    if args.json:
        print(dbench.main_json(res))
    return 0


def _add_dashboard(bsub) -> None:
    bd = bsub.add_parser("dashboard", help="dashboard server time, payload, latency and memory",
                         description="Fill a store with one hour of eight-GPU telemetry at "
                                     "20 Hz, then measure the dashboard: server time and "
                                     "payload of the full-range view, a 1-minute zoom and a "
                                     "live tick; sample-to-screen latency in headless Chromium; "
                                     "server memory with 1 and 5 pages; and the same with "
                                     "plotly-resampler.")
    bd.add_argument("--seconds", type=upto(7 * DAY, "the length (s)"), default=3600.0,
                    help="telemetry in the store (default 3600)")
    bd.add_argument("--gpus", type=count(1024, "the GPU count"), default=8, help="GPUs (default 8)")
    bd.add_argument("--store", type=Path,
                    help="where to write the store (default: a temporary file); an existing "
                         "file is only overwritten if this benchmark made it")
    bd.add_argument("--live-seconds", type=upto(3600, "the live run (s)"), default=30.0,
                    help="seconds of live latency measurement (default 30)")
    bd.add_argument("--pages", type=count(100, "--pages"), default=5,
                    help="pages open for the memory figure (default 5)")
    bd.add_argument("--no-browser", action="store_true", help="skip the Chromium part")
    bd.add_argument("--no-resampler", action="store_true", help="skip plotly-resampler")
    bd.add_argument("--json", action="store_true", help="also print the figures as JSON")
    bd.set_defaults(func=cmd_bench_dashboard)


# -- speed -----------------------------------------------------------------------------------
def cmd_bench_speed(args: argparse.Namespace) -> int:
    """``tealeaves bench speed``: start-up and command times, each in a fresh process, beside
    a baseline interpreter's.  Returns the exit status (0; 2 when a --python is no file)."""
    from tealeaves.app.bench import speed

    for opt, py in (("--python", args.python), ("--baseline", args.baseline)):
        if py is not None and not Path(py).is_file():
            return fail(f"{opt} {py}: no such interpreter (give a virtual environment's "
                        f"bin/python)")
    res = speed.run(args.seconds, args.gpus, args.pages, args.live_seconds, args.repeat,
                    python=args.python, baseline=args.baseline, browser=not args.no_browser)
    if args.json:
        print(json_dumps(res))
    return 0


def _add_speed(bsub) -> None:
    bs = bsub.add_parser("speed", help="start-up and command times, beside another checkout's",
                         description="Build the one-hour eight-GPU store of `bench dashboard`, "
                                     "then time in fresh processes: dashboard start-up until "
                                     "the figure is drawn (headless Chromium), classify and "
                                     "report (html, pdf) of the bundled trace and of the "
                                     "store, screenshot read of one picture, and "
                                     "sample-to-screen p50/p95 with several pages open "
                                     "(docs/benchmarks.md).")
    bs.add_argument("--seconds", type=upto(7 * DAY, "the length (s)"), default=3600.0,
                    help="telemetry in the store (default 3600)")
    bs.add_argument("--gpus", type=count(1024, "the GPU count"), default=8, help="GPUs (default 8)")
    bs.add_argument("--pages", type=count(100, "--pages"), default=4,
                    help="browser pages following the store for the latency (default 4)")
    bs.add_argument("--live-seconds", type=upto(3600, "the live run (s)"), default=20.0,
                    help="seconds of latency measurement (default 20)")
    bs.add_argument("--repeat", type=count(100, "--repeat"), default=1,
                    help="runs of each command, median kept (default 1)")
    bs.add_argument("--python", help="interpreter whose tealeaves is timed (default: this one)")
    bs.add_argument("--baseline", metavar="PYTHON",
                    help="also time another checkout's tealeaves (its venv's bin/python), "
                         "printed beside")
    bs.add_argument("--no-browser", action="store_true",
                    help="skip the dashboard rows (no Chromium)")
    bs.add_argument("--json", action="store_true", help="also print the figures as JSON")
    bs.set_defaults(func=cmd_bench_speed)


# -- collector -------------------------------------------------------------------------------
def cmd_bench_collector(args: argparse.Namespace) -> int:
    """``tealeaves bench collector``: the collector against nvitop and nvidia-smi.  Returns the
    exit status (0; 3 no GPU)."""
    from tealeaves.collectors import bench
    from tealeaves.collectors.nvml_shim import Nvml, NvmlUnavailable

    try:
        n = Nvml()
        n.init()
        available = n.device_count()
        n.shutdown()
    except NvmlUnavailable as exc:
        return fail(f"{exc} (no GPU to benchmark)", EXIT_NO_GPU)
    gpus = min(args.gpus or available, available)
    bench.run(gpus, args.seconds, args.hz, args.out, compare=not args.no_compare,
              soak_s=args.soak, pcie_hz=args.pcie_hz, log=lambda s: print(s, flush=True))
    return 0


def _add_collector(bsub) -> None:
    bc = bsub.add_parser("collector", help="collector rate, CPU and memory vs nvitop/nvidia-smi",
                         description="Run tealeaves' collector (one loop and threaded), "
                                     "nvitop's ResourceMetricCollector and nvidia-smi at their "
                                     "fastest on the same GPUs; print rates, CPU % of one core, "
                                     "NVML time per sweep and RSS, and an 8-GPU cost model.")
    bc.add_argument("--gpus", type=count(1024, "the GPU count"), help="number of GPUs (default: all)")
    bc.add_argument("--seconds", type=upto(7 * DAY, "the length (s)"), default=30.0, help="seconds per tool (default 30)")
    bc.add_argument("--hz", type=upto(1000, "the sweep rate (Hz)"), default=50.0, help="tealeaves sweep rate (default 50)")
    bc.add_argument("--pcie-hz", type=upto(1000, "the PCIe rate (Hz)"), default=10.0,
                    help="tealeaves PCIe counter reads per second (default 10)")
    bc.add_argument("--soak", type=upto(7 * DAY, "the soak (s)"), help="also run the collector this many seconds, "
                                               "recording RSS (e.g. 600)")
    bc.add_argument("--no-compare", action="store_true", help="skip nvitop and nvidia-smi")
    bc.add_argument("--out", type=Path, default=Path("bench-out"),
                    help="folder for collector_bench.csv/json (default bench-out)")
    bc.set_defaults(func=cmd_bench_collector)


# -- prometheus ------------------------------------------------------------------------------
def cmd_bench_prometheus(args: argparse.Namespace) -> int:
    """``tealeaves bench prometheus``: the exporter's cost to a real Prometheus.  Returns the
    exit status (0; 2 when the prometheus binary is missing)."""
    from tealeaves.app.bench.prometheus import main as prom_main

    try:
        prom_main(args.targets, args.interval, args.seconds, args.json)
    except FileNotFoundError as exc:
        return fail(str(exc))
    return 0


def _add_prometheus(bsub) -> None:
    bp = bsub.add_parser("prometheus",
                         help="what the exporter costs a real Prometheus; a fleet's load",
                         description="Measure an 8-GPU node's /metrics (series, bytes, scrape "
                                     "time), run Debian's prometheus scraping --targets such "
                                     "nodes, and work out 1000 nodes x 8 GPUs at 1 s and 10 s "
                                     "(docs/scale.md).")
    bp.add_argument("--targets", type=count(100_000, "--targets"), default=50,
                    help="simulated nodes scraped (default 50)")
    bp.add_argument("--interval", type=upto(3600, "the interval (s)"), default=1.0,
                    help="scrape interval, s (default 1)")
    bp.add_argument("--seconds", type=upto(7 * DAY, "the length (s)"), default=60.0,
                    help="seconds measured (default 60)")
    bp.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    bp.set_defaults(func=cmd_bench_prometheus)


# -- verify-attention ------------------------------------------------------------------------
def cmd_bench_verify_attention(args: argparse.Namespace) -> int:
    """``tealeaves bench verify-attention``: check and time the verify-attention kernels.
    Returns the exit status (0; 2 bad input; 3 without torch and Triton)."""
    from tealeaves.kernels_bench.verify_args import combination_error

    why_not = combination_error(args)
    if why_not:
        return fail(why_not)
    try:
        from tealeaves.kernels_bench.verify_bench import run
    except ImportError as exc:
        return fail(f"bench verify-attention needs torch and Triton ({exc}): "
                     f"pip install -e '.[bench]' on a machine with a CUDA GPU", EXIT_NO_GPU)

    def refuse(msg: str):
        raise SystemExit(fail(msg))

    return run(args, refuse)


def _add_verify_attention(bsub) -> None:
    from tealeaves.kernels_bench.verify_args import add_arguments as add_verify_arguments

    bv = bsub.add_parser("verify-attention",
                         help="DDTree verify attention kernels: NSPLIT x page x context sweep",
                         description="Check the unsplit and split-KV kernels (Gluon on Hopper, "
                                     "Triton anywhere) of MLA "
                                     "verify attention against the reference and time them "
                                     "over NSPLIT, page size, context, heads and tree size, "
                                     "next to the copy bandwidth measured in the same run "
                                     "(needs torch, Triton and a CUDA GPU; docs/verify-attention.md).")
    add_verify_arguments(bv)
    bv.set_defaults(func=cmd_bench_verify_attention)
