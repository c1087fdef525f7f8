"""The phase model's files: the JSON description checked field by field, the skops archives
loaded with trusted types only (``TRUSTED_PREFIXES``) and run as numpy trees, and what
``PhaseModel.save`` writes for them.  No pickled code is ever loaded.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from tealeaves.classifier.rules import PHASE_ORDER

#: Type-name prefixes skops may load from the model file.
TRUSTED_PREFIXES = ("sklearn.", "numpy.", "builtins.")


class ModelError(ValueError):
    """The model file is missing, unsafe, or does not fit this version of tealeaves."""


def _bad(jpath: Path, field: str, why: str) -> ModelError:
    """The ``ModelError`` of field ``field`` of the description ``jpath``."""
    return ModelError(f"{jpath}: {field}: {why}")


def _numbers(v, n: int | None = None) -> np.ndarray | None:
    """``v`` as a float array of finite numbers (``n`` of them when given), else None."""
    if not isinstance(v, list) or not all(isinstance(x, int | float) and not
                                          isinstance(x, bool) for x in v):
        return None
    a = np.asarray(v, dtype=float)
    return a if np.isfinite(a).all() and (n is None or len(a) == n) else None


def check_doc(doc: dict, jpath: Path) -> None:
    """Raise ``ModelError`` naming ``jpath`` and the field where the model description is not
    what ``PhaseModel.save`` writes (a folder edited by hand or damaged): the priors, the
    transitions, the imbalance settings, the window, the idle gate, ``phase_from``, the share
    model's entry (a file beside the JSON, the share columns) and the confidence maps
    (breakpoints in [0, 1], rising, as many ``y`` as ``x``; a capped map under
    ``shares.CONFIDENT``)."""
    from tealeaves.classifier.shares import CONFIDENT, share_columns

    k = len(PHASE_ORDER)
    pri = _numbers(doc.get("priors"), k)
    if pri is None or (pri <= 0).any():
        raise _bad(jpath, "priors", f"not {k} numbers above 0")
    rows = doc.get("transition")
    trans = [_numbers(r, k) for r in rows] if isinstance(rows, list) and len(rows) == k else None
    if trans is None or any(r is None or (r < 0).any() or r.sum() <= 0 for r in trans):
        raise _bad(jpath, "transition", f"not {k} rows of {k} numbers of 0 or more")
    imb = doc.get("imbalance")
    if not isinstance(imb, dict) or _numbers([imb.get("threshold"), imb.get("min_windows"),
                                              imb.get("floor", 1.0),
                                              imb.get("noise_k", 0.3)]) is None:
        raise _bad(jpath, "imbalance", "needs numbers threshold, min_windows (floor, noise_k)")
    w = _numbers([doc.get("window_s")])
    if w is None or not 0.05 <= w[0] <= 60:
        raise _bad(jpath, "window_s", f"{doc.get('window_s')!r} is not 0.05-60 s")
    gate = doc.get("idle_gate")
    if gate is not None and _numbers([gate]) is None:
        raise _bad(jpath, "idle_gate", f"{gate!r} is not a number or null")
    if doc.get("phase_from", "trees") not in ("trees", "shares"):
        raise _bad(jpath, "phase_from", f"{doc.get('phase_from')!r} is not 'trees' or 'shares'")
    sh = doc.get("shares")
    if sh:
        f = sh.get("file") if isinstance(sh, dict) else None
        if not isinstance(f, str) or not f or Path(f).name != f or f.startswith("."):
            raise _bad(jpath, "shares", "needs 'file', the name of a file beside the JSON")
        if sh.get("columns") != list(share_columns()):
            raise _bad(jpath, "shares.columns", "not the share model's feature columns; "
                                                "rebuild with `tealeaves train`")
    maps = doc.get("confidence_maps") or {}
    if not isinstance(maps, dict):
        raise _bad(jpath, "confidence_maps", "not an object of maps per input kind")
    for kind, cm in maps.items():
        field_ = f"confidence_maps.{kind}"
        if not isinstance(cm, dict):
            raise _bad(jpath, field_, "not an object with 'x' and 'y'")
        x, y = _numbers(cm.get("x")), _numbers(cm.get("y"))
        if x is None or y is None or len(x) != len(y) or not len(x):
            raise _bad(jpath, field_, "'x' and 'y' must be lists of as many finite numbers")
        if ((x < 0) | (x > 1) | (y < 0) | (y > 1)).any() or (np.diff(x) < 0).any() \
                or (np.diff(y) < 0).any():
            raise _bad(jpath, field_, "breakpoints must lie in [0, 1] and rise")
        if cm.get("capped") and (y >= CONFIDENT).any():
            raise _bad(jpath, field_, f"capped, yet reaches {CONFIDENT:g}")


def check_estimator(est, n_columns: int, path: Path) -> None:
    """Raise ``ModelError`` unless ``est`` is a fitted gradient-boosting classifier (or its
    ``trees.TreeEnsemble``) over ``n_columns`` features of phases only (a skops file of
    another trusted object)."""
    from tealeaves.classifier.trees import TreeEnsemble

    classes = getattr(est, "classes_", None)
    if isinstance(est, TreeEnsemble):
        kind_ok = True
    else:
        from sklearn.ensemble import HistGradientBoostingClassifier

        kind_ok = isinstance(est, HistGradientBoostingClassifier)
    if not kind_ok or classes is None \
            or getattr(est, "n_features_in_", None) != n_columns \
            or not set(map(str, classes)) <= set(PHASE_ORDER):
        raise ModelError(f"{path}: not a fitted phase classifier over {n_columns} features")


def load_skops(path: Path):
    """A skops archive's object, loading only the types under ``TRUSTED_PREFIXES``.

    Raises:
        ModelError: the archive holds another type (named).
        OSError, ValueError, zipfile.BadZipFile: the file is missing or not an archive.
    """
    from skops.io import get_untrusted_types, load

    untrusted = get_untrusted_types(file=path)
    bad = [t for t in untrusted if not t.startswith(TRUSTED_PREFIXES)]
    if bad:
        raise ModelError(f"{path}: refuses to load types {', '.join(bad)}")
    return load(path, trusted=untrusted)


def load_trees(path: Path):
    """The gradient-boosting classifier in the skops archive ``path`` as a
    ``trees.TreeEnsemble`` (no scikit-learn or skops import): the arrays kept beside it or in
    the user's cache for these very bytes (SHA-256), else the archive loaded through
    ``_load_skops``, checked, converted and cached.  An estimator the numpy walk cannot run
    (categorical splits) is returned as loaded.

    Raises:
        as ``_load_skops``.
    """
    import hashlib

    from tealeaves.classifier import trees

    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    got = trees.cached(path, sha)
    if got is not None:
        return got
    est = load_skops(path)
    try:
        got = trees.TreeEnsemble.from_estimator(est, source=path, source_sha256=sha)
    except (AttributeError, ValueError):  # not a gradient-boosting classifier: checked later
        return est
    trees.store(got, path, sha)
    return got


def archive_of(est):
    """What ``save`` writes as the skops archive of ``est``: a ``TreeEnsemble``'s own
    archive's bytes (checked to be the ones it was converted from), else a function writing
    ``skops.io.dump(est)`` to an open file.

    Raises:
        ModelError: the trees' archive is gone or has changed since they were read.
    """
    import hashlib

    from tealeaves.classifier.trees import TreeEnsemble

    if isinstance(est, TreeEnsemble):
        raw = est.source.read_bytes() if est.source is not None else b""
        if not raw or hashlib.sha256(raw).hexdigest() != est.source_sha256:
            raise ModelError(f"{est.source}: changed since the model was loaded; load it "
                             f"again before saving")
        return raw
    from skops.io import dump

    return lambda f: dump(est, f)


def keep_trees(est, archive: Path) -> None:
    """Write the numpy trees of ``est`` (saved as ``archive``) beside it
    (``trees.beside``), so the next load needs no skops; skipped for an estimator the numpy
    walk cannot run."""
    import hashlib

    from tealeaves.classifier import trees

    try:
        t = est if isinstance(est, trees.TreeEnsemble) else trees.TreeEnsemble.from_estimator(est)
    except (AttributeError, ValueError):
        return
    trees.store(t, archive, hashlib.sha256(archive.read_bytes()).hexdigest(),
                where=trees.beside(archive))


def load_shares(path: Path, columns: list[str]):
    """The share model's trees from ``path`` (skops, ``TRUSTED_PREFIXES`` only; run as a
    ``trees.TreeEnsemble``, see ``_load_trees``)."""
    from tealeaves.classifier.shares import ShareModel

    try:
        est = load_trees(path)
    except ModelError:
        raise
    except (OSError, ValueError, KeyError, ImportError, zipfile.BadZipFile) as exc:
        raise ModelError(f"{path}: cannot load the share model ({exc})") from exc
    check_estimator(est, len(columns), path)
    m = ShareModel(tuple(columns))
    m.estimator_, m.classes_ = est, tuple(est.classes_)
    return m
