"""NVML collector: sweeps every GPU at a fixed rate with non-blocking calls only.

Per sweep and GPU it reads utilization, memory used, power, SM clock (1-7 us each on H200),
the cumulative PCIe byte counters through field values 197/198 (0.33 ms), differenced here
into bytes/s, and, where the GPU supports GPM, ``sm_active``, ``sm_occupancy``,
``tensor_active``, ``dram_active`` and NVLink bytes/s between two GPM samples at least
``gpm_interval_s`` apart (GPM has a 100 ms floor, like DCGM profiling).  Costs are from
``shared/DESIGN.md``, "Facts measured on an H200 machine".

Anything a GPU does not answer is NaN, never 0; each (GPU, metric) that is not supported is
reported once in ``health['unsupported']``.
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pandas as pd

from .nvml_shim import (
    FI_PCIE_RX_BYTES,
    FI_PCIE_TX_BYTES,
    GPM_METRICS,
    GPM_SCALE,
    Nvml,
    NvmlGpuLost,
    NvmlNotSupported,
)

#: A PCIe byte rate above this is a counter reset, not traffic (PCIe 6.0 x16 is 128 GB/s a
#: direction); such a difference becomes NaN.
MAX_PLAUSIBLE_PCIE_BYTES_PER_S = 1e12


def counter_rate(prev_value: int | None, prev_ts_us: int | None, value: int | None,
                 ts_us: int | None, bits: int = 64,
                 max_rate: float = MAX_PLAUSIBLE_PCIE_BYTES_PER_S) -> float:
    """Rate of a cumulative counter between two readings, handling wrap-around.

    Args:
        prev_value, prev_ts_us: the earlier reading (value, driver timestamp in us).
        value, ts_us: the later reading.
        bits: counter width; a smaller later value is taken as one wrap modulo ``2**bits``.
        max_rate: a rate above this (after unwrapping) is a reset and gives NaN.

    Returns:
        Units per second, or NaN when either reading is missing, the timestamps do not
        advance (the driver returned its cached reading), or the result is implausible.
    """
    if prev_value is None or value is None or prev_ts_us is None or ts_us is None:
        return math.nan
    dt = (ts_us - prev_ts_us) / 1e6
    if dt <= 0:
        return math.nan
    delta = value - prev_value
    if delta < 0:
        delta += 1 << bits
    rate = delta / dt
    return rate if rate <= max_rate else math.nan


@dataclass
class _GpuState:
    index: int
    handle: object
    uuid: str
    gpm: bool
    online: bool = True
    prev_fields: dict[int, tuple[int | None, int]] = field(default_factory=dict)
    gpm_prev: object = None
    gpm_cur: object = None
    gpm_prev_t: float = -math.inf


class NvmlCollector:
    """Polls all (or the chosen) GPUs through NVML.

    Args:
        hz: sweeps per second (default 10, the GPM floor); every GPU is read once a sweep.
        gpus: GPU indices to read; None for all.
        nvml: an ``Nvml``-like object (tests pass a fake); default the real pynvml shim.
        host: host name recorded on every sample; default ``socket.gethostname()``.
        gpm_interval_s: least time between the two GPM samples of one metric read.
        clock: ``(wall, monotonic)`` time source, for tests.

    Attributes:
        health: ``sweeps``, ``missed_deadlines``, ``max_lateness_s``, ``unsupported``
            (set of ``"gpu<i>:<metric>"`` strings), ``offline`` (set of GPU indices).

    Raises:
        NvmlUnavailable: from ``open`` when NVML cannot start or finds no GPU.
    """

    def __init__(self, hz: float = 10.0, gpus: list[int] | None = None, nvml: object = None,
                 host: str | None = None, gpm_interval_s: float = 0.095,
                 clock=None) -> None:
        if not hz > 0:
            raise ValueError(f"hz must be positive, got {hz}")
        self.hz = float(hz)
        self.gpu_filter = gpus
        self.nvml = nvml if nvml is not None else Nvml()
        self.host = host or socket.gethostname()
        self.gpm_interval_s = gpm_interval_s
        self._clock = clock or (lambda: (time.time(), time.monotonic()))
        self._gpus: list[_GpuState] = []
        self.health: dict = {"sweeps": 0, "missed_deadlines": 0, "max_lateness_s": 0.0,
                             "unsupported": set(), "offline": set()}
        self.driver = ""

    # -- setup ---------------------------------------------------------------------------
    def open(self) -> pd.DataFrame:
        """Start NVML and probe the GPUs.

        Returns:
            Device rows (``data.schema.DEVICE_COLUMNS``), one per GPU read.
        """
        from .nvml_shim import NvmlUnavailable

        n = self.nvml
        n.init()
        try:
            self.driver = n.driver_version()
        except (NvmlNotSupported, NvmlGpuLost):
            self.driver = ""
        count = n.device_count()
        indices = [i for i in range(count) if self.gpu_filter is None or i in self.gpu_filter]
        if not indices:
            raise NvmlUnavailable("NVML found no GPU to read")
        rows = []
        for i in indices:
            h = n.handle(i)
            uuid = self._try(lambda h=h: n.uuid(h), "")
            gpm = bool(self._try(lambda h=h: n.gpm_supported(h), False))
            st = _GpuState(index=i, handle=h, uuid=uuid, gpm=gpm)
            if gpm:
                try:
                    st.gpm_prev, st.gpm_cur = n.gpm_sample_alloc(), n.gpm_sample_alloc()
                except (NvmlNotSupported, NvmlGpuLost):
                    st.gpm = False
            self._gpus.append(st)
            rows.append({
                "host": self.host, "gpu": i, "uuid": uuid,
                "name": self._try(lambda h=h: n.name(h), ""),
                "power_limit_w": self._try(lambda h=h: n.power_limit_w(h), math.nan),
                "max_sm_clock_mhz": self._try(lambda h=h: n.max_sm_clock_mhz(h), math.nan),
                "mem_total_bytes": self._try(lambda h=h: n.mem_total_bytes(h), math.nan),
                "gpm_supported": float(st.gpm),
            })
            if not st.gpm:
                for m in GPM_METRICS:
                    self.health["unsupported"].add(f"gpu{i}:{m}")
        return pd.DataFrame(rows)

    def close(self) -> None:
        """Free GPM samples and shut NVML down."""
        for st in self._gpus:
            for s in (st.gpm_prev, st.gpm_cur):
                if s is not None:
                    self.nvml.gpm_sample_free(s)
        self._gpus = []
        self.nvml.shutdown()

    @staticmethod
    def _try(fn, default):
        try:
            return fn()
        except (NvmlNotSupported, NvmlGpuLost):
            return default

    # -- one sweep -----------------------------------------------------------------------
    def _read(self, st: _GpuState, name: str, fn) -> float:
        if not st.online:
            return math.nan
        try:
            return fn()
        except NvmlNotSupported:
            self.health["unsupported"].add(f"gpu{st.index}:{name}")
            return math.nan
        except NvmlGpuLost:
            st.online = False
            self.health["offline"].add(st.index)
            return math.nan

    def sweep(self) -> list[dict]:
        """Read every GPU once; one dict per GPU in the sample schema."""
        n = self.nvml
        rows = []
        for st in self._gpus:
            wall, mono = self._clock()
            h = st.handle
            row: dict = {"timestamp": wall, "monotonic": mono, "host": self.host,
                         "gpu": st.index, "uuid": st.uuid}
            util = self._read(st, "gpu_util", lambda h=h: n.utilization(h))
            row["gpu_util"], row["mem_copy_util"] = (util if isinstance(util, tuple)
                                                     else (math.nan, math.nan))
            row["mem_used_bytes"] = self._read(st, "mem_used_bytes",
                                               lambda h=h: n.mem_used_bytes(h))
            row["power_w"] = self._read(st, "power_w", lambda h=h: n.power_w(h))
            row["sm_clock_mhz"] = self._read(st, "sm_clock_mhz", lambda h=h: n.sm_clock_mhz(h))
            self._pcie(st, row)
            self._gpm(st, row, mono)
            rows.append(row)
        self.health["sweeps"] += 1
        return rows

    def _pcie(self, st: _GpuState, row: dict) -> None:
        ids = [FI_PCIE_TX_BYTES, FI_PCIE_RX_BYTES]
        cols = ["pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"]
        readings = self._read(st, "pcie", lambda: self.nvml.field_values(st.handle, ids))
        if not isinstance(readings, list):
            row.update({c: math.nan for c in cols})
            return
        for fid, col, r in zip(ids, cols, readings):
            if r.value is None:
                self.health["unsupported"].add(f"gpu{st.index}:{col}")
            prev = st.prev_fields.get(fid)
            row[col] = (counter_rate(prev[0], prev[1], r.value, r.timestamp_us, r.bits)
                        if prev else math.nan)
            # Keep the older reading when the driver handed back the same cached one, so the
            # next fresh reading differences against a real interval.
            if prev is None or r.timestamp_us != prev[1]:
                st.prev_fields[fid] = (r.value, r.timestamp_us)

    def _gpm(self, st: _GpuState, row: dict, mono: float) -> None:
        for col in GPM_METRICS:
            row[col] = math.nan
        if not st.gpm or not st.online or mono - st.gpm_prev_t < self.gpm_interval_s:
            return
        try:
            self.nvml.gpm_sample_get(st.handle, st.gpm_cur)
            if math.isfinite(st.gpm_prev_t):
                vals = self.nvml.gpm_metrics(st.gpm_prev, st.gpm_cur, list(GPM_METRICS.values()))
                for col, v in zip(GPM_METRICS, vals):
                    row[col] = v * GPM_SCALE.get(col, 1.0)
                    if math.isnan(v):
                        self.health["unsupported"].add(f"gpu{st.index}:{col}")
            st.gpm_prev, st.gpm_cur = st.gpm_cur, st.gpm_prev
            st.gpm_prev_t = mono
        except NvmlNotSupported:
            st.gpm = False
            for col in GPM_METRICS:
                self.health["unsupported"].add(f"gpu{st.index}:{col}")
        except NvmlGpuLost:
            st.online = False
            self.health["offline"].add(st.index)

    # -- the loop ------------------------------------------------------------------------
    def stream(self, stop: threading.Event | None = None, duration: float | None = None,
               batch_s: float = 0.25) -> Iterator[pd.DataFrame]:
        """Sweep at ``hz`` until ``stop`` is set or ``duration`` seconds pass.

        Deadlines are absolute (start + k / hz); a sweep that starts late by more than one
        period skips the missed deadlines and counts them in ``health['missed_deadlines']``.

        Yields:
            Sample frames holding the sweeps of the last ``batch_s`` seconds.
        """
        stop = stop or threading.Event()
        period = 1.0 / self.hz
        t0 = time.monotonic()
        k = 0
        pending: list[dict] = []
        last_flush = t0
        while not stop.is_set():
            now = time.monotonic()
            if duration is not None and now - t0 >= duration:
                break
            deadline = t0 + k * period
            if now < deadline:
                stop.wait(deadline - now)
                continue
            late = now - deadline
            self.health["max_lateness_s"] = max(self.health["max_lateness_s"], late)
            if late > period:
                skipped = int(late // period)
                self.health["missed_deadlines"] += skipped
                k += skipped
            pending.extend(self.sweep())
            k += 1
            if time.monotonic() - last_flush >= batch_s:
                yield pd.DataFrame(pending)
                pending, last_flush = [], time.monotonic()
        if pending:
            yield pd.DataFrame(pending)
