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
import hashlib
import io
import json
import math
import platform
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from tealeaves.classifier.imbalance import hot_set_of
from tealeaves.classifier.mig import balance_line, load_balance, window_loads
from tealeaves.classifier.rules import PHASE_ORDER
from tealeaves.classifier.server_balance import (
    BALANCE_SERIES,
    HEATMAP_SERIES,
    balancedness_series,
    expert_heatmap,
    rank_spread,
    spread_line,
)
from tealeaves.classifier.summary import (
    GPU_COLUMNS,
    gpu_table,
    group_summary,
    hot_ceilings,
    imbalance_summary,
    phase_summary,
    server_summary,
    share_summary,
    top_imbalanced,
)
from tealeaves.classifier.windows import DEFAULT_WINDOW_S
from tealeaves.data.csvtext import safe_row

#: Version of the JSON and CSV layouts (``report_schema.json``); 2 added the hot set (every
#: hot GPU, with its shares of the work) and why, per hot GPU (``hot_ceilings``).
SCHEMA_VERSION = 2
SCHEMA_PATH = Path(__file__).with_name("report_schema.json")
#: Output formats ``write_report`` knows.
FORMATS = ("html", "pdf", "png", "csv", "json")
#: Reads of more samples than this show progress on the command line.
PROGRESS_AFTER_ROWS = 500_000
#: Store reads go in pieces of this many samples (keyset pages; each a progress step).
READ_CHUNK_ROWS = 200_000


class ReportError(ValueError):
    """A report cannot be made from these inputs (the message names the file or field)."""


