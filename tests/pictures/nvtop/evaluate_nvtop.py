"""Score ``tealeaves screenshot read`` on the nvtop pictures against ``truth.json``.

Header: every value the picture prints (``truth.json``'s ``printed``, from the screen's own
text) read within +-1 of the printed unit (MHz, °C, W, %, the PCIe generation and width, the
rate in the unit nvtop printed it in: KiB/s, MiB/s, GiB/s; memory in GiB).  A value not read
counts as a miss.

Chart: the ``GPU<n> %`` series digitised, point by point, against the collector's
``gpu_util`` (NVML utilization.gpu, the counter nvtop plots, read at 10 Hz) in the nvtop frame
that point was drawn in (``truth.json``'s ``frames_ago``: the k-th sample back is the k-th
frame back; on the H200 frames came every interval + ~50 ms, so the picture's own clock runs
short of the collector's by up to 10 % at ``-d 5``).  A point is one of nvtop's samples where the reader told them apart
(``data/screen/nvtop_samples.py``: each sample as wide as the others, so the share of points is the
share of the chart's width), else one pixel column.  nvtop plots one NVML reading per interval,
taken at a moment we do not know, so a point is right (``chart_ok``) when it is within 5
points of one of the collector's readings of its interval; the stricter figure
(``chart_ok_median``: within 5 points of their median) is given beside it.  Points older than
nvtop's first frame (nothing drawn yet) are left out; a point whose series was not seen counts
as a miss.  A picture passes when at least 90 % of its points are right.

Run: ``python tests/pictures/nvtop/evaluate_nvtop.py [FILE ...]`` (default: every picture).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
#: How far a digitised column may be from the telemetry, percentage points.
CHART_TOL = 5.0


def _tolerance(key: str, printed: float) -> float:
    """+-1 of the unit the value is printed in (``data.screen.nvtop`` stores bytes/s and MiB)."""
    if key.startswith("pcie_") and key.endswith("_per_s"):
        unit = 1.0
        while printed >= 1000 * unit and unit < 2.0**40:
            unit *= 1024.0
        return unit
    if key.startswith("mem_") and key.endswith("_mib"):
        return 1024.0
    return 1.0


def _interval_s(argv: list[str]) -> float:
    d = argv[argv.index("-d") + 1] if "-d" in argv else "10"
    return float(d) / 10.0


def _frame_of(ago: float, frames: np.ndarray, step: float) -> tuple[float, float]:
    """The frame a point ``ago`` seconds old on nvtop's own clock (samples x ``step``) was
    drawn in: when that frame began (s before the moment, by the recording) and how long it
    stood.  nvtop adds a chart sample a frame; frames come a little later than ``step`` on a
    real GPU, so the k-th sample back is the k-th frame back, not ``k * step`` s ago.
    Without frame times (or past the oldest), the nominal clock."""
    k = round(float(ago) / step)
    if k + 1 < len(frames):
        return float(frames[k]), float(frames[k + 1] - frames[k])
    return ago, step


def score_picture(entry: dict, reading) -> dict:
    """One picture's header and chart figures (see the module docstring)."""
    got = {g.gpu: g for g in reading.gpus}
    n_val = ok_val = 0
    misses = []
    for g in entry["gpus"]:
        mine = got.get(g["gpu"])
        for key, v in g["printed"].items():
            n_val += 1
            have = mine.values.get(key) if mine is not None else None
            if have is not None and abs(have - v) <= _tolerance(key, v):
                ok_val += 1
            else:
                misses.append(f"GPU {g['gpu']} {key}: printed {v:g}, read {have}")
    step = _interval_s(entry["argv"])
    frames = np.asarray(entry.get("frames_ago", []), dtype=float)
    shown_s = entry.get("shown_s", np.inf)
    cols = ok_cols = ok_median = 0
    chart_note = ""
    series = [s for c in reading.charts for s in c.series if s.metric == "gpu_util"]
    by_gpu = entry.get("telemetry_gpu_util_by_gpu")
    if by_gpu is None:  # one GPU: the collector's readings, every one
        tele = {0: np.array(entry["telemetry_gpu_util"], dtype=float).reshape(-1, 2)}
        series = series[:1]
        for s in series:
            s.gpu = 0
    else:  # the stand-in's replayed values: only their changes (held until the next)
        tele = {int(g): np.array(v, dtype=float).reshape(-1, 2) for g, v in by_gpu.items()}
    if not series:
        chart_note = "no GPU % series read"
    seen = set()
    for s in series:
        if s.gpu not in tele or s.gpu in seen:
            continue
        seen.add(s.gpu)
        t = tele[s.gpu]
        for ago, v in zip(s.seconds_ago, s.values, strict=True):
            if ago > shown_s:
                continue
            ago, width = _frame_of(ago, frames, step)
            win = t[(t[:, 0] >= ago) & (t[:, 0] < ago + width), 1]
            if by_gpu is not None:  # and the value in force at the interval's older end
                older = t[t[:, 0] >= ago + width]
                if len(older):
                    win = np.r_[win, older[np.argmin(older[:, 0]), 1]]
            if not len(win):
                continue
            cols += 1
            if np.isfinite(v):
                ok_cols += bool(np.min(np.abs(win - v)) <= CHART_TOL)
                ok_median += bool(abs(v - np.median(win)) <= CHART_TOL)
    # columns of the GPUs never read count as misses
    if by_gpu is not None:
        for g in set(tele) - seen:
            cols += int(np.ceil(min(20.0, shown_s) / step))
    st_n, st_ok, st_miss = _score_stretches(entry, reading)
    return {"file": entry["file"], "values": n_val, "values_ok": ok_val, "misses": misses,
            "stretches": st_n, "stretches_ok": st_ok, "stretch_misses": st_miss,
            "chart_columns": cols, "chart_ok": ok_cols, "chart_ok_median": ok_median,
            "chart_share": ok_cols / cols if cols else 0.0, "chart_note": chart_note,
            "interval_source": [c.interval_source for c in reading.charts]}


