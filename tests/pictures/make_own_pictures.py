"""Add tealeaves' own pictures to the screenshot test set (issue 23): its report (the top of
the HTML: header, timeline heatmap, Per GPU table) and its dashboard (the "all" view: header,
ribbon, load bands), taken in headless Chromium from stores of known load.

Each picture's GPUs run real H200 recordings (``data/traces/h200x1_cb_*.parquet``: continuous
batching of four models, busy and idle stretches): GPU k's samples are a 20-s stretch of one of them,
chosen busy or idle, moved to a common start (no machine of several GPUs was lent).  Truth per
GPU: the values the report prints (its Per GPU table's ``load`` and ``power``, rounded as
printed; none for a dashboard picture, which prints no per-GPU number) and the telemetry's
load of the range shown (``load_mean`` of the report's JSON: the classifier's load, SM active).

Run (needs Chromium and playwright): ``python tests/pictures/make_own_pictures.py``; it
replaces the ``tealeaves`` entries of ``truth.json`` and their pictures.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from playwright.sync_api import sync_playwright

from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.server import start_in_thread
from tealeaves.app.report.model import build_report, from_trace
from tealeaves.app.report.out import report_bytes
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import read_trace

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SOURCES = tuple(ROOT / "data" / "traces" / f"h200x1_cb_{n}.parquet"
                for n in ("dsv3_bursty", "qwen3_bursty", "llama_poisson", "spec_qwen3"))
SPAN_S = 20.0
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--headless"]
GD = "document.querySelector('#tl-graph .js-plotly-plot')"
#: (GPUs, busy GPUs): what each picture's store runs.
SCENES = ((2, (0, 1)), (2, (1,)), (4, (2,)), (8, (0, 3, 5)), (8, tuple(range(8))))


def stretches() -> tuple[list[pd.DataFrame], list[pd.DataFrame], pd.DataFrame]:
    """20-s stretches of the sources, busiest first and idlest first, and a device row."""
    busy, idle, dev = [], [], None
    for src in SOURCES:
        tr = read_trace(src)
        s = tr.samples.sort_values("timestamp")
        dev = tr.devices.iloc[:1] if dev is None else dev
        t0, t1 = float(s["timestamp"].min()), float(s["timestamp"].max())
        for a in np.arange(t0, t1 - SPAN_S, 5.0):
            part = s[(s["timestamp"] >= a) & (s["timestamp"] < a + SPAN_S)]
            m = float(part["sm_active"].mean())
            (busy if m > 60 else idle if m < 10 else []).append(part)
    busy.sort(key=lambda p: -float(p["sm_active"].mean()))
    idle.sort(key=lambda p: float(p["sm_active"].mean()))
    return busy, idle, dev


def scene(n: int, hot: tuple[int, ...], busy, idle, dev) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Samples and devices of ``n`` GPUs, ``hot`` running busy stretches, the others idle
    ones (each a different stretch where there are enough)."""
    parts, devs = [], []
    for g in range(n):
        pool = busy if g in hot else idle
        p = pool[g % min(len(pool), 4)].copy()
        p["timestamp"] = p["timestamp"] - float(p["timestamp"].min()) + 1_780_000_000.0
        p["gpu"] = g
        p["uuid"] = f"GPU-{g:08d}-0000-0000-0000-000000000000"
        parts.append(p)
        d = dev.copy()
        d["gpu"], d["uuid"] = g, p["uuid"].iloc[0]
        devs.append(d)
    return pd.concat(parts, ignore_index=True), pd.concat(devs, ignore_index=True)


def truth_gpus(doc: dict, printed: bool) -> list[dict]:
    out = []
    for g in doc["gpus"]:
        p = {"util_pct": float(round(g["load_mean"])), "power_w": float(round(g["power_w"]))} \
            if printed else {}
        out.append({"gpu": g["gpu"], "printed": p, "telemetry_util_pct": g["load_mean"]})
    return out


def main() -> int:
    busy, idle, dev = stretches()
    truth = [p for p in json.loads((HERE / "truth.json").read_text())
             if not p["tool"].startswith("tealeaves")]
    n0 = len(truth)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for k, (n, hot) in enumerate(SCENES):
            samples, devices = scene(n, hot, busy, idle, dev)
            path = Path(tmp) / f"scene{k}.parquet"
            samples.to_parquet(path)
            report = build_report(from_trace(path))
            doc = json.loads(report_bytes(report, "json"))
            # the report: the top of its HTML, to the end of the Per GPU table
            html = Path(tmp) / f"r{k}.html"
            html.write_bytes(report_bytes(report, "html"))
            page = b.new_page(viewport={"width": 1280, "height": 900})
            page.goto(html.as_uri())
            page.wait_for_timeout(1500)
            bottom = page.evaluate("() => { const h = Array.from(document.querySelectorAll("
                                   "'h2')).find(e => e.innerText.startsWith('Most'));"
                                   " return h ? h.getBoundingClientRect().top : 1200 }")
            name = f"{n0 + 2 * k:02d}_tealeaves-report_{n}gpu.png"
            page.screenshot(path=str(HERE / name), full_page=True)
            Image.open(HERE / name).crop((0, 0, 1280, int(bottom))).save(HERE / name,
                                                                      optimize=True)
            page.close()
            truth.append({"file": name, "tool": "tealeaves report", "font": "Chromium",
                          "background": "white", "gpus": truth_gpus(doc, True)})
            # the dashboard: the "all" view of a store holding the same samples
            db = Path(tmp) / f"s{k}.db"
            with SampleStore(db) as st:
                st.put_devices(devices)
                st.append(samples)
            url, stop = start_in_thread(store_path=db, collect=False)
            try:
                page = b.new_page(viewport={"width": 1600 if k % 2 else 1366,
                                            "height": 1000 if k % 2 else 768})
                page.goto(url)
                page.wait_for_function(f"() => {GD} && {GD}._fullData && "
                                       f"{GD}._fullData.length > 0", timeout=60_000)
                page.click(f"#{ids.PRESET_ALL}")
                page.wait_for_function(f"() => /^\\d{{4}}-\\d\\d-\\d\\d .*lanes/.test("
                                       f"document.querySelector('#{ids.VIEW_NOTE}').innerText)",
                                       timeout=60_000)
                page.wait_for_timeout(3000)
                name = f"{n0 + 2 * k + 1:02d}_tealeaves-dashboard_{n}gpu.png"
                page.screenshot(path=str(HERE / name))
                page.close()
            finally:
                stop()
            truth.append({"file": name, "tool": "tealeaves dashboard", "font": "Chromium",
                          "background": "white", "gpus": truth_gpus(doc, False)})
            print(name, [round(g["load_mean"]) for g in doc["gpus"]], file=sys.stderr)
        b.close()
    (HERE / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