@dataclass
class Source:
    """One input file of a report: ``role`` (trace, store, labels, experts, server_log)."""

    role: str
    path: Path

    def describe(self, hash_limit: int = 512 * 2**20) -> dict:
        """``role``, ``path``, ``bytes`` and ``sha256`` (None for a store, which changes while
        it is written, and over ``hash_limit`` bytes)."""
        try:
            n = self.path.stat().st_size
        except OSError:
            return {"role": self.role, "path": str(self.path), "bytes": None, "sha256": None}
        digest = None
        if n <= hash_limit and self.role != "store":  # a store is live: its hash would not last
            h = hashlib.sha256()
            with open(self.path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            digest = h.hexdigest()
        return {"role": self.role, "path": str(self.path), "bytes": n, "sha256": digest}


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
    if samples.empty:
        raise ReportError(f"{where}: no samples between {_utc(start)} and {_utc(end)} UTC "
                          f"(it holds {_utc(span[0])} to {_utc(span[1])})")
    per_gpu = samples.groupby([c for c in ("host", "gpu") if c in samples]).size()
    if per_gpu.max() < 2:  # one sweep (each GPU row may carry its own stamp)
        _one_sweep(where, samples, span, (start, end))
    events = store.server_events(start, end)
    metrics = store.server_metrics(start, end, names=BALANCE_SERIES)
    sources = [Source("store", Path(path))] if path is not None else []
    return ReportInput(samples, store.devices(), store.meta(),
                       events if len(events) else None, sources,
                       metrics if len(metrics) else None)


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


def _utc(t: float) -> str:
    return datetime.fromtimestamp(float(t), tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-4]


def _num(v) -> float | None:
    """JSON number or None (NaN, inf and missing are unknown, not 0)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _int(v) -> int | None:
    f = _num(v)
    return None if f is None else int(f)


def _text(v) -> str | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return str(v)


def _classifier_facts(labeller: str) -> dict:
    from tealeaves.classifier.labellers import model_dir
    from tealeaves.classifier.model import MODEL_STEM

    MODEL_DIR = Path(model_dir())

    out = {"labeller": labeller, "kind": None, "training_traces": None,
           "training_windows": None, "held_out": None}
    if labeller not in ("trained", "taught"):
        out["kind"] = "rules"
        return out
    try:
        meta = json.loads((MODEL_DIR / f"{MODEL_STEM}.json").read_text())
        out.update(kind=meta.get("kind"), training_traces=len(meta.get("corpus") or []) or None,
                   training_windows=meta.get("windows"))
    except (OSError, ValueError):
        pass
    try:
        val = json.loads((MODEL_DIR / f"{MODEL_STEM}.validation.json").read_text())
        h = val.get("held_out") or {}
        out["held_out"] = {"scheme": str(val.get("scheme", "")), "macro_f1": _num(h.get("macro_f1")),
                           "accuracy": _num(h.get("accuracy")),
                           "hot_gpu_accuracy": _num(h.get("hot_gpu_accuracy"))}
    except (OSError, ValueError):
        pass
    return out


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
    from tealeaves.classifier import classify_samples, score_against_labels
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
            windows = classify_samples(s, inp.devices if len(inp.devices) else None,
                                       window_s=window_s, labeller=labeller, groups=groups)
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
            sc = score_against_labels(windows, lab)
            if sc["labelled_windows"] == 0:
                raise ReportError(f"{labels}: no label interval overlaps the range "
                                  f"{_utc(t0)}-{_utc(t1)} UTC; labels of another trace?")
            label_part = {"file": str(labels), "labelled_windows": int(sc["labelled_windows"]),
                          "accuracy": _num(sc["accuracy"]),
                          "per_phase_accuracy": {k: _num(v) for k, v in
                                                 sc["per_phase_accuracy"].items()},
                          "hot_gpu_accuracy": _num(sc["hot_gpu_accuracy"]),
                          "skewed_windows": int(sc["skewed_windows"]),
                          "false_flag_rate": _num(sc["false_flag_rate"])}
            bar.update(1)
        if experts is not None:
            bar.update(1)
        if inp.server_events is not None and len(inp.server_events):
            ev = inp.server_events
            ts = pd.to_numeric(ev["timestamp"], errors="coerce")
            inp.server_events = ev[(ts >= t0) & (ts <= t1)]  # the range's events only
        data = _document(inp, windows, window_s, t0, t1, phases, imb, table, top,
                         label_part, expert_part, labels, experts, why)
        grouped = group_summary(windows)
        if grouped["applies"]:  # given, or roles detected: which groups were judged
            data["groups"] = _groups_part(grouped)
        if mig:
            data["mig_balance"] = [_mig_group(m) for m in mig]
        if inp.server_metrics is not None and len(inp.server_metrics):
            data.update(_server_balance(inp.server_metrics))
        if inp.screenshots:
            data["screenshots"] = [_screenshot(p, windows, t0, t1) for p in inp.screenshots]
        bar.update(1)
    return Report(data, windows, expert_arrays)


def _server_balance(frame: pd.DataFrame) -> dict:
    """The ``server_ranks`` and ``expert_balance`` parts from the server's ``/metrics``
    scrapes (``classifier.server_balance``); a part the scrapes cannot give is left out."""
    out: dict = {}
    spread = rank_spread(frame)
    if spread is not None:
        out["server_ranks"] = {
            "rank_label": spread["rank_label"], "scrapes": spread["scrapes"],
            "span": [float(t) for t in spread["span"]],
            "ranks": [{k: (v if k == "rank" else _num(v)) for k, v in r.items()}
                      for r in spread["ranks"]],
            "uneven_ranks": spread["uneven_ranks"],
            "spread": {k: _num(v) for k, v in spread["spread"].items()},
            "line": spread_line(spread)}
    heat = expert_heatmap(frame)
    if heat is not None:
        bal = balancedness_series(frame)
        out["expert_balance"] = {
            "source": HEATMAP_SERIES, "basis": heat["basis"],
            "span": [float(t) for t in heat["span"]], "layers": heat["layers"],
            "ranks": heat["ranks"],
            "counts": [[_num(v) for v in row] for row in heat["counts"]],
            "rank_share": [_num(v) for v in heat["share"]],
            "layer_balancedness": [_num(v) for v in heat["layer_balancedness"]],
            "balancedness": _num(heat["balancedness"]), "hot_rank": heat["hot_rank"],
            "server_balancedness": [{"timestamp": float(r.timestamp),
                                     "balancedness": _num(r.balancedness),
                                     "passes": _num(r.passes)}
                                    for r in bal.itertuples(index=False)]}
    return out


#: Half-width (s) of the span of windows a screenshot's moment is compared with.
SCREENSHOT_SPAN_S = 5.0


def _screenshot(shot: dict, windows: pd.DataFrame, t0: float, t1: float) -> dict:
    """One ``screenshots`` item: what the picture shows and its verdict per region, and,
    when its capture time falls in the range, the telemetry's verdict of the windows within
    ``SCREENSHOT_SPAN_S`` of it (the same rule, ``classifier.picture.verdict``) and whether
    they agree."""
    from tealeaves.classifier.picture import compare, verdict

    ts = shot.get("capture_ts")
    out = {"file": shot["file"], "tool": shot["tool"], "capture_ts": _num(ts),
           "gpus": [{"gpu": g["gpu"], "values": {k: _num(v) for k, v in g["values"].items()},
                     "confidence": {k: _num(v) for k, v in g["confidence"].items()}}
                    for g in shot["gpus"]],
           "regions": [{"name": r["name"], "gpus": r["gpus"],
                        "pattern": r["verdict"]["pattern"] if r["verdict"] else None,
                        "hot_set": r["verdict"]["hot_set"] if r["verdict"] else [],
                        "text": r["verdict"]["text"] if r["verdict"] else None}
                       for r in shot["regions"]],
           "limits": shot["regions"][0]["verdict"]["limits"] if shot["regions"][0]["verdict"]
           else None, "notes": list(shot["notes"]), "telemetry": None}
    if ts is None:
        out["notes"].append("no capture time in the picture's metadata or file name (a scrot "
                            "or GNOME name holds one): not compared with the telemetry")
        return out
    if not t0 - SCREENSHOT_SPAN_S <= ts <= t1 + SCREENSHOT_SPAN_S:
        out["notes"].append(f"taken at {_utc(ts)} UTC, outside the report's range: not "
                            f"compared with the telemetry")
        return out
    near = windows[(windows["end"] >= ts - SCREENSHOT_SPAN_S) &
                   (windows["start"] <= ts + SCREENSHOT_SPAN_S)]
    loads = {int(c[6:]): float(near[c].mean()) for c in near.columns
             if c.startswith("load_g") and c[6:].isdigit() and near[c].notna().any()}
    if loads:
        tele = verdict(loads)
        whole = shot["regions"][0]
        # compared only where the GPUs match (count and indices) and the loads agree too
        c = compare(whole["verdict"], whole.get("loads") or {}, loads,
                    [g["gpu"] for g in shot["gpus"]])
        out["telemetry"] = {"pattern": tele["pattern"], "hot_set": tele["hot_set"],
                            "windows": len(near), "text": tele["text"],
                            "disagreement": None if c["status"] == "agree" else c["text"]}
    return out


def _groups_part(g: dict) -> dict:
    """The ``groups`` part from ``classifier.summary.group_summary`` (JSON-ready: the role
    detection's measurements as numbers or null)."""
    return {"source": g["source"], "groups": g["groups"], "roles": g["roles"],
            "text": g["text"], "why": g["why"],
            "judged": [{k: j[k] for k in ("gpus", "name", "role", "imbalanced_windows",
                                          "hot_set", "hot_set_windows")}
                       for j in g["judged"]],
            "evidence": g["evidence"], "line": g["line"]}


def _mig_group(m: dict) -> dict:
    """One ``classifier.mig.instance_balance`` group as JSON (``mig_balance`` items)."""
    return {"gpu": m["gpu"], "name": m["name"], "instances": [int(g) for g in m["instances"]],
            "mean_load": {k: _num(v) for k, v in m["mean_load"].items()},
            "windows": m["windows"], "uneven_windows": m["uneven_windows"],
            "busiest": m["busiest"], "idlest": m["idlest"], "spread": _num(m["spread"]),
            "uneven": m["uneven"], "line": balance_line(m)}


def _experts(experts, n_gpus: int, ep_size: int) -> tuple[dict, dict]:
    from tealeaves.classifier.experts import expert_summary
    from tealeaves.data.experts import ExpertDumpError, check_logical_count, load_expert_dump

    try:
        if isinstance(experts, np.ndarray):
            count, name = check_logical_count(experts, "logical_count"), "(array)"
        else:
            count, name = load_expert_dump(experts), str(experts)
    except (ExpertDumpError, ValueError) as exc:
        raise ReportError(str(exc)) from None
    try:
        summ = expert_summary(count, n_gpus, ep_size)
    except ValueError as exc:
        raise ReportError(f"--tp {n_gpus} / --ep {ep_size}: {exc}") from None
    gpu_load = np.asarray(summ["gpu_load"], dtype=float)
    share = np.asarray(summ["gpu_load_total"], dtype=float)
    part = {
        "file": name, "passes": int(summ["passes"]), "layers": int(summ["layers"]),
        "experts": int(summ["experts"]), "tokens": float(summ["tokens"]),
        "n_gpus": n_gpus, "ep_size": ep_size, "pure_tp": bool(summ["pure_tp"]),
        "balancedness": _num(summ["balancedness"]),
        "balancedness_greedy": _num(summ["balancedness_greedy"]),
        "hot_gpu": _int(summ["hot_gpu"]) if summ["hot_gpu"] is not None else None,
        "gpu_share": [_num(v) for v in share],
        "gpu_experts": _gpu_experts(int(summ["experts"]), n_gpus, ep_size),
        "layer_expert_max_over_mean": [_num(v) for v in summ["layer_expert_max_over_mean"]],
        "layer_balancedness": [_num(v) for v in summ["layer_balancedness"]],
        "layer_balancedness_greedy": [_num(v) for v in summ["layer_balancedness_greedy"]],
        "estimate_note": str(summ["estimate_note"]),
    }
    from tealeaves.classifier.experts import layer_loads

    arrays = {"layer_load": layer_loads(count), "gpu_load": gpu_load}
    return part, arrays


def _gpu_experts(n_experts: int, n_gpus: int, ep_size: int) -> list[str]:
    """Which experts each GPU holds under the contiguous EP placement: ``"0-47"`` (a slice
    of each at pure TP: ``"all (1/8 of each)"``)."""
    from tealeaves.classifier.experts import expert_to_ep_rank

    if ep_size == 1:
        return [f"all (1/{n_gpus} of each)" if n_gpus > 1 else "all"] * n_gpus
    rank = expert_to_ep_rank(n_experts, ep_size)
    per_rank = n_gpus // ep_size
    out = []
    for g in range(n_gpus):
        held = np.flatnonzero(rank == g // per_rank)
        text = f"{held[0]}-{held[-1]}"
        out.append(text if per_rank == 1 else f"{text} (1/{per_rank} of each)")
    return out


def _share(v) -> float | None:
    """A share in % (``classifier`` columns) as a JSON share, 0-1 (None when unknown)."""
    f = _num(v)
    return None if f is None else f / 100.0


def _story(story: dict) -> dict:
    """``classifier.hot_set.HotSetStory.to_json`` with its shares as JSON shares (0-1)."""
    return {**story, "sets": [{**p, "hot_share": _share(p["hot_share"]),
                               "cold_share": _share(p["cold_share"])}
                              for p in story["sets"]]}


def _shares_part(sh: dict) -> dict:
    """The summary's phase shares and what the verdicts stood on, from
    ``classifier.summary.share_summary``: ``phase_shares`` (``{phase: mean share of the
    windows' time, 0-1, null when unknown}``), ``phase_shares_source`` (``"calibrated"``,
    ``"rules' scores"`` or null) and ``inputs`` (``counters``, ``rate_hz`` per GPU, ``kind``,
    ``text``; null when the windows do not say)."""
    inputs = sh["inputs"]
    if inputs is not None:
        inputs = {"counters": [str(c) for c in inputs.get("counters") or []],
                  "rate_hz": _num(inputs.get("rate_hz")), "kind": _text(inputs.get("kind")),
                  "text": str(inputs.get("text") or "")}
    return {"phase_shares": {p: _num(v) for p, v in sh["shares"].items()},
            "phase_shares_source": _text(sh["source"]), "inputs": inputs}


def _document(inp, windows, window_s, t0, t1, phases, imb, table, top, label_part,
              expert_part, labels, experts, why) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("tealeaves")
    except PackageNotFoundError:
        ver = "unknown"
    dev = inp.devices.copy() if len(inp.devices) else pd.DataFrame(columns=["gpu"])
    if "gpu" in dev:
        dev = dev.dropna(subset=["gpu"]).assign(gpu=lambda d: d["gpu"].astype(int))
        dev = dev.drop_duplicates("gpu").set_index("gpu")
    gpus = []
    for g, row in table.iterrows():
        d = dev.loc[g] if g in dev.index else {}
        host = d.get("host") if len(d) else None
        if host is None and "host" in inp.samples:
            hs = inp.samples.loc[inp.samples["gpu"] == g, "host"].dropna()
            host = hs.iloc[0] if len(hs) else None
        item = {"gpu": int(g), "host": _text(host), "name": _text(d.get("name")) if len(d) else None,
                "uuid": _text(d.get("uuid")) if len(d) else None,
                "busy_share": _num(row["busy_share"]), "load_mean": _num(row["load_mean"])}
        item.update({c: _num(row[c]) for c, _ in GPU_COLUMNS})
        item["energy_j"] = _num(row["energy_j"])
        item["hot_s"] = float(row["hot_s"])
        gpus.append(item)
    tops = [{"rank": i + 1, "start": float(r.start), "end": float(r.end),
             "start_utc": _utc(r.start), "imbalance_ratio": _num(r.imbalance_ratio),
             "straggler_tax": _num(r.straggler_tax), "hot_gpu": _int(r.hot_gpu),
             "hot_set": list(hot_set_of(r.hot_set)), "hot_share": _share(r.hot_share),
             "cold_share": _share(r.cold_share), "top_gpu": _int(r.top_gpu),
             "imbalanced": bool(r.imbalanced),
             **{f"share_{p}": _num(getattr(r, f"share_{p}")) for p in PHASE_ORDER},
             "verdict": _text(r.verdict) or None}
            for i, r in enumerate(top.itertuples())]
    ceilings = [{"gpu": int(g), "windows": int(c["windows"]), "pipe": str(c["pipe"]),
                 "level": _num(c["level"]), "others": _num(c["others"]), "line": c["line"]}
                for g, c in why.items()]
    summary = {
        "window_s": float(window_s), "windows": phases["windows"],
        "phase_time_s": {k: _num(v) for k, v in phases["time_s"].items()},
        "phase_share": {k: _num(v) for k, v in phases["share"].items()},
        "decode_windows": imb["decode_windows"],
        "decode_balancedness": _num(imb["balancedness"]),
        "imbalance_ratio": _num(imb["imbalance_ratio"]),
        "straggler_tax": _num(imb["straggler_tax"]),
        "imbalanced_windows": imb["imbalanced_windows"],
        "hot_set": [int(g) for g in imb["hot_set"]],
        "hot_set_windows": int(imb["hot_set_windows"]),
        "hot_share": _share(imb["hot_share"]),
        "cold_share": _share(imb["cold_share"]),
        "hot_sets": {str(k): int(v) for k, v in imb["hot_sets"].items()},
        "hot_gpu": imb["hot_gpu"],
        "hot_gpus": {str(k): v for k, v in imb["hot_gpus"].items()},
        "hot_pattern": imb["hot_pattern"], "hot_changes": imb["hot_changes"],
        "hot_text": imb["hot_text"], "hot_story": _story(imb["hot_story"]),
        "figure_windows": int(imb["figure_windows"]), "figures_text": imb["figures_text"],
        "labeller": str(windows.attrs.get("labeller", "unknown")),
        **_shares_part(share_summary(windows)),
    }
    srv = server_summary(inp.server_events)
    if srv is not None:
        srv = {k: (v if isinstance(v, int) else _num(v)) for k, v in srv.items()}
    sources = list(inp.sources)
    if labels is not None:
        sources.append(Source("labels", Path(labels)))
    if experts is not None and not isinstance(experts, np.ndarray):
        sources.append(Source("experts", Path(experts)))
    names = sorted({str(n) for n in dev.get("name", pd.Series(dtype=object)).dropna()})
    hosts = sorted({str(h) for h in inp.samples.get("host", pd.Series(dtype=object)).dropna()})
    meta = inp.meta or {}
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "tealeaves-imbalance-report",
        "generated_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "range": {"start": t0, "end": t1, "start_utc": _utc(t0), "end_utc": _utc(t1),
                  "span_s": t1 - t0},
        "summary": summary,
        "server": srv,
        "gpus": gpus,
        "top_windows": tops,
        "hot_ceilings": ceilings,
        "labels": label_part,
        "experts": expert_part,
        "provenance": {
            "tealeaves_version": ver,
            "python": platform.python_version(),
            "sources": [src.describe() for src in sources],
            "hosts": hosts,
            "gpu_names": names,
            "driver": _text(meta.get("driver")),
            "collector": _text(meta.get("collector")),
            "classifier": _classifier_facts(summary["labeller"]),
            "lines_refused": _refused(meta),
        },
    }


def _refused(meta: dict) -> dict | None:
    """The lines of the input file refused, not read (``load_trace``'s meta): their count and
    the first (line, reason); None for a store (its rows were refused when imported)."""
    if "skipped" not in meta:
        return None
    first = meta.get("first_skipped")
    return {"count": int(meta.get("skipped") or 0),
            "first_line": int(first[0]) if first else None,
            "first_reason": str(first[1]) if first else None}


# -- JSON and CSV -------------------------------------------------------------------------------


def schema() -> dict:
    """The JSON Schema of the JSON report (``$defs/csv_row`` is one row of the CSV)."""
    return json.loads(SCHEMA_PATH.read_text())


def to_json(report: Report) -> str:
    """The report as JSON text (``report_schema.json``; unknown values null)."""
    return json.dumps(report.data, indent=1, allow_nan=False) + "\n"


#: Units of the CSV's metrics (by metric name; others have none).
_UNITS = {"start": "epoch s", "end": "epoch s", "span_s": "s", "window_s": "s",
          "decode_balancedness": "mean/max", "imbalance_ratio": "max/mean",
          "straggler_tax": "share", "busy_share": "share", "load_mean": "%", "hot_s": "s",
          "energy_j": "J", "prefill_tokens": "tokens", "gen_throughput_tok_s": "token/s",
          "accept_len": "tokens/step", "running_req": "requests", "tokens": "tokens",
          "balancedness": "mean/max", "balancedness_greedy": "mean/max",
          "gpu_share": "share", "bytes": "B", "hot_share": "share", "cold_share": "share",
          "hot_set_windows": "windows", "share_idle": "share", "share_prefill": "share",
          "share_decode": "share", **{c: u for c, u in GPU_COLUMNS}}


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
        add("range", None, k, v)
    for k, v in d["summary"].items():
        if k == "inputs":  # what the verdicts stood on: one row per field
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
    p = d["provenance"]
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
    return rows


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
