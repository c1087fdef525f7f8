"""nvtop's chart lines read as its samples (``data/screen/nvtop_samples.py``), monochrome lines
named by how they move, and the row height on fonts with wide line spacing."""

from __future__ import annotations

import numpy as np
import pytest

from tealeaves.data.screen.nvtop_chart import Chart, ChartSeries
from tealeaves.data.screen.nvtop_names import name_lines
from tealeaves.data.screen.nvtop_samples import _round_interval, samples_of, update_interval
from tealeaves.data.screen.nvtop_scales import _cell_height

CYAN = (0, 200, 200)


def _step_chart(levels, cell=10, n_series=2, interval=1.0, phase=5):
    """A picture of one nvtop line drawn as nvtop does (oldest sample left): sample j of
    ``levels`` from its stroke at ``phase + j * cell * n_series`` to the next; rows 10-110
    (row = 110 - value), and the line read per pixel column as ``_levels`` would near the
    strokes (the mean of a stroke, a crossing's '+' a cell wide at 12 %)."""
    width = cell * n_series
    w = phase + width * len(levels)
    a = np.zeros((130, w, 3), dtype=np.int16)
    per_px = np.full(w, np.nan)
    for j, v in enumerate(levels):
        x0 = phase + j * width
        a[110 - v, x0:x0 + width] = CYAN
        per_px[x0:x0 + width] = v
        if j:
            lo, hi = sorted((110 - levels[j - 1], 110 - v))
            a[lo:hi + 1, x0] = CYAN
            per_px[x0 - 2:x0 + cell // 2] = (levels[j - 1] + v) / 2  # what a stroke reads as
    per_px[:phase] = levels[0]
    chart = Chart((0, 10, w - 1, 110), interval / width, "ticks", True)
    ago = (w - 1 - np.arange(w)) * chart.seconds_per_px
    chart.series = [ChartSeries("GPU0 %", 0, "gpu_util", CYAN, ago, per_px)]
    chart.series += [ChartSeries("GPU0 mem%", 0, "mem_util", (200, 200, 0), ago,
                                 np.full(w, 12.0))][:n_series - 1]
    return a, chart


def test_a_line_is_read_as_one_value_per_sample_aged_in_whole_intervals():
    levels = [0] * 6 + [52] + [100] * 5 + [90, 100, 100]
    a, chart = _step_chart(levels)
    samples_of(a, [chart], 10.0, 16.0)
    s = chart.series[0]
    assert chart.interval_s == pytest.approx(1.0)
    # the stroke's mean and the crossing's '+' are not a sample's level
    assert s.values[-len(levels):].tolist() == levels
    # one age per sample: the newest 0 s, each older one an interval more
    assert np.allclose(s.seconds_ago[-len(levels):], np.arange(len(levels))[::-1] * 1.0)
    assert "one every 1 s" in chart.notes[-1]


def test_newest_left_counts_samples_from_the_left():
    levels = [0, 0, 80, 80, 80, 10]
    a, chart = _step_chart(levels)
    chart.newest_right = False
    samples_of(a, [chart], 10.0, 16.0)
    s = chart.series[0]
    assert s.values[-len(levels):].tolist() == levels
    assert s.seconds_ago[0] == 0.0 and np.all(np.diff(s.seconds_ago) == 1.0)


def test_a_chart_whose_interval_cannot_be_told_keeps_its_pixel_columns():
    a, chart = _step_chart([0, 50, 50])
    chart.seconds_per_px = 0.567 / 20  # picture 24's misread strip: 0.567 s a sample
    before = chart.series[0].values.copy()
    samples_of(a, [chart], 10.0, 16.0)
    assert chart.interval_s is None
    assert np.array_equal(chart.series[0].values, before, equal_nan=True)


def test_the_interval_rounds_to_what_nvtop_is_run_with():
    assert _round_interval(1.052) == (1.0, pytest.approx(0.052))  # not 1.1: a tick strip off
    assert _round_interval(0.498)[0] == 0.5 and _round_interval(2.03)[0] == 2.0
    assert _round_interval(1.5)[0] == 1.5 and _round_interval(1.17)[0] == 1.2  # tenths
    assert _round_interval(0.567) is None and _round_interval(0.73) is None
    # one legend lost: the series count that rounds (nvtop's two, GPU % and mem%)
    _a, chart = _step_chart([0, 50], n_series=1)
    chart.seconds_per_px = 0.025  # 0.5 s over two 10-px cells
    assert update_interval(chart, 10.0) == (0.5, 2)


def _mono(a_vals, b_vals):
    ago = np.arange(len(a_vals), dtype=float)[::-1]
    c = Chart((0, 0, len(a_vals) - 1, 10), 1.0, "ticks", True, monochrome="unnamed")
    c.series = [ChartSeries("GPU0 %", 0, None, (255, 255, 255), ago, np.array(a_vals, float)),
                ChartSeries("GPU0 mem%", 0, None, (255, 255, 255), ago,
                            np.array(b_vals, float))]
    return c


def test_monochrome_lines_the_header_cannot_tell_are_named_by_how_they_move():
    """Picture 08: the header reads GPU 0 % and MEM 0.4 %, both lines end at 0; the line that
    steps 0-87-93-100-25-0 is GPU %, the one at 12 % until the memory is freed is mem%."""
    busy = [0, 0, 88, 94, 94, 100, 100, 25, 0, 0, 0, 0]
    mem = [12, 12, 12, 12, 12, 12, 12, 12, 12, 0, 0, 0]
    c = _mono(mem, busy)  # the upper line in legend order is the memory
    notes = name_lines([c], {0: {"util_pct": 0, "mem_used_mib": 615, "mem_total_mib": 143771}})
    assert c.monochrome == "named" and "by how they move" in notes[0]
    gpu = next(s for s in c.series if s.metric == "gpu_util")
    assert gpu.values.tolist() == busy
    # lines that move alike stay unnamed, GPU % only where they run together
    c2 = _mono([0, 50, 0, 50, 0, 0], [0, 40, 0, 40, 0, 0])
    notes = name_lines([c2], {0: {"util_pct": 0, "mem_used_mib": 615,
                                  "mem_total_mib": 143771}})
    assert c2.monochrome == "unnamed" and "change level alike" in notes[0]


def test_row_height_of_a_font_with_wide_line_spacing():
    """Picture 07's font: glyphs 10 px high on rows 20 px apart (was None: only spacings
    under 1.8 glyph heights counted); lines two and three rows apart, and a chart's words
    between rows (picture 35 read 13.7 for 19), do not change it."""
    from tealeaves.data.screen.grid import Word

    rows = [0, 1, 2, 4, 5, 6, 9, 10, 13, 16, 22, 23]
    words = [Word(t, 90.0, 10.0 * k, 13 + 20 * r - 5 + (k % 3) * 0.5, 40.0, 10.0, (1, 1, 1))
             for r in rows for k, t in enumerate(("Device", "GPU", "mem%"))]
    words.append(Word("75", 90.0, 5.0, 13 + 20 * 7.4 - 5, 16.0, 10.0, (1, 1, 1)))
    assert _cell_height(words) == pytest.approx(20.0, abs=0.3)
    assert _cell_height(words[:5]) is None  # too few words to tell


def test_every_chart_takes_the_interval_most_charts_read():
    """nvtop has one update interval.  A chart whose legends were misread (four read where
    nvtop drew two: a line's dashes read as legend words) alone reads twice it; beside
    charts that agree it takes theirs, with the series count that gives it."""
    def misread(chart):
        chart.series = chart.series + [ChartSeries(f"GPU0 {k}", 0, None, (9, 9, 9),
                                                   chart.series[0].seconds_ago,
                                                   np.full(len(chart.series[0].values), np.nan))
                                       for k in "ab"]

    a, alone = _step_chart([0, 0, 60, 60, 60, 0])
    misread(alone)
    samples_of(a, [alone], 10.0, 16.0)
    assert alone.interval_s == 2.0
    made = [_step_chart([0, 0, 60, 60, 60, 0]) for _ in range(3)]
    misread(made[2][1])
    samples_of(made[0][0], [c for _a, c in made], 10.0, 16.0)  # (the same picture each)
    assert [c.interval_s for _a, c in made] == [1.0, 1.0, 1.0]
    assert made[2][1].series[0].values[-6:].tolist() == [0, 0, 60, 60, 60, 0]
    assert "2 series interleaved" in made[2][1].notes[-1]


def test_the_header_vetoes_naming_by_movement():
    """A memory line that steps ten times beside an idle GPU's flat line (the header: GPU 0 %,
    MEM 0.4 %, too close to name by): the busier line ends at 15 %, not the header's 0 %,
    so it is not named GPU %."""
    mem = [10, 20, 10, 20, 10, 20, 10, 20, 10, 20, 15, 15]
    c = _mono([0.0] * 12, mem)
    notes = name_lines([c], {0: {"util_pct": 0, "mem_used_mib": 615, "mem_total_mib": 143771}})
    assert c.monochrome == "unnamed" and "not the header's GPU %" in notes[0]


def test_a_line_seen_nowhere_is_not_read_off_the_other():
    """A GPU % line erased or recoloured (not in its legend's colour anywhere) is missing,
    not hidden under the mem% line: its values stay unknown (were the mem% line's 12 %)."""
    from tealeaves.data.screen.nvtop_lines import _hidden_under

    ago = np.arange(50, dtype=float)
    gpu = ChartSeries("GPU0 %", 0, "gpu_util", CYAN, ago, np.full(50, np.nan))
    mem = ChartSeries("GPU0 mem%", 0, "mem_util", (200, 200, 0), ago, np.full(50, 12.0))
    _hidden_under([gpu, mem], np.zeros(50, dtype=bool))
    assert np.isnan(gpu.values).all() and gpu.hidden == 0
    # a line seen in part is read off the other where that one is drawn over it
    gpu.values[:25] = 95.0
    _hidden_under([gpu, mem], np.zeros(50, dtype=bool))
    assert (gpu.values[25:] == 12.0).all() and gpu.hidden == 25


def test_without_time_ticks_a_sample_is_two_cells_of_nvtops_default_interval():
    """Time ticks read on no chart: nvtop's default 1 s over a sample two cells wide (was 1 s
    per 8 px whatever the font: a 57 s chart read as 143 s)."""
    a, chart = _step_chart([0, 0, 70, 70, 0, 0])
    chart.interval_source, chart.seconds_per_px = "default", 1.0 / 8
    samples_of(a, [chart], 10.0, 16.0)
    assert chart.seconds_per_px == pytest.approx(0.05) and chart.interval_s == 1.0
    assert chart.series[0].values[-6:].tolist() == [0, 0, 70, 70, 0, 0]
    assert chart.series[0].seconds_ago[-6:].tolist() == [5, 4, 3, 2, 1, 0]


def test_a_legend_whose_g_the_line_ran_into_is_still_a_legend():
    """Picture 17: the line at 95 % runs into 'GPU0 mem%' and Tesseract reads 'PU' 'mem%'; a
    bare 'PU' with no legend ending after it stays noise."""
    from tealeaves.data.screen.grid import Word
    from tealeaves.data.screen.nvtop_lines import _legends

    a = np.zeros((200, 400, 3), dtype=np.int16)
    a[40:50, 300:380] = (205, 205, 0)  # the legend's yellow glyphs
    w = [Word("PU", 90.0, 300.0, 40.0, 18.0, 10.0, (1, 1, 1)),
         Word("mem%", 90.0, 330.0, 40.0, 36.0, 10.0, (1, 1, 1))]
    got = _legends(a, w, 10, 390, 30, 190, 0.0, 9.0)
    assert [g[0] for g in got] == ["GPU? mem%"]
    assert _legends(a, w[:1], 10, 390, 30, 190, 0.0, 9.0) == []
    # picture 37: '6PUa' then 'mem%————___|', a word run on into the line, taller and
    # centred 7 px higher than the word before it: still its "mem%"
    w = [Word("6PUa", 37.0, 300.0, 40.0, 36.0, 10.0, (1, 1, 1)),
         Word("mem%————___|", 17.0, 340.0, 25.0, 50.0, 25.0, (1, 1, 1))]
    got = _legends(a, w, 10, 390, 30, 190, 0.0, 9.0)
    assert len(got) == 1 and got[0][0].startswith("GPU?") and got[0][0].endswith("mem%")


def test_dots_of_the_frame_are_no_stroke_out_of_a_legend():
    from tealeaves.data.screen.nvtop_lines import _longest_runs

    ink = np.zeros((20, 3), dtype=bool)
    ink[[2, 9, 17], 0] = True  # three tick dots down the frame
    ink[5:9, 1] = True  # a stroke
    assert _longest_runs(ink).tolist() == [1, 4, 0]


def test_legend_words_are_only_on_the_plots_top_rows():
    """'PU1 %' read off a line mid-plot made a GPU 1 series (and 3 interleaved series: a
    1.5 s interval for 1 s)."""
    from tealeaves.data.screen.grid import Word
    from tealeaves.data.screen.nvtop_lines import _legends

    a = np.zeros((200, 400, 3), dtype=np.int16)
    a[100:110, 200:260] = CYAN
    w = [Word("PU1", 90.0, 200.0, 100.0, 27.0, 10.0, (1, 1, 1)),
         Word("%", 90.0, 240.0, 100.0, 9.0, 10.0, (1, 1, 1))]
    assert _legends(a, w, 10, 390, 30, 190, 0.0, 9.0) == []  # row 100 of 30-190: mid-plot
    w = [Word(t.text, t.conf, t.left, 34.0, t.width, t.height, t.line) for t in w]
    a[34:44, 200:260] = CYAN
    assert [g[0] for g in _legends(a, w, 10, 390, 30, 190, 0.0, 9.0)] == ["GPU1 %"]


def test_without_ticks_time_runs_away_from_the_legends():
    """nvtop writes its legends over the oldest samples: on the right with -r."""
    from tealeaves.data.screen.nvtop_samples import _assume_default

    _a, chart = _step_chart([0, 50, 50])
    chart.interval_source = "default"
    chart.legend_boxes = [(50.0, 12.0, 64.0, 20.0)]  # at the right end of a 65-px plot
    _assume_default(chart, 10.0)
    assert chart.newest_right is False and "away from the legends" in chart.notes[-1]
    assert chart.series[0].seconds_ago[0] == 0.0


def test_a_line_that_stepped_out_of_a_legends_rows_at_its_edge_is_not_held():
    """nvtop's corner column is the new level's first: a line at 100 % under the legend that
    steps to 92 % right at its edge shows a stroke from the legend's rows in that column;
    the level under the legend is not 92 % (it was held there: 31 columns read 92.5)."""
    from tealeaves.data.screen.nvtop_lines import _stepped_at_edge

    masked = np.zeros((120, 100, 3), dtype=np.int16)
    values = np.full(100, np.nan)
    values[60:] = 92.0  # row 110 - 92 = 18, under the legend's rows 8-15
    masked[18, 60:] = CYAN
    masked[8:19, 60] = CYAN  # the stroke up into the legend's rows
    scale = (-1.0, 110.0)
    assert _stepped_at_edge(masked, CYAN, values, (None, 60), 0, (8, 15), scale)
    masked[8:18, 60] = 0  # entered level, no stroke: held
    assert not _stepped_at_edge(masked, CYAN, values, (None, 60), 0, (8, 15), scale)
