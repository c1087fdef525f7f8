"""The hot set in one wording, and no imbalance figures on idle windows (issue 35).

- one function (``classifier.hot_set.describe_hot_set``) says a range's hot set: the set
  (sorted, compact), its work against the rest's, and whether it stays or rotates, naming
  the sets it rotates between; ``classify``, the report (card, verdict, JSON, CSV), the
  ``report`` command's line and the dashboard header all use its words;
- a window under ``imbalance.IDLE_LOAD`` carries no imbalance ratio, balancedness, straggler
  tax or hot set, and a range's figures are means over the same windows (its decode windows
  with load) and say over how many; a range with none says "idle: no imbalance figures".

Inputs: an eight-GPU store built from real two-GPU H200 rows (``test_hot_set.eight_gpus``:
odd GPUs copies of the recording's hot GPU, even ones of its cold GPU), stretched in time by
repeating its decode stretch, with the odd and even GPUs swapped every other copy so the
hot set alternates between 0, 2, 4, 6 and 1, 3, 5, 7; and the bundled two-GPU trace, whose
last eight seconds are idle (0 % load) with one window the labeller calls decode.
"""

from __future__ import annotations

import json
import math
import re

import jsonschema
import numpy as np
import pandas as pd
import pytest
from test_hot_set import WINDOW_S, eight_gpus

from tealeaves.app import figures as F
from tealeaves.app.cli import main
from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.header_panel import header_cells
from tealeaves.app.dashboard.panels import hover_panel
from tealeaves.app.dashboard.server import start_in_thread
from tealeaves.app.report.model import ReportInput, build_report, csv_rows, schema
from tealeaves.app.report.out import report_bytes
from tealeaves.classifier import classify_samples
from tealeaves.classifier.hot_set import describe_hot_set, gpus_text, window_words
from tealeaves.classifier.imbalance import IDLE_LOAD
from tealeaves.classifier.summary import figure_windows, imbalance_summary
from tealeaves.data import bundled_trace_path
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import Trace, read_trace, write_trace

EVEN, ODD = (0, 2, 4, 6), (1, 3, 5, 7)
COPIES = 12  # of the 3-s stretch: 36 s, 72 windows


def rotating_eight(copies: int = COPIES) -> Trace:
    """``eight_gpus`` repeated ``copies`` times end to end (each copy on whole windows), the
    odd and even GPUs swapped in every other copy: the hot set alternates between GPUs 1,
    3, 5, 7 (even copies) and 0, 2, 4, 6 (odd copies)."""
    tr = eight_gpus()
    s = tr.samples
    t0 = float(s["timestamp"].min())
    span = math.ceil((float(s["timestamp"].max()) - t0 + 1e-6) / WINDOW_S) * WINDOW_S
    parts = []
    for k in range(copies):
        p = s.copy()
        p["timestamp"] = p["timestamp"] + k * span
        if "monotonic" in p:
            p["monotonic"] = p["monotonic"] + k * span
        if k % 2:
            p["gpu"] = p["gpu"].to_numpy() ^ 1
            p["uuid"] = [f"GPU-8x-{g}" for g in p["gpu"]]
        parts.append(p)
    samples = pd.concat(parts).sort_values(["timestamp", "gpu"]).reset_index(drop=True)
    return Trace(samples, tr.devices, dict(tr.meta or {}))


@pytest.fixture(scope="module")
def rot() -> Trace:
    return rotating_eight()


@pytest.fixture(scope="module")
def rot_windows(rot):
    return classify_samples(rot.samples, rot.devices, window_s=WINDOW_S)


@pytest.fixture(scope="module")
def rot_path(rot, tmp_path_factory):
    return write_trace(tmp_path_factory.mktemp("rot") / "rot.parquet", rot)


@pytest.fixture(scope="module")
def bundled() -> Trace:
    return read_trace(bundled_trace_path())


@pytest.fixture(scope="module")
def bundled_windows(bundled):
    return classify_samples(bundled.samples, bundled.devices, window_s=WINDOW_S)


def _text(node) -> str:
    """The visible text of a Dash component tree (or list of them)."""
    if node is None:
        return ""
    if isinstance(node, str | int | float):
        return str(node)
    if isinstance(node, list | tuple):
        return "".join(_text(n) for n in node)
    return _text(getattr(node, "children", None))


#: What a rotating eight-GPU range must say: both sets, each with its windows and its work
#: against the rest's.
ROTATION = (r"rotates between GPUs (0, 2, 4, 6|1, 3, 5, 7) \(\d+ windows, 2\.\dx the rest\) "
            r"and GPUs (0, 2, 4, 6|1, 3, 5, 7) \(\d+ windows, 2\.\dx the rest\)")


