"""classifier: windows, features, the phase labeller and the imbalance flag.

Public surface:
    ``classify_samples(samples, devices, window_s, labeller, groups)`` -> windows frame
    (imbalance judged within serving groups: ``groups.resolve_groups``)
    ``classify_trace(trace, window_s)`` -> windows frame
    ``classify_with_segments(samples, devices, window_s)`` -> windows and 0.1-s segments
    ``default_labeller()`` -> the shipped trained ``PhaseModel``, else the rules
    ``score_against_labels(windows, labels)`` -> dict of accuracies (``evaluate.score`` has
    the full set: macro-F1, confusion, boundary delay, imbalance precision/recall)
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from tealeaves.classifier.features import WindowFeatures
from tealeaves.classifier.groups import resolve_groups
from tealeaves.classifier.labellers import WindowModel, default_labeller, labeller_name
from tealeaves.classifier.rules import PHASE_ORDER, RulePhaseLabeller
from tealeaves.classifier.shares import NAMED_SHARE, SHARE_COLUMNS, inputs_of, verdict
from tealeaves.classifier.windows import DEFAULT_WINDOW_S
from tealeaves.data.traces import Trace, label_at

__all__ = [
    "DEFAULT_WINDOW_S",
    "PHASE_ORDER",
    "RulePhaseLabeller",
    "WindowFeatures",
    "classify_features",
    "classify_samples",
    "classify_trace",
    "classify_with_segments",
    "default_labeller",
    "labeller_name",
    "score_against_labels",
]

log = logging.getLogger(__name__)

#: A window's phase from the trees is overruled by its calibrated shares where they name
#: another phase (``shares.NAMED_SHARE`` or more) or give it under this share of the window
#: (held out by family on the corpus, 2026-12-04: window macro-F1 0.887 -> 0.884 pooled,
#: 0.756 -> 0.781 over the serving-loop families; 0.2 gave 0.884 / 0.777).
OVERRULE_SHARE = 0.25

#: The most confidence a window near idle (``imbalance.near_idle``: tensor + DRAM under
#: ``IDLE_WORK`` points, no GPU busy ``IDLE_BUSY`` %) gets for a phase other than idle: the
#: share such windows of the bundled traces' labelled stretches are decode (278 of 882; 602
#: idle, 2 prefill; ``data/traces``, 0.5-s windows wholly inside a label).  The model's phase
#: stands, its certainty does not (issue 38: SM 2 %, tensor/DRAM 0.3 % read "decode").
NEAR_IDLE_CONFIDENCE = 0.32

#: Columns of the windows frame, before the per-GPU ``load_g<i>`` columns.
WINDOW_COLUMNS = ("start", "end", "phase", "confidence", "imbalance_ratio", "balancedness",
                  "straggler_tax", "hot_gpu", "hot_set", "hot_share", "cold_share",
                  "imbalanced", "persistence", "load_mean",
                  "load_max", "tensor_active_mean", "dram_active_mean", "power_frac_mean",
                  "n_gpus", "p_idle", "p_prefill", "p_decode", *SHARE_COLUMNS, "verdict")

def classify_samples(samples: pd.DataFrame, devices: pd.DataFrame | None = None,
                     window_s: float = DEFAULT_WINDOW_S, labeller=None,
                     groups=None, keep: tuple[float, float] | None = None) -> pd.DataFrame:
    """Label every window of a sample frame.

    Args:
        samples: frame in the sample schema (any number of GPUs, one host).
        devices: device rows for normalisation (optional).
        window_s: window length in seconds.
        labeller: a ``model.PhaseModel`` or ``RulePhaseLabeller``; default
            ``default_labeller()`` (the trained model, the rules as fallback).
        groups: the serving groups imbalance is judged in (``groups.resolve_groups``): None
            detects roles from the data (one group of every GPU when none are found), a
            ``groups.Grouping``, ``"0-3,4-7"`` or sequences of GPU ids.
        keep: ``(start, end)`` epoch s: the samples are a range's with context either side;
            every window is labelled (a run of imbalanced windows, the phase smoothing see
            the context) and those overlapping ``[start, end)`` returned, the evidence lines
            counting those only.  None: every window.

    Returns:
        One row per window holding samples: ``WINDOW_COLUMNS`` then ``load_g<i>`` (load of
        GPU i, %).  ``start``/``end`` are epoch seconds; ``confidence`` is the held-out chance
        that the window's phase is right, from the calibrated share of that phase through
        the model's map for the input kind (``model.confidence_of``; the labeller's score
        where no share model ships); ``share_idle`` / ``share_prefill`` / ``share_decode``
        the window's calibrated shares of time (``shares.py``; the rules' scores without a
        share model) and ``verdict`` their words ("decode", or "mixed: decode 55 % ·
        prefill 30 %" under ``shares.NAMED_SHARE``); ``hot_set`` lists every hot GPU (``"1,3,5,7"``, empty
        unless flagged) and ``hot_share`` / ``cold_share`` the mean share (%) of the summed
        work a hot / another GPU holds (``imbalance.py``); ``p_idle`` / ``p_prefill`` /
        ``p_decode`` are the
        labeller's per-window scores before any sequence smoothing (so a Viterbi-smoothed
        phase can differ from their arg-max); ``hot_gpu`` is NaN unless the window is flagged;
        ``attrs["labeller"]`` says which labeller ran ("trained" or "rules");
        ``attrs["grouping"]`` the serving groups the imbalance was judged in
        (``groups.Grouping.to_json``: ``groups``, ``source``, ``roles``, ``text`` ...).
        A window that cannot be told (``evidence.window_doubts``: a GPU still reporting
        has no reading in it, or one reading alone) has ``phase`` None, NaN confidence,
        shares and figures, and its ``verdict`` says why; the imbalance compares GPUs only
        on a counter they share and leaves out GPUs holding no memory
        (``evidence.comparable_features``).

    Raises:
        groups.GroupsError: an explicit grouping that does not fit the samples' GPUs.
    """
    from tealeaves.classifier.evidence import align_sweeps, classify_told

    samples = align_sweeps(samples, window_s)
    feats = WindowFeatures(window_s, devices).fit_transform(samples)
    return classify_told(feats, samples, window_s, labeller, groups,
                         classify=classify_features, keep=keep)


def _choose_labeller(labeller, feats: pd.DataFrame, window_s: float):
    """The labeller that labels ``feats`` (``labeller``, default ``default_labeller()``) after
    the fallbacks: the rules for another window length, the share model (or the rules) for a
    source without profiling counters, the share model for a model an engine taught.
    Returns ``(labeller, why)``: ``why`` the fallback's reason, "" when none."""
    labeller = default_labeller() if labeller is None else labeller
    why = ""
    if isinstance(labeller, WindowModel) and abs(labeller.window_s - window_s) > 1e-9:
        why = f"the model works on {labeller.window_s:g}-s windows"
        log.warning("the trained model works on %g-s windows; %g-s windows use the rules",
                    labeller.window_s, window_s)
        labeller = RulePhaseLabeller()
    if isinstance(labeller, WindowModel) and not feats.empty and \
            feats[["f_sm_active_mean", "f_tensor_active_mean", "f_dram_active_mean"]] \
            .isna().all(axis=None):
        # No profiling counters (nvidia-smi files, GPUs without GPM): the phase trees were
        # trained with them; the share model has learned thin inputs (shares.INPUT_KINDS), the
        # rules an NVML-only path where no share model ships.
        why = "no profiling counters (sm_active, tensor_active, dram_active) in the source"
        if getattr(labeller, "shares", None) is not None:
            from tealeaves.classifier.model import SharesLabeller

            labeller = SharesLabeller(labeller)
        else:
            labeller = RulePhaseLabeller()
    if getattr(labeller, "phase_from", "trees") == "shares" and \
            getattr(labeller, "shares", None) is not None:
        from tealeaves.classifier.model import SharesLabeller

        labeller = SharesLabeller(labeller)  # a model the engine taught labels by its shares
    return labeller, why


