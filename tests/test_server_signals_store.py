"""collect --server-log / --server-metrics: server signals land in the store beside samples."""

from __future__ import annotations

import threading
import time

from conftest import serve_metrics

from tealeaves.collectors import start_server_signals
from tealeaves.data.store import SampleStore

METRICS = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{tp_rank="0"} 32
# TYPE sglang:generation_tokens counter
sglang:generation_tokens_total{tp_rank="0"} %d
"""


def _wait_until(ok, timeout_s: float = 60.0) -> None:
    """Poll ``ok()`` until it holds (a state), failing after a generous ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not ok():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not so after {timeout_s:.0f} s")
        time.sleep(0.05)


def test_log_lines_and_scrapes_are_stored(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_text("[2026-11-30 14:00:00 TP0] Prefill batch. #new-seq: 2, #new-token: 258, "
                   "#cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, \n")
    count = {"n": 0}

    def body() -> str:
        count["n"] += 1
        return METRICS % (1000 * count["n"])

    httpd, url = serve_metrics(body)
    stop = threading.Event()
    with SampleStore(tmp_path / "s.db") as store:
        threads = start_server_signals(
            store, stop, server_log=log, from_start=True,
            server_metrics=url,
            interval_s=0.2)
        reader = SampleStore(tmp_path / "s.db", readonly=True)
        _wait_until(lambda: len(reader.server_events()) == 1)  # the line already there
        with log.open("a") as fh:  # a line written while collecting
            fh.write("[2026-11-30 14:00:05 TP0] Decode batch. #running-req: 2, #token: 300, "
                     "token usage: 0.01, accept len: 2.54, gen throughput (token/s): 39.33, "
                     "#queue-req: 0, \n")
        _wait_until(lambda: len(reader.server_events()) == 2 and len(
            (m := reader.server_metrics())[m["name"] == "sglang:generation_tokens_total"]) >= 3)
        reader.close()
        stop.set()
        for t in threads:
            t.join(timeout=5)
        httpd.shutdown()
        ev = store.server_events()
        m = store.server_metrics()
    assert ev["kind"].tolist() == ["prefill", "decode"]
    assert ev["new_token"].iloc[0] == 258 and ev["accept_len"].iloc[1] == 2.54
    assert ev["rank"].iloc[0] == {"tp": 0}
    gen = m[m["name"] == "sglang:generation_tokens_total"]
    assert len(gen) >= 3 and (gen["rate_per_s"].dropna() > 0).all()
    assert set(m["labels"]) == {"tp_rank=0"}
