"""Server log parser (SGLang scheduler lines, vLLM stats) and the log tailer."""

from __future__ import annotations

import datetime as dt
import math
import os
import re
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest
from cases import CASES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tealeaves.classifier.server_phases import phase_intervals, stats_intervals
from tealeaves.collectors.server_log import LogTailer, follow
from tealeaves.data.server_log import (
    ServerLogError,
    ServerLogParser,
    events_frame,
    parse_file,
    parse_lines,
    resolve_tz,
)
from tealeaves.data.traces import label_at, read_labels, write_labels

OLD = "sglang_log_oldfmt_prefill_decode_specdec_tp0_01.txt"
NEW = "sglang_log_newfmt_interleaved_http_01.txt"
VLLM = "vllm_log_v1_engine000_prefill_bursts_01.txt"


def case(name: str) -> Path:
    if CASES is None or not (CASES / name).is_file():
        pytest.skip(f"public case file {name} not found under ../shared/cases/public "
                    "(the shared cases folder is not checked out next to this repository)")
    return CASES / name


def utc(*args) -> float:
    return dt.datetime(*args, tzinfo=dt.UTC).timestamp()


# ------------------------------------------------------------------------------------------
# the public case files


def test_old_sglang_file():
    r = parse_file(case(OLD))
    assert r.format == "sglang"
    assert r.skipped == []
    assert len(r.events) == 9  # 8 prefill lines + 1 decode line
    kinds = [e.kind for e in r.events]
    assert kinds.count("prefill") == 8 and kinds.count("decode") == 1
    assert all(e.rank == {"tp": 0} for e in r.events)
    burst = r.events[2]
    assert burst.kind == "prefill" and burst.fields["new_seq"] == 30
    assert burst.fields["new_token"] == 3810 and burst.fields["queue_req"] == 68
    assert burst.fields["cached_token"] == 60 and burst.fields["running_req"] == 2
    assert burst.timestamp == utc(2025, 3, 24, 2, 56, 26) and burst.start == burst.timestamp
    dec = r.events[3]
    assert dec.kind == "decode" and dec.fields["accept_len"] == pytest.approx(2.54)
    assert dec.fields["running_req"] == 32 and dec.fields["token"] == 7352
    assert dec.fields["gen_throughput_tok_s"] == pytest.approx(39.33)
    assert dec.start is None  # first decode line: interval start unknown
    assert dec.extra == {"largest-len": 0}  # unknown field kept
    # trailing ", " on every line left nothing behind
    assert all("" not in e.extra for e in r.events)
    assert [e.fields["queue_req"] for e in r.events][-5:] == [66, 63, 61, 56, 54]
    assert [e.source_line for e in r.events] == list(range(1, 10))


def test_new_sglang_file_skips_http_lines():
    r = parse_file(case(NEW))
    assert r.format == "sglang"
    assert [e.kind for e in r.events] == ["decode", "prefill", "prefill", "prefill"]
    assert len(r.skipped) == 6  # uvicorn access lines
    assert all('"POST /v1/chat/completions HTTP/1.1" 200 OK' in s for _, s in r.skipped)
    assert [n for n, _ in r.skipped] == [2, 4, 6, 8, 9, 10]
    dec = r.events[0]
    assert dec.fields["running_req"] == 32
    assert dec.fields["gen_throughput_tok_s"] == pytest.approx(1635.11)
    assert dec.fields["cuda_graph"] is True and dec.rank == {}
    assert [e.fields["new_token"] for e in r.events[1:]] == [158, 290, 160]
    assert [e.fields["input_throughput_tok_s"] for e in r.events[1:]] == \
        pytest.approx([559.53, 1670.03, 4099.38])
    assert r.events[3].timestamp == utc(2026, 4, 5, 20, 2, 52)


