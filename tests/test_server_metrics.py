"""Server /metrics scraper: parsing, counter rates, summary fields, failures — over real HTTP.

Every test talks to a real ``http.server.ThreadingHTTPServer`` bound to 127.0.0.1 (port 0),
serving exposition text the test controls.  Scrape times are injected through the scraper's
clock, so rates are checked exactly without sleeping.
"""

from __future__ import annotations

import http.server
import ipaddress
import math
import socket
import threading
from collections.abc import Callable, Iterator

import pandas as pd
import pytest

from tealeaves.classifier.server_summary import SUMMARY_FIELDS, summary
from tealeaves.collectors.server_metrics import MetricsScraper
from tealeaves.data.server_metrics import (
    FRAME_COLUMNS,
    MetricSample,
    RateTracker,
    is_monotonic,
    labels_string,
    parse_labels,
    parse_metrics,
)

LOOPBACK = "127.0.0.1"


# --------------------------------------------------------------------------------------------
# exposition text the tests control


def sglang_text(decode: float, prefill: float = 500.0, running: float = 12.0,
                ttft_sum: float = 2.5, ttft_count: float = 3.0) -> str:
    """SGLang-like exposition: DP0 with two TP ranks (TP1 duplicating TP0), DP1 with one."""
    lines = [
        "# HELP python_gc_objects_collected_total Objects collected during gc",
        "# TYPE python_gc_objects_collected_total counter",
        'python_gc_objects_collected_total{generation="0"} 123.0',
    ]
    ranks = [("0", "0"), ("0", "1"), ("1", "0")]  # (dp_rank, tp_rank)
    gauges = {  # name: (value on DP0, value on DP1)
        "sglang:num_running_reqs": (running, 4.0),
        "sglang:num_queue_reqs": (2.0, 1.0),
        "sglang:token_usage": (0.5, 0.3),
        "sglang:gen_throughput": (800.0, 200.0),
        "sglang:spec_accept_length": (3.0, 2.0),
    }
    for name, (v0, v1) in gauges.items():
        lines += [f"# HELP {name} {name}.", f"# TYPE {name} gauge"]
        for dp, tp in ranks:
            lab = (f'dp_rank="{dp}",engine_type="unified",model_name="kimi",pp_rank="0",'
                   f'tp_rank="{tp}"')
            lines.append(f"{name}{{{lab}}} {v0 if dp == '0' else v1}")
    lines += [
        "# HELP sglang:realtime_tokens_total Tokens processed, by mode.",
        "# TYPE sglang:realtime_tokens_total counter",
    ]
    for dp, tp in ranks:
        lab = f'dp_rank="{dp}",model_name="kimi",pp_rank="0",tp_rank="{tp}"'
        scale = 1.0 if dp == "0" else 0.5
        lines += [
            f'sglang:realtime_tokens_total{{{lab},mode="prefill_compute"}} {prefill * scale}',
            f'sglang:realtime_tokens_total{{{lab},mode="prefill_cache"}} {prefill * 2}',
            f'sglang:realtime_tokens_total{{{lab},mode="decode"}} {decode * scale}',
        ]
    lines += [
        "# HELP sglang:realtime_tokens_created Tokens processed, by mode.",
        "# TYPE sglang:realtime_tokens_created gauge",
        ('sglang:realtime_tokens_created{dp_rank="0",model_name="kimi",pp_rank="0",tp_rank="0",'
        'mode="decode"} 1.7e9'),
        "# HELP sglang:forward_execution_seconds_total Forward time by category.",
        "# TYPE sglang:forward_execution_seconds_total counter",
        ('sglang:forward_execution_seconds_total{category="decode",dp_rank="0",tp_rank="0"} '
        f"{decode / 1000}"),
        "# HELP sglang:time_to_first_token_seconds Histogram of time to first token.",
        "# TYPE sglang:time_to_first_token_seconds histogram",
        'sglang:time_to_first_token_seconds_bucket{le="0.1",dp_rank="0",tp_rank="0"} 1.0',
        'sglang:time_to_first_token_seconds_bucket{le="1.0",dp_rank="0",tp_rank="0"} 2.0',
        ('sglang:time_to_first_token_seconds_bucket{le="+Inf",dp_rank="0",tp_rank="0"} '
        f"{ttft_count}"),
        f'sglang:time_to_first_token_seconds_sum{{dp_rank="0",tp_rank="0"}} {ttft_sum}',
        f'sglang:time_to_first_token_seconds_count{{dp_rank="0",tp_rank="0"}} {ttft_count}',
        "",
    ]
    return "\n".join(lines)


