"""SQLite store (WAL) and trace/label files."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tealeaves.data import bundled_labels_path, bundled_trace_path
from tealeaves.data.schema import COLUMNS, SchemaError
from tealeaves.data.store import SampleStore, StoreError
from tealeaves.data.traces import (
    Trace,
    TraceError,
    read_labels,
    read_trace,
    write_labels,
    write_trace,
)


def frame(t0: float, n: int, gpus=(0, 1)) -> pd.DataFrame:
    rows = []
    for i in range(n):
        for g in gpus:
            rows.append({"timestamp": t0 + i * 0.1, "monotonic": i * 0.1, "host": "h", "gpu": g,
                         "uuid": f"GPU-{g}", "sm_active": float(i + g),
                         "power_w": np.nan if i % 2 else 100.0})
    return pd.DataFrame(rows)


def test_round_trip_keeps_values_and_nan(tmp_path):
    with SampleStore(tmp_path / "s.db") as s:
        cur = s.append(frame(1000.0, 5))
        got = s.read_range()
    assert cur == 10 and list(got.columns) == list(COLUMNS)
    assert got["sm_active"].tolist() == [float(i + g) for i in range(5) for g in (0, 1)]
    assert got["power_w"].isna().sum() == 4  # NaN stays NaN, never 0
    assert got["tensor_active"].isna().all()  # absent metric is NaN


def test_wal_reader_sees_batches_while_writer_writes(tmp_path):
    path = tmp_path / "s.db"
    writer = SampleStore(path)
    assert writer._conn().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    reader = SampleStore(path, readonly=True)
    seen: list[int] = []
    done = threading.Event()

    def write():
        for k in range(20):
            writer.append(frame(1000.0 + k, 10))
        done.set()

    t = threading.Thread(target=write)
    cursor = 0
    t.start()
    while not done.is_set() or cursor < writer.cursor():
        new, cursor = reader.read_since(cursor)
        if len(new):
            seen.append(len(new))
            assert len(new) % 20 == 0  # whole transactions only, never half a batch
    t.join()
    assert sum(seen) == 400 and reader.count() == 400
    writer.close()
    reader.close()


def test_bad_batch_is_refused_and_stored_rows_survive(tmp_path):
    with SampleStore(tmp_path / "s.db") as s:
        s.append(frame(1000.0, 3))
        bad = frame(2000.0, 3)
        bad["sm_active"] = bad["sm_active"].astype(object)
        bad.loc[2, "sm_active"] = "lots"
        with pytest.raises(SchemaError, match="sm_active"):
            s.append(bad)
        assert s.count() == 6


def test_not_a_store_is_a_clear_error(tmp_path):
    p = tmp_path / "junk.db"
    p.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="junk.db"):
        SampleStore(p)
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE x (a)").connection.commit()
    with pytest.raises(StoreError, match="not a tealeaves store .an SQLite database of another"):
        SampleStore(other, readonly=True)


def test_trace_round_trip_with_devices_and_meta(tmp_path):
    devices = pd.DataFrame([{"host": "h", "gpu": 0, "uuid": "GPU-0", "power_limit_w": 700.0}])
    p = write_trace(tmp_path / "t.parquet", Trace(frame(1000.0, 4), devices, {"driver": "x"}))
    t = read_trace(p)
    assert len(t.samples) == 8 and t.meta == {"driver": "x"}
    assert t.devices["power_limit_w"].tolist() == [700.0]


@pytest.mark.parametrize("content,match", [
    (None, "no such file"), (b"", "file is empty"), (b"PAR1garbage", "not a readable Parquet"),
])
def test_bad_trace_files(tmp_path, content, match):
    p = tmp_path / "bad.parquet"
    if content is not None:
        p.write_bytes(content)
    with pytest.raises(TraceError, match=match):
        read_trace(p)


def test_labels_round_trip_and_errors(tmp_path):
    lab = pd.DataFrame({"start": [0.0, 5.0], "end": [5.0, 9.0], "phase": ["idle", "decode"],
                        "hot_gpu": [np.nan, 1.0]})
    p = write_labels(tmp_path / "l.csv", lab)
    back = read_labels(p)
    assert back["phase"].tolist() == ["idle", "decode"]
    assert np.isnan(back["hot_gpu"][0]) and back["hot_gpu"][1] == 1.0
    p.write_text("start,end,phase\n0,1,idle\n1,2,warp\n")
    with pytest.raises(TraceError, match="line 3: phase 'warp'"):
        read_labels(p)


def test_bundled_trace_is_real_h200_two_gpu_and_covers_every_phase():
    t = read_trace(bundled_trace_path())
    lab = read_labels(bundled_labels_path())
    assert set(t.samples["gpu"]) == {0, 1}
    assert set(t.devices["name"]) == {"NVIDIA H200"}
    assert t.samples["timestamp"].max() - t.samples["timestamp"].min() >= 60
    assert set(lab["phase"]) >= {"idle", "prefill", "decode"}
    assert set(lab["hot_gpu"].dropna().astype(int)) == {0, 1}
    assert bundled_trace_path().stat().st_size < 5 * 2**20


def test_connections_of_ended_threads_are_closed(tmp_path):
    """A thread-per-request web server must not leave a connection (three file descriptors)
    behind for every request."""
    store = SampleStore(tmp_path / "s.db")
    store.append(frame(1_700_000_000.0, 3))
    fd_dir = Path("/proc/self/fd")
    fds_before = len(list(fd_dir.iterdir())) if fd_dir.exists() else None
    for _ in range(200):
        t = threading.Thread(target=store.read_range)
        t.start()
        t.join()
    assert store.open_connections() <= 3  # this thread's, the last reader's (ended)
    if fds_before is not None:
        assert len(list(fd_dir.iterdir())) <= fds_before + 6
    assert len(store.read_range()) == 6  # 3 rows x 2 GPUs, still readable here
    store.close()


def test_host_view_reads_one_host_of_a_cluster_store(tmp_path):
    """A store holding two hosts (their GPU indices repeat): HostView answers for one."""
    from tealeaves.data import bundled_trace_path
    from tealeaves.data.store import HostView
    from tealeaves.data.traces import read_trace

    tr = read_trace(bundled_trace_path())
    with SampleStore(tmp_path / "c.db") as store:
        for host in ("node-a", "node-b"):
            store.put_devices(tr.devices.assign(host=host))
            store.append(tr.samples.assign(host=host))
        c0 = store.cursor()
        store.append(tr.samples.head(4).assign(host="node-c"))
        assert store.hosts() == ["node-a", "node-b", "node-c"]
        assert store.hosts(since=c0) == ["node-c"]
        a = HostView(store, "node-a")
        rows, cursor = a.read_since(0)
        assert len(rows) == len(tr.samples) and set(rows["host"]) == {"node-a"}
        assert cursor == store.cursor()  # node-b's and node-c's rows passed over for good
        assert a.read_since(cursor)[0].empty
        part, c2 = a.read_since(0, limit=100)
        assert len(part) == 100 and c2 == 100 and set(part["host"]) == {"node-a"}
        first, last = a.time_span()
        assert len(a.read_range(first, first + 5.0)) > 0
        assert set(a.read_range(first, last)["host"]) == {"node-a"}
        assert set(a.devices()["host"]) == {"node-a"} and len(a.devices()) == 2
        assert a.count() == store.count()  # the rest is the store's
