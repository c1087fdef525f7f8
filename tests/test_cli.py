"""The ``tealeaves`` command line, run as a user runs it (a subprocess)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from cases import case_path
from test_store import frame

from tealeaves.data import bundled_labels_path, bundled_trace_path
from tealeaves.data.store import SampleStore


def tealeaves(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tealeaves.app.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=120, check=False)


@pytest.mark.parametrize("cmd", [[], ["dashboard"], ["collect"], ["classify"], ["evaluate"],
                                 ["train"], ["bench", "classifier"], ["bench"],
                                 ["bench", "workload"], ["report"]])
def test_help_on_every_command(cmd):
    r = tealeaves(*cmd, "--help")
    assert r.returncode == 0 and "usage: tealeaves" in r.stdout


def test_classify_bundled_trace_with_labels_prints_accuracy():
    r = tealeaves("classify", bundled_trace_path(), "--labels", bundled_labels_path())
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("accuracy:"))
    assert float(line.split()[1]) >= 0.97


def test_classify_json_has_windows_counts_and_accuracy():
    r = tealeaves("classify", bundled_trace_path(), "--labels", bundled_labels_path(), "--json")
    out = json.loads(r.stdout)
    assert sum(out["phase_counts"].values()) == len(out["windows"]) > 100
    assert out["accuracy"] >= 0.97
    assert {"phase", "confidence", "imbalance_ratio", "hot_gpu"} <= set(out["windows"][0])


@pytest.mark.parametrize("content,expect", [
    (None, "no such file"), (b"", "file is empty"), (b"\x00garbage" * 50, "is binary data"),
    (b"PAR1" + b"\x00" * 64 + b"PAR1", "not a readable Parquet"),
])
def test_classify_bad_file_is_one_clear_line_and_store_untouched(tmp_path, content, expect):
    store_path = tmp_path / "tealeaves.db"
    with SampleStore(store_path) as s:
        s.append(frame(1000.0, 5))
    before = hashlib.sha256(store_path.read_bytes()).hexdigest()
    bad = tmp_path / "trace.parquet"
    if content is not None:
        bad.write_bytes(content)
    r = tealeaves("classify", bad, cwd=tmp_path)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0] and str(bad) in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert hashlib.sha256(store_path.read_bytes()).hexdigest() == before
    with SampleStore(store_path, readonly=True) as s:
        assert s.count() == 10


def test_classify_bad_labels_names_the_line(tmp_path):
    lab = tmp_path / "l.csv"
    lab.write_text("start,end,phase\n1,2,idle\nx,3,decode\n")
    r = tealeaves("classify", bundled_trace_path(), "--labels", lab)
    assert r.returncode != 0 and "line 3" in r.stderr


def test_collect_without_gpu_fails_clearly_and_creates_no_store(tmp_path):
    r = tealeaves("collect", "--duration", "1", "--store", tmp_path / "x.db")
    if r.returncode == 0:
        pytest.skip("a GPU is present")
    assert "no GPU" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.db").exists()


def test_doctor_without_gpu_says_so_in_one_line_and_exits_0():
    r = tealeaves("doctor")
    if "no NVIDIA GPU" not in r.stdout:
        pytest.skip("a GPU is present")
    assert r.returncode == 0 and len(r.stdout.strip().splitlines()) == 1
    j = tealeaves("doctor", "--json")
    assert j.returncode == 0 and json.loads(j.stdout)["gpus"] == []


@pytest.mark.parametrize("args,expect", [
    (["classify", "TRACE", "--window", "0"], "--window"),
    (["classify", "TRACE", "--window", "nan"], "--window"),
    (["dashboard", "--port", "99999"], "--port"),
    (["collect", "--hz", "-1"], "--hz"),
    (["collect", "--gpus", "abc"], "--gpus"),
])
def test_bad_option_values_are_refused_without_traceback(args, expect):
    args = [str(bundled_trace_path()) if a == "TRACE" else a for a in args]
    r = tealeaves(*args)
    assert r.returncode == 2 and expect in r.stderr and "Traceback" not in r.stderr


def test_labels_of_another_trace_or_binary_labels_are_refused(tmp_path):
    other = bundled_labels_path().with_name("h200x2_workload_v2.labels.csv")
    r = tealeaves("classify", bundled_trace_path(), "--labels", other)
    assert r.returncode == 2 and "no label interval overlaps" in r.stderr
    r = tealeaves("classify", bundled_trace_path(), "--labels", bundled_trace_path())
    assert r.returncode == 2 and "not a text CSV" in r.stderr and "Traceback" not in r.stderr


def test_json_into_a_closed_pipe_ends_quietly():
    p = subprocess.Popen([sys.executable, "-m", "tealeaves.app.cli", "classify",
                          str(bundled_trace_path()), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0 and "Traceback" not in err


def test_classify_with_a_server_log_reports_the_offset_and_scores_against_it(tmp_path):
    from test_align import sglang_lines

    from tealeaves.data.traces import read_labels

    log = tmp_path / "sglang.log"
    log.write_text("\n".join(sglang_lines(read_labels(bundled_labels_path()), -7.3)) + "\n")
    r = tealeaves("classify", bundled_trace_path(), "--server-log", log, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["server_log"]["confident"]
    assert abs(out["server_log"]["offset_s"] - (-7.3)) <= 1.0
    assert "clock offset" in r.stderr
    assert out["labelled_windows"] > 20 and out["per_phase_accuracy"]["prefill"] > 0.8


def test_import_every_gpu_case_file_into_the_store_and_refuse_others(tmp_path):
    db = tmp_path / "s.db"
    files = [case_path(n) for n in ("dmon_1gpu_TD_blankline_ccpm_pcie_01.txt",
                                "dmon_4gpu_sglang_tp_blackwell_pucm_01.txt",
                                "query_gpu_csv_lms_timestamp_1gpu_prompt_01.txt",
                                "dcgmi_dmon_8gpu_prof_fields_sparse_na_02.txt",
                                "dcgm_exporter_prom_4gpu_v100_01.txt")]
    r = tealeaves("import", *files, "--store", db, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [f["format"] for f in out["files"]] == [
        "nvidia_smi_dmon", "nvidia_smi_dmon", "nvidia_smi_query", "dcgmi_dmon", "dcgm_exporter"]
    assert out["files"][0]["skipped"][0]["line"] == 1  # the shell prompt
    with SampleStore(db, readonly=True) as s:
        n = s.count()
    assert n == sum(f["samples"] for f in out["files"]) == 6 + 4 + 5 + 10 + 4
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    png = tmp_path / "shot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    for bad in (png, case_path("sglang_log_newfmt_interleaved_http_01.txt")):
        r = tealeaves("import", files[0], bad, "--store", db)
        assert r.returncode == 2 and str(bad) in r.stderr and "nothing was imported" in r.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_dashboard_and_classify_read_an_imported_format():
    from tealeaves.app.dashboard.server import choose_source

    dmon = case_path("dmon_1gpu_TD_blankline_ccpm_pcie_01.txt")
    src = choose_source(trace=dmon)
    assert src.kind == "replay" and len(src.collector.trace.samples) == 6
    r = tealeaves("classify", dmon, "--json")
    assert r.returncode == 0 and len(json.loads(r.stdout)["windows"]) == 6


def test_dashboard_no_collect_refuses_what_is_not_a_store_and_changes_nothing(tmp_path):
    import sqlite3

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as c:
        c.execute("CREATE TABLE foo (x)")
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for path in (other, empty):
        before = path.read_bytes()
        r = tealeaves("dashboard", "--no-collect", "--store", path, "--port", "0")
        assert r.returncode == 2 and "not a tealeaves store" in r.stderr, r.stderr
        assert path.read_bytes() == before  # nothing written into someone else's file
    r = tealeaves("dashboard", "--no-collect", "--store", tmp_path, "--port", "0")
    assert r.returncode == 2 and "is a directory" in r.stderr
    r = tealeaves("dashboard", "--no-collect", "--port", "0")
    assert r.returncode == 2 and "--store FILE" in r.stderr


def test_bench_dashboard_does_not_overwrite_a_file_it_did_not_make(tmp_path):
    precious = tmp_path / "notes.db"
    precious.write_text("my notes\n")
    r = tealeaves("bench", "dashboard", "--store", precious, "--seconds", "10", "--no-browser",
                  "--no-resampler")
    assert r.returncode == 2 and "not a store" in r.stderr
    assert precious.read_text() == "my notes\n"


@pytest.mark.parametrize(("args", "message"), [
    (["--kernels", "cuda"], "expected kernels from gluon, triton"),
    (["--kernels", "gluon,gluon"], "each once"),
    (["--point", "8,65536,4"], "five whole numbers"),
    (["--point", "8,65536,4,8,3"], "power of two up to 64"),
    (["--point", "0,65536,4,8,1"], "five whole numbers from 1"),
    (["--contexts", "64k"], "expected token counts"),
])
def test_bench_verify_attention_refuses_bad_arguments_before_needing_a_gpu(args, message):
    # argparse checks them on any machine (CI has neither torch nor a GPU): one line, exit 2
    r = tealeaves("bench", "verify-attention", *args)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and message in lines[-1], r.stderr
    assert "Traceback" not in r.stderr
