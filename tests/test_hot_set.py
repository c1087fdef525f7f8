"""The hot SET at eight GPUs: a four-vs-four split built from a real two-GPU H200 recording is
reported as a set of four in ``tealeaves classify``, the dashboard header (and ribbon marks,
hover, window panel and a screenshot's verdict), the report (JSON, CSV, HTML) and the Prometheus
exporter.

The input: a decode stretch of ``h200x2_skew_rotation`` where its labels say GPU 1 is hot, made
into eight GPUs: the odd GPUs are copies of the recording's hot GPU rows, the even GPUs copies
of its cold GPU rows, so GPUs 1, 3, 5, 7 each hold about 18 % of the work against 7 %.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import subprocess
import sys
import time
from html import unescape

import jsonschema
import numpy as np
import pandas as pd
import pytest

from tealeaves.app import figures as F
from tealeaves.app.cli import main
from tealeaves.app.dashboard.config import DashboardConfig
from tealeaves.app.dashboard.header_panel import header_cells
from tealeaves.app.dashboard.live import LiveView
from tealeaves.app.dashboard.panels import hover_panel, window_panel
from tealeaves.app.dashboard.screenshots.model import verdict
from tealeaves.app.exporter import TealeavesCollector, render
from tealeaves.app.report.model import ReportInput, build_report, csv_rows, schema
from tealeaves.app.report.out import report_bytes
from tealeaves.classifier import classify_samples
from tealeaves.classifier.rules import RulePhaseLabeller
from tealeaves.classifier.summary import hot_ceilings, imbalance_summary
from tealeaves.data import bundled_trace_path
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import Trace, read_labels, read_trace, write_trace

TRACES = bundled_trace_path().parent
RECORDING = "h200x2_skew_rotation"
WINDOW_S = 0.5
HOT = [1, 3, 5, 7]
SET_WORDS = "GPUs 1, 3, 5, 7 at 2.5x the rest's work (18 % each vs 7 %)"  # hot_set.py


def eight_gpus(recording: str = RECORDING, n_gpus: int = 8) -> Trace:
    """``n_gpus`` GPUs from a real two-GPU trace: the first labelled decode stretch with a hot
    GPU (whole windows inside it, its first 0.6 s left out as the onset), odd GPUs copies of
    the recording's hot GPU rows, even GPUs copies of its cold GPU rows."""
    tr = read_trace(TRACES / f"{recording}.parquet")
    labels = read_labels(TRACES / f"{recording}.labels.csv")
    stretch = labels[(labels["phase"] == "decode") & labels["hot_gpu"].notna()].iloc[0]
    hot = int(stretch["hot_gpu"])
    cold = next(g for g in sorted(tr.samples["gpu"].unique()) if g != hot)
    t0 = math.ceil((stretch["start"] + 0.6) / WINDOW_S) * WINDOW_S
    t1 = math.floor(stretch["end"] / WINDOW_S) * WINDOW_S
    s = tr.samples
    part = s[(s["timestamp"] >= t0) & (s["timestamp"] < t1)]
    parts = []
    for g in range(n_gpus):
        p = part[part["gpu"] == (hot if g % 2 else cold)].copy()
        p["gpu"] = g
        p["uuid"] = f"GPU-8x-{g}"
        parts.append(p)
    samples = pd.concat(parts).sort_values(["timestamp", "gpu"]).reset_index(drop=True)
    dev = tr.devices.drop_duplicates("gpu").iloc[[0] * n_gpus].copy()
    dev["gpu"] = range(n_gpus)
    if "uuid" in dev:
        dev["uuid"] = [f"GPU-8x-{g}" for g in range(n_gpus)]
    return Trace(samples, dev.reset_index(drop=True), dict(tr.meta or {}))


@pytest.fixture(scope="module")
def eight() -> Trace:
    return eight_gpus()


@pytest.fixture(scope="module")
def eight_path(eight, tmp_path_factory):
    return write_trace(tmp_path_factory.mktemp("hot_set") / "eight.parquet", eight)


@pytest.fixture(scope="module")
def windows(eight):
    return classify_samples(eight.samples, eight.devices, window_s=WINDOW_S)


def _text(node) -> str:
    """The visible text of a Dash component tree (or list of them)."""
    if node is None:
        return ""
    if isinstance(node, str | int | float):
        return str(node)
    if isinstance(node, list | tuple):
        return "".join(_text(n) for n in node)
    return _text(getattr(node, "children", None))


# -- the windows and the range -------------------------------------------------------------


def test_every_window_names_the_four_hot_gpus(windows):
    assert len(windows) >= 4 and (windows["phase"] == "decode").all()
    assert windows["imbalanced"].all()
    assert set(windows["hot_set"]) == {"1,3,5,7"}
    assert windows["hot_share"].between(16, 20).all()
    assert windows["cold_share"].between(6, 8.5).all()
    assert windows["hot_gpu"].isin(HOT).all()  # the busiest of the set, for old readers


