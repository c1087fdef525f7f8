"""The plain ``nvidia-smi`` table imported: the tables ``data.smi_table`` reads turned into
sample records and device facts, undated tables placed like the other untimed formats."""

from __future__ import annotations

import math
from datetime import tzinfo

from tealeaves.data import smi_table
from tealeaves.data.import_common import (
    BLANK,
    _anchor,
)
from tealeaves.data.wallclock import LocalClock


def _parse_table(text: str, *, host: str, zone: tzinfo | LocalClock, start: float | None,
                 end: float, interval: float) -> tuple[list[dict], int, list[tuple[int, str]], dict]:
    """The plain ``nvidia-smi`` table(s) in ``text`` (``data.smi_table``): records, rows read,
    skipped lines and ``{"devices": [...], "notes": [...]}``.  An undated table is one
    instant placed like the other untimed formats (``_anchor``)."""
    read = smi_table.parse_tables(text, zone)
    skipped = list(read.skipped)
    if start is None:  # a start time given places them where the caller says
        read.records = _undated_among_dated(read.records, skipped)
    undated = sorted({r["_table"] for r in read.records if "timestamp" not in r})
    t0 = _anchor(start, end, len(undated), interval)
    slot = {t: i for i, t in enumerate(undated)}
    records = []
    for r in read.records:
        rec = {"host": host, "gpu": r["gpu"], "uuid": "", "_line": r["_line"]}
        for col in smi_table.READINGS:
            rec[col] = BLANK if col in r["blank"] else r[col]
        if "timestamp" in r:
            rec["timestamp"] = r["timestamp"]
        else:
            rec["timestamp"] = t0 + slot[r["_table"]] * interval
            rec["_placed"] = True
        records.append(rec)
    devices = [{"host": host, "uuid": "", "max_sm_clock_mhz": math.nan, **d}
               for d in read.devices.values()]
    notes = []
    if read.tables > 1:
        notes.append(f"{read.tables} tables read, one instant each")
    if read.mig_rows:
        notes.append(f"MIG devices section: {read.mig_rows} instance row"
                     f"{'s' if read.mig_rows != 1 else ''} counted, not read (a row carries "
                     f"only the instance's memory)")
    if read.process_rows:
        notes.append(f"Processes section: {read.process_rows} process"
                     f"{'es' if read.process_rows != 1 else ''} not read")
    if records:
        notes.append("fan and performance state are printed but not stored (not sample "
                     "columns)")
    return records, len(records), skipped, {"devices": devices, "notes": notes,
                                                 "dated": read.dated}


def _undated_among_dated(records: list[dict], skipped: list[tuple[int, str]]) -> list[dict]:
    """Refuse the GPU rows of undated tables in a file whose other tables are dated (when no
    start time is given: those rows would be placed by the file's mtime).

    Such a file carries its own times: placing an undated table at the file's modification
    time (or a start time) would put it hours or months away from the rest, and where it
    falls among the dated tables is not known.  Its rows are appended to ``skipped`` with
    the reason; a file with no dated table keeps them all (placed like other untimed files).

    Returns:
        The records kept.
    """
    if not any("timestamp" in r for r in records):
        return records
    kept = []
    for r in records:
        if "timestamp" in r:
            kept.append(r)
        else:
            why = (f"GPU {r['gpu']} row of table {r['_table'] + 1}, which has no date line "
                   f"while the file's other tables do: its time is not known; row refused")
            skipped.append((r["_line"], why))
    return kept
