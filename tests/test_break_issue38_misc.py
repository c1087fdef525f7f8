"""Break-it round 3 (issue 38), the smaller breaks: a one-sample store's report names the
store and what it holds, not ``--from/--to``; ``collect --replay`` refuses GPUs the trace does
not hold; an nvidia-smi picture with power ``N/A`` keeps the GPU (power NaN); a malformed
dashboard callback gets a 4xx, not a 500 with a traceback; near-idle windows are idle, not
imbalanced decode."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_nvml import FakeGpu, FakeNvml
from test_screen_read import SMI

from tealeaves.app.report.model import ReportError, from_store
from tealeaves.collectors.nvml import NvmlCollector, UnknownGpus
from tealeaves.data import bundled_trace_path
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import read_trace


def tealeaves(*args, timeout: float = 300):
    return subprocess.run([sys.executable, "-m", "tealeaves.app.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, check=False)


def _store(path: Path, rows: int | None = None) -> tuple[Path, tuple[float, float]]:
    """A store of the bundled trace (or of its first ``rows`` samples)."""
    tr = read_trace(bundled_trace_path())
    s = tr.samples if rows is None else tr.samples.iloc[:rows]
    with SampleStore(path) as store:
        store.put_devices(tr.devices)
        store.append(s)
        return path, store.time_span()


# -- 5. a one-sample store's report --------------------------------------------------------


@pytest.mark.parametrize("flags", [(), ("--from", "2020-01-01"), ("--to", "2030-01-01"),
                                   ("--from", "2020-01-01", "--to", "2030-01-01")])
def test_a_one_sample_store_says_it_holds_one_sample_whatever_the_range(tmp_path, flags):
    db, (t0, _) = _store(tmp_path / "one.db", rows=1)
    out = tmp_path / "r.json"
    r = tealeaves("report", "--store", db, *flags, "--out", out)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "holds one instant: one sample" in r.stderr and "needs a range" in r.stderr, r.stderr
    assert "--from" not in r.stderr and "--to" not in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
    # a --from at the sample itself blamed --from ("give an earlier --from": there is none)
    with pytest.raises(ReportError, match="holds one instant: one sample"):
        from_store(db, t0, None)


def test_a_store_of_one_staggered_sweep_is_one_sweep_not_a_3_ms_report(tmp_path):
    # each GPU row of a sweep carries its own stamp: the span is not 0, yet one sweep
    db, (t0, t1) = _store(tmp_path / "sweep.db", rows=2)
    assert t1 > t0
    with pytest.raises(ReportError, match=r"holds one instant: one sweep \(2 samples, one a GPU\)"):
        from_store(db)


def test_a_range_that_catches_one_sweep_says_so_and_what_the_store_holds(tmp_path):
    db, (t0, _) = _store(tmp_path / "s.db")
    with pytest.raises(ReportError,
                       match=r"it holds one instant: one sweep .*widen --from/--to"):
        from_store(db, t0 - 1.0, t0 + 0.01)


# -- 2. collect --replay --gpus ------------------------------------------------------------


def test_collect_replay_refuses_gpus_the_trace_does_not_hold(tmp_path):
    db = tmp_path / "c.db"
    r = tealeaves("collect", "--replay", bundled_trace_path(), "--gpus", "0,7,99",
                  "--duration", "1", "--speed", "100", "--store", db, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--gpus: GPUs 7, 99 are not in the replayed trace" in r.stderr, r.stderr
    assert "holds GPUs 0, 1" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not db.exists() and "stored" not in r.stdout  # nothing opened, nothing claimed


def test_collect_replay_gpus_replays_only_those_gpus(tmp_path):
    db = tmp_path / "c.db"
    r = tealeaves("collect", "--replay", bundled_trace_path(), "--gpus", "1",
                  "--duration", "1", "--speed", "100", "--store", db, timeout=120)
    assert r.returncode == 0, r.stderr
    with SampleStore(db, readonly=True) as store:
        assert set(store.read_range()["gpu"]) == {1}
        assert store.devices()["gpu"].tolist() == [1]


def test_nvml_collector_refuses_gpu_indices_nvml_does_not_see():
    nvml = FakeNvml([FakeGpu(), FakeGpu()])
    with pytest.raises(UnknownGpus, match=r"no GPU 5 on this host \(NVML sees 2 GPUs: 0-1\)"):
        NvmlCollector(nvml=nvml, gpus=[1, 5]).open()
    devices = NvmlCollector(nvml=FakeNvml([FakeGpu(), FakeGpu()]), gpus=[1]).open()
    assert devices["gpu"].tolist() == [1]


# -- 3. a picture with power N/A -----------------------------------------------------------

# the date line and the table head of test_screen_read's nvidia-smi text (one copy)
_SMI_HEAD = "".join(SMI.splitlines(keepends=True)[:8])


def _smi_text(rows: list[tuple[str, str, str]]) -> str:
    """nvidia-smi 580's table, one block per (power, cap, util) as printed."""
    out = _SMI_HEAD
    for i, (pw, cap, util) in enumerate(rows):
        out += (f"|   {i}  NVIDIA H200                    On  |   00000000:00:0{6 + i}.0 Off |"
                f"                    0 |\n"
                f"| N/A   58C    P0            {pw:>5} / {cap:>5} |   12923MiB / 143771MiB |"
                f"     {util:>3}      Default |\n"
                "|                                         |                        |"
                "             Disabled |\n"
                "+-----------------------------------------+------------------------+"
                "----------------------+\n")
    return out


