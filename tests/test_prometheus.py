"""Two tealeaves collectors replaying real traces as two hosts on loopback, scraped by a real
Prometheus server (Debian's ``prometheus`` package, started here with a generated config):
both hosts' phases, per-GPU gauges and counters come back through Prometheus' HTTP API with
dcgm-exporter's label keys."""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tealeaves.data import bundled_trace_path

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
TRACES = Path(bundled_trace_path()).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def _query(base: str, q: str) -> list:
    doc = json.loads(_get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": q})))
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


DCGM_CASE = (Path(__file__).resolve().parents[2] / "shared" / "cases" / "public"
             / "dcgm_exporter_prom_4gpu_v100_01.txt")


def _serve_text(path: Path):
    """Serve a dcgm-exporter text file at /metrics on loopback (a scrape target)."""
    from tealeaves.app.bench.prometheus import serve_text

    body = path.read_bytes()
    srv = serve_text(lambda: body)
    return srv.server_address[1], srv


@pytest.fixture()
def cluster(tmp_path):
    if not Path(PROMETHEUS).exists():
        pytest.skip("the prometheus server is missing (Debian's prometheus package; "
                    "`apt-get install prometheus`)")
    procs = []
    targets = []
    dcgm_srv = None
    hosts = {"h200-node-a": TRACES / "h200x2_bursts.parquet",
             "h200-node-b": TRACES / "h200x2_skew_rotation.parquet"}
    try:
        for host, trace in hosts.items():
            port = _free_port()
            targets.append(f"127.0.0.1:{port}")
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "tealeaves.app.cli", "collect", "--replay", trace,
                 "--loop", "--host", host, "--store", tmp_path / f"{host}.db",
                 "--prometheus-port", str(port)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        dcgm_srv = None
        if DCGM_CASE.exists():  # a real dcgm-exporter output, served as a third target
            port, dcgm_srv = _serve_text(DCGM_CASE)
            targets.append(f"127.0.0.1:{port}")
        web = _free_port()
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                       "scrape_configs:\n  - job_name: tealeaves\n    static_configs:\n"
                       f"      - targets: {json.dumps(targets)}\n")
        procs.append(subprocess.Popen(
            [PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{web}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        yield f"http://127.0.0.1:{web}", hosts, targets
    finally:
        if dcgm_srv is not None:
            dcgm_srv.shutdown()
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def test_two_collectors_scraped_by_a_real_prometheus(cluster):
    base, hosts, targets = cluster
    deadline = time.time() + 60
    seen: set = set()
    up: dict = {}
    while time.time() < deadline:
        try:
            seen = {r["metric"]["Hostname"] for r in _query(base, "tealeaves_phase == 1")}
            up = {r["metric"]["instance"]: r["value"][1] for r in _query(base, "up")}
        except OSError:
            seen, up = set(), {}
        # every target scraped once (the dcgm-exporter one can come a scrape later on a
        # busy machine), not only the two tealeaves hosts
        if (seen == set(hosts) and up == dict.fromkeys(targets, "1")
                and _query(base, "tealeaves_phase_seconds_total > 0")):
            break
        time.sleep(1)
    assert seen == set(hosts), seen
    # (the dcgm-exporter target is up too, when the shared cases are there)
    assert up == dict.fromkeys(targets, "1")
    # one phase on per host, of the three
    on = _query(base, "sum by (Hostname) (tealeaves_phase)")
    assert {r["metric"]["Hostname"]: r["value"][1] for r in on} == dict.fromkeys(hosts, "1")
    states = {r["metric"]["tealeaves_phase"] for r in _query(base, "tealeaves_phase")}
    assert states == {"idle", "prefill", "decode"}
    # per-GPU gauges in base units, with dcgm-exporter's label keys
    sm = _query(base, "tealeaves_sm_active_ratio")
    assert len(sm) == 4  # two GPUs on each of two hosts
    for r in sm:
        assert {"gpu", "UUID", "device", "modelName", "Hostname"} <= set(r["metric"])
        assert r["metric"]["modelName"] == "NVIDIA H200"
        v = float(r["value"][1])
        assert math.isnan(v) or 0.0 <= v <= 1.0  # NaN (no reading) or a ratio
    watts = [float(r["value"][1]) for r in _query(base, "tealeaves_power_watts")]
    assert all(50 < w < 800 for w in watts), watts
    # counters: time in phases grows, and a join on the DCGM keys works
    # (a wait for the state, not a sleep: Prometheus needs two scrapes of each host for an
    # increase, however long those take on a busy machine)
    deadline = time.time() + 60
    while True:
        grew = _query(base, "sum by (Hostname) (increase(tealeaves_phase_seconds_total[30s]))")
        grown = {r["metric"]["Hostname"] for r in grew if float(r["value"][1]) > 0}
        if grown == set(hosts) or time.time() > deadline:
            break
        time.sleep(0.5)
    assert grown == set(hosts), grew
    joined = _query(base, "tealeaves_sm_active_ratio * on (Hostname, gpu) "
                          "group_left tealeaves_gpu_load_ratio")
    assert len(joined) == 4
    health = _query(base, "tealeaves_collector_sweeps_total")
    assert len(health) == 2 and all(float(r["value"][1]) > 0 for r in health)


def test_the_dashboard_reads_the_cluster_back_from_prometheus(cluster):
    """Both tealeaves hosts with their phases, and the host only dcgm-exporter reports, mapped
    onto the sample schema, in the dashboard's cluster overview; picking a node shows its
    lanes."""
    from playwright.sync_api import sync_playwright

    from tealeaves.app.dashboard import ids
    from tealeaves.app.dashboard.server import start_in_thread

    chromium = "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip(f"{chromium} is missing (Debian's chromium package)")
    base, hosts, _ = cluster
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if len(_query(base, "tealeaves_phase == 1")) == len(hosts):
                break
        except OSError:
            pass
        time.sleep(1)
    # some history to read back: wait until Prometheus holds a few seconds of each host
    while time.time() < deadline:
        try:
            held = _query(base, "count_over_time(tealeaves_phase_seconds_total[1m])")
        except OSError:
            held = []
        if len(held) >= len(hosts) and all(float(r["value"][1]) >= 4 for r in held):
            break
        time.sleep(0.5)
    want = set(hosts) | ({"node01"} if DCGM_CASE.exists() else set())
    url, stop = start_in_thread(prometheus=base)
    try:
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=chromium,
                                  args=["--no-sandbox", "--headless", "--disable-gpu"])
            page = b.new_page(viewport={"width": 1500, "height": 1100})
            page.goto(url)
            gd = f"document.querySelector('#{ids.CLUSTER_GRAPH} .js-plotly-plot')"
            page.wait_for_function(
                f"() => {gd} && {gd}._fullData && {gd}._fullData.length > 1 && "
                f"{gd}._fullData[0].y && "
                f"{gd}._fullData[0].y.length === {len(want)}", timeout=60_000)
            rows = page.evaluate(f"() => Array.from({gd}._fullData[0].y).map("
                                 f"s => s.replace(/<\\/?b>/g, ''))")
            phases = page.evaluate(f"() => {gd}._fullData[0].z.map(r => r.filter("
                                   f"v => v !== null && !Number.isNaN(v)).length)")
            gpu_rows = page.evaluate(f"() => Array.from({gd}._fullData[1].y).map("
                                     f"s => s.replace(/<\\/?b>/g, ''))")
            assert set(rows) == want, rows
            seen = dict(zip(rows, phases, strict=True))
            assert all(seen[h] > 0 for h in hosts), seen  # phases on both tealeaves hosts
            assert {r.split(" · ")[0] for r in gpu_rows} == want, gpu_rows
            assert sum(r.startswith("h200-node-a") for r in gpu_rows) == 2
            if DCGM_CASE.exists():
                assert seen["node01"] > 0  # classified from DCGM's fields alone
            # pick node b: the status line and the lanes follow
            page.click(f"#{ids.HOST}")
            page.get_by_role("option", name="h200-node-b").click()
            page.wait_for_function(f"() => document.querySelector('#{ids.STATUS}').innerText"
                                   f".includes('on h200-node-b')", timeout=30_000)
            if DCGM_CASE.exists():  # a node with GPU utilisation only: empty lanes, no error
                errors: list[str] = []
                page.on("response", lambda r: errors.append(r.url) if r.status >= 500 else None)
                page.click(f"#{ids.HOST}")
                page.get_by_role("option", name="node01").click()
                page.wait_for_function(f"() => document.querySelector('#{ids.STATUS}')"
                                       f".innerText.includes('on node01')", timeout=30_000)
                page.wait_for_timeout(1500)
                assert not errors, errors
            b.close()
    finally:
        stop()
