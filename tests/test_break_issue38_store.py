"""Break-it, third round (issue 38), the store and the collector's loss accounting: nothing
lost while reporting success, no value from a blank, no hang, no traceback.

Attacks: a full disk under a running collector; a second collector through a hard link; a
read-only store folder; a forged store; output paths checked late; one file imported twice at
once and conflicting readings; an import whose every row is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest
from test_break_it import digest, small_store

from tealeaves.collectors import run_to_store
from tealeaves.collectors.replay import ReplayCollector
from tealeaves.data import bundled_trace_path
from tealeaves.data.store import SampleStore, StoreError
from tealeaves.data.traces import Trace, read_trace, write_trace

HANG_GUARD_S = 120


def tealeaves(*args, timeout=HANG_GUARD_S, pre: str = ""):
    """Run the CLI in a subprocess; ``pre`` is Python run first (a resource limit)."""
    code = textwrap.dedent(pre) + textwrap.dedent("""
        import runpy, sys
        sys.argv = ["tealeaves", *sys.argv[1:]]
        runpy.run_module("tealeaves.app.cli", run_name="__main__")
    """)
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, check=False)


def short_trace(path: Path, seconds: float = 20.0) -> int:
    """The bundled trace's first ``seconds`` as a Parquet trace at ``path``; its samples."""
    tr = read_trace(bundled_trace_path())
    s = tr.samples[tr.samples["timestamp"] < tr.samples["timestamp"].min() + seconds]
    write_trace(path, Trace(s.reset_index(drop=True), tr.devices, dict(tr.meta)))
    return len(s)


# -- 1. a full disk under a running collector ------------------------------------------------

class FullAfter(SampleStore):
    """A store whose disk fills after ``ok`` appends (SQLite's own error)."""

    ok = 2

    def append(self, samples):
        if self.ok <= 0:
            raise sqlite3.OperationalError("database or disk is full")
        self.ok -= 1
        return super().append(samples)


def test_a_full_disk_counts_every_sample_not_stored(tmp_path):
    tr = read_trace(bundled_trace_path())
    s = tr.samples[tr.samples["timestamp"] < tr.samples["timestamp"].min() + 20]
    collector = ReplayCollector(Trace(s.reset_index(drop=True), tr.devices, {}), speed=200)
    with FullAfter(tmp_path / "s.db") as store:
        stored = run_to_store(collector, store, batch_s=0.01)
        assert store.count() == stored
    h = collector.health
    assert 0 < stored < len(s)
    assert h["dropped_samples"] == len(s) - stored  # every sample not stored is counted
    assert h["buffered_for_store"] == 0 and h["store_errors"] > 0


FULL_DISK = """
    import resource, signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
    resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))
"""


def test_collect_on_a_full_disk_says_so_and_exits_non_zero(tmp_path):
    trace = tmp_path / "t.parquet"
    n = short_trace(trace, 60)
    db, stats = tmp_path / "s.db", tmp_path / "stats.json"
    r = tealeaves("collect", "--replay", trace, "--speed", 500, "--store", db,
                  "--stats-json", stats, pre=FULL_DISK)
    assert r.returncode == 4, r.stderr
    assert "Traceback" not in r.stderr
    with SampleStore(db, readonly=True) as s:
        kept = s.count()
    lost = json.loads(stats.read_text())["dropped_samples"]
    assert kept < n and lost == n - kept
    assert f"NOT STORED: {lost} samples" in r.stdout
    assert f"{lost} samples collected but not stored" in r.stderr


def test_the_dashboard_status_line_shows_samples_waiting_for_the_store():
    from tealeaves.app.dashboard.panels import collector_health

    line = collector_health({"collector": {"dropped_samples": 0, "store_errors": 0,
                                           "buffered_for_store": 120}})
    text = " ".join(getattr(p, "children", p) for p in line)
    assert "120 waiting" in text


# -- 2. a second collector through a hard link ---------------------------------------------

def test_a_store_file_with_two_names_is_not_written_through_either(tmp_path):
    db, other = tmp_path / "s.db", tmp_path / "hard.db"
    n = small_store(db)
    other.hardlink_to(db)
    before = digest(db)
    for name in (db, other):
        with pytest.raises(StoreError, match="has 2 names"):
            SampleStore(name)
    assert digest(db) == before
    with SampleStore(other, readonly=True) as s:  # reading through either name is harmless
        assert s.count() == n


