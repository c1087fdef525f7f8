"""The phase and share models' gradient-boosted trees run in numpy, so labelling a trace
needs neither scikit-learn nor skops at run time (importing both and unpacking a skops
archive took 4-10 s of every ``classify``, ``report`` and dashboard start on a busy two-core
machine; issue 35).

``TreeEnsemble.from_estimator`` copies a fitted ``HistGradientBoostingClassifier``'s trees
(``_predictors``: one ``TreePredictor`` per iteration and class, numeric splits only) into
flat arrays; ``predict_proba`` walks them as scikit-learn's ``_predictor.pyx`` does (a NaN
goes where ``missing_go_to_left`` says, else ``x <= num_threshold`` goes left), adds the
leaves' values to ``_baseline_prediction`` and applies the loss's link (softmax for several
classes, the logistic for two).  The arrays are kept beside the skops archive (or in the
user's cache) keyed by the archive's SHA-256 (``cached`` / ``store``): a changed archive is
never answered with stale trees, and the ``.npz`` is read with ``allow_pickle=False``.
"""

from __future__ import annotations

import contextlib
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

#: Layout version of the arrays file (bumped when the arrays change meaning).
VERSION = 1
#: Rows walked at once: (trees x rows) node indices per step stay a few MB.
_CHUNK_CELLS = 250_000


