"""Score the screenshot reader on the test set beside this file: per tool and overall, the
share of printed utilization and power values read within 1 unit (a dashboard picture prints
none: only its verdict is scored), and the share of pictures whose uniform/uneven + hot-set
verdict (``classifier.picture.summary``: doubtful values left out) matches the telemetry of
that moment.

Run: ``python tests/pictures/evaluate.py [--json] [--jobs N]`` (needs tesseract-ocr; 5-20 s
a picture on one core).
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tealeaves.app.figures.read_back import read_back
from tealeaves.classifier.picture import summary, verdict
from tealeaves.data.screen.read import read_picture

HERE = Path(__file__).resolve().parent


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (Tesseract) so far."""
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _read(name: str):
    """The reading of picture ``name``, the seconds it took (wall clock) and the CPU seconds
    it took (this process's and Tesseract's: what a machine shared with others' work still
    says of the reader itself)."""
    t, c = time.perf_counter(), _cpu_s()
    r = read_picture((HERE / name).read_bytes(), name, graphs=read_back)
    return r, time.perf_counter() - t, _cpu_s() - c


def evaluate(files: list[str] | None = None, log=print, jobs: int = 1) -> dict:
    """``{tool: {"values", "within_1", "pictures", "verdicts_match"}, "all": {...},
    "seconds", "per_picture_s": {file: seconds}, "per_picture_cpu_s": {file: seconds}}`` over
    ``truth.json`` (only ``files`` when given), ``jobs`` pictures read at once;
    ``per_picture_s`` is each reading's wall-clock time (with ``jobs`` pictures read at once,
    as a busy machine reads them), ``per_picture_cpu_s`` its CPU time (Tesseract's too)."""
    truth = [p for p in json.loads((HERE / "truth.json").read_text())
             if not files or p["file"] in files]
    stats: dict[str, dict] = {}
    t0 = time.time()
    names = [p["file"] for p in truth]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            timed = list(pool.map(_read, names))
    else:
        timed = [_read(n) for n in names]
    readings = [r for r, _, _ in timed]
    per_picture = {n: sec for n, (_, sec, _) in zip(names, timed, strict=True)}
    per_picture_cpu = {n: cpu for n, (_, _, cpu) in zip(names, timed, strict=True)}
    for p, r in zip(truth, readings, strict=True):
        got = {g.gpu: g.values for g in r.gpus}
        for key in (p["tool"], "all"):
            s = stats.setdefault(key, {"values": 0, "within_1": 0, "pictures": 0,
                                       "verdicts_match": 0})
            s["pictures"] += 1
            for t in p["gpus"]:
                for f in ("util_pct", "power_w"):
                    if f in t["printed"]:
                        s["values"] += 1
                        v = got.get(t["gpu"], {}).get(f)
                        s["within_1"] += v is not None and abs(v - t["printed"][f]) <= 1
            tele = verdict({t["gpu"]: t["telemetry_util_pct"] for t in p["gpus"]
                            if t["telemetry_util_pct"] is not None})
            mine = summary(r)["regions"][0]["verdict"] or verdict({})
            s["verdicts_match"] += (mine["pattern"], mine["hot_set"]) == (
                tele["pattern"], tele["hot_set"])
        log(f"{p['file']}: {r.tool}, {len(r.gpus)} of {len(p['gpus'])} GPUs read, "
            f"{per_picture[p['file']]:.1f} s ({per_picture_cpu[p['file']]:.1f} s CPU)")
    return {**stats, "seconds": time.time() - t0, "per_picture_s": per_picture,
            "per_picture_cpu_s": per_picture_cpu}


def main(argv: list[str]) -> int:
    jobs = int(argv[argv.index("--jobs") + 1]) if "--jobs" in argv else 1
    res = evaluate(log=lambda s: print(s, file=sys.stderr), jobs=jobs)
    if "--json" in argv:
        print(json.dumps(res, indent=1))
        return 0
    print(f"{'tool':20s} {'pictures':>8s} {'values ±1':>10s} {'verdicts':>9s}")
    for tool, s in res.items():
        if tool in ("seconds", "per_picture_s", "per_picture_cpu_s"):
            continue
        share = f"{s['within_1'] / s['values']:10.1%}" if s["values"] else f"{'-':>10s}"
        print(f"{tool:20s} {s['pictures']:8d} {share} "
              f"{s['verdicts_match'] / s['pictures']:9.1%}")
    secs = sorted(res["per_picture_s"].values())
    cpu = sorted(res["per_picture_cpu_s"].values())
    print(f"{res['seconds']:.0f} s in all; a picture: median {statistics.median(secs):.1f} s, "
          f"max {secs[-1]:.1f} s ({jobs} at a time; CPU median "
          f"{statistics.median(cpu):.1f} s, max {cpu[-1]:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
