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
