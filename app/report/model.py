"""Imbalance reports: one time range turned into a document that stands on its own.

``build_report`` reads a range (a trace file, or a store between two times), labels its windows
with the classifier, and gathers what a colleague needs: the summary (time per phase, decode
balancedness, imbalance ratio, straggler tax, the hot set with its shares of the work and
whether it stays or rotates, the server's throughput and accept length when its signals are
there), why, per hot GPU (the ceiling it leans on: ``classifier.imbalance.ceilings``), a per-GPU
table, a timeline figure (phase ribbon over a per-GPU load heatmap), the most imbalanced windows
with their hot sets, an expert
section from an SGLang expert-distribution dump, and provenance.  The numbers come from
``classifier.summary`` over ``classify_samples`` windows, the same windows ``tealeaves
classify`` prints.

Outputs (``write_report``): ``json`` and ``csv`` (schema version ``SCHEMA_VERSION``;
``report_schema.json``, documented in ``docs/report-schema.md``), ``html`` (one self-contained
file: plotly.js embedded, no network, every user-supplied string escaped by Jinja2's
autoescape), and ``pdf`` / ``png`` rendered from that HTML by Playwright driving the system's
Chromium (``report_render``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tealeaves.app.report.document import (
    SCHEMA_VERSION,
    ReportError,
    Source,
    _document,
    _experts,
    _groups_part,
    _mig_group,
    _num,
    _screenshot,
    _server_balance,
    _utc,
)
from tealeaves.classifier.mig import load_balance, window_loads
from tealeaves.classifier.server_balance import (
    BALANCE_SERIES,
)
from tealeaves.classifier.summary import (
    GPU_COLUMNS,
    gpu_table,
    group_summary,
    hot_ceilings,
    imbalance_summary,
    phase_summary,
    top_imbalanced,
)
from tealeaves.classifier.windows import DEFAULT_WINDOW_S
from tealeaves.data.csvtext import safe_row

SCHEMA_PATH = Path(__file__).with_name("report_schema.json")
#: Output formats ``write_report`` knows.
FORMATS = ("html", "pdf", "png", "csv", "json")
#: Reads of more samples than this show progress on the command line.
PROGRESS_AFTER_ROWS = 500_000
#: Store reads go in pieces of this many samples (keyset pages; each a progress step).
READ_CHUNK_ROWS = 200_000
#: Seconds of samples read either side of an asked range to label its windows in their
#: context (``ReportInput.context``): the imbalance's run of ``min_windows`` (3) windows and
#: the phase smoothing reach a few windows; 15 s holds 15 readings of a 1-Hz source.
CONTEXT_S = 15.0


@dataclass
class ReportInput:
    """What a report reads: samples (sample schema), device rows, the trace's facts
    (``meta``: driver, collector ...), server events (or None), the files they came from,
    and the server's ``/metrics`` scrapes (``data.server_metrics.FRAME_COLUMNS``, the
    series of ``classifier.server_balance.BALANCE_SERIES``; or None)."""

    samples: pd.DataFrame
    devices: pd.DataFrame
    meta: dict = field(default_factory=dict)
    server_events: pd.DataFrame | None = None
    sources: list[Source] = field(default_factory=list)
    server_metrics: pd.DataFrame | None = None
    #: Screenshots read (``classifier.picture.summary`` with ``file`` and ``capture_ts``,
    #: epoch s or None).
    screenshots: list[dict] = field(default_factory=list)
    #: A range asked of a longer record (``read_store`` with ``--from/--to``): ``(start,
    #: end)`` epoch s, and the samples within ``CONTEXT_S`` either side of it.  The windows
    #: are labelled with them and those overlapping ``[start, end)`` kept, so a window's
    #: verdict is the one the whole record gives it (a run of imbalanced windows cut by the
    #: range's edge, or an edge window read from part of its samples, changed it).
    asked: tuple[float, float] | None = None
    context: pd.DataFrame | None = None


@dataclass
class Report:
    """A built report: ``data`` (the JSON document, ``report_schema.json``), the labelled
    ``windows`` behind it, and the expert arrays for the figures (None without a dump)."""

    data: dict
    windows: pd.DataFrame
    experts: dict | None = None


# -- inputs ------------------------------------------------------------------------------------


def _progress(total: int, desc: str, show: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="step", file=sys.stderr, disable=not show,
                leave=False)


def from_trace(path: str | Path, format: str | None = None, **reading) -> ReportInput:
    """A report's input from a trace file (any format ``tealeaves import`` reads); ``reading``:
    how to read it (``columns``, ``start_time``, ``tz``: as for ``data.importers.import_file``).

    Raises:
        ReportError: the file cannot be read (the message names it).
    """
    from tealeaves.data.importers import ImportFormatError, load_trace
    from tealeaves.data.traces import TraceError

    path = Path(path)
    try:
        tr = load_trace(path, format=format, **reading)
    except (TraceError, ImportFormatError) as exc:
        raise ReportError(str(exc)) from None
    return ReportInput(tr.samples, tr.devices, dict(tr.meta or {}), None,
                       [Source("trace", path)])


def from_store(path: str | Path, start: float | None = None, end: float | None = None,
               progress: bool | None = None) -> ReportInput:
    """A report's input from a tealeaves store file between ``start`` and ``end`` (epoch s;
    default: all it holds), opened read-only; see ``read_store``.

    Raises:
        ReportError: no such store, an empty range, no samples in it, or one instant only.
    """
    from tealeaves.data.store import SampleStore, StoreError

    path = Path(path)
    if not path.exists():
        raise ReportError(f"{path}: no such store")
    try:
        with SampleStore(path, readonly=True) as store:
            return read_store(store, start, end, progress, path)
    except StoreError as exc:  # its message names the file
        raise ReportError(str(exc)) from None
    except OSError as exc:
        raise ReportError(f"{path}: {exc}") from None


def read_store(store, start: float | None, end: float | None, progress: bool | None = None,
               path: str | Path | None = None) -> ReportInput:
    """A report's input from an open ``SampleStore`` between ``start`` and ``end`` (epoch s;
    default: all it holds), read in pieces of ``READ_CHUNK_ROWS`` samples (a progress bar on
    stderr when the range holds more than ``PROGRESS_AFTER_ROWS`` samples and ``progress``
    is not False): the cost follows the samples, never the span.

    Raises:
        ReportError: an empty or reversed range, no samples in it, or samples of one instant
            only (a store of one sample or sweep, whatever the range; a range of one sweep).
    """
    where = str(path) if path is not None else "the store"
    span = store.time_span()
    if span is None:
        scrapes = store.server_metrics(names=BALANCE_SERIES)
        more = (" (only the server's /metrics scrapes: a report needs GPU telemetry; import a "
                "GPU file of the same time next to them)" if len(scrapes) else "")
        raise ReportError(f"{where}: holds no GPU samples{more}")
    if span[1] <= span[0]:  # whatever --from/--to say, no range can hold more than this
        n = store.count()
        what = "one instant: one sample" if n == 1 else f"one instant: one sweep ({n} samples)"
        raise ReportError(f"{where}: holds {what}, at {_utc(span[0])} UTC: a report needs "
                          f"a range of samples over time (record or import more than one "
                          f"sweep)")
    asked_from, asked_to = start, end
    start = span[0] if start is None else float(start)
    end = span[1] if end is None else float(end)
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
        a = _utc(start) if math.isfinite(start) else start
        b = _utc(end) if math.isfinite(end) else end
        if asked_to is None:  # only --from was given: the end is the newest sample
            raise ReportError(f"--from {a} UTC: at or after {where}'s newest sample ({b} UTC); "
                              f"give an earlier --from")
        if asked_from is None:  # only --to was given: the start is the first sample
            raise ReportError(f"--to {b} UTC: at or before {where}'s first sample ({a} UTC); "
                              f"give a later --to")
        raise ReportError(f"--from/--to: the range must end after it starts ({a} .. {b} UTC)")
    if end < span[0] or start > span[1]:
        raise ReportError(f"{where}: no samples between {_utc(start)} and {_utc(end)} UTC "
                          f"(it holds {_utc(span[0])} to {_utc(span[1])})")
    asked = (start, end) if (asked_from, asked_to) != (None, None) else None
    start, end = max(start, span[0]), min(end, span[1] + 1e-6)  # only what is stored
    # read by rows (keyset pages on the time index): the cost follows the samples in the
    # range, never its span
    total = store.count_range(start, end)
    show = progress if progress is not None else total > PROGRESS_AFTER_ROWS
    parts = []
    with _progress(total, "report: reading the store", show) as bar:
        for part in store.iter_range(start, end, READ_CHUNK_ROWS):
            parts.append(part)
            bar.update(len(part))
    samples = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if asked is not None and asked_to is not None and len(samples):
        # the range is [from, to), as the dashboard's: a sample at "to" opens the next window
        samples = samples[samples["timestamp"].to_numpy(dtype=float) < asked[1]] \
            .reset_index(drop=True)
    if samples.empty:
        raise ReportError(f"{where}: no samples between {_utc(start)} and {_utc(end)} UTC "
                          f"(it holds {_utc(span[0])} to {_utc(span[1])})")
    per_gpu = samples.groupby([c for c in ("host", "gpu") if c in samples]).size()
    if per_gpu.max() < 2:  # one sweep (each GPU row may carry its own stamp)
        _one_sweep(where, samples, span, (start, end))
    events = store.server_events(start, end)
    metrics = store.server_metrics(start, end, names=BALANCE_SERIES)
    sources = [Source("store", Path(path))] if path is not None else []
    inp = ReportInput(samples, store.devices(), store.meta(),
                      events if len(events) else None, sources,
                      metrics if len(metrics) else None)
    if asked is not None:
        inp.asked, inp.context = asked, _context(store, asked)
    return inp


def _context(store, asked: tuple[float, float]) -> pd.DataFrame:
    """The samples within ``CONTEXT_S`` before ``asked[0]`` and from ``asked[1]`` on (the
    range being ``[asked[0], asked[1])``), read by rows like the range."""
    a, b = asked
    before = store.iter_range(a - CONTEXT_S, a, READ_CHUNK_ROWS)
    after = list(store.iter_range(b, b + CONTEXT_S, READ_CHUNK_ROWS))
    parts = [p[p["timestamp"].to_numpy(dtype=float) < a] for p in before] + after
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _one_sweep(where: str, samples: pd.DataFrame, span: tuple[float, float],
               asked: tuple[float, float]) -> None:
    """Raise the ``ReportError`` of a read that holds one sweep (at most one sample a GPU):
    the store's own when the range covers all it holds, else the range's."""
    n = len(samples)
    what = ("one instant: one sample" if n == 1
            else f"one instant: one sweep ({n} samples, one a GPU)")
    at = _utc(samples["timestamp"].min())
    if asked[0] <= span[0] and asked[1] >= span[1]:
        raise ReportError(f"{where}: holds {what}, at {at} UTC: a report needs a range of "
                          f"samples over time (record or import more than one sweep)")
    raise ReportError(f"{where}: between {_utc(asked[0])} and {_utc(asked[1])} UTC it holds "
                      f"{what}, at {at} UTC: a report needs a range of samples over time; "
                      f"widen --from/--to (it holds {_utc(span[0])} to {_utc(span[1])} UTC)")


# -- the report ---------------------------------------------------------------------------------


def _label_part(windows: pd.DataFrame, lab: pd.DataFrame, labels, t0: float,
                t1: float) -> dict:
    """The document's ``labels`` part: the windows scored against the label intervals
    ``lab`` read from ``labels``.

    Raises:
        ReportError: no label interval overlaps ``t0``-``t1``.
    """
    from tealeaves.classifier import score_against_labels

    sc = score_against_labels(windows, lab)
    if sc["labelled_windows"] == 0:
        raise ReportError(f"{labels}: no label interval overlaps the range "
                          f"{_utc(t0)}-{_utc(t1)} UTC; labels of another trace?")
    return {"file": str(labels), "labelled_windows": int(sc["labelled_windows"]),
            "accuracy": _num(sc["accuracy"]),
            "per_phase_accuracy": {k: _num(v) for k, v in
                                   sc["per_phase_accuracy"].items()},
            "hot_gpu_accuracy": _num(sc["hot_gpu_accuracy"]),
            "skewed_windows": int(sc["skewed_windows"]),
            "false_flag_rate": _num(sc["false_flag_rate"])}


def _keep_range_events(inp: ReportInput, t0: float, t1: float) -> None:
    """Cut ``inp.server_events`` to the range ``t0``-``t1`` (epoch s), in place."""
    if inp.server_events is not None and len(inp.server_events):
        ev = inp.server_events
        ts = pd.to_numeric(ev["timestamp"], errors="coerce")
        inp.server_events = ev[(ts >= t0) & (ts <= t1)]  # the range's events only


def _add_optional_parts(data: dict, inp: ReportInput, windows: pd.DataFrame, mig: list,
                        t0: float, t1: float) -> None:
    """Add to ``data`` the parts only some inputs have: the serving groups (given or
    detected), the MIG balance, the server's balance figures and the screenshots."""
    grouped = group_summary(windows)
    if grouped["applies"]:  # given, or roles detected: which groups were judged
        data["groups"] = _groups_part(grouped)
    if mig:
        data["mig_balance"] = [_mig_group(m) for m in mig]
    if inp.server_metrics is not None and len(inp.server_metrics):
        data.update(_server_balance(inp.server_metrics))
    if inp.screenshots:
        data["screenshots"] = [_screenshot(p, windows, t0, t1) for p in inp.screenshots]


