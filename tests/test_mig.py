"""MIG GPU instances are entities of their own (issue 22, Build 1): imported from dcgmi dmon,
dcgm-exporter and nvidia-smi dmon, stored, named, and an imbalance across the instances of a
GPU is flagged by ``classify``.

The dcgmi examples are real published outputs, copied as published:

- ``DCGM_GUIDE``: the NVIDIA DCGM user guide, "Profiling Metrics" / MIG example,
  ``dcgmi dmon -e 1001,1004 -g 8`` on an A100 with two 3g.20gb instances (a GPU row, then its
  two GPU-I rows, per sweep; the first four sweeps);
- ``ZHIHU``: a Chinese DCGM guide's ``dcgmi dmon -e 1001,1002,1003,1004,1005 -g 2`` with a job
  on MIG 1 and MIG 0 idle (indented, "Id" on the units line);
- ``DCGM_152``: NVIDIA/DCGM issue 152, ``dcgmi dmon -e 1002,1003 -g 18`` of two GPU-I entities
  without their GPU (SMACT 1.294: the bug that issue reports).

No published dcgm-exporter scrape of MIG instances with values was found; ``_exporter_page``
writes one in the exporter's documented form (its metrics template: ``gpu``, ``UUID``,
``device``, ``modelName``, then ``GPU_I_PROFILE`` and ``GPU_I_ID`` for an instance).
"""

from __future__ import annotations

import json
import math
import sqlite3

import pytest

from tealeaves.app.cli import main
from tealeaves.classifier.mig import instance_balance
from tealeaves.data.importers import import_text
from tealeaves.data.schema import (
    MIG_BASE,
    SchemaError,
    conform,
    entities_text,
    entity_name,
    gpus_in,
    mig_entity,
    mig_parent,
)
from tealeaves.data.store import STORE_VERSION, SampleStore

T0 = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC

DCGM_GUIDE = """\
# Entity  GRACT  TENSO
      Id
    GPU 0  0.000  0.000
  GPU-I 0  0.000  0.000
  GPU-I 1  0.000  0.000
    GPU 0  0.000  0.000
  GPU-I 0  0.000  0.000
  GPU-I 1  0.000  0.000
    GPU 0  0.457  0.442
  GPU-I 0  0.534  0.516
  GPU-I 1  0.533  0.515
    GPU 0  0.845  0.816
  GPU-I 0  0.986  0.953
  GPU-I 1  0.985  0.952
"""

ZHIHU = """\
  # Entity  GRACT  SMACT  SMOCC  TENSO  DRAMA
      Id
   GPU 0  0.429  0.429  0.364  0.011  0.400
   GPU-I 0  0.000  0.000  0.000  0.000  0.000
   GPU-I 1  0.750  0.750  0.637  0.020  0.800
"""

DCGM_152 = """\
#Entity   SMACT        SMOCC
ID
GPU-I 21  1.294        0.162
GPU-I 22  0.977        0.122
"""


def test_the_dcgm_guides_mig_example_imports_each_instance_under_its_gpu():
    res = import_text(DCGM_GUIDE, "dcgmi", start_time=T0)
    assert not res.skipped and len(res.samples) == 12
    gi0, gi1 = mig_entity(0, 0), mig_entity(0, 1)
    assert gpus_in(res.samples) == [0, gi0, gi1]
    assert [entity_name(g) for g in gpus_in(res.samples)] == ["GPU 0", "GPU 0 · GI 0",
                                                              "GPU 0 · GI 1"]
    last = res.samples[res.samples["timestamp"] == T0 + 3].set_index("gpu")
    # GRACT is its own column (x 100), the load where SMACT is absent
    assert last.loc[0, "gr_engine_active"] == pytest.approx(84.5)
    assert last.loc[gi0, "gr_engine_active"] == pytest.approx(98.6)
    assert last.loc[gi1, "tensor_active"] == pytest.approx(95.2)
    assert last.loc[gi1, "uuid"] == "MIG-GPU/1" and math.isnan(last.loc[gi1, "gpu_util"])
    # two equally busy instances: even
    (group,) = instance_balance(res.samples, 1.0)
    assert group["gpu"] == 0 and not group["uneven"] and group["windows"] == 4
    assert group["spread"] < 1.0


def test_an_idle_instance_next_to_a_busy_one_is_flagged():
    res = import_text(ZHIHU, "dcgmi", start_time=T0)
    assert not res.skipped  # "Id" is the units line, not data
    s = res.samples.set_index("gpu")
    assert s.loc[mig_entity(0, 1), "sm_active"] == pytest.approx(75.0)
    assert s.loc[mig_entity(0, 0), "dram_active"] == 0.0  # a reading of 0, not missing
    (group,) = instance_balance(res.samples, 1.0)
    assert group["uneven"] and group["busiest"] == "GPU 0 · GI 1"
    assert group["idlest"] == "GPU 0 · GI 0" and group["spread"] == pytest.approx(75.0)


