"""Imbalance at any load and every hot GPU (issue 18): the detector's noise floor and threshold
come from balanced decode, a low-load skew built from real rows is flagged while balanced
low-load decode is not, and the scoring helpers behind `evaluate --corpus`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tealeaves.classifier import classify_trace
from tealeaves.classifier.evaluate import change_windows, score, time_accuracy
from tealeaves.classifier.features import WindowFeatures
from tealeaves.classifier.imbalance import (
    ImbalanceDetector,
    ceilings,
    format_hot_set,
    gpu_work,
    imbalance_terms,
)
from tealeaves.data import TRACES_DIR
from tealeaves.data.traces import label_at, read_labels, read_trace
from tealeaves.kernels_bench.composite import build_low_load
from tealeaves.kernels_bench.hf_serving import intervals


@pytest.fixture(scope="module")
def low_load():
    trace, rows = build_low_load(TRACES_DIR)
    labels = pd.DataFrame([r[:4] for r in rows], columns=["start", "end", "phase", "hot_gpu"])
    labels["hot_gpu"] = pd.to_numeric(labels["hot_gpu"], errors="coerce")
    feats = WindowFeatures(0.5, trace.devices).fit_transform(trace.samples)
    return trace, labels, feats


def test_the_composite_is_real_rows_and_matches_the_bundled_file(low_load):
    trace, labels, _ = low_load
    bundled = read_trace(TRACES_DIR / "h200x2_composite_low_load.parquet")
    assert len(bundled.samples) == len(trace.samples)
    assert np.allclose(bundled.samples["sm_active"].fillna(-1),
                       trace.samples["sm_active"].fillna(-1).to_numpy())
    # every value of GPU 0 in the first skewed stretch is a reading of the source recording
    src = read_trace(TRACES_DIR / "h200x1_hf_moe_s21.parquet").samples
    s = labels[labels["hot_gpu"] == 0].iloc[0]
    part = trace.samples[(trace.samples["gpu"] == 0) & trace.samples["timestamp"].between(
        s.start, s.end, inclusive="left")]
    assert set(part["power_w"].dropna()) <= set(src["power_w"].dropna())


def test_low_load_skew_is_flagged_and_balanced_low_load_decode_is_not(low_load):
    _, labels, feats = low_load
    truth = label_at(labels, feats.index.to_numpy() + 0.25)
    det = ImbalanceDetector().fit(feats, truth["phase"].to_numpy(),
                                  truth["hot_gpu"].to_numpy(dtype=float))
    assert 0.25 <= det.floor < 5.0 and 1.04 <= det.threshold <= 1.40
    out = det.detect(feats, truth["phase"].to_numpy())
    skewed = (truth["phase"] == "decode").to_numpy() & truth["hot_gpu"].notna().to_numpy()
    balanced = (truth["phase"] == "decode").to_numpy() & truth["hot_gpu"].isna().to_numpy()
    assert feats["load_mean"].to_numpy()[skewed].mean() < 10.0  # low load indeed
    assert out["imbalanced"].to_numpy()[skewed].mean() >= 0.9
    assert out["imbalanced"].to_numpy()[balanced].mean() <= 0.1
    flagged = out[out["imbalanced"] & skewed]
    assert (flagged["hot_set"] == truth.loc[flagged.index.map(feats.index.get_loc),
                                            "hot_gpu"].astype(int).astype(str)
            .to_numpy()).mean() >= 0.9
    # the old rule (nothing under 10 % mean load) would have flagged none of these
    assert (feats["load_mean"].to_numpy()[skewed] < 10).mean() >= 0.85


def test_the_shipped_path_flags_the_low_load_skew(low_load):
    trace, labels, _ = low_load
    s = score(classify_trace(trace), labels)
    assert s["low_load_skewed_windows"] > 30
    assert s["imbalance_recall_low_load"] >= 0.9 and s["imbalance_precision"] >= 0.9


def test_work_uses_the_pipes_that_do_work_and_every_hot_gpu_is_named():
    # GPU 1 waits in a collective: SMs "active", no tensor or DRAM work
    f = pd.DataFrame({
        "load_g0": [60.0], "load_g1": [60.0], "load_g2": [20.0], "load_g3": [20.0],
        "busy_g0": [90.0], "busy_g1": [90.0], "busy_g2": [90.0], "busy_g3": [90.0],
        "sm_g0": [0.6], "sm_g1": [0.6], "sm_g2": [0.2], "sm_g3": [0.2],
        "tensor_g0": [0.05], "tensor_g1": [0.01], "tensor_g2": [0.05], "tensor_g3": [0.05],
        "dram_g0": [0.60], "dram_g1": [0.02], "dram_g2": [0.20], "dram_g3": [0.20],
        "pcie_g0": [0.0], "pcie_g1": [0.0], "pcie_g2": [0.0], "pcie_g3": [0.0],
        "nvlink_g0": [0.0], "nvlink_g1": [0.0], "nvlink_g2": [0.0], "nvlink_g3": [0.0],
    })
    work, gpus = gpu_work(f)
    assert gpus == [0, 1, 2, 3] and work[0].tolist() == pytest.approx([65, 3, 25, 25])
    t = imbalance_terms(f, threshold=1.15, floor=1.0)
    assert t.loc[0, "hot_set"] == (0,)  # not GPU 1, whose SMs only wait
    c = ceilings(f, [0])
    assert c[0]["pipe"] == "dram" and c[0]["others"] == pytest.approx((0.02 + 0.2 + 0.2) / 3)
    assert format_hot_set((7, 5, 3, 1), 18.2, 7.1) == \
        "GPUs 1, 3, 5, 7 at 2.6x the rest's work (18 % each vs 7 %)"  # hot_set.window_words
    assert format_hot_set((), 1, 1) == ""


def test_a_detector_fitted_without_skewed_examples_keeps_noise_based_settings():
    rng = np.random.default_rng(0)
    n = 200
    base = rng.uniform(20, 60, n)
    f = pd.DataFrame({"load_g0": base, "load_g1": base * rng.normal(1, 0.01, n),
                      "busy_g0": base, "busy_g1": base})
    det = ImbalanceDetector().fit(f, np.array(["decode"] * n), np.full(n, np.nan))
    assert det.min_windows == 1 and 1.0 < det.threshold < 1.1


def test_change_windows_and_time_accuracy():
    labels = pd.DataFrame({"start": [0.0, 1.2, 3.0], "end": [1.2, 3.0, 4.0],
                           "phase": ["idle", "decode", "decode"], "hot_gpu": np.nan})
    starts = np.arange(0, 4, 0.5)
    assert change_windows(starts, labels).tolist() == [False, False, True, False, False,
                                                       False, False, False]
    pred = pd.DataFrame({"start": [0.0, 1.0], "end": [1.0, 4.0], "phase": ["idle", "decode"]})
    acc = time_accuracy(pred, labels)
    assert acc["labelled_s"] == pytest.approx(4.0)
    assert acc["time_accuracy"] == pytest.approx(38 / 40)  # 0.2 s of idle called decode


def test_engine_forwards_become_label_intervals():
    rows = [(10.00, 10.30, 4096, 0, 1),   # a prefill forward
            (10.31, 10.35, 0, 4, 4),      # decode
            (10.36, 10.40, 8, 30, 30),    # a chunk of 8 tokens beside 30 decode tokens: decode
            (10.41, 10.60, 2000, 12, 13),  # prefill chunk packed with decode: prefill
            (11.50, 11.55, 0, 2, 2)]      # after a pause: idle between
    out = intervals(rows, idle_gap_s=0.05, t_begin=9.0, t_end=12.0, what="w")
    phases = [(round(s, 3), round(e, 3), p) for s, e, p, _ in out]
    assert phases == [(9.0, 10.0, "idle"), (10.0, 10.305, "prefill"), (10.305, 10.405, "decode"),
                      (10.405, 10.6, "prefill"), (10.6, 11.5, "idle"), (11.5, 11.55, "decode"),
                      (11.55, 12.0, "idle")]


def test_the_serving_engine_traces_are_in_the_corpus_with_their_families():
    m = pd.read_csv(TRACES_DIR / "MANIFEST.csv")
    fams = set(m.loc[m["workload"].str.contains("hf_serving"), "family"])
    assert {"hf_cb/deepseek_v3", "hf_spec/qwen3_moe"} <= fams and len(fams) >= 4
    for name in m.loc[m["workload"].str.contains("hf_serving"), "name"]:
        lab = read_labels(TRACES_DIR / f"{name}.labels.csv")
        fw = pd.read_csv(TRACES_DIR / f"{name}.forwards.csv")
        assert len(fw) > 50 and (fw["end"] > fw["start"]).all()
        assert lab["start"].min() <= fw["start"].min() and lab["end"].max() >= fw["end"].max()


def test_no_ceiling_verdict_without_the_profiling_pipes():
    f = pd.DataFrame({"load_g0": [80.0], "load_g1": [20.0], "busy_g0": [90.0],
                      "busy_g1": [90.0], "tensor_g0": [np.nan], "tensor_g1": [np.nan],
                      "dram_g0": [np.nan], "dram_g1": [np.nan], "pcie_g0": [0.01],
                      "pcie_g1": [0.01], "nvlink_g0": [0.0], "nvlink_g1": [0.0]})
    c = ceilings(f, [0])
    assert c[0]["pipe"] == "unknown"  # not "launch-bound" from PCIe and NVLink alone


def test_corpus_validation_of_one_family_is_refused_with_one_line(tmp_path):
    import shutil
    import subprocess
    import sys

    for name in ("h200x2_bursts", "h200x2_chunked"):
        for ext in (".parquet", ".labels.csv"):
            shutil.copy(TRACES_DIR / f"{name}{ext}", tmp_path / f"{name}{ext}")
    (tmp_path / "MANIFEST.csv").write_text("name,family\nh200x2_bursts,w\nh200x2_chunked,w\n")
    r = subprocess.run([sys.executable, "-m", "tealeaves.app.cli", "evaluate", "--corpus",
                        str(tmp_path)], capture_output=True, text=True, timeout=300,
                       check=False)
    errors = [ln for ln in r.stderr.splitlines() if "error" in ln]  # beside the progress bar
    assert r.returncode == 2 and len(errors) == 1 and "at least two" in errors[0], r.stderr
    assert "Traceback" not in r.stderr


def test_a_model_trained_without_some_phase_scores_it_zero():
    from tealeaves.classifier.evaluate import load_corpus, train
    from tealeaves.classifier.model import PhaseModel

    c = [x for x in load_corpus(hop=False) if x.name == "h200x2_launch_bound"]
    no_prefill = [replace_truth(x) for x in c]
    m = train(no_prefill)
    assert isinstance(m, PhaseModel)
    p = m.predict_proba(c[0].features)
    assert (p["prefill"] == 0).all() and np.allclose(p.sum(axis=1), 1)


def replace_truth(trace):
    from dataclasses import replace

    t = trace.truth.copy()
    t.loc[t["phase"] == "prefill", "phase"] = None
    return replace(trace, truth=t)


def test_segment_boundaries_are_scored_early_or_late_alike():
    from tealeaves.classifier.evaluate import segment_boundary_offsets

    labels = pd.DataFrame({"start": [0.0, 2.0, 4.0], "end": [2.0, 4.0, 6.0],
                           "phase": ["idle", "decode", "prefill"], "hot_gpu": np.nan})
    segs = pd.DataFrame({"start": [0.0, 1.8, 4.3], "end": [1.8, 4.3, 6.0],
                         "phase": ["idle", "decode", "prefill"]})
    assert segment_boundary_offsets(segs, labels) == pytest.approx([0.2, 0.3])
    never = segs.assign(phase=["idle", "decode", "decode"])
    assert segment_boundary_offsets(never, labels) == pytest.approx([0.2, 2.0])


def test_dcgm_blank_codes_in_a_trace_are_no_reading_and_name_no_hot_gpu(tmp_path):
    from tealeaves.data.traces import Trace, write_trace

    trace = read_trace(TRACES_DIR / "h200x2_skew_rotation.parquet")
    labels = read_labels(TRACES_DIR / "h200x2_skew_rotation.labels.csv")
    bal = labels[(labels["phase"] == "decode") & labels["hot_gpu"].isna()].iloc[0]
    s = trace.samples.copy()
    rows = s.index[(s["gpu"] == 0) & s["timestamp"].between(bal.start, bal.end)
                   & s["dram_active"].notna()][::5]
    s.loc[rows, "dram_active"] = 140737488355328.0  # DCGM's blank double
    s.loc[rows, "power_w"] = 140737488355328.0
    s.loc[rows, "sm_clock_mhz"] = 9223372036854775794.0  # its blank 64-bit int
    path = write_trace(tmp_path / "blank.parquet", Trace(s, trace.devices))
    back = read_trace(path).samples
    assert back["dram_active"].max() <= 100 and back["power_w"].max() < 5000
    assert back["sm_clock_mhz"].max() < 10000
    w = classify_trace(read_trace(path))
    inside = w[(w["start"] >= bal.start) & (w["end"] <= bal.end)]
    ref = classify_trace(trace)
    ref_inside = ref[(ref["start"] >= bal.start) & (ref["end"] <= bal.end)]
    assert len(inside) > 4
    assert inside["imbalanced"].sum() <= ref_inside["imbalanced"].sum()
    assert (inside["phase"] == ref_inside["phase"].to_numpy()).all()
