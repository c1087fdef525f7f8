"""``tealeaves classify``: label a trace's windows idle/prefill/decode, flag imbalance, and
score against labels or an aligned server log."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from tealeaves.app.cli.args import (
    add_file_reading,
    add_groups,
    add_model,
    classifier_window,
    file_reading,
    upto,
)
from tealeaves.app.cli.common import Working, add_utc_flag, fail, na, plural, time_text
from tealeaves.data.jsontext import dumps as json_dumps
from tealeaves.data.schema import DEFAULT_WINDOW_S, entity_name, entity_short


def _alone(groups: dict | None) -> bool:
    """A grouping (``classifier.summary.group_summary``) given or detected whose every group
    has one GPU: nothing to compare within any."""
    return bool(groups and groups["applies"]
                and all(len(j["gpus"]) < 2 for j in groups["judged"]))


def hot_set_line(imb: dict, groups: dict | None = None) -> str:
    """One line naming a range's hot set from ``classifier.summary.imbalance_summary``, in the
    words of ``classifier.hot_set`` (its ``hot_text``): ``"hot set: GPUs 1, 3, 5, 7 at 2.6x
    the rest's work (18 % each vs 7 %), stays: 5 of 5 imbalanced windows"``, ``"hot set:
    rotates between GPUs 0, 2, 4, 6 (34 windows, 2.6x the rest) and GPUs 1, 3, 5, 7 (33
    windows, 2.6x the rest)"``, or ``"hot set: none: ..."``; with ``groups``
    (``classifier.summary.group_summary``) of several groups the shares are "within each
    group", and roles of one GPU each say so."""
    if not imb["hot_set"]:
        if _alone(groups):
            return ("hot set: none (every serving group has one GPU: "
                    + ("roles, not imbalance)" if groups["source"] == "roles"
                       else "nothing to compare it with)"))
        return f"hot set: {imb['hot_text']}"
    words = imb["hot_text"]
    if groups and len(groups["groups"]) > 1:  # shares within a group: of the group's work
        words = words.replace("the rest's work (", "the rest's work within each group (")
    return f"hot set: {words}"


def imbalance_line(imb: dict, groups: dict | None = None) -> str:
    """One line on a range's decode imbalance from ``classifier.summary.imbalance_summary``:
    ``"imbalance: 42 of 70 decode windows imbalanced; over 60 of 121 windows (decode with
    load): mean ratio 1.22 (max/mean work), straggler tax 15.7 %"``, or why there is none
    (``"idle: no imbalance figures ..."``); with ``groups`` of several groups the ratio is
    the worst group's and the tax within each group (``imbalance_terms``)."""
    n = imb["decode_windows"]
    if not n:
        return "imbalance: n/a (no decode window: imbalance is measured on decode)"
    if _alone(groups):
        return ("imbalance: n/a (every serving group has one GPU"
                + (": roles, not imbalance)" if groups["source"] == "roles" else ")"))
    head = (f"imbalance: {imb['imbalanced_windows']} of {plural(n, 'decode window')} "
            f"imbalanced; ")
    if not imb["figure_windows"]:
        return head + imb["figures_text"]
    ratio, tax = imb["imbalance_ratio"], imb["straggler_tax"]
    within = groups and len(groups["groups"]) > 1
    return (head + f"{imb['figures_text']}: mean ratio {na(ratio, 0, 2)} "
            + ("(max/mean work, the worst group's)" if within else "(max/mean work)")
            + ", straggler tax "
            + (f"{tax:.1%}" if isinstance(tax, float) and math.isfinite(tax) else "n/a")
            + (" (within each group)" if within else ""))


#: The windows frame's phase-share columns (0-1 of the window's time, ``classifier.shares``)
#: and its verdict: after every other column in ``classify``'s table, CSV and JSON.
SHARE_OUTPUT = ("share_idle", "share_prefill", "share_decode", "verdict")


