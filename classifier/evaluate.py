"""Scoring window labels against ground truth, and the corpus validation.

A window is scored against the label interval holding its midpoint; windows whose midpoint
is in no interval are not scored.  Metrics (``score``):

- per class ``precision``, ``recall``, ``f1`` and ``support``; ``macro_f1`` (unweighted mean
  of the classes present); ``confusion`` (rows true, columns predicted, ``PHASE_ORDER``);
- ``boundary_delay_s``: for each change of true phase, the midpoint of the first window at or
  after it that is predicted as the new phase, minus the change time (median over changes; a
  perfect labeller scores at most half a window); ``boundary_delay_p90_s``; a change whose new
  phase is never predicted before the next change counts as that stretch's length;
  ``boundary_offset_s``: with segments, the offset to the nearest predicted boundary into the
  new phase, early or late (``segment_boundary_offsets``);
- imbalance, over windows of two or more GPUs: truth = a true ``decode`` window with a hot
  GPU; ``imbalance_precision`` / ``imbalance_recall`` of the ``imbalanced`` flag;
  ``hot_gpu_accuracy``: among truly skewed windows that are flagged, the share naming the
  right GPU.

The corpus validation (``validate_corpus``) is leave-one-trace-out: each trace is labelled by
a model trained on all the others (features, classifier, transitions and the imbalance
threshold all refitted), and the held-out windows of every fold are pooled.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from tealeaves.classifier.features import WindowFeatures
from tealeaves.classifier.labellers import WindowModel
from tealeaves.classifier.rules import PHASE_ORDER, RulePhaseLabeller
from tealeaves.classifier.windows import DEFAULT_WINDOW_S
from tealeaves.data.traces import TraceError, label_at, read_labels, read_trace


@dataclass
class LabelledTrace:
    """One corpus trace: its window features, per-window truth and label intervals."""

    name: str
    features: pd.DataFrame
    truth: pd.DataFrame
    labels: pd.DataFrame
    family: str
    hop: pd.DataFrame | None = None


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
    for i, r in enumerate(labels.itertuples(index=False)):
        if r.start < t0 - 1e-6 or r.end > t1 + 1e-6:
            raise TraceError(
                f"{path}: interval {i + 1} ({r.phase}, {r.start:.3f}-{r.end:.3f}) reaches "
                f"outside the trace ({t0:.3f}-{t1:.3f}); are these the labels of another "
                "trace?")
    check_gpus_in_trace(labels, samples, path)


def check_gpus_in_trace(labels: pd.DataFrame, samples: pd.DataFrame, path) -> None:
    """Raise ``TraceError`` naming ``path`` when a label's hot GPU (``hot_set``, else
    ``hot_gpu``) is not a GPU of the trace."""
    from tealeaves.classifier.imbalance import hot_set_of

    gpus = set(samples["gpu"].astype(int))
    for i, r in enumerate(labels.itertuples(index=False)):
        named = hot_set_of(getattr(r, "hot_set", None)) or \
            ((int(r.hot_gpu),) if np.isfinite(r.hot_gpu) else ())
        for g in named:
            if g not in gpus:
                raise TraceError(f"{path}: interval {i + 1}: hot_gpu {g} is not a GPU of the "
                                 f"trace ({', '.join(map(str, sorted(gpus)))})")


def score(windows: pd.DataFrame, labels: pd.DataFrame,
          window_s: float = DEFAULT_WINDOW_S, segments: pd.DataFrame | None = None) -> dict:
    """Score a windows frame (``classify_samples`` output) against label intervals.

    Args:
        segments: finer phase segments (``segments.classify_segments``) of the same range:
            the time-weighted accuracy is read from them instead of the windows.

    Returns:
        dict with ``macro_f1``, ``accuracy``, ``per_class``, ``confusion``,
        ``labelled_windows``, ``macro_f1_interior`` / ``macro_f1_change`` (windows holding no
        / some change of true phase) with ``interior_windows`` / ``change_windows``,
        ``time_accuracy`` (``time_accuracy``), ``boundary_delay_s``,
        ``boundary_delay_p90_s``, ``boundaries``, ``boundary_offset_s`` /
        ``boundary_offset_p90_s`` (with segments: ``segment_boundary_offsets``; else NaN), ``imbalance_precision``,
        ``imbalance_recall``, ``imbalance_recall_low_load`` (skewed windows whose mean load is
        under ``LOW_LOAD`` %), ``hot_gpu_accuracy``, ``hot_set_accuracy``, ``skewed_windows``
        (NaN where a metric has nothing to count).
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
    change = change_windows(starts, labels, window_s)[scored]
    for part, m in (("interior", ~change), ("change", change)):
        f1p = []
        for c in PHASE_ORDER:
            tp = int(np.sum((t == c) & (p == c) & m))
            den = int(np.sum((p == c) & m) + np.sum((t == c) & m))
            if np.sum((t == c) & m):
                f1p.append(2 * tp / den)
        out[f"macro_f1_{part}"] = float(np.mean(f1p)) if f1p else float("nan")
        out[f"{part}_windows"] = int(m.sum())
    out.update(time_accuracy(windows if segments is None else segments, labels))
    delays = boundary_delays(starts, pred, labels, window_s)
    out["boundaries"] = len(delays)
    out["boundary_delay_s"] = float(np.median(delays)) if delays else float("nan")
    out["boundary_delay_p90_s"] = float(np.percentile(delays, 90)) if delays else float("nan")
    offs = segment_boundary_offsets(segments, labels, window_s) if segments is not None else []
    out["boundary_offset_s"] = float(np.median(offs)) if offs else float("nan")
    out["boundary_offset_p90_s"] = float(np.percentile(offs, 90)) if offs else float("nan")
    out.update(imbalance_scores(windows, truth, scored))
    return out


