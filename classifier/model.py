"""The trained phase model, of one of two kinds chosen by held-out score
(``evaluate.validate_corpus``):

``tcn``: a small temporal convolutional network over the window sequence (``temporal.py``),
trained with torch, shipped as plain arrays (``.npz``) and run in numpy.

``hgb``: gradient boosting over window features, smoothed by Viterbi:

- Per-window probabilities come from scikit-learn's ``HistGradientBoostingClassifier`` over
  ``features.MODEL_COLUMNS`` (missing readings stay NaN: the trees route them).
- A hidden Markov pass (Viterbi) over the window sequence then picks the most likely phase
  path: emissions are the classifier's posteriors taken as scaled likelihoods (the hybrid
  HMM of Bourlard & Morgan 1994 divides posteriors by the class priors; the classifier is
  trained with balanced class weights, which already makes its priors uniform), transitions are window-to-window phase changes counted
  on the training labels (add-one smoothing).  The sequence restarts after a gap in windows.
- An idle gate bounds what is learned by what the counters mean: NVML's ``gpu_util`` is the
  share of time one or more kernels ran, so a window whose busiest GPU ran kernels (or had
  SMs active) ``idle_gate`` of the time or more is not idle, however the trees split.  Without
  it, a model trained on this corpus labelled eager HuggingFace decode (kernels 3-15 % of the
  time, every other counter low) idle when those traces were held out.
- The imbalance detector's threshold and minimum run are fitted on the same training split
  (``imbalance.ImbalanceDetector``).

Persistence never unpickles code: the ``tcn`` weights are an ``.npz`` read with
``allow_pickle=False``; the ``hgb`` estimator is written with skops (``skops.io``) and only
the scikit-learn/numpy types listed in ``TRUSTED_PREFIXES`` are accepted; everything else
(kind, feature list, classes, transitions, imbalance settings, versions, training corpus) is
plain JSON beside it.
"""

from __future__ import annotations

import itertools
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tealeaves.classifier.features import MODEL_COLUMNS
from tealeaves.classifier.imbalance import ImbalanceDetector
from tealeaves.classifier.model_files import (
    ModelError,
    archive_of,
    check_doc,
    check_estimator,
    keep_trees,
    load_shares,
    load_trees,
)
from tealeaves.classifier.rules import PHASE_ORDER
from tealeaves.classifier.windows import DEFAULT_WINDOW_S

