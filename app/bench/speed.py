"""``tealeaves bench speed``: how long a user waits, each command in a fresh process (issue 35).

Rows, each the median of ``repeat`` runs of a fresh ``PYTHON -m tealeaves.app.cli`` process
(wall seconds from its start):

- dashboard start-up until the page's figure is drawn (headless Chromium waits for the
  first lane's points, ``js/lane_drawn.js``), replaying the bundled trace and browsing the
  store (``--no-collect``);
- ``classify`` of the bundled trace and of the store's samples exported to a trace file;
- ``report --out .html`` and ``.pdf`` of the bundled trace and of the whole store;
- ``screenshot read`` of one picture (``tests/pictures``);
- sample-to-screen latency, p50 and p95 over ``pages`` Chromium pages following the store
  while this process appends every GPU's samples at 20 Hz stamped with the wall clock: the
  measurement of ``bench dashboard`` (``dashboard.Writer``, ``js/paint_hook.js``,
  ``dashboard._latencies``), pooled over the pages.

The store is ``bench dashboard``'s (``dashboard.build_store``: the bundled real trace tiled
to ``seconds`` on ``gpus`` GPUs at 20 Hz, ending now).  ``baseline`` names a second
interpreter (the virtual environment of another checkout, e.g. main's) whose ``tealeaves``
runs every row too: the figures are printed side by side.
"""

from __future__ import annotations

import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tealeaves.app.bench.dashboard import (
    CHROMIUM,
    JS_DIR,
    Writer,
    _free_port,
    _latencies,
    build_store,
)

#: The picture ``screenshot read`` is timed on (an 8-GPU nvidia-smi screenshot).
PICTURE = Path(__file__).resolve().parents[2] / "tests" / "pictures" / "06_nvidia-smi_8gpu.png"
ARGS = ["--no-sandbox", "--disable-gpu", "--headless"]


def _cli(python: str) -> list[str]:
    return [python, "-m", "tealeaves.app.cli"]


def time_command(python: str, args: list, timeout: float = 600.0) -> float:
    """Wall seconds of ``python -m tealeaves.app.cli ARGS`` in a fresh process.

    Raises:
        RuntimeError: it exited non-zero (its last output named).
    """
    t = time.perf_counter()
    r = subprocess.run([*_cli(python), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, check=False)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))}: exit {r.returncode}: "
                           f"{(r.stderr or r.stdout)[-800:]}")
    return dt


