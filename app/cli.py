"""The ``tealeaves`` command line.

Subcommands import their heavy dependencies lazily, so ``tealeaves collect`` and
``tealeaves bench workload`` run on a GPU host without the dashboard's packages (dash, plotly).
Every failure the user can fix prints one line naming the problem and exits non-zero.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import socket
import sys
import threading
from pathlib import Path

from ..data.jsontext import dumps as json_dumps

EXIT_BAD_INPUT = 2
EXIT_NO_GPU = 3


def _fail(msg: str, code: int = EXIT_BAD_INPUT) -> int:
    print(f"tealeaves: error: {msg}", file=sys.stderr)
    return code


def _positive_int(text: str) -> int:
    """argparse type: a whole number > 0."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return v


def _upto(hi: float, what: str):
    """argparse type: a finite number above 0 and at most ``hi``."""

    def parse(text: str) -> float:
        v = _positive(text)
        if v > hi:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be at most {hi:.10g}")
        return v

    return parse


def _count(hi: int, what: str, lo: int = 1):
    """argparse type: a whole number from ``lo`` to ``hi``."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be from {lo} to {hi}")
        return v

    return parse


DAY = 86_400.0


def _positive(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number above 0")
    return v


def _bounded(lo: float, hi: float, what: str):
    """argparse type: a finite number in ``[lo, hi]`` (checked at parse time)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (math.isfinite(v) and lo <= v <= hi):
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be a finite number from "
                                             f"{lo:.10g} to {hi:.10g}")
        return v

    return parse


#: A classifier window: 0.05 s to 60 s.
_window = _bounded(0.05, 60.0, "the window (s)")
#: UTC epoch seconds from 2000-01-01 to 2100-01-01.
_epoch_arg = _bounded(946_684_800.0, 4_102_444_800.0, "a UTC epoch time (2000-2100)")


