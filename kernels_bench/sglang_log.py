"""SGLang-format scheduler lines written by the labelled workload, so a GPU trace and a server
log of the same run can be lined up (``classifier/align.py``) as with a real SGLang server.

Lines follow SGLang 0.5.5+ (``docs/measurement.md``, "Server signals"): one ``Prefill batch,``
line per scheduled prefill batch and one ``Decode batch,`` line every ``decode_log_interval``
decode steps (SGLang's ``--decode-log-interval``, default 40), covering the steps since the
previous one; the prefix ``[YYYY-mm-dd HH:MM:SS TP0] `` in the host's local time, whole
seconds unless ``ms=True`` (SGLang's ``SGLANG_LOG_MS=1``).
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Self


class SglangLogWriter:
    """Writes SGLang-style scheduler lines as the workload runs.

    Args:
        path: the log file (created or truncated).
        decode_log_interval: decode steps per ``Decode batch`` line.
        batch: requests per decode step (``#running-req``).
        ms: stamp milliseconds (``SGLANG_LOG_MS=1``).
        tz: zone of the stamps (default: the host's local zone, as SGLang writes them).
        clock: wall-clock source, epoch seconds.
    """

    def __init__(self, path: str | Path, decode_log_interval: int = 40, batch: int = 8,
                 ms: bool = False, tz: dt.tzinfo | None = None, clock=time.time) -> None:
        # Open for the writer's lifetime (lines go out as the workload runs); close() or `with`.
        self.fh = Path(path).open("w", buffering=1)  # noqa: SIM115
        self.interval = decode_log_interval
        self.batch = batch
        self.ms = ms
        self.tz = tz
        self.clock = clock
        self._steps = 0
        self._since = clock()
        self._tokens = 0

    def _prefix(self) -> str:
        t = dt.datetime.fromtimestamp(self.clock(), self.tz)
        stamp = f"{t:%Y-%m-%d %H:%M:%S}" + (f".{t.microsecond // 1000:03d}" if self.ms else "")
        return f"[{stamp} TP0] "

    def prefill(self, new_seq: int, new_tokens: int, queue: int = 0) -> None:
        """One prefill batch was scheduled: ``new_seq`` requests, ``new_tokens`` tokens."""
        self.fh.write(f"{self._prefix()}Prefill batch, #new-seq: {new_seq}, "
                      f"#new-token: {new_tokens}, #cached-token: 0, token usage: 0.10, "
                      f"#running-req: {self.batch}, #queue-req: {queue}, \n")
        self._since = self.clock()
        self._steps = 0

    def decode_step(self, accept_len: float = 1.0) -> None:
        """One decode (verify) step of ``batch`` requests; every ``decode_log_interval`` steps
        a ``Decode batch`` line with the generation throughput since the previous line."""
        self._steps += 1
        self._tokens += self.batch
        if self._steps < self.interval:
            return
        now = self.clock()
        gen = self._steps * self.batch * accept_len / max(now - self._since, 1e-9)
        self.fh.write(f"{self._prefix()}Decode batch, #running-req: {self.batch}, "
                      f"#token: {self._tokens}, token usage: 0.10, accept len: {accept_len:.2f}, "
                      f"cuda graph: True, gen throughput (token/s): {gen:.2f}, #queue-req: 0, \n")
        self._steps = 0
        self._since = now

    def close(self) -> None:
        """Flush and close the log."""
        self.fh.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
