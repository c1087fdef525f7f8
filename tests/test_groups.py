"""Serving groups (issue 34): imbalance is judged within the GPUs that serve one model together.

Inputs are real rows: the prefill/decode-disaggregated composite (``kernels_bench.composite.
build_pd``: GPU 0 the prefill rows of ``h200x1_bursts`` in bursts, GPU 1 its decode rows
throughout) and the eight-GPU four-vs-four split of ``tests/test_hot_set.py`` (odd GPUs copies
of a real hot GPU's decode rows, even GPUs of the cold one's).
"""

from __future__ import annotations

import csv
import json
import math
import re

import jsonschema
import numpy as np
import pandas as pd
import pytest
from test_hot_set import HOT, WINDOW_S, eight_gpus

from tealeaves.app.cli import main
from tealeaves.app.report.model import ReportInput, build_report, schema
from tealeaves.classifier import classify_samples
from tealeaves.classifier.features import WindowFeatures
from tealeaves.classifier.groups import (
    ROLE_GAP,
    Grouping,
    GroupsError,
    check_groups,
    detect_roles,
    group_text,
    parse_groups,
)
from tealeaves.classifier.imbalance import imbalance_terms
from tealeaves.classifier.summary import group_summary, imbalance_summary
from tealeaves.data import TRACES_DIR
from tealeaves.data.traces import Trace, read_trace, write_trace
from tealeaves.kernels_bench.composite import build_pd, phase_rows


@pytest.fixture(scope="module")
def pd_trace():
    trace, rows = build_pd(TRACES_DIR)
    labels = pd.DataFrame([r[:4] for r in rows], columns=["start", "end", "phase", "hot_gpu"])
    return trace, labels


@pytest.fixture(scope="module")
def pd_path(pd_trace, tmp_path_factory):
    return write_trace(tmp_path_factory.mktemp("groups") / "pd.parquet", pd_trace[0])


@pytest.fixture(scope="module")
def pd_windows(pd_trace):
    trace, _ = pd_trace
    return classify_samples(trace.samples, trace.devices, window_s=WINDOW_S)


@pytest.fixture(scope="module")
def eight() -> Trace:
    return eight_gpus()


@pytest.fixture(scope="module")
def eight_path(eight, tmp_path_factory):
    return write_trace(tmp_path_factory.mktemp("groups8") / "eight.parquet", eight)


# -- the option's text -------------------------------------------------------------------


def test_groups_parse_from_ranges_commas_and_plus():
    assert parse_groups("0-3,4-7") == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert parse_groups("0+2+4+6,1+3+5+7") == ((0, 2, 4, 6), (1, 3, 5, 7))
    assert parse_groups(" 0 - 1 , 2 ") == ((0, 1), (2,))
    assert parse_groups("5") == ((5,),)
    assert group_text((0, 1, 2, 3)) == "0-3" and group_text((0, 2, 4, 6)) == "0+2+4+6"
    assert group_text((0, 1, 2, 5)) == "0-2+5"
    for text in ("0-3,4-7", "0+2+4+6,1+3+5+7", "0-2+5,3-4"):  # written back as given
        assert ",".join(group_text(g) for g in parse_groups(text)) == text


@pytest.mark.parametrize("text,expect", [
    ("0-x", "--groups: '0-x' is not a GPU index or range"),
    ("a", "--groups: 'a' is not a GPU index or range"),
    ("0-3;4-7", "--groups: '0-3;4-7' is not a GPU index or range"),
    ("3-1", "--groups: '3-1': the range ends before it starts"),
    ("0-3,,4-7", "--groups: group 2 of '0-3,,4-7' is empty"),
    ("0-4,4-7", "--groups: GPU 4 is in two groups (1 and 2)"),
    ("", "--groups: empty"),
    ("0-99999", "--groups: '0-99999': more than 4096 GPUs in one range"),
])
def test_a_bad_groups_value_names_the_option_and_the_bad_part(text, expect):
    with pytest.raises(GroupsError, match="^" + re.escape(expect)):
        parse_groups(text)


