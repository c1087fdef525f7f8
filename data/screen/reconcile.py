"""A screen's GPU readings made sound: indices put back in order, readings of one picture by
Tesseract and by the character grid made one, and values no GPU can print dropped.

Each function changes the ``GpuReading`` list it is given in place (or returns a new one,
``_merge``) and returns notes saying what it changed; ``data.screen.read`` calls them in turn.
"""

from __future__ import annotations

from tealeaves.data.screen.values import GpuReading

#: Confidence given to a value the other GPUs contradict, or to a renumbered index's values.
DOUBTFUL = 0.25


def _renumber(gpus: list[GpuReading]) -> list[str]:
    """Put back, in place, GPU indices out of order: every tool lists its GPUs by index, so
    a run read as 8, 1, 2, ... 7 was 0, 1, 2, ... 7 (a 0 read as an 8).  Only when one index
    breaks an otherwise consecutive run; its values become doubtful (``DOUBTFUL``).  Returns
    notes saying what was changed, and duplicate indices (two screens in one picture?)."""
    idx = [g.gpu for g in gpus]
    notes = []
    if len(idx) >= 3 and len(set(idx)) == len(idx):
        for k, g in enumerate(gpus):
            want = (idx[k + 1] - 1) if k + 1 < len(idx) else idx[k - 1] + 1
            others = [i for j, i in enumerate(idx) if j != k]
            base = others[0] - (1 if k == 0 else 0)
            run = list(range(base, base + len(idx)))
            if idx[:k] + [want] + idx[k + 1:] == run and g.gpu != want:
                notes.append(f"GPU {g.gpu} read out of order: taken as GPU {want}")
                g.gpu = want
                g.confidence = dict.fromkeys(g.confidence, DOUBTFUL)
                break
    dup = sorted({i for i in idx if idx.count(i) > 1})
    if dup:
        notes.append(f"GPU {', '.join(map(str, dup))} read more than once (two screens in "
                     f"one picture?): each reading kept; split the picture into regions to "
                     f"judge each screen")
    return notes


def _agree(gpus: list[GpuReading]) -> list[str]:
    """Mark doubtful, in place, a power limit or memory total that differs from what most of
    the GPUs read (one machine's GPUs share them: 788 W among seven 700 W limits is a
    misread digit); returns notes naming them."""
    notes = []
    for key in ("power_limit_w", "mem_total_mib"):
        vals = [g.values[key] for g in gpus if key in g.values]
        if len(vals) < 3:
            continue
        common = max(set(vals), key=vals.count)
        if vals.count(common) * 2 <= len(vals):
            continue
        for g in gpus:
            if key in g.values and g.values[key] != common:
                g.confidence[key] = min(g.confidence.get(key, 1.0), DOUBTFUL)
                notes.append(f"GPU {g.gpu} {key} {g.values[key]:g} differs from the other "
                             f"GPUs' {common:g}: doubtful")
    return notes


def _misfit(grid: list[GpuReading], ocr: list[GpuReading]) -> bool:
    """Whether the grid reader's GPUs contradict Tesseract's (a grid fitted half a cell off
    reads "Device 8 ... H288" for "Device 0 [NVIDIA H200]"): fewer than half of Tesseract's
    GPU indices read on the grid (of two or more), or fewer than half of the values both
    read surely (confidence 0.5 or more, at least four) within 1 % or 1 unit of each other."""
    if not grid or not ocr:
        return False
    theirs = {g.gpu: g for g in ocr}
    mine = {g.gpu for g in grid}
    if len(theirs) >= 2 and 2 * len(mine & set(theirs)) < len(theirs):
        return True
    n = agree = 0
    for g in grid:
        o = theirs.get(g.gpu)
        if o is None:
            continue
        for k, v in g.values.items():
            w = o.values.get(k)
            if w is None or min(g.confidence.get(k, 0), o.confidence.get(k, 0)) < 0.5:
                continue
            n += 1
            agree += abs(v - w) <= max(1.0, 0.01 * abs(w))
    return n >= 4 and 2 * agree < n


def _reindex(grid: list[GpuReading], ocr: list[GpuReading]) -> list[str]:
    """Give, in place, the grid reader's GPUs of a row the indices Tesseract read on that
    row, when the grid read one index twice there ("Device 3 ... Device 3 ... Device 5")
    and Tesseract read as many GPUs on the row, each index once; or where the grid read an
    index Tesseract read nowhere, in the place of one the grid read nowhere.  A row is the GPUs whose
    boxes' centres share a height; they pair up left to right (the order printed).
    Returns notes saying what was changed."""
    def rows(gpus):
        out: dict[float, list[GpuReading]] = {}
        for g in gpus:
            if g.box is not None:
                out.setdefault(round((g.box[1] + g.box[3]) / 2, 2), []).append(g)
        return out

    theirs = rows(ocr)
    all_mine, all_theirs = {g.gpu for g in grid}, {g.gpu for g in ocr}
    notes = []
    for y, mine in rows(grid).items():
        idx = [g.gpu for g in mine]
        other = next((o for yy, o in theirs.items() if abs(yy - y) <= 0.01), None)
        if other is None or len(other) != len(mine) or \
                len({g.gpu for g in other}) != len(other):
            continue
        twice = len(set(idx)) < len(idx)
        for g, o in zip(mine, other, strict=True):
            if g.gpu == o.gpu:
                continue
            if twice:
                notes.append(f"GPU {g.gpu} read twice on one row: taken as GPU {o.gpu}, "
                             f"as the OCR read it")
            elif g.gpu not in all_theirs and o.gpu not in all_mine:
                # ("Device?8" on the grid where Tesseract read "Device 0": the grid's index
                # appears nowhere in Tesseract's reading, nor Tesseract's in the grid's)
                notes.append(f"GPU {g.gpu} read by the character grid where the OCR read "
                             f"GPU {o.gpu} (no GPU {g.gpu} elsewhere): taken as GPU {o.gpu}")
            else:
                continue
            g.gpu = o.gpu
    return notes


