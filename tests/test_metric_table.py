"""The metric table (``data.metrics``) is the one source of metric names (issue 20, point 6):
the schema's columns, the exporter's gauges, the Prometheus reader's names, the importers'
column maps and the NVML collector's ids are all read from it, no module keeps its own copy,
and every name is unique."""

from __future__ import annotations

import ast
import math
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from tealeaves.app import exporter
from tealeaves.collectors import nvml, nvml_shim, prometheus
from tealeaves.data import importers, metrics, schema
from tealeaves.data.metrics import METRICS

ROOT = Path(__file__).resolve().parents[1]


def _unique(names) -> None:
    names = list(names)
    dup = [n for n, k in Counter(names).items() if k > 1]
    assert not dup, f"named twice: {dup}"


def test_names_and_ids_are_unique_per_source():
    _unique(m.name for m in METRICS)
    _unique(m.prometheus.name for m in METRICS)
    _unique(m.prometheus.help for m in METRICS)
    _unique(m.dcgm.name for m in METRICS if m.dcgm)
    _unique(m.dcgm.id for m in METRICS if m.dcgm)
    _unique(m.dcgmi for m in METRICS if m.dcgmi)
    _unique(m.nvml_gpm.id for m in METRICS if m.nvml_gpm)
    _unique(m.nvml_field.id for m in METRICS if m.nvml_field)
    _unique(s.name for m in METRICS for s in m.smi_dmon)
    _unique(s.name for m in METRICS for s in m.smi_query)
    for m in METRICS:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", m.name), m.name
        assert re.fullmatch(r"tealeaves_[a-z0-9_]+", m.prometheus.name), m.prometheus.name
        assert m.prometheus.scale > 0 and m.unit in schema.UNIT_HIGH, m.name
        if m.dcgm:
            assert m.dcgm.name.startswith("DCGM_FI_") and m.dcgm.id > 0, m.name
        if m.dcgmi:
            assert m.dcgm is not None, f"{m.name}: a dcgmi name needs its DCGM field"
        # nvidia-smi prints every unit but the temperature's ("60", published query CSVs)
        assert all(s.unit or s.name == "temperature.gpu" for s in m.smi_query), m.name


def test_the_schema_is_the_table():
    assert schema.METRICS is METRICS and schema.Metric is metrics.Metric
    assert schema.METRIC_NAMES == tuple(m.name for m in METRICS)
    assert schema.COLUMNS == schema.ID_COLUMNS + schema.METRIC_NAMES
    assert schema.FIELD_LIMITS == {m.name: (0.0, schema.UNIT_HIGH[m.unit]) for m in METRICS}
    byte_scales = {s.scale for m in METRICS
                   for s in (m.dcgm, m.nvml_gpm, *m.smi_dmon, *m.smi_query)
                   if s is not None and s.scale > 1000}
    assert byte_scales <= set(schema.RAW_FACTORS)  # a blank scaled to bytes is still a blank


def test_every_exporter_gauge_comes_from_the_table(tmp_path):
    assert exporter.GPU_GAUGES == tuple(
        (m.name, m.prometheus.name, m.prometheus.scale, m.prometheus.help) for m in METRICS)
    # and a scrape publishes exactly those per-GPU gauges, plus the exporter's own
    from tealeaves.classifier.rules import RulePhaseLabeller
    from tealeaves.data import bundled_trace_path
    from tealeaves.data.store import SampleStore
    from tealeaves.data.traces import read_trace

    tr = read_trace(bundled_trace_path())
    s = tr.samples[tr.samples["timestamp"] <= tr.samples["timestamp"].min() + 5].copy()
    s["timestamp"] += math.floor((time.time() - s["timestamp"].max()) / 0.5) * 0.5
    with SampleStore(tmp_path / "s.db") as store:
        store.put_devices(tr.devices)
        store.append(s)
        text = exporter.render(exporter.TealeavesCollector(
            store, window_s=0.5, hostname="n", labeller=RulePhaseLabeller()))
    per_gpu = {m.group(1) for m in
               re.finditer(r"^(\w+)\{[^}]*\bgpu=\"\d+\"", text, re.MULTILINE)}
    own = {"tealeaves_gpu_load_ratio", "tealeaves_gpu_hot", "tealeaves_imbalanced_seconds_total"}
    assert per_gpu - own == {m.prometheus.name for m in METRICS}
    for m in METRICS:
        assert f"# HELP {m.prometheus.name} {m.prometheus.help}\n" in text