def test_groups_must_name_the_data_s_gpus_and_each_of_them():
    with pytest.raises(GroupsError, match=r"--groups: GPUs 8, 9 are not in the data \(its "
                                          r"GPUs: 0-7\)"):
        check_groups(parse_groups("0-3,4-9"), range(8))
    with pytest.raises(GroupsError, match=r"--groups: GPUs 4, 5, 6, 7 of the data are in no "
                                          r"group; name every GPU \(e.g. --groups 0-7\)"):
        check_groups(parse_groups("0-3"), range(8))
    g = check_groups(((4, 5, 6, 7), (0, 1, 2, 3)), range(8))
    assert g.groups == ((0, 1, 2, 3), (4, 5, 6, 7)) and g.source == "option"
    assert g.text() == "groups 0-3, 4-7 (from --groups)"
    assert Grouping(((0, 1),)).text() == "one group of 2 GPUs (no grouping given)"


# -- the terms within groups ----------------------------------------------------------------


def _features(work: list[list[float]], busy: list[list[float]]) -> pd.DataFrame:
    """Feature rows with per-GPU work split evenly into tensor and DRAM (fractions) and busy
    time (%)."""
    cols = {}
    for g in range(len(work[0])):
        w = np.array([row[g] for row in work], dtype=float)
        cols[f"load_g{g}"] = w
        cols[f"busy_g{g}"] = np.array([row[g] for row in busy], dtype=float)
        cols[f"tensor_g{g}"] = w / 200.0
        cols[f"dram_g{g}"] = w / 200.0
    return pd.DataFrame(cols)


def test_no_ratio_tax_or_hot_set_crosses_a_group():
    # two servers: GPUs 0-1 at 80 % and 20 % work (one hot), GPUs 2-3 balanced at 10 %
    f = _features([[80.0, 20.0, 10.0, 10.0]], [[90.0, 45.0, 30.0, 30.0]])
    one = imbalance_terms(f).iloc[0]
    assert one["hot_set"] == (0,) and one["imbalance_ratio"] == pytest.approx(80 / 30)
    t = imbalance_terms(f, groups=((0, 1), (2, 3))).iloc[0]
    assert t["hot_set"] == (0,)  # judged within 0-1 only
    assert t["imbalance_ratio"] == pytest.approx(80 / 50)  # the worst group's
    # busy: group 0-1 loses 1 - 67.5/90 = 25 %, group 2-3 nothing; weighted by 2 GPUs each
    assert t["straggler_tax"] == pytest.approx((0.25 * 2 + 0.0 * 2) / 4)
    assert t["hot_share"] == pytest.approx(80.0) and t["cold_share"] == pytest.approx(20.0)
    assert t["hot_top"] == 0
    alone = imbalance_terms(f, groups=((0,), (1,), (2,), (3,))).iloc[0]
    assert alone["hot_set"] == () and math.isnan(alone["imbalance_ratio"])
    assert math.isnan(alone["straggler_tax"]) and math.isnan(alone["hot_share"])
    # a GPU of the data in no group is judged alone
    part = imbalance_terms(f, groups=((0, 1),)).iloc[0]
    assert part["hot_set"] == (0,) and part["imbalance_ratio"] == pytest.approx(80 / 50)


# -- a prefill GPU beside a decode GPU: roles, not imbalance ---------------------------------


def test_the_pd_composite_is_real_rows_of_the_phases_it_says(pd_trace):
    trace, labels = pd_trace
    s = trace.samples
    span = s["timestamp"].max() - s["timestamp"].min()
    assert 55 <= span <= 65 and set(s["gpu"]) == {0, 1}
    assert (labels["hot_gpu"] == "").all()  # no GPU is hot
    pre = phase_rows(TRACES_DIR, "h200x1_bursts", "prefill")
    dec = phase_rows(TRACES_DIR, "h200x1_bursts", "decode")
    mixed = labels[labels["phase"] == "mixed"]
    assert len(mixed) == 12
    at = s["timestamp"].to_numpy()
    inside = np.zeros(len(s), dtype=bool)
    for r in mixed.itertuples():
        inside |= (at >= r.start) & (at < r.end)
    g0, g1 = inside & (s["gpu"] == 0).to_numpy(), (s["gpu"] == 1).to_numpy()
    assert set(s.loc[g0, "power_w"].dropna()) <= set(pre["power_w"].dropna())
    assert set(s.loc[g1 & (at >= labels["start"].iloc[1]) & (at < labels["end"].iloc[-2]),
                     "power_w"].dropna()) <= set(dec["power_w"].dropna())


