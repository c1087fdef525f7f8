"""The data half of the figures: samples binned per ``bin_s`` and GPU (``bin_lanes``), each GPU's
share of a window's load, the hot members, and the server lane's series and ``window_s`` cells.

Frames in, frames or arrays out; nothing here builds plotly objects.  Lanes are drawn from
**bins**: the samples' mean per ``bin_s``-second bin and GPU.  GPM columns (``sm_active`` ...)
are NaN on the samples between two GPM refreshes; the bin mean skips NaN, and a bin left
without any reading holds the previous bin's value for at most ``hold_s`` seconds.  Longer holes
stay NaN: they show as gaps, never as 0.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tealeaves.app.figures.geometry import (
    LANE_COLUMNS,
    MIN_SHARE_LOAD,
    PREFILL_SIZES,
    RIBBON_PHASES,
    SERVER_CELL_COLUMNS,
    SERVER_HOLD_S,
)
from tealeaves.classifier.incremental import SHARES_SOURCE_COLUMN

# -- data preparation ----------------------------------------------------------------------


def bin_index(t: float | np.ndarray, bin_s: float) -> np.ndarray | int:
    """Index of the ``bin_s``-second bin holding epoch time ``t`` (``floor(t / bin_s)``).

    A tiny epsilon absorbs float error so that ``k * bin_s`` falls in bin ``k``.
    """
    out = np.floor(np.asarray(t, dtype=float) / bin_s + 1e-9).astype(np.int64)
    return int(out) if out.ndim == 0 else out


def bin_lanes(samples: pd.DataFrame, gpus: list[int], k_start: int, k_end: int,
              bin_s: float = 0.1, hold_s: float = 0.35, dense: bool = False) -> pd.DataFrame:
    """Mean of every lane column per bin and GPU.

    Cost follows the samples, never ``k_end - k_start``: only bins holding a reading (and
    the held bins after them) are made, unless ``dense`` asks for every bin of the range.

    Args:
        samples: sample frame (``data.schema``); may start before bin ``k_start`` (those
            samples only seed the hold of empty bins) and must hold every sample of the
            emitted bins.
        gpus: GPU indices to emit columns for (absent GPUs give all-NaN columns).
        k_start: first bin index to emit (``bin_index``); bins cover ``[k*bin_s, (k+1)*bin_s)``.
        k_end: one past the last bin index to emit.
        bin_s: bin width in seconds (> 0).
        hold_s: an empty bin takes the previous bin's value when that is at most this many
            seconds back; GPM refreshes at 10 Hz leave some 0.1-s bins empty.
        dense: emit every bin ``k_start .. k_end-1`` (NaN rows where nothing was read);
            memory then follows the range, so only for ranges known to be short.

    Returns:
        Frame indexed by bin index ``k`` (increasing, within ``k_start .. k_end-1``; the bins
        that hold a reading or a held one, or every bin with ``dense``), columns a MultiIndex
        ``(column, gpu)`` over ``LANE_COLUMNS`` x ``gpus``, values in the column's unit (not
        scaled), NaN where there is no reading.

    Raises:
        ValueError: ``bin_s`` is not positive.
    """
    if not bin_s > 0:
        raise ValueError(f"bin_s must be positive, got {bin_s}")
    cols = pd.MultiIndex.from_product([LANE_COLUMNS, list(gpus)], names=["column", "gpu"])
    empty = pd.RangeIndex(k_start, max(k_end, k_start), name="k") if dense else \
        pd.Index([], dtype=np.int64, name="k")
    if samples.empty or k_end <= k_start or not gpus:
        return pd.DataFrame(np.nan, index=empty, columns=cols)
    frame = samples[["gpu", *LANE_COLUMNS]].copy()
    frame["k"] = bin_index(samples["timestamp"].to_numpy(), bin_s)
    frame = frame[(frame["k"] < k_end) & frame["gpu"].isin(gpus)]
    means = frame.groupby(["k", "gpu"])[list(LANE_COLUMNS)].mean().unstack("gpu")
    means.columns = means.columns.set_names(["column", "gpu"])
    means = means.reindex(columns=cols)
    hold = math.floor(hold_s / bin_s + 1e-9)
    ks = means.index.to_numpy(dtype=np.int64)
    # the bins to emit: each bin with a reading and the ``hold`` bins after it
    want = np.unique((ks[:, None] + np.arange(hold + 1)[None, :]).ravel()) if len(ks) else ks
    if dense:
        want = np.arange(k_start, k_end, dtype=np.int64)
    want = want[(want >= k_start) & (want < k_end)]
    grid = np.union1d(ks, want)
    full = means.reindex(pd.Index(grid, name="k"))
    if hold > 0 and len(full):
        # forward fill by bin distance, not by row: a value holds at most ``hold`` bins
        vals = full.to_numpy(dtype=np.float64)
        seen = np.where(np.isfinite(vals), grid[:, None].astype(np.float64), np.nan)
        last_k = pd.DataFrame(seen).ffill().to_numpy()
        filled = pd.DataFrame(vals).ffill().to_numpy()
        ok = np.isfinite(vals) | (grid[:, None] - last_k <= hold)
        full = pd.DataFrame(np.where(ok, filled, np.nan), index=full.index, columns=cols)
    full = full.reindex(pd.Index(want, name="k"))
    return full if dense else full[full.notna().any(axis=1)]


def gpu_shares(windows: pd.DataFrame, gpus: list[int],
               min_load: float = MIN_SHARE_LOAD) -> pd.DataFrame:
    """Each GPU's share of the summed load per window, in %.

    Args:
        windows: classifier windows (``load_g<i>`` columns, ``load_mean``).
        gpus: GPU indices (a GPU without a ``load_g<i>`` column is NaN).
        min_load: windows whose ``load_mean`` (%) is under this get NaN shares: the split of
            near-zero load is noise.

    Returns:
        Frame with one column per GPU (``gpus``), rows aligned with ``windows``; rows sum to
        100 where defined.
    """
    load = pd.DataFrame({g: windows.get(f"load_g{g}", pd.Series(np.nan, index=windows.index))
                         for g in gpus}, index=windows.index).astype(float)
    total = load.sum(axis=1, min_count=1)
    share = load.div(total.where(total > 0), axis=0) * 100.0
    busy = windows.get("load_mean", pd.Series(np.nan, index=windows.index)).astype(float)
    share.loc[~(busy >= min_load).to_numpy()] = np.nan
    return share


def hot_members(windows: pd.DataFrame, gpus: list[int]) -> np.ndarray:
    """``(len(windows), len(gpus))`` bool: GPU ``gpus[i]`` is in the window's hot set (every
    hot GPU of a flagged window; ``classifier.summary.window_hot_sets``)."""
    from tealeaves.classifier.imbalance import hot_set_of
    from tealeaves.classifier.summary import window_hot_sets

    if not len(windows):
        return np.zeros((0, len(gpus)), dtype=bool)
    if "hot_set" not in windows:
        sets = window_hot_sets(windows)
        return np.array([[g in hs for g in gpus] for hs in sets], dtype=bool)
    # a few distinct sets over many windows: one membership row per distinct cell
    codes, cells = pd.factorize(windows["hot_set"], use_na_sentinel=True)
    rows = np.array([[g in hot_set_of(c) for g in gpus] for c in cells] + [[False] * len(gpus)],
                    dtype=bool).reshape(len(cells) + 1, len(gpus))
    flag = (windows["imbalanced"].eq(True).to_numpy() if "imbalanced" in windows
            else np.ones(len(windows), dtype=bool))
    return rows[codes] & flag[:, None]  # code -1 (NaN): the last, empty row


def calibrated_rows(windows: pd.DataFrame) -> np.ndarray:
    """``(len(windows),)`` bool: the window's ``share_<phase>`` columns are the share model's
    calibrated shares of time (its ``SHARES_SOURCE_COLUMN``, else the frame's
    ``attrs["shares"]``, is ``"calibrated"``) and all three are known."""
    from tealeaves.classifier.summary import CALIBRATED

    n = len(windows)
    cols = [f"share_{p}" for p in RIBBON_PHASES[:3]]
    if not n or not all(c in windows for c in cols):
        return np.zeros(n, dtype=bool)
    if SHARES_SOURCE_COLUMN in windows:
        ok = (windows[SHARES_SOURCE_COLUMN] == CALIBRATED).to_numpy(dtype=bool)
    else:
        ok = np.full(n, windows.attrs.get("shares") == CALIBRATED)
    return ok & np.isfinite(windows[cols].to_numpy(dtype=float)).all(axis=1)


def ribbon_shares(windows: pd.DataFrame) -> np.ndarray:
    """``(len(windows), len(RIBBON_PHASES))`` each window's share of time (0-1) in every
    ribbon phase: its calibrated shares where it carries them (``calibrated_rows``), else 1
    for the phase it was labelled (the rules' or model's scores are not shares of time)."""
    n = len(windows)
    out = np.zeros((n, len(RIBBON_PHASES)))
    if not n:
        return out
    phase = windows["phase"].astype(str).to_numpy()
    for k, p in enumerate(RIBBON_PHASES):
        out[:, k] = phase == p
    cal = calibrated_rows(windows)
    if cal.any():
        sh = windows[[f"share_{p}" for p in RIBBON_PHASES[:3]]].to_numpy(dtype=float)
        out[cal, :3] = sh[cal]
        out[cal, 3:] = 0.0
    return out


def mixed_with(windows: pd.DataFrame) -> np.ndarray:
    """``(len(windows),)`` str: for a window whose ``verdict`` is mixed (no phase holds
    ``classifier.shares.NAMED_SHARE`` of it: ``"mixed: decode 55 % · prefill 30 %"``), the
    phase it is mixed with, the one of the largest share other than the phase it is drawn in
    (its ``phase``); ``""`` for every other window (and for frames without verdicts)."""
    n = len(windows)
    out = np.full(n, "", dtype=object)
    cols = [f"share_{p}" for p in RIBBON_PHASES[:3]]
    if not n or "verdict" not in windows or not all(c in windows for c in cols):
        return out
    mixed = windows["verdict"].astype(str).str.startswith("mixed").to_numpy(dtype=bool)
    if not mixed.any():
        return out
    sh = np.nan_to_num(windows[cols].to_numpy(dtype=float), nan=-1.0)
    phase = windows["phase"].astype(str).to_numpy()
    for k, p in enumerate(RIBBON_PHASES[:3]):
        sh[phase == p, k] = -1.0  # not the phase the window is drawn in
    other = np.asarray(RIBBON_PHASES[:3], dtype=object)[np.argmax(sh, axis=1)]
    out[mixed] = other[mixed]
    return out


def as_float(v) -> float:
    """``v`` as a float; None, text that is no number, and inf are NaN (missing)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


