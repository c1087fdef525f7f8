"""What the serving loop gives a user besides the GPU: SGLang-format scheduler lines
(``SglangLines``) and the ``/metrics`` page (``metrics_scrape``).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path


class SglangLines:
    """SGLang 0.5.5+ scheduler lines with millisecond stamps (``SGLANG_LOG_MS=1``) in the host's
    zone, written as the loop runs (``[2026-12-04 10:00:00.123 TP0] Prefill batch, ...``)."""

    def __init__(self, path: Path) -> None:
        self.fh = path.open("w", buffering=1)

    def _prefix(self) -> str:
        t = dt.datetime.now()
        return f"[{t:%Y-%m-%d %H:%M:%S}.{t.microsecond // 1000:03d} TP0] "

    def prefill(self, new_seq: int, new_tokens: int, running: int, queue: int,
                usage: float) -> None:
        self.fh.write(f"{self._prefix()}Prefill batch, #new-seq: {new_seq}, "
                      f"#new-token: {new_tokens}, #cached-token: 0, token usage: {usage:.2f}, "
                      f"#running-req: {running}, #queue-req: {queue}, \n")

    def decode(self, running: int, tokens: int, usage: float, gen: float, queue: int,
               accept_len: float | None) -> None:
        acc = f"accept len: {accept_len:.2f}, " if accept_len is not None else ""
        self.fh.write(f"{self._prefix()}Decode batch, #running-req: {running}, "
                      f"#token: {tokens}, token usage: {usage:.2f}, {acc}cuda graph: True, "
                      f"gen throughput (token/s): {gen:.2f}, #queue-req: {queue}, \n")

    def close(self) -> None:
        self.fh.close()


def metrics_scrape(engine, now: float) -> str:
    """``engine`` (a ``serving_loop.Engine``)'s ``/metrics`` page in Prometheus text exposition, SGLang names, sample timestamps in
    ms: running/queued requests, token usage, realtime tokens by mode, forward seconds by
    category (``prefill`` for token-majority prefill forwards, ``decode`` the rest)."""
    ms = int(now * 1000)
    c = engine.c
    lab = 'model_name="serving_loop",tp_rank="0"'
    lines = []

    def fam(name: str, kind: str, helptext: str, rows: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP {name} {helptext}")
        lines.append(f"# TYPE {name} {kind}")
        for extra, v in rows:
            lines.append(f"{name}{{{lab}{extra}}} {v:.6g} {ms}")

    fam("sglang:num_running_reqs", "gauge", "The number of running requests.",
        [("", len(engine.running))])
    fam("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.",
        [("", len(engine.waiting) + len(engine.prefilling))])
    fam("sglang:token_usage", "gauge", "The token usage.", [("", engine._usage())])
    fam("sglang:realtime_tokens_total", "counter", "Tokens processed, by mode.",
        [(',mode="prefill_compute"', c.prefill_tokens), (',mode="decode"', c.decode_tokens)])
    fam("sglang:forward_execution_seconds_total", "counter",
        "Seconds of forward execution, by category.",
        [(',category="prefill"', c.prefill_s), (',category="decode"', c.decode_s)])
    fam("sglang:num_requests_total", "counter", "Requests finished.", [("", c.finished)])
    return "\n".join(lines) + "\n"