def test_vllm_file():
    r = parse_file(case(VLLM), year=2026)
    assert r.format == "vllm" and r.skipped == []
    assert len(r.events) == 5 and all(e.kind == "stats" for e in r.events)
    f = [e.fields for e in r.events]
    assert [x["prompt_throughput_tok_s"] for x in f] == [0.0, 0.0, 12068.8, 18032.5, 0.0]
    assert [x["gen_throughput_tok_s"] for x in f][2:4] == [734.9, 589.8]
    assert f[0]["kv_cache_usage_pct"] == 95.9 and f[3]["kv_cache_usage_pct"] == 95.9
    assert f[0]["running_req"] == 18 and f[0]["queue_req"] == 43
    assert f[0]["prefix_cache_hit_rate_pct"] == 0.0
    assert r.events[0].rank == {"dp": 0}
    assert r.events[0].extra == {"process": "APIServer", "pid": 3646}
    assert r.events[0].timestamp == utc(2026, 5, 19, 10, 13, 11)
    assert r.events[0].start is None
    assert [e.start for e in r.events[1:]] == [e.timestamp for e in r.events[:-1]]

    si = stats_intervals(r.events)
    assert si["phase"].tolist() == ["decode", "prefill", "prefill", "decode"]
    assert si["prefill"].tolist() == [False, True, True, False]
    assert (si["end"] - si["start"]).tolist() == [10.0] * 4
    mixed = stats_intervals(r.events, both="mixed")
    assert mixed["phase"].tolist() == ["decode", "mixed", "mixed", "decode"]

    pi = phase_intervals(r.events)
    assert pi["phase"].tolist() == ["decode", "prefill", "decode"]
    assert pi["start"].tolist() == [utc(2026, 5, 19, 10, 13, 11), utc(2026, 5, 19, 10, 13, 21),
                                    utc(2026, 5, 19, 10, 13, 41)]
    assert pi["end"].tolist()[-1] == utc(2026, 5, 19, 10, 13, 51)


def test_case_files_as_frames_and_labels(tmp_path):
    for name in (OLD, NEW, VLLM):
        r = parse_file(case(name), year=2026)
        fr = events_frame(r.events)
        assert len(fr) == len(r.events)
        assert fr["timestamp"].notna().all()
        labels = phase_intervals(r.events)
        assert list(labels.columns) == ["start", "end", "phase", "hot_gpu"]
        assert (labels["end"] > labels["start"]).all()
        assert (labels["start"].iloc[1:].to_numpy() >= labels["end"].iloc[:-1].to_numpy()).all()
        p = write_labels(tmp_path / f"{name}.csv", labels)
        back = read_labels(p)
        assert back["phase"].tolist() == labels["phase"].tolist()


def test_old_file_phase_intervals_merge_prefills():
    r = parse_file(case(OLD))
    pi = phase_intervals(r.events)
    t = utc(2025, 3, 24, 2, 56, 0)
    spans = [(s - t, e - t) for s, e in zip(pi["start"], pi["end"], strict=True)]
    assert spans == [(20, 21), (25, 27), (43, 44), (45, 48)]
    assert set(pi["phase"]) == {"prefill"}
    got = label_at(pi, [t + 20.5, t + 22, t + 26.5, t + 47.9])["phase"]
    assert got.isna().tolist() == [False, True, False, False]


# ------------------------------------------------------------------------------------------
# synthetic SGLang lines

DEC = ("Decode batch, #running-req: 8, #token: 900, token usage: 0.12, accept len: 3.10, "
       "cuda graph: False, gen throughput (token/s): 410.5, #queue-req: 2")
PRE = ("Prefill batch, #new-seq: 4, #new-token: 512, #cached-token: 64, token usage: 0.10, "
       "#running-req: 3, #queue-req: 1, #pending-token: 77, cuda graph: True, "
       "input throughput (token/s): 1200.25")


def one(line: str, **kw):
    r = parse_lines([line], **kw)
    assert len(r.events) == 1, r
    return r.events[0]


@pytest.mark.parametrize("prefix,rank", [
    ("[2026-01-02 03:04:05] ", {}),
    ("[2026-01-02 03:04:05 TP3] ", {"tp": 3}),
    ("[2026-01-02 03:04:05 DP1 TP5] ", {"dp": 1, "tp": 5}),
    ("[2026-01-02 03:04:05 PP2 TP0] ", {"pp": 2, "tp": 0}),
    ("[2026-01-02 03:04:05 DP3 PP1 TP7 EP7] ", {"dp": 3, "pp": 1, "tp": 7, "ep": 7}),
    ("[2026-01-02 03:04:05 TP12 EP12] ", {"tp": 12, "ep": 12}),
])
def test_sglang_rank_tags(prefix, rank):
    ev = one(prefix + PRE)
    assert ev.rank == rank
    assert ev.timestamp == utc(2026, 1, 2, 3, 4, 5)


