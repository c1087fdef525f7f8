"""data: the sample schema, the embedded SQLite store, and trace/label files.

Public surface: ``metrics`` (the one metric table: units, DCGM fields, exported and other
tools' names), ``schema`` (columns, ``conform``), ``store.SampleStore``, ``traces`` (Parquet
traces, label CSVs) and ``bundled_trace_path``.
"""

from __future__ import annotations

from pathlib import Path

TRACES_DIR = Path(__file__).resolve().parent / "traces"


def bundled_trace_path() -> Path:
    """The real two-GPU H200 trace shipped with tealeaves (the dashboard's default input)."""
    return TRACES_DIR / "h200x2_workload_v1.parquet"


def bundled_labels_path() -> Path:
    """Ground-truth label CSV of the bundled trace."""
    return TRACES_DIR / "h200x2_workload_v1.labels.csv"
