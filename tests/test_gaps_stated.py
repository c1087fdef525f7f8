"""A trace with a long gap in it: the verdicts name the source's own rate (not readings over a
span that holds the gap), and every line that states the range says the gap (classify's range
line, the report's JSON, CSV, HTML and summary line)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tealeaves.classifier import classify_samples
from tealeaves.classifier.summary import pauses
from tealeaves.data.importers import import_file

HEAD = ("#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa"
        "   mclk   pclk\n"
        "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %      %"
        "    MHz    MHz\n")


def _dmon(path: Path, gap_s: int = 7201) -> Path:
    """An 8-GPU ``nvidia-smi dmon -o DT`` capture at 1 Hz: 60 s, ``gap_s`` from the last line to the next, 60 s;
    busy and idle in turns of 10 s, with an ``ERR!`` power, an ``[N/A]`` utilization and a
    4294967295 (blank code) memory utilization in it."""
    rows = []
    for t0 in (10 * 3600, 10 * 3600 + 59 + gap_s):
        for s in range(60):
            t = t0 + s
            for g in range(8):
                busy = (s // 10) % 2
                pwr = "ERR!" if (g, s) == (3, 7) else (600 + g if busy else 120 + g)
                sm = "[N/A]" if (g, s) == (5, 12) else (95 if busy else 0)
                mem = 4294967295 if (g, s) == (6, 20) else (60 if busy else 0)
                rows.append(f" 20261201   {t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"
                            f"      {g}    {pwr}     40      -    {sm}    {mem}      0      0"
                            "      0      0   3201   1980")
    path.write_text(HEAD + "\n".join(rows) + "\n")
    return path


def tealeaves(*args):
    return subprocess.run([sys.executable, "-m", "tealeaves.app.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300, check=False)


def test_pauses_are_stretches_longer_than_a_minute_or_twenty_steps():
    t = np.r_[np.arange(0, 60.0), np.arange(7260, 7320.0)]
    assert pauses(t) == [(59.0, 7260.0)]
    assert pauses(np.arange(0, 600.0, 10.0)) == []  # a 0.1-Hz source's steps are no pause
    assert pauses(np.r_[np.arange(0, 100.0, 10.0), 400.0]) == [(90.0, 400.0)]
    assert pauses(np.array([5.0])) == [] and pauses(np.array([])) == []
    # any order, repeats (one instant per GPU) and NaN do not matter
    assert pauses(np.r_[t, t, np.nan][::-1]) == [(59.0, 7260.0)]


def test_the_rate_a_verdict_names_is_the_sources_not_the_span_with_the_gap(tmp_path):
    res = import_file(_dmon(tmp_path / "gap.dmon"))
    assert res.samples["gpu"].nunique() == 8
    windows = classify_samples(res.samples)
    inputs = windows.attrs["inputs"]
    assert inputs["rate_hz"] == pytest.approx(1.0)
    assert "at 1 Hz per GPU" in inputs["text"]
    said = " ".join(windows["verdict"].astype(str))
    assert " Hz" not in said.replace(" at 1 Hz", "")  # no other rate in any verdict


def test_classify_and_report_say_the_gap(tmp_path):
    f = _dmon(tmp_path / "gap.dmon")
    out = tealeaves("classify", f, "--utc")
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("these windows are of"))
    assert "1 gap with no sample (2.0 h: from 2026-12-01 10:00:59" in line
    assert "to 2026-12-01 12:01:00" in line
    assert "at 1 Hz per GPU" in out.stdout and "0.016 Hz" not in out.stdout

    js = json.loads(tealeaves("classify", f, "--json").stdout)["range"]
    assert js["gap_count"] == 1 and js["gaps"] == [[js["start"] + 59.0, js["start"] + 7260.0]]
    assert js["samples"] == 960 and js["gpus"] == list(range(8))

    rep = tealeaves("report", f, "--format", "json", "--out", tmp_path / "r.json", "--utc")
    assert rep.returncode == 0, rep.stderr
    assert "1 gap with no sample (2.0 h" in rep.stdout
    rng = json.loads((tmp_path / "r.json").read_text())["range"]
    assert rng["gap_count"] == 1
    assert rng["gaps"] == [[rng["start"] + 59.0, rng["start"] + 59.0 + 7201.0]]
    assert rng["gap_s"] == pytest.approx(7201.0)
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["inputs"]["rate_hz"] == 1.0

    assert tealeaves("report", f, "--format", "csv", "--out", tmp_path / "r.csv").returncode == 0
    rows = [r for r in csv.DictReader((tmp_path / "r.csv").open()) if r["section"] == "range"]
    got = {(r["item"], r["metric"]): r["value"] for r in rows}
    assert got[("", "gap_count")] == "1"
    assert float(got[("0", "gap_end")]) - float(got[("0", "gap_start")]) == 7201.0

    assert tealeaves("report", f, "--format", "html", "--out", tmp_path / "r.html").returncode == 0
    assert "1 gap with no sample (2.0 h: from 2026-12-01 10:00:59 UTC" in \
        (tmp_path / "r.html").read_text()


def test_a_trace_without_a_gap_says_none(tmp_path):
    f = _dmon(tmp_path / "close.dmon", gap_s=1)
    out = tealeaves("classify", f)
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("these windows are of"))
    assert line.endswith("; 960 samples")  # and no word of a gap
