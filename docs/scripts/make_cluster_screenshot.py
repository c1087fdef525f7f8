"""Make ``docs/dashboard_cluster.png`` (not a test; needs Debian's prometheus and chromium).

    python docs/scripts/make_cluster_screenshot.py [DCGM_FILE]

Two tealeaves collectors replay real two-GPU H200 traces as hosts ``h200-node-a`` and
``h200-node-b`` and publish to Prometheus; a published dcgm-exporter output of four V100s
(``node01``: ``DCGM_FILE``, by default the case file ``dcgm_exporter_prom_4gpu_v100_01.txt`` of
the published real inputs, looked for where ``tests/cases.py`` looks) is a third target; the
dashboard reads the cluster back from Prometheus.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from tealeaves.app.bench.prometheus import serve_text
from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.server import start_in_thread

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
TRACES = ROOT / "data" / "traces"
DCGM_NAME = "dcgm_exporter_prom_4gpu_v100_01.txt"


def _dcgm_case() -> Path:
    """The published dcgm-exporter output: the first argument, else the case file where the
    tests find the published inputs (``tests/cases.py``)."""
    if len(sys.argv) > 1:
        return Path(sys.argv[1])
    for base in (ROOT.parent, ROOT):
        case = base / "shared" / "cases" / "public" / DCGM_NAME
        if case.is_file():
            return case
    sys.exit(f"{DCGM_NAME} not found beside the checkout; give its path as the argument")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    tmp = Path(tempfile.mkdtemp())
    procs, targets = [], []
    for host, trace in (("h200-node-a", "h200x2_bursts"), ("h200-node-b", "h200x2_skew_rotation")):
        p = _port()
        targets.append(f"127.0.0.1:{p}")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "tealeaves.app.cli", "collect", "--replay",
             TRACES / f"{trace}.parquet", "--loop", "--host", host, "--store",
             tmp / f"{host}.db", "--prometheus-port", str(p)], stdout=subprocess.DEVNULL))
    body = _dcgm_case().read_bytes()
    srv = serve_text(lambda: body)
    port = srv.server_address[1]
    targets.append(f"127.0.0.1:{port}")
    web = _port()
    (tmp / "p.yml").write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: t\n"
                               f"    static_configs:\n      - targets: {json.dumps(targets)}\n")
    procs.append(subprocess.Popen(["prometheus", f"--config.file={tmp / 'p.yml'}",
                                   f"--storage.tsdb.path={tmp / 'db'}",
                                   f"--web.listen-address=127.0.0.1:{web}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        time.sleep(75)  # a minute of history
        url, stop = start_in_thread(prometheus=f"http://127.0.0.1:{web}")
        try:
            with sync_playwright() as pw:
                b = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                       args=["--no-sandbox", "--headless", "--disable-gpu"])
                page = b.new_page(viewport={"width": 1500, "height": 1150})
                page.goto(url)
                gd = f"document.querySelector('#{ids.CLUSTER_GRAPH} .js-plotly-plot')"
                page.wait_for_function(f"() => {gd} && {gd}._fullData && "
                                       f"{gd}._fullData.length > 1", timeout=60_000)
                page.wait_for_timeout(4000)
                page.screenshot(path=str(DOCS / "dashboard_cluster.png"))
                b.close()
        finally:
            stop()
    finally:
        srv.shutdown()
        for p in procs:
            p.terminate()


if __name__ == "__main__":
    main()
