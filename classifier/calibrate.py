"""Calibration taught by the engine: the share model refitted with one deployment's own windows,
their targets read from what its server says it did.

**Engine shares.** SGLang's ``/metrics`` counts forward time per category
(``sglang:forward_execution_seconds_total{category="prefill"|"decode"}``; newer builds also
``sglang:gpu_execution_seconds_total``): between two scrapes, the increase of each category over
the time between them is that phase's share of the interval, idle the rest (``engine_shares``).
Host time between forwards counts as idle there (the corpus labels give gaps under 0.05 s to
the phase around them), so engine shares read a little more idle than the labels.  A server
log's phase intervals (``server_phases.phase_intervals``) serve where no such counter is scraped:
their windows' shares come from the intervals as for the corpus labels (``shares.window_shares``).

**Teaching** (``teach``): the share model is refitted on the corpus in every input kind plus the
deployment's windows, whose rows are weighted so that they count for ``weight`` of the
corpus's (default a half); the taught model labels every input by its shares
(``PhaseModel.phase_from = "shares"``), since the share model is the part the engine taught.

**Agreement** (``agreement``): share error, macro-F1 of the arg-max phase and the share of
windows whose phase matches the engine's, on windows the teaching did not see.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd

from tealeaves.classifier.rules import PHASE_ORDER
from tealeaves.classifier.shares import share_error

#: Forward-time counters read for engine shares, in order of preference.
FORWARD_SECONDS = ("sglang:forward_execution_seconds_total",
                   "sglang:gpu_execution_seconds_total")

#: A forward-seconds counter at or above this (about 32 years) is a sentinel, no reading.
MAX_COUNTER_S = 1e9
#: Scrape intervals longer than this (s) give no window a share (a gap in the scrapes).
MAX_INTERVAL_S = 60.0
#: Forward time may exceed an interval by this share (the scrape's timing), no more.
FORWARD_SLACK = 0.1


def engine_shares(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per scrape interval, the engine's shares of time in each phase.

    Args:
        metrics: a metrics frame (``data.server_metrics.samples_frame`` columns:
            ``timestamp`` epoch s, ``name``, ``labels`` text, ``value``).

    Returns:
        Frame ``start``, ``end`` (epoch s), ``idle``, ``prefill``, ``decode`` (each 0-1, rows
        summing to 1), one row per pair of consecutive scrapes with the counter where both
        read (see the code for what is no reading); empty when the page has no forward-time
        counter.
    """
    cols = ["start", "end", *PHASE_ORDER]
    for name in FORWARD_SECONDS:
        m = metrics[metrics["name"] == name]
        if m.empty:
            continue
        cat = m["labels"].astype(str).str.extract(r"(?:^|,)category=([^,]*)")[0]
        # a value that is not a count of seconds (NaN, +Inf, a sentinel such as 2**47) is
        # no reading, never 0; the ranks of one server (tp_rank, ...) each count the same
        # forward time, so a category is their mean, unknown where any rank's is (a sum
        # would read TP8 as eight times the interval, and a scrape saved twice as double)
        v = m["value"].to_numpy(dtype=float)
        v = np.where(np.isfinite(v) & (v >= 0) & (v < MAX_COUNTER_S), v, np.nan)
        grp = m.assign(cat=cat, value=v, gap=np.isnan(v)).groupby(["timestamp", "cat"])
        mean = grp["value"].mean().where(~grp["gap"].any())
        wide = mean.unstack("cat").sort_index()
        if "prefill" not in wide or "decode" not in wide:
            continue
        t = wide.index.to_numpy(dtype=float)
        dt_ = np.diff(t)
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.diff(wide["prefill"].to_numpy(dtype=float)) / dt_
            d = np.diff(wide["decode"].to_numpy(dtype=float)) / dt_
        # no reading: a counter reset (a fall), an unknown value, forward time beyond the
        # interval by more than the scrapes' timing slack, an interval too long to say
        # anything of a window in it (a gap of hours is not a share of each 0.5 s)
        ok = ((dt_ > 0) & (dt_ <= MAX_INTERVAL_S) & (p >= 0) & (d >= 0)
              & (p + d <= 1 + FORWARD_SLACK))
        scale = np.maximum(p + d, 1.0)  # forward time can not exceed the interval
        p, d = p / scale, d / scale
        out = pd.DataFrame({"start": t[:-1], "end": t[1:], "idle": 1 - p - d, "prefill": p,
                            "decode": d})
        return out[ok].reset_index(drop=True)[cols]
    return pd.DataFrame(columns=cols, dtype=float)


