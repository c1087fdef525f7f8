"""NVML collector logic against a fake NVML: differencing, wrap-around, NaN, GPM absent."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from fake_nvml import FakeGpu, FakeNvml

from tealeaves.collectors import run_to_store
from tealeaves.collectors.nvml import NvmlCollector, counter_rate
from tealeaves.collectors.nvml_shim import NvmlUnavailable
from tealeaves.data.store import SampleStore


class StepClock:
    """Wall/monotonic clock that advances by ``step`` seconds on every read."""

    def __init__(self, step: float = 0.05) -> None:
        self.t = 0.0
        self.step = step

    def __call__(self):
        self.t += self.step
        return 1_800_000_000.0 + self.t, self.t


def make(gpus, **kw):
    kw.setdefault("clock", StepClock())
    kw.setdefault("pcie_hz", 20)  # read the PCIe counters on every sweep
    c = NvmlCollector(hz=20, nvml=FakeNvml(gpus), host="h", **kw)
    devices = c.open()
    return c, devices


def test_pcie_counters_are_differenced_into_bytes_per_second():
    g = FakeGpu(pcie_tx=1_000, pcie_rx=5_000, pcie_ts_us=10_000_000)
    c, _ = make([g])
    first = c.sweep()[0]
    assert math.isnan(first["pcie_tx_bytes_per_s"])  # nothing to difference against yet
    g.pcie_tx += 2_000_000
    g.pcie_rx += 500_000
    g.pcie_ts_us += 100_000  # 0.1 s later by the driver's clock
    row = c.sweep()[0]
    assert row["pcie_tx_bytes_per_s"] == pytest.approx(20_000_000)
    assert row["pcie_rx_bytes_per_s"] == pytest.approx(5_000_000)


def test_cached_field_reading_gives_nan_then_differences_against_the_older_value():
    g = FakeGpu(pcie_tx=0, pcie_ts_us=1_000_000)
    c, _ = make([g])
    c.sweep()
    row = c.sweep()  # same driver timestamp: a cached value, no new interval
    assert math.isnan(row[0]["pcie_tx_bytes_per_s"])
    g.pcie_tx, g.pcie_ts_us = 3_000, 1_300_000
    assert c.sweep()[0]["pcie_tx_bytes_per_s"] == pytest.approx(10_000)


@pytest.mark.parametrize("bits", [32, 64])
def test_counter_wrap_around(bits):
    top = (1 << bits) - 100
    g = FakeGpu(pcie_bits=bits, pcie_tx=top, pcie_ts_us=5_000_000)
    c, _ = make([g])
    c.sweep()
    g.pcie_tx = 900  # wrapped: 100 bytes to the top, then 900
    g.pcie_ts_us += 1_000_000
    assert c.sweep()[0]["pcie_tx_bytes_per_s"] == pytest.approx(1_000)


def test_counter_reset_is_nan_not_a_huge_rate():
    # A 64-bit counter that drops from a small value (driver reload) would "wrap" to ~1.8e19.
    assert math.isnan(counter_rate(5_000_000, 0, 10, 1_000_000, bits=64))
    assert math.isnan(counter_rate(None, 0, 10, 1_000_000))
    assert math.isnan(counter_rate(10, 1_000_000, 20, 1_000_000))


def test_unsupported_metrics_are_nan_never_zero_and_reported_once():
    g = FakeGpu(power=None, clock=None, pcie_tx=None)
    c, _ = make([g])
    rows = [c.sweep()[0] for _ in range(5)]
    for r in rows:
        assert math.isnan(r["power_w"]) and math.isnan(r["sm_clock_mhz"])
        assert math.isnan(r["pcie_tx_bytes_per_s"])
        assert r["gpu_util"] == 50.0
    assert {"gpu0:power_w", "gpu0:sm_clock_mhz", "gpu0:pcie_tx_bytes_per_s"} <= c.health[
        "unsupported"]
    assert isinstance(c.health["unsupported"], set)  # one entry per (gpu, metric), not per sample


def test_gpm_absent_gives_nan_gpm_columns_and_keeps_nvml_ones():
    gpus = [FakeGpu(uuid="GPU-a"), FakeGpu(uuid="GPU-b", gpm=False)]
    c, devices = make(gpus)
    assert devices["gpm_supported"].tolist() == [1.0, 0.0]
    rows = pd.DataFrame([r for _ in range(6) for r in c.sweep()])
    b = rows[rows.gpu == 1]
    assert b["sm_active"].isna().all() and b["tensor_active"].isna().all()
    assert b["power_w"].eq(300.0).all()
    a = rows[rows.gpu == 0]
    # GPM needs two samples >= 95 ms apart; at 50 ms per read (StepClock) every other sweep.
    assert a["sm_active"].notna().sum() >= 2
    assert set(a["sm_active"].dropna()) == {80.0}
    assert set(a["nvlink_tx_bytes_per_s"].dropna()) == {2.0 * 2**20}
    assert "gpu1:sm_active" in c.health["unsupported"]


def test_lost_gpu_goes_offline_while_others_continue():
    gpus = [FakeGpu(uuid="GPU-a"), FakeGpu(uuid="GPU-b")]
    c, _ = make(gpus)
    c.sweep()
    gpus[1].lost = True
    rows = c.sweep()
    assert rows[0]["power_w"] == 300.0
    assert math.isnan(rows[1]["power_w"])
    assert c.health["offline"] == {1}


def test_no_gpu_raises_unavailable():
    c = NvmlCollector(nvml=FakeNvml([]))
    with pytest.raises(NvmlUnavailable):
        c.open()


def test_stream_into_store_keeps_identity_and_rate(tmp_path):
    gpus = [FakeGpu(uuid="GPU-a"), FakeGpu(uuid="GPU-b")]
    c = NvmlCollector(hz=50, nvml=FakeNvml(gpus), host="node1")
    with SampleStore(tmp_path / "s.db") as store:
        n = run_to_store(c, store, duration=0.5, batch_s=0.1)
        got = store.read_range()
        assert n == len(got) and n >= 2 * 15  # ~25 sweeps of 2 GPUs at 50 Hz in 0.5 s
        assert set(got["uuid"]) == {"GPU-a", "GPU-b"} and set(got["host"]) == {"node1"}
        assert store.devices()["gpu"].tolist() == [0, 1]
        mono = got[got.gpu == 0]["monotonic"].diff().dropna()
        assert mono.median() == pytest.approx(0.02, abs=0.005)


def test_health_record_is_typed_and_every_collector_keeps_one(tmp_path):
    """The health record and its summary carry exactly the keys their TypedDicts name (issue
    20: typed state); every collector starts from the same record."""
    from tealeaves.collectors.health import (
        CollectorHealth,
        HealthSummary,
        health_summary,
        new_health,
    )
    from tealeaves.collectors.prometheus import PrometheusCollector
    from tealeaves.collectors.replay import ReplayCollector
    from tealeaves.data.traces import Trace

    h = new_health()
    assert set(h) == CollectorHealth.__required_keys__
    assert CollectorHealth.__optional_keys__ == {"_ok_since_error"}
    s = health_summary(h)
    assert set(s) == HealthSummary.__required_keys__
    assert set(health_summary(h, 2.0)) - set(s) == HealthSummary.__optional_keys__
    c, _ = make([FakeGpu()])
    c.sweep()
    assert set(c.health) == set(h) and c.health["sweeps"] == 1
    assert set(ReplayCollector(Trace(pd.DataFrame(), pd.DataFrame(), {})).health) == set(h)
    assert set(PrometheusCollector("http://127.0.0.1:1").health) == set(h)


def test_replay_counts_a_sweep_once_when_a_batch_edge_splits_it():
    """A replayed sweep whose GPUs' rows fall in two batches (each GPU row has its own stamp)
    is one sweep: ``collect --replay`` said "61 sweeps" for 60 readings of each GPU."""
    from tealeaves.collectors.replay import ReplayCollector
    from tealeaves.data.traces import Trace

    t = 1.8e9 + 0.05 * np.arange(40)
    rows = pd.DataFrame({"timestamp": np.r_[t, t + 0.025], "gpu": np.repeat([0, 1], 40),
                         "gpu_util": 50.0}).sort_values("timestamp", kind="stable")
    c = ReplayCollector(Trace(rows.reset_index(drop=True), pd.DataFrame(), {}), speed=4.0)
    batches = list(c.stream(batch_s=0.004))
    assert sum(len(b) for b in batches) == 80
    split = sum(b["gpu"].iloc[0] == 1 for b in batches)  # batches starting inside a sweep
    assert split >= 1, "no batch edge fell inside a sweep: the test proves nothing"
    assert c.health["sweeps"] == 40