def vllm_text(prompt: float, gen: float, accepted: float, drafts: float) -> str:
    """vLLM-like exposition with two engines."""
    out = []
    for fam, typ in [("vllm:num_requests_running", "gauge"),
                     ("vllm:num_requests_waiting", "gauge"),
                     ("vllm:kv_cache_usage_perc", "gauge"),
                     ("vllm:prompt_tokens_total", "counter"),
                     ("vllm:generation_tokens_total", "counter"),
                     ("vllm:spec_decode_num_accepted_tokens_total", "counter"),
                     ("vllm:spec_decode_num_drafts_total", "counter")]:
        out += [f"# HELP {fam} {fam}.", f"# TYPE {fam} {typ}"]
        for eng in ("0", "1"):
            v = {"vllm:num_requests_running": 18.0, "vllm:num_requests_waiting": 33.0,
                 "vllm:kv_cache_usage_perc": 0.877 if eng == "0" else 0.5,
                 "vllm:prompt_tokens_total": prompt, "vllm:generation_tokens_total": gen,
                 "vllm:spec_decode_num_accepted_tokens_total": accepted,
                 "vllm:spec_decode_num_drafts_total": drafts}[fam]
            out.append(f'{fam}{{engine="{eng}",model_name="Qwen/Qwen3-8B"}} {v}')
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# the real HTTP server


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _MetricsServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        srv = self.server
        srv.clients.append(self.client_address[0])
        with srv.lock:
            i = srv.requests
            srv.requests += 1
            status, body, delay, drip = srv.status, srv.body_for(i), srv.delay, srv.drip
        if delay:
            srv.release.wait(delay)
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            if drip:
                self.wfile.write(data[:10])
                self.wfile.flush()
                srv.release.wait(drip)
                self.wfile.write(data[10:])
            else:
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


class _MetricsServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__((LOOPBACK, 0), _Handler)
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.clients: list[str] = []
        self.requests = 0
        self.status = 200
        self.bodies: list[str] = [""]
        self.delay = 0.0
        self.drip = 0.0

    def body_for(self, i: int) -> str:
        return self.bodies[min(i, len(self.bodies) - 1)]

    def serve(self, *bodies: str, status: int = 200, delay: float = 0.0,
              drip: float = 0.0) -> None:
        with self.lock:
            self.bodies, self.requests = list(bodies), 0
            self.status, self.delay, self.drip = status, delay, drip

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/metrics"


@pytest.fixture
def server() -> Iterator[_MetricsServer]:
    srv = _MetricsServer()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.release.set()
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=2)
        assert not thread.is_alive()
        # only loopback was ever used, on both ends
        assert ipaddress.ip_address(srv.server_address[0]).is_loopback
        assert all(ipaddress.ip_address(c).is_loopback for c in srv.clients)


def fake_clock(*times: float) -> Callable[[], float]:
    it = iter(times)
    return lambda: next(it)


def row(frame: pd.DataFrame, name: str, **labels: str) -> pd.Series:
    """The single frame row with this name whose labels include ``labels``."""
    hits = [i for i, (n, lab) in enumerate(zip(frame["name"], frame["labels"], strict=True))
            if n == name and labels.items() <= parse_labels(lab).items()]
    assert len(hits) == 1, (name, labels, hits)
    return frame.iloc[hits[0]]


# --------------------------------------------------------------------------------------------
# parsing


def test_parse_keeps_names_labels_and_types(server: _MetricsServer) -> None:
    server.serve(sglang_text(decode=1000))
    scraper = MetricsScraper(server.url, timeout_s=2, clock=fake_clock(1_700_000_000.25))
    samples = scraper.scrape_once()
    assert samples is not None
    assert scraper.health.scrapes == 1 and scraper.health.failures == 0
    assert scraper.health.last_ok == 1_700_000_000.25
    assert all(s.t == 1_700_000_000.25 for s in samples)
    names = {s.name for s in samples}
    assert "sglang:num_running_reqs" in names                # colon kept
    assert not any(n.startswith("python_") for n in names)   # default prefixes
    assert not any(n.endswith("_created") for n in names)    # creation times dropped

    run = [s for s in samples if s.name == "sglang:num_running_reqs"]
    assert len(run) == 3 and {s.kind for s in run} == {"gauge"}
    assert run[0].labels == {"dp_rank": "0", "engine_type": "unified", "model_name": "kimi",
                             "pp_rank": "0", "tp_rank": "0"}
    assert run[0].value == 12.0

    tok = [s for s in samples if s.name == "sglang:realtime_tokens_total"]
    assert {s.kind for s in tok} == {"counter"}
    assert {s.labels["mode"] for s in tok} == {"prefill_compute", "prefill_cache", "decode"}
    fwd = [s for s in samples if s.name == "sglang:forward_execution_seconds_total"]
    assert fwd[0].labels["category"] == "decode" and fwd[0].kind == "counter"

    hist = [s for s in samples if s.family == "sglang:time_to_first_token_seconds"]
    assert {s.kind for s in hist} == {"histogram"}
    assert [s.labels.get("le") for s in hist if s.name.endswith("_bucket")] == \
        ["0.1", "1.0", "+Inf"]
    assert {s.name for s in hist} == {"sglang:time_to_first_token_seconds_bucket",
                                      "sglang:time_to_first_token_seconds_sum",
                                      "sglang:time_to_first_token_seconds_count"}


