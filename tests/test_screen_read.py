"""Reading screenshots of GPU monitors (issue 23, in progress): the parsers on the tools' real
text (captured on an H200 by ``kernels_bench/record_monitors.sh`` on 2026-12-02), the verdict
rule, and Tesseract on real xterm screenshots of those captures (``tests/pictures``, made by
``tests/pictures/make_pictures.py``; their printed values and telemetry in ``truth.json``)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from tealeaves.app.cli import main
from tealeaves.classifier.picture import loads_of, verdict
from tealeaves.data.screen.read import ScreenReadError, read_picture
from tealeaves.data.screen.tools import parse_text, which_tool

PICTURES = Path(__file__).with_name("pictures")
needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None,
                                     reason="tesseract-ocr is not installed")

SMI = """Wed Dec  2 04:59:09 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA H200                    On  |   00000000:00:06.0 Off |                    0 |
| N/A   58C    P0            590W /  700W |   12923MiB / 143771MiB |     97%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
"""
NVITOP = """Wed Dec 02 04:59:09 2026
╒═════════════════════════════════════════════════════════════════════════════╕
│ NVITOP 1.7.2      Driver Version: 580.159.04      CUDA Driver Version: 13.0 │
├───────────────────────────────┬──────────────────────┬──────────────────────┤
│ GPU  Name        Persistence-M│ Bus-Id        Disp.A │ MIG M.   Uncorr. ECC │
│ Fan  Temp  Perf  Pwr:Usage/Cap│         Memory-Usage │ GPU-Util  Compute M. │
╞═══════════════════════════════╪══════════════════════╪══════════════════════╡
│   0  H200                  On │ 00000000:00:06.0 Off │ Disabled           0 │
│ N/A   58C   P0    691W / 700W │  12923MiB / 140.4GiB │     98%      Default │
╘═══════════════════════════════╧══════════════════════╧══════════════════════╛
"""
GPUSTAT = ("\x1bP+q544e\x1b\\vm              Wed Dec  2 04:59:10 2026  580.159.04\r\n"
           "\x1b[36m[0]\x1b[0;10m \x1b[34mNVIDIA H200\x1b[0;10m |\x1b[31m 59°C\x1b[0;10m, "
           "\x1b[1m\x1b[32m 97 %\x1b[0;10m,  \x1b[1m\x1b[35m690\x1b[0;10m / \x1b[35m700"
           "\x1b[0;10m \x1b[35mW\x1b[0;10m | 12922 / 143771 MB | python3(12914M)\r\n")
DMON = ("#Time         gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk"
        "   pclk     fb   bar1   ccpm \n"
        "#HH:MM:SS     Idx      W      C      C      %      %      %      %      %      %    MHz"
        "    MHz     MB     MB     MB \n"
        " 04:59:16       0    691     60     47     97     23      0      0      0      0   3201"
        "   1530  12923  12924      0 \n"
        " 04:59:17       0    689     60     47     98     23      0      0      0      0   3201"
        "   1530  12923  12924      0 \n")


def test_each_tools_real_text_is_parsed_to_its_printed_values():
    tool, (g,) = parse_text(SMI)
    assert tool == "nvidia-smi" and g.gpu == 0
    assert g.values == {"temp_c": 58, "power_w": 590, "power_limit_w": 700,
                        "mem_used_mib": 12923, "mem_total_mib": 143771, "util_pct": 97}
    tool, (g,) = parse_text(NVITOP)
    assert tool == "nvitop" and g.values["util_pct"] == 98 and g.values["power_w"] == 691
    assert g.values["mem_total_mib"] == pytest.approx(140.4 * 1024)  # printed in GiB
    tool, (g,) = parse_text(GPUSTAT)  # colours and terminal queries removed first
    assert tool == "gpustat" and g.values == {"temp_c": 59, "util_pct": 97, "power_w": 690,
                                              "power_limit_w": 700, "mem_used_mib": 12922,
                                              "mem_total_mib": 143771}
    tool, (g,) = parse_text(DMON)  # the newest row of each GPU
    assert tool == "nvidia-smi dmon" and g.values == {"power_w": 689, "temp_c": 60,
                                                      "util_pct": 98, "mem_used_mib": 12923}
    assert which_tool("hello\nworld") is None and parse_text("hello") == (None, [])


def test_the_verdict_names_the_hot_set_and_says_what_a_picture_cannot_tell():
    v = verdict({0: 95.0, 1: 2.0, 2: 96.0, 3: 0.0})
    assert v["pattern"] == "uneven" and v["hot_set"] == [0, 2]
    assert "prefill from decode" in v["limits"]
    assert verdict({0: 95.0, 1: 92.0})["pattern"] == "uniform"
    assert verdict({0: 3.0, 1: 0.0})["pattern"] == "idle"
    assert verdict({})["pattern"] == "n/a"
    busy = {g: {"util_pct": 97.0, "power_w": 660.0, "power_limit_w": 700.0} for g in range(4)}
    assert "power limit" in verdict(loads_of(busy), busy)["text"]
    # a GPU whose utilization was not read: its power over its limit stands in
    assert loads_of({0: {"power_w": 350.0, "power_limit_w": 700.0}}) == {0: 50.0}


@needs_tesseract
@pytest.mark.parametrize("name", ["09_nvidia-smi_8gpu.png", "23_gpustat_1gpu.png"])
def test_a_real_screenshot_is_read_and_its_verdict_matches_the_telemetry(name):
    truth = next(p for p in json.loads((PICTURES / "truth.json").read_text())
                 if p["file"] == name)
    r = read_picture((PICTURES / name).read_bytes())
    assert r.tool == truth["tool"]
    got = {g.gpu: g.values for g in r.gpus}
    hits = [abs(got.get(t["gpu"], {}).get(f, -99) - t["printed"][f]) <= 1
            for t in truth["gpus"] for f in ("util_pct", "power_w")]
    assert sum(hits) >= 0.9 * len(hits), (got, truth["gpus"])
    # a confidence is the numbers' own, not dragged to 0 by a name or a frame character
    conf = [c for g in r.gpus for c in g.confidence.values()]
    assert sum(conf) / len(conf) > 0.5, conf
    tele = verdict({t["gpu"]: t["telemetry_util_pct"] for t in truth["gpus"]})
    mine = verdict(loads_of(got), got)
    assert (mine["pattern"], mine["hot_set"]) == (tele["pattern"], tele["hot_set"])


def test_what_is_not_a_monitor_or_not_a_picture_is_said_in_one_line(tmp_path, capsys):
    with pytest.raises(ScreenReadError, match="not a PNG or JPEG image"):
        read_picture(b"hello")
    blank = io.BytesIO()
    Image.new("RGB", (200, 80), "white").save(blank, "PNG")
    if shutil.which("tesseract"):
        r = read_picture(blank.getvalue())
        assert r.tool is None and not r.gpus and "no GPU monitor recognised" in r.notes[0]
    bad = tmp_path / "x.png"
    bad.write_bytes(b"not a png")
    assert main(["screenshot", "read", str(bad)]) == 2
    assert "x.png: not a PNG or JPEG image" in capsys.readouterr().err


def test_impossible_readings_are_left_out_and_one_bad_file_does_not_stop_the_rest(
        tmp_path, capsys):
    from tealeaves.data.screen.reconcile import _plausible
    from tealeaves.data.screen.values import GpuReading

    g = GpuReading(0, {"power_w": 4911.0, "power_limit_w": 700.0, "util_pct": 90.0,
                       "mem_used_mib": 9e9, "mem_total_mib": 143771.0},
                   {"power_w": 0.4, "util_pct": 0.4})
    assert _plausible([g]) == ["GPU 0 mem_used_mib 9e+09", "GPU 0 power_w 4911"]
    assert g.values == {"power_limit_w": 700.0, "util_pct": 90.0, "mem_total_mib": 143771.0}
    huge = tmp_path / "huge.png"  # 10,000 x 10,000: over the 64 M pixels read
    Image.new("1", (10_000, 10_000)).save(huge)
    bad = tmp_path / "x.png"
    bad.write_bytes(b"not a png")
    blank = tmp_path / "blank.png"
    Image.new("RGB", (200, 80), "white").save(blank)
    rc = main(["screenshot", "read", str(huge), str(bad), str(blank), "--json"])
    out, err = capsys.readouterr()
    assert rc == 2 and "huge.png: 10000 x 10000 pixels" in err and "x.png: not a PNG" in err
    got = json.loads(out)  # every file listed, a refused one with its error
    assert [r["file"] for r in got] == [str(huge), str(bad), str(blank)]
    assert "10000 x 10000 pixels" in got[0]["error"] and "tool" not in got[0]
    assert got[2]["tool"] is None and got[2]["gpus"] == []


def test_what_is_not_a_regular_file_is_refused_before_reading(tmp_path, capsys):
    """A FIFO would block a read forever and a sparse 3-GB file would be read whole: both
    are refused from the file system's word alone."""
    import os

    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    sparse = tmp_path / "sparse.png"
    with sparse.open("wb") as f:
        f.truncate(3 * 2**30)
    assert main(["screenshot", "read", str(fifo), str(sparse), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{fifo}: not a file" in err and f"{tmp_path}: not a file" in err
    assert f"{sparse}: 3072.0 MB is over the 20 MB limit" in err


@needs_tesseract
def test_a_picture_too_small_to_tell_zero_from_eight_gives_doubtful_values_and_no_verdict():
    """An 8-GPU nvidia-smi screenshot halved: Tesseract reads every 0 as 8 (GPU 0 as "GPU
    8", 700 W as 788 W).  No 0 was taught, so every digit is doubtful: the values are shown
    under 50 % sure, GPU 8 is put back as GPU 0, and no verdict is made of them."""
    from tealeaves.classifier.picture import summary

    img = Image.open(PICTURES / "08_nvidia-smi_8gpu.png")
    buf = io.BytesIO()
    img.resize((img.width // 2, img.height // 2), Image.LANCZOS).save(buf, "PNG")
    r = read_picture(buf.getvalue(), "half.png")
    assert [g.gpu for g in r.gpus] == list(range(8))
    for g in r.gpus:  # whatever was read, nothing wrong is called sure
        truth = {0: 95.0, 1: 0.0}.get(g.gpu)
        if truth is not None and g.values.get("util_pct") != truth:
            assert g.confidence["util_pct"] < 0.5, (g.gpu, g.values, g.confidence)
    s = summary(r)
    assert s["regions"][0]["verdict"]["pattern"] in ("n/a", "uneven")
    assert s["regions"][0]["verdict"]["hot_set"] in ([], [0, 2, 4, 5])


@needs_tesseract
def test_the_character_grid_reads_a_picture_whose_digits_tesseract_garbles():
    """Liberation Mono 12 on white: Tesseract alone reads dmon's 77 as 'T7' and 511 as
    'oft He' (no GPU of the eight parsed before the grid reader); the cell-by-cell reading
    gets every GPU's printed sm % and power."""
    name = "41_nvidia-smi_dmon_8gpu.png"
    truth = next(p for p in json.loads((PICTURES / "truth.json").read_text())
                 if p["file"] == name)
    r = read_picture((PICTURES / name).read_bytes())
    assert r.tool == "nvidia-smi dmon"
    got = {g.gpu: g.values for g in r.gpus}
    for t in truth["gpus"]:
        assert got[t["gpu"]]["util_pct"] == t["printed"]["util_pct"], (t, got)
        assert got[t["gpu"]]["power_w"] == t["printed"]["power_w"], (t, got)
    # each GPU is placed where its row is: the rows go down the picture in GPU order
    ys = [g.box[1] for g in r.gpus]
    assert ys == sorted(ys) and all(0 < y < 1 for y in ys)


@needs_tesseract
def test_the_screenshot_scorer_runs_small():
    """``tests/pictures/evaluate.py`` (the figures of the issue's note) on two pictures: it
    counts every printed value and scores the verdicts."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("evaluate", PICTURES / "evaluate.py")
    ev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ev)
    res = ev.evaluate(["05_nvidia-smi_4gpu.png", "37_nvidia-smi_dmon_4gpu.png"],
                      log=lambda s: None)
    assert res["all"]["pictures"] == 2 and res["all"]["values"] == 16
    assert res["all"]["within_1"] >= 15 and res["all"]["verdicts_match"] == 2, res


@needs_tesseract
def test_a_report_includes_a_screenshot_and_the_telemetry_of_its_moment(tmp_path):
    """``report --screenshot``: the picture's numbers and verdict, and the telemetry's
    verdict of its moment (a scrot name inside the trace's range), schema-checked."""
    from datetime import UTC, datetime

    import jsonschema

    from tealeaves.app.report.model import schema
    from tealeaves.data import bundled_trace_path
    from tealeaves.data.traces import read_trace

    ts = read_trace(bundled_trace_path()).samples["timestamp"]
    at = datetime.fromtimestamp(float(ts.min()) + 30.0, tz=UTC)
    pic = tmp_path / f"{at:%Y-%m-%d-%H%M%S}_1217x900_scrot.png"
    pic.write_bytes((PICTURES / "10_nvidia-smi_8gpu.png").read_bytes())
    from tealeaves.app.cli.report import screenshot_input
    from tealeaves.app.report.model import build_report, from_trace
    from tealeaves.app.report.out import report_bytes

    # what `report --screenshot PIC --tz UTC` does, the picture read once for both formats
    inp = from_trace(bundled_trace_path())
    inp.screenshots.append(screenshot_input(pic, "UTC"))
    report = build_report(inp)
    doc = json.loads(report_bytes(report, "json"))
    jsonschema.Draft202012Validator(schema()).validate(doc)
    (shot,) = doc["screenshots"]
    assert shot["tool"] == "nvidia-smi" and len(shot["gpus"]) == 8
    assert shot["capture_ts"] == pytest.approx(at.timestamp())
    util = {g["gpu"]: g["values"]["util_pct"] for g in shot["gpus"]}
    assert shot["regions"][0]["pattern"] == verdict(util)["pattern"] == "uneven"
    assert shot["telemetry"]["windows"] > 0 and shot["telemetry"]["pattern"] in (
        "uniform", "uneven", "idle")
    page = report_bytes(report, "html").decode()
    assert "<h2>Screenshots</h2>" in page and "picture, whole picture · GPUs 0, 1, 2" in page
    assert f"taken {at:%Y-%m-%d %H:%M:%S}" in page
    # the command: a picture it cannot read is refused in one line, nothing written
    bad = tmp_path / "notes.png"
    bad.write_text("not a picture")
    out = tmp_path / "r.json"
    assert main(["report", "--trace", str(bundled_trace_path()), "--screenshot", str(bad),
                 "--out", str(out)]) == 2 and not out.exists()


@needs_tesseract
@pytest.mark.parametrize("name", ["50_tealeaves-report_8gpu.png",
                                  "51_tealeaves-dashboard_8gpu.png"])
def test_tealeaves_own_pictures_are_read_and_their_verdict_matches_the_telemetry(name):
    """tealeaves' report (its Per GPU table) and its dashboard (each GPU's load band read
    from the pixels, ``app.figures.read_back``), eight GPUs with three busy."""
    from tealeaves.app.figures.read_back import read_back
    from tealeaves.classifier.picture import summary

    truth = next(p for p in json.loads((PICTURES / "truth.json").read_text())
                 if p["file"] == name)
    r = read_picture((PICTURES / name).read_bytes(), name, graphs=read_back)
    assert r.tool == truth["tool"]
    got = {g.gpu: g for g in r.gpus}
    for t in truth["gpus"]:
        for f, v in t["printed"].items():  # the report prints them; the dashboard none
            assert abs(got[t["gpu"]].values[f] - v) <= 1, (t, got[t["gpu"]])
    for g in r.gpus:  # a band's line read near the telemetry's load of the range
        tele = next(t["telemetry_util_pct"] for t in truth["gpus"] if t["gpu"] == g.gpu)
        if g.confidence["util_pct"] >= 0.5:
            assert abs(g.values["util_pct"] - tele) <= 8, (g, tele)
    tele = verdict({t["gpu"]: t["telemetry_util_pct"] for t in truth["gpus"]})
    mine = summary(r)["regions"][0]["verdict"]
    assert (mine["pattern"], mine["hot_set"]) == (tele["pattern"], tele["hot_set"]) == \
        ("uneven", [0, 3, 5])


def test_the_grid_readers_unsure_value_yields_and_a_misfit_grid_is_dropped():
    from tealeaves.data.screen.reconcile import _merge, _misfit, _reindex
    from tealeaves.data.screen.values import GpuReading

    def gpu(i, conf=0.9, box=(0.0, 0.1, 1.0, 0.12), **v):
        return GpuReading(i, dict(v), dict.fromkeys(v, conf), box)

    # "47°C" read on the grid as "477C" at confidence 0: Tesseract's sure 47 stands
    grid = [gpu(0, power_w=494.0)]
    grid[0].values["temp_c"], grid[0].confidence["temp_c"] = 477.0, 0.0
    (g,) = _merge(grid, [gpu(0, temp_c=47.0, power_w=490.0)])
    assert g.values == {"temp_c": 47.0, "power_w": 494.0}  # the sure grid value is kept
    # a grid a cell off ("Device 8 ... H288") contradicts Tesseract: not used
    ocr = [gpu(i, sm_clock_mhz=1980.0, temp_c=40.0 + i) for i in range(4)]
    assert not _misfit([gpu(i, sm_clock_mhz=1980.0, temp_c=40.0 + i) for i in range(4)], ocr)
    assert _misfit([gpu(i, sm_clock_mhz=1000.0, temp_c=90.0) for i in range(4)], ocr)
    assert _misfit([gpu(8), gpu(9)], ocr)  # none of Tesseract's indices
    # one index read twice on a row ("Device 3 ... Device 3 ... Device 5"): Tesseract's
    mine = [gpu(3, util_pct=94.0), gpu(3, util_pct=0.0), gpu(5, util_pct=98.0)]
    notes = _reindex(mine, [gpu(3), gpu(4), gpu(5)])
    assert [g.gpu for g in mine] == [3, 4, 5] and len(notes) == 1
    # an index the grid read that Tesseract read nowhere ("Device?8" for "Device 0"), in the
    # place of one the grid read nowhere: Tesseract's; an index both read elsewhere stays
    mine = [gpu(8, util_pct=0.0), gpu(1, util_pct=95.0)]
    notes = _reindex(mine, [gpu(0), gpu(1)])
    assert [g.gpu for g in mine] == [0, 1] and "taken as GPU 0" in notes[0]
    mine = [gpu(1, util_pct=0.0), gpu(0, util_pct=95.0)]
    assert _reindex(mine, [gpu(0), gpu(1)]) == [] and [g.gpu for g in mine] == [1, 0]
