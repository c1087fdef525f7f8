"""Argument types shared by the commands' parsers.

Each is an ``argparse`` ``type=``: it turns the text into a number and raises
``argparse.ArgumentTypeError`` (argparse prints ``tealeaves CMD: error: argument --X: <message>``
and exits 2) when it is not one, or out of range.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

#: Seconds in a day (bounds of lengths and durations).
DAY = 86_400.0


def positive_int(text: str) -> int:
    """argparse type: a whole number > 0."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return v


def upto(hi: float, what: str):
    """argparse type: a finite number above 0 and at most ``hi``; ``what`` names it in the
    message (``"the sweep rate (Hz)"``)."""

    def parse(text: str) -> float:
        v = positive(text)
        if v > hi:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be at most {hi:.10g}")
        return v

    return parse


def count(hi: int, what: str, lo: int = 1):
    """argparse type: a whole number from ``lo`` to ``hi``."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be from {lo} to {hi}")
        return v

    return parse


def positive(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number above 0")
    return v


def bounded(lo: float, hi: float, what: str):
    """argparse type: a finite number in ``[lo, hi]`` (checked at parse time)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (math.isfinite(v) and lo <= v <= hi):
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be a finite number from "
                                             f"{lo:.10g} to {hi:.10g}")
        return v

    return parse


#: A classifier window: 0.05 s to 60 s.
classifier_window = bounded(0.05, 60.0, "the window (s)")
#: UTC epoch seconds from 2000-01-01 to 2100-01-01.
epoch_time = bounded(946_684_800.0, 4_102_444_800.0, "a UTC epoch time (2000-2100)")


def port_number(text: str) -> int:
    """argparse type: a TCP port, 0-65535 (0 picks a free one)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"{v} is outside 0-65535")
    return v


def gpu_indices(text: str) -> list[int]:
    """argparse type: comma-separated GPU indices ("0,1,3")."""
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of GPU indices") from None
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of GPU indices")
    return out



def zone_error(tz: str | None) -> str | None:
    """Why ``tz`` (a ``--tz`` value) is not a time zone, or None when it is one (or absent):
    an IANA name or an offset like ``+02:00`` (``data.server_log.resolve_tz``)."""
    from tealeaves.data.server_log import ServerLogError, resolve_tz

    if tz is None:
        return None
    try:
        resolve_tz(tz)
    except ServerLogError as exc:
        return str(exc)
    return None


def add_file_reading(p: argparse.ArgumentParser, what: str = "the trace",
                     start_note: str = "") -> None:
    """Add how a telemetry file is read, as ``tealeaves import`` takes it: ``--columns`` (the
    --query-gpu names of a header-less CSV) and ``--start-time`` (where a file without
    timestamps starts).  The zone of its wall-clock times is the command's ``--tz``."""
    p.add_argument("--columns", help=f"query names of {what} when it is a header-less "
                                     f"--query-gpu CSV, comma-separated")
    p.add_argument("--start-time", type=epoch_time,
                   help=f"UTC epoch s of {what}'s first instant when it has no timestamps "
                        f"(dcgm-exporter text, dcgmi dmon, a dmon without a time column), "
                        f"and the date of a dmon -o T file (default: its modification time "
                        f"is the last instant){start_note}")


def file_reading(args: argparse.Namespace) -> dict:
    """The ``data.importers.load_trace`` keywords of ``add_file_reading``'s flags (and
    ``--tz``, the zone of the file's wall-clock times)."""
    cols = getattr(args, "columns", None)
    return {"columns": [c.strip() for c in cols.split(",") if c.strip()] if cols else None,
            "start_time": getattr(args, "start_time", None), "tz": getattr(args, "tz", None)}



def add_groups(parser, what: str = "the verdict") -> None:
    """Add ``--groups`` (the serving groups imbalance is judged in, as text) to ``parser``;
    the handler parses it (``classifier.groups.parse_groups``) before reading the data, so a
    bad value is one line (``tealeaves: error: --groups: ...``) like a GPU the data lacks."""
    parser.add_argument(
        "--groups", metavar="GROUPS",
        help=f"the serving groups {what} is judged in: GPUs that serve one model together, "
             "e.g. 0-3,4-7 (commas between groups; 0+2+4+6 joins parts of one group); every "
             "GPU in one group. Default: roles detected from the data (a prefill-only GPU "
             "beside a decode-only one is two roles, not imbalance), else one group")


def add_model(parser) -> None:
    """Add ``--model DIR`` (a model folder ``tealeaves calibrate`` wrote, used in place of the
    shipped one) to ``parser``; ``main`` loads it before the command runs."""
    parser.add_argument("--model", type=Path, metavar="DIR",
                        help="a model folder written by `tealeaves calibrate` (default: the "
                             "shipped model)")


def use_model_folder(directory) -> str | None:
    """Load the model in ``directory`` for this run (``classifier.labellers.use_model``);
    the one-line reason when it cannot be loaded, else None."""
    from tealeaves.classifier.labellers import use_model
    from tealeaves.classifier.model import ModelError, PhaseModel

    try:
        PhaseModel.load(directory)
    except ModelError as exc:
        return f"--model: {exc}"
    use_model(directory)
    return None