def test_the_pd_composite_is_two_roles_and_no_window_has_a_hot_set(pd_trace, pd_windows):
    trace, _ = pd_trace
    g = detect_roles(WindowFeatures(WINDOW_S, trace.devices).fit_transform(trace.samples))
    assert g.source == "roles" and g.groups == ((0,), (1,))
    assert g.roles == {0: "prefill", 1: "decode"}
    assert g.text() == "roles: GPU 0 prefill-only, GPU 1 decode-only (detected)"
    pair = g.evidence["pairs"][0]
    assert pair["why"] == "lockstep" and pair["gap"] >= 2 * ROLE_GAP and pair["together"] >= 30
    w = pd_windows
    assert (w["phase"] == "decode").sum() >= 60  # the decode GPU's work is there ...
    assert (w["hot_set"] == "").all() and not w["imbalanced"].any()  # ... and is no hot set
    assert w["imbalance_ratio"].isna().all() and w["straggler_tax"].isna().all()
    assert w["hot_gpu"].isna().all()
    assert w.attrs["grouping"]["source"] == "roles"
    s = imbalance_summary(w)
    assert s["hot_set"] == [] and s["imbalanced_windows"] == 0
    assert math.isnan(s["straggler_tax"])


def test_the_same_pd_pair_judged_as_one_group_is_the_old_false_hot_set(pd_trace):
    """What the roles take away: as one group, GPU 1's steady decode beside GPU 0's bursts
    reads as a hot GPU 1 with a large straggler tax."""
    trace, _ = pd_trace
    w = classify_samples(trace.samples, trace.devices, window_s=WINDOW_S, groups="0-1")
    s = imbalance_summary(w)
    assert s["hot_set"] == [1] and s["imbalanced_windows"] >= 50
    assert s["straggler_tax"] > 0.3
    assert w.attrs["grouping"]["text"] == "groups 0-1 (from --groups)"


