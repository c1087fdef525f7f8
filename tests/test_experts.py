"""Expert load from SGLang's ``logical_count``: reading the dump and the per-layer/per-GPU maths.

The small case used throughout: 2 passes x 2 layers x 8 experts whose per-layer sums are
layer 0 = [8, 7, 6, 5, 4, 3, 2, 1] (total 36, skewed) and layer 1 = [1] * 8 (total 8, uniform).
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from tealeaves.classifier.experts import (
    balancedness,
    expert_summary,
    expert_to_ep_rank,
    gpu_loads,
    greedy_placement,
    layer_loads,
)
from tealeaves.data.experts import ExpertDumpError, check_logical_count, load_expert_dump

COUNT = np.array([
    [[4, 4, 3, 3, 2, 2, 1, 1], [1, 0, 1, 0, 1, 0, 1, 0]],
    [[4, 3, 3, 2, 2, 1, 1, 0], [0, 1, 0, 1, 0, 1, 0, 1]],
])
LAYER0 = [8, 7, 6, 5, 4, 3, 2, 1]
LAYER1 = [1] * 8


# ---------------------------------------------------------------- maths

def test_layer_loads_sums_passes():
    load = layer_loads(COUNT)
    assert load.dtype == np.float64
    assert load.tolist() == [LAYER0, LAYER1]


def test_layer_loads_refuses_2d():
    with pytest.raises(ValueError, match=r"expected \[passes, layers, experts\]"):
        layer_loads(np.ones((2, 8)))


def test_expert_to_ep_rank_contiguous_blocks():
    assert expert_to_ep_rank(8, 4).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert expert_to_ep_rank(8, 1).tolist() == [0] * 8
    assert expert_to_ep_rank(384, 8)[47:49].tolist() == [0, 1]


def test_expert_to_ep_rank_refuses_non_divisor():
    with pytest.raises(ValueError, match=r"ep_size 3 does not divide the 8 experts"):
        expert_to_ep_rank(8, 3)
    with pytest.raises(ValueError, match="ep_size"):
        expert_to_ep_rank(8, 0)


def test_gpu_loads_ep4_on_4_gpus():
    loads = gpu_loads(layer_loads(COUNT), n_gpus=4, ep_size=4)
    assert loads.tolist() == [[15, 11, 7, 3], [2, 2, 2, 2]]


def test_gpu_loads_ep2_on_4_gpus_splits_each_rank_over_its_gpus():
    # rank 0 = experts 0-3 (26 tokens) on GPUs 0, 1; rank 1 = experts 4-7 (10) on GPUs 2, 3
    loads = gpu_loads(layer_loads(COUNT), n_gpus=4, ep_size=2)
    assert loads.tolist() == [[13, 13, 5, 5], [2, 2, 2, 2]]


def test_gpu_loads_pure_tp_is_flat_whatever_the_skew():
    loads = gpu_loads(layer_loads(COUNT), n_gpus=4, ep_size=1)
    assert loads.tolist() == [[9, 9, 9, 9], [2, 2, 2, 2]]
    assert balancedness(loads, axis=1).tolist() == [1.0, 1.0]


def test_gpu_loads_explicit_placement():
    load = layer_loads(COUNT)
    flat = [0, 1, 2, 3, 3, 2, 1, 0]  # 1-D: same for both layers
    assert gpu_loads(load, 4, 4, placement=flat).tolist() == [[9, 9, 9, 9], [2, 2, 2, 2]]
    per_layer = np.array([flat, [0] * 8])
    assert gpu_loads(load, 4, 4, placement=per_layer).tolist() == [[9, 9, 9, 9], [8, 0, 0, 0]]


@pytest.mark.parametrize(("n_gpus", "ep_size", "match"), [
    (0, 1, "n_gpus must be at least 1"),
    (4, 3, "ep_size 3 does not divide n_gpus 4"),
    (16, 16, "ep_size 16 does not divide the 8 experts"),
])
def test_gpu_loads_refuses_bad_layouts(n_gpus, ep_size, match):
    with pytest.raises(ValueError, match=match):
        gpu_loads(layer_loads(COUNT), n_gpus, ep_size)


def test_gpu_loads_refuses_bad_placement():
    load = layer_loads(COUNT)
    with pytest.raises(ValueError, match="placement"):
        gpu_loads(load, 4, 4, placement=[0, 1, 2, 3])
    with pytest.raises(ValueError, match=r"\[0, 3\]"):
        gpu_loads(load, 4, 4, placement=[0, 1, 2, 4, 0, 1, 2, 3])


def test_balancedness_values():
    assert balancedness([1, 2, 3, 4]) == pytest.approx(0.625)
    assert isinstance(balancedness([2, 2]), float)
    out = balancedness([[15, 11, 7, 3], [2, 2, 2, 2], [0, 0, 0, 0], [1, np.nan, 1, 1]])
    assert out[:2].tolist() == [0.6, 1.0]
    assert np.isnan(out[2]) and np.isnan(out[3])  # max 0 / missing -> NaN, never 0
    assert balancedness([[1, 2], [1, 4]], axis=0).tolist() == [1.0, 0.75]


def _rank_max(load: np.ndarray, placement: np.ndarray, ep: int) -> np.ndarray:
    return np.array([[row[p == r].sum() for r in range(ep)]
                     for row, p in zip(load, placement, strict=True)]).max(axis=1)


def test_greedy_reaches_perfect_split():
    load = layer_loads(COUNT)
    for ep in (2, 4):
        place = greedy_placement(load, ep)
        assert place.shape == (2, 8)
        assert balancedness(gpu_loads(load, 4, ep, placement=place), axis=1).tolist() == [1, 1]
    # ep 4 by hand: 8->r0, 7->r1, 6->r2, 5->r3, 4->r3, 3->r2, 2->r1, 1->r0
    assert greedy_placement(load, 4)[0].tolist() == [0, 1, 2, 3, 3, 2, 1, 0]
    # the uniform layer is already balanced: it keeps the contiguous default
    assert greedy_placement(load, 4)[1].tolist() == expert_to_ep_rank(8, 4).tolist()


def test_greedy_keeps_contiguous_where_lpt_is_worse():
    # LPT: 9->A 8->B 7->B 6->A 4->A (A full, 19) 0->B: max 19; contiguous [7,6,4]|[9,8,0]: 17
    load = np.array([[7.0, 6, 4, 9, 8, 0]])
    assert greedy_placement(load, 2).tolist() == [[0, 0, 0, 1, 1, 1]]


def test_greedy_valid_and_never_worse_than_contiguous_on_skewed_input():
    rng = np.random.default_rng(7)
    n_layers, n_experts = 12, 64
    # Zipf-like skew with the hot experts bunched in the first blocks
    weights = 1.0 / np.arange(1, n_experts + 1) ** 1.2
    load = np.stack([rng.multinomial(5000, weights / weights.sum()) for _ in range(n_layers)])
    load = load.astype(float)
    for ep in (1, 2, 4, 8, 16):
        place = greedy_placement(load, ep)
        assert place.shape == load.shape and place.dtype == np.int64
        for row in place:
            assert np.bincount(row, minlength=ep).tolist() == [n_experts // ep] * ep
        contiguous = np.broadcast_to(expert_to_ep_rank(n_experts, ep), load.shape)
        assert np.all(_rank_max(load, place, ep) <= _rank_max(load, contiguous, ep))
        now = balancedness(gpu_loads(load, 16, ep), axis=1)
        greedy = balancedness(gpu_loads(load, 16, ep, placement=place), axis=1)
        assert np.all(greedy >= now - 1e-12)
        if ep > 1:
            assert greedy.mean() > now.mean()  # the skew is real: greedy strictly helps


def test_greedy_refuses_non_divisor():
    with pytest.raises(ValueError, match="ep_size 3 does not divide the 8 experts"):
        greedy_placement(layer_loads(COUNT), 3)


def test_summary_ep4():
    s = expert_summary(COUNT, n_gpus=4, ep_size=4)
    assert (s["passes"], s["layers"], s["experts"], s["n_gpus"], s["ep_size"]) == (2, 2, 8, 4, 4)
    assert s["tokens"] == 44 and isinstance(s["tokens"], int)
    assert s["layer_tokens"].tolist() == [36, 8]
    assert s["layer_expert_max_over_mean"] == pytest.approx([16 / 9, 1.0])
    assert s["gpu_load"] == pytest.approx(np.array([[15, 11, 7, 3], [2, 2, 2, 2]])
                                          / np.array([[36], [8]]))
    assert s["gpu_load"].sum(axis=1) == pytest.approx([1, 1])
    assert s["layer_balancedness"] == pytest.approx([0.6, 1.0])
    assert s["layer_balancedness_greedy"] == pytest.approx([1.0, 1.0])
    assert s["balancedness"] == pytest.approx(11 / 17)  # summed: [17, 13, 9, 5]
    assert s["balancedness_greedy"] == pytest.approx(1.0)  # summed: [11, 11, 11, 11]
    assert s["balancedness_layer_mean"] == pytest.approx(0.8)
    assert s["balancedness_greedy_layer_mean"] == pytest.approx(1.0)
    assert s["gpu_load_total"] == pytest.approx(np.array([17, 13, 9, 5]) / 44)
    assert s["hot_gpu"] == 0
    assert s["pure_tp"] is False
    assert "estimate" in s["estimate_note"] and "replicat" in s["estimate_note"]


def test_summary_ep2():
    s = expert_summary(COUNT, n_gpus=4, ep_size=2)
    assert s["layer_balancedness"] == pytest.approx([9 / 13, 1.0])
    assert s["layer_balancedness_greedy"] == pytest.approx([1.0, 1.0])
    assert s["balancedness"] == pytest.approx(11 / 15)  # summed: [15, 15, 7, 7]
    assert s["balancedness_layer_mean"] == pytest.approx((9 / 13 + 1) / 2)
    assert s["hot_gpu"] == 0


def test_summary_pure_tp():
    s = expert_summary(COUNT, n_gpus=4, ep_size=1)
    assert s["pure_tp"] is True
    assert s["hot_gpu"] is None
    assert s["layer_balancedness"].tolist() == [1.0, 1.0]
    assert s["balancedness"] == 1.0 and s["balancedness_greedy"] == 1.0
    # the skew is still visible per layer, over experts
    assert s["layer_expert_max_over_mean"] == pytest.approx([16 / 9, 1.0])
    assert s["gpu_load"].tolist() == [[0.25] * 4, [0.25] * 4]


def test_summary_empty_layer_is_nan_not_zero():
    count = np.concatenate([np.zeros((2, 1, 8)), COUNT], axis=1)  # a dense first layer
    s = expert_summary(count, n_gpus=4, ep_size=4)
    assert s["layers"] == 3
    for key in ("layer_expert_max_over_mean", "layer_balancedness", "layer_balancedness_greedy"):
        assert math.isnan(s[key][0]), key
    assert np.isnan(s["gpu_load"][0]).all()
    assert s["balancedness_layer_mean"] == pytest.approx(0.8)  # empty layer left out
    assert s["balancedness"] == pytest.approx(11 / 17)


def test_summary_refuses_bad_layout():
    with pytest.raises(ValueError, match="ep_size 4 does not divide n_gpus 6"):
        expert_summary(COUNT, n_gpus=6, ep_size=4)
    with pytest.raises(ValueError, match="does not divide the 8 experts"):
        expert_summary(COUNT, n_gpus=16, ep_size=16)


# ---------------------------------------------------------------- validation

def test_check_logical_count_returns_float64_copy():
    out = check_logical_count(COUNT, "dump.pt")
    assert out.dtype == np.float64 and out.shape == (2, 2, 8)
    assert check_logical_count(COUNT.tolist(), "dump.pt").tolist() == COUNT.tolist()


@pytest.mark.parametrize(("value", "match"), [
    (np.ones((2, 8)), r"expected \[passes, layers, experts\], got shape \(2, 8\).*no passes"),
    (np.ones(8), r"expected \[passes, layers, experts\], got shape \(8\)"),
    (np.ones((1, 2, 2, 8)), r"expected \[passes, layers, experts\], got shape \(1, 2, 2, 8\)"),
    (5, r"got shape \(\)"),
    (np.ones((0, 2, 8)), "zero passes"),
    (np.ones((2, 0, 8)), "zero layers"),
    (np.ones((2, 2, 0)), "zero experts"),
    (np.where(COUNT == 4, -1, COUNT),
     r"negative count.*first -1 at \[pass, layer, expert\] = \[0, 0, 0\]"),
    (np.where(COUNT == 0, np.nan, COUNT), r"non-finite.*\[0, 1, 1\]"),
    (np.where(COUNT == 0, np.inf, COUNT), "non-finite"),
    (np.zeros((2, 2, 8)), "all zero"),
    ([[[1, 2], [3]]], "not a numeric array"),
    ("counts", "not a numeric array"),
])
def test_check_logical_count_refusals_name_the_source(value, match):
    with pytest.raises(ExpertDumpError, match=match) as info:
        check_logical_count(value, "run7/dump.pt")
    assert str(info.value).startswith("run7/dump.pt: ")
    assert isinstance(info.value, ValueError)


def test_load_without_torch_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(ExpertDumpError, match=r"needs torch: pip install -e '\.\[bench\]'"):
        load_expert_dump(tmp_path / "dump.pt")


# ---------------------------------------------------------------- torch dumps

class _NotATensor:
    """A picklable object that ``torch.load(weights_only=True)`` refuses."""


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="torch is needed to write and read an SGLang dump")


def test_load_dump_roundtrip(torch, tmp_path):
    counts = torch.randint(0, 50, (3, 4, 16), dtype=torch.int64, generator=torch.Generator()
                           .manual_seed(0))
    counts[0, 0, 0] = 1  # never all zero
    path = tmp_path / "dump.pt"
    torch.save({"rank": 0, "logical_count": counts,
                "average_utilization_rate_over_window": None}, path)
    out = load_expert_dump(path)
    assert out.dtype == np.float64 and out.shape == (3, 4, 16)
    assert np.array_equal(out, counts.numpy())
    s = expert_summary(out, n_gpus=8, ep_size=4)
    assert s["tokens"] == int(counts.sum()) and s["gpu_load"].shape == (4, 8)


def test_load_bare_tensor_and_nested_list(torch, tmp_path):
    counts = torch.arange(48, dtype=torch.int32).reshape(1, 3, 16)
    torch.save(counts, tmp_path / "bare.pt")
    assert np.array_equal(load_expert_dump(tmp_path / "bare.pt"), counts.numpy())
    torch.save({"logical_count": counts.tolist()}, tmp_path / "list.pt")
    assert np.array_equal(load_expert_dump(str(tmp_path / "list.pt")), counts.numpy())


def test_load_refuses_2d_dump(torch, tmp_path):
    path = tmp_path / "dump.pt"
    torch.save({"logical_count": torch.ones(4, 16, dtype=torch.int64)}, path)
    with pytest.raises(ExpertDumpError,
                       match=r"expected \[passes, layers, experts\], got shape \(4, 16\)") as info:
        load_expert_dump(path)
    assert str(path) in str(info.value)


def test_load_refuses_dump_without_logical_count(torch, tmp_path):
    path = tmp_path / "dump.pt"
    torch.save({"rank": 0, "physical_count": torch.ones(2, 4, 16)}, path)
    with pytest.raises(ExpertDumpError, match="no 'logical_count' key") as info:
        load_expert_dump(path)
    assert str(path) in str(info.value)
    assert "'rank', 'physical_count'" in str(info.value)


def test_load_refuses_text_file(torch, tmp_path):
    path = tmp_path / "dump.pt"
    path.write_text("[2026-01-01 00:00:00 TP0] Decode batch. #running-req: 1\n")
    with pytest.raises(ExpertDumpError, match="not a torch.save file of tensors") as info:
        load_expert_dump(path)
    assert str(path) in str(info.value)


def test_load_refuses_objects_weights_only_rejects(torch, tmp_path):
    path = tmp_path / "dump.pt"
    torch.save({"logical_count": torch.ones(1, 2, 4), "extra": _NotATensor()}, path)
    with pytest.raises(ExpertDumpError, match="not a torch.save file of tensors") as info:
        load_expert_dump(path)
    assert str(path) in str(info.value)


def test_load_refuses_missing_file_and_other_objects(torch, tmp_path):
    with pytest.raises(ExpertDumpError, match="no such file"):
        load_expert_dump(tmp_path / "absent.pt")
    torch.save([1, 2, 3], tmp_path / "list.pt")
    with pytest.raises(ExpertDumpError, match="got list"):
        load_expert_dump(tmp_path / "list.pt")
