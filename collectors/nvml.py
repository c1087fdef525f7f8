"""NVML collector: sweeps every GPU at a fixed rate with non-blocking calls only.

Per sweep and GPU it reads utilization, memory used, power, SM clock, temperature (1-7 us each on H200),
the cumulative PCIe byte counters through field values 197/198 (0.33 ms), differenced here
into bytes/s, and, where the GPU supports GPM, ``sm_active``, ``sm_occupancy``,
``tensor_active``, ``dram_active`` and NVLink bytes/s between two GPM samples at least
``gpm_interval_s`` apart (GPM has a 100 ms floor, like DCGM profiling).  Costs are from
``docs/measurement.md``, "NVML on an H200", and ``docs/benchmarks.md``.

Between sweeps, on a slower round-robin (one GPU per sweep), it drains the driver's power and
utilization sample buffers (``nvmlDeviceGetSamples``, finer than any poll: extra rows holding
only ``power_w`` or ``gpu_util``) and lists the compute processes on each GPU.

Anything a GPU does not answer is NaN, never 0.  Each (GPU, metric) keeps a count of its
reads and failed reads (``health['reads']``): one the GPU has never answered is reported once in
``health['unsupported']``; one that answers but fails now and then (GPM ``dram_active`` on
H200, about one read in a thousand) stays collected and shows as intermittent
(``health_summary``).  A GPU that falls off the bus is marked offline, the others continue,
and it is retried every ``retry_interval_s``.
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tealeaves.collectors.health import (  # noqa: F401 - the health record lives in .health; re-exported here
    GROUPS,
    CollectorHealth,
    HealthSummary,
    health_summary,
    new_health,
    read_key,
)
from tealeaves.collectors.nvml_shim import (
    GPM_METRICS,
    GPM_SCALE,
    Nvml,
    NvmlGpuLost,
    NvmlNotSupported,
    NvmlUnavailable,
)
from tealeaves.data.metrics import nvml_field_ids

#: A PCIe byte rate above this is a counter reset, not traffic (PCIe 6.0 x16 is 128 GB/s a
#: direction); such a difference becomes NaN.
MAX_PLAUSIBLE_PCIE_BYTES_PER_S = 1e12

#: The PCIe byte counters read through field values: columns and NVML field ids, in the metric
#: table's order (``data.metrics``: tx 197, rx 198).
_PCIE_COLS: tuple[str, ...] = tuple(nvml_field_ids())
_PCIE_IDS: tuple[int, ...] = tuple(nvml_field_ids().values())

#: Every name a GPU's reads are counted under (``health['reads']``, ``'gpu<i>:<name>'``): the
#: fast counters, the PCIe field-value call and its columns, the GPM metrics, the driver's
#: sample buffers and the process list.
_READ_NAMES: tuple[str, ...] = (("gpu_util", "mem_used_bytes", "power_w", "sm_clock_mhz",
                                 "gpu_temp_c", "pcie") + _PCIE_COLS + tuple(GPM_METRICS)
                                + ("power_samples", "gpu_util_samples", "processes"))


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


def _empty_gpm_read(vals: list[float], gpu_util: float) -> bool:
    """True for a GPM read whose counters did not advance: SM, occupancy and tensor activity
    exactly 0 and DRAM 0 or an error, while NVML says kernels ran (``gpu_util`` > 0).

    Seen on H200 (driver 580.159) in 5 of 1980 reads of the bundled trace, mid-decode at
    gpu_util 21-38 %.  A truly idle GPU reads ``gpu_util`` 0 and keeps its zeros.
    """
    sm, occ, tensor, dram = vals[0], vals[1], vals[2], vals[3]
    return (sm == 0.0 and occ == 0.0 and tensor == 0.0
            and (math.isnan(dram) or dram < 0.01) and gpu_util > 0)


def process_name(pid: int) -> str:
    """Command name of a host process (``/proc/<pid>/comm``), "" when not visible."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@dataclass