def test_four_prefill_gpus_beside_four_decode_gpus_are_two_role_groups(pd_trace):
    trace, _ = pd_trace
    s = trace.samples
    parts = []
    for g in range(8):
        p = s[s["gpu"] == (0 if g < 4 else 1)].copy()
        p["gpu"] = g
        parts.append(p)
    samples = pd.concat(parts).sort_values(["timestamp", "gpu"]).reset_index(drop=True)
    dev = trace.devices.iloc[[0] * 8].copy()
    dev["gpu"] = range(8)
    w = classify_samples(samples, dev.reset_index(drop=True), window_s=WINDOW_S)
    g = w.attrs["grouping"]
    assert g["source"] == "roles" and g["groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert g["text"] == "roles: GPUs 0-3 prefill-only, GPUs 4-7 decode-only (detected)"
    assert (w["hot_set"] == "").all()  # copies: balanced within each role
    assert np.nanmax(w["imbalance_ratio"]) == pytest.approx(1.0)  # judged within a role


def test_a_gpu_too_seldom_busy_to_tell_is_beside_the_roles_not_a_bridge(pd_trace):
    """A third GPU with no work at all gives no evidence: it neither joins the prefill and
    decode GPUs into one group nor is taken for either role."""
    trace, _ = pd_trace
    f = WindowFeatures(WINDOW_S, trace.devices).fit_transform(trace.samples)
    f = f.assign(load_g2=0.0, busy_g2=0.0, tensor_g2=0.0, dram_g2=0.0, sm_g2=0.0)
    g = detect_roles(f)
    assert g.groups == ((0,), (1,), (2,)) and g.roles == {0: "prefill", 1: "decode", 2: "idle"}
    assert g.text() == "roles: GPU 0 prefill-only, GPU 1 decode-only, GPU 2 idle (detected)"
    assert len(g.evidence["pairs"]) == 1  # only 0-1 has evidence
    # with no roles among the others it stays with them (an idle GPU beside a busy one is
    # the low-load imbalance case)
    one = f.assign(tensor_g0=f["tensor_g1"], dram_g0=f["dram_g1"], load_g0=f["load_g1"])
    assert detect_roles(one).groups == ((0, 1, 2),)


def test_no_corpus_recording_of_two_gpus_is_taken_for_roles():
    """The role test's calibration guard: every two-GPU recording of the corpus (one workload
    on both GPUs, the low-load composite's idle GPU beside a working one included) stays one
    group."""
    names = [r["name"] for r in csv.DictReader((TRACES_DIR / "MANIFEST.csv").open())
             if r["gpus"] == "2"]
    assert len(names) >= 14
    for name in names:
        tr = read_trace(TRACES_DIR / f"{name}.parquet")
        g = detect_roles(WindowFeatures(WINDOW_S, tr.devices).fit_transform(tr.samples))
        assert g.source == "none", (name, g.text(), g.why())
        for p in g.evidence["pairs"]:
            assert p["gap"] is None or p["gap"] < ROLE_GAP / 2, (name, p)


# -- the eight-GPU four-vs-four split ---------------------------------------------------------


def test_the_eight_gpu_split_is_one_group_with_its_hot_set_of_four(eight):
    w = classify_samples(eight.samples, eight.devices, window_s=WINDOW_S)
    assert w.attrs["grouping"]["source"] == "none"
    assert w.attrs["grouping"]["text"] == "one group of 8 GPUs (no grouping given)"
    assert set(w["hot_set"]) == {"1,3,5,7"} and w["imbalanced"].all()


def test_groups_of_halves_judge_each_half_on_its_own(eight):
    one = classify_samples(eight.samples, eight.devices, window_s=WINDOW_S)
    w = classify_samples(eight.samples, eight.devices, window_s=WINDOW_S, groups="0-3,4-7")
    # each half holds two hot and two cold copies: 1, 3 hot in 0-3 and 5, 7 in 4-7
    assert set(w["hot_set"]) == {"1,3,5,7"} and w["imbalanced"].all()
    g = group_summary(w)
    assert g["applies"] and g["source"] == "option"
    assert [(j["name"], j["hot_set"], j["hot_set_windows"]) for j in g["judged"]] == [
        ("0-3", [1, 3], len(w)), ("4-7", [5, 7], len(w))]
    # shares of each group's work: twice the eight-GPU shares (half the GPUs)
    assert np.allclose(w["hot_share"], 2 * one["hot_share"])
    assert np.allclose(w["cold_share"], 2 * one["cold_share"])
    # the same mix in each half: the same ratio and straggler tax as over all eight
    assert np.allclose(w["imbalance_ratio"], one["imbalance_ratio"])
    assert np.allclose(w["straggler_tax"], one["straggler_tax"])
    # odd GPUs apart from even ones: each group balanced (copies of one GPU's rows)
    apart = classify_samples(eight.samples, eight.devices, window_s=WINDOW_S,
                             groups="0+2+4+6,1+3+5+7")
    assert (apart["hot_set"] == "").all() and not apart["imbalanced"].any()
    assert np.allclose(apart["imbalance_ratio"], 1.0)
    assert np.allclose(apart["straggler_tax"], 0.0)


# -- the command line and the report ---------------------------------------------------------


def test_classify_says_roles_and_no_hot_set_on_the_pd_trace(pd_path, capsys):
    assert main(["classify", str(pd_path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    head = next(ln for ln in lines if "hot_set" in ln)
    rows = [ln for ln in lines if ln[:1].isdigit()]
    hot_end = head.index("hot_set") + len("hot_set")  # columns right-aligned under headers
    imb_end = head.index("imbalanced") + len("imbalanced")
    assert rows and all(ln[:hot_end].split()[-1] == "-" for ln in rows)  # the hot set column
    assert all(ln[:imb_end].split()[-1] == "no" for ln in rows)
    assert "hot set: none (every serving group has one GPU: roles, not imbalance)" in out
    assert "imbalance: n/a (every serving group has one GPU: roles, not imbalance)" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("roles:"))
    assert line.startswith("roles: GPU 0 prefill-only, GPU 1 decode-only (detected): no hot "
                           "set, imbalance ratio or straggler tax across roles; tensor share")
    assert main(["classify", str(pd_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["groups"]["source"] == "roles" and doc["groups"]["roles"] == {
        "0": "prefill", "1": "decode"}
    assert all(w["hot_set"] == [] and w["straggler_tax"] is None for w in doc["windows"])
    assert doc["imbalance"]["hot_set"] == []


def test_classify_groups_on_the_eight_gpu_split(eight_path, capsys):
    assert main(["classify", str(eight_path)]) == 0
    plain = capsys.readouterr().out.replace(str(eight_path), "FILE")  # (its folder's name)
    assert "groups" not in plain and "roles" not in plain  # no grouping: as before
    assert main(["classify", str(eight_path), "--groups", "0-3,4-7"]) == 0
    out = capsys.readouterr().out
    assert ("groups 0-3, 4-7 (from --groups): imbalance judged within each group; group 0-3 "
            "hot 1, 3 in 6 of 6 decode windows, group 4-7 hot 5, 7 in 6 of 6 decode windows"
            in out)
    assert ("hot set: GPUs 1, 3, 5, 7 at 2.5x the rest's work within each group (36 % each "
            "vs 14 %), stays: 6 of 6 imbalanced windows") in out
    assert main(["classify", str(eight_path), "--groups", "0-3,4-7", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["groups"]["groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert all(w["hot_set"] == HOT for w in doc["windows"])


@pytest.mark.parametrize("value,expect", [
    ("0-x", "tealeaves: error: --groups: '0-x' is not a GPU index or range"),
    ("0-3", "tealeaves: error: --groups: GPUs 4, 5, 6, 7 of the data are in no group"),
    ("0-3,4-9", "tealeaves: error: --groups: GPUs 8, 9 are not in the data"),
])
def test_a_bad_groups_value_is_one_line_and_exit_2(eight_path, capsys, value, expect,
                                                   tmp_path):
    # (an --out that can be written: an unwritable one is refused first, before --groups)
    for cmd in (["classify", str(eight_path)],
                ["report", "--trace", str(eight_path), "--out", str(tmp_path / "x.json")]):
        assert main([*cmd, "--groups", value]) == 2
        cap = capsys.readouterr()
        assert cap.err.strip().splitlines() == [cap.err.strip()] and \
            cap.err.startswith(expect), cap.err
        assert cap.out == ""


def test_report_says_the_groups_it_judged_in(eight, eight_path, pd_path, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["report", "--trace", str(eight_path), "--groups", "0-3,4-7",
                 "--out", str(out)]) == 0
    line = capsys.readouterr().out
    assert line.rstrip().endswith("; groups 0-3, 4-7 (from --groups)"), line
    doc = json.loads(out.read_text())
    jsonschema.Draft202012Validator(schema()).validate(doc)
    assert doc["groups"]["source"] == "option"
    assert [j["hot_set"] for j in doc["groups"]["judged"]] == [[1, 3], [5, 7]]
    assert main(["report", "--trace", str(pd_path), "--out", str(out)]) == 0
    line = capsys.readouterr().out
    assert "hot set: none" in line and "roles: GPU 0 prefill-only, GPU 1 decode-only" in line
    assert "(every serving group has one GPU: roles, not imbalance)" in line
    doc = json.loads(out.read_text())
    jsonschema.Draft202012Validator(schema()).validate(doc)
    assert doc["groups"]["roles"] == {"0": "prefill", "1": "decode"}
    assert doc["summary"]["hot_set"] == [] and doc["summary"]["straggler_tax"] is None
    # no grouping given, none detected: no groups part, the report as before
    rep = build_report(ReportInput(eight.samples, eight.devices, dict(eight.meta)),
                       window_s=WINDOW_S)
    assert "groups" not in rep.data
