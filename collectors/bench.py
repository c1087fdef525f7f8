"""``tealeaves bench collector``: tealeaves' collector next to nvitop and nvidia-smi, same run.

Each tool runs in its own process for the same number of seconds on the same GPUs, so its CPU
time (user + system, from ``getrusage``) and peak RSS are its own:

- ``tealeaves-loop`` / ``tealeaves-threads``: ``tealeaves collect --hz H`` (one loop, or one
  thread per GPU), writing to a real SQLite store; CPU and RSS measured inside the collection
  loop (imports excluded); rates counted from the stored samples.
- ``nvitop``: ``ResourceMetricCollector.take_snapshots()`` in a tight loop (its fastest
  setting: no sleep), if nvitop is importable.
- ``nvidia-smi-query``: ``nvidia-smi --query-gpu=... --format=csv,noheader -lms 1``.
- ``nvidia-smi-dmon``: ``nvidia-smi dmon -d 1 -s pucm`` (dmon's floor is 1 s).

It prints one table, writes ``collector_bench.csv`` and ``collector_bench.json`` to ``--out``,
and a cost model for 8 GPUs from the measured per-call times.
"""

from __future__ import annotations

import csv
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIELDS = ("tool", "gpus", "seconds", "fast_hz", "pcie_hz", "gpm_hz", "buffer_rows_per_s",
          "cpu_pct_one_core", "nvml_ms_per_sweep", "rss_mb", "note")