class _GpuState:
    index: int
    handle: object
    uuid: str
    gpm: bool
    online: bool = True
    last_retry: float = -math.inf
    last_pcie: float = -math.inf
    prev_fields: dict[int, tuple[int | None, int]] = field(default_factory=dict)
    gpm_prev: object = None
    gpm_cur: object = None
    gpm_prev_t: float = -math.inf
    buffer_since_us: dict[str, int] = field(default_factory=dict)
    buffers_ok: dict[str, bool] = field(default_factory=lambda: {"power": True,
                                                                 "gpu_util": True})
    #: name -> the ``[attempts, failures]`` list of ``health['reads']`` (shared, not copied)
    reads: dict[str, list[int]] = field(default_factory=dict)


class UnknownGpus(ValueError):
    """``gpus`` names GPU indices NVML does not see; the message names them and the count."""


class NvmlCollector:
    """Polls all (or the chosen) GPUs through NVML.

    Args:
        hz: sweeps per second (default 10, the GPM floor); every GPU is read once a sweep.
            Fast counters reach 50 Hz per GPU on H200 (``docs/benchmarks.md``).
        gpus: GPU indices to read; None for all.
        nvml: an ``Nvml``-like object (tests pass a fake); default the real pynvml shim.
        host: host name recorded on every sample; default ``socket.gethostname()``.
        gpm_interval_s: least time between the two GPM samples of one metric read.
        pcie_hz: reads per second of the PCIe byte counters (capped at ``hz``).  One field
            read costs 0.64-0.72 ms of CPU per GPU on H200 (driver 580, docs/benchmarks.md),
            2x everything else in a sweep together; the counters are cumulative, so a slower
            read loses no bytes, only time resolution.  Default 10.
        buffer_interval_s: how often each GPU's driver sample buffers are drained
            (None: never).
        process_interval_s: how often each GPU's compute processes are listed (None: never).
        retry_interval_s: how often an offline GPU is tried again.
        threads: read the GPUs of a sweep in parallel threads instead of one loop.
        clock: ``() -> (wall, monotonic)`` time source, for tests.

    Attributes:
        health: a ``collectors.health.CollectorHealth`` (``new_health``);
            ``health_summary`` turns it into plain numbers.
        processes: latest process rows per GPU index.

    Raises:
        NvmlUnavailable: from ``open`` when NVML cannot start or finds no GPU.
    """

    def __init__(self, hz: float = 10.0, gpus: list[int] | None = None, nvml: object = None,
                 host: str | None = None, gpm_interval_s: float = 0.095,
                 pcie_hz: float = 10.0,
                 buffer_interval_s: float | None = 1.0,
                 process_interval_s: float | None = 1.0, retry_interval_s: float = 5.0,
                 threads: bool = False, clock=None) -> None:
        if not hz > 0:
            raise ValueError(f"hz must be positive, got {hz}")
        self.hz = float(hz)
        self.gpu_filter = gpus
        self.nvml = nvml if nvml is not None else Nvml()
        self.host = host or socket.gethostname()
        self.gpm_interval_s = gpm_interval_s
        if not pcie_hz > 0:
            raise ValueError(f"pcie_hz must be positive, got {pcie_hz}")
        # 5 % slack so that a sweep a hair early still takes its turn (50 Hz / 10 Hz = 5).
        self.pcie_interval_s = 0.95 / min(pcie_hz, self.hz)
        self.buffer_interval_s = buffer_interval_s
        self.process_interval_s = process_interval_s
        self.retry_interval_s = retry_interval_s
        self.threads = threads
        self._clock = clock or (lambda: (time.time(), time.monotonic()))
        self._gpus: list[_GpuState] = []
        self._pool: ThreadPoolExecutor | None = None
        self._rr_buffers = 0
        self._rr_processes = 0
        self._last_buffers = -math.inf
        self._last_processes = -math.inf
        self._pending_processes: list[dict] = []
        self.processes: dict[int, list[dict]] = {}
        self.health: CollectorHealth = new_health()
        self.driver = ""

    # -- setup ---------------------------------------------------------------------------
    def open(self) -> pd.DataFrame:
        """Start NVML and probe the GPUs.

        Returns:
            Device rows (``data.schema.DEVICE_COLUMNS``), one per GPU read.

        Raises:
            NvmlUnavailable: no driver, or no GPU to read.
            UnknownGpus: ``gpus`` names an index NVML does not see (NVML is shut down).
        """
        n = self.nvml
        n.init()
        self._gpus = []
        self.driver = self._try(n.driver_version, "")
        count = n.device_count()
        unknown = sorted(set(self.gpu_filter or ()) - set(range(count)))
        if unknown:  # asked for by index: never silently read fewer GPUs than asked
            n.shutdown()
            raise UnknownGpus(f"no GPU {', '.join(map(str, unknown))} on this host "
                              f"(NVML sees {count} GPU{'' if count == 1 else 's'}"
                              + (f": 0-{count - 1})" if count else ")"))
        indices = [i for i in range(count) if self.gpu_filter is None or i in self.gpu_filter]
        if not indices:
            n.shutdown()
            raise NvmlUnavailable("NVML found no GPU to read")
        rows = []
        now_us = int(self._clock()[0] * 1e6)
        for i in indices:
            h = n.handle(i)
            uuid = self._try(lambda h=h: n.uuid(h), "")
            gpm = bool(self._try(lambda h=h: n.gpm_supported(h), False))
            st = _GpuState(index=i, handle=h, uuid=uuid, gpm=gpm,
                           buffer_since_us={"power": now_us, "gpu_util": now_us})
            # Every counter pair exists from here on: the sweep only increments, and readers
            # never see the dict change size.
            st.reads = {m: self.health["reads"].setdefault(read_key(i, m), [0, 0])
                        for m in _READ_NAMES}
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
                "pci_bus_id": self._try(lambda h=h: n.pci_bus_id(h), None),
            })
            if not st.gpm:  # never read: unsupported with no attempt counted
                for m in GPM_METRICS:
                    self.health["unsupported"].add(read_key(i, m))
        if self.threads and len(self._gpus) > 1:
            self._pool = ThreadPoolExecutor(max_workers=len(self._gpus),
                                            thread_name_prefix="tealeaves-gpu")
        return pd.DataFrame(rows)

    def close(self) -> None:
        """Free GPM samples, stop worker threads and shut NVML down."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
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
    def _failed(self, st: _GpuState, name: str, counts: list[int]) -> None:
        """Count a failed read of ``name`` (its attempt already counted); unsupported while
        it has never answered."""
        counts[1] += 1
        if counts[1] == counts[0]:
            self.health["unsupported"].add(read_key(st.index, name))

    def _answered(self, st: _GpuState, name: str) -> None:
        """``name`` answered for the first time after failing: no longer unsupported (its
        failures stay counted: intermittent)."""
        self.health["unsupported"].discard(read_key(st.index, name))

    def _read(self, st: _GpuState, name: str, fn) -> object:
        """Call ``fn``; NotSupported -> NaN (counted a failure), GPU lost -> offline + NaN."""
        if not st.online:
            return math.nan
        counts = st.reads[name]
        try:
            value = fn()
        except NvmlNotSupported:
            counts[0] += 1
            self._failed(st, name, counts)
            return math.nan
        except NvmlGpuLost:
            self._mark_lost(st)
            return math.nan
        counts[0] += 1
        if counts[1] and counts[0] - counts[1] == 1:
            self._answered(st, name)
        return value

    def _mark_lost(self, st: _GpuState) -> None:
        st.online = False
        st.last_retry = self._clock()[1]
        self.health["offline"].add(st.index)

    def _retry(self, st: _GpuState, mono: float) -> None:
        if mono - st.last_retry < self.retry_interval_s:
            return
        st.last_retry = mono
        try:
            h = self.nvml.handle(st.index)
            self.nvml.power_w(h)
        except NvmlNotSupported:
            h = self.nvml.handle(st.index)
        except NvmlGpuLost:
            return
        st.handle, st.online = h, True
        st.prev_fields.clear()
        st.gpm_prev_t = -math.inf
        self.health["offline"].discard(st.index)
        self.health["recovered"] += 1

    def _timed(self, group: str, t0: float) -> None:
        self.health["nvml_s"][group] += time.perf_counter() - t0
        self.health["calls"][group] += 1

    def _sweep_gpu(self, st: _GpuState) -> dict:
        n = self.nvml
        wall, mono = self._clock()
        if not st.online:
            self._retry(st, mono)
        h = st.handle
        row: dict = {"timestamp": wall, "monotonic": mono, "host": self.host,
                     "gpu": st.index, "uuid": st.uuid}
        t0 = time.perf_counter()
        util = self._read(st, "gpu_util", lambda: n.utilization(h))
        row["gpu_util"], row["mem_copy_util"] = (util if isinstance(util, tuple)
                                                 else (math.nan, math.nan))
        row["mem_used_bytes"] = self._read(st, "mem_used_bytes", lambda: n.mem_used_bytes(h))
        row["power_w"] = self._read(st, "power_w", lambda: n.power_w(h))
        row["sm_clock_mhz"] = self._read(st, "sm_clock_mhz", lambda: n.sm_clock_mhz(h))
        row["gpu_temp_c"] = self._read(st, "gpu_temp_c", lambda: n.gpu_temp_c(h))
        self._timed("fast", t0)
        if mono - st.last_pcie >= self.pcie_interval_s:
            st.last_pcie = mono
            t0 = time.perf_counter()
            self._pcie(st, row)
            self._timed("pcie", t0)
        else:
            row.update(dict.fromkeys(_PCIE_COLS, math.nan))
        self._gpm(st, row, mono)
        return row

    def sweep(self) -> list[dict]:
        """Read every GPU once.

        Returns:
            One dict per GPU in the sample schema, then any rows drained from the driver's
            sample buffers (only ``power_w`` or ``gpu_util`` set).
        """
        if self._pool is not None:
            rows = list(self._pool.map(self._sweep_gpu, self._gpus))
        else:
            rows = [self._sweep_gpu(st) for st in self._gpus]
        self.health["sweeps"] += 1
        _, mono = self._clock()
        n = len(self._gpus)
        # Round-robin: one GPU per turn, so a slow call never lands on every GPU at once and
        # each GPU gets its turn every interval.
        if n and self.buffer_interval_s is not None and \
                mono - self._last_buffers >= self.buffer_interval_s / n:
            self._last_buffers = mono
            self._rr_buffers = (self._rr_buffers + 1) % n
            rows.extend(self._drain(self._gpus[self._rr_buffers]))
        if n and self.process_interval_s is not None and \
                mono - self._last_processes >= self.process_interval_s / n:
            self._last_processes = mono
            self._rr_processes = (self._rr_processes + 1) % n
            self._poll_processes(self._gpus[self._rr_processes])
        return rows

    def _pcie(self, st: _GpuState, row: dict) -> None:
        readings = self._read(st, "pcie", lambda: self.nvml.field_values(st.handle,
                                                                         list(_PCIE_IDS)))
        if not isinstance(readings, list):
            row.update(dict.fromkeys(_PCIE_COLS, math.nan))
            return
        for fid, col, r in zip(_PCIE_IDS, _PCIE_COLS, readings, strict=True):
            counts = st.reads[col]
            counts[0] += 1
            if r.value is None:
                self._failed(st, col, counts)
            elif counts[1] and counts[0] - counts[1] == 1:
                self._answered(st, col)
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
        t0 = time.perf_counter()
        try:
            self.nvml.gpm_sample_get(st.handle, st.gpm_cur)
            if math.isfinite(st.gpm_prev_t):
                vals = self.nvml.gpm_metrics(st.gpm_prev, st.gpm_cur, list(GPM_METRICS.values()))
                self.health["gpm_reads"] += 1
                if _empty_gpm_read(vals, row.get("gpu_util", math.nan)):
                    # The driver's GPM counters had not advanced: keep the older sample as
                    # the baseline and read again next sweep, so no interval is lost.
                    self.health["gpm_empty"] += 1
                    return
                reads = st.reads
                for col, v in zip(GPM_METRICS, vals, strict=True):
                    row[col] = v * GPM_SCALE.get(col, 1.0)
                    counts = reads[col]
                    counts[0] += 1
                    if math.isnan(v):
                        self._failed(st, col, counts)
                    elif counts[1] and counts[0] - counts[1] == 1:
                        self._answered(st, col)
            st.gpm_prev, st.gpm_cur = st.gpm_cur, st.gpm_prev
            st.gpm_prev_t = mono
        except NvmlNotSupported:
            # A failed GPM call fails every metric of the read.  Give GPM up only on a GPU
            # where it never answered; one that did is read again (from a fresh sample pair).
            answered = False
            for col in GPM_METRICS:
                counts = st.reads[col]
                answered = answered or counts[0] > counts[1]
                counts[0] += 1
                self._failed(st, col, counts)
            if answered:
                st.gpm_prev_t = -math.inf
            else:
                st.gpm = False
        except NvmlGpuLost:
            self._mark_lost(st)
        finally:
            self._timed("gpm", t0)

    def _drain(self, st: _GpuState) -> list[dict]:
        """Rows from the driver's power and utilization sample buffers of one GPU."""
        if not st.online:
            return []
        wall, mono = self._clock()
        rows = []
        for kind, col, name in (("power", "power_w", "power_samples"),
                                ("gpu_util", "gpu_util", "gpu_util_samples")):
            if not st.buffers_ok[kind]:
                continue
            t0 = time.perf_counter()
            counts = st.reads[name]
            try:
                got = self.nvml.buffered_samples(st.handle, kind, st.buffer_since_us[kind])
            except NvmlNotSupported:
                # Give a buffer up only when it never answered; one that did is drained again.
                counts[0] += 1
                self._failed(st, name, counts)
                if counts[1] == counts[0]:
                    st.buffers_ok[kind] = False
                continue
            except NvmlGpuLost:
                self._mark_lost(st)
                return rows
            finally:
                self._timed("buffers", t0)
            counts[0] += 1
            if counts[1] and counts[0] - counts[1] == 1:
                self._answered(st, name)
            for ts_us, value in got:
                t = ts_us / 1e6
                rows.append({"timestamp": t, "monotonic": mono - (wall - t), "host": self.host,
                             "gpu": st.index, "uuid": st.uuid, col: value})
            if got:
                st.buffer_since_us[kind] = got[-1][0]
        self.health["buffered_rows"] += len(rows)
        return rows

    def _poll_processes(self, st: _GpuState) -> None:
        if not st.online:
            return
        t0 = time.perf_counter()
        counts = st.reads["processes"]
        try:
            procs = self.nvml.compute_processes(st.handle)
        except NvmlNotSupported:
            counts[0] += 1
            self._failed(st, "processes", counts)
            return
        except NvmlGpuLost:
            self._mark_lost(st)
            return
        finally:
            self._timed("processes", t0)
        counts[0] += 1
        if counts[1] and counts[0] - counts[1] == 1:
            self._answered(st, "processes")
        wall, _ = self._clock()
        rows = [{"timestamp": wall, "host": self.host, "gpu": st.index, "uuid": st.uuid,
                 "pid": pid, "used_memory_bytes": mem, "name": process_name(pid)}
                for pid, mem in procs]
        self.processes[st.index] = rows
        self._pending_processes.extend(rows)

    def pop_processes(self) -> list[dict]:
        """Process rows listed since the last call (for ``SampleStore.put_processes``)."""
        out, self._pending_processes = self._pending_processes, []
        return out

    # -- the loop ------------------------------------------------------------------------
    def stream(self, stop: threading.Event | None = None, duration: float | None = None,
               batch_s: float = 0.25) -> Iterator[list[dict]]:
        """Sweep at ``hz`` until ``stop`` is set or ``duration`` seconds pass.

        Deadlines are absolute (start + k / hz); a sweep that starts late by more than one
        period skips the missed deadlines and counts them in ``health['missed_deadlines']``;
        every sweep's lateness goes to ``health['lateness_s']`` (jitter).

        Yields:
            Lists of sample rows (dicts in the schema) holding the last ``batch_s`` seconds.
        """
        stop = stop or threading.Event()
        period = 1.0 / self.hz
        t0 = time.monotonic()
        k = 0
        pending: list[dict] = []
        last_flush = t0
        health = self.health
        while not stop.is_set():
            now = time.monotonic()
            if duration is not None and now - t0 >= duration:
                break
            deadline = t0 + k * period
            if now < deadline:
                stop.wait(deadline - now)
                continue
            late = now - deadline
            health["lateness_s"].append(late)
            health["max_lateness_s"] = max(health["max_lateness_s"], late)
            if late > period:
                skipped = int(late // period)
                health["missed_deadlines"] += skipped
                k += skipped
            pending.extend(self.sweep())
            k += 1
            if now - last_flush >= batch_s:
                yield pending
                pending, last_flush = [], time.monotonic()
        if pending:
            yield pending