def test_gpu_instances_without_their_gpu_have_no_parent_and_a_bad_ratio_is_refused():
    res = import_text(DCGM_152, "dcgmi", start_time=T0)
    assert [n for n, _ in res.skipped] == [3]
    assert "sm_active 129.4 %" in res.skipped[0][1]  # SMACT 1.294: no reading
    (g,) = gpus_in(res.samples)
    assert mig_parent(g) == (None, 22) and entity_name(g) == "GPU ? · GI 22"
    assert res.samples.iloc[0]["sm_occupancy"] == pytest.approx(12.2)


def test_two_gpus_rows_leave_gpu_instance_parents_unknown():
    text = ("#Entity GRACT\nID\nGPU 0 0.5\nGPU 1 0.5\nGPU-I 3 0.9\nGPU-I 9 0.1\n")
    res = import_text(text, "dcgmi", start_time=T0)
    assert gpus_in(res.samples) == [0, 1, mig_entity(None, 3), mig_entity(None, 9)]
    (group,) = instance_balance(res.samples, 1.0)  # one group: the unknown parent's
    assert group["gpu"] is None and group["uneven"]


def _exporter_page(loads: dict[tuple[int, int], float]) -> str:
    out = ["# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.",
           "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge"]
    for (gpu, gi), v in loads.items():
        out.append(f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu="{gpu}",UUID="GPU-5fd15f35-e148-2992-'
                   f'4ecb-9825e534f25{gpu}",device="nvidia{gpu}",modelName="NVIDIA H100 80GB '
                   f'HBM3",GPU_I_PROFILE="3g.40gb",GPU_I_ID="{gi}",Hostname="mig-node"}} {v}')
    return "\n".join(out) + "\n"


def test_dcgm_exporter_series_of_instances_of_one_gpu_are_entities():
    page = _exporter_page({(0, 1): 0.97, (0, 2): 0.04, (1, 1): 0.5, (1, 2): 0.52})
    res = import_text(page + page, "prometheus", start_time=T0, interval=15)
    assert not res.skipped and len(res.samples) == 8
    assert gpus_in(res.samples) == [mig_entity(0, 1), mig_entity(0, 2), mig_entity(1, 1),
                                    mig_entity(1, 2)]
    row = res.samples[res.samples["gpu"] == mig_entity(0, 1)].iloc[0]
    assert row["gr_engine_active"] == pytest.approx(97.0) and row["host"] == "mig-node"
    assert row["uuid"] == "MIG-GPU-5fd15f35-e148-2992-4ecb-9825e534f250/1"
    groups = {g["gpu"]: g for g in instance_balance(res.samples, 15.0)}
    assert groups[0]["uneven"] and not groups[1]["uneven"]
    assert groups["all"]["uneven"]  # across GPUs' instances too


def test_entity_numbers_pass_the_schema_and_nothing_else_does():
    df = conform(json_frame([mig_entity(3, 5), 7]))
    assert sorted(df["gpu"]) == [7, mig_entity(3, 5)]
    for bad in (MIG_BASE - 1, -1, 4096):
        with pytest.raises(SchemaError, match="MIG entity number"):
            conform(json_frame([bad]))
    with pytest.raises(ValueError):
        mig_entity(0, 4096)
    assert entities_text([0, mig_entity(0, 1)]) == "GPUs 0, 0 · GI 1"


def json_frame(gpus):
    import pandas as pd

    return pd.DataFrame({"timestamp": [T0] * len(gpus), "gpu": gpus, "sm_active": 50.0})


def _dcgmi_sweeps(n: int, loads: tuple[float, ...]) -> str:
    rows = ["# Entity  GRACT  TENSO", "      Id"]
    for _ in range(n):
        rows.append(f"    GPU 0  {sum(loads) / len(loads) * 0.9:.3f}  0.100")
        rows += [f"  GPU-I {i}  {v:.3f}  0.100" for i, v in enumerate(loads)]
    return "\n".join(rows) + "\n"


