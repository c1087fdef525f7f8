"""Prometheus exporter: a node's phases and imbalance as metrics (``tealeaves collect
--prometheus-port``).

Each scrape reads the last ``lookback_s`` seconds of samples from the store the collector is
writing, labels their windows with the classifier, and answers with **window aggregates, not
raw samples**:

- per GPU, the means over the newest complete window, in base units with a ``tealeaves_``
  prefix: ``tealeaves_sm_active_ratio`` (0-1) ... ``tealeaves_pcie_tx_bytes_per_second``,
  ``tealeaves_power_watts``, ``tealeaves_sm_clock_hertz``, ``tealeaves_gpu_load_ratio``;
  and ``tealeaves_gpu_hot``: 1 when the GPU is in the newest window's **hot set** (every GPU
  whose work exceeds the fair share in a flagged decode window: with GPUs 1, 3, 5, 7 at 18 %
  of the work each against 7 %, all four read 1), else 0; ``sum(tealeaves_gpu_hot)`` counts
  the hot GPUs, ``tealeaves_gpu_hot == 1`` names them;
- per node, the current phase as a state set (``tealeaves_phase{tealeaves_phase="decode"} 1``),
  beside it the newest window's share of time in each phase
  (``tealeaves_phase_share{phase="decode"} 0.55``, ``"prefill"`` 0.40, ``"idle"`` 0.05: a
  window that holds a prefill between decode steps is not all decode), its confidence, ``tealeaves_imbalance_ratio``, ``tealeaves_balancedness``,
  ``tealeaves_straggler_tax`` (ratio), ``tealeaves_hot_gpu`` (index of the busiest GPU of the
  hot set; NaN when none), ``tealeaves_hot_gpus`` (size of the hot set, 0 when none),
  ``tealeaves_hot_share_ratio`` / ``tealeaves_cold_share_ratio`` (mean share of the summed
  work held by a hot GPU / by another GPU, 0-1; NaN when none) and the newest window's end
  (``tealeaves_window_end_timestamp_seconds``);
- counters that any scrape interval up to ``MAX_LOOKBACK_S`` can be read from (each scrape
  labels everything since the previous one): ``tealeaves_phase_seconds_total{phase}`` (time
  labelled in each phase) and ``tealeaves_imbalanced_seconds_total{gpu}`` (time the GPU was in
  the hot set of a flagged window); when the newest
  sample is older than ``STALE_S`` (a stalled collector) the current-value gauges are left out,
  so Prometheus marks them stale instead of repeating the last window;
- the collector's health: sweeps, missed deadlines, dropped samples, store errors, GPUs
  offline, the sweep rate; how many (GPU, metric) pairs the GPUs never answer
  (``tealeaves_collector_metrics_unsupported``) and how many answer but fail some reads
  (``tealeaves_collector_metrics_intermittent``), and for each pair that failed any read its
  reads and failed reads (``tealeaves_collector_metric_reads_total{gpu,metric}``,
  ``tealeaves_collector_metric_read_failures_total{gpu,metric}``: GPM ``dram_active`` on an
  H200 reads 1 failure of 1344, intermittent, not unsupported).

Labels reuse dcgm-exporter's keys (``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname``,
and ``GPU_I_ID`` for a MIG instance: its parent's index in ``gpu``, empty on a whole GPU) so
PromQL joins tealeaves' series with ``DCGM_FI_*`` ones.  Missing readings are NaN, never 0.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pandas as pd
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    StateSetMetricFamily,
)
from prometheus_client.registry import Collector, CollectorRegistry

from tealeaves.classifier.rules import PHASE_ORDER
from tealeaves.classifier.summary import window_hot_sets
from tealeaves.classifier.windows import DEFAULT_WINDOW_S
from tealeaves.collectors.health import intermittent, split_key
from tealeaves.data.metrics import exported_gauges
from tealeaves.data.schema import mig_parent

if TYPE_CHECKING:
    from tealeaves.collectors.health import CollectorHealth

#: Longest stretch classified per scrape (s): counters lose nothing at scrape intervals up to
#: this long.
MAX_LOOKBACK_S = 300.0
#: Newest sample older than this (s): the current-value gauges are left out of the scrape.
STALE_S = 10.0
#: Sample column -> (metric name, scale to base units, help): the metric table's
#: ``prometheus`` entries (``data.metrics``), one gauge per metric column, in column order.
GPU_GAUGES: tuple[tuple[str, str, float, str], ...] = exported_gauges()
GPU_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname", "GPU_I_ID")


def _num(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


class TealeavesCollector(Collector):
    """A ``prometheus_client`` collector answering each scrape from the store.

    Args:
        store: the ``SampleStore`` the collector writes (read here, from the scrape thread).
        health: a callable returning the collector's health record
            (``collectors.health.CollectorHealth``) or None.
        window_s: classifier window, s.
        lookback_s: seconds of samples classified per scrape (context for the labeller).
        hostname: the ``Hostname`` label when samples carry none.
        labeller: phase labeller (default: the shipped model, rules as fallback).
    """

    def __init__(self, store, health: Callable[[], CollectorHealth | None] | None = None,
                 window_s: float = DEFAULT_WINDOW_S, lookback_s: float = 6.0,
                 hostname: str | None = None, labeller=None) -> None:
        self.store = store
        self.health = health or (lambda: None)
        self.window_s = float(window_s)
        self.lookback_s = float(lookback_s)
        self.hostname = hostname
        self.labeller = labeller
        self._lock = threading.Lock()
        self._counted_end = -math.inf  # windows ending at or before this are counted
        self._phase_s: dict[str, float] = dict.fromkeys(PHASE_ORDER, 0.0)
        self._hot_s: dict[tuple, float] = {}
        self._started = time.time()
        self._last_scrape: float | None = None
        self._devices: pd.DataFrame | None = None

    # -- reading -------------------------------------------------------------------------
    def _windows(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        from tealeaves.classifier import classify_samples

        span = self.store.time_span()
        if span is None:
            return pd.DataFrame(), pd.DataFrame()
        # back to the previous scrape (counters miss no window), at least lookback_s of
        # context, at most MAX_LOOKBACK_S
        now = time.time()
        since = self.lookback_s if self._last_scrape is None else now - self._last_scrape + 2.0
        self._last_scrape = now
        samples = self.store.read_range(
            span[1] - min(MAX_LOOKBACK_S, max(self.lookback_s, since)), None)
        if samples.empty:
            return samples, pd.DataFrame()
        if self._devices is None or self._devices.empty:
            self._devices = self.store.devices()
        windows = classify_samples(samples, self._devices if len(self._devices) else None,
                                   window_s=self.window_s, labeller=self.labeller)
        newest = float(samples["timestamp"].max())
        complete = windows[windows["end"] <= newest + 1e-9] if len(windows) else windows
        return samples, complete

    def _labels(self, samples: pd.DataFrame) -> dict[int, list[str]]:
        dev = self._devices if self._devices is not None else pd.DataFrame()
        names = {}
        if len(dev) and "gpu" in dev:
            for r in dev.dropna(subset=["gpu"]).itertuples():
                names[int(r.gpu)] = (str(getattr(r, "uuid", "") or ""),
                                     str(getattr(r, "name", "") or ""))
        out = {}
        for g, grp in samples.groupby("gpu"):
            g = int(g)
            host = self.hostname or str(grp["host"].iloc[-1] or "")
            uuid, name = names.get(g, (str(grp["uuid"].iloc[-1] or ""), ""))
            # a MIG instance as dcgm-exporter labels it: its GPU's index, GPU_I_ID its id
            # (empty for a whole GPU, which Prometheus stores as no label)
            parts = mig_parent(g)
            gpu, inst = (str(g), "") if parts is None else (
                "" if parts[0] is None else str(parts[0]), str(parts[1]))
            out[g] = [gpu, uuid, f"nvidia{gpu}", name, host, inst]
        return out

    def _node_host(self, samples: pd.DataFrame) -> str:
        if self.hostname:
            return self.hostname
        if len(samples) and "host" in samples:
            return str(samples["host"].iloc[-1] or "")
        return ""

    # -- the scrape ----------------------------------------------------------------------
    def collect(self):
        """Metric families for one scrape (see the module docstring)."""
        with self._lock:
            yield from self._collect()

    def _collect(self):
        try:
            samples, windows = self._windows()
        except Exception:  # noqa: BLE001 - a store hiccup must not break the scrape
            samples, windows = pd.DataFrame(), pd.DataFrame()
        yield from self._health_families()
        host = self._node_host(samples)
        if len(windows) == 0:
            return
        self._count(windows, host)
        yield from self._counter_families(host, self._labels(samples))
        if time.time() - float(samples["timestamp"].max()) > STALE_S:
            return  # a stalled collector: no current values (Prometheus marks them stale)
        last = windows.iloc[-1]
        t0, t1 = float(last["start"]), float(last["end"])
        in_win = samples[(samples["timestamp"] >= t0) & (samples["timestamp"] < t1)]
        labels = self._labels(samples)
        for col, name, scale, doc in GPU_GAUGES:
            fam = GaugeMetricFamily(name, doc, labels=list(GPU_LABELS))
            means = in_win.groupby("gpu")[col].mean() if col in in_win else pd.Series(dtype=float)
            for g, lab in sorted(labels.items()):
                fam.add_metric(lab, _num(means.get(g, math.nan)) * scale)
            yield fam
        load = GaugeMetricFamily("tealeaves_gpu_load_ratio",
                                 "The classifier's load of the GPU (SM active, else utilization), "
                                 "newest window", labels=list(GPU_LABELS))
        for g, lab in sorted(labels.items()):
            load.add_metric(lab, _num(last.get(f"load_g{g}", math.nan)) / 100.0)
        yield load
        hot_set = window_hot_sets(windows.iloc[-1:])[0]
        hot = GaugeMetricFamily("tealeaves_gpu_hot",
                                "1 when the GPU is in the hot set of the newest window (its "
                                "work over the fair share in a flagged decode window), else 0",
                                labels=list(GPU_LABELS))
        for g, lab in sorted(labels.items()):
            hot.add_metric(lab, 1.0 if g in hot_set else 0.0)
        yield hot
        node = ["Hostname"]
        phase = str(last["phase"])
        yield _state_set(host, phase)
        yield _share_gauge(host, last)
        for name, col, doc, scale in (
                ("tealeaves_phase_confidence", "confidence", "Labeller's confidence in it", 1),
                ("tealeaves_imbalance_ratio", "imbalance_ratio",
                 "Max / mean GPU load, newest window (NaN when idle or one GPU)", 1),
                ("tealeaves_balancedness", "balancedness",
                 "Mean / max GPU load, newest window (1 = even; NaN when idle or one GPU)", 1),
                ("tealeaves_straggler_tax", "straggler_tax",
                 ("1 - mean/max of the GPUs' busy time: share of GPU-time waiting for the slowest "
                 "rank, newest window (NaN when idle or one GPU)"), 1),
                ("tealeaves_hot_gpu", "hot_gpu",
                 ("Index of the busiest GPU of the newest window's hot set (NaN when none; "
                  "every hot GPU: tealeaves_gpu_hot)"), 1),
                ("tealeaves_hot_share_ratio", "hot_share",
                 ("Mean share of the summed work held by a GPU of the hot set, newest window "
                  "(NaN when none)"), 0.01),
                ("tealeaves_cold_share_ratio", "cold_share",
                 ("Mean share of the summed work held by a GPU outside the hot set, newest "
                  "window (NaN when none)"), 0.01),
                ("tealeaves_window_end_timestamp_seconds", "end",
                 "End of the newest complete window (UTC epoch s)", 1)):
            fam = GaugeMetricFamily(name, doc, labels=node)
            fam.add_metric([host], _num(last.get(col, math.nan)) * scale)
            yield fam
        size = GaugeMetricFamily("tealeaves_hot_gpus", "GPUs in the hot set of the newest "
                                 "window (0 when none is hot)", labels=node)
        size.add_metric([host], float(len(hot_set)))
        yield size

    def _counter_families(self, host: str, labels: dict):
        ph = CounterMetricFamily("tealeaves_phase_seconds", "Seconds labelled in each phase "
                                 "since the exporter started", labels=["Hostname", "phase"])
        for p, v in self._phase_s.items():
            ph.add_metric([host, p], v)
        yield ph
        hot = CounterMetricFamily("tealeaves_imbalanced_seconds", "Seconds each GPU was flagged "
                                  "hot in an imbalanced decode window", labels=list(GPU_LABELS))
        for g, lab in sorted(labels.items()):
            hot.add_metric(lab, self._hot_s.get((host, g), 0.0))
        yield hot

    def _count(self, windows: pd.DataFrame, host: str) -> None:
        """Add the windows completed since the last scrape to the counters (the first
        scrape counts the newest window only; each scrape reads back to the previous one, so
        nothing is lost at scrape intervals up to ``MAX_LOOKBACK_S``)."""
        new = windows[windows["end"] > self._counted_end + 1e-9]
        if math.isinf(self._counted_end):
            new = new.tail(1)
        for p, hot_set in zip(new["phase"].astype(str), window_hot_sets(new), strict=True):
            if p in PHASE_ORDER:  # a window that cannot be told is no phase's time
                self._phase_s[p] = self._phase_s.get(p, 0.0) + self.window_s
            for g in hot_set:
                key = (host, int(g))
                self._hot_s[key] = self._hot_s.get(key, 0.0) + self.window_s
        if len(new):
            self._counted_end = float(new["end"].max())

    def _health_families(self):
        h = self.health() or {}
        for name, key, doc in (
                ("tealeaves_collector_sweeps", "sweeps", "NVML sweeps made"),
                ("tealeaves_collector_missed_deadlines", "missed_deadlines",
                 "Sweeps that started after their deadline"),
                ("tealeaves_collector_dropped_samples", "dropped_samples",
                 "Samples dropped while the store could not be written"),
                ("tealeaves_collector_store_errors", "store_errors", "Failed store writes")):
            fam = CounterMetricFamily(name, doc)
            fam.add_metric([], float(h.get(key, 0) or 0))
            yield fam
        elapsed = max(time.time() - self._started, 1e-9)
        rate = GaugeMetricFamily("tealeaves_collector_sweeps_per_second",
                                 "Mean sweep rate since the exporter started")
        rate.add_metric([], float(h.get("sweeps", 0) or 0) / elapsed if h else math.nan)
        yield rate
        off = GaugeMetricFamily("tealeaves_collector_gpus_offline", "GPUs not answering NVML")
        off.add_metric([], float(len(h.get("offline", ()) or ())) if h else math.nan)
        yield off
        unsupported = set(h.get("unsupported", ()) or ())
        flaky = intermittent(h) if h else {}
        for name, n, doc in (
                ("tealeaves_collector_metrics_unsupported", len(unsupported),
                 "(GPU, metric) pairs the GPU has never answered"),
                ("tealeaves_collector_metrics_intermittent", len(flaky),
                 "(GPU, metric) pairs that answered but failed some reads")):
            fam = GaugeMetricFamily(name, doc)
            fam.add_metric([], float(n) if h else math.nan)
            yield fam
        # failures first, then attempts (the collector counts an attempt before its failure)
        failed = [(k, c[1], c[0]) for k, c in sorted(dict(h.get("reads", {}) or {}).items())
                  if c[1]]
        reads = CounterMetricFamily("tealeaves_collector_metric_reads",
                                    "Reads of a (GPU, metric) pair that failed at least once",
                                    labels=["gpu", "metric"])
        fails = CounterMetricFamily("tealeaves_collector_metric_read_failures",
                                    "Failed reads (NotSupported, or NaN from GPM) of a "
                                    "(GPU, metric) pair", labels=["gpu", "metric"])
        for key, f, a in failed:
            labels = list(split_key(key))
            reads.add_metric(labels, float(a))
            fails.add_metric(labels, float(f))
        yield reads
        yield fails


def _state_set(host: str, phase: str) -> StateSetMetricFamily:
    fam = StateSetMetricFamily("tealeaves_phase", "Phase of the newest complete window "
                               "(idle, prefill, decode)", labels=["Hostname"])
    fam.add_metric([host], {p: p == phase for p in PHASE_ORDER})
    return fam


def _share_gauge(host: str, last: pd.Series) -> GaugeMetricFamily:
    """``tealeaves_phase_share{Hostname, phase}``: the newest window's share of time in each
    phase (its ``share_<phase>`` columns, 0-1; NaN where the window carries none)."""
    fam = GaugeMetricFamily("tealeaves_phase_share", "Share of the newest complete window's "
                            "time in each phase (0-1, summing to 1; the share model's "
                            "calibrated shares, the labeller's scores where none ships)",
                            labels=["Hostname", "phase"])
    for p in PHASE_ORDER:
        fam.add_metric([host, p], _num(last.get(f"share_{p}", math.nan)))
    return fam


def render(collector: Collector) -> str:
    """One scrape of ``collector`` as Prometheus' text exposition format (what ``/metrics``
    answers; for tests and a quick look without a server)."""
    from prometheus_client import generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry).decode()


def serve(store, port: int, host: str = "127.0.0.1", health=None, window_s: float = DEFAULT_WINDOW_S,
          hostname: str | None = None):
    """Serve ``/metrics`` for ``store`` on ``host:port`` from a daemon thread (its own
    registry: no process metrics).  Returns ``(server, thread)`` (``server.shutdown()``
    stops it).

    Raises:
        OSError: the port cannot be bound.
    """
    from prometheus_client import start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(TealeavesCollector(store, health, window_s=window_s, hostname=hostname))
    return start_http_server(port, addr=host, registry=registry)


__all__ = ["GPU_GAUGES", "GPU_LABELS", "TealeavesCollector", "render", "serve"]