def _add_scores(out: pd.DataFrame, feats: pd.DataFrame, proba: pd.DataFrame,
                sh: np.ndarray) -> None:
    """Add to ``out`` the windows' levels (``load_mean`` ... ``n_gpus``), the labeller's scores
    (``p_<phase>``) and the shares ``sh`` (``SHARE_COLUMNS``), in that order."""
    for col in ("load_mean", "load_max", "tensor_active_mean", "dram_active_mean",
                "power_frac_mean", "n_gpus"):
        out[col] = feats[col].to_numpy()
    for p in PHASE_ORDER:
        out[f"p_{p}"] = proba[p].to_numpy(dtype=float)
    for k, col in enumerate(SHARE_COLUMNS):
        out[col] = sh[:, k]


def _verdict_words(out: pd.DataFrame, feats: pd.DataFrame, sh: np.ndarray, inputs: dict,
                   model, share_model) -> list[str]:
    """Each window's verdict in words from its shares ``sh`` ((n, 3)); a near-idle window's
    confidence in ``out`` is capped at ``NEAR_IDLE_CONFIDENCE`` here, and its verdict says
    so."""
    # inputs no confidence map was measured on (mem_copy_util alone): no phase is named
    unmeasured = share_model is not None and bool(model.confidence_maps) and \
        inputs["kind"] not in model.confidence_maps
    words = verdict(sh, named=np.inf if unmeasured else NAMED_SHARE)
    if inputs["kind"] != "full":
        # without the profiling counters a split verdict is the counters' doubt as much as
        # the window's mix: say so, and what it stood on
        doubt = f"cannot tell ({inputs['text'].replace(' per GPU', '')}): "
        words = [doubt + w[len("mixed: "):] if w.startswith("mixed: ") else w for w in words]
    near = _near_idle(feats) & (out["phase"].to_numpy() != "idle")
    if near.any():  # nothing much ran: a phase named there is a guess, and says so
        out["confidence"] = np.where(near, np.minimum(out["confidence"].to_numpy(dtype=float),
                                                      NEAR_IDLE_CONFIDENCE), out["confidence"])
        words = [f"near idle · {w}" if n and w else w
                 for w, n in zip(words, near, strict=True)]
    return words