def test_sglang_new_prefill_fields_by_name():
    ev = one("[2026-01-02 03:04:05.250 TP0] " + PRE)
    assert ev.kind == "prefill" and ev.start == ev.timestamp
    assert ev.timestamp == pytest.approx(utc(2026, 1, 2, 3, 4, 5) + 0.25)
    assert ev.fields == {"new_seq": 4, "new_token": 512, "cached_token": 64, "token_usage": 0.10,
                         "running_req": 3, "queue_req": 1, "pending_token": 77,
                         "cuda_graph": True, "input_throughput_tok_s": 1200.25}
    assert ev.extra == {}


def test_sglang_decode_fields_and_order_independence():
    ev = one("[2026-01-02 03:04:05] " + DEC)
    assert ev.fields["cuda_graph"] is False and ev.fields["accept_len"] == 3.10
    shuffled = ("[2026-01-02 03:04:05] Decode batch. #queue-req: 2, gen throughput (token/s): "
                "410.5, #running-req: 8, #token: 900, ")
    ev2 = one(shuffled)
    assert ev2.fields == {"queue_req": 2, "gen_throughput_tok_s": 410.5, "running_req": 8,
                          "token": 900}


def test_sglang_millisecond_timestamps():
    ev = one("[2026-01-02 03:04:05.007 DP0 TP0] " + DEC)
    assert ev.timestamp == pytest.approx(utc(2026, 1, 2, 3, 4, 5) + 0.007, abs=1e-6)


def test_sglang_unknown_fields_go_to_extra():
    line = ("[2026-01-02 03:04:05] Prefill batch, #new-seq: 1, #new-token: 10, fwd occupancy: "
            "87.5%, #prealloc-req: 3, mode: chunked, swa token usage: 0.25, #cached-token: n/a")
    ev = one(line)
    assert ev.fields == {"new_seq": 1, "new_token": 10}
    assert ev.extra == {"fwd occupancy": 87.5, "#prealloc-req": 3, "mode": "chunked",
                        "swa token usage": 0.25, "#cached-token": "n/a"}
    fr = events_frame([ev])
    assert fr.loc[0, "extra.mode"] == "chunked" and fr.loc[0, "new_token"] == 10


@pytest.mark.parametrize("prefix,expected", [
    ("2026-01-02T03:04:05Z scheduler INFO: ", utc(2026, 1, 2, 3, 4, 5)),
    ("2026-01-02 03:04:05,125 - sglang.srt.managers.scheduler - INFO - ",
     utc(2026, 1, 2, 3, 4, 5) + 0.125),
    ("host7 | 2026-01-02T05:04:05+02:00 | TP2 | ", utc(2026, 1, 2, 3, 4, 5)),
    ("INFO scheduler: ", None),
    ("", None),
])
def test_sglang_custom_prefix(prefix, expected):
    ev = one(prefix + DEC)
    assert ev.kind == "decode" and ev.fields["running_req"] == 8
    if expected is None:
        assert ev.timestamp is None
    else:
        assert ev.timestamp == pytest.approx(expected, abs=1e-6)
    if "TP2" in prefix:
        assert ev.rank == {"tp": 2}


def test_decode_start_chains_per_rank():
    lines = ["[2026-01-02 03:04:00 DP0 TP0] " + DEC,
             "[2026-01-02 03:04:01 DP1 TP0] " + DEC,
             "[2026-01-02 03:04:02 DP0 TP0] " + PRE,
             "[2026-01-02 03:04:04 DP0 TP0] " + DEC,
             "[2026-01-02 03:04:05 DP1 TP0] " + DEC]
    ev = parse_lines(lines).events
    t = utc(2026, 1, 2, 3, 4, 0)
    assert [None if e.start is None else e.start - t for e in ev] == [None, None, 2, 0, 1]
    pi = phase_intervals(ev, prefill_s=0.5)
    # prefill wins over decode where they overlap
    spans = [(s - t, e - t, p) for s, e, p in zip(pi["start"], pi["end"], pi["phase"],
                                                   strict=True)]
    assert spans == [(0, 2, "decode"), (2, 2.5, "prefill"), (2.5, 5, "decode")]
    assert phase_intervals(ev, prefill_s=0.5, max_interval_s=3.5)["phase"].tolist() == \
        ["prefill"]  # both decode intervals last 4 s


