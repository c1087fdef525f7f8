"""What a time range adds up to: phase time, decode imbalance, the hot set, per-GPU activity
and the server's own figures, from the classifier's windows and the samples.

Everything here is read from the ``classify_samples`` windows of the range, so a report and the
dashboard's ribbon agree window for window:

- ``time_s[phase]`` = the time the windows labelled ``phase`` stand for (``window_time_s``:
  the time to the next window, ``window_s`` for windows side by side; a 1-Hz source's 0.5-s
  window stands for the second until the next reading).
- decode ``imbalance_ratio`` (max/mean GPU load), ``balancedness`` (mean/max, SGLang's and
  vLLM's EPLB term) and ``straggler_tax`` (1 - mean/max of the GPUs' busy time: the share of
  GPU-time spent waiting for the slowest rank; ``classifier.imbalance``) are the means over the
  same windows: the decode windows with figures (``figure_windows``: idle windows, under
  ``imbalance.IDLE_LOAD``, have none), and ``figures_text`` says over how many.  Windows are of equal length, so the mean straggler tax
  is the share of the decode GPU-time lost to waiting.
- the **hot set** of a flagged window is every GPU whose work exceeds the fair share
  (``classifier.imbalance``: e.g. GPUs 1, 3, 5, 7 at 18 % of the work each vs 7 %); the hot
  set of the range is the set flagged most often.  It *stays* when it holds at least
  ``STAYS_SHARE`` of the imbalanced windows, else it *rotates*; ``hot_set.describe_hot_set``
  words it (``hot_text``) for every surface.  ``hot_gpus`` counts, per GPU,
  the imbalanced windows it was hot in (``imbalance.persistence_by_gpu``); the hot GPU is the
  GPU hot most often (lowest index on a tie).
- why, per hot GPU: ``hot_ceilings`` names the ceiling each GPU of the hot set leans on next to
  the others (``imbalance.ceilings``: tensor pipes, DRAM, PCIe, NVLink, or launch-bound).

Missing values are NaN (None in the dicts made for JSON), never 0.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from tealeaves.classifier.hot_set import STAYS_SHARE
from tealeaves.classifier.imbalance import (
    ceilings,
    describe_ceiling,
    hot_set_of,
    persistence_by_gpu,
)
from tealeaves.classifier.rules import PHASE_ORDER
from tealeaves.data.metrics import METRIC_BY_NAME
from tealeaves.data.schema import peers

#: Per-GPU columns of the sample schema averaged over the range, with their units (from the
#: metric table, ``data.metrics``).
GPU_COLUMNS: tuple[tuple[str, str], ...] = tuple(
    (c, METRIC_BY_NAME[c].unit) for c in (
        "gpu_util", "sm_active", "sm_occupancy", "tensor_active", "dram_active",
        "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s",
        "nvlink_rx_bytes_per_s", "power_w", "sm_clock_mhz"))
#: ``gpu_util`` at or above this (%) counts a sample as busy (a kernel ran).
BUSY_UTIL = 5.0


def _mean(x) -> float:
    a = np.asarray(x, dtype=float)
    a = a[np.isfinite(a)]
    return float(a.mean()) if a.size else math.nan


def window_time_s(windows: pd.DataFrame, window_s: float) -> np.ndarray:
    """The time each window stands for, s ((n,), in the frame's order): the time to the next
    window's start (``window_s`` for windows side by side; a 1-Hz source's 0.5-s window
    stands for its second, a 1.9-Hz source's for its 0.5 or 1 s), at least ``window_s``.
    Where the next window is further than ``max(window_s, 2.5 x`` the median step``)`` (a
    gap) and for the last window: ``max(window_s,`` the median step``)``.  Counted at
    ``window_s``, a 1-Hz source's phases added up to half its range."""
    n = len(windows)
    if not n:
        return np.zeros(0)
    start = windows["start"].to_numpy(dtype=float)
    order = np.argsort(start, kind="stable")
    until = np.diff(start[order])
    step = max(window_s, float(np.median(until))) if len(until) else window_s
    until = np.r_[until, np.inf]
    out = np.empty(n)
    out[order] = np.where(until <= max(window_s, 2.5 * step), np.maximum(until, window_s),
                          step)
    return out


def phase_summary(windows: pd.DataFrame, window_s: float) -> dict:
    """Time and share of the range in each phase.

    Args:
        windows: ``classify_samples`` output for the range.
        window_s: window length, s.

    Returns:
        ``{"windows": n, "time_s": {phase: s}, "share": {phase: 0-1}}`` over ``PHASE_ORDER``
        (plus ``mixed`` when present); ``time_s`` is the time the phase's windows stand for
        (``window_time_s``), ``share`` the phase's share of the windows (NaN without windows).
    """
    counts = windows["phase"].value_counts() if len(windows) else pd.Series(dtype=int)
    phases = list(PHASE_ORDER) + [p for p in counts.index if p not in PHASE_ORDER]
    n = len(windows)
    held = pd.Series(window_time_s(windows, window_s), index=windows.index) \
        .groupby(windows["phase"]).sum() if n else pd.Series(dtype=float)
    return {"windows": n,
            "time_s": {p: float(held.get(p, 0.0)) for p in phases},
            "share": {p: (float(counts.get(p, 0)) / n if n else math.nan) for p in phases}}


#: ``share_summary``'s ``source`` values: the windows' shares are the share model's
#: calibrated shares of time, or the labeller's scores standing in for them.
CALIBRATED = "calibrated"


def share_summary(windows: pd.DataFrame, source: str | None = None,
                  inputs: dict | None = None) -> dict:
    """A range's phase shares of time and what its verdicts stood on.

    Args:
        windows: ``classify_samples`` output (``share_idle`` / ``share_prefill`` /
            ``share_decode``, 0-1 each, rows summing to 1).
        source: ``"calibrated"`` or ``"rules' scores"`` (default: ``windows.attrs["shares"]``,
            None when the frame does not say).
        inputs: what the verdicts stood on (default: ``windows.attrs["inputs"]``:
            ``{"counters", "rate_hz", "kind", "text"}``; None when the frame does not say).

    Returns:
        ``shares`` (``{phase: mean share over the windows with shares, 0-1}`` in
        ``PHASE_ORDER``; windows are of equal length, so these are the range's time-weighted
        shares; NaN without such windows), ``windows`` (windows with shares), ``source``,
        ``calibrated`` (bool), ``inputs`` and the lines ``line`` (``"phase shares over the
        range: decode 61 %, prefill 24 %, idle 15 % (calibrated)"``, largest first) and
        ``inputs_line`` (``"verdicts stood on: sm_active, ... at 10 Hz per GPU"``; ``""``
        when unknown).
    """
    cols = [f"share_{p}" for p in PHASE_ORDER]
    if len(windows) and all(c in windows for c in cols):
        sh = windows[cols].to_numpy(dtype=float)
        sh = sh[np.isfinite(sh).all(axis=1)]
    else:
        sh = np.zeros((0, len(PHASE_ORDER)))
    shares = {p: float(sh[:, k].mean()) if len(sh) else math.nan
              for k, p in enumerate(PHASE_ORDER)}
    source = windows.attrs.get("shares") if source is None else source
    inputs = windows.attrs.get("inputs") if inputs is None else inputs
    calibrated = source == CALIBRATED
    if len(sh):
        parts = ", ".join(f"{p} {v:.0%}".replace("%", " %")
                          for p, v in sorted(shares.items(), key=lambda kv: -kv[1]))
        how = ("calibrated" if calibrated else
               "the labeller's scores, not calibrated shares" if source else "")
        line = f"phase shares over the range: {parts}" + (f" ({how})" if how else "")
    else:
        line = "phase shares over the range: n/a (no window carries shares)"
    text = (inputs or {}).get("text") or ""
    return {"shares": shares, "windows": len(sh), "source": source,
            "calibrated": calibrated, "inputs": inputs, "line": line,
            "inputs_line": f"verdicts stood on: {text}" if text else ""}


def window_hot_sets(windows: pd.DataFrame) -> list[tuple[int, ...]]:
    """The hot set of each window (empty unless flagged): its ``hot_set`` column, or, for a
    frame without one, ``hot_gpu`` as a set of one."""
    if not len(windows):
        return []
    flag = (windows["imbalanced"].eq(True).to_numpy() if "imbalanced" in windows
            else np.ones(len(windows), dtype=bool))
    if "hot_set" in windows:
        sets = [hot_set_of(v) for v in windows["hot_set"]]
    else:
        hot = windows["hot_gpu"].to_numpy(dtype=float) if "hot_gpu" in windows \
            else np.full(len(windows), np.nan)
        sets = [(int(h),) if math.isfinite(h) else () for h in hot]
    return [s if f else () for s, f in zip(sets, flag, strict=True)]


def set_text(hot_set) -> str:
    """A hot set as its ``hot_set`` cell: ``"1,3,5,7"`` (``""`` for none)."""
    return ",".join(str(int(g)) for g in (hot_set or ()))


def figure_windows(windows: pd.DataFrame) -> np.ndarray:
    """Bool per window: a decode window with imbalance figures (a finite ``imbalance_ratio``:
    two GPUs with work and load at or above ``imbalance.IDLE_LOAD``).  A range's ratio,
    balancedness and straggler tax are all means over these windows, the same ones."""
    if not len(windows):
        return np.zeros(0, dtype=bool)
    dec = (windows["phase"] == "decode").to_numpy()
    ratio = (windows["imbalance_ratio"].to_numpy(dtype=float) if "imbalance_ratio" in windows
             else np.full(len(windows), np.nan))
    return dec & np.isfinite(ratio)


def figures_text(imb: dict) -> str:
    """Which windows a range's imbalance figures are over, from ``imbalance_summary``:
    ``"over 12 of 100 windows (the decode windows with load)"``; ``"idle: no imbalance figures,
    nothing to be uneven about (every decode window under 0.5 % load, or under 1 % tensor +
    DRAM work with no GPU busy 5 % of the time)"``; ``"no imbalance figures: no decode
    window"``; ``"no imbalance figures: no decode window holds the work of two or more
    GPUs"``."""
    from tealeaves.classifier.imbalance import IDLE_BUSY, IDLE_LOAD, IDLE_WORK

    n, m = imb["windows"], imb["figure_windows"]
    if m:
        return f"over {m} of {n} window{'s' if n != 1 else ''} (the decode windows with load)"
    if not imb["decode_windows"]:
        return "no imbalance figures: no decode window"
    if imb["idle_decode_windows"] == imb["decode_windows"]:
        return (f"idle: no imbalance figures, nothing to be uneven about (every decode "
                f"window under {IDLE_LOAD:g} % load, or under {IDLE_WORK:g} % tensor + DRAM "
                f"work with no GPU busy {IDLE_BUSY:g} % of the time)")
    return "no imbalance figures: no decode window holds the work of two or more GPUs"


def hot_story(windows: pd.DataFrame):
    """The range's hot set in words (``hot_set.describe_hot_set`` over its windows' hot sets
    and shares)."""
    from tealeaves.classifier.hot_set import describe_hot_set

    sets = window_hot_sets(windows)
    col = (lambda c: windows[c].to_numpy(dtype=float) if c in windows
           else None)
    return describe_hot_set(sets, col("hot_share") if len(windows) else None,
                            col("cold_share") if len(windows) else None)


def imbalance_summary(windows: pd.DataFrame) -> dict:
    """Decode imbalance over a range, from its windows.

    Returns:
        ``windows`` (of the range); ``decode_windows``; ``figure_windows`` (decode windows
        with figures, ``figure_windows``) and ``idle_decode_windows`` (decode windows without
        figures whose mean load is under ``imbalance.IDLE_LOAD`` or that are near idle,
        ``imbalance.near_idle``); ``imbalance_ratio``, ``balancedness``,
        ``straggler_tax``: means over the figure windows, the same windows for all three
        (NaN when none); ``figures_text`` (``figures_text``: which windows they are over, or
        why there are none); ``imbalanced_windows`` (flagged); ``hot_set`` (sorted GPUs of
        the hot set flagged most often, ``[]`` when none; lowest set on a tie),
        ``hot_set_windows`` (windows flagged with exactly that set), ``hot_share`` /
        ``cold_share`` (mean share, %, of the summed work held by a GPU of that set / by
        another GPU, over those windows; NaN when none); ``hot_sets`` ({``"1,3,5,7"``:
        flagged windows}, most first); ``hot_gpus`` ({gpu: flagged windows it was hot in},
        ``persistence_by_gpu``, most first, lowest index on a tie); ``hot_gpu`` (the first
        of ``hot_gpus``, or None); ``hot_pattern``: ``"stays"`` (the hot set holds >=
        ``STAYS_SHARE`` of the flagged windows), ``"rotates"``, or ``"none"``;
        ``hot_changes``: times the hot set changed between consecutive flagged windows;
        ``hot_text`` (``hot_set.HotSetStory.text``: the set, its work against the rest,
        stays or rotates between which sets) and ``hot_story`` (its ``to_json``).
    """
    from tealeaves.classifier.imbalance import IDLE_LOAD, IDLE_WORK

    n = len(windows)
    dec = windows[windows["phase"] == "decode"] if n else windows
    flagged = windows[windows["imbalanced"].eq(True)] if n else windows
    sets = [s for s in window_hot_sets(flagged) if s]
    if len(flagged) and "hot_set" in flagged:
        per_gpu = persistence_by_gpu(flagged)
    else:
        per_gpu = {}
        for s in sets:
            for g in s:
                per_gpu[g] = per_gpu.get(g, 0) + 1
    hot_gpus = {int(g): int(n) for g, n in sorted(per_gpu.items(), key=lambda kv: (-kv[1],
                                                                                 kv[0]))}
    story = hot_story(windows)
    top = story.top
    fig = windows[figure_windows(windows)] if n else windows
    load = dec["load_mean"].to_numpy(dtype=float) if "load_mean" in dec else \
        np.full(len(dec), np.nan)
    pipes = (dec["tensor_active_mean"].to_numpy(dtype=float)
             + dec["dram_active_mean"].to_numpy(dtype=float)) \
        if {"tensor_active_mean", "dram_active_mean"} <= set(dec.columns) else \
        np.full(len(dec), np.nan)
    # idle: under IDLE_LOAD, or near idle (``imbalance.near_idle``: its pipes under
    # IDLE_WORK; the busy gate is the detector's, whose ratio is then NaN)
    idle = int(np.sum((~(load >= IDLE_LOAD) | (pipes < IDLE_WORK)) & ~np.isfinite(
        dec["imbalance_ratio"].to_numpy(dtype=float)))) if len(dec) else 0
    out = {
        "windows": n,
        "decode_windows": len(dec),
        "figure_windows": len(fig),
        "idle_decode_windows": idle,
        "imbalance_ratio": _mean(fig["imbalance_ratio"]) if len(fig) else math.nan,
        "balancedness": _mean(fig["balancedness"]) if len(fig) else math.nan,
        "straggler_tax": _mean(fig["straggler_tax"]) if len(fig) else math.nan,
        "imbalanced_windows": len(flagged),
        "hot_set": list(story.gpus),
        "hot_set_windows": top.windows if top else 0,
        "hot_share": top.hot_share if top else math.nan,
        "cold_share": top.cold_share if top else math.nan,
        "hot_sets": {set_text(p.gpus): p.windows for p in story.parts},
        "hot_gpus": hot_gpus,
        "hot_gpu": next(iter(hot_gpus), None),
        "hot_pattern": story.pattern,
        "hot_changes": story.changes,
        "hot_text": story.text(),
        "hot_story": story.to_json(),
    }
    out["figures_text"] = figures_text(out)
    return out


def group_summary(windows: pd.DataFrame, grouping: dict | None = None) -> dict:
    """The serving groups a range's imbalance was judged in, and each group's part of it.

    Args:
        windows: ``classify_samples`` output (its ``attrs["grouping"]``).
        grouping: ``groups.Grouping.to_json()`` to use instead of the windows' own.

    Returns:
        ``grouping``'s keys (``groups``, ``source``, ``roles``, ``text``, ``why``,
        ``evidence``; one group of the windows' GPUs when the frame carries none) plus
        ``applies`` (a grouping was given or roles detected), ``judged`` (one dict per group:
        ``gpus``, ``name`` (``"0-3"``), ``role`` (or None), ``decode_windows``,
        ``imbalanced_windows`` (flagged windows in which a GPU of the group is hot),
        ``hot_set`` (the group's part of the hot set flagged most often, ``[]`` when none;
        lowest set on a tie), ``hot_set_windows``) and ``line`` (``groups_line``).
    """
    from tealeaves.classifier.groups import Grouping, feature_gpus, group_text

    g = Grouping.from_json(grouping if grouping is not None
                           else windows.attrs.get("grouping"))
    if g is None:
        gpus = feature_gpus(windows)
        g = Grouping((tuple(gpus),) if gpus else (), "none")
    dec = int((windows["phase"] == "decode").sum()) if len(windows) else 0
    sets = window_hot_sets(windows)
    judged = []
    for grp in g.groups:
        mine = set(grp)
        parts = [tuple(x for x in s if x in mine) for s in sets]
        parts = [s for s in parts if s]
        counts: dict[tuple[int, ...], int] = {}
        for s in parts:
            counts[s] = counts.get(s, 0) + 1
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        judged.append({"gpus": [int(x) for x in grp], "name": group_text(grp),
                       "role": g.roles.get(grp[0]) if g.roles else None,
                       "decode_windows": dec, "imbalanced_windows": len(parts),
                       "hot_set": list(ranked[0][0]) if ranked else [],
                       "hot_set_windows": ranked[0][1] if ranked else 0})
    out = {**g.to_json(), "applies": g.applies, "judged": judged}
    out["line"] = groups_line(out)
    return out


def groups_line(summary: dict) -> str:
    """One line on the serving groups from ``group_summary``: ``"groups 0-3, 4-7 (from
    --groups): imbalance judged within each group; group 0-3 hot 1, 3 in 6 of 6 decode
    windows, group 4-7 hot 5, 7 in 6 of 6"``, ``"roles: GPU 0 prefill-only, GPU 1
    decode-only (detected): no hot set, imbalance ratio or straggler tax across roles; tensor
    share of the work 0.64 on GPU 0 vs 0.06 on GPU 1 ..."``,
    ``"one group of 2 GPUs (no grouping given)"``."""
    from tealeaves.data.schema import entity_short

    text = summary["text"]
    if not summary["applies"]:
        return text
    judged = summary["judged"]
    many = [j for j in judged if len(j["gpus"]) >= 2]
    if summary["source"] == "roles":
        text += ": no hot set, imbalance ratio or straggler tax across roles"
    elif len(judged) > 1:
        text += ": imbalance judged within each group"
    else:
        text += ": imbalance judged within it"
    if many and len(judged) > 1:
        parts = []
        for j in many:
            hot = (f"hot {', '.join(entity_short(x) for x in j['hot_set'])} in "
                   f"{j['hot_set_windows']} of {j['decode_windows']} decode windows"
                   if j["hot_set"] else "no hot set")
            parts.append(f"group {j['name']} {hot}")
        text += "; " + ", ".join(parts)
    if summary.get("why"):
        text += f"; {summary['why']}"
    return text


def hot_ceilings(samples: pd.DataFrame, windows: pd.DataFrame, window_s: float,
                 devices: pd.DataFrame | None = None, gpus=None) -> dict[int, dict]:
    """Why, per hot GPU: the ceiling each GPU leans on in the imbalanced windows it was hot in.

    Args:
        samples: the range's samples (sample schema).
        windows: ``classify_samples`` output for them.
        window_s: window length, s (the windows').
        devices: device rows (limits for the features; optional).
        gpus: the GPUs to explain (default: the range's hot set, ``imbalance_summary``).

    Returns:
        ``{gpu: imbalance.ceilings entry + "windows" (imbalanced windows it was hot in) and
        "line" (``describe_ceiling``)}``, in ``gpus`` order; GPUs never hot are left out, and
        the dict is empty without an imbalanced window or samples.
    """
    from tealeaves.classifier.features import WindowFeatures
    from tealeaves.classifier.windows import window_start

    if gpus is None:
        gpus = imbalance_summary(windows)["hot_set"] if len(windows) else []
    sets = window_hot_sets(windows)
    starts = (np.round(windows["start"].to_numpy(dtype=float), 6) if len(windows)
              else np.array([]))
    hot_at = {int(g): {float(t) for t, s in zip(starts, sets, strict=True) if int(g) in s}
              for g in gpus}
    wanted = set().union(*hot_at.values()) if hot_at else set()
    if not wanted or samples is None or samples.empty:
        return {}
    ts = np.round(window_start(samples["timestamp"], window_s), 6)
    part = samples[np.isin(ts, np.fromiter(wanted, dtype=float))]
    feats = WindowFeatures(window_s, devices).fit_transform(part)
    if feats.empty:
        return {}
    idx = np.round(feats.index.to_numpy(dtype=float), 6)
    out: dict[int, dict] = {}
    for g, at in hot_at.items():
        rows = feats[np.isin(idx, np.fromiter(at, dtype=float))] if at else feats.iloc[:0]
        if rows.empty:
            continue
        entry = ceilings(rows, [g]).get(g)
        if entry is None:
            continue
        out[g] = {**entry, "windows": len(rows), "line": describe_ceiling(g, entry)}
    return out


def top_imbalanced(windows: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The ``n`` decode windows with the highest imbalance ratio (flagged ones first), with
    ``start``, ``end``, ``imbalance_ratio``, ``straggler_tax``, ``hot_gpu`` (NaN unless
    flagged), ``hot_set`` (``"1,3,5,7"``, ``""`` unless flagged), ``hot_share`` /
    ``cold_share`` (%, NaN unless flagged), ``imbalanced``, the window's phase shares
    ``share_idle`` / ``share_prefill`` / ``share_decode`` (0-1, NaN where the windows carry
    none) and ``verdict``, and ``top_gpu`` (the most loaded GPU)."""
    cols = ["start", "end", "imbalance_ratio", "straggler_tax", "hot_gpu", "hot_set",
            "hot_share", "cold_share", "imbalanced",
            *(f"share_{p}" for p in PHASE_ORDER), "verdict"]
    if not len(windows):
        return pd.DataFrame(columns=cols + ["top_gpu"])
    dec = windows[(windows["phase"] == "decode") & np.isfinite(windows["imbalance_ratio"])]
    dec = dec.sort_values(["imbalanced", "imbalance_ratio"], ascending=[False, False]).head(n)
    loads = [f"load_g{g}" for g in peers(int(c[6:]) for c in dec.columns
                                          if c.startswith("load_g") and c[6:].isdigit())]
    out = dec.reindex(columns=cols).copy()
    out["hot_set"] = [set_text(s) for s in window_hot_sets(dec)]
    if loads and len(dec):
        arr = dec[loads].to_numpy(dtype=float)
        ids = np.array([int(c[6:]) for c in loads])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            best = np.nanargmax(np.where(np.isfinite(arr), arr, -np.inf), axis=1)
        out["top_gpu"] = ids[best]
    else:
        out["top_gpu"] = np.nan
    return out.reset_index(drop=True)


#: A gap between two power readings longer than this (s) is a pause: no energy is counted
#: over it (``History``'s session gap).
ENERGY_GAP_S = 60.0


#: A pause is this many of the source's own intervals, where longer than ``ENERGY_GAP_S``
#: (a 0.1-Hz source's 10-s steps are no pause; ``History``'s session gap is the same rule).
PAUSE_INTERVALS = 20.0


def pauses(timestamps: np.ndarray) -> list[tuple[float, float]]:
    """The stretches of a range with no sample at all: consecutive distinct ``timestamps``
    (epoch s, any GPU, any order) further apart than ``max(ENERGY_GAP_S, PAUSE_INTERVALS x``
    the median step between them``)``.  Returns ``[(last sample before, first after), ...]``
    in time order; empty with fewer than two instants."""
    t = np.unique(np.asarray(timestamps, dtype=float))
    t = t[np.isfinite(t)]
    if len(t) < 2:
        return []
    dt = np.diff(t)
    limit = max(ENERGY_GAP_S, PAUSE_INTERVALS * float(np.median(dt)))
    at = np.flatnonzero(dt > limit)
    return [(float(t[i]), float(t[i + 1])) for i in at]


def partial_gpus(samples: pd.DataFrame) -> list[dict]:
    """The GPUs whose samples start after the range's first or end before its last by more
    than a pause (``pauses``' rule on the GPU's own steps): ``[{"gpu", "first", "last"},
    ...]`` (epoch s), by GPU.  A GPU that stopped reporting half-way is otherwise named among
    the range's GPUs as if it covered it all."""
    if samples.empty:
        return []
    t = samples["timestamp"].to_numpy(dtype=float)
    t0, t1 = float(np.nanmin(t)), float(np.nanmax(t))
    out = []
    for g, ts in samples.groupby("gpu")["timestamp"]:
        u = np.unique(ts.to_numpy(dtype=float))
        step = float(np.median(np.diff(u))) if len(u) > 1 else 0.0
        limit = max(ENERGY_GAP_S, PAUSE_INTERVALS * step)
        if u[0] - t0 > limit or t1 - u[-1] > limit:
            out.append({"gpu": int(g), "first": float(u[0]), "last": float(u[-1])})
    return out


#: The most gaps a summary lists (the longest, in time order); ``gap_count`` counts them all.
LISTED_GAPS = 100


def gaps_summary(timestamps: np.ndarray) -> dict:
    """``pauses`` of ``timestamps`` (epoch s) as a range states them: ``gap_count``, ``gap_s``
    (their seconds in all) and ``gaps`` (``[[last sample before, first after], ...]`` epoch s,
    the ``LISTED_GAPS`` longest, in time order)."""
    gaps = pauses(timestamps)
    listed = sorted(sorted(gaps, key=lambda g: g[0] - g[1])[:LISTED_GAPS])
    return {"gap_count": len(gaps), "gap_s": float(sum(b - a for a, b in gaps)),
            "gaps": [[a, b] for a, b in listed]}


def energy_j(samples: pd.DataFrame, max_gap_s: float = ENERGY_GAP_S) -> float:
    """Energy (J) of one GPU's samples: each ``power_w`` reading held until the next reading
    (left Riemann sum over time), intervals longer than ``max_gap_s`` not counted, so a
    pause between sessions adds nothing.  NaN when no interval has a power reading (unknown,
    never 0)."""
    p = samples[["timestamp", "power_w"]].dropna().sort_values("timestamp")
    if len(p) < 2:
        return math.nan
    t = p["timestamp"].to_numpy(dtype=float)
    w = p["power_w"].to_numpy(dtype=float)
    dt = np.diff(t)
    ok = dt <= max_gap_s
    return float(np.sum(w[:-1][ok] * dt[ok])) if ok.any() else math.nan


def gpu_table(samples: pd.DataFrame, windows: pd.DataFrame, window_s: float) -> pd.DataFrame:
    """One row per GPU: ``busy_share`` (share of samples with ``gpu_util`` >= ``BUSY_UTIL``,
    0-1), the mean of every ``GPU_COLUMNS`` column over the range (NaN where the source has
    none), ``energy_j`` (power integrated over the samples' time, pauses not counted:
    :func:`energy_j`), ``load_mean`` (mean window load, %) and
    ``hot_s`` (seconds flagged hot: the time the flagged windows whose hot set holds the
    GPU stand for, ``window_time_s``).  Index: GPU."""
    if samples.empty:
        return pd.DataFrame(columns=["busy_share", *(c for c, _ in GPU_COLUMNS), "hot_s"])
    s = samples.copy()
    for col, _ in GPU_COLUMNS:
        if col not in s:
            s[col] = np.nan
    g = s.groupby("gpu")
    out = g[[c for c, _ in GPU_COLUMNS]].mean()
    util = s["gpu_util"].astype(float)
    busy = (util >= BUSY_UTIL).where(util.notna())
    out.insert(0, "busy_share", busy.groupby(s["gpu"]).mean())
    out["energy_j"] = [energy_j(s[s["gpu"] == gpu]) for gpu in out.index]
    hot: dict[int, float] = {}
    held = window_time_s(windows, window_s)  # the time each window stands for
    for hs, w_s in zip(window_hot_sets(windows), held, strict=True):
        for gpu in hs:
            hot[gpu] = hot.get(gpu, 0.0) + float(w_s)
    out["load_mean"] = [_mean(windows[f"load_g{int(gpu)}"]) if f"load_g{int(gpu)}" in windows
                        else math.nan for gpu in out.index]
    out["hot_s"] = [float(hot.get(int(gpu), 0.0)) for gpu in out.index]
    out.index = out.index.astype(int)
    out.index.name = "gpu"
    return out


def server_summary(events: pd.DataFrame | None) -> dict | None:
    """The server's own figures over the range, from its log/metrics events
    (``data.server_log.events_frame`` or ``SampleStore.server_events`` rows).

    Returns:
        None without events; else ``events``, ``prefill_batches``, ``prefill_tokens`` (sum of
        ``#new-token``), ``gen_throughput_tok_s`` (mean of the decode lines' generation
        throughput), ``accept_len`` (mean accept length of the decode lines; NaN without
        speculative decoding), ``running_req`` (mean).
    """
    if events is None or len(events) == 0:
        return None
    kind = events["kind"] if "kind" in events else pd.Series("", index=events.index)

    def col(name: str, which: str | None = None) -> pd.Series:
        if name not in events:
            return pd.Series(dtype=float)
        v = pd.to_numeric(events[name], errors="coerce")
        return v[kind == which] if which else v

    pf = kind == "prefill"
    return {
        "events": len(events),
        "prefill_batches": int(pf.sum()),
        "prefill_tokens": float(col("new_token", "prefill").sum(min_count=1)),
        "gen_throughput_tok_s": _mean(col("gen_throughput_tok_s")),
        "accept_len": _mean(col("accept_len")),
        "running_req": _mean(col("running_req")),
    }


__all__ = ["BUSY_UTIL", "CALIBRATED", "GPU_COLUMNS", "STAYS_SHARE", "figure_windows",
           "figures_text", "gpu_table", "group_summary", "groups_line", "hot_ceilings",
           "hot_set_of", "hot_story",
           "imbalance_summary", "phase_summary", "server_summary", "set_text", "share_summary",
           "top_imbalanced",
           "window_hot_sets"]
