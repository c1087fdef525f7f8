"""``tealeaves bench dashboard``: the dashboard on one hour of eight-GPU telemetry at 20 Hz.

What it measures, side by side with plotly-resampler (the well-known alternative: a
``FigureResampler`` holding the raw samples and answering zooms with MinMaxLTTB):

1. **Server time and payload** of the three requests a page makes: the full-range view
   ("all"), a 1-minute zoom (and a 10-s zoom, the raw-sample path), and a live tick in follow
   mode after 0.25 s of new samples; apart, the history update that reads, bins and labels
   those samples (the served dashboard runs it in a background thread, so the tick only
   reads).  Measured in this process through the app's own Flask
   server (``app.server.test_client()``: the real Dash callback, JSON encoding included, no
   network), warm history, median and worst of ``repeat`` requests.  The first load of the
   history (reading, binning and labelling the whole hour) is reported apart as the cold start.
   plotly-resampler: building its figure from the store's samples, serialising the
   full-range figure, and ``construct_update_data_patch`` for the same 1-minute zoom.
2. **Sample-to-screen latency** in headless Chromium: ``tealeaves dashboard --no-collect``
   serves the store from a subprocess while this process appends eight GPUs' samples at 20 Hz
   stamped with the wall clock (as ``tealeaves collect`` would).  The page is hooked on
   ``plotly_afterplot``: every redraw records (paint time, end of the newest bin drawn); each
   written sample's latency is the first paint whose newest bin covers its stamp minus the
   stamp.  The page's own estimate (its status line) is read too, and the server's CPU use
   (user + system, ``/proc``) while that one page follows.
3. **Server memory**: resident set (VmRSS) of that subprocess with 1 and then 5 pages open;
   plotly-resampler's: a fresh process holding 1 and then 5 ``FigureResampler`` figures (one
   per page, as its per-session cache keeps them).

The hour is the classifier benchmark's (``classifier.bench.synthetic_hour``: the bundled real
two-GPU H200 recording repeated to an hour and copied onto eight GPUs with 2 % jitter), moved
so that it ends now.
"""

from __future__ import annotations

import json
import math
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

#: Plot-area width (px) the benchmark asks for: a 1440-px window less margins and panel.
PX = 1060
#: Name of the full-range request in the figures.
FULL = "full range"
#: Names of a followed page's tick and of the history update beside it, in the figures.
TICK = "live tick (0.25 s new)"
UPDATE = "history update (0.25 s)"
CHROMIUM = "/usr/bin/chromium"


def build_store(path: Path, seconds: float = 3600.0, n_gpus: int = 8, log=print,
                end: float | None = None) -> dict:
    """Write ``seconds`` of ``n_gpus``-GPU telemetry ending now (or at ``end``, epoch s) into
    a new store at ``path``.

    Returns:
        ``{"rows", "seconds", "hz", "end", "pattern"}``; ``pattern`` is one bundled-trace
        period of samples (GPUs 0..n-1) the live writer repeats.
    """
    from tealeaves.classifier.bench import synthetic_hour
    from tealeaves.data import bundled_trace_path
    from tealeaves.data.store import SampleStore
    from tealeaves.data.traces import read_trace

    trace = read_trace(bundled_trace_path())
    samples, devices = synthetic_hour(trace.samples, trace.devices, seconds, n_gpus)
    end = time.time() if end is None else float(end)
    shift = end - float(samples["timestamp"].max())
    samples["timestamp"] = samples["timestamp"] + shift
    samples["monotonic"] = samples["timestamp"] - (time.time() - time.monotonic())
    if path.exists():
        if not made_by_bench(path):
            raise ValueError(f"{path} exists and is not a store this benchmark made: give a "
                             f"new path (it is overwritten)")
        path.unlink()
    t = time.perf_counter()
    with SampleStore(path) as store:
        store.set_meta("made_by", BENCH_MARK)
        store.put_devices(devices)
        for i in range(0, len(samples), 100_000):
            store.append(samples.iloc[i:i + 100_000])
    log(f"store: {len(samples):,} samples ({n_gpus} GPUs x {seconds:.0f} s at "
        f"{len(samples) / n_gpus / seconds:.1f} Hz) written in {time.perf_counter() - t:.1f} s")
    t0 = float(samples["timestamp"].min())
    pattern = samples[samples["timestamp"] < t0 + 60.0].copy()
    return {"rows": len(samples), "seconds": seconds, "hz": len(samples) / n_gpus / seconds,
            "end": end, "pattern": pattern}


