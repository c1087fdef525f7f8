"""Issue 38, third round, importers' correctness: a blank field costs only itself, GPUs are
never renumbered by a missing row, a file's own dates win over its mtime, header units are
honoured, a field named twice is refused and an assumed interval is said."""

from __future__ import annotations

import json
import math
import os
import re
from datetime import UTC, datetime

import pytest

from tealeaves.app.cli import main
from tealeaves.data.importers import ImportFormatError, import_file, import_text
from tealeaves.data.store import SampleStore

T0 = "2025/11/30 10:00:1"


def _query(rows: list[str], header: str = "timestamp, index, utilization.gpu [%], "
           "power.draw [W]") -> str:
    return "\n".join([header, *rows]) + "\n"


# --------------------------------------------------------------------------- 1: ERR!

@pytest.mark.parametrize("mark", ["ERR!", "[Unknown Error]", "[GPU is lost]"])
def test_query_error_mark_blanks_one_field_and_keeps_the_row(tmp_path, mark):
    """/tmp/hostile/vanish.csv: GPU 0's row with power ERR! vanished whole (95 % lost)."""
    rows = []
    for s in range(5):
        rows += [f"{T0}{s}.000, 0, 95 %, {mark}", f"{T0}{s}.000, 1, 20 %, 150.00 W"]
    f = tmp_path / "vanish.csv"
    f.write_text(_query(rows))
    res = import_file(f)
    assert res.skipped == []
    g0 = res.samples[res.samples["gpu"] == 0]
    assert len(g0) == 5
    assert (g0["gpu_util"] == 95).all() and g0["power_w"].isna().all()
    assert res.blanks.get("power_w") == 5


def test_dmon_err_blanks_one_field_and_keeps_the_row():
    text = ("# gpu    pwr  gtemp     sm    mem\n# Idx      W      C      %      %\n"
            "    0   ERR!     50     95     40\n    1    150     40     20     10\n")
    res = import_text(text, "dmon", start_time=1.76e9)
    assert res.skipped == [] and len(res.samples) == 2
    g0 = res.samples[res.samples["gpu"] == 0].iloc[0]
    assert g0["gpu_util"] == 95 and math.isnan(g0["power_w"])
    assert res.blanks.get("power_w") == 1


def test_dcgmi_err_blanks_one_field_and_keeps_the_row():
    text = ("#Entity   GRACT   SMACT\nID\nGPU 0     ERR!    0.500\nGPU 1     0.200   0.300\n")
    res = import_text(text, "dcgmi", start_time=1.76e9)
    assert res.skipped == [] and len(res.samples) == 2
    g0 = res.samples[res.samples["gpu"] == 0].iloc[0]
    assert math.isnan(g0["gr_engine_active"]) and g0["sm_active"] == pytest.approx(50)


# --------------------------------------------------------------------------- 5: a field twice

DUPLICATES = {
    "query": (("timestamp, index, utilization.gpu [%], power.draw [W], utilization.gpu [%]\n"
               "2025/11/30 10:00:00.000, 0, 90, 300, 10\n"), "utilization.gpu"),
    "dmon": ("# gpu    pwr     sm     sm\n    0    100     90     10\n", "sm"),
    "dcgmi": ("#Entity   GRACT   GRACT\nID\nGPU 0     0.900   0.100\n", "GRACT"),
    "csv": ("timestamp,gpu,gpu_util,gpu_util\n1764496800,0,90,10\n", "gpu_util"),
}


@pytest.mark.parametrize("fmt", sorted(DUPLICATES))
def test_a_header_naming_a_field_twice_is_refused(tmp_path, fmt):
    """/tmp/hostile/duph.csv: the last utilization.gpu column silently won (10, not 90)."""
    text, field = DUPLICATES[fmt]
    f = tmp_path / f"dup_{fmt}.txt"
    f.write_text(text)
    with pytest.raises(ImportFormatError, match=rf"{f.name}: line 1: .*'{field}' twice"):
        import_file(f, format=fmt, start_time=1.76e9)


