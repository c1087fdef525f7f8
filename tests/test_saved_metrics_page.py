"""A saved SGLang ``/metrics`` page imported as server signals (issue 22, Build 4): the page
format is the one published in vllm-project/aibrix issue 1614 (DeepSeek-R1 on eight DP ranks:
``dp_rank``, ``engine_type``, ``model_name``, ``pid``, ``pp_rank``, ``tp_rank`` labels; its
``num_retracted_reqs`` / ``num_paused_reqs`` lines are copied as published); the throughput and
request gauges, which that excerpt does not show, are written here in the same form with one
slow rank, and the page is saved twice (two scrapes appended, as ``curl`` in a loop does)."""

from __future__ import annotations

import json

import pytest

from tealeaves.app.cli import main
from tealeaves.data.importers import ImportFormatError, detect_text, import_file
from tealeaves.data.server_metrics import read_page
from tealeaves.data.store import SampleStore

LABELS = ('dp_rank="{r}",engine_type="unified",model_name="deepseek-r1",pid="{pid}",'
          'pp_rank="0",tp_rank="{r}"')
GEN = [812.0, 790.0, 805.0, 401.0, 820.0, 798.0, 811.0, 803.0]  # rank 3 at about half


def _page(scale: float = 1.0, stamp: int | None = None) -> str:
    ts = "" if stamp is None else f" {stamp}"
    out = ["# HELP sglang:num_retracted_reqs The number of retracted requests.",
           "# TYPE sglang:num_retracted_reqs gauge"]
    for r in (5, 4, 6, 7):  # as published
        out.append(f"sglang:num_retracted_reqs{{{LABELS.format(r=r, pid=910 + r)}}} 0.0{ts}")
    out += ["# HELP sglang:num_paused_reqs The number of paused requests by async weight sync.",
            "# TYPE sglang:num_paused_reqs gauge"]
    for r in (2, 0, 3, 1, 5, 4):  # as published
        out.append(f"sglang:num_paused_reqs{{{LABELS.format(r=r, pid=910 + r)}}} 0.0{ts}")
    out += ["# HELP sglang:gen_throughput The generation throughput (token/s).",
            "# TYPE sglang:gen_throughput gauge"]
    for r, g in enumerate(GEN):
        out.append(f"sglang:gen_throughput{{{LABELS.format(r=r, pid=910 + r)}}} "
                   f"{g * scale:.1f}{ts}")
    out += ["# HELP sglang:num_running_reqs The number of running requests.",
            "# TYPE sglang:num_running_reqs gauge"]
    for r in range(8):
        out.append(f"sglang:num_running_reqs{{{LABELS.format(r=r, pid=910 + r)}}} "
                   f"{12.0 if r == 3 else 30.0}{ts}")
    return "\n".join(out) + "\n"


def test_a_saved_page_is_detected_and_cut_into_its_scrapes():
    text = _page() + _page(1.1)
    assert detect_text(text) == "server_metrics"
    r = read_page(text, start=1_796_000_000.0)
    assert r.scrapes == 2 and r.stamped == "start_time" and r.engine == "sglang"
    assert sorted(r.frame["timestamp"].unique()) == [1_796_000_000.0, 1_796_000_001.0]
    gen = r.frame[r.frame["name"] == "sglang:gen_throughput"]
    assert len(gen) == 16 and gen["value"].max() == pytest.approx(820.0 * 1.1, abs=0.05)
    # the samples' own timestamps (ms) win over any placement
    s = read_page(_page(stamp=1_796_000_000_000) + _page(stamp=1_796_000_005_000))
    assert s.stamped == "file" and sorted(s.frame["timestamp"].unique()) == [
        1_796_000_000.0, 1_796_000_005.0]


def test_import_stores_the_page_as_server_metrics_and_flags_the_slow_rank(tmp_path, capsys):
    page = tmp_path / "metrics.txt"
    page.write_text(_page() + _page())
    with pytest.raises(ImportFormatError, match="saved /metrics page"):
        import_file(page)  # not GPU telemetry: the sample importer says where it goes
    db = tmp_path / "s.db"
    assert main(["import", str(page), "--store", str(db), "--start-time", "1796000000"]) == 0
    out = capsys.readouterr().out
    assert "sglang /metrics page, 2 scrapes" in out and "stored as server metrics" in out
    assert "UNEVEN DP ranks: rank 3 at 0.50x the ranks' median" in out, out
    with SampleStore(db, readonly=True) as s:
        m = s.server_metrics()
    assert len(m) == 2 * (4 + 6 + 8 + 8)
    assert set(m["timestamp"]) == {1_796_000_000.0, 1_796_000_001.0}
    assert main(["import", str(page), "--store", str(tmp_path / "j.db"), "--json"]) == 0
    j = json.loads(capsys.readouterr().out)["server_metrics"][0]
    assert j["uneven_ranks"] == ["3"] and j["stamped"] == "end" and len(j["dp_ranks"]) == 8
    r3 = next(x for x in j["dp_ranks"] if x["dp_rank"] == "3")
    assert r3["gen_throughput_tok_s"] == pytest.approx(401.0) and r3["running_req"] == 12.0


