"""What the screenshot verdicts claim is true (issue 35): a picture is compared with the
telemetry only when the GPUs match, an agreement needs the loads to agree too, and a region of
one GPU has no uniform/uneven verdict anywhere on the screen."""

from __future__ import annotations

import json
import math
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tealeaves.classifier.picture import summary
from tealeaves.data.screen.read import PictureReading
from tealeaves.data.screen.values import GpuReading

PICTURES = Path(__file__).with_name("pictures")
needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None,
                                     reason="tesseract-ocr is not installed")


def _picture(utils: list[float]) -> PictureReading:
    """An nvidia-smi reading of ``len(utils)`` GPUs, one row each down the picture."""
    n = len(utils)
    gpus = [GpuReading(g, {"util_pct": u, "power_w": 600.0, "power_limit_w": 700.0},
                       {"util_pct": 1.0, "power_w": 1.0, "power_limit_w": 1.0},
                       (0.0, (g + 0.4) / n, 1.0, (g + 0.6) / n)) for g, u in enumerate(utils)]
    return PictureReading("nvidia-smi", gpus)


def _page_text(reading: PictureReading, regions, telemetry) -> str:
    """The Screenshots page's reading panel (``views.picture_reading``) as text."""
    from tealeaves.app.dashboard.screenshots.views import picture_reading

    def text(node) -> str:
        if isinstance(node, str | int | float):
            return str(node)
        if isinstance(node, list | tuple):
            return "".join(text(c) for c in node)
        kids = getattr(node, "children", None)
        body = text(kids) if kids is not None else ""
        return body + ("\n" if type(node).__name__ == "Div" else "")

    return text(picture_reading(summary(reading, regions), telemetry))


# the telemetry of an idle 2-GPU moment: loads the classifier calls idle, but >= 10 %
IDLE_2 = {0: 12.0, 1: 11.0}


@pytest.mark.parametrize("tele", [IDLE_2, {0: math.nan, 1: math.nan}])
def test_an_8_gpu_picture_is_not_compared_with_2_gpu_telemetry(tele):
    """An 8-GPU picture at 90-97 % on 2-GPU idle telemetry: never "agrees"; it says why it
    was not compared."""
    text = _page_text(_picture([90, 97, 93, 95, 91, 96, 94, 92]), [], [tele])
    assert "agrees" not in text, text
    assert "the picture shows 8 GPUs, the telemetry 2: not compared" not in text  # one way
    assert "not compared with the telemetry: the picture shows 8 GPUs, the telemetry 2" \
        in text, text


def test_a_busy_picture_never_agrees_with_idle_telemetry_of_the_same_gpus():
    """Two GPUs at 90 % in the picture, 11-12 % in the telemetry: both "uniform", but the
    loads differ, so the page says they disagree and on what."""
    text = _page_text(_picture([90, 92]), [], [IDLE_2])
    assert "agrees" not in text, text
    assert "disagree on the load: GPU 0 90 % in the picture, 12 % in the telemetry" in text, \
        text
    # and where they do agree, it says on what
    ok = _page_text(_picture([90, 92]), [], [{0: 88.0, 1: 91.0}])
    assert "the telemetry of that moment agrees: picture uniform (90-92 %), telemetry " \
        "uniform (88-91 %)" in ok, ok


def test_halves_of_one_gpu_each_claim_no_uniform_verdict_anywhere():
    """A 2-GPU picture split in halves: each half holds one GPU, and no line on the panel
    calls a half "uniform" (the half is compared with its own GPU's telemetry)."""
    from tealeaves.app.dashboard.screenshots.model import halves

    tele = {0: 80.0, 1: 20.0}
    text = _page_text(_picture([95, 94]), halves(), [tele, tele, tele])
    lines = [ln for ln in text.splitlines() if "region" in ln]
    assert len(lines) == 4, text  # each half: its verdict and its comparison
    for ln in lines:  # no claim of a pattern ("picture uniform", "uniform: every GPU ...")
        claims = ln.replace("no uniform/uneven verdict", "")
        assert "uniform" not in claims and "uneven" not in claims, ln
    assert "picture, region 1 (top) · GPUs 0: one GPU read (GPU 0), at 95 %: no " \
        "uniform/uneven verdict" in text, text
    assert "region 2 (bottom): the picture and the telemetry disagree on the load: GPU 1 " \
        "94 % in the picture, 20 % in the telemetry" in text, text


