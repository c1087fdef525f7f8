"""Break-it suite (issue 19): one test per attack that once poisoned a verdict or a store, each
building its inputs here, plus property tests over the field-limit table.

Attacks: a row dated 2099; DCGM/NVML blank codes and impossible values from every source; a
multi-file import that fails half-way (a full disk, Ctrl-C, a bad file); the same file twice;
stores that are not ours (another application's SQLite file, a damaged store, a directory, a
read-only one, two collectors); endpoints that hang, close, send garbage or too much; pods
sharing a GPU; unbounded options; NaN in JSON.  (The month-long gap is ``test_gaps.py``.)
"""

from __future__ import annotations

import hashlib
import http.server
import json
import math
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tealeaves.collectors import screen_batch
from tealeaves.collectors.server_metrics import MetricsScraper
from tealeaves.data import bundled_trace_path
from tealeaves.data.importers import MIB, import_file, import_text
from tealeaves.data.schema import FIELD_LIMITS, METRIC_NAMES, SENTINELS, conform
from tealeaves.data.server_metrics import MAX_SERIES
from tealeaves.data.store import SampleStore, StoreError
from tealeaves.data.traces import read_trace

T0 = 1_780_000_000.0  # 2026-05-28
CODES = sorted({c for codes in SENTINELS.values() for c in codes})


