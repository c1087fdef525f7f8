"""SGLang's own expert balance and DP-rank spread from ``/metrics`` (issue 22, Builds 4 and 5).

``PUBLISHED`` is the ``sglang:eplb_gpu_physical_count`` excerpt published in the description of
sgl-project/sglang pull request 9825 (the PR that added the metric), copied as published: layer
26's ``_count`` and layer 27's buckets ``le="0.0"`` to ``le="11.0"``.  The excerpt stops there;
``page()`` completes it in the same form (layer 27's buckets 12-15 and ``+Inf`` at its total 128,
its ``_count`` and ``_sum``, the HELP/TYPE lines) and, since no published scrape of
``sglang:eplb_balancedness`` was found, writes that summary (``_sum``/``_count`` over forward
passes, its documented form) with made-up values.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tealeaves.app.cli import main
from tealeaves.classifier.server_balance import (
    balancedness_series,
    expert_heatmap,
    rank_spread,
)
from tealeaves.data.server_metrics import read_page

PUBLISHED = """\
sglang:eplb_gpu_physical_count_count{layer="26"} 128.0
sglang:eplb_gpu_physical_count_bucket{layer="27",le="0.0"} 0.0
sglang:eplb_gpu_physical_count_bucket{layer="27",le="1.0"} 16.0
sglang:eplb_gpu_physical_count_bucket{layer="27",le="2.0"} 16.0
sglang:eplb_gpu_physical_count_bucket{layer="27",le="3.0"} 16.0
sglang:eplb_gpu_physical_count_bucket{layer="27",le="4.0"} 48.0
sglang:eplb_gpu_physical_count_bucket{layer="27",le="5.0"} 48.0
sglang:eplb_gpu_physical_count_bucket{layer="27",le="6.0"} 64.0
sglang:eplb_gpu_physical_count_bucket{layer="27",le="7.0"} 80.0
sglang:eplb_gpu_physical_count_bucket{layer="27",le="8.0"} 128.0
sglang:eplb_gpu_physical_count_bucket{layer="27",le="9.0"} 128.0
sglang:eplb_gpu_physical_count_bucket{layer="27",le="10.0"} 128.0
sglang:eplb_gpu_physical_count_bucket{layer="27",le="11.0"} 128.0
"""
#: Layer 27's per-rank counts the published buckets give (ranks 12-15 hold none).
LAYER_27 = [0, 16, 0, 0, 32, 0, 16, 16, 48, 0, 0, 0, 0, 0, 0, 0]


def page(scale: float = 1.0, passes: float = 1000.0, bal_sum: float = 620.0) -> str:
    """The published excerpt completed as a whole page (module docstring); ``scale``
    multiplies layer 27's counts (a later scrape of the same server)."""
    lines = [("# HELP sglang:eplb_gpu_physical_count The selected count of physical experts "
              "on each layer and GPU rank."),
             "# TYPE sglang:eplb_gpu_physical_count histogram"]
    body = PUBLISHED if scale == 1.0 else "".join(
        line.rsplit(" ", 1)[0] + f" {float(line.rsplit(' ', 1)[1]) * scale}\n"
        for line in PUBLISHED.splitlines() if "_bucket" in line)
    lines += [x for x in body.splitlines() if "_count{" not in x]
    total = 128.0 * scale
    lines += [f'sglang:eplb_gpu_physical_count_bucket{{layer="27",le="{r}.0"}} {total}'
              for r in range(12, 16)]
    lines += [f'sglang:eplb_gpu_physical_count_bucket{{layer="27",le="+Inf"}} {total}',
              f'sglang:eplb_gpu_physical_count_count{{layer="27"}} {total}',
              (f'sglang:eplb_gpu_physical_count_sum{{layer="27"}} '
               f'{sum(r * c for r, c in enumerate(LAYER_27)) * scale}'),
              ("# HELP sglang:eplb_balancedness Balancedness of the experts' load per forward "
               "pass."),
              "# TYPE sglang:eplb_balancedness summary",
              f"sglang:eplb_balancedness_count {passes}",
              f"sglang:eplb_balancedness_sum {bal_sum}"]
    return "\n".join(lines) + "\n"