def _text(v) -> str:
    """A cell of words: ``""`` for None or NaN."""
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def window_table(windows, utc: bool = False) -> str:
    """The windows as the text table ``classify`` prints: start and end as ISO 8601 times
    (local with the offset, or UTC), figures with three decimals, the hot set as GPU indices
    ("-" when none), then the window's phase shares of time (0-1) and its verdict
    ("decode", "mixed: decode 55 % · prefill 30 %"), and an unknown value as an empty cell
    (never NaN)."""
    from tealeaves.classifier.summary import window_hot_sets

    def fig(v) -> str:
        return f"{v:.3f}" if isinstance(v, float | int) and math.isfinite(v) else ""

    rows = [["start", "end", "phase", "confidence", "imbalance_ratio", "hot_set",
             "imbalanced", *SHARE_OUTPUT]]
    cols = windows.reindex(columns=["start", "end", "phase", "confidence", "imbalance_ratio",
                                    "imbalanced", *SHARE_OUTPUT])
    for r, hs in zip(cols.itertuples(index=False), window_hot_sets(windows), strict=True):
        rows.append([time_text(float(r.start), utc), time_text(float(r.end), utc),
                     _text(r.phase), fig(r.confidence), fig(r.imbalance_ratio),
                     ",".join(entity_short(g) for g in hs) or "-",
                     "yes" if r.imbalanced is True else "no",
                     fig(r.share_idle), fig(r.share_prefill), fig(r.share_decode),
                     _text(r.verdict)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    left = {2, 6, 10}  # phase, imbalanced and verdict read as words: left-aligned
    return "\n".join("  ".join(c.ljust(w) if i in left else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
                     for row in rows)


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
    "share_idle": "0-1 of the window's time", "share_prefill": "0-1 of the window's time",
    "share_decode": "0-1 of the window's time",
}


def shares_last(windows):
    """The windows frame with ``SHARE_OUTPUT`` moved after every other column (``load_g<i>``
    included), so the columns ``classify --csv`` wrote before the shares keep their order."""
    new = [c for c in SHARE_OUTPUT if c in windows]
    return windows[[c for c in windows.columns if c not in new] + new]


def _read_inputs(args: argparse.Namespace):
    """``classify``'s inputs, every file checked before any is opened: ``(groups, trace,
    labels, server, balance)`` (``--groups`` parsed, the trace, the ``--labels`` intervals,
    the ``--server-log`` truth, the ``--server-metrics`` balance; None where not given).

    Raises:
        TraceError, ServerLogError, ValueError: a file, format or option refused.
    """
    from tealeaves.classifier.groups import parse_groups
    from tealeaves.data.importers import load_trace, regular_file
    from tealeaves.data.traces import read_labels

    # every file named, before any is opened: a FIFO would block, a device never end
    for opt, path in (("", args.trace), ("--labels ", args.labels),
                      ("--server-log ", args.server_log),
                      ("--server-metrics ", args.server_metrics)):
        if path is not None:
            try:
                regular_file(path)
            except ValueError as exc:
                raise ValueError(f"{opt}{exc}") from None
    groups = parse_groups(args.groups) if args.groups is not None else None
    trace = load_trace(args.trace, format=args.format, **file_reading(args))
    labels = read_labels(args.labels) if args.labels else None
    if labels is not None:  # hot GPUs the trace lacks: refused, as evaluate does
        from tealeaves.classifier.evaluate import check_gpus_in_trace

        check_gpus_in_trace(labels, trace.samples, args.labels)
    server = _server_log_truth(args, trace) if args.server_log else None
    balance = (_server_balance(args.server_metrics, trace, args.utc)
               if args.server_metrics else None)
    return groups, trace, labels, server, balance


def cmd_classify(args: argparse.Namespace) -> int:
    """``tealeaves classify``: print the windows (table, ``--csv`` or ``--json``), the phase
    counts, the hot set and, with labels or a confident server log, the accuracy.  Returns the
    exit status (0; 2 bad input)."""
    from tealeaves.classifier import classify_with_segments, default_labeller, score_against_labels
    from tealeaves.classifier.evaluate import time_accuracy
    from tealeaves.classifier.groups import GroupsError
    from tealeaves.classifier.mig import balance_line, load_balance, window_loads
    from tealeaves.classifier.summary import group_summary, imbalance_summary
    from tealeaves.data.server_log import ServerLogError
    from tealeaves.data.traces import TraceError

    try:
        groups, trace, labels, server, balance = _read_inputs(args)
    except (TraceError, ServerLogError, ValueError) as exc:  # ImportFormatError, --format
        return fail(str(exc))
    from tealeaves.app.cli.imports import placement_note, refusal_note

    for note in (placement_note(trace.meta, args.utc, fix="give --start-time"),
                 refusal_note(trace.meta)):
        if note:
            print(f"{args.trace}: {note}", file=sys.stderr)
    if server is not None:
        print(server["line"], file=sys.stderr if args.json or args.csv else sys.stdout)
        if labels is None:
            labels = server["labels"]
    labeller = default_labeller()
    # the windows, and the 0.1-s segments (labels that change where the counters change);
    # a long trace says so on a terminal while it is labelled (an hour of eight GPUs at 20 Hz
    # takes 5-30 s on two cores: docs/benchmarks.md)
    wait = Working(len(trace.samples), f"labelling {len(trace.samples):,} samples "
                                        f"(windows and 0.1-s segments)")
    try:
        windows, segments = classify_with_segments(trace.samples, trace.devices, args.window,
                                                   labeller, groups=groups)
    except GroupsError as exc:  # --groups naming GPUs the trace lacks, or leaving some out
        wait.close()
        return fail(str(exc))
    wait.close()
    counts = windows["phase"].value_counts().reindex(
        ["idle", "prefill", "decode"], fill_value=0).to_dict()
    score = score_against_labels(windows, labels) if labels is not None else None
    timed = None
    if score is not None:
        timed = {"windows": time_accuracy(windows, labels)["time_accuracy"],
                 "segments": time_accuracy(segments, labels)["time_accuracy"]
                 if len(segments) else float("nan")}
    if score is not None and score["labelled_windows"] == 0:
        return fail(f"{args.labels}: no label interval overlaps the trace's "
                    f"{time_text(windows['start'].min(), args.utc)} to "
                    f"{time_text(windows['end'].max(), args.utc)}; labels of another trace?")
    imb = imbalance_summary(windows)
    grouped = group_summary(windows)
    mig = load_balance(window_loads(windows))  # the windows' loads: no second pass
    if args.json:
        out = _classify_json(args, windows, segments, counts, imb, score, timed, server)
        out["range"] = range_json(trace.samples)
        out["groups"] = grouped
        if mig:
            out["mig_balance"] = mig
        if balance is not None:
            out["server_metrics"] = balance["json"]
        print(json_dumps(out))  # a score with no hot GPU labelled is NaN: null
        return 0
    _print_windows(args, windows, segments, counts, imb, grouped,
                   [balance_line(group) for group in mig] + (balance or {}).get("lines", []),
                   float(trace.samples["timestamp"].min()) if len(trace.samples) else 0.0,
                   source_line(args.trace, trace.samples, args.utc))
    if score is not None:
        _print_score(score, timed, args.utc)
    return 0


def source_line(path, samples, utc: bool) -> str:
    """What the verdicts under the table are of: the file, its GPUs, its time range and how
    many samples (``samples``: the trace's, epoch-s ``timestamp``)."""
    from tealeaves.app.cli.common import shown
    from tealeaves.data.schema import entities_text

    ts = samples["timestamp"].to_numpy(dtype=float) if len(samples) else np.zeros(0)
    gpus = sorted(int(g) for g in samples["gpu"].unique()) if len(samples) else []
    when = (f"{time_text(float(ts.min()), utc)} to {time_text(float(ts.max()), utc)} "
            f"({float(ts.max() - ts.min()):.1f} s)" if len(ts) else "no time range")
    return (f"these windows are of {shown(path)}: {entities_text(gpus) if gpus else 'no GPU'}; "
            f"{when}; {len(samples):,} samples{_gaps_words(samples, utc)}")


def range_json(samples) -> dict:
    """``classify --json``'s ``range``: what the windows are of, as ``source_line`` says it:
    ``start``, ``end`` (epoch s of the first and last sample, null with none), ``span_s``,
    ``samples``, ``gpus`` (entity numbers) and the gaps with no sample
    (``classifier.summary.gaps_summary``: ``gap_count``, ``gap_s``, ``gaps``)."""
    from tealeaves.classifier.summary import gaps_summary, partial_gpus

    ts = samples["timestamp"].to_numpy(dtype=float) if len(samples) else np.zeros(0)
    t0, t1 = (float(ts.min()), float(ts.max())) if len(ts) else (None, None)
    return {"start": t0, "end": t1, "span_s": None if t0 is None else t1 - t0,
            "samples": len(samples),
            "gpus": sorted(int(g) for g in samples["gpu"].unique()) if len(samples) else [],
            **gaps_summary(ts), "partial_gpus": partial_gpus(samples)}


def _gaps_words(samples, utc: bool) -> str:
    """The stretches of the samples' range with no sample (``classifier.summary.pauses``) and
    the GPUs covering only part of it (``partial_gpus``), for ``source_line`` ("" with
    neither)."""
    from tealeaves.classifier.summary import partial_gpus, pauses

    if not len(samples):
        return ""
    gaps = pauses(samples["timestamp"].to_numpy(dtype=float))
    parts = partial_gpus(samples)
    if not gaps and not parts:
        return ""
    from tealeaves.app.figures.plot import partial_text, pauses_text

    when = (lambda t: time_text(t, utc))
    return pauses_text(gaps, when) + partial_text(parts, when)


def _print_windows(args: argparse.Namespace, windows, segments, counts: dict, imb: dict,
                   grouped: dict, more: list[str], t0: float, source: str = "") -> None:
    """Print the windows (the table, or ``--csv``) and the summary lines under them: the
    phase counts, and (not with ``--csv``) what they are of (``source``: ``source_line``),
    the range's phase shares of time, what the verdicts stood on, the hot set, the
    imbalance, the serving groups, ``more`` (MIG and server-metrics lines) and the segments
    (``t0``: the trace's first sample, epoch s)."""
    from tealeaves.classifier.summary import share_summary

    if args.csv:  # an unknown value is an empty cell; GPU indices whole numbers
        out = shares_last(windows.copy())
        if "hot_gpu" in out:
            out["hot_gpu"] = out["hot_gpu"].astype("Int64")
        from tealeaves.data.csvtext import safe_cell

        for col in out.columns[out.dtypes == object]:  # no formula from a text cell (OWASP)
            out[col] = out[col].map(safe_cell)
        out.to_csv(sys.stdout, index=False, float_format="%.4f", na_rep="")
    else:
        print(window_table(windows, args.utc))
    untold = int(windows["phase"].isna().sum()) if len(windows) else 0
    print(f"windows: {len(windows)}  " + "  ".join(f"{k}: {v}" for k, v in counts.items())
          + (f"  cannot tell: {untold}" if untold else "")
          + f"  (labeller: {windows.attrs.get('labeller')}"
          + (f": {windows.attrs['fallback']})" if windows.attrs.get("fallback") else ")"))
    if args.csv:
        return
    if source:
        print(source)
    shares = share_summary(windows)
    print(shares["line"])
    if shares["inputs_line"]:
        print(shares["inputs_line"])
    for line in evidence_lines(windows, [hot_set_line(imb, grouped),
                                         imbalance_line(imb, grouped)]):
        print(line)
    if grouped["applies"]:  # given, or roles detected: say which groups were judged
        print(grouped["line"])
    for line in more:
        print(line)
    print(segments_line(segments, t0))


def evidence_lines(windows, lines: list[str]) -> list[str]:
    """The hot set and imbalance ``lines`` followed by what the verdicts left out
    (``classifier.evidence``: GPUs holding no memory, windows whose GPUs share no counter,
    windows that cannot be told); where no window with a phase has GPUs sharing a counter,
    the hot set and imbalance lines say "cannot tell" instead."""
    ev = windows.attrs.get("evidence") or {}
    more = list(ev.get("lines", []))
    if ev.get("told") and not ev.get("compared"):
        why = next((x.split(": ", 2)[-1] for x in more
                    if x.startswith("imbalance: cannot tell")), "")
        lines = [f"hot set: cannot tell: {why}" if why else "hot set: cannot tell"]
    return lines + more


def _print_score(score: dict, timed: dict, utc: bool) -> None:
    """Print the accuracy against the labels (``score_against_labels``), per phase, in
    time (``timed``: windows and segments) and per skewed decode stretch."""
    print(f"accuracy: {na(score['accuracy'])} over {score['labelled_windows']} labelled "
          f"windows; skewed decode windows flagged with the right hot GPU: "
          f"{na(score['hot_gpu_accuracy'])} over {score['skewed_windows']} windows")
    for ph, acc in score["per_phase_accuracy"].items():
        print(f"  {ph:8s} {acc:.3f}")
    seg_acc = timed["segments"]
    print(f"time accuracy (share of labelled time right, 0.1-s ticks): windows "
          f"{na(timed['windows'])}, 0.1-s segments "
          + (f"{seg_acc:.3f}" if math.isfinite(seg_acc) else "n/a"))
    for st in score["stretches"]:
        hot = entity_name(st["hot_gpu"])
        print(f"  skewed decode {time_text(st['start'], utc)} to "
              f"{time_text(st['end'], utc)} ({hot} hot): "
              f"{st['flagged_right']:.0%} of {st['windows']} windows flagged {hot}")


def _classify_json(args: argparse.Namespace, windows, segments, counts: dict, imb: dict,
                   score: dict | None, timed: dict | None, server: dict | None) -> dict:
    """The object ``classify --json`` prints: the run's settings, phase counts, imbalance,
    every window and 0.1-s segment, ``units``, ``cannot_tell_windows`` (windows with no
    phase), ``evidence`` (lines on what the verdicts left out, ``classifier.evidence``), and
    the score and server log when given."""
    from tealeaves.classifier.summary import share_summary, window_hot_sets

    records = json.loads(shares_last(windows).to_json(orient="records"))
    for rec, hs in zip(records, window_hot_sets(windows), strict=True):
        rec["hot_set"] = list(hs)  # "1,3,5,7" in the frame: a list of ints here
        if rec.get("hot_gpu") is not None:  # NaN-able float in the frame: an int (or null)
            rec["hot_gpu"] = int(rec["hot_gpu"])
    out = {
        "trace": str(args.trace),
        "window_s": args.window,
        "labeller": windows.attrs.get("labeller"),
        "phase_counts": {k: int(v) for k, v in counts.items()},
        **_shares_json(share_summary(windows)),
        "imbalance": {**imb, "hot_gpus": {str(g): n for g, n in imb["hot_gpus"].items()}},
        "windows": records,
        "segments": [{"start": round(float(r.start), 6), "end": round(float(r.end), 6),
                      "phase": str(r.phase),
                      "confidence": float(r.confidence)}
                     for r in segments.itertuples(index=False)],
        "units": CLASSIFY_UNITS,
        "cannot_tell_windows": int(windows["phase"].isna().sum()) if len(windows) else 0,
        "evidence": (windows.attrs.get("evidence") or {}).get("lines", []),
    }
    if not len(segments):
        out["segments_note"] = segments_line(segments, 0.0).split(": ", 1)[-1]
    if score is not None:
        out.update(score)
        out["time_accuracy"] = timed
    if server is not None:
        out["server_log"] = {k: v for k, v in server.items() if k not in ("labels", "line")}
    return out


def _shares_json(shares: dict) -> dict:
    """``classify --json``'s range shares from ``classifier.summary.share_summary``:
    ``phase_shares`` (``{phase: mean share of the windows' time, 0-1}``, null when no window
    carries shares), ``shares_source`` (``"calibrated"``, ``"rules' scores"`` or null) and
    ``inputs`` (what the verdicts stood on: ``counters``, ``rate_hz`` (per GPU: 1 / the
    median interval between a GPU's readings, ``classifier.evidence.sample_rate_hz``; null
    when unknown), ``kind``, ``text``; null when unknown)."""
    return {"phase_shares": shares["shares"], "shares_source": shares["source"],
            "inputs": shares["inputs"]}


def segments_line(segments, t0: float, shown: int = 8) -> str:
    """One line on the 0.1-s segments: how many, and the first ``shown`` phase changes as
    seconds after ``t0`` (the trace's first sample)."""
    if segments is None or segments.empty:
        why = (segments.attrs.get("why") if segments is not None else None) or (
            "the window is not a whole number of 0.1-s hops, or no window holds a reading or "
            "can be told")
        return f"segments (0.1-s): none ({why})"
    start = segments["start"].to_numpy(dtype=float)
    phase = segments["phase"].to_numpy()
    change = start[1:][phase[1:] != phase[:-1]]
    at = " ".join(f"{t - t0:+.1f}" for t in change[:shown])
    more = f" … s ({len(change)} in all)" if len(change) > shown else " s"
    return (f"segments (0.1-s): {len(segments)}, phase changes at {at}{more}"
            if len(change) else f"segments (0.1-s): {len(segments)}, no phase change")


def _server_balance(path: Path, trace, utc: bool) -> dict:
    """``--server-metrics FILE``: the DP ranks' spread and SGLang's expert balance of a saved
    ``/metrics`` page, as lines to print (the page's own span, and whether it falls in the
    trace's) and as ``classify --json``'s ``server_metrics``.

    Raises:
        ValueError: not a ``/metrics`` page (names the file).
    """
    from tealeaves.app.cli.imports import metrics_file
    from tealeaves.classifier.server_balance import balance_lines, read_balance

    page = metrics_file(path)
    frame = page.frame
    t0, t1 = float(frame["timestamp"].min()), float(frame["timestamp"].max())
    how = {"file": "its samples' timestamps", "start_time": "--start-time",
           "end": "its modification time for the last scrape"}[page.stamped]
    s0, s1 = (float(trace.samples["timestamp"].min()), float(trace.samples["timestamp"].max())) \
        if len(trace.samples) else (math.nan, math.nan)
    inside = s0 <= t1 and t0 <= s1
    when = time_text(t0, utc) if t0 == t1 else f"{time_text(t0, utc)} to {time_text(t1, utc)}"
    lines = [f"{path}: {page.engine} /metrics page, {page.scrapes} scrape"
             f"{'s' if page.scrapes != 1 else ''}, {when} (times from {how})"
             + ("" if inside else "; NOT within the trace's time span: read as it is")]
    from tealeaves.data.server_log import refused_note

    if page.refused:  # blank codes and impossible values, stored as NaN
        lines.append(f"  {refused_note(page.refused)}")
    b = read_balance(frame)
    spread, heat = b["spread"], b["heat"]
    out = {"file": str(path), "span": [t0, t1], "stamped": page.stamped,
           "within_trace": bool(inside), "server_ranks": spread, "expert_balance": None,
           "no_reading": [{"series": n, "why": why, "values": k}
                          for (n, why), k in sorted(page.refused.items())]}
    if heat is not None:
        out["expert_balance"] = {k: (v.tolist() if hasattr(v, "tolist") else v)
                                 for k, v in heat.items()}
    lines += [f"  {x}" for x in balance_lines(b)] or [
        "  no DP ranks (dp_rank/engine labels) and no eplb metrics in it"]
    return {"lines": lines, "json": out}


def _server_log_truth(args: argparse.Namespace, trace) -> dict:
    """Parse ``--server-log``, estimate its clock offset against the trace, and turn it into
    ground-truth intervals on the trace's clock (``labels`` is None unless the offset is
    confident)."""
    from tealeaves.classifier.align import align_events
    from tealeaves.classifier.server_phases import phase_intervals
    from tealeaves.data.server_log import read_log

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
    if log.notes():
        line += f"; {log.notes()}"
    return {"events": len(events), "format": fmt, "offset_s": a.offset_s,
            "correlation": a.correlation, "runner_up": a.runner_up,
            "confident": a.confident, "labels": labels, "line": line}


def add_parser(sub) -> None:
    """Add ``classify`` to the top-level subparsers ``sub``."""
    k = sub.add_parser("classify", help="label a trace's windows idle/prefill/decode",
                       description="Cut a trace into windows, label each idle/prefill/decode "
                                   "and flag imbalance; with --labels print the accuracy.")
    k.add_argument("trace", type=Path,
                   help="a trace: tealeaves Parquet/CSV, nvidia-smi dmon or --query-gpu CSV, "
                        "dcgm-exporter text or dcgmi dmon output")
    k.add_argument("--format", help="force the trace's format (default: detected)")
    k.add_argument("--labels", type=Path, help="ground-truth CSV: start,end,phase[,hot_gpu]")
    k.add_argument("--window", type=classifier_window, default=DEFAULT_WINDOW_S,
                   help=f"window seconds (default {DEFAULT_WINDOW_S:g})")
    add_groups(k)
    k.add_argument("--server-log", type=Path,
                   help="SGLang/vLLM log of the same run: its clock offset is estimated from "
                        "the data and it becomes the ground truth when --labels is absent")
    k.add_argument("--server-metrics", type=Path, metavar="FILE",
                   help="a saved SGLang/vLLM /metrics page: print the DP ranks' spread and "
                        "SGLang's expert balance")
    k.add_argument("--tz", default="UTC",
                   help="time zone of the server log's timestamps and of the trace's "
                        "wall-clock times (IANA name or +HH:MM; default UTC)")
    add_file_reading(k)
    k.add_argument("--max-offset", type=upto(3600, "the largest clock offset (s)"), default=60.0,
                   help="largest clock offset searched, seconds (default 60)")
    fmt = k.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print one JSON object")
    fmt.add_argument("--csv", action="store_true", help="print the windows as CSV")
    add_utc_flag(k)
    add_model(k)
    k.set_defaults(func=cmd_classify)