def test_parse_prefix_choice_and_created() -> None:
    text = sglang_text(decode=1)
    all_ = parse_metrics(text, 5.0, prefixes=None)
    assert any(s.name == "python_gc_objects_collected_total" for s in all_)
    only_py = parse_metrics(text, 5.0, prefixes=("python_",))
    assert {s.name for s in only_py} == {"python_gc_objects_collected_total"}
    created = parse_metrics(text, 5.0, keep_created=True)
    assert any(s.name == "sglang:realtime_tokens_created" for s in created)
    vl = parse_metrics(vllm_text(1, 2, 3, 4), 5.0)
    assert {s.kind for s in vl if s.name == "vllm:prompt_tokens_total"} == {"counter"}
    assert {s.labels["engine"] for s in vl} == {"0", "1"}
    assert vl[0].labels["model_name"] == "Qwen/Qwen3-8B"


def test_parse_garbage_raises_value_error() -> None:
    with pytest.raises(ValueError):
        parse_metrics("<html><body>Bad gateway</body></html>", 0.0)


def test_labels_string_is_stable_and_reversible() -> None:
    labels = {"tp_rank": "0", "dp_rank": "1", "model_name": "a,b=c\\d"}
    s = labels_string(labels)
    assert s.startswith("dp_rank=1,model_name=")
    assert s == labels_string(dict(reversed(list(labels.items()))))
    assert parse_labels(s) == labels
    assert labels_string({}) == "" and parse_labels("") == {}
    assert labels_string({"dp_rank": "0", "tp_rank": "0"}) == "dp_rank=0,tp_rank=0"
    with pytest.raises(ValueError):
        parse_labels("novalue")


# --------------------------------------------------------------------------------------------
# rates


def test_rates_over_http_with_reset(server: _MetricsServer) -> None:
    # decode counter: 1000 -> 1300 -> 100 (restart) -> 400; scrapes 1.5 s apart by the clock
    server.serve(sglang_text(decode=1000, ttft_sum=2.5, ttft_count=3),
                 sglang_text(decode=1300, ttft_sum=4.0, ttft_count=6),
                 sglang_text(decode=100, ttft_sum=0.5, ttft_count=1),
                 sglang_text(decode=400, ttft_sum=2.0, ttft_count=4))
    t0 = 1_700_000_000.0
    scraper = MetricsScraper(server.url, clock=fake_clock(t0, t0 + 1.5, t0 + 3.0, t0 + 4.5))
    tracker = RateTracker()
    frames = []
    for _ in range(4):
        samples = scraper.scrape_once()
        assert samples is not None
        frames.append(tracker.update(samples))
    assert all(list(f.columns) == FRAME_COLUMNS for f in frames)
    assert [f["timestamp"].iloc[0] for f in frames] == [t0, t0 + 1.5, t0 + 3.0, t0 + 4.5]

    dec = [row(f, "sglang:realtime_tokens_total", mode="decode", dp_rank="0", tp_rank="0")
           for f in frames]
    rates = [r["rate_per_s"] for r in dec]
    assert math.isnan(rates[0])                 # first scrape
    assert rates[1] == pytest.approx(200.0)     # +300 over 1.5 s
    assert math.isnan(rates[2])                 # went down: reset
    assert rates[3] == pytest.approx(200.0)     # resumes from the new baseline
    assert [r["value"] for r in dec] == [1000.0, 1300.0, 100.0, 400.0]
    assert dec[1]["kind"] == "counter"
    assert dec[1]["labels"] == "dp_rank=0,mode=decode,model_name=kimi,pp_rank=0,tp_rank=0"
    assert tracker.resets >= 1

    # an unchanged counter has rate 0, not NaN
    cache = row(frames[1], "sglang:realtime_tokens_total", mode="prefill_cache", dp_rank="1")
    assert cache["rate_per_s"] == 0.0

    # histogram _sum/_count are rates too; buckets as well
    hsum = row(frames[1], "sglang:time_to_first_token_seconds_sum")
    hcnt = row(frames[1], "sglang:time_to_first_token_seconds_count")
    assert hsum["rate_per_s"] == pytest.approx(1.0) and hcnt["rate_per_s"] == pytest.approx(2.0)
    assert hsum["kind"] == "histogram"
    inf = row(frames[1], "sglang:time_to_first_token_seconds_bucket", le="+Inf")
    assert inf["rate_per_s"] == pytest.approx(2.0)
    assert math.isnan(row(frames[2], "sglang:time_to_first_token_seconds_count")["rate_per_s"])

    # gauges pass through with NaN rate
    for f in frames:
        g = row(f, "sglang:num_running_reqs", dp_rank="0", tp_rank="0")
        assert g["value"] == 12.0 and g["kind"] == "gauge" and math.isnan(g["rate_per_s"])