def test_the_rules_fallback_names_the_set_too(eight):
    w = classify_samples(eight.samples, eight.devices, window_s=WINDOW_S,
                         labeller=RulePhaseLabeller())
    flagged = w[w["imbalanced"]]
    assert len(flagged) and set(flagged["hot_set"]) == {"1,3,5,7"}
    assert imbalance_summary(w)["hot_set"] == HOT


def test_range_summary_has_the_set_its_shares_and_why(eight, windows):
    s = imbalance_summary(windows)
    n = len(windows)
    assert s["hot_set"] == HOT and s["hot_set_windows"] == n and s["hot_pattern"] == "stays"
    assert s["hot_gpus"] == dict.fromkeys(HOT, n) and s["hot_gpu"] == 1  # old keys still work
    assert s["hot_sets"] == {"1,3,5,7": n} and s["hot_changes"] == 0
    assert round(s["hot_share"]) == 18 and round(s["cold_share"]) == 7
    why = hot_ceilings(eight.samples, windows, WINDOW_S, eight.devices)
    assert list(why) == HOT
    for g, c in why.items():  # decode reads weights and KV cache: the hot GPUs lean on DRAM
        assert c["pipe"] == "dram" and c["windows"] == n
        assert c["line"].startswith(f"GPU {g}: DRAM bandwidth")


# -- tealeaves classify --------------------------------------------------------------------


