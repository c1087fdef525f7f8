"""``tealeaves bench prometheus``: what tealeaves' exporter costs a Prometheus, measured on a
real server, and the load of a fleet worked out from it (docs/scale.md).

1. **Exporter**: an 8-GPU node's ``/metrics`` from ``app.exporter`` on a store of real H200
   telemetry tiled to eight GPUs (``classifier.bench.synthetic_hour``): series per GPU and per
   node, body bytes (plain and gzip, as Prometheus asks for it), and the scrape's server time.
2. **Prometheus**: Debian's ``prometheus`` scraping ``--targets`` such nodes at
   ``--interval`` for ``--seconds``.  The targets are served from this process with the
   exporter's exact series set and a fresh random walk of values at every scrape (so the TSDB
   compresses real changes, not constants).  Read from Prometheus' own metrics: head series,
   samples appended per second, resident memory, CPU, WAL bytes per sample.
3. **1 000 nodes x 8 GPUs** at 1 s and 10 s: series, samples/s, scrape bytes/s, memory and
   disk per day, from the measured per-series and per-sample figures.  Prometheus' docs give
   1-2 bytes per sample on disk after compaction (storage.md); the WAL figure measured here is
   the pre-compaction upper bound.
"""

from __future__ import annotations

import gzip
import http.server
import json
import random
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path


def exporter_figures(n_gpus: int = 8, scrapes: int = 20) -> dict:
    """Series, body bytes and scrape time of one ``n_gpus``-GPU node's ``/metrics``, and the
    text itself (for the simulated targets)."""
    from prometheus_client import generate_latest
    from prometheus_client.registry import CollectorRegistry

    from tealeaves.app.exporter import TealeavesCollector
    from tealeaves.classifier.bench import synthetic_hour
    from tealeaves.data import bundled_trace_path
    from tealeaves.data.store import SampleStore
    from tealeaves.data.traces import read_trace

    tr = read_trace(bundled_trace_path())
    samples, devices = synthetic_hour(tr.samples, tr.devices, seconds=30.0, n_gpus=n_gpus)
    tmp = Path(tempfile.mkdtemp(prefix="tealeaves-prom-"))
    try:
        with SampleStore(tmp / "s.db") as store:
            store.put_devices(devices)
            store.append(samples)
            reg = CollectorRegistry(auto_describe=False)
            reg.register(TealeavesCollector(store, lambda: {"sweeps": 1, "offline": set()}))
            generate_latest(reg)  # model load, first classification
            times = []
            for _ in range(scrapes):
                t = time.perf_counter()
                body = generate_latest(reg)
                times.append(time.perf_counter() - t)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = body.decode()
    series = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    per_gpu = sum('gpu="0"' in ln for ln in series)
    return {"gpus": n_gpus, "series": len(series), "series_per_gpu": per_gpu,
            "series_per_node_only": len(series) - per_gpu * n_gpus,
            "body_bytes": len(body), "body_gzip_bytes": len(gzip.compress(body)),
            "scrape_ms_median": statistics.median(times) * 1e3, "text": text}