def _port(text: str) -> int:
    """argparse type: a TCP port, 0-65535 (0 picks a free one)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"{v} is outside 0-65535")
    return v


def _indices(text: str) -> list[int]:
    """argparse type: comma-separated GPU indices ("0,1,3")."""
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of GPU indices") from None
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of GPU indices")
    return out


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tealeaves")
    except PackageNotFoundError:
        return "0+unknown"


# -- collect -------------------------------------------------------------------------------
def cmd_collect(args: argparse.Namespace) -> int:
    from ..collectors import claim_store, run_to_store, start_server_signals
    from ..collectors.bench import CpuMeter, rss_mb
    from ..collectors.nvml import NvmlCollector, health_summary
    from ..collectors.nvml_shim import NvmlUnavailable
    from ..data.store import SampleStore, StoreError

    gpus = args.gpus
    if args.replay is not None:
        from ..collectors.replay import ReplayCollector
        from ..data.importers import ImportFormatError, load_trace
        from ..data.traces import TraceError

        try:
            tr = load_trace(args.replay)
        except (TraceError, ImportFormatError) as exc:
            return _fail(str(exc))
        if args.host:
            tr.samples["host"] = args.host
            if len(tr.devices):
                tr.devices["host"] = args.host
        collector = ReplayCollector(tr, speed=args.speed, rebase=True, loop=args.loop)
        devices = collector.open()
    else:
        collector = NvmlCollector(hz=args.hz, gpus=gpus, threads=args.threads,
                                  pcie_hz=args.pcie_hz)
        try:
            devices = collector.open()
        except NvmlUnavailable as exc:
            return _fail(f"{exc} (no GPU to collect from)", EXIT_NO_GPU)
    try:
        store = SampleStore(args.store)
        claim_store(store, collector, devices)
    except StoreError as exc:
        collector.close()
        return _fail(str(exc))
    start_cursor = store.cursor()
    stop = threading.Event()
    # Ctrl-C and SIGTERM end the collection cleanly: the last batch is stored, then the summary.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    rss: list[tuple[float, float]] = []
    meter = CpuMeter().start()

    def sample_rss(_batch) -> None:
        t = meter.stop()[1]
        if not rss or t - rss[-1][0] >= 5.0:
            rss.append((round(t, 2), rss_mb()))

    sample_rss(None)
    exporter = None
    if args.prometheus_port is not None:
        from .exporter import serve as serve_metrics

        try:
            exporter = serve_metrics(store, args.prometheus_port, args.prometheus_host,
                                     health=lambda: collector.health, hostname=args.host)
        except OSError as exc:
            collector.close()
            store.close()
            return _fail(f"--prometheus-port {args.prometheus_port}: {exc.strerror or exc}")
        port = exporter[0].server_port
        print(f"serving /metrics on http://{args.prometheus_host}:{port}/metrics", flush=True)
    side = start_server_signals(store, stop, server_log=args.server_log,
                                from_start=args.server_log_from_start, tz=args.tz,
                                server_metrics=args.server_metrics,
                                interval_s=args.server_metrics_interval)
    n = run_to_store(collector, store, duration=args.duration, stop=stop, devices=devices,
                     on_batch=sample_rss)
    stop.set()
    for t in side:
        t.join(timeout=5)
    if exporter is not None:
        exporter[0].shutdown()
    cpu_s, elapsed = meter.stop()
    rss.append((round(elapsed, 2), rss_mb()))
    h = collector.health
    if args.stats_json:
        summary = health_summary(h, elapsed)
        Path(args.stats_json).write_text(json_dumps({
            "hz": args.hz, "pcie_hz": args.pcie_hz, "threads": args.threads,
            "gpus": len(devices), "stored": n,
            "elapsed_s": elapsed, "cpu_s": cpu_s,
            "cpu_pct_one_core": 100.0 * cpu_s / max(elapsed, 1e-9), "rss_mb": rss,
            "health": summary}))
    meta = {"collector": "replay" if args.replay else "nvml", "hz": args.hz,
            "driver": getattr(collector, "driver", None),
            "hostname": socket.gethostname(), "tealeaves": _version()}
    for k, v in meta.items():
        store.set_meta(k, str(v))
    print(f"stored {n} samples in {args.store}: {h['sweeps']} sweeps, "
          f"{h['missed_deadlines']} missed deadlines, max lateness "
          f"{h['max_lateness_s'] * 1e3:.1f} ms, unsupported: "
          f"{', '.join(sorted(h['unsupported'])) or 'none'}")
    if args.parquet:
        from ..data.traces import Trace, write_trace

        samples, _ = store.read_since(start_cursor)
        devs = store.devices()
        write_trace(args.parquet, Trace(samples, devs, meta))
        print(f"wrote {len(samples)} samples to {args.parquet}")
    store.close()
    return 0


# -- import --------------------------------------------------------------------------------
def cmd_import(args: argparse.Namespace) -> int:
    import sqlite3

    from ..data.importers import import_file
    from ..data.store import SampleStore, StoreError

    results = []
    for path in args.files:
        try:
            results.append(import_file(path, format=args.format, start_time=args.start_time,
                                       host=args.host, tz=args.tz,
                                       columns=args.columns.split(",") if args.columns
                                       else None))
        except ValueError as exc:  # ImportFormatError, unknown --format or --tz
            return _fail(f"{exc} (nothing was imported)")
    try:
        store = SampleStore(args.store)
    except StoreError as exc:
        return _fail(str(exc))
    with store:
        try:  # every file in one transaction: all of them, or (disk full, Ctrl-C) none
            stored, repeats = store.append_all(r.samples for r in results)
        except sqlite3.Error as exc:
            return _fail(f"{args.store}: could not store the samples ({exc}); nothing was "
                         f"imported, the store is as it was")
    report = [{"file": str(path), "format": r.format, "rows_read": r.rows_read,
               "samples": len(r.samples), "gpus": r.gpus,
               "time_span": list(r.time_span), "blanks": r.blanks,
               "out_of_range": r.out_of_range,
               "skipped": [{"line": n, "reason": why} for n, why in r.skipped]}
              for path, r in zip(args.files, results, strict=True)]
    if args.json:
        print(json_dumps({"store": str(args.store), "stored": stored,
                          "already_stored": repeats, "files": report}))
        return 0
    for f in report:
        t0, t1 = f["time_span"]
        span = f"{t1 - t0:.3f} s from {_utc(t0)}" if math.isfinite(t0) else "no time span"
        print(f"{f['file']}: {f['format']}, {f['rows_read']} rows read, {f['samples']} samples, "
              f"GPUs {f['gpus']}, {span}, {len(f['skipped'])} "
              f"line{'s' if len(f['skipped']) != 1 else ''} skipped")
        for col, n in f["blanks"].items():
            print(f"  {col}: {n} blank value{'s' if n != 1 else ''} (no reading; stored as NaN)")
        for col, n in f["out_of_range"].items():
            print(f"  {col}: {n} value{'s' if n != 1 else ''} outside the field limits "
                  f"(stored as NaN)")
        for s in f["skipped"][:20]:
            print(f"  line {s['line']}: {s['reason']}")
        if len(f["skipped"]) > 20:
            print(f"  ... {len(f['skipped']) - 20} more")
    again = f" ({repeats} already stored, passed over)" if repeats else ""
    print(f"stored {stored} samples in {args.store}{again}")
    return 0


def _utc(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


# -- doctor --------------------------------------------------------------------------------
def cmd_doctor(args: argparse.Namespace) -> int:
    from ..collectors.nvml_shim import NvmlUnavailable
    from ..collectors.probe import format_table, probe

    try:
        report = probe(poll_s=args.poll)
    except NvmlUnavailable as exc:
        if args.json:
            print(json_dumps({"gpus": [], "error": str(exc)}))
        else:
            print(f"no NVIDIA GPU found: {exc}")
        return 0
    print(json_dumps(report) if args.json else format_table(report))
    return 0


# -- bench ---------------------------------------------------------------------------------
def cmd_bench_prometheus(args: argparse.Namespace) -> int:
    from .bench.prometheus import main as prom_main

    try:
        prom_main(args.targets, args.interval, args.seconds, args.json)
    except FileNotFoundError as exc:
        return _fail(str(exc))
    return 0


def cmd_bench_verify_attention(args: argparse.Namespace) -> int:
    try:
        from ..kernels_bench.verify_bench import run
    except ImportError as exc:
        return _fail(f"bench verify-attention needs torch and Triton ({exc}): "
                     f"pip install -e '.[bench]' on a machine with a CUDA GPU", EXIT_NO_GPU)

    def refuse(msg: str):
        raise SystemExit(_fail(msg))

    return run(args, refuse)


def cmd_bench_collector(args: argparse.Namespace) -> int:
    from ..collectors import bench
    from ..collectors.nvml_shim import Nvml, NvmlUnavailable

    try:
        n = Nvml()
        n.init()
        available = n.device_count()
        n.shutdown()
    except NvmlUnavailable as exc:
        return _fail(f"{exc} (no GPU to benchmark)", EXIT_NO_GPU)
    gpus = min(args.gpus or available, available)
    bench.run(gpus, args.seconds, args.hz, args.out, compare=not args.no_compare,
              soak_s=args.soak, pcie_hz=args.pcie_hz, log=lambda s: print(s, flush=True))
    return 0



def cmd_bench_classifier(args: argparse.Namespace) -> int:
    from ..classifier import bench as cbench

    res = cbench.run(args.seconds, args.gpus, args.repeat)
    if args.json:
        print(json_dumps(res))
    return 0


def cmd_bench_gaps(args: argparse.Namespace) -> int:
    from .bench import gaps as gap_bench

    res = gap_bench.run(args.gap_days, args.copies)
    if args.json:
        print(json_dumps(res))
    return 0


def cmd_bench_dashboard(args: argparse.Namespace) -> int:
    from .bench import dashboard as dbench

    if args.store is not None and args.store.exists() and not dbench.made_by_bench(args.store):
        return _fail(f"{args.store} exists and is not a store `tealeaves bench dashboard` made: "
                     f"give a new path (the benchmark overwrites it)")
    res = dbench.run(args.seconds, args.gpus, args.store, args.live_seconds, args.pages,
                     browser=not args.no_browser, resampler=not args.no_resampler)
    if args.json:
        print(dbench.main_json(res))
    return 0


def cmd_bench_workload(args: argparse.Namespace) -> int:
    from ..kernels_bench.workload import Workload, scenario_schedule

    try:
        wl = Workload(devices=args.gpus, hot_experts=args.hot_experts, seed=args.seed)
    except RuntimeError as exc:
        return _fail(str(exc), EXIT_NO_GPU)
    schedule = scenario_schedule(args.scenario, len(wl.devices), seed=args.seed,
                                 scale=args.scale)
    total = sum(p.seconds for p in schedule)
    print(f"workload {args.scenario!r} on GPUs {wl.devices}: {len(schedule)} phases, "
          f"{total:.0f} s; labels -> {args.labels}", flush=True)
    writer = None
    if args.sglang_log:
        from ..kernels_bench.sglang_log import SglangLogWriter

        writer = SglangLogWriter(args.sglang_log)
    try:
        wl.run(schedule, args.labels, log=lambda s: print(s, flush=True), server_log=writer)
    finally:
        if writer is not None:
            writer.close()
    return 0


# -- classify ------------------------------------------------------------------------------
def hot_set_line(imb: dict) -> str:
    """One line naming a range's hot set from ``classifier.summary.imbalance_summary``:
    ``"hot set: 1, 3, 5, 7 — 18 % each vs 7 % in 5 of 5 imbalanced windows (stays); per GPU:
    1 ×5, 3 ×5, 5 ×5, 7 ×5"``, or ``"hot set: none ..."``."""
    from ..classifier.imbalance import format_hot_set

    if not imb["hot_set"]:
        return "hot set: none (no imbalanced decode window)"
    pattern = ("stays" if imb["hot_pattern"] == "stays"
               else f"rotates, {imb['hot_changes']} changes")
    per_gpu = ", ".join(f"{g} ×{n}" for g, n in imb["hot_gpus"].items())
    return (f"hot set: {format_hot_set(imb['hot_set'], imb['hot_share'], imb['cold_share'])} "
            f"in {imb['hot_set_windows']} of {imb['imbalanced_windows']} imbalanced windows "
            f"({pattern}); per GPU: {per_gpu}")


