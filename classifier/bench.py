"""Classifier speed benchmark: one hour of eight-GPU telemetry at 20 Hz, on one CPU core.

The hour is built from a real trace (the bundled two-GPU H200 recording at 20 Hz): its
samples are repeated end to end to fill the hour and copied onto GPUs 2-7 with a small
per-GPU jitter, so the feature code sees real value distributions and gaps.  Each labeller
(the trained model with Viterbi and the imbalance detector; the v0 rules) runs the full path
``classify_samples`` takes: windows and features, then phases and imbalance.  A third row runs the
same model with the 0.1-s segments (``segments.py``: five overlapping window grids and the
slot pass) on top of the windows.  Timings are
wall-clock seconds, best of ``repeat``, with the process pinned to one core and the BLAS /
OpenMP pools at one thread.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd


def synthetic_hour(samples: pd.DataFrame, devices: pd.DataFrame, seconds: float = 3600.0,
                   n_gpus: int = 8, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``seconds`` of ``n_gpus``-GPU telemetry tiled from a real trace.

    Returns:
        (samples, devices) in the sample schema.
    """
    rng = np.random.default_rng(seed)
    t0, t1 = samples["timestamp"].min(), samples["timestamp"].max()
    span = t1 - t0 + 0.05
    reps = int(np.ceil(seconds / span))
    src_gpus = sorted(samples["gpu"].unique())
    parts = []
    for k in range(reps):
        block = samples.copy()
        block["timestamp"] = block["timestamp"] + k * span
        parts.append(block)
    tiled = pd.concat(parts, ignore_index=True)
    tiled = tiled[tiled["timestamp"] < t0 + seconds]
    out = []
    metric_cols = [c for c in tiled.columns if tiled[c].dtype.kind == "f"
                   and c not in ("timestamp", "monotonic")]
    for g in range(n_gpus):
        part = tiled[tiled["gpu"] == src_gpus[g % len(src_gpus)]].copy()
        part["gpu"] = g
        jitter = 1.0 + rng.normal(0, 0.02, size=(len(part), len(metric_cols)))
        part[metric_cols] = part[metric_cols].to_numpy() * jitter
        out.append(part)
    frame = pd.concat(out, ignore_index=True).sort_values(["timestamp", "gpu"],
                                                          ignore_index=True)
    dev = devices.drop_duplicates("gpu").iloc[[0] * n_gpus].copy()
    dev["gpu"] = range(n_gpus)
    return frame, dev.reset_index(drop=True)


def one_core() -> str:
    """Pin this process to one CPU and the native thread pools to one thread; returns what
    was done."""
    done = []
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        done.append(f"pinned to CPU {cpu}")
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
        done.append("thread pools at 1")
    except ImportError:
        pass
    return ", ".join(done) or "not pinned"


def run(seconds: float = 3600.0, n_gpus: int = 8, repeat: int = 3, log=print) -> dict:
    """Time both labellers on the synthetic hour; returns the figures and logs a table."""
    from tealeaves.classifier import classify_features
    from tealeaves.classifier.features import WindowFeatures
    from tealeaves.classifier.model import PhaseModel
    from tealeaves.classifier.rules import RulePhaseLabeller
    from tealeaves.classifier.segments import classify_segments, hop_features
    from tealeaves.data import bundled_trace_path
    from tealeaves.data.traces import read_trace

    pin = one_core()
    trace = read_trace(bundled_trace_path())
    samples, devices = synthetic_hour(trace.samples, trace.devices, seconds, n_gpus)
    log(f"{len(samples):,} samples: {n_gpus} GPUs x {seconds:.0f} s at "
        f"{len(samples) / n_gpus / seconds:.1f} Hz per GPU ({pin})")
    model = PhaseModel.load()
    name = f"trained ({model.kind}{' + Viterbi' if model.smooth else ''})"
    labellers = {name: model, "rules (v0)": RulePhaseLabeller()}
    if model.shares is not None:  # what the calibrated shares cost, side by side
        from dataclasses import replace

        labellers[f"{name[:-1]}, no shares)"] = replace(model, shares=None)
    figures: dict[str, dict] = {}
    for name, lab in labellers.items():
        best_feat = best_label = np.inf
        for _ in range(repeat):
            t = time.perf_counter()
            feats = WindowFeatures(0.5, devices).fit_transform(samples)
            t_feat = time.perf_counter() - t
            t = time.perf_counter()
            windows = classify_features(feats, 0.5, lab)
            t_label = time.perf_counter() - t
            best_feat, best_label = min(best_feat, t_feat), min(best_label, t_label)
        figures[name] = {"windows": len(windows), "features_s": best_feat,
                         "label_s": best_label, "total_s": best_feat + best_label,
                         "phases": windows["phase"].value_counts().to_dict()}
    # the full classify path with the 0.1-s segments: windows, then the four shifted grids
    # and the slot pass (what `tealeaves classify` and the dashboard's ribbon run)
    best_feat = best_label = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        feats = WindowFeatures(0.5, devices).fit_transform(samples)
        hop = hop_features(samples, devices, 0.5, base=feats)
        t_feat = time.perf_counter() - t
        t = time.perf_counter()
        windows = classify_features(feats, 0.5, model)
        segs = classify_segments(hop, model, 0.5, times=samples["timestamp"].to_numpy())
        t_label = time.perf_counter() - t
        best_feat, best_label = min(best_feat, t_feat), min(best_label, t_label)
    figures["trained + 0.1-s segments"] = {
        "windows": len(windows), "segments": len(segs), "features_s": best_feat,
        "label_s": best_label, "total_s": best_feat + best_label,
        "phases": segs["phase"].value_counts().to_dict()}
    log(f"{'labeller':34s} {'windows':>8s} {'features s':>11s} {'label s':>9s} {'total s':>9s}")
    for name, f in figures.items():
        log(f"{name:34s} {f['windows']:8d} {f['features_s']:11.3f} {f['label_s']:9.3f} "
            f"{f['total_s']:9.3f}")
    return {"samples": len(samples), "n_gpus": n_gpus, "seconds": seconds, "pinning": pin,
            "labellers": figures}
