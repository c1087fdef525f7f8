"""What a window's verdict may stand on (issue 38): no phase from an instant or from whichever
GPUs happened to report, no comparison of GPUs on different counters or of GPUs that serve
nothing, and the source's rate as it is.

- **Enough readings** (``window_doubts``): every GPU still reporting (``data.schema.peers`` of
  the GPUs with a reading in the trace that have a row in the window or a reading within
  ``EXPECT_S`` of it) must have a reading in the window, and at least ``MIN_READINGS``
  within ``CONTEXT_S`` of it, or within ``CONTEXT_INTERVALS`` of its own median interval
  where that is longer (``nvidia-smi -l 5`` reads every 5 s).  A GPU reporting around a window but not in it would make the
  window's across-GPU features those of another set of GPUs (a 90 % GPU alone reads
  prefill, with its 30 % peer decode); one reading alone is an instant, not a phase.  Such a
  window says "cannot tell" (no phase, no confidence, no shares).
- **A common counter** (``comparable_features``): GPUs are compared (imbalance, hot set) only
  on a counter every GPU with a load reports in that window: tensor + DRAM activity, else
  ``sm_active``, ``gr_engine_active`` or ``gpu_util``; a window without one has no imbalance
  figures, and the summary names the counters each GPU had.
- **Serving GPUs** (``comparable_features``): a GPU whose memory use is reported and under
  ``NO_MEMORY_BYTES`` in a window holds no model (not a TP/EP rank) and is left out of that
  window's imbalance.
- **The rate** (``sample_rate_hz``): 1 / the median interval between a GPU's readings, pooled
  over the GPUs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tealeaves.classifier.windows import RATE_METRICS, per_gpu_means
from tealeaves.data.schema import entity_name, peers

#: Least readings of each GPU within ``CONTEXT_S`` of a window for it to be labelled: one
#: reading is an instant.  A 1-Hz nvidia-smi source gives 2-3 (the window's and its
#: neighbours'), a 10-Hz one 25; a single sweep of a dmon file or a one-row CSV gives 1.
MIN_READINGS = 2
#: Seconds either side of a window whose readings count towards ``MIN_READINGS`` (nvidia-smi's
#: slowest default rate, 1 Hz, is one reading a second).
CONTEXT_S = 1.0
#: A GPU read more slowly than every ``CONTEXT_S`` (``nvidia-smi -l 2``, ``-l 5``) counts its
#: readings within this many of its median intervals: the window's and a neighbour's.
CONTEXT_INTERVALS = 1.5
#: A GPU with a reading within this many seconds of a window (or a row in it, N/A or not)
#: is still reporting: the window needs its reading.  nvidia-smi and dcgmi dmon default to
#: 1-s intervals; a field present in one row of four at 1 Hz comes every 4 s; a GPU
#: silent for longer has stopped, and the windows after it are of the GPUs left.
EXPECT_S = 5.0
#: A GPU using less memory than this holds no model: a CUDA context alone takes about
#: 0.3-0.6 GiB on an H100/H200, a served model's weights and KV cache tens of GiB (an idle GPU
#: with no process reads 0-4 MiB in nvidia-smi).
NO_MEMORY_BYTES = 1024 ** 3
#: Metrics that count as a reading of a GPU (its work, its activity or its power).
READING_METRICS = ("gpu_util", "sm_active", "gr_engine_active", "tensor_active",
                   "dram_active", "sm_occupancy", "mem_copy_util", "power_w")
#: Load counters GPUs may be compared on, first that every GPU reports (``features.gpu_load``'s
#: order); tensor + DRAM activity comes before them (``imbalance.gpu_work``).
LOAD_COUNTERS = ("sm_active", "gr_engine_active", "gpu_util")
#: Per-GPU columns of the features the imbalance reads (masked where GPUs are not compared).
_COMPARED = ("load_g", "busy_g", "sm_g", "tensor_g", "dram_g", "pcie_g", "nvlink_g")


def _reading_times(samples: pd.DataFrame, any_row: bool = False) -> dict[int, np.ndarray]:
    """Sorted times (epoch s) of each compared GPU's rows holding a reading (with
    ``any_row``, of all its rows, for the GPUs with a reading)."""
    cols = [c for c in READING_METRICS if c in samples]
    if samples.empty or not cols:
        return {}
    has = samples[cols].notna().any(axis=1).to_numpy()
    rows = samples.loc[has, ["gpu", "timestamp"]]
    keep = set(peers(pd.unique(rows["gpu"])))
    if any_row:
        rows = samples[["gpu", "timestamp"]]
    return {int(g): np.sort(t.to_numpy(dtype=float))
            for g, t in rows.groupby("gpu")["timestamp"] if int(g) in keep}


def _gpus_words(gpus) -> str:
    from tealeaves.classifier.groups import group_text

    gs = sorted(int(g) for g in gpus)
    return f"GPU{'s' if len(gs) > 1 else ''} {group_text(gs)}"


def window_doubts(samples: pd.DataFrame, starts, window_s: float) -> np.ndarray:
    """Why each window cannot be labelled (module docstring), ``""`` where it can.

    Args:
        samples: the sample frame the windows were cut from.
        starts: (n,) window starts, epoch s.
        window_s: window length, s.

    Returns:
        (n,) object array of strings: ``"cannot tell: no reading of GPU 1 in this window"``,
        ``"cannot tell: under 2 readings of GPUs 0-1 within 1 s"``, or ``""``.  Cost:
        O(GPUs x windows x log readings).
    """
    starts = np.asarray(starts, dtype=float)
    out = np.full(len(starts), "", dtype=object)
    times = _reading_times(samples)
    if not times or not len(starts):
        return out
    rows = _reading_times(samples, any_row=True)

    def within(t: np.ndarray, before: float, after: float) -> np.ndarray:
        eps = 1e-6
        return (np.searchsorted(t, starts + window_s + after - eps)
                - np.searchsorted(t, starts - before - eps))

    absent, few, reach = [], [], {}
    for g, t in times.items():
        n_in = within(t, 0.0, 0.0)
        step = float(np.median(np.diff(t))) if len(t) > 1 else 0.0
        reach[g] = max(CONTEXT_S, CONTEXT_INTERVALS * step)
        n_ctx = within(t, reach[g], reach[g])
        expected = (within(rows[g], 0.0, 0.0) > 0) | (within(t, EXPECT_S, EXPECT_S) > 0)
        absent.append((g, expected & (n_in == 0)))
        few.append((g, (n_in > 0) & (n_ctx < MIN_READINGS)))
    for i in range(len(starts)):
        gone = [g for g, m in absent if m[i]]
        thin = [g for g, m in few if m[i]]
        why = []
        if gone:
            why.append(f"no reading of {_gpus_words(gone)} in this window")
        if thin:
            why.append(f"under {MIN_READINGS} readings of {_gpus_words(thin)} within "
                       f"{max(reach[g] for g in thin):g} s")
        if why:
            out[i] = "cannot tell: " + "; ".join(why)
    return out


def _intervals(samples: pd.DataFrame) -> dict[int, np.ndarray]:
    """Each GPU's intervals between consecutive readings, s, of the first of
    ``windows.RATE_METRICS`` the source reads (empty arrays for a GPU read once; {} with no
    reading of any)."""
    for m in RATE_METRICS:
        if m not in samples:
            continue
        rows = samples.loc[samples[m].notna().to_numpy(), ["gpu", "timestamp"]]
        if rows.empty:
            continue
        return {int(g): np.diff(np.unique(t.to_numpy(dtype=float)))
                for g, t in rows.groupby("gpu")["timestamp"]}
    return {}


def sample_rate_hz(samples: pd.DataFrame) -> float:
    """The source's per-GPU rate, Hz: 1 / the median interval between consecutive readings of
    one GPU (pooled over the GPUs) of the first of ``windows.RATE_METRICS`` the source reads;
    NaN with no two readings of one GPU."""
    dts = list(_intervals(samples).values())
    dt = np.concatenate(dts) if dts else np.zeros(0)
    dt = dt[dt > 0]
    return float(1.0 / np.median(dt)) if len(dt) else float("nan")


def gpu_rates_hz(samples: pd.DataFrame) -> dict[int, float]:
    """Each GPU's rate, Hz: 1 / the median of its intervals (``_intervals``; GPUs with under
    two readings left out).  ``sample_rate_hz`` pools the intervals, so a fast GPU's many
    intervals outvote a slow one's: this tells them apart."""
    return {g: float(1.0 / np.median(dt[dt > 0]))
            for g, dt in _intervals(samples).items() if (dt > 0).any()}


