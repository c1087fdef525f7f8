"""The trained phase model: shipped safely, rebuilt deterministically, validated on held-out
real traces, and the label checks of ``tealeaves evaluate``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tealeaves.classifier import classify_trace, default_labeller, labeller_name
from tealeaves.classifier.features import FEATURE_COLUMNS, MODEL_COLUMNS, WindowFeatures
from tealeaves.classifier.imbalance import ImbalanceDetector
from tealeaves.classifier.model import (
    ModelError,
    PhaseModel,
    _viterbi_log_numpy,
    transition_matrix,
    viterbi,
    viterbi_log,
)
from tealeaves.data import TRACES_DIR
from tealeaves.data.traces import read_trace


def tealeaves(*args):
    return subprocess.run([sys.executable, "-m", "tealeaves.app.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=900, check=False)


def test_the_shipped_model_is_what_classify_and_the_dashboard_use():
    lab = default_labeller()
    assert isinstance(lab, PhaseModel) and labeller_name(lab) == "trained"
    assert lab.kind == "hgb" and lab.meta["corpus"] and lab.imbalance.threshold > 1.0
    trace = read_trace(TRACES_DIR / "h200x2_bursts.parquet")
    windows = classify_trace(trace)
    assert set(windows["phase"]) == {"idle", "prefill", "decode"}
    assert windows["imbalanced"].any() and set(windows["persistence"]) >= {"new", "persistent"}


def test_train_rebuilds_the_shipped_model(tmp_path):
    r = tealeaves("train", "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    n = len(pd.read_csv(TRACES_DIR / "MANIFEST.csv"))
    assert f"trained the hgb model with Viterbi smoothing on {n} traces" in r.stdout
    rebuilt, shipped = PhaseModel.load(tmp_path), PhaseModel.load()
    trace = read_trace(TRACES_DIR / "h200x2_random_s11.parquet")
    f = WindowFeatures(0.5, trace.devices).fit_transform(trace.samples)
    assert np.array_equal(rebuilt.predict_proba(f).to_numpy(),
                          shipped.predict_proba(f).to_numpy())
    assert rebuilt.imbalance.threshold == shipped.imbalance.threshold
    assert json.loads((tmp_path / "phase_model.json").read_text())["corpus"] == \
        shipped.meta["corpus"]


def test_numpy_inference_matches_the_torch_network():
    pytest.importorskip("torch")
    from tealeaves.classifier.evaluate import load_corpus
    from tealeaves.classifier.temporal import TemporalConvModel

    corpus = load_corpus()[:3]
    m = TemporalConvModel(epochs=2).fit([c.features for c in corpus], [c.truth for c in corpus])
    f = corpus[0].features
    assert np.allclose(m.export().predict_proba(f), m.predict_proba(f).to_numpy(), atol=1e-5)


def test_a_gradient_boosting_model_file_holding_foreign_code_is_refused(tmp_path):
    import os

    from sklearn.preprocessing import FunctionTransformer
    from skops.io import dump

    from tealeaves.classifier.evaluate import load_corpus, train

    model = train(load_corpus()[:2], kind="hgb")
    model.save(tmp_path)
    assert PhaseModel.load(tmp_path).kind == "hgb"
    dump(FunctionTransformer(func=os.system), tmp_path / "phase_model.skops")
    with pytest.raises(ModelError, match="refuses to load types"):
        PhaseModel.load(tmp_path)


def test_weights_holding_pickled_objects_are_refused(tmp_path):
    from dataclasses import replace

    from tealeaves.classifier.temporal import ConvPhaseNet

    k = len(MODEL_COLUMNS)
    net = ConvPhaseNet([np.zeros((3, k, 5), np.float32)], [np.zeros(3, np.float32)],
                       np.zeros(k), np.ones(k))
    replace(PhaseModel.load(), estimator=net, kind="tcn", smooth=False).save(tmp_path)
    assert PhaseModel.load(tmp_path).kind == "tcn"
    arrays = dict(np.load(tmp_path / "phase_model.npz"))
    arrays["w0"] = np.array([object()], dtype=object)
    np.savez(tmp_path / "phase_model.npz", **arrays)
    with pytest.raises(ModelError, match="cannot load"):
        PhaseModel.load(tmp_path)


def test_a_model_trained_on_other_features_is_refused(tmp_path):
    PhaseModel.load().save(tmp_path)
    doc = json.loads((tmp_path / "phase_model.json").read_text())
    doc["feature_columns"] = doc["feature_columns"][:-1]
    (tmp_path / "phase_model.json").write_text(json.dumps(doc))
    with pytest.raises(ModelError, match="other features"):
        PhaseModel.load(tmp_path)


def test_viterbi_on_floats_gives_the_numpy_steps_path_ties_and_zero_transitions_included():
    rng = np.random.default_rng(3)
    for trial in range(150):
        n, k = int(rng.integers(1, 300)), int(rng.integers(1, 5))
        emit = np.log(rng.dirichlet(np.ones(k), size=n))
        trans = rng.dirichlet(np.ones(k), size=k)
        if trial % 3 == 0:
            emit = np.round(emit, 1)  # ties between states
        if trial % 4 == 0:
            trans[0, -1] = 0.0  # a transition never taken: -inf
        with np.errstate(divide="ignore"):
            logt = np.log(trans)
        breaks = rng.random(n) < 0.05
        assert viterbi_log(emit, logt, breaks).tolist() == \
            _viterbi_log_numpy(emit, logt, breaks).tolist(), trial


def test_viterbi_removes_a_one_window_flicker_and_restarts_after_a_gap():
    trans = transition_matrix([np.array(["idle"] * 50 + ["decode"] * 50)])
    p = np.tile([0.05, 0.05, 0.9], (9, 1))
    p[4] = [0.05, 0.6, 0.35]  # a lone, unsure prefill window inside decode
    path = viterbi(p, np.full(3, 1 / 3), trans)
    assert path.tolist() == [2] * 9
    p2 = np.vstack([np.tile([0.9, 0.05, 0.05], (3, 1)), np.tile([0.05, 0.05, 0.9], (3, 1))])
    breaks = np.array([True, False, False, True, False, False])
    assert viterbi(p2, np.full(3, 1 / 3), trans, breaks).tolist() == [0, 0, 0, 2, 2, 2]


def test_imbalance_detector_terms_min_run_and_persistence():
    n = 12
    load0 = np.full(n, 50.0)
    load1 = np.full(n, 50.0)
    load0[2:6] = 80.0  # GPU 0 hot for 4 windows
    load1[7] = 80.0  # GPU 1 hot for one window: under a 2-window minimum
    load1[9:12] = 90.0  # GPU 1 hot again for 3 windows
    f = pd.DataFrame({"load_g0": load0, "load_g1": load1, "busy_g0": load0, "busy_g1": load1})
    det = ImbalanceDetector(threshold=1.1, min_windows=2)
    out = det.detect(f, np.array(["decode"] * n))
    assert out["imbalanced"].tolist() == [False] * 2 + [True] * 4 + [False] * 3 + [True] * 3
    assert out.loc[2, "hot_gpu"] == 0 and out.loc[9, "hot_gpu"] == 1
    assert out.loc[2, "imbalance_ratio"] == pytest.approx(80 / 65)
    assert out.loc[2, "balancedness"] == pytest.approx(65 / 80)
    assert out.loc[2, "straggler_tax"] == pytest.approx(1 - 65 / 80)
    assert out["persistence"].tolist()[2:6] == ["new", "persistent", "persistent", "persistent"]
    assert out.loc[9, "persistence"] == "rotating"  # 3 windows after GPU 0's run: GPU 1 now
    one = det.detect(f[["load_g0", "busy_g0"]], np.array(["decode"] * n))
    assert not one["imbalanced"].any() and one["imbalance_ratio"].isna().all()


def test_features_cover_every_model_metric_normalised_and_slopes_break_at_gaps():
    trace = read_trace(TRACES_DIR / "h200x2_bursts.parquet")
    f = WindowFeatures(0.5, trace.devices).fit_transform(trace.samples)
    assert list(f.columns[-len(FEATURE_COLUMNS):]) == list(FEATURE_COLUMNS)
    for m in ("sm_active", "tensor_active", "dram_active", "power", "sm_clock"):
        assert f[f"f_{m}_max"].max() <= 1.05 and f[f"f_{m}_mean"].max() > 0.3, m
    gap = trace.samples[(trace.samples["timestamp"] < trace.samples["timestamp"].min() + 10)
                        | (trace.samples["timestamp"] > trace.samples["timestamp"].min() + 20)]
    g = WindowFeatures(0.5, trace.devices).fit_transform(gap)
    after = g.index[g.index > g.index.min() + 15][0]
    assert np.isnan(g.loc[after, "f_power_slope"])


def test_evaluate_one_trace_json_has_the_documented_fields():
    r = tealeaves("evaluate", "--trace", TRACES_DIR / "h200x2_skew_rotation.parquet",
                  "--labels", TRACES_DIR / "h200x2_skew_rotation.labels.csv", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("macro_f1", "per_class", "imbalance_precision", "imbalance_recall",
                "hot_gpu_accuracy", "boundary_delay_s", "confusion"):
        assert key in out
    assert out["labeller"] == "trained" and out["skewed_windows"] > 40
    assert set(out["per_class"]) == {"idle", "prefill", "decode"}


@pytest.mark.parametrize(("rows", "message"), [
    ("{s},{m},idle,\n{m},{e},warmup,\n", "line 3: phase 'warmup' is not one of"),
    ("{s},{m},idle,\n{m2},{e},decode,\n", "line 3: interval"),
    ("{s},{e2},decode,\n", "reaches outside the trace"),
    ("{s},{m},decode,7\n", "hot_gpu 7 is not a GPU of the trace"),
    ("", "holds no label interval"),
])
def test_evaluate_refuses_bad_label_files_with_one_clear_line(tmp_path, rows, message):
    trace = read_trace(TRACES_DIR / "h200x2_bursts.parquet")
    t = trace.samples["timestamp"]
    s, e = t.min() + 1, t.max() - 1
    path = tmp_path / "labels.csv"
    path.write_text("start,end,phase,hot_gpu\n" + rows.format(
        s=s, m=(s + e) / 2, m2=(s + e) / 2 - 5, e=e, e2=e + 100))
    r = tealeaves("evaluate", "--trace", TRACES_DIR / "h200x2_bursts.parquet",
                  "--labels", path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and message in lines[0], r.stderr


def test_leave_one_family_out_is_the_headline_and_holds_its_measured_level(tmp_path):
    """The whole validation, as `tealeaves evaluate --corpus` runs it (about 2 minutes): every
    family held out as a whole, then every trace.  The bars are the levels measured on
    2026-12-04 (docs/classifier.md: 0.887 / 0.897 / 0.919 with the nine serving-loop families,
    which brought them down from 0.934 / 0.938 / 0.959) less a small margin, so a change
    that loses generality
    fails here; the issue's 0.95 is not met held out by family and the docs say which
    families fall short."""
    out = tmp_path / "classifier.md"
    # the corpus named explicitly: the shipped model's validation file is left as it is
    r = tealeaves("evaluate", "--corpus", TRACES_DIR, "--out", out, "--json", "--phases-only")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["schemes"] == ["family", "trace"] and len(res["families"]) >= 11
    assert {"hf_cb/deepseek_v3", "hf_spec/qwen3_moe", "composite/low_load"} <= \
        set(res["families"])
    lofo, loto = res["family"]["pooled"], res["trace"]["pooled"]
    best = lofo[res["chosen"]]
    assert best["macro_f1"] >= 0.87 and best["time_accuracy"] >= 0.88
    assert best["macro_f1"] > lofo["rules"]["macro_f1"] + 0.2
    assert lofo["hgb_segments"]["time_accuracy"] >= lofo["hgb_viterbi"]["time_accuracy"]
    assert lofo["hgb_segments"]["boundary_offset_s"] <= 0.25
    assert best["imbalance_precision"] >= 0.9 and best["imbalance_recall"] >= 0.9
    assert best["imbalance_recall_low_load"] >= 0.9 and best["low_load_skewed_windows"] > 30
    assert best["hot_set_accuracy"] >= 0.95
    assert loto[res["chosen"]]["macro_f1"] >= 0.90
    for fam in ("hf_cb/deepseek_v3", "hf_spec/qwen3_moe", "composite/low_load"):
        assert res["family"]["per_family"][fam][res["chosen"]]["time_accuracy"] >= 0.93, fam
    text = out.read_text()
    assert "Leave-one-family-out" in text and "h200x1_cb_dsv3_poisson" in text
