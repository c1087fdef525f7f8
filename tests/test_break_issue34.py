"""Hostile inputs to issue 34's additions (model folders, engine shares, calibrate, groups):
each gives one clear error or a guarded result, never a traceback or a silently wrong one."""

from __future__ import annotations

import collections
import json
import shutil

import pytest

from tealeaves.app.cli import main
from tealeaves.classifier.model import MODEL_DIR, ModelError, PhaseModel
from tealeaves.data import TRACES_DIR

TRACE = str(TRACES_DIR / "h200x1_verify_attention_b.parquet")


@pytest.fixture()
def folder(tmp_path):
    """A copy of the shipped model folder and a function editing its JSON."""
    d = tmp_path / "model"
    shutil.copytree(MODEL_DIR, d)

    def edit(change):
        doc = json.loads((d / "phase_model.json").read_text())
        change(doc)
        (d / "phase_model.json").write_text(json.dumps(doc))
        return d

    return d, edit


def _map(doc, **kw):
    doc["confidence_maps"]["full"].update(kw)


TAMPERED = {
    "shares_no_file": (lambda d: d["shares"].pop("file"), "shares"),
    "shares_text": (lambda d: d.__setitem__("shares", "x"), "shares"),
    "shares_outside": (lambda d: d["shares"].update(file="../../phase_model.skops"), "shares"),
    "shares_columns": (lambda d: d["shares"].update(columns=["nope"]), "shares.columns"),
    "map_falls": (lambda d: _map(d, x=d["confidence_maps"]["full"]["x"][::-1]),
                  "confidence_maps.full"),
    "map_nan": (lambda d: _map(d, y=[float("nan")] * 41), "confidence_maps.full"),
    "map_above_1": (lambda d: _map(d, y=[5.0] * 41), "confidence_maps.full"),
    "map_lengths": (lambda d: _map(d, y=[0.5] * 3), "confidence_maps.full"),
    "map_no_x": (lambda d: d["confidence_maps"].update(full={"a": 1}), "confidence_maps.full"),
    "map_uncapped": (lambda d: d["confidence_maps"]["power_4hz"].update(y=[0.95] * 41),
                     "confidence_maps.power_4hz"),
    "maps_list": (lambda d: d.__setitem__("confidence_maps", [1]), "confidence_maps"),
    "no_imbalance": (lambda d: d.pop("imbalance"), "imbalance"),
    "no_window": (lambda d: d.pop("window_s"), "window_s"),
    "window_text": (lambda d: d.__setitem__("window_s", "abc"), "window_s"),
    "priors": (lambda d: d.__setitem__("priors", [1]), "priors"),
    "transition": (lambda d: d.__setitem__("transition", "x"), "transition"),
    "idle_gate": (lambda d: d.__setitem__("idle_gate", "x"), "idle_gate"),
    "phase_from": (lambda d: d.__setitem__("phase_from", "zzz"), "phase_from"),
    "kind": (lambda d: d.__setitem__("kind", "zzz"), "kind"),
}


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_a_tampered_model_json_is_one_error_naming_the_field(folder, case, capsys):
    change, field = TAMPERED[case]
    d = folder[1](change)
    with pytest.raises(ModelError, match=f"phase_model.json: {field}"):
        PhaseModel.load(d)
    assert main(["classify", "--model", str(d), TRACE]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tealeaves: error: --model: ")


def test_a_model_json_that_is_not_an_object_is_refused(folder, capsys):
    d = folder[0]
    (d / "phase_model.json").write_text("[1, 2]")
    assert main(["classify", "--model", str(d), TRACE]) == 2
    assert "not a model description" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["phase_model.skops", "phase_model.shares.skops"])
def test_a_damaged_or_foreign_skops_file_is_refused(folder, target, capsys):
    from sklearn.preprocessing import StandardScaler
    from skops.io import dump

    d = folder[0]
    (d / target).write_bytes(b"not a zip")
    assert main(["classify", "--model", str(d), TRACE]) == 2
    assert "zip" in capsys.readouterr().err
    # trusted types, yet no phase classifier: refused, not an AttributeError at classify time
    for obj in (StandardScaler(), collections.OrderedDict(a=1)):
        dump(obj, d / target)
        with pytest.raises(ModelError, match=f"{target}: not a fitted phase classifier"):
            PhaseModel.load(d)
    dump(collections.Counter(a=1), d / target)
    with pytest.raises(ModelError, match="refuses to load types collections.Counter"):
        PhaseModel.load(d)


def test_the_shipped_model_passes_the_checks():
    m = PhaseModel.load()
    assert m.shares is not None and m.confidence_maps


