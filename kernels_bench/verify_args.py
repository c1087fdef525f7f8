"""Argument parsers of ``tealeaves bench verify-attention`` (argparse ``type=`` functions),
importable without torch so the CLI refuses bad arguments before it needs a GPU."""

from __future__ import annotations

import argparse

#: The split kernels (``verify_ref.KERNELS`` is this tuple).
KERNEL_NAMES = ("gluon", "triton")


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
    page = values[4]
    if page > 64 or page & (page - 1):
        raise argparse.ArgumentTypeError(f"page size must be a power of two up to 64, got {page}")
    return values  # type: ignore[return-value]


__all__ = ["KERNEL_NAMES", "parse_contexts", "parse_kernels", "parse_point"]