def test_the_cli_halves_say_one_gpu_not_uniform():
    """``screenshot read --halves``: a half of one GPU has the "one GPU" pattern (JSON) and
    its text says there is no uniform/uneven verdict."""
    s = summary(_picture([95, 94]), [{"name": "top half", "box": [0.0, 0.0, 1.0, 0.5]},
                                     {"name": "bottom half", "box": [0.0, 0.5, 1.0, 1.0]}])
    whole, top, bottom = s["regions"]
    assert whole["verdict"]["pattern"] == "uniform"
    for half in (top, bottom):
        assert half["verdict"]["pattern"] == "one GPU"
        assert "no uniform/uneven verdict" in half["verdict"]["text"]


@needs_tesseract
def test_a_report_does_not_compare_an_8_gpu_picture_with_2_gpu_telemetry(tmp_path):
    """``report --screenshot``: a real 8-GPU nvidia-smi picture taken inside the bundled
    2-GPU trace's range is read, and the report says why it was not compared."""
    import jsonschema

    from tealeaves.app.cli.report import screenshot_input
    from tealeaves.app.report.model import build_report, from_trace, schema
    from tealeaves.app.report.out import report_bytes
    from tealeaves.data import bundled_trace_path
    from tealeaves.data.traces import read_trace

    ts = read_trace(bundled_trace_path()).samples["timestamp"]
    at = datetime.fromtimestamp(float(ts.min()) + 30.0, tz=UTC)
    pic = tmp_path / f"{at:%Y-%m-%d-%H%M%S}_1217x900_scrot.png"
    pic.write_bytes((PICTURES / "10_nvidia-smi_8gpu.png").read_bytes())
    inp = from_trace(bundled_trace_path())
    inp.screenshots.append(screenshot_input(pic, "UTC"))
    doc = json.loads(report_bytes(build_report(inp), "json"))
    jsonschema.Draft202012Validator(schema()).validate(doc)
    (shot,) = doc["screenshots"]
    assert len(shot["gpus"]) == 8 and shot["telemetry"]["windows"] > 0
    assert shot["telemetry"]["disagreement"] == (
        "not compared with the telemetry: the picture shows 8 GPUs, the telemetry 2"), shot


@needs_tesseract
def test_the_reader_reads_every_gpu_band_of_its_own_8_gpu_dashboard():
    """tealeaves' 8-GPU dashboard picture (tests/pictures, three GPUs busy): every band is
    read, the idle GPU 1 too (its thin line drawn between two pixel rows, in neither row
    the GPU's own colour), each near the telemetry's load."""
    from tealeaves.app.figures.read_back import read_back
    from tealeaves.data.screen.read import read_picture

    name = "51_tealeaves-dashboard_8gpu.png"
    truth = next(p for p in json.loads((PICTURES / "truth.json").read_text())
                 if p["file"] == name)
    r = read_picture((PICTURES / name).read_bytes(), name, graphs=read_back)
    assert [g.gpu for g in r.gpus] == list(range(8)), r.gpus
    for g, t in zip(r.gpus, truth["gpus"], strict=True):
        assert abs(g.values["util_pct"] - t["telemetry_util_pct"]) <= 8, (g, t)