def test_cli_refuses_a_duplicate_header_and_stores_nothing(tmp_path, capsys):
    f = tmp_path / "duph.csv"
    f.write_text(DUPLICATES["query"][0])
    db = tmp_path / "s.db"
    assert main(["import", str(f), "--store", str(db)]) != 0
    err = capsys.readouterr().err
    assert "'utilization.gpu' twice" in err and "Traceback" not in err
    assert not db.exists() or SampleStore(db).count() == 0


# --------------------------------------------------------------------------- 4: header units

@pytest.mark.parametrize(("field", "value", "column", "expected"), [
    ("memory.used [KiB]", "1000", "mem_used_bytes", 1000 * 1024),
    ("memory.used [GiB]", "2 GiB", "mem_used_bytes", 2 * 2**30),
    ("memory.used [MB]", "1", "mem_used_bytes", 1e6),
    ("power.draw [kW]", "0.3", "power_w", 300),
    ("power.draw [mW]", "250000 mW", "power_w", 250),
    ("clocks.sm [GHz]", "1.98", "sm_clock_mhz", 1980),
    ("memory.used [MiB]", "1000 MiB", "mem_used_bytes", 1000 * 2**20),
])
def test_a_unit_in_the_header_is_converted(field, value, column, expected):
    """Before: `memory.used [KiB]` 1000 was stored as 1000 MiB (the header's unit ignored)."""
    text = _query([f"2025/11/30 10:00:00.000, 0, 50 %, {value}"],
                  header=f"timestamp, index, utilization.gpu [%], {field}")
    res = import_text(text, "query")
    assert res.skipped == []
    assert res.samples.iloc[0][column] == pytest.approx(expected)


def test_a_device_fact_in_another_unit_is_converted():
    text = _query(["2025/11/30 10:00:00.000, 0, 50 %, 80, 0.7"],
                  header="timestamp, index, utilization.gpu [%], memory.total [GiB], "
                         "power.limit [kW]")
    dev = import_text(text, "query").devices.iloc[0]
    assert dev["mem_total_bytes"] == 80 * 2**30 and dev["power_limit_w"] == pytest.approx(700)


@pytest.mark.parametrize("field", ["temperature.gpu [F]", "memory.used [pages]",
                                   "power.draw [hp]", "utilization.gpu [ratio]"])
def test_a_unit_tealeaves_cannot_convert_refuses_the_file_by_field(tmp_path, field):
    f = tmp_path / "unit.csv"
    f.write_text(_query(["2025/11/30 10:00:00.000, 0, 50"],
                        header=f"timestamp, index, {field}"))
    with pytest.raises(ImportFormatError, match=rf"unit.csv: line 1: field '{re.escape(field)}'"):
        import_file(f)


def test_a_unit_in_given_columns_is_converted():
    res = import_text("2025/11/30 10:00:00.000, 0, 1000\n", "query",
                      columns=["timestamp", "index", "memory.used [KiB]"])
    assert res.samples.iloc[0]["mem_used_bytes"] == 1000 * 1024


# --------------------------------------------------------------------------- 2: GPU by place

def _sweeps(gap: str | None) -> str:
    """Three sweeps of 4 GPUs (util 0/30/60/90 %) without an index field; the second sweep's
    GPU 1 row is missing, or replaced by ``gap``."""
    rows = []
    for s in range(3):
        for g in range(4):
            if s == 1 and g == 1:
                if gap is not None:
                    rows.append(gap)
                continue
            rows.append(f"{T0}{s}.000, NVIDIA H100 80GB HBM3, {30 * g} %, {100 * (g + 1)} W")
        rows.append("")
    return _query(rows, header="timestamp, name, utilization.gpu [%], power.draw [W]")


SMI_ERROR = "Unable to determine the device handle for GPU 00000000:43:00.0: Unknown Error"


