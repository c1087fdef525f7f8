"""Break-it round 3 (issue 38), server logs, time zones and saved pages: nothing lost while
reporting success, no value from a blank, no hang, no traceback.

Attacks: the hour repeated (and the hour skipped) by a clock change in a local-time capture;
``--tz +02:00`` accepted by the CLI but refused by the importers; blank codes and impossible
values in server-log lines read as values; a 5000-digit number in a server log; a saved
``/metrics`` page far over the series cap of a live scrape.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from tealeaves.app.cli import main
from tealeaves.data.importers import import_file, import_text
from tealeaves.data.server_log import parse_lines

BERLIN = "Europe/Berlin"


# -- 3. clock changes -------------------------------------------------------------------------

def _dmon(rows: list[tuple[str, str, int]]) -> str:
    head = "#Date       Time        gpu    sm\n#YYYYMMDD   HH:MM:SS    Idx     %\n"
    return head + "".join(f" {d}   {t}      0    {v}\n" for d, t, v in rows)


# 2026-10-25: Berlin goes from CEST (+02:00) back to CET (+01:00) at 03:00 local
FALL_BACK = [("20261025", t, v) for t, v in (
    ("01:59:00", 1), ("02:00:00", 2), ("02:30:00", 3), ("02:59:00", 4),  # first pass, CEST
    ("02:00:00", 5), ("02:30:00", 6), ("02:59:00", 7), ("03:00:00", 8))]  # second pass, CET


def _utc(y, m, d, hh, mm) -> float:
    return dt.datetime(y, m, d, hh, mm, tzinfo=dt.UTC).timestamp()


def test_the_repeated_hour_of_a_dmon_capture_is_read_as_two_passes_and_said():
    res = import_text(_dmon(FALL_BACK), "dmon", tz=BERLIN)
    s = res.samples.sort_values("gpu_util")
    ts = s["timestamp"].to_numpy()
    # before: the second pass sat on the first pass's instants (two readings per instant)
    assert len(np.unique(ts)) == 8 and np.all(np.diff(ts) > 0)
    assert ts[1] == _utc(2026, 10, 25, 0, 0)  # 02:00 CEST
    assert ts[4] == _utc(2026, 10, 25, 1, 0)  # 02:00 CET
    assert ts[7] == _utc(2026, 10, 25, 2, 0)  # 03:00 CET
    note = " ".join(res.notes)
    assert "6 times in the hour Europe/Berlin repeats" in note
    assert "3 read as its second pass" in note


def test_the_skipped_hour_is_refused_line_by_line_and_counted():
    rows = [("20260329", "01:59:00", 1), ("20260329", "02:30:00", 2), ("20260329", "03:00:00", 3)]
    res = import_text(_dmon(rows), "dmon", tz=BERLIN)
    assert sorted(res.samples["gpu_util"]) == [1.0, 3.0]
    assert [n for n, _ in res.skipped] == [4]
    assert "does not exist in Europe/Berlin" in res.skipped[0][1]
    assert "1 time in the hour Europe/Berlin skips" in " ".join(res.notes)


def test_query_csv_and_server_log_read_the_repeated_hour_in_order_too():
    csv = "timestamp, index, utilization.gpu [%]\n" + "".join(
        f"2026/10/25 {t}.000, 0, {v} %\n" for t, v in
        (("02:10:00", 1), ("02:50:00", 2), ("02:10:00", 3), ("02:50:00", 4)))
    res = import_text(csv, "query", tz=BERLIN)
    ts = res.samples.sort_values("gpu_util")["timestamp"].to_numpy()
    assert np.all(np.diff(ts) > 0) and ts[2] - ts[0] == 3600.0
    assert "2 read as its second pass" in " ".join(res.notes)

    log = [f"[2026-10-25 {t} TP0] Decode batch, #running-req: 1, #token: 5, "
           for t in ("02:58:00", "02:59:30", "02:00:10", "02:01:00")]
    got = parse_lines(log, tz=BERLIN)
    stamps = [e.timestamp for e in got.events]
    assert np.all(np.diff(stamps) > 0) and stamps[2] == _utc(2026, 10, 25, 1, 0) + 10
    assert "2 read as its second pass" in got.time_note()


def test_a_server_log_time_in_the_skipped_hour_carries_no_time_and_is_said():
    got = parse_lines(["[2026-03-29 02:30:00 TP0] Decode batch, #running-req: 1, "],
                      tz=BERLIN)
    assert got.events[0].timestamp is None
    assert "skips when clocks go forward" in got.time_note()


# -- 4. --tz offsets ----------------------------------------------------------------------------

@pytest.mark.parametrize("tz, offset_h", [("+02:00", 2.0), ("-0530", -5.5), ("UTC", 0.0),
                                          ("UTC+2", 2.0), ("Asia/Kolkata", 5.5)])
def test_every_zone_the_cli_takes_is_taken_by_the_importers(tz, offset_h):
    res = import_text(_dmon([("20260601", "12:00:00", 7)]), "dmon", tz=tz)
    assert res.samples["timestamp"].iloc[0] == _utc(2026, 6, 1, 12, 0) - offset_h * 3600


def test_import_with_tz_offset_through_the_cli(tmp_path, capsys):
    f = tmp_path / "dmon.txt"
    f.write_text(_dmon([("20260601", "12:00:00", 7)]))
    store = tmp_path / "s.db"
    assert main(["import", str(f), "--store", str(store), "--tz", "+02:00", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"zone": "UTC+02:00"' in out and '"stored": 1' in out
    res = import_file(f, tz="+02:00")
    assert res.samples["timestamp"].iloc[0] == _utc(2026, 6, 1, 10, 0)


# -- 1./2. blank codes, impossible values and huge numerals in server logs --------------------

SGLANG_BLANKS = ("[2026-06-01 12:00:00 TP0] Decode batch, #running-req: 4294967295, "
                 "#token: 11179, token usage: 0.41, cuda graph: True, "
                 "gen throughput (token/s): 140737488355328, #queue-req: 0, ")
VLLM_BLANKS = ("INFO 06-01 12:00:05 [loggers.py:271] Engine 000: Avg prompt throughput: "
               "18446744073709551615 tokens/s, Avg generation throughput: 734.9 tokens/s, "
               "Running: 18 reqs, Waiting: 9223372036854775807 reqs, GPU KV cache usage: 187.7%, "
               "Prefix cache hit rate: 0.0%")
HUGE = "9" * 5000


def test_blank_codes_in_an_sglang_line_are_missing_and_counted():
    got = parse_lines([SGLANG_BLANKS])
    f = got.events[0].fields
    # before: running_req 4294967295 and 1.4e14 tok/s were read as values
    assert "running_req" not in f and "gen_throughput_tok_s" not in f
    assert f["token"] == 11179 and f["queue_req"] == 0
    assert got.refused == {("running_req", "blank"): 1, ("gen_throughput_tok_s", "blank"): 1}
    assert "running_req 1 blank code" in got.notes()


def test_a_line_of_blank_codes_alone_is_still_a_server_line_and_counted(tmp_path):
    from tealeaves.data.importers import ImportFormatError
    from tealeaves.data.server_lines import line_format

    sg = "[2026-06-01 12:00:00 TP0] Decode batch, #running-req: 4294967295, "
    vl = "INFO 06-01 12:00:05 [loggers.py:271] Avg prompt throughput: 140737488355328 tokens/s"
    got = parse_lines([sg, vl])
    assert got.refused == {("running_req", "blank"): 1}  # vl: a vLLM line in an SGLang log
    assert got.events[0].fields == {}
    got = parse_lines([vl], year=2026)
    assert got.refused == {("prompt_throughput_tok_s", "blank"): 1}
    assert len(got.events) == 1 and got.events[0].fields == {}
    assert (line_format(sg), line_format(vl)) == ("sglang", "vllm")
    f = tmp_path / "blank.log"
    f.write_text(sg + "\n")
    with pytest.raises(ImportFormatError, match="--server-log"):
        import_file(f)


def test_blank_codes_and_impossible_values_in_a_vllm_line_are_missing_and_counted():
    got = parse_lines([VLLM_BLANKS], year=2026)
    f = got.events[0].fields
    assert f == {"gen_throughput_tok_s": 734.9, "running_req": 18,
                 "prefix_cache_hit_rate_pct": 0.0}
    assert got.refused == {("prompt_throughput_tok_s", "blank"): 1,
                           ("queue_req", "blank"): 1,
                           ("kv_cache_usage_pct", "impossible"): 1}


@pytest.mark.parametrize("value, why", [("2.34e11", None), ("234000000000", "impossible"),
                                        ("-5", "impossible"), ("4294967295.00", "blank"),
                                        ("2147483647", "blank"), ("9007199254740992", "blank")])
def test_a_throughput_past_its_bound_or_a_code_is_no_reading(value, why):
    """A throughput past ``FIELD_BOUNDS`` (1e8 tok/s), a negative one, a blank code printed
    with SGLang's two decimals: no reading.  32767 tokens stays a reading."""
    line = (f"[2026-06-01 12:00:00 TP0] Decode batch, #running-req: 3, "
            f"gen throughput (token/s): {value}, ")
    got = parse_lines([line])
    if why is None:  # no exponent in a log's numbers: the line's text, not a number
        assert not got.refused
        assert got.events[0].extra["gen throughput (token/s)"] == value
        return
    assert got.events[0].fields["running_req"] == 3
    assert "gen_throughput_tok_s" not in got.events[0].fields
    assert got.refused == {("gen_throughput_tok_s", why): 1}