def _mixed_rates(samples: pd.DataFrame) -> str:
    """The GPUs' rates in words where they differ by more than 1.5x ("10 Hz (GPU 0), 1 Hz
    (GPUs 1-3)"), "" where they agree."""
    rates = gpu_rates_hz(samples)
    if len(rates) < 2 or max(rates.values()) < 1.5 * min(rates.values()):
        return ""
    by: dict[str, list[int]] = {}
    for g, r in sorted(rates.items(), key=lambda kv: -kv[1]):
        by.setdefault(f"{r:.2g} Hz", []).append(g)
    return ", ".join(f"{hz} ({_gpus_words(gs)})" for hz, gs in by.items())


#: A slow source's readings of one sweep (nvidia-smi reads every GPU at nearly one instant,
#: stamped a few ms apart) are at most this share of its interval apart (``align_sweeps``).
SWEEP_SHARE = 0.25


def align_sweeps(samples: pd.DataFrame, window_s: float,
                 rates: dict[int, float] | None = None) -> pd.DataFrame:
    """``samples`` with each sweep of a slow source on one instant: where the slowest GPU
    reads under once a window (``gpu_rates_hz``), a sweep is the readings stamped less than
    ``SWEEP_SHARE`` of an interval after its first one, and they take its time, so a sweep
    straddling a window's edge (GPUs read at x.499 and x.502 s) is one window holding every
    GPU, not two windows each missing some (every window was "cannot tell").  A sweep that
    would hold two readings of one GPU (a faster stretch, a stray row) keeps its stamps, the
    others are still moved.  The frame as given when the source is fast or nothing moves.
    ``rates``: ``gpu_rates_hz(samples)`` where the caller has it."""
    if samples.empty or "gpu" not in samples:
        return samples
    rates = gpu_rates_hz(samples) if rates is None else rates
    if not rates or min(rates.values()) * window_s >= 1.0:
        return samples
    width = SWEEP_SHARE / min(rates.values())
    t = samples["timestamp"].to_numpy(dtype=float)
    u, inv = np.unique(t, return_inverse=True)
    if len(u) < 2:
        return samples
    first = np.zeros(len(u), dtype=np.int64)  # each instant's sweep: its first instant
    i = 0
    while i < len(u):  # one step a sweep: a sweep is never wider than ``width``
        j = int(np.searchsorted(u, u[i] + width, side="left"))
        first[i:j] = i
        i = j
    sweep = first[inv]
    keys = pd.DataFrame({"s": sweep, "t": t, **{c: samples[c].to_numpy()
                                                 for c in ("host", "gpu") if c in samples}})
    one = keys.drop_duplicates(["t", *keys.columns[2:]])
    twice = one.loc[one.duplicated(["s", *keys.columns[2:]], keep=False), "s"].unique()
    snapped = np.where(np.isin(sweep, twice), t, u[sweep])
    if np.array_equal(snapped, t):
        return samples
    out = samples.copy()
    out["timestamp"] = snapped
    return out