#: Where the shipped model lives (package data).
MODEL_DIR = Path(__file__).resolve().parent / "model"
MODEL_STEM = "phase_model"
def hgb_estimator(seed: int = 0):
    """The classifier's configuration (deterministic: no early-stopping split)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(
        max_iter=120, learning_rate=0.1, max_leaf_nodes=15, min_samples_leaf=10,
        l2_regularization=1.0, class_weight="balanced", early_stopping=False, random_state=seed)


def transition_matrix(sequences: list[np.ndarray], classes=PHASE_ORDER) -> np.ndarray:
    """Row-stochastic phase transition matrix from label sequences (add-one smoothing).

    Args:
        sequences: one array of phase names per trace, in window order (None = unlabelled,
            which breaks the chain).
    """
    k = len(classes)
    idx = {c: i for i, c in enumerate(classes)}
    counts = np.ones((k, k))
    for seq in sequences:
        for a, b in itertools.pairwise(seq):
            if a in idx and b in idx:
                counts[idx[a], idx[b]] += 1
    return counts / counts.sum(axis=1, keepdims=True)


def viterbi(proba: np.ndarray, priors: np.ndarray, transition: np.ndarray,
            breaks: np.ndarray | None = None) -> np.ndarray:
    """Most likely state path.

    Args:
        proba: (n_windows, k) posteriors p(phase | window).
        priors: (k,) class priors of the training windows.
        transition: (k, k) row-stochastic transitions.
        breaks: (n_windows,) bool, True where a new sequence starts (after a gap).

    Returns:
        (n_windows,) state indices.
    """
    if proba.shape[0] == 0:
        return np.zeros(0, dtype=int)
    emit = np.log(np.clip(proba, 1e-9, 1.0)) - np.log(priors)
    return viterbi_log(emit, np.log(transition), breaks)


def viterbi_log(emit: np.ndarray, logt: np.ndarray,
                breaks: np.ndarray | None = None) -> np.ndarray:
    """Most likely state path from log-emissions ((n, k)) and log-transitions ((k, k));
    ``breaks`` ((n,) bool) start a new sequence.  Returns (n,) state indices.

    The forward pass runs on Python floats (a few states: one numpy call per step cost more
    than the arithmetic); ties go to the lowest state, as ``np.argmax`` breaks them.  Input
    holding NaN takes the numpy pass, whose NaN handling is ``np.argmax``'s.
    """
    n, k = emit.shape
    if n == 0:
        return np.zeros(0, dtype=int)
    breaks = np.zeros(n, bool) if breaks is None else np.asarray(breaks, bool)
    if np.isnan(emit).any() or np.isnan(logt).any():
        return _viterbi_log_numpy(emit, logt, breaks)
    rows = emit.tolist()
    trans = np.asarray(logt, float).T.tolist()  # trans[j][i]: log p(i -> j)
    cut = breaks.tolist()
    states = range(k)
    back: list[list[int]] = [[0] * k]
    score = rows[0]
    for t in range(1, n):
        e = rows[t]
        if cut[t]:
            best = max(states, key=score.__getitem__)
            back.append([best] * k)
            top = score[best]
            score = [v + top for v in e]
            continue
        ptr, nxt = [], []
        for j in states:
            tj = trans[j]
            bi, bv = 0, score[0] + tj[0]
            for i in range(1, k):
                v = score[i] + tj[i]
                if v > bv:
                    bi, bv = i, v
            ptr.append(bi)
            nxt.append(bv + e[j])
        back.append(ptr)
        score = nxt
    path = np.zeros(n, dtype=int)
    state = max(states, key=score.__getitem__)
    path[-1] = state
    for t in range(n - 1, 0, -1):
        state = back[t][state]
        path[t - 1] = state
    return path


def _viterbi_log_numpy(emit: np.ndarray, logt: np.ndarray, breaks: np.ndarray) -> np.ndarray:
    """``viterbi_log`` in numpy steps (the path for input holding NaN)."""
    n, k = emit.shape
    back = np.zeros((n, k), dtype=int)
    score = emit[0].copy()
    for t in range(1, n):
        if breaks[t]:
            back[t] = np.argmax(score)
            score = emit[t] + score.max()
            continue
        cand = score[:, None] + logt
        back[t] = np.argmax(cand, axis=0)
        score = cand[back[t], np.arange(k)] + emit[t]
    path = np.zeros(n, dtype=int)
    path[-1] = int(np.argmax(score))
    for t in range(n - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    return path


#: A window whose every activity reading (the busiest entity's load: SM active, else GR engine
#: active, else kernel-time share; tensor and DRAM activity) is under this, %, ran no kernel
#: to speak of: idle, whatever the trees say (a file with counters the model never saw alone,
#: such as DCGM's GRACT, reads as all-NaN features otherwise).
QUIET_PCT = 1.0


def _quiet_is_idle(features: pd.DataFrame, p: np.ndarray) -> np.ndarray:
    """``p`` with every quiet window (``QUIET_PCT``) made idle with certainty."""
    cols = [c for c in ("load_max", "tensor_active_max", "dram_active_max", "gpu_util_max",
                        "sm_active_max") if c in features]
    if "load_max" not in cols or not len(p):
        return p
    v = features[cols].to_numpy(dtype=float)
    quiet = np.isfinite(v[:, 0]) & np.all(~(v >= QUIET_PCT), axis=1)
    if quiet.any():
        p = p.copy()
        p[quiet] = 0.0
        p[quiet, PHASE_ORDER.index("idle")] = 1.0
    return p


@dataclass
class PhaseModel:
    """Trained phase labeller (scikit-learn's contract: hyperparameters given to the
    constructor, ``fit(features, truths)`` returning the model, then ``predict_proba`` /
    ``predict``) and the imbalance settings fitted with it.  ``PhaseModel.load`` reads a
    saved one.

    Hyperparameters: ``kind``, ``seed`` (the estimator's random state), ``window_s``,
    ``meta``, ``smooth``, ``idle_gate`` (a ``tcn`` fit turns the last two off).

    Attributes:
        estimator: the fitted ``HistGradientBoostingClassifier`` (``kind`` "hgb") or a
            ``temporal.ConvPhaseNet`` ("tcn").
        priors: (3,) class priors of the classifier's posteriors (``PHASE_ORDER``; uniform,
            from the balanced class weights).
        transition: (3, 3) window transition matrix.
        imbalance: the fitted ``ImbalanceDetector``.
        smooth: apply the Viterbi pass in ``predict``.
        window_s: window length the model was trained at, seconds.
        idle_gate: busiest GPU's kernel-time share (0-1) from which a window is never idle
            (None: no gate).
        kind: "hgb" or "tcn".
        seed: random state of the estimator ``fit`` trains (not saved).
        meta: provenance (corpus, versions, window length).
        shares: a fitted ``shares.ShareModel`` (calibrated phase shares per window) or None.
        confidence_maps: per input kind (``shares.confidence_kind``), the held-out map from a
            window's share of its labelled phase to the chance that label is right:
            ``{"x": [...], "y": [...]}`` breakpoints of an isotonic fit (``np.interp``).
        phase_from: "trees" (the phase trees, Viterbi-smoothed) or "shares" (the share
            model's arg-max for every input: a model taught by an engine,
            ``calibrate.teach``).
    """

    kind: str = "hgb"
    seed: int = 0
    window_s: float = DEFAULT_WINDOW_S
    meta: dict = field(default_factory=dict)
    smooth: bool = True
    idle_gate: float | None = 0.02
    shares: object | None = None
    confidence_maps: dict = field(default_factory=dict)
    phase_from: str = "trees"
    estimator: object = None
    priors: np.ndarray | None = None
    transition: np.ndarray | None = None
    imbalance: ImbalanceDetector | None = None

    # -- training ------------------------------------------------------------------------
    def fit(self, features: list[pd.DataFrame], truths: list[pd.DataFrame]) -> PhaseModel:
        """Fit on labelled traces (``kind`` "hgb" or "tcn", the latter needs torch); returns
        the model itself.  Sets ``estimator``, ``priors``, ``transition`` and ``imbalance``;
        a ``tcn`` model runs unsmoothed and ungated (``smooth`` False, ``idle_gate`` None).

        Args:
            features: per trace, ``WindowFeatures`` rows.
            truths: per trace, the truth per window (``phase``: str or None, ``hot_gpu``).

        Raises:
            ImportError: ``kind`` "tcn" without torch.
        """
        seed, kind = self.seed, self.kind
        X, y, hot, groups = [], [], [], []
        for i, (f, t) in enumerate(zip(features, truths, strict=True)):
            m = t["phase"].notna().to_numpy()
            X.append(f[list(MODEL_COLUMNS)].to_numpy(dtype=float)[m])
            y.append(t["phase"].to_numpy()[m])
            hot.append(t["hot_gpu"].to_numpy(dtype=float)[m])
            groups.append(np.full(int(m.sum()), i))
        Xa, ya = np.vstack(X), np.concatenate(y).astype(str)
        if kind == "tcn":
            from tealeaves.classifier.temporal import TemporalConvModel

            est = TemporalConvModel(seed=seed).fit(features, truths).export()
        else:
            from threadpoolctl import threadpool_limits

            # One OpenMP thread: on a busy two-core machine the pool's spinning workers made
            # one fit take 240 s instead of 3 s (measured 2026-12-01); the result is the same.
            with threadpool_limits(1, user_api="openmp"):
                est = hgb_estimator(seed).fit(Xa, ya)
        # balanced class weights: the posteriors carry uniform priors (see the module doc)
        priors = np.full(len(PHASE_ORDER), 1.0 / len(PHASE_ORDER))
        trans = transition_matrix([t["phase"].to_numpy() for t in truths])
        feats_all = pd.concat([f.loc[t["phase"].notna().to_numpy()]
                               for f, t in zip(features, truths, strict=True)],
                              ignore_index=True)
        det = ImbalanceDetector().fit(feats_all, ya, np.concatenate(hot),
                                      np.concatenate(groups))
        self.estimator, self.priors, self.transition, self.imbalance = est, priors, trans, det
        if kind == "tcn":
            self.smooth, self.idle_gate = False, None
        return self

    # -- inference -----------------------------------------------------------------------
    def predict_proba(self, features: pd.DataFrame) -> pd.DataFrame:
        """Per-window posteriors (columns ``PHASE_ORDER``), before smoothing."""
        if features.empty:
            return pd.DataFrame(columns=list(PHASE_ORDER), dtype=float)
        if self.kind == "tcn":
            p = self.estimator.predict_proba(features)
        else:
            from threadpoolctl import threadpool_limits

            X = features.reindex(columns=list(MODEL_COLUMNS)).to_numpy(dtype=float)
            # One thread: OpenMP workers spinning after each call starve the collector and
            # the web server on small machines, and a few hundred windows need no more.
            with threadpool_limits(1, user_api="openmp"):
                q = self.estimator.predict_proba(X)
            # a phase the training windows never held scores 0 (a small corpus, a fold)
            known = list(self.estimator.classes_)
            p = np.zeros((len(X), len(PHASE_ORDER)))
            for j, c in enumerate(PHASE_ORDER):
                if c in known:
                    p[:, j] = q[:, known.index(c)]
        p = _quiet_is_idle(features, p)
        if self.idle_gate is None:
            return pd.DataFrame(p, columns=list(PHASE_ORDER), index=features.index)
        busy = np.fmax(features.get("f_gpu_util_max", np.nan),
                       features.get("f_sm_active_max", np.nan)).to_numpy(dtype=float)
        # NVML averages gpu_util over a trailing period: right after work stops it decays
        # through idle windows, so the gate holds only for steady (non-falling) readings.
        slope = features.get("f_gpu_util_slope", pd.Series(np.nan, index=features.index))
        steady = ~(slope.to_numpy(dtype=float) < -0.01)
        gate = np.where(np.isfinite(busy) & steady, 1.0 / (1.0 + np.exp(np.clip(
            (busy - self.idle_gate) / 0.003, -50, 50))), 1.0)
        i_idle = PHASE_ORDER.index("idle")
        p[:, i_idle] *= gate
        p /= np.maximum(p.sum(axis=1, keepdims=True), 1e-12)
        return pd.DataFrame(p, columns=list(PHASE_ORDER), index=features.index)

    def predict(self, features: pd.DataFrame, proba: pd.DataFrame | None = None) -> pd.Series:
        """Phase per window: the Viterbi path when ``smooth``, else the arg-max."""
        proba = self.predict_proba(features) if proba is None else proba
        if not self.smooth or proba.empty:
            return proba.idxmax(axis=1).rename("phase")
        starts = features.index.to_numpy(dtype=float)
        breaks = np.r_[True, np.diff(starts) > 1.5 * self.window_s]
        path = viterbi(proba.to_numpy(), self.priors, self.transition, breaks)
        return pd.Series(np.array(PHASE_ORDER)[path], index=features.index, name="phase")

    # -- persistence ---------------------------------------------------------------------
    def save(self, directory: str | Path = MODEL_DIR, stem: str = MODEL_STEM) -> Path:
        """Write ``<stem>.npz`` (tcn) or ``<stem>.skops`` (hgb) and ``<stem>.json``; returns
        the JSON path.  A weights file of the other kind is removed.  Every file is written
        beside its place first and moved in only when all are written, so a failed save (a
        full disk, a folder not writable) leaves the folder as it was.

        Raises:
            OSError: a file cannot be written (nothing of this save is left).
        """
        import sklearn

        directory = Path(directory)
        made = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        doc = {
            "format": 1,
            "kind": self.kind,
            "classes": list(PHASE_ORDER),
            "feature_columns": list(MODEL_COLUMNS),
            "priors": self.priors.tolist(),
            "transition": self.transition.tolist(),
            "imbalance": {"threshold": self.imbalance.threshold,
                          "min_windows": self.imbalance.min_windows,
                          "floor": self.imbalance.floor,
                          "noise_k": self.imbalance.noise_k},
            "smooth": self.smooth,
            "window_s": self.window_s,
            "idle_gate": self.idle_gate,
            "shares": None if self.shares is None else {
                "columns": list(self.shares.columns), "file": f"{stem}.shares.skops"},
            "confidence_maps": self.confidence_maps,
            "phase_from": self.phase_from,
            "sklearn_version": sklearn.__version__,
            **self.meta,
        }
        files = {"json": (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()}
        if self.kind == "tcn":
            files["npz"] = lambda f: np.savez(f, **self.estimator.arrays())
        else:
            files["skops"] = archive_of(self.estimator)
        if self.shares is not None:
            files["shares.skops"] = archive_of(self.shares.estimator_)
        partial = {ext: directory / f".{stem}.{ext}.partial" for ext in files}
        try:
            for ext, what in files.items():
                with open(partial[ext], "wb") as f:
                    if isinstance(what, bytes):
                        f.write(what)
                    else:
                        what(f)
        except BaseException:
            for q in partial.values():
                q.unlink(missing_ok=True)
            if made:
                directory.rmdir()
            raise
        from tealeaves.classifier.trees import beside

        for ext in ("npz", "skops", "shares.skops"):
            if ext not in files:
                (directory / f"{stem}.{ext}").unlink(missing_ok=True)
            if ext != "npz":  # the numpy trees of an archive: stale ones are never read
                beside(directory / f"{stem}.{ext}").unlink(missing_ok=True)
        for ext in sorted(files, key=lambda e: e == "json"):  # the JSON, naming them, last
            partial[ext].replace(directory / f"{stem}.{ext}")
        if "skops" in files:
            keep_trees(self.estimator, directory / f"{stem}.skops")
        if "shares.skops" in files:
            keep_trees(self.shares.estimator_, directory / f"{stem}.shares.skops")
        return directory / f"{stem}.json"

    @classmethod
    def load(cls, directory: str | Path = MODEL_DIR, stem: str = MODEL_STEM) -> PhaseModel:
        """Read a saved model.

        Raises:
            ModelError: a file is missing or unreadable, holds a type outside
                ``TRUSTED_PREFIXES``, or was trained on other feature columns.
        """
        directory = Path(directory)
        jpath, spath = directory / f"{stem}.json", directory / f"{stem}.skops"
        try:
            doc = json.loads(jpath.read_text())
            if not isinstance(doc, dict):
                raise ModelError(f"{jpath}: not a model description (a JSON object)")
            kind = doc.get("kind", "hgb")
            if kind not in ("hgb", "tcn"):
                raise ModelError(f"{jpath}: kind: {kind!r} is not 'hgb' or 'tcn'")
            if kind == "tcn":
                from tealeaves.classifier.temporal import ConvPhaseNet

                with np.load(directory / f"{stem}.npz", allow_pickle=False) as arrays:
                    est = ConvPhaseNet.from_arrays(arrays)
            else:
                est = load_trees(spath)
        except ModelError:
            raise
        except (OSError, ValueError, KeyError, ImportError, zipfile.BadZipFile) as exc:
            raise ModelError(f"{directory / stem}: cannot load the phase model ({exc})") \
                from exc
        if doc.get("feature_columns") != list(MODEL_COLUMNS):
            raise ModelError(f"{jpath}: trained on other features; rebuild with "
                             "`tealeaves train`")
        check_doc(doc, jpath)
        if kind == "hgb":
            check_estimator(est, len(MODEL_COLUMNS), spath)
        imb = doc["imbalance"]
        meta = {k: v for k, v in doc.items()
                if k in ("corpus", "trained_utc", "windows", "taught")}
        shares = None
        if doc.get("shares"):
            shares = load_shares(directory / doc["shares"]["file"], doc["shares"]["columns"])
        return cls(estimator=est, priors=np.asarray(doc["priors"]),
                   transition=np.asarray(doc["transition"]),
                   imbalance=ImbalanceDetector(imb["threshold"], imb["min_windows"],
                                               imb.get("floor", 1.0), imb.get("noise_k", 0.3)),
                   smooth=bool(doc.get("smooth", True)), window_s=float(doc["window_s"]),
                   idle_gate=doc.get("idle_gate"), kind=kind, meta=meta, shares=shares,
                   confidence_maps=doc.get("confidence_maps") or {},
                   phase_from=doc.get("phase_from", "trees"))


def confidence_of(model: PhaseModel | None, kind: str, share: np.ndarray) -> np.ndarray:
    """The chance a window's label is right, from its share of that phase ((n,)), through
    the model's held-out map for the input ``kind`` (``apply_map``); the share itself where
    the model keeps no map, held under ``shares.CONFIDENT`` where it keeps maps but
    none for ``kind`` (an input no map was measured on: ``mem_copy_util`` alone)."""
    maps = (model.confidence_maps or {}) if model is not None else {}
    cmap = maps.get(kind)
    if not cmap and maps:
        from tealeaves.classifier.shares import CONFIDENT

        return np.minimum(np.asarray(share, dtype=float), CONFIDENT - 0.01)
    return apply_map(cmap, share)


def apply_map(cmap: dict | None, share: np.ndarray) -> np.ndarray:
    """``share`` ((n,)) through a confidence map ``{"x": [...], "y": [...]}``, drawn from
    (0, 0): a label the shares give under a third (the trees' pick, not the shares' arg-max)
    is mapped down to nothing, not up to the map's first point.  No map: ``share``."""
    share = np.asarray(share, dtype=float)
    if not cmap:
        return share
    return np.interp(share, np.r_[0.0, np.asarray(cmap["x"], float)],
                     np.r_[0.0, np.asarray(cmap["y"], float)])


@dataclass
class SharesLabeller:
    """A ``PhaseModel``'s share model used as the labeller, for sources without the profiling
    counters the phase trees were trained on (nvidia-smi files, power or utilization alone):
    posteriors are the calibrated shares, the phase their arg-max (no smoothing), imbalance the
    model's detector.  A window with no reading the share model reads gets uniform shares."""

    model: PhaseModel

    @property
    def window_s(self) -> float:
        return self.model.window_s

    @property
    def imbalance(self) -> ImbalanceDetector:
        return self.model.imbalance

    @property
    def transition(self) -> np.ndarray:
        return self.model.transition

    kind = "shares"
    smooth = False

    def predict_proba(self, features: pd.DataFrame) -> pd.DataFrame:
        p = self.model.shares.predict(features)
        p[~np.isfinite(p).all(axis=1)] = 1.0 / len(PHASE_ORDER)
        p = _quiet_is_idle(features, p)
        return pd.DataFrame(p, columns=list(PHASE_ORDER), index=features.index)

    def predict(self, features: pd.DataFrame, proba: pd.DataFrame | None = None) -> pd.Series:
        proba = self.predict_proba(features) if proba is None else proba
        return proba.idxmax(axis=1).rename("phase")