def test_a_5000_digit_number_is_refused_per_value_not_an_exception():
    lines = [f"[2026-06-01 12:00:00 TP0] Decode batch, #running-req: {HUGE}, #token: 7, ",
             f"[2026-06-01 12:00:01 TP0] Prefill batch, #new-seq: 1, #new-token: {HUGE}.5, ",
             f"[2026-06-01 12:00:02 TP0] Decode batch, #token: 8, mystery: -{HUGE}, "]
    got = parse_lines(lines)  # before: ValueError (Python's 4300-digit limit), no file or line
    assert [e.fields.get("token") for e in got.events] == [7, None, 8]
    assert got.refused == {("running_req", "impossible"): 1, ("new_token", "impossible"): 1,
                           ("mystery", "impossible"): 1}
    assert "mystery" not in got.events[2].extra


def _log_with_attacks(tmp_path):
    from test_align import sglang_lines

    from tealeaves.data import bundled_labels_path
    from tealeaves.data.traces import read_labels

    lines = sglang_lines(read_labels(bundled_labels_path()), 0.0)
    lines[4:4] = [SGLANG_BLANKS, f"[2026-06-01 12:00:00 TP0] Decode batch, #token: {HUGE}, "]
    log = tmp_path / "sglang.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_classify_and_report_with_such_a_log_say_what_was_left_out(tmp_path, capsys):
    from tealeaves.data import bundled_trace_path

    log = _log_with_attacks(tmp_path)
    assert main(["classify", str(bundled_trace_path()), "--server-log", str(log)]) == 0
    out = capsys.readouterr()
    said = out.out + out.err
    assert "values read as missing (no reading): gen_throughput_tok_s 1 blank code, " \
           "running_req 1 blank code, token 1 impossible value" in said
    rep = tmp_path / "r.html"
    assert main(["report", "--trace", str(bundled_trace_path()), "--server-log", str(log),
                 "--out", str(rep)]) == 0
    assert "running_req 1 blank code" in capsys.readouterr().err and rep.stat().st_size > 0