def test_an_smi_or_gpustat_text_with_a_blank_power_keeps_the_gpu_without_a_power():
    from tealeaves.data.screen.tools import parse_text

    text = _smi_text([("590W", "700W", "97%"), ("N/A", "700W", "12%"), ("ERR!", "N/A", "N/A")])
    tool, gpus = parse_text(text)
    assert tool == "nvidia-smi" and [g.gpu for g in gpus] == [0, 1, 2]  # none dropped
    assert gpus[0].values["power_w"] == 590 and gpus[0].blank == ()
    assert "power_w" not in gpus[1].values and gpus[1].values["util_pct"] == 12
    assert gpus[1].values["power_limit_w"] == 700 and gpus[1].blank == ("power_w",)
    assert set(gpus[2].blank) == {"util_pct", "power_w", "power_limit_w"}
    assert gpus[2].values["mem_used_mib"] == 12923
    gpustat = ("vm  Wed Dec  2 04:59:10 2026  580.159.04\n"
               "[0] NVIDIA H200 | 59°C,  97 %,  690 / 700 W | 12922 / 143771 MB | python3\n"
               "[1] NVIDIA H200 | 41°C,  10 %,   ?? / 700 W | 12922 / 143771 MB | python3\n")
    tool, gpus = parse_text(gpustat)
    assert tool == "gpustat" and [g.gpu for g in gpus] == [0, 1]
    assert gpus[1].blank == ("power_w",) and gpus[1].values["power_limit_w"] == 700


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract-ocr is not installed")
def test_a_picture_with_power_na_keeps_that_gpu_with_no_power_and_none_borrowed(tmp_path):
    from PIL import Image, ImageDraw, ImageFont

    from tealeaves.data.screen.read import read_picture

    text = _smi_text([("590W", "700W", "97%"), ("N/A", "700W", "12%"), ("601W", "700W", "95%"),
                      ("ERR!", "700W", "3%")])
    font = ImageFont.truetype("DejaVuSansMono.ttf", 16)  # fonts-dejavu, as the pictures'
    lines = text.splitlines()
    img = Image.new("RGB", (int(max(font.getlength(ln) for ln in lines)) + 20,
                            22 * len(lines) + 20), "black")
    draw = ImageDraw.Draw(img)
    for k, ln in enumerate(lines):
        draw.text((10, 10 + 22 * k), ln, font=font, fill="white")
    pic = tmp_path / "smi_power_na.png"
    img.save(pic)
    r = read_picture(pic.read_bytes(), pic.name)
    got = {g.gpu: g for g in r.gpus}
    assert r.tool == "nvidia-smi" and sorted(got) == [0, 1, 2, 3], got  # 0 and 3 were lost
    for g, util in ((1, 12), (3, 3)):  # no power: not 0, not GPU 0's 590 W from another row
        assert "power_w" not in got[g].values and "power_w" in got[g].blank, got[g]
        assert got[g].values["util_pct"] == util
    assert got[0].values["power_w"] == 590 and got[2].values["power_w"] == 601
    r = tealeaves("screenshot", "read", pic, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "GPU 1: utilization 12 % " in r.stdout and "power n/a (printed blank)" in r.stdout


# -- 4. malformed dashboard callbacks ------------------------------------------------------


def _post(url: str, body) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url.rstrip("/") + "/_dash-update-component", data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:  # hang guard only
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _hover(t_ms, state, outputs=True) -> dict:
    """The hover panel's callback request as the browser sends it."""
    body = {"output": "tl-hover-panel.children",
            "inputs": [{"id": "tl-hover-t", "property": "data", "value": t_ms}],
            "state": [{"id": "tl-cursor", "property": "data", "value": state}],
            "changedPropIds": ["tl-hover-t.data"]}
    if outputs:
        body["outputs"] = {"id": "tl-hover-panel", "property": "children"}
    return body


def test_malformed_callback_requests_get_a_400_and_one_log_line_not_a_traceback(
        tmp_path, caplog):
    import logging
    import urllib.request

    from tealeaves.app.dashboard.server import start_in_thread

    db, (t0, _) = _store(tmp_path / "s.db")
    url, shutdown = start_in_thread(store_path=db, collect=False)
    try:
        with urllib.request.urlopen(url, timeout=60) as r:  # the page itself is served
            assert r.status == 200
        assert _post(url, _hover(None, {}))[0] == 204  # PreventUpdate keeps Dash's answer
        code, body = _post(url, _hover(t0 * 1000 + 500, {}))
        assert code == 200, body[:300]
        caplog.clear()
        with caplog.at_level(logging.INFO):
            bad = [_hover("garbage", {}),  # a value of the wrong type: ValueError
                   _hover(t0 * 1000 + 500, "zz"),  # a state of the wrong type
                   {**_hover(1.0, {}), "inputs": []},  # missing inputs
                   _hover(1.0, {}, outputs=False),  # no outputs
                   {"output": "nope.children", "outputs": {"id": "nope", "property": "children"},
                    "inputs": [], "changedPropIds": []},  # no such callback
                   {}, b"{{{not json"]
            answers = [_post(url, b) for b in bad]
    finally:
        shutdown()
    for (code, body), b in zip(answers, bad, strict=True):
        assert code == 400, (b, code, body[:300])  # was 500 with a traceback in the log
        assert "malformed request" in json.loads(body)["error"], body
    assert "tl-hover-panel.children" in json.loads(answers[0][1])["error"]
    assert "ValueError" in json.loads(answers[0][1])["error"]
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], \
        [r.getMessage()[:200] for r in caplog.records]
    said = [r for r in caplog.records if "_dash-update-component" in r.getMessage()]
    assert len(said) == len(bad), [r.getMessage()[:200] for r in said]  # one line each
    assert all("\n" not in r.getMessage() for r in said)