def test_other_lines_are_skipped_and_counted():
    lines = ["", "[2026-01-02 03:04:05] INFO:     127.0.0.1:1 - \"GET /health HTTP/1.1\" 200 OK",
             "[2026-01-02 03:04:05 TP0] Load weight end. type=DeepseekV3ForCausalLM",
             "[2026-01-02 03:04:05 TP0] Decode batch. ",  # no fields at all
             "Prefill batches were merged",
             "\x1b[32m[2026-01-02 03:04:05 TP0]\x1b[0m " + PRE]
    r = parse_lines(lines)
    assert len(r.events) == 1 and r.events[0].source_line == 6
    assert [n for n, _ in r.skipped] == [1, 2, 3, 4, 5]


def test_tz_and_clock_offset():
    line = "[2026-07-01 12:00:00 TP0] " + PRE
    base = utc(2026, 7, 1, 12, 0, 0)
    assert one(line).timestamp == base
    assert one(line, tz="Europe/Berlin").timestamp == base - 2 * 3600  # CEST = UTC+2
    assert one(line, tz="America/New_York").timestamp == base + 4 * 3600  # EDT = UTC-4
    assert one(line, tz="+05:30").timestamp == base - 5.5 * 3600
    assert one(line, tz="-0800").timestamp == base + 8 * 3600
    assert one(line, tz="UTC+1").timestamp == base - 3600
    assert one(line, tz="Europe/Berlin", clock_offset_s=-1.5).timestamp == \
        base - 2 * 3600 - 1.5
    winter = one("[2026-01-01 12:00:00 TP0] " + PRE, tz="Europe/Berlin")
    assert winter.timestamp == utc(2026, 1, 1, 11, 0, 0)
    # the decode interval start carries the same conversion
    ev = parse_lines(["[2026-07-01 12:00:00] " + DEC, "[2026-07-01 12:00:03] " + DEC],
                     tz="+01:00", clock_offset_s=0.25).events
    assert ev[1].start == base - 3600 + 0.25 and ev[1].timestamp == base - 3600 + 3.25


def test_bad_arguments():
    with pytest.raises(ServerLogError, match="time zone"):
        parse_lines([], tz="Mars/Olympus")
    with pytest.raises(ServerLogError, match="out of range"):
        resolve_tz("+25:00")
    with pytest.raises(ServerLogError, match="fmt"):
        parse_lines([], fmt="tgi")
    with pytest.raises(ServerLogError, match="no such file"):
        parse_file("/nonexistent/server.log")
    with pytest.raises(ValueError):
        phase_intervals([], prefill_s=0)
    assert parse_lines(["hello"]).format is None


def test_fixed_format_skips_the_other_server():
    vl = ("INFO 05-19 10:13:11 [loggers.py:271] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
          "Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
          "GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%")
    sg = "[2026-01-02 03:04:05] " + PRE
    assert [e.kind for e in parse_lines([vl, sg], fmt="sglang").events] == ["prefill"]
    r = parse_lines([vl, sg])  # detected from the first recognised line
    assert r.format == "vllm" and len(r.events) == 1 and r.skipped == [(2, sg)]


# ------------------------------------------------------------------------------------------
# synthetic vLLM lines


def test_vllm_v0_line_without_year_and_prefix():
    v0 = ("INFO 07-15 10:10:10 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation "
          "throughput: 45.2 tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: 5 reqs, GPU KV "
          "cache usage: 4.2%, CPU KV cache usage: 0.0%.")
    ev = one(v0, year=2024)
    assert ev.timestamp == utc(2024, 7, 15, 10, 10, 10) and ev.rank == {}
    assert ev.fields == {"prompt_throughput_tok_s": 0.0, "gen_throughput_tok_s": 45.2,
                         "running_req": 3, "swapped_req": 0, "queue_req": 5,
                         "kv_cache_usage_pct": 4.2, "cpu_kv_cache_usage_pct": 0.0}
    bare = one("Engine 002: Avg prompt throughput: 5.5 tokens/s, Avg generation throughput: "
               "0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, "
               "Prefix cache hit rate: 50.0%, MM cache hit rate: 12.5%")
    assert bare.timestamp is None and bare.rank == {"dp": 2}
    assert bare.extra == {"MM cache hit rate": 12.5}