def _col(frame: pd.DataFrame, name: str) -> np.ndarray:
    if frame is None or name not in frame.columns:
        return np.full(0 if frame is None else len(frame), np.nan)
    return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)


def server_series(events: pd.DataFrame | None, metrics: pd.DataFrame | None
                  ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each server-lane series as ``{key: (time, value, hold_s)}``, sorted by time.

    Log events (``SampleStore.server_events`` frame) are preferred; a series the events do not
    carry is taken from the ``/metrics`` scrapes (``SampleStore.server_metrics`` frame, turned
    into fields by ``classifier.server_summary.summary``).  Keys: ``gen_tok_s`` (SGLang decode
    ``gen throughput``, vLLM ``Avg generation throughput``, metrics gen throughput or decode
    token rate), ``prompt_tok_s`` (vLLM ``Avg prompt throughput``, SGLang ``input
    throughput``, metrics prefill token rate), ``running_req``, ``queue_req``, ``accept_len``.
    ``hold_s`` is how long each value stands: the line's interval (``timestamp - start``)
    clipped to ``SERVER_HOLD_S``.  NaN values are dropped, never turned into 0.
    """
    lo, hi = SERVER_HOLD_S
    sources = {
        "gen_tok_s": (("gen_throughput_tok_s",), ("gen_throughput_tok_s", "decode_tokens_per_s")),
        "prompt_tok_s": (("prompt_throughput_tok_s", "input_throughput_tok_s"),
                         ("prefill_tokens_per_s",)),
        "running_req": (("running_req",), ("running_req",)),
        "queue_req": (("queue_req",), ("queue_req",)),
        "accept_len": (("accept_len",), ("accept_len",)),
    }
    summ = None
    if metrics is not None and not metrics.empty:
        from tealeaves.classifier.server_summary import summary

        summ = summary(metrics).sort_values("timestamp")
    ev = None
    if events is not None and not events.empty:
        ev = events[pd.notna(events["timestamp"])].sort_values("timestamp", kind="stable")
    out: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for key, (ev_cols, m_cols) in sources.items():
        t = v = hold = np.empty(0)
        if ev is not None:
            et = ev["timestamp"].to_numpy(dtype=float)
            st = _col(ev, "start")
            val = np.full(len(ev), np.nan)
            for c in ev_cols:
                val = np.where(np.isfinite(val), val, _col(ev, c))
            ok = np.isfinite(val)
            t, v = et[ok], val[ok]
            hold = np.nan_to_num(np.clip((et - st)[ok], lo, hi), nan=2.0)
        if not len(t) and summ is not None and len(summ):
            mt = summ["timestamp"].to_numpy(dtype=float)
            val = np.full(len(summ), np.nan)
            for c in m_cols:
                val = np.where(np.isfinite(val), val, _col(summ, c))
            gap = np.diff(mt, prepend=np.nan)
            ok = np.isfinite(val)
            t, v = mt[ok], val[ok]
            hold = np.nan_to_num(np.clip(gap[ok] * 1.5, lo, hi), nan=2.0)
        out[key] = (t, v, hold)
    return out


def server_cells(events: pd.DataFrame | None, metrics: pd.DataFrame | None, c_start: int,
                 c_end: int, cell_s: float = 0.5) -> pd.DataFrame:
    """The server lane on the cell grid: one row per ``cell_s``-second cell.

    Args:
        events: ``SampleStore.server_events`` frame (may be empty or None); must hold every
            event of the emitted cells and, for the held values, those up to
            ``SERVER_HOLD_S[1]`` seconds before.
        metrics: ``SampleStore.server_metrics`` frame (may be empty or None), same span.
        c_start, c_end: cell indices to emit (``bin_index(t, cell_s)``), ``c_end`` excluded.
        cell_s: cell width in seconds (the classifier window, so cells extend like windows).

    Returns:
        Frame indexed by cell ``c`` with ``SERVER_CELL_COLUMNS``: the line values
        (``gen_tok_s`` ... ``accept_len``: the newest value at or before the cell's end, while
        it stands; NaN otherwise) and the cell's prefill batches (``pf_t`` time of the first
        one, epoch s; ``pf_new`` / ``pf_cached`` summed new and cached tokens; ``pf_queue`` /
        ``pf_running`` of the last one; ``pf_batches`` count; NaN / 0 without any).
    """
    index = pd.RangeIndex(c_start, max(c_end, c_start), name="c")
    out = pd.DataFrame(np.nan, index=index, columns=list(SERVER_CELL_COLUMNS))
    out["pf_batches"] = 0
    if not len(index):
        return out
    c = index.to_numpy(dtype=float)
    lo, hi = c * cell_s, (c + 1) * cell_s
    for key, (t, v, hold) in server_series(events, metrics).items():
        if not len(t):
            continue
        i = np.searchsorted(t, hi - 1e-9, side="left") - 1
        ok = i >= 0
        ic = np.clip(i, 0, None)
        ok &= t[ic] + hold[ic] >= lo
        out[key] = np.where(ok, v[ic], np.nan)
    if events is not None and not events.empty and "kind" in events.columns:
        pf = events[(events["kind"] == "prefill") & pd.notna(events["timestamp"])]
        if len(pf):
            pf = pf.sort_values("timestamp", kind="stable")
            pt = pf["timestamp"].to_numpy(dtype=float)
            pc = bin_index(pt, cell_s)
            f = pd.DataFrame({"c": pc, "t": pt, "new": _col(pf, "new_token"),
                              "cached": _col(pf, "cached_token"), "queue": _col(pf, "queue_req"),
                              "running": _col(pf, "running_req")})
            f = f[(f["c"] >= c_start) & (f["c"] < c_end)]
            if len(f):
                g = f.groupby("c")
                agg = pd.DataFrame({
                    "pf_t": g["t"].min(), "pf_new": g["new"].sum(min_count=1),
                    "pf_cached": g["cached"].sum(min_count=1), "pf_queue": g["queue"].last(),
                    "pf_running": g["running"].last(), "pf_batches": g["t"].size()})
                out.loc[agg.index, list(agg.columns)] = agg.to_numpy(dtype=float)
    out["pf_batches"] = out["pf_batches"].astype(int)
    return out


def prefill_size_class(new_tokens: float) -> int:
    """Index into ``PREFILL_SIZES`` for a cell's new prefill tokens (unknown: the smallest)."""
    if new_tokens is None or not math.isfinite(new_tokens):
        return 0
    return next(i for i, (top, _, _) in enumerate(PREFILL_SIZES) if new_tokens < top)


