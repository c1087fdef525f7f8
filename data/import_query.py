"""``nvidia-smi --query-gpu=... --format=csv`` read into sample records: the query names
tealeaves reads (``QUERY_COLUMNS``, from the metric table), the units a header prints
(``_header_units``), the header recogniser (``_is_query_header``, also used by format
detection) and the parser (``_parse_query``), GPUs told apart by index, uuid, bus id or place."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo

from tealeaves.data.import_common import (
    BLANK,
    _anchor,
    _blank_text,
    _check_header,
    _csv_fields,
    _Cycles,
    _gpu_index,
    _HeaderError,
    _lines,
    _number,
    _scaled,
    _short,
)
from tealeaves.data.metrics import smi_query_fields
from tealeaves.data.schema import MAX_GPUS, METRIC_BY_NAME
from tealeaves.data.wallclock import LocalClock

#: A --query-gpu field name as nvidia-smi documents it (``--help-query-gpu``), any case: most
#: are lower-case, some camelCase (``pci.baseClass``, ``...heterogenous_multivGPU``).
_RE_QUERY_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*(?:\s*\[[^\]]*\])?$")
_RE_QUERY_TS = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?$", re.ASCII)


def _is_query_header(fields: Sequence[str]) -> bool:
    if len(fields) < 1 or not all(_RE_QUERY_NAME.match(f) for f in fields):
        return False
    names = [_split_unit(f)[0] for f in fields]
    known = sum(1 for n in names if n in _QUERY_KNOWN or n.split(".")[0] in _QUERY_PREFIXES)
    # a few known names suffice: the full field list (200+) is mostly names tealeaves does not
    # read (pci.baseClass, vgpu_driver_capability..., driver_version)
    return known >= max(1, min(3, len(names) // 2)) and (
        "." in "".join(names) or "timestamp" in names or "index" in names or "uuid" in names)


#: query name -> (schema column, factor, expected unit, priority: lower wins), from the metric
#: table (``data.metrics``, the rows' ``smi_query``).
QUERY_COLUMNS: dict[str, tuple[str, float, str, int]] = smi_query_fields()
_QUERY_ID = {"timestamp", "index", "uuid", "gpu_uuid", "name", "pci.bus_id"}
_QUERY_KNOWN = set(QUERY_COLUMNS) | _QUERY_ID | {"pstate", "count", "serial", "gpu_name",
                                                  "driver_version", "vbios_version"}
_QUERY_PREFIXES = {"utilization", "memory", "power", "clocks", "temperature", "fan", "pcie",
                   "clocks_throttle_reasons", "clocks_event_reasons", "ecc", "enforced",
                   "pci", "mig", "compute_mode", "persistence_mode", "display_mode", "gom",
                   "inforom", "retired_pages", "encoder", "accounting", "driver_model"}
#: --query-gpu fields that state a device fact: (query name, ``DEVICE_COLUMNS`` column,
#: factor from the printed unit).  ``memory.total`` is MiB like ``memory.used``.
_QUERY_FACTS: tuple[tuple[str, str, float], ...] = (
    ("name", "name", 1.0), ("gpu_name", "name", 1.0),
    ("power.limit", "power_limit_w", 1.0), ("enforced.power.limit", "power_limit_w", 1.0),
    ("power.max_limit", "_max_power_w", 1.0),
    ("clocks.max.sm", "max_sm_clock_mhz", 1.0), ("clocks.max.graphics", "_max_gr_mhz", 1.0),
    ("memory.total", "mem_total_bytes", float(2**20)),
)
_QUERY_FACT_UNITS = {"power.limit": "W", "enforced.power.limit": "W", "power.max_limit": "W",
                     "clocks.max.sm": "MHz", "clocks.max.graphics": "MHz",
                     "memory.total": "MiB"}
_QUERY_TS_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S")
_RE_VALUE_UNIT = re.compile(r"^([0-9.eE+-]+)\s*([A-Za-z%/]+)?$")


def _split_unit(field_name: str) -> tuple[str, str | None]:
    m = re.match(r"^(.*?)\s*\[([^\]]*)\]\s*$", field_name)
    if m:
        return m.group(1).strip().lower(), m.group(2).strip()
    return field_name.strip().lower(), None


#: A unit a --query-gpu header may print -> its factor to the unit tealeaves reads the field
#: in (the metric table's ``smi_query`` unit; ``""`` for temperature.gpu, read in degrees C).
#: Binary prefixes are powers of 2**10, decimal ones of 10**3 (MB = 10**6 B).
_UNIT_FACTORS: dict[str, dict[str, float]] = {
    "MiB": {"MiB": 1.0, "KiB": 2.0**-10, "GiB": 2.0**10, "B": 2.0**-20,
            "MB": 1e6 / 2**20, "GB": 1e9 / 2**20},
    "W": {"W": 1.0, "kW": 1e3, "mW": 1e-3},
    "MHz": {"MHz": 1.0, "GHz": 1e3, "kHz": 1e-3},
    "%": {"%": 1.0},
    "": {"": 1.0, "C": 1.0, "°C": 1.0},
}


def _header_units(fields: Sequence[str], line: int | None) -> dict[str, tuple[str, float]]:
    """The units a --query-gpu header prints for the fields tealeaves reads: ``{query name:
    (unit its values may print, factor to the field's unit)}``; a field without a unit is
    left out (read in its own unit).

    Raises:
        _HeaderError: a read field's unit is not one ``_UNIT_FACTORS`` converts (names the
            field, its unit and the units known).
    """
    out: dict[str, tuple[str, float]] = {}
    for raw in fields:
        name, unit = _split_unit(raw)
        if unit is None:
            continue
        want = (QUERY_COLUMNS[name][2] if name in QUERY_COLUMNS
                else _QUERY_FACT_UNITS.get(name))
        if want is None:
            continue
        known = _UNIT_FACTORS.get(want, {want: 1.0})
        if unit not in known:
            where = f"line {line}: " if line else ""
            raise _HeaderError(f"{where}field {raw.strip()!r}: unit {unit!r} is not one "
                               f"tealeaves converts (it reads {name} in "
                               f"{', '.join(repr(u) for u in known if u)})")
        out[name] = (unit, known[unit])
    return out


def _query_value(tok: str, unit: str) -> float:
    t = tok.strip()
    if _blank_text(t):
        return BLANK
    m = _RE_VALUE_UNIT.match(t)
    if not m:
        raise ValueError(f"not a number: {tok!r}")
    if m.group(2) is not None and m.group(2) != unit:
        raise ValueError(f"unit {m.group(2)!r}, expected {unit!r}")
    return _number(m.group(1))


def _parse_query(text: str, *, host: str, zone: tzinfo, start: float | None, end: float,
                 interval: float, columns: Sequence[str] | None,
                 clock: LocalClock | None = None
                 ) -> tuple[list[dict], int, list[tuple[int, str]]]:
    clock = clock or LocalClock(zone)
    header: list[str] | None = ([_split_unit(c)[0] for c in columns] if columns else None)
    units = _header_units(columns, None) if columns else {}
    if header:
        _check_header(header, None)
    records: list[dict] = []
    skipped: list[tuple[int, str]] = []
    cycles = _Cycles()
    gpus = _GpuKeys()
    devices: dict[int, dict] = {}
    fact_rows: list[dict] = []
    for n, line in _lines(text):
        s = line.strip()
        if not s:
            continue
        fields = _csv_fields(s)
        if "," in s and _is_query_header(fields):
            header = [_split_unit(f)[0] for f in fields]
            _check_header(header, n)
            units = _header_units(fields, n)
            cycles.new_block()
            continue
        if header is None:
            skipped.append((n, f"not data (no --query-gpu header; give --columns): {_short(s)}"))
            continue
        if len(fields) != len(header):
            skipped.append((n, f"expected {len(header)} fields, got {len(fields)}: {_short(s)}"))
            continue
        row = dict(zip(header, fields, strict=True))
        try:
            rec = _query_readings(row, units, host, n)
            ts = _query_time(row, clock)
            bus = row.get("pci.bus_id", "")
            gpu = gpus.gpu(row, rec, ts, bus, n)
            if gpu >= MAX_GPUS:
                raise ValueError(f"GPU {gpu} of one instant is past the {MAX_GPUS} read")
            rec["gpu"] = gpu
            if ts is not None:
                rec["timestamp"] = ts
                rec["_wall"] = True
            else:
                rec["_instant"] = cycles.place(gpu)
            facts = _query_facts(row, units, bus)
            if facts:
                devices.setdefault(gpu, {}).update(facts)
            fact_rows.append(facts)
        except (ValueError, OverflowError) as exc:
            skipped.append((n, f"bad value ({exc}): {_short(s)}"))
            continue
        records.append(rec)
    records = _short_sweeps(records, skipped)
    t0 = _anchor(start, end, cycles.count, interval)
    for r in records:
        if "_instant" in r:
            r["timestamp"] = t0 + r.pop("_instant") * interval
            r["_placed"] = True
    return records, len(records), skipped, _query_extra(records, header, gpus.keys, devices,
                                                        fact_rows, host)


def _query_readings(row: dict[str, str], units: dict[str, tuple[str, float]], host: str,
                    n: int) -> dict:
    """A --query-gpu row's record: its readings (``QUERY_COLUMNS``, the lower priority of two
    fields for one column winning) in the schema's units, its uuid and line number.

    Raises:
        ValueError: a value that is not a number in the expected unit, or out of range.
    """
    rec: dict = {"host": host, "uuid": row.get("uuid", row.get("gpu_uuid", "")), "_line": n}
    best: dict[str, int] = {}
    for name, (target, factor, unit, prio) in QUERY_COLUMNS.items():
        if name in row and prio < best.get(target, 99):
            unit, conv = units.get(name, (unit, 1.0))
            rec[target] = _scaled(target, _query_value(row[name], unit), factor * conv)
            best[target] = prio
    return rec


def _query_time(row: dict[str, str], clock: LocalClock) -> float | None:
    """A --query-gpu row's ``timestamp`` (local time, read through ``clock``) as UTC epoch
    seconds; None when the row has no timestamp field.

    Raises:
        ValueError: a malformed timestamp, or a local time the zone's clocks skipped.
    """
    if "timestamp" not in row:
        return None
    if not _RE_QUERY_TS.match(row["timestamp"]):
        raise ValueError(f"bad timestamp {row['timestamp']!r}")
    for fmt in _QUERY_TS_FORMATS:
        try:
            dt = datetime.strptime(row["timestamp"], fmt)
            break
        except ValueError:
            continue
    else:
        raise ValueError(f"bad timestamp {row['timestamp']!r}")
    ts = clock.epoch(dt)
    if ts is None:
        raise ValueError(clock.gap_reason(dt))
    return ts


@dataclass
class _GpuKeys:
    """How a --query-gpu file's rows are told apart as GPUs, row after row: by index, by
    uuid / bus id (``uuid_order``), by place among the rows of one timestamp (``instant``:
    ``[timestamp, next place, first line]``) or by name (``names_seen``); ``keys`` collects
    the ways used (``ImportResult.gpu_key``)."""

    uuid_order: dict[tuple, int] = field(default_factory=dict)
    names_seen: dict[str, int] = field(default_factory=dict)
    instant: list | None = None
    keys: set[str] = field(default_factory=set)

    def gpu(self, row: dict[str, str], rec: dict, ts: float | None, bus: str, n: int) -> int:
        """The GPU number of row ``row`` (line ``n``; sets ``rec["_sweep"]`` for a GPU
        numbered by place).

        Raises:
            ValueError: a bad index, or a blank id in a file that tells GPUs apart by id.
        """
        if "index" in row:
            gpu = _gpu_index(row["index"])
            self.keys.add("index")
        elif ids := [k for k in (("uuid", rec["uuid"]), ("bus", bus))
                     if k[1] and not _blank_text(k[1])]:
            gpu = _gpu_by_id(self.uuid_order, ids)
            self.keys.add("uuid" if ids[0][0] == "uuid" else "pci.bus_id")
        elif {"uuid", "gpu_uuid", "pci.bus_id"} & row.keys():
            # the file tells GPUs apart by id: a row whose id is blank is no GPU known
            raise ValueError("its uuid / pci.bus_id is blank: which GPU it is is not "
                             "known")
        elif ts is not None:
            # one query instant: a run of rows printed with the same timestamp (one
            # sweep over the GPUs); a GPU is its place in the run
            if self.instant is None or row["timestamp"] != self.instant[0]:
                self.instant = [row["timestamp"], 0, n]
            gpu = self.instant[1]
            self.instant[1] += 1
            rec["_sweep"] = self.instant[2]
            self.keys.add("name and place" if gpu else "single")
        else:
            name = row.get("name", row.get("gpu_name", ""))
            if name and name not in self.names_seen:
                self.names_seen[name] = len(self.names_seen)
            gpu = self.names_seen.get(name, 0) if len(self.names_seen) > 1 else 0
            self.keys.add("name" if len(self.names_seen) > 1 else "none")
        return gpu


def _query_facts(row: dict[str, str], units: dict[str, tuple[str, float]], bus: str
                 ) -> dict:
    """The device facts a --query-gpu row states (``_QUERY_FACTS``, ``DEVICE_COLUMNS``
    names, in their units; a value that does not read is left out) and its bus id."""
    facts = {}
    for qname, col, factor in _QUERY_FACTS:
        if qname in row and not _blank_text(row[qname]):
            if col == "name":
                facts[col] = row[qname].strip()
            else:
                unit, conv = units.get(qname, (_QUERY_FACT_UNITS.get(qname, ""), 1.0))
                try:
                    v = _query_value(row[qname], unit) if unit else _number(row[qname])
                except ValueError:
                    continue
                if v is not BLANK and math.isfinite(v):
                    facts[col] = v * factor * conv
    if bus and not _blank_text(bus):
        facts["pci_bus_id"] = bus
    return facts


def _query_extra(records: list[dict], header: list[str] | None, keys: set[str],
                 devices: dict[int, dict], fact_rows: list[dict], host: str) -> dict:
    """What a --query-gpu parse found beside its records: ``{"gpu_key", "not_read",
    "devices", "fields"}`` (an inventory of facts only, one row per GPU, read as such)."""
    key = next((k for k in ("index", "uuid", "pci.bus_id", "name and place", "name",
                            "single", "none") if k in keys), None)
    read = set(header or []) if records else set()
    known = set(QUERY_COLUMNS) | _QUERY_ID | {f[0] for f in _QUERY_FACTS}
    not_read = sorted(f for f in read if f not in known and f.split(".")[0] != "timestamp")
    metrics = any(k in METRIC_BY_NAME for r in records for k in r)
    if key == "none" and not metrics and len(fact_rows) > 1 and all(fact_rows):
        # an inventory (name, memory.total, ... and no reading): one sweep, a row per GPU
        devices = dict(enumerate(fact_rows))
        key = "inventory"
    devs = [{"host": host, "gpu": g, "uuid": "", **d} for g, d in sorted(devices.items())]
    return {"gpu_key": key, "not_read": not_read, "devices": devs, "fields": sorted(read)}


def _gpu_by_id(numbers: dict[tuple[str, str], int], ids: list[tuple[str, str]]) -> int:
    """The GPU number of a --query-gpu row told apart by its ids (``("uuid", ...)``,
    ``("bus", ...)``, the non-blank ones): the number either id already has, else the next
    free one (0, 1, ... in order of first appearance).  Both ids are recorded, so a GPU whose
    uuid is blank in one row keeps its number by its bus id."""
    gpu = next((numbers[k] for k in ids if k in numbers), None)
    if gpu is None:
        gpu = len(set(numbers.values()))
    for k in ids:
        numbers.setdefault(k, gpu)
    return gpu


def _short_sweeps(records: list[dict], skipped: list[tuple[int, str]]) -> list[dict]:
    """Refuse the rows of short sweeps of a --query-gpu CSV whose GPUs are numbered by place.

    Without an index, uuid or pci.bus_id field a row's GPU is its place among the rows
    printed with one timestamp (``_sweep``: the sweep's first line).  A sweep with fewer rows
    than the file's fullest one lacks a GPU (nvidia-smi printed an error line instead, or the
    row was refused), and which one is not known: numbering its rows by place would store a
    GPU's readings as another's.  Its rows are appended to ``skipped`` with the reason.

    Returns:
        The records kept (``_sweep`` removed).
    """
    sizes: dict[int, int] = {}
    for r in records:
        if "_sweep" in r:
            sizes[r["_sweep"]] = sizes.get(r["_sweep"], 0) + 1
    full = max(sizes.values(), default=0)
    kept = []
    for r in records:
        sweep = r.pop("_sweep", None)
        if sweep is not None and sizes[sweep] < full:
            why = (f"the sweep from line {sweep} (one timestamp) holds {sizes[sweep]} rows, "
                   f"a full one {full}, and the file has no index, uuid or pci.bus_id field: "
                   f"which GPU each row is is not known; row refused")
            skipped.append((r["_line"], why))
            continue
        kept.append(r)
    return kept