def rss_mb() -> float:
    """This process's resident memory now, MiB (``/proc/self/statm``; Linux)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class CpuMeter:
    """CPU seconds (user + system) and wall seconds of this process since ``start``."""

    def start(self) -> CpuMeter:
        self.ru0 = resource.getrusage(resource.RUSAGE_SELF)
        self.t0 = time.perf_counter()
        return self

    def stop(self) -> tuple[float, float]:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (ru.ru_utime - self.ru0.ru_utime) + (ru.ru_stime - self.ru0.ru_stime)
        return cpu, time.perf_counter() - self.t0


def _vm_hwm_mb(pid: int | str = "self") -> float:
    """Peak resident set (VmHWM) of a process in MB, NaN when unreadable.

    VmHWM belongs to the process image, so unlike ``ru_maxrss`` it does not carry the
    high-water mark of the forked parent into an exec'd child.
    """
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return math.nan


def _run_child(cmd: list[str], seconds: float) -> tuple[str, float, float, float]:
    """Run ``cmd`` for ``seconds``, then SIGTERM; returns (stdout, cpu_s, wall_s, peak_rss_mb).

    CPU time is the child's own (``os.wait4``); peak RSS is its last VmHWM read while alive.
    """
    with tempfile.TemporaryFile(mode="w+") as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True)
        # os.wait4 (not p.wait) reaps the child, so its rusage is the child's own.
        hwm = math.nan
        while True:
            now_hwm = _vm_hwm_mb(p.pid)
            hwm = now_hwm if not math.isnan(now_hwm) else hwm
            pid, _status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t0 >= seconds:
                p.terminate()
                _, _status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.05)
        p.returncode = 0  # reaped above; keep Popen from waiting on it again
        wall = time.perf_counter() - t0
        out.seek(0)
        return out.read(), ru.ru_utime + ru.ru_stime, wall, hwm


def sample_rate(rows) -> float:
    """Samples per second per GPU: (n - 1) / (last - first timestamp), averaged over GPUs."""
    rates = []
    for _, g in rows.groupby("gpu"):
        if len(g) > 1:
            span = g["timestamp"].max() - g["timestamp"].min()
            rates.append((len(g) - 1) / span if span > 0 else math.nan)
    return sum(rates) / len(rates) if rates else math.nan


def bench_tealeaves(gpus: int, seconds: float, hz: float, threads: bool,
                    pcie_hz: float = 10.0) -> dict:
    """Run ``tealeaves collect`` in a child process and count what it stored."""
    from tealeaves.data.store import SampleStore

    tmp = Path(tempfile.mkdtemp(prefix="tealeaves-bench-"))
    stats_path = tmp / "stats.json"
    cmd = [sys.executable, "-m", "tealeaves.app.cli", "collect", "--hz", str(hz),
           "--duration", str(seconds), "--store", str(tmp / "s.db"),
           "--gpus", ",".join(map(str, range(gpus))), "--stats-json", str(stats_path),
           "--pcie-hz", str(pcie_hz)]
    if threads:
        cmd.append("--threads")
    out, _, _, _ = _run_child(cmd, seconds + 60)
    if not stats_path.exists():
        raise RuntimeError(f"tealeaves collect failed:\n{out}")
    stats = json.loads(stats_path.read_text())
    with SampleStore(tmp / "s.db", readonly=True) as store:
        s = store.read_range()
    shutil.rmtree(tmp, ignore_errors=True)
    el = stats["elapsed_s"]
    swept = s[s["sm_clock_mhz"].notna() | s["pcie_tx_bytes_per_s"].notna()
              | s["mem_used_bytes"].notna()]
    h = stats["health"]
    return {
        "tool": "tealeaves-threads" if threads else "tealeaves-loop", "gpus": gpus,
        "seconds": round(el, 2),
        "fast_hz": sample_rate(swept),
        "pcie_hz": sample_rate(s[s["pcie_tx_bytes_per_s"].notna()]),
        "gpm_hz": sample_rate(s[s["sm_active"].notna()]),
        "buffer_rows_per_s": (len(s) - len(swept)) / el,
        "cpu_pct_one_core": stats["cpu_pct_one_core"],
        "nvml_ms_per_sweep": sum(h["nvml_ms_per_sweep"].values()),
        "rss_mb": max(r for _, r in stats["rss_mb"]),
        "note": (f"target {hz:g} Hz, PCIe {min(pcie_hz, hz):g} Hz; lateness p50/p99 {h['lateness_ms_p50']:.2f}/"
                 f"{h['lateness_ms_p99']:.2f} ms; missed {h['missed_deadlines']}; "
                 f"GPM reads {h['gpm_reads']}, empty {h['gpm_empty']}"),
        "_stats": stats,
    }


_NVITOP_SCRIPT = r"""
import json, resource, sys, time
from nvitop import Device, ResourceMetricCollector
n, seconds = int(sys.argv[1]), float(sys.argv[2])
c = ResourceMetricCollector(Device.all()[:n], interval=0.001)
c.take_snapshots()
ru0 = resource.getrusage(resource.RUSAGE_SELF); t0 = time.perf_counter(); k = 0
while time.perf_counter() - t0 < seconds:
    c.take_snapshots(); k += 1
ru = resource.getrusage(resource.RUSAGE_SELF); el = time.perf_counter() - t0
cpu = ru.ru_utime - ru0.ru_utime + ru.ru_stime - ru0.ru_stime
hwm = [int(x.split()[1]) / 1024 for x in open("/proc/self/status") if x.startswith("VmHWM:")]
print(json.dumps({"snapshots": k, "elapsed_s": el, "cpu_s": cpu, "rss_mb": hwm[0]}))
"""


def bench_nvitop(gpus: int, seconds: float) -> dict | None:
    """nvitop's ResourceMetricCollector at its fastest (snapshots back to back)."""
    try:
        import nvitop  # noqa: F401
    except ImportError:
        return None
    out, _, _, _ = _run_child([sys.executable, "-c", _NVITOP_SCRIPT, str(gpus), str(seconds)],
                              seconds + 60)
    try:
        r = json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"tool": "nvitop", "gpus": gpus, "note": f"failed: {out[-300:]}"}
    rate = r["snapshots"] / r["elapsed_s"]
    return {"tool": "nvitop", "gpus": gpus, "seconds": round(r["elapsed_s"], 2),
            "fast_hz": rate, "pcie_hz": rate, "gpm_hz": math.nan,
            "buffer_rows_per_s": math.nan,
            "cpu_pct_one_core": 100 * r["cpu_s"] / r["elapsed_s"],
            "nvml_ms_per_sweep": 1e3 / rate, "rss_mb": r["rss_mb"],
            "note": "ResourceMetricCollector.take_snapshots back to back (PCIe via the "
                    "blocking nvmlDeviceGetPcieThroughput)"}


