"""JSON text that is JSON: NaN and infinities (unknown figures) become ``null``.

Python's ``json`` writes ``NaN``/``Infinity`` by default, which no strict JSON reader takes
(RFC 8259 has no such literals).  Every JSON the project prints or writes goes through
:func:`dumps`.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(x: Any) -> Any:
    """``x`` with every non-finite float (also numpy scalars) replaced by None, recursively
    through dicts, lists and tuples; numpy scalars become Python numbers."""
    if hasattr(x, "item") and not isinstance(x, dict | list | tuple | str | bytes):
        try:
            x = x.item()
        except (TypeError, ValueError):
            return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [finite(v) for v in x]
    return x


def dumps(x: Any, **kwargs) -> str:
    """``json.dumps`` of ``finite(x)`` with ``allow_nan=False`` (``default=str`` unless given).

    Raises:
        ValueError: never for NaN (it became null); TypeError as ``json.dumps``.
    """
    kwargs.setdefault("default", str)
    return json.dumps(finite(x), allow_nan=False, **kwargs)
