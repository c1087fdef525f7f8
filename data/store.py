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
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import math
import os
import re
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Self

import pandas as pd

from tealeaves.data.device_facts import check_devices
from tealeaves.data.schema import COLUMNS, DEVICE_COLUMNS, METRIC_NAMES, conform, empty_frame

_SQL_TYPES = {"host": "TEXT", "uuid": "TEXT", "gpu": "INTEGER"}
_DEVICE_SQL_TYPES = {**_SQL_TYPES, "name": "TEXT", "pci_bus_id": "TEXT"}


def _merge_devices(conn, frame: pd.DataFrame) -> None:
    """Upsert device rows: a stated fact (not NULL, not "") replaces the stored one, an
    unstated one keeps it (``append_import``).

    Raises:
        device_facts.DeviceConflictError: a row states another uuid, name or power limit
            than the stored one of its (host, GPU) (nothing of the row is written).
    """
    if frame is None or frame.empty:
        return
    check_devices(conn, frame)
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


#: Columns of the ``screenshots`` table: content hash (key), file name as uploaded (shown,
#: never used as a path), size, pixel size, format, upload time (epoch s), capture time (epoch
#: s, NULL when unknown), the wall-clock time read (text) and the zone it was read in, where the
#: time came from, regions (JSON list) and a note.
SCREENSHOT_COLUMNS: dict[str, str] = {
    "sha256": "TEXT PRIMARY KEY", "name": "TEXT", "nbytes": "INTEGER", "width": "INTEGER",
    "height": "INTEGER", "format": "TEXT", "uploaded": "REAL", "capture_ts": "REAL",
    "capture_local": "TEXT", "tz": "TEXT", "time_source": "TEXT", "regions": "TEXT",
    "note": "TEXT",
}


