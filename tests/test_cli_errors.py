"""Error messages name what the user gave (issue 35): a bad ``--out`` suffix names ``--out``
and its suffix, not a ``--format`` nobody typed; a store holding one instant says so, not
"--from/--to" when neither was given."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tealeaves.app.report.model import ReportError, from_store
from tealeaves.data import bundled_trace_path
from tealeaves.data.store import SampleStore
from tealeaves.data.traces import read_trace


def tealeaves(*args):
    return subprocess.run([sys.executable, "-m", "tealeaves.app.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300, check=False)


def _store(path: Path, instants: int | None = None) -> tuple[Path, tuple[float, float]]:
    """A store of the bundled trace (or of its first ``instants`` sweeps)."""
    tr = read_trace(bundled_trace_path())
    s = tr.samples
    if instants is not None:
        keep = sorted(s["timestamp"].unique())[:instants]
        s = s[s["timestamp"].isin(keep)]
    with SampleStore(path) as store:
        store.put_devices(tr.devices)
        store.append(s)
        return path, store.time_span()


def test_an_out_suffix_that_is_no_format_names_out_and_its_suffix(tmp_path):
    for name, words in [("r.docx", "'.docx'"), ("report", "no suffix")]:
        r = tealeaves("report", "--trace", bundled_trace_path(), "--out", tmp_path / name)
        assert r.returncode == 2, r.stderr
        assert "--out" in r.stderr and words in r.stderr and "--format:" not in r.stderr, r.stderr
        assert ".html" in r.stderr and ".pdf" in r.stderr  # what would do
        assert not (tmp_path / name).exists()


def test_a_store_of_one_instant_says_so_and_names_no_flag_nobody_gave(tmp_path):
    db, (t0, t1) = _store(tmp_path / "one.db", instants=1)
    assert t0 == t1
    r = tealeaves("report", "--store", db, "--out", tmp_path / "r.json")
    assert r.returncode == 2
    assert "holds one instant" in r.stderr and "needs a range" in r.stderr, r.stderr
    assert "--from" not in r.stderr and "--to" not in r.stderr, r.stderr
    with pytest.raises(ReportError, match="one instant"):
        from_store(db)


def test_a_range_reversed_by_one_flag_names_that_flag(tmp_path):
    db, (t0, t1) = _store(tmp_path / "s.db")
    with pytest.raises(ReportError, match=r"^--from .*newest sample"):
        from_store(db, t1 + 1.0, None)
    with pytest.raises(ReportError, match=r"^--to .*first sample"):
        from_store(db, None, t0 - 1.0)
    with pytest.raises(ReportError, match=r"^--from/--to: the range must end after it starts"):
        from_store(db, t1, t0)


def test_report_takes_the_trace_as_its_first_argument_as_classify_does(tmp_path):
    out = tmp_path / "r.json"
    r = tealeaves("report", bundled_trace_path(), "--out", out)
    assert r.returncode == 0, r.stderr
    import json

    assert json.loads(out.read_text())["range"]["span_s"] > 0
    r = tealeaves("report", bundled_trace_path(), "--trace", tmp_path / "other.csv",
                  "--out", tmp_path / "r2.json")
    assert r.returncode == 2 and "not both" in r.stderr, r.stderr
