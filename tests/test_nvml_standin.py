"""The stand-in ``libnvidia-ml.so.1`` (``kernels_bench/nvml_standin``) that lets nvtop draw
several GPUs carrying values recorded on a real H200: built with the machine's C compiler and
asked through ctypes what nvtop asks it."""

from __future__ import annotations

import ctypes
import shutil
import time

import pytest

from tealeaves.kernels_bench.nvml_replay import SCENARIOS, build_library, truth

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


class Util(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


def _lib(tmp_path, monkeypatch, rows: str, t0: float):
    table = tmp_path / "replay.txt"
    table.write_text("# t_s gpu util mem power limit temp sm mem_clk used total rx tx\n" + rows)
    monkeypatch.setenv("TEALEAVES_NVML_REPLAY", str(table))
    monkeypatch.setenv("TEALEAVES_NVML_T0", f"{t0:.6f}")
    return ctypes.CDLL(str(build_library(tmp_path / "lib")))


def test_the_standin_answers_each_gpu_from_its_row_in_force(tmp_path, monkeypatch):
    now = time.time()
    rows = "".join(f"{t} {g} {u} 1 {p} 700000 40 1980 3201 14000000000 150754820096 100 -1\n"
                   for t, g, u, p in [(0, 0, 5, 80000), (0, 1, 95, 500000), (1000, 0, 60, 1),
                                      (1000, 1, 61, 1)])
    lib = _lib(tmp_path, monkeypatch, rows, now - 10)  # 10 s in: the rows at t=0 hold
    assert lib.nvmlInit_v2() == 0
    n = ctypes.c_uint()
    assert lib.nvmlDeviceGetCount_v2(ctypes.byref(n)) == 0 and n.value == 2
    got = []
    for i in range(2):
        dev = ctypes.c_void_p()
        assert lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(dev)) == 0
        u, p, v = Util(), ctypes.c_uint(), ctypes.c_uint()
        assert lib.nvmlDeviceGetUtilizationRates(dev, ctypes.byref(u)) == 0
        assert lib.nvmlDeviceGetPowerUsage(dev, ctypes.byref(p)) == 0
        got.append((u.gpu, p.value))
        # -1 in the table is a counter the GPU lacks: NVML_ERROR_NOT_SUPPORTED (3), and an
        # H200 has no fan of its own
        assert lib.nvmlDeviceGetPcieThroughput(dev, 0, ctypes.byref(v)) == 3
        assert lib.nvmlDeviceGetPcieThroughput(dev, 1, ctypes.byref(v)) == 0 and v.value == 100
        assert lib.nvmlDeviceGetFanSpeed(dev, ctypes.byref(v)) == 3
    assert got == [(5, 80000), (95, 500000)]
    bad = ctypes.c_void_p()
    assert lib.nvmlDeviceGetHandleByIndex_v2(2, ctypes.byref(bad)) != 0


def test_scenarios_hold_the_split_and_their_truth_names_the_hot_set():
    n, stretches = SCENARIOS["split8"]
    t = truth("split8", 100.0)
    assert n == 8 and len(t["stretches"]) == len(stretches)
    assert t["stretches"][0]["start"] == 100.0
    assert [s["hot_set"] for s in t["stretches"]].count([1, 3, 5, 7]) >= 1
    # all busy or none busy is no hot set
    assert all(s["hot_set"] == [] for s in t["stretches"] if len(s["busy"]) in (0, 8))


def test_bad_rows_are_skipped_never_read_as_values(tmp_path, monkeypatch):
    """A NaN GPU index (once an out-of-bounds write), NaN or huge values, and the tail of a
    comment longer than the line buffer are no rows: only the good row is served."""
    good = "0 0 42 1 300000 700000 45 1980 3201 1000 150754820096 100 100\n"
    rows = ("0 nan 50 1 1 1 1 1 1 1 1 1 1\n"
            "0 1 nan 1 1 1 1 1 1 1 1 1 1\n"
            "0 1 1e300 1 1 1 1 1 1 1 1 1 1\n"
            "# " + "x" * 1500 + " 0 5 77 1 1 1 1 1 1 1 1 1 1\n" + good)
    lib = _lib(tmp_path, monkeypatch, rows, time.time())
    assert lib.nvmlInit_v2() == 0
    n = ctypes.c_uint()
    assert lib.nvmlDeviceGetCount_v2(ctypes.byref(n)) == 0 and n.value == 1
    dev, u = ctypes.c_void_p(), Util()
    assert lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)) == 0
    assert lib.nvmlDeviceGetUtilizationRates(dev, ctypes.byref(u)) == 0 and u.gpu == 42


def test_a_gap_in_gpu_indices_is_refused(tmp_path, monkeypatch, capfd):
    lib = _lib(tmp_path, monkeypatch,
               "0 3 5 1 1 700000 40 1980 3201 1 150754820096 1 1\n", time.time())
    assert lib.nvmlInit_v2() != 0
    assert "no rows for GPU 0 of 4" in capfd.readouterr().err
