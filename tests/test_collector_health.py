"""Collector health (issue 34): a metric the GPU never answers is unsupported; one that fails
now and then is intermittent, with its counts.

On every H200 run GPM's ``dram_active`` came back NaN in one read of 1344, and that one read
called it unsupported.  Each test here fails on that code.
"""

from __future__ import annotations

import json
import math
import signal

from fake_nvml import FakeGpu, FakeNvml

from tealeaves.collectors.nvml import NvmlCollector, health_summary

DRAM = 10  # GPM metric id of dram_active


class ManualClock:
    def __init__(self) -> None:
        self.mono = 0.0

    def __call__(self):
        return 1_800_000_000.0 + self.mono, self.mono


def sweeps(gpus, n, step=0.1, **kw):
    """A collector over ``gpus`` swept ``n`` times ``step`` s apart (at 10 Hz every sweep
    after the first reads GPM and the PCIe counters); returns it and every sweep's rows."""
    clock = ManualClock()
    kw.setdefault("buffer_interval_s", None)
    kw.setdefault("process_interval_s", None)
    c = NvmlCollector(hz=10, nvml=FakeNvml(gpus), clock=clock, **kw)
    c.open()
    rows = []
    for k in range(n):
        clock.mono = k * step
        rows.append(c.sweep())
    return c, rows


def test_one_failed_gpm_read_in_1344_is_intermittent_with_its_counts_not_unsupported():
    gpus = [FakeGpu(uuid="GPU-a", gpm_nan_every={DRAM: 1000}), FakeGpu(uuid="GPU-b")]
    c, rows = sweeps(gpus, 1345)  # the first sweep only primes the GPM sample pair
    h = c.health
    assert gpus[0].gpm_reads == 1344 and h["gpm_reads"] == 2 * 1344
    assert "gpu0:dram_active" not in h["unsupported"]
    assert h["reads"]["gpu0:dram_active"] == [1344, 1]
    assert h["reads"]["gpu0:sm_active"] == [1344, 0]
    assert h["reads"]["gpu1:dram_active"] == [1344, 0]
    s = health_summary(h)
    assert s["unsupported"] == []
    assert s["intermittent"] == {"gpu0:dram_active": {"failed": 1, "of": 1344}}
    dram = [r[0]["dram_active"] for r in rows[1:]]
    assert sum(math.isnan(v) for v in dram) == 1  # the failed read is NaN, never 0
    assert math.isnan(dram[999]) and dram[998] == 30.0 and dram[1000] == 30.0
    # bounded: one counter pair per (GPU, metric), however many reads
    assert len(h["reads"]) == 2 * len(c._gpus[0].reads)


def test_a_metric_that_never_answers_stays_unsupported():
    g = FakeGpu(gpm_nan_every={DRAM: 1}, power=None, pcie_rx=None)
    c, rows = sweeps([g], 30)
    h = c.health
    assert {"gpu0:dram_active", "gpu0:power_w", "gpu0:pcie_rx_bytes_per_s"} <= h["unsupported"]
    assert h["reads"]["gpu0:dram_active"] == [29, 29]
    assert h["reads"]["gpu0:power_w"] == [30, 30]
    s = health_summary(h)
    assert s["intermittent"] == {}
    assert "gpu0:dram_active" in s["unsupported"] and "gpu0:sm_active" not in s["unsupported"]
    assert all(math.isnan(r[0]["dram_active"]) and math.isnan(r[0]["power_w"]) for r in rows)


def test_a_first_read_that_fails_is_unsupported_until_the_metric_answers():
    g = FakeGpu(fail_next={"power": 1, "pcie_tx": 1})
    c, _ = sweeps([g], 1)
    assert {"gpu0:power_w", "gpu0:pcie_tx_bytes_per_s"} <= c.health["unsupported"]
    c.sweep()  # same clock: the fast counters are read again, PCIe not (its interval)
    c._clock.mono = 0.1
    row = c.sweep()[0]
    assert row["power_w"] == 300.0
    h = c.health
    assert "gpu0:power_w" not in h["unsupported"]
    assert "gpu0:pcie_tx_bytes_per_s" not in h["unsupported"]
    assert health_summary(h)["intermittent"] == {
        "gpu0:pcie_tx_bytes_per_s": {"failed": 1, "of": 2},
        "gpu0:power_w": {"failed": 1, "of": 3}}


