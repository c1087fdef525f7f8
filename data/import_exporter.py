"""dcgm-exporter's Prometheus text exposition (one scrape or several concatenated) read into
sample records: ``DCGM_METRICS`` (from the metric table), one series line at a time."""

from __future__ import annotations

import math

from tealeaves.data.import_common import (
    _RE_NUMBER,
    _anchor,
    _Cycles,
    _gpu_index,
    _lines,
    _scaled,
    _short,
)
from tealeaves.data.metrics import dcgm_fields
from tealeaves.data.schema import mig_entity

#: DCGM field (dcgm-exporter metric name) -> (schema column, factor), from the metric table
#: (``data.metrics``, the rows' ``dcgm``).
DCGM_METRICS: dict[str, tuple[str, float]] = dcgm_fields()
#: dcgm-exporter's Kubernetes labels: a series per pod that uses the GPU.
_POD_LABELS = ("pod", "namespace", "container")
_PROM_SPECIAL = frozenset({"NaN", "+Inf", "-Inf", "Inf"})
_TS_MIN, _TS_MAX = 946684800.0, 4102444800.0  # 2000-01-01 .. 2100-01-01


#: dcgm-exporter series read as a device fact (the newest value per GPU), not a sample:
#: ``DCGM_FI_DEV_POWER_MGMT_LIMIT`` is the power limit (W) ``power_frac`` divides by.
DCGM_FACTS: dict[str, str] = {"DCGM_FI_DEV_POWER_MGMT_LIMIT": "power_limit_w",
                              "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": "power_limit_w"}


def _facts_of(facts: dict, key: tuple, uuid: str, labels: dict, name: str,
              value: float) -> None:
    """Add to ``facts[key]`` what one series line of a GPU says of it: its ``modelName``
    label as ``name``, a ``DCGM_FACTS`` series' positive value."""
    model = (labels.get("modelName") or "").strip()
    if model:
        facts.setdefault(key, {"uuid": uuid})["name"] = model
    if name in DCGM_FACTS and math.isfinite(value) and value > 0:
        facts.setdefault(key, {"uuid": uuid})[DCGM_FACTS[name]] = value


def _parse_exporter(text: str, *, host: str, start: float | None, end: float, interval: float,
                    not_read: set[str] | None = None, facts: dict | None = None
                    ) -> tuple[list[dict], int, list[tuple[int, str]]]:
    """dcgm-exporter ``text`` as sample records: ``(records, series lines accepted, skipped
    lines)``; series outside ``DCGM_METRICS`` and ``DCGM_FACTS`` go to ``not_read``, device
    facts to ``facts`` (``_facts_of``: ``{(host, gpu): {"uuid", "name", "power_limit_w"}}``).
    Each line goes through prometheus_client's parser on its own, so a mangled line costs
    only itself; HELP/TYPE are not needed (the file may start mid-family)."""
    from prometheus_client.parser import text_string_to_metric_families

    skipped: list[tuple[int, str]] = []
    rows: dict[tuple, dict] = {}
    scrape = _Cycles()
    accepted = 0
    for n, line in _lines(text):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        try:
            samples = [smp for fam in text_string_to_metric_families(s + "\n")
                       for smp in fam.samples]
        except Exception as exc:  # noqa: BLE001 - the library raises assorted types
            skipped.append((n, f"not a Prometheus sample ({type(exc).__name__}): {_short(s)}"))
            continue
        if len(samples) != 1:
            skipped.append((n, f"not one Prometheus sample: {_short(s)}"))
            continue
        smp = samples[0]
        labels = smp.labels
        tail = s[s.rfind("}") + 1:] if "}" in s else s[len(smp.name):]
        toks = tail.split()
        if not toks or not all(_RE_NUMBER.match(t.lstrip("-")) or t in _PROM_SPECIAL
                               for t in toks[:2]):
            skipped.append((n, f"bad Prometheus value or timestamp: {_short(s)}"))
            continue
        try:
            if "gpu" not in labels:
                raise ValueError("no gpu label")
            gpu = _gpu_index(labels["gpu"])
            mig = labels.get("GPU_I_ID", "").strip()
            if mig:  # a MIG GPU instance: its own entity under GPU ``gpu``
                gpu = mig_entity(gpu, _gpu_index(mig, "GPU_I_ID"))
            value = float(smp.value)
            if math.isinf(value) or value < 0:
                raise ValueError(f"value {smp.value!r} out of range")
            ts = smp.timestamp
            if ts is not None:
                ts = float(ts)
                if not _TS_MIN <= ts <= _TS_MAX:
                    raise ValueError(f"implausible timestamp {ts!r}")
            target = DCGM_METRICS.get(smp.name)
            scaled = _scaled(target[0], value, target[1]) if target else None
        except (ValueError, TypeError, OverflowError) as exc:
            skipped.append((n, f"bad sample ({exc}): {_short(s)}"))
            continue
        h = labels.get("Hostname") or labels.get("hostname") or host
        uuid = labels.get("UUID") or labels.get("uuid") or ""
        if mig:
            uuid = f"MIG-{uuid or 'GPU'}/{mig}"
        if ts is None:
            # pods sharing a GPU (MPS, time slicing) each get the GPU's series in one scrape:
            # the same instant, not one instant per pod
            who = tuple(labels.get(k, "") for k in _POD_LABELS)
            key = ("scrape", scrape.place((h, gpu, uuid, smp.name, who)))
        else:
            key = ("ts", ts)
        row = rows.setdefault((key, h, gpu), {"_key": key, "host": h, "gpu": gpu, "uuid": uuid,
                                              "_line": n})
        if uuid and not row["uuid"]:
            row["uuid"] = uuid
        if target:
            row[target[0]] = scaled
        elif smp.name not in DCGM_FACTS and not_read is not None:
            not_read.add(smp.name)
        if facts is not None:
            _facts_of(facts, (h, gpu), uuid, labels, smp.name, value)
        accepted += 1
    return _records(rows.values(), _anchor(start, end, scrape.count, interval), interval), \
        accepted, skipped


def _records(rows, t0: float, interval: float) -> list[dict]:
    """The series rows as records: a row of a stated time at it, a scrape's row at ``t0`` +
    its scrape number x ``interval`` (and ``_placed``)."""
    records = []
    for row in rows:
        kind, val = row.pop("_key")
        row["timestamp"] = val if kind == "ts" else t0 + val * interval
        if kind != "ts":
            row["_placed"] = True
        records.append(row)
    return records
