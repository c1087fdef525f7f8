"""Issue 36: every file the field posts, second round.

Each behaviour is tried on a real published output (``tests/published``: where each came
from is in its ``MANIFEST.json``) or, where none was found, on one written in the tool's exact
published format (said at the test):

- the plain ``nvidia-smi`` table: one instant per GPU (utilization, memory, power, temperature), its cap,
  name and bus id as device facts, dated by the line above it in ``--tz`` (UTC by default,
  said), MIG and process sections counted, ``N/A`` blank; Ray's line prefix undone;
- one recogniser of server-log lines shared by ``import``'s detection and the parser: every
  line the parser reads makes ``import`` name the file a server log, with every prefix;
- GPUs without an index column told apart by uuid/bus id, by place among one timestamp's rows,
  by name, or said to be indistinguishable;
- another command's comment inside a ``dmon`` skipped and counted; a quote prefix on the
  first line only undone; a file of fields outside the schema refused, stored nothing;
- a year-less vLLM log says the year assumed; placement notes give the times stored;
- device facts a file states reach the devices table and the trace;
- other tools' outputs refused by name.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from tealeaves.data.importers import (
    ImportFormatError,
    detect_format,
    import_file,
    import_text,
    load_trace,
)
from tealeaves.data.server_lines import line_format
from tealeaves.data.server_log import ServerLogParser, parse_file
from tealeaves.data.store import SampleStore

PUB = Path(__file__).parent / "published"
MIB = 2**20
#: smi_table_a10_550_dated_01.txt's GPU 0: "|  0%   32C    P8    21W /  150W |"
TABLE_01_TEMP_C = 32.0


def pub(name: str) -> Path:
    return PUB / name


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tealeaves.app.cli", *args], check=False,
                          cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONUTF8": "1"})


# -- the plain nvidia-smi table ---------------------------------------------------------------

def test_an_8_gpu_table_is_one_dated_instant_with_its_caps_names_and_bus_ids():
    res = import_file(pub("smi_table_h100x8_535_dated_procs_09.txt"))
    df = res.samples
    assert res.format == "nvidia_smi_table" and res.gpus == list(range(8))
    # "Mon Oct  6 03:29:21 2025" above the table, read as UTC and said so
    assert set(df["timestamp"]) == {datetime(2025, 10, 6, 3, 29, 21, tzinfo=UTC).timestamp()}
    assert res.zone == "UTC" and res.placed is None
    g0 = df[df["gpu"] == 0].iloc[0]  # "259W / 700W |  18449MiB / 81559MiB |     25%"
    assert (g0["gpu_util"], g0["power_w"], g0["mem_used_bytes"]) == (25.0, 259.0, 18449 * MIB)
    assert g0["gpu_temp_c"] == 36.0  # "| N/A   36C    P0   259W / 700W |"
    dev = res.devices.set_index("gpu")
    assert (dev["name"] == "NVIDIA H100 80GB HBM3").all() and (dev["power_limit_w"] == 700).all()
    assert dev.loc[0, "pci_bus_id"] == "00000000:1B:00.0"
    assert dev.loc[0, "mem_total_bytes"] == 81559 * MIB
    assert any("Processes section" in n for n in res.notes)


def test_the_table_date_is_read_in_the_zone_given():
    utc = import_file(pub("smi_table_h100x8_535_dated_procs_09.txt"))
    berlin = import_file(pub("smi_table_h100x8_535_dated_procs_09.txt"), tz="Europe/Berlin")
    assert utc.samples["timestamp"].iloc[0] - berlin.samples["timestamp"].iloc[0] == 7200.0
    assert berlin.zone == "Europe/Berlin"


def test_an_old_undated_table_is_placed_at_its_modification_time_and_says_so():
    path = pub("smi_table_p40x3_418_old_03.txt")
    res = import_file(path)
    assert res.format == "nvidia_smi_table" and res.gpus == [0, 1, 2]
    assert res.placed == "mtime" and res.zone is None
    assert res.placed_at == pytest.approx(path.stat().st_mtime)
    assert set(res.samples["timestamp"]) == {res.placed_at}
    assert list(res.devices["name"]) == ["Tesla P40"] * 3


def test_a_mig_table_counts_its_instances_and_reads_n_a_as_blank():
    res = import_file(pub("smi_table_a100_580_mig_new_08.txt"))
    assert res.gpus == [0]
    assert math.isnan(res.samples["gpu_util"].iloc[0]) and res.blanks.get("gpu_util") == 1
    assert any(n.startswith("MIG devices section: 4 instance rows") for n in res.notes)


def test_a_table_under_rays_task_prefix_is_read():
    res = import_file(pub("smi_table_h100x8_550_ray_task_prefix_11.txt"))
    assert res.format == "nvidia_smi_table" and res.gpus == list(range(8))
    assert any("Ray's" in n for n in res.normalised)


@pytest.mark.parametrize("name", sorted(p.name for p in PUB.glob("smi_table_*.txt")))
def test_every_published_table_gives_each_gpu_once(name):
    text = pub(name).read_text(encoding="utf-8")
    res = import_file(pub(name))
    shown = sorted({int(line.split("|")[1].split()[0]) for line in text.split("\n")
                    if "|" in line and line.split("|")[1].split()[:1]
                    and line.split("|")[1].split()[0].isdigit()
                    and ":" in line.split("|")[2] and "." in line.split("|")[2]})
    assert shown and res.gpus == shown and len(res.samples) == len(shown), (name, res.skipped)
    assert res.skipped == [], res.skipped


# -- server logs: one recogniser -------------------------------------------------------------

LOGS = sorted(p.name for p in PUB.glob("*_log_*.txt"))


@pytest.mark.parametrize("name", LOGS)
def test_every_line_the_parser_reads_makes_import_name_the_log(name):
    path = pub(name)
    want = "sglang_log" if name.startswith("sglang") else "vllm_log"
    assert detect_format(path) == want
    with pytest.raises(ImportFormatError, match=r"server log .*--server-log FILE"):
        import_file(path)
    parser = ServerLogParser()
    lines = path.read_text(encoding="utf-8").split("\n")
    read = [ln for ln in lines if parser.parse_line(ln) is not None]
    assert read, name
    # the shared recogniser: each line the parser reads, alone, is a server log to import
    for ln in read:
        assert line_format(ln) == want.removesuffix("_log"), ln
        assert detect_format_text(ln) == want, ln


def detect_format_text(line: str) -> str | None:
    from tealeaves.data.importers import detect_text

    return detect_text(line)


@pytest.mark.parametrize("prefix", [
    "[2025-10-16 19:02:59 DP0 TP0 EP0 scheduler.py:1521] ",  # file:line in the rank prefix
    "[ 2025-10-16 19:02:59 DP1 TP1 EP1] ",  # a space after [
    "12345 [2025-10-16 19:02:59] ",  # a bare pid
    "(SGLangEngine pid=4242) [2025-10-16 19:02:59 TP0] ",  # Ray's prefix
])
def test_sglang_lines_are_recognised_under_every_prefix(prefix):
    # the message as the published DP/TP/EP log prints it
    line = pub("sglang_log_dp_tp_ep_decode_01.txt").read_text().split("\n")[1]
    msg = line[line.index("Decode batch"):]
    text = prefix + msg
    assert detect_format_text(text) == "sglang_log"
    assert ServerLogParser().parse_line(text).fields["running_req"] == 68


def test_a_yearless_vllm_log_says_the_year_and_zone_it_assumed():
    res = parse_file(pub("vllm_log_spec_063_prefix_cache_02.txt"))
    assert res.events and res.year_assumed == datetime.now(UTC).year
    assert res.zone == "UTC"
    assert f"dated {res.year_assumed}" in res.time_note() and "UTC" in res.time_note()
    given = parse_file(pub("vllm_log_spec_063_prefix_cache_02.txt"), year=2024)
    assert given.year_assumed is None


# -- GPUs without an index -------------------------------------------------------------------

def test_two_gpus_without_an_index_are_told_apart_by_name():
    res = import_file(pub("query_csv_2gpu_noindex_bpytop_02.txt"))
    assert res.gpus == [0, 1] and res.gpu_key == "name"
    assert list(res.devices["name"]) == ["GeForce GTX 1080 Ti", "GeForce GTX 1060 6GB"]


def test_rows_of_one_timestamp_are_gpus_by_their_place():
    # nvidia-smi --query-gpu=timestamp,name,utilization.gpu,memory.used --format=csv -l 1
    # on two GPUs (the exact published header; one sweep prints one timestamp per GPU row)
    text = ("timestamp, name, utilization.gpu [%], memory.used [MiB]\n"
            "2024/01/16 14:44:16.977, NVIDIA A100-SXM4-80GB, 10 %, 1000 MiB\n"
            "2024/01/16 14:44:16.977, NVIDIA A100-SXM4-80GB, 90 %, 5000 MiB\n"
            "2024/01/16 14:44:17.981, NVIDIA A100-SXM4-80GB, 11 %, 1000 MiB\n"
            "2024/01/16 14:44:17.981, NVIDIA A100-SXM4-80GB, 91 %, 5000 MiB\n")
    res = import_text(text, "nvidia_smi_query")
    assert res.gpus == [0, 1] and res.gpu_key == "name and place"
    assert list(res.samples.sort_values(["gpu", "timestamp"])["gpu_util"]) == [10, 11, 90, 91]


def test_one_gpu_polled_by_the_millisecond_stays_one_gpu():
    res = import_file(pub("query_csv_rtx4060_laptop_power_na_05.txt"))
    assert res.gpus == [0]
    from cases import case_path

    lms = import_file(case_path("query_gpu_csv_lms_timestamp_1gpu_prompt_01.txt"))
    assert lms.gpus == [0] and lms.gpu_key == "single" and len(lms.samples) == 5


def test_a_bus_id_tells_gpus_apart():
    text = ("pci.bus_id, utilization.gpu [%]\n00000000:18:00.0, 5 %\n00000000:2A:00.0, 95 %\n"
            "00000000:18:00.0, 6 %\n00000000:2A:00.0, 96 %\n")
    res = import_text(text, "nvidia_smi_query")
    assert res.gpus == [0, 1] and res.gpu_key == "pci.bus_id"
    assert list(res.devices["pci_bus_id"]) == ["00000000:18:00.0", "00000000:2A:00.0"]


def test_an_inventory_of_8_gpus_gives_8_devices_and_no_samples(tmp_path):
    res = import_file(pub("query_csv_h100x8_name_memtotal_noindex_01.txt"))
    assert res.samples.empty and res.gpu_key == "inventory" and len(res.devices) == 8
    out = _cli("import", str(pub("query_csv_h100x8_name_memtotal_noindex_01.txt")),
               "--store", str(tmp_path / "s.db"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "device facts only" in out.stdout
    devs = SampleStore(tmp_path / "s.db").devices()
    assert len(devs) == 8 and (devs["mem_total_bytes"] == 81559 * MIB).all()


# -- lines of other commands, quotes, nothing in the schema ----------------------------------

def test_another_commands_comment_inside_a_dmon_is_skipped_not_a_header():
    res = import_file(pub("dmon_rtx30x3_comment_junk_01.txt"))
    assert res.format == "nvidia_smi_dmon" and res.gpus == [0, 1, 2]
    why = dict(res.skipped)
    assert why[1].startswith("comment line, not a dmon header: #Different command line")
    assert sorted(res.samples["power_w"]) == [119.0, 159.0, 219.0]


def test_a_quote_prefix_on_the_first_line_only_is_undone(tmp_path):
    src = pub("query_csv_2gpu_noindex_bpytop_02.txt").read_text().split("\n")
    head = next(i for i, ln in enumerate(src) if ln.startswith("name"))
    src[head] = "> " + src[head]
    (tmp_path / "q.csv").write_text("\n".join(src[head:]))
    res = import_file(tmp_path / "q.csv")
    plain = import_file(pub("query_csv_2gpu_noindex_bpytop_02.txt"))
    assert res.samples.drop(columns=["timestamp", "monotonic"]).equals(
        plain.samples.drop(columns=["timestamp", "monotonic"]))
    assert any("first 1 line" in n for n in res.normalised)


def test_a_file_of_fields_outside_the_schema_is_refused_and_stores_nothing(tmp_path):
    # nvidia-smi --query-gpu=index,clocks.mem,nvlink... is not a query field; the real
    # ECC/retired-pages fields (exact published header form)
    (tmp_path / "ecc.csv").write_text(
        "index, clocks.mem [MHz], ecc.errors.corrected.volatile.total, retired_pages.pending\n"
        "0, 1593 MHz, 0, No\n1, 1593 MHz, 0, No\n")
    with pytest.raises(ImportFormatError, match=r"holds no reading tealeaves stores \(its "
                                                r"fields: clocks.mem, ecc"):
        import_file(tmp_path / "ecc.csv")
    out = _cli("import", str(tmp_path / "ecc.csv"), "--store", str(tmp_path / "s.db"),
               cwd=tmp_path)
    assert out.returncode == 2 and "nothing was imported" in out.stderr
    assert not (tmp_path / "s.db").exists() or SampleStore(tmp_path / "s.db").count() == 0


def test_the_placement_note_gives_the_time_the_last_row_was_stored(tmp_path):
    # a dmon whose header repeats after the last row (dmon reprints it every 20 rows)
    lines = pub("dmon_rtxpro6000x4_pucm_02.txt").read_text().rstrip("\n").split("\n")
    headers = [ln for ln in lines if ln.startswith("#")]
    (tmp_path / "d.txt").write_text("\n".join([*lines, *headers]) + "\n")
    res = import_file(tmp_path / "d.txt")
    assert res.placed == "mtime"
    assert res.placed_at == res.samples["timestamp"].max()
    assert res.placed_at == pytest.approx((tmp_path / "d.txt").stat().st_mtime)


# -- device facts ----------------------------------------------------------------------------

def test_device_facts_of_a_table_reach_the_store_and_the_trace(tmp_path):
    path = pub("smi_table_a10_550_dated_01.txt")
    out = _cli("import", str(path), "--store", str(tmp_path / "s.db"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "GPU 0: NVIDIA A10, bus 00000000:06:00.0, power limit 150 W" in out.stdout
    assert "times read as UTC" in out.stdout
    with SampleStore(tmp_path / "s.db", readonly=True) as ro:
        dev = ro.devices().set_index("gpu")
        temp = ro.read_range()["gpu_temp_c"]
    assert dev.loc[0, "power_limit_w"] == 150 and dev.loc[0, "name"] == "NVIDIA A10"
    assert dev.loc[0, "pci_bus_id"] == "00000000:06:00.0"
    assert list(temp) == [TABLE_01_TEMP_C]
    trace = load_trace(path)
    assert trace.devices.set_index("gpu").loc[0, "power_limit_w"] == 150


def test_temperature_is_stored_from_the_query_csv_and_dmon_and_n_a_is_blank():
    """``temperature.gpu`` (printed without a unit) and dmon's ``gtemp`` are ``gpu_temp_c``."""
    q = import_file(pub("query_csv_2gpu_noindex_bpytop_02.txt"))
    assert list(q.samples.sort_values("gpu")["gpu_temp_c"]) == [60.0, 49.0]
    d = import_text("# gpu   pwr  gtemp    sm   mem\n# Idx     W      C     %     %\n"
                    "    0    61     44    12     3\n    1    58      -     9     2\n",
                    "nvidia_smi_dmon", start_time=1.7e9)
    assert d.samples["gpu_temp_c"].iloc[0] == 44.0
    assert math.isnan(d.samples["gpu_temp_c"].iloc[1]) and d.blanks.get("gpu_temp_c") == 1
    hot = import_text("# gpu   pwr  gtemp\n# Idx     W      C\n    0    61    900\n"
                      "    0    61     40\n", "nvidia_smi_dmon", start_time=1.7e9)
    assert len(hot.samples) == 1 and hot.skipped[0][0] == 3  # 900 C is no reading
    assert "gpu_temp_c 900 °C is outside its valid range" in hot.skipped[0][1]


