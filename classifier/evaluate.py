"""Scoring window labels against ground truth, and the corpus validation.

A window is scored against the label interval holding its midpoint; windows whose midpoint
is in no interval are not scored.  Metrics (``score``):

- per class ``precision``, ``recall``, ``f1`` and ``support``; ``macro_f1`` (unweighted mean
  of the classes present); ``confusion`` (rows true, columns predicted, ``PHASE_ORDER``);
- ``boundary_delay_s``: for each change of true phase, the midpoint of the first window at or
  after it that is predicted as the new phase, minus the change time (median over changes; a
  perfect labeller scores at most half a window); ``boundary_delay_p90_s``; a change whose new
  phase is never predicted before the next change counts as that stretch's length;
- imbalance, over windows of two or more GPUs: truth = a true ``decode`` window with a hot
  GPU; ``imbalance_precision`` / ``imbalance_recall`` of the ``imbalanced`` flag;
  ``hot_gpu_accuracy``: among truly skewed windows that are flagged, the share naming the
  right GPU.

The corpus validation (``validate_corpus``) is leave-one-trace-out: each trace is labelled by
a model trained on all the others (features, classifier, transitions and the imbalance
threshold all refitted), and the held-out windows of every fold are pooled.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..data.traces import TraceError, label_at, read_labels, read_trace
from .features import WindowFeatures
from .rules import PHASE_ORDER, RulePhaseLabeller
from .windows import DEFAULT_WINDOW_S


@dataclass
class LabelledTrace:
    """One corpus trace: its window features, per-window truth and label intervals."""

    name: str
    features: pd.DataFrame
    truth: pd.DataFrame
    labels: pd.DataFrame
    family: str


def window_truth(starts: np.ndarray, labels: pd.DataFrame,
                 window_s: float = DEFAULT_WINDOW_S) -> pd.DataFrame:
    """Truth per window (``phase``: str or None, ``hot_gpu``: float) at the midpoints."""
    return label_at(labels, np.asarray(starts, dtype=float) + window_s / 2.0)


def check_labels_in_trace(labels: pd.DataFrame, samples: pd.DataFrame, path) -> None:
    """Raise ``TraceError`` naming ``path`` when the labels hold no interval, an interval
    reaches outside the trace's time span, or a ``hot_gpu`` is not a GPU of the trace."""
    if labels.empty:
        raise TraceError(f"{path}: holds no label interval")
    if samples.empty:
        return
    t0, t1 = float(samples["timestamp"].min()), float(samples["timestamp"].max())
    gpus = set(samples["gpu"].astype(int))
    for i, r in enumerate(labels.itertuples(index=False)):
        if r.start < t0 - 1e-6 or r.end > t1 + 1e-6:
            raise TraceError(
                f"{path}: interval {i + 1} ({r.phase}, {r.start:.3f}-{r.end:.3f}) reaches "
                f"outside the trace ({t0:.3f}-{t1:.3f}); are these the labels of another "
                "trace?")
        if np.isfinite(r.hot_gpu) and int(r.hot_gpu) not in gpus:
            raise TraceError(f"{path}: interval {i + 1}: hot_gpu {int(r.hot_gpu)} is not a GPU "
                             f"of the trace ({', '.join(map(str, sorted(gpus)))})")


def score(windows: pd.DataFrame, labels: pd.DataFrame,
          window_s: float = DEFAULT_WINDOW_S) -> dict:
    """Score a windows frame (``classify_samples`` output) against label intervals.

    Returns:
        dict with ``macro_f1``, ``accuracy``, ``per_class``, ``confusion``,
        ``labelled_windows``, ``boundary_delay_s``, ``boundary_delay_p90_s``, ``boundaries``,
        ``imbalance_precision``, ``imbalance_recall``, ``hot_gpu_accuracy``,
        ``skewed_windows`` (NaN where a metric has nothing to count).
    """
    starts = windows["start"].to_numpy(dtype=float)
    truth = window_truth(starts, labels, window_s)
    true = truth["phase"].to_numpy()
    pred = windows["phase"].to_numpy()
    scored = pd.notna(true)
    out: dict = {"labelled_windows": int(scored.sum())}
    t, p = true[scored].astype(str), pred[scored].astype(str)
    per_class, f1s = {}, []
    for c in PHASE_ORDER:
        tp = int(np.sum((t == c) & (p == c)))
        n_pred, n_true = int(np.sum(p == c)), int(np.sum(t == c))
        prec = tp / n_pred if n_pred else float("nan")
        rec = tp / n_true if n_true else float("nan")
        f1 = 2 * tp / (n_pred + n_true) if n_pred + n_true else float("nan")
        per_class[c] = {"precision": prec, "recall": rec, "f1": f1, "support": n_true}
        if n_true:
            f1s.append(f1)
    out["per_class"] = per_class
    out["macro_f1"] = float(np.mean(f1s)) if f1s else float("nan")
    out["accuracy"] = float(np.mean(t == p)) if len(t) else float("nan")
    out["confusion"] = [[int(np.sum((t == a) & (p == b))) for b in PHASE_ORDER]
                        for a in PHASE_ORDER]
    delays = boundary_delays(starts, pred, labels, window_s)
    out["boundaries"] = len(delays)
    out["boundary_delay_s"] = float(np.median(delays)) if delays else float("nan")
    out["boundary_delay_p90_s"] = float(np.percentile(delays, 90)) if delays else float("nan")
    out.update(imbalance_scores(windows, truth, scored))
    return out