def test_the_prometheus_reader_asks_for_the_table_names(monkeypatch):
    assert prometheus.TEALEAVES_METRICS == {
        m.prometheus.name: (m.name, 1.0 / m.prometheus.scale) for m in METRICS}
    assert prometheus.DCGM_METRICS == {m.dcgm.name: (m.name, m.dcgm.scale)
                                       for m in METRICS if m.dcgm}
    for m in METRICS:  # what the exporter scales the reader scales back, exactly
        assert m.prometheus.scale * (1.0 / m.prometheus.scale) == 1.0
    asked = []
    reader = prometheus.PrometheusReader("http://127.0.0.1:1")
    monkeypatch.setattr(reader, "_range", lambda metric, *a: asked.append(metric) or [])
    reader.samples(0.0, 10.0)
    assert asked == ([m.prometheus.name for m in METRICS]
                     + [m.dcgm.name for m in METRICS if m.dcgm])


def test_the_importers_column_maps_are_the_table():
    assert importers.DCGM_METRICS == {m.dcgm.name: (m.name, m.dcgm.scale)
                                      for m in METRICS if m.dcgm}
    assert importers.DCGMI_FIELDS == {m.dcgmi: (m.name, m.dcgm.scale)
                                      for m in METRICS if m.dcgmi}
    assert importers.DMON_COLUMNS == {s.name: (m.name, s.scale)
                                      for m in METRICS for s in m.smi_dmon}
    assert importers.QUERY_COLUMNS == {s.name: (m.name, s.scale, s.unit, i)
                                       for m in METRICS for i, s in enumerate(m.smi_query)}
    # a dcgm-exporter line of every DCGM field lands in its column at its scale
    text = "".join(f'{m.dcgm.name}{{gpu="0",UUID="u"}} 0.5\n' for m in METRICS if m.dcgm)
    row = importers.import_text(text, "dcgm_exporter", start_time=1.7e9).samples.iloc[0]
    for m in METRICS:
        assert row[m.name] == (0.5 * m.dcgm.scale if m.dcgm else pytest.approx(math.nan,
                                                                               nan_ok=True))


def test_the_nvml_collector_reads_its_ids_from_the_table():
    gpm = sorted((m for m in METRICS if m.nvml_gpm), key=lambda m: m.nvml_gpm.id)
    assert nvml_shim.GPM_METRICS == {m.name: m.nvml_gpm.id for m in gpm}
    assert nvml_shim.GPM_SCALE == {m.name: m.nvml_gpm.scale for m in gpm
                                   if m.nvml_gpm.scale != 1.0}
    fields = {m.name: m.nvml_field.id for m in METRICS if m.nvml_field}
    assert dict(zip(nvml._PCIE_COLS, nvml._PCIE_IDS, strict=True)) == fields
    assert (nvml_shim.FI_PCIE_TX_BYTES, nvml_shim.FI_PCIE_RX_BYTES) == (
        fields["pcie_tx_bytes_per_s"], fields["pcie_rx_bytes_per_s"])


def _constants(path: Path) -> set[str]:
    """String constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text(), str(path))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docs}


def test_no_module_keeps_its_own_copy_of_the_names():
    """Outside ``data/metrics.py`` no code names a metric's exported, DCGM, dcgmi or
    ``--query-gpu`` name as a string of its own (docstrings and comments aside)."""
    names = set()
    for m in METRICS:
        names |= {m.prometheus.name, *(s.name for s in m.smi_query)}
        if m.dcgm:
            names |= {m.dcgm.name, *([m.dcgmi] if m.dcgmi else [])}
    found = {}
    for room in ("app", "collectors", "classifier", "data", "kernels_bench"):
        for f in (ROOT / room).rglob("*.py"):
            if f == ROOT / "data" / "metrics.py":
                continue
            hit = names & _constants(f)
            if hit:
                found[str(f.relative_to(ROOT))] = sorted(hit)
    assert not found, f"metric names kept outside data/metrics.py: {found}"