def test_a_layout_2_store_gains_the_temperature_and_bus_id_columns(tmp_path):
    """A store written before ``gpu_temp_c`` and ``pci_bus_id``: read-only they are NaN /
    None, opened for writing it gains them and keeps its rows."""
    import sqlite3

    from tealeaves.data.store import STORE_VERSION

    db = tmp_path / "v2.db"
    res = import_file(pub("smi_table_a10_550_dated_01.txt"))
    with SampleStore(db) as st:
        st.append_import([res.samples], [], [res.devices])
    conn = sqlite3.connect(db)
    conn.execute("ALTER TABLE samples DROP COLUMN gpu_temp_c")
    conn.execute("ALTER TABLE devices DROP COLUMN pci_bus_id")
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    with SampleStore(db, readonly=True) as ro:
        assert ro.read_range()["gpu_temp_c"].isna().all()
        assert ro.devices()["pci_bus_id"].isna().all()
        assert ro.devices().loc[0, "power_limit_w"] == 150
    with SampleStore(db) as rw:
        rw.append_import([res.samples.assign(timestamp=res.samples["timestamp"] + 1)], [],
                         [res.devices])
        both = rw.read_range()
        assert len(both) == 2 and list(both["gpu_temp_c"].isna()) == [True, False]
        assert rw.devices().loc[0, "pci_bus_id"] == "00000000:06:00.0"
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == STORE_VERSION == 3
    conn.close()


