"""Clock alignment of a server log with GPU telemetry, on the real bundled trace."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from tealeaves.classifier.align import estimate_offset
from tealeaves.data import bundled_labels_path, bundled_trace_path
from tealeaves.data.server_log import parse_lines
from tealeaves.data.traces import read_labels, read_trace


def sglang_lines(labels, true_offset_s: float, every_s: float = 0.5, tz=dt.UTC) -> list[str]:
    """SGLang 0.5.x prefill lines for the labelled prefill stretches, stamped by a server clock
    that runs ``true_offset_s`` behind the GPU clock, to the whole second (SGLang's default)."""
    out = []
    for r in labels.itertuples():
        if r.phase != "prefill":
            continue
        for t in np.arange(r.start, r.end, every_s):
            server = dt.datetime.fromtimestamp(t - true_offset_s, tz)
            out.append(f"[{server:%Y-%m-%d %H:%M:%S} TP0] Prefill batch, #new-seq: 1, "
                       f"#new-token: 4096, #cached-token: 0, token usage: 0.10, "
                       f"#running-req: 8, #queue-req: 0, ")
            out.append(f'[{server:%Y-%m-%d %H:%M:%S}] INFO:     127.0.0.1:4000 - "POST /v1/'
                       f'completions HTTP/1.1" 200 OK')
    return out


@pytest.mark.parametrize("true_offset", [-7.3, 0.0, 12.6])
def test_offset_is_recovered_from_a_whole_second_log(true_offset):
    trace = read_trace(bundled_trace_path())
    labels = read_labels(bundled_labels_path())
    events = parse_lines(sglang_lines(labels, true_offset)).events
    a = estimate_offset(trace.samples, events, max_offset_s=30)
    assert a.n_events > 20
    # Whole-second stamps of periodic events: the estimate is good to the log's resolution.
    assert a.offset_s == pytest.approx(true_offset, abs=1.0)
    assert a.confident and a.correlation > 0.5


def test_millisecond_log_aligns_to_a_tenth_of_a_second():
    trace = read_trace(bundled_trace_path())
    labels = read_labels(bundled_labels_path())
    lines = []
    for r in labels.itertuples():
        if r.phase != "prefill":
            continue
        for t in np.arange(r.start, r.end, 0.5):
            s = dt.datetime.fromtimestamp(t + 4.25, dt.UTC)  # server clock 4.25 s ahead
            lines.append(f"[{s:%Y-%m-%d %H:%M:%S}.{s.microsecond // 1000:03d} TP0] Prefill "
                         f"batch, #new-seq: 1, #new-token: 4096, #cached-token: 0, ")
    a = estimate_offset(trace.samples, parse_lines(lines).events, resolution_s=0.001)
    assert a.offset_s == pytest.approx(-4.25, abs=0.2)


def test_local_time_zone_is_undone_by_tz_argument():
    trace = read_trace(bundled_trace_path())
    labels = read_labels(bundled_labels_path())
    berlin = dt.timezone(dt.timedelta(hours=1))
    lines = sglang_lines(labels, 3.0, tz=berlin)
    a = estimate_offset(trace.samples, parse_lines(lines, tz="+01:00").events, max_offset_s=20)
    assert a.offset_s == pytest.approx(3.0, abs=1.0)
    # Read as UTC the log is an hour off: no overlap inside the search range.
    b = estimate_offset(trace.samples, parse_lines(lines).events, max_offset_s=20)
    assert not b.confident


def test_too_few_events_gives_nan_with_a_reason():
    trace = read_trace(bundled_trace_path())
    a = estimate_offset(trace.samples, [])
    assert np.isnan(a.offset_s) and "fewer than 2" in a.reason


def test_vllm_stats_intervals_with_prompt_throughput_align():
    trace = read_trace(bundled_trace_path())
    labels = read_labels(bundled_labels_path())
    t0 = float(trace.samples["timestamp"].min())
    lines, prev = [], None
    for t in np.arange(np.floor(t0) + 2, trace.samples["timestamp"].max(), 2.0):
        if prev is not None:
            mid = (prev + t) / 2  # vLLM reports the average over the last interval
            ph = labels[(labels.start <= mid) & (labels.end > mid)]["phase"]
            prompt = 12000.0 if len(ph) and ph.iloc[0] == "prefill" else 0.0
            s = dt.datetime.fromtimestamp(t - 5.0, dt.UTC)  # server clock 5 s behind
            lines.append(f"INFO {s:%m-%d %H:%M:%S} [loggers.py:271] Engine 000: Avg prompt "
                         f"throughput: {prompt:.1f} tokens/s, Avg generation throughput: "
                         f"900.0 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache "
                         f"usage: 10.0%, Prefix cache hit rate: 0.0%")
        prev = t
    events = parse_lines(lines, year=dt.datetime.fromtimestamp(t0, dt.UTC).year).events
    a = estimate_offset(trace.samples, events, max_offset_s=20)
    assert a.offset_s == pytest.approx(5.0, abs=2.0) and a.confident


@pytest.mark.parametrize("name", ["h200x2_bursts", "h200x2_prefill_lengths", "h200x1_bursts"])
def test_real_run_log_aligns_with_its_gpu_trace(name):
    """An SGLang-format log written by the workload on the H200s, and the collector's trace
    of the same run: the aligner finds a confident offset within the log's one-second
    resolution (both clocks are the same host's), and every shifted prefill line lands on,
    or within that resolution of, a labelled prefill stretch (bursts are 0.6-1.6 s long, so
    whole-second stamps cannot all fall inside them)."""
    from tealeaves.classifier.align import shift_events
    from tealeaves.data import TRACES_DIR
    from tealeaves.data.server_log import read_log

    trace = read_trace(TRACES_DIR / f"{name}.parquet")
    labels = read_labels(TRACES_DIR / f"{name}.labels.csv")
    log = read_log(TRACES_DIR / f"{name}.sglang.log")
    events, fmt = log.events, log.format
    a = estimate_offset(trace.samples, events)
    assert fmt == "sglang" and a.confident and 0.0 <= a.offset_s <= 1.0, a
    shifted = shift_events(events, a.offset_s)
    pre = np.array([e.timestamp for e in shifted if e.kind == "prefill"])
    pf = labels[labels["phase"] == "prefill"]
    gap = np.array([np.min(np.maximum(pf["start"] - t, 0) + np.maximum(t - pf["end"], 0))
                    for t in pre])
    assert len(pre) > 20 and (gap <= 0.5).mean() > 0.9 and gap.max() <= 1.0, gap.max()
