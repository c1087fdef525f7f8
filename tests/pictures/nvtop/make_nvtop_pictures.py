"""Make the nvtop screenshot set (issue 37) from real nvtop recordings and their telemetry.

Input: a recording by ``kernels_bench/record_nvtop.sh`` (``captures/<run>/nvtop_h200/*.nvtop.jsonl.gz``:
nvtop's terminal bytes stamped with their times, one file per look, and the collector's trace
``nvtop_h200.parquet`` of the same seconds).  Each picture is one look's stream up to a chosen
moment replayed in a real ``xterm`` under ``Xvfb`` and taken with ``scrot``
(``make_pictures.shoot``), in one of ``make_pictures.LOOKS``' fonts and colours.

Output, beside this file: ``pictures/NN_<look>_<t>s.png`` and ``truth.json``: per picture the
moment (epoch s of the last byte shown), the nvtop arguments (update interval ``-d``, ``-r``,
``-C``), the header values as printed (``screen_nvtop.parse_nvtop`` of the screen's text, as
``pyte`` renders the same bytes: what the picture shows, not what the OCR reads), and the
collector's ``gpu_util`` (NVML utilization.gpu, the series nvtop plots as ``GPU0 %``) as
(seconds before the moment, %) pairs over the last 120 s.

``--truth-only`` as the first argument writes ``truth.json`` again without shooting.  Run (needs Xvfb, xterm, scrot and ``pip install pyte``; ``DISPLAY`` an Xvfb screen of at least
2400x1400): ``python tests/pictures/nvtop/make_nvtop_pictures.py
tests/pictures/nvtop/captures/h200_run1``.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import make_pictures as mp

from tealeaves.data.screen_nvtop import parse_nvtop

#: Moments shot per look, seconds after nvtop's first frame (the workload's stretches:
#: idle, prefill, decode, and the idle gap after them).
MOMENTS_S = (25.0, 45.0, 70.0, 100.0, 130.0)


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


def main(runs: list[str]) -> int:
    """Shoot the pictures and write ``truth.json``; with ``--truth-only`` first, only the
    truth is written again (the pictures already made are kept: the same bytes)."""
    truth_only = bool(runs) and runs[0] == "--truth-only"
    runs = runs[1:] if truth_only else runs
    out_dir = HERE / "pictures"
    out_dir.mkdir(exist_ok=True)
    truth, n = [], 0
    for run in map(Path, runs):
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
                if not truth_only:
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
                                               strict=True)]})
                print(name, file=sys.stderr)
                n += 1
    (HERE / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
