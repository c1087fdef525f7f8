"""The store's row writing: values made SQL's (``_nullable``), a time range's ``WHERE``
clause (``_time_range``), device facts merged (``_merge_devices``), and an import's sample and
server-metrics rows inserted with repeats passed over and conflicts counted
(``_insert_samples``, ``_insert_metrics``, ``_conflict``).  The caller
(``data.store.SampleStore``) holds the transaction."""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from tealeaves.data.device_facts import check_devices
from tealeaves.data.schema import COLUMNS, DEVICE_COLUMNS


def _nullable(v):
    """NaN and None become SQL NULL; numpy scalars become Python numbers."""
    if v is None:
        return None
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if hasattr(v, "item"):
        v = v.item()
        return None if isinstance(v, float) and math.isnan(v) else v
    return v


def _time_range(start: float | None, end: float | None) -> tuple[str, list[float]]:
    """`` WHERE`` clause (or "") and parameters for ``start <= timestamp <= end``."""
    where, params = [], []
    if start is not None:
        where.append("timestamp >= ?")
        params.append(float(start))
    if end is not None:
        where.append("timestamp <= ?")
        params.append(float(end))
    return (" WHERE " + " AND ".join(where) if where else ""), params


def _merge_devices(conn, frame: pd.DataFrame) -> list[str]:
    """Upsert device rows: a stated fact (not NULL, not "") replaces the stored one, an
    unstated one keeps it (``append_import``).  Returns ``check_devices``' lines on the
    power limits changed.

    Raises:
        device_facts.DeviceConflictError: a row states another uuid, name or power limit
            than the stored one of its (host, GPU) (nothing of the row is written).
    """
    if frame is None or frame.empty:
        return []
    changed = check_devices(conn, frame)
    frame = frame.copy()
    for col in DEVICE_COLUMNS:
        if col not in frame.columns:
            frame[col] = None
    rows = [tuple(None if v == "" else _nullable(v) for v in r)
            for r in frame[list(DEVICE_COLUMNS)].itertuples(index=False, name=None)]
    facts = [c for c in DEVICE_COLUMNS if c not in ("host", "gpu")]
    conn.executemany(
        f"INSERT INTO devices ({', '.join(DEVICE_COLUMNS)}) "
        f"VALUES ({', '.join('?' for _ in DEVICE_COLUMNS)}) ON CONFLICT (host, gpu) DO UPDATE "
        f"SET {', '.join(f'{c} = COALESCE(excluded.{c}, {c})' for c in facts)}", rows)
    return changed


#: Sample columns compared for conflicts: the readings and the GPU's uuid (``monotonic`` is
#: the reading host's own clock, not a reading).
_COMPARED = tuple(i for i, c in enumerate(COLUMNS) if c not in ("timestamp", "monotonic",
                                                                 "host", "gpu"))
_KEY = tuple(COLUMNS.index(c) for c in ("host", "gpu", "timestamp"))


def _conflict(row: tuple, others: list[tuple]) -> tuple | None:
    """The first ``(column, other value, this value)`` where ``row`` and one of ``others``
    (rows of the same host, GPU and instant) both hold a value and differ, or None (a row
    that adds other columns of that instant, ``dmon -s u`` beside ``-s p``, is no conflict)."""
    for other in others:
        for i in _COMPARED:
            a, b = other[i], row[i]
            if a is not None and b is not None and a != b:
                return COLUMNS[i], a, b
    return None