def test_a_second_collector_through_a_hard_link_is_refused(tmp_path):
    trace, db, other = tmp_path / "t.parquet", tmp_path / "s.db", tmp_path / "hard.db"
    short_trace(trace, 5)
    n = small_store(db)
    first = SampleStore(db)
    first.claim_writer("node-1")  # a collector is writing
    other.hardlink_to(db)
    r = tealeaves("collect", "--replay", trace, "--speed", 100, "--store", other,
                  "--host", "node-2")
    first.close()
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{other}: the store file has 2 names" in r.stderr
    with SampleStore(db, readonly=True) as s:
        assert s.count() == n


# -- 3. a read-only store ---------------------------------------------------------------------

def as_reader(*args):
    """The CLI run by someone who may not write the store's folder: this user after
    ``chmod``, or, for root (whom no mode stops), the unprivileged ``nobody`` (uid 65534,
    through util-linux's ``setpriv``)."""
    first = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv: no read-only folder can be made")
        first = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    code = "import runpy, sys; sys.argv = ['tealeaves', *sys.argv[1:]]; " \
           "runpy.run_module('tealeaves.app.cli', run_name='__main__')"
    return subprocess.run([*first, sys.executable, "-c", code, *map(str, args)],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)


def test_a_store_in_a_read_only_folder_is_reported(tmp_path):
    top = Path(tempfile.mkdtemp(prefix="tl38-"))  # reachable by ``nobody`` (tmp_path is not)
    try:
        os.chmod(top, 0o755)
        folder, out = top / "ro", top / "out"
        folder.mkdir()
        out.mkdir(mode=0o777)
        os.chmod(out, 0o777)
        small_store(folder / "s.db")  # closed: no -wal, no -shm left
        os.chmod(folder / "s.db", 0o444)
        os.chmod(folder, 0o555)  # SQLite cannot make s.db-shm here
        r = as_reader("report", "--store", folder / "s.db", "--out", out / "r.json")
        assert r.returncode == 0, r.stderr
        rep = json.loads((out / "r.json").read_text())
        assert rep["range"]["span_s"] > 9 and len(rep["gpus"]) == 2  # the 10 s of 2 GPUs
        assert sorted(p.name for p in folder.iterdir()) == ["s.db"]
    finally:
        os.chmod(top / "ro", 0o755)
        shutil.rmtree(top, ignore_errors=True)


# -- 4. a forged store: the right identity, text timestamps ----------------------------------

def forge(db: Path, sql: str) -> None:
    with sqlite3.connect(db) as c:
        c.execute(sql)
    c.close()


