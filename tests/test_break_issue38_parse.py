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
from tealeaves.collectors.server_log import parse_lines
from tealeaves.data.importers import import_file, import_text

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
