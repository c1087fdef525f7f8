"""Where the published real inputs are: ``shared/cases/public`` next to the checkout.

CI clones the repository with a copy of ``shared/`` beside it; a developer's checkout has it
beside too (``../shared``).  Tests that need a case file skip, saying why, when it is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def _cases_dir() -> Path | None:
    here = Path(__file__).resolve()
    for base in (here.parents[2], here.parents[1]):
        d = base / "shared" / "cases" / "public"
        if d.is_dir():
            return d
    return None


#: The folder of case files, or None when it is not next to this checkout.
CASES: Path | None = _cases_dir()


def case_path(name: str) -> Path:
    """Path of one case file; skips the calling test when the folder is absent."""
    if CASES is None:
        pytest.skip("shared/cases/public not found next to the repository checkout")
    return CASES / name
