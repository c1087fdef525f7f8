"""A verdict from a picture alone: is the load on the GPUs it shows uniform or uneven, which
GPUs form the hot set, and what the counters it prints can and cannot say.

The hot-set rule is the classifier's (``classifier.imbalance``): a GPU is hot when its load is
at least ``THRESHOLD`` times the mean of the GPUs shown *and* ``FLOOR`` points above it; a
picture whose busiest GPU is under ``IDLE_PCT`` shows idle GPUs (uniform).  The load is the
utilization printed (GPU-Util, dmon's ``sm``, gpustat's %); where a GPU's is not read, its
power over its limit stands in.
"""

from __future__ import annotations

import math

#: A GPU this many times the mean load of the GPUs shown is hot (``ImbalanceDetector``'s
#: default threshold).
THRESHOLD = 1.15
#: ... and at least this many points above the mean (the noise of equal GPUs: a few points).
FLOOR = 10.0
#: Under this busiest load (%) the GPUs are idle.
IDLE_PCT = 10.0
#: Power at or above this share of its limit counts as near the limit.
NEAR_LIMIT = 0.85

#: What utilization cannot tell, said with every verdict.
LIMITS_NOTE = ("Utilization alone does not separate prefill from decode: both keep kernels "
               "running. Tensor-pipe and DRAM activity (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE / "
               "DRAM_ACTIVE, or GPM) would: prefill leans on the tensor pipes, decode on "
               "memory bandwidth.")


def _span(vals: list[float]) -> str:
    """``"90-95 %"``, or ``"95 %"`` when the ends round alike."""
    lo, hi = f"{min(vals):.0f}", f"{max(vals):.0f}"
    return f"{lo} %" if lo == hi else f"{lo}-{hi} %"


def loads_of(gpus: dict[int, dict]) -> dict[int, float]:
    """Each GPU's load (%) from its values (``data.screen_read.FIELDS``): utilization, else
    power over its limit; a GPU with neither is left out."""
    out = {}
    for g, v in gpus.items():
        u = v.get("util_pct")
        if u is not None and math.isfinite(u):
            out[g] = float(u)
        elif v.get("power_w") and v.get("power_limit_w"):
            out[g] = 100.0 * v["power_w"] / v["power_limit_w"]
    return out


def verdict(loads: dict[int, float], gpus: dict[int, dict] | None = None) -> dict:
    """The verdict of one region's GPUs.

    Args:
        loads: ``{gpu: load %}`` (``loads_of``).
        gpus: the values read (for the power reading), optional.

    Returns:
        ``{"pattern": "uniform"|"uneven"|"idle"|"n/a", "hot_set": [gpus], "mean_load",
        "text", "limits"}``: ``text`` says what the counters suggest, ``limits`` what a
        picture cannot tell (``LIMITS_NOTE``).
    """
    if not loads:
        return {"pattern": "n/a", "hot_set": [], "mean_load": math.nan,
                "text": "no GPU load read: no verdict", "limits": LIMITS_NOTE}
    mean = sum(loads.values()) / len(loads)
    if max(loads.values()) < IDLE_PCT:
        return {"pattern": "idle", "hot_set": [], "mean_load": mean,
                "text": f"every GPU under {IDLE_PCT:.0f} %: idle", "limits": LIMITS_NOTE}
    hot = sorted(g for g, v in loads.items() if v >= THRESHOLD * mean and v >= mean + FLOOR)
    near = []
    for v in (gpus or {}).values():
        if v.get("power_w") and v.get("power_limit_w"):
            near.append(v["power_w"] / v["power_limit_w"] >= NEAR_LIMIT)
    if not hot:
        text = (f"uniform: every GPU near the mean load of {mean:.0f} %" if len(loads) > 1
                else f"one GPU read, at {mean:.0f} %: nothing to compare it with")
        if near and all(near):
            text += ", all near their power limit: compute-bound on every GPU"
        return {"pattern": "uniform", "hot_set": [], "mean_load": mean, "text": text,
                "limits": LIMITS_NOTE}
    cold = [v for g, v in loads.items() if g not in hot]
    text = (f"uneven: GPU{'s' if len(hot) > 1 else ''} {', '.join(map(str, hot))} busy "
            f"({_span([loads[g] for g in hot])}) while "
            f"{'the other' if len(cold) > 1 else 'GPU'} "
            f"{len(cold) if len(cold) > 1 else next(g for g in loads if g not in hot)} "
            f"wait{'' if len(cold) > 1 else 's'} ({_span(cold)}): a straggler or an "
            f"imbalance of work")
    return {"pattern": "uneven", "hot_set": hot, "mean_load": mean, "text": text,
            "limits": LIMITS_NOTE}