def build_report(inp: ReportInput, *, window_s: float = DEFAULT_WINDOW_S, labels: str | Path | None = None,
                 experts: str | Path | np.ndarray | None = None, n_gpus: int | None = None,
                 ep_size: int = 1, top_n: int = 10, labeller=None,
                 progress: bool | None = None, groups=None) -> Report:
    """Label the input's windows and gather the report.

    Args:
        inp: ``from_trace`` / ``from_store`` output.
        window_s: classifier window, s.
        labels: a ground-truth CSV (``start,end,phase[,hot_gpu]``): the report adds how well
            the labels agree with the classifier over the range.
        experts: an SGLang expert-distribution dump (``torch.save`` file with
            ``logical_count`` [passes, layers, experts]) or that array.
        n_gpus: GPUs of the TP group the dump's layer ran on (default: the trace's GPUs).
        ep_size: expert-parallel size (1: pure TP); must divide ``n_gpus`` and the experts.
        top_n: how many of the most imbalanced windows to list.
        labeller: phase labeller (default: the shipped model, rules as fallback).
        progress: show progress on stderr (default: when the input holds more than
            ``PROGRESS_AFTER_ROWS`` samples).
        groups: the serving groups imbalance is judged in (``classify_samples``: None
            detects roles from the data, else ``"0-3,4-7"``, sequences of GPU ids or a
            ``classifier.groups.Grouping``).  The document's ``groups`` part says which, when
            a grouping was given or roles detected.

    Raises:
        ReportError: unreadable labels or dump, a dump of another shape, a layout that does
            not divide, no samples, or ``groups`` that do not fit the samples' GPUs.
    """
    from tealeaves.classifier.groups import GroupsError
    from tealeaves.data.traces import TraceError, read_labels

    s = inp.samples
    if s.empty:
        raise ReportError("no samples to report on")
    t0, t1 = float(s["timestamp"].min()), float(s["timestamp"].max())
    show = progress if progress is not None else len(inp.samples) > PROGRESS_AFTER_ROWS
    steps = 3 + (labels is not None) + (experts is not None)
    lab = None
    if labels is not None:  # bad inputs are refused before the long part
        try:
            lab = read_labels(labels)
        except TraceError as exc:
            raise ReportError(str(exc)) from None
    expert_part, expert_arrays = None, None
    if experts is not None:
        n = int(n_gpus or max(1, s["gpu"].nunique()))
        expert_part, expert_arrays = _experts(experts, n, ep_size)
    with _progress(steps, "report", show) as bar:
        bar.set_postfix_str("classifying")
        try:
            windows = _range_windows(inp, window_s, labeller, groups)
        except GroupsError as exc:
            raise ReportError(str(exc)) from None
        bar.update(1)
        phases = phase_summary(windows, window_s)
        mig = load_balance(window_loads(windows))
        imb = imbalance_summary(windows)
        table = gpu_table(s, windows, window_s)
        top = top_imbalanced(windows, top_n)
        why = hot_ceilings(s, windows, window_s, inp.devices if len(inp.devices) else None,
                           gpus=imb["hot_set"] if imb["hot_pattern"] != "rotates"
                           else sorted(imb["hot_gpus"]))  # rotating: every GPU hot in turn
        bar.update(1)
        label_part = None
        if lab is not None:
            bar.set_postfix_str("labels")
            label_part = _label_part(windows, lab, labels, t0, t1)
            bar.update(1)
        if experts is not None:
            bar.update(1)
        _keep_range_events(inp, t0, t1)
        data = _document(inp, windows, window_s, t0, t1, phases, imb, table, top,
                         label_part, expert_part, labels, experts, why)
        _add_optional_parts(data, inp, windows, mig, t0, t1)
        bar.update(1)
    return Report(data, windows, expert_arrays)