# -- engine shares from hostile /metrics pages ------------------------------------------------

FWD = "sglang:forward_execution_seconds_total"
T0 = 1_796_414_992_000  # ms


def _page(rows, ranks=(0,)):
    """A saved page: per (ms, prefill s, decode s) one scrape of every rank."""
    out = []
    for t, p, d in rows:
        for r in ranks:
            out.append(f'{FWD}{{tp_rank="{r}",category="prefill"}} {p} {t}')
            out.append(f'{FWD}{{tp_rank="{r}",category="decode"}} {d} {t}')
    return "\n".join(out) + "\n"


def _engine(text):
    from tealeaves.classifier.calibrate import engine_shares
    from tealeaves.data.server_metrics import read_page

    return engine_shares(read_page(text, name="m.prom").frame)


def test_engine_shares_of_a_tp8_server_are_its_ranks_not_their_sum():
    import numpy as np

    rows = [(T0, 0, 0), (T0 + 1000, 0.2, 0.5), (T0 + 2000, 0.4, 1.0)]
    for text in (_page(rows, ranks=range(8)), _page(rows[:2] + rows[1:])):  # TP8; saved twice
        e = _engine(text)
        np.testing.assert_allclose(e[["idle", "prefill", "decode"]].to_numpy(),
                                   [[0.3, 0.2, 0.5]] * 2)


@pytest.mark.parametrize("bad", ["NaN", "+Inf", "140737488355328", "9223372036854775792"])
def test_a_counter_value_that_is_no_count_of_seconds_is_no_reading(bad):
    e = _engine(_page([(T0, 0, 0), (T0 + 1000, bad, 0.5), (T0 + 2000, 0.4, 1.0)]))
    assert e.empty  # not read as 0, nor clipped to the whole interval
    # a sentinel that stays: its increase between two scrapes is no share either
    e = _engine(_page([(T0, 0, 0), (T0 + 1000, 140737488355328, 0.5),
                       (T0 + 2000, 140737488355328.4, 1.0), (T0 + 3000, 0.5, 1.5)]))
    assert e.empty


def test_forward_time_beyond_the_interval_and_gaps_of_days_are_no_reading():
    e = _engine(_page([(T0, 0, 0), (T0 + 1000, 0.9, 0.9), (T0 + 2000, 1.0, 1.5)]))
    assert len(e) == 1 and e["start"].iloc[0] == (T0 + 1000) / 1000
    assert _engine(_page([(T0, 0, 0), (T0 + 3 * 86_400_000, 0.2, 0.5)])).empty


# -- tealeaves calibrate's inputs and --out ---------------------------------------------------

SL = "h200x1_sl_mixtral_vllm_poisson"
SL_TRACE = str(TRACES_DIR / f"{SL}.parquet")


def _calibrate(tmp_path, page_text, *extra, out=None):
    page = tmp_path / "m.prom"
    page.write_text(page_text)
    out = tmp_path / "o" if out is None else out
    return main(["calibrate", SL_TRACE, "--server-metrics", str(page), "--out", str(out),
                 "--corpus", str(tmp_path / "no-corpus-read"), *extra]), page, out


def _one_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tealeaves: error: "), err
    return err[0]


def test_calibrate_refuses_a_page_without_timestamps(tmp_path, capsys):
    text = "".join(ln.rsplit(" ", 1)[0] + "\n"
                   for ln in _page([(T0, 0, 0), (T0 + 1000, 0.2, 0.5)]).splitlines())
    rc, page, out = _calibrate(tmp_path, text)
    line = _one_line(capsys)
    assert rc == 2 and str(page) in line and "no timestamps" in line and not out.exists()


def test_calibrate_says_one_scrape_is_not_a_missing_counter(tmp_path, capsys):
    rc, page, _ = _calibrate(tmp_path, _page([(T0, 0, 0)]))
    line = _one_line(capsys)
    assert rc == 2 and str(page) in line and "no two consecutive scrapes" in line


def test_calibrate_with_a_page_of_another_day_fails_before_reading_the_corpus(tmp_path,
                                                                              capsys):
    text = (TRACES_DIR / f"{SL}.metrics.prom").read_text()
    import re

    # five days before the trace (after it would be in the future: a page stamped more than a
    # day after now is refused as misread, issue 38)
    days = 5 * 86_400_000
    text = re.sub(r" (\d{13})$", lambda m: f" {int(m.group(1)) - days}", text,
                  flags=re.MULTILINE)
    rc, _, out = _calibrate(tmp_path, text)
    line = _one_line(capsys)  # not a missing --corpus folder: the overlap is checked first
    assert rc == 2 and "cover the same time" in line and not out.exists()