def test_vllm_year_defaults_and_rollover():
    this_year = dt.datetime.now(dt.UTC).year
    line = ("(APIServer pid=1) INFO {} [loggers.py:1] Engine 000: Avg prompt throughput: 0.0 "
            "tokens/s, Avg generation throughput: 1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
            "GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%")
    yesterday = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    ev = one(line.format(yesterday.strftime("%m-%d %H:%M:%S")))
    assert dt.datetime.fromtimestamp(ev.timestamp, dt.UTC).year == yesterday.year
    assert yesterday.year in (this_year, this_year - 1)
    r = parse_lines([line.format("12-31 23:59:55"), line.format("01-01 00:00:05")], year=2025)
    assert r.events[0].timestamp == utc(2025, 12, 31, 23, 59, 55)
    assert r.events[1].timestamp == utc(2025, 1, 1, 0, 0, 5)  # an explicit year is kept
    p = ServerLogParser()
    p._year = 2025  # as if detected: dates jumping back half a year move to the next year
    evs, _ = p.feed([line.format("12-31 23:59:55"), line.format("01-01 00:00:05")])
    assert evs[1].timestamp - evs[0].timestamp == 10.0
    assert one(line.format("02-29 10:00:00"), year=2025).timestamp is None  # no such day


def test_vllm_spec_decode_lines():
    v1 = ("(APIServer pid=7) INFO 05-19 10:13:11 [metrics.py:96] SpecDecoding metrics: Mean "
          "acceptance length: 2.54, Accepted throughput: 120.50 tokens/s, Drafted throughput: "
          "300.00 tokens/s, Accepted: 1205 tokens, Drafted: 3000 tokens, Per-position acceptance "
          "rate: 0.700, 0.500, 0.300, Avg Draft acceptance rate: 40.2%")
    ev = one(v1, year=2026)
    assert ev.kind == "stats" and ev.fields == {
        "accept_len": 2.54, "spec_accepted_tok_s": 120.5, "spec_drafted_tok_s": 300.0,
        "spec_accepted_tokens": 1205, "spec_drafted_tokens": 3000,
        "spec_draft_acceptance_rate_pct": 40.2}
    assert ev.extra["Per-position acceptance rate"] == "0.700, 0.500, 0.300"
    old = one("INFO 05-19 10:13:11 [metrics.py:1] SpecDecoding metrics: Draft acceptance rate: "
              "nan%, Accepted: 0 tokens, Drafted: 0 tokens", year=2026)
    assert old.fields == {"spec_accepted_tokens": 0, "spec_drafted_tokens": 0}
    assert old.extra == {"Draft acceptance rate": "nan%"}
    v0 = one("INFO 05-19 10:13:11 spec_decode_worker.py:1] Speculative metrics: Draft acceptance "
             "rate: 0.651, System efficiency: 0.570, Number of speculative tokens: 4, Number of "
             "accepted tokens: 17, Number of draft tokens: 26, Number of emitted tokens: 22.",
             year=2026)
    assert v0.fields["spec_draft_acceptance_rate"] == 0.651
    assert v0.fields["spec_accepted_tokens"] == 17 and v0.fields["spec_emitted_tokens"] == 22
    # spec lines chain separately from the stats lines and give no phase interval
    stats = ("INFO 05-19 10:13:{:02d} [loggers.py:1] Engine 000: Avg prompt throughput: 0.0 "
             "tokens/s, Avg generation throughput: 9.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
             "GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%")
    r = parse_lines([stats.format(1), v1.replace("10:13:11", "10:13:01"), stats.format(11),
                     v1.replace("10:13:11", "10:13:11")], year=2026)
    assert r.events[2].start == r.events[0].timestamp
    assert r.events[3].start == r.events[1].timestamp
    assert len(stats_intervals(r.events)) == 1


def test_vllm_idle_intervals():
    stats = ("INFO 05-19 10:13:{:02d} [loggers.py:1] Engine 000: Avg prompt throughput: {} "
             "tokens/s, Avg generation throughput: {} tokens/s, Running: 0 reqs, Waiting: 0 reqs, "
             "GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%")
    lines = [stats.format(0, "0.0", "1.0"), stats.format(10, "0.0", "0.0"),
             stats.format(20, "3.0", "0.0")]
    ev = parse_lines(lines, year=2026).events
    assert stats_intervals(ev)["phase"].tolist() == ["idle", "prefill"]
    assert phase_intervals(ev)["phase"].tolist() == ["prefill"]
    assert phase_intervals(ev, include_idle=True)["phase"].tolist() == ["idle", "prefill"]