def _serve(python: str, args: list, port: int) -> subprocess.Popen:
    return subprocess.Popen([*_cli(python), "dashboard", *map(str, args), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _lane(n_gpus: int) -> int:
    from tealeaves.app.figures import trace_keys

    return trace_keys(list(range(n_gpus))).index(("lane", "power_w", 0))


def _open_drawn(browser, url: str, lane: int, proc: subprocess.Popen, deadline: float):
    """A page at ``url`` once its figure's ``lane`` has points; retried while the server is
    not yet listening."""
    from playwright.sync_api import Error as PlaywrightError

    page = browser.new_page(viewport={"width": 1440, "height": 900})
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"dashboard exited {proc.returncode}: {proc.stderr.read()[-800:]}")
        try:
            page.goto(url, timeout=max(1000.0, (deadline - time.monotonic()) * 1000))
            break
        except PlaywrightError:  # connection refused until the server listens
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    page.wait_for_function((JS_DIR / "lane_drawn.js").read_text(), arg=lane,
                           timeout=max(1000.0, (deadline - time.monotonic()) * 1000))
    return page


def dashboard_start(browser, python: str, args: list, n_gpus: int,
                    timeout: float = 300.0) -> float:
    """Seconds from starting ``tealeaves dashboard ARGS`` until a page's figure is drawn."""
    port = _free_port()
    t = time.perf_counter()
    proc = _serve(python, args, port)
    try:
        page = _open_drawn(browser, f"http://127.0.0.1:{port}/", _lane(n_gpus), proc,
                           time.monotonic() + timeout)
        dt = time.perf_counter() - t
        page.close()
    finally:
        _stop(proc)
    return dt


def latency(browser, python: str, store: Path, pattern, n_gpus: int, pages: int,
            live_s: float) -> dict:
    """p50/p95/max sample-to-screen (ms) over ``pages`` pages following ``store``, pooled."""
    port = _free_port()
    proc = _serve(python, ["--store", store, "--no-collect"], port)
    writer = Writer(store, pattern).start()
    url = f"http://127.0.0.1:{port}/"
    lane = _lane(n_gpus)
    try:
        opened = [_open_drawn(browser, url, lane, proc, time.monotonic() + 300)
                  for _ in range(pages)]
        for p in opened:
            p.evaluate((JS_DIR / "paint_hook.js").read_text(), lane)
        t_hook = time.time()
        opened[0].wait_for_timeout(live_s * 1000)
        paints = [p.evaluate("() => window.__paints") for p in opened]
        for p in opened:
            p.close()
    finally:
        writer.stop()
        _stop(proc)
    lat = np.concatenate([_latencies(p, writer.stamps, t_hook, bin_ms=100.0) for p in paints])
    if not len(lat):
        return {"p50_ms": math.nan, "p95_ms": math.nan, "max_ms": math.nan, "samples": 0}
    return {"p50_ms": float(np.percentile(lat, 50)), "p95_ms": float(np.percentile(lat, 95)),
            "max_ms": float(lat.max()), "samples": len(lat)}


def _median(fn, repeat: int) -> float:
    return statistics.median(fn() for _ in range(repeat))


def measure(python: str, work: Path, store: Path, trace: Path, pattern, n_gpus: int,
            pages: int, live_s: float, repeat: int, browser, log=print) -> dict:
    """Every row for one interpreter: ``{row name: seconds}`` plus the latency figures."""
    from tealeaves.data import bundled_trace_path

    bundled = bundled_trace_path()
    out: dict = {}
    what = "store"  # the store's length and GPUs head the table (``table``)

    def row(name, fn):
        try:
            out[name] = _median(fn, repeat)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            out[name] = math.nan
            log(f"  {name}: {exc}")
        log(f"  {name}: {out[name]:.2f} s")

    if browser is not None:
        row("dashboard start, bundled replay",
            lambda: dashboard_start(browser, python, ["--replay"], 2))
        row(f"dashboard start, {what}",
            lambda: dashboard_start(browser, python, ["--store", store, "--no-collect"], n_gpus))
    row("classify bundled trace", lambda: time_command(python, ["classify", bundled]))
    row(f"classify {what} (as a trace file)", lambda: time_command(python, ["classify", trace]))
    for fmt in ("html", "pdf"):
        if fmt == "pdf" and not Path(CHROMIUM).exists():
            continue
        row(f"report bundled trace .{fmt}", lambda f=fmt: time_command(
            python, ["report", "--trace", bundled, "--out", work / f"b.{f}"]))
        row(f"report {what} .{fmt}", lambda f=fmt: time_command(
            python, ["report", "--store", store, "--out", work / f"s.{f}"]))
    if PICTURE.exists():
        row("screenshot read, one picture",
            lambda: time_command(python, ["screenshot", "read", PICTURE]))
    if browser is not None:
        try:
            out["latency"] = latency(browser, python, store, pattern, n_gpus, pages, live_s)
        except RuntimeError as exc:
            log(f"  sample-to-screen: {exc}")
            out["latency"] = {"p50_ms": math.nan, "p95_ms": math.nan, "max_ms": math.nan,
                              "samples": 0}
        lat = out["latency"]
        log(f"  sample-to-screen ({pages} pages): p50 {lat['p50_ms']:.0f} ms, "
            f"p95 {lat['p95_ms']:.0f} ms over {lat['samples']} samples")
    return out


def run(seconds: float = 3600.0, n_gpus: int = 8, pages: int = 4, live_s: float = 20.0,
        repeat: int = 1, python: str | None = None, baseline: str | None = None,
        browser: bool = True, log=print) -> dict:
    """The whole benchmark; prints the table (this checkout's figures, and ``baseline``'s
    beside them when given) and returns ``{"this": rows, "baseline": rows | None}``.

    Raises:
        RuntimeError: the store cannot be built.
    """
    from tealeaves.data.store import SampleStore
    from tealeaves.data.traces import Trace, write_trace

    python = python or sys.executable
    work = Path(tempfile.mkdtemp(prefix="tealeaves-speed-"))
    try:
        store = work / "store.db"
        info = build_store(store, seconds, n_gpus, log)
        with SampleStore(store, readonly=True) as s:
            trace = write_trace(work / f"{store.stem}.parquet",
                                Trace(s.read_range(), s.devices()))
        figures: dict = {"store": {k: v for k, v in info.items() if k != "pattern"}}
        pw = None
        if browser and Path(CHROMIUM).exists():
            from playwright.sync_api import sync_playwright

            pw = sync_playwright().start()
        try:
            b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS) if pw else None
            for key, py in (("this", python), ("baseline", baseline)):
                if py is None:
                    figures[key] = None
                    continue
                log(f"{key}: {py}")
                figures[key] = measure(py, work, store, trace, info["pattern"], n_gpus, pages,
                                       live_s, repeat, b, log)
            if b is not None:
                b.close()
        finally:
            if pw is not None:
                pw.stop()
        log("")
        log(table(figures, pages))
        return figures
    finally:
        shutil.rmtree(work, ignore_errors=True)


def table(figures: dict, pages: int) -> str:
    """The figures as a text table: one row per measurement, this checkout's column and the
    baseline's beside it (when measured)."""
    this, base = figures["this"], figures.get("baseline")
    names = [k for k in this if k != "latency"]
    st = figures["store"]
    head = (f"store: {st['seconds']:.0f} s of {st['rows'] / st['seconds'] / st['hz']:.0f} "
            f"GPUs at {st['hz']:.0f} Hz ({st['rows']:,} samples); each row a fresh process\n")
    head += f"{'measurement':<40} {'this (s)':>10}" + (f" {'baseline (s)':>13}" if base else "")
    lines = [head]
    for n in names:
        lines.append(f"{n:<40} {this[n]:>10.2f}"
                     + (f" {base.get(n, math.nan):>13.2f}" if base else ""))
    if "latency" in this:
        for q in ("p50_ms", "p95_ms"):
            name = f"sample-to-screen {q[:3]}, {pages} pages (ms)"
            lines.append(f"{name:<40} {this['latency'][q]:>10.0f}"
                         + (f" {base['latency'][q]:>13.0f}" if base else ""))
    return "\n".join(lines)
