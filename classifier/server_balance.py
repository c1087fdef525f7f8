"""Balance read from the inference server's own ``/metrics``: data-parallel ranks and experts.

Two signals an engine exports about its own imbalance, read from stored scrapes (frames of
``data.server_metrics.FRAME_COLUMNS``):

* **Per-rank spread.**  SGLang labels every scheduler metric with ``dp_rank`` (vLLM with
  ``engine``).  :func:`rank_spread` gives each rank's mean generation throughput, running and
  queued requests and accept length over the frame's scrapes, and flags a rank whose
  throughput is more than ``RANK_SPREAD`` from the ranks' median: a DP rank that lags holds every
  other rank back at the next synchronised step (DP attention, MoE all-to-all).
* **Expert balance (SGLang EPLB).**  ``sglang:eplb_gpu_physical_count`` is a histogram per MoE
  ``layer`` whose bucket ``le=r`` (cumulative, as Prometheus exposes it) counts the expert
  selections served by GPU ranks ``0..r`` (SGLang ``expert_distribution.py``,
  ``_handle_metric_eplb_heatmap``: bucket ``r`` is incremented by rank ``r``'s physical count,
  every ``SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL`` passes), so rank ``r``'s count is bucket
  ``r`` minus bucket ``r - 1``.  :func:`expert_heatmap` gives the layer x rank matrix of the
  range, and the balancedness of each layer and of the summed load, ``mean / max`` over the
  ranks (SGLang's and DeepSeek EPLB's "balancedness": 1.0 even, ``1 / ranks`` all on one).
  ``sglang:eplb_balancedness`` (a summary, ``_sum``/``_count`` over forward passes) gives the
  server's own balancedness: :func:`balancedness_series` returns the mean over each interval
  between scrapes.

Counters grow from the server's start: over a range of two or more scrapes the figures are the
increase between the first and the last; a single scrape (a page saved once) gives the totals
since the server started, and ``"basis"`` says which.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd

from tealeaves.classifier.server_summary import summary
from tealeaves.data.server_metrics import parse_labels

#: A rank whose mean generation throughput is further than this from the ranks' median (as a
#: fraction of it) is flagged: 20 %, above the few-percent scatter of ranks fed from one queue.
RANK_SPREAD = 0.20
#: Labels that name a data-parallel replica: SGLang's ``dp_rank``, vLLM's ``engine``.
RANK_LABELS: tuple[str, ...] = ("dp_rank", "engine")
#: The series ``expert_heatmap`` and ``balancedness_series`` read.
HEATMAP_SERIES = "sglang:eplb_gpu_physical_count_bucket"
BALANCEDNESS_SERIES = ("sglang:eplb_balancedness_sum", "sglang:eplb_balancedness_count")
#: Every stored series this module reads (the rank quantities of
#: ``classifier.server_summary.summary`` and the eplb metrics): a reader asks the store for
#: these only, so a range's read costs their scrapes, not every series the server exports.
BALANCE_SERIES: tuple[str, ...] = (
    "sglang:gen_throughput", "sglang:num_running_reqs", "sglang:num_queue_reqs",
    "sglang:spec_accept_length", "vllm:generation_tokens_total", "vllm:num_requests_running",
    "vllm:num_requests_waiting", "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_drafts_total", HEATMAP_SERIES, *BALANCEDNESS_SERIES)


#: Least scrapes the ranks' spread is judged on: one scrape is one instant, and a rank
#: between batches reads low for a moment (SGLang's gen_throughput is its last log interval's).
MIN_SCRAPES = 2
#: What a single scrape's spread says instead of a verdict.
ONE_SCRAPE = "one scrape: cannot tell steady from momentary (no verdict on uneven ranks)"


def _num_key(v: str) -> float:
    try:
        return float(v)
    except ValueError:
        return math.inf


def rank_label(frame: pd.DataFrame) -> str | None:
    """The label that names replicas in ``frame`` (``RANK_LABELS``, first found), or None."""
    if frame.empty:
        return None
    labels = frame["labels"].astype(str)
    for k in RANK_LABELS:
        if labels.str.contains(rf"(?:^|,){k}=", regex=True).any():
            return k
    return None


def rank_spread(frame: pd.DataFrame) -> dict | None:
    """Each replica's means over a metrics frame's scrapes, and which ranks lag or lead.

    Args:
        frame: stored scrapes (``FRAME_COLUMNS``), any number of them.

    Returns:
        None when the frame names fewer than two replicas; else ``{"rank_label", "ranks",
        "uneven_ranks", "scrapes", "span", "spread"}``: ``ranks`` one dict per replica in rank
        order (``rank``; ``gen_throughput_tok_s`` tok/s, ``running_req``, ``queue_req``
        requests, ``accept_len`` tokens per verify step: means, NaN where the server exports
        none; ``vs_median`` its throughput over the ranks' median: NaN unless two or more ranks
        have a throughput, which vLLM's, a counter, needs two scrapes for), ``uneven_ranks``
        the ranks with ``|vs_median - 1| > RANK_SPREAD`` (none from fewer than ``MIN_SCRAPES``
        scrapes), ``scrapes`` the scrape times read,
        ``span`` ``[first, last]`` (epoch s), ``spread`` the max - min over ranks of each
        quantity.
    """
    label = rank_label(frame)
    if label is None:
        return None
    per = summary(frame, by=(label,))
    per = per[per[label] != ""]
    if per[label].nunique() < 2:
        return None
    cols = ["gen_throughput_tok_s", "running_req", "queue_req", "accept_len"]
    means = per.replace([math.inf, -math.inf], math.nan).groupby(label)[cols].mean()
    means = means.sort_index(key=lambda ix: ix.map(_num_key))
    gen = means["gen_throughput_tok_s"]
    # the median: one slow rank of four must not make the healthy three look fast
    overall = float(gen.median()) if gen.notna().sum() >= 2 else math.nan
    ranks = []
    for rank, row in means.iterrows():
        g = float(row["gen_throughput_tok_s"])
        ranks.append({"rank": str(rank), **{c: float(row[c]) for c in cols},
                      "vs_median": g / overall if overall and math.isfinite(overall) else math.nan})
    ts = frame["timestamp"].astype(float)
    # one scrape is one instant: a rank's momentary dip is no uneven rank (issue 38)
    uneven = [r["rank"] for r in ranks
              if math.isfinite(r["vs_median"]) and abs(r["vs_median"] - 1.0) > RANK_SPREAD] \
        if ts.nunique() >= MIN_SCRAPES else []
    spread = {c: float(means[c].max() - means[c].min()) if means[c].notna().any() else math.nan
              for c in cols}
    return {"rank_label": label, "ranks": ranks, "uneven_ranks": uneven,
            "scrapes": int(ts.nunique()), "span": [float(ts.min()), float(ts.max())],
            "spread": spread}


def read_balance(frame: pd.DataFrame) -> dict:
    """Everything this module reads from one metrics frame, each once: ``{"spread"``
    (``rank_spread``), ``"heat"`` (``expert_heatmap``), ``"bal"``
    (``balancedness_series``)``}``."""
    empty = not len(frame)
    return {"spread": None if empty else rank_spread(frame),
            "heat": None if empty else expert_heatmap(frame),
            "bal": pd.DataFrame(columns=["timestamp", "balancedness", "passes"]) if empty
            else balancedness_series(frame)}


def balance_lines(b: dict) -> list[str]:
    """``read_balance``'s answer in lines: the ranks' spread, the expert balance (or the
    server's balancedness alone); none when the frame holds neither."""
    lines = [spread_line(b["spread"])] if b["spread"] is not None else []
    if b["heat"] is not None:
        lines.append(expert_line(b["heat"], b["bal"]))
    elif len(b["bal"]):
        lines.append(balancedness_line(b["bal"]))
    return lines


def server_balancedness(bal: pd.DataFrame) -> tuple[float, float]:
    """``(mean balancedness, passes)`` of ``balancedness_series``'s rows, weighted by
    passes; ``(nan, 0)`` without any."""
    if not len(bal):
        return math.nan, 0.0
    v = bal["balancedness"].to_numpy(dtype=float)
    w = bal["passes"].to_numpy(dtype=float)
    ok = np.isfinite(v) & (w > 0)
    if not ok.any():
        return math.nan, 0.0
    return float(np.average(v[ok], weights=w[ok])), float(w[ok].sum())


def balancedness_line(bal: pd.DataFrame) -> str:
    """The server's own balancedness alone (a page with ``sglang:eplb_balancedness`` but no
    heatmap histogram): ``"the server's eplb_balancedness 0.78 over 1,000 passes (no
    sglang:eplb_gpu_physical_count in it: SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL unset)"``."""
    own, passes = server_balancedness(bal)
    if not math.isfinite(own):
        return "the server's eplb_balancedness: n/a (no forward pass counted)"
    return (f"the server's eplb_balancedness {own:.2f} over {passes:,.0f} passes (no "
            f"sglang:eplb_gpu_physical_count heatmap in it: SGLang fills that one only with "
            f"SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL set)")


def heat_size(heat: dict, times: str = "x") -> str:
    """``"60 layers x 8 GPU ranks"`` (``times`` the sign between)."""
    n, r = len(heat["layers"]), len(heat["ranks"])
    return f"{n} layer{'s' if n != 1 else ''} {times} {r} GPU rank{'s' if r != 1 else ''}"


def heat_verdict(heat: dict) -> str:
    """``"balancedness 0.77 (mean/max over ranks), most load on GPU rank 3"``, or why there
    is none."""
    if not math.isfinite(heat["balancedness"]):
        why = ("no layer's buckets are known on every rank" if heat["hot_rank"] is None
               else "no expert selection counted")
        return f"no balancedness: {why}"
    return (f"balancedness {heat['balancedness']:.2f} (mean/max over ranks), most load on "
            f"GPU rank {heat['hot_rank']}")


def expert_line(heat: dict, bal: pd.DataFrame) -> str:
    """One line on ``expert_heatmap``'s answer and the server's own balancedness:
    ``"expert balance (sglang:eplb_gpu_physical_count, 60 layers x 8 GPU ranks, counts since
    the server started): balancedness 0.77 (mean/max over ranks), most load on GPU rank 3;
    the server's eplb_balancedness 0.78 over 1,000 passes"``."""
    basis = ("increase between the first and last scrape" if heat["basis"] == "increase"
             else "counts since the server started")
    own, passes = server_balancedness(bal)
    tail = (f"; the server's eplb_balancedness {own:.2f} over {passes:,.0f} passes"
            if math.isfinite(own) else "")
    left = f"; {heat['dropped']} bucket samples left out" if heat.get("dropped") else ""
    return (f"expert balance (sglang:eplb_gpu_physical_count, {heat_size(heat)}, {basis}"
            f"{left}): {heat_verdict(heat)}{tail}")


def spread_line(s: dict) -> str:
    """One line on ``rank_spread``'s answer: ``"DP ranks (dp_rank, 2 scrapes): generation
    throughput 401-820 tok/s; UNEVEN: rank 3 at 0.50x the ranks' median"``."""
    gens = [r["gen_throughput_tok_s"] for r in s["ranks"] if math.isfinite(
        r["gen_throughput_tok_s"])]
    rng = f"{min(gens):,.0f}-{max(gens):,.0f} tok/s" if gens else "n/a"
    head = (f"DP ranks ({s['rank_label']}, {s['scrapes']} scrape"
            f"{'s' if s['scrapes'] != 1 else ''}): generation throughput {rng}")
    if len(gens) < 2:
        why = ("vLLM's is a counter: two scrapes or more give its rate"
               if s["rank_label"] == "engine" else "fewer than two ranks report it")
        return head + f"; spread n/a ({why})"
    if s["scrapes"] < MIN_SCRAPES:
        return head + "; " + ONE_SCRAPE
    if not s["uneven_ranks"]:
        return head + f"; even (every rank within {RANK_SPREAD:.0%} of the ranks' median)"
    far = [r for r in s["ranks"] if r["rank"] in s["uneven_ranks"]]
    return head + "; UNEVEN: " + ", ".join(
        f"rank {r['rank']} at {r['vs_median']:.2f}x the ranks' median" for r in far)


#: The most GPU ranks (``le`` buckets) and MoE layers read from the heatmap histogram: an
#: expert-parallel group of 4096 GPUs and a 1024-layer model are far beyond any deployment;
#: a bucket past them (``le="1e9"``, a mangled page) is left out and counted, never
#: allocated as a rank.
MAX_RANKS = 4096
MAX_LAYERS = 1024


def _bucket_rows(frame: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The heatmap histogram's finite buckets (``timestamp``, ``layer`` int, ``le`` int rank,
    ``value`` cumulative count; one row per scrape x layer x bucket, NaN kept) and how many
    bucket samples were left out (a non-numeric, negative, fractional or too large ``le``
    or ``layer``; ``+Inf`` is not counted: it is the histogram's total)."""
    b = frame[frame["name"] == HEATMAP_SERIES]
    if b.empty:
        return pd.DataFrame(columns=["timestamp", "layer", "le", "value"]), 0
    labels = [parse_labels(s) for s in b["labels"].astype(str)]
    rows = pd.DataFrame({"timestamp": b["timestamp"].astype(float).to_numpy(),
                         "layer": pd.to_numeric(pd.Series([lb.get("layer", "") for lb in labels]),
                                                errors="coerce").to_numpy(),
                         "le": pd.to_numeric(pd.Series([lb.get("le", "") for lb in labels]),
                                             errors="coerce").to_numpy(),
                         "value": b["value"].astype(float).to_numpy()})
    total = np.isinf(rows["le"]) & (rows["le"] > 0)
    ok = (np.isfinite(rows["le"]) & (rows["le"] >= 0) & (rows["le"] == np.floor(rows["le"]))
          & (rows["le"] < MAX_RANKS) & np.isfinite(rows["layer"]) & (rows["layer"] >= 0)
          & (rows["layer"] == np.floor(rows["layer"])) & (rows["layer"] < MAX_LAYERS))
    dropped = int((~ok & ~total).sum())
    rows = rows[ok].astype({"layer": int, "le": int})
    # the same series twice in one scrape (two replicas' pages): summed, as the server does;
    # a NaN stays NaN (min_count), never 0
    rows = rows.groupby(["timestamp", "layer", "le"], as_index=False)["value"].sum(min_count=1)
    return rows, dropped


def _cumulative(rows: pd.DataFrame, t: float, layers, n_ranks: int) -> np.ndarray:
    """One scrape's cumulative buckets as an array [layers, ranks]; NaN where absent."""
    one = rows[rows["timestamp"] == t]
    table = one.pivot_table(index="layer", columns="le", values="value", aggfunc="first",
                            dropna=False)
    return table.reindex(index=layers, columns=range(n_ranks)).to_numpy(dtype=float)


def _per_rank(cum: np.ndarray) -> np.ndarray:
    """Cumulative buckets [layers, ranks] to per-rank counts: bucket ``r`` minus bucket
    ``r - 1``.  A rank whose bucket or the one before is absent, not finite, or smaller
    (a cumulative count cannot fall) is unknown: NaN, never 0."""
    prev = np.concatenate([np.zeros((cum.shape[0], 1)), cum[:, :-1]], axis=1)
    with np.errstate(invalid="ignore"):
        d = cum - prev
    return np.where(np.isfinite(d) & (d >= 0), d, np.nan)


def expert_heatmap(frame: pd.DataFrame) -> dict | None:
    """The layer x GPU-rank expert load of a metrics frame (SGLang's eplb heatmap histogram).

    Args:
        frame: stored scrapes (``FRAME_COLUMNS``).

    Returns:
        None without usable ``sglang:eplb_gpu_physical_count`` buckets; else ``{"layers"``
        (layer indices), ``"ranks"`` (GPU ranks 0 .. the largest bucket), ``"counts"``
        (array [layers, ranks] of expert selections per rank; NaN where a bucket is missing
        or inconsistent), ``"share"`` (each rank's share of the summed counts of the layers
        known on every rank, 0-1), ``"layer_balancedness"`` (per layer ``mean / max`` over
        ranks; NaN for a layer with an unknown rank or no count), ``"balancedness"`` (``mean
        / max`` of those summed counts), ``"hot_rank"`` (the rank with the most; None when
        none is known), ``"basis"`` (``"increase"`` over the scrapes, as Prometheus'
        ``increase()`` counts it: a fall is a restart and the count after it is the
        increase; or ``"since start"`` for one scrape, or when nothing moved; a scrape
        holding fewer buckets than the fullest is left out), ``"span"``
        ``[first, last]`` scrape times (epoch s), ``"dropped"`` (bucket samples left out:
        ``_bucket_rows``)``}``.
    """
    rows, dropped = _bucket_rows(frame)
    if rows.empty:
        return None
    times = sorted(rows["timestamp"].unique())
    layers = sorted(rows["layer"].unique())
    n_ranks = int(rows["le"].max()) + 1
    cums = [_cumulative(rows, t, layers, n_ranks) for t in times]
    # a scrape holding fewer buckets than the fullest (a page saved while curl was still
    # writing, a layer missing once) is left out, not let to make a whole layer unknown
    full = [int(np.isfinite(c).sum()) for c in cums]
    keep = [k for k, n in enumerate(full) if n == max(full)]
    times, cums = [times[k] for k in keep], [cums[k] for k in keep]
    counts, basis = _per_rank(cums[-1]), "since start"
    if len(cums) > 1:
        per = [_per_rank(c) for c in cums]
        inc = np.zeros_like(per[0])
        for a, b in itertools.pairwise(per):
            with np.errstate(invalid="ignore"):
                inc += np.where(b >= a, b - a, b)  # a fall: restarted, count from zero
        if np.nansum(inc) > 0:
            counts, basis = inc, "increase"
    known = np.isfinite(counts).all(axis=1)
    c = counts
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        top = np.max(c, axis=1)
        layer_bal = np.where(known & (top > 0), np.mean(c, axis=1) / top, np.nan)
        total = c[known].sum(axis=0) if known.any() else np.full(n_ranks, np.nan)
        tmax = np.nanmax(total) if np.isfinite(total).any() else math.nan
        bal = float(total.mean() / tmax) if tmax > 0 else math.nan
        share = total / total.sum() if np.nansum(total) > 0 else np.full(n_ranks, np.nan)
    return {"layers": [int(x) for x in layers], "ranks": list(range(n_ranks)),
            "counts": c, "share": share, "layer_balancedness": layer_bal,
            "balancedness": bal,
            "hot_rank": int(np.nanargmax(total)) if tmax > 0 else None,
            "basis": basis, "span": [float(times[0]), float(times[-1])], "dropped": dropped}


def balancedness_series(frame: pd.DataFrame) -> pd.DataFrame:
    """SGLang's own balancedness over time, from ``sglang:eplb_balancedness``'s ``_sum`` and
    ``_count``: one row per scrape after the first (``timestamp``, ``balancedness``: the mean
    over the forward passes since the previous scrape, 0-1], ``passes``), or one row at the
    last scrape with the mean since the server started when the frame holds one scrape, no
    pass ran between its scrapes, or the server restarted.  Series of several ranks are
    summed first.  Empty without the metric."""
    s = frame[frame["name"].isin(BALANCEDNESS_SERIES)]
    out = pd.DataFrame(columns=["timestamp", "balancedness", "passes"])
    if s.empty:
        return out
    # several ranks' series summed; a NaN stays NaN (min_count), never 0
    t = s.groupby(["timestamp", "name"])["value"].sum(min_count=1).unstack("name")
    if not set(BALANCEDNESS_SERIES) <= set(t.columns):
        return out
    total, n = t[BALANCEDNESS_SERIES[0]], t[BALANCEDNESS_SERIES[1]]
    d_sum, d_n = total.diff(), n.diff()
    reset = (d_n < 0) | (d_sum < 0)  # the server restarted: its counts since then
    d_sum, d_n = d_sum.where(~reset, total).iloc[1:], d_n.where(~reset, n).iloc[1:]
    if len(t) == 1 or not (d_n > 0).any():
        # one scrape, or no pass between scrapes: the mean since the server started, as of
        # the last scrape
        d_sum, d_n = total.iloc[-1:], n.iloc[-1:]
    with np.errstate(all="ignore"):
        bal = np.where(d_n > 0, d_sum / d_n, np.nan)
    out = pd.DataFrame({"timestamp": d_n.index.to_numpy(dtype=float), "balancedness": bal,
                        "passes": d_n.to_numpy(dtype=float)})
    ok = (out["passes"] >= 0) & (out["balancedness"].isna() | out["balancedness"].between(0, 1))
    return out[ok].reset_index(drop=True)
