"""What the commands share besides argument types: exit codes, the one-line error, the package
version and the terminal's way of writing numbers and times."""

from __future__ import annotations

import math
import sys

#: Exit status of a refused input (one line on stderr names it).
EXIT_BAD_INPUT = 2
#: Exit status when no GPU (NVML, CUDA) is there to work with.
EXIT_NO_GPU = 3
#: Exit status of a collection that ran to its end but could not store every sample (a full
#: disk, a store locked or made read-only under it): the summary line says how many were lost.
EXIT_SAMPLES_LOST = 4


def fail(msg: str, code: int = EXIT_BAD_INPUT) -> int:
    """Print ``tealeaves: error: <msg>`` on stderr, on one line (``shown``: a control character
    in a file name it quotes is escaped), and return ``code`` (the exit status)."""
    print(f"tealeaves: error: {shown(msg)}", file=sys.stderr)
    return code


def out_path_problem(option: str, path, make_folder: bool = True) -> str | None:
    """Why ``path`` cannot be written as ``option``'s output file, checked before the work that
    makes it (a folder given for a file, a missing or unwritable folder), or None.  With
    ``make_folder`` the folder may be made later (``write_atomically`` makes it): its nearest
    existing parent must then be writable."""
    import os
    from pathlib import Path

    path = Path(path)
    if path.is_dir():
        return f"{option} {path}: is a folder; give a file name"
    if path.exists() and not path.is_file():
        return f"{option} {path}: not a regular file (a device or pipe); give a file name"
    if path.exists() and not os.access(path, os.W_OK):
        return f"{option} {path}: the file is read-only"
    parent = path.absolute().parent
    if not make_folder and not parent.is_dir():
        return f"{option} {path}: the folder {parent} does not exist"
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{option} {path}: {parent} is not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{option} {path}: the folder {parent} cannot be written"
    return None


def write_atomically(path, write) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it to ``path``:
    the file is whole or absent.  On any failure (a full disk, Ctrl-C) the temporary file is
    removed and the error raised (an existing ``path`` is left as it was).

    Raises:
        OSError: ``path``'s folder cannot be made or written, or the disk is full.
    """
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write(tmp)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def shown(text) -> str:
    """``text`` (a path, or a message naming one) for a one-line message: each control
    character (Unicode category Cc, and the line and paragraph separators U+2028/U+2029)
    escaped as Python's ``repr`` writes it (``\\n``, ``\\t``, ``\\x1b``, ``\\u2028``), the rest
    as it is (a file named ``a\\nb.txt`` is ``a\\nb.txt``, never two lines)."""
    import unicodedata

    text = str(text)
    if text.isprintable():
        return text
    return "".join(repr(ch)[1:-1] if unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch
                   for ch in text)


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


def time_text(t: float, utc: bool = False, ms: bool = True) -> str:
    """UTC epoch seconds for people: ISO 8601 in this machine's local time with its UTC offset
    (``"2026-11-30 15:09:49.000+01:00"``; the ``TZ`` variable picks the zone), or in UTC
    (``"2026-11-30 14:09:49.000+00:00"``) when ``utc``; ``ms`` False drops the milliseconds.
    An unknown time (None, NaN) is ``""``."""
    import datetime as dt

    if t is None or not math.isfinite(t):
        return ""
    d = (dt.datetime.fromtimestamp(t, dt.UTC) if utc
         else dt.datetime.fromtimestamp(t, dt.UTC).astimezone())
    return d.isoformat(sep=" ", timespec="milliseconds" if ms else "seconds")


def add_utc_flag(parser) -> None:
    """Add ``--utc`` (times for people in UTC instead of local time) to ``parser``."""
    parser.add_argument("--utc", action="store_true",
                        help="print times in UTC (default: this machine's local time, with "
                             "its UTC offset)")


def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 line"``, ``"2 lines"``: ``n`` and ``word``, plural (``many``, default ``word + "s"``)
    unless ``n`` is 1."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def json_float(v) -> float:
    """A JSON number back to a float (null: NaN)."""
    return math.nan if v is None else float(v)


def na(x, w: int = 0, nd: int = 3) -> str:
    """A figure for the terminal: ``n/a`` where it is unknown (never ``nan``); ``w`` is the
    field width, ``nd`` the decimals."""
    ok = isinstance(x, float | int) and math.isfinite(x)
    return f"{x:{w}.{nd}f}" if ok else f"{'n/a':>{w}s}"


#: Samples from which ``classify`` and ``report`` say on a terminal that they are labelling (fewer take a
#: second or two on two cores).
WORKING_FROM_ROWS = 100_000


class Working:
    """A one-step bar on stderr (a terminal only) saying what a long step does, with the
    seconds it has taken so far; nothing for fewer than ``WORKING_FROM_ROWS`` samples."""

    def __init__(self, rows: int, what: str) -> None:
        self.bar = None
        if rows >= WORKING_FROM_ROWS:
            from tqdm import tqdm

            self.bar = tqdm(total=1, desc=what, file=sys.stderr, leave=False, disable=None,
                            bar_format="{desc}: {elapsed}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
