"""Many GPUs from one real one: nvtop driven by a stand-in NVML that replays recorded values.

nvtop loads ``libnvidia-ml.so.1`` with ``dlopen``.  ``nvml_standin/nvml_standin.c`` is a small
library of the same name that answers nvtop's NVML calls from a replay table (its comment gives
the format), so nvtop draws 2, 4 or 8 GPUs whose every value was recorded on a real H200: each
GPU of a scenario replays stretches of the recorded trace whose phase (idle, prefill, decode)
the scenario asks for, a different stretch per GPU, so no two lines are copies.  The scenario's
stretches are the ground truth of a picture's time axis: which GPUs were busy when.

``python -m tealeaves.kernels_bench.nvml_replay --trace T.parquet --labels T.labels.csv
--scenario split8 --out DIR [--look NAME COLS ROWS "nvtop options"]...`` compiles the library
(``cc``), writes ``DIR/<scenario>.replay.txt`` and ``DIR/<scenario>.truth.json`` (the stretches,
epoch times), and records nvtop's screen per look (``nvtop_capture``) while the replay runs,
``DIR/<scenario>/<look>.nvtop.jsonl``.  It needs no GPU: the values come from the trace.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

from tealeaves.kernels_bench.nvtop_capture import record

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "nvml_standin" / "nvml_standin.c"

#: H200 constants the collector's trace does not carry: its memory clock (nvidia-smi -q on the
#: recording host, and nvtop's own header there: ``MEM 3201MHz``), its power cap (700 W) and
#: the memory NVML reports in total (nvtop showed ``140.401Gi`` on the recording host).
MEM_CLOCK_MHZ = 3201
POWER_LIMIT_MW = 700_000
MEM_TOTAL_BYTES = 150_754_820_096

#: Scenarios: ``(gpus, [(seconds, {phase: [gpus]}), ...])``; a GPU not named is idle.
SCENARIOS: dict[str, tuple[int, list[tuple[float, dict[str, list[int]]]]]] = {
    # the four-vs-four split of the question this product answers, between uniform stretches
    "split8": (8, [(14, {}), (22, {"decode": list(range(8))}),
                   (22, {"prefill": [1, 3, 5, 7]}), (18, {"decode": list(range(8))}),
                   (22, {"decode": [0, 1, 2, 3]}), (14, {"prefill": list(range(8))}),
                   (20, {"decode": [1, 3, 5, 7]}), (14, {})]),
    "quad4": (4, [(12, {}), (20, {"prefill": [0, 1]}), (20, {"decode": [0, 1, 2, 3]}),
                  (20, {"decode": [2, 3]}), (16, {"prefill": [0, 1, 2, 3]}), (14, {})]),
    "pair2": (2, [(12, {}), (20, {"prefill": [0]}), (20, {"decode": [0, 1]}),
                  (20, {"decode": [1]}), (14, {})]),
}


def build_library(out_dir: Path) -> Path:
    """Compile the stand-in to ``out_dir/libnvidia-ml.so.1`` with ``cc``; returns its path.

    Raises:
        subprocess.CalledProcessError: the compiler failed (its message on stderr).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / "libnvidia-ml.so.1"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(SOURCE)], check=True)
    return lib


def _segments(labels: pd.DataFrame) -> dict[str, list[tuple[float, float]]]:
    """The labelled stretches of the recording per phase, ``(start, end)`` epoch s, merged
    where one phase runs on (two decode rows in a row are one stretch)."""
    out: dict[str, list[tuple[float, float]]] = {}
    last = None
    for r in labels.sort_values("start").itertuples():
        if last is not None and last[0] == r.phase and abs(r.start - last[2]) < 0.01:
            out[r.phase][-1] = (last[1], r.end)
            last = (r.phase, last[1], r.end)
            continue
        out.setdefault(r.phase, []).append((r.start, r.end))
        last = (r.phase, r.start, r.end)
    return out