#: Resolution of the time-weighted accuracy, seconds.
TIME_RESOLUTION_S = 0.1
#: Mean load (%) under which a skewed window counts as low-load.
LOW_LOAD = 10.0


def change_windows(starts: np.ndarray, labels: pd.DataFrame,
                   window_s: float = DEFAULT_WINDOW_S) -> np.ndarray:
    """(n,) bool: the window ``[start, start + window_s)`` holds a change of true phase (a
    label boundary between two different phases, or between a phase and unlabelled time)."""
    starts = np.asarray(starts, dtype=float)
    rows = labels.sort_values("start")
    b = []
    prev = None
    for r in rows.itertuples(index=False):
        if prev is None or prev.phase != r.phase or r.start - prev.end > 1e-6:
            b.append(r.start)
            if prev is not None and r.start - prev.end > 1e-6:
                b.append(prev.end)
        prev = r
    if prev is not None:
        b.append(prev.end)
    b = np.sort(np.asarray(b, dtype=float))
    i = np.searchsorted(b, starts, side="right")  # first boundary after the start
    nxt = np.where(i < len(b), b[np.clip(i, 0, max(len(b) - 1, 0))] if len(b) else np.inf,
                   np.inf)
    return nxt < starts + window_s - 1e-9


def time_accuracy(pred: pd.DataFrame, labels: pd.DataFrame,
                  resolution_s: float = TIME_RESOLUTION_S) -> dict:
    """The share of labelled time that gets the right phase, at ``resolution_s``.

    Args:
        pred: intervals ``start``, ``end``, ``phase`` (windows or segments), sorted,
            not overlapping.
        labels: label intervals.

    Returns:
        ``time_accuracy`` (labelled ticks whose predicted phase is right; a tick no interval
        covers counts as wrong), ``time_macro_f1`` (the macro-F1 of the ticks: each phase's
        F1 over labelled time, unweighted mean of the phases the labels hold) and
        ``labelled_s`` (seconds of labelled time).
    """
    from tealeaves.classifier.segments import segments_at

    ticks = [np.arange(r.start + resolution_s / 2, r.end, resolution_s)
             for r in labels.itertuples(index=False)]
    t = np.concatenate(ticks) if ticks else np.zeros(0)
    if not len(t):
        return {"time_accuracy": float("nan"), "time_macro_f1": float("nan"),
                "labelled_s": 0.0}
    truth = label_at(labels, t)["phase"].to_numpy()
    got = segments_at(pred[["start", "end", "phase"]].sort_values("start")
                      .reset_index(drop=True), t)
    f1s = []
    for c in PHASE_ORDER:
        n_true = int(np.sum(truth == c))
        if n_true:
            tp = int(np.sum((truth == c) & (got == c)))
            f1s.append(2 * tp / (n_true + int(np.sum(got == c))))
    return {"time_accuracy": float(np.mean(got == truth)),
            "time_macro_f1": float(np.mean(f1s)) if f1s else float("nan"),
            "labelled_s": float(len(t) * resolution_s)}


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