BENCH_MARK = "tealeaves bench dashboard"


def made_by_bench(path: Path) -> bool:
    """True when ``path`` is a store ``build_store`` wrote (safe to overwrite)."""
    from tealeaves.data.store import SampleStore, StoreError

    try:
        with SampleStore(path, readonly=True) as s:
            return s.meta().get("made_by") == BENCH_MARK
    except (StoreError, OSError):
        return False


class Writer:
    """Appends one sweep (every GPU) every ``1 / hz`` s, stamped with the wall clock, cycling
    through ``pattern``'s values.  ``stamps`` lists the sweeps' stamps."""

    def __init__(self, path: Path, pattern: pd.DataFrame, hz: float = 20.0) -> None:
        self.path, self.hz = path, hz
        ts = pattern["timestamp"].to_numpy()
        self.sweeps = [g for _, g in pattern.groupby(ts)]
        self.stamps: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def _run(self) -> None:
        from tealeaves.data.store import SampleStore

        store = SampleStore(self.path)
        i = 0
        nxt = time.monotonic()
        while not self._stop.is_set():
            sweep = self.sweeps[i % len(self.sweeps)].copy()
            now = time.time()
            sweep["timestamp"] = now
            sweep["monotonic"] = time.monotonic()
            store.append(sweep)
            self.stamps.append(now)
            i += 1
            nxt += 1.0 / self.hz
            self._stop.wait(max(0.0, nxt - time.monotonic()))
        store.close()

    def write_now(self, store, seconds: float) -> None:
        """Append ``seconds`` of sweeps at once, synchronously: stamped just before now, or
        right after the previous call's newest stamp when that is later (calls come faster
        than real time in ``server_figures``: each still adds ``seconds`` of sample time, so
        windows complete at the live rate)."""
        n = max(1, round(seconds * self.hz))
        end = time.time()
        if self.stamps:
            end = max(end, self.stamps[-1] + n / self.hz)
        mono = time.monotonic() + (end - time.time())
        parts = []
        for m in range(n):
            sweep = self.sweeps[(len(self.stamps) + m) % len(self.sweeps)].copy()
            sweep["timestamp"] = end - (n - 1 - m) / self.hz
            sweep["monotonic"] = mono - (n - 1 - m) / self.hz
            parts.append(sweep)
        store.append(pd.concat(parts, ignore_index=True))
        self.stamps.extend(float(p["timestamp"].iloc[0]) for p in parts)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _update_body(app, action, state, pull: int = 1) -> dict:
    """The request body of the dashboard's one update callback (as dash-renderer sends it)."""
    from tealeaves.app.dashboard import ids

    key = next(k for k in app.callback_map if f"{ids.CURSOR}.data" in k
               and f"{ids.GRAPH}.extendData" in k)
    outputs = []
    for part in key.strip(".").split("..."):
        cid, prop = part.rsplit(".", 1)
        outputs.append({"id": cid, "property": prop})
    changed = f"{ids.ACTION}.data" if action is not None else f"{ids.PULL}.data"
    return {"output": key, "outputs": outputs,
            "inputs": [{"id": ids.PULL, "property": "data", "value": pull},
                       {"id": ids.ACTION, "property": "data", "value": action}],
            "changedPropIds": [changed],
            "state": [{"id": ids.CURSOR, "property": "data", "value": state},
                      {"id": ids.SELECTED, "property": "data", "value": None},
                      {"id": ids.BUSY, "property": "data", "value": None},
                      {"id": ids.PAGE_TZ, "property": "data", "value": "UTC"}]}


def _post(client, body: dict) -> tuple[float, int, dict]:
    t = time.perf_counter()
    r = client.post("/_dash-update-component", json=body)
    dt = time.perf_counter() - t
    if r.status_code != 200:
        raise RuntimeError(f"dashboard answered {r.status_code}: {r.data[:300]!r}")
    return dt, len(r.data), json.loads(r.data)


def _stats(times: list[float], sizes: list[int]) -> dict:
    return {"server_ms_median": 1000 * statistics.median(times),
            "server_ms_max": 1000 * max(times), "payload_kb": statistics.median(sizes) / 1024,
            "requests": len(times)}


