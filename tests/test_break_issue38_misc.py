"""Break-it round 3 (issue 38), the smaller breaks: a one-sample store's report names the
store and what it holds, not ``--from/--to``; ``collect --replay`` refuses GPUs the trace does
not hold; an nvidia-smi picture with power ``N/A`` keeps the GPU (power NaN); a malformed
dashboard callback gets a 4xx, not a 500 with a traceback; near-idle windows are idle, not
imbalanced decode."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fake_nvml import FakeGpu, FakeNvml

from tealeaves.app.report.model import ReportError, from_store
from tealeaves.collectors.nvml import NvmlCollector, UnknownGpus
from tealeaves.data import bundled_trace_path
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import read_trace


def tealeaves(*args, timeout: float = 300):
    return subprocess.run([sys.executable, "-m", "tealeaves.app.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, check=False)


def _store(path: Path, rows: int | None = None) -> tuple[Path, tuple[float, float]]:
    """A store of the bundled trace (or of its first ``rows`` samples)."""
    tr = read_trace(bundled_trace_path())
    s = tr.samples if rows is None else tr.samples.iloc[:rows]
    with SampleStore(path) as store:
        store.put_devices(tr.devices)
        store.append(s)
        return path, store.time_span()


# -- 5. a one-sample store's report --------------------------------------------------------


@pytest.mark.parametrize("flags", [(), ("--from", "2020-01-01"), ("--to", "2030-01-01"),
                                   ("--from", "2020-01-01", "--to", "2030-01-01")])
def test_a_one_sample_store_says_it_holds_one_sample_whatever_the_range(tmp_path, flags):
    db, (t0, _) = _store(tmp_path / "one.db", rows=1)
    out = tmp_path / "r.json"
    r = tealeaves("report", "--store", db, *flags, "--out", out)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "holds one instant: one sample" in r.stderr and "needs a range" in r.stderr, r.stderr
    assert "--from" not in r.stderr and "--to" not in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
    # a --from at the sample itself blamed --from ("give an earlier --from": there is none)
    with pytest.raises(ReportError, match="holds one instant: one sample"):
        from_store(db, t0, None)


def test_a_store_of_one_staggered_sweep_is_one_sweep_not_a_3_ms_report(tmp_path):
    # each GPU row of a sweep carries its own stamp: the span is not 0, yet one sweep
    db, (t0, t1) = _store(tmp_path / "sweep.db", rows=2)
    assert t1 > t0
    with pytest.raises(ReportError, match=r"holds one instant: one sweep \(2 samples, one a GPU\)"):
        from_store(db)


def test_a_range_that_catches_one_sweep_says_so_and_what_the_store_holds(tmp_path):
    db, (t0, _) = _store(tmp_path / "s.db")
    with pytest.raises(ReportError,
                       match=r"it holds one instant: one sweep .*widen --from/--to"):
        from_store(db, t0 - 1.0, t0 + 0.01)


# -- 2. collect --replay --gpus ------------------------------------------------------------


def test_collect_replay_refuses_gpus_the_trace_does_not_hold(tmp_path):
    db = tmp_path / "c.db"
    r = tealeaves("collect", "--replay", bundled_trace_path(), "--gpus", "0,7,99",
                  "--duration", "1", "--speed", "100", "--store", db, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--gpus: GPUs 7, 99 are not in the replayed trace" in r.stderr, r.stderr
    assert "holds GPUs 0, 1" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not db.exists() and "stored" not in r.stdout  # nothing opened, nothing claimed


def test_collect_replay_gpus_replays_only_those_gpus(tmp_path):
    db = tmp_path / "c.db"
    r = tealeaves("collect", "--replay", bundled_trace_path(), "--gpus", "1",
                  "--duration", "1", "--speed", "100", "--store", db, timeout=120)
    assert r.returncode == 0, r.stderr
    with SampleStore(db, readonly=True) as store:
        assert set(store.read_range()["gpu"]) == {1}
        assert store.devices()["gpu"].tolist() == [1]


def test_nvml_collector_refuses_gpu_indices_nvml_does_not_see():
    nvml = FakeNvml([FakeGpu(), FakeGpu()])
    with pytest.raises(UnknownGpus, match=r"no GPU 5 on this host \(NVML sees 2 GPUs: 0-1\)"):
        NvmlCollector(nvml=nvml, gpus=[1, 5]).open()
    devices = NvmlCollector(nvml=FakeNvml([FakeGpu(), FakeGpu()]), gpus=[1]).open()
    assert devices["gpu"].tolist() == [1]