def segment_boundary_offsets(segments: pd.DataFrame, labels: pd.DataFrame,
                             window_s: float = DEFAULT_WINDOW_S) -> list[float]:
    """Seconds between each change of true phase and the nearest predicted boundary into
    the new phase (a segment of that phase starting within a window before the change, or
    during the new stretch), early or late alike (absolute); a change with none counts as the
    stretch's length.  The finer counterpart of ``boundary_delays`` for segments, which are
    not tied to window midpoints."""
    rows = list(labels.itertuples(index=False))
    seg = segments.sort_values("start")
    st = seg["start"].to_numpy(dtype=float)
    ph = seg["phase"].to_numpy()
    # a boundary into a phase: a segment start whose phase differs from the one before it
    into = np.r_[True, ph[1:] != ph[:-1]] if len(ph) else np.zeros(0, bool)
    out = []
    for prev, cur in itertools.pairwise(rows):
        if prev.phase == cur.phase or cur.start - prev.end > window_s:
            continue
        m = into & (ph == cur.phase) & (st >= cur.start - window_s) & (st < cur.end)
        out.append(float(np.min(np.abs(st[m] - cur.start))) if m.any()
                   else float(cur.end - cur.start))
    return out


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
    sets = windows["hot_set"].astype(str).to_numpy() if "hot_set" in windows else \
        np.array([str(int(h)) if np.isfinite(h) else "" for h in pred_hot])
    true_sets = truth["hot_set"].astype(str).to_numpy() if "hot_set" in truth else \
        np.array([str(int(h)) if np.isfinite(h) else "" for h in true_hot])
    low_mean = windows["load_mean"].to_numpy(dtype=float) < LOW_LOAD \
        if "load_mean" in windows else np.zeros(len(windows), bool)
    low = skewed & low_mean
    return {
        "imbalance_precision": tp / int(flag.sum()) if flag.any() else float("nan"),
        "imbalance_recall": tp / int(skewed.sum()) if skewed.any() else float("nan"),
        "imbalance_recall_low_load": float(np.mean(flag[low])) if low.any()
        else float("nan"),
        "imbalance_precision_low_load": float(np.mean(skewed[flag & low_mean]))
        if (flag & low_mean).any() else float("nan"),
        "low_load_skewed_windows": int(low.sum()),
        "hot_gpu_accuracy": float(np.mean(pred_hot[caught] == true_hot[caught]))
        if caught.any() else float("nan"),
        "hot_set_accuracy": float(np.mean(sets[caught] == true_sets[caught]))
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
                progress: Callable | None = None, hop: bool = True) -> list[LabelledTrace]:
    """Every trace of the manifest with its labels, as window features and truth.

    Args:
        directory: the corpus folder (default: the bundled ``data/traces``).
        progress: wraps the iterable of names (a ``tqdm``), or None.
        hop: also compute the overlapping windows the 0.1-s segments need
            (``segments.hop_features``).

    The manifest's ``family`` column (generator x architecture) groups traces for
    leave-one-family-out; without it each ``scenario`` is a family.

    Raises:
        TraceError: a listed trace or label file is missing or bad.
    """
    from tealeaves.classifier.segments import hop_features
    from tealeaves.data import TRACES_DIR

    directory = Path(directory or TRACES_DIR)
    manifest = read_manifest(directory)
    fam_col = "family" if "family" in manifest else "scenario" if "scenario" in manifest \
        else "name"
    families = dict(zip(manifest["name"], manifest[fam_col].fillna(manifest["name"]),
                        strict=True))
    names = list(manifest["name"])
    out = []
    for name in progress(names) if progress else names:
        trace = read_trace(directory / f"{name}.parquet")
        labels = read_labels(directory / f"{name}.labels.csv", phases=PHASE_ORDER)
        check_labels_in_trace(labels, trace.samples, directory / f"{name}.labels.csv")
        feats = WindowFeatures(window_s, trace.devices).fit_transform(trace.samples)
        truth = window_truth(feats.index.to_numpy(dtype=float), labels, window_s)
        hf = hop_features(trace.samples, trace.devices, window_s, base=feats) if hop else None
        out.append(LabelledTrace(name, feats, truth, labels, str(families[name]), hf))
    return out