def test_counts_that_look_like_small_codes_stay_readings():
    line = ("[2026-06-01 12:00:00 TP0] Decode batch, #running-req: 3, #token: 32767, "
            "gen throughput (token/s): 65535.00, ")
    got = parse_lines([line])
    assert got.events[0].fields["token"] == 32767 and not got.refused
    assert got.events[0].fields["gen_throughput_tok_s"] == 65535.0


# -- 5. a saved /metrics page over the series cap -----------------------------------------------

def _big_page(n: int) -> str:
    return ("# HELP sglang:num_running_reqs The number of running requests.\n"
            "# TYPE sglang:num_running_reqs gauge\n"
            + "".join(f'sglang:num_running_reqs{{dp_rank="{i}"}} 1.0\n' for i in range(n)))


def test_a_saved_page_over_the_live_series_cap_is_refused_naming_the_file(tmp_path, capsys):
    from tealeaves.data.server_metrics import MAX_SERIES, read_page

    with pytest.raises(ValueError, match=r"big\.prom: scrape 1 of the page holds 40001"):
        read_page(_big_page(MAX_SERIES + 1), end=1.8e9, name="big.prom")
    assert len(read_page(_big_page(50), end=1.8e9).frame) == 50  # a small one still reads

    page = tmp_path / "big.prom"
    page.write_text(_big_page(MAX_SERIES + 1))
    store = tmp_path / "s.db"
    # before: 40001 series (and 300,000 alike) were stored from a saved page
    assert main(["import", str(page), "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(page) in err[0] and f"cap of {MAX_SERIES}" in err[0]
    assert "nothing was imported" in err[0] and not store.exists()


def test_blank_codes_and_huge_numerals_in_a_saved_page_are_no_reading(tmp_path, capsys):
    from tealeaves.data.server_metrics import parse_metrics, read_page

    page = ("# TYPE sglang:num_running_reqs gauge\n"
            'sglang:num_running_reqs{dp_rank="0"} 4294967295\n'
            'sglang:num_running_reqs{dp_rank="1"} 7\n'
            "# TYPE sglang:gen_throughput gauge\n"
            f'sglang:gen_throughput{{dp_rank="0"}} {HUGE}\n'
            'sglang:gen_throughput{dp_rank="1"} 234000000000\n'
            f'sglang:num_queue_reqs{{dp_rank="0"}} 3 {HUGE}\n')
    r = read_page(page, end=1.8e9, name="p.prom")  # before: a ValueError naming no file
    vals = dict(zip(r.frame["name"] + r.frame["labels"], r.frame["value"], strict=True))
    assert vals["sglang:num_running_reqsdp_rank=1"] == 7.0
    assert np.isnan(vals["sglang:num_running_reqsdp_rank=0"])  # before: 4294967295
    assert np.isnan(vals["sglang:gen_throughputdp_rank=0"])  # before: inf
    assert np.isnan(vals["sglang:gen_throughputdp_rank=1"])  # past 1e8 tok/s
    assert r.refused == {("sglang:num_running_reqs", "blank"): 1,
                         ("sglang:gen_throughput", "impossible"): 2}
    assert [n for n, _ in r.skipped] == [7]  # the 5000-digit timestamp: not a sample line
    refused: dict = {}
    parse_metrics("sglang:token_usage 18446744073709551615\n", 1.8e9, refused=refused)
    assert refused == {("sglang:token_usage", "blank"): 1}  # a live scrape counts them too

    f = tmp_path / "p.prom"
    f.write_text(page)
    assert main(["import", str(f), "--store", str(tmp_path / "s.db")]) == 0
    out = capsys.readouterr().out
    assert "sglang:num_running_reqs: 1 blank code (no reading; stored as NaN)" in out
    assert "sglang:gen_throughput: 2 impossible values (no reading; stored as NaN)" in out


def test_a_screenshot_time_from_its_name_is_read_with_a_tz_offset_too():
    """``report --screenshot P --tz +02:00``: the CLI takes the offset; the screenshot's
    time from its name was dropped (None) because only IANA names were read."""
    from tealeaves.data.screen.screenshots import CaptureTime, ScreenshotError

    when = CaptureTime(local=dt.datetime(2026, 6, 1, 12, 0), offset_s=None, instant=None,
                       source="file name (scrot)")
    assert when.resolve("+02:00") == _utc(2026, 6, 1, 10, 0)
    assert when.resolve("-0530") == _utc(2026, 6, 1, 17, 30)
    assert when.resolve("Europe/Berlin") == _utc(2026, 6, 1, 10, 0)
    with pytest.raises(ScreenshotError, match="unknown time zone"):
        when.resolve("+25:00")


def test_a_5000_character_tz_is_one_short_line(tmp_path, capsys):
    f = tmp_path / "dmon.txt"
    f.write_text(_dmon([("20260601", "12:00:00", 7)]))
    assert main(["import", str(f), "--store", str(tmp_path / "s.db"), "--tz", "a" * 5000]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "(5000 characters)" in err[0] and len(err[0]) < 250
    assert not (tmp_path / "s.db").exists()


def test_dcgmi_and_the_smi_table_read_the_clock_changes_too():
    dcgmi = "#Entity   GPUTL\nID\n" + "".join(
        f"{d} {t} GPU 0   {v}\n" for d, t, v in (
            ("2026-10-25", "02:10:00", 1), ("2026-10-25", "02:50:00", 2),
            ("2026-10-25", "02:10:00", 3), ("2026-03-29", "02:30:00", 4)))
    res = import_text(dcgmi, "dcgmi", tz=BERLIN)
    ts = res.samples.sort_values("gpu_util")["timestamp"].to_numpy()
    assert list(res.samples.sort_values("gpu_util")["gpu_util"]) == [1.0, 2.0, 3.0]
    assert ts[2] - ts[0] == 3600.0  # before: the same instant
    assert [n for n, _ in res.skipped] == [6]

    from pathlib import Path

    table = (Path(__file__).parent / "published" /
             "smi_table_h100x8_535_dated_procs_09.txt").read_text()
    body = table.split("\n", 1)[1]
    two = f"Sun Oct 25 02:40:00 2026\n{body}\nSun Oct 25 02:10:00 2026\n{body}"
    res = import_text(two, "table", tz=BERLIN)
    stamps = sorted(set(res.samples["timestamp"]))
    assert stamps == [_utc(2026, 10, 25, 0, 40), _utc(2026, 10, 25, 1, 10)]
    assert "1 read as its second pass" in " ".join(res.notes)
    gap = import_text(f"Sun Mar 29 02:30:00 2026\n{body}", "table", tz=BERLIN, end_time=1.8e9)
    assert gap.skipped[0][0] == 1 and "does not exist" in gap.skipped[0][1]


def test_a_saved_page_stamped_far_in_the_future_is_refused_or_placed_by_start_time(
        tmp_path, capsys):
    from tealeaves.data.server_metrics import read_page

    page = tmp_path / "fut.prom"
    page.write_text("sglang:num_running_reqs 1 1780000000000\n"
                    "sglang:num_running_reqs 2 9999999999999999999\n")
    store = tmp_path / "s.db"
    # before: stored at year 316,889,355, then a ValueError traceback printing the summary
    assert main(["import", str(page), "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "more than a day after now" in err[0] and str(page) in err[0]
    assert not store.exists()
    assert main(["import", str(page), "--store", str(store), "--start-time", "1780000000"]) == 0
    assert "not used: scrapes placed 1 s apart from --start-time" in capsys.readouterr().out
    r = read_page(page.read_text(), start=1_780_000_000.0, name="fut.prom")
    assert list(r.frame["timestamp"]) == [1_780_000_000.0, 1_780_000_001.0]
    assert r.stamped == "start_time" and "more than a day" in r.stamps_refused


def test_collect_following_a_log_says_what_it_left_out_when_it_stops(tmp_path, capsys):
    import threading
    import time

    from tealeaves.collectors import start_server_signals
    from tealeaves.data.store import SampleStore

    log = tmp_path / "sglang.log"
    log.write_text(SGLANG_BLANKS + "\n")
    stop = threading.Event()
    with SampleStore(tmp_path / "s.db") as store:
        threads = start_server_signals(store, stop, server_log=log, from_start=True)
        deadline = time.monotonic() + 30  # a hang guard, not a timing assertion
        while not len(store.server_events()) and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(timeout=10)
        ev = store.server_events()
    assert len(ev) == 1 and ev["token"].iloc[0] == 11179
    assert "running_req" not in ev.columns or np.isnan(ev["running_req"].iloc[0])
    err = capsys.readouterr().err
    assert "server log" in err and "running_req 1 blank code" in err



def test_classify_with_a_saved_page_of_blank_codes_says_so(tmp_path, capsys):
    import json

    from tealeaves.data import bundled_trace_path

    page = tmp_path / "p.prom"
    page.write_text("# TYPE sglang:num_running_reqs gauge\n"
                    'sglang:num_running_reqs{dp_rank="0"} 4294967295\n'
                    'sglang:num_running_reqs{dp_rank="1"} 7\n')
    assert main(["classify", str(bundled_trace_path()), "--server-metrics", str(page)]) == 0
    said = capsys.readouterr()
    assert "sglang:num_running_reqs 1 blank code" in said.out + said.err
    assert main(["classify", str(bundled_trace_path()), "--server-metrics", str(page),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["server_metrics"]["no_reading"] == [
        {"series": "sglang:num_running_reqs", "why": "blank", "values": 1}]

    rep = tmp_path / "r.html"
    assert main(["report", "--trace", str(bundled_trace_path()), "--server-metrics", str(page),
                 "--out", str(rep)]) == 0
    assert "sglang:num_running_reqs 1 blank code" in capsys.readouterr().err


def test_a_repeated_time_with_microseconds_is_not_taken_for_a_skipped_one():
    from zoneinfo import ZoneInfo

    from tealeaves.data.wallclock import LocalClock

    clock = LocalClock(ZoneInfo(BERLIN))
    got = [clock.epoch(dt.datetime(2026, 10, 25, 2, 10, 0, us)) for us in range(0, 10**6, 997)]
    assert None not in got and clock.gaps == 0 and clock.ambiguous == len(got)
    lord_howe = LocalClock(ZoneInfo("Australia/Lord_Howe"))  # a 30-minute change
    assert lord_howe.epoch(dt.datetime(2026, 10, 4, 2, 15)) is None and lord_howe.gaps == 1
