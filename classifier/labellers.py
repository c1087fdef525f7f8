"""Which phase labeller runs: the shipped trained model, the rules as fallback.

Its own module so that every part of ``classifier`` (``segments`` too) can ask for it without
importing the package it belongs to.
"""

from __future__ import annotations

import functools
import logging

from .rules import RulePhaseLabeller

log = logging.getLogger(__name__)


@functools.cache
def default_labeller():
    """The shipped trained model (``classifier/model/phase_model.*``), loaded once; the v0
    rules when it cannot be loaded (the reason is logged once)."""
    from .model import ModelError, PhaseModel

    try:
        return PhaseModel.load()
    except ModelError as exc:
        log.warning("phase model unavailable, using the rules: %s", exc)
        return RulePhaseLabeller()


def labeller_name(labeller) -> str:
    """``"trained"`` for a ``PhaseModel``, ``"rules"`` for the rules."""
    return "rules" if isinstance(labeller, RulePhaseLabeller) else "trained"
