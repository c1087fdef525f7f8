"""Capability probe: what each GPU answers, what each NVML call costs, and how fast each metric
group can be read on this machine (``tealeaves doctor``).

Rates are measured, not assumed: each group's call is timed (median of repeated calls) and, for
the fast counters, the probe polls tightly for a moment and counts how often the value really
changes (the counter's own refresh rate).  GPM's refresh is its documented 100 ms floor (10 Hz,
as for DCGM profiling; ``docs/measurement.md``, "NVML on an H200"); the probe reads GPM several
times that far apart on every GPU at once and counts, per metric, the reads that gave no value:
a metric that answered at least once is answering (``gpm_metrics``), and one that also failed
some reads is intermittent (``gpm_intermittent``, with its counts, as the collector's health
says), not missing: an H200 gives ``dram_active`` NaN in about one read of a thousand.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field

from tealeaves.collectors.health import ReadCounts, intermittent_text, read_key
from tealeaves.collectors.nvml_shim import (
    FI_PCIE_RX_BYTES,
    FI_PCIE_TX_BYTES,
    GPM_METRICS,
    Nvml,
    NvmlGpuLost,
    NvmlNotSupported,
    NvmlUnavailable,
)

#: GPM's sampling floor (DCGM profiling has the same 100 ms minimum).
GPM_FLOOR_HZ = 10.0


@dataclass
class GroupRate:
    """One metric group on this machine.

    Attributes:
        group: ``fast`` / ``pcie`` / ``gpm`` / ``buffers`` / ``processes``.
        metrics: the columns or values it yields.
        call_us: median cost of reading it once from one GPU, microseconds.
        refresh_hz: how often the value changes (measured; GPM: its floor), NaN if unknown.
        max_hz: reads per second per GPU if one loop read only this group on every GPU.
        reachable_hz: ``min(refresh_hz, max_hz)``: the useful rate per GPU.
        supported: GPUs (indices) where the group answers.
    """

    group: str
    metrics: str
    call_us: float
    refresh_hz: float
    max_hz: float
    reachable_hz: float
    supported: list[int] = field(default_factory=list)


def _median_us(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def _change_rate(fn, seconds: float) -> float:
    """Changes per second of ``fn()``'s value under tight polling for ``seconds``."""
    last, changes = fn(), 0
    t_end = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < t_end:
        v = fn()
        if v != last:
            changes += 1
            last = v
        time.sleep(0.0005)
    rate = changes / (time.perf_counter() - t0)
    return rate if changes else math.nan  # constant during the probe: refresh unknown


def probe(nvml: object | None = None, poll_s: float = 0.5) -> dict:
    """Probe every GPU.

    Args:
        nvml: an ``Nvml``-like object; default the real pynvml shim.
        poll_s: seconds of tight polling per refresh-rate measurement (on GPU 0), and of GPM
            reads (one per 100 ms, every GPU at once, at least one).

    Returns:
        ``{"driver", "nvml_version", "gpus": [per-GPU dict], "groups": [GroupRate dicts]}``.
        Each GPU's dict holds, besides its capabilities, ``gpm_metrics`` (the GPM metrics
        that answered at least once), ``gpm_reads`` (GPM reads made) and
        ``gpm_intermittent`` (``{metric: {"failed": f, "of": n}}`` for each of those that
        failed ``f`` of the ``n`` reads).

    Raises:
        NvmlUnavailable: no driver or no GPU.
    """
    n = nvml if nvml is not None else Nvml()
    n.init()
    try:
        return _probe(n, poll_s)
    finally:
        n.shutdown()


def _try(fn, default=None):
    try:
        return fn()
    except (NvmlNotSupported, NvmlGpuLost):
        return default


