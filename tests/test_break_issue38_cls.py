"""Issue 38, classifier verdicts: no verdict claims more than the data supports.

The inputs are the hostile tester's files (/tmp/hostile), rebuilt here.
"""

from __future__ import annotations

import numpy as np

from tealeaves.app.cli import main

T0 = 1764496800.0  # 2025-11-30 10:00:00 UTC


def test_one_scrape_gives_values_but_no_uneven_verdict(tmp_path, capsys):
    lines = ["# TYPE sglang:gen_throughput gauge"]
    for rank, gen in enumerate((100, 100, 100, 20)):
        lines += [f'sglang:gen_throughput{{dp_rank="{rank}",model_name="m"}} {gen}',
                  f'sglang:num_running_reqs{{dp_rank="{rank}",model_name="m"}} 8',
                  f'sglang:num_queue_reqs{{dp_rank="{rank}",model_name="m"}} 0']
    page = tmp_path / "met2.txt"
    page.write_text("\n".join(lines) + "\n")
    assert main(["import", str(page), "--store", str(tmp_path / "m.db")]) == 0
    out = capsys.readouterr().out
    # before: "UNEVEN DP ranks: rank 3 at 0.20x the ranks' median" from one scrape
    assert "UNEVEN" not in out
    assert "one scrape: cannot tell steady from momentary" in out
    assert "3: 20 tok/s" in out  # the values are still given


def test_two_scrapes_still_flag_an_uneven_rank():
    import pandas as pd

    from tealeaves.classifier.server_balance import rank_spread

    rows = [{"timestamp": t, "name": "sglang:gen_throughput", "labels": f"dp_rank={r}",
             "value": v, "rate_per_s": np.nan, "kind": "gauge"}
            for t in (T0, T0 + 1) for r, v in enumerate((100.0, 100.0, 20.0))]
    assert rank_spread(pd.DataFrame(rows))["uneven_ranks"] == ["2"]
    assert rank_spread(pd.DataFrame(rows[:3]))["uneven_ranks"] == []
