"""The one sample frame every collector and importer yields, and everything downstream reads.

A *sample* is one reading of one GPU (or one MIG GPU instance: ``mig_entity``) at one
instant: one row of a pandas DataFrame in long form (``timestamp``, ``gpu``) with the columns
below.  Metric names follow NVIDIA's DCGM
profiling fields in snake_case (``DCGM_FI_PROF_SM_ACTIVE`` -> ``sm_active``), with units in
the name where they are not obvious (``pcie_tx_bytes_per_s``, ``power_w``; see
``docs/measurement.md``, "Terms").  The metric columns,
their units and every source's names for them are the rows of ``data.metrics.METRICS`` (the one
metric table; ``Metric`` and ``METRICS`` are re-exported here).

Missing data is ``NaN``, never 0: a metric the GPU does not support, a counter that has no
previous reading to difference against, or a GPM value not refreshed in this sweep.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from tealeaves.data.metrics import METRIC_BY_NAME, METRICS, Metric  # noqa: F401 - re-exported

#: Identity and clock columns, in order.  ``timestamp`` is wall clock, UTC epoch seconds;
#: ``monotonic`` is the collecting host's monotonic clock in seconds (for intervals only).
ID_COLUMNS: tuple[str, ...] = ("timestamp", "monotonic", "host", "gpu", "uuid")


#: The largest physical reading per unit: 100 %; 5 kW of board power (GB200's superchip draws
#: about 2.7 kW); 10 GHz; 2 TB/s (NVLink 5 is 1.8 TB/s a GPU, PCIe 6 x16 0.13 TB/s); 10 TB of
#: device memory; 150 °C (a GPU slows down and shuts itself off near 90-100 °C).
UNIT_HIGH: dict[str, float] = {"%": 100.0, "W": 5000.0, "MHz": 10000.0, "B/s": 2e12,
                               "B": 1e13, "°C": 150.0}

#: The one table of field limits: every metric column's valid range ``(low, high)`` in its
#: unit, both ends included.  A value outside it is no reading: importers refuse its row (with
#: the line number), the collector and the Prometheus reader store NaN and count it.
FIELD_LIMITS: dict[str, tuple[float, float]] = {m.name: (0.0, UNIT_HIGH[m.unit]) for m in METRICS}

#: The "no value" codes each source writes where a reading should be, as raw numbers (before
#: any unit conversion).  A raw value equal to one of them is a *blank*: NaN, counted, never a
#: reading.
#:
#: - DCGM (``dcgm_structs.h``): ``DCGM_INT32_BLANK`` 0x7ffffff0 and the next three codes (not
#:   found, not supported, no permission); ``DCGM_INT64_BLANK`` 0x7ffffffffffffff0 + 0..3;
#:   ``DCGM_FP64_BLANK`` 140737488355328.0 (2**47) + 0..3 (``docs/measurement.md``, "Terms").
#: - NVML (``nvml.h``): ``NVML_VALUE_NOT_AVAILABLE`` is -1 in the unsigned type of the call:
#:   0xFFFFFFFF (32-bit) and 0xFFFFFFFFFFFFFFFF (64-bit).
#: - nvidia-smi and dcgmi print text instead (``[N/A]``, ``N/A``, ``-``,
#:   ``[Not Supported]``, ...): the importers read those tokens as blanks.
SENTINELS: dict[str, tuple[float, ...]] = {
    "dcgm_int32": tuple(float(0x7FFFFFF0 + i) for i in range(4)),
    "dcgm_int64": tuple(float(0x7FFFFFFFFFFFFFF0 + i) for i in range(4)),
    "dcgm_fp64": tuple(140737488355328.0 + i for i in range(4)),
    "nvml": (float(0xFFFFFFFF), float(0xFFFFFFFFFFFFFFFF)),
}
_BLANK_CODES = np.array(sorted({c for codes in SENTINELS.values() for c in codes}))
#: Below this no value is near a code (``is_blank``'s tolerance is 1e-12 relative).
_BLANK_FLOOR = float(_BLANK_CODES[0]) * (1 - 1e-12)

#: Unit factors the readers apply to raw values (mW -> W, MiB -> B, MB/s -> B/s, KB/s -> B/s,
#: MiB/s -> B/s): a blank code that went through one is still a blank.  Kept here, not derived
#: from ``data.metrics``: it also holds conversions no table row names (the NVML shim's mW,
#: KB/s), and leaves out the ratio -> % factor 100 (a ratio's blank code lands far outside
#: ``FIELD_LIMITS`` either way).  The table's byte factors (MiB) are in it (a test checks).
RAW_FACTORS: tuple[float, ...] = (1.0, 1e-3, 2.0**20, 1e6, 1e3, 1024.0)

#: GPU indices run from 0 to this - 1.
MAX_GPUS = 4096

#: A MIG GPU instance is an entity of its own under its parent GPU.  Its ``gpu`` value is an
#: *entity number* ``MIG_BASE + (parent + 1) * MIG_SLOTS + instance``: ``parent`` the parent
#: GPU's index (-1 where the source does not say, as ``dcgmi dmon`` of GPU-I entities alone),
#: ``instance`` the source's instance id (dcgm-exporter's ``GPU_I_ID``, ``nvidia-smi dmon``'s
#: ``gi``, or ``dcgmi``'s GPU-I entity id, which DCGM numbers across the host).  Every frame,
#: store, window and lane then keys on ``gpu`` as before, whole GPUs and instances alike;
#: :func:`entity_name` names it and :func:`mig_parent` finds its GPU.  The instance's ``uuid``
#: is ``MIG-<parent UUID>/<GI>[/<CI>]``, NVIDIA's MIG device-identifier form (MIG user guide,
#: "CUDA device enumeration"), with ``GPU`` standing in for an unknown parent UUID.
MIG_BASE = 1 << 20
#: Instance ids per parent GPU in the entity number (DCGM's GPU-I entity ids reach
#: GPUs x 14 on a host; 4096 leaves room).
MIG_SLOTS = 1 << 12


def mig_entity(parent: int | None, instance: int) -> int:
    """The entity number of GPU instance ``instance`` of GPU ``parent`` (None: not known).

    Raises:
        ValueError: ``parent`` outside 0..``MAX_GPUS``-1 or ``instance`` outside
            0..``MIG_SLOTS``-1.
    """
    p = -1 if parent is None else int(parent)
    if not -1 <= p < MAX_GPUS:
        raise ValueError(f"parent GPU {parent!r} out of range")
    if not 0 <= int(instance) < MIG_SLOTS:
        raise ValueError(f"GPU instance id {instance!r} out of range 0-{MIG_SLOTS - 1}")
    return MIG_BASE + (p + 1) * MIG_SLOTS + int(instance)


def is_mig(gpu) -> bool:
    """True when ``gpu`` is a MIG instance's entity number (``mig_entity``), not a GPU index."""
    return int(gpu) >= MIG_BASE