def _range_windows(inp: ReportInput, window_s: float, labeller, groups) -> pd.DataFrame:
    """``classify_samples`` of the report's samples; of an asked range, labelled with its
    ``context`` and cut to the windows overlapping ``[start, end)`` (``keep``: the dashboard
    header's rule, ``figures.header.range_summary``).

    Raises:
        groups.GroupsError: ``groups`` that do not fit the samples' GPUs.
    """
    from tealeaves.classifier import classify_samples

    devices = inp.devices if len(inp.devices) else None
    ctx = inp.context
    if inp.asked is None or ctx is None or ctx.empty:
        return classify_samples(inp.samples, devices, window_s=window_s, labeller=labeller,
                                groups=groups)
    both = pd.concat([ctx, inp.samples], ignore_index=True) \
        .sort_values("timestamp", kind="stable").reset_index(drop=True)
    return classify_samples(both, devices, window_s=window_s, labeller=labeller,
                            groups=groups, keep=inp.asked)


# -- JSON and CSV -------------------------------------------------------------------------------


def schema() -> dict:
    """The JSON Schema of the JSON report (``$defs/csv_row`` is one row of the CSV)."""
    return json.loads(SCHEMA_PATH.read_text())


def to_json(report: Report) -> str:
    """The report as JSON text (``report_schema.json``; unknown values null)."""
    return json.dumps(report.data, indent=1, allow_nan=False) + "\n"


