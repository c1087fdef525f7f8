"""Traces on disk: Parquet sample files and ground-truth label CSVs.

A *trace* is a Parquet file holding a sample frame (``data.schema``) plus, in the file's
key/value metadata, the device rows (``tealeaves.devices``, JSON) and free-form facts
(``tealeaves.meta``, JSON: machine, driver, workload parameters).

Ground-truth labels are a CSV of intervals with header ``start,end,phase[,hot_gpu]``:
``start``/``end`` in UTC epoch seconds (``start < end``), ``phase`` one of ``PHASES``,
``hot_gpu`` the GPU index holding the extra load or empty when balanced; several hot GPUs are
written ``1;3;5;7`` (``read_labels`` then gives ``hot_gpu`` the lowest and ``hot_set``
"1,3,5,7").
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tealeaves.data.schema import COLUMNS, SchemaError, conform

PHASES: tuple[str, ...] = ("idle", "prefill", "decode", "mixed")
LABEL_COLUMNS: tuple[str, ...] = ("start", "end", "phase", "hot_gpu")


class TraceError(ValueError):
    """A trace or label file is missing, empty or corrupt; the message names the file."""


@dataclass
class Trace:
    """A sample frame with its device rows and facts.

    Attributes:
        samples: frame in the sample schema, rows sorted by (timestamp, gpu).
        devices: one row per GPU (``data.schema.DEVICE_COLUMNS``); may be empty.
        meta: free-form facts (machine, driver, workload parameters, date).
    """

    samples: pd.DataFrame
    devices: pd.DataFrame = field(default_factory=pd.DataFrame)
    meta: dict = field(default_factory=dict)


def write_trace(path: str | Path, trace: Trace) -> Path:
    """Write ``trace`` to a Parquet file (zstd), device rows and facts in its metadata."""
    path = Path(path)
    table = pa.Table.from_pandas(conform(trace.samples), preserve_index=False)
    extra = {
        b"tealeaves.devices": json.dumps(
            trace.devices.to_dict(orient="records") if not trace.devices.empty else []
        ).encode(),
        b"tealeaves.meta": json.dumps(trace.meta, default=str).encode(),
    }
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **extra})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="zstd")
    return path


def read_trace(path: str | Path, counts: dict | None = None) -> Trace:
    """Read a Parquet trace.

    Args:
        path: the file.
        counts: when given, filled as ``schema.conform`` does: ``{column: {"blank": n,
            "out_of_range": n}}`` of the values read as NaN.

    Raises:
        TraceError: the file is missing, empty, not Parquet, lacks the schema's required
            columns, or holds no samples.  The message names the file and the problem.
    """
    path = Path(path)
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: is a directory, not a trace file")
    if path.stat().st_size == 0:
        raise TraceError(f"{path}: file is empty")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        detail = " ".join(str(exc).split())  # arrow's messages can span lines
        raise TraceError(f"{path}: not a readable Parquet trace ({detail})") from exc
    try:
        samples = conform(table.to_pandas(), source=str(path), counts=counts)
    except SchemaError as exc:
        raise TraceError(str(exc)) from exc
    if samples.empty:
        raise TraceError(f"{path}: trace holds no samples")
    md = table.schema.metadata or {}
    try:
        devices = pd.DataFrame(json.loads(md.get(b"tealeaves.devices", b"[]")))
        meta = json.loads(md.get(b"tealeaves.meta", b"{}"))
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}: corrupt tealeaves metadata ({exc})") from exc
    return Trace(samples=samples[list(COLUMNS)], devices=devices, meta=meta)


def write_labels(path: str | Path, intervals: pd.DataFrame) -> Path:
    """Write label intervals (columns ``LABEL_COLUMNS``, optionally ``hot_set``) as CSV;
    ``hot_gpu`` empty when None, ``1;3;5;7`` when ``hot_set`` names several GPUs."""
    path = Path(path)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(LABEL_COLUMNS)
        for r in intervals.itertuples(index=False):
            hot = getattr(r, "hot_gpu", None)
            hot_s = "" if hot is None or (isinstance(hot, float) and math.isnan(hot)) else int(hot)
            many = str(getattr(r, "hot_set", "") or "")
            if "," in many:  # several hot GPUs: "1;3;5;7"
                hot_s = many.replace(",", ";")
            w.writerow([f"{r.start:.6f}", f"{r.end:.6f}", r.phase, hot_s])
    return path


def read_labels(path: str | Path, phases: tuple[str, ...] = PHASES) -> pd.DataFrame:
    """Read a ground-truth label CSV.

    Returns:
        Frame with ``start``, ``end`` (float epoch s), ``phase`` (str), ``hot_gpu``
        (float: GPU index, NaN when balanced or absent), sorted by ``start``.

    Args:
        path: the CSV.
        phases: the phase names accepted (``tealeaves evaluate`` takes idle/prefill/decode).

    Raises:
        TraceError: missing/empty file, missing header fields, a bad row (unknown phase,
            non-finite or reversed times, bad hot_gpu) or overlapping intervals; the message
            names the file and line.  Extra columns (e.g. ``workload``) are kept out.
    """
    path = Path(path)
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: is a directory, not a label CSV")
    try:
        return _read_labels(path, phases)
    except UnicodeDecodeError:
        raise TraceError(f"{path}: not a text CSV (undecodable bytes)") from None


def _read_labels(path: Path, phases: tuple[str, ...] = PHASES) -> pd.DataFrame:
    rows = []
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        if not header:
            raise TraceError(f"{path}: file is empty")
        missing = [c for c in ("start", "end", "phase") if c not in header]
        if missing:
            raise TraceError(f"{path}: line 1: header lacks {', '.join(missing)}")
        reader.fieldnames = header
        for lineno, rec in enumerate(reader, start=2):
            try:
                start, end = float(rec["start"]), float(rec["end"])
            except (TypeError, ValueError):
                start = end = math.nan
            if not (math.isfinite(start) and math.isfinite(end)):
                raise TraceError(f"{path}: line {lineno}: start/end are not finite numbers")
            phase = (rec.get("phase") or "").strip()
            if phase not in phases:
                raise TraceError(
                    f"{path}: line {lineno}: phase {phase!r} is not one of {', '.join(phases)}")
            if not end > start:
                raise TraceError(f"{path}: line {lineno}: end must be after start")
            hot_raw = (rec.get("hot_gpu") or "").strip()
            try:
                gpus = sorted({int(g) for g in re.split(r"[\s,;]+", hot_raw) if g})
            except ValueError:
                raise TraceError(f"{path}: line {lineno}: hot_gpu {hot_raw!r} is not an index "
                                 "(or indices: \"1;3;5;7\")") from None
            if any(g < 0 for g in gpus):
                raise TraceError(f"{path}: line {lineno}: hot_gpu {hot_raw!r} is negative")
            hot = float(gpus[0]) if gpus else math.nan
            rows.append((start, end, phase, hot, lineno, ",".join(map(str, gpus))))
    rows.sort(key=lambda r: r[0])
    for a, b in itertools.pairwise(rows):
        if b[0] < a[1] - 1e-6:
            raise TraceError(f"{path}: line {b[4]}: interval {b[0]:.3f}-{b[1]:.3f} ({b[2]}) "
                             f"overlaps line {a[4]} ({a[0]:.3f}-{a[1]:.3f}, {a[2]})")
    out = pd.DataFrame([r[:4] for r in rows], columns=list(LABEL_COLUMNS))
    out["hot_set"] = [r[5] for r in rows]
    return out


def label_at(labels: pd.DataFrame, times: pd.Series | list[float]) -> pd.DataFrame:
    """Ground truth at each time: columns ``phase`` (None outside every interval), ``hot_gpu``
    (the lowest hot index, NaN when balanced) and ``hot_set`` (``"1,3,5,7"``, ``""`` when
    balanced; from ``hot_gpu`` when the labels carry no set)."""
    t = np.asarray(times, dtype=float)
    starts = labels["start"].to_numpy()
    ends = labels["end"].to_numpy()
    idx = np.searchsorted(starts, t, side="right") - 1
    ok = (idx >= 0) & (t < ends[np.clip(idx, 0, None)]) if len(starts) else np.zeros(len(t), bool)
    safe = np.clip(idx, 0, max(len(starts) - 1, 0))
    phase = np.where(ok, labels["phase"].to_numpy()[safe] if len(starts) else None, None)
    hot = np.where(ok, labels["hot_gpu"].to_numpy()[safe] if len(starts) else np.nan, np.nan)
    if "hot_set" in labels:
        sets = labels["hot_set"].fillna("").astype(str).to_numpy()
    else:
        sets = np.array([str(int(h)) if np.isfinite(h) else ""
                         for h in labels["hot_gpu"].to_numpy(dtype=float)], dtype=object)
    hot_set = np.where(ok, sets[safe] if len(starts) else "", "")
    return pd.DataFrame({"phase": phase, "hot_gpu": hot.astype(float), "hot_set": hot_set})
