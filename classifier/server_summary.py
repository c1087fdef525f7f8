"""Server-event fields from a server's ``/metrics`` frame: :func:`summary`.

:func:`summary` maps a frame of scrapes (``data.server_metrics.FRAME_COLUMNS``) to the
server-event field names of :mod:`tealeaves.data.server_log` where the meaning is the same
(``running_req``, ``queue_req``, ``token_usage``, ``gen_throughput_tok_s``, ``accept_len``)
plus ``prefill_tokens_per_s`` and ``decode_tokens_per_s``.  Per data-parallel rank
(``by=("dp_rank",)``) it is what ``classifier.server_balance`` judges the ranks' spread on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from tealeaves.data.server_metrics import FRAME_COLUMNS, labels_string, parse_labels

__all__ = ["SUMMARY_FIELDS", "summary"]

SUMMARY_FIELDS = ["running_req", "queue_req", "token_usage", "gen_throughput_tok_s",
                  "accept_len", "prefill_tokens_per_s", "decode_tokens_per_s"]

_NAN = float("nan")


# (field, sample name, label filter or None, use rate?, how replicas combine)
_GAUGES = [
    ("running_req", "sglang:num_running_reqs", "sum"),
    ("running_req", "vllm:num_requests_running", "sum"),
    ("queue_req", "sglang:num_queue_reqs", "sum"),
    ("queue_req", "vllm:num_requests_waiting", "sum"),
    ("token_usage", "sglang:token_usage", "mean"),
    ("token_usage", "vllm:kv_cache_usage_perc", "mean"),
    ("token_usage", "vllm:gpu_cache_usage_perc", "mean"),
    ("gen_throughput_tok_s", "sglang:gen_throughput", "sum"),
    ("accept_len", "sglang:spec_accept_length", "mean"),
]
_RATES = [
    ("prefill_tokens_per_s", "sglang:realtime_tokens_total", "prefill_compute"),
    ("decode_tokens_per_s", "sglang:realtime_tokens_total", "decode"),
    ("prefill_tokens_per_s", "vllm:prompt_tokens_total", None),
    ("decode_tokens_per_s", "vllm:generation_tokens_total", None),
    ("_vllm_accepted", "vllm:spec_decode_num_accepted_tokens_total", None),
    ("_vllm_drafts", "vllm:spec_decode_num_drafts_total", None),
]
# labels that tell apart processes of one scheduler (collapsed), and the selector label
_WITHIN_KEYS = ("tp_rank", "pp_rank", "pid", "mode")


def _rank_num(v: str | None) -> float:
    try:
        return float(v) if v is not None else -1.0
    except ValueError:
        return math.inf


def _strict_sum(s: pd.Series) -> float:
    return float(s.sum()) if len(s) and s.notna().all() else _NAN


def summary(frame: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Server-event fields from a metrics frame, one row per scrape time (and ``by`` group).

    Columns: ``timestamp`` (UTC epoch s), the ``by`` label columns, then :data:`SUMMARY_FIELDS`:

    * ``running_req``, ``queue_req`` (requests): ``sglang:num_running_reqs`` /
      ``vllm:num_requests_running``, ``sglang:num_queue_reqs`` / ``vllm:num_requests_waiting``
    * ``token_usage`` (fraction of the KV pool, 0-1): ``sglang:token_usage`` /
      ``vllm:kv_cache_usage_perc`` (a 0-1 fraction despite the name; older
      ``vllm:gpu_cache_usage_perc``)
    * ``gen_throughput_tok_s`` (tokens/s): the ``sglang:gen_throughput`` gauge, else the
      rate of ``vllm:generation_tokens_total``
    * ``accept_len`` (tokens per verify step): ``sglang:spec_accept_length``, else
      ``1 + rate(vllm:spec_decode_num_accepted_tokens_total) /
      rate(vllm:spec_decode_num_drafts_total)``
    * ``prefill_tokens_per_s``, ``decode_tokens_per_s`` (tokens/s, from counter rates):
      ``sglang:realtime_tokens_total{mode=prefill_compute}`` / ``{mode=decode}`` (prefix-cache
      hits, ``mode=prefill_cache``, are not counted), else ``vllm:prompt_tokens_total`` (which
      includes prefix-cache hits) / ``vllm:generation_tokens_total``.

    Ranks: series differing only in ``tp_rank``/``pp_rank``/``pid`` describe one scheduler, so
    the one with the lowest ``(tp_rank, pp_rank)`` is used (TP0 is the rank that logs).  Replicas
    (``dp_rank``, vLLM ``engine``) are then combined: requests and token rates are summed
    (NaN if any replica's value is NaN), ``token_usage`` and ``accept_len`` averaged.  Pass
    ``by=("dp_rank",)`` to keep replicas apart instead.  A field with no source is NaN.

    Raises ``KeyError`` if ``frame`` lacks the :data:`FRAME_COLUMNS`.
    """
    by = tuple(by)
    cols = ["timestamp", *by, *SUMMARY_FIELDS]
    missing = [c for c in FRAME_COLUMNS if c not in frame.columns]
    if missing:
        raise KeyError(f"frame lacks columns {missing}")
    wanted = {n for _, n, _ in _GAUGES} | {n for _, n, _ in _RATES}
    f = frame[frame["name"].isin(wanted)]
    if f.empty:
        return pd.DataFrame(columns=cols).astype({c: float for c in SUMMARY_FIELDS})
    rows = []
    for ts, name, lab, value, rate in zip(f["timestamp"], f["name"], f["labels"], f["value"],
                                          f["rate_per_s"], strict=True):
        labels = parse_labels(lab)
        for fld, src, extra in [*_GAUGES, *_RATES]:
            if src != name:
                continue
            if src in {n for _, n, _ in _RATES}:
                if extra is not None and labels.get("mode") != extra:
                    continue
                v, how = rate, "sum"
            else:
                v, how = value, extra
            scheduler = {k: x for k, x in labels.items() if k not in _WITHIN_KEYS}
            rows.append({"timestamp": ts, "field": fld, "src": src, "how": how, "v": v,
                         "tp": _rank_num(labels.get("tp_rank")),
                         "pp": _rank_num(labels.get("pp_rank")),
                         "series": labels_string(scheduler),
                         **{k: labels.get(k, "") for k in by}})
    long = pd.DataFrame(rows)
    # one scheduler per (timestamp, src, series): lowest (tp_rank, pp_rank)
    long = long.sort_values(["tp", "pp"], kind="stable").drop_duplicates(
        ["timestamp", "field", "src", "series"], keep="first")
    keys = ["timestamp", *by]
    parts = []
    for (fld, src, how), g in long.groupby(["field", "src", "how"], sort=False):
        agg = _strict_sum if how == "sum" else "mean"
        parts.append(g.groupby(keys, sort=True)["v"].agg(agg).rename(f"{fld}|{src}"))
    wide = pd.concat(parts, axis=1)
    out = pd.DataFrame(index=wide.index)
    for fld in [*SUMMARY_FIELDS, "_vllm_accepted", "_vllm_drafts"]:
        srcs = [c for c in wide.columns if c.split("|", 1)[0] == fld]
        col = pd.Series(_NAN, index=wide.index, dtype=float)
        for c in srcs:  # the first source listed wins where it has a value
            col = col.fillna(wide[c].astype(float))
        out[fld] = col
    dec = wide.get("decode_tokens_per_s|vllm:generation_tokens_total")
    if dec is not None:
        out["gen_throughput_tok_s"] = out["gen_throughput_tok_s"].fillna(dec)
    acc, drafts = out.pop("_vllm_accepted"), out.pop("_vllm_drafts")
    out["accept_len"] = out["accept_len"].fillna(1.0 + acc / drafts.where(drafts > 0))
    out = out.reset_index()
    return out[cols].astype({c: float for c in SUMMARY_FIELDS})