#: A value read less sure than this is left out of the verdict (shown, marked doubtful).
VERDICT_SURE = 0.3


def sure_values(g) -> dict[str, float]:
    """A ``GpuReading``'s values read at least ``VERDICT_SURE`` sure."""
    return {k: v for k, v in g.values.items() if g.confidence.get(k, 1.0) >= VERDICT_SURE}


#: The region every picture has: all of it.
WHOLE = {"name": "whole picture", "box": [0.0, 0.0, 1.0, 1.0]}


def in_region(box, region_box) -> bool:
    """Whether a reading's ``box`` (x0, y0, x1, y1 fractions of the picture) has its centre
    inside ``region_box`` (same form; ``app.dashboard.screenshots.model.halves``' boxes).
    A reading with no box (text, not a picture) is in every region."""
    if box is None:
        return True
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return region_box[0] <= cx <= region_box[2] and region_box[1] <= cy <= region_box[3]


def summary(reading, regions: list[dict] | None = None) -> dict:
    """What a picture shows and its verdict per region, as JSON-ready data.

    Args:
        reading: a ``data.screen_read.PictureReading``.
        regions: ``[{"name", "box": [x0, y0, x1, y1]}]`` (fractions of the picture, y down:
            the Screenshots page's halves and boxes); the whole picture is always first.

    Returns:
        ``{"tool", "gpus": [{"gpu", "values", "confidence", "box"}], "regions": [{"name",
        "box", "gpus": [read GPUs in it], "verdict": verdict()}], "notes"}``; no verdict
        (None) when no monitor was recognised.
    """
    out_regions = []
    notes = list(reading.notes)
    doubtful = [f"GPU {g.gpu} {k}" for g in reading.gpus for k in ("util_pct", "power_w")
                if k in g.values and g.confidence.get(k, 1.0) < VERDICT_SURE]
    if doubtful:
        notes.append(f"left out of the verdict as doubtful (under {VERDICT_SURE:.0%} sure): "
                     f"{', '.join(doubtful)}")
    for reg in [WHOLE, *(regions or [])]:
        inside = [g for g in reading.gpus if in_region(g.box, reg["box"])]
        vals = {g.gpu: sure_values(g) for g in inside}
        v = verdict(loads_of(vals), vals) if reading.tool else None
        if v is not None and len(vals) < len(inside):  # one index twice: two screens
            twice = sorted({g.gpu for g in inside if [h.gpu for h in inside].count(g.gpu) > 1})
            v = {**verdict({}), "text": f"GPU {', '.join(map(str, twice))} read more than once "
                                        f"here (two screens?): no verdict for this region"}
        out_regions.append({"name": reg["name"], "box": list(reg["box"]),
                            "gpus": [g.gpu for g in inside], "verdict": v})
    return {"tool": reading.tool,
            "gpus": [{"gpu": g.gpu, "values": g.values,
                      "confidence": {k: round(float(c), 3) for k, c in g.confidence.items()},
                      "box": list(g.box) if g.box else None} for g in reading.gpus],
            "regions": out_regions, "notes": notes}


def agreement(picture: dict, telemetry_loads: dict[int, float]) -> str | None:
    """Whether a picture's verdict (``verdict()``) and the telemetry of that moment
    (``{gpu: load %}``, judged by the same rule) agree: None when they do (same pattern and
    hot set) or when either has no verdict, else one line saying how they differ."""
    if not telemetry_loads or picture is None or picture["pattern"] == "n/a":
        return None
    tele = verdict(telemetry_loads)
    if (tele["pattern"], tele["hot_set"]) == (picture["pattern"], picture["hot_set"]):
        return None
    def say(v):
        return v["pattern"] + (f" (hot set GPU {', '.join(map(str, v['hot_set']))})"
                               if v["hot_set"] else "")
    return (f"the picture and the telemetry disagree: picture {say(picture)}, telemetry "
            f"{say(tele)}")
