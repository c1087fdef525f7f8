"""tealeaves' own CSV (a header of the sample schema's column names) read into sample
records."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from tealeaves.data.import_common import (
    _RE_NUMBER,
    _check_header,
    _csv_fields,
    _lines,
    _number,
    _scaled,
    _short,
)
from tealeaves.data.schema import COLUMNS, MAX_GPUS, METRIC_NAMES, valid_entity


def _is_tealeaves_header(fields: Sequence[str]) -> bool:
    return "timestamp" in fields and "gpu" in fields and all(f in COLUMNS for f in fields)


def _entity(tok: str) -> int:
    """A tealeaves file's ``gpu`` cell: a GPU index or a MIG entity number
    (``data.schema.mig_entity``).

    Raises:
        ValueError: neither (names the value).
    """
    t = tok.strip()
    if re.fullmatch(r"\d{1,9}", t, re.ASCII) and valid_entity(np.array([float(t)]))[0]:
        return int(t)
    raise ValueError(f"gpu {tok!r} is neither a GPU index 0-{MAX_GPUS - 1} nor a MIG entity "
                     f"number")


def _parse_tealeaves_csv(text: str, *, host: str
                         ) -> tuple[list[dict], int, list[tuple[int, str]]]:
    header: list[str] | None = None
    records: list[dict] = []
    skipped: list[tuple[int, str]] = []
    for n, line in _lines(text):
        s = line.strip()
        if not s:
            continue
        fields = _csv_fields(s)
        if header is None:
            if _is_tealeaves_header(fields):
                _check_header(fields, n)
                header = fields
            else:
                skipped.append((n, f"not data (no tealeaves CSV header yet): {_short(s)}"))
            continue
        if len(fields) != len(header):
            skipped.append((n, f"expected {len(header)} fields, got {len(fields)}: {_short(s)}"))
            continue
        row = dict(zip(header, fields, strict=True))
        try:
            if not _RE_NUMBER.match(row["timestamp"].lstrip("-")):
                raise ValueError(f"bad timestamp {row['timestamp']!r}")
            rec: dict = {"gpu": _entity(row["gpu"]), "timestamp": float(row["timestamp"]),
                         "host": row.get("host") or host, "uuid": row.get("uuid", ""),
                         "_line": n}
            if not math.isfinite(rec["timestamp"]):
                raise ValueError("timestamp not finite")
            if row.get("monotonic"):
                if not _RE_NUMBER.match(row["monotonic"].lstrip("-")):
                    raise ValueError(f"bad monotonic {row['monotonic']!r}")
                rec["monotonic"] = float(row["monotonic"])
            for col in METRIC_NAMES:
                if col in row:
                    v = math.nan if row[col] in ("", "nan", "NaN") else _number(row[col])
                    rec[col] = _scaled(col, v, 1.0)
        except ValueError as exc:
            skipped.append((n, f"bad value ({exc}): {_short(s)}"))
            continue
        records.append(rec)
    return records, len(records), skipped
