"""The serving-loop families of the corpus (issue 34, part 1): the recorded traces hold what the
loop promised (provenance, labels the forwards imply, an SGLang log and /metrics page tealeaves
reads), and the loop itself runs small on the CPU where torch is installed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tealeaves.classifier.calibrate import engine_shares
from tealeaves.data import TRACES_DIR
from tealeaves.data.traces import read_labels, read_trace

MANIFEST = pd.read_csv(TRACES_DIR / "MANIFEST.csv", dtype=str)
SERVING = MANIFEST[MANIFEST["family"].str.startswith("serving_loop/")]


def test_at_least_six_serving_loop_families_with_provenance():
    fams = set(SERVING["family"])
    assert len(fams) >= 6
    archs = {f.rsplit("/", 1)[1] for f in fams}
    assert {"kimi_moe", "qwen3_moe", "mixtral", "dense"} <= archs
    policies = {f.split("/")[1] for f in fams}
    assert {"sglang", "vllm", "sglang+spec", "vllm+spec"} <= policies
    for r in SERVING.itertuples():
        assert "kernels_bench.serving_loop" in r.workload and r.machine == "nvidia-h200"
        assert (TRACES_DIR / f"{r.name}.parquet").stat().st_size < 1_000_000


@pytest.mark.parametrize("name", list(SERVING["name"]))
def test_labels_follow_the_forwards_token_majority(name):
    labels = read_labels(TRACES_DIR / f"{name}.labels.csv")
    fw = pd.read_csv(TRACES_DIR / f"{name}.forwards.csv")
    trace = read_trace(TRACES_DIR / f"{name}.parquet")
    assert labels["start"].min() >= trace.samples["timestamp"].min()
    assert labels["end"].max() <= trace.samples["timestamp"].max()
    mid = ((fw["start"] + fw["end"]) / 2).to_numpy()
    from tealeaves.data.traces import label_at

    got = label_at(labels, mid)["phase"].to_numpy()
    want = np.where((fw["prefill_tokens"] >= fw["decode_tokens"]) & (fw["prefill_tokens"] > 0),
                    "prefill", "decode")
    assert np.mean(got == want) > 0.97  # a forward split at a merged gap's middle may differ
    assert set(fw["kind"]) <= {"prefill", "mixed", "decode", "draft", "verify"}
    if "+spec" in SERVING.set_index("name").loc[name, "family"]:
        assert {"draft", "verify"} <= set(fw["kind"])
    if "/vllm" in SERVING.set_index("name").loc[name, "family"] and \
            "trickle" not in name:
        assert "mixed" in set(fw["kind"])


@pytest.mark.parametrize("name", list(SERVING["name"]))
def test_the_server_signals_beside_each_trace_read(name):
    from tealeaves.data.server_log import read_log
    from tealeaves.data.server_metrics import read_page

    log = read_log(TRACES_DIR / f"{name}.sglang.log")
    kinds = {e.kind for e in log.events}
    assert "prefill" in kinds
    page = read_page((TRACES_DIR / f"{name}.metrics.prom").read_text(), name=name)
    eng = engine_shares(page.frame)
    assert len(eng) > 20
    s = eng[["idle", "prefill", "decode"]].to_numpy()
    assert (s >= -1e-9).all() and np.allclose(s.sum(axis=1), 1.0)
    assert s[:, 1].max() > 0.1 and s[:, 2].max() > 0.1


def test_the_loop_runs_small_on_the_cpu(tmp_path):
    pytest.importorskip("torch", reason="the serving loop needs torch (pip install -e '.[bench]')")
    from tealeaves.kernels_bench.serving_loop import run

    out = {}
    for policy, tree in (("sglang", 0), ("vllm", 8)):
        path = tmp_path / f"t_{policy}.labels.csv"
        out[policy] = run(path, arch="qwen3_moe", policy=policy, pattern="bursts",
                          seconds=2.0, seed=3, tree=tree, device="cpu", tiny=True,
                          log=lambda s: None)
        assert out[policy]["forwards"] > 10 and out[policy]["finished"] >= 1
        labels = read_labels(path)
        assert set(labels["phase"]) <= {"idle", "prefill", "decode"}
        for ext in ("forwards.csv", "sglang.log", "metrics.prom"):
            assert (tmp_path / f"t_{policy}.{ext}").stat().st_size > 0
    assert out["vllm"]["mixed_forwards"] > 0 and out["sglang"]["mixed_forwards"] == 0