def server_figures(path: Path, pattern: pd.DataFrame, repeat: int = 7, log=print) -> dict:
    """Server time and payload of full range, 1-min and 10-s zooms and live ticks."""
    from tealeaves.app.dashboard.factory import DashboardConfig, create_app
    from tealeaves.data.store import SampleStore

    out: dict = {}
    store = SampleStore(path)
    t = time.perf_counter()
    app = create_app(store, DashboardConfig(source="bench", server_lag_s=0.0))
    live = app.tealeaves_live
    live.history.update(force=True)  # create_app already caught up (Dash checks the layout)
    out["cold_history_s"] = time.perf_counter() - t
    out["history_mb"] = live.history.memory_bytes() / 2**20
    log(f"cold start: history of {live.history.cursor:,} samples read, binned and labelled "
        f"in {out['cold_history_s']:.1f} s ({out['history_mb']:.1f} MB held)")
    client = app.server.test_client()
    client.get("/")  # a page load comes first (Dash sets itself up on the first request)
    first, last = live.history.span()
    state = {**live.snapshot().state, "bin_ms": 100.0}
    mid = (first + last) / 2.0
    views = {
        FULL: {"kind": "all", "px": PX},
        "1-min zoom": {"kind": "range", "t0": (mid - 30) * 1000, "t1": (mid + 30) * 1000,
                       "px": PX},
        "10-s zoom (raw samples)": {"kind": "range", "t0": (mid - 5) * 1000,
                                    "t1": (mid + 5) * 1000, "px": PX},
    }
    for name, action in views.items():
        times, sizes = [], []
        for i in range(repeat):
            dt, n, _ = _post(client, _update_body(app, {**action, "n": i}, state))
            times.append(dt)
            sizes.append(n)
        out[name] = _stats(times, sizes)
    # live ticks: follow mode (1 min), 0.25 s of new samples before each
    writer = Writer(path, pattern)
    _, _, resp = _post(client, _update_body(app, {"kind": "preset", "span": 60, "px": PX, "n": 0},
                                            state))
    st = resp["response"]["tl-cursor"]["data"]
    times, sizes, updates = [], [], []
    for i in range(max(repeat, 20)):
        writer.write_now(store, 0.25)
        # the served dashboard's background thread reads, bins and labels the new samples
        # (LiveView.start_updates); the tick then only reads the history
        t = time.perf_counter()
        live.history.update(force=True)
        updates.append(time.perf_counter() - t)
        dt, n, resp = _post(client, _update_body(app, None, st, pull=i + 2))
        st = resp["response"]["tl-cursor"]["data"]
        times.append(dt)
        sizes.append(n)
    out[TICK] = _stats(times, sizes)
    out[UPDATE] = _stats(updates, [0] * len(updates))
    store.close()
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) process ``pid`` has used (Linux /proc)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> dict:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM")):
            k, v = line.split(":")
            fields[k] = int(v.split()[0]) / 1024
    return fields


#: Browser-side snippets the benchmark runs in the page (``page.evaluate``).
JS_DIR = Path(__file__).with_name("js")



def browser_figures(path: Path, pattern: pd.DataFrame, live_s: float = 30.0,
                    pages: int = 5, log=print) -> dict:
    """Sample-to-screen latency (1 page) and server RSS with 1 and ``pages`` pages."""
    from playwright.sync_api import sync_playwright

    from tealeaves.app.figures import trace_keys

    port = _free_port()
    cmd = [sys.executable, "-c", "from tealeaves.app.cli import main; raise SystemExit(main())",
           "dashboard", "--store", str(path), "--no-collect", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/"
    out: dict = {}
    writer = Writer(path, pattern).start()
    try:
        _wait_http(url, proc)
        out["rss_idle_mb"] = _rss_mb(proc.pid)["VmRSS"]
        gpus = sorted(pattern["gpu"].unique().tolist())
        lane = trace_keys(gpus).index(("lane", "power_w", 0))
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM,
                                  args=["--no-sandbox", "--disable-gpu", "--headless"])
            t = time.perf_counter()
            first = b.new_page(viewport={"width": 1440, "height": 900})
            first.goto(url, timeout=120_000)
            first.wait_for_function((JS_DIR / "lane_drawn.js").read_text(), arg=lane,
                                    timeout=120_000)
            out["first_page_s"] = time.perf_counter() - t
            first.evaluate((JS_DIR / "paint_hook.js").read_text(), lane)
            t_hook = time.time()
            cpu0, wall0 = _cpu_s(proc.pid), time.monotonic()
            first.wait_for_timeout(live_s * 1000)
            out["server_cpu_pct"] = (100.0 * (_cpu_s(proc.pid) - cpu0)
                                     / (time.monotonic() - wall0))
            paints = first.evaluate("() => window.__paints")
            out["page_estimate"] = first.inner_text("#tl-latency")
            out["rss_1_page_mb"] = _rss_mb(proc.pid)["VmRSS"]
            others = []
            for _ in range(pages - 1):
                pg = b.new_page(viewport={"width": 1440, "height": 900})
                pg.goto(url, timeout=120_000)
                others.append(pg)
            first.wait_for_timeout(20_000)
            mem = _rss_mb(proc.pid)
            out[f"rss_{pages}_pages_mb"] = mem["VmRSS"]
            out["rss_peak_mb"] = mem["VmHWM"]
            b.close()
    finally:
        writer.stop()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    lat = _latencies(paints, writer.stamps, t_hook, bin_ms=100.0)
    out["paints"] = len(paints)
    out["samples_timed"] = len(lat)
    if len(lat):
        out["latency_ms_p50"] = float(np.percentile(lat, 50))
        out["latency_ms_p95"] = float(np.percentile(lat, 95))
        out["latency_ms_max"] = float(np.max(lat))
    return out