#: Units of the CSV's metrics (by metric name; others have none).
_UNITS = {"start": "epoch s", "end": "epoch s", "span_s": "s", "gap_s": "s", "window_s": "s",
          "decode_balancedness": "mean/max", "imbalance_ratio": "max/mean",
          "straggler_tax": "share", "busy_share": "share", "load_mean": "%", "hot_s": "s",
          "energy_j": "J", "prefill_tokens": "tokens", "gen_throughput_tok_s": "token/s",
          "accept_len": "tokens/step", "running_req": "requests", "tokens": "tokens",
          "balancedness": "mean/max", "balancedness_greedy": "mean/max",
          "gpu_share": "share", "bytes": "B", "hot_share": "share", "cold_share": "share",
          "hot_set_windows": "windows", "cannot_tell_windows": "windows",
          "share_idle": "share", "share_prefill": "share", "share_decode": "share", **{c: u for c, u in GPU_COLUMNS}}


def csv_rows(report: Report) -> list[dict]:
    """The report as long-format rows (``$defs/csv_row``): ``schema_version``, ``section``,
    ``item`` (GPU, window rank, layer ... or empty), ``metric``, ``value`` (text; empty when
    unknown) and ``unit``."""
    rows: list[dict] = []
    ver = str(SCHEMA_VERSION)

    def add(section: str, item, metric: str, value, unit: str | None = None) -> None:
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, list):  # a hot set: "1,3,5,7"
            text = ",".join(str(v) for v in value)
        elif isinstance(value, float):
            text = repr(value) if math.isfinite(value) else ""
        elif value is None:
            text = ""
        else:
            text = str(value)
        rows.append({"schema_version": ver, "section": section,
                     "item": "" if item is None else str(item), "metric": metric,
                     "value": text, "unit": unit if unit is not None else _UNITS.get(metric, "")})

    d = report.data
    for k, v in d["range"].items():
        if k == "gaps":  # one row per end of each gap, the gap's rank in time as the item
            for i, (a, b) in enumerate(v):
                add("range", i, "gap_start", a, "epoch s")
                add("range", i, "gap_end", b, "epoch s")
        elif k == "partial_gpus":  # a GPU covering part of the range: its first and last
            for part in v:
                add("range", part["gpu"], "gpu_first", part["first"], "epoch s")
                add("range", part["gpu"], "gpu_last", part["last"], "epoch s")
        else:
            add("range", None, k, v, "gaps" if k == "gap_count" else None)
    _summary_rows(add, d["summary"])
    for k, v in (d["server"] or {}).items():
        add("server", None, k, v)
    for g in d["gpus"]:
        for k, v in g.items():
            if k != "gpu":
                add("gpu", g["gpu"], k, v)
    for w in d["top_windows"]:
        for k, v in w.items():
            if k != "rank":
                add("top_window", w["rank"], k, v)
    for c in d["hot_ceilings"]:
        for k, v in c.items():
            if k != "gpu":
                add("hot_ceiling", c["gpu"], k, v,
                    "share" if k in ("level", "others") else "windows" if k == "windows"
                    else "")
    lab = d["labels"]
    if lab:
        for k, v in lab.items():
            if k == "per_phase_accuracy":
                for p, x in v.items():
                    add("labels", p, k, x, "share")
            else:
                add("labels", None, k, v, "share" if "accuracy" in k or "rate" in k else None)
    ex = d["experts"]
    if ex:
        for k, v in ex.items():
            if k in ("gpu_share", "gpu_experts"):
                for i, x in enumerate(v):
                    add("experts", i, k, x, "share" if k == "gpu_share" else "")
            elif isinstance(v, list):
                for i, x in enumerate(v):
                    add("expert_layer", i, k, x, "max/mean" if "max_over_mean" in k
                        else "mean/max")
            else:
                add("experts", None, k, v)
    _provenance_rows(add, d["provenance"])
    return rows