def test_calibrate_out_that_cannot_be_written_is_said_before_the_work(tmp_path, capsys):
    import os

    page = (TRACES_DIR / f"{SL}.metrics.prom").read_text()
    rc, *_ = _calibrate(tmp_path, page, out=MODEL_DIR)
    assert rc == 2 and "shipped model's folder" in _one_line(capsys)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    rc, *_ = _calibrate(tmp_path, page, out=a_file / "m")
    assert rc == 2 and "can write in" in _one_line(capsys)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who writes anywhere")
        rc, *_ = _calibrate(tmp_path, page, out=locked / "m")
        assert rc == 2 and "can write in" in _one_line(capsys)
    finally:
        locked.chmod(0o700)


@pytest.mark.parametrize("w", ["nan", "-1", "0", "inf"])
def test_calibrate_weight_must_be_a_finite_positive_number(tmp_path, w, capsys):
    with pytest.raises(SystemExit) as e:
        main(["calibrate", SL_TRACE, "--server-log", "x", "--out", str(tmp_path / "o"),
              "--weight", w])
    assert e.value.code == 2 and "--weight" in capsys.readouterr().err


def test_a_failed_save_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    import skops.io

    from tealeaves.classifier.model_files import load_skops

    m = PhaseModel.load()
    # scikit-learn's estimators, as `train` and `calibrate` make them (a loaded model runs
    # numpy trees and saves its archives' bytes): written through skops.io.dump
    m.estimator = load_skops(MODEL_DIR / "phase_model.skops")
    m.shares.estimator_ = load_skops(MODEL_DIR / "phase_model.shares.skops")
    d = tmp_path / "m"
    m.save(d)
    before = {p.name: p.read_bytes() for p in d.iterdir()}

    def broken(obj, file):
        file.write(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(skops.io, "dump", broken)
    with pytest.raises(OSError):
        m.save(d)
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before
    with pytest.raises(OSError):
        m.save(tmp_path / "new")
    assert not (tmp_path / "new").exists()


# -- thin inputs through classify_features ----------------------------------------------------

@pytest.fixture(scope="module")
def sl_samples():
    from tealeaves.data.traces import read_trace

    t = read_trace(TRACES_DIR / "h200x1_sl_dense_sglang_bursts.parquet")
    return t.samples, t.devices


def test_inputs_no_map_was_measured_on_are_never_confident_nor_named(sl_samples):
    from tealeaves.classifier import classify_samples
    from tealeaves.classifier.shares import thin_samples

    s, d = sl_samples
    w = classify_samples(thin_samples(s, ("mem_copy_util",), 4.0), d)
    assert w.attrs["inputs"]["kind"] == "none" and len(w)
    assert w["confidence"].max() < 0.9  # no held-out evidence for mem_copy_util alone
    assert w["verdict"].str.startswith("cannot tell (mem_copy_util").all()
    # the reason the share model labelled them is kept, not replaced by the verdict's words
    assert w.attrs["fallback"].startswith("no profiling counters")


def test_a_source_slower_than_the_window_states_its_own_rate(sl_samples):
    from tealeaves.classifier import classify_samples
    from tealeaves.classifier.shares import thin_samples

    s, d = sl_samples
    w = classify_samples(thin_samples(s, ("gpu_util",), 0.2), d)
    assert w.attrs["inputs"]["rate_hz"] == pytest.approx(0.2, rel=0.05)
    assert "at 0.2 Hz" in w.attrs["inputs"]["text"]


# -- --groups ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["99999999999999999999", "4096", "4095-4096"])
def test_a_groups_index_no_gpu_has_is_named_as_such(text):
    from tealeaves.classifier.groups import GroupsError, parse_groups

    with pytest.raises(GroupsError, match=f"'{text}' is not a GPU index"):
        parse_groups(text)  # was: "GPU 24414062499999742 · GI 4095 is not in the data"


# -- kernels_bench.serving_loop's arguments (checked before torch is imported) ---------------

@pytest.mark.parametrize("args,message", [
    (["--draft-steps", "-1"], "--draft-steps"), (["--chunk", "0"], "--chunk"),
    (["--long-share", "nan"], "--long-share"), (["--long-share", "2"], "--long-share"),
    (["--labels", "/nonexistent-dir/l.csv"], "is not a folder")])
def test_serving_loop_refuses_bad_arguments_before_running(tmp_path, args, message, capsys):
    from tealeaves.kernels_bench.serving_loop import main as loop_main

    argv = ["--tiny", "--device", "cpu", "--labels", str(tmp_path / "l.csv"), *args]
    with pytest.raises(SystemExit) as e:
        loop_main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err
