"""A verdict from a picture alone: is the load on the GPUs it shows uniform or uneven, which
GPUs form the hot set, and what the counters it prints can and cannot say.

The hot-set rule is the classifier's (``classifier.imbalance``): a GPU is hot when its load is
at least ``THRESHOLD`` times the mean of the GPUs shown *and* ``FLOOR`` points above it (and,
mirrored, where fewer than half the GPUs are that far *under* the mean, the others are the hot
set: one straggler idle among busy GPUs); a
picture whose busiest GPU is under ``IDLE_PCT`` shows idle GPUs (uniform).  The load is the
utilization printed (GPU-Util, dmon's ``sm``, gpustat's %); where a GPU's is not read, its
power over its limit stands in.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from tealeaves.classifier.picture_charts import (
    CHART_LIMITS,
    STRETCH_MIN_S,
    STRETCH_MIN_SHARE,
    _drop_misread,
    _fold_short,
    _gpu_series,
    _join_agreeing,
    _key,
    _loads_at,
    _runs_of,
    _seen_values,
    _stretch,
)

#: A GPU this many times the mean load of the GPUs shown is hot (``ImbalanceDetector``'s
#: default threshold).
THRESHOLD = 1.15
#: ... and at least this many points above the mean (the noise of equal GPUs: a few points).
FLOOR = 10.0
#: Under this busiest load (%) the GPUs are idle.
IDLE_PCT = 10.0
#: Power at or above this share of its limit counts as near the limit.
NEAR_LIMIT = 0.85
#: The pattern of a region holding one GPU's load: neither uniform nor uneven.
ONE_GPU = "one GPU"
#: Points a GPU's load in the picture and in the telemetry may differ by and still agree
#: (the picture prints GPU-Util, the telemetry's load is SM active where it was measured:
#: the two part by a few points on a busy GPU, by tens in small-batch decode).
LOAD_TOLERANCE = 25.0

#: Utilization at or above this (%) on every GPU is saturated: GPU-Util counts the time any
#: kernel runs, so GPUs spinning in NCCL waits for a straggler read 100 % too; the verdict
#: then stands on power (``by_power``).
SATURATED_PCT = 95.0

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
    """Each GPU's load (%) from its values (``data.screen.values.FIELDS``): utilization, else
    power over its limit; a GPU with neither is left out."""
    out = {}
    for g, v in gpus.items():
        u = v.get("util_pct")
        if u is not None and math.isfinite(u):
            out[g] = float(u)
        elif v.get("power_w") and v.get("power_limit_w"):
            # (a GPU over its limit a moment is fully loaded, not 105 % loaded)
            out[g] = min(100.0, 100.0 * v["power_w"] / v["power_limit_w"])
    return out


def _judged(v: dict, inside: list[int], loads: dict[int, float],
            vals: dict[int, dict]) -> dict:
    """``verdict`` ``v`` of a region told what it stood on: a GPU of the region with no sure
    load read is left out (a uniform or idle verdict without it cannot be told: the GPU left
    out may be the one that differs; an uneven one holds among the others, said), and the
    GPUs whose load is their power over its limit (no utilization read) are named."""
    if v["pattern"] == "n/a":
        return v
    out = sorted(set(inside) - set(loads))
    by_power = sorted(g for g in loads if not math.isfinite(vals[g].get("util_pct", math.nan)))
    source = (f" (load of GPU{'s' if len(by_power) > 1 else ''} "
              f"{', '.join(map(str, by_power))}: power over its limit, no utilization read)"
              if by_power else "")
    if not out:
        return {**v, "text": v["text"] + source}
    which = f"GPU{'s' if len(out) > 1 else ''} {', '.join(map(str, out))}"
    if v["pattern"] in ("uniform", "idle") or len(out) * 2 >= len(inside):
        return {**verdict({}), "text": f"cannot tell: {which} read no sure load (left out "
                                       f"as doubtful); among the other {len(loads)}: "
                                       f"{v['text']}{source}"}
    return {**v, "text": f"{v['text']}{source} ({which} left out: no sure load read)"}


def by_power(v: dict, loads: dict[int, float], vals: dict[int, dict]) -> dict:
    """A ``uniform`` verdict of saturated utilization (every load read from utilization, all
    at least ``SATURATED_PCT``) checked against the power read: each GPU's power over its
    limit (%) judged by the same hot-set rule (``THRESHOLD`` times the mean and ``FLOOR``
    points over it).  Power that parts that way makes the verdict ``uneven`` by power (its hot
    set the GPUs hot by power) where every GPU with power read has its limit read too, else
    ``cannot tell`` (watts alone cannot be compared across unknown limits); power that
    agrees, or none read, keeps ``uniform`` and says what it stood on.  Any other verdict is
    returned as it is.

    Args:
        v: the region's verdict (``verdict``, ``_judged``).
        loads: ``{gpu: load %}`` it was made from (``loads_of``).
        vals: ``{gpu: values read}`` (``sure_values``).
    """
    util = [vals[g].get("util_pct", math.nan) for g in loads]
    if v["pattern"] != "uniform" or not util or not all(
            math.isfinite(u) and u >= SATURATED_PCT for u in util):
        return v
    watts = {g: vals[g]["power_w"] for g in loads if vals[g].get("power_w")}
    capped = {g: 100.0 * w / vals[g]["power_limit_w"] for g, w in watts.items()
              if vals[g].get("power_limit_w")}
    sat = (f"utilization saturated at {_span(util)} on every GPU (GPUs waiting in NCCL read "
           f"100 % too)")
    if len(watts) < 2:
        return {**v, "text": f"{v['text']} (by utilization alone, and {sat}: no power read "
                             f"to tell a straggler)"}
    shares = capped if len(capped) == len(watts) else {
        g: 100.0 * w / max(watts.values()) for g, w in watts.items()}
    pv = verdict(shares)
    unread = sorted(set(loads) - set(watts))
    left = (f" (GPU{'s' if len(unread) > 1 else ''} {', '.join(map(str, unread))}: no sure "
            f"power read, left out)" if unread else "")
    if pv["pattern"] != "uneven":
        return {**v, "text": f"{v['text']}; {sat}, and power agrees "
                             f"({_span(list(shares.values()))} of "
                             f"{'their limits' if shares is capped else 'the highest'})"
                             f"{left}"}
    if shares is not capped or len(unread) * 2 >= len(loads):
        return {**verdict({}), "text": f"cannot tell: {sat}, and the power read parts "
                                       f"({', '.join(f'GPU {g} {w:.0f} W' for g, w in watts.items())})"
                                       f" without every power limit read{left}"}
    return {**pv, "mean_load": v["mean_load"],
            "text": f"uneven by power, in % of each GPU's limit ({sat}): "
                    f"{pv['text'].removeprefix('uneven: ')}{left}"}


def verdict(loads: dict[int, float], gpus: dict[int, dict] | None = None) -> dict:
    """The verdict of one region's GPUs.

    Args:
        loads: ``{gpu: load %}`` (``loads_of``).
        gpus: the values read (for the power reading), optional.

    Returns:
        ``{"pattern": "uniform"|"uneven"|"idle"|"one GPU"|"n/a", "hot_set": [gpus],
        "mean_load",
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
    if not hot and len(loads) > 2:
        # the mirror case: one or a few GPUs well under the others (one of eight idle while
        # seven work lifts no GPU far enough over the mean); the working ones are the hot set
        cold = [g for g, v in loads.items() if v * THRESHOLD <= mean and v <= mean - FLOOR]
        if cold and len(cold) < len(loads) / 2:
            hot = sorted(g for g in loads if g not in cold)
    near = []
    for v in (gpus or {}).values():
        if v.get("power_w") and v.get("power_limit_w"):
            near.append(v["power_w"] / v["power_limit_w"] >= NEAR_LIMIT)
    if len(loads) == 1:  # one GPU is neither uniform nor uneven
        return {"pattern": ONE_GPU, "hot_set": [], "mean_load": mean,
                "text": f"one GPU read (GPU {next(iter(loads))}), at {mean:.0f} %: no "
                        f"uniform/uneven verdict (nothing to compare it with)",
                "limits": LIMITS_NOTE}
    if not hot:
        text = f"uniform: every GPU near the mean load of {mean:.0f} %"
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


def summary(reading, regions: list[dict] | None = None,
            cuts: list[float] | None = None) -> dict:
    """What a picture shows and its verdict per region, as JSON-ready data.

    Args:
        reading: a ``data.screen.read.PictureReading``.
        regions: ``[{"name", "box": [x0, y0, x1, y1]}]`` (fractions of the picture, y down:
            the Screenshots page's halves and boxes); the whole picture is always first.
        cuts: where to cut nvtop's time axis (``stretches``); default where it changes.

    Returns:
        ``{"tool", "gpus": [{"gpu", "values", "confidence", "box", "blank"}], "regions": [{"name",
        "box", "gpus": [read GPUs in it], "verdict": verdict(), "loads": {gpu: load %}}],
        "notes", "charts"}``; no verdict (None) when no monitor was recognised; ``blank``
        names the values the tool printed blank (N/A: no value, not 0); ``charts``
        is ``stretches()`` of nvtop's charts (None for other pictures).  A picture of two
        captures (``PictureReading.captures``) has no GPUs of its own and a ``captures`` list:
        per capture ``{"name", "box", ...}`` with this same summary of it.
    """
    if getattr(reading, "captures", None):  # two screens pasted together: each on its own
        caps = []
        for cap_name, box, sub in reading.captures:
            one = summary(sub, None, cuts)
            caps.append({"name": cap_name, "box": list(box), **one})
        text = ("two captures in one picture: no verdict across them (each is its own moment; "
                "see each capture)")
        return {"tool": reading.tool, "gpus": [],
                "regions": [{"name": WHOLE["name"], "box": list(WHOLE["box"]), "gpus": [],
                             "verdict": {**verdict({}), "text": text}, "loads": {}}],
                "notes": list(reading.notes), "charts": None, "captures": caps}
    out_regions = []
    notes = list(reading.notes)
    doubtful = [f"GPU {g.gpu} {k}" for g in reading.gpus for k in ("util_pct", "power_w")
                if k in g.values and g.confidence.get(k, 1.0) < VERDICT_SURE]
    if doubtful:
        notes.append(f"left out of the verdict as doubtful (under {VERDICT_SURE:.0%} sure): "
                     f"{', '.join(doubtful)}")
    charts = stretches(reading.charts, cuts, {g.gpu: sure_values(g) for g in reading.gpus},
                       getattr(reading, "size", None)) if getattr(
        reading, "charts", None) else None
    for reg in [WHOLE, *(regions or [])]:
        inside = [g for g in reading.gpus if in_region(g.box, reg["box"])]
        vals = {g.gpu: sure_values(g) for g in inside}
        loads = loads_of(vals)
        v = by_power(_judged(verdict(loads, vals), [g.gpu for g in inside], loads, vals),
                     loads, vals) if reading.tool else None
        if v is not None and len(vals) < len(inside):  # one index twice: two screens
            twice = sorted({g.gpu for g in inside if [h.gpu for h in inside].count(g.gpu) > 1})
            v = {**verdict({}), "text": f"GPU {', '.join(map(str, twice))} read more than once "
                                        f"here (two screens?): no verdict for this region"}
        elif v is not None and reg is WHOLE and charts and charts["two_screens"]:
            # the charts name a GPU twice: two screens side by side, whose headers may have
            # been read as one (a GPU's values from both)
            v = {**verdict({}), "text": "the charts show a GPU twice (two screens in one "
                                        "picture?): no verdict for the whole picture; mark "
                                        "each screen as a region"}
        out_regions.append({"name": reg["name"], "box": list(reg["box"]),
                            "gpus": [g.gpu for g in inside], "verdict": v,
                            "loads": loads})
    return {"tool": reading.tool,
            "gpus": [{"gpu": g.gpu, "values": g.values,
                      "confidence": {k: round(float(c), 3) for k, c in g.confidence.items()},
                      "box": list(g.box) if g.box else None,
                      "blank": list(getattr(g, "blank", ()))} for g in reading.gpus],
            "regions": out_regions, "notes": notes, "charts": charts}


def compare(picture: dict | None, picture_loads: dict[int, float],
            telemetry_loads: dict[int, float] | None,
            picture_gpus: list[int] | None = None) -> dict:
    """Whether a region of a picture and the telemetry of its moment agree.

    They are compared only when the GPUs match: the picture shows as many GPUs as the
    telemetry holds (``picture_gpus``: every GPU read in the whole picture; default the
    region's) and every GPU of the region is one of the telemetry's.  The telemetry is then
    judged on the region's GPUs alone (the same rule, ``verdict``), and they agree only when
    the pattern, the hot set *and* each GPU's load (within ``LOAD_TOLERANCE`` points) agree:
    a picture at 90 % never agrees with idle telemetry.

    Args:
        picture: the region's ``verdict()`` (None or "n/a": nothing read).
        picture_loads: ``{gpu: load %}`` of the region's GPUs, as read (``loads_of``).
        telemetry_loads: ``{gpu: load %}`` of the telemetry of that moment (NaN: no load);
            None or empty when there is none.
        picture_gpus: the indices of every GPU read in the whole picture.

    Returns:
        ``{"status": "agree"|"disagree"|"not compared", "text"}``: one line saying how they
        compare or why they were not compared.
    """
    def no(why):
        return {"status": "not compared", "text": f"not compared with the telemetry: {why}"}

    if not telemetry_loads:
        return no("no telemetry of that moment")
    if picture is None or not picture_loads:
        return no("no GPU load read from the picture")
    if picture["pattern"] == "n/a":  # "cannot tell", two screens: nothing to compare
        return no(f"the picture gives no verdict ({picture['text']})")
    shown = sorted(set(picture_gpus if picture_gpus is not None else picture_loads))
    held = sorted(telemetry_loads)
    if len(shown) != len(held):
        return no(f"the picture shows {len(shown)} GPU{'s' if len(shown) != 1 else ''}, the "
                  f"telemetry {len(held)}")
    missing = sorted(set(picture_loads) - set(held))
    if missing:
        return no(f"GPU {', '.join(map(str, missing))} of the picture "
                  f"{'is' if len(missing) == 1 else 'are'} not in the telemetry (GPUs "
                  f"{', '.join(map(str, held))})")
    tele = {g: float(telemetry_loads[g]) for g in picture_loads
            if telemetry_loads[g] is not None and math.isfinite(telemetry_loads[g])}
    if len(tele) < len(picture_loads):
        gone = sorted(set(picture_loads) - set(tele))
        return no(f"the telemetry holds no load for GPU {', '.join(map(str, gone))}")
    tv = verdict(tele)

    def say(v, loads):
        hot = f", hot set GPU {', '.join(map(str, v['hot_set']))}" if v["hot_set"] else ""
        return f"{v['pattern']} ({_span(list(loads.values()))}{hot})"

    far = sorted(g for g in picture_loads if abs(picture_loads[g] - tele[g]) > LOAD_TOLERANCE)
    both = f"picture {say(picture, picture_loads)}, telemetry {say(tv, tele)}"
    if (tv["pattern"], tv["hot_set"]) != (picture["pattern"], picture["hot_set"]):
        return {"status": "disagree",
                "text": f"the picture and the telemetry disagree: {both}"}
    if far:
        loads = "; ".join(f"GPU {g} {picture_loads[g]:.0f} % in the picture, {tele[g]:.0f} % "
                          f"in the telemetry" for g in far)
        return {"status": "disagree",
                "text": f"the picture and the telemetry disagree on the load: {loads}"}
    return {"status": "agree", "text": f"the telemetry of that moment agrees: {both}"}


def agreement(picture: dict | None, telemetry_loads: dict[int, float] | None,
              picture_loads: dict[int, float], picture_gpus: list[int] | None = None
              ) -> str | None:
    """``compare``'s line when a picture's region and the telemetry do not agree (they
    differ, or the GPUs do not match and they were not compared); None when they agree or
    there is no telemetry at all."""
    if not telemetry_loads:
        return None
    c = compare(picture, picture_loads, telemetry_loads, picture_gpus)
    return None if c["status"] == "agree" else c["text"]


def stretches(charts, cuts: list[float] | None = None, gpus: dict[int, dict] | None = None,
              size: tuple[int, int] | None = None) -> dict:
    """A verdict per stretch of nvtop's charts: the time axis cut where the pattern changes
    (or at ``cuts``), each stretch judged by ``verdict`` on its GPUs' mean ``GPU %``.

    On a common grid (the coarsest chart's seconds per pixel, over the span every GPU's line
    covers) each moment gets ``verdict``'s pattern and hot set; runs of one verdict shorter
    than ``STRETCH_MIN_SHARE`` of the span or ``STRETCH_MIN_S`` are folded into the longer
    neighbour, and each remaining run is judged again on its mean loads (neighbours that then
    agree are joined).

    Args:
        charts: ``data.screen.nvtop_chart.Chart`` list (``PictureReading.charts``).
        cuts: fractions of the time axis (0 the oldest moment shown, 1 the newest) to cut at
            instead of the changes, e.g. ``[0.5]`` for the older and the newer half.
        gpus: ``{gpu: header values}`` (``sure_values``), for the PCIe of the newest stretch.
        size: the picture's ``(width, height)`` in pixels, for the boxes.

    Returns:
        ``{"stretches": [{"from_s_ago", "to_s_ago" (s before the newest sample, from > to),
        "gpus", "loads": {gpu: mean %}, "verdict": verdict(), "text", "boxes": [[x0, y0, x1,
        y1] fractions of the picture, one per chart]}], "source", "notes", "limits",
        "two_screens" (a GPU charted twice: two screens in one picture, no stretches)}``,
        oldest stretch first; no stretches (and a note) when fewer than two GPUs' lines were
        read.
    """
    series, notes, step, two = _gpu_series(charts, len(gpus) if gpus else None)
    base = {"stretches": [], "notes": notes, "limits": CHART_LIMITS,
            "source": "nvtop charts, GPU % per GPU", "two_screens": two}
    if gpus:  # a line that ends far from the header's reading of that moment is misread
        _drop_misread(series, gpus, step, notes)
    if len(series) < 2 and not two and not any(c.interval_source == "ticks disagree"
                                               for c in charts):
        base["notes"] = [*notes, ("fewer than two GPUs' GPU % lines read from the charts: "
                                  "no verdict per stretch")]
        return base
    if len(series) < 2:
        return base
    assumed = any(c.interval_source == "default" for c in charts)
    # the span most GPUs' lines cover (a wider chart, a line lost under its legend, is not
    # the picture's span); a stretch's verdict names the GPUs seen in it
    span = float(np.median([a[-1] for a, _v in series.values()]))
    step = max(step, span / 400, 0.05)
    grid = np.arange(0.0, span + 1e-9, step)
    if len(grid) < 2:
        base["notes"] = notes + ["the charts show too short a time for stretches"]
        return base
    order = sorted(series)
    vals = _seen_values(series, order, grid, step)

    def judge(lo: int, hi: int) -> dict:
        loads = _loads_at(vals, order, lo, hi)
        return verdict(loads, None), loads

    if cuts:
        edges = sorted({0, len(grid), *(round((1 - f) * (len(grid) - 1)) for f in cuts
                                        if 0 < f < 1)})
        runs = [[a, b] for a, b in itertools.pairwise(edges) if b > a]
    else:
        runs = _runs_of(_moment_keys(vals, order, len(grid)))
        _fold_short(runs, max(STRETCH_MIN_SHARE * len(grid), STRETCH_MIN_S / step))
        runs = _join_agreeing(runs, judge)
    # grid index 0 is the newest: oldest first
    base["stretches"] = [_stretch(charts, grid, step, a, b, *judge(a, b), order, gpus, size,
                                  assumed) for a, b in sorted(runs, key=lambda r: -r[0])]
    return base


def _moment_keys(vals: np.ndarray, order: list[int], n: int) -> list:
    """Each of the ``n`` grid moments' verdict key (pattern, hot set), judged on the GPUs'
    lines there (``vals``, rows in ``order``)."""
    # a moment where some GPU's line is unseen (under a legend, lost) takes the verdict
    # of the moment before it: a GPU missing there is no change of pattern
    every = np.isfinite(vals).all(axis=0)
    keys: list = [_key(verdict(_loads_at(vals, order, k, k + 1))) if every[k] else None
                  for k in range(n)]
    first = next((k for k in keys if k is not None), None)
    if first is None:
        return [_key(verdict(_loads_at(vals, order, k, k + 1))) for k in range(n)]
    # unless the GPUs seen there changed pattern: judged on them alone, the moment
    # and the last moment every GPU was seen (restricted to them) must agree
    last = next(k for k in range(n) if keys[k] is not None)
    for k in range(n):
        if keys[k] is not None:
            last = k
            continue
        seen_now = np.isfinite(vals[:, k])
        if seen_now.sum() < 2:
            keys[k] = keys[k - 1] if k else keys[last]
            continue
        now = {g: float(vals[i, k]) for i, g in enumerate(order) if seen_now[i]}
        then = {g: float(vals[i, last]) for i, g in enumerate(order) if seen_now[i]}
        same = _key(verdict(now)) == _key(verdict(then))
        keys[k] = (keys[k - 1] if k else keys[last]) if same else \
            ("seen", *_key(verdict(now)))
    return keys