def test_the_collector_reads_temperature_and_the_bus_id():
    sys.path.insert(0, str(Path(__file__).parent))
    from fake_nvml import FakeGpu, FakeNvml

    from tealeaves.collectors.nvml import NvmlCollector

    gpus = [FakeGpu(uuid="GPU-a", temp=51.0), FakeGpu(uuid="GPU-b", temp=None, bus_id=None)]
    col = NvmlCollector(hz=10, nvml=FakeNvml(gpus), threads=False)
    devs = col.open().set_index("gpu")
    try:
        rows = {r["gpu"]: r for r in col.sweep() if "sm_clock_mhz" in r}
    finally:
        col.close()
    assert devs.loc[0, "pci_bus_id"] == "00000000:17:00.0" and pd.isna(devs.loc[1, "pci_bus_id"])
    assert rows[0]["gpu_temp_c"] == 51.0 and math.isnan(rows[1]["gpu_temp_c"])


def test_a_stated_fact_keeps_the_facts_it_does_not_state(tmp_path):
    store = SampleStore(tmp_path / "s.db")
    with store:
        store.put_devices([{"host": "localhost", "gpu": 0, "uuid": "GPU-1", "name": "NVIDIA A10",
                            "power_limit_w": math.nan, "max_sm_clock_mhz": 1980.0,
                            "mem_total_bytes": 1.0, "gpm_supported": 1}])
        res = import_file(pub("smi_table_a10_550_dated_01.txt"))
        store.append_import([res.samples], [], [res.devices])
        d = store.devices().set_index("gpu").loc[0]
    assert d["power_limit_w"] == 150 and d["max_sm_clock_mhz"] == 1980 and d["uuid"] == "GPU-1"