def test_the_published_buckets_give_each_ranks_count_and_the_balancedness():
    r = read_page(page(), start=1_796_000_000.0)
    heat = expert_heatmap(r.frame)
    assert heat["layers"] == [27] and heat["ranks"] == list(range(16))
    assert heat["counts"][0].tolist() == LAYER_27
    assert heat["basis"] == "since start" and heat["hot_rank"] == 8
    # mean / max over the 16 ranks: 8 / 48
    assert heat["balancedness"] == pytest.approx(8 / 48)
    assert heat["layer_balancedness"][0] == pytest.approx(8 / 48)
    assert heat["share"][8] == pytest.approx(48 / 128)
    bal = balancedness_series(r.frame)
    assert bal["balancedness"].tolist() == [pytest.approx(0.62)]


def test_two_scrapes_give_the_increase_and_the_balancedness_between_them():
    r = read_page(page() + page(3.0, passes=1500.0, bal_sum=870.0), start=1_796_000_000.0)
    heat = expert_heatmap(r.frame)
    assert heat["basis"] == "increase"
    assert heat["counts"][0].tolist() == [2 * c for c in LAYER_27]
    bal = balancedness_series(r.frame)
    assert len(bal) == 1 and bal["balancedness"].iloc[0] == pytest.approx(250 / 500)
    assert bal["passes"].iloc[0] == 500


def test_a_counter_reset_counts_from_zero_as_prometheus_increase_does():
    r = read_page(page(3.0) + page(), start=1_796_000_000.0)  # restarted between the scrapes
    heat = expert_heatmap(r.frame)
    assert heat["basis"] == "increase" and heat["counts"][0].tolist() == LAYER_27
    # a restart in the middle of three scrapes: before it 2x, after it 1x more
    r = read_page(page() + page(3.0) + page(1.0) + page(2.0), start=1_796_000_000.0)
    heat = expert_heatmap(r.frame)
    assert heat["counts"][0].tolist() == [2 * c + c + c for c in LAYER_27]


def test_a_scrape_cut_short_is_left_out_not_let_to_blank_the_layer():
    cut = "\n".join(page(5.0).splitlines()[:6]) + "\n"  # saved while curl was writing
    r = read_page(page() + page(3.0) + cut, start=1_796_000_000.0)
    heat = expert_heatmap(r.frame)
    assert heat["basis"] == "increase" and heat["counts"][0].tolist() == [2 * c for c in LAYER_27]
    assert heat["balancedness"] == pytest.approx(8 / 48)


def test_missing_or_inconsistent_buckets_are_unknown_not_zero():
    head = ["# TYPE sglang:eplb_gpu_physical_count histogram"]
    lines = [f'sglang:eplb_gpu_physical_count_bucket{{layer="0",le="{le}"}} {v}'
             for le, v in ((0, 10), (1, 20), (3, 40))]  # le=2 absent
    lines += [f'sglang:eplb_gpu_physical_count_bucket{{layer="1",le="{le}"}} {v}'
              for le, v in ((0, 10), (1, 5), (2, 20), (3, "NaN"))]  # falls, then NaN
    lines += ['sglang:eplb_gpu_physical_count_bucket{layer="2",le="1e9"} 7',  # no rank 1e9
              'sglang:eplb_gpu_physical_count_bucket{layer="2",le="+Inf"} 7']
    heat = expert_heatmap(read_page("\n".join(head + lines) + "\n",
                                    start=1_796_000_000.0).frame)
    c = heat["counts"]
    assert heat["layers"] == [0, 1] and heat["ranks"] == [0, 1, 2, 3] and heat["dropped"] == 1
    assert c[0][:2].tolist() == [10, 10] and np.isnan(c[0][2]) and np.isnan(c[0][3])
    assert c[1][0] == 10 and np.isnan(c[1][1]) and c[1][2] == 15 and np.isnan(c[1][3])
    # no layer is known on every rank: no balancedness, no hot rank, never a 0 % cell
    assert np.isnan(heat["balancedness"]) and heat["hot_rank"] is None


