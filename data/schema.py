"""The one sample frame every collector and importer yields, and everything downstream reads.

A *sample* is one reading of one GPU at one instant: one row of a pandas DataFrame in long
form (``timestamp``, ``gpu``) with the columns below.  Metric names follow NVIDIA's DCGM
profiling fields in snake_case (``DCGM_FI_PROF_SM_ACTIVE`` -> ``sm_active``), with units in
the name where they are not obvious (see ``shared/DESIGN.md``, "Terms").

Missing data is ``NaN``, never 0: a metric the GPU does not support, a counter that has no
previous reading to difference against, or a GPM value not refreshed in this sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

#: Identity and clock columns, in order.  ``timestamp`` is wall clock, UTC epoch seconds;
#: ``monotonic`` is the collecting host's monotonic clock in seconds (for intervals only).
ID_COLUMNS: tuple[str, ...] = ("timestamp", "monotonic", "host", "gpu", "uuid")


@dataclass(frozen=True)
class Metric:
    """One telemetry column.

    Attributes:
        name: column name (DCGM-style snake_case).
        unit: unit of the values, as shown on axes ("%", "B/s", "W", "MHz", "B").
        source: where the value comes from (NVML call, GPM metric, DCGM field).
        description: one line for legends and docs.
    """

    name: str
    unit: str
    source: str
    description: str


METRICS: tuple[Metric, ...] = (
    Metric("gpu_util", "%", "nvmlDeviceGetUtilizationRates.gpu / DCGM_FI_DEV_GPU_UTIL",
           "share of time any kernel ran (driver-averaged, 1/6-1 s)"),
    Metric("mem_copy_util", "%", "nvmlDeviceGetUtilizationRates.memory / DCGM_FI_DEV_MEM_COPY_UTIL",
           "share of time device memory was read or written"),
    Metric("sm_active", "%", "GPM NVML_GPM_METRIC_SM_UTIL / DCGM_FI_PROF_SM_ACTIVE",
           "share of SMs with at least one warp resident, time-averaged"),
    Metric("sm_occupancy", "%", "GPM NVML_GPM_METRIC_SM_OCCUPANCY / DCGM_FI_PROF_SM_OCCUPANCY",
           "resident warps over the SM maximum"),
    Metric("tensor_active", "%", "GPM NVML_GPM_METRIC_ANY_TENSOR_UTIL / DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
           "share of cycles any tensor pipe was busy"),
    Metric("dram_active", "%", "GPM NVML_GPM_METRIC_DRAM_BW_UTIL / DCGM_FI_PROF_DRAM_ACTIVE",
           "device-memory bandwidth used over its peak"),
    Metric("pcie_tx_bytes_per_s", "B/s", "NVML field 197 (NVML_FI_DEV_PCIE_COUNT_TX_BYTES), differenced",
           "PCIe bytes sent by the GPU per second"),
    Metric("pcie_rx_bytes_per_s", "B/s", "NVML field 198 (NVML_FI_DEV_PCIE_COUNT_RX_BYTES), differenced",
           "PCIe bytes received by the GPU per second"),
    Metric("nvlink_tx_bytes_per_s", "B/s", "GPM NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC (MiB/s x 2**20)",
           "NVLink bytes sent, all links"),
    Metric("nvlink_rx_bytes_per_s", "B/s", "GPM NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC (MiB/s x 2**20)",
           "NVLink bytes received, all links"),
    Metric("power_w", "W", "nvmlDeviceGetPowerUsage (mW / 1000) / DCGM_FI_DEV_POWER_USAGE",
           "board power draw"),
    Metric("sm_clock_mhz", "MHz", "nvmlDeviceGetClockInfo(NVML_CLOCK_SM) / DCGM_FI_DEV_SM_CLOCK",
           "SM clock"),
    Metric("mem_used_bytes", "B", "nvmlDeviceGetMemoryInfo.used / DCGM_FI_DEV_FB_USED (MiB)",
           "device memory in use"),
)

#: The largest physical reading per unit: 100 %; 5 kW of board power (GB200's superchip draws
#: about 2.7 kW); 10 GHz; 2 TB/s (NVLink 5 is 1.8 TB/s a GPU, PCIe 6 x16 0.13 TB/s); 10 TB of
#: device memory.  Anything beyond, or under 0, is no reading: DCGM writes "no value" as
#: 2147483632+ (32-bit ints), 9223372036854775792+ (64-bit) and 140737488355328.0+ (doubles)
#: (DESIGN.md), all far above these.
UNIT_HIGH: dict[str, float] = {"%": 100.0, "W": 5000.0, "MHz": 10000.0, "B/s": 2e12,
                               "B": 1e13}

METRIC_NAMES: tuple[str, ...] = tuple(m.name for m in METRICS)
METRIC_BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}

#: All columns of the sample frame, in order.
COLUMNS: tuple[str, ...] = ID_COLUMNS + METRIC_NAMES

_DTYPES: dict[str, str] = {
    "timestamp": "float64",
    "monotonic": "float64",
    "host": "object",
    "gpu": "int64",
    "uuid": "object",
    **{name: "float64" for name in METRIC_NAMES},
}

#: Per-GPU device limits, used to normalise metrics across GPU models.
DEVICE_COLUMNS: tuple[str, ...] = (
    "host", "gpu", "uuid", "name", "power_limit_w", "max_sm_clock_mhz", "mem_total_bytes",
    "gpm_supported",
)


class SchemaError(ValueError):
    """A frame does not fit the sample schema; the message names the column."""


def empty_frame() -> pd.DataFrame:
    """Return a sample frame with no rows and every column at its dtype."""
    return conform(pd.DataFrame({c: [] for c in COLUMNS}))


def conform(df: pd.DataFrame, *, source: str = "frame") -> pd.DataFrame:
    """Check and coerce ``df`` to the sample schema.

    Missing metric columns are added as NaN; a metric value under 0 or above its unit's
    ``UNIT_HIGH`` (a DCGM/NVML blank code, an impossible reading) becomes NaN; unknown
    columns are dropped; rows are sorted by
    (timestamp, gpu).  ``monotonic`` is filled from ``timestamp`` when absent, ``host`` with
    "localhost" and ``uuid`` with "" when absent.

    Args:
        df: a frame holding at least ``timestamp`` and ``gpu``.
        source: a name for error messages (a file path, say).

    Returns:
        A new frame with exactly ``COLUMNS`` in order.

    Raises:
        SchemaError: ``timestamp`` or ``gpu`` is missing, or a column cannot be made numeric.
    """
    for required in ("timestamp", "gpu"):
        if required not in df.columns:
            raise SchemaError(f"{source}: required column {required!r} is missing")
    out = pd.DataFrame(index=df.index)
    for col in COLUMNS:
        if col in df.columns:
            out[col] = df[col]
        elif col == "monotonic":
            out[col] = df["timestamp"]
        elif col == "host":
            out[col] = "localhost"
        elif col == "uuid":
            out[col] = ""
        else:
            out[col] = np.nan
    for col in COLUMNS:
        dtype = _DTYPES[col]
        if dtype == "object":
            out[col] = out[col].astype(str).astype(object)
            continue
        try:
            out[col] = pd.to_numeric(out[col], errors="raise").astype(dtype)
        except (ValueError, TypeError) as exc:
            raise SchemaError(f"{source}: column {col!r} is not numeric ({exc})") from exc
        if col in METRIC_BY_NAME:  # a sentinel or impossible value is no reading: NaN
            high = UNIT_HIGH[METRIC_BY_NAME[col].unit] * (1 + 1e-9)
            v = out[col]
            out[col] = v.where(~((v < 0) | (v > high)))
    if out["timestamp"].isna().any():
        raise SchemaError(f"{source}: column 'timestamp' has missing values")
    return out.sort_values(["timestamp", "gpu"], kind="stable").reset_index(drop=True)


def gpus_in(df: pd.DataFrame) -> list[int]:
    """Sorted GPU indices present in a sample frame."""
    return sorted(int(g) for g in pd.unique(df["gpu"]))