def _insert_samples(conn, frames: Iterable[pd.DataFrame]) -> dict:
    """Insert conformed sample frames, passing over rows stored already (every value the same)
    or coming twice, and counting the rows that conflict with a row stored or coming for the
    same host, GPU and instant (another value in a column both hold: both are kept).  The
    caller holds the transaction (``BEGIN IMMEDIATE``: no other writer between the look and
    the insert).

    Returns:
        ``{"stored", "repeats", "conflicts", "first_conflict", "near_stored"}``;
        ``first_conflict`` is None or ``{"host", "gpu", "timestamp", "column", "stored",
        "new"}``; ``near_stored`` lists ``[host, gpu]`` of the GPUs given new rows within
        ``NEAR_S`` of samples stored before this call (another file of that host and GPU:
        the same machine's next log, or another machine under the same host name).
    """
    placeholders = ", ".join("?" for _ in COLUMNS)
    stored = repeats = conflicts = 0
    first = None
    before = conn.execute("SELECT COALESCE(MAX(id), 0) FROM samples").fetchone()[0]
    near: set[tuple] = set()
    for frame in frames:  # a frame's rows are inserted before the next one looks: it finds
        if frame.empty:  # them stored (memory: one frame and the rows stored in its span)
            continue
        seen: set[tuple] = set()
        by_key: dict[tuple, list[tuple]] = {}
        lo, hi = float(frame["timestamp"].min()), float(frame["timestamp"].max())
        have = set(conn.execute(
            f"SELECT {', '.join(COLUMNS)} FROM samples WHERE timestamp >= ? AND "
            f"timestamp <= ?", (lo, hi)).fetchall())
        for old in have - seen:
            by_key.setdefault(tuple(old[i] for i in _KEY), []).append(old)
        rows = []
        for row in frame.itertuples(index=False, name=None):
            key = tuple(_nullable(v) for v in row)
            if key in have or key in seen:  # the same row, every value the same
                repeats += 1
                continue
            seen.add(key)
            at = tuple(key[i] for i in _KEY)
            clash = _conflict(key, by_key.get(at, []))
            if clash is not None:
                conflicts += 1
                if first is None:
                    first = {"host": at[0], "gpu": at[1], "timestamp": at[2],
                             "column": clash[0], "stored": clash[1], "new": clash[2]}
            by_key.setdefault(at, []).append(key)
            rows.append(key)
        conn.executemany(f"INSERT INTO samples ({', '.join(COLUMNS)}) VALUES "
                         f"({placeholders})", rows)
        stored += len(rows)
        if rows and before:
            near |= _near_stored(conn, rows, before, lo, hi)
    return {"stored": stored, "repeats": repeats, "conflicts": conflicts,
            "first_conflict": first, "near_stored": sorted([h, g] for h, g in near)}


#: How close (s) new rows of a host and GPU must come to rows stored before for the import
#: to say so: a minute, so a second file placed at its own modification time (no timestamps)
#: a moment after another machine's is seen, and a log's rotation is too.
NEAR_S = 60.0


def _near_stored(conn, rows: list[tuple], before: int, lo: float, hi: float) -> set[tuple]:
    """The ``(host, gpu)`` of ``rows`` (just inserted) that had rows stored (id at most
    ``before``) within ``NEAR_S`` of ``[lo, hi]``."""
    got = {(r[_KEY[0]], r[_KEY[1]]) for r in rows}
    old = conn.execute("SELECT DISTINCT host, gpu FROM samples WHERE id <= ? AND timestamp >= ? "
                       "AND timestamp <= ?", (before, lo - NEAR_S, hi + NEAR_S)).fetchall()
    return got & {tuple(o) for o in old}


def _insert_metrics(conn, frames: list[pd.DataFrame]) -> tuple[int, int]:
    """Insert server-metrics frames, passing over a (timestamp, name, labels) already stored
    or coming twice; ``(stored, repeats)``.  The caller holds the transaction."""
    cols = ["timestamp", "name", "labels", "value", "rate_per_s", "kind"]
    stored = repeats = 0
    seen: set[tuple] = set()
    for frame in frames:
        lo, hi = float(frame["timestamp"].min()), float(frame["timestamp"].max())
        have = set(conn.execute("SELECT timestamp, name, labels FROM server_metrics WHERE "
                                "timestamp >= ? AND timestamp <= ?", (lo, hi)).fetchall())
        rows = []
        for r in frame[cols].itertuples(index=False, name=None):
            row = tuple(_nullable(v) for v in r)
            if row[:3] in have or row[:3] in seen:
                repeats += 1
                continue
            seen.add(row[:3])
            rows.append(row)
        conn.executemany("INSERT INTO server_metrics VALUES (?, ?, ?, ?, ?, ?)", rows)
        stored += len(rows)
    return stored, repeats