def serve_text(body: Callable[[], bytes], host: str = "127.0.0.1",
               port: int = 0) -> http.server.ThreadingHTTPServer:
    """Serve ``body()`` as Prometheus text exposition on every GET, from a daemon thread (a
    simulated scrape target); ``.server_address[1]`` is the port, ``.shutdown()`` stops it."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            data = body()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass
    srv = http.server.ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


class _Targets:
    """``n`` scrape targets on loopback, each a node serving the exporter's series with
    values that random-walk at every scrape."""

    def __init__(self, text: str, n: int) -> None:
        lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
        self.names = [ln.rsplit(" ", 1)[0] for ln in lines]
        self.servers = []
        for i in range(n):
            host = f"node{i:04d}"
            names = [nm.replace('Hostname="', f'Hostname="{host}-', 1) for nm in self.names]
            values = [random.random() for _ in names]
            self.servers.append(self._serve(names, values))

    @staticmethod
    def _serve(names: list[str], values: list[float]):
        lock = threading.Lock()

        def body() -> bytes:  # every scrape: each value takes a random-walk step
            with lock:
                for k in range(len(values)):
                    values[k] = min(1.0, max(0.0, values[k] + random.gauss(0, 0.05)))
                return "".join(f"{n} {v:.6g}\n" for n, v in zip(names, values)).encode()
        return serve_text(body)

    def ports(self) -> list[int]:
        return [s.server_address[1] for s in self.servers]

    def close(self) -> None:
        for s in self.servers:
            s.shutdown()


def _prom_metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:  # summed over label sets (e.g. type="float")
            out[sample.name] = out.get(sample.name, 0.0) + float(sample.value)
    return out


def prometheus_figures(text: str, targets: int = 50, interval: float = 1.0,
                       seconds: float = 60.0, binary: str = "/usr/bin/prometheus") -> dict:
    """Run Debian's Prometheus scraping ``targets`` simulated nodes; its own figures."""
    if not Path(binary).exists():
        raise FileNotFoundError(f"{binary}: the prometheus server is missing "
                                f"(apt-get install prometheus)")
    tg = _Targets(text, targets)
    tmp = Path(tempfile.mkdtemp(prefix="tealeaves-prom-"))
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp / "prometheus.yml"
    cfg.write_text(f"global:\n  scrape_interval: {interval:g}s\nscrape_configs:\n"
                   f"  - job_name: tealeaves\n    static_configs:\n      - targets: "
                   f"{json.dumps([f'127.0.0.1:{p}' for p in tg.ports()])}\n")
    proc = subprocess.Popen([binary, f"--config.file={cfg}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        base = None
        while time.time() < deadline:
            try:
                base = _prom_metrics(port)
                break
            except OSError:
                time.sleep(0.5)
        if base is None:
            raise RuntimeError("prometheus did not start")
        end_warm = time.time() + 30
        while time.time() < end_warm:  # until every target's series are in the head
            m0 = _prom_metrics(port)
            if m0.get("prometheus_tsdb_head_series", 0) >= targets * len(tg.names):
                break
            time.sleep(1)
        time.sleep(2 * interval)
        m0, t0 = _prom_metrics(port), time.time()
        time.sleep(seconds)
        m1, t1 = _prom_metrics(port), time.time()
        wal = sum(f.stat().st_size for f in (tmp / "tsdb" / "wal").rglob("*") if f.is_file())
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        tg.close()
        shutil.rmtree(tmp, ignore_errors=True)
    dt = t1 - t0
    key = "prometheus_tsdb_head_samples_appended_total"
    appended = m1.get(key, 0.0) - m0.get(key, 0.0)
    total_appended = m1.get(key, 0.0)
    return {"targets": targets, "interval_s": interval, "seconds": round(dt, 1),
            "head_series": m1["prometheus_tsdb_head_series"],
            "samples_per_s": appended / dt,
            "rss_bytes": m1["process_resident_memory_bytes"],
            "rss_bytes_idle": base["process_resident_memory_bytes"],
            "cpu_cores": (m1["process_cpu_seconds_total"] - m0["process_cpu_seconds_total"]) / dt,
            "wal_bytes": wal, "wal_bytes_per_sample": wal / max(total_appended, 1.0)}


def fleet(exp: dict, prom: dict, nodes: int = 1000, disk_bytes_per_sample: float = 1.5) -> list:
    """The load of ``nodes`` 8-GPU nodes at 1 s and 10 s, from the measured figures."""
    series = nodes * exp["series"]
    per_series = ((prom["rss_bytes"] - prom["rss_bytes_idle"])
                  / max(prom["head_series"], 1.0))
    cpu_per_ksps = prom["cpu_cores"] / max(prom["samples_per_s"] / 1000.0, 1e-9)
    out = []
    for interval in (1.0, 10.0):
        sps = series / interval
        out.append({
            "nodes": nodes, "gpus": nodes * exp["gpus"], "interval_s": interval,
            "series": series, "samples_per_s": sps,
            "scrape_bytes_per_s": nodes * exp["body_gzip_bytes"] / interval,
            "memory_bytes": prom["rss_bytes_idle"] + series * per_series,
            "cpu_cores": sps / 1000.0 * cpu_per_ksps,
            "disk_bytes_per_day": sps * 86400 * disk_bytes_per_sample,
            "wal_bytes_per_day_upper": sps * 86400 * prom["wal_bytes_per_sample"]})
    return out


def main(targets: int = 50, interval: float = 1.0, seconds: float = 60.0,
         out: Path | None = None) -> dict:
    """Run the three steps and print a table; the figures as a dict (JSON to ``out``)."""
    exp = exporter_figures()
    text = exp.pop("text")
    print(f"exporter, 8 GPUs: {exp['series']} series ({exp['series_per_gpu']} per GPU, "
          f"{exp['series_per_node_only']} per node), {exp['body_bytes']:,} B "
          f"({exp['body_gzip_bytes']:,} B gzip) per scrape, {exp['scrape_ms_median']:.0f} ms "
          f"per scrape", flush=True)
    prom = prometheus_figures(text, targets, interval, seconds)
    print(f"prometheus, {targets} nodes at {interval:g} s for {prom['seconds']} s: "
          f"{prom['head_series']:,.0f} series, {prom['samples_per_s']:,.0f} samples/s, "
          f"RSS {prom['rss_bytes'] / 2**20:,.0f} MiB (idle {prom['rss_bytes_idle'] / 2**20:,.0f}),"
          f" {prom['cpu_cores']:.3f} cores, WAL {prom['wal_bytes_per_sample']:.2f} B/sample",
          flush=True)
    rows = fleet(exp, prom)
    for r in rows:
        print(f"1000 nodes x 8 GPUs at {r['interval_s']:g} s: {r['series']:,} series, "
              f"{r['samples_per_s']:,.0f} samples/s, scrapes {r['scrape_bytes_per_s'] / 1e6:.1f} "
              f"MB/s, memory {r['memory_bytes'] / 2**30:.1f} GiB, CPU {r['cpu_cores']:.1f} cores,"
              f" disk {r['disk_bytes_per_day'] / 2**30:.0f} GiB/day (WAL upper bound "
              f"{r['wal_bytes_per_day_upper'] / 2**30:.0f})")
    result = {"exporter": exp, "prometheus": prom, "fleet": rows,
              "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    if out is not None:
        from tealeaves.data.jsontext import dumps
        out.write_text(dumps(result, indent=1))
    return result


__all__ = ["exporter_figures", "fleet", "main", "prometheus_figures", "serve_text"]

if __name__ == "__main__":  # pragma: no cover
    main()