#: In ``_merge``, a value of the steadier reading less sure than this ...
YIELD_BELOW = 0.3
#: ... gives way to the other reading's value of the same GPU when that one is this sure.
YIELD_TO = 0.6


def _merge(first: list[GpuReading], second: list[GpuReading]) -> list[GpuReading]:
    """The GPUs of two readings of one picture (``first`` the steadier): ``first``'s GPUs,
    every one of them (an index read twice there is two screens, both kept), each value
    missing there (or read less sure than ``YIELD_BELOW`` where ``second`` is at least
    ``YIELD_TO`` sure) taken from ``second``'s GPU of that index on the same row
    (``_same_place``: a value left blank is never filled from another row); ``second``'s GPUs of other
    indices added (only the first of an index: a duplicate there is a misread index), unless
    on a row ``first`` read (the same GPU, its index misread: ``_same_row``)."""
    by_index: dict[int, GpuReading] = {}
    for g in second:
        by_index.setdefault(g.gpu, g)
    out = list(first)
    for g in out:
        # only the same GPU's row fills a value: a blank (N/A) of GPU 1 never takes the
        # power of GPU 0's row that the OCR misread as GPU 1
        other = next((o for o in second if o.gpu == g.gpu and _same_place(o, g)), None)
        if other is not None:
            # a value ``first`` is unsure of (a glyph it never learned, read as a digit:
            # "47°C" as "477C") yields to ``second``'s sure reading
            got = {k: v for k, v in other.values.items() if k not in g.blank}
            keep = {k: v for k, v in g.values.items()
                    if not (k in other.values and g.confidence.get(k, 1.0) < YIELD_BELOW
                            and other.confidence.get(k, 0.0) >= YIELD_TO)}
            g.confidence = {**other.confidence,
                            **{k: c for k, c in g.confidence.items() if k in keep}}
            g.values = {**got, **keep}
            g.blank = tuple(k for k in g.blank if k not in g.values)
    have = {g.gpu for g in out}
    out += [g for k, g in by_index.items() if k not in have and not _same_row(g, first)]
    return sorted(out, key=lambda g: g.gpu)


def _same_place(g: GpuReading, other: GpuReading) -> bool:
    """Whether ``g`` and ``other`` may be one GPU's row: on one row (``_same_row``), or
    either placed nowhere."""
    return g.box is None or other.box is None or _same_row(g, [other])


def _same_row(g: GpuReading, others: list[GpuReading]) -> bool:
    """Whether ``g``'s values line is where one of ``others``' is (its centre inside that
    box's height): one GPU, its index read two ways."""
    if g.box is None:
        return False
    cy = (g.box[1] + g.box[3]) / 2
    return any(o.box is not None and o.box[1] <= cy <= o.box[3] for o in others)


#: The largest reading of each value a GPU prints (the schema's unit limits: 100 %, 5 kW,
#: 10 TB of memory; 150 °C is past any GPU's shutdown temperature).
_HIGH = {"util_pct": 100.0, "power_w": 5000.0, "power_limit_w": 5000.0,
         "mem_used_mib": 1e13 / 2**20, "mem_total_mib": 1e13 / 2**20, "temp_c": 150.0,
         # nvtop's header: clocks (MHz), fan and codec %, PCIe generation 1-7 (0 is no
         # reading: nvtop prints no link it cannot read), width to x32, 1 TB/s per direction
         "sm_clock_mhz": 5000.0, "mem_clock_mhz": 20000.0, "fan_pct": 100.0, "pcie_gen": 7.0,
         "pcie_width": 32.0, "pcie_rx_bytes_per_s": 1e12, "pcie_tx_bytes_per_s": 1e12,
         "enc_pct": 100.0, "dec_pct": 100.0}


def _plausible(gpus: list[GpuReading]) -> list[str]:
    """Drop, in place, values no GPU can print (over ``_HIGH``; draw over 1.25x its limit,
    more than a reading spikes; memory used over the total: a misread digit, as ``4911 W``
    for ``491 W`` cut at the edge); return what was dropped, as ``"GPU 0 power_w 4911"``."""
    out = []
    for g in gpus:
        v = g.values
        bad = {k for k, x in v.items() if not 0 <= x <= _HIGH[k]}
        if "power_w" in v and "power_limit_w" in v and v["power_w"] > 1.25 * v["power_limit_w"]:
            bad.add("power_w")
        if "mem_used_mib" in v and "mem_total_mib" in v and \
                v["mem_used_mib"] > v["mem_total_mib"] * 1.001:
            bad.add("mem_used_mib")
        for k in sorted(bad):
            out.append(f"GPU {g.gpu} {k} {v.pop(k):g}")
            g.confidence.pop(k, None)
    return out
