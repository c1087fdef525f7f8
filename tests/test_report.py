"""Imbalance reports from the bundled real H200 trace: the numbers against the classifier's own
windows, JSON and CSV against the schema, the HTML opened offline in headless Chromium, the PDF
turned into PNG pages, hostile names rendered inert, the expert section, progress on long
ranges, refusals, and the dashboard's Export button."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest

from tealeaves.app.report.model import (
    SCHEMA_VERSION,
    ReportError,
    build_report,
    csv_rows,
    from_store,
    from_trace,
    schema,
)
from tealeaves.app.report.out import report_bytes
from tealeaves.classifier import classify_samples
from tealeaves.data import bundled_labels_path, bundled_trace_path
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import read_trace

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--headless", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                    reason=f"{CHROMIUM} is missing (Debian's chromium package)")


def tealeaves(*args):
    return subprocess.run([sys.executable, "-m", "tealeaves.app.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300, check=False)


def _stored(path: Path) -> tuple[Path, tuple[float, float]]:
    """A store holding the bundled real trace; its path and time span."""
    tr = read_trace(bundled_trace_path())
    with SampleStore(path) as store:
        store.put_devices(tr.devices)
        store.append(tr.samples)
        return path, store.time_span()


@pytest.fixture(scope="module")
def report():
    return build_report(from_trace(bundled_trace_path()), labels=bundled_labels_path())


def _validator():
    s = schema()
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(s, format_checker=jsonschema.FormatChecker())


def test_report_numbers_are_the_classifiers_windows(report):
    """The straggler tax, imbalance and hot GPU come from the same windows the classifier
    labels on that range."""
    tr = read_trace(bundled_trace_path())
    w = classify_samples(tr.samples, tr.devices)
    dec = w[w["phase"] == "decode"]
    s = report.data["summary"]
    assert s["windows"] == len(w) and s["decode_windows"] == len(dec) > 50
    assert s["straggler_tax"] == pytest.approx(dec["straggler_tax"].dropna().mean())
    assert s["imbalance_ratio"] == pytest.approx(dec["imbalance_ratio"].dropna().mean())
    flagged = w.loc[w["imbalanced"], "hot_gpu"].astype(int).value_counts()
    assert s["imbalanced_windows"] == int(flagged.sum()) > 0
    assert s["hot_gpus"] == {str(g): int(n) for g, n in flagged.items()}
    assert s["hot_gpu"] == int(flagged.index[0])
    for p in ("idle", "prefill", "decode"):
        assert s["phase_time_s"][p] == pytest.approx((w["phase"] == p).sum() * 0.5)
    hot_s = {g["gpu"]: g["hot_s"] for g in report.data["gpus"]}
    assert hot_s == {int(g): n * 0.5 for g, n in flagged.items()}
    top = report.data["top_windows"]
    assert [t["imbalance_ratio"] for t in top] == sorted((t["imbalance_ratio"] for t in top),
                                                         reverse=True)
    assert report.data["labels"]["accuracy"] >= 0.95  # the bundled trace's ground truth


def test_json_and_csv_follow_the_schema(report):
    v = _validator()
    doc = json.loads(report_bytes(report, "json"))
    v.validate(doc)
    assert doc["schema_version"] == SCHEMA_VERSION == 2
    assert doc["provenance"]["classifier"]["held_out"]
    assert doc["provenance"]["sources"][0]["sha256"] and doc["provenance"]["driver"]
    text = report_bytes(report, "csv").decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows == csv_rows(report) and len(rows) > 100
    row_schema = {**schema(), **schema()["$defs"]["csv_row"]}
    row_v = jsonschema.Draft202012Validator(row_schema)
    for r in rows:
        row_v.validate(r)
    by = {(r["section"], r["item"], r["metric"]): r for r in rows}
    tax = by[("summary", "", "straggler_tax")]
    assert float(tax["value"]) == pytest.approx(doc["summary"]["straggler_tax"])
    assert tax["unit"] == "share"
    # a broken document is caught: the schema is not a formality
    bad = json.loads(json.dumps(doc))
    bad["summary"]["hot_pattern"] = "sometimes"
    with pytest.raises(jsonschema.ValidationError):
        v.validate(bad)


def test_the_summary_gives_the_ranges_phase_shares_and_what_the_verdicts_stood_on(report):
    """Issue 34: the summary holds the range's shares of time (the windows' mean shares) and
    what the verdicts stood on; each top window its shares and verdict; JSON, CSV and HTML
    say so, and a report made before them still validates."""
    from tealeaves.app.report.html import render_html

    tr = read_trace(bundled_trace_path())
    w = classify_samples(tr.samples, tr.devices)
    s = report.data["summary"]
    for p in ("idle", "prefill", "decode"):
        assert s["phase_shares"][p] == pytest.approx(w[f"share_{p}"].mean())
    assert s["phase_shares_source"] == w.attrs["shares"]
    assert s["inputs"]["text"] == w.attrs["inputs"]["text"]
    assert s["inputs"]["rate_hz"] == pytest.approx(10.0, rel=0.05)  # GPM: 10 Hz on H200s
    by_start = w.set_index("start")
    for t in report.data["top_windows"]:
        row = by_start.loc[t["start"]]
        assert t["verdict"] == row["verdict"]
        assert t["share_decode"] == pytest.approx(row["share_decode"])
    doc = json.loads(report_bytes(report, "json"))
    v = _validator()
    v.validate(doc)
    old = json.loads(json.dumps(doc))  # as a report written before issue 34
    for k in ("phase_shares", "phase_shares_source", "inputs"):
        del old["summary"][k]
    for t in old["top_windows"]:
        for k in ("share_idle", "share_prefill", "share_decode", "verdict"):
            del t[k]
    v.validate(old)
    rows = {(r["section"], r["item"], r["metric"]): r for r in csv_rows(report)}
    assert float(rows[("summary", "decode", "phase_shares")]["value"]) == pytest.approx(
        s["phase_shares"]["decode"])
    assert rows[("summary", "rate_hz", "inputs")]["unit"] == "Hz"
    assert rows[("summary", "counters", "inputs")]["value"].startswith("sm_active,")
    assert rows[("top_window", "1", "verdict")]["value"] == report.data["top_windows"][0][
        "verdict"]
    html = render_html(report)
    assert f"The verdicts stood on {s['inputs']['text']}." in html
    assert "Phase shares of the range&#39;s time: " in html and "<th>verdict</th>" in html


def test_schema_doc_names_every_field():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "report-schema.md").read_text()
    s = schema()

    def names(node):
        for k, sub in (node.get("properties") or {}).items():
            yield k
            yield from names(sub)
            if isinstance(sub.get("items"), dict):
                yield from names(sub["items"])
    missing = sorted({n for n in names(s) if f"`{n}`" not in doc})
    missing += [n for n in names(s["$defs"]["csv_row"]) if f"`{n}`" not in doc]
    assert not missing, missing


@needs_chromium
def test_html_is_self_contained_and_draws_offline(report, tmp_path):
    from playwright.sync_api import sync_playwright

    page_file = tmp_path / "r.html"
    page_file.write_bytes(report_bytes(report, "html"))
    asked: list[str] = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        ctx = b.new_context(offline=True)

        def route(r):
            if r.request.url.startswith("file:"):
                r.continue_()
            else:
                asked.append(r.request.url)
                r.abort()
        ctx.route("**/*", route)
        page = ctx.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_file.as_uri())
        page.wait_for_function("() => window.Plotly && document.querySelectorAll("
                               "'.plotly-graph-div').length >= 2 && Array.from(document."
                               "querySelectorAll('.plotly-graph-div')).every(d => d._fullLayout)",
                               timeout=30_000)
        n_heat = page.evaluate("() => document.querySelectorAll('.heatmaplayer image, "
                               ".hm image').length")
        text = page.inner_text("body")
        b.close()
    assert not asked and not errors, (asked, errors)
    assert n_heat >= 1  # the per-GPU load heatmap was drawn
    s = report.data["summary"]
    assert f"{s['straggler_tax'] * 100:.1f} %" in text and "Most imbalanced decode windows" in text
    assert "NVIDIA H200" in text and "580.159.04" in text


@needs_chromium
def test_pdf_and_png_by_one_command_each(tmp_path):
    import pypdfium2 as pdfium
    from PIL import Image

    for fmt in ("pdf", "png"):
        out = tmp_path / f"r.{fmt}"
        r = tealeaves("report", "--trace", bundled_trace_path(), "--out", out)
        assert r.returncode == 0, r.stderr
        assert f"wrote {out} ({fmt}" in r.stdout
        assert f"rendering {out} with Chromium" in r.stderr  # not seconds of silence
    pdf = pdfium.PdfDocument(str(tmp_path / "r.pdf"))
    try:
        assert 1 <= len(pdf) <= 6
        first = pdf[0].render(scale=1.0).to_pil().convert("RGB")
        text = pdf[0].get_textpage().get_text_range()
    finally:
        pdf.close()
    assert "tealeaves imbalance report" in text and "STRAGGLER TAX" in text.upper()
    px = np.asarray(first, dtype=int)
    blue = (px[..., 2] > 180) & (px[..., 0] < 90)  # decode bars of the ribbon
    assert blue.sum() > 200, "no phase ribbon drawn on page 1"
    png = Image.open(tmp_path / "r.png")
    assert png.width >= 1400 and png.height > png.width  # the whole page, at 2x


def _hostile_trace(tmp_path) -> Path:
    tr = read_trace(bundled_trace_path())
    dev = tr.devices.copy()
    dev["name"] = "<script>window.__pwned=1</script>"
    dev["host"] = "<img src=x onerror=\"window.__pwned=2\">"
    samples = tr.samples.copy()
    samples["host"] = dev["host"].iloc[0]
    path = tmp_path / "hostile.parquet"
    from tealeaves.data.traces import Trace, write_trace

    write_trace(path, Trace(samples, dev, tr.meta))
    return path


@needs_chromium
def test_a_gpu_name_holding_script_renders_inert(tmp_path):
    from playwright.sync_api import sync_playwright

    rep = build_report(from_trace(_hostile_trace(tmp_path)))
    html = report_bytes(rep, "html").decode()
    assert "<script>window.__pwned" not in html and "onerror=\"window" not in html
    page_file = tmp_path / "h.html"
    page_file.write_text(html)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = b.new_page()
        page.goto(page_file.as_uri())
        page.wait_for_function("() => window.Plotly && document.querySelector("
                               "'.plotly-graph-div')._fullLayout", timeout=30_000)
        pwned = page.evaluate("() => window.__pwned")
        text = page.inner_text("body")
        b.close()
    assert pwned is None
    assert "<script>window.__pwned=1</script>" in text  # shown as text


def test_expert_section_from_counts_and_other_shapes_refused(tmp_path):
    rng = np.random.default_rng(0)
    count = rng.poisson(50, size=(3, 4, 16)).astype(float)
    count[:, :, 0] *= 20  # expert 0 hot in every layer: its EP rank (GPU 0 at EP 4) too
    rep = build_report(from_trace(bundled_trace_path()), experts=count, n_gpus=4, ep_size=4)
    ex = rep.data["experts"]
    _validator().validate(rep.data)
    assert (ex["passes"], ex["layers"], ex["experts"]) == (3, 4, 16)
    assert ex["hot_gpu"] == 0 and ex["balancedness"] < 0.6
    assert ex["balancedness_greedy"] > ex["balancedness"]
    assert "estimate" in ex["estimate_note"]
    assert sum(ex["gpu_share"]) == pytest.approx(1.0)
    html = report_bytes(rep, "html").decode()
    assert "greedy placement (estimate)" in html
    with pytest.raises(ReportError, match=r"\[passes, layers, experts\]"):
        build_report(from_trace(bundled_trace_path()), experts=count[0])
    with pytest.raises(ReportError, match="does not divide"):
        build_report(from_trace(bundled_trace_path()), experts=count, n_gpus=4, ep_size=3)


def test_expert_dump_through_the_command(tmp_path):
    torch = pytest.importorskip("torch", reason="torch is needed to write and read an SGLang "
                                                "expert dump")
    dump = tmp_path / "expert_distribution.pt"
    torch.save({"logical_count": torch.randint(0, 100, (2, 3, 8))}, dump)
    out = tmp_path / "r.json"
    r = tealeaves("report", "--trace", bundled_trace_path(), "--experts", dump, "--tp", "2",
                  "--ep", "2", "--out", out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["experts"]["layers"] == 3 and doc["experts"]["file"] == str(dump)
    flat = tmp_path / "flat.pt"
    torch.save({"logical_count": torch.randint(0, 100, (3, 8))}, flat)
    r = tealeaves("report", "--trace", bundled_trace_path(), "--experts", flat, "--out", out)
    assert r.returncode == 2 and str(flat) in r.stderr and "got shape (3, 8)" in r.stderr


def test_long_ranges_show_progress_and_bad_requests_are_refused(tmp_path, capsys, monkeypatch):
    from tealeaves.app.report import model as report_mod

    # pages of 7,001 rows: equal timestamps (one per GPU) straddle the page edges
    monkeypatch.setattr(report_mod, "READ_CHUNK_ROWS", 7_001)
    monkeypatch.setattr(report_mod, "PROGRESS_AFTER_ROWS", 10_000)
    tr = read_trace(bundled_trace_path())
    s = tr.samples
    span = float(s["timestamp"].max() - s["timestamp"].min()) + 0.5
    db = tmp_path / "long.db"
    with SampleStore(db) as store:
        store.put_devices(tr.devices)
        for i in range(8):  # 13 minutes
            store.append(s.assign(timestamp=s["timestamp"] + i * span,
                                  monotonic=s["monotonic"] + i * span))
        first, last = store.time_span()
    inp = from_store(db)
    assert len(inp.samples) == 8 * len(s)  # every row once, across the pages
    assert not inp.samples.duplicated(["timestamp", "gpu"]).any()
    assert inp.samples["timestamp"].is_monotonic_increasing
    rep = build_report(inp)
    err = capsys.readouterr().err
    assert "report: reading the store" in err and "report" in err
    assert rep.data["range"]["span_s"] == pytest.approx(last - first, abs=0.5)
    assert rep.data["provenance"]["sources"][0] == {"role": "store", "path": str(db),
                                                    "bytes": db.stat().st_size, "sha256": None}
    out = tmp_path / "r.json"
    ok = tealeaves("report", "--store", db, "--from", str(first + 60), "--to",
                   str(first + 120), "--out", out)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(out.read_text())["range"]["span_s"] == pytest.approx(60, abs=0.2)
    for args, words in [
        (["--store", db, "--from", "2001-01-01", "--to", "2001-01-02"], "no samples between"),
        (["--store", tmp_path / "none.db"], "no such store"),
        (["--trace", bundled_trace_path(), "--store", db], "not both"),
        (["--trace", bundled_trace_path(), "--format", "docx"], "invalid choice"),
        (["--trace", tmp_path], "directory"),
        (["--trace", bundled_trace_path(), "--labels", tmp_path / "nope.csv"], "nope.csv"),
    ]:
        r = tealeaves("report", *args, "--out", tmp_path / "x.json")
        assert r.returncode == 2 and words in r.stderr, (args, r.stderr)
    assert not (tmp_path / "x.json").exists()  # nothing half-written
    r = tealeaves("report", "--trace", bundled_trace_path(), "--out", tmp_path)
    assert r.returncode == 2 and "is a folder" in r.stderr


@needs_chromium
def test_dashboard_export_button_downloads_the_shown_range(tmp_path):
    from playwright.sync_api import sync_playwright

    from tealeaves.app.dashboard import ids
    from tealeaves.app.dashboard.server import start_in_thread

    db, _ = _stored(tmp_path / "dash.db")
    url, stop = start_in_thread(store_path=db, collect=False)
    try:
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = b.new_page(viewport={"width": 1600, "height": 1000}, accept_downloads=True)
            page.goto(url)
            gd = "document.querySelector('#tl-graph .js-plotly-plot')"
            page.wait_for_function(f"() => {gd} && {gd}._fullData", timeout=30_000)
            page.click(f"#{ids.PRESET_ALL}")
            # the "all" range's note starts with its dates (the followed view's also names
            # its lanes: waiting for "lanes" let a busy machine export the last minute)
            page.wait_for_function(f"() => /^\\d{{4}}-\\d\\d-\\d\\d .*lanes/.test("
                                   f"document.querySelector('#{ids.VIEW_NOTE}').innerText)",
                                   timeout=90_000)  # 20 s, then 45 s ran out on a loaded 2-core CI
            got = {}
            for fmt in ("json", "csv", "html", "pdf", "png"):
                page.click(f"#{ids.REPORT_FORMAT}")
                page.get_by_text(fmt, exact=True).click()
                with page.expect_download(timeout=60_000) as dl:
                    page.click(f"#{ids.REPORT_GO}")
                got[fmt] = (dl.value.suggested_filename, Path(dl.value.path()).read_bytes())
                page.wait_for_function(f"() => document.querySelector('#{ids.REPORT_MSG}')"
                                       f".innerText.includes('.{fmt}')", timeout=20_000)
            b.close()
    finally:
        stop()
    name, raw = got["json"]
    assert name.startswith("tealeaves-report-") and name.endswith(".json")
    doc = json.loads(raw)
    _validator().validate(doc)
    assert got["csv"][1].startswith(b"schema_version,section,item,metric,value,unit")
    assert b"tealeaves imbalance report" in got["html"][1]
    assert got["pdf"][1].startswith(b"%PDF") and got["png"][1].startswith(b"\x89PNG")
    assert all(n.endswith(f".{f}") for f, (n, _) in got.items())
    want = build_report(from_store(db)).data["summary"]
    assert doc["summary"]["straggler_tax"] == pytest.approx(want["straggler_tax"], abs=0.01)
    assert doc["summary"]["hot_gpus"] == want["hot_gpus"]
    assert doc["range"]["span_s"] > 95


def test_store_without_the_range_says_what_it_holds(tmp_path):
    db, _ = _stored(tmp_path / "s.db")
    with pytest.raises(ReportError, match="it holds 20"):
        from_store(db, 1.0e9, 1.0e9 + 60)
    with pytest.raises(ReportError, match="must end after it starts"):
        from_store(db, 2.0e9, 1.0e9)
    assert isinstance(from_store(db).samples, pd.DataFrame)


def test_ranges_are_clamped_to_the_store_and_server_events_to_the_range(tmp_path):
    from tealeaves.data.server_log import parse_file

    tr = read_trace(bundled_trace_path())
    db, (first, last) = _stored(tmp_path / "s.db")
    # years past the end: read only what is stored (what that costs against the span is
    # `tealeaves bench gaps`, docs/benchmarks.md)
    inp = from_store(db, first - 3600, 4.0e9)
    assert len(inp.samples) == len(tr.samples)
    log = Path(bundled_trace_path()).parent / "h200x2_bursts.sglang.log"
    events = pd.DataFrame({"timestamp": [first + 1, first + 2, last + 500], "kind": "prefill",
                           "new_token": [100.0, 200.0, 5000.0]})
    inp.server_events = events
    rep = build_report(inp)
    assert rep.data["server"]["events"] == 2 and rep.data["server"]["prefill_tokens"] == 300
    assert log.exists() and parse_file(log)  # the bundled log the CLI test aligns


def test_out_must_be_a_regular_writable_file(tmp_path, report):
    from tealeaves.app.report.out import write_report

    with pytest.raises(ReportError, match="not a regular file"):
        write_report(report, "json", "/dev/null")
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_report(report, "json", link)
    assert link.is_symlink() and json.loads(real.read_text())["schema_version"] == SCHEMA_VERSION
    ro = tmp_path / "ro.json"
    ro.write_text("keep")
    ro.chmod(0o444)
    import os

    if os.geteuid() != 0:  # root writes anything: the check is for users
        with pytest.raises(ReportError, match="read-only"):
            write_report(report, "json", ro)
        assert ro.read_text() == "keep"
