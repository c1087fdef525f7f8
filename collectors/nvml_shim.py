"""A thin shim over pynvml (nvidia-ml-py) that turns driver errors into two exceptions and
ctypes structures into plain Python values.

The collector talks only to this interface, so tests can hand it a fake with the same methods
(``tests/fake_nvml.py``) and exercise every code path without a GPU.  Only non-blocking NVML
calls are wrapped: never ``nvmlDeviceGetPcieThroughput`` (it blocks, sampling 20 ms per
direction: 21 ms a call on an H200, ``docs/measurement.md``, "NVML on an H200").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tealeaves.data.metrics import gpm_metrics, gpm_scales, nvml_field_ids


class NvmlNotSupported(Exception):
    """The GPU or driver does not provide this value (NVML_ERROR_NOT_SUPPORTED and kin)."""


class NvmlNotFound(NvmlNotSupported):
    """The query found nothing (NVML_ERROR_NOT_FOUND), e.g. no buffered sample is new."""


class NvmlGpuLost(Exception):
    """The GPU fell off the bus or stopped answering (GPU_IS_LOST, UNKNOWN)."""


class NvmlUnavailable(RuntimeError):
    """NVML could not be loaded or initialised (no driver, no GPU)."""


#: NVML field ids of the cumulative PCIe byte counters (nvml.h: NVML_FI_DEV_PCIE_COUNT_TX_BYTES,
#: NVML_FI_DEV_PCIE_COUNT_RX_BYTES), from the metric table (``data.metrics``, ``nvml_field``).
FI_PCIE_TX_BYTES: int = nvml_field_ids()["pcie_tx_bytes_per_s"]
FI_PCIE_RX_BYTES: int = nvml_field_ids()["pcie_rx_bytes_per_s"]

#: GPM metric ids (nvml.h, NVML_GPM_METRIC_*), in the collector's column names, in id order
#: (sm_active 2, sm_occupancy 3, tensor_active 5, dram_active 10, NVLink rx 60 / tx 61), from
#: the metric table (``data.metrics``, ``nvml_gpm``).  Values are % except NVLink (MiB/s).
GPM_METRICS: dict[str, int] = gpm_metrics()
#: Multiplier from the GPM unit to the column's unit (MiB/s -> B/s for NVLink), from the table.
GPM_SCALE: dict[str, float] = gpm_scales()


@dataclass(frozen=True)
class FieldReading:
    """One value from ``nvmlDeviceGetFieldValues``.

    Attributes:
        value: the integer counter value, or None when the field returned an error.
        timestamp_us: driver timestamp of the reading, microseconds (CPU clock).
        bits: width of the counter type (64 for unsigned long long, 32 for unsigned int).
    """

    value: int | None
    timestamp_us: int
    bits: int = 64


class Nvml:
    """pynvml behind a small interface.  Every method raises ``NvmlNotSupported`` or
    ``NvmlGpuLost`` instead of ``pynvml.NVMLError``; handles are opaque.

    Raises:
        NvmlUnavailable: from ``init`` when the library or driver is missing.
    """

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError as exc:  # pragma: no cover - dependency is declared
            raise NvmlUnavailable(f"nvidia-ml-py is not installed ({exc})") from exc
        self._n = pynvml
        self._lost = {pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_UNKNOWN}

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except self._n.NVMLError as exc:
            if getattr(exc, "value", None) in self._lost:
                raise NvmlGpuLost(str(exc)) from exc
            if getattr(exc, "value", None) == self._n.NVML_ERROR_NOT_FOUND:
                raise NvmlNotFound(str(exc)) from exc
            raise NvmlNotSupported(str(exc)) from exc

    # -- library -----------------------------------------------------------------------
    def init(self) -> None:
        try:
            self._n.nvmlInit()
        except self._n.NVMLError as exc:
            raise NvmlUnavailable(f"NVML init failed: {exc}") from exc

    def shutdown(self) -> None:
        try:
            self._n.nvmlShutdown()
        except self._n.NVMLError:
            pass

    def driver_version(self) -> str:
        v = self._call(self._n.nvmlSystemGetDriverVersion)
        return v.decode() if isinstance(v, bytes) else str(v)

    def device_count(self) -> int:
        return int(self._call(self._n.nvmlDeviceGetCount))

    def handle(self, index: int):
        return self._call(self._n.nvmlDeviceGetHandleByIndex, index)

    # -- identity and limits -----------------------------------------------------------
    def name(self, h) -> str:
        v = self._call(self._n.nvmlDeviceGetName, h)
        return v.decode() if isinstance(v, bytes) else str(v)

    def uuid(self, h) -> str:
        v = self._call(self._n.nvmlDeviceGetUUID, h)
        return v.decode() if isinstance(v, bytes) else str(v)

    def power_limit_w(self, h) -> float:
        return self._call(self._n.nvmlDeviceGetEnforcedPowerLimit, h) / 1000.0

    def max_sm_clock_mhz(self, h) -> float:
        return float(self._call(self._n.nvmlDeviceGetMaxClockInfo, h, self._n.NVML_CLOCK_SM))

    def mem_total_bytes(self, h) -> float:
        return float(self._call(self._n.nvmlDeviceGetMemoryInfo, h).total)

    def pci_bus_id(self, h) -> str:
        """The PCI bus id as nvidia-smi prints it (``00000000:17:00.0``;
        nvmlDeviceGetPciInfo's ``busId``)."""
        bus = self._call(self._n.nvmlDeviceGetPciInfo, h).busId
        return bus.decode() if isinstance(bus, bytes) else str(bus)

    # -- fast counters (each 1-7 us on H200) -------------------------------------------
    def utilization(self, h) -> tuple[float, float]:
        """(gpu %, memory %) from nvmlDeviceGetUtilizationRates."""
        u = self._call(self._n.nvmlDeviceGetUtilizationRates, h)
        return float(u.gpu), float(u.memory)

    def mem_used_bytes(self, h) -> float:
        return float(self._call(self._n.nvmlDeviceGetMemoryInfo, h).used)

    def power_w(self, h) -> float:
        return self._call(self._n.nvmlDeviceGetPowerUsage, h) / 1000.0

    def gpu_temp_c(self, h) -> float:
        """The GPU core temperature, °C (nvmlDeviceGetTemperature, NVML_TEMPERATURE_GPU)."""
        return float(self._call(self._n.nvmlDeviceGetTemperature, h,
                                self._n.NVML_TEMPERATURE_GPU))

    def sm_clock_mhz(self, h) -> float:
        return float(self._call(self._n.nvmlDeviceGetClockInfo, h, self._n.NVML_CLOCK_SM))

    def field_values(self, h, field_ids: list[int]) -> list[FieldReading]:
        """Read cumulative counters through nvmlDeviceGetFieldValues (about 0.33 ms)."""
        vals = self._call(self._n.nvmlDeviceGetFieldValues, h, list(field_ids))
        out = []
        for v in vals:
            if v.nvmlReturn != self._n.NVML_SUCCESS:
                out.append(FieldReading(None, int(v.timestamp)))
                continue
            if v.valueType == self._n.NVML_VALUE_TYPE_UNSIGNED_INT:
                out.append(FieldReading(int(v.value.uiVal), int(v.timestamp), 32))
            elif v.valueType == self._n.NVML_VALUE_TYPE_UNSIGNED_LONG:
                out.append(FieldReading(int(v.value.ulVal), int(v.timestamp), 64))
            else:
                out.append(FieldReading(int(v.value.ullVal), int(v.timestamp), 64))
        return out

    # -- driver sample buffers, processes, topology ------------------------------------
    def buffered_samples(self, h, kind: str, since_us: int) -> list[tuple[int, float]]:
        """Drain the driver's sample buffer newer than ``since_us`` (nvmlDeviceGetSamples).

        Args:
            kind: ``"power"`` (NVML_TOTAL_POWER_SAMPLES, returned in W) or ``"gpu_util"``
                (NVML_GPU_UTILIZATION_SAMPLES, %).
            since_us: driver timestamp (us, CPU clock) of the newest sample already taken.

        Returns:
            ``(timestamp_us, value)`` pairs, oldest first; empty when nothing is new.
        """
        n = self._n
        stype = {"power": n.NVML_TOTAL_POWER_SAMPLES,
                 "gpu_util": n.NVML_GPU_UTILIZATION_SAMPLES}[kind]
        try:
            vtype, samples = self._call(n.nvmlDeviceGetSamples, h, stype, int(since_us))
        except NvmlNotFound:  # no sample newer than since_us
            return []
        field = {n.NVML_VALUE_TYPE_DOUBLE: "dVal", n.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
                 n.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
                 n.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal"}.get(vtype, "uiVal")
        scale = 1e-3 if kind == "power" else 1.0  # power samples are mW
        out = [(int(x.timeStamp), float(getattr(x.sampleValue, field)) * scale)
               for x in samples if x.timeStamp > since_us]
        out.sort()
        return out

    def compute_processes(self, h) -> list[tuple[int, float]]:
        """``(pid, used GPU memory in bytes or NaN)`` of each compute process on the GPU."""
        procs = self._call(self._n.nvmlDeviceGetComputeRunningProcesses, h)
        out = []
        for p in procs:
            mem = getattr(p, "usedGpuMemory", None)
            out.append((int(p.pid), float(mem) if isinstance(mem, int) else math.nan))
        return out

    def mig_mode(self, h) -> int:
        """Current MIG mode (0 disabled, 1 enabled)."""
        cur, _pending = self._call(self._n.nvmlDeviceGetMigMode, h)
        return int(cur)

    def nvlink_active_links(self, h) -> int:
        """Number of NVLink links in the active state (0 where NVLink is absent)."""
        active = 0
        for link in range(self._n.NVML_NVLINK_MAX_LINKS):
            try:
                if self._call(self._n.nvmlDeviceGetNvLinkState, h, link):
                    active += 1
            except NvmlNotSupported:
                break
        return active

    def nvml_version(self) -> str:
        v = self._call(self._n.nvmlSystemGetNVMLVersion)
        return v.decode() if isinstance(v, bytes) else str(v)

    # -- GPM (Hopper and later) --------------------------------------------------------
    def gpm_supported(self, h) -> bool:
        try:
            return bool(self._call(self._n.nvmlGpmQueryDeviceSupport, h).isSupportedDevice)
        except (NvmlNotSupported, AttributeError):
            return False

    def gpm_sample_alloc(self):
        return self._call(self._n.nvmlGpmSampleAlloc)

    def gpm_sample_free(self, s) -> None:
        try:
            self._n.nvmlGpmSampleFree(s)
        except self._n.NVMLError:
            pass

    def gpm_sample_get(self, h, s) -> None:
        self._call(self._n.nvmlGpmSampleGet, h, s)

    def gpm_metrics(self, s1, s2, metric_ids: list[int]) -> list[float]:
        """Metric values between two GPM samples; NaN for a metric that returned an error."""
        n = self._n
        mg = n.c_nvmlGpmMetricsGet_t()
        mg.version = n.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(metric_ids)
        mg.sample1 = s1
        mg.sample2 = s2
        for i, mid in enumerate(metric_ids):
            mg.metrics[i].metricId = mid
        self._call(n.nvmlGpmMetricsGet, mg)
        return [float(mg.metrics[i].value) if mg.metrics[i].nvmlReturn == n.NVML_SUCCESS
                else math.nan for i in range(len(metric_ids))]
