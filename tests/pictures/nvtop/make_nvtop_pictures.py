"""Make the nvtop screenshot set (issue 37) from real nvtop recordings and their telemetry.

Input: a recording by ``kernels_bench/record_nvtop.sh`` (``captures/<run>/nvtop_h200/*.nvtop.jsonl.gz``:
nvtop's terminal bytes stamped with their times, one file per look, and the collector's trace
``nvtop_h200.parquet`` of the same seconds).  Each picture is one look's stream up to a chosen
moment replayed in a real ``xterm`` under ``Xvfb`` and taken with ``scrot``
(``make_pictures.shoot``), in one of ``make_pictures.LOOKS``' fonts and colours.

Output, beside this file: ``pictures/NN_<look>_<t>s.png`` and ``truth.json``: per picture the
moment (epoch s of the last byte shown), the nvtop arguments (update interval ``-d``, ``-r``,
``-C``), the header values as printed (``nvtop.parse_nvtop`` of the screen's text, as
``pyte`` renders the same bytes: what the picture shows, not what the OCR reads), and the
collector's ``gpu_util`` (NVML utilization.gpu, the series nvtop plots as ``GPU0 %``) as
(seconds before the moment, %) pairs over the last 120 s, and ``frames_ago``: when each
of nvtop's frames began, seconds before the moment (``frames_ago``).

A stand-in run (``captures/standin_run1``: ``source.json`` naming the real run its values
come from, ``<scenario>.truth.json`` and ``<scenario>/<look>.nvtop.jsonl.gz``, recorded by
``kernels_bench/nvml_replay.py``) gives pictures of 2, 4 and 8 GPUs, each GPU's truth its
replayed ``util_pct`` and the scenario's stretches with their hot sets.

A picture already there is kept (delete it to shoot it again); ``--truth-only`` as the first
argument writes ``truth.json`` again without shooting.  Run (needs Xvfb, xterm, scrot and ``pip install pyte``; ``DISPLAY`` an Xvfb screen of at least
2400x1400): ``python tests/pictures/nvtop/make_nvtop_pictures.py
tests/pictures/nvtop/captures/h200_run1 tests/pictures/nvtop/captures/standin_run1``.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import make_pictures as mp

from tealeaves.data.screen.nvtop import parse_nvtop

#: Moments shot per look, seconds after nvtop's first frame (the workload's stretches:
#: idle, prefill, decode, and the idle gap after them).
MOMENTS_S = (25.0, 45.0, 70.0, 100.0, 130.0)
#: Moments shot per look of a stand-in run (``kernels_bench/nvml_replay.py``), seconds after
#: the scenario's start: a few seconds after one of its changes, so that each picture's charts
#: hold two or three stretches.
STANDIN_MOMENTS_S = {"split8": (42.0, 64.0, 82.0, 104.0, 118.0), "quad4": (38.0, 58.0, 78.0, 94.0),
                     "pair2": (38.0, 58.0, 78.0)}


def screen_text(rows: list[dict], upto: float, cols: int, lines: int) -> str:
    """nvtop's screen after the bytes stamped up to ``upto`` (epoch s), as text (``pyte``)."""
    import pyte

    scr = pyte.Screen(cols, lines)
    stream = pyte.ByteStream(scr)
    for r in rows:
        if r["t"] > upto:
            break
        stream.feed(r["data"].encode("utf-8", "surrogateescape"))
    return "\n".join(scr.display)


def frames_ago(shown: list[dict]) -> list[float]:
    """Seconds before the last chunk shown at which each of nvtop's frames began, newest
    first, over the last 130 s (a frame: chunks less than 0.1 s apart).  nvtop adds one
    chart sample a frame, and on a real GPU frames come later than its update interval
    (``nvtop_samples.REFRESH_LATE_S``), so a chart column's moment is its frame's."""
    t = np.array([r["t"] for r in shown])
    starts = t[np.r_[True, np.diff(t) > 0.1]]
    ago = t[-1] - starts[::-1]
    return [round(float(a), 3) for a in ago[ago <= 130.0]]


def _shown(body: list[dict], upto: float) -> tuple[list[dict], bytes]:
    """The chunks stamped up to ``upto`` and their bytes, terminal queries dropped."""
    shown = [r for r in body if r["t"] <= upto]
    return shown, mp._QUERIES.sub(b"", b"".join(r["data"].encode("utf-8", "surrogateescape")
                                                for r in shown))