@pytest.mark.parametrize("gap", [None, SMI_ERROR])
def test_a_short_sweep_is_refused_not_renumbered(gap):
    """/tmp/hostile/pos3.csv, pos.csv: GPU 2's 60 % was stored as GPU 1, GPU 3's as GPU 2."""
    res = import_text(_sweeps(gap), "query")
    df = res.samples
    # every GPU keeps its own readings: GPU g is always 30*g %
    assert (df["gpu_util"] == 30 * df["gpu"]).all()
    assert sorted(df.groupby("gpu").size().tolist()) == [2, 2, 2, 2]
    refused = [why for _, why in res.skipped if "row refused" in why]
    assert len(refused) == 3 and "holds 3 rows, a full one 4" in refused[0]
    assert res.rows_read == 8


def test_full_sweeps_without_index_still_number_by_place():
    res = import_text(_sweeps(f"{T0}1.000, NVIDIA H100 80GB HBM3, 30 %, 200 W"), "query")
    assert res.skipped == [] and len(res.samples) == 12
    assert (res.samples["gpu_util"] == 30 * res.samples["gpu"]).all()


# --------------------------------------------------------------------------- 3: mixed tables

def _table_file(tmp_path):
    """/tmp/hostile/tab_mixed.txt's shape: an undated one-GPU table, then the same table
    dated ``Mon Oct  6 03:29:23 2025``; the file's mtime 14 months later."""
    table = (
        "+-----------------------------------------------------------------------------+\n"
        "| NVIDIA-SMI 535.129.03   Driver Version: 535.129.03   CUDA Version: 12.2     |\n"
        "|-------------------------------+----------------------+----------------------+\n"
        "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
        "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |\n"
        "|===============================+======================+======================|\n"
        "|   0  NVIDIA H100 80GB    On   | 00000000:1B:00.0 Off |                    0 |\n"
        "| N/A   36C    P0   259W / 700W |  18449MiB / 81559MiB |     25%      Default |\n"
        "+-------------------------------+----------------------+----------------------+\n"
    )
    f = tmp_path / "tab_mixed.txt"
    f.write_text(f"{table}\nMon Oct  6 03:29:23 2025\n{table}")
    late = datetime(2026, 12, 7, tzinfo=UTC).timestamp()
    os.utime(f, (late, late))
    return f


def test_an_undated_table_among_dated_ones_is_refused_not_put_at_the_mtime(tmp_path):
    f = _table_file(tmp_path)
    res = import_file(f)
    dated = datetime(2025, 10, 6, 3, 29, 23, tzinfo=UTC).timestamp()
    assert res.samples["timestamp"].tolist() == [dated]
    assert res.placed is None  # no "no timestamps in the file" note
    assert len(res.skipped) == 1 and "no date line" in res.skipped[0][1]
    assert res.skipped[0][0] == 7 and res.rows_read == 1


def test_undated_tables_alone_are_still_placed(tmp_path):
    f = tmp_path / "undated.txt"
    f.write_text(_table_file(tmp_path).read_text().split("\n\nMon")[0] + "\n")
    res = import_file(f)
    assert len(res.samples) == 1 and res.placed == "mtime" and res.skipped == []


# --------------------------------------------------------------------------- 6: assumed cadence

EXPORTER = "".join(
    f'DCGM_FI_DEV_GPU_UTIL{{gpu="{g}",UUID="GPU-{g}",modelName="H100"}} {90 - 80 * g + s}\n'
    for s in range(3) for g in range(2))


@pytest.mark.parametrize(("fmt", "text", "step"), [
    ("dcgm_exporter", EXPORTER, 30.0),
    ("dmon", "# gpu    sm\n    0    90\n    0    91\n", 1.0),
    ("dcgmi", "#Entity   GRACT\nID\nGPU 0     0.900\nGPU 0     0.910\n", 1.0),
])
def test_an_assumed_interval_is_recorded(fmt, text, step):
    res = import_text(text, fmt, end_time=1.76e9)
    assert res.placed == "mtime" and res.interval == step and res.interval_assumed
    given = import_text(text, fmt, end_time=1.76e9, interval=5)
    assert given.interval == 5 and not given.interval_assumed
    dated = import_text(_query([f"{T0}0.000, 0, 50 %, 100 W"]), "query")
    assert dated.interval is None and not dated.interval_assumed


