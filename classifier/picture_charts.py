"""nvtop's charts as each GPU's load over time, for the verdict per stretch
(``classifier.picture.stretches``): each GPU's ``GPU %`` line taken from the charts, put on a
common time grid, the grid's runs of one verdict folded and joined, and each stretch's text
and boxes.  Everything here but the verdict itself, which ``picture`` gives."""

from __future__ import annotations

import math
import warnings

import numpy as np

#: A run of one verdict shorter than this share of the chart's span (or than
#: ``STRETCH_MIN_S``) is folded into its neighbour: a prefill's dips between chunks, one
#: column misread, the moment a line crosses another are not stretches of their own.
STRETCH_MIN_SHARE = 0.08
#: ... nor shorter than this many seconds.
STRETCH_MIN_S = 2.0
#: A GPU's line is interpolated across at most this many seconds where it was not seen;
#: farther from any column read it counts as unseen (never as a level).
MAX_GAP_S = 1.0
#: PCIe (RX + TX, bytes/s) a hot GPU's header must exceed, and by this factor the others', for
#: a stretch to say "compute and PCIe high" (an idle H200 moves ~1 MB/s; a prefill ~120 MB/s).
PCIE_BUSY_BPS = 10 * 2**20
PCIE_FACTOR = 4.0
#: The share of a stretch a GPU's line must be seen in for the stretch to judge it.
MIN_SEEN_SHARE = 0.4
#: Points a chart line's newest level may be from the header's GPU % (the same refresh
#: of nvtop; its newest column lags the moment by up to an interval) and not be misread.
HEADER_AGREE = 25.0
#: What a chart of GPU % cannot tell, said with every stretch.
CHART_LIMITS = ("nvtop's GPU % is NVML utilization.gpu, the share of time any kernel ran: "
                "a chart cannot tell tensor-pipe from memory-bound work, so prefill and "
                "decode look alike; its MEM % is memory used, not bandwidth.")


def _gpu_series(charts, n_header: int | None = None
                ) -> tuple[dict[int, tuple[np.ndarray, np.ndarray]], list[str], float, bool]:
    """Each GPU's ``GPU %`` series ``(seconds_ago, values)`` from nvtop's charts (monochrome
    charts are left out, said), the notes, the coarsest seconds per pixel, and whether the
    charts are two screens.  A GPU named on more than one chart is two screens in one
    picture when there are more such charts than the ``n_header`` GPUs the header shows
    (then no series are returned), else a legend misread: that GPU is left out, said."""
    out, notes, step = {}, [], 0.0
    charted: dict[int, int] = {}  # charts naming each GPU's GPU %
    for c in charts:
        if c.monochrome in ("together", "unnamed"):
            notes.append("a monochrome chart is left out of the stretches: its lines cannot "
                         "be told apart")
            continue
        if c.cut_edges:
            # a column without a line may be one at a level the picture cut off
            names = sorted({s.gpu for s in c.series if s.gpu is not None})
            which = f"GPU {', '.join(map(str, names))}" if names else \
                f"x {c.box[0]}-{c.box[2]} px (its GPU not read)"
            notes.append(f"the chart of {which} is left out of the stretches: it is cut by "
                         f"the picture's edge, and where its line is not seen it may run in "
                         f"the part cut off")
            continue
        for s in c.series:
            if s.metric != "gpu_util" or s.gpu is None:
                continue
            charted[s.gpu] = charted.get(s.gpu, 0) + 1
            ok = np.isfinite(s.values)
            if s.gpu in out or ok.sum() < 2:
                continue
            order = np.argsort(s.seconds_ago[ok])
            out[s.gpu] = (s.seconds_ago[ok][order], s.values[ok][order])
            step = max(step, c.seconds_per_px)
    if any(c.interval_source == "ticks disagree" for c in charts):
        notes.append("the charts' time ticks disagree: no verdict per stretch (their times "
                     "cannot be told)")
        return {}, notes, step, False
    twice = sorted(g for g, n in charted.items() if n > 1)
    if twice and (n_header is None or sum(charted.values()) > n_header):
        # two screens in one picture: whose line is whose cannot be told
        notes.append(f"GPU {', '.join(map(str, twice))} charted more than once (two screens "
                     f"in one picture?): no verdict per stretch")
        return {}, notes, step, True
    if twice:  # more legends than GPUs read as one index: which line is that GPU's is unknown
        notes.append(f"GPU {', '.join(map(str, twice))} left out of the stretches: "
                     f"{'its legend' if len(twice) == 1 else 'their legends'} read on more "
                     f"than one chart")
        out = {g: v for g, v in out.items() if g not in twice}
    if any(c.interval_source == "default" for c in charts):
        notes.append("a chart's time ticks were not read: its seconds are nvtop's default "
                     "interval, assumed (the stretches' times may be off by that factor)")
    return out, notes, step, False


