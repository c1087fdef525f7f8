"""The ``tealeaves`` command line, run as a user runs it (a subprocess)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import subprocess
import sys

import pytest
from cases import case_path
from test_store import frame

from tealeaves.data import bundled_labels_path, bundled_trace_path
from tealeaves.data.store import SampleStore


def tealeaves(*args, cwd=None, tz=None):
    env = None if tz is None else {**os.environ, "TZ": tz}  # the machine's local zone
    return subprocess.run([sys.executable, "-m", "tealeaves.app.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=120, check=False,
                          env=env)


#: A dmon of two GPUs without a time column (``nvidia-smi dmon -c 2``): rows carry no time.
UNTIMED_DMON = ("# gpu   pwr  gtemp    sm   mem\n# Idx     W      C     %     %\n"
                "    0    70     30     5     1\n    1    71     30     6     1\n"
                "    0    72     30     5     1\n    1    73     30     6     1\n")


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


def test_doctor_without_gpu_says_so_in_one_line_and_exits_3():
    # 3, as collect: a script tells "no GPU here" by the exit status (documented in --help)
    r = tealeaves("doctor")
    if "no NVIDIA GPU" not in r.stdout:
        pytest.skip("a GPU is present")
    assert r.returncode == 3 and len(r.stdout.strip().splitlines()) == 1
    j = tealeaves("doctor", "--json")
    assert j.returncode == 3 and json.loads(j.stdout)["gpus"] == []
    assert "3 when no GPU" in " ".join(tealeaves("doctor", "--help").stdout.split())


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
    assert out["files"][0]["skipped"] == []  # the shell prompt is a pasted command:
    assert out["files"][0]["normalised"] == ["1 shell prompt line dropped"]  # named, not refused
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
    (["--kernels", "cuda"], "expected kernels from gluon, gluon64"),
    (["--kernels", "gluon,gluon"], "each once"),
    (["--point", "8,65536,4"], "five whole numbers"),
    (["--point", "8,65536,4,8,3"], "power of two up to 64"),
    (["--point", "8,4294967301,4,8,1"], "at most 2**31 - 2**23"),  # would wrap in int32
    (["--point", "1,2147483000,4,8,1"], "at most 2**31 - 2**23"),  # split arithmetic
    (["--point", "0,65536,4,8,1"], "five whole numbers from 1"),
    (["--contexts", "64k"], "expected token counts"),
    # combinations: refused before torch is needed (CI has none)
    (["--trees", "--quick"], "--trees and --quick choose different shapes"),
    (["--quick", "--validate"], "--quick and --validate choose different shapes"),
    (["--point", "1,65536,64,8,1"], "--point goes with --sustain"),
])
def test_bench_verify_attention_refuses_bad_arguments_before_needing_a_gpu(args, message):
    # argparse checks them on any machine (CI has neither torch nor a GPU): one line, exit 2
    r = tealeaves("bench", "verify-attention", *args)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and message in lines[-1], r.stderr
    assert "Traceback" not in r.stderr


# -- the CLI speaks in times (issue 21) ---------------------------------------------------------

#: A real two-GPU H200 run (bundled), with its SGLang log beside it.
BURSTS = bundled_trace_path().parent / "h200x2_bursts.parquet"
#: An ISO 8601 time with milliseconds and a UTC offset, as the CLI prints times for people.
ISO = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d"


def test_classify_table_speaks_in_local_times_or_utc_with_empty_unknowns(tmp_path):
    r = tealeaves("classify", BURSTS, tz="Europe/Berlin")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    first = lines[1].split()
    # the bundled trace starts 2026-11-30 16:07:19.5 UTC: 17:07:19.500 in Berlin (+01:00)
    assert " ".join(first[:2]) == "2026-11-30 17:07:19.500+01:00", lines[1]
    assert not re.search(r"\b1\d{9}\.\d", r.stdout)  # no epoch seconds
    assert "NaN" not in r.stdout and "nan" not in r.stdout
    rows = [x for x in lines if re.match(ISO, x)]
    assert len(rows) > 100
    end = lines[0].index("hot_set") + len("hot_set")  # right-aligned under its header
    hot = {x[:end].split()[-1] for x in rows}  # the hot_set column: GPU indices, "-" when none
    assert hot <= {"-", "0", "1"} and {"0", "1"} <= hot
    imb = next(x for x in lines if x.startswith("imbalance:"))
    assert re.match(r"imbalance: \d+ of \d+ decode windows imbalanced; over \d+ of 121 windows "
                    r"\(the decode windows with load\): mean ratio \d\.\d\d", imb), imb
    assert "straggler tax 15.6%" in imb
    hs = next(x for x in lines if x.startswith("hot set:"))
    assert hs == ("hot set: rotates between GPU 1 (23 windows, 2.2x the rest) and GPU 0 "
                  "(19 windows, 2.1x the rest)"), hs
    u = tealeaves("classify", BURSTS, "--utc", tz="Europe/Berlin")
    assert u.stdout.splitlines()[1].split()[:2] == ["2026-11-30", "16:07:19.500+00:00"]
    # a dmon without profiling counters: the imbalance ratio is unknown, an empty cell
    one = tmp_path / "one.txt"
    one.write_text("# gpu   pwr  gtemp    sm   mem\n# Idx     W      C     %     %\n"
                   "    0    70     30     5     1\n")
    r = tealeaves("classify", one)
    assert r.returncode == 0, r.stderr
    row = r.stdout.splitlines()[1]
    # one instant is no phase (issue 38): empty phase and confidence cells, the verdict why
    assert "NaN" not in row and re.match(ISO + "  " + ISO + r" +-  no +cannot tell: under 2 "
                                         r"readings of GPU 0", row), row
    assert "imbalance: n/a (no decode window" in r.stdout
    # placed at the file's modification time, said on stderr
    assert "no timestamps in the file: placed with its last row at its modification time" \
        in r.stderr and "give --start-time" in r.stderr


def test_classify_csv_and_json_keep_epoch_times_with_integer_gpus_and_empty_unknowns(tmp_path):
    r = tealeaves("classify", BURSTS, "--csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout.split("windows:")[0])))
    assert float(rows[0]["start"]) > 1.7e9  # machines read epoch seconds, as before
    hot = {w["hot_gpu"] for w in rows}
    assert hot == {"", "0", "1"}  # whole numbers, empty where no GPU is hot (was 1.0000, "")
    assert "nan" not in r.stdout.lower()
    j = json.loads(tealeaves("classify", BURSTS, "--json").stdout)
    assert {type(w["hot_gpu"]) for w in j["windows"]} == {int, type(None)}
    assert isinstance(j["windows"][0]["start"], float)


def test_classify_gives_each_window_its_shares_and_verdict_and_says_what_it_stood_on():
    """Issue 34: the table, --csv and --json carry the three phase shares and the verdict of
    every window after the columns they had; the summary gives the range's shares of time
    (the windows' mean shares) and the counters and rate the verdicts stood on."""
    from tealeaves.classifier import WINDOW_COLUMNS

    new = ["share_idle", "share_prefill", "share_decode", "verdict"]
    r = tealeaves("classify", BURSTS, "--csv")
    assert r.returncode == 0, r.stderr
    cols = r.stdout.split("\n", 1)[0].split(",")
    old = [c for c in WINDOW_COLUMNS if c not in new] + ["load_g0", "load_g1"]
    assert cols == old + new  # the old columns in their order, the new ones at the end
    rows = list(csv.DictReader(io.StringIO(r.stdout.split("windows:")[0])))
    for w in rows:
        sh = [float(w[c]) for c in new[:3]]
        assert sum(sh) == pytest.approx(1.0, abs=2e-4) and min(sh) >= 0
        best = max(zip(sh, ("idle", "prefill", "decode")))
        assert w["verdict"] == best[1] if best[0] >= 0.7 else w["verdict"].startswith("mixed: ")
    j = json.loads(tealeaves("classify", BURSTS, "--json").stdout)
    assert list(j["windows"][0])[-4:] == new
    for p in ("idle", "prefill", "decode"):
        mean = sum(w[f"share_{p}"] for w in j["windows"]) / len(j["windows"])
        assert j["phase_shares"][p] == pytest.approx(mean)
    assert j["shares_source"] in ("calibrated", "rules' scores")
    assert j["inputs"]["rate_hz"] == pytest.approx(10.0, rel=0.05)  # GPM: 10 Hz on H200s
    assert {"sm_active", "tensor_active", "dram_active"} <= set(j["inputs"]["counters"])
    assert set(j["segments"][0]) == {"start", "end", "phase", "confidence"}  # unchanged
    t = tealeaves("classify", BURSTS, "--utc")
    lines = t.stdout.splitlines()
    assert lines[0].split()[-4:] == new
    shares = next(x for x in lines if x.startswith("phase shares over the range: "))
    got = dict(re.findall(r"(idle|prefill|decode) (\d+) %", shares))
    assert {p: int(v) for p, v in got.items()} == {
        p: round(100 * j["phase_shares"][p]) for p in ("idle", "prefill", "decode")}
    on = next(x for x in lines if x.startswith("verdicts stood on: "))
    assert on == "verdicts stood on: " + j["inputs"]["text"] and on.endswith(" at 10 Hz per GPU")


def test_classify_unknown_format_is_one_line_and_exit_2():
    r = tealeaves("classify", BURSTS, "--format", "xyz")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown format 'xyz'" in lines[0], r.stderr


def test_import_summary_speaks_in_times_and_says_where_an_untimed_file_went(tmp_path):
    p = tmp_path / "snap.txt"
    p.write_text(UNTIMED_DMON)
    os.utime(p, (1_796_047_789, 1_796_047_789))  # 2026-11-30 14:09:49 UTC
    r = tealeaves("import", p, "--store", tmp_path / "s.db", tz="Europe/Berlin")
    assert r.returncode == 0, r.stderr
    assert "GPUs 0, 1, 1.000 s from 2026-11-30 15:09:48.000+01:00 to " \
           "2026-11-30 15:09:49.000+01:00, 0 lines skipped" in r.stdout, r.stdout
    assert ("NOTE: no timestamps in the file: placed with its last row at its modification "
            "time 2026-11-30 15:09:49.000+01:00; give --start-time to place it") in r.stdout
    assert "stored 4 samples in" in r.stdout
    r = tealeaves("import", p, "--store", tmp_path / "t.db", "--start-time", "1796000000",
                  "--utc", tz="Europe/Berlin")
    assert "from 2026-11-30 00:53:20.000+00:00" in r.stdout, r.stdout
    assert "placed from --start-time 2026-11-30 00:53:20.000+00:00" in r.stdout
    assert "NOTE" not in r.stdout
    j = json.loads(tealeaves("import", p, "--store", tmp_path / "u.db", "--json").stdout)
    f = j["files"][0]
    assert (f["placed"], f["placed_at"]) == ("mtime", 1_796_047_789)
    # one skipped line, one sample, one GPU: singular
    one = tmp_path / "one.txt"
    one.write_text("junk\n" + UNTIMED_DMON.split("    1    71")[0])
    r = tealeaves("import", one, "--store", tmp_path / "v.db")
    assert "1 row read, 1 sample, GPU 0, one instant, " in r.stdout, r.stdout
    assert "1 line skipped" in r.stdout and "stored 1 sample in" in r.stdout


def test_import_messages_name_the_flag_to_use(tmp_path):
    log = BURSTS.with_suffix(".sglang.log")
    r = tealeaves("import", log, "--store", tmp_path / "s.db")
    assert r.returncode == 2 and "server-log parser" not in r.stderr
    assert ("give it as --server-log FILE to classify, report, dashboard or collect "
            "(nothing was imported)") in r.stderr, r.stderr
    q = tmp_path / "q.csv"
    q.write_text("2024/01/16 14:44:16.977, 0, 45 %\n")
    r = tealeaves("import", q, "--store", tmp_path / "s.db", "--format", "query")
    assert r.returncode == 2 and "with --columns" in r.stderr and "columns=[" not in r.stderr
    r = tealeaves("import", q, "--store", tmp_path / "s.db", "--columns",
                  "timestamp,index,utilization.gpu")
    assert r.returncode == 0 and "1 sample, GPU 0" in r.stdout, r.stderr


def test_report_summary_line_speaks_in_times_and_readable_spans(tmp_path):
    out = tmp_path / "r.json"
    r = tealeaves("report", "--trace", BURSTS, "--out", out, tz="Europe/Berlin")
    assert r.returncode == 0, r.stderr
    line = r.stdout.strip()
    assert re.search(r": 2026-11-30 17:07:19\.\d{3}\+01:00 to 2026-11-30 17:08:19\.\d{3}\+01:00 "
                     r"\(60 s\), 121 windows, hot set: rotates between GPU 1 \(23 windows, 2\.2x "
                     r"the rest\) and GPU 0 \(19 windows, 2\.1x the rest\), imbalance ratio 1\.23, "
                     r"straggler tax 15\.6% over 68 of 121 windows \(the decode windows with "
                     r"load\)$", line), line
    r = tealeaves("report", "--trace", BURSTS, "--out", out, "--utc")
    assert "2026-11-30 16:07:19" in r.stdout and "+00:00 to" in r.stdout
    # a span of weeks in days, and a range without decode says why the tax is n/a
    db = tmp_path / "s.db"
    for i, t in enumerate((1_790_000_000, 1_794_000_000)):
        p = tmp_path / f"d{i}.txt"
        p.write_text(UNTIMED_DMON)
        assert tealeaves("import", p, "--store", db, "--start-time", t).returncode == 0
    r = tealeaves("report", "--store", db, "--out", out)
    assert r.returncode == 0, r.stderr
    assert "(46.3 d)" in r.stdout and "s, " not in r.stdout.split("(46.3 d)")[0][-12:]
    assert "straggler tax n/a (no decode window in the range)" in r.stdout, r.stdout


def test_collect_with_an_unknown_log_zone_is_one_line_and_exit_2(tmp_path):
    log = BURSTS.with_suffix(".sglang.log")
    r = tealeaves("collect", "--replay", BURSTS, "--store", tmp_path / "c.db",
                  "--server-log", log, "--tz", "Nope/Nope", "--duration", "1")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--tz: unknown time zone 'Nope/Nope'" in lines[0], r.stderr


def test_an_unknown_tz_is_refused_by_every_command_even_without_a_log(tmp_path):
    """``classify --tz Mars/Base`` without a server log used to run on, the zone ignored."""
    r = tealeaves("classify", BURSTS, "--tz", "Mars/Base")
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--tz: unknown time zone 'Mars/Base'" in lines[0], r.stderr
    ok = tealeaves("classify", BURSTS, "--tz", "+05:45")
    assert ok.returncode == 0, ok.stderr


def test_columns_and_start_time_wherever_a_file_is_read(tmp_path):
    """A header-less --query-gpu CSV (the real case file without its header) is read by
    classify, evaluate and report with --columns, as by import; without it the one line names
    the flag (issue 22)."""
    from cases import case_path

    lines = case_path("query_gpu_csv_lms_timestamp_1gpu_prompt_01.txt").read_text().splitlines()
    header = next(ln for ln in lines if ln.startswith("timestamp"))
    rows = [ln for ln in lines if ln[:4].isdigit()]
    f = tmp_path / "headerless.csv"
    f.write_text("\n".join(rows) + "\n")
    cols = ",".join(c.split("[")[0].strip() for c in header.split(","))
    r = tealeaves("classify", f)
    assert r.returncode == 2 and "--columns" in r.stderr, r.stderr
    r = tealeaves("classify", f, "--columns", cols, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["windows"]
    r = tealeaves("report", "--trace", f, "--columns", cols, "--out", tmp_path / "r.json")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "r.json").read_text())
    labels = tmp_path / "labels.csv"
    labels.write_text("start,end,phase\n1705416256.977,1705416257.095,idle\n")  # its span
    r = tealeaves("evaluate", "--trace", f, "--labels", labels)
    assert r.returncode == 2 and "--columns" in r.stderr, r.stderr
    r = tealeaves("evaluate", "--trace", f, "--labels", labels, "--columns", cols)
    assert r.returncode == 0, r.stderr
    # and the dashboard replays it (the choice it makes for --trace)
    from tealeaves.app.dashboard.server import choose_source

    with pytest.raises(ValueError, match="--columns"):
        choose_source(f)
    src = choose_source(f, reading={"columns": cols.split(",")})
    assert src.kind == "replay" and "headerless.csv" in src.label