def test_import_of_the_page_prints_the_expert_balance(tmp_path, capsys):
    f = tmp_path / "metrics.txt"
    f.write_text(page())
    assert main(["import", str(f), "--store", str(tmp_path / "s.db"),
                 "--start-time", "1796000000"]) == 0
    out = capsys.readouterr().out
    assert "expert balance (sglang:eplb_gpu_physical_count, 1 layer x 16 GPU ranks" in out
    assert "balancedness 0.17 (mean/max over ranks), most load on GPU rank 8" in out
    assert "the server's eplb_balancedness 0.62 over 1,000 passes" in out


def test_the_dashboard_scraping_the_published_page_draws_the_layer_by_gpu_heatmap(browser):
    from conftest import serve_metrics

    from tealeaves.app.dashboard import ids
    from tealeaves.app.dashboard.server import start_in_thread

    srv, url = serve_metrics(page())
    dash_url, shutdown = start_in_thread(force_replay=True, server_metrics=url)
    try:
        pg = browser.new_page(viewport={"width": 1440, "height": 900})
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(dash_url)
        gd = f"document.querySelector('#{ids.EXPERT_GRAPH} .js-plotly-plot')"
        pg.wait_for_function(f"() => {gd} && {gd}.data && {gd}.data.length > 0",
                             timeout=30_000)
        heat = pg.evaluate(f"() => {gd}.data.find(t => t.type === 'heatmap')")
        assert heat["y"] == ["27"] and heat["x"] == [str(r) for r in range(16)]
        row = np.array([np.nan if v is None else v for v in heat["z"][0]], dtype=float)
        assert np.nansum(row) == pytest.approx(100.0) and int(np.nanargmax(row)) == 8
        text = pg.inner_text(f"#{ids.SERVER_PANEL}")
        assert "1 layer × 16 GPU ranks" in text and "most load on GPU rank 8" in text, text
        # a second page of the same dashboard gets the panel too (what a page shows is
        # remembered per page, not per server)
        pg2 = browser.new_page(viewport={"width": 1440, "height": 900})
        pg2.goto(dash_url)
        pg2.wait_for_function(f"() => {gd} && {gd}.data && {gd}.data.length > 0",
                              timeout=30_000)
        assert not errors, errors
        pg2.close()
        pg.close()
    finally:
        shutdown()
        srv.shutdown()


def test_rank_spread_flags_the_slow_rank():
    from test_saved_metrics_page import _page

    r = read_page(_page() + _page(1.1), start=1_796_000_000.0)
    s = rank_spread(r.frame)
    assert s["rank_label"] == "dp_rank" and len(s["ranks"]) == 8
    assert s["uneven_ranks"] == ["3"]
    slow = next(x for x in s["ranks"] if x["rank"] == "3")
    gens = [812, 790, 805, 401, 820, 798, 811, 803]  # the two scrapes' means: x 1.05
    assert slow["vs_median"] == pytest.approx(401 / np.median(gens))
    assert slow["running_req"] == 12.0 and s["scrapes"] == 2
    assert json.dumps(s)  # plain numbers and strings: JSON as it is