def test_a_failed_gpm_call_on_a_gpu_that_answered_keeps_gpm_read():
    g = FakeGpu()
    c, _ = sweeps([g], 6)
    g.fail_next["gpm"] = 1
    clock = c._clock
    got = []
    for k in range(6, 12):
        clock.mono = k * 0.1
        got.append(c.sweep()[0]["sm_active"])
    # the failed read is NaN, the next sweep takes a fresh baseline, then values again
    assert math.isnan(got[0]) and math.isnan(got[1]) and got[2:] == [80.0] * 4
    s = health_summary(c.health)
    assert s["unsupported"] == []
    assert s["intermittent"]["gpu0:sm_active"] == {"failed": 1, "of": 10}
    assert set(s["intermittent"]) == {f"gpu0:{m}" for m in (
        "sm_active", "sm_occupancy", "tensor_active", "dram_active",
        "nvlink_rx_bytes_per_s", "nvlink_tx_bytes_per_s")}


def test_gpm_that_never_answers_is_given_up_and_unsupported():
    g = FakeGpu(fail_next={"gpm": 1})
    c, rows = sweeps([g], 5)
    assert g.gpm_reads == 0 and c.health["reads"]["gpu0:sm_active"] == [1, 1]
    assert "gpu0:sm_active" in c.health["unsupported"]
    assert health_summary(c.health)["intermittent"] == {}
    assert all(math.isnan(r[0]["sm_active"]) for r in rows)


def test_a_sample_buffer_that_failed_once_after_answering_is_drained_again():
    g = FakeGpu()
    c, _ = sweeps([g], 2, step=1.0, buffer_interval_s=1.0)
    g.fail_next["power_buffer"] = 1
    c._clock.mono = 2.0
    c.sweep()
    g.buffers["power"] = [(int((1_800_000_000.0 + 2.5) * 1e6), 250.0)]
    c._clock.mono = 3.0
    extra = [r for r in c.sweep() if "sm_clock_mhz" not in r]
    assert [r["power_w"] for r in extra] == [250.0]
    s = health_summary(c.health)
    assert "gpu0:power_samples" not in s["unsupported"]
    assert s["intermittent"] == {"gpu0:power_samples": {"failed": 1, "of": 4}}


