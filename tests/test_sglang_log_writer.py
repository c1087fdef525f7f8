"""The workload's SGLang-style log reads back through the server-log parser."""

from __future__ import annotations

import datetime as dt

import pytest

from tealeaves.data.server_log import parse_file
from tealeaves.kernels_bench.sglang_log import SglangLogWriter


class Clock:
    def __init__(self) -> None:
        self.t = 1_796_047_800.0

    def __call__(self) -> float:
        return self.t


def test_written_lines_parse_with_their_values(tmp_path):
    clock = Clock()
    path = tmp_path / "sglang.log"
    w = SglangLogWriter(path, decode_log_interval=40, batch=8, tz=dt.UTC, clock=clock)
    w.prefill(10, 40960, queue=3)
    for _ in range(80):  # two decode lines, 40 steps each over 0.4 s
        clock.t += 0.01
        w.decode_step(accept_len=2.5)
    w.close()
    r = parse_file(path)
    assert r.format == "sglang" and not r.skipped
    assert [e.kind for e in r.events] == ["prefill", "decode", "decode"]
    p, d1, d2 = r.events
    assert p.timestamp == 1_796_047_800.0 and p.rank == {"tp": 0}
    assert p.fields["new_token"] == 40960 and p.fields["queue_req"] == 3
    assert d2.fields["gen_throughput_tok_s"] == pytest.approx(40 * 8 * 2.5 / 0.4, rel=1e-3)
    assert d2.fields["accept_len"] == 2.5 and d2.start == d1.timestamp
