"""The collector health record: what every collector counts while it runs.

Each collector (NVML, replay, Prometheus) keeps one ``CollectorHealth`` in its ``health``
attribute, made by ``new_health``; ``collectors.run_to_store`` adds the store-side counts to
the same record, the exporter publishes some of it (``tealeaves_collector_*``), and
``health_summary`` turns it into the plain numbers the dashboard's status line and ``tealeaves
collect --stats-json`` show (``HealthSummary``).

Each metric a GPU is asked for has its own pair of counts (``reads``: attempts, failures), so a
metric the GPU never answers (``unsupported``) is told apart from one that fails now and then
(``intermittent``, with its counts): on H200 GPM's ``dram_active`` comes back NaN in about one
read of a thousand, and one such read must not call it unsupported.

Both are ``TypedDict``: at run time plain dicts (``h["sweeps"]``, ``h.get(...)`` keep
working, JSON takes them as they are), to a type checker every key named and typed.  Counters
only grow (``unsupported`` and ``offline`` are sets that lose an entry when it answers again);
the record is written by the collecting thread and read by others (the exporter's scrape, the
dashboard), so a reader sees each value whole but not all of them at one instant.
"""

# no ``from __future__ import annotations`` here: TypedDict must see ``NotRequired`` itself
# (Python 3.11 does not recognise it inside string annotations)
import math
from collections import deque
from typing import NotRequired, TypedDict

import numpy as np

#: Metric groups an NVML sweep reads, for timing and rates (``tealeaves doctor``, ``tealeaves
#: bench collector``): the fast counters (utilization, memory, power, clock), the PCIe field
#: values, GPM, the driver's sample buffers, the compute-process list.
GROUPS: tuple[str, ...] = ("fast", "pcie", "gpm", "buffers", "processes")

#: How many sweeps' lateness ``CollectorHealth.lateness_s`` keeps (the newest).
LATENESS_KEPT = 4096


class CollectorHealth(TypedDict):
    """A collector's running counts (``new_health`` makes an empty one).

    Keys:
        sweeps: sweeps made.  NVML: one read of every GPU; replay: the most rows one GPU has
            been handed (a sweep split by a batch's edge counts once); Prometheus: successful polls.
        missed_deadlines: sweep deadlines skipped because a sweep started more than one period
            late (NVML only).
        max_lateness_s: largest lateness of a sweep behind its deadline, s.
        lateness_s: lateness of the newest ``LATENESS_KEPT`` sweeps, s (a bounded deque; the
            collector appends, readers copy it with ``list()``).
        unsupported: ``"gpu<i>:<metric>"`` for each GPU and metric (or call group, e.g.
            ``"gpu1:power_samples"``, ``"gpu0:processes"``, ``"gpu0:pcie"``) the GPU has
            never answered: every read failed (NotSupported, or NaN from GPM), or the
            collector does not read it (no GPM); one entry per pair, not per sample.  A metric
            that answered at least once is not here even when some reads failed (see
            ``reads``); one here leaves when it first answers.
        reads: ``{"gpu<i>:<metric>": [attempts, failures]}``, one two-int list per GPU and
            metric (the same keys as ``unsupported``), made when the collector opens and
            only incremented after: attempts are reads that got an answer or a failure (a GPU
            off the bus counts in ``offline``, not here; a GPM read whose counters had not
            advanced counts in ``gpm_empty``), failures those that got NotSupported or NaN.
            ``0 < failures < attempts``: intermittent; ``failures == attempts``: unsupported.
        offline: indices of the GPUs that fell off the bus and are being retried.
        recovered: times an offline GPU answered again.
        nvml_s: seconds spent in NVML calls per group (``GROUPS``), summed over all sweeps.
        calls: NVML calls made per group (``GROUPS``).
        gpm_reads: GPM metric reads (a pair of GPM samples differenced).
        gpm_empty: GPM reads whose counters had not advanced (read again next sweep).
        buffered_rows: rows drained from the driver's power/utilization sample buffers.
        dropped_samples: samples dropped while the store could not be written (oldest first,
            past ``collectors.MAX_BUFFERED_SAMPLES``).
        store_errors: failed store writes (samples, devices, processes, replayed events).
        buffered_for_store: samples waiting in memory for the store right now.
        blank_values: ``{column: n}`` readings that were a source's "no value" code
            (``data.schema.SENTINELS``), stored as NaN.
        out_of_range_values: ``{column: n}`` readings outside ``data.schema.FIELD_LIMITS``,
            stored as NaN.
        source_errors: failed reads of a remote source (Prometheus polls).
        source_last_error: the latest such failure's message, None before any.
        source_last_ok: UTC epoch s of the latest successful remote read, None before any.
        _ok_since_error: the Prometheus collector's own flag (the source answered since its
            last failure: a recovery is reported once); absent elsewhere.
    """

    sweeps: int
    missed_deadlines: int
    max_lateness_s: float
    lateness_s: deque[float]
    unsupported: set[str]
    reads: dict[str, list[int]]
    offline: set[int]
    recovered: int
    nvml_s: dict[str, float]
    calls: dict[str, int]
    gpm_reads: int
    gpm_empty: int
    buffered_rows: int
    dropped_samples: int
    store_errors: int
    buffered_for_store: int
    blank_values: dict[str, int]
    out_of_range_values: dict[str, int]
    source_errors: int
    source_last_error: str | None
    source_last_ok: float | None
    _ok_since_error: NotRequired[bool]