def boundary_delays(starts: np.ndarray, pred: np.ndarray, labels: pd.DataFrame,
                    window_s: float) -> list[float]:
    """Seconds from each change of true phase to the first window labelled the new phase
    (see the module docstring)."""
    mids = starts + window_s / 2.0
    rows = list(labels.itertuples(index=False))
    delays = []
    for prev, cur in itertools.pairwise(rows):
        if prev.phase == cur.phase or cur.start - prev.end > window_s:
            continue
        m = (mids >= cur.start) & (mids < cur.end)
        if not m.any():
            continue
        hit = np.flatnonzero(m & (pred == cur.phase))
        delays.append(float(mids[hit[0]] - cur.start) if len(hit) else float(cur.end - cur.start))
    return delays


def imbalance_scores(windows: pd.DataFrame, truth: pd.DataFrame, scored: np.ndarray) -> dict:
    """Imbalance precision/recall and hot-GPU accuracy (see the module docstring)."""
    multi = windows["n_gpus"].to_numpy(dtype=float) >= 2 if "n_gpus" in windows \
        else np.ones(len(windows), bool)
    m = scored & multi
    true_hot = truth["hot_gpu"].to_numpy(dtype=float)
    skewed = m & (truth["phase"].to_numpy() == "decode") & np.isfinite(true_hot)
    flag = windows["imbalanced"].to_numpy(dtype=bool) & m
    pred_hot = windows["hot_gpu"].to_numpy(dtype=float)
    tp = int(np.sum(flag & skewed))
    caught = skewed & flag
    return {
        "imbalance_precision": tp / int(flag.sum()) if flag.any() else float("nan"),
        "imbalance_recall": tp / int(skewed.sum()) if skewed.any() else float("nan"),
        "hot_gpu_accuracy": float(np.mean(pred_hot[caught] == true_hot[caught]))
        if caught.any() else float("nan"),
        "skewed_windows": int(skewed.sum()),
        "flagged_windows": int(flag.sum()),
    }


# -- corpus -----------------------------------------------------------------------------------
def read_manifest(directory: Path) -> pd.DataFrame:
    """``directory/MANIFEST.csv``, one row per trace in order (``name``, ``scenario``, ...).

    Raises:
        TraceError: the manifest is missing, has no ``name`` column or lists no trace.
    """
    path = Path(directory) / "MANIFEST.csv"
    if not path.exists():
        raise TraceError(f"{path}: no such file (the corpus manifest)")
    manifest = pd.read_csv(path, dtype={"name": str})
    if "name" not in manifest:
        raise TraceError(f"{path}: line 1: header lacks name")
    if manifest.empty:
        raise TraceError(f"{path}: lists no trace")
    return manifest


def load_corpus(directory: Path | None = None, window_s: float = DEFAULT_WINDOW_S,
                progress: Callable | None = None) -> list[LabelledTrace]:
    """Every trace of the manifest with its labels, as window features and truth.

    Args:
        directory: the corpus folder (default: the bundled ``data/traces``).
        progress: wraps the iterable of names (a ``tqdm``), or None.

    Raises:
        TraceError: a listed trace or label file is missing or bad.
    """
    from ..data import TRACES_DIR

    directory = Path(directory or TRACES_DIR)
    manifest = read_manifest(directory)
    families = dict(zip(manifest["name"], manifest.get("scenario", manifest["name"]),
                        strict=True))
    names = list(manifest["name"])
    out = []
    for name in progress(names) if progress else names:
        trace = read_trace(directory / f"{name}.parquet")
        labels = read_labels(directory / f"{name}.labels.csv", phases=PHASE_ORDER)
        check_labels_in_trace(labels, trace.samples, directory / f"{name}.labels.csv")
        feats = WindowFeatures(window_s, trace.devices).fit_transform(trace.samples)
        truth = window_truth(feats.index.to_numpy(dtype=float), labels, window_s)
        out.append(LabelledTrace(name, feats, truth, labels, str(families[name])))
    return out