@needs_tesseract
def test_the_reader_calls_a_70_vs_30_dashboard_picture_uneven(browser, tmp_path):
    """A real screenshot (headless Chromium, 1366 x 768, the "all" view) of tealeaves'
    dashboard of an 8-GPU store where GPUs 2 and 5 run at 70 % SM active and the others at
    30 %: every band is read, and the verdict is uneven with GPUs 2 and 5 hot."""
    import numpy as np
    from conftest import open_live_page

    from tealeaves.app.dashboard import ids
    from tealeaves.app.dashboard.server import start_in_thread
    from tealeaves.app.figures.read_back import read_back
    from tealeaves.data import bundled_trace_path
    from tealeaves.data.screen.read import read_picture
    from tealeaves.data.store import SampleStore
    from tealeaves.data.traces import read_trace

    tr = read_trace(bundled_trace_path())
    one = tr.samples[tr.samples["gpu"] == 0]
    one = one[one["timestamp"] < float(one["timestamp"].min()) + 30.0]
    parts, devs = [], []
    rng = np.random.default_rng(7)
    for g in range(8):
        p = one.copy()
        load = 70.0 if g in (2, 5) else 30.0
        for col in ("sm_active", "gpu_util"):
            if col in p:
                p[col] = load + rng.normal(0.0, 1.0, len(p))
        p["gpu"] = g
        p["uuid"] = f"GPU-{g:08d}-0000-0000-0000-000000000000"
        parts.append(p)
        d = tr.devices.iloc[:1].copy()
        d["gpu"], d["uuid"] = g, p["uuid"].iloc[0]
        devs.append(d)
    import pandas as pd

    db = tmp_path / "seventy.db"
    with SampleStore(db) as st:
        st.put_devices(pd.concat(devs, ignore_index=True))
        st.append(pd.concat(parts, ignore_index=True))
    url, stop = start_in_thread(store_path=db, collect=False)
    try:
        page, errors = open_live_page(browser, url, 1366, 768)
        assert not errors, errors
        note = f"document.querySelector('#{ids.VIEW_NOTE}').innerText"
        landed = (f"() => document.querySelector('#{ids.PRESET_ALL}').className"
                  f".includes('tl-btn-on') && /^\\d{{4}}-\\d\\d-\\d\\d .*lanes/.test({note})")
        # This test is about reading the picture; the click's landing is the dashboard
        # tests' (test_a_preset_click_batched_with_a_redraws_relayout_still_lands: a click
        # batched with a redraw's relayout was lost, which is how, twice on a loaded CI, the
        # view still followed 150 s after one click).  Should another cause lose a click, a
        # user clicks again, and so does this test, up to three times.
        for attempt in range(3):
            page.click(f"#{ids.PRESET_ALL}")
            try:
                page.wait_for_function(landed, timeout=60_000)
                break
            except Exception as e:  # say what the page showed instead
                if attempt == 2:
                    raise AssertionError(
                        f"the 'all' view did not land after 3 clicks: note "
                        f"{page.evaluate(f'() => {note}')!r}, status "
                        f"{page.inner_text(f'#{ids.STATUS}')!r}, errors {errors}") from e
        gd = "document.querySelector('#tl-graph .js-plotly-plot')"
        page.wait_for_function(f"() => {gd} && {gd}._fullData.some(t => t.name === 'GPU 7')",
                               timeout=60_000)
        shot = page.screenshot()
        page.close()
    finally:
        stop()
    r = read_picture(shot, "dashboard.png", graphs=read_back)
    assert r.tool == "tealeaves dashboard", r.notes
    assert [g.gpu for g in r.gpus] == list(range(8)), r.gpus
    v = summary(r)["regions"][0]["verdict"]
    assert (v["pattern"], v["hot_set"]) == ("uneven", [2, 5]), (v, r.gpus)


def test_screenshot_read_shows_a_progress_bar_on_a_terminal_and_none_when_piped():
    """``screenshot read`` takes seconds a picture: on a terminal a bar on stderr says which
    picture it reads; piped, stdout holds the reading alone (no bar)."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    if shutil.which("tesseract") is None:
        pytest.skip("tesseract is missing (apt-get install tesseract-ocr)")
    pic = Path(__file__).parent / "pictures" / "02_nvidia-smi_2gpu.png"
    cmd = [sys.executable, "-m", "tealeaves.app.cli", "screenshot", "read", str(pic)]
    piped = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0, piped.stderr
    assert "reading" not in piped.stderr and "picture/s" not in piped.stderr
    assert piped.stdout.startswith(f"{pic}: nvidia-smi, 2 GPUs read")
    main_fd, tty_fd = pty.openpty()
    # a terminal of 24 x 120 (a pty starts at 0 x 0, where tqdm draws nothing)
    fcntl.ioctl(tty_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    p = subprocess.Popen(cmd, stdin=tty_fd, stdout=subprocess.DEVNULL, stderr=tty_fd)
    os.close(tty_fd)
    seen = b""
    while True:
        try:
            chunk = os.read(main_fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    assert p.wait(timeout=300) == 0
    os.close(main_fd)
    text = seen.decode(errors="replace")
    assert "reading" in text and "02_nvidia-smi_2gpu.png: OCR" in text, text