def _probe(n, poll_s: float) -> dict:
    count = n.device_count()
    if count == 0:
        raise NvmlUnavailable("NVML found no GPU")
    gpus, handles = [], []
    support: dict[str, list[int]] = {g: [] for g in ("fast", "pcie", "gpm", "buffers",
                                                    "processes")}
    for i in range(count):
        h = n.handle(i)
        handles.append(h)
        fields = _try(lambda h=h: n.field_values(h, [FI_PCIE_TX_BYTES, FI_PCIE_RX_BYTES]), [])
        pcie_ok = bool(fields) and all(f.value is not None for f in fields)
        gpm = bool(_try(lambda h=h: n.gpm_supported(h), False))
        procs = _try(lambda h=h: n.compute_processes(h))
        buffers = [k for k in ("power", "gpu_util")
                   if _try(lambda h=h, k=k: n.buffered_samples(h, k, 0)) is not None]
        fast_ok = _try(lambda h=h: n.power_w(h)) is not None
        gpus.append({
            "gpu": i, "name": _try(lambda h=h: n.name(h), ""),
            "uuid": _try(lambda h=h: n.uuid(h), ""),
            "power_limit_w": _try(lambda h=h: n.power_limit_w(h), math.nan),
            "mig_mode": _try(lambda h=h: n.mig_mode(h)),
            "nvlink_active_links": _try(lambda h=h: n.nvlink_active_links(h), 0),
            "gpm_supported": gpm, "gpm_metrics": [], "gpm_reads": 0, "gpm_intermittent": {},
            "pcie_fields": pcie_ok, "sample_buffers": buffers,
            "compute_processes": None if procs is None else len(procs),
        })
        for grp, ok in (("fast", fast_ok), ("pcie", pcie_ok), ("buffers", bool(buffers)),
                        ("processes", procs is not None)):
            if ok:
                support[grp].append(i)
    gpm_gpus = [g["gpu"] for g in gpus if g["gpm_supported"]]
    for i, (made, failed) in _gpm_reads(n, {i: handles[i] for i in gpm_gpus},
                                        max(1, round(poll_s * GPM_FLOOR_HZ))).items():
        g = gpus[i]
        g["gpm_reads"] = made
        g["gpm_metrics"] = [m for m, f in zip(GPM_METRICS, failed, strict=True) if f < made]
        g["gpm_intermittent"] = {m: {"failed": f, "of": made}
                                 for m, f in zip(GPM_METRICS, failed, strict=True)
                                 if 0 < f < made}
        if g["gpm_metrics"]:
            support["gpm"].append(i)
    groups = _rates(n, handles, support, poll_s)
    return {"driver": _try(n.driver_version, ""), "nvml_version": _try(n.nvml_version, ""),
            "gpus": gpus, "groups": [asdict(g) for g in groups]}


def _gpm_reads(n, handles: dict[int, object], reads: int) -> dict[int, tuple[int, list[int]]]:
    """``reads`` GPM reads of every GPU in ``handles`` (``{index: handle}``), one per GPM floor
    (100 ms), all GPUs in the same pause.

    Returns:
        ``{index: (reads made, [failed reads per metric of GPM_METRICS])}``; a failed GPM call
        fails every metric of that read, a GPU whose first sample fails makes no read.
    """
    ids = list(GPM_METRICS.values())
    out = {i: (0, [0] * len(ids)) for i in handles}
    pairs: dict[int, list] = {}
    try:
        for i, h in handles.items():
            try:
                pairs[i] = [n.gpm_sample_alloc(), n.gpm_sample_alloc()]
            except (NvmlNotSupported, NvmlGpuLost):
                continue
            try:
                n.gpm_sample_get(h, pairs[i][0])
            except (NvmlNotSupported, NvmlGpuLost):
                for s in pairs.pop(i):
                    n.gpm_sample_free(s)
        for _ in range(reads if pairs else 0):
            time.sleep(1.0 / GPM_FLOOR_HZ)
            for i, pair in pairs.items():
                made, failed = out[i]
                try:
                    n.gpm_sample_get(handles[i], pair[1])
                    vals = n.gpm_metrics(pair[0], pair[1], ids)
                except (NvmlNotSupported, NvmlGpuLost):
                    vals = [math.nan] * len(ids)  # the older sample stays the baseline
                else:
                    pair.reverse()
                for k, v in enumerate(vals):
                    failed[k] += math.isnan(v)
                out[i] = (made + 1, failed)
    finally:
        for pair in pairs.values():
            for s in pair:
                n.gpm_sample_free(s)
    return out


