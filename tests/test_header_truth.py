"""The live header never shows a phase pill the newest window's shares do not carry (issue
35: "DECODE · 0 % sure · mixed: idle 65 % · decode 28 %"): a split window is MIXED, with the
shares and the label the trees gave under it."""

from __future__ import annotations

import pytest

from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.header_panel import header_cells
from tealeaves.app.figures import header as F
from tealeaves.classifier import classify_samples
from tealeaves.data import bundled_trace_path
from tealeaves.data.traces import read_trace


def _text(node) -> str:
    if isinstance(node, str):
        return node
    kids = getattr(node, "children", None)
    if kids is None:
        return ""
    if isinstance(kids, (list, tuple)):
        return "".join(_text(k) for k in kids)
    return _text(kids)


@pytest.fixture(scope="module")
def windows():
    tr = read_trace(bundled_trace_path())
    return classify_samples(tr.samples, tr.devices, window_s=0.5)


def test_a_split_newest_window_is_mixed_in_the_header_not_a_phase_pill(windows):
    mixed = windows.index[windows["verdict"].astype(str).str.startswith("mixed")]
    assert len(mixed), "the bundled trace has split windows"
    upto = windows.loc[:mixed[0]]
    s = F.header_summary(upto)
    cell = _text(next(c for c in header_cells(s) if c.id == ids.PHASE))
    assert cell.startswith("PhaseMIXED"), cell
    assert s.verdict in cell and f"labelled {s.phase}" in cell, cell
    # a window one phase holds keeps its pill
    whole = windows.index[~windows["verdict"].astype(str).str.startswith(("mixed", "cannot"))]
    s = F.header_summary(windows.loc[:whole[-1]])
    cell = _text(next(c for c in header_cells(s) if c.id == ids.PHASE))
    assert cell.startswith(f"Phase{s.phase.upper()}"), cell