def test_events_frame_empty_and_columns():
    fr = events_frame([])
    assert list(fr.columns) == ["source_line", "kind", "timestamp", "start"] and fr.empty
    ev = parse_lines(["[2026-01-02 03:04:05 TP0] " + PRE, "[2026-01-02 03:04:06 TP0] " + DEC]).events
    fr = events_frame(ev)
    assert fr["kind"].tolist() == ["prefill", "decode"]
    assert math.isnan(fr.loc[0, "token"]) and fr.loc[1, "token"] == 900
    assert math.isnan(fr.loc[1, "start"]) and fr["tp"].tolist() == [0, 0]


# ------------------------------------------------------------------------------------------
# mangled lines (hypothesis)

_SEEDS = [
    ("[2025-03-24 02:56:26 TP0] Prefill batch. #new-seq: 30, #new-token: 3810, #cached-token: 60, "
     "token usage: 0.00, #running-req: 2, #queue-req: 68, "),
    ("[2025-03-24 02:56:41 TP0] Decode batch. #running-req: 32, #token: 7352, token usage: 0.01, "
     "accept len: 2.54, gen throughput (token/s): 39.33, largest-len: 0, #queue-req: 68, "),
    ("[2026-04-05 20:02:51] Decode batch, #running-req: 32, #token: 11179, token usage: 0.08, "
     "cuda graph: True, gen throughput (token/s): 1635.11, #queue-req: 0"),
    ("[2026-04-05 20:02:51.123 DP1 PP0 TP3 EP3] Prefill batch, #new-seq: 1, #new-token: 158, "
     "#cached-token: 0, token usage: 0.08, #running-req: 31, #queue-req: 0, cuda graph: True, "
     "input throughput (token/s): 559.53, #pending-token: 12"),
    ("(APIServer pid=3646) INFO 05-19 10:13:31 [loggers.py:271] Engine 000: Avg prompt throughput: "
     "12068.8 tokens/s, Avg generation throughput: 734.9 tokens/s, Running: 18 reqs, Waiting: 33 "
     "reqs, GPU KV cache usage: 87.7%, Prefix cache hit rate: 0.0%"),
    ("INFO 05-19 10:13:11 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.54, "
     "Accepted: 1205 tokens, Drafted: 3000 tokens, Per-position acceptance rate: 0.700, 0.500"),
    "[2026-04-05 20:02:51] INFO:     127.0.0.1:40052 - \"POST /v1/chat/completions HTTP/1.1\" 200",
]
_TOKENS = (list("0123456789.,:-+%[] #TPDEZ()=/ae\t_")
           + ["\u0663", "\u00b2", "\uff11", "\x1b", "nan", "inf", "1e5", "Decode batch,",
              "Prefill batch.", "TP", " 05-19 ", "Engine 001: "])
_GARBAGE = st.lists(st.sampled_from(_TOKENS), max_size=6).map("".join)
_NUM_IN_LINE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)", re.ASCII)


@st.composite
def mangled(draw):
    line = draw(st.sampled_from(_SEEDS))
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(line)))
        if draw(st.booleans()):
            line = line[:i] + draw(_GARBAGE) + line[i:]
        else:
            j = draw(st.integers(i, min(len(line), i + 8)))
            line = line[:i] + line[j:]
    return line


def _numbers(line: str) -> set[float]:
    out = set()
    for m in _NUM_IN_LINE.finditer(line):
        out.add(float(m.group()))
        out.add(float(m.group().lstrip("+-")))
    return out


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line=mangled(), fmt=st.sampled_from([None, "sglang", "vllm"]))
def test_mangled_lines_never_crash_or_invent_numbers(line, fmt):
    r = parse_lines([line, line], fmt=fmt, year=2026)
    assert len(r.events) + len(r.skipped) == 2
    nums = _numbers(line)
    for ev in r.events:
        assert ev.kind in ("prefill", "decode", "stats")
        values = list(ev.fields.values()) + list(ev.extra.values()) + list(ev.rank.values())
        for v in values:
            if isinstance(v, bool | str):
                continue
            assert math.isfinite(v) and float(v) in nums, (v, line)
        if ev.timestamp is not None and r.format == "sglang" and not re.search(
                r"[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?\s?(?:Z|[+-][0-9]{2})", line):
            t = dt.datetime.fromtimestamp(ev.timestamp, dt.UTC)
            assert t.strftime("%Y-%m-%d") in line and t.strftime("%H:%M:%S") in line
    events_frame(r.events)
    phase_intervals(r.events)


# ------------------------------------------------------------------------------------------
# tailer