class ReadCounts(TypedDict):
    """One metric's reads in ``HealthSummary.intermittent``.

    Keys:
        failed: reads that failed (NotSupported, or NaN from GPM).
        of: reads made (answered or failed).
    """

    failed: int
    of: int


class HealthSummary(TypedDict):
    """``health_summary``'s JSON-ready view of a ``CollectorHealth``.

    Keys:
        sweeps, missed_deadlines, recovered, gpm_reads, gpm_empty, buffered_rows,
            dropped_samples, buffered_for_store, store_errors, source_errors, source_last_error,
            source_last_ok: as in ``CollectorHealth``.
        lateness_ms_p50, lateness_ms_p99: median and 99th percentile of the kept sweeps'
            lateness, ms (NaN before any sweep).
        lateness_ms_max: largest lateness of any sweep, ms.
        unsupported: ``CollectorHealth.unsupported``, sorted: metrics never answered.
        intermittent: ``{"gpu<i>:<metric>": {"failed": f, "of": n}}`` for each metric that
            answered at least once and failed ``f`` of its ``n`` reads (``ReadCounts``; from
            ``CollectorHealth.reads``); such a metric is not in ``unsupported``.
        offline: ``CollectorHealth.offline``, sorted.
        nvml_ms_per_sweep: ms spent in NVML per group per sweep (``GROUPS``).
        nvml_us_per_call: mean us per NVML call per group (NaN for a group never called).
        blank_values, out_of_range_values: copies of ``CollectorHealth``'s.
        sweeps_per_s: sweeps per second over the elapsed time given (only when given).
    """

    sweeps: int
    missed_deadlines: int
    lateness_ms_p50: float
    lateness_ms_p99: float
    lateness_ms_max: float
    unsupported: list[str]
    intermittent: dict[str, ReadCounts]
    offline: list[int]
    recovered: int
    nvml_ms_per_sweep: dict[str, float]
    nvml_us_per_call: dict[str, float]
    gpm_reads: int
    gpm_empty: int
    buffered_rows: int
    dropped_samples: int
    buffered_for_store: int
    store_errors: int
    blank_values: dict[str, int]
    out_of_range_values: dict[str, int]
    source_errors: int
    source_last_error: str | None
    source_last_ok: float | None
    sweeps_per_s: NotRequired[float]


def new_health() -> CollectorHealth:
    """An empty collector-health record (shared by every collector): every count 0, no
    lateness, nothing unsupported, read or offline, no source error yet."""
    return {"sweeps": 0, "missed_deadlines": 0, "max_lateness_s": 0.0,
            "lateness_s": deque(maxlen=LATENESS_KEPT), "unsupported": set(), "reads": {},
            "offline": set(),
            "recovered": 0, "nvml_s": dict.fromkeys(GROUPS, 0.0),
            "calls": dict.fromkeys(GROUPS, 0), "gpm_reads": 0, "gpm_empty": 0,
            "buffered_rows": 0, "dropped_samples": 0, "store_errors": 0,
            "buffered_for_store": 0, "blank_values": {}, "out_of_range_values": {},
            "source_errors": 0, "source_last_error": None, "source_last_ok": None}