#: A true stretch shorter than this inside the chart's span is not scored (a change a few
#: columns from the edge).
STRETCH_MIN_S = 2.0


def _score_stretches(entry: dict, reading) -> tuple[int, int, list[str]]:
    """Stretches (stand-in pictures only): each true stretch inside the span the reader's
    stretches cover (at least ``STRETCH_MIN_S`` of it) is judged by the read stretch that
    overlaps it most; right when its hot set is the true one (empty for uniform and idle).
    With no stretch read, every true stretch of the newest 15 s counts wrong."""
    if "stretches" not in entry:
        return 0, 0, []
    from tealeaves.classifier.picture import stretches

    got = stretches(reading.charts, None, {g.gpu: g.values for g in reading.gpus})["stretches"]
    span = max((g["from_s_ago"] for g in got), default=15.0)
    n = ok = 0
    miss = []
    for t in entry["stretches"]:
        lo, hi = t["from_ago"], min(t["to_ago"], span)
        if hi - lo < STRETCH_MIN_S:
            continue
        n += 1
        best = max(got, key=lambda g: min(hi, g["from_s_ago"]) - max(lo, g["to_s_ago"]),
                   default=None)
        if best is not None and min(hi, best["from_s_ago"]) - max(lo, best["to_s_ago"]) > 0 \
                and best["verdict"]["hot_set"] == t["hot_set"]:
            ok += 1
        else:
            miss.append(f"{lo:.0f}-{hi:.0f} s ago: hot set {t['hot_set']}, read "
                        f"{best['verdict']['hot_set'] if best else None}")
    return n, ok, miss


def evaluate(files: list[str] | None = None, log=print) -> dict:
    """Read each picture, score it, log a table; returns the totals and rows."""
    from tealeaves.data.screen.read import read_picture

    truth = json.loads((HERE / "truth.json").read_text())
    if files:
        want = {Path(f).name for f in files}
        truth = [t for t in truth if Path(t["file"]).name in want]
    rows = []
    for entry in truth:
        reading = read_picture((HERE / entry["file"]).read_bytes(), entry["file"])
        r = score_picture(entry, reading)
        r["tool"] = reading.tool
        rows.append(r)
        log(f"{Path(r['file']).name:28s} {r['tool'] or '-':6s} header {r['values_ok']:2d}/"
            f"{r['values']:2d}  chart {r['chart_ok']:4d}/{r['chart_columns']:4d} "
            f"({100 * r['chart_share']:5.1f} %) {','.join(r['interval_source'])} "
            f"{r['chart_note']}" + (f" stretches {r['stretches_ok']}/{r['stretches']}"
                                      if r["stretches"] else ""))
    n_val = sum(r["values"] for r in rows)
    ok_val = sum(r["values_ok"] for r in rows)
    passed = sum(r["chart_share"] >= 0.9 for r in rows)
    by_look: dict[str, list] = {}
    for r in rows:
        by_look.setdefault(re.sub(r"^\d+_|_\d+s\.png$", "", Path(r["file"]).name), []).append(r)
    log(f"header values within +-1: {ok_val}/{n_val} ({100 * ok_val / max(1, n_val):.1f} %); "
        f"charts with >= 90 % of columns within {CHART_TOL:g} points: {passed}/{len(rows)}")
    st_n = sum(r["stretches"] for r in rows)
    st_ok = sum(r["stretches_ok"] for r in rows)
    if st_n:
        log(f"stretches with the right hot set: {st_ok}/{st_n} "
            f"({100 * st_ok / st_n:.1f} %)")
    for look, rs in sorted(by_look.items()):
        v = sum(r["values_ok"] for r in rs) / max(1, sum(r["values"] for r in rs))
        n = max(1, sum(r["chart_columns"] for r in rs))
        c = sum(r["chart_ok"] for r in rs) / n
        cm = sum(r["chart_ok_median"] for r in rs) / n
        sn = sum(r["stretches"] for r in rs)
        log(f"  {look:26s} header {100 * v:5.1f} %  chart columns {100 * c:5.1f} % "
            f"(median of the interval: {100 * cm:5.1f} %)" +
            (f"  stretches {sum(r['stretches_ok'] for r in rs)}/{sn}" if sn else ""))
    return {"values": n_val, "values_ok": ok_val, "charts_passed": passed,
            "stretches": st_n, "stretches_ok": st_ok,
            "pictures": len(rows), "rows": rows}


if __name__ == "__main__":
    evaluate(sys.argv[1:] or None)