def mig_parent(gpu: int) -> tuple[int | None, int] | None:
    """``(parent GPU index or None, instance id)`` of a MIG entity number; None for a GPU."""
    g = int(gpu)
    if g < MIG_BASE:
        return None
    p, inst = divmod(g - MIG_BASE, MIG_SLOTS)
    return (None if p == 0 else p - 1), inst


def entity_name(gpu) -> str:
    """How the user reads entity ``gpu``: ``"GPU 3"``, ``"GPU 0 · GI 1"`` for a MIG instance,
    ``"GPU ? · GI 21"`` for an instance whose parent the source did not name."""
    parts = mig_parent(gpu)
    if parts is None:
        return f"GPU {int(gpu)}"
    p, inst = parts
    return f"GPU {'?' if p is None else p} · GI {inst}"


def entity_short(gpu) -> str:
    """``entity_name`` after a ``GPU``/``GPUs`` prefix: ``"3"``, ``"0 · GI 1"``,
    ``"? · GI 21"`` (``"GPU " + entity_short(g) == entity_name(g)``)."""
    parts = mig_parent(gpu)
    if parts is None:
        return str(int(gpu))
    p, inst = parts
    return f"{'?' if p is None else p} · GI {inst}"


class GpuEntity(NamedTuple):
    """One entity of the ``gpu`` column, unpacked: a whole GPU (``instance`` None) or a MIG
    instance of GPU ``gpu`` (None where the source did not name the parent).
    ``GpuEntity.from_code(g).code == g``; ``str()`` is ``entity_name``: ``"GPU 3"``,
    ``"GPU 0 · GI 1"``, ``"GPU ? · GI 21"``.

    Attributes:
        gpu: the GPU index, or the MIG instance's parent GPU index (None: not known).
        instance: the MIG GPU-instance id (0..``MIG_SLOTS``-1), None for a whole GPU.
    """

    gpu: int | None
    instance: int | None = None

    @classmethod
    def from_code(cls, code) -> GpuEntity:
        """The entity the ``gpu`` column's number ``code`` stands for (``mig_entity``)."""
        parts = mig_parent(code)
        return cls(int(code)) if parts is None else cls(*parts)

    @property
    def is_mig(self) -> bool:
        """True for a MIG instance."""
        return self.instance is not None

    @property
    def code(self) -> int:
        """The ``gpu`` column's number: the index of a whole GPU, else ``mig_entity``'s.

        Raises:
            ValueError: a MIG instance out of ``mig_entity``'s range.
        """
        return int(self.gpu) if self.instance is None else mig_entity(self.gpu, self.instance)

    def __str__(self) -> str:
        return entity_name(self.code)