def _latencies(paints: list, stamps: list[float], t_from: float, bin_ms: float) -> np.ndarray:
    """Per written sample: first paint whose newest bin (centre + bin/2) covers its stamp,
    minus the stamp (ms).  Samples before ``t_from`` or after the last paint are left out."""
    if not paints:
        return np.empty(0)
    p = np.array(paints, dtype=float)
    p = p[np.argsort(p[:, 0])]
    covered = np.maximum.accumulate(p[:, 1] + bin_ms / 2.0)
    s = np.array([x * 1000.0 for x in stamps if x >= t_from], dtype=float)
    s = s[s < covered[-1]]
    i = np.searchsorted(covered, s, side="right")
    return p[i, 0] - s


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    import urllib.request

    t = time.time()
    while time.time() - t < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"dashboard exited: {proc.stdout.read()[-2000:]}")
        try:
            urllib.request.urlopen(url + "_dash-layout", timeout=2).read(1)
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"dashboard at {url} did not answer in {timeout:.0f} s")


_RESAMPLER_SCRIPT = r"""
import json, sys, time, resource
from pathlib import Path
import numpy as np, pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from plotly.io.json import to_json_plotly
from plotly_resampler import FigureResampler
from tealeaves.app.figures import LANES
from tealeaves.data.store import SampleStore

def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024

path, n_out, pages = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = {"rss_base_mb": rss()}
def build():
    samples = SampleStore(path, readonly=True).read_range()
    fig = FigureResampler(make_subplots(rows=len(LANES), cols=1, shared_xaxes=True),
                          default_n_shown_samples=n_out)
    for li, lane in enumerate(LANES):
        for g, part in samples.groupby("gpu"):
            x = pd.to_datetime(part["timestamp"].to_numpy(), unit="s")
            for col in lane.columns:
                fig.add_trace(go.Scattergl(name=f"GPU {g} {col}", mode="lines"),
                              hf_x=x, hf_y=part[col].to_numpy() * lane.scale,
                              row=li + 1, col=1)
    return fig, samples
t = time.perf_counter(); fig, samples = build(); out["build_s"] = time.perf_counter() - t
times, sizes = [], []
for _ in range(5):
    t = time.perf_counter(); js = fig.to_json(); times.append(time.perf_counter() - t)
    sizes.append(len(js))
out["full_ms"] = 1000 * float(np.median(times)); out["full_kb"] = float(np.median(sizes)) / 1024
mid = float(samples["timestamp"].median())
lo = pd.Timestamp(mid - 30, unit="s").isoformat(sep=" ")
hi = pd.Timestamp(mid + 30, unit="s").isoformat(sep=" ")
axis = f"xaxis{len(LANES)}"
times, sizes = [], []
for _ in range(7):
    t = time.perf_counter()
    patch = fig.construct_update_data_patch({f"{axis}.range[0]": lo, f"{axis}.range[1]": hi})
    js = to_json_plotly(patch.to_plotly_json() if hasattr(patch, "to_plotly_json") else patch)
    times.append(time.perf_counter() - t); sizes.append(len(js))
out["zoom_ms"] = 1000 * float(np.median(times)); out["zoom_kb"] = float(np.median(sizes)) / 1024
del samples
out["rss_1_fig_mb"] = rss()
figs = [fig] + [build()[0] for _ in range(pages - 1)]
out[f"rss_{pages}_figs_mb"] = rss()
print(json.dumps(out))
"""