#: Units of the window fields ``classify --json`` writes (the windows frame's own: loads and
#: shares in percent, fractions of a limit 0-1, times in UTC epoch seconds).
CLASSIFY_UNITS = {
    "start": "s (UTC epoch)", "end": "s (UTC epoch)", "confidence": "0-1",
    "p_idle": "0-1", "p_prefill": "0-1", "p_decode": "0-1",
    "load_mean": "%", "load_max": "%", "load_g<i>": "%", "tensor_active_mean": "%",
    "dram_active_mean": "%", "power_frac_mean": "0-1 of the power limit",
    "imbalance_ratio": "max/mean work", "balancedness": "mean/max work (0-1)",
    "straggler_tax": "0-1", "hot_share": "% of the summed work, per hot GPU",
    "cold_share": "% of the summed work, per other GPU",
}


def cmd_classify(args: argparse.Namespace) -> int:
    from ..classifier import classify_with_segments, default_labeller, score_against_labels
    from ..classifier.evaluate import time_accuracy
    from ..classifier.summary import imbalance_summary, set_text, window_hot_sets
    from ..collectors.server_log import ServerLogError
    from ..data.importers import ImportFormatError, load_trace
    from ..data.traces import TraceError, read_labels

    try:
        trace = load_trace(args.trace, format=args.format)
        labels = read_labels(args.labels) if args.labels else None
        if labels is not None:  # hot GPUs the trace lacks: refused, as evaluate does
            from ..classifier.evaluate import check_gpus_in_trace

            check_gpus_in_trace(labels, trace.samples, args.labels)
        server = _server_log_truth(args, trace) if args.server_log else None
    except (TraceError, ServerLogError, ImportFormatError) as exc:
        return _fail(str(exc))
    if server is not None:
        print(server["line"], file=sys.stderr if args.json or args.csv else sys.stdout)
        if labels is None:
            labels = server["labels"]
    labeller = default_labeller()
    # the windows, and the 0.1-s segments (labels that change where the counters change)
    windows, segments = classify_with_segments(trace.samples, trace.devices, args.window,
                                               labeller)
    counts = windows["phase"].value_counts().reindex(
        ["idle", "prefill", "decode"], fill_value=0).to_dict()
    score = score_against_labels(windows, labels) if labels is not None else None
    timed = None
    if score is not None:
        timed = {"windows": time_accuracy(windows, labels)["time_accuracy"],
                 "segments": time_accuracy(segments, labels)["time_accuracy"]
                 if len(segments) else float("nan")}
    if score is not None and score["labelled_windows"] == 0:
        return _fail(f"{args.labels}: no label interval overlaps the trace's "
                     f"{windows['start'].min():.1f}-{windows['end'].max():.1f} (epoch s); "
                     f"labels of another trace?")
    imb = imbalance_summary(windows)
    if args.json:
        records = json.loads(windows.to_json(orient="records"))
        for rec, hs in zip(records, window_hot_sets(windows), strict=True):
            rec["hot_set"] = list(hs)  # "1,3,5,7" in the frame: a list of ints here
        out = {
            "trace": str(args.trace),
            "window_s": args.window,
            "labeller": windows.attrs.get("labeller"),
            "phase_counts": {k: int(v) for k, v in counts.items()},
            "imbalance": {**imb, "hot_gpus": {str(g): n for g, n in imb["hot_gpus"].items()}},
            "windows": records,
            "segments": [{"start": round(float(r.start), 6), "end": round(float(r.end), 6),
                          "phase": str(r.phase),
                          "confidence": float(r.confidence)}
                         for r in segments.itertuples(index=False)],
            "units": CLASSIFY_UNITS,
        }
        if not len(segments):
            out["segments_note"] = segments_line(segments, 0.0).split(": ", 1)[-1]
        if score is not None:
            out.update(score)
            out["time_accuracy"] = timed
        if server is not None:
            out["server_log"] = {k: v for k, v in server.items() if k not in ("labels", "line")}
        print(json_dumps(out))  # a score with no hot GPU labelled is NaN: null
        return 0
    if args.csv:
        windows.to_csv(sys.stdout, index=False, float_format="%.4f")
    else:
        cols = ["start", "end", "phase", "confidence", "imbalance_ratio", "hot_set",
                "imbalanced"]
        table = windows.reindex(columns=cols)
        table["hot_set"] = [set_text(hs) or "-" for hs in window_hot_sets(windows)]
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"windows: {len(windows)}  " + "  ".join(f"{k}: {v}" for k, v in counts.items())
          + f"  (labeller: {windows.attrs.get('labeller')}"
          + (f": {windows.attrs['fallback']})" if windows.attrs.get("fallback") else ")"))
    if not args.csv:
        print(hot_set_line(imb))
        print(segments_line(segments, float(trace.samples["timestamp"].min())
                            if len(trace.samples) else 0.0))
    if score is not None:
        print(f"accuracy: {_na(score['accuracy'])} over {score['labelled_windows']} labelled "
              f"windows; skewed decode windows flagged with the right hot GPU: "
              f"{_na(score['hot_gpu_accuracy'])} over {score['skewed_windows']} windows")
        for ph, acc in score["per_phase_accuracy"].items():
            print(f"  {ph:8s} {acc:.3f}")
        seg_acc = timed["segments"]
        print(f"time accuracy (share of labelled time right, 0.1-s ticks): windows "
              f"{_na(timed['windows'])}, 0.1-s segments "
              + (f"{seg_acc:.3f}" if math.isfinite(seg_acc) else "n/a"))
        for st in score["stretches"]:
            print(f"  skewed decode {st['start']:.1f}-{st['end']:.1f} (GPU {st['hot_gpu']} hot): "
                  f"{st['flagged_right']:.0%} of {st['windows']} windows flagged GPU "
                  f"{st['hot_gpu']}")
    return 0


