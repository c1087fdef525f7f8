"""Embedded sample store: one SQLite file in WAL mode, one writer, any number of readers.

WAL journaling lets dashboards read while the collector writes (readers see the last committed
transaction and never block the writer).  Each ``append`` is one transaction: a batch is stored
whole or not at all, so bad input never loses what is already stored.

Rows get an increasing integer ``id``; readers poll with ``read_since(cursor)`` and keep the
returned cursor, so a live view asks only for samples newer than what it has; ``iter_range``
pages through a time range by rows (cost follows the samples, never the span).

A store is ours by its identity (``PRAGMA application_id`` = ``APPLICATION_ID``, ``user_version``
= ``STORE_VERSION``): any other file is refused before anything is written to it, a damaged one
gives one line with the ``sqlite3 .recover`` command, and a collector claims a host's writing
with a lock beside the file (``claim_writer``); a file with several names (hard links) is
not written (``_one_name``: SQLite keeps a write-ahead log per name).

The checks and the layout of opening a store live in ``data.store_open``, the row writing
(repeats passed over, conflicts counted) in ``data.store_rows``, the tables beside the samples
(processes, server signals, screenshots) in ``data.store_tables``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Self

import pandas as pd

from tealeaves.data.device_facts import check_devices
from tealeaves.data.schema import COLUMNS, DEVICE_COLUMNS, METRIC_NAMES, conform, empty_frame
from tealeaves.data.store_open import (
    ADDED_COLUMNS,
    ADDED_DEVICE_COLUMNS,
    APPLICATION_ID,
    SCREENSHOT_COLUMNS,
    STORE_TABLES,
    STORE_VERSION,
    StoreError,
    _connect_ro,
    _guarded,
    _is_damage,
    create_tables,
    damaged,
    identify,
    one_name,
    selects,
    writer_lock,
)
from tealeaves.data.store_rows import (
    _insert_metrics,
    _insert_samples,
    _merge_devices,
    _nullable,
    _time_range,
)
from tealeaves.data.store_tables import SideTables

__all__ = [
    "ADDED_COLUMNS",
    "ADDED_DEVICE_COLUMNS",
    "APPLICATION_ID",
    "SCREENSHOT_COLUMNS",
    "STORE_TABLES",
    "STORE_VERSION",
    "HostView",
    "SampleStore",
    "StoreError",
    "damaged",
]


class SampleStore(SideTables):
    """A tealeaves sample store backed by SQLite (WAL mode).

    Args:
        path: the database file; created with its tables when absent.
        readonly: open without creating or writing (``mode=ro``); raises if absent.
        timeout: seconds a write waits for a lock held by another connection before
            ``sqlite3.OperationalError`` ("database is locked").

    Thread safety: each thread gets its own connection, so one object can serve a writer
    thread and many reader threads (Dash callbacks) at once.  A web server that starts a
    thread per request would leave one connection (and its three file descriptors: database,
    WAL, shared memory) per request behind; the connections of threads that have ended are
    closed whenever a new one is opened.

    Raises:
        StoreError: the path is a directory, not an SQLite file, another application's SQLite
            file (``_identify``), a store of another layout, a file with tealeaves' identity
            whose columns are of other types or whose times are text (``_forged``), a file
            with several names opened for writing (``_one_name``), or damaged; nothing was
            written.
    """

    def __init__(self, path: str | Path, *, readonly: bool = False,
                 timeout: float = 10.0) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.timeout = timeout
        self._local = threading.local()
        self._all: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._lock = threading.Lock()
        self._cv = threading.Condition()
        self._busy = 0
        self._closed = False
        if readonly and not self.path.exists():
            raise StoreError(f"{self.path}: no such store")
        if self.path.is_dir():
            raise StoreError(f"{self.path}: is a directory, not a store file")
        try:
            if not readonly:
                self._one_name()
            self._identify()
            if not readonly:
                self._create()
                self._one_name()  # made just now, or linked while we opened it
            self._check()
        except StoreError:
            self.close()
            raise
        except sqlite3.DatabaseError as exc:
            self.close()
            if _is_damage(exc) and not isinstance(exc, sqlite3.OperationalError):
                raise damaged(self.path, exc) from None
            raise StoreError(f"{self.path}: cannot be opened as a tealeaves store ({exc})") \
                from exc

    # -- connections -------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self.readonly:
                conn = _connect_ro(self.path, self.timeout)
            else:
                conn = sqlite3.connect(self.path, timeout=self.timeout, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
            with self._lock:
                live = []
                for owner, c in self._all:
                    if owner.is_alive():
                        live.append((owner, c))
                    else:  # its thread ended: nobody can use it any more
                        with contextlib.suppress(sqlite3.Error):
                            c.close()
                live.append((threading.current_thread(), conn))
                self._all = live
        return conn

    def _one_name(self) -> None:
        """Refuse to write a store file that has several names (hard links): SQLite keeps a
        write-ahead log per name (``data.store_open.one_name``).

        Raises:
            StoreError: the file has more than one name (``st_nlink`` > 1).
        """
        one_name(self.path)

    def claim_writer(self, host: str) -> None:
        """Take this store's collector lock for ``host`` until ``close`` (or the process ends,
        ``kill -9`` included: the lock is an ``flock`` on ``<store>.<host>.lock`` beside it).

        Two collectors writing one host into one store would interleave their samples as one
        GPU set at twice the rate; a second collector of another host (``--host``) is welcome.

        The lock is one per store FILE whatever names it: a symbolic link or a path through
        ``..`` is resolved to the file's own path, and a file with several names (hard links)
        is refused for writing (``_one_name``).

        Raises:
            StoreError: another live process holds the lock (its pid is named), or the file
                has several names.
        """
        self._one_name()
        self._writer_fd = writer_lock(self.path, host)

    def open_connections(self) -> int:
        """Connections open now (one per thread that used the store and is still alive,
        plus at most the ended ones not yet closed)."""
        with self._lock:
            return len(self._all)

    def close(self, wait_s: float = 10.0) -> None:
        """Close every connection this object opened (all threads), after waiting up to
        ``wait_s`` for calls in flight on other threads; later calls raise ``StoreError``."""
        with self._cv:
            self._closed = True
            self._cv.wait_for(lambda: self._busy == 0, timeout=wait_s)
        with self._lock:
            for _, conn in self._all:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        fd = getattr(self, "_writer_fd", None)
        if fd is not None:
            self._writer_fd = None
            with contextlib.suppress(OSError):
                os.close(fd)  # releases the flock
        self._local = threading.local()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _identify(self) -> None:
        """Refuse, before anything is written, a file that is not a tealeaves store
        (``data.store_open.identify``; a new or empty file, or a store from before the
        identity, is taken).

        Raises:
            StoreError: not an SQLite file, an SQLite file of another application, a forged
                store or one of another layout.
        """
        self._complete = identify(self.path, self.timeout)

    def _create(self) -> None:
        if getattr(self, "_complete", False):
            return  # a store of this layout: opening it writes nothing
        create_tables(self._conn())

    def _check(self) -> None:
        self._select, self._dev_select = selects(self._conn(), self.path)

    # -- writing -----------------------------------------------------------------------
    @_guarded
    def append(self, samples: pd.DataFrame | list[dict]) -> int:
        """Store a batch of samples in one transaction.

        Args:
            samples: a frame in the sample schema (``conform`` is applied), or a list of
                row dicts straight from a collector (keys from ``COLUMNS``; absent keys and
                NaN are stored as NULL, read back as NaN).  The list form skips pandas: it is
                the collector's hot path.

        Returns:
            The id of the last stored row (the new cursor), or the current cursor for an
            empty batch.

        Raises:
            SchemaError: the frame does not fit the schema (nothing is written).
            sqlite3.Error: the database cannot be written (disk full, locked, read-only
                file); nothing of the batch is written.
        """
        if self.readonly:
            raise StoreError(f"{self.path}: opened read-only")
        if isinstance(samples, list):
            rows = [tuple(_nullable(r.get(c)) for c in COLUMNS) for r in samples]
        else:
            frame = conform(samples)
            rows = [tuple(_nullable(v) for v in row)
                    for row in frame.itertuples(index=False, name=None)]
        if not rows:
            return self.cursor()
        placeholders = ", ".join("?" for _ in COLUMNS)
        conn = self._conn()
        with conn:
            cur = conn.executemany(
                f"INSERT INTO samples ({', '.join(COLUMNS)}) VALUES ({placeholders})", rows
            )
            del cur
            last = conn.execute("SELECT max(id) FROM samples").fetchone()[0]
        return int(last)

    @_guarded
    def append_all(self, frames: Iterable[pd.DataFrame]) -> tuple[int, int]:
        """Store several sample frames (the files of one import) in one transaction: all of
        them or, on any error (a full disk, Ctrl-C), none.  A row already stored with every
        value the same, or coming twice, is stored once (two files with other columns of the
        same instants, ``dmon -s u`` and ``-s p`` say, are both kept).

        Cost: the new rows plus the stored rows inside each frame's time span (the keys read
        to find repeats), never the span itself.

        Returns:
            ``(stored, repeats)``: rows written and rows passed over as already stored.

        Raises:
            StoreError: the store was opened read-only.
            SchemaError: a frame does not fit the schema (nothing is written).
            sqlite3.Error: the database cannot be written; nothing is written.
        """
        out = self.append_import(frames, ())
        return out["stored"], out["repeats"]

    @_guarded
    def append_import(self, frames: Iterable[pd.DataFrame],
                      metrics: Iterable[pd.DataFrame],
                      devices: Iterable[pd.DataFrame] = ()) -> dict[str, int]:
        """``append_all`` of sample frames and of server-metrics frames (saved ``/metrics``
        pages: ``data.server_metrics`` frames) in one transaction; a metrics row
        already stored (same timestamp, name and labels) or coming twice is stored once.
        ``devices``: what the files state about their GPUs (``DEVICE_COLUMNS``), merged into
        the devices table in the same transaction: a fact the file states replaces the
        stored one, a fact it leaves out (NaN, empty) keeps what is stored.

        Returns:
            ``{"stored", "repeats", "conflicts", "first_conflict", "near_stored",
            "metrics_stored", "metrics_repeats", "power_limits_changed"}``: rows, except
            ``first_conflict`` and ``near_stored`` (``store_rows._insert_samples``) and
            ``power_limits_changed`` (``device_facts.check_devices``' lines).
            A conflict is a row of a host, GPU and instant stored or coming already with
            another value in a column both hold (a reading, the uuid): both rows are kept
            and counted, for the caller to report.

        Raises:
            As ``append_all``.
        """
        if self.readonly:
            raise StoreError(f"{self.path}: opened read-only")
        conformed = (conform(f) for f in frames)  # one at a time: a file's chunks stream
        metric_frames = [m for m in metrics if m is not None and not m.empty]
        conn = self._conn()
        with conn:
            # the write lock first: another import of the same file waits here, then finds
            # this one's rows stored (a deferred transaction would let both look, then insert)
            conn.execute("BEGIN IMMEDIATE")
            out = _insert_samples(conn, conformed)
            m_stored, m_repeats = _insert_metrics(conn, metric_frames)
            changed = [line for d in devices for line in _merge_devices(conn, d)]
        return {**out, "metrics_stored": m_stored, "metrics_repeats": m_repeats,
                "power_limits_changed": changed}

    @_guarded
    def put_devices(self, devices: pd.DataFrame | Iterable[dict]) -> None:
        """Insert or replace per-GPU device rows (limits used for normalisation).

        Raises:
            device_facts.DeviceConflictError: a row states another uuid, name or power limit
                than the one stored for its (host, GPU), whose samples it names and scales
                (nothing is written).
        """
        frame = pd.DataFrame(list(devices) if not isinstance(devices, pd.DataFrame) else devices)
        if frame.empty:
            return
        for col in DEVICE_COLUMNS:
            if col not in frame.columns:
                frame[col] = None
        rows = [tuple(_nullable(v) for v in r)
                for r in frame[list(DEVICE_COLUMNS)].itertuples(index=False, name=None)]
        conn = self._conn()
        with conn:
            check_devices(conn, frame)
            conn.executemany(
                f"INSERT OR REPLACE INTO devices ({', '.join(DEVICE_COLUMNS)}) "
                f"VALUES ({', '.join('?' for _ in DEVICE_COLUMNS)})", rows)

    @_guarded
    def set_meta(self, key: str, value: str) -> None:
        """Record a key/value fact about the store (source, collector settings)."""
        conn = self._conn()
        with conn:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -- reading -----------------------------------------------------------------------
    @_guarded
    def cursor(self) -> int:
        """Id of the newest stored row (0 when empty)."""
        val = self._conn().execute("SELECT max(id) FROM samples").fetchone()[0]
        return int(val or 0)

    @_guarded
    def count(self) -> int:
        """Number of stored samples."""
        return int(self._conn().execute("SELECT count(*) FROM samples").fetchone()[0])

    @_guarded
    def read_since(self, cursor: int = 0, limit: int | None = None,
                   host: str | None = None) -> tuple[pd.DataFrame, int]:
        """Samples stored after ``cursor``, oldest first (of ``host`` only when given).

        Returns:
            ``(frame, new_cursor)``; ``new_cursor`` equals ``cursor`` when nothing is new.
        """
        sql = f"SELECT id, {self._select} FROM samples WHERE id > ?"
        params: tuple = (int(cursor),)
        top = None
        if host is not None:  # other hosts' rows up to ``top`` are passed over for good
            top = int(self._conn().execute("SELECT max(id) FROM samples").fetchone()[0] or 0)
            sql += " AND id <= ? AND host = ?"
            params += (top, host)
        sql += " ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            params += (int(limit),)
        df = pd.read_sql_query(sql, self._conn(), params=params)
        full = limit is not None and len(df) >= int(limit)
        if df.empty:
            return empty_frame(), max(int(cursor), top or 0)
        new_cursor = int(df["id"].iloc[-1]) if full or top is None else max(top, int(cursor))
        return self._typed(df.drop(columns="id")), new_cursor

    @_guarded
    def read_range(self, start: float | None = None, end: float | None = None,
                   host: str | None = None) -> pd.DataFrame:
        """Samples with ``start <= timestamp <= end`` (either bound may be None), of ``host``
        only when given."""
        where, params = _time_range(start, end)
        if host is not None:
            where = (where + " AND" if where else " WHERE") + " host = ?"
            params = [*params, host]
        sql = f"SELECT {self._select} FROM samples{where} ORDER BY timestamp, gpu"
        df = pd.read_sql_query(sql, self._conn(), params=params)
        return self._typed(df) if not df.empty else empty_frame()

    @_guarded
    def count_range(self, start: float | None = None, end: float | None = None) -> int:
        """Number of samples with ``start <= timestamp <= end`` (through the time index)."""
        where, params = _time_range(start, end)
        return int(self._conn().execute(f"SELECT count(*) FROM samples{where}",
                                        params).fetchone()[0])

    def iter_range(self, start: float | None = None, end: float | None = None,
                   rows: int = 200_000, max_id: int | None = None,
                   host: str | None = None) -> Iterable[pd.DataFrame]:
        """Samples with ``start <= timestamp <= end`` in pieces of at most ``rows`` rows, in
        (timestamp, id) order: each piece is read from where the last one ended (keyset
        paging on the time index), so the work follows the samples in the range, never its
        span (a month's gap or a row dated 2099 costs nothing).

        Args:
            start, end: the time range (epoch s; None: unbounded).
            rows: most rows per piece.
            max_id: only rows stored up to this row id (a cursor), so rows stored while
                reading are left to ``read_since``.
            host: only this host's rows.

        Yields:
            Sample frames (``data.schema.COLUMNS``), none of them empty.
        """
        where, params = _time_range(start, end)
        for cond, val in (("id <= ?", max_id), ("host = ?", host)):
            if val is not None:
                where = (where + " AND" if where else " WHERE") + f" {cond}"
                params = [*params, val]
        after: tuple[float, int] | None = None
        while True:
            clause, args = where, list(params)
            if after is not None:
                clause = (clause + " AND" if clause else " WHERE") + " (timestamp, id) > (?, ?)"
                args += [after[0], after[1]]
            df = self._page(clause, args, int(rows))
            if df.empty:
                return
            after = (float(df["timestamp"].iloc[-1]), int(df["id"].iloc[-1]))
            yield self._typed(df.drop(columns="id"))
            if len(df) < rows:
                return

    @_guarded
    def _page(self, where: str, params: list, rows: int) -> pd.DataFrame:
        return pd.read_sql_query(
            f"SELECT id, {self._select} FROM samples{where} ORDER BY timestamp, id "
            f"LIMIT ?", self._conn(), params=[*params, rows])

    @_guarded
    def time_span(self, host: str | None = None) -> tuple[float, float] | None:
        """(first, last) timestamp stored (of ``host`` when given), or None when empty."""
        sql = "SELECT min(timestamp), max(timestamp) FROM samples"
        args: tuple = ()
        if host is not None:
            sql, args = sql + " WHERE host = ?", (host,)
        lo, hi = self._conn().execute(sql, args).fetchone()
        return None if lo is None else (float(lo), float(hi))

    @_guarded
    def devices(self, host: str | None = None) -> pd.DataFrame:
        """The per-GPU device rows (one per host and GPU index; of ``host`` when given)."""
        if host is not None:
            return pd.read_sql_query(
                f"SELECT {self._dev_select} FROM devices WHERE host = ? "
                f"ORDER BY gpu", self._conn(), params=(host,))
        return pd.read_sql_query(
            f"SELECT {self._dev_select} FROM devices ORDER BY host, gpu", self._conn())

    @_guarded
    def hosts(self, since: int = 0) -> list[str]:
        """The hosts of the samples stored after row ``since`` (all: 0), sorted."""
        return [str(r[0]) for r in self._conn().execute(
            "SELECT DISTINCT host FROM samples WHERE id > ? ORDER BY host",
            (int(since),)).fetchall()]

    @_guarded
    def meta(self) -> dict[str, str]:
        """All key/value facts recorded with ``set_meta``."""
        return dict(self._conn().execute("SELECT key, value FROM meta").fetchall())

    def _typed(self, df: pd.DataFrame) -> pd.DataFrame:
        """Stored rows as a sample frame: metrics as float64 (a value that is no number, NaN).

        Raises:
            StoreError: a time or GPU index that is not a number (a store changed by another
                program after it was opened; names the file and column).
        """
        for col in ("timestamp", "gpu"):
            if pd.api.types.is_numeric_dtype(df[col]):
                continue
            bad = next((v for v in df[col] if v is not None and not isinstance(v, int | float)),
                       None)
            if bad is not None:
                raise StoreError(f"{self.path}: samples.{col} holds {bad!r}, not a number: not "
                                 f"a store tealeaves wrote; nothing was read from it")
        for col in METRIC_NAMES:
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
        return df


class HostView:
    """One host's part of a ``SampleStore`` (a cluster's store holds several hosts, whose GPU
    indices repeat): the sample readers answer for ``host`` only; everything else (server
    signals, screenshots, meta, writes) is the store's.  Readers built for one machine
    (``app.dashboard.history.History``, the dashboard) work on it unchanged."""

    def __init__(self, store: SampleStore, host: str) -> None:
        self._store = store
        self.host = host

    def read_since(self, cursor: int = 0, limit: int | None = None) -> tuple[pd.DataFrame, int]:
        """``SampleStore.read_since`` of this host."""
        return self._store.read_since(cursor, limit, host=self.host)

    def read_range(self, start: float | None = None, end: float | None = None) -> pd.DataFrame:
        """``SampleStore.read_range`` of this host."""
        return self._store.read_range(start, end, host=self.host)

    def iter_range(self, start: float | None = None, end: float | None = None,
                   rows: int = 200_000, max_id: int | None = None) -> Iterable[pd.DataFrame]:
        """``SampleStore.iter_range`` of this host."""
        return self._store.iter_range(start, end, rows, max_id, host=self.host)

    def time_span(self) -> tuple[float, float] | None:
        """``SampleStore.time_span`` of this host."""
        return self._store.time_span(host=self.host)

    def devices(self) -> pd.DataFrame:
        """``SampleStore.devices`` of this host."""
        return self._store.devices(host=self.host)

    def __getattr__(self, name: str):
        return getattr(self._store, name)


