"""Break-it, fourth round (a hostile tester on the refactored CLI and dashboard): what it broke,
each pinned by a test that fails on the code it broke."""

from __future__ import annotations

import json

import numpy as np

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


def _thin_csv(tmp_path, seconds: int = 600, gpus: int = 8):
    """A ``--query-gpu`` CSV of power and utilization only at 1 Hz: idle and busy in turns of
    60 s, GPU 3 at 98 % while busy, the others at 60 %."""
    lines = ["timestamp, index, utilization.gpu [%], power.draw [W]"]
    for s in range(seconds):
        busy = (s // 60) % 2
        for g in range(gpus):
            u = (98 if g == 3 else 60) if busy else 0
            w = 600 if busy else 90
            lines.append(f"2026/12/01 10:{s // 60:02d}:{s % 60:02d}.000, {g}, {u} %, {w} W")
    p = tmp_path / "thin.csv"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_phase_time_of_a_1hz_source_adds_up_to_its_range(tmp_path):
    """Each 1-s reading has one 0.5-s window: counted at 0.5 s, the phases of a 10-min trace
    added up to 5 min (the report said 30.0 min / 30.0 min of a 2-h trace)."""
    d = _report(tmp_path, "thin", _thin_csv(tmp_path))
    t = d["summary"]["phase_time_s"]
    assert d["summary"]["inputs"]["rate_hz"] == 1.0
    assert sum(t.values()) == d["range"]["span_s"] + 1.0  # the last reading stands for 1 s
    assert abs(t["idle"] - 300.0) <= 10 and abs(t["idle"] + t["prefill"] + t["decode"] - 600) < 1


def test_phase_time_of_a_dense_source_is_its_windows(tmp_path):
    """The control: a 20-Hz trace's windows stand for their 0.5 s each, as before."""
    d = _report(tmp_path, "dense", "--trace", bundled_trace_path())
    t, n = d["summary"]["phase_time_s"], d["summary"]["windows"]
    assert sum(t.values()) == n * d["summary"]["window_s"]


def test_a_1hz_source_gets_no_segments_and_says_why(tmp_path):
    """0.1-s segments of a 1-Hz source covered a tenth of its time ("segments (0.1-s): 7200"
    of a 2-h trace): it gets none, and classify says why."""
    from tealeaves.classifier import classify_with_segments
    from tealeaves.data.importers import load_trace

    thin = _thin_csv(tmp_path, seconds=240)
    tr = load_trace(thin)
    w, seg = classify_with_segments(tr.samples, tr.devices)
    assert len(w) == 240 and seg.empty
    assert "the source reads at 1 Hz:" in seg.attrs["why"]
    dense = load_trace(bundled_trace_path())
    assert len(classify_with_segments(dense.samples, dense.devices)[1])  # the control
    assert main(["classify", str(thin)]) == 0


def _thin_store(tmp_path):
    store = tmp_path / "thin.db"
    assert main(["import", str(_thin_csv(tmp_path)), "--store", str(store)]) == 0
    return store


def test_a_range_reports_the_verdicts_the_whole_record_gives_its_windows(tmp_path, capsys):
    """A report of 2 windows inside an imbalanced stretch said "no imbalanced decode window"
    (the run of 3 windows was cut by the range's edge) while the dashboard's header over the
    same range said 2 of 2; a range of 10:00:50-10:01:10 counted 21 windows (the one opening
    at "to" too) to the header's 20."""
    from tealeaves.app.figures.header import range_summary
    from tealeaves.classifier import classify_samples
    from tealeaves.data.importers import load_trace

    store = _thin_store(tmp_path)
    whole = load_trace(_thin_csv(tmp_path))
    windows = classify_samples(whole.samples, whole.devices)
    t0 = float(whole.samples["timestamp"].min())
    for a, b in ((60.0, 61.5), (60.0, 62.0), (50.0, 70.0), (119.0, 121.0)):
        d = _report(tmp_path, f"r{a}", "--store", store, "--from", t0 + a, "--to", t0 + b)
        head = range_summary(windows, t0 + a, t0 + b)
        s = d["summary"]
        assert (s["windows"], s["imbalanced_windows"]) == (head.windows, head.flagged), (a, b)
        assert tuple(s["hot_set"]) == head.hot_set
    capsys.readouterr()
    short = _report(tmp_path, "short", "--store", store, "--from", t0 + 60, "--to", t0 + 61.5)
    assert short["summary"]["imbalanced_windows"] == 2 and short["summary"]["hot_set"] == [3]
    twenty = _report(tmp_path, "twenty", "--store", store, "--from", t0 + 50, "--to", t0 + 70)
    assert twenty["summary"]["windows"] == 20


def test_identical_gpus_on_the_dashboard_read_alike_and_never_sure():
    """The dashboard's own picture (a 5-s zoom where GPUs 0, 2, 4, 6 carry identical data,
    sm_active 38.3 % on average): read 47, 39, 43.6 and 38.8 %, each "100% sure"."""
    from pathlib import Path

    from tealeaves.app.figures.read_back import LINE_CONFIDENCE, read_back
    from tealeaves.data.screen.read import read_picture

    pic = Path(__file__).parent / "pictures" / "dashboard_identical_gpus.png"
    r = read_picture(pic.read_bytes(), pic.name, graphs=read_back)
    assert r.tool == "tealeaves dashboard"
    got = {g.gpu: g for g in r.gpus}
    same = [got[g].values["util_pct"] for g in (0, 2, 4, 6)]
    assert max(same) - min(same) <= 5.0, same
    assert all(abs(v - 38.3) <= 6.0 for v in same), same
    assert got[3].values["util_pct"] > 95
    assert all(g.confidence["util_pct"] <= LINE_CONFIDENCE for g in r.gpus)


def test_a_trace_of_blank_readings_says_why_no_window_is_labelled(tmp_path, capsys):
    """Every reading ``[N/A]``: classify printed "windows: 0" and nothing on why."""
    rows = ["timestamp, index, utilization.gpu [%], power.draw [W]"]
    rows += [f"2026/12/01 10:00:{s:02d}.000, {g}, [N/A], [N/A]" for s in range(20)
             for g in (0, 1)]
    p = tmp_path / "allna.csv"
    p.write_text("\n".join(rows) + "\n")
    assert main(["classify", str(p)]) == 0
    out = capsys.readouterr().out
    assert "windows: 0" in out
    assert "20 windows with samples but no reading (every field blank" in out
    d = _report(tmp_path, "na", p)
    assert any("20 windows with samples but no reading" in x for x in d["summary"]["evidence"])


def test_fields_outside_the_schema_are_named_for_dcgmi_and_dcgm_exporter(tmp_path):
    """A dcgmi file's FP64A/FP32A/FP16A columns and dcgm-exporter series tealeaves does not
    read were dropped with ``not_read: []`` (the --query-gpu importer alone named them); the
    exporter's power limit and GPU model are device facts."""
    from tealeaves.data.importers import import_file

    d = tmp_path / "d.txt"
    d.write_text("#Entity    GRACT        SMACT        FP64A        FP32A\nID\n"
                 "GPU 0      0.500        0.400        0.000        0.046\n"
                 "GPU 0      0.600        0.500        0.000        0.050\n")
    r = import_file(d, start_time=1.79e9)
    assert r.not_read == ["FP32A", "FP64A"] and len(r.samples) == 2
    e = tmp_path / "e.txt"
    lab = 'gpu="0",UUID="GPU-a",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"'
    e.write_text(f"DCGM_FI_DEV_GPU_UTIL{{{lab}}} 40\n"
                 f"DCGM_FI_DEV_POWER_USAGE{{{lab}}} 350.5\n"
                 f"DCGM_FI_DEV_POWER_MGMT_LIMIT{{{lab}}} 700\n"
                 f"DCGM_FI_DEV_XID_ERRORS{{{lab}}} 0\n")
    r = import_file(e, start_time=1.79e9)
    assert r.not_read == ["DCGM_FI_DEV_XID_ERRORS"]
    dev = r.devices.iloc[0]
    assert (dev["host"], dev["gpu"], dev["power_limit_w"]) == ("n1", 0, 700.0)
    assert dev["name"] == "NVIDIA H100 80GB HBM3"
    assert r.samples["power_w"].iloc[0] == 350.5


def _query_rows(path, rows):
    path.write_text("timestamp, index, utilization.gpu [%], power.draw [W]\n" + "\n".join(
        f"{_stamp(t)}, {g}, {u} %, {w} W" for t, g, u, w in rows) + "\n")
    return path


def _stamp(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(1796119200.0 + t, tz=UTC).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


def test_a_1hz_sweep_stamped_a_few_ms_apart_across_a_window_edge_is_one_window(tmp_path):
    """nvidia-smi stamps each GPU's row of a sweep a few ms apart: at x.499, x.502 ... s a
    1-Hz sweep straddled a window's edge and every window was "cannot tell" (2400 of them
    for 1200 s)."""
    from tealeaves.classifier import classify_samples
    from tealeaves.data.importers import load_trace

    rows = [(s + 0.499 + 0.003 * g, g, (98 if g == 3 else 60) if (s // 60) % 2 else 0,
             600 if (s // 60) % 2 else 90) for s in range(240) for g in range(4)]
    tr = load_trace(_query_rows(tmp_path / "seq.csv", rows))
    w = classify_samples(tr.samples, tr.devices)
    assert len(w) == 240 and w["phase"].notna().all()
    assert set(w["phase"]) == {"idle", "decode"}
    assert w.loc[w["phase"] == "decode", "hot_set"].eq("3").mean() > 0.9
    # one stray reading, or a 4-Hz stretch, keeps the stamps of its own sweeps only (each
    # undid the alignment of the whole trace: every window "cannot tell" again)
    stray = rows + [(100.6, 0, 60, 600)] + [(150 + k / 4, g, 60, 600) for k in range(40)
                                           for g in range(4)]
    tr = load_trace(_query_rows(tmp_path / "stray.csv", sorted(stray)))
    w = classify_samples(tr.samples, tr.devices)
    assert w["phase"].isna().sum() <= 2, w["phase"].isna().sum()
    # a sweep is never wider than a quarter of the interval (readings chained through short
    # steps were moved 0.72 s)
    from tealeaves.classifier.evidence import align_sweeps

    chain = [(s + 0.24 * g, g, 50, 300) for s in range(60) for g in range(4)]
    tr = load_trace(_query_rows(tmp_path / "chain.csv", chain))
    moved = align_sweeps(tr.samples, 0.5)["timestamp"].to_numpy() - \
        tr.samples["timestamp"].to_numpy()
    assert np.abs(moved).max() <= 0.25 + 1e-9
    # the control: GPUs read 0.25 s apart across the second are no sweep: not moved
    spread = [(s + 0.25 * g, g, 50, 300) for s in range(60) for g in range(4)]
    tr = load_trace(_query_rows(tmp_path / "spread.csv", spread))
    assert align_sweeps(tr.samples, 0.5) is tr.samples


def test_gpus_at_different_rates_are_named_and_times_follow_each_window(tmp_path):
    """GPU 0 at 10 Hz beside GPUs at 1 Hz was stated "at 10 Hz per GPU" and got segments;
    10 Hz then 1 Hz added up to 900 of 1200 s; a GPU's hot_s counted 0.5 s a window."""
    from tealeaves.classifier import classify_with_segments
    from tealeaves.data.importers import load_trace

    rows = [(k / 10, 0, 40, 300) for k in range(600)]
    rows += [(float(s), g, 40, 300) for s in range(60) for g in (1, 2)]
    tr = load_trace(_query_rows(tmp_path / "mixed.csv", sorted(rows)))
    w, seg = classify_with_segments(tr.samples, tr.devices)
    assert seg.empty and "GPU 1 reads at 1 Hz" in seg.attrs["why"]
    assert "10 Hz (GPU 0), 1 Hz (GPUs 1-2)" in w.attrs["inputs"]["text"]
    change = [(k / 10, g, 98 if g == 1 else 50, 500) for k in range(1200) for g in (0, 1)]
    change += [(120.0 + s, g, 98 if g == 1 else 50, 500) for s in range(120) for g in (0, 1)]
    d = _report(tmp_path, "chg", _query_rows(tmp_path / "chg.csv", change))
    total = sum(d["summary"]["phase_time_s"].values())
    assert abs(total - 240.0) <= 1.0, total
    hot = {g["gpu"]: g["hot_s"] for g in d["gpus"]}
    flagged = d["summary"]["imbalanced_windows"]
    assert flagged > 0 and hot[1] > 0.5 * flagged  # more than 0.5 s a window at 1 Hz


def test_the_dashboard_header_counts_the_windows_it_cannot_tell_as_the_report_does(tmp_path):
    """The header said "10 of 15 windows imbalanced" where the report (and the header's own
    export) said "10 of 20": the header dropped the windows that cannot be told."""
    from tealeaves.app.figures.header import range_summary
    from tealeaves.classifier import classify_samples
    from tealeaves.data.importers import load_trace

    rows = [(float(s), g, 98 if g == 3 else 60, 600) for s in range(120) for g in range(4)
            if not (g == 2 and 50 <= s < 55)]  # GPU 2 misses 5 s
    f = _query_rows(tmp_path / "stop.csv", rows)
    tr = load_trace(f)
    w = classify_samples(tr.samples, tr.devices)
    t0 = float(tr.samples["timestamp"].min())
    head = range_summary(w, t0 + 40, t0 + 60)
    store = tmp_path / "s.db"
    assert main(["import", str(f), "--store", str(store)]) == 0
    d = _report(tmp_path, "rng", "--store", store, "--from", t0 + 40, "--to", t0 + 60)
    s = d["summary"]
    assert s["cannot_tell_windows"] >= 5
    assert (head.windows, head.flagged, head.figures) == \
        (s["windows"], s["imbalanced_windows"], s["figures_text"])


def test_a_gpu_that_stops_half_way_is_said_on_every_range_line(tmp_path, capsys):
    """GPU 2 stopped for the last half of the trace: the range line and the report still
    said "GPUs 0, 1, 2, 3" over the whole range, gap_count 0, and nothing more."""
    import csv

    rows = [(float(s), g, 98 if g == 3 else 60, 600) for s in range(400) for g in range(4)
            if not (g == 2 and s >= 200)]
    f = _query_rows(tmp_path / "stop.csv", rows)
    assert main(["classify", str(f), "--utc"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines()
                if x.startswith("these windows are of"))
    assert line.endswith("; GPU 2 only from 2026-12-01 10:00:00.000+00:00 to "
                         "2026-12-01 10:03:19.000+00:00"), line
    d = _report(tmp_path, "stop", f, "--utc")
    assert d["range"]["partial_gpus"] == [{"gpu": 2, "first": 1796119200.0,
                                           "last": 1796119399.0}]
    assert main(["report", str(f), "--format", "csv", "--out", str(tmp_path / "s.csv")]) == 0
    got = {(r["item"], r["metric"]) for r in csv.DictReader((tmp_path / "s.csv").open())
           if r["section"] == "range"}
    assert {("2", "gpu_first"), ("2", "gpu_last")} <= got
    capsys.readouterr()
    full = [(float(s), g, 60, 600) for s in range(400) for g in range(4)]
    assert _report(tmp_path, "full", _query_rows(tmp_path / "full.csv", full))[
        "range"]["partial_gpus"] == []


def test_a_changed_power_limit_of_the_same_gpu_is_said(tmp_path, capsys):
    """A later dcgm-exporter file of the same GPU (uuid) with another power limit replaced
    the stored 700 W by 600 W with no word, re-scaling every stored sample."""
    lab = 'gpu="0",UUID="GPU-a",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"'

    def page(name, limit, util):
        p = tmp_path / name
        p.write_text(f"DCGM_FI_DEV_GPU_UTIL{{{lab}}} {util}\n"
                     f"DCGM_FI_DEV_POWER_USAGE{{{lab}}} 350\n"
                     f"DCGM_FI_DEV_POWER_MGMT_LIMIT{{{lab}}} {limit}\n")
        return p
    store = str(tmp_path / "s.db")
    assert main(["import", str(page("a.prom", 700, 40)), "--store", store,
                 "--start-time", "1790000000"]) == 0
    capsys.readouterr()
    assert main(["import", str(page("b.prom", 600, 40)), "--store", store,
                 "--start-time", "1790000000"]) == 0
    out = capsys.readouterr().out
    assert "NOTE: GPU 0 of host 'n1': power limit 700 W stored, 600 W stated" in out
    with SampleStore(store, readonly=True) as s:
        assert float(s.devices()["power_limit_w"].iloc[0]) == 600.0