def test_classify_flags_the_mig_imbalance_in_words_and_json(tmp_path, capsys):
    f = tmp_path / "mig.txt"
    f.write_text(_dcgmi_sweeps(20, (0.95, 0.03, 0.90)))  # GI 1 idles while 0 and 2 work
    assert main(["classify", str(f), "--start-time", str(T0)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("MIG: "))
    assert "GPU 0's instances uneven" in line and "GPU 0 · GI 1 3 %" in line, line
    assert main(["classify", str(f), "--start-time", str(T0), "--json"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["mig_balance"]
    assert group["uneven"] and group["idlest"] == "GPU 0 · GI 1"
    assert group["windows"] == group["uneven_windows"] > 0
    # balanced instances: no flag
    f.write_text(_dcgmi_sweeps(20, (0.95, 0.93, 0.90)))
    assert main(["classify", str(f), "--start-time", str(T0)]) == 0
    assert "instances even (0 of" in capsys.readouterr().out


def test_an_older_store_gains_the_new_column_and_keeps_its_rows(tmp_path):
    db = tmp_path / "v1.db"
    store = SampleStore(db)
    store.append(import_text(ZHIHU, "dcgmi", start_time=T0).samples)
    store.close()
    conn = sqlite3.connect(db)  # make it a layout-1 store: no gr_engine_active column
    conn.execute("ALTER TABLE samples DROP COLUMN gr_engine_active")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    ro = SampleStore(db, readonly=True)  # read-only: the new column reads as NaN
    old = ro.read_range()
    assert len(old) == 3 and old["gr_engine_active"].isna().all()
    assert old["sm_active"].max() == pytest.approx(75.0)
    ro.close()
    rw = SampleStore(db)  # for writing: migrated, rows kept
    rw.append(import_text(DCGM_GUIDE, "dcgmi", start_time=T0 + 100).samples)
    both = rw.read_range()
    rw.close()
    assert len(both) == 15 and both["gr_engine_active"].notna().sum() == 12
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == STORE_VERSION
    conn.close()


def test_the_dashboard_draws_each_instance_as_a_band_and_names_the_hot_ones(browser, tmp_path):
    from conftest import open_live_page

    from tealeaves.app.dashboard import ids
    from tealeaves.app.dashboard.server import start_in_thread

    db = tmp_path / "mig.db"
    store = SampleStore(db)
    store.append(import_text(_dcgmi_sweeps(60, (0.95, 0.03, 0.90)), "dcgmi",
                             start_time=T0).samples)
    store.close()
    url, shutdown = start_in_thread(store_path=db, collect=False)
    try:
        page, errors = open_live_page(browser, url)
        gd = "document.querySelector('#tl-graph .js-plotly-plot')"
        status = f"document.querySelector('#{ids.STATUS}').innerText"
        page.wait_for_function(f"() => {status}.includes('1 GPU, 3 MIG instances')",
                               timeout=30_000)
        ticks = page.evaluate(f"() => Object.values({gd}.layout).filter(a => a && a.ticktext)"
                              f".flatMap(a => a.ticktext)")
        names = [t.split("<b>")[1].split("</b>")[0] for t in ticks if "<b>" in t]
        assert names == ["GPU 0", "0 · GI 0", "0 · GI 1", "0 · GI 2"], names
        # every column of the heatmap: the idle instance pale, the two busy ones dark
        z = page.evaluate(f"() => {gd}.data.find(t => t.type === 'heatmap').z")
        cols = [sorted(v for v in c if v is not None) for c in z]
        cols = [c for c in cols if c]
        assert len(cols) >= 50 and all(len(c) == 4 and c[0] < 10 and c[2] > 80
                                       for c in cols), cols[:3]
        body = page.inner_text("body")
        assert "0 · GI 0" in body and "0 · GI 2" in body  # the hot set's pills
        # the balance panel names the idle instance, for the range on screen
        panel = f"document.querySelector('#{ids.SERVER_PANEL}')"
        page.wait_for_function(f"() => {panel}.innerText.includes('instances uneven')",
                               timeout=30_000)
        text = page.inner_text(f"#{ids.SERVER_PANEL}")
        assert "GPU 0 · GI 1 3 %" in text and "MIG instances · load per window" in text, text
        assert not errors, errors
        page.close()
    finally:
        shutdown()


def test_the_report_has_a_mig_section_valid_against_its_schema(tmp_path):
    import jsonschema

    from tealeaves.app.report.model import SCHEMA_PATH

    f = tmp_path / "mig.txt"
    f.write_text(_dcgmi_sweeps(20, (0.95, 0.03, 0.90)))
    out = tmp_path / "r.json"
    assert main(["report", "--trace", str(f), "--start-time", str(T0), "--format", "json",
                 "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(doc)
    (group,) = doc["mig_balance"]
    assert group["gpu"] == 0 and group["uneven"] and group["idlest"] == "GPU 0 · GI 1"
    assert group["mean_load"]["GPU 0 · GI 1"] == pytest.approx(3.0)
    html_out = tmp_path / "r.html"
    assert main(["report", "--trace", str(f), "--start-time", str(T0), "--out",
                 str(html_out)]) == 0
    page = html_out.read_text()
    assert "<h2>MIG instances</h2>" in page and "<td>GPU 0 · GI 1</td>" in page


def test_the_prometheus_reader_keeps_dcgm_exporters_mig_instances_apart(monkeypatch):
    from tealeaves.collectors.prometheus import PrometheusReader

    def fake_range(self, metric, start, end, step):
        if metric != "DCGM_FI_PROF_GR_ENGINE_ACTIVE":
            return []
        lab = {"gpu": "0", "UUID": "GPU-abc", "Hostname": "mig-node",
               "GPU_I_PROFILE": "3g.40gb"}
        return [{"metric": {**lab, "GPU_I_ID": "1"}, "values": [[T0, "0.9"], [T0 + 1, "0.8"]]},
                {"metric": {**lab, "GPU_I_ID": "2"}, "values": [[T0, "0.1"], [T0 + 1, "0.0"]]}]

    monkeypatch.setattr(PrometheusReader, "_range", fake_range)
    samples, devices = PrometheusReader("http://127.0.0.1:1").samples(T0, T0 + 2, 1.0)
    assert gpus_in(samples) == [mig_entity(0, 1), mig_entity(0, 2)]
    gi1 = samples[samples["gpu"] == mig_entity(0, 1)]
    assert gi1["gr_engine_active"].tolist() == [pytest.approx(90.0), pytest.approx(80.0)]
    assert set(devices["uuid"]) == {"MIG-GPU-abc/1", "MIG-GPU-abc/2"}


def test_the_exporter_labels_an_instance_as_dcgm_exporter_does(tmp_path):
    import re
    import time

    from tealeaves.app import exporter
    from tealeaves.classifier.rules import RulePhaseLabeller

    now = float(int(time.time()))
    s = import_text(_dcgmi_sweeps(6, (0.95, 0.03)), "dcgmi", start_time=now - 6.0).samples
    with SampleStore(tmp_path / "s.db") as store:
        store.append(s)
        text = exporter.render(exporter.TealeavesCollector(
            store, window_s=0.5, hostname="n", labeller=RulePhaseLabeller()))
    line = next(x for x in text.splitlines()
                if x.startswith("tealeaves_gr_engine_active_ratio{") and 'GPU_I_ID="0"' in x)
    assert 'gpu="0"' in line and 'UUID="MIG-GPU/0"' in line and 'device="nvidia0"' in line
    whole = [x for x in text.splitlines() if x.startswith("tealeaves_gr_engine_active_ratio{")
             and 'GPU_I_ID=""' in x]
    assert len(whole) == 1 and 'gpu="0"' in whole[0]
    assert not re.search(r'gpu="10\d{5}"', text)  # no entity number leaks out as a GPU index


def test_mig_entities_round_trip_through_a_tealeaves_csv_and_edge_rows_are_named(tmp_path):
    s = import_text(_dcgmi_sweeps(4, (0.9, 0.1)), "dcgmi", start_time=T0).samples
    f = tmp_path / "mig.csv"
    s.to_csv(f, index=False)  # the schema's columns: a tealeaves CSV
    back = import_text(f.read_text(), "tealeaves_csv")
    assert not back.skipped and gpus_in(back.samples) == gpus_in(s)
    near = f.read_text().replace(f",{mig_entity(0, 1)},", f",{mig_entity(0, 1) + 4096**2},")
    res = import_text(near, "tealeaves_csv")
    assert "neither a GPU index 0-4095 nor a MIG entity number" in res.skipped[0][1]
    # dmon: a second compute instance of one GPU instance is named, not merged
    text = ("# gpu    gi    ci     sm\n# Idx    ID    ID      %\n"
            "    1     1     0     20\n    1     1     1     30\n    0     2     0     50\n")
    res = import_text(text, "dmon", start_time=T0)
    assert [n for n, _ in res.skipped] == [4] and "compute instance ci=1" in res.skipped[0][1]
    assert sorted(res.samples["timestamp"]) == [T0, T0]  # one sweep, not two
    # dcgm-exporter: a bad GPU_I_ID names the field
    page = _exporter_page({(0, 1): 0.5}).replace('GPU_I_ID="1"', 'GPU_I_ID="abc"')
    res = import_text(page, "prometheus", start_time=T0)
    assert "GPU_I_ID 'abc' is not a whole number" in res.skipped[0][1]


def test_instances_without_a_reading_have_no_verdict_and_unknown_parents_drop_whole_gpus():
    from tealeaves.classifier.mig import balance_line
    from tealeaves.data.schema import peers

    text = "#Entity FBUSD\nID\nGPU 0 100\nGPU-I 0 10\nGPU-I 1 20\n"
    (group,) = instance_balance(import_text(text, "dcgmi", start_time=T0).samples, 1.0)
    assert group["uneven"] is None and "balance n/a" in balance_line(group)
    assert peers([0, 1, mig_entity(None, 3)]) == [mig_entity(None, 3)]
    assert peers([0, 1, mig_entity(0, 3)]) == [1, mig_entity(0, 3)]
