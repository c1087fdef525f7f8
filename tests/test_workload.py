"""The labelled workload's schedules and ground truth, run on the CPU at toy sizes (the same
code drives the H200s at full size).  Needs torch (the ``bench`` extra): skipped without it."""

from __future__ import annotations

import itertools

import pytest

from tealeaves.data.traces import read_labels
from tealeaves.kernels_bench.workload import SCENARIOS, Phase, scenario_schedule

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("n_gpus", [1, 2])
@pytest.mark.parametrize("name", ["default", *SCENARIOS])
def test_every_scenario_is_a_valid_schedule(name, n_gpus):
    plan = scenario_schedule(name, n_gpus, seed=3)
    assert (15 if n_gpus == 1 else 35) <= sum(p.seconds for p in plan) <= 100
    assert {p.phase for p in plan} <= {"idle", "prefill", "decode"}
    assert plan[0].phase == "idle" and plan[-1].phase == "idle"  # margins frame the labels
    assert all(p.hot_gpu is None or 0 <= p.hot_gpu < n_gpus for p in plan)
    assert scenario_schedule(name, n_gpus, seed=3) == plan  # deterministic per seed


def test_unknown_scenario_is_refused():
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        scenario_schedule("nope", 2)


def test_run_writes_contiguous_labels_with_one_row_per_rotation_stint(tmp_path):
    from tealeaves.kernels_bench.workload import TINY, Workload

    wl = Workload(devices=[0, 1], device_type="cpu", dims=TINY)
    plan = [Phase("idle", 0.05), Phase("prefill", 0.1, tokens=256),
            Phase("prefill", 0.1, kind="chunked", tokens=128, decode_steps=2),
            Phase("decode", 0.1, kind="verify", nodes=16, context=4096, batch=2),
            Phase("decode", 0.1, kind="launch"),
            Phase("decode", 0.35, hot_gpu=0, rotate_s=0.1), Phase("idle", 0.05)]
    rows = wl.run(plan, tmp_path / "labels.csv", log=lambda s: None)
    labels = read_labels(tmp_path / "labels.csv")
    assert len(labels) == len(rows) >= len(plan) + 2
    assert (labels["start"].to_numpy()[1:] >= labels["end"].to_numpy()[:-1]).all()
    stints = labels["hot_gpu"].dropna().astype(int).tolist()
    assert len(stints) >= 3 and all(a != b for a, b in itertools.pairwise(stints))
    assert all(r["steps"] > 0 for r in rows if r["phase"] != "idle")
    assert any("verify nodes=16" in r["workload"] for r in rows)


def test_hook_recorder_labels_a_prompt_pass_prefill_and_one_token_steps_decode():
    from tealeaves.kernels_bench.hf_moe import PhaseRecorder

    model = torch.nn.Embedding(16, 4)
    rec = PhaseRecorder(sync=lambda: None, merge_gap_s=10)
    rec.attach(model)
    model(torch.zeros(2, 7, dtype=torch.long))
    for _ in range(3):
        model(torch.zeros(2, 1, dtype=torch.long))
    assert [(ph, n) for _, _, ph, n in rec.intervals] == [("prefill", 1), ("decode", 3)]