def test_rate_tracker_edge_cases() -> None:
    def c(v: float, t: float, **lab: str) -> MetricSample:
        return MetricSample("x:tokens_total", dict(lab), v, "counter", t, "x:tokens")

    tr = RateTracker()
    assert math.isnan(tr.rates([c(10, 1.0)])[0])
    assert math.isnan(tr.rates([c(20, 1.0)])[0])        # time did not advance
    assert tr.rates([c(30, 2.0)])[0] == pytest.approx(10.0)  # from (t=1, v=20)
    # series keyed by labels: a new label set starts with NaN
    r = tr.rates([c(40, 3.0), c(5, 3.0, tp_rank="1")])
    assert r[0] == pytest.approx(10.0) and math.isnan(r[1])
    # a vanished series is forgotten
    tr.rates([c(7, 4.0, tp_rank="1")])
    assert math.isnan(tr.rates([c(50, 5.0)])[0])
    # NaN value
    assert math.isnan(tr.rates([c(float("nan"), 6.0)])[0])
    # gauges, summary quantiles and untyped non-_total samples are not monotonic
    assert not is_monotonic(MetricSample("a:b", {}, 1, "gauge", 0, "a:b"))
    assert not is_monotonic(MetricSample("a:q", {"quantile": "0.5"}, 1, "summary", 0, "a:q"))
    assert is_monotonic(MetricSample("a:q_sum", {}, 1, "summary", 0, "a:q"))
    assert is_monotonic(MetricSample("a:n_total", {}, 1, "unknown", 0, "a:n_total"))
    assert not is_monotonic(MetricSample("a:n", {}, 1, "unknown", 0, "a:n"))


def test_stream_yields_rate_frames_and_stops(server: _MetricsServer) -> None:
    server.serve(*(vllm_text(prompt=1000 * i, gen=100 * i, accepted=20 * i, drafts=10 * i)
                   for i in range(1, 10)))
    t0 = 1_800_000_000.0
    scraper = MetricsScraper(server.url, interval_s=0.02,
                             clock=fake_clock(*(t0 + 0.5 * i for i in range(100))))
    stop = threading.Event()
    frames = []
    for f in scraper.stream(stop, duration=5.0):
        frames.append(f)
        if len(frames) == 3:
            stop.set()
    assert len(frames) == 3
    assert scraper.health.failures == 0 and scraper.health.scrapes == 3
    assert math.isnan(row(frames[0], "vllm:prompt_tokens_total", engine="0")["rate_per_s"])
    assert row(frames[1], "vllm:prompt_tokens_total", engine="0")["rate_per_s"] == \
        pytest.approx(2000.0)

    s = summary(pd.concat(frames, ignore_index=True))
    assert list(s.columns) == ["timestamp", *SUMMARY_FIELDS]
    assert list(s["timestamp"]) == [t0, t0 + 0.5, t0 + 1.0]
    last = s.iloc[-1]
    assert last["running_req"] == 36.0 and last["queue_req"] == 66.0   # two engines summed
    assert last["token_usage"] == pytest.approx((0.877 + 0.5) / 2)
    assert last["prefill_tokens_per_s"] == pytest.approx(4000.0)       # 2 x 2000/s
    assert last["decode_tokens_per_s"] == pytest.approx(400.0)
    assert last["gen_throughput_tok_s"] == pytest.approx(400.0)        # from the counter
    assert last["accept_len"] == pytest.approx(1 + 40 / 20)
    assert math.isnan(s.iloc[0]["decode_tokens_per_s"])

    per_engine = summary(frames[-1], by=("engine",))
    assert list(per_engine["engine"]) == ["0", "1"]
    assert list(per_engine["running_req"]) == [18.0, 18.0]


