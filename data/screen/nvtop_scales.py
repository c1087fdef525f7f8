"""What the charts of one nvtop picture share: the terminal's row lattice (``_cell_height``,
``_to_levels``), one time scale and the rows of a row of charts (``_share_scales``), and
nvtop's one chart per GPU, which fills in what a misread legend leaves out
(``_one_gpu_per_chart``)."""

from __future__ import annotations

import itertools
import re

import numpy as np

from tealeaves.data.screen.nvtop_chart import _MEM_WORD, Chart, ChartSeries, _ages
from tealeaves.data.screen.nvtop_lines import _levels


def lattice_agreement(pos: np.ndarray, pitches: np.ndarray) -> np.ndarray:
    """How well positions ``pos`` (n,) px sit on a lattice of each pitch of ``pitches`` (m,)
    px, whatever its phase: the Rayleigh statistic ``|mean(exp(2 pi i pos / p))|`` (1 all on
    it, about ``1/sqrt(n)`` at random; Mardia & Jupp, *Directional Statistics*, 2000, §6.3).
    Returns (m,) in 0-1.  A terminal's text sits on its cell lattice, so the pitch they agree
    on is its cell width or row height."""
    return np.abs(np.exp(2j * np.pi * pos[None, :] / pitches[:, None]).mean(axis=1))


def _cell_height(words) -> float | None:
    """The terminal's text row height, px: every line of a terminal's text sits on the row
    lattice, so the pitch (0.9-3.2 glyph heights: a font may space its rows twice its
    glyphs' height apart) whose phases the words' centre rows agree on best
    (``lattice_agreement``, as ``nvtop_samples.cell_width`` for columns).
    A pitch's halves and thirds fit its lattice as well, so of the pitches within 85 % of the
    best agreement the largest peak is taken.  None without 8 words."""
    ys = np.asarray([w.top + w.height / 2 for w in words if len(w.text) >= 2], dtype=float)
    if len(ys) < 8:
        return None
    gh = float(np.median([w.height for w in words if len(w.text) >= 2]))
    pitches = np.arange(0.9 * gh, 3.2 * gh, 0.002 * gh)
    agree = lattice_agreement(ys, pitches)
    ok = np.flatnonzero(agree >= 0.85 * agree.max())
    breaks = np.flatnonzero(np.diff(ok) > 1)
    peak = ok[breaks[-1] + 1:] if len(breaks) else ok  # the largest pitches' run
    return float(pitches[peak[np.argmax(agree[peak])]])


def _to_levels(group: list[Chart], cell_h: float) -> None:
    """Read, in place, each plotted value as the middle of the range nvtop drew it for.
    nvtop's ``nvtop_line_plot`` (src/plot.c) draws a value ``v`` on the text row
    ``rows - floor(v / (100 / rows))`` of a plot ``rows + 1`` rows high: a line on the k-th
    row from the bottom stands for ``[k, k + 1) * 100 / rows`` (the top row for 100).  The
    rows are the plot's height over the text row height ``cell_h`` (``_cell_height``), the
    one of that and its two neighbours whose lattice from the 0 % row to the 100 % row the
    line rows seen fit best; where none fits them within a fifth of a row, the values stay
    as read.  ``group``: charts of one height (one rows count for all, fitted on all their
    lines)."""
    span = float(np.median([c.box[3] - c.box[1] for c in group]))
    series = [s for c in group for s in c.series]
    vals = np.concatenate([s.values for s in series]) if series else np.array([])
    vals = vals[np.isfinite(vals)]
    if span <= 0 or not len(vals):
        return
    seen = np.unique(np.round(span * (1 - vals / 100.0)))  # px below the 100 % row
    best = None
    guess = round(span / cell_h)
    for rows in range(max(2, guess - 1), guess + 2):
        cell = span / rows
        off = np.abs(seen / cell - np.round(seen / cell)) * cell
        score = float(np.percentile(off, 80))
        if best is None or score < best[0]:
            best = (score, rows)
    if best is None or best[0] > 0.2 * span / best[1]:
        return
    rows = best[1]
    inc = 100.0 / rows
    for s in series:
        k = np.round(s.values / inc)
        s.values = np.where(np.isfinite(s.values),
                            np.where(k >= rows, 100.0, (np.clip(k, 0, rows) + 0.5) * inc),
                            np.nan)
    for c in group:
        c.rows = rows
        c.notes.append(f"each value read as the middle of its text row's range (nvtop draws "
                       f"a value on row floor(value / {inc:.1f} %) of {rows} above 0 %)")


