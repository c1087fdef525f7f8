"""The phase and share models run as numpy trees (issue 35): the same probabilities as
scikit-learn's, no scikit-learn or skops import to label a trace, never stale trees for a
changed archive, and a loaded model saved again writes the archives it was read from."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from tealeaves.classifier.features import MODEL_COLUMNS, WindowFeatures
from tealeaves.classifier.model import MODEL_DIR, PhaseModel
from tealeaves.classifier.model_files import load_skops
from tealeaves.classifier.trees import TreeEnsemble, beside
from tealeaves.data import bundled_trace_path
from tealeaves.data.traces import read_trace


@pytest.fixture(scope="module")
def features():
    tr = read_trace(bundled_trace_path())
    return WindowFeatures(0.5, tr.devices).fit_transform(tr.samples)


@pytest.mark.parametrize("name", ["phase_model.skops", "phase_model.shares.skops"])
def test_numpy_trees_give_scikit_learns_probabilities(features, name):
    from tealeaves.classifier.shares import share_columns

    est = load_skops(MODEL_DIR / name)
    cols = share_columns() if "shares" in name else MODEL_COLUMNS
    X = features.reindex(columns=list(cols)).to_numpy(dtype=float)
    rng = np.random.default_rng(0)
    holed = np.where(rng.random(X.shape) < 0.3, np.nan, X)  # missing readings route too
    t = TreeEnsemble.from_estimator(est)
    # readings exactly on a split's threshold (ties go left), one ulp above it, and +-inf
    # (the walk folds NaN routing into one comparison: each edge is where it could slip)
    thr = t.threshold[np.isfinite(t.threshold)]
    on = np.where(rng.random(X.shape) < 0.5, rng.choice(thr, X.shape), X)
    above = np.nextafter(on, np.inf)
    inf = np.where(rng.random(X.shape) < 0.2, rng.choice([np.inf, -np.inf], X.shape), holed)
    X = np.vstack([X, holed, on, above, inf, np.full((1, X.shape[1]), np.nan)])
    assert list(t.classes_) == list(est.classes_)
    np.testing.assert_allclose(t.predict_proba(X), est.predict_proba(X), rtol=0, atol=1e-12)
    with np.load(beside(MODEL_DIR / name), allow_pickle=False) as a:  # the shipped arrays
        shipped = TreeEnsemble.from_arrays(a)
    np.testing.assert_allclose(shipped.predict_proba(X), est.predict_proba(X), atol=1e-12)


def test_labelling_a_trace_imports_neither_scikit_learn_nor_skops(tmp_path):
    code = ("import sys; from tealeaves.app.cli import main; rc = main(['classify', "
            f"{str(bundled_trace_path())!r}]); "
            "bad = sorted({m.split('.')[0] for m in sys.modules} & {'sklearn', 'skops', "
            "'scipy'}); print('IMPORTED', bad, file=sys.stderr); raise SystemExit(rc)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, check=False, env={"XDG_CACHE_HOME": str(tmp_path),
                                                      "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "IMPORTED []" in r.stderr, r.stderr[-2000:]


def test_trees_of_other_bytes_are_never_read(tmp_path, monkeypatch, features):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    d = tmp_path / "model"
    shutil.copytree(MODEL_DIR, d)
    # trees beside the archive that belong to another archive (a hand copy, an old file)
    other = TreeEnsemble.from_estimator(load_skops(MODEL_DIR / "phase_model.skops"))
    other.value = np.zeros_like(other.value)  # would score every class alike
    from tealeaves.classifier.trees import store

    store(other, d / "phase_model.skops", "0" * 64, where=beside(d / "phase_model.skops"))
    m = PhaseModel.load(d)
    ref = PhaseModel.load()
    np.testing.assert_allclose(m.predict_proba(features).to_numpy(),
                               ref.predict_proba(features).to_numpy(), atol=1e-12)
    assert list((tmp_path / "cache" / "tealeaves" / "trees").glob("*.npz"))  # converted once


def test_a_loaded_model_saves_the_archives_it_was_read_from(tmp_path, features):
    m = PhaseModel.load()
    assert isinstance(m.estimator, TreeEnsemble)
    m.save(tmp_path)
    for name in ("phase_model.skops", "phase_model.shares.skops"):
        assert (tmp_path / name).read_bytes() == (MODEL_DIR / name).read_bytes()
        assert beside(tmp_path / name).exists()
    again = PhaseModel.load(tmp_path)
    np.testing.assert_allclose(again.predict_proba(features).to_numpy(),
                               m.predict_proba(features).to_numpy(), atol=1e-12)


def test_a_damaged_npz_or_an_unmakeable_cache_falls_back_to_the_archive(tmp_path, monkeypatch):
    """A truncated ``.trees.npz`` beside the archive, or a cache folder that cannot be made
    (``XDG_CACHE_HOME`` a file), is skipped: the trees come from the skops archive itself
    (they had dropped the phase model to the rules)."""
    from tealeaves.classifier import model_files as m
    from tealeaves.classifier import trees

    src = MODEL_DIR
    arch = tmp_path / "phase_model.skops"
    shutil.copy(src / "phase_model.skops", arch)
    good = trees.TreeEnsemble.from_arrays(np.load(src / "phase_model.trees.npz"))
    trees.beside(arch).write_bytes((src / "phase_model.trees.npz").read_bytes()[:5000])
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "afile"))
    got = m.load_trees(arch)
    X = np.random.default_rng(1).normal(size=(200, good.n_features_in_))
    np.testing.assert_allclose(got.predict_proba(X), good.predict_proba(X), atol=1e-12)