def peers(gpus) -> list[int]:
    """The entities compared with one another (imbalance, hot set, across-GPU statistics):
    every GPU and MIG instance of ``gpus`` except a whole GPU whose instances are among them,
    since its reading is theirs together (DCGM's GPU row next to its GPU-I rows): comparing
    it with them would count the same work twice.  With instances of an unnamed GPU among
    them, every whole GPU is left out (any of them may be theirs).  Order kept."""
    gs = [int(g) for g in gpus]
    parents = {mig_parent(g)[0] for g in gs if g >= MIG_BASE}
    if None in parents:  # instances of GPUs the source did not name: any GPU may hold them
        return [g for g in gs if g >= MIG_BASE]
    return [g for g in gs if g >= MIG_BASE or g not in parents]


def entities_text(gpus) -> str:
    """A list of entities in words: ``"GPU 3"``, ``"GPUs 0, 1, 2"``, ``"GPUs 0, 0 · GI 1"``;
    ``"none"`` for none."""
    gs = [int(g) for g in gpus]
    if not gs:
        return "none"
    return f"GPU{'s' if len(gs) > 1 else ''} " + ", ".join(entity_short(g) for g in gs)


def entity_count_text(gpus) -> str:
    """How many entities in words: ``"8 GPUs"``, ``"1 GPU, 3 MIG instances"``."""
    gs = [int(g) for g in gpus]
    n_mig = sum(1 for g in gs if g >= MIG_BASE)
    n = len(gs) - n_mig
    text = f"{n} GPU{'s' if n != 1 else ''}"
    if n_mig:
        text += f", {n_mig} MIG instance{'s' if n_mig != 1 else ''}"
    return text


def valid_entity(gpu: np.ndarray) -> np.ndarray:
    """Bool mask: ``gpu`` (numbers) are whole GPU indices 0..``MAX_GPUS``-1 or MIG entity
    numbers (``mig_entity``)."""
    g = np.asarray(gpu, dtype=np.float64)
    whole = np.isfinite(g) & (g == np.floor(g))
    top = MIG_BASE + (MAX_GPUS + 1) * MIG_SLOTS
    return whole & (((g >= 0) & (g < MAX_GPUS)) | ((g >= MIG_BASE) & (g < top)))
#: The classifier's window length, s (``classifier.windows`` re-exports it): chosen by
#: measurement on the bundled H200 traces (``docs/classifier_v0_rules.md``): 0.5 s holds 4-5
#: GPM readings at 10 Hz and keeps boundary windows few.  Here, at the bottom, so the CLI
#: states it without loading the classifier.
DEFAULT_WINDOW_S = 0.5
#: Timestamps before this (2000-01-01 UTC) are not readings of a GPU that runs an LLM.
EARLIEST_TS = 946_684_800.0
#: How far (s) a timestamp may lie past now, or past the rest of its file, before it is refused.
FUTURE_SLACK_S = 86_400.0


