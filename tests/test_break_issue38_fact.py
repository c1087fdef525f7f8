"""Issue 38, third round (stored device facts, screenshot verdicts, report output): each test
is a break found by a hostile tester and fails on the code before its fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tealeaves.data.device_facts import DeviceConflictError, same_name
from tealeaves.data.store import SampleStore

PUB = Path(__file__).parent / "published"
H100_TABLE = PUB / "smi_table_h100x8_535_dated_procs_09.txt"
RTX_QUERY = PUB / "query_csv_rtx4090_name_power_clocks_mem_03.txt"


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``tealeaves ARGS`` in a subprocess (the timeout is a hang guard only)."""
    return subprocess.run([sys.executable, "-m", "tealeaves.app.cli", *map(str, args)],
                          check=False, capture_output=True, text=True, timeout=timeout)


def stored_devices(db: Path) -> list[tuple]:
    with SampleStore(db, readonly=True) as s:
        d = s.devices()
    return list(d[["gpu", "name", "power_limit_w"]].itertuples(index=False, name=None))


# -- 1. another machine's inventory never rewrites the stored facts --------------------------

def test_another_machines_inventory_is_refused_and_the_facts_kept(tmp_path):
    db = tmp_path / "x.db"
    assert cli("import", H100_TABLE, "--store", db).returncode == 0
    before = stored_devices(db)
    out = cli("import", RTX_QUERY, "--store", db)
    assert out.returncode == 2, out.stdout
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert str(RTX_QUERY) in err and "GPU 0" in err and "RTX 4090" in err
    assert stored_devices(db) == before  # still eight H100s at 700 W
    assert before[0][1] == "NVIDIA H100 80GB HBM3" and before[0][2] == 700


def test_conflicting_files_of_one_import_store_nothing(tmp_path):
    db = tmp_path / "y.db"
    out = cli("import", H100_TABLE, RTX_QUERY, "--store", db)
    assert out.returncode == 2 and str(RTX_QUERY) in out.stderr
    with SampleStore(db, readonly=True) as s:
        assert s.count() == 0 and s.devices().empty


def test_the_same_machine_again_and_another_host_are_stored(tmp_path):
    db = tmp_path / "z.db"
    assert cli("import", H100_TABLE, "--store", db).returncode == 0
    assert cli("import", PUB / "smi_table_h100x8_550_idle_10.txt", "--store", db).returncode == 0
    assert cli("import", RTX_QUERY, "--store", db, "--host", "rtx").returncode == 0
    with SampleStore(db, readonly=True) as s:
        d = s.devices()
    assert set(d[d.host == "rtx"]["name"]) == {"NVIDIA GeForce RTX 4090"}
    assert set(d[d.host == "localhost"]["name"]) == {"NVIDIA H100 80GB HBM3"}


def test_put_devices_refuses_another_power_limit(tmp_path):
    with SampleStore(tmp_path / "p.db") as s:
        s.put_devices([{"host": "h", "gpu": 0, "uuid": "GPU-1", "name": "A", "power_limit_w": 700}])
        s.put_devices([{"host": "h", "gpu": 0, "uuid": "GPU-1", "name": "A",
                        "power_limit_w": 700.4}])  # table vs query rounding: the same
        # no uuid stated: another cap is another GPU (under the same uuid it is that GPU's
        # cap changed: test_a_new_power_cap_of_the_same_gpu_uuid_is_no_conflict)
        with pytest.raises(DeviceConflictError, match="power limit 700"):
            s.put_devices([{"host": "h", "gpu": 0, "name": "A", "power_limit_w": 450}])
        with pytest.raises(DeviceConflictError, match="uuid"):
            s.put_devices([{"host": "h", "gpu": 0, "uuid": "GPU-2", "name": "A"}])
        assert s.devices().loc[0, "power_limit_w"] == 700.4


