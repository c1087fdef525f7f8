"""``tealeaves import``: read nvidia-smi / DCGM / tealeaves files into the store (samples and
the device facts the files state), all or nothing."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from tealeaves.app.cli.args import epoch_time
from tealeaves.app.cli.common import add_utc_flag, fail, plural, shown, time_text
from tealeaves.data.jsontext import dumps as json_dumps
from tealeaves.data.schema import entities_text, entity_name


def cmd_import(args: argparse.Namespace) -> int:
    """``tealeaves import``: read every file, then store them all in one transaction.  Returns
    the exit status (0; 2 when a file is refused, every row of a file is refused, or the store
    cannot be written: nothing stored)."""
    import sqlite3

    from tealeaves.data.device_facts import DeviceConflictError
    from tealeaves.data.importers import import_file, stream_file
    from tealeaves.data.store import SampleStore, StoreError

    pending, gpu_files, pages = [], [], []
    for path in args.files:
        try:
            page = read_saved_page(path, args)
            if page is not None:
                pages.append(page)
                continue
            reading = {"format": args.format, "start_time": args.start_time,
                       "host": args.host, "tz": args.tz}
            # a dmon file is surveyed now and stored a chunk at a time below; others whole
            got = stream_file(path, **reading) if not args.columns else None
            if got is not None and got.info.kept == 0:  # nothing to store: its result now
                for _ in got.frames():
                    pass
            pending.append(got if got is not None else import_file(
                path, columns=args.columns.split(",") if args.columns else None, **reading))
            gpu_files.append(path)
        except ValueError as exc:  # ImportFormatError, unknown --format or --tz
            return fail(f"{exc} (nothing was imported)")
    for path, r in zip(gpu_files, pending, strict=True):
        if hasattr(r, "frames") and r.result is None:
            continue  # a dmon file with rows to store (its survey says so)
        refused = all_refused(path, getattr(r, "result", r), args.columns)
        if refused:  # before the store is opened: nothing is stored
            return fail(refused)
    try:
        store = SampleStore(args.store)
    except StoreError as exc:
        return fail(str(exc))
    with store:
        try:  # every file in one transaction: all of them, or (disk full, Ctrl-C) none
            counts = store.append_import(_sample_frames(pending),
                                         (p["read"].frame for p in pages),
                                         (sourced(r.devices, p)
                                          for p, r in zip(gpu_files, pending, strict=True)
                                          if not hasattr(r, "frames") and len(r.devices)))
            stored, repeats = counts["stored"], counts["repeats"]
        except DeviceConflictError as exc:
            return fail(f"{exc} (nothing was imported, the store is as it was)")
        except sqlite3.Error as exc:
            return fail(f"{args.store}: could not store the samples ({exc}); nothing was "
                         f"imported, the store is as it was")
        except ValueError as exc:  # a file changed between its survey and its storing
            return fail(f"{exc}; the store is as it was")
    results = [getattr(r, "result", r) for r in pending]
    report = [file_entry(path, r) for path, r in zip(gpu_files, results, strict=True)]
    page_report = [page_summary(p) for p in pages]
    if args.json:
        print(json_dumps({"store": str(args.store), "stored": stored,
                          "already_stored": repeats, "conflicts": counts["conflicts"],
                          "first_conflict": counts["first_conflict"],
                          "near_stored": counts["near_stored"], "files": report,
                          "server_metrics": page_report,
                          "server_metrics_stored": counts["metrics_stored"],
                          "server_metrics_already_stored": counts["metrics_repeats"],
                          "power_limits_changed": counts.get("power_limits_changed", [])}))
        return 0
    _print_summary(args, counts, report, page_report)
    return 0


def _print_summary(args: argparse.Namespace, counts: dict, report: list[dict],
                   page_report: list[dict]) -> None:
    """The text summary of an import: each page and file (``print_page``, ``print_file``),
    what was stored, and the notes on conflicting and neighbouring samples."""
    for p in page_report:
        print_page(p, args.utc)
    for f in report:
        print_file(f, args.utc, args.tz)
    stored, repeats = counts["stored"], counts["repeats"]
    what = plural(stored, "sample") + (f" ({repeats} already stored, passed over)"
                                         if repeats else "")
    if page_report:
        what += f" and {plural(counts['metrics_stored'], 'server metric row')}" + (
            f" ({counts['metrics_repeats']} already stored, passed over)"
            if counts["metrics_repeats"] else "")
    print(f"stored {what} in {shown(args.store)}")
    if counts["conflicts"]:
        print(conflict_note(counts["conflicts"], counts["first_conflict"], args.utc))
    if counts["near_stored"]:
        print(near_note(counts["near_stored"]))
    for line in counts.get("power_limits_changed", []):
        print(f"NOTE: {line}: the new limit is stored, and every stored sample of the GPU is "
              f"now scaled by it")


def _sample_frames(pending):
    """The sample frames of every file read: an import's ``samples``, or a dmon file's frames
    one chunk at a time (``data.dmon_passes.DmonImport.frames``)."""
    for r in pending:
        if hasattr(r, "frames"):
            yield from r.frames()
        else:
            yield r.samples


def file_entry(path, r) -> dict:
    """One ``files`` entry of ``import --json``: what importing ``path`` gave
    (``data.importers.ImportResult`` ``r``), JSON-able."""
    return {"file": str(path), "format": r.format, "rows_read": r.rows_read,
            "samples": r.sample_count, "gpus": r.gpus,
            "gpu_names": [entity_name(g) for g in r.gpus],
            "time_span": list(r.time_span), "blanks": r.blanks,
            "out_of_range": r.out_of_range,
            "skipped": [{"line": n, "reason": why} for n, why in r.skipped],
            "skipped_more": r.skipped_more,
            "placed": r.placed, "dated": r.dated,
            "placed_at": r.placed_at if r.placed or r.dated else None,
            "interval": r.interval, "interval_assumed": r.interval_assumed,
            "normalised": r.normalised, "zone": r.zone, "gpu_key": r.gpu_key,
            "not_read": r.not_read, "notes": r.notes,
            "devices": device_facts(r.devices)}


def print_file(f: dict, utc: bool, tz) -> None:
    """Print one imported file's summary (a ``file_entry``): rows, samples, GPUs, span, lines
    skipped, then its notes, blanks, values out of range and the first 20 skipped lines."""
    t0, t1 = f["time_span"]
    if not math.isfinite(t0):
        span = "no time span"
    elif t1 == t0:
        span = f"one instant, {time_text(t0, utc)}"
    else:
        span = (f"{t1 - t0:.3f} s from {time_text(t0, utc)} to "
                f"{time_text(t1, utc)}")
    gpus = entities_text(f["gpus"]) if f["gpus"] else "GPUs none"
    print(f"{shown(f['file'])}: {f['format']}, {plural(f['rows_read'], 'row')} read, "
          f"{plural(f['samples'], 'sample')}, {gpus}, {span}, "
          f"{plural(len(f['skipped']) + f.get('skipped_more', 0), 'line')} skipped")
    note = placement_note(f, utc)
    if note:
        print(f"  {note}")
    for line in file_notes(f, tz):
        print(f"  {line}")
    if f["normalised"]:
        print(f"  pasted text: {'; '.join(f['normalised'])}")
    for col, n in f["blanks"].items():
        print(f"  {col}: {n} blank value{'s' if n != 1 else ''} (no reading; stored as NaN)")
    for col, n in f["out_of_range"].items():
        print(f"  {col}: {n} value{'s' if n != 1 else ''} outside the field limits "
              f"(stored as NaN)")
    for s in f["skipped"][:20]:
        print(f"  line {s['line']}: {s['reason']}")
    shown_lines = min(len(f["skipped"]), 20)
    if len(f["skipped"]) + f.get("skipped_more", 0) > shown_lines:
        print(f"  ... {len(f['skipped']) + f.get('skipped_more', 0) - shown_lines} more")


def conflict_note(n: int, first: dict, utc: bool = False) -> str:
    """The summary line for ``n`` stored rows that conflict with another row of the same host,
    GPU and instant (``SampleStore.append_import``'s ``first_conflict`` the first)."""
    return (f"NOTE: {plural(n, 'conflicting sample')}: another reading of the same GPU and "
            f"instant was stored or read (first: host {first['host']} GPU {first['gpu']} at "
            f"{time_text(first['timestamp'], utc)}: {first['column']} {first['stored']!r} "
            f"and {first['new']!r}); all kept as read: rows of one GPU and time that disagree "
            f"(two hosts of one name, a file of another run, or one GPU listed twice?)")


def near_note(near: list) -> str:
    """The summary line for GPUs given new samples within a minute of samples stored before
    (``SampleStore.append_import``'s ``near_stored``: ``[[host, gpu], ...]``)."""
    by_host: dict[str, list[int]] = {}
    for host, gpu in near:
        by_host.setdefault(host, []).append(int(gpu))
    which = "; ".join(f"host {h}: {entities_text(sorted(g))}" for h, g in sorted(by_host.items()))
    return (f"NOTE: samples were already stored within a minute of this import's for {which}: "
            f"the same machine's next log, or another machine under the same host name? "
            f"Import another machine's files with their own --host, or its GPUs' samples mix "
            f"with these (and a device fact of one names the other's GPUs)")


def all_refused(path: Path, result, columns: str | None = None) -> str | None:
    """The error for a file every row of which was refused (no sample and no device fact to
    store, some lines skipped): how many, the first line and why (the field it names), and
    ``--columns`` when given; None when the file gives something to store."""
    skipped = result.skipped
    if len(result.samples) or (result.devices is not None and len(result.devices)) \
            or not skipped:
        return None
    line, why = skipped[0]
    hint = (f"; check --columns {columns} against the file's fields, in their order"
            if columns else "")
    return (f"{path}: every row refused ({plural(result.skipped_count, 'line')}; the first, line "
            f"{line}: {why}){hint}; nothing was imported")


def sourced(devices, path):
    """``devices`` (an import's device-fact frame) tagged with the file it came from
    (``attrs["source"]``), so a refused fact names its file."""
    devices = devices.copy()
    devices.attrs["source"] = str(path)
    return devices


def device_facts(devices) -> list[dict]:
    """The device facts an import read (``ImportResult.devices``) as JSON-able rows: only
    the facts the file stated."""
    out = []
    if devices is None or not len(devices):
        return out
    for rec in devices.to_dict("records"):
        row = {k: v for k, v in rec.items()
               if k in ("gpu", "name", "power_limit_w", "max_sm_clock_mhz", "mem_total_bytes",
                        "pci_bus_id", "uuid")
               and v is not None and v != "" and not (isinstance(v, float) and math.isnan(v))}
        out.append(row)
    return out


def file_notes(f: dict, tz: str | None) -> list[str]:
    """The summary lines of one ``files`` entry beyond its counts: the zone its times were
    read in, how its GPUs were told apart, its device facts, fields not read and the
    format's own notes."""
    lines = []
    if f.get("zone"):
        lines.append(f"times read as {f['zone']}: the file prints them without a zone"
                     + ("" if tz else "; give --tz ZONE if they were another zone's"))
    key = f.get("gpu_key")
    if key == "none":
        lines.append("NOTE: nothing in the file tells GPUs apart (no index, uuid or "
                     "pci.bus_id field, no timestamp to group rows): every row read as GPU "
                     "0; add index to --query-gpu")
    elif key in ("uuid", "pci.bus_id"):
        lines.append(f"GPUs told apart by {key} (no index field): numbered 0, 1, ... in "
                     f"the order they first appear")
    elif key == "name":
        lines.append("GPUs told apart by name (no index, uuid, pci.bus_id or timestamp "
                     "field; each GPU a different name): numbered 0, 1, ... in the order "
                     "they first appear")
    elif key == "inventory":
        lines.append("an inventory without index field (device facts, no readings): one row "
                     "per GPU, numbered 0, 1, ... in row order")
    elif key == "single":
        lines.append("no index, uuid or pci.bus_id field and no two rows share a timestamp: "
                     "read as one GPU (GPU 0)")
    elif key == "name and place":
        lines.append("GPUs told apart by their place among the rows of one timestamp (no "
                     "index, uuid or pci.bus_id field): numbered 0, 1, ... in that order")
    for d in f.get("devices") or []:
        facts = [d["name"]] if d.get("name") else []
        if d.get("pci_bus_id"):
            facts.append(f"bus {d['pci_bus_id']}")
        if d.get("power_limit_w"):
            facts.append(f"power limit {d['power_limit_w']:g} W")
        if d.get("max_sm_clock_mhz"):
            facts.append(f"max SM clock {d['max_sm_clock_mhz']:g} MHz")
        if d.get("mem_total_bytes"):
            facts.append(f"{d['mem_total_bytes'] / 2**30:.1f} GiB")
        if facts:
            lines.append(f"GPU {d['gpu']}: {', '.join(facts)} (stored as its device facts)")
    if f.get("not_read"):
        lines.append(f"fields not read (outside tealeaves' schema): {', '.join(f['not_read'])}")
    lines.extend(f.get("notes") or [])
    return lines


def read_saved_page(path: Path, args: argparse.Namespace) -> dict | None:
    """A saved SGLang/vLLM ``/metrics`` page read for the store (``{"file", "read", "notes"}``),
    or None when ``path`` is another kind of file.

    Raises:
        ValueError: the page cannot be read (names the file).
    """
    import os

    from tealeaves.data.importers import (
        SERVER_METRICS_FORMAT,
        ImportFormatError,
        detect_format,
        read_text,
    )
    from tealeaves.data.server_metrics import read_page

    try:
        fmt = args.format or detect_format(path)
    except ImportFormatError:  # import_file says why (or reads it with --columns)
        return None
    if fmt != SERVER_METRICS_FORMAT:
        return None
    text, notes = read_text(path)
    read = read_page(text, start=args.start_time, end=os.path.getmtime(path), name=str(path))
    return {"file": str(path), "read": read, "notes": notes}


def metrics_file(path: Path):
    """A saved SGLang/vLLM ``/metrics`` page given with ``--server-metrics FILE``, read whole
    (``data.server_metrics.PageRead``; scrapes without timestamps end at the file's
    modification time).

    Raises:
        ValueError: no such file, not a regular file (a FIFO, a device), or not a ``/metrics``
            page (names the file and what to do).
    """
    import os

    from tealeaves.data.importers import read_text
    from tealeaves.data.server_metrics import read_page

    try:  # missing, a directory, a FIFO or a device: refused before it is opened
        text, _ = read_text(path)
    except ValueError as exc:
        raise ValueError(f"--server-metrics {exc}") from None
    try:
        return read_page(text, end=os.path.getmtime(path), name=str(path))
    except ValueError as exc:
        raise ValueError(f"--server-metrics {exc} (give a /metrics page saved from an SGLang "
                         f"or vLLM server, e.g. curl http://HOST:PORT/metrics > FILE)") from None


def page_summary(page: dict) -> dict:
    """What an imported ``/metrics`` page holds: scrapes, series, time span, where its times
    came from, values that were no reading (``no_reading``), and per DP rank the mean generation throughput, running and queued requests
    and accept length with the ranks' spread (``classifier.server_balance.rank_spread``)."""
    from tealeaves.classifier.server_balance import (
        balancedness_line,
        balancedness_series,
        expert_heatmap,
        expert_line,
        rank_label,
        rank_spread,
        server_balancedness,
    )

    r = page["read"]
    f = r.frame
    spread = rank_spread(f)
    ranks = [{"dp_rank": x["rank"], **{k: v for k, v in x.items() if k != "rank"}}
             for x in (spread["ranks"] if spread else [])]
    heat = expert_heatmap(f)
    experts = None
    bal = balancedness_series(f)
    if heat is None and len(bal):  # the server's balancedness without its heatmap
        own, passes = server_balancedness(bal)
        experts = {"server_balancedness": own, "server_passes": passes,
                   "line": balancedness_line(bal)}
    if heat is not None:
        own, passes = server_balancedness(bal)
        experts = {"layers": len(heat["layers"]), "ranks": len(heat["ranks"]),
                   "balancedness": heat["balancedness"], "hot_rank": heat["hot_rank"],
                   "basis": heat["basis"], "server_balancedness": own,
                   "server_passes": passes, "line": expert_line(heat, bal)}
    return {"file": page["file"], "format": "server_metrics", "engine": r.engine,
            "scrapes": r.scrapes, "series": int(f[["name", "labels"]].drop_duplicates().shape[0]),
            "time_span": [float(f["timestamp"].min()), float(f["timestamp"].max())],
            "stamped": r.stamped, "rank_label": rank_label(f) or "dp_rank", "dp_ranks": ranks,
            "uneven_ranks": spread["uneven_ranks"] if spread else [],
            "expert_balance": experts, "normalised": page["notes"],
            "skipped": [{"line": n, "reason": f"not Prometheus text: {t}"}
                        for n, t in r.skipped],
            "stamps_refused": r.stamps_refused,
            "no_reading": [{"series": name, "why": why, "values": n}
                           for (name, why), n in sorted(r.refused.items())]}


def print_page(p: dict, utc: bool) -> None:
    """The import summary of one ``/metrics`` page (``page_summary``); a page of one scrape
    gives the ranks' values but no verdict on uneven ranks (``server_balance.MIN_SCRAPES``)."""
    from tealeaves.classifier.server_balance import MIN_SCRAPES, ONE_SCRAPE

    t0, t1 = p["time_span"]
    when = (time_text(t0, utc) if t0 == t1
            else f"{time_text(t0, utc)} to {time_text(t1, utc)}")
    print(f"{shown(p['file'])}: {p['engine']} /metrics page, {plural(p['scrapes'], 'scrape')}, "
          f"{plural(p['series'], 'series', 'series')}, {when}; stored as server metrics")
    if p["stamped"] != "file":
        how = ("from --start-time" if p["stamped"] == "start_time"
               else "with the last at its modification time; give --start-time to place it")
        why = (f"its timestamps read as {p['stamps_refused']}, not used"
               if p.get("stamps_refused") else "no timestamps in the page")
        print(f"  NOTE: {why}: scrapes placed 1 s apart {how}")
    if p["normalised"]:
        print(f"  pasted text: {'; '.join(p['normalised'])}")
    for x in p["no_reading"]:
        what = "blank code" if x["why"] == "blank" else "impossible value"
        print(f"  {x['series']}: {plural(x['values'], what)} (no reading; stored as NaN)")
    for sk in p["skipped"][:20]:
        print(f"  line {sk['line']}: {sk['reason']}")
    if len(p["skipped"]) > 20:
        print(f"  ... {len(p['skipped']) - 20} more")
    if len(p["dp_ranks"]) > 1:
        cells = ", ".join(f"{x['dp_rank']}: {_num(x['gen_throughput_tok_s'])} tok/s "
                          f"({_num(x['running_req'])} running, {_num(x['queue_req'])} queued)"
                          for x in p["dp_ranks"])
        over = "mean over scrapes" if p["scrapes"] >= MIN_SCRAPES else "one scrape"
        print(f"  DP ranks ({p['rank_label']}; generation throughput, {over}): {cells}")
        if p["scrapes"] < MIN_SCRAPES:
            print(f"  {ONE_SCRAPE}")
        elif p["uneven_ranks"]:
            far = [x for x in p["dp_ranks"] if x["dp_rank"] in p["uneven_ranks"]]
            print("  UNEVEN DP ranks: " + ", ".join(
                f"rank {x['dp_rank']} at {x['vs_median']:.2f}x the ranks' median" for x in far))
    ex = p.get("expert_balance")
    if ex:
        print(f"  {ex['line']}")


def _num(v: float) -> str:
    return "–" if v is None or not math.isfinite(v) else f"{v:,.0f}"


def placement_note(f: dict, utc: bool = False, fix: str = "give --start-time") -> str:
    """The warning for a file whose rows carry no time (or no date) of their own, from one
    ``files`` entry of ``import --json`` (or a ``load_trace`` trace's meta): where they were
    placed and how to place them elsewhere (``fix``); ``""`` when every row carries its
    time."""
    at = time_text(f.get("placed_at"), utc)
    if f.get("placed") in ("mtime", "now"):
        where = ("its modification time" if f["placed"] == "mtime" else "the time of the import")
        return (f"NOTE: no timestamps in the file: placed with its last row at {where} {at}; "
                f"{fix} to place it{spacing_text(f)}")
    if f.get("placed") == "start_time":
        return f"no timestamps in the file: placed from --start-time {at}{spacing_text(f)}"
    if f.get("dated") in ("mtime", "now"):
        where = ("its modification time" if f["dated"] == "mtime" else "the time of the import")
        return (f"NOTE: times of day without a date: dated by {where} {at}; {fix} to date "
                f"it")
    return ""


def refusal_note(meta: dict) -> str:
    """The warning for a file read with lines refused (a ``load_trace`` trace's meta:
    ``skipped``, ``first_skipped``): how many and the first, so a verdict on the rest never
    hides them (a GPU every row of which was refused is not in it at all); ``""`` when none."""
    n = int(meta.get("skipped") or 0)
    if not n:
        return ""
    first = meta.get("first_skipped")
    why = f" (first: line {first[0]}: {first[1]})" if first else ""
    return (f"NOTE: {n} line{'s' if n != 1 else ''} of the file refused, not read{why}; the "
            f"verdicts stand on the rest")


def spacing_text(f: dict) -> str:
    """How far apart the rows of a file without timestamps were placed, from a ``files``
    entry of ``import --json`` (or a ``load_trace`` trace's meta): ``"; instants 30 s apart
    (an assumed interval: ...)"``; ``""`` when no interval was used."""
    step = f.get("interval")
    if not step:
        return ""
    if f.get("interval_assumed"):
        return (f"; instants {step:g} s apart (an assumed interval: the format's default; "
                f"the file states none)")
    return f"; instants {step:g} s apart (the interval given)"


def add_parser(sub) -> None:
    """Add ``import`` to the top-level subparsers ``sub``."""
    im = sub.add_parser("import", help="import nvidia-smi / DCGM / tealeaves files into the store",
                        description="Import telemetry files into the store: the nvidia-smi "
                                    "table, nvidia-smi dmon, "
                                    "nvidia-smi --query-gpu CSV, dcgm-exporter text, dcgmi "
                                    "dmon, tealeaves CSV/Parquet (detected from content). "
                                    "Every file is read before anything is stored: one "
                                    "refused file stores nothing.")
    im.add_argument("files", type=Path, nargs="+", help="files to import")
    im.add_argument("--store", type=Path, default=Path("tealeaves.db"),
                    help="SQLite store (default tealeaves.db)")
    im.add_argument("--format", help="force a format (table, dmon, query, prometheus, dcgmi, "
                                     "csv, parquet or a full name)")
    im.add_argument("--start-time", type=epoch_time,
                    help="UTC epoch s of the first instant for files without timestamps "
                         "(dcgm-exporter text, dcgmi dmon, a dmon without a time column), and "
                         "the date of a dmon -o T file (default: the file's modification time "
                         "is the last instant; the summary says so)")
    im.add_argument("--tz", help="time zone of the files' wall-clock times: an IANA name "
                                 "(Europe/Berlin) or an offset (+02:00); default UTC")
    im.add_argument("--host", help="host name where the file names none")
    im.add_argument("--columns", help="query names of a header-less --query-gpu CSV, "
                                      "comma-separated")
    im.add_argument("--json", action="store_true", help="print one JSON object")
    add_utc_flag(im)
    im.set_defaults(func=cmd_import)