class TreeEnsemble:
    """A fitted gradient-boosting classifier's trees as arrays (see the module docstring).

    Attributes:
        classes_: the class labels ((k,) str), in the estimator's order.
        n_features_in_: columns ``predict_proba`` expects.
        source: the skops archive the trees came from (None when built in memory).
        source_sha256: that archive's SHA-256 when the trees were read (hex).
    """

    _FIELDS = ("baseline", "feature", "threshold", "missing_left", "left", "right", "value",
               "roots", "tree_class", "tree_depth")

    def __init__(self, classes, n_features: int, baseline, feature, threshold, missing_left,
                 left, right, value, roots, tree_class, tree_depth,
                 source: Path | None = None, source_sha256: str | None = None) -> None:
        self.classes_ = np.asarray(classes).astype(str)
        self.n_features_in_ = int(n_features)
        self.baseline = np.asarray(baseline, dtype=float).ravel()
        self.feature = np.asarray(feature, dtype=np.int64)
        self.threshold = np.asarray(threshold, dtype=float)
        self.missing_left = np.asarray(missing_left, dtype=bool)
        self.left = np.asarray(left, dtype=np.int64)
        self.right = np.asarray(right, dtype=np.int64)
        self.value = np.asarray(value, dtype=float)
        self.roots = np.asarray(roots, dtype=np.int64)
        self.tree_class = np.asarray(tree_class, dtype=np.int64)
        self.tree_depth = np.asarray(tree_depth, dtype=np.int64)
        self.source, self.source_sha256 = source, source_sha256
        n = len(self.feature)
        k = len(self.baseline)
        if not (len(self.threshold) == len(self.missing_left) == len(self.left)
                == len(self.right) == len(self.value) == n) or not (
                len(self.roots) == len(self.tree_class) == len(self.tree_depth)) \
                or k not in (1, len(self.classes_)):
            raise ValueError("tree arrays of unequal lengths")
        if n and (self.left.min() < 0 or self.left.max() >= n or self.right.min() < 0
                  or self.right.max() >= n or self.feature.min() < 0
                  or self.feature.max() >= self.n_features_in_):
            raise ValueError("tree arrays point outside the trees or the features")
        if len(self.roots) and (self.roots.min() < 0 or self.roots.max() >= n
                                or self.tree_class.min() < 0 or self.tree_class.max() >= k):
            raise ValueError("tree roots point outside the trees or the classes")

    @classmethod
    def from_estimator(cls, est, source: Path | None = None,
                       source_sha256: str | None = None) -> TreeEnsemble:
        """The trees of a fitted ``HistGradientBoostingClassifier``.

        Raises:
            ValueError: a categorical split, or a loss other than log loss (not walked here).
        """
        loss = type(est._loss).__name__
        if loss not in ("HalfMultinomialLoss", "HalfBinomialLoss"):
            raise ValueError(f"loss {loss} is not log loss")
        parts, roots, tree_class, depths, offset = [], [], [], [], 0
        for iteration in est._predictors:
            for c, pred in enumerate(iteration):
                nodes = pred.nodes
                if nodes["is_categorical"].any():
                    raise ValueError("categorical splits are not walked in numpy")
                leaf = nodes["is_leaf"].astype(bool)
                idx = np.arange(len(nodes))
                # a leaf points at itself: walking past it stays put
                left = np.where(leaf, idx, nodes["left"].astype(np.int64)) + offset
                right = np.where(leaf, idx, nodes["right"].astype(np.int64)) + offset
                feature = np.where(leaf, 0, nodes["feature_idx"])
                parts.append((feature, nodes["num_threshold"], nodes["missing_go_to_left"],
                              left, right, nodes["value"]))
                roots.append(offset)
                tree_class.append(c)
                depths.append(int(nodes["depth"].max()))
                offset += len(nodes)
        cols = list(zip(*parts, strict=True)) if parts else [[np.empty(0)]] * 6
        feature, threshold, missing_left, left, right, value = (np.concatenate(c) for c in cols)
        return cls(est.classes_, est.n_features_in_, est._baseline_prediction, feature,
                   threshold, missing_left, left, right, value, roots, tree_class, depths,
                   source=source, source_sha256=source_sha256)

    def arrays(self) -> dict[str, np.ndarray]:
        """The trees as named arrays (``np.savez``; ``from_arrays`` reads them back)."""
        out = {f: np.asarray(getattr(self, f)) for f in self._FIELDS}
        out["classes"] = self.classes_
        out["n_features"] = np.asarray(self.n_features_in_)
        out["version"] = np.asarray(VERSION)
        return out

    @classmethod
    def from_arrays(cls, arrays, source: Path | None = None,
                    source_sha256: str | None = None) -> TreeEnsemble:
        """The inverse of ``arrays`` (a mapping, e.g. an open ``np.load`` file).

        Raises:
            ValueError: another layout version, or arrays that do not make trees.
            KeyError: an array is missing.
        """
        if int(arrays["version"]) != VERSION:
            raise ValueError(f"tree arrays of layout {int(arrays['version'])}, not {VERSION}")
        kw = {f: arrays[f] for f in cls._FIELDS}
        return cls(arrays["classes"], int(arrays["n_features"]), source=source,
                   source_sha256=source_sha256, **kw)

    def _walk_layout(self) -> tuple[np.ndarray, ...]:
        """The trees re-laid for ``raw`` (built once, kept): every split node's two children
        are adjacent (``first``, ``first + 1``) and its test is one comparison that is False
        for NaN, ``x' <= t`` on ``x' = x`` (NaN goes right: ``first`` is the left child) or
        on ``x' = -x`` with ``t = -nextafter(threshold, +inf)`` (``-x <= t`` is ``x >
        threshold``; NaN goes left: ``first`` is the right child).  A leaf tests against NaN
        (always False) and has ``first`` one before itself, so it stays put.

        Returns:
            (col, thr, first, leaf_value, roots) over the new node order: ``col`` indexes the
            columns of ``[X, -X]``; ``roots`` in the original tree order.
        """
        got = getattr(self, "_layout", None)
        if got is not None:
            return got
        n_old = len(self.feature)
        leaf = (self.left == np.arange(n_old)) & (self.right == np.arange(n_old))
        new_id = np.full(n_old, -1, dtype=np.int64)
        order: list[int] = []
        roots = np.empty(len(self.roots), dtype=np.int64)
        # a root takes one slot, each split node's children the next two slots
        for t, r in enumerate(self.roots):
            roots[t] = len(order)
            new_id[r] = len(order)
            order.append(int(r))
            queue = [int(r)]
            while queue:
                nxt = []
                for o in queue:
                    if leaf[o]:
                        continue
                    a, b = ((self.right[o], self.left[o]) if self.missing_left[o]
                            else (self.left[o], self.right[o]))
                    for c in (int(a), int(b)):
                        new_id[c] = len(order)
                        order.append(c)
                        nxt.append(c)
                queue = nxt
        old = np.asarray(order, dtype=np.int64)
        if len(old) != n_old or (new_id < 0).any():
            raise ValueError("tree nodes not reachable from exactly one root")
        is_leaf, flip = leaf[old], self.missing_left[old] & ~leaf[old]
        col = np.where(flip, self.feature[old] + self.n_features_in_, self.feature[old])
        col = np.where(is_leaf, 0, col)
        with np.errstate(invalid="ignore"):
            thr = np.where(flip, -np.nextafter(self.threshold[old], np.inf),
                           self.threshold[old])
        # x > +inf never holds: NaN makes the test always False (left, as NaN goes)
        thr = np.where(is_leaf | (flip & (self.threshold[old] == np.inf)), np.nan, thr)
        first_old = np.where(self.missing_left[old], self.right[old], self.left[old])
        first = np.where(is_leaf, np.arange(len(old)) - 1, new_id[first_old])
        self._layout = (col.astype(np.int64), thr.astype(float), first.astype(np.int64),
                        self.value[old].astype(float), roots)
        return self._layout

    def raw(self, X: np.ndarray) -> np.ndarray:
        """The ensemble's raw scores ((n, k) float; k = 1 for two classes) of ``X`` ((n,
        n_features_in_) float, NaN for a missing reading).

        The walk is level by level over all trees and rows at once (numpy gathers), on the
        layout of ``_walk_layout``: per level one gather of the column offset, threshold and
        first child, one of the value and one comparison.
        """
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has shape {X.shape}, expected (n, {self.n_features_in_})")
        k = len(self.baseline)
        out = np.tile(self.baseline, (len(X), 1))
        if not len(self.roots) or not len(X):
            return out
        col, thr, first, value, roots = self._walk_layout()
        step = max(1, _CHUNK_CELLS // len(self.roots))
        order = np.argsort(-self.tree_depth, kind="stable")  # deepest first
        depth = self.tree_depth[order]
        # trees still walking at each level: a prefix of ``order``
        active = [int(np.searchsorted(-depth, -d, side="right")) for d in range(1, depth[0] + 1)]
        onehot = np.zeros((len(order), k))
        onehot[np.arange(len(order)), self.tree_class[order]] = 1.0
        start = roots[order]
        for lo in range(0, len(X), step):
            part = X[lo:lo + step]
            m = len(part)
            # column c of [part, -part] of row r at c * m + r
            flat = np.concatenate([part.T.ravel(), -part.T.ravel()])
            offset = col * m  # per node: where its column starts in ``flat``
            rows = np.arange(m)[None, :]
            node = np.repeat(start[:, None], m, axis=1)
            for n in active:
                cur = node[:n]
                x = flat[offset[cur] + rows]
                node[:n] = first[cur] + ~(x <= thr[cur])
            out[lo:lo + step] += value[node].T @ onehot
        return out

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Class probabilities ((n, len(classes_)), rows sum to 1) of ``X`` (see ``raw``):
        softmax of the raw scores, or the logistic of the one score for two classes."""
        r = self.raw(X)
        if r.shape[1] == 1:
            p = 1.0 / (1.0 + np.exp(-r[:, 0]))
            return np.column_stack([1.0 - p, p])
        e = np.exp(r - r.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)


def beside(archive: Path) -> Path:
    """Where the trees of the skops ``archive`` are kept next to it: ``x.skops`` ->
    ``x.trees.npz``."""
    return archive.with_name(archive.name.removesuffix(".skops") + ".trees.npz")


def cache_dir() -> Path:
    """The user's cache of converted trees: ``$XDG_CACHE_HOME/tealeaves/trees`` (default
    ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tealeaves" / "trees"


def cached(archive: Path, sha256: str) -> TreeEnsemble | None:
    """The trees of ``archive`` (whose bytes hash to ``sha256``) from beside it or the user's
    cache, or None when neither holds trees of these very bytes (or a file is unreadable)."""
    for path in (beside(archive), cache_dir() / f"{sha256}.npz"):
        try:
            with np.load(path, allow_pickle=False) as a:
                if str(a["sha256"]) != sha256:
                    continue
                return TreeEnsemble.from_arrays(a, source=archive, source_sha256=sha256)
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, zlib.error):
            continue  # a damaged or foreign file: the next place, else the archive itself
    return None


def store(trees: TreeEnsemble, archive: Path, sha256: str, where: Path | None = None) -> None:
    """Keep ``trees`` (of ``archive``'s bytes, ``sha256``) at ``where`` (default: the user's
    cache), written beside and moved in whole; a cache that cannot be written is skipped (the
    next run converts again)."""
    path = where if where is not None else cache_dir() / f"{sha256}.npz"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            np.savez(f, sha256=np.asarray(sha256), **trees.arrays())
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):  # (its folder may be what could not be made)
            tmp.unlink(missing_ok=True)