def test_collect_into_a_store_of_another_gpu_is_refused_before_collecting(tmp_path):
    db = tmp_path / "c.db"
    assert cli("import", H100_TABLE, "--store", db).returncode == 0
    out = cli("collect", "--replay", PUB / "smi_table_a10_550_dated_01.txt", "--store", db,
              "--duration", "1")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "NVIDIA A10" in out.stderr and "nothing was collected" in out.stderr
    assert stored_devices(db)[0][1] == "NVIDIA H100 80GB HBM3"


def test_a_name_cut_by_the_table_is_the_same_name():
    assert same_name("Tesla V100-SXM2...", "Tesla V100-SXM2-16GB")
    assert not same_name("NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090")


# -- 3. no spreadsheet formula from a name in any CSV written ---------------------------------

NAMES_CSV = ("timestamp, index, name, utilization.gpu [%], power.draw [W], power.limit [W]\n"
             + "".join(f'2025/11/30 10:00:0{s}.000, 0, "=HYPERLINK(""http://evil"",""x"")", '
                       f'90 %, 600 W, 700 W\n2025/11/30 10:00:0{s}.000, 1, "@SUM(A1)", 10 %, '
                       f'100 W, 700 W\n' for s in (0, 1)))


def test_report_csv_escapes_formula_cells(tmp_path):
    import csv

    src = tmp_path / "names.csv"
    src.write_text(NAMES_CSV)
    out = tmp_path / "r.csv"
    res = cli("report", src, "--out", out)
    assert res.returncode == 0, res.stderr
    with out.open(newline="") as fh:
        cells = [c for row in csv.reader(fh) for c in row]
    assert "'=HYPERLINK(\"http://evil\",\"x\")" in cells and "'@SUM(A1)" in cells
    assert not [c for c in cells if c.startswith(("=", "@", "\t", "\r"))]
    # numbers stay numbers: a negative or signed value is no formula
    assert not [c for c in cells if c.startswith(("+", "-")) and not _number(c)]


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_safe_cell_follows_owasp():
    from tealeaves.data.csvtext import safe_cell

    for bad in ("=1+1", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\t=1", "\r=1"):
        assert safe_cell(bad) == "'" + bad
    for ok in ("-0.5", "+3", "-1e-05", "NVIDIA H100", "", 1.5, None):
        assert safe_cell(ok) == ok


# -- 4. --out - is stdout; a device or pipe is refused ----------------------------------------

def test_report_out_dash_writes_stdout_and_no_file(tmp_path):
    import json

    src = tmp_path / "names.csv"
    src.write_text(NAMES_CSV)
    res = subprocess.run([sys.executable, "-m", "tealeaves.app.cli", "report", str(src),
                          "--out", "-", "--format", "json"], check=False, capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["schema_version"] == 2
    assert "wrote the report to stdout" in res.stderr
    assert not (tmp_path / "-").exists()
    res = subprocess.run([sys.executable, "-m", "tealeaves.app.cli", "report", str(src),
                          "--out", "-"], check=False, capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert res.returncode == 2 and "--format" in res.stderr and not (tmp_path / "-").exists()


def test_report_out_to_a_device_or_pipe_is_refused_in_one_line(tmp_path):
    import os

    src = tmp_path / "names.csv"
    src.write_text(NAMES_CSV)
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    for target in ("/dev/stdout", "/dev/null", fifo):
        res = cli("report", src, "--out", target, "--format", "csv")
        err = res.stderr.strip()
        assert res.returncode == 2 and "not a regular file" in err, err
        assert len(err.splitlines()) == 1 and "- for stdout" in err


# -- 2. saturated utilization is no "uniform" while the power parts ---------------------------

def _picture(util: list[float], watts: list[float | None], cap: float | None = 700.0,
             power_sure: float = 0.9):
    from tealeaves.data.screen.read import PictureReading
    from tealeaves.data.screen.values import GpuReading

    gpus = []
    for g, (u, w) in enumerate(zip(util, watts, strict=True)):
        vals = {"util_pct": u, **({"power_w": w} if w is not None else {}),
                **({"power_limit_w": cap} if cap else {})}
        gpus.append(GpuReading(g, vals, {**{k: 0.9 for k in vals}, "power_w": power_sure}))
    return PictureReading("nvidia-smi", gpus)


def _whole(reading) -> dict:
    from tealeaves.classifier.picture import summary

    return summary(reading)["regions"][0]["verdict"]


def test_saturated_utilization_with_one_gpu_hot_by_power_is_uneven():
    # the hostile smi100 picture: every GPU-Util 100 %, GPU 0 at 690 W, the rest 148-160 W
    v = _whole(_picture([100.0] * 8, [690, 150, 160, 155, 150, 158, 152, 148]))
    assert v["pattern"] == "uneven" and v["hot_set"] == [0], v
    assert "power" in v["text"] and "saturated" in v["text"]


def test_saturated_utilization_with_watts_but_no_caps_cannot_tell():
    v = _whole(_picture([100.0] * 4, [690, 150, 160, 155], cap=None))
    assert v["pattern"] == "n/a" and v["text"].startswith("cannot tell"), v


def test_saturated_utilization_with_power_agreeing_stays_uniform_and_says_so():
    v = _whole(_picture([99.0, 100.0, 100.0, 98.0], [650, 660, 640, 655]))
    assert v["pattern"] == "uniform" and "power agrees" in v["text"], v
    v = _whole(_picture([100.0] * 4, [None] * 4))
    assert v["pattern"] == "uniform" and "no power read" in v["text"], v


def test_unsaturated_uniform_verdict_is_unchanged():
    v = _whole(_picture([60.0, 62.0, 61.0, 60.0], [690, 150, 160, 155]))
    assert v["pattern"] == "uniform" and "power" not in v["text"], v


# -- 5. a control character in a file or store name stays on its line ------------------------

def test_a_newline_in_file_and_store_names_keeps_messages_one_line(tmp_path):
    src = tmp_path / "nl\nname.txt"
    src.write_text(H100_TABLE.read_text())
    db = tmp_path / "s\nx.db"
    res = cli("import", src, "--store", db)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith(f"{tmp_path}/nl\\nname.txt: nvidia_smi_table")
    assert lines[-1].startswith("stored 8 samples in ") and lines[-1].endswith("s\\nx.db")
    bad = tmp_path / "bad\n\x1b[31mf.txt"
    bad.write_text("garbage\n")
    res = cli("import", bad, "--store", tmp_path / "q.db")
    err = res.stderr.strip()
    assert res.returncode == 2 and len(err.splitlines()) == 1, err
    assert "bad\\n\\x1b[31mf.txt" in err and "\x1b" not in err


def test_shown_escapes_control_characters_only():
    from tealeaves.app.cli.common import shown

    assert shown("a\nb\tc\x1b\u2028d") == "a\\nb\\tc\\x1bd".replace("d", "\\u2028d")
    assert shown("/tmp/ünï €/a b.txt") == "/tmp/ünï €/a b.txt"


def test_a_new_power_cap_of_the_same_gpu_uuid_is_no_conflict(tmp_path):
    """An admin's ``nvidia-smi -pl`` between two runs: the same uuid with another power
    limit is the same GPU, not another machine's (a collector restarted on its store must not
    be refused); another uuid on that index still is."""
    import pandas as pd
    import pytest

    from tealeaves.data.device_facts import DeviceConflictError
    from tealeaves.data.store import SampleStore

    with SampleStore(tmp_path / "cap.db") as st:
        st.put_devices(pd.DataFrame([{"host": "h", "gpu": 0, "uuid": "GPU-aaa",
                                      "name": "NVIDIA H200", "power_limit_w": 700.0}]))
        st.put_devices(pd.DataFrame([{"host": "h", "gpu": 0, "uuid": "GPU-aaa",
                                      "name": "NVIDIA H200", "power_limit_w": 500.0}]))
        with pytest.raises(DeviceConflictError):
            st.put_devices(pd.DataFrame([{"host": "h", "gpu": 0, "uuid": "GPU-bbb",
                                          "name": "NVIDIA H200", "power_limit_w": 500.0}]))
