"""The one metric table: every telemetry column, its unit and how each source names it.

One row (``Metric``) per metric column of the sample frame, in the frame's column order.  A
row says what the column holds (``name``, ``unit``, ``description``), where tealeaves' own
collector reads it (NVML call, GPM metric id, NVML field id), what the exporter publishes it as
(``prometheus``: name, scale from the stored unit to Prometheus' base unit, help text), and
the names other tools give it, each with the factor from that tool's raw value to the stored
unit: the DCGM field (name and id; dcgm-exporter publishes it under the field's name, ``dcgmi
dmon`` under its short name), ``nvidia-smi dmon`` columns and ``nvidia-smi --query-gpu``
fields.

Everything that maps metric names reads this table: ``data.schema`` (columns, limits),
``data.importers`` (the dmon / query / dcgm-exporter / dcgmi column maps), the NVML collector
(``collectors.nvml_shim``: GPM ids and scales, PCIe field ids), the Prometheus reader
(``collectors.prometheus``: tealeaves' and dcgm-exporter's series) and the exporter
(``app.exporter.GPU_GAUGES``).  Adding a metric is one row here.

Where the numbers come from:

- DCGM field ids and names: ``dcgm_fields.h`` (``DCGM_FI_DEV_*``, ``DCGM_FI_PROF_*``) and
  dcgmi's short names from the same header's field metadata; units from DCGM's field docs:
  ``FB_USED`` is MiB (x 2**20), the profiling ratios are 0-1 (x 100 to %), the PCIe/NVLink
  profiling bytes are already B/s.
- GPM metric ids: ``nvml.h`` (``NVML_GPM_METRIC_*``); GPM's NVLink rates are MiB/s (x 2**20).
- NVML field ids: ``nvml.h`` (``NVML_FI_DEV_PCIE_COUNT_TX_BYTES`` 197, ``..._RX_BYTES`` 198).
- nvidia-smi: ``dmon`` prints ``fb`` and ``rxpci``/``txpci`` in "MB" = MiB (x 2**20, see
  ``data.importers``); ``--query-gpu`` prints units next to each value (``MiB``, ``W``,
  ``MHz``, ``%``), checked by the importer.

The module imports nothing of tealeaves: every room may read it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: One binary megabyte (MiB), bytes: nvidia-smi's "MB", DCGM's ``FB_USED`` unit.
MIB = 2**20


@dataclass(frozen=True)
class SourceName:
    """How one source names a metric.

    Attributes:
        name: the source's name for it (a DCGM field, a dmon column, a query field, a GPM
            metric or NVML field constant).
        scale: factor from the source's raw value to the stored unit
            (``stored = raw * scale``); 1.0 where the units agree.
        id: the source's numeric id where it has one (DCGM field id, GPM metric id, NVML
            field id), else None.
        unit: the unit the source prints next to a value, where it prints one (nvidia-smi
            ``--query-gpu``); the importer refuses a value printed with another unit.
    """

    name: str
    scale: float = 1.0
    id: int | None = None
    unit: str | None = None


@dataclass(frozen=True)
class Exported:
    """A metric as tealeaves' Prometheus exporter publishes it (per GPU, the newest window's
    mean).

    Attributes:
        name: the gauge's name (``tealeaves_`` prefix, Prometheus base units in the name).
        scale: factor from the stored unit to the exported one (% -> ratio 0.01, MHz -> Hz
            1e6, else 1.0); the Prometheus reader divides by it (multiplies by ``1 / scale``).
        help: the gauge's help text.
    """

    name: str
    scale: float
    help: str


@dataclass(frozen=True)
class Metric:
    """One telemetry column and every name it goes by.

    Attributes:
        name: column name in the sample frame and the store (DCGM-style snake_case).
        unit: unit of the stored values, as shown on axes ("%", "B/s", "W", "MHz", "B",
            "°C").
        source: where tealeaves' collector reads it (NVML call, GPM metric, DCGM field), in
            words.
        description: one line for legends and docs.
        prometheus: what the exporter publishes it as (also what the Prometheus reader asks
            a server for first).
        dcgm: the DCGM field (name = dcgm-exporter's series name, id, raw -> stored scale);
            None where DCGM has no such field.
        dcgmi: ``dcgmi dmon``'s short name of the same field (same raw value and scale as
            ``dcgm``); None where there is none.
        nvml_gpm: the GPM metric the NVML collector reads (``NVML_GPM_METRIC_*`` name, id,
            GPM unit -> stored scale); None for a non-GPM metric.
        nvml_field: the NVML field value the collector reads (``NVML_FI_*`` name, id; a
            cumulative counter the collector differences); None where none is read.
        smi_dmon: ``nvidia-smi dmon`` columns holding it (lower case, raw -> stored scale).
        smi_query: ``nvidia-smi --query-gpu`` fields holding it, with the unit nvidia-smi
            prints; where a file has several, the earlier in this tuple wins.
    """

    name: str
    unit: str
    source: str
    description: str
    prometheus: Exported
    dcgm: SourceName | None = None
    dcgmi: str | None = None
    nvml_gpm: SourceName | None = None
    nvml_field: SourceName | None = None
    smi_dmon: tuple[SourceName, ...] = ()
    smi_query: tuple[SourceName, ...] = ()


#: The table, in the sample frame's column order (15 rows).
METRICS: tuple[Metric, ...] = (
    Metric(
        "gpu_util", "%", "nvmlDeviceGetUtilizationRates.gpu / DCGM_FI_DEV_GPU_UTIL",
        "share of time any kernel ran (driver-averaged, 1/6-1 s)",
        Exported("tealeaves_gpu_utilization_ratio", 0.01,
                 "Share of time any kernel ran (NVML utilization.gpu), newest window"),
        dcgm=SourceName("DCGM_FI_DEV_GPU_UTIL", 1.0, 203), dcgmi="GPUTL",
        smi_dmon=(SourceName("sm"),),  # dmon's sm% is utilization.gpu
        smi_query=(SourceName("utilization.gpu", unit="%"),)),
    Metric(
        "mem_copy_util", "%",
        "nvmlDeviceGetUtilizationRates.memory / DCGM_FI_DEV_MEM_COPY_UTIL",
        "share of time device memory was read or written",
        Exported("tealeaves_memory_copy_utilization_ratio", 0.01,
                 "Share of time device memory was read or written (NVML), newest window"),
        dcgm=SourceName("DCGM_FI_DEV_MEM_COPY_UTIL", 1.0, 204), dcgmi="MCUTL",
        smi_dmon=(SourceName("mem"),),  # utilization.memory
        smi_query=(SourceName("utilization.memory", unit="%"),)),
    Metric(
        "sm_active", "%", "GPM NVML_GPM_METRIC_SM_UTIL / DCGM_FI_PROF_SM_ACTIVE",
        "share of SMs with at least one warp resident, time-averaged",
        Exported("tealeaves_sm_active_ratio", 0.01,
                 "SMs with a warp resident, time-averaged (GPM / DCGM_FI_PROF_SM_ACTIVE), "
                 "newest window"),
        dcgm=SourceName("DCGM_FI_PROF_SM_ACTIVE", 100.0, 1002), dcgmi="SMACT",
        nvml_gpm=SourceName("NVML_GPM_METRIC_SM_UTIL", 1.0, 2)),
    Metric(
        "sm_occupancy", "%", "GPM NVML_GPM_METRIC_SM_OCCUPANCY / DCGM_FI_PROF_SM_OCCUPANCY",
        "resident warps over the SM maximum",
        Exported("tealeaves_sm_occupancy_ratio", 0.01,
                 "Resident warps over the SM maximum (GPM), newest window"),
        dcgm=SourceName("DCGM_FI_PROF_SM_OCCUPANCY", 100.0, 1003), dcgmi="SMOCC",
        nvml_gpm=SourceName("NVML_GPM_METRIC_SM_OCCUPANCY", 1.0, 3)),
    Metric(
        "tensor_active", "%",
        "GPM NVML_GPM_METRIC_ANY_TENSOR_UTIL / DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "share of cycles any tensor pipe was busy",
        Exported("tealeaves_tensor_active_ratio", 0.01,
                 "Cycles any tensor pipe was busy (GPM / DCGM_FI_PROF_PIPE_TENSOR_ACTIVE), "
                 "newest window"),
        dcgm=SourceName("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 100.0, 1004), dcgmi="TENSO",
        nvml_gpm=SourceName("NVML_GPM_METRIC_ANY_TENSOR_UTIL", 1.0, 5)),
    Metric(
        "dram_active", "%", "GPM NVML_GPM_METRIC_DRAM_BW_UTIL / DCGM_FI_PROF_DRAM_ACTIVE",
        "device-memory bandwidth used over its peak",
        Exported("tealeaves_dram_active_ratio", 0.01,
                 "Device-memory bandwidth used over peak (GPM / DCGM_FI_PROF_DRAM_ACTIVE), "
                 "newest window"),
        dcgm=SourceName("DCGM_FI_PROF_DRAM_ACTIVE", 100.0, 1005), dcgmi="DRAMA",
        nvml_gpm=SourceName("NVML_GPM_METRIC_DRAM_BW_UTIL", 1.0, 10)),
    Metric(
        "pcie_tx_bytes_per_s", "B/s",
        "NVML field 197 (NVML_FI_DEV_PCIE_COUNT_TX_BYTES), differenced",
        "PCIe bytes sent by the GPU per second",
        Exported("tealeaves_pcie_tx_bytes_per_second", 1.0,
                 "PCIe bytes sent by the GPU per second, newest window"),
        dcgm=SourceName("DCGM_FI_PROF_PCIE_TX_BYTES", 1.0, 1009), dcgmi="PCITX",
        nvml_field=SourceName("NVML_FI_DEV_PCIE_COUNT_TX_BYTES", 1.0, 197),
        smi_dmon=(SourceName("txpci", MIB),)),
    Metric(
        "pcie_rx_bytes_per_s", "B/s",
        "NVML field 198 (NVML_FI_DEV_PCIE_COUNT_RX_BYTES), differenced",
        "PCIe bytes received by the GPU per second",
        Exported("tealeaves_pcie_rx_bytes_per_second", 1.0,
                 "PCIe bytes received by the GPU per second, newest window"),
        dcgm=SourceName("DCGM_FI_PROF_PCIE_RX_BYTES", 1.0, 1010), dcgmi="PCIRX",
        nvml_field=SourceName("NVML_FI_DEV_PCIE_COUNT_RX_BYTES", 1.0, 198),
        smi_dmon=(SourceName("rxpci", MIB),)),
    Metric(
        "nvlink_tx_bytes_per_s", "B/s",
        "GPM NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC (MiB/s x 2**20)",
        "NVLink bytes sent, all links",
        Exported("tealeaves_nvlink_tx_bytes_per_second", 1.0,
                 "NVLink bytes sent per second, all links, newest window"),
        dcgm=SourceName("DCGM_FI_PROF_NVLINK_TX_BYTES", 1.0, 1011), dcgmi="NVLTX",
        nvml_gpm=SourceName("NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", 2.0**20, 61)),
    Metric(
        "nvlink_rx_bytes_per_s", "B/s",
        "GPM NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC (MiB/s x 2**20)",
        "NVLink bytes received, all links",
        Exported("tealeaves_nvlink_rx_bytes_per_second", 1.0,
                 "NVLink bytes received per second, all links, newest window"),
        dcgm=SourceName("DCGM_FI_PROF_NVLINK_RX_BYTES", 1.0, 1012), dcgmi="NVLRX",
        nvml_gpm=SourceName("NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", 2.0**20, 60)),
    Metric(
        "power_w", "W", "nvmlDeviceGetPowerUsage (mW / 1000) / DCGM_FI_DEV_POWER_USAGE",
        "board power draw",
        Exported("tealeaves_power_watts", 1.0, "Board power draw, newest window"),
        dcgm=SourceName("DCGM_FI_DEV_POWER_USAGE", 1.0, 155), dcgmi="POWER",
        smi_dmon=(SourceName("pwr"),),
        smi_query=(SourceName("power.draw", unit="W"),
                   SourceName("power.draw.average", unit="W"),
                   SourceName("power.draw.instant", unit="W"))),
    Metric(
        "sm_clock_mhz", "MHz", "nvmlDeviceGetClockInfo(NVML_CLOCK_SM) / DCGM_FI_DEV_SM_CLOCK",
        "SM clock",
        Exported("tealeaves_sm_clock_hertz", 1e6, "SM clock, newest window"),
        dcgm=SourceName("DCGM_FI_DEV_SM_CLOCK", 1.0, 100), dcgmi="SMCLK",
        smi_dmon=(SourceName("pclk"),),
        smi_query=(SourceName("clocks.sm", unit="MHz"),
                   SourceName("clocks.current.sm", unit="MHz"))),
    Metric(
        "mem_used_bytes", "B", "nvmlDeviceGetMemoryInfo.used / DCGM_FI_DEV_FB_USED (MiB)",
        "device memory in use",
        Exported("tealeaves_memory_used_bytes", 1.0, "Device memory in use, newest window"),
        dcgm=SourceName("DCGM_FI_DEV_FB_USED", MIB, 252), dcgmi="FBUSD",
        smi_dmon=(SourceName("fb", MIB),),  # "MB" = MiB
        smi_query=(SourceName("memory.used", MIB, unit="MiB"),)),
    Metric(
        "gr_engine_active", "%", "DCGM_FI_PROF_GR_ENGINE_ACTIVE (ratio x 100)",
        "share of time the graphics/compute engine was busy (per MIG instance: of its own "
        "slices)",
        Exported("tealeaves_gr_engine_active_ratio", 0.01,
                 "Share of time the graphics/compute engine was busy "
                 "(DCGM_FI_PROF_GR_ENGINE_ACTIVE), newest window"),
        dcgm=SourceName("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 100.0, 1001), dcgmi="GRACT"),
    Metric(
        "gpu_temp_c", "°C",
        "nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU) / DCGM_FI_DEV_GPU_TEMP",
        "GPU core temperature",
        Exported("tealeaves_gpu_temperature_celsius", 1.0,
                 "GPU core temperature (NVML / DCGM_FI_DEV_GPU_TEMP), newest window"),
        dcgm=SourceName("DCGM_FI_DEV_GPU_TEMP", 1.0, 150), dcgmi="TMPTR",
        smi_dmon=(SourceName("gtemp"),),
        smi_query=(SourceName("temperature.gpu", unit=""),)),
)

#: Column name -> its row.
METRIC_BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}


# -- views of the table, one per reader ---------------------------------------------------
# Each is built from ``METRICS`` in table order; the readers keep their public names for them
# (``data.importers.DMON_COLUMNS`` ...).

def exported_gauges() -> tuple[tuple[str, str, float, str], ...]:
    """The exporter's per-GPU gauges: ``(column, gauge name, stored -> exported scale,
    help)`` per metric, in table order (``app.exporter.GPU_GAUGES``)."""
    return tuple((m.name, m.prometheus.name, m.prometheus.scale, m.prometheus.help)
                 for m in METRICS)


def exported_names() -> dict[str, tuple[str, float]]:
    """Inverse of ``exported_gauges``: gauge name -> ``(column, exported -> stored factor)``
    (``1 / scale``: ratio x 100 to %, Hz x 1e-6 to MHz), for the Prometheus reader."""
    return {m.prometheus.name: (m.name, 1.0 / m.prometheus.scale) for m in METRICS}


def dcgm_fields() -> dict[str, tuple[str, float]]:
    """DCGM field name (= dcgm-exporter's series name) -> ``(column, raw -> stored
    factor)``, for the metrics DCGM has."""
    return {m.dcgm.name: (m.name, m.dcgm.scale) for m in METRICS if m.dcgm is not None}


def dcgmi_fields() -> dict[str, tuple[str, float]]:
    """``dcgmi dmon`` short field name (upper case) -> ``(column, raw -> stored factor)``
    (the DCGM field's scale)."""
    return {m.dcgmi: (m.name, m.dcgm.scale) for m in METRICS
            if m.dcgmi is not None and m.dcgm is not None}


def smi_dmon_columns() -> dict[str, tuple[str, float]]:
    """``nvidia-smi dmon`` column (lower case) -> ``(column, raw -> stored factor)``."""
    return {s.name: (m.name, s.scale) for m in METRICS for s in m.smi_dmon}


def smi_query_fields() -> dict[str, tuple[str, float, str, int]]:
    """``nvidia-smi --query-gpu`` field -> ``(column, raw -> stored factor, unit printed,
    priority)``; the lowest priority present in a file wins (a field's position in its row's
    ``smi_query``)."""
    return {s.name: (m.name, s.scale, s.unit or "", prio) for m in METRICS
            for prio, s in enumerate(m.smi_query)}


def gpm_metrics() -> dict[str, int]:
    """Column -> GPM metric id of the GPM metrics the NVML collector reads, in id order (the
    order the collector asks for them and reads the answers back)."""
    rows = sorted((m for m in METRICS if m.nvml_gpm is not None), key=lambda m: m.nvml_gpm.id)
    return {m.name: m.nvml_gpm.id for m in rows}


def gpm_scales() -> dict[str, float]:
    """Column -> factor from the GPM metric's unit to the column's, where it is not 1
    (NVLink: MiB/s -> B/s), in GPM id order."""
    rows = sorted((m for m in METRICS if m.nvml_gpm is not None), key=lambda m: m.nvml_gpm.id)
    return {m.name: m.nvml_gpm.scale for m in rows if m.nvml_gpm.scale != 1.0}


def nvml_field_ids() -> dict[str, int]:
    """Column -> NVML field id of the counters the collector reads through
    ``nvmlDeviceGetFieldValues``, in table order."""
    return {m.name: m.nvml_field.id for m in METRICS if m.nvml_field is not None}


__all__ = ["METRICS", "METRIC_BY_NAME", "MIB", "Exported", "Metric", "SourceName",
           "dcgm_fields", "dcgmi_fields", "exported_gauges", "exported_names", "gpm_metrics",
           "gpm_scales", "nvml_field_ids", "smi_dmon_columns", "smi_query_fields"]