def tealeaves(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "tealeaves.app.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, check=False)


def digest(path: Path) -> str:
    """The store's bytes and its WAL's, as one hash (what "unchanged" means here)."""
    h = hashlib.sha256()
    for p in (path, path.with_name(path.name + "-wal")):
        if p.exists():
            h.update(p.read_bytes())
    return h.hexdigest()


def small_store(path: Path, seconds: float = 10.0) -> int:
    tr = read_trace(bundled_trace_path())
    s = tr.samples
    s = s[s["timestamp"] < s["timestamp"].min() + seconds]
    with SampleStore(path) as store:
        store.put_devices(tr.devices)
        store.append(s)
    return len(s)


def csv_text(rows: list[dict]) -> str:
    return pd.DataFrame(rows).to_csv(index=False)


# -- time: a row dated 2099, or before 2000 --------------------------------------------------

def test_a_row_dated_2099_is_refused_with_its_line_and_never_stored(tmp_path):
    rows = [{"timestamp": T0 + i, "gpu": 0, "sm_active": 10.0} for i in range(50)]
    rows.insert(20, {"timestamp": 4_070_908_800.0, "gpu": 0, "sm_active": 10.0})  # 2099
    rows.insert(5, {"timestamp": 900_000_000.0, "gpu": 0, "sm_active": 10.0})  # 1998
    f = tmp_path / "t.csv"
    f.write_text(csv_text(rows))
    db = tmp_path / "s.db"
    r = tealeaves("import", f, "--store", db)
    assert r.returncode == 0, r.stderr
    assert "line 23: timestamp 4070908800 (2099-01-01 00:00:00 UTC) is more than a day after " \
           "now" in r.stdout, r.stdout
    assert "line 7: timestamp 900000000 (1998-07-09 16:00:00 UTC) is before 2000" in r.stdout
    with SampleStore(db, readonly=True) as s:
        assert s.count() == 50 and s.time_span() == (T0, T0 + 49)
    out = tmp_path / "r.json"
    assert tealeaves("report", "--store", db, "--out", out).returncode == 0
    assert json.loads(out.read_text())["range"]["span_s"] == pytest.approx(49, abs=1)


def test_a_stray_row_a_week_after_its_file_is_refused():
    rows = [{"timestamp": T0 + i, "gpu": 0, "sm_active": 5.0} for i in range(300)]
    rows.append({"timestamp": T0 + 7 * 86400, "gpu": 0, "sm_active": 5.0})
    res = import_text(csv_text(rows), "csv")
    assert len(res.samples) == 300
    assert res.skipped == [(302, res.skipped[0][1])]
    assert "more than a day after the file's other rows" in res.skipped[0][1]


# -- the field-limit table, over every source ------------------------------------------------

def _dmon(col: str, raw: float) -> str:
    return f"# gpu {col}\n# Idx x\n    0 {raw:.0f}\n"


def _query(name: str, unit: str, raw: float) -> str:
    return (f"timestamp, index, {name} [{unit}]\n"
            f"2026/05/28 10:00:00.000, 0, {raw:.0f} {unit}\n")


def _exporter(field: str, raw: float) -> str:
    return f'{field}{{gpu="0",UUID="GPU-1"}} {raw!r}\n'


def _dcgmi(short: str, raw: float) -> str:
    return f"#Entity   {short}\nID\nGPU 0     {raw!r}\n"


def _csv_of(col: str):
    return lambda v: csv_text([{"timestamp": T0, "gpu": 0, col: v}])


# (format, builder(raw) -> text, schema column, factor from raw to the column's unit)
SOURCES = [
    ("dmon", lambda v: _dmon("pwr", v), "power_w", 1.0),
    ("dmon", lambda v: _dmon("sm", v), "gpu_util", 1.0),
    ("dmon", lambda v: _dmon("fb", v), "mem_used_bytes", MIB),
    ("dmon", lambda v: _dmon("pclk", v), "sm_clock_mhz", 1.0),
    ("dmon", lambda v: _dmon("txpci", v), "pcie_tx_bytes_per_s", MIB),
    ("query", lambda v: _query("power.draw", "W", v), "power_w", 1.0),
    ("query", lambda v: _query("memory.used", "MiB", v), "mem_used_bytes", MIB),
    ("query", lambda v: _query("clocks.sm", "MHz", v), "sm_clock_mhz", 1.0),
    ("prometheus", lambda v: _exporter("DCGM_FI_DEV_POWER_USAGE", v), "power_w", 1.0),
    ("prometheus", lambda v: _exporter("DCGM_FI_DEV_SM_CLOCK", v), "sm_clock_mhz", 1.0),
    ("prometheus", lambda v: _exporter("DCGM_FI_DEV_FB_USED", v), "mem_used_bytes", MIB),
    ("prometheus", lambda v: _exporter("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", v), "tensor_active",
     100.0),
    ("prometheus", lambda v: _exporter("DCGM_FI_PROF_PCIE_TX_BYTES", v),
     "pcie_tx_bytes_per_s", 1.0),
    ("dcgmi", lambda v: _dcgmi("POWER", v), "power_w", 1.0),
    ("dcgmi", lambda v: _dcgmi("SMCLK", v), "sm_clock_mhz", 1.0),
    ("dcgmi", lambda v: _dcgmi("FBUSD", v), "mem_used_bytes", MIB),
    ("dcgmi", lambda v: _dcgmi("DRAMA", v), "dram_active", 100.0),
    *[("csv", _csv_of(c), c, 1.0) for c in METRIC_NAMES],
]


@pytest.mark.parametrize("fmt,build,col,factor", SOURCES,
                         ids=[f"{s[0]}-{s[2]}" for s in SOURCES])
@pytest.mark.parametrize("code", CODES)
def test_every_blank_code_of_every_source_is_no_reading_and_counted(fmt, build, col, factor,
                                                                    code):
    if fmt == "dmon" and code != int(code):
        pytest.skip("dmon prints whole numbers")
    res = import_text(build(code), fmt, start_time=T0)
    assert len(res.samples) == 1, res.skipped
    assert math.isnan(res.samples.loc[0, col])
    assert res.blanks == {col: 1}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(src=st.sampled_from(SOURCES),
       u=st.floats(min_value=0.0, max_value=1e22, allow_nan=False, allow_infinity=False))
def test_property_a_stored_value_is_within_the_field_limits(src, u):
    """Whatever number a source writes, what the importer keeps is within FIELD_LIMITS (or
    NaN), out-of-range rows are refused with their line, blanks are counted."""
    fmt, build, col, factor = src
    if fmt in ("dmon", "query"):
        u = float(round(u))
    res = import_text(build(u), fmt, start_time=T0)
    low, high = FIELD_LIMITS[col]
    if len(res.samples):
        v = res.samples.loc[0, col]
        assert math.isnan(v) or low <= v <= high * (1 + 1e-9)
        if not math.isnan(v):
            assert v == pytest.approx(u * factor)
    else:
        assert any("outside its valid range" in why for _, why in res.skipped), res.skipped
        assert not low <= u * factor <= high * (1 + 1e-9)


def test_a_parquet_trace_with_blank_codes_counts_them(tmp_path):
    tr = read_trace(bundled_trace_path())
    raw = tr.samples.head(40).copy()
    raw.loc[:9, "power_w"] = 140737488355328.0
    raw.loc[10:11, "sm_clock_mhz"] = 9223372036854775794.0
    raw.loc[12, "sm_active"] = 9.2e20
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = tmp_path / "blank.parquet"
    pq.write_table(pa.Table.from_pandas(raw, preserve_index=False), f)
    res = import_file(f)
    assert res.blanks == {"power_w": 10, "sm_clock_mhz": 2}
    assert res.out_of_range == {"sm_active": 1}
    assert res.samples["power_w"].isna().sum() >= 10
    top = res.samples[list(METRIC_NAMES)].max()  # a column the trace lacks: NaN, no reading
    assert (top.isna() | (top <= 1e13)).all() and top.notna().sum() >= 10


def test_the_collector_stores_no_blank_code(tmp_path):
    rows = [{"timestamp": T0, "gpu": 0, "power_w": 4294967.295,  # NVML uint32 blank in mW->W
             "sm_clock_mhz": 2147483632.0, "gpu_util": 150.0, "mem_used_bytes": 1e9},
            {"timestamp": T0, "gpu": 1, "power_w": 300.0, "sm_clock_mhz": 1980.0,
             "gpu_util": float("nan"), "mem_used_bytes": None}]
    blanks: dict = {}
    bad: dict = {}
    screen_batch(rows, blanks, bad)
    assert blanks == {"power_w": 1, "sm_clock_mhz": 1} and bad == {"gpu_util": 1}
    assert math.isnan(rows[0]["power_w"]) and rows[1]["power_w"] == 300.0
    frame = pd.DataFrame([{"timestamp": T0, "gpu": 0, "dram_active": 9.2e20}])
    screen_batch(frame, blanks, bad)
    assert math.isnan(frame.loc[0, "dram_active"]) and bad["dram_active"] == 1


class _Answer(http.server.BaseHTTPRequestHandler):
    """A local HTTP server for the endpoint attacks: ``mode`` says how it misbehaves."""

    mode = "ok"
    body = b""

    def do_GET(self):
        m = type(self).mode
        if m == "hang":
            time.sleep(3)
            return
        if m == "close":
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        body = type(self).body
        self.send_response(200)
        self.send_header("Content-Type", "text/plain" if m != "json" else "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def endpoint():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_values_read_back_from_prometheus_are_screened(endpoint):
    from tealeaves.collectors.prometheus import PrometheusReader

    def series(v):
        return {"metric": {"__name__": "tealeaves_gpu_sm_active_ratio", "Hostname": "n1",
                           "gpu": "0", "UUID": "GPU-1"}, "values": [[T0, str(v)]]}

    _Answer.mode = "json"
    _Answer.body = json.dumps({"status": "success", "data": {
        "resultType": "matrix", "result": [series(9.2e18)]}}).encode()
    samples, _ = PrometheusReader(endpoint).samples(T0 - 1, T0 + 1, 1.0)
    assert len(samples) and samples[list(METRIC_NAMES)].isna().all().all()
    assert sum(c["out_of_range"] + c["blank"]
               for c in samples.attrs["screened"].values()) >= 1


# -- all or nothing -------------------------------------------------------------------------

def _two_files(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(csv_text([{"timestamp": T0 + i, "gpu": 0, "sm_active": 1.0}
                           for i in range(3000)]))
    b.write_text(csv_text([{"timestamp": T0 + 5000 + i, "gpu": g, "sm_active": 2.0}
                           for i in range(3000) for g in range(4)]))
    return a, b


def test_a_full_disk_half_way_through_an_import_leaves_the_store_as_it_was(tmp_path,
                                                                           monkeypatch):
    from tealeaves.app import cli

    db = tmp_path / "s.db"
    small_store(db)
    with SampleStore(db) as s:  # checkpoint: the bytes to compare are the main file's
        s._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = digest(db)
    a, b = _two_files(tmp_path)
    real = SampleStore._conn

    def small_disk(self):
        conn = real(self)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 40}")  # room for file a, not b
        return conn

    monkeypatch.setattr(SampleStore, "_conn", small_disk)
    assert cli.main(["import", str(a), str(b), "--store", str(db)]) == 2
    monkeypatch.undo()
    with SampleStore(db) as s:
        assert s.count() == small_store(tmp_path / "ref.db")
        s._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert digest(db) == before


def test_ctrl_c_half_way_through_an_import_stores_nothing(tmp_path, monkeypatch):
    from tealeaves.data import store_rows as store_mod

    db = tmp_path / "s.db"
    n = small_store(db)
    a, b = _two_files(tmp_path)
    calls = {"n": 0}
    real = store_mod._nullable

    def interrupted(v):
        calls["n"] += 1
        if calls["n"] > 50_000:  # well into the second file
            raise KeyboardInterrupt
        return real(v)

    monkeypatch.setattr(store_mod, "_nullable", interrupted)
    with SampleStore(db) as s, pytest.raises(KeyboardInterrupt):
        s.append_all([import_file(a).samples, import_file(b).samples])
    monkeypatch.undo()
    with SampleStore(db, readonly=True) as s:
        assert s.count() == n


def test_a_bad_file_among_good_ones_imports_nothing_and_a_repeat_is_stored_once(tmp_path):
    a, b = _two_files(tmp_path)
    bad = tmp_path / "bad.csv"
    bad.write_text("hello,world\n1,2\n")
    db = tmp_path / "s.db"
    r = tealeaves("import", a, bad, "--store", db)
    assert r.returncode == 2 and "bad.csv" in r.stderr and not db.exists()
    assert tealeaves("import", a, a, "--store", db).returncode == 0  # the same file twice
    r = tealeaves("import", a, b, "--store", db, "--json")
    doc = json.loads(r.stdout)
    assert doc["stored"] == 12000 and doc["already_stored"] == 3000
    with SampleStore(db, readonly=True) as s:
        assert s.count() == 15000


# -- stores that are ours -------------------------------------------------------------------

def test_another_applications_sqlite_file_is_refused_and_untouched(tmp_path):
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as c:
        c.execute("CREATE TABLE users (id INTEGER, name TEXT)")
        c.execute("INSERT INTO users VALUES (1, 'ada')")
    c.close()
    before = digest(other)
    a, _ = _two_files(tmp_path)
    for args in (["import", a, "--store", other], ["report", "--store", other, "--out",
                                                    tmp_path / "r.json"],
                 ["dashboard", "--no-collect", "--store", other, "--port", "0"]):
        r = tealeaves(*args)
        assert r.returncode == 2 and "not a tealeaves store" in r.stderr, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert digest(other) == before


def test_a_damaged_store_is_one_line_naming_the_file_and_the_recovery(tmp_path):
    db = tmp_path / "s.db"
    small_store(db, seconds=60)
    with SampleStore(db) as s:
        s._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db.read_bytes())
    page = 4096
    for p in range(2, len(data) // page):  # scribble over every page but the first
        data[p * page + 100: p * page + 400] = b"\xff" * 300
    db.write_bytes(bytes(data))
    r = tealeaves("report", "--store", db, "--out", tmp_path / "r.json")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert str(db) in r.stderr and ".recover" in r.stderr


def test_a_directory_is_not_a_store(tmp_path):
    a, _ = _two_files(tmp_path)
    r = tealeaves("import", a, "--store", tmp_path)
    assert r.returncode == 2 and "is a directory" in r.stderr


def test_a_store_whose_shared_memory_file_cannot_be_made_still_reads(tmp_path):
    db = tmp_path / "s.db"
    n = small_store(db)
    (tmp_path / "s.db-shm").unlink(missing_ok=True)
    (tmp_path / "s.db-shm").mkdir()  # as on a read-only mount: SQLite cannot make it
    with SampleStore(db, readonly=True) as s:
        assert s.count() == n


def test_two_collectors_of_one_host_cannot_share_a_store(tmp_path):
    db = tmp_path / "s.db"
    small_store(db)
    first = SampleStore(db)
    first.claim_writer("node-1")
    second = SampleStore(db)
    with pytest.raises(StoreError, match=r"another collector \(pid \d+\) is writing host "
                                         r"'node-1'"):
        second.claim_writer("node-1")
    second.claim_writer("node-2")  # another host is welcome
    first.close()
    third = SampleStore(db)
    third.claim_writer("node-1")  # released with the first
    second.close()
    third.close()


# -- endpoints ------------------------------------------------------------------------------

@pytest.mark.parametrize("mode,why", [("hang", "TimeoutError"), ("close", ""),
                                      ("garbage", "ValueError"), ("huge", "body larger"),
                                      ("series", "series in one scrape")])
def test_a_failing_metrics_endpoint_is_counted_and_reported_once(endpoint, mode, why):
    _Answer.mode = mode
    if mode == "garbage":
        _Answer.body = b"\x00\x01 this is { not exposition text\n" * 10
    elif mode == "huge":
        _Answer.body = b"# " + b"x" * (9 << 20) + b"\n"
    elif mode == "series":
        _Answer.body = "".join(f'sglang:num_running_reqs{{r="{i}"}} 1\n'
                               for i in range(MAX_SERIES + 1)).encode()
    lines: list[str] = []
    s = MetricsScraper(endpoint, interval_s=0.05, timeout_s=0.5, report=lines.append)
    for _ in range(3):
        assert s.scrape_once() is None
    assert s.health.failures == 3 and s.health.last_ok is None
    assert len(lines) == 1 and "scrape failed" in lines[0] and why in s.health.last_error
    _Answer.mode, _Answer.body = "ok", b"sglang:num_running_reqs 2\n"
    assert s.scrape_once() is not None
    assert len(lines) == 2 and "scraping again after 3 failed scrapes" in lines[1]


def test_pods_sharing_a_gpu_are_one_instant():
    text = "".join(f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="GPU-1",pod="p{i}",namespace="n"}} 40\n'
                   for i in range(6))
    text += text.replace(" 40\n", " 60\n")  # the next scrape
    res = import_text(text, "prometheus", start_time=T0, interval=30)
    assert len(res.samples) == 2
    assert res.samples["gpu_util"].tolist() == [40.0, 60.0]
    assert res.time_span == (T0, T0 + 30)