def _append(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(text)


def test_tailer_starts_at_end_and_joins_split_lines(tmp_path):
    p = tmp_path / "server.log"
    p.write_text("old line\n")
    t = LogTailer(p)
    assert t.poll() == []
    _append(p, "[2026-01-02 03:04:05] Prefill batch, #new-")
    assert t.poll() == []  # partial line held
    _append(p, "seq: 1, #new-token: 10\nsecond\r\nthi")
    assert t.poll() == ["[2026-01-02 03:04:05] Prefill batch, #new-seq: 1, #new-token: 10",
                        "second"]
    _append(p, "rd\n")
    assert t.poll() == ["third"]
    t.close()
    with LogTailer(p, from_start=True) as t2:
        assert t2.poll()[0] == "old line"


def test_tailer_follows_rotation(tmp_path):
    p = tmp_path / "server.log"
    p.write_text("a\n")
    t = LogTailer(p)
    _append(p, "b\nc-par")
    assert t.poll() == ["b"]
    _append(p, "tial\n")  # completed in the old file ...
    p.rename(tmp_path / "server.log.1")  # ... which is then rotated away
    _append(tmp_path / "server.log.1", "late write to the old file\n")
    assert t.poll() == ["c-partial", "late write to the old file"]  # no new file yet
    p.write_text("new 1\nnew 2\n")
    assert t.poll() == ["new 1", "new 2"]
    assert t.rotations == 1
    # rotation by delete + recreate, with a different size
    p.unlink()
    p.write_text("x\n")
    assert t.poll() == ["x"] and t.rotations == 2
    t.close()


def test_tailer_follows_truncation(tmp_path):
    p = tmp_path / "server.log"
    p.write_text("")
    t = LogTailer(p)
    _append(p, "one\ntwo\nhalf")
    assert t.poll() == ["one", "two"]
    with p.open("r+") as fh:  # copytruncate-style
        fh.truncate(0)
    _append(p, "after\n")
    assert t.poll() == ["after"] and t.truncations == 1
    t.close()


def test_tailer_waits_for_missing_file(tmp_path):
    p = tmp_path / "later.log"
    with LogTailer(p) as t:
        assert t.poll() == []
        p.write_text("first\n")
        assert t.poll() == ["first"]


def test_tailer_reads_stdin(monkeypatch):
    r, w = os.pipe()
    reader = os.fdopen(r, "r")
    monkeypatch.setattr(sys, "stdin", reader)
    try:
        t = LogTailer("-")
        assert t.poll() == []
        os.write(w, b"[2026-01-02 03:04:05] Decode batch, #running-req: 1\npart")
        assert t.poll() == ["[2026-01-02 03:04:05] Decode batch, #running-req: 1"]
        os.close(w)
        assert t.poll() == ["part"] and t.eof
    finally:
        reader.close()


def test_follow_yields_events_across_rotation(tmp_path):
    p = tmp_path / "server.log"
    p.write_text("[2026-01-02 03:04:00 TP0] " + DEC + "\n")
    stop = threading.Event()
    gen = follow(p, from_start=True, stop_event=stop, interval_s=0.01, tz="+01:00")
    first = next(gen)
    assert [e.kind for e in first] == ["decode"] and first[0].start is None
    p.rename(tmp_path / "server.log.1")
    p.write_text("[2026-01-02 03:04:03 TP0] " + DEC + "\nnoise\n")
    second = next(gen)
    assert second[0].start == first[0].timestamp == utc(2026, 1, 2, 2, 4, 0)
    assert second[0].source_line == 2  # counted across files
    stop.set()
    assert list(gen) == []


def test_follow_stdin_ends_at_eof(monkeypatch):
    r, w = os.pipe()
    reader = os.fdopen(r, "r")
    monkeypatch.setattr(sys, "stdin", reader)
    os.write(w, ("[2026-01-02 03:04:00] " + PRE + "\n[2026-01-02 03:04:01] " + DEC).encode())
    os.close(w)
    try:
        batches = list(follow("-", interval_s=0.01))
    finally:
        reader.close()
    assert [e.kind for b in batches for e in b] == ["prefill", "decode"]


def test_events_frame_round_trips_to_csv(tmp_path):
    ev = parse_lines(["[2026-01-02 03:04:05 TP0] " + PRE]).events
    fr = events_frame(ev)
    fr.to_csv(tmp_path / "e.csv", index=False)
    back = pd.read_csv(tmp_path / "e.csv")
    assert back.loc[0, "new_token"] == 512
