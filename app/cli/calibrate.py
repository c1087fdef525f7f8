"""``tealeaves calibrate``: teach the counter model one deployment from what its engine says
(``classifier/calibrate.py``), state how well counters and engine agree, write a model folder
that ``classify``, ``report``, ``dashboard`` and ``collect`` take with ``--model``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tealeaves.app.cli.args import add_file_reading, file_reading, upto
from tealeaves.app.cli.common import fail, na

#: Fewer taught windows than this and the before/after agreement says little.
MIN_TAUGHT = 30


def _engine_targets(args: argparse.Namespace, trace, feats) -> tuple:
    """(targets (n, 3), a sentence naming the source) from --server-metrics or --server-log."""
    import numpy as np

    from tealeaves.classifier.calibrate import (
        FORWARD_SECONDS,
        MAX_INTERVAL_S,
        engine_shares,
        shares_from_engine,
    )
    from tealeaves.classifier.shares import window_shares

    if args.server_metrics is not None:
        from tealeaves.data.server_metrics import read_page

        page = read_page(args.server_metrics.read_text(errors="replace"),
                         name=str(args.server_metrics))
        if page.stamped != "file":  # scrapes placed by a guess are not on the trace's clock
            raise ValueError(f"{args.server_metrics}: its samples carry no timestamps, so its "
                             "scrapes cannot be placed against the trace; save the page with "
                             "them (the exposition's milliseconds) or give --server-log")
        eng = engine_shares(page.frame)
        if eng.empty:
            has = page.frame["name"].isin(FORWARD_SECONDS).any()
            raise ValueError(f"{args.server_metrics}: " + (
                "no two consecutive scrapes of the forward-time counters read (one scrape, "
                "resets, values that are no count of seconds, or gaps over "
                f"{MAX_INTERVAL_S:g} s)" if has else
                "no forward-time counter (sglang:forward_execution_seconds_total{category}) "
                "to read the engine's phase shares from; give --server-log instead"))
        return (shares_from_engine(feats.index.to_numpy(float), eng, args.window),
                f"{args.server_metrics}: {len(eng)} scrape intervals of forward time")
    from tealeaves.classifier.align import align_events
    from tealeaves.classifier.server_phases import phase_intervals
    from tealeaves.data.server_log import read_log

    log = read_log(args.server_log, tz=args.tz)
    shifted, a = align_events(log.events, trace.samples)
    if not a.confident:
        raise ValueError(f"{args.server_log}: no confident clock offset against the trace "
                         f"({a.reason or f'correlation {a.correlation:.2f}'})")
    labels = phase_intervals(shifted, prefill_s=0.1 if log.format else 1.0)
    t = window_shares(feats.index.to_numpy(float), labels, args.window)
    return t, (f"{args.server_log}: {len(log.events)} events, clock offset "
               f"{a.offset_s:+.1f} s (r = {a.correlation:.2f}), "
               f"{int(np.isfinite(t).all(axis=1).sum())} windows covered"
               + (f"; {log.notes()}" if log.notes() else ""))


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``tealeaves calibrate``.  Returns the exit status (0; 2 bad input)."""
    import numpy as np

    from tealeaves.classifier.calibrate import agreement, split_time, teach
    from tealeaves.classifier.features import WindowFeatures
    from tealeaves.classifier.model import MODEL_DIR, ModelError, PhaseModel
    from tealeaves.classifier.share_corpus import load_kinds
    from tealeaves.data.importers import ImportFormatError, load_trace
    from tealeaves.data.server_log import ServerLogError
    from tealeaves.data.traces import TraceError

    if (args.server_metrics is None) == (args.server_log is None):
        return fail("calibrate needs one of --server-metrics FILE or --server-log LOG")
    if args.out.exists() and not args.out.is_dir():
        return fail(f"{args.out}: exists and is not a folder (--out takes a folder)")
    if args.out.resolve() == MODEL_DIR.resolve():
        return fail(f"--out {args.out}: the shipped model's folder; write the taught model to "
                    "a folder of its own")
    near = next(q for q in (args.out, *args.out.absolute().parents) if q.exists())
    if not near.is_dir() or not os.access(near, os.W_OK | os.X_OK):  # said before the work
        return fail(f"--out {args.out}: {near} is not a folder this user can write in")
    if not 0.05 <= args.hold_out <= 0.95:
        return fail("--hold-out: give a share of the trace between 0.05 and 0.95")
    try:
        trace = load_trace(args.trace, **file_reading(args))
        base = PhaseModel.load(MODEL_DIR)
        feats = WindowFeatures(base.window_s, trace.devices).fit_transform(trace.samples)
        args.window = base.window_s
        targets, source = _engine_targets(args, trace, feats)
        if not np.isfinite(targets).all(axis=1).any():  # said before the corpus is read
            raise ValueError(f"{args.trace}: no window of the trace falls in an interval the "
                             "engine accounted for (do the trace and the server signals "
                             "cover the same time?)")
        print("reading the corpus in every input kind...", file=sys.stderr, flush=True)
        corpus = load_kinds(args.corpus)
    except (TraceError, ImportFormatError, ModelError, ServerLogError, ValueError,
            OSError) as exc:
        return fail(str(exc))
    teach_rows = split_time(feats, 1.0 - args.hold_out)
    rest = ~teach_rows
    try:
        trial = teach(base, corpus, feats[teach_rows], targets[teach_rows], args.weight)
    except ValueError as exc:
        return fail(f"{args.trace}: the first {1 - args.hold_out:.0%} of the trace (taught "
                    f"before the --hold-out part): {exc}")
    try:
        final = teach(base, corpus, feats, targets, args.weight)
    except ValueError as exc:
        return fail(f"{args.trace}: {exc}")
    before = agreement(base, feats[rest], targets[rest])
    after = agreement(trial, feats[rest], targets[rest])
    try:
        path = final.save(args.out)
    except OSError as exc:
        return fail(f"{args.out}: cannot write the model ({exc.strerror or exc})")
    print(f"engine: {source}")
    print(f"agreement with the engine on the last {args.hold_out:.0%} of the trace "
          f"({after['windows']} windows, not taught): shipped model share error "
          f"{na(before['share_error'])}, phase match {na(before['phase_match'])}, macro-F1 "
          f"{na(before['macro_f1'])}; taught on the first {1 - args.hold_out:.0%}: share "
          f"error {na(after['share_error'])}, phase match {na(after['phase_match'])}, "
          f"macro-F1 {na(after['macro_f1'])}")
    taught_n = int(np.isfinite(targets[teach_rows]).all(axis=1).sum())
    if taught_n < MIN_TAUGHT:
        print(f"NOTE: only {taught_n} windows of the first {1 - args.hold_out:.0%} have an "
              f"engine share: too few to judge the teaching by (give a longer trace or a "
              f"smaller --hold-out)")
    worse = after["share_error"] > before["share_error"] or \
        after["macro_f1"] < before["macro_f1"]
    if worse:
        print("NOTE: taught, the model agrees with the engine less than the shipped one on "
              "the held-out part (above): keep the shipped model unless you trust the "
              "engine's signal more than the corpus")
    print(f"wrote {path} (taught on all {int(final.meta['taught']['windows'])} windows with "
          f"an engine share); use it with --model {args.out}"
          + (" only after reading the NOTE above" if worse else ""))
    return 0


