"""Which phase labeller runs (the shipped trained model, the rules as fallback) and what a
labeller is (``Labeller``, ``WindowModel``).

Its own module so that every part of ``classifier`` (``segments`` too) can ask for it without
importing the package it belongs to.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from tealeaves.classifier.rules import RulePhaseLabeller

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from tealeaves.classifier.imbalance import ImbalanceDetector

log = logging.getLogger(__name__)


@runtime_checkable
class Labeller(Protocol):
    """What labels windows (``classify_features``): ``predict_proba`` scores each
    ``WindowFeatures`` row (a frame with columns ``rules.PHASE_ORDER``, rows summing to 1).
    The rules (``RulePhaseLabeller``) are a ``Labeller`` only: they take the arg-max and judge
    imbalance with their own ``imbalance(features, phase, groups)`` method."""

    def predict_proba(self, features: pd.DataFrame) -> pd.DataFrame:
        """Per-window scores, columns ``PHASE_ORDER``."""


@runtime_checkable
class WindowModel(Labeller, Protocol):
    """A trained labeller (``model.PhaseModel``, ``model.SharesLabeller``): it works on
    ``window_s``-second windows only, picks the phase path itself (``predict``: Viterbi over
    ``transition`` when ``smooth``), and flags imbalance with its fitted ``imbalance``
    detector.  ``kind``: "hgb", "tcn" or "shares"."""

    window_s: float
    kind: str
    smooth: bool
    transition: np.ndarray
    imbalance: ImbalanceDetector

    def predict(self, features: pd.DataFrame, proba: pd.DataFrame | None = None) -> pd.Series:
        """Phase per window (named ``phase``), from ``proba`` when given."""


#: A model folder chosen in place of the shipped one (``use_model``; ``tealeaves calibrate``
#: writes one), or None.
_MODEL_DIR: list = [None]


def model_dir():
    """The folder ``default_labeller`` loads: ``use_model``'s, else the shipped one."""
    from tealeaves.classifier.model import MODEL_DIR

    return _MODEL_DIR[0] or MODEL_DIR


def use_model(directory) -> None:
    """Make ``default_labeller`` load the model in ``directory`` (None: the shipped one)."""
    _MODEL_DIR[0] = directory
    default_labeller.cache_clear()


@functools.cache
def default_labeller():
    """The shipped trained model (``classifier/model/phase_model.*``), or the folder
    ``use_model`` named, loaded once; the v0 rules when it cannot be loaded (the reason is
    logged once)."""
    from tealeaves.classifier.model import ModelError, PhaseModel

    try:
        return PhaseModel.load(model_dir())
    except ModelError as exc:
        log.warning("phase model unavailable, using the rules: %s", exc)
        return RulePhaseLabeller()


def labeller_name(labeller) -> str:
    """``"trained"`` for a ``PhaseModel`` (or its share model), ``"taught"`` for one an engine
    taught (``tealeaves calibrate``), ``"rules"`` for the rules."""
    if not isinstance(labeller, WindowModel):
        return "rules"
    model = getattr(labeller, "model", labeller)
    return "taught" if getattr(model, "phase_from", "trees") == "shares" else "trained"
