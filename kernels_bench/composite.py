"""Composite traces from real rows, for cases no lent machine can record: imbalance at low
load across two GPUs, and a prefill GPU beside a decode GPU (P/D disaggregation), built from
one-GPU recordings.

Each GPU's rows are real samples of a bundled trace, taken from the stretches its labels give
one phase (``phase_rows``), laid end to end on a new clock (``stretch``).  Nothing is scaled or
invented: a "hot" GPU runs a real eager-MoE decode recording while the other runs a real idle
one, as a rank doing all the expert work of a step would next to one that waits.  The label CSV
says which GPU carries the work.  ``python -m tealeaves.kernels_bench.composite OUTDIR``
writes ``h200x2_composite_low_load.parquet`` and its ``.labels.csv`` (``--which pd``:
``h200x2_composite_pd``, ``build_pd``; not in the corpus, the tests build it).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
import pandas as pd

from tealeaves.data.traces import Trace, label_at, read_labels, read_trace, write_trace

#: Gaps between kept rows longer than this are closed up (seconds).
MAX_GAP_S = 0.05


def phase_rows(directory: Path, name: str, phase: str) -> pd.DataFrame:
    """The samples of ``name`` labelled ``phase``, with ``vt``: a virtual clock (s) that
    closes the gaps between the kept stretches."""
    trace = read_trace(directory / f"{name}.parquet")
    labels = read_labels(directory / f"{name}.labels.csv")
    s = trace.samples.sort_values("timestamp").reset_index(drop=True)
    s = s[label_at(labels, s["timestamp"])["phase"].to_numpy() == phase].reset_index(drop=True)
    dt = np.diff(s["timestamp"].to_numpy(), prepend=s["timestamp"].iloc[0])
    s["vt"] = np.cumsum(np.clip(dt, 0.0, MAX_GAP_S))
    return s


def stretch(rows: pd.DataFrame, offset: float, seconds: float, t0: float,
            gpu: int) -> pd.DataFrame:
    """``seconds`` of ``rows`` from virtual time ``offset`` (wrapping), on GPU ``gpu``, at
    epoch ``t0``."""
    span = float(rows["vt"].iloc[-1]) + 1e-3
    parts, done = [], 0.0
    while done < seconds:
        a = (offset + done) % span
        if span - a < 1e-6:  # a whole lap, up to rounding
            a = 0.0
        take = min(seconds - done, span - a)
        part = rows[(rows["vt"] >= a) & (rows["vt"] < a + take)].copy()
        part["timestamp"] = t0 + done + (part["vt"] - a)
        parts.append(part)
        done += take
    out = pd.concat(parts, ignore_index=True).drop(columns="vt")
    out["gpu"] = gpu
    return out


#: The low-load composite: (seconds, GPU 0 source, GPU 1 source, phase, hot GPU or None).
#: Sources are (trace, phase, virtual offset s).  Balanced stretches give both GPUs the same
#: recording 0.1-0.3 s apart (the same work, its own noise); skewed ones a decode recording
#: against an idle one.
LOW_LOAD_PLAN = [
    (12.0, ("h200x1_cb_spec_dsv3", "idle", 0.0), ("h200x1_cb_spec_qwen3", "idle", 0.0),
     "idle", None),
    (15.0, ("h200x1_cb_spec_dsv3", "decode", 0.0), ("h200x1_cb_spec_dsv3", "decode", 0.3),
     "decode", None),
    (15.0, ("h200x1_hf_moe_s21", "decode", 0.0), ("h200x1_hf_moe_s21", "idle", 0.0),
     "decode", 0),
    (15.0, ("h200x1_hf_moe_s21", "decode", 5.0), ("h200x1_hf_moe_s21", "decode", 5.1),
     "decode", None),
    (15.0, ("h200x1_hf_moe_s22", "idle", 3.0), ("h200x1_hf_moe_s21", "decode", 2.0),
     "decode", 1),
    (15.0, ("h200x1_cb_spec_qwen3", "decode", 0.0), ("h200x1_cb_spec_qwen3", "decode", 0.3),
     "decode", None),
    (8.0, ("h200x1_cb_spec_qwen3", "idle", 2.0), ("h200x1_cb_spec_dsv3", "idle", 0.5),
     "idle", None),
]


def build_low_load(directory: Path, t0: float = 1796150000.0) -> tuple[Trace, list[list]]:
    """The two-GPU low-load composite and its label rows ``[start, end, phase, hot_gpu,
    workload]``."""
    return build_plan(directory, LOW_LOAD_PLAN, t0, LOW_LOAD_PLAN[2][1][0], "low_load")


#: The prefill/decode-disaggregated composite (``build_pd``): GPU 0 is a prefill server, idle
#: between bursts; GPU 1 a decode server.  ``(idle s before the burst, burst s)`` on GPU 0.
PD_SOURCE = "h200x1_bursts"
PD_BURSTS = ((2.0, 1.5), (3.0, 2.0), (2.5, 1.0), (4.0, 2.0), (3.0, 1.5), (2.0, 1.0),
             (3.5, 2.0), (2.5, 1.5), (3.0, 1.0), (2.0, 1.5), (3.0, 2.0), (2.5, 1.0))


def pd_plan(source: str = PD_SOURCE, bursts=PD_BURSTS) -> list[tuple]:
    """The plan of ``build_pd`` in ``LOW_LOAD_PLAN``'s form: 3 s with both GPUs idle; then,
    per burst, GPU 0 idle for the gap and on the prefill rows of ``source`` for the burst,
    while GPU 1 runs its decode rows throughout (each stretch from where the last left off,
    so no row repeats until a source's rows run out and wrap); 4 s more of decode, and 3 s of
    both idle.  A window where GPU 0 prefills and GPU 1 decodes is labelled ``mixed`` (both
    phases run), one where only GPU 1 decodes ``decode``; no GPU is hot."""
    plan: list[tuple] = []
    idle0 = idle1 = pre = dec = 0.0

    def add(seconds, gpu0, gpu1, phase):
        plan.append((seconds, gpu0, gpu1, phase, None))

    add(3.0, (source, "idle", idle0), (source, "idle", idle1), "idle")
    idle0 += 3.0
    idle1 += 3.0
    for gap, burst in bursts:
        add(gap, (source, "idle", idle0), (source, "decode", dec), "decode")
        idle0 += gap
        dec += gap
        add(burst, (source, "prefill", pre), (source, "decode", dec), "mixed")
        pre += burst
        dec += burst
    add(4.0, (source, "idle", idle0), (source, "decode", dec), "decode")
    idle0 += 4.0
    add(3.0, (source, "idle", idle0), (source, "idle", idle1), "idle")
    return plan


def build_pd(directory: Path, t0: float = 1796160000.0) -> tuple[Trace, list[list]]:
    """A prefill/decode-disaggregated pair of GPUs from real rows (``pd_plan``): GPU 0 takes
    the prefill-labelled rows of ``h200x1_bursts`` in bursts, idle rows of the same recording
    between them, GPU 1 its decode-labelled rows throughout: two servers of different roles,
    not one imbalanced group.  About 61 s, 2 x ~50 Hz rows; label rows as ``build_low_load``'s
    (``mixed`` where GPU 0 prefills while GPU 1 decodes)."""
    return build_plan(directory, pd_plan(), t0, PD_SOURCE, "prefill_decode")


def build_plan(directory: Path, plan: list[tuple], t0: float, device_trace: str,
               kind: str) -> tuple[Trace, list[list]]:
    """A two-GPU composite of ``plan`` rows ``(seconds, GPU 0 source, GPU 1 source, phase,
    hot GPU or None)`` (sources: ``(trace, phase, virtual offset s)``), the device rows of
    ``device_trace`` for both GPUs, and its label rows ``[start, end, phase, hot_gpu,
    workload]`` (the last ending at the last sample); ``meta["composite"]`` is ``kind``."""
    cache: dict[tuple[str, str], pd.DataFrame] = {}
    parts, labels, t = [], [], t0
    for seconds, src0, src1, phase, hot in plan:
        for gpu, (name, ph, off) in enumerate((src0, src1)):
            rows = cache.setdefault((name, ph), phase_rows(directory, name, ph))
            parts.append(stretch(rows, off, seconds, t, gpu))
        labels.append([t, t + seconds, phase, "" if hot is None else hot,
                       f"GPU 0: {src0[0]} {src0[1]} rows; GPU 1: {src1[0]} {src1[1]} rows"])
        t += seconds
    samples = pd.concat(parts, ignore_index=True).sort_values(["timestamp", "gpu"],
                                                              ignore_index=True)
    labels[-1][1] = float(samples["timestamp"].max())  # the labels end at the last sample
    base = read_trace(directory / f"{device_trace}.parquet")
    dev = base.devices.drop_duplicates("gpu").iloc[[0, 0]].copy()
    dev["gpu"] = [0, 1]
    if "uuid" in dev:
        dev["uuid"] = [f"{u}-composite{g}" for u, g in zip(dev["uuid"], dev["gpu"],
                                                          strict=True)]
    if "host" in samples:
        samples["host"] = "composite"
    if "host" in dev:
        dev["host"] = "composite"
    return Trace(samples, dev.reset_index(drop=True), {"composite": kind}), labels


def main(argv: list[str] | None = None) -> int:
    from tealeaves.data import TRACES_DIR

    ap = argparse.ArgumentParser(prog="python -m tealeaves.kernels_bench.composite",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="folder to write the composite into")
    ap.add_argument("--traces", type=Path, default=TRACES_DIR, help="source traces folder")
    ap.add_argument("--which", choices=["low_load", "pd"], default="low_load",
                    help="low_load (the corpus' h200x2_composite_low_load, default) or pd "
                         "(h200x2_composite_pd: a prefill GPU beside a decode GPU)")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    trace, labels = (build_pd if a.which == "pd" else build_low_load)(a.traces)
    name = f"h200x2_composite_{a.which}"
    write_trace(a.out / f"{name}.parquet", trace)
    with (a.out / f"{name}.labels.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["start", "end", "phase", "hot_gpu", "workload"])
        for s, e, ph, hot, what in labels:
            w.writerow([f"{s:.6f}", f"{e:.6f}", ph, hot, what])
    print(f"wrote {a.out / name}.parquet: {len(trace.samples)} samples, {len(labels)} stretches")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