def segments_line(segments, t0: float, shown: int = 8) -> str:
    """One line on the 0.1-s segments: how many, and the first ``shown`` phase changes as
    seconds after ``t0`` (the trace's first sample)."""
    if segments is None or segments.empty:
        return ("segments (0.1-s): none (the window is not a whole number of 0.1-s hops, or "
                "no window holds a reading)")
    start = segments["start"].to_numpy(dtype=float)
    phase = segments["phase"].to_numpy()
    change = start[1:][phase[1:] != phase[:-1]]
    at = " ".join(f"{t - t0:+.1f}" for t in change[:shown])
    more = f" … s ({len(change)} in all)" if len(change) > shown else " s"
    return (f"segments (0.1-s): {len(segments)}, phase changes at {at}{more}"
            if len(change) else f"segments (0.1-s): {len(segments)}, no phase change")


def _server_log_truth(args: argparse.Namespace, trace) -> dict:
    """Parse ``--server-log``, estimate its clock offset against the trace, and turn it into
    ground-truth intervals on the trace's clock (``labels`` is None unless the offset is
    confident)."""
    from ..classifier.align import align_events
    from ..collectors.server_log import phase_intervals, read_log

    log = read_log(args.server_log, tz=args.tz)
    events, fmt = log.events, log.format
    shifted, a = align_events(events, trace.samples, max_offset_s=args.max_offset)
    labels = None
    if a.confident:
        labels = phase_intervals(shifted)
        line = (f"server log {args.server_log}: {len(events)} events ({fmt}), "
                f"clock offset {a.offset_s:+.1f} s (correlation {a.correlation:.2f}, "
                f"next best {a.runner_up:.2f}); used as ground truth"
                + (" for reporting only (--labels given)" if args.labels else ""))
    else:
        line = (f"server log {args.server_log}: {len(events)} events ({fmt}), "
                f"no confident clock offset ({a.reason or f'correlation {a.correlation:.2f}'}"
                f"); not used as ground truth")
    return {"events": len(events), "format": fmt, "offset_s": a.offset_s,
            "correlation": a.correlation, "runner_up": a.runner_up,
            "confident": a.confident, "labels": labels, "line": line}


# -- evaluate / train ----------------------------------------------------------------------
def _progress(desc: str):
    from tqdm import tqdm

    return lambda it: tqdm(it, desc=desc, unit="trace", file=sys.stderr, leave=False)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ..classifier import classify_trace, default_labeller
    from ..classifier.evaluate import check_labels_in_trace, score
    from ..classifier.rules import PHASE_ORDER, RulePhaseLabeller
    from ..data.importers import ImportFormatError, load_trace
    from ..data.traces import TraceError, read_labels

    if args.corpus is not None:
        if args.trace or args.labels:
            return _fail("evaluate takes --corpus, or --trace with --labels, not both")
        return _evaluate_corpus(args)
    if args.trace is None or args.labels is None:
        return _fail("evaluate needs --trace and --labels, or --corpus")
    try:
        trace = load_trace(args.trace, format=args.format)
        labels = read_labels(args.labels, phases=PHASE_ORDER)
        check_labels_in_trace(labels, trace.samples, args.labels)
    except (TraceError, ImportFormatError) as exc:
        return _fail(str(exc))
    labeller = RulePhaseLabeller() if args.rules else default_labeller()
    windows = classify_trace(trace, labeller=labeller)
    result = {"trace": str(args.trace), "labels": str(args.labels),
              "labeller": windows.attrs.get("labeller"), **score(windows, labels)}
    if args.json:
        print(json_dumps(result))
        return 0
    _print_score(result)
    return 0


def _nan(v) -> float:
    """A JSON number back to a float (null: NaN)."""
    return math.nan if v is None else float(v)


def _na(x, w: int = 0, nd: int = 3) -> str:
    """A figure for the terminal: ``n/a`` where it is unknown (never ``nan``)."""
    ok = isinstance(x, float | int) and math.isfinite(x)
    return f"{x:{w}.{nd}f}" if ok else f"{'n/a':>{w}s}"


def _print_score(r: dict) -> None:
    print(f"labeller: {r['labeller']}; {r['labelled_windows']} labelled windows")
    print(f"macro-F1: {_na(r['macro_f1'])}  accuracy: {_na(r['accuracy'])}  time accuracy "
          f"(0.1-s ticks): {_na(r.get('time_accuracy', math.nan))}")
    print(f"macro-F1 of windows holding no change / a change: "
          f"{_na(r.get('macro_f1_interior', math.nan))} / "
          f"{_na(r.get('macro_f1_change', math.nan))}")
    print("phase      precision  recall   F1     windows")
    for c, v in r["per_class"].items():
        print(f"  {c:8s} {_na(v['precision'], 8)} {_na(v['recall'], 8)} {_na(v['f1'], 6)} "
              f"{v['support']:8d}")
    print("confusion (rows true, columns predicted idle/prefill/decode): "
          + "; ".join(" ".join(str(x) for x in row) for row in r["confusion"]))
    print(f"boundary delay: median {_na(r['boundary_delay_s'], 0, 2)} s, p90 "
          f"{_na(r['boundary_delay_p90_s'], 0, 2)} s over {r['boundaries']} phase changes")
    print(f"imbalance precision: {_na(r['imbalance_precision'])}  recall: "
          f"{_na(r['imbalance_recall'])}  hot-GPU accuracy: {_na(r['hot_gpu_accuracy'])}  "
          f"hot-set accuracy: {_na(r.get('hot_set_accuracy', math.nan))} "
          f"({r['skewed_windows']} skewed windows, {r['flagged_windows']} flagged)")


def _evaluate_corpus(args: argparse.Namespace) -> int:
    from ..classifier.evaluate import load_corpus, report_markdown, validate_corpus
    from ..data.traces import TraceError

    try:
        corpus = load_corpus(Path(args.corpus) if args.corpus else None,
                             progress=_progress("features"))
    except TraceError as exc:
        return _fail(str(exc))
    from tqdm import tqdm

    try:
        result = validate_corpus(corpus, progress=lambda it, desc: tqdm(
            it, desc=desc, unit="fold", file=sys.stderr, leave=False))
    except TraceError as exc:
        return _fail(str(exc))
    if args.out is not None:
        cmd = "tealeaves evaluate --corpus" + (f" {args.corpus}" if args.corpus else "")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report_markdown(result, corpus, cmd))
        if not args.corpus:  # the shipped model's corpus: its held-out score ships with it
            _write_validation(result, corpus, cmd)
    if args.json:
        print(json_dumps(result))
        return 0
    loto = result.get("trace", {}).get("pooled", {})
    print("model          LOFO-F1 LOTO-F1 time-acc interior change delay  offset  imb-P  "
          "imb-R  low-P  low-R hot-set")
    for m, sc in result["pooled"].items():
        lt = _na(loto[m]["macro_f1"], 7) if m in loto else _na(math.nan, 7)
        print(f"{m:14s} {_na(sc['macro_f1'], 7)} {lt} {_na(sc['time_accuracy'], 8)} "
              f"{_na(sc['macro_f1_interior'], 8)} {_na(sc['macro_f1_change'], 6)} "
              f"{_na(sc['boundary_delay_s'], 4, 2)} s {_na(sc['boundary_offset_s'], 4, 2)} s "
              f"{_na(sc['imbalance_precision'], 6)} "
              f"{_na(sc['imbalance_recall'], 6)} {_na(sc['imbalance_precision_low_load'], 6)} "
              f"{_na(sc['imbalance_recall_low_load'], 6)} {_na(sc['hot_set_accuracy'], 7)}"
              + ("  (chosen)" if m == result["chosen"] else ""))
    print("chosen: the trained model with the best leave-one-family-out macro-F1 (LOFO); "
          "LOTO: leave-one-trace-out")
    fams = result["family"]["per_family"] if "family" in result else {}
    ch = result["chosen"]
    for fam, sc in fams.items():
        print(f"  family {fam:24s} macro-F1 {_na(sc[ch]['macro_f1'], 5)}  time acc. "
              f"{_na(sc[ch]['time_accuracy'], 5)}  ({sc[ch]['labelled_windows']} windows)")
    print(f"leave-one-family-out over {len(result['families'])} families, "
          f"{len(corpus)} traces" + (f"; tables written to {args.out}" if args.out else ""))
    return 0