def test_collect_stats_json_and_summary_line_show_intermittent_metrics(tmp_path, monkeypatch,
                                                                       capsys):
    import tealeaves.collectors.nvml as nvml_mod
    from tealeaves.app.cli import main

    gpus = [FakeGpu(uuid="GPU-a", gpm_nan_every={DRAM: 3}), FakeGpu(uuid="GPU-b")]
    monkeypatch.setattr(nvml_mod, "Nvml", lambda: FakeNvml(gpus))
    stats = tmp_path / "stats.json"
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        rc = main(["collect", "--hz", "20", "--duration", "1.0", "--store",
                   str(tmp_path / "s.db"), "--stats-json", str(stats)])
    finally:
        for s, fn in handlers.items():
            signal.signal(s, fn)
    assert rc == 0
    text = stats.read_text()
    doc = json.loads(text)["health"]
    n = gpus[0].gpm_reads
    assert n >= 3
    assert doc["intermittent"] == {"gpu0:dram_active": {"failed": n // 3, "of": n}}
    assert doc["unsupported"] == []  # the key stays, empty
    assert '"intermittent": {"gpu0:dram_active": {"failed": ' in text
    out = capsys.readouterr().out
    assert "unsupported: none" in out
    assert f"intermittent: gpu0:dram_active failed {n // 3} of {n} reads" in out


def _flaky_health():
    """Health of two GPUs after 1345 sweeps: GPU 0's dram_active NaN in 1 read of 1344, its
    power never answering."""
    gpus = [FakeGpu(uuid="GPU-a", gpm_nan_every={DRAM: 1000}, power=None),
            FakeGpu(uuid="GPU-b")]
    c, _ = sweeps(gpus, 1345)
    return c.health


def test_the_dashboard_status_line_shows_intermittent_metrics_with_counts():
    from tealeaves.app.dashboard.panels import collector_health

    pieces = collector_health({"collector": health_summary(_flaky_health(), 134.5)})
    text = "".join(p if isinstance(p, str) else p.children for p in pieces)
    assert " · intermittent: gpu0:dram_active failed 1 of 1344 reads" in text
    assert "unsupported" not in text


def test_the_dashboard_status_line_names_three_intermittent_metrics_then_counts():
    from tealeaves.app.dashboard.panels import collector_health

    flaky = {f"gpu{i}:dram_active": {"failed": 1, "of": 100} for i in range(5)}
    pieces = collector_health({"collector": {"intermittent": flaky}})
    (span,) = [p for p in pieces if not isinstance(p, str)]
    assert span.children == (" · intermittent: gpu0:dram_active failed 1 of 100 reads, "
                             "gpu1:dram_active failed 1 of 100 reads, gpu2:dram_active "
                             "failed 1 of 100 reads (+2 more)")
    assert "gpu4:dram_active failed 1 of 100 reads" in span.title


def test_the_exporter_publishes_read_counts_and_does_not_call_intermittent_unsupported(
        tmp_path):
    from tealeaves.app.exporter import TealeavesCollector, render
    from tealeaves.data.store import SampleStore

    h = _flaky_health()
    with SampleStore(tmp_path / "s.db") as store:
        text = render(TealeavesCollector(store, health=lambda: h, hostname="n"))
    assert "tealeaves_collector_metrics_intermittent 1.0\n" in text
    assert "tealeaves_collector_metrics_unsupported 1.0\n" in text  # gpu0:power_w
    assert ('tealeaves_collector_metric_reads_total{gpu="0",metric="dram_active"} 1344.0\n'
            in text)
    assert ('tealeaves_collector_metric_read_failures_total{gpu="0",metric="dram_active"} 1.0\n'
            in text)
    assert ('tealeaves_collector_metric_read_failures_total{gpu="0",metric="power_w"} 1345.0\n'
            in text)
    assert 'metric="sm_active"' not in text  # pairs that never failed are left out
    # without a collector health record: NaN gauges, no per-pair series
    with SampleStore(tmp_path / "s.db") as store:
        bare = render(TealeavesCollector(store, hostname="n"))
    assert "tealeaves_collector_metrics_intermittent NaN\n" in bare
    assert "tealeaves_collector_metric_reads_total{" not in bare


def test_doctor_reads_gpm_several_times_and_lists_an_intermittent_metric_with_counts():
    from tealeaves.collectors.probe import format_table, probe

    a = FakeGpu(uuid="GPU-a", gpm_nan_every={DRAM: 2})
    a.gpm_reads = 1  # its next read is its 2nd: dram_active fails on the doctor's first read
    gpus = [a, FakeGpu(uuid="GPU-b", gpm_nan_every={DRAM: 1}), FakeGpu(uuid="GPU-c", gpm=False)]
    report = probe(FakeNvml(gpus), poll_s=0.4)  # 4 GPM reads, all GPUs in the same pauses
    g0, g1, g2 = report["gpus"]
    assert g0["gpm_reads"] == 4 and "dram_active" in g0["gpm_metrics"]
    assert g0["gpm_intermittent"] == {"dram_active": {"failed": 2, "of": 4}}
    assert "dram_active" not in g1["gpm_metrics"] and g1["gpm_intermittent"] == {}
    assert "sm_active" in g1["gpm_metrics"]
    assert g2["gpm_metrics"] == [] and g2["gpm_reads"] == 0
    assert {g["group"]: g for g in report["groups"]}["gpm"]["supported"] == [0, 1]
    table = format_table(report)
    assert "intermittent: gpu0:dram_active failed 2 of 4 reads" in table
    assert "gpu1:dram_active" not in table