def classify_features(feats: pd.DataFrame, window_s: float = DEFAULT_WINDOW_S,
                      labeller=None, groups=None, *,
                      rate_hz: float | None = None) -> pd.DataFrame:
    """``classify_samples`` from ``WindowFeatures`` rows already computed (the grouping is
    resolved over these rows).  ``rate_hz``: the source's per-GPU rate the verdicts name
    (``evidence.sample_rate_hz`` of the samples; None: estimated from the windows, which
    counts a gap between them as time between readings)."""
    labeller, why = _choose_labeller(labeller, feats, window_s)
    fcols = [c for c in feats.columns if c.startswith("f_")]
    if fcols and not feats.empty:
        # a window whose samples hold no reading at all (a sweep of N/A fields) has no phase:
        # it is left out, not labelled from NaN
        feats = feats[feats[fcols].notna().any(axis=1)]
    grouping = resolve_groups(feats, groups)
    if feats.empty:
        out = pd.DataFrame(columns=list(WINDOW_COLUMNS))
        out.attrs.update(labeller=labeller_name(labeller), fallback=why,
                         grouping=grouping.to_json())
        return out
    proba = labeller.predict_proba(feats)
    if not isinstance(labeller, WindowModel):
        phase = proba.idxmax(axis=1)
        imb = labeller.imbalance(feats, phase, grouping.groups)
    else:
        phase = labeller.predict(feats, proba)
        imb = labeller.imbalance.detect(feats, phase, grouping.groups)
    which = [PHASE_ORDER.index(p) for p in phase.to_numpy()]
    conf = proba.to_numpy()[np.arange(len(proba)), which]
    from tealeaves.classifier.model import confidence_of

    inputs = inputs_of(feats, window_s, rate_hz=rate_hz)
    model = getattr(labeller, "model", labeller)
    share_model = getattr(model, "shares", None)
    if share_model is not None:
        # calibrated shares; the confidence is the held-out chance the phase is right
        sh = share_model.predict(feats)
        sh[~np.isfinite(sh).all(axis=1)] = 1.0 / len(PHASE_ORDER)
        # the trees' phase stands unless the shares name another phase (NAMED_SHARE or
        # more) or give it under OVERRULE_SHARE of the window: then the largest share names
        # it (no "decode" beside a verdict "prefill", no "prefill, 0 % sure")
        top = np.argmax(sh, axis=1)
        overrule = (top != np.asarray(which)) & (
            (sh[np.arange(len(sh)), top] >= NAMED_SHARE)
            | (sh[np.arange(len(sh)), which] < OVERRULE_SHARE))
        if overrule.any():
            which = np.where(overrule, top, which)
            phase = pd.Series(np.array(PHASE_ORDER)[which], index=phase.index, name="phase")
            imb = labeller.imbalance.detect(feats, phase, grouping.groups) \
                if isinstance(labeller, WindowModel) else imb
        conf = confidence_of(model, inputs["kind"], sh[np.arange(len(sh)), which])
    else:
        sh = proba.to_numpy(dtype=float)  # the rules' scores: not calibrated shares
    out = pd.DataFrame({
        "start": feats.index.to_numpy(dtype=float),
        "end": feats.index.to_numpy(dtype=float) + window_s,
        "phase": phase.to_numpy(),
        "confidence": conf,
    })
    for col in ("imbalance_ratio", "balancedness", "straggler_tax", "hot_gpu", "hot_set",
                "hot_share", "cold_share", "imbalanced", "persistence"):
        out[col] = imb[col].to_numpy()
    # a window labelled idle carries no imbalance figures, whatever its load (issue 35: an
    # idle window's max/mean of near-nothing read 2.0): they speak of work, and it has none
    idle_w = out["phase"].to_numpy() == "idle"
    if idle_w.any():
        for col in ("imbalance_ratio", "balancedness", "straggler_tax"):
            out[col] = out[col].astype(float).mask(idle_w)
    _add_scores(out, feats, proba, sh)
    out["verdict"] = _verdict_words(out, feats, sh, inputs, model, share_model)
    for col in feats.columns:
        if col.startswith("load_g"):
            out[col] = feats[col].to_numpy()
    # what labelled them, after the fallbacks, and why the rules ran when they did; the
    # serving groups the imbalance was judged in
    out.attrs.update(labeller=labeller_name(labeller), fallback=why,
                     grouping=grouping.to_json(), inputs=inputs,
                     labeller_kind=getattr(labeller, "kind", "rules"),
                     shares="calibrated" if share_model is not None else "rules' scores")
    return out