# -- options and outputs --------------------------------------------------------------------

@pytest.mark.parametrize("args,word", [
    (["import", "F", "--start-time", "inf"], "--start-time"),
    (["import", "F", "--start-time", "1e20"], "--start-time"),
    (["import", "F", "--start-time", "nan"], "--start-time"),
    (["classify", "T", "--max-offset", "1e7"], "--max-offset"),
    (["classify", "T", "--window", "1e-9"], "--window"),
    (["report", "--trace", "T", "--tp", "100000", "--out", "x.json"], "--tp"),
    (["collect", "--hz", "1e9"], "--hz"),
    (["dashboard", "--speed", "inf"], "--speed"),
])
def test_numeric_options_are_bounded_at_parse_time(tmp_path, args, word):
    a, _ = _two_files(tmp_path)
    db = tmp_path / "s.db"
    args = [str(a) if x == "F" else str(bundled_trace_path()) if x == "T" else x for x in args]
    # refused before anything starts (no store made); a command that ran on instead would
    # hit tealeaves()'s timeout
    r = tealeaves(*args, "--store", db) if args[0] == "import" else tealeaves(*args)
    assert r.returncode == 2 and word in r.stderr, r.stderr
    assert not db.exists()


def _strict(text: str):
    def no(c):
        raise AssertionError(f"not JSON: {c}")
    return json.loads(text, parse_constant=no)