# -- other tools -----------------------------------------------------------------------------

OTHER = {  # written in each tool's exact published form where no file was found
    "rocm-smi": (
        ("========================ROCm System Management Interface========================\n"
        "GPU  Temp   AvgPwr  SCLK    MCLK     Fan  Perf  PwrCap  VRAM%  GPU%\n"
        "0    35.0c  40.0W   800Mhz  1600Mhz  0%   auto  300.0W    0%   0%\n"),
        "AMD rocm-smi output"),
    "amd-smi": (
        ("GPU  POWER  GPU_TEMP  MEM_TEMP  GFX_UTIL  GFX_CLOCK  MEM_UTIL  MEM_CLOCK\n"
        "  0  124 W     38 °C     31 °C      0 %    132 MHz     0 %    900 MHz\n"),
        "AMD amd-smi output"),
    "smi-q": (
        ("\n==============NVSMI LOG==============\n\nTimestamp : Mon Oct  6 03:29:21 2025\n"
        "Driver Version : 535.129.03\n"),
        "nvidia-smi -q"),
    "topo": (
        ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV18\t0-55\t0\n"
        "GPU1\tNV18\t X \t0-55\t0\n\nLegend:\n\n  X    = Self\n"),
        "nvidia-smi topo -m"),
    "pmon": (
        ("# gpu         pid   type     sm    mem    enc    dec    command\n"
        "# Idx           #    C/G      %      %      %      %    name\n"
        "    0      12345     C     95     40      -      -    python\n"),
        "nvidia-smi pmon"),
}