def test_a_store_with_text_timestamps_is_refused_naming_the_file(tmp_path):
    trace, db = tmp_path / "t.parquet", tmp_path / "f.db"
    short_trace(trace, 3)
    small_store(db)
    forge(db, "UPDATE samples SET timestamp = datetime(timestamp, 'unixepoch') WHERE id = 7")
    before = digest(db)
    r = tealeaves("collect", "--replay", trace, "--speed", 100, "--store", db)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{db}: not a store tealeaves wrote (samples.timestamp holds '20" in r.stderr
    assert digest(db) == before  # nothing written into it
    r = tealeaves("report", "--store", db, "--out", tmp_path / "r.json")
    assert r.returncode == 2 and f"{db}: not a store tealeaves wrote" in r.stderr
    assert not (tmp_path / "r.json").exists()


def test_a_store_whose_columns_are_declared_text_is_refused(tmp_path):
    db = tmp_path / "f.db"
    with sqlite3.connect(db) as c:  # tealeaves' identity and tables, a forged samples table
        for t in ("devices", "meta", "processes", "server_events", "server_metrics",
                  "screenshots", "screenshot_data"):
            c.execute(f"CREATE TABLE {t} (x)")
        c.execute("CREATE TABLE samples (id INTEGER PRIMARY KEY, timestamp TEXT, host TEXT, "
                  "gpu INTEGER)")
        c.execute("INSERT INTO samples (timestamp, host, gpu) VALUES ('1780000000', 'h', 0)")
        c.execute("PRAGMA application_id = 1952801132")
        c.execute("PRAGMA user_version = 3")
    c.close()
    for readonly in (False, True):
        with pytest.raises(StoreError, match=r"f\.db: not a store tealeaves wrote "
                                             r"\(samples\.timestamp is declared 'TEXT'"):
            SampleStore(db, readonly=readonly)


def test_text_written_into_an_open_store_is_refused_on_read(tmp_path):
    db = tmp_path / "s.db"
    small_store(db)
    with SampleStore(db, readonly=True) as s:
        forge(db, "UPDATE samples SET gpu = 'GPU-0' WHERE id = 3")
        with pytest.raises(StoreError, match=r"s\.db: samples\.gpu holds 'GPU-0', not a number"):
            s.read_range()


# -- 5. output paths checked late ------------------------------------------------------------

def test_collect_refuses_its_output_paths_before_collecting(tmp_path):
    trace, db, folder = tmp_path / "t.parquet", tmp_path / "s.db", tmp_path / "adir"
    short_trace(trace, 3)
    folder.mkdir()
    for extra, said in ((["--parquet", folder], f"--parquet {folder}: is a folder"),
                        (["--stats-json", folder], f"--stats-json {folder}: is a folder"),
                        (["--stats-json", db], f"--stats-json {db}: is the store"),
                        (["--parquet", tmp_path / "x.pq", "--stats-json", tmp_path / "x.pq"],
                         "is the --parquet file")):
        r = tealeaves("collect", "--replay", trace, "--speed", 100, "--store", db, *extra)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert said in r.stderr and r.stdout == ""  # nothing was collected
        assert not db.exists()


@pytest.mark.parametrize("option", ["--parquet", "--stats-json"])
def test_a_full_disk_at_the_end_of_collect_is_one_error_and_no_half_file(tmp_path, monkeypatch,
                                                                          capsys, option):
    from tealeaves.app.cli import main

    trace, db, out = tmp_path / "t.parquet", tmp_path / "s.db", tmp_path / "o" / "out.file"
    short_trace(trace, 3)

    def full(path, *_args, **_kw):
        Path(path).write_bytes(b"PAR1 half")  # what a full disk leaves
        raise OSError(28, "No space left on device")

    if option == "--parquet":
        from tealeaves.data import traces
        monkeypatch.setattr(traces, "write_trace", full)
    else:
        monkeypatch.setattr(Path, "write_text", full)
    rc = main(["collect", "--replay", str(trace), "--speed", "100", "--store", str(db),
               option, str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and f"{out}: could not be written (No space left" in err
    assert sorted(p.name for p in out.parent.iterdir()) == []  # no .tmp, no half file
    with SampleStore(db, readonly=True) as s:
        assert f"the {s.count()} samples collected are in {db}" in err


def test_report_on_a_full_disk_leaves_no_tmp_file(tmp_path):
    db, out = tmp_path / "s.db", tmp_path / "o" / "r.json"
    small_store(db)
    out.parent.mkdir()
    before = digest(db)
    r = tealeaves("report", "--store", db, "--out", out, pre=FULL_DISK.replace("300_000", "3000"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"--out {out}:" in r.stderr
    assert list(out.parent.iterdir()) == []  # neither the report nor its .tmp
    assert digest(db) == before
    r = tealeaves("report", "--store", db, "--out", tmp_path / "none" / "r.json")
    assert r.returncode == 2 and "the folder" in r.stderr and "does not exist" in r.stderr


# -- 6. the same file imported twice at once; conflicting readings ---------------------------

class _Paused:
    """A connection whose look for stored rows (``_insert_samples``) waits for the other
    import's look (a barrier): the two imports interleave as two processes may."""

    def __init__(self, conn, barrier: threading.Barrier) -> None:
        self._c, self._barrier = conn, barrier

    def execute(self, sql, *args):
        cur = self._c.execute(sql, *args)
        if sql.startswith("SELECT") and "FROM samples WHERE timestamp >=" in sql:
            rows = cur.fetchall()
            try:  # with the write lock taken first, the other import cannot get here
                self._barrier.wait(timeout=3)
            except threading.BrokenBarrierError:
                pass
            return _Rows(rows)
        return cur

    def __enter__(self):
        self._c.__enter__()
        return self

    def __exit__(self, *exc):
        return self._c.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self._c, name)


class _Rows(list):
    def fetchall(self):
        return list(self)


def test_two_imports_of_one_file_at_once_store_it_once(tmp_path):
    from tealeaves.data.importers import import_file

    trace, db = tmp_path / "t.parquet", tmp_path / "s.db"
    n = short_trace(trace, 5)
    samples = import_file(trace).samples
    barrier = threading.Barrier(2)

    class Store(SampleStore):
        def _conn(self):
            return _Paused(super()._conn(), barrier)

    store = Store(db)
    out = []
    threads = [threading.Thread(target=lambda: out.append(store.append_import([samples], [])))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=HANG_GUARD_S)
    store.close()
    assert sorted((o["stored"], o["repeats"]) for o in out) == [(0, n), (n, 0)]
    with sqlite3.connect(db) as c:
        rows, pairs = c.execute("SELECT count(*), count(DISTINCT host || '/' || gpu || '/' || "
                                "timestamp) FROM samples").fetchone()
    c.close()
    assert rows == pairs == n


def test_conflicting_readings_of_one_gpu_and_instant_are_counted(tmp_path):
    db, a, b = tmp_path / "s.db", tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("timestamp,host,gpu,uuid,power_w\n"
                 "1780000000.0,n1,0,GPU-a,100\n1780000000.0,n1,0,GPU-a,200\n"
                 "1780000000.0,n1,0,GPU-a,300\n1780000001.0,n1,0,GPU-a,150\n")
    b.write_text("timestamp,host,gpu,uuid,sm_active\n"  # other columns of one instant: fine
                 "1780000001.0,n1,0,GPU-a,0.5\n"
                 "1780000001.0,n1,0,GPU-b,0.5\n")  # another uuid on GPU 0: a conflict
    r = tealeaves("import", a, "--store", db, "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["stored"] == 4 and got["conflicts"] == 2
    assert got["first_conflict"]["column"] == "power_w"
    assert {got["first_conflict"]["stored"], got["first_conflict"]["new"]} == {100.0, 200.0}
    r = tealeaves("import", b, "--store", db)
    assert r.returncode == 0, r.stderr
    assert "NOTE: 1 conflicting sample: another reading" in r.stdout
    assert "uuid 'GPU-a' and 'GPU-b'" in r.stdout


# -- 7. success that stored nothing --------------------------------------------------------------

def test_a_file_whose_every_row_is_refused_is_an_error(tmp_path):
    tr = read_trace(bundled_trace_path())
    s = tr.samples.head(50).copy()
    ms, db = tmp_path / "ms.parquet", tmp_path / "s.db"
    s.assign(timestamp=s["timestamp"] * 1000).to_parquet(ms)  # epoch milliseconds
    query = tmp_path / "q.csv"
    query.write_text("2026/05/28 20:26:40.000, 0, 55.00 W, 30 %\n"
                     "2026/05/28 20:26:41.000, 0, 56.00 W, 31 %\n")
    good = tmp_path / "t.parquet"
    short_trace(good, 2)
    first_ms = f"{ms}: every row refused (50 lines; the first, line 1: row timestamp 1"
    first_q = (f"{query}: every row refused (2 lines; the first, line 1: bad value (bad "
               f"timestamp '0')")
    wrong = ["--columns", "index,timestamp,power.draw,utilization.gpu"]
    for args, said in (([ms], first_ms),
                       ([good, ms], f"{ms}: every row refused"),  # with a good file: nothing
                       ([query, *wrong], first_q)):
        r = tealeaves("import", *args, "--store", db)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert said in r.stderr
        assert ("check --columns" in r.stderr) == (query in args)
        assert r.stdout == "" and not db.exists()  # nothing stored, no store made
    r = tealeaves("import", query, "--columns", "timestamp,index,power.draw,utilization.gpu",
                  "--store", db)
    assert r.returncode == 0 and "stored 2 samples" in r.stdout


# -- 2b. the server's signals under a store that refuses them --------------------------------

SGLANG_LINES = "".join(
    f"[2026-01-02 03:04:{s:02d}] Decode batch, #running-req: 8, #token: 900, token usage: 0.12, "
    f"gen throughput (token/s): 512.00, #queue-req: 0\n" for s in range(10))


def test_server_events_the_store_refuses_are_counted_and_the_follow_goes_on(tmp_path,
                                                                            capsys):
    """A full disk under the log follower: each batch not stored is counted (events, errors),
    said once, and the follower keeps reading (before, the first error ended the thread and
    every later line was lost without a count)."""
    import threading
    import time

    from tealeaves.collectors import start_server_signals

    log = tmp_path / "server.log"
    log.write_text(SGLANG_LINES)

    class Refusing(SampleStore):
        def put_server_events(self, events):
            raise sqlite3.OperationalError("database or disk is full")

    health: dict = {}
    stop = threading.Event()
    with Refusing(tmp_path / "s.db") as store:
        threads = start_server_signals(store, stop, server_log=str(log), from_start=True,
                                       health=health)
        deadline = time.monotonic() + 30
        while health["server_not_stored"]["events"] < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        with log.open("a") as f:  # read after the first refusal: the follower went on
            f.write(SGLANG_LINES.replace("03:04:", "03:05:"))
        while health["server_not_stored"]["events"] < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(10)
    got = health["server_not_stored"]
    assert got["events"] == 20 and got["errors"] >= 1 and got["metric_rows"] == 0
    err = capsys.readouterr().err
    assert err.count("server events not stored (database or disk is full)") == 1


def test_collect_exits_4_and_says_what_of_the_server_was_not_stored(tmp_path):
    from tealeaves.app.cli.collect import server_not_stored

    assert server_not_stored({}) == ""
    assert server_not_stored({"server_not_stored": {"events": 0, "metric_rows": 0,
                                                    "errors": 0}}) == ""
    line = server_not_stored({"server_not_stored": {"events": 12, "metric_rows": 3,
                                                    "errors": 2}})
    assert line == ("12 server events and 3 server metric rows not stored "
                    "(2 store write errors)")


# -- 2c. another machine's file under the same host name ------------------------------------

def test_a_second_file_near_stored_samples_of_the_same_gpus_is_said(tmp_path, capsys):
    """A fresh user imported an RTX PRO dmon and an H100 table (both without --host, both
    placed at their modification times, 2.6 ms apart): the store mixed them as one machine's
    GPUs without a word.  Now the import says so, naming the GPUs; an exact re-import and a
    file far in time say nothing."""
    import os

    from tealeaves.app.cli import main

    dmon = tmp_path / "dmon.txt"
    dmon.write_text("# gpu    sm   mem\n# Idx     %     %\n"
                    + "".join(f"    {g}    {50 + t}    20\n" for t in range(5) for g in range(2)))
    other = tmp_path / "other.txt"
    other.write_text("# gpu    sm   mem\n# Idx     %     %\n"
                     + "".join(f"    {g}    {5 + t}    2\n" for t in range(3) for g in range(4)))
    far = tmp_path / "far.txt"
    far.write_text(other.read_text())
    now = 1_765_000_000.0
    os.utime(dmon, (now, now))
    os.utime(other, (now + 0.003, now + 0.003))
    os.utime(far, (now + 7200, now + 7200))
    db = tmp_path / "s.db"
    assert main(["import", str(dmon), "--store", str(db)]) == 0
    assert "NOTE: samples were already stored" not in capsys.readouterr().out
    assert main(["import", str(dmon), "--store", str(db)]) == 0  # the same file again
    assert "NOTE: samples were already stored" not in capsys.readouterr().out
    assert main(["import", str(other), "--store", str(db), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["near_stored"] == [["localhost", 0], ["localhost", 1]]
    assert main(["import", str(far), "--store", str(db)]) == 0
    assert "NOTE: samples were already stored" not in capsys.readouterr().out
    os.utime(other, (now + 5, now + 5))
    db2 = tmp_path / "s2.db"
    assert main(["import", str(dmon), "--store", str(db2)]) == 0
    assert main(["import", str(other), "--store", str(db2)]) == 0
    out = capsys.readouterr().out
    assert ("NOTE: samples were already stored within a minute of this import's for host "
            "localhost: GPUs 0, 1: ") in out and "--host" in out