def train(corpus: list[LabelledTrace], window_s: float = DEFAULT_WINDOW_S, seed: int = 0,
          meta: dict | None = None, kind: str = "hgb"):
    """A ``PhaseModel`` of ``kind`` ("hgb" or "tcn") fitted on ``corpus``."""
    from .model import PhaseModel

    return PhaseModel.fit([c.features for c in corpus], [c.truth for c in corpus], seed=seed,
                          window_s=window_s, meta=meta, kind=kind)


def torch_available() -> bool:
    """True when torch imports (the ``tcn`` model can be trained)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _windows(trace: LabelledTrace, labeller, window_s: float, smooth: bool = True):
    from . import classify_features

    if not isinstance(labeller, RulePhaseLabeller) and labeller.smooth != smooth:
        labeller = replace(labeller, smooth=smooth)  # a copy: the fitted model is shared
    return classify_features(trace.features, window_s, labeller)


def _pool(windows: list[pd.DataFrame], corpus, window_s) -> dict:
    """Metrics over the pooled held-out windows of every fold."""
    frames, labels = [], []
    shift = 0.0
    for w, c in zip(windows, corpus, strict=True):
        # place traces end to end on one clock so midpoints never mix two traces
        off = shift - float(c.labels["start"].min())
        ww = w.copy()
        ww[["start", "end"]] += off
        ll = c.labels.copy()
        ll[["start", "end"]] += off
        frames.append(ww)
        labels.append(ll)
        shift = float(ll["end"].max()) + 1000.0
    return score(pd.concat(frames, ignore_index=True),
                 pd.concat(labels, ignore_index=True), window_s)


MODELS = ("rules", "hgb", "hgb_viterbi", "tcn")
#: Which trained kind each evaluated model is.
KIND_OF = {"hgb": "hgb", "hgb_viterbi": "hgb", "tcn": "tcn"}
NAMES = {"rules": "v0 rules (baseline)", "hgb": "gradient boosting",
         "hgb_viterbi": "gradient boosting + Viterbi", "tcn": "temporal conv net (torch)"}


def validate_corpus(corpus: list[LabelledTrace], window_s: float = DEFAULT_WINDOW_S,
                    progress: Callable | None = None) -> dict:
    """Leave-one-trace-out validation of the rules, gradient boosting alone and with Viterbi
    smoothing, and (with torch) the temporal conv net; plus the HF-model family held out as a
    whole.  The chosen model: ``choose``.

    Returns:
        ``{"models": [...], "pooled": {model: score}, "per_trace": {name: {model: score}},
        "hf_family_out": {model: score} or None, "chosen": model name}``.
    """
    models = [m for m in MODELS if m != "tcn" or torch_available()]
    kinds = sorted({KIND_OF[m] for m in models if m != "rules"})

    def label(test_traces, train_traces):
        fitted = {k: train(train_traces, window_s, kind=k) for k in kinds}
        out = {}
        for m in models:
            lab = RulePhaseLabeller() if m == "rules" else fitted[KIND_OF[m]]
            out[m] = [_windows(c, lab, window_s, smooth=m == "hgb_viterbi")
                      for c in test_traces]
        return out

    per_trace: dict[str, dict] = {c.name: {} for c in corpus}
    held: dict[str, list] = {m: [] for m in models}
    folds = list(range(len(corpus)))
    for i in progress(folds) if progress else folds:
        test = corpus[i]
        ws = label([test], [c for j, c in enumerate(corpus) if j != i])
        for m in models:
            held[m].append(ws[m][0])
            per_trace[test.name][m] = score(ws[m][0], test.labels, window_s)
    pooled = {m: _pool(held[m], corpus, window_s) for m in models}
    hf = [c for c in corpus if c.family == "hf_moe"]
    hf_out = None
    if hf and len(hf) < len(corpus):
        ws = label(hf, [c for c in corpus if c.family != "hf_moe"])
        hf_out = {m: _pool(ws[m], hf, window_s) for m in models}
    return {"models": models, "pooled": pooled, "per_trace": per_trace,
            "hf_family_out": hf_out, "chosen": choose(models, pooled, hf_out)}


def choose(models: list[str], pooled: dict, hf_out: dict | None) -> str:
    """The trained model with the best leave-one-trace-out macro-F1 among those that, on the
    HF family held out as a whole (model code it never saw), score at least the rules'
    macro-F1: a model worse than the rules on unseen code is not shipped."""
    trained = [m for m in models if m != "rules"]
    eligible = [m for m in trained
                if hf_out is None or hf_out[m]["macro_f1"] >= hf_out["rules"]["macro_f1"]]
    return max(eligible or trained, key=lambda m: pooled[m]["macro_f1"])


# -- report -----------------------------------------------------------------------------------
def _f(x: float, nd: int = 3) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{nd}f}"


def report_markdown(result: dict, corpus: list[LabelledTrace], command: str) -> str:
    """``docs/classifier.md``: the validation tables."""
    pooled = result["pooled"]
    lines = [
        "# Phase classifier and imbalance detector: validation",
        "",
        (f"Written by `{command}` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC. "
         "Do not edit by hand."),
        "",
        (f"Corpus: {len(corpus)} labelled real traces (`data/traces/MANIFEST.csv`), "
         f"{sum(int(c.truth['phase'].notna().sum()) for c in corpus)} labelled "
         f"{DEFAULT_WINDOW_S:g}-s windows. Leave-one-trace-out: each trace is labelled by a "
         "model trained on all the others; the held-out windows of all folds are pooled. "
         "Metric definitions: `classifier/evaluate.py`."),
        "",
        "## Models (held-out, pooled)",
        "",
        ("| model | macro-F1 | accuracy | idle F1 | prefill F1 | decode F1 | boundary delay "
         "median / p90 (s) | imbalance precision | imbalance recall | hot-GPU accuracy |"),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    names = NAMES
    models = result.get("models", list(pooled))
    for m in models:
        s = pooled[m]
        pc = s["per_class"]
        lines.append(
            f"| {names[m]}{' **(chosen)**' if m == result['chosen'] else ''} | "
            f"{_f(s['macro_f1'])} | {_f(s['accuracy'])} | {_f(pc['idle']['f1'])} | "
            f"{_f(pc['prefill']['f1'])} | {_f(pc['decode']['f1'])} | "
            f"{_f(s['boundary_delay_s'], 2)} / {_f(s['boundary_delay_p90_s'], 2)} | "
            f"{_f(s['imbalance_precision'])} | {_f(s['imbalance_recall'])} | "
            f"{_f(s['hot_gpu_accuracy'])} |")
    best = pooled[result["chosen"]]
    if "tcn" not in models:
        lines += ["", ("The temporal conv net was not run here: torch is not installed (it "
                       "needs the `bench` extra).")]
    lines += ["", (f"Chosen: **{names[result['chosen']]}**, the best leave-one-trace-out "
                   "macro-F1 among the models that score at least the rules' macro-F1 on the "
                   "HF traces held out as a family (model code they never saw; table below): "
                   "a model worse than the rules on unseen code is not shipped. `tealeaves "
                   "train` fits it on the whole corpus and the dashboard and `tealeaves "
                   "classify` use it (the v0 rules remain the fallback: no model file, other "
                   "window length, or a source without profiling counters)."), "",
              "### Per class (chosen model)", "",
              "| phase | precision | recall | F1 | windows |", "|---|---|---|---|---|"]
    for c in PHASE_ORDER:
        pc = best["per_class"][c]
        lines.append(f"| {c} | {_f(pc['precision'])} | {_f(pc['recall'])} | {_f(pc['f1'])} | "
                     f"{pc['support']} |")
    lines += ["", "### Confusion (chosen model; rows true, columns predicted)", "",
              "| true \\ predicted | " + " | ".join(PHASE_ORDER) + " |",
              "|---" * (len(PHASE_ORDER) + 1) + "|"]
    for c, row in zip(PHASE_ORDER, best["confusion"], strict=True):
        lines.append(f"| {c} | " + " | ".join(str(v) for v in row) + " |")
    hf = result.get("hf_family_out")
    if hf:
        lines += ["", "## The HuggingFace traces held out as a family", "",
                  ("Trained on every trace but the transformers-MoE ones, scored on all of them "
                   "(model code not written here; no imbalance in their labels)."), "",
                  "| model | macro-F1 | accuracy | idle F1 | prefill F1 | decode F1 |",
                  "|---|---|---|---|---|---|"]
        for m in models:
            s, pc = hf[m], hf[m]["per_class"]
            lines.append(f"| {names[m]} | {_f(s['macro_f1'])} | {_f(s['accuracy'])} | "
                         f"{_f(pc['idle']['f1'])} | {_f(pc['prefill']['f1'])} | "
                         f"{_f(pc['decode']['f1'])} |")
    lines += ["", "## Per trace (held out)", "",
              ("| trace | family | windows | rules macro-F1 | chosen macro-F1 | accuracy | "
               "boundary delay (s) | imbalance P / R | hot-GPU acc. |"),
              "|---|---|---|---|---|---|---|---|---|"]
    for c in corpus:
        s, r = result["per_trace"][c.name][result["chosen"]], result["per_trace"][c.name]["rules"]
        lines.append(
            f"| {c.name} | {c.family} | {s['labelled_windows']} | {_f(r['macro_f1'])} | "
            f"{_f(s['macro_f1'])} | {_f(s['accuracy'])} | {_f(s['boundary_delay_s'], 2)} | "
            f"{_f(s['imbalance_precision'], 2)} / {_f(s['imbalance_recall'], 2)} | "
            f"{_f(s['hot_gpu_accuracy'], 2)} |")
    lines.append("")
    return "\n".join(lines)