def resampler_figures(path: Path, n_out: int = 1000, pages: int = 5) -> dict:
    """plotly-resampler on the same store, in a fresh process (see the module docstring)."""
    try:
        import plotly_resampler  # noqa: F401
    except ImportError:
        return {"error": "plotly-resampler is not installed (pip install -e '.[dashboard-bench]')"}
    r = subprocess.run([sys.executable, "-c", _RESAMPLER_SCRIPT, str(path), str(n_out),
                        str(pages)], capture_output=True, text=True, timeout=1800, check=False)
    if r.returncode != 0:
        return {"error": r.stderr[-1500:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def run(seconds: float = 3600.0, n_gpus: int = 8, store: Path | None = None,
        live_s: float = 30.0, pages: int = 5, browser: bool = True, resampler: bool = True,
        log=print) -> dict:
    """The whole benchmark; logs a table and returns every figure."""
    tmp = None
    if store is None:
        tmp = tempfile.mkdtemp(prefix="tealeaves-bench-")
        store = Path(tmp) / "hour.db"
    info = build_store(Path(store), seconds, n_gpus, log)
    figures: dict = {"store": {k: v for k, v in info.items() if k != "pattern"}}
    figures["server"] = server_figures(Path(store), info["pattern"], log=log)
    if browser:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            figures["browser"] = {"error": "playwright is not installed "
                                           "(pip install -e '.[dashboard-bench]')"}
        else:
            figures["browser"] = (
                browser_figures(Path(store), info["pattern"], live_s, pages, log)
                if Path(CHROMIUM).exists() else {"error": f"{CHROMIUM} is missing"})
    if resampler:
        from tealeaves.app.figures.series.downsample import point_budget

        figures["plotly_resampler"] = resampler_figures(Path(store), point_budget(PX), pages)
    _report(figures, pages, log)
    if tmp:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return figures


def _report(f: dict, pages: int, log) -> None:
    s = f["server"]
    log("")
    log(f"{'request':<28} {'server ms (median / max)':>26} {'payload KB':>11}")
    log(f"(full range: all {f['store']['seconds']:.0f} s of the store)")
    for name in (FULL, "1-min zoom", "10-s zoom (raw samples)", TICK, UPDATE):
        v = s[name]
        kb = f"{v['payload_kb']:>11.1f}" if name != UPDATE else f"{'(no request)':>11}"
        log(f"{name:<28} {v['server_ms_median']:>14.1f} / {v['server_ms_max']:<9.1f} {kb}")
    r = f.get("plotly_resampler") or {}
    if "error" not in r and r:
        log(f"{'plotly-resampler full range':<28} {r['full_ms']:>14.1f} {'':<11} "
            f"{r['full_kb']:>11.1f}   (figure built in {r['build_s']:.1f} s)")
        log(f"{'plotly-resampler 1-min zoom':<28} {r['zoom_ms']:>14.1f} {'':<11} "
            f"{r['zoom_kb']:>11.1f}")
    elif r:
        log(f"plotly-resampler: {r['error']}")
    b = f.get("browser") or {}
    if "error" in b:
        log(f"browser: {b['error']}")
    elif b:
        log("")
        log(f"sample-to-screen over {b['samples_timed']} samples, {b['paints']} paints: "
            f"p50 {b.get('latency_ms_p50', math.nan):.0f} ms, p95 "
            f"{b.get('latency_ms_p95', math.nan):.0f} ms, max "
            f"{b.get('latency_ms_max', math.nan):.0f} ms from the hook on (the page's own "
            f"meter counts from page load: {b['page_estimate']}); "
            f"server CPU while one page follows: {b['server_cpu_pct']:.0f} % of a core")
        more = (f"{pages} pages {b[f'rss_{pages}_pages_mb']:.0f} MB, " if pages > 1 else "")
        log(f"server RSS: idle {b['rss_idle_mb']:.0f} MB, 1 page {b['rss_1_page_mb']:.0f} MB, "
            f"{more}peak {b['rss_peak_mb']:.0f} MB; first page load {b['first_page_s']:.1f} s")
    if "error" not in r and r:
        log(f"plotly-resampler RSS: base {r['rss_base_mb']:.0f} MB, 1 figure "
            f"{r['rss_1_fig_mb']:.0f} MB, {pages} figures {r[f'rss_{pages}_figs_mb']:.0f} MB")


def main_json(figures: dict) -> str:
    """The figures as one JSON line (NaN as null)."""
    from tealeaves.data.jsontext import dumps

    return dumps(figures)

