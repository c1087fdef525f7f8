"""The store's side tables, beside the samples: compute processes, server events and
metrics (``data.server_log`` events, ``data.server_metrics`` scrapes) and screenshots (their
rows and bytes).  ``SideTables`` is a part of ``data.store.SampleStore``, which opens the
connection (``_conn``) every method here uses."""

from __future__ import annotations

import json
import sqlite3

import pandas as pd

from tealeaves.data.store_open import SCREENSHOT_COLUMNS, _guarded
from tealeaves.data.store_rows import _nullable, _time_range


class SideTables:
    """``SampleStore``'s methods for the tables beside the samples (processes, server events
    and metrics, screenshots); each call is one transaction of the store's connection."""

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
