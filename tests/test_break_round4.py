"""Break-it, fourth round (a hostile tester on the refactored CLI and dashboard): what it broke,
each pinned by a test that fails on the code it broke."""

from __future__ import annotations

import json

from tealeaves.app.cli import main
from tealeaves.data import bundled_trace_path
from tealeaves.data.store import SampleStore


def _report(tmp_path, name: str, *argv) -> dict:
    out = tmp_path / f"{name}.json"
    assert main(["report", *map(str, argv), "--format", "json", "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_importing_a_tealeaves_parquet_keeps_its_device_facts(tmp_path, capsys):
    """``import`` of a tealeaves Parquet stored no device row (``collect --replay`` of the same
    file did): power read without a power limit, GPU names null, other verdicts than
    ``report --trace`` of the same file."""
    trace = bundled_trace_path()
    store = tmp_path / "s.db"
    assert main(["import", str(trace), "--store", str(store)]) == 0
    with SampleStore(store, readonly=True) as s:
        dev = s.devices()
    assert len(dev) >= 1 and dev["power_limit_w"].notna().all() and dev["name"].notna().all()
    by_store = _report(tmp_path, "store", "--store", store)
    by_trace = _report(tmp_path, "trace", "--trace", trace)
    assert by_store["summary"] == by_trace["summary"]
    assert by_store["gpus"] == by_trace["gpus"]
    assert "no power limit" not in by_store["summary"]["inputs"]["text"]
    capsys.readouterr()