def _wide(per: pd.DataFrame, col: str, index: pd.Index, gpus: list[int]) -> np.ndarray:
    if col not in per:
        return np.full((len(index), len(gpus)), np.nan)
    return per[col].unstack("gpu").reindex(index=index, columns=gpus).to_numpy(dtype=float)


def comparable_features(feats: pd.DataFrame, samples: pd.DataFrame,
                        window_s: float) -> tuple[pd.DataFrame, list[str]]:
    """The features as the imbalance may compare them (module docstring), and lines saying
    what was left out.

    GPUs holding no memory (under ``NO_MEMORY_BYTES``, where reported) have their per-GPU
    columns (``load_g<i>``, ``busy_g<i>``, pipes) NaN in that window; a window whose GPUs
    share no counter has them NaN for every GPU; where they share one of
    ``LOAD_COUNTERS`` (and not tensor + DRAM activity), ``load_g<i>`` reads that counter.

    Returns:
        ``(features, lines, compared)``: a copy of ``feats``; lines such as ``"GPUs 4-7 hold
        no memory (under 1 GiB used): not serving, left out of the imbalance"``; the windows
        whose GPUs share a counter (or have one GPU with a load).
    """
    if feats.empty or samples.empty:
        return feats, [], len(feats)
    per = per_gpu_means(samples, window_s)
    gpus = [g for g in peers(pd.unique(per.index.get_level_values("gpu")))
            if f"load_g{g}" in feats]
    if not gpus:
        return feats, [], len(feats)
    index = pd.Index(np.round(feats.index.to_numpy(dtype=float), 6))
    out = feats.copy()
    mem = _wide(per, "mem_used_bytes", index, gpus)
    spare = np.isfinite(mem) & (mem < NO_MEMORY_BYTES)
    load = np.array(out[[f"load_g{g}" for g in gpus]].to_numpy(dtype=float))
    load[spare] = np.nan
    have = np.isfinite(load)
    has = {c: np.isfinite(_wide(per, c, index, gpus)) for c in LOAD_COUNTERS}
    pipes = np.isfinite(_wide(per, "tensor_active", index, gpus)) & \
        np.isfinite(_wide(per, "dram_active", index, gpus))
    several = have.sum(axis=1) >= 2

    def every(m: np.ndarray) -> np.ndarray:
        return (m | ~have).all(axis=1)

    common = np.full(len(index), "", dtype=object)
    for c in reversed(LOAD_COUNTERS):  # the first in order wins
        common[every(has[c])] = c
    common[every(pipes)] = "pipes"
    mixed = several & (common == "")
    for j, g in enumerate(gpus):
        for c in LOAD_COUNTERS:
            use = several & (common == c)
            if use.any():
                load[use, j] = _wide(per, c, index, [g])[use, 0]
        out[f"load_g{g}"] = np.where(spare[:, j] | mixed, np.nan, load[:, j])
        for p in _COMPARED[1:]:
            if f"{p}{g}" in out:
                out[f"{p}{g}"] = out[f"{p}{g}"].mask(spare[:, j] | mixed)
    lines = []
    if spare.any():  # said with the windows it holds for (an idle start or end is normal)
        left = [g for j, g in enumerate(gpus) if spare[:, j].any()]
        n = int(spare.any(axis=1).sum())
        where = ("in every window" if n == len(index)
                 else f"in {n} of {len(index)} windows")
        lines.append(f"{_gpus_words(left)} held no memory (under "
                     f"{NO_MEMORY_BYTES / 2**30:g} GiB used) {where}: not serving there, "
                     f"left out of those windows' imbalance")
    if mixed.any():
        had = "; ".join(f"{entity_name(g)}: " + (", ".join(
            c for c in ("tensor_active+dram_active", *LOAD_COUNTERS)
            if (pipes if c.startswith("tensor") else has[c])[mixed, j].any()) or "none")
            for j, g in enumerate(gpus))
        lines.append(f"imbalance: cannot tell in {int(mixed.sum())} of {len(index)} windows: "
                     f"no counter every GPU reports there ({had})")
    return out, lines, int(len(index) - mixed.sum())


