"""Ground truth from an inference server's log: the phases its events say, shaped like a
label CSV.

SGLang prefill lines are instants (given ``prefill_s`` each), SGLang decode lines and vLLM
stats lines cover the time since the previous line of their kind and rank; the events come
from ``data.server_log`` (``parse_lines``, ``read_log``).  ``classify --server-log`` scores
the windows against these intervals; ``calibrate`` takes its targets from them where no
forward-time counter was scraped.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from tealeaves.data.server_log import ServerEvent

__all__ = ["phase_intervals", "stats_intervals"]

_LABEL_COLUMNS = ["start", "end", "phase", "hot_gpu"]


def _is_stats_interval(ev: ServerEvent) -> bool:
    return ev.kind == "stats" and ("prompt_throughput_tok_s" in ev.fields
                                   or "gen_throughput_tok_s" in ev.fields)


def stats_intervals(events: Iterable[ServerEvent], both: str = "prefill",
                    max_interval_s: float | None = None) -> pd.DataFrame:
    """vLLM stats lines as intervals with the phases present in each.

    Each stats line covers ``[start, timestamp)`` (since the previous line of the same engine);
    a line without a start (the first) or timestamp is left out.

    Args:
        events: server events (non-stats events and spec-decode lines are ignored).
        both: phase of an interval with prompt and generation throughput both > 0:
            ``'prefill'`` (prefill was present) or ``'mixed'``.
        max_interval_s: leave out intervals longer than this (vLLM stops logging while idle,
            so a long gap says little about what happened in it); None keeps all.

    Returns:
        Frame with ``start``, ``end`` (UTC epoch s), ``phase`` (``prefill`` when prompt
        throughput > 0, ``decode`` when only generation throughput > 0, ``idle`` when
        neither), ``hot_gpu`` (NaN), ``prefill``/``decode`` (bools: present in the interval),
        ``prompt_throughput_tok_s``, ``gen_throughput_tok_s``, ``dp`` (engine, NaN if
        untagged); sorted by ``start``.

    Raises:
        ValueError: ``both`` is not ``'prefill'`` or ``'mixed'``.
    """
    rows = _stats_rows(events, both, max_interval_s)
    cols = _LABEL_COLUMNS + ["prefill", "decode", "prompt_throughput_tok_s",
                             "gen_throughput_tok_s", "dp"]
    frame = pd.DataFrame(rows, columns=cols)
    return frame.sort_values("start", kind="stable", ignore_index=True)


def _stats_rows(events: Iterable[ServerEvent], both: str,
                max_interval_s: float | None) -> list[dict]:
    if both not in ("prefill", "mixed"):
        raise ValueError(f"both must be 'prefill' or 'mixed', got {both!r}")
    rows = []
    for ev in events:
        if not _is_stats_interval(ev) or ev.start is None or ev.timestamp is None:
            continue
        if not ev.timestamp > ev.start:
            continue
        if max_interval_s is not None and ev.timestamp - ev.start > max_interval_s:
            continue
        prompt = ev.fields.get("prompt_throughput_tok_s", float("nan"))
        gen = ev.fields.get("gen_throughput_tok_s", float("nan"))
        has_p, has_d = bool(prompt > 0), bool(gen > 0)
        phase = (both if has_d else "prefill") if has_p else ("decode" if has_d else "idle")
        rows.append({"start": ev.start, "end": ev.timestamp, "phase": phase,
                     "hot_gpu": float("nan"), "prefill": has_p, "decode": has_d,
                     "prompt_throughput_tok_s": float(prompt), "gen_throughput_tok_s": float(gen),
                     "dp": float(ev.rank.get("dp", float("nan")))})
    return rows


_PRIORITY = ("prefill", "mixed", "decode", "idle")


def _paint(intervals: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """Flatten possibly overlapping intervals into disjoint ones; where several overlap the
    phase earliest in ``_PRIORITY`` wins; touching pieces of one phase are merged."""
    bounds: list[tuple[float, int, str]] = []
    for s, e, ph in intervals:
        if e > s:
            bounds += [(s, 1, ph), (e, -1, ph)]
    if not bounds:
        return []
    bounds.sort(key=lambda b: b[0])
    count = dict.fromkeys(_PRIORITY, 0)
    out: list[tuple[float, float, str]] = []
    i = 0
    while i < len(bounds):
        t = bounds[i][0]
        while i < len(bounds) and bounds[i][0] == t:
            count[bounds[i][2]] += bounds[i][1]
            i += 1
        if i >= len(bounds):
            break
        nxt = bounds[i][0]
        phase = next((p for p in _PRIORITY if count[p] > 0), None)
        if phase is None:
            continue
        if out and out[-1][2] == phase and out[-1][1] == t:
            out[-1] = (out[-1][0], nxt, phase)
        else:
            out.append((t, nxt, phase))
    return out


def phase_intervals(events: Iterable[ServerEvent], prefill_s: float = 1.0,
                    both: str = "prefill", include_idle: bool = False,
                    max_interval_s: float | None = None) -> pd.DataFrame:
    """Ground-truth phase intervals from server events, shaped like a tealeaves label CSV.

    * SGLang decode lines: ``decode`` over ``[start, timestamp)`` (the first decode line has no
      start and gives no interval).
    * SGLang prefill lines: ``prefill`` over ``[timestamp, timestamp + prefill_s)``.  The log
      says when a prefill batch was scheduled, not how long it ran; the default 1 s is the
      resolution of SGLang's default time stamps.  Prefill wins where it overlaps decode.
    * vLLM stats lines: as ``stats_intervals`` (``prefill`` where prompt throughput > 0).

    Events without a timestamp are ignored.

    Args:
        events: server events (``parse_lines(...).events``).
        prefill_s: length given to each prefill instant, seconds (> 0).
        both: vLLM intervals with prompt and generation throughput: ``'prefill'`` or
            ``'mixed'``.
        include_idle: keep vLLM intervals in which neither throughput was > 0 as ``idle``.
        max_interval_s: leave out decode/stats intervals longer than this (None keeps all).

    Returns:
        Frame with ``start``, ``end`` (UTC epoch s, ``end > start``), ``phase``,
        ``hot_gpu`` (NaN): disjoint intervals sorted by ``start``, as
        ``data.traces.write_labels`` writes and ``label_at`` reads.

    Raises:
        ValueError: ``prefill_s`` not > 0, or a bad ``both``.
    """
    if not prefill_s > 0:
        raise ValueError(f"prefill_s must be > 0, got {prefill_s}")
    events = list(events)
    pieces: list[tuple[float, float, str]] = []
    for ev in events:
        if ev.timestamp is None:
            continue
        if ev.kind == "prefill":
            pieces.append((ev.timestamp, ev.timestamp + prefill_s, "prefill"))
        elif ev.kind == "decode" and ev.start is not None and (
                max_interval_s is None or ev.timestamp - ev.start <= max_interval_s):
            pieces.append((ev.start, ev.timestamp, "decode"))
    for r in _stats_rows(events, both, max_interval_s):
        if r["phase"] != "idle" or include_idle:
            pieces.append((r["start"], r["end"], r["phase"]))
    flat = [(s, e, ph, float("nan")) for s, e, ph in _paint(pieces)]
    return pd.DataFrame(flat, columns=_LABEL_COLUMNS).astype(
        {"start": float, "end": float, "phase": object, "hot_gpu": float})