def classify_trace(trace: Trace, window_s: float = DEFAULT_WINDOW_S,
                   labeller=None) -> pd.DataFrame:
    """``classify_samples`` on a trace's samples and device rows."""
    return classify_samples(trace.samples, trace.devices, window_s, labeller)


def classify_with_segments(samples: pd.DataFrame, devices: pd.DataFrame | None = None,
                           window_s: float = DEFAULT_WINDOW_S, labeller=None,
                           complete_until: float | None = None, groups=None
                           ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``classify_samples`` and the 0.1-s phase segments of the same samples
    (``segments.classify_segments`` over ``segments.hop_features``).

    The five window grids come from ``segments.hop_features`` (one feature pass for a short
    frame), the windows from its offset-0 grid.  A gradient-boosting model (row by row) scores the
    rows of all five grids in one call, read back by the windows and the segments.  The
    features, scores and so the windows are those of ``classify_samples`` and
    ``hop_features``.

    Args:
        labeller: as for ``classify_samples``; the segments use the rules when the windows
            fell back to them (``attrs["labeller"] == "rules"``).
        complete_until: epoch s; shifted windows ending after it (samples still to come)
            are left out of the segments.
        groups: the serving groups, as for ``classify_samples`` (the windows' imbalance;
            the segments carry phases only).

    Returns:
        ``(windows, segments)``; ``segments`` (``segments.SEGMENT_COLUMNS``) is empty when
        ``window_s`` is not a whole number of ``segments.DEFAULT_HOP_S`` hops, or when the
        source reads under ``SEGMENT_READINGS`` times a window per GPU
        (``evidence.sample_rate_hz``; ``attrs["why"]`` says so).
    """
    from tealeaves.classifier.evidence import (
        align_sweeps,
        classify_told,
        gpu_rates_hz,
        window_doubts,
    )
    from tealeaves.classifier.segments import (
        SEGMENT_COLUMNS,
        classify_segments,
        hop_features,
        hop_for,
        on_grid,
    )

    hop = hop_for(window_s)
    rates = gpu_rates_hz(samples) if not samples.empty else {}
    rate = min(rates.values()) if rates else math.nan  # the slowest GPU's: each window needs it
    samples = align_sweeps(samples, window_s, rates)
    if samples.empty or hop is None or rate * window_s < SEGMENT_READINGS:
        none = pd.DataFrame(columns=list(SEGMENT_COLUMNS))
        if rate * window_s < SEGMENT_READINGS:  # NaN (one reading per GPU) is not under
            who = ("the source reads" if max(rates.values()) < 1.5 * rate else
                   f"GPU {min(rates, key=rates.get)} reads")
            none.attrs["why"] = (f"{who} at {rate:.2g} Hz: a 0.1-s segment is read from the "
                                 f"{window_s:g}-s windows around it, which need a reading "
                                 f"of every GPU each ({1 / window_s:g} Hz)")
        return classify_samples(samples, devices, window_s, labeller, groups), none
    feats = hop_features(samples, devices, window_s, hop)
    base = on_grid(feats, window_s) if not feats.empty else feats
    labeller = default_labeller() if labeller is None else labeller
    if isinstance(labeller, WindowModel) and labeller.kind == "hgb":
        labeller = _ScoredOnce(labeller, feats)
    windows = classify_told(base, samples, window_s, labeller, groups,
                            classify=classify_features)
    if complete_until is not None and not feats.empty:
        feats = feats[feats.index.to_numpy(dtype=float) + window_s <= complete_until + 1e-6]
    if not feats.empty:  # no segment where a window cannot be told (``evidence``)
        feats = feats[window_doubts(samples, feats.index, window_s) == ""]
    seg_labeller = (RulePhaseLabeller() if windows.attrs.get("labeller") == "rules"
                    else labeller)
    if windows.attrs.get("labeller_kind") == "shares":
        from tealeaves.classifier.model import SharesLabeller

        seg_labeller = SharesLabeller(labeller)
    times = samples["timestamp"].to_numpy(dtype=float)
    if complete_until is not None:
        times = times[times < complete_until]
    return windows, classify_segments(feats, seg_labeller, window_s, times=times)


#: Readings per window (per GPU) under which a source gets no 0.1-s segments: a segment is
#: read from the windows around it, and a 1-Hz source's 0.5-s windows hold its readings only
#: once a second (its segments covered a tenth of the time); 0.97 leaves a 2-Hz source's
#: jitter (a 1.9-Hz source got segments at 0.9).
SEGMENT_READINGS = 0.97


def _near_idle(feats: pd.DataFrame) -> np.ndarray:
    """(n_windows,) bool: the window is near idle across all its GPUs
    (``imbalance.near_idle`` on the across-GPU means: tensor + DRAM mean under
    ``IDLE_WORK``, ``gpu_util`` max under ``IDLE_BUSY``)."""
    from tealeaves.classifier.imbalance import near_idle

    col = (lambda c: feats[c].to_numpy(dtype=float) if c in feats
           else np.full(len(feats), np.nan))
    pipes = col("tensor_active_mean") + col("dram_active_mean")
    return near_idle(pipes[:, None], col("gpu_util_max")[:, None])


class _ScoredOnce:
    """A row-by-row ``PhaseModel`` whose ``predict_proba`` scores every row of ``feats`` on
    its first call and reads the asked rows back after (one model call, one thread-pool
    set-up, for the windows and the segments); everything else is the model's."""

    def __init__(self, model, feats: pd.DataFrame) -> None:
        self._model, self._feats, self._proba = model, feats, None

    def predict_proba(self, features: pd.DataFrame) -> pd.DataFrame:
        if self._proba is None:
            fcols = [c for c in self._feats.columns if c.startswith("f_")]
            f = self._feats
            self._proba = self._model.predict_proba(f[f[fcols].notna().any(axis=1)])
        if not features.index.isin(self._proba.index).all():
            return self._model.predict_proba(features)
        return self._proba.loc[features.index]

    def __getattr__(self, name: str):
        return getattr(self._model, name)


def score_against_labels(windows: pd.DataFrame, labels: pd.DataFrame) -> dict:
    """Compare window labels with ground-truth intervals.

    A window is scored against the interval holding its midpoint; windows whose midpoint is
    in no interval are not scored.

    Returns:
        ``accuracy`` (share of scored windows with the right phase), ``labelled_windows``,
        ``per_phase_accuracy`` (recall per true phase), ``hot_gpu_accuracy`` (share of
        windows in skewed-decode intervals flagged with the right hot GPU),
        ``skewed_windows``, ``false_flag_rate`` (share of balanced decode windows flagged),
        and ``stretches``: one dict per skewed interval (start, end, hot_gpu, windows,
        flagged_right).
    """
    mid = (windows["start"] + windows["end"]) / 2.0
    truth = label_at(labels, mid)
    scored = truth["phase"].notna().to_numpy()
    pred = windows["phase"].to_numpy()
    true_phase = truth["phase"].to_numpy()
    right = pred == true_phase
    per_phase = {}
    for ph in PHASE_ORDER:
        m = scored & (true_phase == ph)
        if m.any():
            per_phase[ph] = float(right[m].mean())
    hot_true = truth["hot_gpu"].to_numpy()
    hot_pred = windows["hot_gpu"].to_numpy(dtype=float)
    skewed = scored & (true_phase == "decode") & np.isfinite(hot_true)
    hot_right = skewed & (hot_pred == hot_true)
    balanced = scored & (true_phase == "decode") & ~np.isfinite(hot_true)
    stretches = []
    for r in labels.itertuples(index=False):
        if r.phase != "decode" or not np.isfinite(r.hot_gpu):
            continue
        m = (mid >= r.start).to_numpy() & (mid < r.end).to_numpy()
        stretches.append({"start": float(r.start), "end": float(r.end),
                          "hot_gpu": int(r.hot_gpu), "windows": int(m.sum()),
                          "flagged_right": float((hot_pred[m] == r.hot_gpu).mean())
                          if m.any() else float("nan")})
    return {
        "accuracy": float(right[scored].mean()) if scored.any() else float("nan"),
        "labelled_windows": int(scored.sum()),
        "per_phase_accuracy": per_phase,
        "hot_gpu_accuracy": float(hot_right[skewed].mean()) if skewed.any() else float("nan"),
        "skewed_windows": int(skewed.sum()),
        "false_flag_rate": float(windows["imbalanced"].to_numpy()[balanced].mean())
        if balanced.any() else float("nan"),
        "stretches": stretches,
    }