def _share_scales(charts: list[Chart]) -> None:
    """What one chart of a picture reads holds for the others: nvtop plots every chart with
    one update interval and one column per sample, so a chart whose time ticks were not read
    takes the seconds per pixel and direction the others' ticks agree on; charts side by side
    share their rows, so each takes its row's median 100 % and 0 % rows (a chart whose 100
    and 0 ticks were both missed is otherwise off by a row).  The values and ages are
    recomputed; the chart's notes say what was borrowed.  Charts whose ticks read seconds
    per pixel apart (``SCALE_AGREE``) take those most of them agree on; where no majority
    agrees, every chart's time scale is ``"ticks disagree"`` (no stretches are judged)."""
    read = [c for c in charts if c.interval_source == "ticks"]
    if len(read) >= 2:
        med = float(np.median([r.seconds_per_px for r in read]))
        agree = [r for r in read if abs(r.seconds_per_px - med) <= SCALE_AGREE * med]
        if len(agree) * 2 <= len(read):
            span = f"{min(r.seconds_per_px for r in read):.3f}-" \
                   f"{max(r.seconds_per_px for r in read):.3f}"
            for c in charts:
                c.interval_source = "ticks disagree"
                c.notes.append(f"the charts' time ticks disagree ({span} s per pixel; nvtop "
                               f"draws every chart on one scale): their times cannot be told")
            read = []
        else:
            sec = float(np.median([r.seconds_per_px for r in agree]))
            for c in read:
                if c not in agree:
                    c.notes.append(f"its time ticks read {c.seconds_per_px:.3f} s per pixel "
                                   f"against the other charts' {sec:.3f}: taken as theirs")
                    c.newest_s_ago = 0.0
                    _borrow_scale(c, agree)
            read = agree
    for c in charts:
        if c.interval_source == "default" and read:
            c.notes = [n for n in c.notes if not n.startswith("time ticks not read")]
            _borrow_scale(c, read)

    for c in charts:
        row = [r for r in charts if abs(r.box[1] - c.box[1]) < 0.5 * (c.box[3] - c.box[1])]
        if len(row) < 3:
            continue
        y100 = int(np.median([r.box[1] for r in row]))
        y0 = int(np.median([r.box[3] for r in row]))
        x0, o100, x1, o0 = c.box
        if (y100, y0) == (o100, o0) or y0 <= y100:
            continue
        for sr in c.series:  # the row each value stood for, read on the row's scale
            level = o0 - sr.values / 100.0 * (o0 - o100)
            sr.values = np.clip((y0 - level) / (y0 - y100) * 100.0, 0, 100)
        c.box = (x0, y100, x1, y0)


#: ``_share_scales``: charts' seconds per pixel within this share of their median agree.
SCALE_AGREE = 0.08


def _borrow_scale(chart: Chart, donors: list[Chart]) -> None:
    """Give ``chart`` the seconds per pixel (median) and direction (majority) of the
    ``donors`` whose ticks were read, its series' ages recomputed."""
    chart.seconds_per_px = float(np.median([r.seconds_per_px for r in donors]))
    chart.newest_right = sum(r.newest_right for r in donors) * 2 >= len(donors)
    chart.interval_source = "ticks (another chart)"
    ago = _ages(chart.box[0], chart.box[2], chart.seconds_per_px, chart.newest_right,
                chart.newest_s_ago)
    for sr in chart.series:
        sr.seconds_ago = ago


def _colour_of(series: list[ChartSeries], metric: str) -> tuple | None:
    """The one colour the series whose legend was read as ``metric`` share (within 40 per
    channel), or None when they differ (a chart of several GPUs) or there are none."""
    pat = _MEM_WORD if metric == "mem_util" else r"^GPU\d+\s*%$"
    cs = [np.asarray(s.colour, dtype=float) for s in series
          if re.search(pat, s.legend, re.IGNORECASE)]
    if not cs or any(np.abs(c - cs[0]).max() > 40 for c in cs):
        return None
    return tuple(int(v) for v in np.median(cs, axis=0))


def _one_gpu_per_chart(a: np.ndarray, charts: list[Chart],
                       header: set[int] | None = None) -> None:
    """nvtop's layout of one chart per GPU (in device order, left to right, top to bottom,
    each with the same two colours) fills what a legend misread leaves out: a series' metric
    from its colour, a lost GPU index from the chart's place, and a ``GPU %`` line whose
    legend was not read at all, digitised in that colour.  Applied only when the read legends
    agree with that layout (each chart names at most its own place's GPU: consecutive
    indices along each row, a row cut by the picture's edge placed by the indices read in
    it; one chart naming no GPU of its place among at least two that do is a misread
    legend, renamed and said, unless the ``header`` shows the GPU it names (with a header
    that shows the place's GPU, one chart that does suffices)."""
    if len(charts) < 2:
        return
    series = [s for c in charts for s in c.series]
    util, mem = _colour_of(series, "gpu_util"), _colour_of(series, "mem_util")
    if util is None or mem is None or np.abs(np.subtract(util, mem)).max() <= 40:
        return
    rows = _chart_rows(charts)
    # each row's charts are consecutive GPUs; the row's offset from the indices read in it
    # (a row cut by the picture's edge starts where its first read index says), else the
    # row before it continued
    # (a series' metric from its colour first: a legend read "nen%" is a mem% all the same)
    for s in series:
        near = {m: np.abs(np.subtract(s.colour, col)).max() for m, col in
                (("gpu_util", util), ("mem_util", mem))}
        best = min(near, key=near.get)
        if near[best] <= 40:
            s.metric = best
    placed = _places(charts, rows, header)
    if placed is None:
        return  # not nvtop's one-GPU-per-chart layout as read
    places, agree = placed
    if len({p for p, _c in places}) < len(places) or min(p for p, _c in places) < 0:
        return
    # at most one chart naming no GPU of its place, among at least two that do: that
    # chart's index, and any second index a chart's legends give, is a misread ('GPU8')
    lost = [c for rank, c in places if any(s.gpu is not None for s in c.series)
            and all(s.gpu != rank for s in c.series)]
    if len(lost) > 1 or agree < (1 if header else 2):  # (the header confirms the places)
        return  # not nvtop's one-GPU-per-chart layout as read
    if header and any(s.gpu in header or rank not in header for rank, c in places
                      for s in c.series if s.gpu is not None and s.gpu != rank):
        return  # the header shows that GPU: devices hidden in nvtop's setup, not a misread
    _rename_misread(places)
    _fill_lost_util(a, places, util)