def _key(v: dict) -> tuple:
    return (v["pattern"], tuple(v["hot_set"]))


def _pcie_text(hot: list[int], gpus: dict[int, dict]) -> str:
    """``"compute and PCIe high on GPUs 1, 3"`` when the header's PCIe of the hot set is well
    above the others' (``PCIE_BUSY_BPS``, ``PCIE_FACTOR``); else ``""``."""
    pcie = {g: v.get("pcie_rx_bytes_per_s", math.nan) + v.get("pcie_tx_bytes_per_s", math.nan)
            for g, v in gpus.items()}
    pcie = {g: p for g, p in pcie.items() if math.isfinite(p)}
    cold = [p for g, p in pcie.items() if g not in hot]
    hotp = [pcie[g] for g in hot if g in pcie]
    if len(hotp) < len(hot) or not cold or min(hotp) < PCIE_BUSY_BPS or \
            min(hotp) < PCIE_FACTOR * max(cold):
        return ""
    return (f"compute and PCIe high on GPU{'s' if len(hot) > 1 else ''} "
            f"{', '.join(map(str, hot))} while the others idle (PCIe RX+TX "
            f"{min(hotp) / 2**20:.0f}-{max(hotp) / 2**20:.0f} MiB/s against at most "
            f"{max(cold) / 2**20:.1f} MiB/s, the header at the picture's moment)")


def _drop_misread(series: dict, gpus: dict[int, dict], step: float, notes: list[str]) -> None:
    """Leave out, in place, a GPU whose chart line ends far (``HEADER_AGREE``) from the
    header's reading of that moment (``gpus``): its line is misread; noted."""
    for g in sorted(series):
        u = gpus.get(g, {}).get("util_pct", math.nan)
        ago, v = series[g]
        recent = v[ago <= ago[0] + 2 * max(step, 0.5)]
        if math.isfinite(u) and ago[0] <= 2 * max(step, 0.5) and len(recent) and \
                np.min(np.abs(recent - u)) > HEADER_AGREE:
            notes.append(f"GPU {g}'s chart line ends at {recent[0]:.0f} % where the header "
                         f"reads {u:.0f} % at that moment: the line is misread, left out "
                         f"of the stretches")
            del series[g]


def _seen_values(series: dict, order: list[int], grid: np.ndarray, step: float) -> np.ndarray:
    """(len(order), len(grid)) each GPU's line on the grid where it was seen: NaN farther
    than ``MAX_GAP_S`` (or three grid steps) from any column read."""
    # each GPU's line where it was seen: NaN farther than MAX_GAP_S (or a few grid steps)
    # from any column read (beyond its ends, under a legend, where the line was lost)
    gap = max(MAX_GAP_S, 3 * step)

    def seen(g: int) -> np.ndarray:
        ago, v = series[g]
        k = np.clip(np.searchsorted(ago, grid), 1, len(ago) - 1)
        near = np.minimum(np.abs(grid - ago[k - 1]), np.abs(grid - ago[k]))
        return np.where(near <= gap, np.interp(grid, ago, v), np.nan)

    return np.array([seen(g) for g in order])


