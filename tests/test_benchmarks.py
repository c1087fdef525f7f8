"""Every ``tealeaves bench ...`` that needs no GPU runs small here, so a change cannot break it
silently (issue 21): the dashboard benchmark end to end (server figures, and the browser part
where Chromium is installed) and the Prometheus one (where Debian's prometheus is).  The
classifier and gaps benchmarks run small in their own test files; the collector, workload and
verify-attention benchmarks need a GPU."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def _bench(*args, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tealeaves.app.cli", "bench", *map(str, args)],
                          check=False, capture_output=True, text=True, timeout=timeout)


def test_bench_dashboard_runs_small_with_its_own_flags(tmp_path):
    args = ["dashboard", "--seconds", "20", "--gpus", "2", "--pages", "2",
            "--live-seconds", "4", "--no-resampler", "--store", tmp_path / "bench.db"]
    if not CHROMIUM.exists():
        args.append("--no-browser")
    r = _bench(*args)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    for name in ("full range", "1-min zoom", "10-s zoom (raw samples)", "live tick"):
        row = re.search(rf"^{re.escape(name)}.*?\s([\d.]+) / ([\d.]+)\s+([\d.]+)$", out, re.MULTILINE)
        assert row, (name, out)
        median, worst, kb = map(float, row.groups())
        assert 0 < median <= worst and kb > 0, row.group(0)
    if CHROMIUM.exists():
        lat = re.search(r"sample-to-screen over (\d+) samples, \d+ paints: p50 (-?\d+) ms, "
                        r"p95 (-?\d+) ms", out)
        assert lat and int(lat.group(1)) > 0 and int(lat.group(2)) <= int(lat.group(3)), out
        rss = re.search(r"server RSS: idle (\d+) MB, 1 page (\d+) MB, 2 pages (\d+) MB", out)
        assert rss and all(int(v) > 50 for v in rss.groups()), out


@pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="Debian's prometheus is missing")
def test_bench_prometheus_runs_small(tmp_path):
    figures = tmp_path / "prom.json"
    r = _bench("prometheus", "--targets", "3", "--interval", "1", "--seconds", "6",
               "--json", figures)
    assert r.returncode == 0, r.stderr[-2000:]
    assert figures.exists() and figures.stat().st_size > 20


def test_bench_speed_runs_small_and_prints_every_row_beside_a_baseline():
    """``bench speed`` (issue 35) small: every command row prints a positive time, and the
    table puts a baseline's column beside it (the figures' JSON fed back as the baseline; no
    timing bound: the figures are the benchmark's, docs/benchmarks.md)."""
    import json

    from tealeaves.app.bench.speed import table

    r = _bench("speed", "--seconds", "30", "--gpus", "2", "--no-browser", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert re.search(r"^store: 30 s of 2 GPUs at \d+ Hz", out, re.MULTILINE), out
    names = ["classify bundled trace", "classify store (as a trace file)",
             "report bundled trace .html", "report store .html"]
    if CHROMIUM.exists():
        names += ["report bundled trace .pdf", "report store .pdf"]
    if shutil.which("tesseract"):
        names.append("screenshot read, one picture")
    for name in names:
        row = re.search(rf"^{re.escape(name)}\s+([\d.]+)$", out, re.MULTILINE)
        assert row and float(row.group(1)) > 0, (name, out)
    assert "dashboard start" not in out  # --no-browser: the browser rows are left out
    figures = json.loads(out[out.index("\n{") + 1:])
    assert figures["baseline"] is None
    both = table({**figures, "baseline": {k: 2 * v for k, v in figures["this"].items()}}, 1)
    for name in names:
        row = re.search(rf"^{re.escape(name)}\s+([\d.]+)\s+([\d.]+)$", both, re.MULTILINE)
        assert row and float(row.group(2)) == pytest.approx(2 * float(row.group(1)), abs=0.02)