def shares_from_engine(starts: np.ndarray, engine: pd.DataFrame,
                       window_s: float) -> np.ndarray:
    """(n, 3) target shares of windows starting at ``starts``: the engine interval holding
    each window's midpoint; NaN rows outside every interval."""
    mid = np.asarray(starts, dtype=float) + window_s / 2
    out = np.full((len(mid), len(PHASE_ORDER)), np.nan)
    if engine.empty:
        return out
    s, e = engine["start"].to_numpy(float), engine["end"].to_numpy(float)
    i = np.searchsorted(s, mid, side="right") - 1
    ok = (i >= 0) & (mid < e[np.clip(i, 0, None)])
    out[ok] = engine[list(PHASE_ORDER)].to_numpy(float)[i[ok]]
    return out


def teach(model, corpus_kinds: list, features: pd.DataFrame, targets: np.ndarray,
          weight: float = 0.5, seed: int = 0):
    """A copy of ``model`` whose share model is refitted with the deployment's windows.

    Args:
        model: the shipped ``PhaseModel``.
        corpus_kinds: ``share_corpus.load_kinds`` output (the corpus in every input kind).
        features: the deployment's ``WindowFeatures`` rows (n, ...).
        targets: (n, 3) engine shares (NaN rows skipped).
        weight: the deployment's rows weigh this share of the corpus's, in total.

    Raises:
        ValueError: no window has an engine share.
    """
    ok = np.isfinite(targets).all(axis=1)
    if not ok.any():
        raise ValueError("no window of the trace falls in an interval the engine accounted "
                         "for (do the trace and the server signals cover the same time?)")
    feats = [k[0] for t in corpus_kinds for k in t.kinds.values()]
    shares = [k[1] for t in corpus_kinds for k in t.kinds.values()]
    taught = copy.copy(model)
    taught.shares = taught_share_model(feats, shares, features, targets, weight, seed)
    taught.phase_from = "shares"
    taught.meta = {**(model.meta or {}), "taught": {"windows": int(ok.sum()),
                                                    "weight": weight}}
    return taught


def taught_share_model(feats: list[pd.DataFrame], shares: list[np.ndarray],
                       features: pd.DataFrame, targets: np.ndarray, weight: float = 0.5,
                       seed: int = 0):
    """A ``ShareModel`` fitted on the corpus rows (``feats``/``shares`` per trace and kind)
    and the deployment's (``features`` with ``targets`` (n, 3)), the deployment's rows
    weighted to count for ``weight`` of the corpus's in total."""
    from tealeaves.classifier.shares import ShareModel

    n_corpus = sum(int(np.isfinite(s).all(axis=1).sum()) for s in shares)
    n_own = max(int(np.isfinite(targets).all(axis=1).sum()), 1)
    return ShareModel(seed=seed).fit(feats + [features], shares + [targets],
                                     weights=[1.0] * len(feats) + [weight * n_corpus / n_own])


def agreement(model, features: pd.DataFrame, targets: np.ndarray) -> dict:
    """How well ``model``'s shares agree with the engine's on ``features``.

    Returns:
        ``windows`` (with an engine share), ``share_error`` (total variation), ``phase_match``
        (share of windows whose arg-max phase is the engine's), ``macro_f1`` (of those
        arg-max phases, over the phases the engine's arg-max holds).
    """
    ok = np.isfinite(targets).all(axis=1)
    if not ok.any() or model.shares is None:
        return {"windows": int(ok.sum()), "share_error": float("nan"),
                "phase_match": float("nan"), "macro_f1": float("nan")}
    pred = model.shares.predict(features)[ok]
    true = targets[ok]
    known = np.isfinite(pred).all(axis=1)
    p = np.argmax(np.nan_to_num(pred), axis=1)
    t = np.argmax(true, axis=1)
    f1 = []
    for k in range(len(PHASE_ORDER)):
        if (t == k).any():
            tp = np.sum((p == k) & (t == k) & known)
            f1.append(2 * tp / (np.sum((p == k) & known) + np.sum(t == k)))
    return {"windows": int(ok.sum()), "share_error": share_error(pred, true),
            "phase_match": float(np.mean((p == t) & known)),
            "macro_f1": float(np.mean(f1)) if f1 else float("nan")}


def split_time(features: pd.DataFrame, share: float) -> np.ndarray:
    """(n,) bool: the windows of the first ``share`` of the trace's time (teaching), the rest
    False (scoring)."""
    st = features.index.to_numpy(dtype=float)
    if not len(st):
        return np.zeros(0, bool)
    cut = st.min() + share * (st.max() - st.min())
    return st < cut