def _loads_at(vals: np.ndarray, order: list[int], lo: int, hi: int) -> dict[int, float]:
    """Each GPU's mean load over grid steps ``lo:hi`` of ``vals``, for the GPUs seen in at
    least ``MIN_SEEN_SHARE`` of them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a GPU not seen in the stretch
        m = np.nanmean(vals[:, lo:hi], axis=1)
    # a GPU whose line is seen in less than MIN_SEEN_SHARE of the stretch is not judged
    # on the part seen (a line lost under a legend for most of it)
    cover = np.isfinite(vals[:, lo:hi]).mean(axis=1)
    return {g: float(m[i]) for i, g in enumerate(order)
            if np.isfinite(m[i]) and cover[i] >= MIN_SEEN_SHARE}


def _runs_of(keys: list) -> list[list]:
    """``[first, end, key]`` runs of equal consecutive ``keys``."""
    runs = []
    for k, key in enumerate(keys):
        if runs and runs[-1][2] == key:
            runs[-1][1] = k + 1
        else:
            runs.append([k, k + 1, key])
    return runs


def _fold_short(runs: list[list], least: float) -> None:
    """Fold, in place, each run shorter than ``least`` grid steps into its longer neighbour,
    shortest first; neighbours of one key join."""
    while len(runs) > 1:
        i = min(range(len(runs)), key=lambda j: runs[j][1] - runs[j][0])
        if runs[i][1] - runs[i][0] >= least:
            break
        left = runs[i - 1] if i > 0 else None
        right = runs[i + 1] if i + 1 < len(runs) else None
        into = left if right is None or (left is not None and
                                         left[1] - left[0] >= right[1] - right[0]) else right
        into[0], into[1] = min(into[0], runs[i][0]), max(into[1], runs[i][1])
        del runs[i]
        j = 0
        while j + 1 < len(runs):  # neighbours of one verdict join
            if runs[j][2] == runs[j + 1][2]:
                runs[j][1] = runs[j + 1][1]
                del runs[j + 1]
            else:
                j += 1


def _join_agreeing(runs: list[list], judge) -> list[list]:
    """``[first, end]`` of ``runs``, neighbours that ``judge`` (``(first, end) -> (verdict,
    loads)``) gives one pattern and hot set joined."""
    joined = []
    for a, b, _k in runs:
        if joined and _key(judge(*joined[-1])[0]) == _key(judge(a, b)[0]):
            joined[-1][1] = b
        else:
            joined.append([a, b])
    return joined


def _stretch(charts, grid: np.ndarray, step: float, a: int, b: int, v: dict,
             loads: dict[int, float], order: list[int], gpus: dict[int, dict] | None,
             size: tuple[int, int] | None, assumed: bool) -> dict:
    """One stretch of ``stretches``' list: grid steps ``a:b`` (0 the newest), judged ``v``
    on ``loads``."""
    t_new, t_old = float(grid[a]), float(grid[b - 1] + step)
    text = v["text"]
    if a == 0 and v["hot_set"] and gpus:
        extra = _pcie_text(v["hot_set"], gpus)
        if extra:
            text = f"{text}; {extra}"
    boxes = []
    for c in charts:
        x0, y0, x1, y1 = c.box
        def x_of(ago, c=c, x0=x0, x1=x1):
            return x1 - ago / c.seconds_per_px if c.newest_right else \
                x0 + ago / c.seconds_per_px
        xa, xb = sorted((min(max(x_of(t_new), x0), x1), min(max(x_of(t_old), x0), x1)))
        if size and xb > xa:
            boxes.append([round(xa / size[0], 4), round(y0 / size[1], 4),
                          round(xb / size[0], 4), round(y1 / size[1], 4)])
    uncharted = sorted(set(gpus or {}) - set(order))
    if uncharted:
        text = (f"{text} (GPU{'s' if len(uncharted) > 1 else ''} "
                f"{', '.join(map(str, uncharted))} of the header: no chart line read)")
    unseen = [g for g in order if g not in loads]
    if unseen:
        their = "its line" if len(unseen) == 1 else "their lines"
        text = (f"{text} (GPU{'s' if len(unseen) > 1 else ''} "
                f"{', '.join(map(str, unseen))} left out: {their} seen in less than "
                f"{MIN_SEEN_SHARE:.0%} of this stretch)")
    return {"from_s_ago": round(t_old, 2), "to_s_ago": round(t_new, 2),
            "gpus": sorted(loads), "loads": {g: round(x, 1) for g, x in loads.items()},
            "verdict": v,
            "text": f"{t_old:.0f}-{t_new:.0f} s before the newest sample"
                    f"{' (times assumed: ticks not read)' if assumed else ''} (GPUs "
                    f"{', '.join(map(str, sorted(loads)))}, nvtop GPU %): {text}",
            "boxes": boxes}