def add_parser(sub) -> None:
    """Add ``calibrate`` to the top-level subparsers ``sub``."""
    c = sub.add_parser(
        "calibrate", help="teach the phase model one deployment from its engine's signals",
        description="Refit the share model with a trace's windows, their targets read from the "
                    "same run's server: SGLang's /metrics forward-time counters "
                    "(--server-metrics, a saved page of appended scrapes) or its scheduler "
                    "log (--server-log, aligned to the trace by an offset estimated from the "
                    "data). Prints how well counters and engine agree on the part of the "
                    "trace held out, before and after, and writes a model folder for "
                    "--model.")
    c.add_argument("trace", type=Path, help="the deployment's trace (any importable file)")
    c.add_argument("--server-metrics", type=Path, metavar="FILE",
                   help="a saved /metrics page of the same run (scrapes appended)")
    c.add_argument("--server-log", type=Path, metavar="LOG",
                   help="the SGLang/vLLM scheduler log of the same run")
    c.add_argument("--out", type=Path, required=True, help="model folder to write")
    c.add_argument("--hold-out", type=float, default=0.7,
                   help="share of the trace's time (the end) kept out of teaching to state "
                        "the agreement (default 0.7)")
    c.add_argument("--weight", type=upto(100.0, "the weight"), default=0.5,
                   help="the deployment's windows weigh this share of the corpus's (0.5)")
    c.add_argument("--corpus", type=Path, metavar="DIR",
                   help="the labelled corpus taught beside the trace (a folder with "
                        "MANIFEST.csv; default: the bundled one)")
    c.add_argument("--tz", default="UTC",
                   help="zone of the log's and the trace's wall-clock times (default UTC)")
    add_file_reading(c)
    c.set_defaults(func=cmd_calibrate)
