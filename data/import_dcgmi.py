"""``dcgmi dmon -e ...`` text read into sample records: ``DCGMI_FIELDS`` (from the metric
table), the ``#Entity`` header, GPU and GPU-I rows, a leading date-time when ``dcgmi`` printed
one."""

from __future__ import annotations

import re
from datetime import datetime, tzinfo

from tealeaves.data.import_common import (
    _anchor,
    _check_header,
    _Cycles,
    _gpu_index,
    _lines,
    _number,
    _scaled,
    _short,
)
from tealeaves.data.metrics import dcgmi_fields
from tealeaves.data.schema import mig_entity
from tealeaves.data.wallclock import LocalClock

_RE_DCGMI_HEADER = re.compile(r"^#\s*Entity\b", re.IGNORECASE)


#: dcgmi dmon field short name -> (schema column, factor), from the metric table
#: (``data.metrics``, the rows' ``dcgmi``, at the DCGM field's scale).  GRACT
#: (DCGM_FI_PROF_GR_ENGINE_ACTIVE) is its own column, ``gr_engine_active``, not gpu_util: it
#: is a different counter (and the one DCGM gives per MIG instance, where GPU_UTIL is N/A).
DCGMI_FIELDS: dict[str, tuple[str, float]] = dcgmi_fields()
_RE_DCGMI_ROW = re.compile(r"^([A-Za-z][A-Za-z-]*)\s+(\d+)(?:\s+(.*))?$", re.ASCII)
_RE_LEADING_TS = re.compile(
    r"^\[?(\d{4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)\]?\s+(?=[A-Za-z#])", re.ASCII)


def _leading_stamp(s: str, clock: LocalClock) -> tuple[float | None, str, str | None]:
    """A line's leading date-time (a ``dcgmi dmon`` line under ``ts``/``date``): ``(UTC epoch
    s or None, the rest of the line, why it is refused: a time the zone's clocks skipped)``."""
    m = _RE_LEADING_TS.match(s)
    if not m:
        return None, s, None
    try:
        dt = datetime.fromisoformat(m.group(1).replace("/", "-"))
    except ValueError:
        return None, s, None
    ts = clock.epoch(dt)
    return ts, s[m.end():], (clock.gap_reason(dt) if ts is None else None)


def _unread(not_read: set[str] | None, fields: list[str]) -> set[str] | None:
    """``not_read`` with ``fields`` outside ``DCGMI_FIELDS`` added (None stays None)."""
    if not_read is not None:
        not_read.update(f for f in fields if f not in DCGMI_FIELDS)
    return not_read


def _parse_dcgmi(text: str, *, host: str, zone: tzinfo, start: float | None, end: float,
                 interval: float, clock: LocalClock | None = None,
                 not_read: set[str] | None = None
                 ) -> tuple[list[dict], int, list[tuple[int, str]]]:
    """``dcgmi dmon`` text as ``(records, rows read, skipped)``; header fields outside
    ``DCGMI_FIELDS`` (``FP64A`` ...) go to ``not_read`` when given."""
    clock = clock or LocalClock(zone)
    fields: list[str] | None = None
    records: list[dict] = []
    skipped: list[tuple[int, str]] = []
    cycles = _Cycles()
    whole: set[int] = set()  # the GPU (not GPU-I) entities of the file
    for n, line in _lines(text):
        s = line.strip()
        if not s:
            continue
        ts, s, why = _leading_stamp(s, clock)
        if why:
            skipped.append((n, why))
            continue
        if _RE_DCGMI_HEADER.match(s):
            names = s.lstrip("#").split()[1:]
            _check_header([f.upper() for f in names], n)
            if names:
                fields = [f.upper() for f in names]
                cycles.new_block()
                not_read = _unread(not_read, fields)
            else:
                skipped.append((n, f"bad #Entity header: {_short(s)}"))
            continue
        if s.split()[0].upper() == "ID":
            continue  # the units line under #Entity ("ID", or "Id" in older dcgmi)
        mrow = _RE_DCGMI_ROW.match(s)
        if fields is None or not mrow:
            skipped.append((n, f"not data: {_short(s)}"))
            continue
        entity, ident, rest = mrow.group(1), mrow.group(2), (mrow.group(3) or "")
        kind = entity.upper().replace("_", "-")
        if kind not in ("GPU", "GPU-I"):
            what = "compute instance" if kind == "GPU-CI" else "entity"
            skipped.append((n, f"{what} {entity} {ident} not imported (GPU and GPU-I rows are)"))
            continue
        toks = rest.split()
        if len(toks) != len(fields):
            skipped.append((n, f"expected {len(fields)} fields, got {len(toks)}: {_short(s)}"))
            continue
        try:
            gpu = _gpu_index(ident, "GPU-I entity id" if kind == "GPU-I" else "gpu index")
            rec: dict = {"host": host, "gpu": gpu, "uuid": "", "_line": n}
            if kind == "GPU-I":  # its parent GPU is settled below, once every row is read
                rec["_gi"] = gpu
                gpu = ("GPU-I", gpu)
            else:
                whole.add(gpu)
            for name, tok in zip(fields, toks, strict=True):
                if name in DCGMI_FIELDS:
                    target, factor = DCGMI_FIELDS[name]
                    rec[target] = _scaled(target, _number(tok), factor)
        except ValueError as exc:
            skipped.append((n, f"bad value ({exc}): {_short(s)}"))
            continue
        if ts is not None:
            rec["timestamp"] = ts
        else:
            rec["_instant"] = cycles.place(gpu)
        records.append(rec)
    t0 = _anchor(start, end, cycles.count, interval)
    # dcgmi prints a GPU-I row without its GPU: with one GPU in the file it is that GPU's,
    # with several (or none) the parent is not known (DCGM numbers GPU-I entities host-wide)
    parent = next(iter(whole)) if len(whole) == 1 else None
    for r in records:
        if "_instant" in r:
            r["timestamp"] = t0 + r.pop("_instant") * interval
            r["_placed"] = True
        if "_gi" in r:
            gi = r.pop("_gi")
            r["gpu"] = mig_entity(parent, gi)
            r["uuid"] = f"MIG-GPU/{gi}"
    return records, len(records), skipped
