"""Issue 38, third round of break-it (bounded reads): a Prometheus server that drips bytes or
answers gigabytes, FIFOs and devices given as telemetry files, huge dmon files and lines.
Every bound is asserted on bytes, rows or state; timeouts here only guard against a hang."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tealeaves.collectors import prometheus as prom


class _Server:
    """A loopback HTTP server answering every request with ``handler(conn)``; counts the
    bytes it sent."""

    def __init__(self, handler) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.handler = handler
        self.sent = 0
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn) -> None:
        try:
            conn.recv(65536)
            self.handler(self, conn)
        except OSError:
            pass
        finally:
            conn.close()

    def send(self, conn, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def _drip(srv, conn) -> None:
    """Headers, then one byte of body every 0.2 s (a per-read timeout never trips)."""
    srv.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 1000000\r\n\r\n")
    for _ in range(600):
        if srv.stop.is_set():
            return
        srv.send(conn, b" ")
        time.sleep(0.2)


def _drip_headers(srv, conn) -> None:
    """The status line itself, one byte every 0.2 s."""
    for b in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000:
        if srv.stop.is_set():
            return
        srv.send(conn, bytes([b]))
        time.sleep(0.2)


def _flood(srv, conn) -> None:
    """A chunked answer without end (no Content-Length): ``{"status":"success",...`` and
    then megabytes of points, as a huge ``query_range`` answer."""
    srv.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n")
    head = b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":' \
           b'{"gpu":"0"},"values":['
    srv.send(conn, b"%x\r\n%s\r\n" % (len(head), head))
    chunk = b'[1700000000.000,"50"],' * 3000
    for _ in range(2000):  # ~130 MB if nobody stops reading
        if srv.stop.is_set():
            return
        srv.send(conn, b"%x\r\n%s\r\n" % (len(chunk), chunk))


@pytest.fixture()
def server(request):
    srv = _Server(request.param)
    yield srv
    srv.close()


@pytest.mark.parametrize("server", [_drip, _drip_headers], indirect=True)
def test_a_dripping_prometheus_is_cut_at_the_total_deadline(server):
    reader = prom.PrometheusReader(server.url, timeout=5.0, deadline_s=1.5)
    t0 = time.monotonic()
    with pytest.raises(prom.PrometheusError, match="total deadline") as err:
        reader.samples(1_700_000_000.0, 1_700_000_060.0, 1.0)
    assert server.url in str(err.value)
    # one query, cut at the deadline: far fewer than the 600 bytes a drip would go on with
    assert time.monotonic() - t0 < 30  # hang guard only
    assert server.sent < 400


@pytest.mark.parametrize("server", [_flood], indirect=True)
def test_a_huge_query_range_answer_stops_at_the_byte_cap(server):
    reader = prom.PrometheusReader(server.url, max_bytes=2 * 2**20)
    with pytest.raises(prom.PrometheusError) as err:
        reader.samples(1_700_000_000.0, 1_700_000_060.0, 1.0)
    msg = str(err.value)
    assert "2,097,152-byte cap" in msg and "coarser step or a smaller range" in msg
    assert server.url in msg


def _declared_big(srv, conn) -> None:
    srv.send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 1500000000\r\n\r\n" + b"{" * 1000)


@pytest.mark.parametrize("server", [_declared_big], indirect=True)
def test_a_declared_1_5_gb_answer_is_refused_before_reading(server):
    reader = prom.PrometheusReader(server.url)
    with pytest.raises(prom.PrometheusError, match="1,500,000,000 bytes, over the"):
        reader.samples(1_700_000_000.0, 1_700_000_060.0, 1.0)


@pytest.mark.parametrize("server", [_drip], indirect=True)
def test_dashboard_prometheus_on_a_dripping_server_says_so_and_exits_2(server, monkeypatch,
                                                                      capsys, tmp_path):
    from tealeaves.app.cli import main

    monkeypatch.setattr(prom, "DEADLINE_S", 1.5, raising=False)
    out: list[int] = []
    run = threading.Thread(target=lambda: out.append(main(
        ["dashboard", "--prometheus", server.url, "--port", "0",
         "--store", str(tmp_path / "s.db")])), daemon=True)
    run.start()
    run.join(60)  # hang guard: today's code waits on the drip for minutes
    assert out, "dashboard --prometheus still waiting on a dripping server"
    err = capsys.readouterr().err
    assert out == [2]
    assert "total deadline" in err and server.url in err
    assert "Traceback" not in err



@pytest.mark.parametrize("url", ["http://[::1", "http://h:port", "http://127.0.0.1:99999"])
def test_an_unusable_prometheus_url_is_one_prometheus_error(url):
    """A guard on the bounded reader (it parses the URL itself): a bad host or port is a
    PrometheusError naming the URL, as urllib's ValueError was turned into before."""
    with pytest.raises(prom.PrometheusError, match="not a usable URL"):
        prom.PrometheusReader(url).samples(1_700_000_000.0, 1_700_000_060.0, 1.0)

# -- 3: FIFOs, devices and directories given as files ------------------------------------------

DMON = ("# gpu    sm   mem    fb\n# Idx     %     %    MB\n"
        "    0    50    20  1000\n    1    60    30  2000\n")


def _main_guarded(argv: list[str]) -> int:
    """``tealeaves ARGV`` in a thread; fails (not hangs) when it is still blocked after 60 s."""
    from tealeaves.app.cli import main

    out: list[int] = []
    run = threading.Thread(target=lambda: out.append(main(argv)), daemon=True)
    run.start()
    run.join(60)  # hang guard: a FIFO blocks today's open() until a writer comes
    assert out, f"tealeaves {' '.join(argv)} still blocked"
    return out[0]


@pytest.fixture()
def odd_file(request, tmp_path):
    import os

    if request.param == "fifo":
        path = tmp_path / "telemetry.fifo"
        os.mkfifo(path)
        return path, "a FIFO"
    if request.param == "dir":
        return tmp_path, "a directory"
    return "/dev/zero", "a character device"


@pytest.mark.parametrize("odd_file", ["fifo", "zero", "dir"], indirect=True)
@pytest.mark.parametrize("command", ["import", "classify"])
def test_import_and_classify_refuse_a_fifo_or_device_naming_it(odd_file, command, tmp_path,
                                                               capsys):
    path, kind = odd_file
    db = tmp_path / "s.db"
    argv = ["import", str(path), "--store", str(db)] if command == "import" else [
        "classify", str(path)]
    assert _main_guarded(argv) == 2
    err = capsys.readouterr().err
    assert f"{path}: is {kind}" in err and "Traceback" not in err
    assert not db.exists()  # nothing stored, no store made


@pytest.mark.parametrize("odd_file", ["fifo", "zero"], indirect=True)
@pytest.mark.parametrize("option", ["--labels", "--server-log", "--server-metrics"])
def test_classify_refuses_a_fifo_or_device_for_its_other_files(odd_file, option, tmp_path,
                                                               capsys):
    path, kind = odd_file
    trace = tmp_path / "dmon.txt"
    trace.write_text(DMON)
    assert _main_guarded(["classify", str(trace), option, str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{option} {path}: is {kind}" in err and "Traceback" not in err


def test_a_file_over_the_import_limit_is_refused_naming_it(tmp_path, monkeypatch, capsys):
    from tealeaves.data import import_common

    path = tmp_path / "dmon.txt"
    path.write_text(DMON * 50)  # 4,800 bytes
    monkeypatch.setattr(import_common, "MAX_FILE_BYTES", 1000, raising=False)
    db = tmp_path / "s.db"
    assert _main_guarded(["import", str(path), "--store", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: is 4,800 bytes, over the 1,000-byte limit" in err
    assert not db.exists()


# -- 4: huge dmon files and lines ---------------------------------------------------------------

def test_is_blank_and_out_of_range_answer_a_scalar_reading_without_numpy(monkeypatch):
    """The importers check every value they parse: a plain reading must not pay NumPy's
    per-call cost (70 us a value made a 630 MB dmon import take hours)."""
    import numpy as np

    from tealeaves.data import schema

    calls = []

    def counting(*a, **k):
        calls.append(a)
        return np.asarray(*a, **k)

    monkeypatch.setattr(schema.np, "asarray", counting)
    for v in (0.0, 55.0, 700.5, 2.0**31 - 17, np.float64(12.5), 3):
        assert schema.is_blank(v) is False
        assert schema.out_of_range("power_w", v) in (False, True)
    assert not calls
    monkeypatch.undo()
    # and the answers did not change: codes (exact or within 1e-12), NaN, arrays
    for code in (0x7FFFFFF0, 4294967295.0, 2.0**47, 2.0**64 - 1, np.float64(2.0**47 + 1)):
        assert schema.is_blank(code) is True
        assert schema.is_blank(float(code) * (1 + 5e-13)) is True
    assert schema.is_blank(float("nan")) is False
    assert schema.is_blank(2.0**47 * (1 - 1e-9)) is False
    assert list(schema.is_blank(np.array([1.0, 2.0**47, np.nan]))) == [False, True, False]
    assert schema.out_of_range("power_w", 1e9) is True
    assert schema.out_of_range("power_w", -1) is True
    assert schema.out_of_range("power_w", float("nan")) is False


def test_a_line_over_the_bound_is_refused_naming_file_and_line(tmp_path, monkeypatch, capsys):
    from tealeaves.data import import_common

    monkeypatch.setattr(import_common, "MAX_LINE_BYTES", 100, raising=False)
    monkeypatch.setattr(import_common, "_CHUNK", 64, raising=False)  # lines across chunks
    path = tmp_path / "dmon.txt"
    path.write_bytes((DMON + "    0    50    20  1000" + " 7" * 60 + "\n" + DMON).encode())
    db = tmp_path / "s.db"
    assert _main_guarded(["import", str(path), "--store", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: line 5 is longer than 100 bytes" in err and "Traceback" not in err
    assert not db.exists()


@pytest.mark.parametrize("chunk", [7, 64, 4096])
@pytest.mark.parametrize("ends", ["\n", "\r\n", "\r"])
def test_the_line_bound_numbers_lines_as_the_importers_do_across_chunks(monkeypatch, chunk,
                                                                       ends):
    from tealeaves.data import import_common

    monkeypatch.setattr(import_common, "MAX_LINE_BYTES", 20, raising=False)
    lines = ["a" * n for n in (3, 0, 20, 19, 5)]
    for bad in range(len(lines) + 1):
        body = list(lines)
        if bad < len(lines):
            body[bad] = "b" * 21
        data = ends.join(body).encode()
        bound = import_common._LineBound("f.txt")
        try:
            for i in range(0, len(data), chunk):
                bound.feed(data[i:i + chunk])
        except import_common.ImportFormatError as exc:
            assert f"f.txt: line {bad + 1} is longer than 20 bytes" in str(exc)
        else:
            assert bad == len(lines), f"line {bad + 1} of 21 bytes passed"


def test_the_import_size_benchmark_runs_small(capsys):
    """The benchmark of issue 38 (``app.bench.import_size``), run at 50 kB: one line of
    figures per version, the file imported whole, the figures in JSON too."""
    import json

    from tealeaves.app.bench import import_size

    assert import_size.main(["--mb", "0.05", "--gpus", "2", "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].split()[:3] == ["version", "file", "MB"]
    assert out[1].startswith("this tree/frame") and out[2].startswith("this tree/store")
    doc = json.loads(out[-1])
    for how in ("frame", "store"):
        r = doc["results"][f"this tree/{how}"]
        assert r["error"] is None and r["samples"] == r["rows"] > 300, how
    assert r["peak_mb"] > 0 and r["seconds"] > 0 and 0.04 < doc["file_mb"] < 0.06