def test_the_report_shows_the_rank_spread_and_the_expert_heatmap(tmp_path):
    import jsonschema
    from test_saved_metrics_page import _page

    from tealeaves.app.report.model import SCHEMA_PATH
    from tealeaves.data import bundled_trace_path

    f = tmp_path / "metrics.txt"
    f.write_text(_page() + page() + _page(1.1) + page(3.0, 1500.0, 870.0))
    out = tmp_path / "r.json"
    assert main(["report", "--trace", str(bundled_trace_path()), "--server-metrics", str(f),
                 "--format", "json", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(doc)
    assert doc["server_ranks"]["uneven_ranks"] == ["3"]
    assert "UNEVEN: rank 3 at 0.50x" in doc["server_ranks"]["line"]
    eb = doc["expert_balance"]
    assert eb["basis"] == "increase" and eb["counts"] == [[2.0 * c for c in LAYER_27]]
    assert eb["server_balancedness"][0]["balancedness"] == pytest.approx(0.5)
    roles = [s["role"] for s in doc["provenance"]["sources"]]
    assert "server_metrics" in roles
    html_out = tmp_path / "r.html"
    assert main(["report", "--trace", str(bundled_trace_path()), "--server-metrics", str(f),
                 "--out", str(html_out)]) == 0
    text = html_out.read_text()
    assert "<h2>Server DP ranks</h2>" in text and '<tr class="hot"><td>3</td>' in text
    assert "Expert balance (SGLang eplb metrics; no expert dump given)" in text
    assert "own eplb_balancedness: 0.50 over 500 forward passes." in text
    assert "(NOT within the report&#39;s range)" in text  # the page's times: its mtime
    # a file that is not a /metrics page: one line naming it and what to give
    bad = tmp_path / "bad.txt"
    bad.write_text("hello\n")
    assert main(["report", "--trace", str(bundled_trace_path()), "--server-metrics", str(bad),
                 "--out", str(tmp_path / "x.json")]) == 2


def _store_with_a_slow_rank(tmp_path):
    """A store of the bundled trace with a saved two-scrape /metrics page (rank 3 slow)
    imported 5 s into it; returns its path."""
    from test_saved_metrics_page import _page

    from tealeaves.data import bundled_trace_path
    from tealeaves.data.store import SampleStore
    from tealeaves.data.traces import read_trace

    tr = read_trace(bundled_trace_path())
    db = tmp_path / "s.db"
    store = SampleStore(db)
    store.put_devices(tr.devices)
    store.append(tr.samples)
    store.close()
    f = tmp_path / "metrics.txt"
    f.write_text(_page() + _page(1.1))
    t0 = float(tr.samples["timestamp"].min()) + 5.0
    assert main(["import", str(f), "--store", str(db), "--start-time", str(t0)]) == 0
    return db


def _all_then_uneven(pg):
    """Click "all" and wait, step by step, for the balance panel to flag rank 3: the preset
    lit, the range picker showing the range (the cursor in "range" mode), then the panel.  A
    timeout names the step it stopped at."""
    from tealeaves.app.dashboard import ids

    pg.click(f"#{ids.PRESET_ALL}")  # the whole trace: the page's two scrapes are in it
    steps = [
        ("the 'all' preset lit (the action answered)",
         f"document.querySelector('#{ids.PRESET_ALL}').className.includes('tl-btn-on')"),
        ("the range picker showing the range (cursor mode 'range')",
         f"document.querySelector('#{ids.RANGE_FROM}').value !== ''"),
        ("the balance panel flagging the slow rank",
         f"document.querySelector('#{ids.SERVER_PANEL}').innerText.includes('UNEVEN')"),
    ]
    for what, js in steps:
        try:
            pg.wait_for_function(f"() => {js}", timeout=90_000)
        except Exception as exc:  # playwright's TimeoutError
            raise AssertionError(f"stopped before {what}") from exc
    return pg.inner_text(f"#{ids.SERVER_PANEL}")


def test_a_saved_page_with_a_slow_dp_rank_shows_its_spread_in_the_dashboard(browser, tmp_path):
    from conftest import open_live_page

    from tealeaves.app.dashboard import ids
    from tealeaves.app.dashboard.server import start_in_thread

    url, shutdown = start_in_thread(store_path=_store_with_a_slow_rank(tmp_path), collect=False)
    try:
        pg, _ = open_live_page(browser, url)
        text = _all_then_uneven(pg)
        assert "DP ranks · SGLang /metrics, 2 scrapes" in text, text
        assert "rank 3 at 0.50x the ranks' median" in text
        hot = pg.inner_text(f"#{ids.SERVER_PANEL} tr.tl-hot-row")
        assert hot.split()[0] == "3" and "12.0" in hot
        pg.close()
    finally:
        shutdown()


@pytest.mark.parametrize("slow", ["all", "panel", "panel-past-stuck"])
def test_all_and_the_balance_panel_land_on_a_server_slower_than_the_page_waits(
        browser, tmp_path, monkeypatch, slow):
    """A loaded server (a 2-core CI, 2026-12-04): an "all" slower than the tick's stuck limit
    was asked again and again, each retry superseding the last (dash-renderer keeps only a
    callback's newest request), so it never landed; a balance panel slower than its 3-s tick
    likewise.  Slowed here on purpose (a sleep in the server), both still land."""
    import time

    from conftest import open_live_page

    from tealeaves.app.dashboard import factory, server_panel
    from tealeaves.app.dashboard.pages import live as live_page
    from tealeaves.app.dashboard.server import start_in_thread

    if slow != "panel":
        monkeypatch.setattr(factory, "STUCK_MS", 1500)  # retries every 1.5 s
    if slow == "all":
        real_act = live_page.act

        def act(live, action, *a, **k):
            if action.get("kind") == "all":
                time.sleep(2.5)
            return real_act(live, action, *a, **k)
        monkeypatch.setattr(live_page, "act", act)
    else:
        real_panel = server_panel.server_panel

        def panel(*a, **k):
            time.sleep(3.5)  # longer than the 3-s cluster tick
            return real_panel(*a, **k)
        monkeypatch.setattr(server_panel, "server_panel", panel)
    url, shutdown = start_in_thread(store_path=_store_with_a_slow_rank(tmp_path), collect=False)
    try:
        pg, _ = open_live_page(browser, url)
        assert "rank 3 at 0.50x the ranks' median" in _all_then_uneven(pg)
        pg.close()
    finally:
        shutdown()


def test_classify_prints_the_spread_and_the_expert_balance_of_a_page(tmp_path, capsys):
    from test_saved_metrics_page import _page

    from tealeaves.data import bundled_trace_path

    f = tmp_path / "metrics.txt"
    f.write_text(_page() + page())
    assert main(["classify", str(bundled_trace_path()), "--server-metrics", str(f)]) == 0
    out = capsys.readouterr().out
    # one scrape of the ranks: their values, but no verdict (issue 38: one scrape cannot tell
    # a steady spread from a momentary one)
    assert "one scrape: cannot tell steady from momentary" in out and "UNEVEN" not in out
    assert "balancedness 0.17 (mean/max over ranks), most load on GPU rank 8" in out
    assert "the server's eplb_balancedness 0.62 over 1,000 passes" in out
    # the page is dated by its modification time, not within the bundled trace: said so
    assert "NOT within the trace's time span" in out
    assert main(["classify", str(bundled_trace_path()), "--server-metrics", str(f),
                 "--json"]) == 0
    sm = json.loads(capsys.readouterr().out)["server_metrics"]
    assert sm["server_ranks"]["uneven_ranks"] == [] and sm["expert_balance"]["hot_rank"] == 8
    assert sm["expert_balance"]["counts"] == [[float(c) for c in LAYER_27]]


def test_a_static_page_scraped_again_keeps_the_servers_balancedness_and_says_as_of_when():
    r = read_page(page() + page(), start=1_796_000_000.0)  # nothing moved between scrapes
    bal = balancedness_series(r.frame)
    assert bal["balancedness"].tolist() == [pytest.approx(0.62)]
    assert bal["timestamp"].tolist() == [1_796_000_001.0] and bal["passes"].tolist() == [1000]
    heat = expert_heatmap(r.frame)
    assert heat["basis"] == "since start" and heat["span"][1] == 1_796_000_001.0


def test_a_report_of_a_store_with_only_scrapes_says_what_it_lacks(tmp_path, capsys):
    f = tmp_path / "metrics.txt"
    f.write_text(page())
    db = tmp_path / "s.db"
    assert main(["import", str(f), "--store", str(db), "--start-time", "1796000000"]) == 0
    capsys.readouterr()
    assert main(["report", "--store", str(db), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "holds no GPU samples (only the server's /metrics scrapes" in err, err