def test_stream_duration_bounds_a_dead_endpoint() -> None:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    scraper = MetricsScraper(f"http://{LOOPBACK}:{port}", interval_s=0.05, timeout_s=0.2)
    assert scraper.url.endswith("/metrics")
    frames: list = []
    t = threading.Thread(target=lambda: frames.extend(
        scraper.stream(threading.Event(), duration=0.3)) or frames.append("done"))
    t.start()
    t.join(60)  # a generous wait: an unbounded stream would never end
    assert frames == ["done"], "the stream did not end at its duration"
    assert scraper.health.failures == scraper.health.scrapes >= 2
    assert scraper.health.consecutive_failures == scraper.health.failures


def test_summary_sglang_ranks(server: _MetricsServer) -> None:
    server.serve(sglang_text(decode=1000, prefill=500, running=12),
                 sglang_text(decode=1600, prefill=800, running=14))
    scraper = MetricsScraper(server.url, clock=fake_clock(10.0, 12.0))
    tr = RateTracker()
    frame = pd.concat([tr.update(scraper.scrape_once() or []) for _ in range(2)],
                      ignore_index=True)
    s = summary(frame)
    assert list(s["timestamp"]) == [10.0, 12.0]
    last = s.iloc[1]
    # DP0 (TP1 duplicates TP0, counted once) + DP1
    assert last["running_req"] == 14.0 + 4.0
    assert last["queue_req"] == 3.0
    assert last["token_usage"] == pytest.approx(0.4)
    assert last["gen_throughput_tok_s"] == 1000.0     # the gauge wins over counters
    assert last["accept_len"] == pytest.approx(2.5)
    assert last["decode_tokens_per_s"] == pytest.approx(300 + 150)   # 600/2 s + half on DP1
    assert last["prefill_tokens_per_s"] == pytest.approx(150 + 75)   # prefill_cache excluded
    per_dp = summary(frame, by=("dp_rank",))
    assert list(per_dp.columns) == ["timestamp", "dp_rank", *SUMMARY_FIELDS]
    dp1 = per_dp[(per_dp["timestamp"] == 12.0) & (per_dp["dp_rank"] == "1")].iloc[0]
    assert dp1["running_req"] == 4.0 and dp1["decode_tokens_per_s"] == pytest.approx(150.0)
    empty = summary(frame.iloc[0:0])
    assert empty.empty and list(empty.columns) == ["timestamp", *SUMMARY_FIELDS]


# --------------------------------------------------------------------------------------------
# failures: counted, never raised


def test_http_500_counted(server: _MetricsServer) -> None:
    server.serve("oops", status=500)
    scraper = MetricsScraper(server.url, timeout_s=1)
    assert scraper.scrape_once() is None
    h = scraper.health
    assert (h.scrapes, h.failures, h.consecutive_failures) == (1, 1, 1)
    assert "500" in h.last_error and h.last_ok is None
    # recovery resets the consecutive count, keeps the totals and the last error
    server.serve(sglang_text(decode=1))
    assert scraper.scrape_once()
    assert (h.scrapes, h.failures, h.consecutive_failures) == (2, 1, 0)
    assert "500" in h.last_error


def test_garbage_body_counted(server: _MetricsServer) -> None:
    server.serve("<html><body>Welcome to nginx!</body></html>\n")
    scraper = MetricsScraper(server.url, timeout_s=1)
    assert scraper.scrape_once() is None
    assert scraper.health.failures == 1
    assert scraper.health.last_error.startswith("ValueError")


@pytest.mark.parametrize("where", ["headers", "body"])
def test_timeout_counted(server: _MetricsServer, where: str) -> None:
    if where == "headers":
        server.serve(sglang_text(decode=1), delay=1.0)
    else:
        server.serve(sglang_text(decode=1), drip=1.0)
    scraper = MetricsScraper(server.url, timeout_s=0.2)
    assert scraper.scrape_once() is None  # an answer 1 s late is no answer
    assert scraper.health.failures == 1
    assert "timed out" in scraper.health.last_error.lower() \
        or "timeout" in scraper.health.last_error.lower()


def test_connection_refused_after_server_stopped(server: _MetricsServer) -> None:
    server.serve(sglang_text(decode=1))
    scraper = MetricsScraper(server.url, timeout_s=0.5)
    assert scraper.scrape_once()
    server.shutdown()
    server.server_close()
    for _ in range(3):
        assert scraper.scrape_once() is None
    h = scraper.health
    assert (h.scrapes, h.failures, h.consecutive_failures) == (4, 3, 3)
    assert "ConnectionRefused" in h.last_error
