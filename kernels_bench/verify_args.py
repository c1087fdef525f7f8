"""Argument parsers of ``tealeaves bench verify-attention`` (argparse ``type=`` functions),
importable without torch so the CLI refuses bad arguments before it needs a GPU."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

#: The split kernels (``verify_ref.KERNELS`` is this tuple).
KERNEL_NAMES = ("gluon", "gluon64", "seesaw", "triton")
#: Largest cache length (context + tree nodes) of one sequence (``verify_ref.MAX_ROWS``):
#: positions are int32 on the GPU, and the kernels' split arithmetic (``cdiv(N, NSPLIT)``
#: rounded up to 64-row tiles, times NSPLIT up to 65,535) may pass ``N`` by 64 x 65,535 +
#: 65,535 rows, so 2**23 rows are kept free below 2**31.
MAX_ROWS = 2**31 - 2**23


def parse_kernels(text: str) -> list[str]:
    """``"gluon,triton"`` -> ``["gluon", "triton"]``; unknown or repeated names are refused."""
    names = [k.strip() for k in text.split(",")]
    bad = [k for k in names if k not in KERNEL_NAMES]
    if bad or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"expected kernels from {', '.join(KERNEL_NAMES)}, comma-separated, each once; "
            f"got {text!r}")
    return names


def parse_contexts(text: str) -> set[int]:
    """``"65536,200000"`` -> ``{65536, 200000}`` (cached tokens, each at least 1)."""
    try:
        values = {int(c) for c in text.split(",")}
    except ValueError:
        values = set()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected token counts, comma-separated, got {text!r}")
    return values


def parse_point(text: str) -> tuple[int, int, int, int, int]:
    """``"batch,context,tree,heads,page"`` -> five ints: each at least 1, the page size a power
    of two up to 64 (``verify_ref.make_inputs``'s rules)."""
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 5 or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"expected batch,context,tree,heads,page (five whole numbers from 1), got {text!r}")
    if values[1] + values[2] > MAX_ROWS:
        raise argparse.ArgumentTypeError(
            f"context + tree must be at most 2**31 - 2**23 = {MAX_ROWS} (int32 cache positions "
            f"with room for the split arithmetic), got {text!r}")
    page = values[4]
    if page > 64 or page & (page - 1):
        raise argparse.ArgumentTypeError(f"page size must be a power of two up to 64, got {page}")
    return values  # type: ignore[return-value]


def parse_seconds(text: str) -> float:
    """A finite number of seconds above 0."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds above 0, "
                                         f"got {text!r}")
    return v


def combination_error(args: argparse.Namespace) -> str | None:
    """The one-line reason a combination of parsed options is refused, or ``None``: checked
    before torch is imported, so a machine without it names the real mistake."""
    if args.point and not args.sustain:
        return "--point goes with --sustain"
    if args.quick and args.validate:
        return "--quick and --validate choose different shapes: give one"
    if args.trees and args.quick:
        return "--trees and --quick choose different shapes: give one"
    return None


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``tealeaves bench verify-attention`` (one declaration for the
    ``tealeaves`` CLI and ``python -m tealeaves.kernels_bench.verify_bench``)."""
    ap.add_argument("--out", type=Path, default=Path("verify-attention"),
                    help="folder for verify_attention.csv/png/json (default verify-attention)")
    ap.add_argument("--quick", action="store_true", help="five points instead of the sweep")
    ap.add_argument("--validate", action="store_true",
                    help="shapes outside the sweep, to check the NSPLIT chooser (written as "
                         "verify_attention_validate.csv/.json, or "
                         "verify_attention_trees_validate.csv/.json with --trees; no plot)")
    ap.add_argument("--trees", action="store_true",
                    help="the large-tree sweep instead (batch 1/4, trees of 16-256 nodes, "
                         "gluon64 at NSPLITs within 4x of its chooser's pick and gluon at its "
                         "pick, no unsplit baseline; written as verify_attention_trees.*; with "
                         "--validate, shapes outside it, every NSPLIT); not with --quick")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unsplit baseline")
    ap.add_argument("--kernels", type=parse_kernels,
                    help="split kernels, comma-separated, the first swept over NSPLIT "
                         "(default: gluon,triton on Hopper, gluon64,gluon with --trees, else "
                         "triton; seesaw, FlashMLA's schedule, only when named); with "
                         "--sustain the kernel run (default: the chooser's)")
    ap.add_argument("--contexts", type=parse_contexts,
                    help="only the sweep points of these contexts (comma-separated tokens, "
                         "e.g. 65536,200000)")
    ap.add_argument("--sustain", type=parse_seconds,
                    help="instead run one decode-sized verify for this many seconds between "
                         "idle stretches (a workload for `tealeaves collect`)")
    ap.add_argument("--point", type=parse_point,
                    help="the shape --sustain runs: batch,context,tree,heads,page "
                         "(default 8,65536,4,8,1)")


__all__ = ["KERNEL_NAMES", "MAX_ROWS", "add_arguments", "combination_error", "parse_contexts",
           "parse_kernels", "parse_point", "parse_seconds"]