def is_blank(raw) -> np.ndarray | bool:
    """True where ``raw`` (a number or array, before unit conversion) is one of ``SENTINELS``.

    Raises nothing; NaN is not a blank (it is already no reading).  A Python or NumPy scalar
    below the smallest code (every reading an importer parses) is answered without NumPy
    (about 0.1 us, not 20: the importers check every value they read).
    """
    if isinstance(raw, (float, int, np.floating, np.integer)) and not raw >= _BLANK_FLOOR:
        return False
    v = np.asarray(raw, dtype=np.float64)
    pos = np.clip(np.searchsorted(_BLANK_CODES, v), 0, len(_BLANK_CODES) - 1)
    near = np.abs(_BLANK_CODES[pos] - v) <= _BLANK_CODES[pos] * 1e-12
    low = np.clip(pos - 1, 0, len(_BLANK_CODES) - 1)
    near |= np.abs(_BLANK_CODES[low] - v) <= _BLANK_CODES[low] * 1e-12
    return bool(near) if near.ndim == 0 else near


def is_blank_scaled(value) -> np.ndarray | bool:
    """``is_blank`` of a value already converted by one of ``RAW_FACTORS`` (a DCGM blank in
    MiB read back as bytes, say)."""
    v = np.asarray(value, dtype=np.float64)
    out = np.zeros(v.shape, dtype=bool)
    big = v > 1e5  # every code is above 2**31 before scaling; well above this after
    if big.any():
        for f in RAW_FACTORS:
            out |= big & is_blank(v / f)
    return bool(out) if out.ndim == 0 else out


def out_of_range(col: str, values) -> np.ndarray | bool:
    """True where ``values`` of metric ``col`` lie outside ``FIELD_LIMITS[col]`` (NaN: False).

    Raises:
        KeyError: ``col`` is not a metric column.
    """
    low, high = FIELD_LIMITS[col]
    if isinstance(values, (float, int, np.floating, np.integer)):  # one value: no NumPy
        return bool(values < low or values > high * (1 + 1e-9))
    v = np.asarray(values, dtype=np.float64)
    bad = (v < low) | (v > high * (1 + 1e-9))
    return bool(bad) if bad.ndim == 0 else bad