def train(corpus: list[LabelledTrace], window_s: float = DEFAULT_WINDOW_S, seed: int = 0,
          meta: dict | None = None, kind: str = "hgb"):
    """A ``PhaseModel`` of ``kind`` ("hgb" or "tcn") fitted on ``corpus``."""
    from tealeaves.classifier.model import PhaseModel

    return PhaseModel(kind=kind, seed=seed, window_s=window_s, meta=meta or {}).fit(
        [c.features for c in corpus], [c.truth for c in corpus])


def torch_available() -> bool:
    """True when torch imports (the ``tcn`` model can be trained)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _windows(trace: LabelledTrace, labeller, window_s: float, smooth: bool = True):
    from tealeaves.classifier import classify_features

    if isinstance(labeller, WindowModel) and labeller.smooth != smooth:
        labeller = replace(labeller, smooth=smooth)  # a copy: the fitted model is shared
    return classify_features(trace.features, window_s, labeller)


def _segment_windows(trace: LabelledTrace, labeller, window_s: float):
    """The windows relabelled by the 0.1-s segments at their midpoints, and the segments."""
    from tealeaves.classifier.segments import classify_segments, segments_at

    w = _windows(trace, labeller, window_s, smooth=True)
    if trace.hop is None or w.empty:
        return w, None
    seg = classify_segments(trace.hop, labeller, window_s)
    mid = (w["start"] + w["end"]).to_numpy(dtype=float) / 2.0
    ph = segments_at(seg, mid)
    w = w.copy()
    w["phase"] = np.where(pd.notna(ph), ph, w["phase"].to_numpy())
    return w, seg


def _pool(windows: list[pd.DataFrame], corpus, window_s, segments=None) -> dict:
    """Metrics over the pooled held-out windows (and segments) of every fold."""
    frames, labels, segs = [], [], []
    shift = 0.0
    segments = segments or [None] * len(windows)
    for w, c, sg in zip(windows, corpus, segments, strict=True):
        # place traces end to end on one clock so midpoints never mix two traces
        off = shift - float(c.labels["start"].min())
        ww = w.copy()
        ww[["start", "end"]] += off
        ll = c.labels.copy()
        ll[["start", "end"]] += off
        frames.append(ww)
        labels.append(ll)
        if sg is not None:
            segs.append(sg.assign(start=lambda d, o=off: d["start"] + o,
                                  end=lambda d, o=off: d["end"] + o))
        shift = float(ll["end"].max()) + 1000.0
    return score(pd.concat(frames, ignore_index=True), pd.concat(labels, ignore_index=True),
                 window_s, segments=pd.concat(segs, ignore_index=True)
                 if segs and len(segs) == len(frames) else None)


MODELS = ("rules", "hgb", "hgb_viterbi", "hgb_segments", "tcn")
#: Families of the serving loop (``kernels_bench/serving_loop.py``), pooled apart too.
SERVING_LOOP = "serving_loop/"
#: Which trained kind each evaluated model is.
KIND_OF = {"hgb": "hgb", "hgb_viterbi": "hgb", "hgb_segments": "hgb", "tcn": "tcn"}
NAMES = {"rules": "v0 rules (baseline)", "hgb": "gradient boosting",
         "hgb_viterbi": "gradient boosting + Viterbi (0.5-s windows)",
         "hgb_segments": "gradient boosting + 0.1-s segments",
         "tcn": "temporal conv net (torch)"}
#: Hold-out schemes: the headline is leave-one-family-out.
SCHEMES = {"family": "leave-one-family-out", "trace": "leave-one-trace-out"}


def validate_corpus(corpus: list[LabelledTrace], window_s: float = DEFAULT_WINDOW_S,
                    progress: Callable | None = None,
                    schemes: tuple[str, ...] = ("family", "trace")) -> dict:
    """Held-out validation of the rules, gradient boosting alone, with Viterbi smoothing and
    with the 0.1-s segments, and (with torch) the temporal conv net.

    Schemes: ``family`` holds out each family (generator x architecture, the manifest's
    ``family``) as a whole, training on every other family: the score on workloads the model
    never saw, the headline.  ``trace`` holds out one trace at a time (traces of the same
    generator vouch for each other: a second, kinder column).  Every fold refits features'
    model, transitions and the imbalance settings; the held-out windows of all folds are
    pooled.

    Raises:
        TraceError: fewer than two traces, or than two families for ``family``.

    Returns:
        ``{"models": [...], "schemes": [...], "family": {"pooled": {model: score},
        "per_family": {family: {model: score}}, "per_trace": {name: {model: score}}},
        "trace": {... the same ...}, "pooled": the headline scheme's pooled scores,
        "per_trace": the headline's per trace, "families": {family: [names]},
        "chosen": model name}``.
    """
    models = [m for m in MODELS if m != "tcn" or torch_available()]
    kinds = sorted({KIND_OF[m] for m in models if m != "rules"})

    def label(test_traces, train_traces):
        fitted = {k: train(train_traces, window_s, kind=k) for k in kinds}
        out = {}
        for m in models:
            lab = RulePhaseLabeller() if m == "rules" else fitted[KIND_OF[m]]
            if m == "hgb_segments":
                out[m] = [_segment_windows(c, lab, window_s) for c in test_traces]
            else:
                out[m] = [(_windows(c, lab, window_s, smooth=m != "hgb"), None)
                          for c in test_traces]
        return out

    families: dict[str, list[str]] = {}
    for c in corpus:
        families.setdefault(c.family, []).append(c.name)
    if len(corpus) < 2 or ("family" in schemes and len(families) < 2):
        raise TraceError(f"the corpus holds {len(corpus)} trace(s) in {len(families)} "
                         "family(ies): holding one out needs at least two of each (the "
                         "manifest's family column)")
    result: dict = {"models": models, "schemes": list(schemes), "families": families}
    for scheme in schemes:
        groups = list(families) if scheme == "family" else [c.name for c in corpus]
        held: dict[str, dict[str, tuple]] = {m: {} for m in models}
        for g in progress(groups, SCHEMES[scheme]) if progress else groups:
            test = [c for c in corpus if (c.family if scheme == "family" else c.name) == g]
            rest = [c for c in corpus if c not in test]
            if not rest:
                continue
            ws = label(test, rest)
            for m in models:
                for c, w in zip(test, ws[m], strict=True):
                    held[m][c.name] = w
        done = [c for c in corpus if c.name in held[models[0]]]
        per_trace = {c.name: {m: score(held[m][c.name][0], c.labels, window_s,
                                        segments=held[m][c.name][1]) for m in models}
                     for c in done}

        def pool(traces, m, held=held):
            return _pool([held[m][c.name][0] for c in traces], traces, window_s,
                         [held[m][c.name][1] for c in traces])

        serving = [c for c in done if c.family.startswith(SERVING_LOOP)]
        result[scheme] = {
            "pooled": {m: pool(done, m) for m in models},
            "pooled_serving_loop": {m: pool(serving, m) for m in models} if serving else {},
            "per_family": {f: {m: pool([c for c in done if c.family == f], m)
                               for m in models}
                           for f in families if any(c.family == f for c in done)},
            "per_trace": per_trace,
        }
    head = result[schemes[0]]
    result["pooled"], result["per_trace"] = head["pooled"], head["per_trace"]
    result["chosen"] = choose(models, head["pooled"])
    return result


def choose(models: list[str], pooled: dict) -> str:
    """The trained model with the best held-out macro-F1 (the headline scheme's), ties to the
    better time-weighted accuracy; a trained model is shipped only if it beats the rules'
    macro-F1 (else the best trained model is still named, and the report says so)."""
    trained = [m for m in models if m != "rules"]
    return max(trained, key=lambda m: (round(pooled[m]["macro_f1"], 6),
                                       pooled[m].get("time_accuracy", 0.0)))