def _affinity(declared: str) -> str:
    """SQLite's column affinity of a declared type (sqlite.org/datatype3.html, 3.1)."""
    t = declared.upper()
    if "INT" in t:
        return "INTEGER"
    if any(k in t for k in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if "BLOB" in t or not t:
        return "BLOB"
    if any(k in t for k in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


#: Affinities a stored column may have: numbers for times, readings and facts, text for names.
_NUMBERS = frozenset({"REAL", "NUMERIC", "INTEGER"})


def _forged(conn: sqlite3.Connection, tables: set[str]) -> str | None:
    """What makes an SQLite file with a tealeaves identity not a store tealeaves wrote (a
    column of the wrong type, a time that is text or missing), or None.  Reads the declared
    types and, through the time index, the lowest and highest ``timestamp`` (SQLite sorts
    NULL before numbers and text after them), so the cost is not the store's size."""
    want = {"samples": {"id": "INTEGER", **{c: _SQL_TYPES.get(c, "REAL") for c in COLUMNS}},
            "devices": {c: _DEVICE_SQL_TYPES.get(c, "REAL") for c in DEVICE_COLUMNS}}
    for table in ("samples", "devices"):
        if table not in tables:
            continue
        for _, name, declared, *_ in conn.execute(f"PRAGMA table_info({table})"):
            expected = want[table].get(name)
            if expected is None:
                continue
            got = _affinity(declared or "")
            ok = got in _NUMBERS if _affinity(expected) in _NUMBERS else got == "TEXT"
            if name == "id" and got != "INTEGER":
                ok = False
            if not ok:
                return f"{table}.{name} is declared {declared or 'without a type'!r}, " \
                       f"tealeaves makes it {expected}"
    if "samples" not in tables:
        return None
    for order in ("", " DESC"):
        row = conn.execute(f"SELECT timestamp, typeof(timestamp) FROM samples ORDER BY "
                           f"timestamp{order} LIMIT 1").fetchone()
        if row is not None and row[1] not in ("real", "integer"):
            return f"samples.timestamp holds {row[0]!r} ({row[1]}), not epoch seconds"
    return None


def _connect_ro(path: Path, timeout: float) -> sqlite3.Connection:
    """A read-only connection to ``path`` (``mode=ro``).  Where SQLite cannot make or write
    the WAL store's shared-memory file (``<store>-shm``: a read-only folder or mount, a file
    the reader may not write), the file is read as it is (``immutable=1``): nobody can be
    writing a store there, since a writer needs that file too (sqlite.org/wal.html, 8)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout,
                           check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        conn.close()
        conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, timeout=timeout,
                               check_same_thread=False)
    return conn


class StoreError(RuntimeError):
    """The store file cannot be opened or is not a tealeaves store; the message names the file."""


#: ``PRAGMA application_id`` of a tealeaves store ("teal" in ASCII): what marks a file as ours.
APPLICATION_ID = 0x7465616C
#: ``PRAGMA user_version``: the store's layout version (1: samples, devices, meta, processes,
#: server events and metrics, screenshots; 2: the ``gr_engine_active`` sample column; 3: the
#: ``gpu_temp_c`` sample column and the devices' ``pci_bus_id``).  A store of an older layout
#: gains the newer columns (``ADDED_COLUMNS``, ``ADDED_DEVICE_COLUMNS``, NULL in its old rows)
#: when it is opened for writing; opened read-only, they read as NaN (None for text).
STORE_VERSION = 3
#: Sample columns added after layout 1, with the layout that added them.
ADDED_COLUMNS: dict[str, int] = {"gr_engine_active": 2, "gpu_temp_c": 3}
#: Device columns added after layout 1, with the layout that added them.
ADDED_DEVICE_COLUMNS: dict[str, int] = {"pci_bus_id": 3}
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: Tables a tealeaves store may hold (a file with any other table belongs to someone else).
STORE_TABLES = frozenset({"samples", "devices", "meta", "processes", "server_events",
                          "server_metrics", "screenshots", "screenshot_data"})


def damaged(path: Path, exc: BaseException) -> StoreError:
    """The one-line error for a store SQLite cannot read (a damaged page, a truncated file):
    names the file and how to save what it holds."""
    return StoreError(f"{path}: the store is damaged ({exc}); nothing was changed. Save what it "
                      f"holds with: sqlite3 {path} .recover | sqlite3 recovered.db")


def _is_damage(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(
        exc, sqlite3.OperationalError | sqlite3.IntegrityError | sqlite3.ProgrammingError)


def _guarded(method):
    """Count the call as in flight, so ``close`` waits for it instead of closing a connection
    under a query running on another thread (which can crash SQLite)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._cv:
            if self._closed:
                raise StoreError(f"{self.path}: the store is closed")
            self._busy += 1
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            if _is_damage(exc):
                raise damaged(self.path, exc) from None
            raise
        finally:
            with self._cv:
                self._busy -= 1
                self._cv.notify_all()

    return wrapper


class SampleStore:
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
        """Refuse to write a store file that has several names (hard links).

        SQLite keeps its write-ahead log and shared memory beside the name a connection opened
        (``<name>-wal``; a symbolic link is followed to its target, a hard link cannot be):
        two writers through two names of one file each keep a log of their own, and the
        first checkpoint overwrites the other's rows (sqlite.org/howtocorrupt.html, 2.5).  So
        one file is written through one name; the collector locks (``claim_writer``) are
        then one per file too.

        Raises:
            StoreError: the file has more than one name (``st_nlink`` > 1).
        """
        try:
            links = os.stat(self.path).st_nlink
        except FileNotFoundError:
            return
        if links > 1:
            raise StoreError(f"{self.path}: the store file has {links} names (hard links); "
                             f"SQLite keeps a write-ahead log per name, so writing through one "
                             f"while another is in use loses rows. Nothing was written; remove "
                             f"the other names (find / -samefile {self.path}) or copy the file "
                             f"(cp, not ln), then write through one name")

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
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", host)[:100] or "host"
        real = self.path.resolve()  # one lock per file, whatever link or path names it
        lock = real.with_name(f"{real.name}.{safe}.lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot make the collector lock {lock} ({exc})") \
                from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StoreError(f"{self.path}: another collector (pid {pid}) is writing host "
                             f"{host!r} into this store; stop it, or give this one its own "
                             f"--host NAME or --store FILE") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._writer_fd = fd

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
        """Refuse, before anything is written, a file that is not a tealeaves store (a new or
        empty file, or a store from before the identity, is taken).

        Raises:
            StoreError: not an SQLite file, or an SQLite file of another application (another
                ``application_id``, or tables tealeaves does not make).
        """
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
        if head != _SQLITE_MAGIC:
            raise StoreError(f"{self.path}: not a tealeaves store (not an SQLite file); the file "
                             f"is left as it was")
        # a read-only look of its own: the writer's connection would switch the file to WAL
        conn = _connect_ro(self.path, self.timeout)
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            objects = conn.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE "
                                   "'sqlite_%'").fetchall()
            tables = {n for t, n in objects if t == "table"}
            sample_cols = ({r[1] for r in conn.execute("PRAGMA table_info(samples)")}
                           if "samples" in tables else set())
            forged = (_forged(conn, tables) if app_id in (0, APPLICATION_ID)
                      and "timestamp" in sample_cols else None)
        finally:
            conn.close()
        self._complete = (app_id == APPLICATION_ID and version == STORE_VERSION
                          and STORE_TABLES <= tables)
        if app_id == APPLICATION_ID:
            if version > STORE_VERSION or version < 0:
                raise StoreError(f"{self.path}: a store of another tealeaves layout ({version}; "
                                 f"this one reads {STORE_VERSION}); the file is left as it was")
            self._refuse_forged(forged)
            return
        if not objects and version == 0:
            return  # an empty SQLite file: made a store
        # a store from before the identity: exactly tealeaves' objects, its sample columns
        v1_cols = set(COLUMNS) - set(ADDED_COLUMNS)
        ours = {"samples", "devices", "meta"} <= tables and v1_cols <= sample_cols and \
            all(n in STORE_TABLES or (t == "index" and n.endswith("_ts")) for t, n in objects)
        if app_id != 0 or version != 0 or not ours:
            others = sorted(n for _, n in objects if n not in STORE_TABLES)
            what = (f"application id {app_id:#x}" if app_id else
                    f"tables {', '.join(others[:5])}" if others else
                    "not tealeaves' tables and columns")
            raise StoreError(f"{self.path}: not a tealeaves store (an SQLite database of another "
                             f"application: {what}); tealeaves opens only its own stores, "
                             f"the file is left as it was")
        self._refuse_forged(forged)

    def _refuse_forged(self, forged: str | None) -> None:
        """Raise ``StoreError`` naming the file and what is wrong when ``forged`` (``_forged``)."""
        if forged:
            raise StoreError(f"{self.path}: not a store tealeaves wrote ({forged}); tealeaves "
                             f"opens only its own stores, the file is left as it was")

    def _create(self) -> None:
        if getattr(self, "_complete", False):
            return  # a store of this layout: opening it writes nothing
        cols = ", ".join(f"{c} {_SQL_TYPES.get(c, 'REAL')}" for c in COLUMNS)
        dev_cols = ", ".join(
            f"{c} {_DEVICE_SQL_TYPES.get(c, 'REAL')}" for c in DEVICE_COLUMNS
        )
        conn = self._conn()
        with conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS samples (id INTEGER PRIMARY KEY, {cols})")
            conn.execute("CREATE INDEX IF NOT EXISTS samples_ts ON samples (timestamp)")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS devices ({dev_cols}, PRIMARY KEY (host, gpu))"
            )
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS processes (timestamp REAL, host TEXT, gpu INTEGER, "
                "uuid TEXT, pid INTEGER, used_memory_bytes REAL, name TEXT)")
            conn.execute("CREATE INDEX IF NOT EXISTS processes_ts ON processes (timestamp)")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS server_events (timestamp REAL, start REAL, "
                "kind TEXT, rank TEXT, fields TEXT, source_line INTEGER)")
            conn.execute("CREATE INDEX IF NOT EXISTS server_events_ts ON server_events "
                         "(timestamp)")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS server_metrics (timestamp REAL, name TEXT, "
                "labels TEXT, value REAL, rate_per_s REAL, kind TEXT)")
            conn.execute("CREATE INDEX IF NOT EXISTS server_metrics_ts ON server_metrics "
                         "(timestamp)")
            shot_cols = ", ".join(f"{c} {t}" for c, t in SCREENSHOT_COLUMNS.items())
            conn.execute(f"CREATE TABLE IF NOT EXISTS screenshots ({shot_cols})")
            conn.execute("CREATE TABLE IF NOT EXISTS screenshot_data (sha256 TEXT PRIMARY KEY, "
                         "data BLOB NOT NULL)")
            have = {r[1] for r in conn.execute("PRAGMA table_info(samples)")}
            for col in COLUMNS:  # an older layout's store gains the newer columns
                if col not in have:
                    conn.execute(f"ALTER TABLE samples ADD COLUMN {col} "
                                 f"{_SQL_TYPES.get(col, 'REAL')}")
            have = {r[1] for r in conn.execute("PRAGMA table_info(devices)")}
            for col in DEVICE_COLUMNS:
                if col not in have:
                    conn.execute(f"ALTER TABLE devices ADD COLUMN {col} "
                                 f"{_DEVICE_SQL_TYPES.get(col, 'REAL')}")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {STORE_VERSION}")

    def _check(self) -> None:
        names = {r[0] for r in self._conn().execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
        missing = {"samples", "devices", "meta"} - names
        if missing:
            raise StoreError(f"{self.path}: not a tealeaves store (missing tables {sorted(missing)})")
        have = {r[1] for r in self._conn().execute("PRAGMA table_info(samples)")}
        # a read-only store of an older layout: its missing columns read as NULL (NaN)
        self._select = ", ".join(c if c in have else f"NULL AS {c}" for c in COLUMNS)
        have = {r[1] for r in self._conn().execute("PRAGMA table_info(devices)")}
        self._dev_select = ", ".join(c if c in have else f"NULL AS {c}" for c in DEVICE_COLUMNS)

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
            ``{"stored", "repeats", "conflicts", "first_conflict", "metrics_stored",
            "metrics_repeats"}``: rows, except ``first_conflict`` (``_insert_samples``).
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
            for d in devices:
                _merge_devices(conn, d)
        return {**out, "metrics_stored": m_stored, "metrics_repeats": m_repeats}

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
    def put_processes(self, rows: list[dict]) -> None:
        """Store compute-process rows (timestamp, host, gpu, uuid, pid, used_memory_bytes,
        name) listed by the collector."""
        if not rows:
            return
        cols = ("timestamp", "host", "gpu", "uuid", "pid", "used_memory_bytes", "name")
        conn = self._conn()
        with conn:
            conn.executemany(
                f"INSERT INTO processes ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [tuple(_nullable(r.get(c)) for c in cols) for r in rows])

    @_guarded
    def processes(self, start: float | None = None) -> pd.DataFrame:
        """Process rows stored at or after ``start`` (all when None), oldest first."""
        where, params = _time_range(start, None)
        return pd.read_sql_query(f"SELECT * FROM processes{where} ORDER BY timestamp, gpu, pid",
                                 self._conn(), params=params)

    @_guarded
    def put_server_events(self, events: list) -> None:
        """Store server events (``data.server_log.ServerEvent``): timestamp and start in
        UTC epoch s (NULL when unknown), kind, rank and fields (incl. ``extra``) as JSON."""
        if not events:
            return
        rows = [(_nullable(e.timestamp), _nullable(e.start), e.kind,
                 json.dumps(e.rank, sort_keys=True),
                 json.dumps({**e.fields, **{f"extra.{k}": v for k, v in e.extra.items()}},
                            default=str), e.source_line) for e in events]
        conn = self._conn()
        with conn:
            conn.executemany("INSERT INTO server_events VALUES (?, ?, ?, ?, ?, ?)", rows)

    @_guarded
    def server_events(self, start: float | None = None, end: float | None = None
                      ) -> pd.DataFrame:
        """Stored server events with ``start <= timestamp <= end``: columns timestamp, start,
        kind, rank (dict), source_line and one column per field."""
        where, params = _time_range(start, end)
        df = pd.read_sql_query(f"SELECT * FROM server_events{where} ORDER BY timestamp",
                               self._conn(), params=params)
        if df.empty:
            return df
        fields = pd.DataFrame([json.loads(f) for f in df.pop("fields")], index=df.index)
        df["rank"] = [json.loads(r) for r in df["rank"]]
        return pd.concat([df, fields], axis=1)

    @_guarded
    def put_server_metrics(self, frame: pd.DataFrame) -> None:
        """Store a scrape (``data.server_metrics`` frame: timestamp, name, labels,
        value, rate_per_s, kind)."""
        if frame is None or frame.empty:
            return
        cols = ["timestamp", "name", "labels", "value", "rate_per_s", "kind"]
        rows = [tuple(_nullable(v) for v in r)
                for r in frame[cols].itertuples(index=False, name=None)]
        conn = self._conn()
        with conn:
            conn.executemany("INSERT INTO server_metrics VALUES (?, ?, ?, ?, ?, ?)", rows)

    @_guarded
    def server_metrics(self, start: float | None = None, end: float | None = None,
                       names: list[str] | tuple[str, ...] | None = None) -> pd.DataFrame:
        """Stored scrapes with ``start <= timestamp <= end`` (either end open when None),
        oldest first; only the series ``names`` when given."""
        where, params = _time_range(start, end)
        if names is not None:
            where += (" AND " if where else " WHERE ") + \
                f"name IN ({', '.join('?' for _ in names)})"
            params = [*params, *names]
        return pd.read_sql_query(f"SELECT * FROM server_metrics{where} ORDER BY timestamp, name",
                                 self._conn(), params=params)

    # -- screenshots ---------------------------------------------------------------------
    @_guarded
    def put_screenshot(self, row: dict, data: bytes) -> bool:
        """Keep a screenshot: its row (``SCREENSHOT_COLUMNS``; ``sha256`` the key) and bytes,
        in one transaction.

        Returns:
            False when a screenshot with the same content is already kept (nothing changes).
        """
        cols = [c for c in SCREENSHOT_COLUMNS if c in row]
        conn = self._conn()
        with conn:
            if conn.execute("SELECT 1 FROM screenshots WHERE sha256 = ?",
                            (row["sha256"],)).fetchone():
                return False
            conn.execute(f"INSERT INTO screenshots ({', '.join(cols)}) VALUES "
                         f"({', '.join('?' * len(cols))})",
                         [_nullable(row[c]) for c in cols])
            conn.execute("INSERT OR REPLACE INTO screenshot_data VALUES (?, ?)",
                         (row["sha256"], sqlite3.Binary(data)))
        return True

    @_guarded
    def screenshots(self) -> pd.DataFrame:
        """Every kept screenshot's row (``SCREENSHOT_COLUMNS``), by capture time (unknown
        last), then upload time."""
        try:
            return pd.read_sql_query(
                "SELECT * FROM screenshots ORDER BY capture_ts IS NULL, capture_ts, uploaded",
                self._conn())
        except pd.errors.DatabaseError:  # a read-only store from before screenshots
            return pd.DataFrame(columns=list(SCREENSHOT_COLUMNS))

    @_guarded
    def screenshot_data(self, sha256: str) -> bytes | None:
        """The bytes of a kept screenshot, or None."""
        try:
            row = self._conn().execute("SELECT data FROM screenshot_data WHERE sha256 = ?",
                                       (str(sha256),)).fetchone()
        except sqlite3.OperationalError:
            return None
        return bytes(row[0]) if row else None

    @_guarded
    def update_screenshot(self, sha256: str, **fields) -> None:
        """Change a screenshot's row (capture time, zone, time source, regions, note).

        Raises:
            ValueError: a field that is not a ``SCREENSHOT_COLUMNS`` name or is the key.
        """
        bad = [k for k in fields if k not in SCREENSHOT_COLUMNS or k == "sha256"]
        if bad:
            raise ValueError(f"not screenshot fields: {bad}")
        if not fields:
            return
        conn = self._conn()
        with conn:
            conn.execute(f"UPDATE screenshots SET {', '.join(f'{k} = ?' for k in fields)} "
                         f"WHERE sha256 = ?", [*(_nullable(v) for v in fields.values()),
                                              str(sha256)])

    @_guarded
    def delete_screenshot(self, sha256: str) -> None:
        """Forget a screenshot (row and bytes)."""
        conn = self._conn()
        with conn:
            conn.execute("DELETE FROM screenshots WHERE sha256 = ?", (str(sha256),))
            conn.execute("DELETE FROM screenshot_data WHERE sha256 = ?", (str(sha256),))

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
        ``{"stored", "repeats", "conflicts", "first_conflict"}``; ``first_conflict`` is None
        or ``{"host", "gpu", "timestamp", "column", "stored", "new"}``.
    """
    placeholders = ", ".join("?" for _ in COLUMNS)
    stored = repeats = conflicts = 0
    first = None
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
    return {"stored": stored, "repeats": repeats, "conflicts": conflicts,
            "first_conflict": first}


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