def test_import_classify_and_report_say_the_assumed_interval(tmp_path, capsys):
    """/tmp/hostile/dxm.txt: dcgm-exporter scrapes placed 30 s apart, never said."""
    f = tmp_path / "dxm.txt"
    f.write_text(EXPORTER)
    said = "instants 30 s apart (an assumed interval"
    assert main(["import", str(f), "--store", str(tmp_path / "s.db")]) == 0
    assert said in capsys.readouterr().out
    assert main(["import", str(f), "--store", str(tmp_path / "j.db"), "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)["files"][0]
    assert entry["interval"] == 30 and entry["interval_assumed"] is True
    main(["classify", str(f)])
    assert said in capsys.readouterr().err
    main(["report", "--trace", str(f), "--out", str(tmp_path / "r.html")])
    assert said in capsys.readouterr().err


@pytest.mark.parametrize(("fmt", "text"), [
    ("dmon", "# gpu sm\n0 50\n0 51\n0 52\n0 53\n# Date Time gpu sm\n20251006 03:29:23 0 60\n"),
    ("dcgmi", "#Entity GRACT\nID\n" + "GPU 0 0.5\n" * 4 + "2025-10-06 03:29:23 GPU 0 0.6\n"),
    ("query", "index, utilization.gpu [%]\n" + "0, 50 %\n" * 4
     + "timestamp, index, utilization.gpu [%]\n2025/10/06 03:29:23.000, 0, 60 %\n"),
])
def test_untimed_rows_of_a_file_with_its_own_timestamps_are_refused(fmt, text):
    """The same class as tab_mixed.txt in the line formats: the untimed rows went to the
    mtime (14 months away) and the note said the file had no timestamps."""
    late = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
    res = import_text(text, fmt, end_time=late)
    dated = datetime(2025, 10, 6, 3, 29, 23, tzinfo=UTC).timestamp()
    assert res.samples["timestamp"].tolist() == [dated]
    assert res.placed is None and res.rows_read == 1
    assert len(res.skipped) == 4 and all("without a timestamp" in w for _, w in res.skipped)
    # a start time given places them where the caller says
    assert import_text(text, fmt, start_time=dated - 100).rows_read == 5


def _by_id(header: str, ids: list[list[str]]) -> str:
    rows = [f"{T0}{s}.000, {i}, {10 * (g + 1)} %" for s, sweep in enumerate(ids)
            for g, i in enumerate(sweep)]
    return _query(rows, header=f"timestamp, {header}, utilization.gpu [%]")


def test_a_row_whose_bus_id_is_blank_is_refused_not_numbered_by_place():
    """The same class as pos3.csv: GPU 2 with pci.bus_id [GPU is lost] was stored as GPU 0."""
    text = _by_id("pci.bus_id", [["0:1B", "0:43", "0:52"], ["0:1B", "0:43", "[GPU is lost]"]])
    res = import_text(text, "query")
    assert (res.samples["gpu_util"] == 10 * (res.samples["gpu"] + 1)).all()
    assert len(res.samples) == 5 and len(res.skipped) == 1 and "blank" in res.skipped[0][1]


def test_a_gpu_whose_uuid_is_blank_in_one_row_keeps_its_number_by_bus_id():
    rows = [f"{T0}{s}.000, {u}, {b}, {v} %" for s, (u, b, v) in enumerate(
        [("GPU-a", "0:1B", 10), ("GPU-b", "0:43", 20), ("[N/A]", "0:43", 20)])]
    res = import_text(_query(rows, header="timestamp, uuid, pci.bus_id, utilization.gpu [%]"),
                      "query")
    assert res.samples["gpu"].tolist() == [0, 1, 1] and res.skipped == []