def test_json_outputs_are_json_never_nan(tmp_path):
    stats = tmp_path / "stats.json"
    r = tealeaves("collect", "--replay", bundled_trace_path(), "--speed", "20", "--duration",
                  "1.5", "--store", tmp_path / "c.db", "--stats-json", stats)
    assert r.returncode == 0, r.stderr
    doc = _strict(stats.read_text())
    assert doc["stored"] > 0
    empty = tmp_path / "empty.csv"
    empty.write_text("timestamp,gpu,sm_active\n")
    r = tealeaves("import", empty, "--store", tmp_path / "e.db", "--json")
    assert r.returncode == 0, r.stderr
    assert _strict(r.stdout)["files"][0]["time_span"] == [None, None]
    r = tealeaves("classify", bundled_trace_path(), "--json")
    assert r.returncode == 0
    _strict(r.stdout)


def test_conform_counts_what_it_screens():
    counts: dict = {}
    df = conform(pd.DataFrame({"timestamp": [T0, T0], "gpu": [0, 1],
                               "power_w": [140737488355328.0, 300.0],
                               "sm_active": [101.0, np.nan]}), counts=counts)
    assert counts == {"power_w": {"blank": 1, "out_of_range": 0},
                      "sm_active": {"blank": 0, "out_of_range": 1}}
    assert df["power_w"].isna().tolist() == [True, False]