def _write_validation(result: dict, corpus: list, cmd: str) -> Path:
    """Keep the chosen model's held-out scores next to the shipped model
    (``phase_model.validation.json``), for reports to cite."""
    from datetime import UTC, datetime

    from ..classifier.model import MODEL_DIR, MODEL_STEM

    chosen = result["chosen"]
    out = {"command": cmd, "written_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
           "scheme": f"leave-one-family-out over {len(result['families'])} families "
                     f"({len(corpus)} labelled traces), held-out windows pooled",
           "chosen": chosen, "held_out": result["pooled"][chosen]}
    path = MODEL_DIR / f"{MODEL_STEM}.validation.json"
    path.write_text(json_dumps(out, indent=1) + "\n")
    return path


def cmd_train(args: argparse.Namespace) -> int:
    from ..classifier.evaluate import KIND_OF, load_corpus, torch_available, train
    from ..classifier.model import MODEL_DIR, MODEL_STEM
    from ..data.traces import TraceError

    if args.out is not None and args.out.exists() and not args.out.is_dir():
        return _fail(f"{args.out}: exists and is not a folder (--out takes a folder)")
    pick, smooth = args.kind, None
    if pick is None:  # the model validation chose (evaluate --corpus), else the one shipped
        chosen = MODEL_DIR / f"{MODEL_STEM}.validation.json"
        shipped = MODEL_DIR / f"{MODEL_STEM}.json"
        pick = json.loads(chosen.read_text()).get("chosen") if chosen.exists() else None
        if pick not in KIND_OF:
            pick = (json.loads(shipped.read_text()).get("kind", "hgb") if shipped.exists()
                    else "hgb")
            smooth = None if pick == "tcn" else True  # what the shipped kind always did
    kind = KIND_OF[pick]
    if smooth is None and kind == "hgb":
        smooth = pick != "hgb"
    if kind == "tcn" and not torch_available():
        return _fail("the tcn model trains with torch: pip install -e '.[bench]' "
                     "(or --kind hgb)")
    try:
        corpus = load_corpus(args.corpus, progress=_progress("features"), hop=False)
    except TraceError as exc:
        return _fail(str(exc))
    meta = {"corpus": [c.name for c in corpus],
            "windows": int(sum(c.truth["phase"].notna().sum() for c in corpus))}
    print(f"fitting the {kind} model on {len(corpus)} traces...", file=sys.stderr, flush=True)
    model = train(corpus, seed=args.seed, meta=meta, kind=kind)
    if smooth is not None and kind == "hgb":
        model.smooth = smooth  # "hgb" alone or with the Viterbi pass ("hgb_viterbi")
    out = args.out or MODEL_DIR
    try:
        path = model.save(out)
    except OSError as exc:
        return _fail(f"{out}: cannot write the model ({exc.strerror or exc})")
    how = "" if kind != "hgb" else " with Viterbi smoothing" if model.smooth else " (no smoothing)"
    print(f"trained the {kind} model{how} on {len(corpus)} traces, {meta['windows']} labelled "
          f"windows; imbalance "
          f"threshold {model.imbalance.threshold:.2f} x and {model.imbalance.floor:.2f} points "
          f"over the fair share, min {model.imbalance.min_windows} "
          f"window(s); wrote {path} and "
          f"{path.with_suffix('.npz' if kind == 'tcn' else '.skops')}")
    return 0


# -- report --------------------------------------------------------------------------------
def cmd_report(args: argparse.Namespace) -> int:
    from ..classifier.align import align_events
    from ..collectors.server_log import ServerLogError, events_frame, read_log
    from .dashboard.factory import parse_time
    from .report.model import (
        FORMATS,
        ReportError,
        Source,
        build_report,
        from_store,
        from_trace,
    )
    from .report.out import write_report

    if args.out.is_dir():
        return _fail(f"--out {args.out}: is a folder; give a file name")
    fmt = args.format or args.out.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        return _fail(f"--format: give one of {', '.join(FORMATS)} (or an --out ending in one)")
    if args.trace is not None and (args.store is not None or args.t_from or args.t_to):
        return _fail("report takes --trace FILE, or --store DB with --from/--to, not both")
    inputs = [p for p in (args.trace, args.store, args.labels, args.experts, args.server_log)
              if p is not None]
    if any(p.exists() and p.resolve() == args.out.resolve() for p in inputs):
        return _fail(f"--out {args.out}: is one of the inputs; give another file name")
    try:
        if args.trace is not None:
            inp = from_trace(args.trace, format=args.trace_format)
        else:
            store = args.store or Path("tealeaves.db")
            t0 = parse_time(args.t_from) if args.t_from else None
            t1 = parse_time(args.t_to) if args.t_to else None
            inp = from_store(store, t0, t1)
        if args.server_log is not None:
            log = read_log(args.server_log, tz=args.tz)
            events, a = align_events(log.events, inp.samples)
            sfmt = log.format
            print(f"server log {args.server_log}: {len(events)} events ({sfmt}), "
                  + (f"clock offset {a.offset_s:+.1f} s applied" if a.confident
                     else "no confident clock offset: taken as written"), file=sys.stderr)
            inp.server_events = events_frame(events)
            inp.sources.append(Source("server_log", args.server_log))
        report = build_report(inp, window_s=args.window, labels=args.labels,
                              experts=args.experts, n_gpus=args.tp, ep_size=args.ep,
                              top_n=args.top)
        if args.server_log is not None and report.data["server"] is None:
            r = report.data["range"]
            print(f"server log {args.server_log}: none of its events falls in "
                  f"{r['start_utc']}-{r['end_utc']} UTC: the report has no server section "
                  f"(a log of another run?)", file=sys.stderr)
        write_report(report, fmt, args.out)
    except (ReportError, ServerLogError, ValueError) as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"--out {args.out}: {exc.strerror or exc}")
    from ..classifier.imbalance import format_hot_set

    s = report.data["summary"]
    tax = s["straggler_tax"]
    hot = (format_hot_set(s["hot_set"], _nan(s["hot_share"]) * 100,  # the report's shares: 0-1
                          _nan(s["cold_share"]) * 100) if s["hot_set"] else "none")
    print(f"wrote {args.out} ({fmt}, {args.out.stat().st_size:,} bytes): "
          f"{report.data['range']['span_s']:.1f} s, {s['windows']} windows, hot "
          f"{'GPU' if len(s['hot_set']) <= 1 else 'set'} {hot} ({s['hot_pattern']}), "
          f"straggler tax {'n/a' if tax is None else f'{tax:.1%}'}")
    return 0


