"""A monochrome nvtop chart's two lines named: which is GPU % and which mem%, by the
header's values or by how each line moves (``name_lines``)."""

from __future__ import annotations

import numpy as np

from tealeaves.data.screen.nvtop_chart import Chart


def name_lines(charts: list[Chart], header: dict[int, dict]) -> list[str]:
    """Name, in place, the two lines of each monochrome chart (``Chart.monochrome ==
    "unnamed"``) by the header of the picture's moment: nvtop's newest chart column is that
    moment, so the line nearer the GPU's ``util_pct`` there is ``GPU %`` and the other its
    ``mem%`` (``mem_used_mib / mem_total_mib``).  Only where the header's two values are at
    least ``NAME_APART`` points apart and the pairing fits within ``NAME_TOL`` points each.
    Where the header cannot tell, by how the lines move: memory in use steps only when
    memory is allocated or freed, so a line changing level at least ``STEADY_FACTOR`` times
    as often as the other, plus ``STEADY_MIN``, is GPU %; else the chart stays unnamed (left
    out of the stretches) and a note says why.

    Args:
        charts: ``read_charts``' charts.
        header: ``{gpu: values}`` read from the header (``GpuReading.values``).

    Returns:
        Notes, one per chart named or left unnamed.
    """
    notes = []
    for c in charts:
        if c.monochrome != "unnamed":
            continue
        gpu = c.series[0].gpu
        who = f"GPU {gpu}'s" if gpu is not None else \
            f"the chart at x {c.box[0]}-{c.box[2]} px (its GPU not read):"
        v = header.get(gpu, {}) if gpu is not None else {}
        util = v.get("util_pct", np.nan)
        mem = 100 * v.get("mem_used_mib", np.nan) / v.get("mem_total_mib", np.nan)
        newest = []
        for sr in c.series:
            order = np.argsort(sr.seconds_ago)
            vals = sr.values[order][np.isfinite(sr.values[order])]
            newest.append(float(vals[0]) if len(vals) else np.nan)
        why = None
        if not (np.isfinite(util) and np.isfinite(mem) and all(np.isfinite(newest))):
            why = "the header's GPU % and MEM or the lines' newest levels not read"
        else:
            fits = [max(abs(newest[0] - util), abs(newest[1] - mem)),
                    max(abs(newest[1] - util), abs(newest[0] - mem))]
            k = int(np.argmin(fits))
            if abs(util - mem) < NAME_APART or fits[k] > NAME_TOL:
                why = (f"the header's GPU % ({util:.0f}) and MEM ({mem:.0f} %) are too close "
                       f"or fit neither line's newest level ({newest[0]:.0f}, "
                       f"{newest[1]:.0f} %)")
        if why is None:
            how = (f"by the header: the one at {newest[k]:.0f} % at the newest column is "
                   f"GPU % (header {util:.0f} %), the other mem% (header {mem:.0f} %)")
        else:
            moves = [_level_changes(sr.values[np.argsort(sr.seconds_ago)]) for sr in c.series]
            k = int(np.argmax(moves))
            # (the header's GPU % still vetoes: the busier line must end where it reads)
            veto = np.isfinite(util) and np.isfinite(newest[k]) and \
                abs(newest[k] - util) > NAME_TOL
            if veto or moves[k] < STEADY_FACTOR * moves[1 - k] + STEADY_MIN:
                _agreed_only(c)
                also = (f"the line that moves more ends at {newest[k]:.0f} %, not the "
                        f"header's GPU % ({util:.0f})") if veto else \
                    f"the lines change level alike ({moves[0]} and {moves[1]} times)"
                notes.append(f"{who} monochrome lines not named: {why}, and {also}; its GPU % "
                             f"is given only where the two lines run together")
                continue
            how = (f"by how they move ({why}): the one that changes level {moves[k]} times "
                   f"is GPU %, the one that changes {moves[1 - k]} times mem% (memory in use "
                   f"changes only when memory is allocated or freed)")
        c.series[k].metric, c.series[1 - k].metric = "gpu_util", "mem_util"
        c.series[k].legend, c.series[1 - k].legend = f"GPU{gpu} %", f"GPU{gpu} mem%"
        c.series.sort(key=lambda sr: sr.metric != "gpu_util")
        c.monochrome = "named"
        notes.append(f"{who} monochrome lines named {how}")
    return notes


def _level_changes(values: np.ndarray) -> int:
    """How often a line (values oldest to newest, NaN unseen) changes level by more than
    ``AGREE_PTS`` between consecutive values seen."""
    v = values[np.isfinite(values)]
    return int((np.abs(np.diff(v)) > AGREE_PTS).sum())


def _agreed_only(chart: Chart) -> None:
    """An unnamed monochrome chart's values where its two lines run together (within
    ``AGREE_PTS``: there either is either series), NaN where they part; the series become
    ``gpu_util`` and ``mem_util`` in legend order, the chart stays ``unnamed``."""
    a, b = chart.series[0].values, chart.series[1].values
    with np.errstate(invalid="ignore"):
        same = np.abs(a - b) <= AGREE_PTS
    both = np.where(same, (a + b) / 2, np.nan)
    for sr, metric in zip(chart.series, ("gpu_util", "mem_util"), strict=True):
        sr.values, sr.metric = both.copy(), metric


#: ``_agreed_only``: two lines within this many points are one level.
AGREE_PTS = 3.0
#: ``name_lines``: the header's GPU % and MEM % must be this many points apart to name lines.
NAME_APART = 15.0
#: ``name_lines``: each line's newest level within this many points of its header value.
NAME_TOL = 12.0
#: ``name_lines`` without the header: the GPU % line changes level at least this many times
#: the mem% line's changes plus ``STEADY_MIN`` (memory in use steps only when memory is
#: allocated or freed; utilization follows the work: picture 08, 5 changes against 1).
STEADY_FACTOR = 2
STEADY_MIN = 2