def test_classify_names_the_set_in_text_json_and_csv(eight_path, capsys):
    path = eight_path
    assert main(["classify", str(path)]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if " decode " in ln and ln[:1].isdigit()]  # table
    assert rows and all("1,3,5,7" in ln for ln in rows)
    line = next(ln for ln in out.splitlines() if ln.startswith("hot set:"))
    n = len([ln for ln in rows])
    assert line == f"hot set: {SET_WORDS}, stays: {n} of {n} imbalanced windows", line
    assert main(["classify", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all(w["hot_set"] == HOT for w in doc["windows"])
    assert doc["imbalance"]["hot_set"] == HOT
    assert main(["classify", str(path), "--csv"]) == 0
    text = capsys.readouterr().out
    table = list(csv.DictReader(io.StringIO(text.split("\nwindows:")[0])))
    assert table and {r["hot_set"] for r in table} == {"1,3,5,7"}


# -- the dashboard --------------------------------------------------------------------------


def test_dashboard_header_shows_the_set_with_shares(windows):
    s = F.header_summary(windows)
    assert s.hot_set == tuple(HOT) and s.hot_recent == dict.fromkeys(HOT, len(windows))
    assert f"hot {SET_WORDS}" in s.text()
    cells = header_cells(s)
    hot_cell = next(c for c in cells if c.id == "tl-hot-gpu")
    text = _text(hot_cell)
    assert text.startswith("Hot set1357 at 2.5x the rest's work (18 % each vs 7 %)"), text
    n = min(len(windows), 20)
    assert f"in the last {n} windows: stays: {n} of {n} imbalanced windows" in text, text


def test_ribbon_marks_hover_and_window_panel_name_each_hot_gpu(eight, windows, tmp_path):
    gpus = list(range(8))
    fig = F.build_figure(pd.DataFrame(), windows, gpus, window_s=WINDOW_S)
    keys = F.trace_keys(gpus)
    marks = {k[1]: fig.data[i] for i, k in enumerate(keys) if k[0] == "hot"}
    for g, t in marks.items():
        drawn = [txt for txt in t.text if txt]
        if g in HOT:
            assert len(drawn) == 2 * len(windows)
            assert drawn[0].startswith(f"GPU {g} hot · hot set {SET_WORDS}: max/mean")
        else:
            assert not drawn and all(v is None for v in t.y)
    # the live view over a store: its header, the hover and the clicked window's ceilings
    with SampleStore(tmp_path / "s.db") as store:
        store.put_devices(eight.devices)
        store.append(eight.samples)
        live = LiveView(store, DashboardConfig(source="test"))
        live.history.update(force=True)
        step = live.snapshot()
        assert step.summary.hot_set == tuple(HOT)
        assert all(sorted(h) == HOT for h in step.state["hot_tail"])
        t = float(windows["start"].iloc[1]) + WINDOW_S / 2
        info = live.at(t)
        hover = _text(hover_panel(info, gpus))
        assert f"hot {SET_WORDS}" in hover
        row = info["window"]
        why = live.ceilings(row)
        assert list(why) == HOT
        panel = _text(window_panel(row, gpus, "trained", None, why))
        assert f"hot set {SET_WORDS}; the busiest" in panel
        for g in HOT:
            assert f"why GPU {g}: DRAM bandwidth" in panel
    # a screenshot's verdict over the stretch
    v = verdict(windows, gpus, float(windows["start"].min()), float(windows["end"].max()))
    assert v.hot_set == tuple(HOT) and "hot: GPUs 1, 3, 5, 7 at " in v.text()


# -- the report ----------------------------------------------------------------------------


def test_report_command_names_the_set(eight_path, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["report", "--trace", str(eight_path), "--out", str(out)]) == 0
    line = capsys.readouterr().out
    assert f"hot set: {SET_WORDS}, stays: 6 of 6 imbalanced windows" in line, line
    assert json.loads(out.read_text())["summary"]["hot_set"] == HOT


def test_report_names_the_set_its_shares_and_why_per_hot_gpu(eight, windows):
    rep = build_report(ReportInput(eight.samples, eight.devices, dict(eight.meta)),
                       window_s=WINDOW_S)
    d = rep.data
    jsonschema.Draft202012Validator(schema()).validate(json.loads(report_bytes(rep, "json")))
    s = d["summary"]
    assert s["hot_set"] == HOT and s["hot_pattern"] == "stays"
    assert s["hot_share"] == pytest.approx(0.18, abs=0.01)
    assert s["cold_share"] == pytest.approx(0.07, abs=0.01)
    assert all(w["hot_set"] == HOT for w in d["top_windows"])
    assert [c["gpu"] for c in d["hot_ceilings"]] == HOT
    assert all(c["pipe"] == "dram" for c in d["hot_ceilings"])
    assert [g["gpu"] for g in d["gpus"] if g["hot_s"] > 0] == HOT
    by = {(r["section"], r["item"], r["metric"]): r["value"] for r in csv_rows(rep)}
    assert by[("summary", "", "hot_set")] == "1,3,5,7"
    assert by[("top_window", "1", "hot_set")] == "1,3,5,7"
    assert by[("hot_ceiling", "5", "pipe")] == "dram"
    html = unescape(report_bytes(rep, "html").decode())
    assert f"Hot set: {SET_WORDS}, stays: 6 of 6 imbalanced windows" in html
    assert "Why, per hot GPU" in html
    for g in HOT:
        assert f"<li>GPU {g}: DRAM bandwidth" in html
    assert html.count(f"<td>{SET_WORDS}</td>") == len(d["top_windows"])


# -- the exporter --------------------------------------------------------------------------


def test_exporter_publishes_every_hot_gpu(eight, tmp_path):
    s = eight.samples.copy()
    shift = math.floor((time.time() - float(s["timestamp"].max())) / WINDOW_S) * WINDOW_S
    s["timestamp"] += shift  # now, on the same window grid
    with SampleStore(tmp_path / "s.db") as store:
        store.put_devices(eight.devices)
        store.append(s)
        text = render(TealeavesCollector(store, window_s=WINDOW_S, hostname="node-8x"))
    hot = {int(m.group(1)): float(m.group(2)) for m in
           re.finditer(r'^tealeaves_gpu_hot\{[^}]*gpu="(\d+)"[^}]*\} (\S+)$', text, re.MULTILINE)}
    assert hot == {g: 1.0 if g in HOT else 0.0 for g in range(8)}
    assert re.search(r'^tealeaves_hot_gpus\{Hostname="node-8x"\} 4\.0$', text, re.MULTILINE)
    share = re.search(r"^tealeaves_hot_share_ratio\{[^}]*\} (\S+)$", text, re.MULTILINE)
    assert share and float(share.group(1)) == pytest.approx(0.18, abs=0.01)
    secs = {int(m.group(1)): float(m.group(2)) for m in re.finditer(
        r'^tealeaves_imbalanced_seconds_total\{[^}]*gpu="(\d+)"[^}]*\} (\S+)$', text, re.MULTILINE)}
    assert {g for g, v in secs.items() if v > 0} == set(HOT)
    assert np.isfinite(list(secs.values())).all()


def test_a_label_naming_four_hot_gpus_scores_the_set(eight, eight_path, tmp_path):
    """Labels can name a hot set (``hot_gpu`` ``1;3;5;7``) and `evaluate` scores it exactly."""
    t = eight.samples["timestamp"]
    path = tmp_path / "labels.csv"
    path.write_text(f"start,end,phase,hot_gpu\n{t.min():.6f},{t.max():.6f},decode,1;3;5;7\n")
    labels = read_labels(path)
    assert labels.loc[0, "hot_gpu"] == 1 and labels.loc[0, "hot_set"] == "1,3,5,7"
    r = subprocess.run([sys.executable, "-m", "tealeaves.app.cli", "evaluate", "--trace",
                        str(eight_path), "--labels", str(path), "--json"],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["hot_set_accuracy"] == 1.0 and out["imbalance_recall"] >= 0.9
    bad = tmp_path / "bad.csv"
    bad.write_text(f"start,end,phase,hot_gpu\n{t.min():.6f},{t.max():.6f},decode,1;9\n")
    r = subprocess.run([sys.executable, "-m", "tealeaves.app.cli", "evaluate", "--trace",
                        str(eight_path), "--labels", str(bad)],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 2 and "hot_gpu 9 is not a GPU" in r.stderr


def test_classify_refuses_labels_naming_a_gpu_the_trace_lacks(eight_path, eight, tmp_path):
    t = eight.samples["timestamp"]
    bad = tmp_path / "bad.csv"
    bad.write_text(f"start,end,phase,hot_gpu\n{t.min():.6f},{t.max():.6f},decode,1;9\n")
    r = subprocess.run([sys.executable, "-m", "tealeaves.app.cli", "classify", str(eight_path),
                        "--labels", str(bad)], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 2 and "hot_gpu 9 is not a GPU" in r.stderr
