"""Score ``tealeaves screenshot read`` on the nvtop pictures against ``truth.json``.

Header: every value the picture prints (``truth.json``'s ``printed``, from the screen's own
text) read within +-1 of the printed unit (MHz, °C, W, %, the PCIe generation and width, the
rate in the unit nvtop printed it in: KiB/s, MiB/s, GiB/s; memory in GiB).  A value not read
counts as a miss.

Chart: the ``GPU<n> %`` series digitised, column by column, against the collector's
``gpu_util`` (NVML utilization.gpu, the counter nvtop plots, read at 10 Hz) in the nvtop update
interval that column shows.  nvtop plots one NVML reading per interval, taken at a moment we do
not know, so a column is right (``chart_ok``) when it is within 5 points of one of the
collector's readings of its interval; the stricter figure (``chart_ok_median``: within 5
points of their median) is given beside it.  Columns older than nvtop's first frame (nothing
drawn yet) are left out; a column whose series was not seen counts as a miss.  A picture
passes when at least 90 % of its columns are right.

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
    """+-1 of the unit the value is printed in (``screen_nvtop`` stores bytes/s and MiB)."""
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
    tele = np.array(entry["telemetry_gpu_util"], dtype=float).reshape(-1, 2)
    step = _interval_s(entry["argv"])
    shown_s = entry.get("shown_s", np.inf)
    cols = ok_cols = ok_median = 0
    chart_note = ""
    series = [s for c in reading.charts for s in c.series if s.metric == "gpu_util"]
    if not series:
        chart_note = "no GPU % series read"
    for s in series[:1]:
        for ago, v in zip(s.seconds_ago, s.values, strict=True):
            if ago > shown_s:
                continue
            win = tele[(tele[:, 0] >= ago) & (tele[:, 0] < ago + step), 1]
            if not len(win):
                continue
            cols += 1
            if np.isfinite(v):
                ok_cols += bool(np.min(np.abs(win - v)) <= CHART_TOL)
                ok_median += bool(abs(v - np.median(win)) <= CHART_TOL)
    return {"file": entry["file"], "values": n_val, "values_ok": ok_val, "misses": misses,
            "chart_columns": cols, "chart_ok": ok_cols, "chart_ok_median": ok_median,
            "chart_share": ok_cols / cols if cols else 0.0, "chart_note": chart_note,
            "interval_source": [c.interval_source for c in reading.charts]}


def evaluate(files: list[str] | None = None, log=print) -> dict:
    """Read each picture, score it, log a table; returns the totals and rows."""
    from tealeaves.data.screen_read import read_picture

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
            f"{r['chart_note']}")
    n_val = sum(r["values"] for r in rows)
    ok_val = sum(r["values_ok"] for r in rows)
    passed = sum(r["chart_share"] >= 0.9 for r in rows)
    by_look: dict[str, list] = {}
    for r in rows:
        by_look.setdefault(re.sub(r"^\d+_|_\d+s\.png$", "", Path(r["file"]).name), []).append(r)
    log(f"header values within +-1: {ok_val}/{n_val} ({100 * ok_val / max(1, n_val):.1f} %); "
        f"charts with >= 90 % of columns within {CHART_TOL:g} points: {passed}/{len(rows)}")
    for look, rs in sorted(by_look.items()):
        v = sum(r["values_ok"] for r in rs) / max(1, sum(r["values"] for r in rs))
        n = max(1, sum(r["chart_columns"] for r in rs))
        c = sum(r["chart_ok"] for r in rs) / n
        cm = sum(r["chart_ok_median"] for r in rs) / n
        log(f"  {look:18s} header {100 * v:5.1f} %  chart columns {100 * c:5.1f} % "
            f"(median of the interval: {100 * cm:5.1f} %)")
    return {"values": n_val, "values_ok": ok_val, "charts_passed": passed,
            "pictures": len(rows), "rows": rows}


if __name__ == "__main__":
    evaluate(sys.argv[1:] or None)
