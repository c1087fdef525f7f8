"""The Prometheus exporter's phase shares (issue 34): one scrape of a store, no server."""

from __future__ import annotations

import math
import re
import time

import pytest

from tealeaves.app import exporter
from tealeaves.classifier import classify_samples
from tealeaves.data import bundled_trace_path
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import read_trace


def test_the_newest_windows_phase_shares_are_a_gauge_beside_the_phase(tmp_path):
    tr = read_trace(bundled_trace_path())
    s = tr.samples[tr.samples["timestamp"] <= tr.samples["timestamp"].min() + 20].copy()
    s["timestamp"] += math.floor((time.time() - s["timestamp"].max()) / 0.5) * 0.5  # now
    with SampleStore(tmp_path / "s.db") as store:
        store.put_devices(tr.devices)
        store.append(s)
        text = exporter.render(exporter.TealeavesCollector(store, window_s=0.5,
                                                           hostname="node-a"))
        lookback = store.read_range(s["timestamp"].max() - 6.0, None)
    got = {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^tealeaves_phase_share\{Hostname="node-a",phase="(\w+)"\} (\S+)$', text,
        re.MULTILINE)}
    assert set(got) == {"idle", "prefill", "decode"}
    assert sum(got.values()) == pytest.approx(1.0, abs=1e-6)
    assert "# TYPE tealeaves_phase_share gauge" in text
    # the newest complete window's shares, as the classifier gives them over the same samples
    w = classify_samples(lookback, tr.devices, window_s=0.5)
    last = w[w["end"] <= float(lookback["timestamp"].max()) + 1e-9].iloc[-1]
    for p, v in got.items():
        assert v == pytest.approx(float(last[f"share_{p}"]), abs=1e-6)
    # beside the phase: the state set names the same window's phase
    on = re.search(r'^tealeaves_phase\{Hostname="node-a",tealeaves_phase="(\w+)"\} 1\.0$',
                   text, re.MULTILINE)
    assert on and on.group(1) == last["phase"]