# -- from the second round of breaking (a hostile tester, after the first fixes) -------------

def test_energy_counts_no_pause_between_sessions():
    from tealeaves.classifier.summary import energy_j

    t = np.r_[np.arange(0, 60, 1.0), 30 * 86400 + np.arange(0, 60, 1.0)] + T0
    e = energy_j(pd.DataFrame({"timestamp": t, "power_w": 100.0}))
    assert e == pytest.approx(100.0 * 118)  # 59 + 59 one-second intervals, not 30 days
    assert math.isnan(energy_j(pd.DataFrame({"timestamp": [T0], "power_w": [100.0]})))


def test_a_stray_row_before_the_file_is_refused_not_the_file():
    rows = [{"timestamp": 978_307_200.0, "gpu": 0, "sm_active": 1.0}]  # 2001
    rows += [{"timestamp": T0 + i, "gpu": 0, "sm_active": 1.0} for i in range(3)]
    res = import_text(csv_text(rows), "csv")
    assert res.samples["timestamp"].tolist() == [T0, T0 + 1, T0 + 2]
    assert len(res.skipped) == 1 and res.skipped[0][0] == 2
    assert "more than a day before the file's other rows" in res.skipped[0][1]


def test_a_file_with_tealeaves_table_names_is_still_someone_elses(tmp_path):
    for i, ddl in enumerate(["CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
                             "CREATE TABLE samples (id INTEGER, blob BLOB)",
                             "CREATE VIEW v AS SELECT 1"]):
        other = tmp_path / f"o{i}.db"
        with sqlite3.connect(other) as c:
            c.execute(ddl)
        c.close()
        before = digest(other)
        with pytest.raises(StoreError, match="not a tealeaves store"):
            SampleStore(other)
        assert digest(other) == before  # not even switched to WAL


