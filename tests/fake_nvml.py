"""A fake of ``collectors.nvml_shim.Nvml``: scripted GPUs with counters a test controls.

Each fake GPU holds current values the test sets; PCIe counters and their driver timestamps
advance only when the test says so, so differencing, wrap-around and cached readings can be
checked exactly.  Reads can fail now and then, as on real GPUs: a GPM metric NaN once in N
reads (``FakeGpu.gpm_nan_every``), or the next reads of a field NotSupported
(``FakeGpu.fail_next``).
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
    temp: float | None = 45.0
    bus_id: str | None = "00000000:17:00.0"
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
    #: GPM metric id -> N: every N-th ``gpm_metrics`` read of this GPU gives NaN for it (an
    #: H200 gives ``dram_active`` NaN about once in a thousand reads); 1: always NaN
    gpm_nan_every: dict[int, int] = field(default_factory=dict)
    #: reading -> how many of its next reads fail: ``util``, ``mem_used``, ``power``,
    #: ``clock``, ``temp`` (NotSupported), ``pcie_tx``, ``pcie_rx`` (the field value's error: None),
    #: ``gpm`` (``gpm_sample_get`` NotSupported), ``power_buffer``, ``gpu_util_buffer``,
    #: ``processes`` (NotSupported)
    fail_next: dict[str, int] = field(default_factory=dict)
    #: ``gpm_metrics`` reads made of this GPU
    gpm_reads: int = 0

    def failing(self, what: str) -> bool:
        """Whether this read of ``what`` fails (``fail_next``); counts it down."""
        left = self.fail_next.get(what, 0)
        if left:
            self.fail_next[what] = left - 1
        return bool(left)


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
    def _val(v, g: FakeGpu | None = None, what: str = ""):
        if v is None or (g is not None and g.failing(what)):
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
        g = self._g(h)
        return self._val(g.util, g, "util")

    def mem_used_bytes(self, h):
        g = self._g(h)
        return self._val(g.mem_used, g, "mem_used")

    def power_w(self, h):
        g = self._g(h)
        return self._val(g.power, g, "power")

    def sm_clock_mhz(self, h):
        g = self._g(h)
        return self._val(g.clock, g, "clock")

    def gpu_temp_c(self, h):
        g = self._g(h)
        return self._val(g.temp, g, "temp")

    def pci_bus_id(self, h):
        return self._val(self._g(h).bus_id)

    def field_values(self, h, ids):
        g = self._g(h)
        vals = {197: None if g.failing("pcie_tx") else g.pcie_tx,
                198: None if g.failing("pcie_rx") else g.pcie_rx}
        return [FieldReading(vals[i], g.pcie_ts_us, g.pcie_bits) for i in ids]

    def buffered_samples(self, h, kind, since_us):
        g = self._g(h)
        buf = self._val(g.buffers[kind], g, f"{kind}_buffer")
        return [(t, v) for t, v in buf if t > since_us]

    def compute_processes(self, h):
        g = self._g(h)
        return list(self._val(g.processes, g, "processes"))

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
        if not g.gpm or g.failing("gpm"):
            raise NvmlNotSupported("GPM not supported")
        self.gpm_gets += 1
        s["handle"] = h

    def gpm_metrics(self, s1, s2, ids):
        g = self.gpus[s2["handle"]]
        g.gpm_reads += 1
        return [math.nan if (n := g.gpm_nan_every.get(i)) and g.gpm_reads % n == 0
                else g.gpm_values.get(i, math.nan) for i in ids]