def test_an_even_page_names_no_rank_and_a_broken_page_stores_nothing(tmp_path, capsys):
    even = tmp_path / "even.txt"
    even.write_text(_page().replace("401.0", "800.0"))
    assert main(["import", str(even), "--store", str(tmp_path / "e.db")]) == 0
    assert "UNEVEN" not in capsys.readouterr().out
    # lines that are no exposition (a prompt, a `date` between scrapes) are named, not fatal
    stray = tmp_path / "stray.txt"
    stray.write_text("[user@gpu01 ~]$ curl -s localhost:30000/metrics\n---\n" + _page()
                     + "Wed Dec  2 02:58:22 UTC 2026\n" + _page())
    assert main(["import", str(stray), "--store", str(tmp_path / "s.db")]) == 0
    out = capsys.readouterr().out
    assert "2 scrapes" in out and "pasted text: 1 shell prompt line dropped" in out, out
    assert "line 2: not Prometheus text: ---" in out, out
    assert f"line {len(_page().splitlines()) + 3}: not Prometheus text: Wed Dec" in out
    # a page the Prometheus parser refuses stores nothing, with the GPU file beside it
    bad = tmp_path / "bad.txt"
    bad.write_text(_page().replace("# TYPE sglang:gen_throughput gauge",
                                   "# TYPE sglang:gen_throughput nonsense"))
    gpu = tmp_path / "dmon.txt"
    gpu.write_text("# gpu    sm\n# Idx     %\n    0    98\n")
    db = tmp_path / "b.db"
    assert main(["import", str(gpu), str(bad), "--store", str(db),
                 "--start-time", "1796000000"]) == 2
    assert "bad.txt" in capsys.readouterr().err
    if db.exists():
        with SampleStore(db, readonly=True) as s:
            assert s.server_metrics().empty and s.read_since(0)[0].empty


def test_a_page_imported_twice_is_stored_once_and_vllm_engines_are_ranks(tmp_path, capsys):
    page = tmp_path / "p.txt"
    page.write_text(_page() + _page())
    db = tmp_path / "s.db"
    for _ in range(2):
        assert main(["import", str(page), "--store", str(db), "--start-time",
                     "1796000000"]) == 0
    assert "52 already stored, passed over" in capsys.readouterr().out
    with SampleStore(db, readonly=True) as s:
        assert len(s.server_metrics()) == 52
    vl = tmp_path / "vllm.txt"
    rows = ["# HELP vllm:num_requests_running Number of requests running.",
            "# TYPE vllm:num_requests_running gauge"]
    rows += [f'vllm:num_requests_running{{engine="{e}",model_name="m"}} {n}'
             for e, n in ((0, 20), (1, 21), (2, 6))]
    vl.write_text("\n".join(rows) + "\n")
    assert main(["import", str(vl), "--store", str(tmp_path / "v.db"), "--json"]) == 0
    j = json.loads(capsys.readouterr().out)["server_metrics"][0]
    assert j["rank_label"] == "engine" and [x["dp_rank"] for x in j["dp_ranks"]] == [
        "0", "1", "2"]
    assert [x["running_req"] for x in j["dp_ranks"]] == [20, 21, 6]


def test_a_stamped_page_that_starts_mid_scrape_keeps_every_samples_own_time():
    """Cut where a series repeats, a page saved from the middle of a scrape mixes two scrapes
    in its first piece: each sample keeps the time written beside it, so the counter's rate
    is right (it was given the piece's newest time: a scrape misplaced, a rate lost)."""
    def scrape(t_ms: int, v: int) -> str:
        return (f'# TYPE vllm:generation_tokens_total counter\n'
                f'vllm:generation_tokens_total{{engine="0"}} {v} {t_ms}\n'
                f'# TYPE vllm:num_requests_running gauge\n'
                f'vllm:num_requests_running{{engine="0"}} 3 {t_ms}\n')
    full = [scrape(1_796_000_000_000 + 10_000 * i, 1000 + 100 * i) for i in range(3)]
    r = read_page(full[0].split("\n", 2)[2] + full[1] + full[2])
    gen = r.frame[r.frame["name"] == "vllm:generation_tokens_total"]
    assert gen["timestamp"].tolist() == [1_796_000_010.0, 1_796_000_020.0]
    assert gen["value"].tolist() == [1100.0, 1200.0]
    assert gen["rate_per_s"].iloc[-1] == pytest.approx(10.0)


def test_the_page_check_does_not_stand_in_the_way_of_columns(tmp_path, capsys):
    """A header-less CSV no format is detected in is read with --columns (the page check ran
    detection first and refused it as 'text in no known format')."""
    f = tmp_path / "bare.csv"
    f.write_text("0, 98\n1, 60\n")
    assert main(["import", str(f), "--store", str(tmp_path / "b.db"), "--columns",
                 "index,utilization.gpu", "--start-time", "1796000000"]) == 0
    assert "2 samples" in capsys.readouterr().out


def test_a_cut_off_page_stores_no_cut_value_and_no_empty_scrape():
    """A page saved while it was being written: a last line without its line end may be a
    cut-off number (8 of 820...), a last HELP cut off is no scrape; timestamps in seconds
    (read as 1970) are refused."""
    text = _page() + _page()
    cut = text[:text.rindex("803.0") + 1]  # '... 8'
    r = read_page(cut, start=1_796_000_000.0)
    assert r.skipped and "ends inside this line" in r.skipped[-1][1]
    gen = r.frame[r.frame["name"] == "sglang:gen_throughput"]
    assert gen["value"].min() >= 401.0  # the cut '8' is not stored
    half = _page() + "# HELP sglang:num_retracted_reqs The "
    assert read_page(half, start=1_796_000_000.0).scrapes == 1
    with pytest.raises(ValueError, match="before 2000"):
        read_page(_page(stamp=1_796_000_000))