def test_a_link_to_the_store_shares_its_collector_lock(tmp_path):
    db = tmp_path / "s.db"
    small_store(db)
    (tmp_path / "link.db").symlink_to(db)
    a, b = SampleStore(db), SampleStore(tmp_path / "link.db")
    a.claim_writer("vm")
    with pytest.raises(StoreError, match="another collector"):
        b.claim_writer("vm")
    a.close()
    b.close()


def test_a_dripping_metrics_endpoint_times_out(endpoint):
    _Answer.mode = "ok"
    _Answer.body = b"sglang:num_running_reqs 1\n"
    s = MetricsScraper(endpoint, timeout_s=0.5)

    class Drip(_Answer):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            for _ in range(200):  # 60 s in all: only a deadline on the whole read ends it
                try:
                    self.wfile.write(b"#")
                    self.wfile.flush()
                except OSError:  # the scraper gave up and closed the connection
                    return
                time.sleep(0.3)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        s = MetricsScraper(f"http://127.0.0.1:{srv.server_address[1]}", timeout_s=0.5)
        # each byte comes within the 0.5-s timeout: a per-read timeout would wait out the
        # whole 60-s drip and read a body; the scrape's deadline ends it with a TimeoutError
        assert s.scrape_once() is None
        assert "TimeoutError" in s.health.last_error
    finally:
        srv.shutdown()
        srv.server_close()


