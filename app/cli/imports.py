"""``tealeaves import``: read nvidia-smi / DCGM / tealeaves files into the store, all or
nothing."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ...data.jsontext import dumps as json_dumps
from .args import epoch_time
from .common import add_utc_flag, fail, plural, time_text


def cmd_import(args: argparse.Namespace) -> int:
    """``tealeaves import``: read every file, then store them all in one transaction.  Returns
    the exit status (0; 2 when a file is refused or the store cannot be written: nothing stored)."""
    import sqlite3

    from ...data.importers import import_file
    from ...data.store import SampleStore, StoreError

    results = []
    for path in args.files:
        try:
            results.append(import_file(path, format=args.format, start_time=args.start_time,
                                       host=args.host, tz=args.tz,
                                       columns=args.columns.split(",") if args.columns
                                       else None))
        except ValueError as exc:  # ImportFormatError, unknown --format or --tz
            return fail(f"{exc} (nothing was imported)")
    try:
        store = SampleStore(args.store)
    except StoreError as exc:
        return fail(str(exc))
    with store:
        try:  # every file in one transaction: all of them, or (disk full, Ctrl-C) none
            stored, repeats = store.append_all(r.samples for r in results)
        except sqlite3.Error as exc:
            return fail(f"{args.store}: could not store the samples ({exc}); nothing was "
                         f"imported, the store is as it was")
    report = [{"file": str(path), "format": r.format, "rows_read": r.rows_read,
               "samples": len(r.samples), "gpus": r.gpus,
               "time_span": list(r.time_span), "blanks": r.blanks,
               "out_of_range": r.out_of_range,
               "skipped": [{"line": n, "reason": why} for n, why in r.skipped],
               "placed": r.placed, "dated": r.dated,
               "placed_at": r.placed_at if r.placed or r.dated else None,
               "normalised": r.normalised}
              for path, r in zip(args.files, results, strict=True)]
    if args.json:
        print(json_dumps({"store": str(args.store), "stored": stored,
                          "already_stored": repeats, "files": report}))
        return 0
    for f in report:
        t0, t1 = f["time_span"]
        if not math.isfinite(t0):
            span = "no time span"
        elif t1 == t0:
            span = f"one instant, {time_text(t0, args.utc)}"
        else:
            span = (f"{t1 - t0:.3f} s from {time_text(t0, args.utc)} to "
                    f"{time_text(t1, args.utc)}")
        gpus = ", ".join(str(g) for g in f["gpus"]) or "none"
        print(f"{f['file']}: {f['format']}, {plural(f['rows_read'], 'row')} read, "
              f"{plural(f['samples'], 'sample')}, GPU{'s' if len(f['gpus']) != 1 else ''} "
              f"{gpus}, {span}, {plural(len(f['skipped']), 'line')} skipped")
        note = placement_note(f, args.utc)
        if note:
            print(f"  {note}")
        if f["normalised"]:
            print(f"  pasted text: {'; '.join(f['normalised'])}")
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
    print(f"stored {plural(stored, 'sample')} in {args.store}{again}")
    return 0


def placement_note(f: dict, utc: bool = False, fix: str = "give --start-time") -> str:
    """The warning for a file whose rows carry no time (or no date) of their own, from one
    ``files`` entry of ``import --json`` (or a ``load_trace`` trace's meta): where they were
    placed and how to place them elsewhere (``fix``); ``""`` when every row carries its
    time."""
    at = time_text(f.get("placed_at"), utc)
    if f.get("placed") in ("mtime", "now"):
        where = ("its modification time" if f["placed"] == "mtime" else "the time of the import")
        return (f"NOTE: no timestamps in the file: placed with its last row at {where} {at}; "
                f"{fix} to place it")
    if f.get("placed") == "start_time":
        return f"no timestamps in the file: placed from --start-time {at}"
    if f.get("dated") in ("mtime", "now"):
        where = ("its modification time" if f["dated"] == "mtime" else "the time of the import")
        return (f"NOTE: times of day without a date: dated by {where} {at}; {fix} to date "
                f"it")
    return ""


def add_parser(sub) -> None:
    """Add ``import`` to the top-level subparsers ``sub``."""
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
    im.add_argument("--start-time", type=epoch_time,
                    help="UTC epoch s of the first instant for files without timestamps "
                         "(dcgm-exporter text, dcgmi dmon, a dmon without a time column), and "
                         "the date of a dmon -o T file (default: the file's modification time "
                         "is the last instant; the summary says so)")
    im.add_argument("--tz", help="time zone of the files' wall-clock times (default UTC)")
    im.add_argument("--host", help="host name where the file names none")
    im.add_argument("--columns", help="query names of a header-less --query-gpu CSV, "
                                      "comma-separated")
    im.add_argument("--json", action="store_true", help="print one JSON object")
    add_utc_flag(im)
    im.set_defaults(func=cmd_import)
