"""A fake of ``collectors.nvml_shim.Nvml``: scripted GPUs with counters a test controls.

Each fake GPU holds current values the test sets; PCIe counters and their driver timestamps
advance only when the test says so, so differencing, wrap-around and cached readings can be
checked exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tealeaves.collectors.nvml_shim import FieldReading, NvmlGpuLost, NvmlNotSupported


@dataclass
class FakeGpu:
    name: str = "NVIDIA H200"
    uuid: str = "GPU-fake"
    gpm: bool = True
    util: tuple[float, float] | None = (50.0, 20.0)
    mem_used: float | None = 1e9
    power: float | None = 300.0
    clock: float | None = 1980.0
    pcie_bits: int = 64
    pcie_tx: int | None = 0
    pcie_rx: int | None = 0
    pcie_ts_us: int = 1_000_000
    gpm_values: dict[int, float] = field(default_factory=lambda: {
        2: 80.0, 3: 40.0, 5: 60.0, 10: 30.0, 60: 1.0, 61: 2.0})
    lost: bool = False
    #: driver sample buffers: kind -> [(timestamp_us, value)], None when not supported
    buffers: dict[str, list[tuple[int, float]] | None] = field(default_factory=lambda: {
        "power": [], "gpu_util": []})
    processes: list[tuple[int, float]] | None = field(default_factory=list)
    mig: int | None = 0
    nvlinks: int = 18


class FakeNvml:
    """Implements the ``Nvml`` shim interface over a list of ``FakeGpu``."""

    def __init__(self, gpus: list[FakeGpu]) -> None:
        self.gpus = gpus
        self.initialised = False
        self.gpm_gets = 0
        self.init_error: Exception | None = None

    def _g(self, h) -> FakeGpu:
        g = self.gpus[h]
        if g.lost:
            raise NvmlGpuLost("GPU is lost")
        return g

    @staticmethod
    def _val(v):
        if v is None:
            raise NvmlNotSupported("Not Supported")
        return v

    def init(self):
        if self.init_error is not None:
            raise self.init_error
        self.initialised = True

    def shutdown(self):
        self.initialised = False

    def driver_version(self):
        return "580.159.04"

    def device_count(self):
        return len(self.gpus)

    def handle(self, i):
        return i

    def name(self, h):
        return self._g(h).name

    def uuid(self, h):
        return self._g(h).uuid

    def power_limit_w(self, h):
        return 700.0

    def max_sm_clock_mhz(self, h):
        return 1980.0

    def mem_total_bytes(self, h):
        return 141e9

    def utilization(self, h):
        return self._val(self._g(h).util)

    def mem_used_bytes(self, h):
        return self._val(self._g(h).mem_used)

    def power_w(self, h):
        return self._val(self._g(h).power)

    def sm_clock_mhz(self, h):
        return self._val(self._g(h).clock)

    def field_values(self, h, ids):
        g = self._g(h)
        vals = {197: g.pcie_tx, 198: g.pcie_rx}
        return [FieldReading(vals[i], g.pcie_ts_us, g.pcie_bits) for i in ids]

    def buffered_samples(self, h, kind, since_us):
        buf = self._val(self._g(h).buffers[kind])
        return [(t, v) for t, v in buf if t > since_us]

    def compute_processes(self, h):
        return list(self._val(self._g(h).processes))

    def mig_mode(self, h):
        return self._val(self._g(h).mig)

    def nvlink_active_links(self, h):
        return self._g(h).nvlinks

    def nvml_version(self):
        return "13.580.159"

    def gpm_supported(self, h):
        return self._g(h).gpm

    def gpm_sample_alloc(self):
        return {"handle": None}

    def gpm_sample_free(self, s):
        pass

    def gpm_sample_get(self, h, s):
        g = self._g(h)
        if not g.gpm:
            raise NvmlNotSupported("GPM not supported")
        self.gpm_gets += 1
        s["handle"] = h

    def gpm_metrics(self, s1, s2, ids):
        g = self.gpus[s2["handle"]]
        return [g.gpm_values.get(i, math.nan) for i in ids]