# -- 1. near-idle windows ------------------------------------------------------------------


def _near_idle_samples(n: int, hz: float = 4.0, seconds: float = 30.0, seed: int = 0,
                       busy_gpu: int | None = None):
    """n H200s near idle (issue 38's windows): SM ~2 %, tensor and DRAM ~0.3 % each (gamma
    scatter), gpu_util 0-3 %; ``busy_gpu`` does real low-load work instead."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    t0 = 1796047789.0
    ts = t0 + np.arange(int(hz * seconds)) / hz
    k, rows = len(ts), []
    for g in range(n):
        work = g == busy_gpu
        rows.append(pd.DataFrame({
            "timestamp": ts + g * 1e-4, "monotonic": ts - t0, "host": "h", "gpu": g,
            "uuid": f"GPU-{g}",
            "gpu_util": rng.normal(60, 3, k) if work else rng.choice([0.0, 0.0, 1, 2, 3], k),
            "sm_active": rng.normal(20, 1, k) if work else np.clip(rng.normal(2, .6, k), 0, None),
            "tensor_active": rng.normal(4, .3, k) if work else rng.gamma(1.0, 0.3, k),
            "dram_active": rng.normal(8, .5, k) if work else rng.gamma(1.0, 0.3, k),
            "power_w": rng.normal(115, 3, k), "sm_clock_mhz": 1980.0, "mem_used_bytes": 7e10}))
    samples = pd.concat(rows).sort_values(["timestamp", "gpu"]).reset_index(drop=True)
    devices = pd.DataFrame({"host": "h", "gpu": range(n), "uuid": [f"GPU-{g}" for g in range(n)],
                            "name": "NVIDIA H200", "power_limit_w": 700.0,
                            "max_sm_clock_mhz": 1980.0, "mem_total_bytes": 1.5e11,
                            "gpm_supported": True})
    return samples, devices


@pytest.mark.parametrize("n", [8, 64])
def test_near_idle_windows_are_idle_not_imbalanced_decode_with_confidence(n):
    import numpy as np

    from tealeaves.classifier import classify_samples
    from tealeaves.classifier.summary import imbalance_summary

    samples, devices = _near_idle_samples(n)
    w = classify_samples(samples, devices)
    # today: 87 of 96 decode windows of 64 GPUs imbalanced, hot sets of 10-13 GPUs rotating
    assert not w["imbalanced"].any(), w.loc[w["imbalanced"], "hot_set"].head().tolist()
    assert (w["hot_set"] == "").all()
    assert not np.isfinite(w["imbalance_ratio"].astype(float)).any()
    assert not np.isfinite(w["straggler_tax"].astype(float)).any()
    from tealeaves.classifier import NEAR_IDLE_CONFIDENCE

    busy = w[w["phase"] != "idle"]  # a phase named near idle is a guess, and says so
    assert (busy["confidence"] <= NEAR_IDLE_CONFIDENCE + 1e-12).all()
    assert busy["verdict"].str.startswith("near idle").all()
    s = imbalance_summary(w)
    if s["decode_windows"]:
        assert s["figures_text"].startswith("idle: no imbalance figures, nothing to be uneven")
    assert s["hot_pattern"] == "none"


def test_one_gpu_working_among_near_idle_ones_is_still_judged():
    from tealeaves.classifier.features import WindowFeatures
    from tealeaves.classifier.imbalance import imbalance_terms

    samples, devices = _near_idle_samples(16, busy_gpu=5)
    terms = imbalance_terms(WindowFeatures(0.5, devices).transform(samples))
    assert (terms["hot_set"] == (5,)).mean() > 0.9, terms["hot_set"].value_counts().head()
    assert (terms["imbalance_ratio"] > 5).all()


def test_near_idle_needs_idle_pipes_and_no_busy_gpu():
    import numpy as np

    from tealeaves.classifier.imbalance import IDLE_BUSY, IDLE_WORK, near_idle

    pipes = np.array([[0.3, 0.6], [0.3, 0.6], [3.0, 0.2], [0.3, np.nan], [np.nan, np.nan]])
    busy = np.array([[1.0, 2.0], [80.0, 1.0], [1.0, 1.0], [np.nan, np.nan], [0.0, 0.0]])
    # idle; launch-bound decode (pipes near 0, kernels running); work; pipes alone; unread
    assert near_idle(pipes, busy).tolist() == [True, False, False, True, False]
    assert IDLE_WORK == 1.0 and IDLE_BUSY == 5.0


def test_the_idle_bounds_hold_on_the_bundled_traces_idle_stretches():
    """IDLE_WORK and IDLE_BUSY's source: every 0.5-s window of a labelled idle stretch of the
    bundled traces reads under them (tensor + DRAM max 0.73 points, gpu_util max 2.9 %)."""
    import numpy as np
    import pandas as pd

    from tealeaves.classifier.imbalance import IDLE_BUSY, IDLE_WORK
    from tealeaves.classifier.windows import per_gpu_means

    traces = Path(bundled_trace_path()).parent
    seen = []
    for labels in sorted(traces.glob("*.labels.csv")):
        lab = pd.read_csv(labels)
        idle = lab[lab["phase"] == "idle"]
        if not len(idle) or not labels.with_name(labels.name.replace(".labels.csv",
                                                                     ".parquet")).exists():
            continue
        m = per_gpu_means(read_trace(labels.with_name(labels.name.replace(
            ".labels.csv", ".parquet"))).samples, 0.5).reset_index()
        inside = np.zeros(len(m), dtype=bool)
        for a, b in zip(idle["start"], idle["end"], strict=True):
            inside |= (m["start"] >= a + 0.5) & (m["start"] + 0.5 <= b - 0.5)
        seen.append(m[inside])
    m = pd.concat(seen)
    assert len(m) >= 500
    assert (m["tensor_active"] + m["dram_active"]).max() < IDLE_WORK
    assert m["gpu_util"].max() < IDLE_BUSY


def test_the_dashboard_calls_a_near_idle_window_idle_not_unknown():
    from tealeaves.app.dashboard.panels import _ratio_text

    near = {"imbalance_ratio": float("nan"), "load_mean": 2.0, "tensor_active_mean": 0.3,
            "dram_active_mean": 0.3}
    assert _ratio_text(near) == "– (idle)"  # was "–": as if unread
    assert _ratio_text({**near, "tensor_active_mean": 30.0}) == "–"


def test_a_path_that_is_no_page_answers_404(tmp_path):
    """Dash's catch-all served the live page for any path (``/nonexistent``: 200); the pages,
    their trailing-slash forms and Dash's own routes still answer."""
    from tealeaves.app.dashboard.factory import create_app
    from tealeaves.data.store import SampleStore

    with SampleStore(tmp_path / "s.db") as st:
        client = create_app(st).server.test_client()
        got = {p: client.get(p).status_code
               for p in ("/", "/screenshots", "/screenshots/", "/nonexistent", "/a/b",
                         "/_dash-layout", "/assets/live.js")}
    assert got == {"/": 200, "/screenshots": 200, "/screenshots/": 200, "/nonexistent": 404,
                   "/a/b": 404, "/_dash-layout": 200, "/assets/live.js": 200}