@pytest.mark.parametrize("tool", sorted(OTHER))
def test_other_tools_are_refused_by_name(tool, tmp_path):
    text, name = OTHER[tool]
    (tmp_path / "f.txt").write_text(text, encoding="utf-8")
    with pytest.raises(ImportFormatError, match=f"is {name}.*: not supported"):
        import_file(tmp_path / "f.txt")


def test_every_published_file_is_read_or_refused_by_name():
    """The whole folder: each file gives samples or device facts, or is refused with what it
    is (a server log, another tool); none crashes, none reports success storing nothing."""
    for path in sorted(PUB.glob("*.txt")):
        try:
            res = import_file(path)
        except ImportFormatError as exc:
            msg = str(exc)
            assert ("server log" in msg or "not supported" in msg
                    or "holds no reading" in msg), (path.name, msg)
            continue
        assert len(res.samples) or len(res.devices), path.name


def test_the_manifest_names_every_file():
    manifest = PUB / "MANIFEST.json"
    if not manifest.exists():
        pytest.skip("no MANIFEST.json")
    listed = {e["file"] for e in json.loads(manifest.read_text())}
    assert {p.name for p in PUB.glob("*.txt")} <= listed


_TOOL_NAMES = {"rocm_smi": "AMD rocm-smi output", "amd_smi": "AMD amd-smi output",
               "other_xpu": "Intel GPU tool output", "smi_q": r"nvidia-smi -q",
               "smi_topo": r"nvidia-smi topo -m"}