def replay_rows(trace: pd.DataFrame, labels: pd.DataFrame, scenario: str) -> pd.DataFrame:
    """The replay table of ``scenario``: one row per recorded sample per GPU.

    Each GPU's stretch of phase P replays the recorded samples of one labelled stretch of P
    (GPU ``g`` takes the ``g``-th such stretch, cycling, and starts ``g`` seconds into it, so
    that equal phases on two GPUs are different real samples), looped when the stretch asked
    for is longer; the first 0.5 s after a label's start is skipped (the recording's own
    transition).  Columns are those of ``nvml_standin.c``'s table; ``t_s`` from 0.

    Raises:
        ValueError: the trace lacks a phase the scenario asks for, or a needed column.
    """
    n_gpus, stretches = SCENARIOS[scenario]
    tr = trace.sort_values("timestamp").ffill().dropna(
        subset=["gpu_util", "power_w", "sm_clock_mhz", "mem_used_bytes", "gpu_temp_c",
                "pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s", "mem_copy_util"])
    ts = tr["timestamp"].to_numpy()
    segs = _segments(labels)
    rows = []
    t = 0.0
    for dur, phases in stretches:
        role = {g: p for p, gs in phases.items() for g in gs}
        for g in range(n_gpus):
            phase = role.get(g, "idle")
            if phase not in segs:
                raise ValueError(f"scenario {scenario}: the trace has no {phase} stretch")
            s0, s1 = segs[phase][g % len(segs[phase])]
            pick = tr[(ts >= s0 + 0.5) & (ts < s1)]
            if pick.empty:
                raise ValueError(f"scenario {scenario}: the {phase} stretch at {s0:.1f} has "
                                 "no samples")
            rel = pick["timestamp"].to_numpy() - pick["timestamp"].iloc[0]
            span = max(rel[-1] + 0.1, 1.0)
            start = min(float(g), rel[-1] / 2)
            k = np.searchsorted(rel, start)
            order = np.r_[np.arange(k, len(rel)), np.arange(0, k)]
            clock = np.r_[rel[k:] - start, rel[:k] + span - start]
            reps = int(np.ceil(dur / span)) + 1
            for rep in range(reps):
                for i, c in zip(order, clock, strict=True):
                    at = c + rep * span
                    if at >= dur:
                        break
                    s = pick.iloc[i]
                    rows.append((round(t + at, 3), g, s.gpu_util, s.mem_copy_util,
                                 s.power_w * 1000, POWER_LIMIT_MW, s.gpu_temp_c,
                                 s.sm_clock_mhz, MEM_CLOCK_MHZ, s.mem_used_bytes,
                                 MEM_TOTAL_BYTES, s.pcie_rx_bytes_per_s / 1024,
                                 s.pcie_tx_bytes_per_s / 1024))
        t += dur
    cols = ["t_s", "gpu", "util_pct", "mem_util_pct", "power_mw", "power_limit_mw", "temp_c",
            "sm_clock_mhz", "mem_clock_mhz", "mem_used_bytes", "mem_total_bytes",
            "pcie_rx_kbs", "pcie_tx_kbs"]
    return pd.DataFrame(rows, columns=cols).sort_values(["gpu", "t_s"], kind="stable")


def write_table(rows: pd.DataFrame, path: Path) -> None:
    """The replay table as ``nvml_standin.c`` reads it (rows of one GPU in time order)."""
    with open(path, "w") as f:
        f.write("# " + " ".join(rows.columns) + "\n")
        f.writelines(
            f"{r.t_s:.3f} {r.gpu} {r.util_pct:.0f} {r.mem_util_pct:.0f} {r.power_mw:.0f} "
            f"{r.power_limit_mw} {r.temp_c:.0f} {r.sm_clock_mhz:.0f} {r.mem_clock_mhz} "
            f"{r.mem_used_bytes:.0f} {r.mem_total_bytes} {r.pcie_rx_kbs:.0f} "
            f"{r.pcie_tx_kbs:.0f}\n" for r in rows.itertuples(index=False))


def truth(scenario: str, t0: float) -> dict:
    """The scenario's stretches as epoch times: ``{"scenario", "gpus", "t0", "stretches":
    [{"start", "end", "busy": {gpu: phase}, "hot_set": [gpus] or [] when all or none are
    busy}]}``."""
    n_gpus, stretches = SCENARIOS[scenario]
    out, t = [], t0
    for dur, phases in stretches:
        busy = {g: p for p, gs in phases.items() for g in gs}
        out.append({"start": t, "end": t + dur, "busy": {str(g): p for g, p in busy.items()},
                    "hot_set": sorted(busy) if 0 < len(busy) < n_gpus else []})
        t += dur
    return {"scenario": scenario, "gpus": n_gpus, "t0": t0, "stretches": out}


def main(argv: list[str] | None = None) -> int:
    """The command line: see the module docstring."""
    ap = argparse.ArgumentParser(prog="python -m tealeaves.kernels_bench.nvml_replay",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, required=True, help="the collector's Parquet trace")
    ap.add_argument("--labels", type=Path, required=True, help="its labels CSV")
    ap.add_argument("--scenario", choices=sorted(SCENARIOS), required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--look", nargs=4, action="append", metavar=("NAME", "COLS", "ROWS", "OPTS"),
                    help="an nvtop look to record (repeatable)")
    ap.add_argument("--nvtop", default="nvtop")
    args = ap.parse_args(argv)
    lib = build_library(args.out / "lib")
    rows = replay_rows(pd.read_parquet(args.trace), pd.read_csv(args.labels), args.scenario)
    table = args.out / f"{args.scenario}.replay.txt"
    write_table(rows, table)
    t0 = time.time() + 1.0
    total = sum(d for d, _ in SCENARIOS[args.scenario][1])
    (args.out / f"{args.scenario}.truth.json").write_text(
        json.dumps(truth(args.scenario, t0), indent=1) + "\n")
    os.environ.update(TEALEAVES_NVML_REPLAY=str(table), TEALEAVES_NVML_T0=f"{t0:.6f}",
                      LD_LIBRARY_PATH=f"{lib.parent}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    (args.out / args.scenario).mkdir(parents=True, exist_ok=True)
    threads = []
    for name, cols, nrows, opts in args.look or [("d10_160x48", "160", "48", "-d 10")]:
        argv_ = [args.nvtop, "-c", str(args.out / args.scenario / f"{name}.ini"), *opts.split()]
        path = args.out / args.scenario / f"{name}.nvtop.jsonl"
        th = threading.Thread(target=record, args=(argv_, int(cols), int(nrows), total + 1.0,
                                                   path))
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    print(f"{args.scenario}: {len(rows)} replay rows, {total:.0f} s, "
          f"{len(threads)} looks recorded", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
