"""Why a window got its label: its features and a few plain sentences, for the window panel.

Pure: a window row (``classifier.classify_samples`` output, as a dict) in, text out.  The
sentences restate what the labeller looked at, in the terms of ``docs/classifier.md``:

- the labeller's per-window scores (``p_idle`` / ``p_prefill`` / ``p_decode``) and, when the
  trained model's sequence smoothing (Viterbi over learned phase transitions) chose another
  phase than the scores' arg-max, that it did;
- busy or idle: the busiest GPU's load against the 10 % idle line of the v0 rules
  (``classifier.rules.RulePhaseLabeller.idle_load``);
- compute- or memory-bound: tensor-pipe activity against DRAM activity (prefill runs the
  tensor pipes, 76 % vs 15 % DRAM on the bundled H200 traces; decode reads weights and KV cache,
  2-5 % tensor vs 29-80 % DRAM: ``docs/classifier_v0_rules.md``);
- imbalance: the max/mean work ratio against the detector's threshold, every GPU of the hot
  set with its share of the work (``"hot set 1, 3, 5, 7 — 18 % each vs 7 %"``) and, given the
  window's samples (``window_ceilings``), why, per hot GPU: the ceiling it leans on next to the
  others (``classifier.imbalance.ceilings``: tensor pipes, DRAM, PCIe, NVLink, launch-bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tealeaves.classifier.imbalance import (
    IDLE_BUSY,
    IDLE_LOAD,
    IDLE_WORK,
    describe_ceiling,
    format_hot_set,
    hot_set_of,
)
from tealeaves.classifier.rules import PHASE_ORDER, RulePhaseLabeller
from tealeaves.classifier.summary import hot_ceilings
from tealeaves.data.schema import entity_name


@dataclass(frozen=True)
class Explanation:
    """What the window panel shows.

    Attributes:
        labeller: "trained model" or "v0 rules".
        reasons: sentences, most telling first.
        features: ``(name, formatted value)`` pairs.
    """

    labeller: str
    reasons: list[str]
    features: list[tuple[str, str]]


def _f(row: dict, key: str) -> float:
    try:
        v = float(row.get(key, math.nan))
    except (TypeError, ValueError):
        return math.nan
    return v


def _pct(v: float, digits: int = 0) -> str:
    return f"{v:.{digits}f} %" if math.isfinite(v) else "n/a"


def imbalance_threshold(labeller: str) -> float:
    """The ``imbalance_ratio`` threshold of the labeller in use (trained detector or rules)."""
    if labeller in ("trained", "taught"):
        from tealeaves.classifier import default_labeller

        lab = default_labeller()
        det = getattr(lab, "imbalance", None)
        if det is not None and hasattr(det, "threshold"):
            return float(det.threshold)
    return RulePhaseLabeller().imbalance_threshold


def row_hot_set(row: dict | None) -> tuple[int, ...]:
    """The hot set of one window row (``classify_samples`` columns as a dict): every hot GPU
    of a flagged window, empty otherwise (``hot_gpu`` for rows without ``hot_set``)."""
    flag = None if not row else row.get("imbalanced")
    if not (isinstance(flag, bool | np.bool_) and flag):
        return ()
    if "hot_set" in row:
        return hot_set_of(row.get("hot_set"))
    h = _f(row, "hot_gpu")
    return (int(h),) if math.isfinite(h) else ()


def window_ceilings(row: dict, samples: pd.DataFrame, window_s: float,
                    devices: pd.DataFrame | None = None) -> dict[int, dict]:
    """Why, per hot GPU of one window: ``classifier.summary.hot_ceilings`` over the window's
    samples (``{gpu: ceilings entry + "line"}``; empty when the window is not flagged or
    there are no samples)."""
    hot_set = row_hot_set(row)
    if not hot_set or samples is None or samples.empty:
        return {}
    t0 = float(row["start"])
    ts = samples["timestamp"].to_numpy(dtype=float)
    part = samples[(ts >= t0 - 1e-6) & (ts < t0 + window_s - 1e-6)]
    one = pd.DataFrame([{"start": t0, "imbalanced": True,
                         "hot_set": ",".join(map(str, hot_set))}])
    return hot_ceilings(part, one, window_s, devices, gpus=list(hot_set))


def explain_window(row: dict, gpus: list[int], labeller: str,
                   ceilings: dict[int, dict] | None = None) -> Explanation:
    """Features and reasons for one labelled window.

    Args:
        row: one row of ``classify_samples`` output (``phase``, ``confidence``, ``p_*``,
            ``load_*``, ``tensor_active_mean``, ``dram_active_mean``, ``imbalance_ratio``,
            ``hot_set``, ``hot_share``, ``cold_share`` ...).
        gpus: GPU indices (for the per-GPU loads).
        labeller: ``"trained"`` or ``"rules"`` (``History.labeller``); "" when unknown.
        ceilings: ``window_ceilings`` of the window: one reason per hot GPU, the ceiling it
            leans on (None or empty: none listed).
    """
    phase = str(row.get("phase"))
    name = "v0 rules" if labeller == "rules" else "trained model"
    scores = {p: _f(row, f"p_{p}") for p in PHASE_ORDER}
    reasons = _phase_reasons(row, phase, name, scores)
    reasons += _imbalance_reasons(row, phase, labeller, ceilings)
    return Explanation(name, reasons, _features(row, gpus, scores))


def _phase_reasons(row: dict, phase: str, name: str, scores: dict[str, float]) -> list[str]:
    """``explain_window``'s reasons for the phase: the scores, the busiest GPU's load against
    the idle line, and compute- or memory-bound from the tensor pipes and DRAM."""
    reasons: list[str] = []
    if all(math.isfinite(v) for v in scores.values()):
        ranked = sorted(scores.items(), key=lambda kv: -kv[1])
        reasons.append("scores: " + " · ".join(f"{p} {v:.2f}" for p, v in ranked))
        top = ranked[0][0]
        if top != phase:
            reasons.append(f"this window alone scores {top} highest ({scores[top]:.2f}); the "
                           f"sequence smoothing (Viterbi over learned phase transitions) kept "
                           f"{phase}, the phase of the windows around it")
    busiest = _f(row, "load_max")
    idle_load = RulePhaseLabeller().idle_load
    if math.isfinite(busiest):
        if busiest < idle_load:
            other = ("" if phase == "idle" else
                     f"; the {name} reads more than SM activity (kernel-running share, power, "
                     f"clocks) and says {phase}")
            reasons.append(f"busiest GPU at {_pct(busiest)} load: under the v0 rules' "
                           f"{idle_load:.0f} % idle line{other}")
        else:
            reasons.append(f"busiest GPU at {_pct(busiest)} load: busy")
    tensor, dram = _f(row, "tensor_active_mean"), _f(row, "dram_active_mean")
    if math.isfinite(tensor) and math.isfinite(dram):
        if busiest >= idle_load or not math.isfinite(busiest):
            if tensor > dram:
                reasons.append(f"tensor pipes {_pct(tensor)} vs DRAM {_pct(dram)}: "
                               f"compute-bound, as in prefill")
            else:
                reasons.append(f"DRAM {_pct(dram)} vs tensor pipes {_pct(tensor)}: "
                               f"memory-bound, as in decode (weights and KV cache read per token)")
    elif math.isfinite(tensor) or math.isfinite(dram):
        have = "tensor" if math.isfinite(tensor) else "DRAM"
        reasons.append(f"only {have} activity read ({_pct(tensor if have == 'tensor' else dram)})"
                       f": compute- or memory-bound cannot be told apart")
    else:
        reasons.append("no profiling counters (tensor / DRAM activity): labelled from the "
                       "load and kernel-running share only")
    return reasons


def _imbalance_reasons(row: dict, phase: str, labeller: str,
                       ceilings: dict[int, dict] | None) -> list[str]:
    """``explain_window``'s reasons for the imbalance verdict: the hot set and its ceilings,
    or why the window was not flagged, or why it has no imbalance figures."""
    reasons: list[str] = []
    tensor, dram = _f(row, "tensor_active_mean"), _f(row, "dram_active_mean")
    ratio = _f(row, "imbalance_ratio")
    thr = imbalance_threshold(labeller)
    hot = _f(row, "hot_gpu")
    hot_set = row_hot_set(row)
    if hot_set:
        pers = str(row.get("persistence") or "")
        top = entity_name(int(hot)) if math.isfinite(hot) else entity_name(hot_set[0])
        shares = format_hot_set(hot_set, _f(row, "hot_share"), _f(row, "cold_share"))
        reasons.append(f"hot set {shares}; the busiest, {top}, carries "
                       f"{ratio:.2f}× the mean (threshold {thr:.2f}×): flagged imbalanced"
                       + (f", {pers}" if pers else ""))
        for g in hot_set:
            c = (ceilings or {}).get(g)
            if c is not None:
                reasons.append("why " + (c.get("line") or describe_ceiling(g, c)))
    elif math.isfinite(ratio):
        why = ("not a decode window" if phase != "decode"
               else f"under the {thr:.2f}× threshold" if ratio <= thr
               else "not for enough consecutive windows")
        reasons.append(f"max/mean work {ratio:.2f}×: not flagged ({why})")
    elif _f(row, "load_mean") < IDLE_LOAD:
        reasons.append(f"idle (mean load under {IDLE_LOAD:g} %): no imbalance figures")
    elif tensor + dram < IDLE_WORK:
        reasons.append(f"near idle (tensor + DRAM {tensor + dram:.1f} %, under {IDLE_WORK:g} %; "
                       f"no GPU busy {IDLE_BUSY:g} % of the time): nothing to be uneven about, "
                       f"no imbalance figures")
    return reasons


def _features(row: dict, gpus: list[int], scores: dict[str, float]) -> list[tuple[str, str]]:
    """``explain_window``'s feature table: ``(name, value text)`` rows, one load per GPU."""
    busiest = _f(row, "load_max")
    tensor, dram = _f(row, "tensor_active_mean"), _f(row, "dram_active_mean")
    ratio = _f(row, "imbalance_ratio")
    hot_set = row_hot_set(row)
    features = [
        ("phase scores", " / ".join(f"{p[0]} {_f(row, f'p_{p}'):.2f}" for p in PHASE_ORDER)
         if all(math.isfinite(v) for v in scores.values()) else "n/a"),
        ("confidence", _pct(_f(row, "confidence") * 100)),
        ("load mean / max", f"{_pct(_f(row, 'load_mean'))} / {_pct(busiest)}"),
        ("tensor active (mean)", _pct(tensor)),
        ("DRAM active (mean)", _pct(dram)),
        ("power / limit (mean)", _pct(_f(row, "power_frac_mean") * 100)),
        ("max / mean work", f"{ratio:.2f}×" if math.isfinite(ratio) else "n/a"),
        ("hot set", format_hot_set(hot_set, _f(row, "hot_share"), _f(row, "cold_share"))
         or "none"),
        ("balancedness (mean/max)", f"{_f(row, 'balancedness'):.2f}"
         if math.isfinite(_f(row, "balancedness")) else "n/a"),
        ("straggler tax", _pct(_f(row, "straggler_tax") * 100)),
    ]
    features += [(f"{entity_name(g)} load", _pct(_f(row, f"load_g{g}"))) for g in gpus]
    return features