# -- dashboard -----------------------------------------------------------------------------
def cmd_dashboard(args: argparse.Namespace) -> int:
    from .dashboard.server import serve

    try:
        return serve(trace=args.trace, host=args.host, port=args.port, speed=args.speed,
                     store_path=args.store, hz=args.hz, force_replay=args.replay,
                     server_log=args.server_log, tz=args.tz, server_metrics=args.server_metrics,
                     collect=not args.no_collect, prometheus=args.prometheus,
                     prometheus_step=args.prometheus_step,
                     prometheus_lookback=args.prometheus_lookback)
    except (ValueError, RuntimeError) as exc:
        return _fail(str(exc))


# -- parser --------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    from ..kernels_bench.verify_args import add_arguments as add_verify_arguments
    from ..kernels_bench.workload import SCENARIOS

    p = argparse.ArgumentParser(
        prog="tealeaves",
        description="Read the vital signs of a multi-GPU LLM inference server: per-GPU "
                    "counters, prefill/decode phases and MoE imbalance.")
    p.add_argument("--version", action="version", version=f"tealeaves {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = sub.add_parser("dashboard", help="serve the live dashboard",
                       description="Serve the dashboard: live from NVML when GPUs are found, "
                                   "else a replay of the bundled real H200 trace.")
    d.add_argument("--trace", type=Path, help="replay this file instead: a tealeaves trace or "
                                              "any file `tealeaves import` reads")
    d.add_argument("--replay", action="store_true",
                   help="replay (the bundled trace unless --trace) even when GPUs are found")
    d.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    d.add_argument("--port", type=_port, default=8050, help="port (default 8050; 0 picks one)")
    d.add_argument("--speed", type=_upto(1000, "the replay speed"), default=1.0, help="replay speed (default 1.0)")
    d.add_argument("--hz", type=_upto(1000, "the sweep rate (Hz)"), default=10.0, help="live sweep rate (default 10)")
    d.add_argument("--store", type=Path, help="SQLite store to write/read (default: temporary)")
    d.add_argument("--no-collect", action="store_true",
                   help="collect nothing: browse what --store holds (while `tealeaves collect "
                        "--store` may keep writing to it)")
    d.add_argument("--server-log", type=Path,
                   help="SGLang/vLLM log: followed live; with a replay, aligned to the trace "
                        "(offset estimated from the data) and replayed with it")
    d.add_argument("--tz", default="UTC",
                   help="time zone of the server log's timestamps (default UTC)")
    d.add_argument("--prometheus", metavar="URL",
                   help="read a cluster from this Prometheus server: tealeaves' exporters' and "
                        "dcgm-exporter's series, every host, with a cluster overview")
    d.add_argument("--prometheus-step", type=_upto(3600, "the step (s)"), default=0.5,
                   help="resolution asked of Prometheus, s (default 0.5, the classifier's "
                        "window; each point is the newest scrape at that time)")
    d.add_argument("--prometheus-lookback", type=_upto(DAY, "the lookback (s)"), default=5.0,
                   help="a reading older than this (s) counts as missing, not repeated "
                        "(default 5; set above the scrape interval)")
    d.add_argument("--server-metrics", metavar="URL",
                   help="scrape this SGLang/vLLM /metrics endpoint")
    d.set_defaults(func=cmd_dashboard)

    c = sub.add_parser("collect", help="collect NVML samples into the store",
                       description="Sweep every GPU through NVML and store the samples.")
    c.add_argument("--store", type=Path, default=Path("tealeaves.db"),
                   help="SQLite store (default tealeaves.db)")
    c.add_argument("--hz", type=_upto(1000, "the sweep rate (Hz)"), default=10.0, help="sweeps per second (default 10)")
    c.add_argument("--duration", type=_upto(366 * DAY, "the duration (s)"), help="seconds to collect (default: until Ctrl-C)")
    c.add_argument("--gpus", type=_indices, help="comma-separated GPU indices (default: all)")
    c.add_argument("--parquet", type=Path, help="also write the collected samples as a trace")
    c.add_argument("--pcie-hz", type=_upto(1000, "the PCIe rate (Hz)"), default=10.0,
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
    c.add_argument("--server-metrics-interval", type=_upto(3600, "the interval (s)"), default=1.0,
                   help="seconds between scrapes (default 1)")
    c.add_argument("--threads", action="store_true",
                   help="read the GPUs of each sweep in parallel threads")
    c.add_argument("--stats-json", type=Path,
                   help="write CPU time, RSS and collector health to this JSON file")
    c.add_argument("--prometheus-port", type=_port,
                   help="also serve /metrics on this port: per-GPU window aggregates, the "
                        "node's phase and imbalance, collector health (labels as "
                        "dcgm-exporter's)")
    c.add_argument("--prometheus-host", default="127.0.0.1",
                   help="address /metrics binds (default 127.0.0.1; 0.0.0.0 for a remote "
                        "Prometheus)")
    c.add_argument("--replay", type=Path, metavar="TRACE",
                   help="collect from this trace played back in real time instead of NVML "
                        "(demos, tests; any importable file)")
    c.add_argument("--speed", type=_upto(1000, "the replay speed"), default=1.0, help="replay speed (default 1)")
    c.add_argument("--loop", action="store_true", help="replay: start over at the end")
    c.add_argument("--host", help="replay: the host name to give the samples (default: the "
                                  "trace's)")
    c.set_defaults(func=cmd_collect)

    im = sub.add_parser("import", help="import nvidia-smi / DCGM / tealeaves files into the store",
                        description="Import telemetry files into the store: nvidia-smi dmon, "
                                    "nvidia-smi --query-gpu CSV, dcgm-exporter text, dcgmi "
                                    "dmon, tealeaves CSV/Parquet (detected from content). "
                                    "Every file is read before anything is stored: one "
                                    "refused file stores nothing.")
    im.add_argument("files", type=Path, nargs="+", help="files to import")
    im.add_argument("--store", type=Path, default=Path("tealeaves.db"),
                    help="SQLite store (default tealeaves.db)")
    im.add_argument("--format", help="force a format (dmon, query, prometheus, dcgmi, csv, "
                                     "parquet or a full name)")
    im.add_argument("--start-time", type=_epoch_arg,
                    help="UTC epoch s of the first instant for files without timestamps "
                         "(default: the file's mtime is the last instant)")
    im.add_argument("--tz", help="time zone of the files' wall-clock times (default UTC)")
    im.add_argument("--host", help="host name where the file names none")
    im.add_argument("--columns", help="query names of a header-less --query-gpu CSV, "
                                      "comma-separated")
    im.add_argument("--json", action="store_true", help="print one JSON object")
    im.set_defaults(func=cmd_import)

    dr = sub.add_parser("doctor", help="probe the GPUs: capabilities and reachable rates",
                        description="List every GPU's capabilities (GPM, PCIe counters, MIG, "
                                    "NVLink, processes) and the rate each metric group can "
                                    "reach on this machine.")
    dr.add_argument("--json", action="store_true", help="print one JSON object")
    dr.add_argument("--poll", type=_upto(60, "the poll (s)"), default=0.5,
                    help="seconds of tight polling to measure refresh rates (default 0.5)")
    dr.set_defaults(func=cmd_doctor)

    k = sub.add_parser("classify", help="label a trace's windows idle/prefill/decode",
                       description="Cut a trace into windows, label each idle/prefill/decode "
                                   "and flag imbalance; with --labels print the accuracy.")
    k.add_argument("trace", type=Path,
                   help="a trace: tealeaves Parquet/CSV, nvidia-smi dmon or --query-gpu CSV, "
                        "dcgm-exporter text or dcgmi dmon output")
    k.add_argument("--format", help="force the trace's format (default: detected)")
    k.add_argument("--labels", type=Path, help="ground-truth CSV: start,end,phase[,hot_gpu]")
    k.add_argument("--window", type=_window, default=0.5, help="window seconds (default 0.5)")
    k.add_argument("--server-log", type=Path,
                   help="SGLang/vLLM log of the same run: its clock offset is estimated from "
                        "the data and it becomes the ground truth when --labels is absent")
    k.add_argument("--tz", default="UTC",
                   help="time zone of the server log's timestamps (IANA name or +HH:MM; "
                        "default UTC)")
    k.add_argument("--max-offset", type=_upto(3600, "the largest clock offset (s)"), default=60.0,
                   help="largest clock offset searched, seconds (default 60)")
    fmt = k.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print one JSON object")
    fmt.add_argument("--csv", action="store_true", help="print the windows as CSV")
    k.set_defaults(func=cmd_classify)

    e = sub.add_parser("evaluate", help="score the phase model against labels",
                       description="Score the trained phase model (or --rules) on a trace "
                                   "against a label CSV (start,end,phase[,hot_gpu]); or, with "
                                   "--corpus, validate on the labelled corpus with each family "
                                   "(generator x architecture) held out, then each trace, and "
                                   "write docs/classifier.md.")
    e.add_argument("--trace", type=Path, help="a trace (any format `tealeaves import` reads)")
    e.add_argument("--labels", type=Path, help="ground-truth CSV: start,end,phase[,hot_gpu]")
    e.add_argument("--format", help="force the trace's format (default: detected)")
    e.add_argument("--rules", action="store_true", help="score the v0 rules instead")
    e.add_argument("--corpus", nargs="?", const="",
                   help="leave-one-family-out (then leave-one-trace-out) validation on a "
                        "corpus folder with MANIFEST.csv (default: the bundled data/traces); "
                        "--out writes the tables")
    e.add_argument("--out", type=Path, default=None,
                   help="with --corpus: write the markdown tables here "
                        "(e.g. docs/classifier.md)")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.set_defaults(func=cmd_evaluate)
    t = sub.add_parser("train", help="rebuild the phase model from the labelled corpus",
                       description="Fit the phase classifier, its Viterbi transitions and the "
                                   "imbalance threshold on every trace of the corpus "
                                   "(deterministic) and save them (skops + JSON).")
    t.add_argument("--corpus", type=Path, default=None,
                   help="corpus folder with MANIFEST.csv (default: the bundled data/traces)")
    t.add_argument("--out", type=Path, default=None,
                   help="folder to write phase_model.skops/.json (default: the package's "
                        "classifier/model, which the dashboard and classify load: this "
                        "replaces the shipped model)")
    t.add_argument("--kind", choices=["hgb_viterbi", "hgb", "tcn"],
                   help="model, as `evaluate --corpus` names them (default: the one it chose; "
                        "hgb is gradient boosting without the Viterbi pass; tcn trains with "
                        "torch)")
    t.add_argument("--seed", type=int, default=0, help="random seed of the fit (default 0)")
    t.set_defaults(func=cmd_train)

    r = sub.add_parser("report", help="an imbalance report of a time range (html, pdf, png, "
                       "csv, json)",
                       description="Label a range's windows and write a report a colleague can "
                                   "read on its own: summary, per-GPU table, timeline, the most "
                                   "imbalanced windows, experts (with --experts) and "
                                   "provenance. JSON/CSV layout: docs/report-schema.md.")
    r.add_argument("--trace", type=Path, help="a trace (any format `tealeaves import` reads)")
    r.add_argument("--trace-format", help="force the trace's format (default: detected)")
    r.add_argument("--store", type=Path,
                   help="a tealeaves store to read instead (default tealeaves.db)")
    r.add_argument("--from", dest="t_from", metavar="T",
                   help="range start in the store: YYYY-MM-DD HH:MM[:SS] UTC, ISO 8601 with an "
                        "offset, or epoch s (default: the store's first sample)")
    r.add_argument("--to", dest="t_to", metavar="T", help="range end (default: the newest)")
    r.add_argument("--labels", type=Path, help="ground-truth CSV: start,end,phase[,hot_gpu]")
    r.add_argument("--experts", type=Path,
                   help="SGLang expert-distribution dump (torch.save file with logical_count "
                        "[passes, layers, experts]; needs torch)")
    r.add_argument("--tp", type=_count(4096, "the TP size"),
                   help="GPUs of the TP group for the expert section (default: the trace's)")
    r.add_argument("--ep", type=_count(4096, "the EP size"), default=1,
                   help="expert-parallel size (default 1: pure TP)")
    r.add_argument("--server-log", type=Path,
                   help="the server's log (SGLang/vLLM), aligned to the trace's clock")
    r.add_argument("--tz", default="UTC", help="time zone of the log's stamps (default UTC)")
    r.add_argument("--window", type=_window, default=0.5, help="window seconds (default 0.5)")
    r.add_argument("--top", type=_count(10_000, "--top"), default=10,
                   help="most imbalanced windows to list (default 10)")
    r.add_argument("--format", choices=["html", "pdf", "png", "csv", "json"],
                   help="output format (default: from --out's suffix)")
    r.add_argument("--out", type=Path, required=True, help="file to write")
    r.set_defaults(func=cmd_report)

    b = sub.add_parser("bench", help="benchmarks and labelled workloads")
    bsub = b.add_subparsers(dest="bench_command", required=True, metavar="BENCH")
    w = bsub.add_parser("workload", help="run the labelled GPU workload (needs torch+CUDA)",
                        description="Run idle/prefill/decode/skewed-decode phases on every "
                                    "visible GPU and write ground-truth intervals.")
    w.add_argument("--labels", type=Path, default=Path("labels.csv"),
                   help="ground-truth CSV to write (default labels.csv)")
    w.add_argument("--gpus", type=_indices,
                   help="comma-separated CUDA device indices (default: all)")
    w.add_argument("--scale", type=_upto(100, "the scale"), default=1.0,
                   help="multiply every phase duration (default 1.0, ~95 s on two GPUs)")
    w.add_argument("--hot-experts", type=_count(1_000_000, "--hot-experts", lo=0), default=48,
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
    bk = bsub.add_parser("classifier", help="classify one hour of 8-GPU telemetry on one core",
                         description="Time the trained phase model and the v0 rules on one "
                                     "hour of eight-GPU telemetry at 20 Hz (tiled from the "
                                     "bundled real trace), pinned to one CPU core.")
    bk.add_argument("--seconds", type=_upto(7 * DAY, "the length (s)"), default=3600.0,
                    help="telemetry length (default 3600)")
    bk.add_argument("--gpus", type=_count(1024, "the GPU count"), default=8, help="GPUs (default 8)")
    bk.add_argument("--repeat", type=_count(1000, "--repeat"), default=3,
                    help="runs, best kept (default 3)")
    bk.add_argument("--json", action="store_true", help="also print the figures as JSON")
    bk.set_defaults(func=cmd_bench_classifier)
    bg = bsub.add_parser("gaps", help="does a pause between sessions cost anything?",
                         description="Two stores with the same samples (copies of the bundled "
                                     "trace), end to end or with a gap of days: dashboard "
                                     "start, the \"all\" view and a report of each, side by "
                                     "side, each in a fresh process (seconds, peak RSS).")
    bg.add_argument("--gap-days", type=_upto(3650, "the gap (days)"), default=30.0,
                    help="days between the first session and the rest (default 30)")
    bg.add_argument("--copies", type=_count(100, "--copies"), default=2,
                    help="sessions, each one copy of the bundled trace (default 2)")
    bg.add_argument("--json", action="store_true", help="also print the figures as JSON")
    bg.set_defaults(func=cmd_bench_gaps)
    bd = bsub.add_parser("dashboard", help="dashboard server time, payload, latency and memory",
                         description="Fill a store with one hour of eight-GPU telemetry at "
                                     "20 Hz, then measure the dashboard: server time and "
                                     "payload of the full-range view, a 1-minute zoom and a "
                                     "live tick; sample-to-screen latency in headless Chromium; "
                                     "server memory with 1 and 5 pages; and the same with "
                                     "plotly-resampler.")
    bd.add_argument("--seconds", type=_upto(7 * DAY, "the length (s)"), default=3600.0,
                    help="telemetry in the store (default 3600)")
    bd.add_argument("--gpus", type=_count(1024, "the GPU count"), default=8, help="GPUs (default 8)")
    bd.add_argument("--store", type=Path,
                    help="where to write the store (default: a temporary file); an existing "
                         "file is only overwritten if this benchmark made it")
    bd.add_argument("--live-seconds", type=_upto(3600, "the live run (s)"), default=30.0,
                    help="seconds of live latency measurement (default 30)")
    bd.add_argument("--pages", type=_count(100, "--pages"), default=5,
                    help="pages open for the memory figure (default 5)")
    bd.add_argument("--no-browser", action="store_true", help="skip the Chromium part")
    bd.add_argument("--no-resampler", action="store_true", help="skip plotly-resampler")
    bd.add_argument("--json", action="store_true", help="also print the figures as JSON")
    bd.set_defaults(func=cmd_bench_dashboard)
    bc = bsub.add_parser("collector", help="collector rate, CPU and memory vs nvitop/nvidia-smi",
                         description="Run tealeaves' collector (one loop and threaded), "
                                     "nvitop's ResourceMetricCollector and nvidia-smi at their "
                                     "fastest on the same GPUs; print rates, CPU % of one core, "
                                     "NVML time per sweep and RSS, and an 8-GPU cost model.")
    bc.add_argument("--gpus", type=_count(1024, "the GPU count"), help="number of GPUs (default: all)")
    bc.add_argument("--seconds", type=_upto(7 * DAY, "the length (s)"), default=30.0, help="seconds per tool (default 30)")
    bc.add_argument("--hz", type=_upto(1000, "the sweep rate (Hz)"), default=50.0, help="tealeaves sweep rate (default 50)")
    bc.add_argument("--pcie-hz", type=_upto(1000, "the PCIe rate (Hz)"), default=10.0,
                    help="tealeaves PCIe counter reads per second (default 10)")
    bc.add_argument("--soak", type=_upto(7 * DAY, "the soak (s)"), help="also run the collector this many seconds, "
                                               "recording RSS (e.g. 600)")
    bc.add_argument("--no-compare", action="store_true", help="skip nvitop and nvidia-smi")
    bc.add_argument("--out", type=Path, default=Path("bench-out"),
                    help="folder for collector_bench.csv/json (default bench-out)")
    bc.set_defaults(func=cmd_bench_collector)

    bp = bsub.add_parser("prometheus",
                         help="what the exporter costs a real Prometheus; a fleet's load",
                         description="Measure an 8-GPU node's /metrics (series, bytes, scrape "
                                     "time), run Debian's prometheus scraping --targets such "
                                     "nodes, and work out 1000 nodes x 8 GPUs at 1 s and 10 s "
                                     "(docs/scale.md).")
    bp.add_argument("--targets", type=_count(100_000, "--targets"), default=50,
                    help="simulated nodes scraped (default 50)")
    bp.add_argument("--interval", type=_upto(3600, "the interval (s)"), default=1.0,
                    help="scrape interval, s (default 1)")
    bp.add_argument("--seconds", type=_upto(7 * DAY, "the length (s)"), default=60.0,
                    help="seconds measured (default 60)")
    bp.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    bp.set_defaults(func=cmd_bench_prometheus)

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
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tealeaves`` console script.

    Returns the exit status: 0 success, 2 bad input (one line on stderr), 3 no GPU, 130
    interrupted.  Output piped into a program that stops reading (``| head``) ends quietly.
    """
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Python would complain again when flushing stdout at exit: point it at /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except RuntimeError as exc:
        from ..data.store import StoreError

        if isinstance(exc, StoreError):  # a damaged or foreign store met mid-command
            return _fail(str(exc))
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