def read_key(gpu: int, metric: str) -> str:
    """The ``"gpu<i>:<metric>"`` key of ``CollectorHealth.unsupported`` and ``reads``."""
    return f"gpu{gpu}:{metric}"


def split_key(key: str) -> tuple[str, str]:
    """``"gpu0:dram_active"`` -> ``("0", "dram_active")`` (the exporter's labels)."""
    gpu, _, metric = key.partition(":")
    return gpu.removeprefix("gpu"), metric


def intermittent(health: CollectorHealth) -> dict[str, ReadCounts]:
    """The metrics of ``health`` that answered at least once and failed some reads:
    ``{"gpu<i>:<metric>": {"failed": f, "of": n}}``, sorted by key.  Safe while the collector
    counts: it counts a read's attempt before its failure and this reads failures first, so
    ``failed <= of`` holds."""
    unsupported = set(health.get("unsupported", ()))
    out: dict[str, ReadCounts] = {}
    for key, counts in sorted(dict(health.get("reads", {})).items()):
        failed = counts[1]
        of = counts[0]
        if failed and failed < of and key not in unsupported:
            out[key] = {"failed": failed, "of": of}
    return out


def intermittent_text(counts: dict[str, ReadCounts]) -> str:
    """``"gpu0:dram_active failed 1 of 1344 reads"`` for each entry, joined by ", "."""
    return ", ".join(f"{k} failed {c['failed']} of {c['of']} reads" for k, c in counts.items())


def health_summary(health: CollectorHealth, elapsed_s: float | None = None) -> HealthSummary:
    """JSON-ready view of a health record: lateness p50/p99/max in ms, NVML ms per sweep.

    Args:
        health: a collector's record (``new_health``); read while the collector may still
            append to it.
        elapsed_s: seconds the collector has run; when given (and not 0) ``sweeps_per_s`` is
            added.

    Returns:
        A ``HealthSummary`` (plain numbers, lists and dicts; NaN where nothing was measured).
    """
    # list() copies the deque in one C call (atomic under the GIL) while the collector appends.
    late = np.asarray(list(health["lateness_s"]), dtype=float)
    sweeps = max(health["sweeps"], 1)
    out: HealthSummary = {
        "sweeps": health["sweeps"],
        "missed_deadlines": health["missed_deadlines"],
        "lateness_ms_p50": float(np.percentile(late, 50) * 1e3) if late.size else math.nan,
        "lateness_ms_p99": float(np.percentile(late, 99) * 1e3) if late.size else math.nan,
        "lateness_ms_max": health["max_lateness_s"] * 1e3,
        "unsupported": sorted(health["unsupported"]),
        "intermittent": intermittent(health),
        "offline": sorted(health["offline"]),
        "recovered": health["recovered"],
        "nvml_ms_per_sweep": {g: v * 1e3 / sweeps for g, v in health["nvml_s"].items()},
        "nvml_us_per_call": {g: (health["nvml_s"][g] / health["calls"][g] * 1e6)
                             if health["calls"][g] else math.nan for g in GROUPS},
        "gpm_reads": health["gpm_reads"],
        "gpm_empty": health["gpm_empty"],
        "buffered_rows": health["buffered_rows"],
        "dropped_samples": health["dropped_samples"],
        "buffered_for_store": health.get("buffered_for_store", 0),
        "store_errors": health["store_errors"],
        "blank_values": dict(health.get("blank_values", {})),
        "out_of_range_values": dict(health.get("out_of_range_values", {})),
        "source_errors": health.get("source_errors", 0),
        "source_last_error": health.get("source_last_error"),
        "source_last_ok": health.get("source_last_ok"),
    }
    if elapsed_s:
        out["sweeps_per_s"] = health["sweeps"] / elapsed_s
    return out


__all__ = ["GROUPS", "LATENESS_KEPT", "CollectorHealth", "HealthSummary", "ReadCounts",
           "health_summary", "intermittent", "intermittent_text", "new_health", "read_key",
           "split_key"]
