"""`tealeaves bench classifier` runs small in the suite, so it cannot rot: the trained model,
the rules and the 0.1-s segments over eight GPUs, figures printed and in JSON."""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_classifier_runs_small_and_reports_every_labeller():
    r = subprocess.run([sys.executable, "-m", "tealeaves.app.cli", "bench", "classifier",
                        "--seconds", "60", "--gpus", "8", "--repeat", "1", "--json"],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    figures = json.loads(lines[-1])
    labs = figures["labellers"]
    assert set(labs) >= {"rules (v0)", "trained + 0.1-s segments"}
    seg = labs["trained + 0.1-s segments"]
    assert seg["windows"] >= 100 and seg["segments"] >= 1 and seg["total_s"] > 0
    assert figures["n_gpus"] == 8 and figures["samples"] > 8 * 60 * 15
    assert any("segments" in line for line in lines)
