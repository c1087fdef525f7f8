"""Read SGLang's expert-distribution dump: per-pass token counts per MoE layer and expert.

SGLang, started with ``--expert-distribution-recorder-mode stat`` and driven through
``/start_expert_distribution_record`` then ``/dump_expert_distribution_record``, writes a
``torch.save`` file holding a dict (``rank``, ``logical_count``,
``average_utilization_rate_over_window``).  ``logical_count`` is an integer tensor of shape
``[passes, layers, experts]`` (Kimi K2.6: ``[*, 61, 384]``): how many tokens each forward pass
routed to each logical expert of each MoE layer (a token counts once per expert of its top-k).
Layers without routed experts (Kimi's first, dense layer) stay all-zero.

Public surface:
    ``load_expert_dump(path)`` -> float64 ``[passes, layers, experts]``
    ``check_logical_count(array, source)`` -> the same, from any array-like (no torch needed)
    ``ExpertDumpError`` (a ``ValueError``): every refusal names the file and the problem.

The maths on these counts lives in ``classifier.experts``.
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import numpy as np

__all__ = ["ExpertDumpError", "check_logical_count", "load_expert_dump"]

#: The axes ``logical_count`` must have, in order.
AXES = ("passes", "layers", "experts")
_EXPECTED = "[" + ", ".join(AXES) + "]"


class ExpertDumpError(ValueError):
    """An expert dump (or a ``logical_count`` array) that cannot be used, and why."""


def _shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ")"


def check_logical_count(array, source: str) -> np.ndarray:
    """Validate a ``logical_count`` array and return it as float64 ``[passes, layers, experts]``.

    Args:
        array: any array-like (NumPy array, nested list, CPU tensor) of token counts, shape
            ``[passes, layers, experts]``; units: tokens routed (one per token per top-k expert).
        source: what the array came from (a file name, ``"logical_count"``...), put at the
            start of every error message.

    Returns:
        A new float64 NumPy array of the same shape.  Counts are not required to be integers
        (an averaged dump is accepted), but must be finite and non-negative.

    Raises:
        ExpertDumpError: not numeric or ragged; not 3-D (a 2-D ``[layers, experts]`` array,
            as written by other recorder modes, is refused: the passes axis is required);
            zero passes, layers or experts; a NaN/inf or negative count; all counts zero.
    """
    try:
        arr = np.array(array, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ExpertDumpError(
            f"{source}: logical_count is not a numeric array of shape {_EXPECTED} ({exc})"
        ) from exc
    if arr.ndim != 3:
        hint = ""
        if arr.ndim == 2:
            hint = (" (a 2-D [layers, experts] array has no passes axis: record with"
                    " --expert-distribution-recorder-mode stat)")
        raise ExpertDumpError(
            f"{source}: logical_count: expected {_EXPECTED}, got shape {_shape_text(arr.shape)}"
            f"{hint}"
        )
    for axis, name in enumerate(AXES):
        if arr.shape[axis] == 0:
            raise ExpertDumpError(
                f"{source}: logical_count has zero {name}: shape {_shape_text(arr.shape)},"
                f" expected {_EXPECTED} with every axis at least 1"
            )
    bad = ~np.isfinite(arr)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ExpertDumpError(
            f"{source}: logical_count holds {int(bad.sum())} non-finite count(s) (NaN or inf),"
            f" first at [pass, layer, expert] = {list(where)}"
        )
    neg = arr < 0
    if neg.any():
        where = tuple(int(i) for i in np.argwhere(neg)[0])
        raise ExpertDumpError(
            f"{source}: logical_count holds {int(neg.sum())} negative count(s), first"
            f" {arr[where]:g} at [pass, layer, expert] = {list(where)}"
        )
    if not arr.any():
        raise ExpertDumpError(
            f"{source}: logical_count of shape {_shape_text(arr.shape)} is all zero: no token"
            " was recorded (was /start_expert_distribution_record called before the traffic?)"
        )
    return arr


#: What ``torch.load`` raises on a file that is not a readable torch file: a bad zip
#: (``RuntimeError``), a non-pickle byte stream (``UnpicklingError``, also raised when
#: ``weights_only=True`` refuses a global), truncation (``EOFError``) and the like.
_LOAD_ERRORS = (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, TypeError,
                AttributeError, ImportError, KeyError, IndexError, UnicodeDecodeError,
                zipfile.BadZipFile, OSError)


def _to_numpy(value, torch):
    """A tensor to a float64 NumPy array (any dtype, any device); other values unchanged."""
    if isinstance(value, torch.Tensor):
        return value.detach().to(device="cpu", dtype=torch.float64).numpy()
    return value


#: Largest dump read, bytes (counts only: [passes, layers, experts] integers).
MAX_DUMP_BYTES = 1 << 30


def load_expert_dump(path) -> np.ndarray:
    """Read an SGLang expert-distribution dump and return its ``logical_count``.

    Args:
        path: the ``.pt`` file written by ``/dump_expert_distribution_record``.  Its content is
            a dict with key ``logical_count`` (a tensor or nested list), or a bare tensor.

    Returns:
        float64 NumPy array ``[passes, layers, experts]`` of token counts (see
        ``check_logical_count``).

    Raises:
        ExpertDumpError: torch is not installed; the file is missing or not a readable torch
            file (including objects ``torch.load(weights_only=True)`` refuses); the dict has no
            ``logical_count`` (the keys found are listed); or ``check_logical_count`` refuses
            the array.  Every message starts with the file's path.
    """
    path = Path(path)
    try:
        import torch
    except ImportError as exc:
        raise ExpertDumpError(
            f"{path}: reading an SGLang expert dump needs torch: pip install -e '.[bench]'"
        ) from exc
    if not path.is_file():
        raise ExpertDumpError(f"{path}: no such file")
    size = path.stat().st_size
    if size > MAX_DUMP_BYTES:
        raise ExpertDumpError(f"{path}: {size / 2**20:,.0f} MB is over the "
                              f"{MAX_DUMP_BYTES >> 20:,} MB a dump of counts needs (Kimi's "
                              f"[1000, 61, 384] int64 is 187 MB)")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except _LOAD_ERRORS as exc:
        # torch's own message may advise weights_only=False, which would run code from the
        # file: not passed on
        raise ExpertDumpError(
            f"{path}: not a torch.save file of tensors (what /dump_expert_distribution_record "
            f"writes); torch.load(weights_only=True) refused it ({type(exc).__name__})"
        ) from exc
    if isinstance(obj, dict):
        if "logical_count" not in obj:
            keys = ", ".join(repr(k) for k in obj) or "none"
            raise ExpertDumpError(
                f"{path}: no 'logical_count' key in the dump (keys found: {keys}); expected"
                " the dict written by SGLang's /dump_expert_distribution_record"
            )
        value = obj["logical_count"]
    elif isinstance(obj, torch.Tensor):
        value = obj
    else:
        raise ExpertDumpError(
            f"{path}: expected a dict with 'logical_count' or a tensor, got"
            f" {type(obj).__name__}"
        )
    try:
        value = _to_numpy(value, torch)
    except (RuntimeError, TypeError) as exc:
        raise ExpertDumpError(f"{path}: logical_count cannot be read as numbers ({exc})") from exc
    return check_logical_count(value, str(path))