def bench_nvidia_smi(gpus: int, seconds: float, mode: str) -> dict | None:
    """``nvidia-smi --query-gpu -lms 1`` (mode ``query``) or ``nvidia-smi dmon -d 1``."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    ids = ",".join(map(str, range(gpus)))
    if mode == "query":
        cmd = [exe, ("--query-gpu=timestamp,index,utilization.gpu,utilization.memory,power.draw,"
                    "clocks.sm,memory.used"), "--format=csv,noheader", "-lms", "1", "-i", ids]
    else:
        cmd = [exe, "dmon", "-d", "1", "-s", "pucmt", "-i", ids]
    out, cpu, wall, rss = _run_child(cmd, seconds)
    rows = [ln for ln in out.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    rate = len(rows) / gpus / wall
    return {"tool": f"nvidia-smi-{mode}", "gpus": gpus, "seconds": round(wall, 2),
            "fast_hz": rate, "pcie_hz": rate if mode == "dmon" else math.nan,
            "gpm_hz": math.nan, "buffer_rows_per_s": math.nan,
            "cpu_pct_one_core": 100 * cpu / wall, "nvml_ms_per_sweep": math.nan,
            "rss_mb": rss, "note": " ".join(cmd[1:3]) + " ... (fastest setting)"}


def cost_model(stats: dict, gpus_measured: int, target_gpus: int = 8,
               target_hz: float = 20.0) -> dict:
    """Predict the sweep at ``target_gpus`` from per-call times measured on fewer GPUs.

    Model: one sweep costs, per GPU, the fast calls + a PCIe field read every ``hz / pcie_hz``
    sweeps + a GPM read every ``hz / 10`` sweeps + the measured Python cost per GPU row (CPU time not spent in NVML);
    buffer drains and process lists are paid once per GPU per second.  Max rate = 1 / (sweep
    cost); CPU at ``target_hz`` = target_hz x sweep cost + per-second costs.
    """
    h = stats["health"]
    hz = stats["hz"]
    us = {g: (0.0 if math.isnan(v) else v) for g, v in h["nvml_us_per_call"].items()}
    sweeps = max(h["sweeps"], 1)
    nvml_cpu_s = sum(h["nvml_ms_per_sweep"].values()) * 1e-3 * sweeps
    py_per_gpu_sweep = max(stats["cpu_s"] - nvml_cpu_s, 0.0) / (sweeps * gpus_measured)
    gpm_share = min(1.0, 10.0 / hz)
    pcie_share = min(1.0, stats.get("pcie_hz", hz) / hz)
    per_gpu_sweep = ((us["fast"] + pcie_share * us["pcie"] + gpm_share * us["gpm"]) * 1e-6
                     + py_per_gpu_sweep)
    per_gpu_second = (2 * us["buffers"] + us["processes"]) * 1e-6
    sweep_s = target_gpus * per_gpu_sweep
    budget = 1.0 - target_gpus * per_gpu_second
    return {
        "gpus": target_gpus,
        "per_gpu_sweep_us": per_gpu_sweep * 1e6,
        "python_us_per_gpu_sweep": py_per_gpu_sweep * 1e6,
        "sweep_ms": sweep_s * 1e3,
        "max_hz": budget / sweep_s if sweep_s > 0 else math.inf,
        "cpu_pct_at_target_hz": 100 * (target_hz * sweep_s + target_gpus * per_gpu_second),
        "target_hz": target_hz,
    }


def run(gpus: int, seconds: float, hz: float, out_dir: Path, compare: bool = True,
        soak_s: float | None = None, pcie_hz: float = 10.0, log=print) -> list[dict]:
    """Run every tool in turn; write CSV/JSON; return the rows."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for threads in (False, True):
        log(f"tealeaves collect {'threads' if threads else 'one loop'}: {seconds:g} s ...")
        rows.append(bench_tealeaves(gpus, seconds, hz, threads, pcie_hz))
    if compare:
        log("nvitop ...")
        r = bench_nvitop(gpus, seconds)
        if r:
            rows.append(r)
        for mode in ("query", "dmon"):
            log(f"nvidia-smi {mode} ...")
            r = bench_nvidia_smi(gpus, seconds, mode)
            if r:
                rows.append(r)
    result: dict = {"rows": [{k: v for k, v in r.items() if k != "_stats"} for r in rows]}
    loop = rows[0]
    result["model_8_gpus"] = cost_model(loop["_stats"], gpus)
    result["loop_stats"] = loop["_stats"]
    if soak_s:
        log(f"soak: tealeaves collect one loop for {soak_s:g} s ...")
        soak = bench_tealeaves(gpus, soak_s, hz, threads=False, pcie_hz=pcie_hz)
        rss = soak["_stats"]["rss_mb"]
        result["soak"] = {"seconds": soak_s, "rss_mb": rss,
                          "rss_first_mb": rss[0][1], "rss_last_mb": rss[-1][1],
                          "rss_max_mb": max(r for _, r in rss),
                          "cpu_pct_one_core": soak["cpu_pct_one_core"],
                          "fast_hz": soak["fast_hz"], "gpm_hz": soak["gpm_hz"],
                          "note": soak["note"]}
    with (out_dir / "collector_bench.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in result["rows"]:
            w.writerow(r)
    from tealeaves.data.jsontext import dumps
    (out_dir / "collector_bench.json").write_text(dumps(result, indent=1))
    log(format_table(result))
    return result["rows"]


def format_table(result: dict) -> str:
    """The results as a fixed-width table, the 8-GPU model and the soak line."""
    def f(v, spec=".1f"):
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)

    lines = [(f"{'tool':<18} {'gpus':>4} {'fast Hz':>8} {'PCIe Hz':>8} {'GPM Hz':>7} "
             f"{'CPU %core':>9} {'NVML ms/sweep':>13} {'RSS MB':>7}  note")]
    for r in result["rows"]:
        lines.append(f"{r['tool']:<18} {r['gpus']:>4} {f(r.get('fast_hz')):>8} "
                     f"{f(r.get('pcie_hz')):>8} {f(r.get('gpm_hz')):>7} "
                     f"{f(r.get('cpu_pct_one_core'), '.2f'):>9} "
                     f"{f(r.get('nvml_ms_per_sweep'), '.3f'):>13} {f(r.get('rss_mb')):>7}  "
                     f"{r.get('note', '')}")
    m = result["model_8_gpus"]
    lines.append(f"model, {m['gpus']} GPUs: {m['per_gpu_sweep_us']:.0f} us per GPU per sweep "
                 f"({m['python_us_per_gpu_sweep']:.0f} us of it Python) -> sweep "
                 f"{m['sweep_ms']:.2f} ms, max {m['max_hz']:.0f} Hz; CPU at "
                 f"{m['target_hz']:g} Hz: {m['cpu_pct_at_target_hz']:.2f} % of one core")
    if "soak" in result:
        s = result["soak"]
        lines.append(f"soak {s['seconds']:g} s: RSS first {s['rss_first_mb']:.1f} MB, last "
                     f"{s['rss_last_mb']:.1f} MB, max {s['rss_max_mb']:.1f} MB; CPU "
                     f"{s['cpu_pct_one_core']:.2f} %; fast {s['fast_hz']:.1f} Hz, GPM "
                     f"{s['gpm_hz']:.1f} Hz")
    return "\n".join(lines)