def _chart_rows(charts: list[Chart]) -> list[list[Chart]]:
    """The charts in rows, top to bottom: a chart whose top is within half a chart's height
    of a row's first chart's is in that row."""
    rows: list[list[Chart]] = []
    for c in sorted(charts, key=lambda c: c.box[1]):
        if rows and abs(c.box[1] - rows[-1][0].box[1]) < 0.5 * (c.box[3] - c.box[1]):
            rows[-1].append(c)
        else:
            rows.append([c])
    return rows


def _places(charts: list[Chart], rows: list[list[Chart]],
            header: set[int] | None) -> tuple[list[tuple[int, Chart]], int] | None:
    """Each chart's GPU by its place in nvtop's one-chart-per-GPU layout: ``(places, agree)``,
    ``places`` ``(gpu, chart)`` row by row, ``agree`` how many read indices agree with them;
    None where two charts of a row take one slot (not that layout as read)."""
    # a chart's place in its row from where it stands (a chart not found leaves its slot
    # empty): the row's slots are its charts' width plus the gap between charts
    x_lo, x_hi = min(c.box[0] for c in charts), max(c.box[2] for c in charts)
    gaps = [b.box[0] - a.box[2] for r in rows for a, b in
            itertools.pairwise(sorted(r, key=lambda c: c.box[0]))]
    gap = float(np.median(gaps)) if gaps else 0.0
    places: list[tuple[int, Chart]] = []
    start, agree = 0, 0
    for r in rows:
        r = sorted(r, key=lambda c: c.box[0])
        pitch = float(np.median([c.box[2] - c.box[0] for c in r])) + gap
        slots = max(len(r), round((x_hi - x_lo + gap) / pitch))
        cols = [round((c.box[0] - x_lo) / pitch) for c in r]
        if len(set(cols)) < len(cols):
            return None  # not nvtop's one-GPU-per-chart layout as read
        named = [{s.gpu for s in c.series if s.gpu is not None} for c in r]
        offs = [g - j for j, gs in zip(cols, named, strict=True) for g in gs]
        if offs:  # the row's offset: one that puts its charts on GPUs the header shows,
            # then the one most of its read indices give, then the rows before continued

            def rank_of(o, offs=offs, cols=cols, go_on=start):
                shown = not header or all(o + j in header for j in cols)
                return (shown, offs.count(o), o == go_on, -o)

            start = max({*offs, start}, key=rank_of)
            agree += offs.count(start)
        places += [(start + j, c) for j, c in zip(cols, r, strict=True)]
        start += slots
    return places, agree


def _rename_misread(places: list[tuple[int, Chart]]) -> None:
    """Clear, in place, each legend index that is not its chart's place's GPU, noted."""
    for rank, c in places:
        wrong = sorted({s.gpu for s in c.series if s.gpu is not None and s.gpu != rank})
        for s in c.series:
            if s.gpu is not None and s.gpu != rank:
                s.gpu = None
        if wrong:
            c.notes.append(f"legend read as GPU {', '.join(map(str, wrong))} at GPU {rank}'s "
                           f"place among the charts (one chart per GPU, in order): taken as "
                           f"GPU {rank}")


def _fill_lost_util(a: np.ndarray, places: list[tuple[int, Chart]], util: tuple) -> None:
    """Give, in place, each series without a GPU its chart's place's, and a chart without a
    ``GPU %`` series the line read in the other charts' ``GPU %`` colour ``util``."""
    for rank, c in places:
        for s in c.series:
            if s.gpu is None:
                s.gpu = rank
        if not any(s.metric == "gpu_util" for s in c.series):
            x0, y100, x1, y0 = c.box
            level = _levels(a, util, x0, x1, y100 - 4, y0 + 4)
            ago = _ages(x0, x1, c.seconds_per_px, c.newest_right, c.newest_s_ago)
            vals = np.clip((y0 - level) / max(1.0, y0 - y100) * 100.0, 0, 100)
            c.series.insert(0, ChartSeries(f"GPU{rank} %", rank, "gpu_util", util, ago, vals))
            c.notes.append(f"GPU{rank} %'s legend not read: its line is read in the colour of "
                           f"the other charts' GPU % (nvtop's one chart per GPU, chart {rank})")
