"""What opening a tealeaves store checks and makes: the store's identity and layout
(``APPLICATION_ID``, ``STORE_VERSION``, ``ADDED_COLUMNS``, ``STORE_TABLES``), the refusal of
any other file (``identify``: another application's SQLite file, a forged one, another
layout), of a file with several names (``one_name``), the tables (``create_tables``), the
columns a store is read by (``selects``) and a collector's lock (``writer_lock``).
``data.store.SampleStore`` runs them."""

from __future__ import annotations

import fcntl
import functools
import os
import re
import sqlite3
from pathlib import Path

from tealeaves.data.schema import COLUMNS, DEVICE_COLUMNS

_SQL_TYPES = {"host": "TEXT", "uuid": "TEXT", "gpu": "INTEGER"}
_DEVICE_SQL_TYPES = {**_SQL_TYPES, "name": "TEXT", "pci_bus_id": "TEXT"}


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


def one_name(path: Path) -> None:
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
        links = os.stat(path).st_nlink
    except FileNotFoundError:
        return
    if links > 1:
        raise StoreError(f"{path}: the store file has {links} names (hard links); "
                         f"SQLite keeps a write-ahead log per name, so writing through one "
                         f"while another is in use loses rows. Nothing was written; remove "
                         f"the other names (find / -samefile {path}) or copy the file "
                         f"(cp, not ln), then write through one name")


def writer_lock(path: Path, host: str) -> int:
    """The file descriptor of ``path``'s collector lock for ``host``, taken (an ``flock`` on
    ``<store>.<host>.lock`` beside the store's own file, a link resolved; see
    ``SampleStore.claim_writer``).

    Raises:
        StoreError: another live process holds the lock (its pid is named), or the lock file
            cannot be made.
    """
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", host)[:100] or "host"
    real = path.resolve()  # one lock per file, whatever link or path names it
    lock = real.with_name(f"{real.name}.{safe}.lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreError(f"{path}: cannot make the collector lock {lock} ({exc})") \
            from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise StoreError(f"{path}: another collector (pid {pid}) is writing host "
                         f"{host!r} into this store; stop it, or give this one its own "
                         f"--host NAME or --store FILE") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def identify(path: Path, timeout: float) -> bool:
    """Refuse, before anything is written, a file that is not a tealeaves store (a new or
    empty file, or a store from before the identity, is taken).

    Returns:
        Whether the file is a complete store of this layout (opening it writes nothing).

    Raises:
        StoreError: not an SQLite file, or an SQLite file of another application (another
            ``application_id``, or tables tealeaves does not make).
    """
    if not path.exists() or path.stat().st_size == 0:
        return False
    with open(path, "rb") as f:
        head = f.read(len(_SQLITE_MAGIC))
    if head != _SQLITE_MAGIC:
        raise StoreError(f"{path}: not a tealeaves store (not an SQLite file); the file "
                         f"is left as it was")
    # a read-only look of its own: the writer's connection would switch the file to WAL
    conn = _connect_ro(path, timeout)
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
    complete = (app_id == APPLICATION_ID and version == STORE_VERSION
                and STORE_TABLES <= tables)
    if app_id == APPLICATION_ID:
        if version > STORE_VERSION or version < 0:
            raise StoreError(f"{path}: a store of another tealeaves layout ({version}; "
                             f"this one reads {STORE_VERSION}); the file is left as it was")
        _refuse_forged(path, forged)
        return complete
    if not objects and version == 0:
        return complete  # an empty SQLite file: made a store
    # a store from before the identity: exactly tealeaves' objects, its sample columns
    v1_cols = set(COLUMNS) - set(ADDED_COLUMNS)
    ours = {"samples", "devices", "meta"} <= tables and v1_cols <= sample_cols and \
        all(n in STORE_TABLES or (t == "index" and n.endswith("_ts")) for t, n in objects)
    if app_id != 0 or version != 0 or not ours:
        others = sorted(n for _, n in objects if n not in STORE_TABLES)
        what = (f"application id {app_id:#x}" if app_id else
                f"tables {', '.join(others[:5])}" if others else
                "not tealeaves' tables and columns")
        raise StoreError(f"{path}: not a tealeaves store (an SQLite database of another "
                         f"application: {what}); tealeaves opens only its own stores, "
                         f"the file is left as it was")
    _refuse_forged(path, forged)
    return complete


def _refuse_forged(path: Path, forged: str | None) -> None:
    """Raise ``StoreError`` naming the file and what is wrong when ``forged`` (``_forged``)."""
    if forged:
        raise StoreError(f"{path}: not a store tealeaves wrote ({forged}); tealeaves "
                         f"opens only its own stores, the file is left as it was")


def create_tables(conn: sqlite3.Connection) -> None:
    """Make a store's tables and indexes in ``conn`` (those missing), add the columns of newer
    layouts to an older store's tables, and mark the file as a tealeaves store of this layout
    (``APPLICATION_ID``, ``STORE_VERSION``), in one transaction."""
    cols = ", ".join(f"{c} {_SQL_TYPES.get(c, 'REAL')}" for c in COLUMNS)
    dev_cols = ", ".join(
        f"{c} {_DEVICE_SQL_TYPES.get(c, 'REAL')}" for c in DEVICE_COLUMNS
    )
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


def selects(conn: sqlite3.Connection, path: Path) -> tuple[str, str]:
    """The column lists that read a store's samples and devices (``SELECT`` clauses): a
    column an older layout lacks (a read-only store) reads as NULL (NaN).

    Raises:
        StoreError: the samples, devices or meta table is missing.
    """
    names = {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table'")}
    missing = {"samples", "devices", "meta"} - names
    if missing:
        raise StoreError(f"{path}: not a tealeaves store (missing tables {sorted(missing)})")
    have = {r[1] for r in conn.execute("PRAGMA table_info(samples)")}
    # a read-only store of an older layout: its missing columns read as NULL (NaN)
    select = ", ".join(c if c in have else f"NULL AS {c}" for c in COLUMNS)
    have = {r[1] for r in conn.execute("PRAGMA table_info(devices)")}
    dev_select = ", ".join(c if c in have else f"NULL AS {c}" for c in DEVICE_COLUMNS)
    return select, dev_select


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