# -- the one function ----------------------------------------------------------------------


def test_gpus_are_sorted_and_compact():
    assert gpus_text([1, 0]) == "GPUs 0, 1"
    assert gpus_text([6, 0, 4, 2]) == "GPUs 0, 2, 4, 6"
    assert gpus_text([3, 1, 2, 0, 7]) == "GPUs 0-3, 7"
    assert gpus_text([5]) == "GPU 5"
    assert window_words((7, 5, 3, 1), 18.2, 7.1) == \
        "GPUs 1, 3, 5, 7 at 2.6x the rest's work (18 % each vs 7 %)"
    assert window_words((1,), 70.0, 30.0) == "GPU 1 at 2.3x the rest's work (70 % vs 30 %)"


def test_a_set_that_stays_and_one_that_rotates_in_words():
    stays = describe_hot_set([ODD] * 9 + [(1, 3, 5)], [18.0] * 10, [7.0] * 10)
    assert stays.pattern == "stays" and stays.gpus == ODD
    assert stays.text() == ("GPUs 1, 3, 5, 7 at 2.6x the rest's work (18 % each vs 7 %), "
                            "stays: 9 of 10 imbalanced windows")
    # alternating sets are two sets, never eight GPUs counted one by one
    rot = describe_hot_set([ODD, EVEN] * 17 + [ODD, ()], [18.0] * 36, [7.0] * 36)
    assert rot.pattern == "rotates" and rot.changes == 34
    assert rot.text() == ("rotates between GPUs 1, 3, 5, 7 (18 windows, 2.6x the rest) and "
                          "GPUs 0, 2, 4, 6 (17 windows, 2.6x the rest)")
    assert rot.set_words() == "GPUs 0, 2, 4, 6 / GPUs 1, 3, 5, 7"
    many = describe_hot_set([(0,), (1,), (2,), (3,), (3,)])
    assert many.text().endswith(", and 1 other set (1 window)")
    assert describe_hot_set([(), ()]).text() == "none: no imbalanced decode window"


# -- a rotating hot set on every surface ---------------------------------------------------


def test_the_range_says_the_set_rotates_between_two_sets_of_four(rot_windows):
    imb = imbalance_summary(rot_windows)
    assert imb["hot_pattern"] == "rotates"
    assert set(imb["hot_sets"]) == {"0,2,4,6", "1,3,5,7"}
    assert re.fullmatch(ROTATION, imb["hot_text"]), imb["hot_text"]
    for p in imb["hot_story"]["sets"]:
        assert f"{gpus_text(p['gpus'])} ({p['windows']} windows" in imb["hot_text"]