def test_files_with_other_columns_of_the_same_instants_are_both_kept(tmp_path):
    u, p = tmp_path / "u.txt", tmp_path / "p.txt"
    u.write_text("# gpu sm mem\n# Idx % %\n    0 40 10\n")
    p.write_text("# gpu pwr\n# Idx W\n    0 300\n")
    db = tmp_path / "s.db"
    r = tealeaves("import", u, p, "--store", db, "--start-time", T0, "--json")
    assert r.returncode == 0, r.stderr
    assert _strict(r.stdout)["stored"] == 2
    with SampleStore(db, readonly=True) as s:
        df = s.read_range()
    assert df["power_w"].max() == 300 and df["gpu_util"].max() == 40


def test_query_gpu_text_blanks_are_counted():
    text = ("timestamp, index, power.draw [W], utilization.gpu [%]\n"
            "2026/05/28 10:00:00.000, 0, [N/A], [Not Supported]\n")
    res = import_text(text, "query")
    assert res.blanks == {"gpu_util": 1, "power_w": 1}


def test_a_parquet_gpu_index_must_be_an_index(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    for bad in (-1, 10**12, 0.7):
        f = tmp_path / "g.parquet"
        pq.write_table(pa.table({"timestamp": [T0], "gpu": [bad], "power_w": [100.0]}), f)
        with pytest.raises(ValueError, match="not a GPU index"):
            import_file(f)


def test_a_slow_source_is_one_session_not_one_per_row(tmp_path):
    from tealeaves.app.dashboard.history import History

    db = tmp_path / "slow.db"
    t = T0 + np.arange(600) * 60.5  # --query-gpu -l 60, with jitter past a minute
    with SampleStore(db) as s:
        s.append(pd.DataFrame({"timestamp": t, "gpu": 0, "power_w": 100.0, "gpu_util": 5.0}))
        h = History(s, server_lag_s=0.0)
        h.update(force=True)
        assert len(h.sessions) == 1


def test_a_zoom_whose_request_a_tick_replaced_is_still_carried_out(tmp_path):
    """dash-renderer keeps only the newest request of a callback: a tick fired while a zoom
    was on its way arrives with the zoom as the action input but the tick as the trigger."""
    from tealeaves.app.bench.dashboard import _post, _update_body
    from tealeaves.app.dashboard import ids
    from tealeaves.app.dashboard.config import DashboardConfig
    from tealeaves.app.dashboard.factory import create_app

    db = tmp_path / "s.db"
    small_store(db, seconds=60)
    with SampleStore(db, readonly=True) as store:
        app = create_app(store, DashboardConfig(source="t", server_lag_s=0.0))
        client = app.server.test_client()
        client.get("/")
        state = app.tealeaves_live.snapshot().state
        t0 = store.time_span()[0]
        zoom = {"kind": "range", "t0": (t0 + 10) * 1000, "t1": (t0 + 20) * 1000, "px": 1200,
                "n": 42}
        body = _update_body(app, zoom, state)
        body["changedPropIds"] = [f"{ids.PULL}.data"]  # the tick's request replaced the zoom's
        _, _, resp = _post(client, body)
        cur = resp["response"][ids.CURSOR]["data"]
        assert cur["mode"] == "range" and cur["act_n"] == 42
        assert cur["range"] == pytest.approx([t0 + 10, t0 + 20])
        # the next tick with the same action input does not do it again
        body = _update_body(app, zoom, cur)
        body["changedPropIds"] = [f"{ids.PULL}.data"]
        _, _, resp = _post(client, body)
        assert ids.VIEW_NOTE not in resp["response"] or resp["response"][ids.VIEW_NOTE] \
            .get("children") in (None, "")