def _summary_rows(add, summary: dict) -> None:
    """``csv_rows``' rows of the ``summary`` part, through ``add(section, item, metric,
    value, unit)``."""
    for k, v in summary.items():
        if k == "evidence":  # what the verdicts left out: one row per line
            for i, line in enumerate(v):
                add("summary", i, k, line, "")
        elif k == "inputs":  # what the verdicts stood on: one row per field
            for f, x in (v or {}).items():
                add("summary", f, k, x, "Hz" if f == "rate_hz" else "")
        elif k == "hot_story":  # one row per set: its windows and its work against the rest
            for part in v["sets"]:
                add("summary", ",".join(str(g) for g in part["gpus"]), "hot_story_windows",
                    part["windows"], "windows")
                add("summary", ",".join(str(g) for g in part["gpus"]), "hot_story_times",
                    part["times"], "x the rest's work")
        elif isinstance(v, dict):
            for p, x in v.items():
                unit = "s" if k == "phase_time_s" else ("share" if k in (
                    "phase_share", "phase_shares") else "windows")
                add("summary", p, k, x, unit)
        else:
            add("summary", None, k, v)


def _provenance_rows(add, p: dict) -> None:
    """``csv_rows``' rows of the ``provenance`` part ``p``, through ``add``."""
    for k in ("tealeaves_version", "python", "driver", "collector"):
        add("provenance", None, k, p[k])
    for k in ("hosts", "gpu_names"):
        for i, v in enumerate(p[k]):
            add("provenance", i, k[:-1], v)
    for src in p["sources"]:
        for k in ("path", "bytes", "sha256"):
            add("provenance", src["role"], k, src[k])
    c = p["classifier"]
    for k in ("labeller", "kind", "training_traces", "training_windows"):
        add("provenance", "classifier", k, c[k])
    for k, v in (c["held_out"] or {}).items():
        add("provenance", "classifier held-out", k, v)


def to_csv(report: Report) -> str:
    """The report as CSV text (``csv_rows``, header first)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["schema_version", "section", "item", "metric", "value",
                                        "unit"], lineterminator="\n")
    w.writeheader()
    w.writerows(safe_row(r) for r in csv_rows(report))  # no formula from a name (OWASP)
    return buf.getvalue()


__all__ = ["FORMATS", "SCHEMA_VERSION", "Report", "ReportError", "ReportInput", "Source",
           "build_report", "csv_rows", "from_store", "from_trace", "read_store",
           "schema", "to_csv", "to_json"]
