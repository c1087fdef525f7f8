"""Balance across the MIG GPU instances of a GPU (and across GPUs' instances).

A MIG instance is an entity of its own (``data.schema.mig_entity``).  Its activity counters
(DCGM's ``GRACT``/``SMACT``) are shares of *its own* slices, so two instances are compared as
they are: one at 98 % while its neighbour idles at 2 % is an imbalance whatever their sizes
(the NVIDIA DCGM user guide, "Profiling Metrics" with MIG, reads GRACT per instance this way).
NVML's utilisation is N/A under MIG (DCGM issue 80: DCGM_FI_DEV_GPU_UTIL is not supported for
MIG instances); ``classifier.features.gpu_load`` falls back to ``gr_engine_active`` before it.

The flag, per window: the busiest instance's load exceeds the least busy one's by at least
``floor`` percentage points *and* the mean of the group by ``threshold`` (the hot-GPU rule of
``classifier.imbalance.ImbalanceDetector``, with the same 1.15).  A group is *uneven* when at
least half of its windows with two or more readings are flagged.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tealeaves.classifier.features import gpu_load
from tealeaves.classifier.windows import DEFAULT_WINDOW_S, per_gpu_means
from tealeaves.data.schema import GpuEntity, entity_key

#: Least spread between the busiest and the idlest instance of a window that is flagged, in
#: percentage points: well above the 2-3 points two equally loaded instances differ by in the
#: DCGM user guide's MIG example (GRACT 98.6 % vs 98.5 %).
SPREAD_FLOOR = 20.0
#: The busiest instance's load over the group's mean that is flagged (the hot-GPU threshold).
THRESHOLD = 1.15


def instance_balance(samples: pd.DataFrame, window_s: float = DEFAULT_WINDOW_S,
                     floor: float = SPREAD_FLOOR, threshold: float = THRESHOLD) -> list[dict]:
    """The balance of every group of MIG instances in a sample frame.

    Args:
        samples: a sample frame (``data.schema``); entities that are not MIG instances are
            left out.
        window_s: window length, s (> 0).
        floor, threshold: the flag (module docstring).

    Returns:
        One dict per GPU with two or more instances (``"gpu"``: its index, None when the
        source did not name it), then, when instances of two or more GPUs are present, one
        for all of them (``"gpu"``: ``"all"``).  Keys: ``"name"`` (the group in words),
        ``"instances"`` (entity numbers), ``"mean_load"`` ({entity name: mean load % over
        the windows, NaN-free}), ``"windows"`` (windows with two or more readings),
        ``"uneven_windows"``, ``"busiest"``/``"idlest"`` (entity names by mean load),
        ``"spread"`` (their mean-load difference, percentage points) and ``"uneven"``
        (bool; None when no window has two instances' loads).  Empty when the frame holds no two instances.

    Raises:
        ValueError: ``window_s`` is not positive.
    """
    insts = [int(g) for g in pd.unique(samples["gpu"]) if GpuEntity.from_code(g).is_mig] \
        if len(samples) else []
    if len(insts) < 2:
        return []
    load = gpu_load(per_gpu_means(samples[samples["gpu"].isin(insts)], window_s))
    return load_balance(load.unstack("gpu"), floor, threshold)


def window_loads(windows: pd.DataFrame) -> pd.DataFrame:
    """The MIG instances' loads of classified windows (``classify_samples``' ``load_g<i>``
    columns): one row per window, one column per instance (%); empty without two
    instances.  What ``load_balance`` reads, without going back to the samples."""
    ids = [int(c[6:]) for c in windows.columns if c.startswith("load_g") and c[6:].isdigit()]
    insts = [g for g in ids if GpuEntity.from_code(g).is_mig]
    if len(insts) < 2:
        return pd.DataFrame()
    return pd.DataFrame({g: windows[f"load_g{g}"].to_numpy(dtype=float) for g in insts})


def load_balance(table: pd.DataFrame, floor: float = SPREAD_FLOOR,
                 threshold: float = THRESHOLD) -> list[dict]:
    """``instance_balance`` of a load table already made: one row per window, one column per
    entity (its load, %; columns that are not MIG instances are left out), as the
    classifier's windows hold it (``load_g<i>``).  Same answer."""
    insts = sorted((int(g) for g in table.columns if GpuEntity.from_code(g).is_mig), key=entity_key)
    if len(insts) < 2:
        return []
    groups: dict = {}
    for g in insts:
        groups.setdefault(GpuEntity.from_code(g).gpu, []).append(g)
    out = [_group(table, p, members, floor, threshold)
           for p, members in groups.items() if len(members) >= 2]
    if len(groups) >= 2:
        out.append(_group(table, "all", insts, floor, threshold))
    return [o for o in out if o is not None]


def _group(table: pd.DataFrame, parent, members: list[int], floor: float,
           threshold: float) -> dict | None:
    cols = [g for g in members if g in table.columns]
    if len(cols) < 2:
        return None
    t = table[cols].to_numpy(dtype=float)
    seen = np.sum(np.isfinite(t), axis=1) >= 2
    t = t[seen]
    with np.errstate(all="ignore"):
        hi, lo, mean = np.nanmax(t, axis=1), np.nanmin(t, axis=1), np.nanmean(t, axis=1)
        flagged = (hi - lo >= floor) & (hi >= threshold * mean)
        means = np.nanmean(t, axis=0) if len(t) else np.full(len(cols), np.nan)
    named = {str(GpuEntity.from_code(g)): float(m) for g, m in zip(cols, means, strict=True)
             if np.isfinite(m)}
    busiest = max(named, key=named.get) if named else None
    idlest = min(named, key=named.get) if named else None
    name = ("instances of every GPU" if parent == "all" else
            f"GPU {'?' if parent is None else parent}'s instances")
    return {"gpu": parent, "name": name, "instances": cols, "mean_load": named,
            "windows": len(t), "uneven_windows": int(flagged.sum()),
            "busiest": busiest, "idlest": idlest,
            "spread": (named[busiest] - named[idlest]) if named else float("nan"),
            # no window with two readings: no verdict, not "even"
            "uneven": bool(flagged.sum() * 2 >= len(t)) if len(t) else None}


def balance_line(group: dict) -> str:
    """One line on a group from ``instance_balance``: ``"MIG: GPU 0's instances uneven (4 of
    4 windows flagged); mean load GPU 0 · GI 1 75 %, GPU 0 · GI 0 0 %"``."""
    loads = ", ".join(f"{k} {v:.0f} %" for k, v in sorted(group["mean_load"].items(),
                                                            key=lambda kv: -kv[1]))
    if group["uneven"] is None:
        return (f"MIG: {group['name']}: balance n/a (no window with the load of two of them: "
                f"no SM, GR engine or utilization reading)")
    verdict = "uneven" if group["uneven"] else "even"
    return (f"MIG: {group['name']} {verdict} ({group['uneven_windows']} of "
            f"{group['windows']} window{'s' if group['windows'] != 1 else ''} flagged); mean "
            f"load {loads}")