def screen_values(col: str, values: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """Blank codes and out-of-range values of metric ``col`` as NaN.

    Args:
        col: a metric column (``FIELD_LIMITS``).
        values: shape (n,), in the column's unit.

    Returns:
        ``(clean, n_blank, bad)``: values with both kinds made NaN, the number of blank codes,
        and a bool mask (n,) of the out-of-range (not blank) values.
    """
    v = np.asarray(values, dtype=np.float64)
    blank = is_blank_scaled(v)
    bad = out_of_range(col, v) & ~blank
    return np.where(blank | bad, np.nan, v), int(blank.sum()), bad


#: The metric columns, in order (``data.metrics.METRICS``).
METRIC_NAMES: tuple[str, ...] = tuple(m.name for m in METRICS)

#: All columns of the sample frame, in order.
COLUMNS: tuple[str, ...] = ID_COLUMNS + METRIC_NAMES

_DTYPES: dict[str, str] = {
    "timestamp": "float64",
    "monotonic": "float64",
    "host": "object",
    "gpu": "int64",
    "uuid": "object",
    **{name: "float64" for name in METRIC_NAMES},
}

#: Per-GPU device facts: the limits used to normalise metrics across GPU models, the name,
#: whether GPM answers, and the PCI bus id (``0000:17:00.0``, as NVML and nvidia-smi print
#: it; text).
DEVICE_COLUMNS: tuple[str, ...] = (
    "host", "gpu", "uuid", "name", "power_limit_w", "max_sm_clock_mhz", "mem_total_bytes",
    "gpm_supported", "pci_bus_id",
)


class SchemaError(ValueError):
    """A frame does not fit the sample schema; the message names the column."""


def empty_frame() -> pd.DataFrame:
    """Return a sample frame with no rows and every column at its dtype."""
    return conform(pd.DataFrame({c: [] for c in COLUMNS}))


def screen_frame(df: pd.DataFrame, counts: dict[str, dict[str, int]] | None = None) -> None:
    """``screen_values`` over every metric column of ``df`` that it holds, in place.

    Args:
        df: a frame with numeric metric columns (any of ``FIELD_LIMITS``).
        counts: when given, ``{column: {"blank": n, "out_of_range": n}}`` is added for the
            columns where either happened.
    """
    for col in FIELD_LIMITS:
        if col in df:
            clean, n_blank, bad = screen_values(col, df[col].to_numpy())
            if n_blank or bad.any():
                df[col] = clean
                if counts is not None:
                    counts[col] = {"blank": n_blank, "out_of_range": int(bad.sum())}


def conform(df: pd.DataFrame, *, source: str = "frame",
            counts: dict[str, dict[str, int]] | None = None) -> pd.DataFrame:
    """Check and coerce ``df`` to the sample schema.

    Missing metric columns are added as NaN; a blank code (``SENTINELS``, also after a unit
    factor) or a value outside ``FIELD_LIMITS`` becomes NaN; unknown columns are dropped; rows
    are sorted by (timestamp, gpu).  ``monotonic`` is filled from ``timestamp`` when absent,
    ``host`` with "localhost" and ``uuid`` with "" when absent.

    Args:
        df: a frame holding at least ``timestamp`` and ``gpu``.
        source: a name for error messages (a file path, say).
        counts: when given, filled with ``{column: {"blank": n, "out_of_range": n}}`` for the
            columns where either happened.

    Returns:
        A new frame with exactly ``COLUMNS`` in order.

    Raises:
        SchemaError: ``timestamp`` or ``gpu`` is missing, a timestamp is missing or infinite,
            a ``gpu`` is neither a whole number 0..``MAX_GPUS``-1 nor a MIG entity number, or a column cannot be made
            numeric.
    """
    for required in ("timestamp", "gpu"):
        if required not in df.columns:
            raise SchemaError(f"{source}: required column {required!r} is missing")
    out = pd.DataFrame(index=df.index)
    for col in COLUMNS:
        if col in df.columns:
            out[col] = df[col]
        elif col == "monotonic":
            out[col] = df["timestamp"]
        elif col == "host":
            out[col] = "localhost"
        elif col == "uuid":
            out[col] = ""
        else:
            out[col] = np.nan
    for col in ("host", "uuid"):  # a missing name is no name, not the text "None"/"nan"
        out[col] = out[col].where(out[col].notna(), "localhost" if col == "host" else "")
    gpu = pd.to_numeric(out["gpu"], errors="coerce")
    bad_gpu = ~valid_entity(gpu.to_numpy(dtype=np.float64, na_value=np.nan))
    if bad_gpu.any():
        raise SchemaError(f"{source}: column 'gpu' holds {out['gpu'][bad_gpu].iloc[0]!r}, not a "
                          f"GPU index (a whole number 0-{MAX_GPUS - 1}) or a MIG entity number")
    for col in COLUMNS:
        dtype = _DTYPES[col]
        if dtype == "object":
            out[col] = out[col].astype(str).astype(object)
            continue
        try:
            out[col] = pd.to_numeric(out[col], errors="raise").astype(dtype)
        except (ValueError, TypeError) as exc:
            raise SchemaError(f"{source}: column {col!r} is not numeric ({exc})") from exc
    screen_frame(out, counts)  # a blank code or an impossible value is no reading: NaN
    if not np.isfinite(out["timestamp"].to_numpy()).all():
        raise SchemaError(f"{source}: column 'timestamp' has missing or infinite values")
    mono = out["monotonic"]
    out["monotonic"] = mono.where(np.isfinite(mono.to_numpy()))
    return out.sort_values(["timestamp", "gpu"], kind="stable").reset_index(drop=True)


def entity_key(gpu) -> tuple[int, int]:
    """Sort key of an entity: a GPU, then its MIG instances by id; instances of an unknown
    parent last."""
    parts = mig_parent(gpu)
    if parts is None:
        return int(gpu), -1
    p, inst = parts
    return (MAX_GPUS if p is None else p), inst


def gpus_in(df: pd.DataFrame) -> list[int]:
    """The entities (GPU indices, MIG entity numbers) of a sample frame, each GPU followed by
    its instances (``entity_key``)."""
    return sorted((int(g) for g in pd.unique(df["gpu"])), key=entity_key)