def test_classify_says_it_rotates(rot_path, capsys):
    assert main(["classify", str(rot_path)]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("hot set:"))
    assert re.fullmatch("hot set: " + ROTATION, line), line
    imb = next(ln for ln in out.splitlines() if ln.startswith("imbalance:"))
    assert "over 72 of 72 windows (the decode windows with load)" in imb, imb
    assert main(["classify", str(rot_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["imbalance"]["hot_story"]["pattern"] == "rotates"


def test_report_card_names_the_two_sets_not_eight_gpus(rot, tmp_path, capsys):
    rep = build_report(ReportInput(rot.samples, rot.devices, dict(rot.meta)),
                       window_s=WINDOW_S)
    jsonschema.Draft202012Validator(schema()).validate(json.loads(report_bytes(rep, "json")))
    s = rep.data["summary"]
    assert s["hot_story"]["pattern"] == "rotates"
    assert {tuple(p["gpus"]) for p in s["hot_story"]["sets"]} == {EVEN, ODD}
    assert all(p["times"] == pytest.approx(2.5, abs=0.2) for p in s["hot_story"]["sets"])
    html = report_bytes(rep, "html").decode()
    assert "GPUs 0, 2, 4, 6 / GPUs 1, 3, 5, 7" in html  # the card's value
    assert "GPU 0, GPU 1, GPU 2" not in html  # not every GPU one by one
    assert re.search(ROTATION, html)
    rows = {(r["item"], r["metric"]): r["value"] for r in csv_rows(rep)
            if r["section"] == "summary"}
    assert rows[("0,2,4,6", "hot_story_windows")] and rows[("1,3,5,7", "hot_story_windows")]
    out = tmp_path / "r.json"
    path = write_trace(tmp_path / "rot.parquet", rot)
    assert main(["report", "--trace", str(path), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert re.search("hot set: " + ROTATION, said), said


def test_report_card_of_two_gpus_is_sorted(bundled):
    rep = build_report(ReportInput(bundled.samples, bundled.devices, dict(bundled.meta)),
                       window_s=WINDOW_S)
    html = report_bytes(rep, "html").decode()
    assert "GPU 0 / GPU 1" in html and "GPU 1, GPU 0" not in html


def test_dashboard_header_of_a_range_says_it_rotates(rot_windows):
    t0, t1 = float(rot_windows["start"].min()), float(rot_windows["end"].max())
    s = F.range_summary(rot_windows, t0, t1)
    cell = _text(next(c for c in header_cells(s) if c.id == ids.HOT_GPU))
    assert "rotates: 0246 / 1357" in cell, cell
    assert re.search(ROTATION, cell), cell
    assert "×" not in cell  # no per-GPU counts grouped by window count


def test_live_header_says_it_rotates_over_the_last_windows(rot_windows):
    s = F.header_summary(rot_windows)
    cell = _text(next(c for c in header_cells(s) if c.id == ids.HOT_GPU))
    assert "in the last 20 windows: rotates between GPUs" in cell, cell


def test_live_header_names_the_set_that_stays_when_the_newest_window_has_none(rot_windows):
    """Following live, the newest window not flagged but the last ones flagged with one set:
    the value says the newest window has none, and the line under it names the set that
    stays (was "none" over "stays: 13 of 13 imbalanced windows", naming no GPU)."""
    w = rot_windows.copy()
    # one GPU hot in every flagged window (a set of one: no ``hot_set`` column), and the
    # newest window not flagged
    w = w.drop(columns=[c for c in ("hot_set",) if c in w])
    w.loc[w["imbalanced"].eq(True), "hot_gpu"] = 3.0
    w.loc[w.index[-1], ["hot_gpu", "imbalanced"]] = [np.nan, False]
    s = F.header_summary(w)
    cell = _text(next(c for c in header_cells(s) if c.id == ids.HOT_GPU))
    assert "none in the newest window" in cell, cell
    assert re.search(r"in the last \d+ windows: GPU 3, stays: \d+ of \d+ imbalanced", cell), cell


# -- idle windows carry no figures -----------------------------------------------------------


def test_an_idle_window_has_no_imbalance_figures(bundled_windows):
    w = bundled_windows
    idle = w["load_mean"].to_numpy(dtype=float) < IDLE_LOAD
    assert idle.sum() >= 10  # the trace's idle tail
    for col in ("imbalance_ratio", "balancedness", "straggler_tax", "hot_share"):
        assert w.loc[idle, col].isna().all(), col
    assert (w.loc[idle, "hot_set"] == "").all() and not w.loc[idle, "imbalanced"].any()
    # a window labelled idle carries none either, whatever its load
    labelled_idle = w["phase"] == "idle"
    for col in ("imbalance_ratio", "balancedness", "straggler_tax"):
        assert w.loc[labelled_idle, col].isna().all(), col
    busy = (w["load_mean"] >= 10) & (w["n_gpus"] >= 2) & ~labelled_idle
    assert busy.sum() >= 50
    assert np.isfinite(w.loc[busy, "imbalance_ratio"]).all()  # loaded windows keep theirs


def test_a_mostly_idle_range_says_idle_and_no_figures(bundled_windows):
    w = bundled_windows
    tail = w[w["start"] >= w["end"].max() - 8.5]  # the last 8.5 s: idle, one "decode" window
    assert (tail["phase"] == "decode").any() and (tail["load_mean"] < IDLE_LOAD).all()
    imb = imbalance_summary(tail)
    assert math.isnan(imb["imbalance_ratio"]) and math.isnan(imb["straggler_tax"])
    assert imb["figures_text"].startswith("idle: no imbalance figures")
    s = F.range_summary(tail, float(tail["start"].min()), float(tail["end"].max()))
    cells = {c.id: _text(c) for c in header_cells(s)}
    assert "– (idle)" in cells[ids.IMBALANCE] and "– (idle)" in cells[ids.STRAGGLER]
    assert "idle: no imbalance figures" in cells[ids.IMBALANCE]


def test_ratio_and_tax_of_a_range_are_over_the_same_windows(bundled_windows):
    w = bundled_windows
    for a in np.arange(w["start"].min(), w["end"].max(), 10.0):
        r = w[(w["start"] >= a) & (w["start"] < a + 10.0)]
        imb = imbalance_summary(r)
        m = figure_windows(r)
        assert imb["figure_windows"] == int(m.sum())
        if not m.any():
            assert math.isnan(imb["imbalance_ratio"]) and math.isnan(imb["straggler_tax"])
            continue
        assert imb["imbalance_ratio"] == pytest.approx(r.loc[m, "imbalance_ratio"].mean())
        assert imb["straggler_tax"] == pytest.approx(r.loc[m, "straggler_tax"].mean())
        assert imb["figures_text"].startswith(f"over {int(m.sum())} of {len(r)} windows")


def test_hover_of_an_idle_window_says_idle(bundled_windows):
    row = bundled_windows[bundled_windows["load_mean"] < IDLE_LOAD].iloc[0].to_dict()
    info = {"t": row["start"] + 0.1, "window": row, "gpus": [0, 1], "bin": {}}
    text = _text(hover_panel(info, [0, 1], "UTC"))
    assert "max/mean – (idle)" in text, text


def test_report_of_an_idle_range_says_idle(bundled):
    s = bundled.samples
    tail = s[s["timestamp"] >= s["timestamp"].max() - 8.0]  # idle, one "decode" window
    rep = build_report(ReportInput(tail, bundled.devices, dict(bundled.meta)),
                       window_s=WINDOW_S)
    jsonschema.Draft202012Validator(schema()).validate(json.loads(report_bytes(rep, "json")))
    summ = rep.data["summary"]
    assert summ["straggler_tax"] is None and summ["imbalance_ratio"] is None
    assert summ["figures_text"].startswith("idle: no imbalance figures")
    assert "idle: no imbalance figures" in report_bytes(rep, "html").decode()


# -- the page, in a real browser -----------------------------------------------------------


def _store(trace: Trace, path):
    with SampleStore(path) as store:
        store.put_devices(trace.devices)
        store.append(trace.samples)
    return path


def _type_range(page, t0: float, t1: float) -> None:
    page.fill(f"#{ids.RANGE_FROM}", f"{t0:.3f}")
    page.fill(f"#{ids.RANGE_TO}", f"{t1:.3f}")
    page.click(f"#{ids.RANGE_GO}")
    page.wait_for_function(f"() => document.querySelector('#{ids.HEADER_RANGE}')"
                           f".innerText.includes('range on screen')", timeout=30_000)


def test_page_header_says_the_set_rotates_and_idle_has_no_figures(browser, rot, tmp_path):
    """A store of the rotating eight GPUs, then eight idle seconds of the bundled trace's
    GPUs 0 and 1 after it: the typed range over the rotation names both sets and says it
    rotates; the typed range over the idle tail says "– (idle)" and has no figures."""
    from conftest import open_live_page

    b = read_trace(bundled_trace_path()).samples
    idle = b[b["timestamp"] >= b["timestamp"].max() - 8.0].copy()
    end = float(rot.samples["timestamp"].max())
    idle["timestamp"] = idle["timestamp"] - float(idle["timestamp"].min()) + \
        math.ceil(end / WINDOW_S) * WINDOW_S + WINDOW_S
    idle = idle[idle["gpu"].isin([0, 1])]
    idle["uuid"] = [f"GPU-8x-{g}" for g in idle["gpu"]]
    if "monotonic" in idle:
        idle["monotonic"] = np.nan
    both = Trace(pd.concat([rot.samples, idle]).reset_index(drop=True), rot.devices, {})
    db = _store(both, tmp_path / "rot.db")
    t0 = float(rot.samples["timestamp"].min())
    i0, i1 = float(idle["timestamp"].min()), float(idle["timestamp"].max())
    url, shutdown = start_in_thread(store_path=db, collect=False)
    try:
        page, errors = open_live_page(browser, url)
        _type_range(page, t0 + 0.5, end - 0.5)
        page.wait_for_function(f"() => document.querySelector('#{ids.HOT_GPU}').innerText"
                               f".includes('rotates between GPUs')", timeout=30_000)
        hot = page.inner_text(f"#{ids.HOT_GPU}")
        assert re.search(ROTATION, hot), hot
        assert "(the decode windows with load)" in page.inner_text(f"#{ids.IMBALANCE}")
        _type_range(page, i0 + 0.5, i1 - 0.5)
        page.wait_for_function(f"() => document.querySelector('#{ids.STRAGGLER}').innerText"
                               f".includes('– (idle)')", timeout=30_000)
        assert "– (idle)" in page.inner_text(f"#{ids.IMBALANCE}")
        assert not errors, errors
        page.close()
    finally:
        shutdown()


def test_live_header_of_an_idle_newest_window_says_idle(bundled_windows):
    s = F.header_summary(bundled_windows)  # the trace ends idle, at 0 % load
    assert s.load_mean < IDLE_LOAD
    cells = {c.id: _text(c) for c in header_cells(s)}
    assert "– (idle)" in cells[ids.IMBALANCE] and "– (idle)" in cells[ids.STRAGGLER], cells