def standin_run(run: Path, n: int, truth: list, truth_only: bool, out_dir: Path) -> int:
    """The pictures of a stand-in run: several GPUs replayed from the real H200 trace
    (``nvml_replay``), each picture's truth with every GPU's replayed ``util_pct`` and the
    scenario's stretches (seconds before the moment, hot set).  Returns the next number."""
    from tealeaves.kernels_bench.nvml_replay import replay_rows

    src = run / json.loads((run / "source.json").read_text())["trace_run"]
    trace = pd.read_parquet(src / "nvtop_h200.parquet")
    labels = pd.read_csv(src / "nvtop_h200.labels.csv")
    for spath in sorted(run.glob("*.truth.json")):
        scen = json.loads(spath.read_text())
        rows = replay_rows(trace, labels, scen["scenario"])
        for path in sorted((run / scen["scenario"]).glob("*.nvtop.jsonl.gz")):
            recs = [json.loads(x) for x in gzip.decompress(path.read_bytes()).splitlines()]
            head, body = recs[0], recs[1:]
            look = f"{scen['scenario']}_{path.name.split('.')[0]}"
            for at in STANDIN_MOMENTS_S[scen["scenario"]]:
                shown, data = _shown(body, scen["t0"] + at)
                name = f"{n:02d}_{look}_{int(at)}s.png"
                if not truth_only and not (out_dir / name).exists():
                    mp.shoot(data, mp.LOOKS[n % len(mp.LOOKS)], out_dir / name, head["cols"],
                             head["rows"])
                text = screen_text(shown, shown[-1]["t"], head["cols"], head["rows"])
                gpus = parse_nvtop([(ln, 1.0, None, None) for ln in text.splitlines()])
                t_last = shown[-1]["t"]
                by_gpu = {}
                for g, grp in rows.groupby("gpu"):
                    ago = t_last - (scen["t0"] + grp["t_s"].to_numpy())
                    u = grp["util_pct"].round().to_numpy()
                    # the replay holds each value until the next row: its changes are enough
                    change = np.r_[True, u[1:] != u[:-1]]
                    older = np.flatnonzero(change & (ago >= 120))  # the value in force then
                    keep = (change & (ago >= 0) & (ago < 120))
                    if len(older):
                        keep[older[-1]] = True
                    by_gpu[str(g)] = [[round(float(a), 3), float(v)] for a, v in
                                      zip(ago[keep], u[keep], strict=True)]
                stretches = []
                for st in scen["stretches"]:
                    a0, a1 = t_last - st["end"], t_last - st["start"]
                    if a1 <= 0 or a0 >= 120:
                        continue
                    pattern = ("uneven" if st["hot_set"] else
                               "uniform" if st["busy"] else "idle")
                    stretches.append({"from_ago": round(max(a0, 0.0), 3),
                                      "to_ago": round(a1, 3), "pattern": pattern,
                                      "hot_set": st["hot_set"], "busy": st["busy"]})
                truth.append({
                    "file": f"pictures/{name}", "look": look, "argv": head["argv"][3:],
                    "font": " ".join(map(str, mp.LOOKS[n % len(mp.LOOKS)][:2])),
                    "moment": t_last, "n_gpus": scen["gpus"],
                    "gpus": [{"gpu": g.gpu, "name": g.name, "printed": g.values} for g in gpus],
                    "telemetry_gpu_util_by_gpu": by_gpu, "stretches": stretches,
                    "frames_ago": frames_ago(shown)})
                print(name, file=sys.stderr)
                n += 1
    return n


def main(runs: list[str]) -> int:
    """Shoot the pictures and write ``truth.json``; with ``--truth-only`` first, only the
    truth is written again (the pictures already made are kept: the same bytes)."""
    truth_only = bool(runs) and runs[0] == "--truth-only"
    runs = runs[1:] if truth_only else runs
    out_dir = HERE / "pictures"
    out_dir.mkdir(exist_ok=True)
    truth, n = [], 0
    for run in map(Path, runs):
        if (run / "source.json").exists():
            n = standin_run(run, n, truth, truth_only, out_dir)
            continue
        trace = pd.read_parquet(run / "nvtop_h200.parquet")
        util = trace.dropna(subset=["gpu_util"])
        for path in sorted((run / "nvtop_h200").glob("*.nvtop.jsonl.gz")):
            rows = [json.loads(x) for x in gzip.decompress(path.read_bytes()).splitlines()]
            head, body = rows[0], rows[1:]
            look = path.name.split(".")[0]
            for at in MOMENTS_S:
                upto = body[0]["t"] + at
                shown = [r for r in body if r["t"] <= upto]
                if not shown:
                    continue
                data = mp._QUERIES.sub(b"", b"".join(
                    r["data"].encode("utf-8", "surrogateescape") for r in shown))
                name = f"{n:02d}_{look}_{int(at)}s.png"
                if not truth_only and not (out_dir / name).exists():
                    mp.shoot(data, mp.LOOKS[n % len(mp.LOOKS)], out_dir / name, head["cols"],
                             head["rows"])
                text = screen_text(shown, upto, head["cols"], head["rows"])
                gpus = parse_nvtop([(ln, 1.0, None, None) for ln in text.splitlines()])
                t_last = shown[-1]["t"]
                near = util[(util["timestamp"] > t_last - 120) & (util["timestamp"] <= t_last)]
                truth.append({
                    "file": f"pictures/{name}", "look": look, "argv": head["argv"][1:],
                    "font": " ".join(map(str, mp.LOOKS[n % len(mp.LOOKS)][:2])),
                    "moment": t_last, "gpus": [{"gpu": g.gpu, "name": g.name,
                                                "printed": g.values} for g in gpus],
                    "telemetry_gpu_util": [[round(t_last - t, 3), round(v, 2)] for t, v in
                                           zip(near["timestamp"], near["gpu_util"],
                                               strict=True)],
                    "frames_ago": frames_ago(shown)})
                print(name, file=sys.stderr)
                n += 1
    # one picture per line: the telemetry lists stay on their picture's line
    (HERE / "truth.json").write_text("[\n" + ",\n".join(json.dumps(e) for e in truth) + "\n]\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