def per_gpu_inputs(samples: pd.DataFrame, counters: list[str]) -> tuple[str, str]:
    """The counters a verdict stood on, said per GPU where not every GPU read them:
    ``("sm_active (GPU 1 only)", "GPU 0 has none of them")``; ``("", "")`` when every GPU
    read all."""
    gpus = sorted(_reading_times(samples))
    if len(gpus) < 2:
        return "", ""
    parts, any_of = [], set()
    for c in counters:
        name = c.split(" ")[0]
        if name not in samples:
            continue
        with_it = {int(g) for g in pd.unique(samples.loc[samples[name].notna(), "gpu"])}
        with_it &= set(gpus)
        any_of |= with_it
        parts.append(c if with_it == set(gpus) else f"{c} ({_gpus_words(with_it)} only)")
    if all("only)" not in p for p in parts) and any_of == set(gpus):
        return "", ""
    none = [g for g in gpus if g not in any_of]
    return ", ".join(parts), (f"{_gpus_words(none)} {'has' if len(none) == 1 else 'have'} "
                              f"none of them" if none else "")


def _cannot_tell_rows(feats: pd.DataFrame, why: np.ndarray, window_s: float,
                      columns: list[str]) -> pd.DataFrame:
    """Window rows with no phase, confidence, shares or imbalance: ``verdict`` says why."""
    starts = feats.index.to_numpy(dtype=float)
    out = pd.DataFrame({c: np.full(len(starts), np.nan) for c in columns})
    out["start"], out["end"] = starts, starts + window_s
    out["phase"] = pd.Series([None] * len(starts), dtype=object)
    out["hot_set"], out["persistence"] = "", ""
    out["imbalanced"] = False
    out["verdict"] = list(why)
    for c in columns:
        if c in feats and c in ("load_mean", "load_max", "tensor_active_mean",
                                "dram_active_mean", "power_frac_mean", "n_gpus") \
                or c.startswith("load_g"):
            out[c] = feats[c].to_numpy() if c in feats else np.nan
    return out