@pytest.mark.parametrize("name", sorted(p.name for p in PUB.glob("*.txt")
                                        if p.name.startswith(tuple(_TOOL_NAMES))))
def test_published_outputs_of_other_tools_are_refused_by_name(name):
    want = next(v for k, v in _TOOL_NAMES.items() if name.startswith(k))
    with pytest.raises(ImportFormatError, match=f"is {want}.*: not supported"):
        import_file(pub(name))


def test_the_r610_banner_and_the_2014_layout_are_tables():
    b200 = import_file(pub("smi_table_b200x2_610_kmd_partial_12.txt"))
    assert b200.format == "nvidia_smi_table" and b200.gpus == [0, 1]
    assert list(b200.samples["power_w"]) == [139.0, 142.0]
    assert (b200.devices["power_limit_w"] == 1000).all()
    old = import_file(pub("smi_table_gtx680x3_331_2014_partial_13.txt"))
    assert old.gpus == [0, 1, 2]
    # "N/A /  N/A" and GPU-Util "N/A": blank, never 0; the cap unknown
    assert old.samples["power_w"].isna().all() and old.samples["gpu_util"].isna().all()
    assert old.blanks == {"gpu_util": 3, "power_w": 3}
    assert old.devices["power_limit_w"].isna().all()
    assert (old.samples["mem_used_bytes"] == 9 * MIB).all()


def test_a_table_redrawn_with_unicode_box_lines_reads_the_same(tmp_path):
    src = pub("smi_table_h100x8_535_dated_procs_09.txt").read_text()
    (tmp_path / "u.txt").write_text(src.replace("|", "│").replace("=", "═"), encoding="utf-8")
    a, b = import_file(tmp_path / "u.txt"), import_file(pub("smi_table_h100x8_535_dated_procs_09.txt"))
    assert a.samples.equals(b.samples)
