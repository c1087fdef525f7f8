"""Clock alignment of server events with GPU telemetry.

A server log is stamped by the server's clock, in local time, often to the second; the GPU
samples by the collector's.  The offset between them is estimated from the data: prefill lines
mark moments of dense tensor-core work, so the series "prefill tokens logged per bin" is
cross-correlated with the GPUs' mean ``tensor_active`` over a range of lags, and the lag with
the highest normalised correlation is the offset (``gpu_time = server_time + offset_s``).

Everything here is a pure function of already-parsed events (``data.server_log`` reads
the logs); nothing opens a file.

Both series are sampled on a common grid (``bin_s``, default 0.1 s); each prefill event is
spread uniformly over the log's timestamp resolution (1 s for SGLang's default format, whose
seconds are truncated), so a whole-second log still aligns to a fraction of a second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass
class Alignment:
    """Result of ``estimate_offset``.

    Attributes:
        offset_s: seconds to add to server timestamps to put them on the GPU clock; NaN when
            no estimate could be made.
        correlation: normalised cross-correlation at the chosen lag (-1..1).
        runner_up: best correlation at lags farther than ``separation_s`` from the chosen one
            (a peak well above it means the estimate is unambiguous).
        n_events: prefill events used.
        reason: why the offset is NaN, else "".
        lags_s, scores: the whole correlation curve, for plots.
    """

    offset_s: float
    correlation: float
    runner_up: float
    n_events: int
    reason: str = ""
    lags_s: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    scores: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)

    @property
    def confident(self) -> bool:
        """True when the peak is clear: correlation >= 0.3 and 0.1 above the runner-up."""
        return (math.isfinite(self.offset_s) and self.correlation >= 0.3
                and self.correlation - self.runner_up >= 0.1)


def gpu_prefill_signal(samples: pd.DataFrame, bin_s: float = 0.1) -> pd.Series:
    """Mean ``tensor_active`` across GPUs per bin (index: bin start, epoch s); NaN bins are 0.

    Falls back to ``gpu_util`` minus ``mem_copy_util`` (compute without memory traffic) when the
    samples have no GPM columns.
    """
    s = samples
    sig = s["tensor_active"]
    if sig.notna().sum() == 0:
        sig = (s["gpu_util"] - s["mem_copy_util"]).clip(lower=0)
    b = np.floor(s["timestamp"].to_numpy() / bin_s).astype(np.int64)
    frame = pd.DataFrame({"bin": b, "v": sig.to_numpy(dtype=float)})
    per_bin = frame.groupby("bin")["v"].mean()
    full = per_bin.reindex(np.arange(per_bin.index.min(), per_bin.index.max() + 1))
    return pd.Series(full.fillna(0.0).to_numpy(), index=full.index * bin_s)


def stamp_resolution(events: list) -> float:
    """Resolution of a log's time stamps: 0.001 s when any stamp has a fraction of a second
    (SGLang with ``SGLANG_LOG_MS=1``), else 1 s (the servers' default format)."""
    stamped = [e.timestamp for e in events if e.timestamp is not None]
    return 0.001 if any(abs(t - round(t)) > 1e-6 for t in stamped) else 1.0


def estimate_offset(samples: pd.DataFrame, events: list, max_offset_s: float = 60.0,
                    bin_s: float = 0.1, resolution_s: float | None = None,
                    separation_s: float = 2.0) -> Alignment:
    """Estimate the server-to-GPU clock offset from prefill events and tensor activity.

    Args:
        samples: GPU samples (sample schema), any number of GPUs.
        events: ``data.server_log.ServerEvent`` list: SGLang ``prefill`` events with a
            timestamp (weight ``new_token``, else 1) and vLLM ``stats`` events with prompt
            throughput > 0 (weight the throughput, spread over the interval they cover).
        max_offset_s: search lags in ``[-max_offset_s, +max_offset_s]``.
        bin_s: grid step, seconds.
        resolution_s: the log's timestamp resolution (1.0 for whole seconds, 0.001 with
            ``SGLANG_LOG_MS=1``); each event is spread over ``[t, t + resolution_s)``.
            None: ``stamp_resolution(events)``.
        separation_s: lags this far from the best one count for ``runner_up``.

    Returns:
        An ``Alignment``; ``offset_s`` NaN with a ``reason`` when there are fewer than 2
        prefill events or no overlap at any lag.
    """
    if resolution_s is None:
        resolution_s = stamp_resolution(events)
    # (time, weight, seconds the mass spreads over): SGLang prefill lines are instants spread
    # over the stamp's resolution; vLLM stats lines with prompt throughput cover the interval
    # since the previous stats line.
    pre = [(e.timestamp, float(e.fields.get("new_token", 1.0) or 1.0), resolution_s)
           for e in events if e.kind == "prefill" and e.timestamp is not None]
    pre += [(e.start, float(e.fields["prompt_throughput_tok_s"]), e.timestamp - e.start)
            for e in events
            if e.kind == "stats" and e.timestamp is not None and e.start is not None
            and e.timestamp > e.start
            and float(e.fields.get("prompt_throughput_tok_s", 0) or 0) > 0]
    if len(pre) < 2:
        return Alignment(math.nan, math.nan, math.nan, len(pre),
                         "fewer than 2 timestamped prefill events (SGLang prefill lines or "
                         "vLLM intervals with prompt throughput)")
    gpu = gpu_prefill_signal(samples, bin_s)
    g = gpu.to_numpy()
    g0 = float(gpu.index[0])
    lags = np.arange(-int(max_offset_s / bin_s), int(max_offset_s / bin_s) + 1)
    # Server series on the GPU grid for lag 0, extended by max_offset on both sides.
    pad = len(lags) // 2
    longest = max(max(1, round(d / bin_s)) for _, _, d in pre)
    srv = np.zeros(len(g) + 2 * pad + longest)
    for t, w, d in pre:
        spread = max(1, round(d / bin_s))
        i = math.floor((t - g0) / bin_s) + pad
        lo, hi = max(i, 0), min(i + spread, len(srv))
        if lo < hi:
            srv[lo:hi] += w / spread
    scores = np.full(len(lags), np.nan)
    for k, lag in enumerate(lags):
        # gpu_time = server_time + lag*bin_s  ->  server bin index = gpu index - lag (+pad)
        start = pad - lag
        s = srv[start:start + len(g)]
        if s.shape[0] != g.shape[0] or s.std() == 0 or g.std() == 0:
            continue
        scores[k] = float(np.corrcoef(s, g)[0, 1])
    if np.all(np.isnan(scores)):
        return Alignment(math.nan, math.nan, math.nan, len(pre),
                         "the log and the trace do not overlap within the search range",
                         lags * bin_s, scores)
    best = int(np.nanargmax(scores))
    far = np.abs(lags - lags[best]) * bin_s >= separation_s
    runner = float(np.nanmax(scores[far])) if np.any(far & ~np.isnan(scores)) else math.nan
    # The spread puts an event's mass over [t, t + resolution); the centre of that box is
    # the best point estimate, so the lag found already accounts for truncated seconds.
    return Alignment(float(lags[best] * bin_s), float(scores[best]), runner, len(pre), "",
                     lags * bin_s, scores)


def align_events(events: list, samples: pd.DataFrame,
                 max_offset_s: float = 60.0) -> tuple[list, Alignment]:
    """Estimate the clock offset of already-parsed server events against ``samples`` and move
    them onto the samples' clock when the estimate is confident.

    A pure function: the caller parses the log (``data.server_log.read_log``).

    Args:
        events: ``data.server_log.ServerEvent`` list, as stamped by the server.
        samples: GPU samples (sample schema; the clock to align to).
        max_offset_s: largest offset searched, seconds.

    Returns:
        ``(events, alignment)``: the events shifted by ``alignment.offset_s`` when
        ``alignment.confident`` (see ``shift_events``), else the events as given; and the
        ``Alignment`` of ``estimate_offset``.
    """
    a = estimate_offset(samples, events, max_offset_s=max_offset_s)
    return (shift_events(events, a.offset_s) if a.confident else events), a


def shift_events(events: list, offset_s: float) -> list:
    """Copies of server events with ``timestamp`` and ``start`` moved by ``offset_s``."""
    import dataclasses

    return [dataclasses.replace(e, timestamp=None if e.timestamp is None
                                else e.timestamp + offset_s,
                                start=None if e.start is None else e.start + offset_s)
            for e in events]