def classify_told(feats: pd.DataFrame, samples: pd.DataFrame, window_s: float,
                  labeller=None, groups=None, *, classify,
                  keep: tuple[float, float] | None = None) -> pd.DataFrame:
    """``classify`` (``classifier.classify_features``, passed in by the package: this module
    is one of its parts and does not import it) on the windows that can be told
    (``window_doubts``),
    the imbalance judged on ``comparable_features``; the others are rows with ``phase`` None,
    NaN confidence, shares and imbalance figures and a ``verdict`` saying why.

    Returns:
        The windows frame of ``classify_features`` (per-GPU ``load_g<i>`` as measured), in
        time order; ``attrs["inputs"]`` carries ``sample_rate_hz`` and the counters per GPU
        where they differ, ``attrs["evidence"]`` ``{"lines": [...], "told": windows with a phase,
        "windows": n, "compared": told windows whose GPUs share a counter}``.  With ``keep``
        (``(start, end)`` epoch s) only the windows overlapping ``[start, end)`` are
        returned, labelled among all, and the lines and counts are of those.
    """
    from tealeaves.classifier.shares import inputs_of

    fcols = [c for c in feats.columns if c.startswith("f_")]
    blank = 0
    if fcols and not feats.empty:
        held = feats[fcols].notna().any(axis=1).to_numpy()
        if keep is not None:
            start = feats.index.to_numpy(dtype=float)
            blank = int((~held & (start + window_s > keep[0]) & (start < keep[1])).sum())
        else:
            blank = int((~held).sum())
        feats = feats[held]
    why = window_doubts(samples, feats.index, window_s)
    ok = why == ""
    masked, lines, compared = comparable_features(feats[ok], samples, window_s)
    rate = sample_rate_hz(samples)
    windows = classify(masked, window_s, labeller, groups,
                       rate_hz=rate if np.isfinite(rate) else None)
    attrs = dict(windows.attrs)
    if keep is not None:  # the range's windows, labelled among their context's
        start = feats.index.to_numpy(dtype=float)
        inside = (start + window_s > keep[0]) & (start < keep[1])
        _, lines, compared = comparable_features(feats[ok & inside], samples, window_s)
        w0 = windows["start"].to_numpy(dtype=float)
        windows = windows[(w0 + window_s > keep[0]) & (w0 < keep[1])] \
            .reset_index(drop=True).copy()
        feats, why, ok = feats[inside], why[inside], ok[inside]
    for c in windows.columns:
        if c.startswith("load_g") and c in feats:
            windows[c] = feats.loc[ok, c].to_numpy()
    if (~ok).any():
        cols = list(windows.columns) + [c for c in feats.columns
                                        if c.startswith("load_g") and c not in windows]
        bad = _cannot_tell_rows(feats[~ok], why[~ok], window_s, cols)
        told = [windows.reindex(columns=cols)] if len(windows) else []  # no object columns
        windows = pd.concat([*told, bad], ignore_index=True) \
            .sort_values("start", kind="stable").reset_index(drop=True)
        windows["imbalanced"] = windows["imbalanced"].astype(bool)
        lines.append(f"cannot tell the phase of {int((~ok).sum())} of {len(ok)} windows "
                     f"(no phase, no confidence): every GPU still reporting needs a reading in "
                     f"the window and {MIN_READINGS} within {CONTEXT_S:g} s (or "
                     f"{CONTEXT_INTERVALS:g} of its own intervals, where longer)")
    if not feats.empty:
        inputs = inputs_of(feats, window_s, rate_hz=rate)
        mixed = _mixed_rates(samples)
        if mixed:  # the pooled rate is the fast GPUs': name each GPU's
            inputs["text"] = inputs["text"].replace(f" at {inputs['rate_hz']:.2g} Hz per GPU",
                                                    f" at {mixed}")
        per, none = per_gpu_inputs(samples, inputs["counters"])
        if per:
            inputs["text"] = (per + inputs["text"][len(", ".join(inputs["counters"])):]
                              + (f"; {none}" if none else ""))
            inputs["per_gpu"] = inputs["text"]
        attrs["inputs"] = inputs
    if blank:  # samples there, every field of them blank: no window, and it says so
        lines.append(f"{blank} window{'' if blank == 1 else 's'} with samples but no reading "
                     f"(every field blank: N/A, ERR! or a blank code) left out: no phase")
    attrs["evidence"] = {"lines": lines, "told": int(ok.sum()), "windows": len(ok),
                         "compared": int(compared)}
    windows.attrs = attrs
    return windows
