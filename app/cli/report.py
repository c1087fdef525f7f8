"""``tealeaves report``: an imbalance report of a time range (html, pdf, png, csv, json)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tealeaves.app.cli.args import (
    add_file_reading,
    add_groups,
    add_model,
    classifier_window,
    count,
    file_reading,
)
from tealeaves.app.cli.common import Working, add_utc_flag, fail, out_path_problem, shown, time_text
from tealeaves.data.schema import DEFAULT_WINDOW_S


def cmd_report(args: argparse.Namespace) -> int:
    """``tealeaves report``: build the report of a trace or a store range and write it in the
    chosen format, then print one summary line.  Returns the exit status (0; 2 bad input or an
    unwritable ``--out``)."""
    from tealeaves.app.report.model import ReportError, build_report
    from tealeaves.app.report.out import write_report, write_report_stream
    from tealeaves.classifier.groups import GroupsError, parse_groups
    from tealeaves.data.server_log import ServerLogError

    to_stdout = str(args.out) == "-"
    fmt, problem = _out_format(args, to_stdout)
    if problem:  # before the report is built
        return fail(problem)
    if args.trace_file is not None:  # `tealeaves report TRACE`, as `classify TRACE`
        if args.trace is not None and args.trace != args.trace_file:
            return fail(f"report: give the trace once, as {args.trace_file} or as --trace "
                        f"{args.trace}, not both")
        args.trace = args.trace_file
    if args.trace is not None and (args.store is not None or args.t_from or args.t_to):
        return fail("report takes --trace FILE, or --store DB with --from/--to, not both")
    inputs = [p for p in (args.trace, args.store, args.labels, args.experts, args.server_log,
                          args.server_metrics, *(args.screenshot or ())) if p is not None]
    if not to_stdout and any(p.exists() and p.resolve() == args.out.resolve() for p in inputs):
        return fail(f"--out {args.out}: is one of the inputs; give another file name")
    try:  # before the data is read: a bad value costs nothing
        groups = parse_groups(args.groups) if args.groups is not None else None
    except GroupsError as exc:
        return fail(str(exc))
    try:
        inp = _report_input(args)
        # a long range says so on a terminal while it is labelled (an hour of eight GPUs at
        # 20 Hz: ~5 s of the 7 s a PDF takes on two cores, docs/benchmarks.md)
        wait = Working(len(inp.samples), f"labelling {len(inp.samples):,} samples for the "
                                         f"report")
        try:
            report = build_report(inp, window_s=args.window, labels=args.labels,
                                  experts=args.experts, n_gpus=args.tp, ep_size=args.ep,
                                  top_n=args.top, groups=groups)
        finally:
            wait.close()
        if args.server_log is not None and report.data["server"] is None:
            r = report.data["range"]
            print(f"server log {args.server_log}: none of its events falls in "
                  f"{time_text(r['start'], args.utc)} to {time_text(r['end'], args.utc)}: "
                  f"the report has no server section (a log of another run?)",
                  file=sys.stderr)
        if fmt in ("pdf", "png"):  # Chromium takes seconds: say what is going on
            print(f"rendering {shown(args.out)} with Chromium (a few seconds) ...",
                  file=sys.stderr, flush=True)
        if to_stdout:
            nbytes = write_report_stream(report, fmt, sys.stdout.buffer)
        else:
            write_report(report, fmt, args.out)
            nbytes = args.out.stat().st_size
    except (ReportError, ServerLogError, ValueError) as exc:
        return fail(str(exc))
    except BrokenPipeError:
        return _stdout_closed()
    except OSError as exc:
        return fail(f"--out {args.out}: {exc.strerror or exc}")
    print(f"wrote {'the report to stdout' if to_stdout else shown(args.out)} ({fmt}, "
          f"{nbytes:,} bytes): "
          + summary_line(report.data, args.utc), file=sys.stderr if to_stdout else sys.stdout)
    return 0


def _out_format(args: argparse.Namespace, to_stdout: bool) -> tuple[str, str | None]:
    """The report format ``--out``/``--format`` ask for, and why ``--out`` cannot be
    written (a device or pipe, a folder, an unwritable place, no format), or None; checked
    before any data is read."""
    from tealeaves.app.report.model import FORMATS
    from tealeaves.app.report.out import NOT_REGULAR

    if not to_stdout and args.out.exists() and not args.out.is_file() \
            and not args.out.is_dir():  # /dev/stdout, a pipe: before the work
        return "", f"--out {args.out}: {NOT_REGULAR}"
    problem = None if to_stdout else out_path_problem("--out", args.out, make_folder=False)
    if problem:
        return "", problem
    if to_stdout and not args.format:
        return "", (f"--out -: writes the report to stdout, which has no suffix; give "
                    f"--format ({', '.join(FORMATS)})")
    fmt = args.format or args.out.suffix.lstrip(".").lower()
    if fmt not in FORMATS:  # --format has argparse choices: only the suffix can be wrong here
        said = (f"its suffix {args.out.suffix!r} is not a report format" if args.out.suffix
                else "it has no suffix")
        return "", (f"--out {args.out}: {said}; end it in "
                    f"{', '.join('.' + f for f in FORMATS)} (or give --format)")
    return fmt, None


def _report_input(args: argparse.Namespace):
    """The report's input (``report.model.ReportInput``) from ``--trace`` or the store's
    range, with the server log, the server's /metrics page and the screenshots named; its
    notes on stderr.

    Raises:
        ReportError, ServerLogError, ValueError: an input cannot be read (named).
    """
    from tealeaves.app.dashboard.timefmt import parse_time
    from tealeaves.app.report.model import Source, from_store, from_trace
    from tealeaves.classifier.align import align_events
    from tealeaves.data.server_log import events_frame, read_log

    if args.trace is not None:
        inp = from_trace(args.trace, format=args.trace_format, **file_reading(args))
        from tealeaves.app.cli.imports import placement_note, refusal_note

        for note in (placement_note(inp.meta, args.utc), refusal_note(inp.meta)):
            if note:
                print(f"{shown(args.trace)}: {note}", file=sys.stderr)
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
                 else "no confident clock offset: taken as written")
              + (f"; {log.notes()}" if log.notes() else ""), file=sys.stderr)
        inp.server_events = events_frame(events)
        inp.sources.append(Source("server_log", args.server_log))
    if args.server_metrics is not None:
        from tealeaves.app.cli.imports import metrics_file

        page = metrics_file(args.server_metrics)
        if page.refused:  # blank codes and impossible values, read as NaN
            from tealeaves.data.server_log import refused_note

            print(f"{args.server_metrics}: {refused_note(page.refused)}", file=sys.stderr)
        inp.server_metrics = page.frame
        inp.sources.append(Source("server_metrics", args.server_metrics))
    for pic in args.screenshot or ():
        inp.screenshots.append(screenshot_input(pic, args.tz))
        inp.sources.append(Source("screenshot", pic))
    return inp


def _stdout_closed() -> int:
    """``--out -`` whose reader closed the pipe early (``| head``): say the report was cut,
    and point stdout at ``os.devnull`` so Python's exit flush raises nothing more.  Returns
    the exit status (2)."""
    import os

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return fail("--out -: stdout was closed before the whole report was written (the report "
                "is cut short)")


def screenshot_input(path: Path, tz: str) -> dict:
    """A screenshot read for the report: ``screenshot.read_one`` with ``capture_ts`` (epoch
    s, from its metadata or its name read in ``tz``; None when neither says).

    Raises:
        ValueError: not a picture, or no OCR engine (names the file).
    """
    from PIL import Image

    from tealeaves.app.cli.screenshot import read_one
    from tealeaves.data.screen.screenshots import ScreenshotError, capture_time, time_from_metadata

    shot = read_one(path)
    try:
        with Image.open(path) as img:
            when = capture_time(time_from_metadata(img), path.name, None)
        shot["capture_ts"] = when.resolve(tz)
    except (OSError, ScreenshotError):
        shot["capture_ts"] = None
    return shot


def summary_line(data: dict, utc: bool = False) -> str:
    """What ``report`` says of a report's JSON ``data`` after writing it: the range (ISO 8601
    times, local with the offset or UTC, and its length in readable units), the windows, the
    hot set and how it behaves, the mean imbalance ratio and the straggler tax, or why one is
    n/a, and the serving groups where a grouping was given or roles detected (``"; groups
    0-3, 4-7 (from --groups)"``): ``"2026-11-30 17:07:19.500+01:00 to 2026-11-30
    17:08:20.000+01:00 (1.0 min), 121 windows, hot set: rotates between GPU 0 (34 windows,
    2.3x the rest) and GPU 1 (34 windows, 2.3x the rest), imbalance ratio 1.22, straggler
    tax 15.7% over 106 of 121 windows (the decode windows with load)"``; the hot set in
    ``classifier.hot_set``'s words (the report's ``hot_text``)."""
    from tealeaves.app.figures import fmt_span, partial_text, pauses_text

    s, r = data["summary"], data["range"]
    tax, ratio = s["straggler_tax"], s["imbalance_ratio"]
    hot = s["hot_text"]
    n = s["windows"]
    grp = data.get("groups")  # only where a grouping was given or roles detected
    alone = grp is not None and all(len(g) < 2 for g in grp["groups"])
    if not s["decode_windows"]:
        imb = "imbalance ratio and straggler tax n/a (no decode window in the range)"
    elif alone:
        imb = ("imbalance ratio and straggler tax n/a (every serving group has one GPU"
               + (": roles, not imbalance)" if grp["source"] == "roles" else ")"))
    elif ratio is None and tax is None:  # idle, one GPU, or no per-GPU work counters
        imb = s.get("figures_text") or ("imbalance ratio and straggler tax n/a (no decode "
                                        "window holds the work of two or more GPUs)")
    else:
        imb = (f"imbalance ratio {'n/a' if ratio is None else f'{ratio:.2f}'}, straggler tax "
               f"{'n/a' if tax is None else f'{tax:.1%}'}"
               + (f" {s['figures_text']}" if s.get("figures_text") else ""))
    return (f"{time_text(r['start'], utc)} to {time_text(r['end'], utc)} "
            f"({fmt_span(r['span_s'])}), {n} window{'' if n == 1 else 's'}, hot set: {hot}, "
            f"{imb}" + (f"; {grp['text']}" if grp is not None else "")
            + pauses_text([tuple(g) for g in r.get("gaps") or []], lambda t: time_text(t, utc),
                          r.get("gap_count"), r.get("gap_s"))
            + partial_text(r.get("partial_gpus") or [], lambda t: time_text(t, utc)))


def add_parser(sub) -> None:
    """Add ``report`` to the top-level subparsers ``sub``."""
    r = sub.add_parser("report", help="an imbalance report of a time range (html, pdf, png, "
                       "csv, json)",
                       description="Label a range's windows and write a report a colleague can "
                                   "read on its own: summary, per-GPU table, timeline, the most "
                                   "imbalanced windows, experts (with --experts) and "
                                   "provenance. JSON/CSV layout: docs/report-schema.md.")
    r.add_argument("trace_file", type=Path, nargs="?", metavar="TRACE",
                   help="a trace file, the same as --trace TRACE")
    r.add_argument("--trace", type=Path, help="a trace (any format `tealeaves import` reads)")
    r.add_argument("--trace-format", help="force the trace's format (default: detected)")
    add_file_reading(r, "the --trace file")
    r.add_argument("--store", type=Path,
                   help="a tealeaves store to read instead (default tealeaves.db)")
    r.add_argument("--from", dest="t_from", metavar="T",
                   help="range start in the store: YYYY-MM-DD HH:MM[:SS] UTC, ISO 8601 with an "
                        "offset, or epoch s (default: the store's first sample)")
    r.add_argument("--to", dest="t_to", metavar="T",
                   help="range end, not included (default: the newest sample, included)")
    r.add_argument("--labels", type=Path, help="ground-truth CSV: start,end,phase[,hot_gpu]")
    r.add_argument("--experts", type=Path,
                   help="SGLang expert-distribution dump (torch.save file with logical_count "
                        "[passes, layers, experts]; needs torch)")
    r.add_argument("--tp", type=count(4096, "the TP size"),
                   help="GPUs of the TP group for the expert section (default: the trace's)")
    r.add_argument("--ep", type=count(4096, "the EP size"), default=1,
                   help="expert-parallel size (default 1: pure TP)")
    r.add_argument("--server-log", type=Path,
                   help="the server's log (SGLang/vLLM), aligned to the trace's clock")
    r.add_argument("--server-metrics", type=Path, metavar="FILE",
                   help="a saved SGLang/vLLM /metrics page (one scrape or many): the DP "
                        "ranks' spread and SGLang's expert balance (the store's own scrapes "
                        "are read without it)")
    r.add_argument("--screenshot", type=Path, action="append", metavar="FILE",
                   help="a screenshot of nvidia-smi, dmon, nvitop or gpustat to read and "
                        "include (its numbers, its verdict, and the telemetry's of its "
                        "moment when that falls in the range); repeatable")
    r.add_argument("--tz", default="UTC", help="time zone of the log's stamps and of the "
                                               "--trace file's wall-clock times (default UTC)")
    r.add_argument("--window", type=classifier_window, default=DEFAULT_WINDOW_S,
                   help=f"window seconds (default {DEFAULT_WINDOW_S:g})")
    add_groups(r, "the report")
    r.add_argument("--top", type=count(10_000, "--top"), default=10,
                   help="most imbalanced windows to list (default 10)")
    r.add_argument("--format", choices=["html", "pdf", "png", "csv", "json"],
                   help="output format (default: from --out's suffix)")
    r.add_argument("--out", type=Path, required=True,
                   help="file to write; - writes the report to stdout (give --format; the "
                        "summary line then goes to stderr). A device, pipe or folder is "
                        "refused")
    add_utc_flag(r)
    add_model(r)
    r.set_defaults(func=cmd_report)