def _rates(n, handles, support, poll_s: float) -> list[GroupRate]:
    ngpu = len(handles)
    out = []

    def add(group, metrics, call_us, refresh_hz):
        max_hz = 1e6 / (call_us * ngpu) if call_us and math.isfinite(call_us) else math.nan
        reach = min(refresh_hz, max_hz) if math.isfinite(refresh_hz) else max_hz
        out.append(GroupRate(group, metrics, call_us, refresh_hz, max_hz, reach,
                             support[group]))

    nan = math.nan
    if support["fast"]:
        h = handles[support["fast"][0]]

        def fast():
            n.utilization(h)
            n.mem_used_bytes(h)
            n.power_w(h)
            n.sm_clock_mhz(h)
            n.gpu_temp_c(h)

        call = _median_us(fast, 200)
        refresh = _change_rate(lambda: n.power_w(h), poll_s)
        add("fast", "gpu_util mem_copy_util power_w sm_clock_mhz mem_used_bytes gpu_temp_c", call, refresh)
    else:
        add("fast", "gpu_util mem_copy_util power_w sm_clock_mhz mem_used_bytes gpu_temp_c", nan, nan)
    if support["pcie"]:
        h = handles[support["pcie"][0]]

        def pcie():
            return n.field_values(h, [FI_PCIE_TX_BYTES, FI_PCIE_RX_BYTES])[0].timestamp_us

        call = _median_us(pcie, 50)
        refresh = _change_rate(pcie, poll_s)
        add("pcie", "pcie_tx_bytes_per_s pcie_rx_bytes_per_s", call, refresh)
    else:
        add("pcie", "pcie_tx_bytes_per_s pcie_rx_bytes_per_s", nan, nan)
    if support["gpm"]:
        h = handles[support["gpm"][0]]
        s = n.gpm_sample_alloc()
        try:
            call = _median_us(lambda: n.gpm_sample_get(h, s), 10)
        finally:
            n.gpm_sample_free(s)
        add("gpm", " ".join(GPM_METRICS), call, GPM_FLOOR_HZ)
    else:
        add("gpm", " ".join(GPM_METRICS), nan, nan)
    if support["buffers"]:
        h = handles[support["buffers"][0]]
        call = _median_us(lambda: n.buffered_samples(h, "power", 0), 5)
        add("buffers", "power_w gpu_util (driver sample buffers)", call, nan)
    else:
        add("buffers", "power_w gpu_util (driver sample buffers)", nan, nan)
    if support["processes"]:
        h = handles[support["processes"][0]]
        call = _median_us(lambda: n.compute_processes(h), 10)
        add("processes", "pid used_memory_bytes", call, nan)
    else:
        add("processes", "pid used_memory_bytes", nan, nan)
    return out


def format_table(report: dict) -> str:
    """Human-readable doctor report: one table of GPUs, one of metric groups."""
    lines = [(f"driver {report['driver']}  NVML {report['nvml_version']}  "
             f"{len(report['gpus'])} GPU(s)"), ""]
    lines.append(f"{'gpu':>3}  {'name':<22} {'uuid':<14} {'GPM':<4} {'PCIe fields':<11} "
                 f"{'MIG':<4} {'NVLink':>6}  {'procs':>5}  GPM metrics answering")
    for g in report["gpus"]:
        mig = {None: "n/a", 0: "off", 1: "on"}.get(g["mig_mode"], str(g["mig_mode"]))
        procs = "n/a" if g["compute_processes"] is None else str(g["compute_processes"])
        lines.append(
            f"{g['gpu']:>3}  {g['name'][:22]:<22} {g['uuid'][:14]:<14} "
            f"{'yes' if g['gpm_supported'] else 'no':<4} "
            f"{'yes' if g['pcie_fields'] else 'no':<11} {mig:<4} "
            f"{g['nvlink_active_links']:>6}  {procs:>5}  {', '.join(g['gpm_metrics']) or '-'}")
    flaky: dict[str, ReadCounts] = {read_key(g["gpu"], m): c for g in report["gpus"]
                                    for m, c in g.get("gpm_intermittent", {}).items()}
    if flaky:  # answering, so in the column above, but not every read
        lines.append(f"intermittent: {intermittent_text(flaky)}")
    lines += ["", (f"{'group':<10} {'call us':>9} {'refresh Hz':>10} {'max Hz':>9} "
                  f"{'reachable Hz/GPU':>16}  GPUs  metrics")]
    for r in report["groups"]:
        def fmt(v, spec):
            if v is None or (isinstance(v, float) and math.isnan(v)):
                return "-".rjust(int(spec.split(".")[0]))
            return format(v, spec)
        lines.append(
            f"{r['group']:<10} {fmt(r['call_us'], '9.1f')} {fmt(r['refresh_hz'], '10.1f')} "
            f"{fmt(r['max_hz'], '9.0f')} {fmt(r['reachable_hz'], '16.1f')}  "
            f"{','.join(map(str, r['supported'])) or '-':<4}  {r['metrics']}")
    lines += ["", ("call us: median cost of one read of one GPU; refresh Hz: how often the value "
                  "changed under tight polling (GPM: its 100 ms floor); max Hz: one loop reading "
                  "only this group on every GPU.")]
    return "\n".join(lines)
