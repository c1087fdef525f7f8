"""Issue 38, the hostile tester's first break: ``classify`` and ``report`` of a file some lines
of which are refused said nothing of them (a GPU every row of which was refused vanished from
the verdict without a word).  Now both say how many lines and the first, and the report's
provenance records them.  And `evaluate` of a trace the shipped model was fitted on says
so (a newcomer read a perfect score as a held-out one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _query_csv(path: Path) -> Path:
    """Ten sweeps of two GPUs at 1 s; GPU 0's utilization is printed 150 % (refused: a
    percentage over 100), GPU 1's 20 %."""
    rows = ["timestamp, index, utilization.gpu [%], power.draw [W]"]
    for k in range(10):
        t = f"2025/11/30 10:00:{10 + k:02d}.000"
        rows.append(f"{t}, 0, 150 %, 600.00 W")
        rows.append(f"{t}, 1, 20 %, 150.00 W")
    path.write_text("\n".join(rows) + "\n")
    return path


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tealeaves.app.cli", *args], check=False,
                          capture_output=True, text=True, timeout=300)


def test_classify_says_the_lines_it_refused(tmp_path):
    f = _query_csv(tmp_path / "half.csv")
    r = _cli("classify", str(f), "--utc")
    assert r.returncode == 0, r.stderr
    assert "NOTE: 10 lines of the file refused, not read (first: line 2:" in r.stderr
    assert "the verdicts stand on the rest" in r.stderr


def test_report_says_the_lines_it_refused_and_records_them(tmp_path):
    f = _query_csv(tmp_path / "half.csv")
    out = tmp_path / "half.json"
    r = _cli("report", str(f), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "NOTE: 10 lines of the file refused" in r.stderr
    got = json.loads(out.read_text())["provenance"]["lines_refused"]
    assert got["count"] == 10 and got["first_line"] == 2
    assert "100" in got["first_reason"] or "%" in got["first_reason"], got


def test_a_file_read_whole_says_nothing_and_records_zero(tmp_path):
    f = tmp_path / "whole.csv"
    rows = ["timestamp, index, utilization.gpu [%], power.draw [W]"]
    for k in range(10):
        t = f"2025/11/30 10:00:{10 + k:02d}.000"
        rows += [f"{t}, 0, 90 %, 600.00 W", f"{t}, 1, 20 %, 150.00 W"]
    f.write_text("\n".join(rows) + "\n")
    out = tmp_path / "whole.json"
    r = _cli("report", str(f), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "refused" not in r.stderr
    assert json.loads(out.read_text())["provenance"]["lines_refused"] == {
        "count": 0, "first_line": None, "first_reason": None}


def test_evaluate_says_a_training_trace_is_in_sample_and_gives_the_held_out_figure(tmp_path):
    """A newcomer's ``evaluate`` of the bundled trace read macro-F1 1.000 with no word that the
    shipped model was fitted on it; now it says so and gives the held-out figure.  A trace
    under another name, or the rules, say nothing of it."""
    import shutil

    from tealeaves.data import bundled_trace_path

    tr = bundled_trace_path()
    labels = tr.with_name(tr.name.split(".")[0] + ".labels.csv")
    r = _cli("evaluate", "--trace", str(tr), "--labels", str(labels))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"NOTE: in-sample: {tr.name.split('.')[0]} is one of the")
    assert "held out" in r.stdout.splitlines()[0] and "macro-F1 is 0." in r.stdout
    r = _cli("evaluate", "--trace", str(tr), "--labels", str(labels), "--json")
    assert json.loads(r.stdout)["in_sample"] is True
    other = tmp_path / "mine.parquet"
    shutil.copy(tr, other)
    r = _cli("evaluate", "--trace", str(other), "--labels", str(labels))
    assert r.returncode == 0 and "in-sample" not in r.stdout
    r = _cli("evaluate", "--trace", str(tr), "--labels", str(labels), "--rules")
    assert r.returncode == 0 and "in-sample" not in r.stdout


def test_classify_says_which_file_gpus_and_range_its_windows_are_of(tmp_path):
    """Under the table, before the verdicts: the file, its GPUs, its time range and samples
    (a newcomer found no line saying what the summary was of)."""
    f = _query_csv(tmp_path / "half.csv")
    r = _cli("classify", str(f), "--utc")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("these windows are of "))
    assert line == (f"these windows are of {f}: GPU 1; 2025-11-30 10:00:10.000+00:00 to "
                    f"2025-11-30 10:00:19.000+00:00 (9.0 s); 10 samples"), line
