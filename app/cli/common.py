"""What the commands share besides argument types: exit codes, the one-line error, the package
version and the terminal's way of writing numbers and times."""

from __future__ import annotations

import math
import sys

#: Exit status of a refused input (one line on stderr names it).
EXIT_BAD_INPUT = 2
#: Exit status when no GPU (NVML, CUDA) is there to work with.
EXIT_NO_GPU = 3


def fail(msg: str, code: int = EXIT_BAD_INPUT) -> int:
    """Print ``tealeaves: error: <msg>`` on stderr and return ``code`` (the exit status)."""
    print(f"tealeaves: error: {msg}", file=sys.stderr)
    return code


def package_version() -> str:
    """The installed package's version ("0+unknown" when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tealeaves")
    except PackageNotFoundError:
        return "0+unknown"


def utc_text(t: float) -> str:
    """UTC epoch seconds as ``"YYYY-MM-DD HH:MM:SS.mmm UTC"``."""
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def json_float(v) -> float:
    """A JSON number back to a float (null: NaN)."""
    return math.nan if v is None else float(v)


def na(x, w: int = 0, nd: int = 3) -> str:
    """A figure for the terminal: ``n/a`` where it is unknown (never ``nan``); ``w`` is the
    field width, ``nd`` the decimals."""
    ok = isinstance(x, float | int) and math.isfinite(x)
    return f"{x:{w}.{nd}f}" if ok else f"{'n/a':>{w}s}"
