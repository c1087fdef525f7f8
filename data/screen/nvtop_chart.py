"""nvtop's charts as digitised: ``Chart`` and ``ChartSeries``, the legend words as OCR reads
them, and the age of each pixel column (``_ages``); every ``nvtop_*`` module shares them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# "mem" of a mem% legend as OCR reads it ("mem", "men", "nen", "mom")
_MEM_WORD = r"[mn][eo][mn]"
# where a legend word ends: its "mem%" or its "%" (a line drawn right after it is read on)
_LEGEND_END = r"\s*(?:[_\W]?" + _MEM_WORD + r"[*_]?%?|[%*+])"
# "GPU" of a legend as OCR reads it: "GPU", "GpY", "PU" (the G lost)
_GPU_WORD = r"G?[Pp][UuVvYy]"

#: nvtop's default seconds between samples (``-d 10``: tenths of a second), used when the
#: picture's time ticks cannot be read.
DEFAULT_INTERVAL_S = 1.0
#: Tesseract's settings for the strip of time ticks: one line, only digits and ``s``.
TICK_OCR_CONFIG = "--psm 7 -c tessedit_char_whitelist=0123456789s"


@dataclass
class ChartSeries:
    """One plotted line of an nvtop chart, digitised.

    Attributes:
        legend: its legend as read (``GPU0 %``, ``GPU3 mem%``), or ``line N`` unread.
        gpu: the GPU index the legend names (None when unread).
        metric: ``gpu_util`` (``GPU%``) or ``mem_util`` (``mem%``), None when unread.
        colour: its RGB colour in the picture.
        seconds_ago: (n,) seconds before the newest sample, one per picture column read.
        values: (n,) the plotted percentage at each, NaN where the line is not seen.
        hidden: how many of those columns were read off the line drawn over it.
    """

    legend: str
    gpu: int | None
    metric: str | None
    colour: tuple[int, int, int]
    seconds_ago: np.ndarray
    values: np.ndarray
    #: columns whose value is the line drawn over this one (``_hidden_under``).
    hidden: int = 0


@dataclass
class Chart:
    """One chart box: where it is (pixels ``x0, y0, x1, y1`` of the plot area), its time
    step, the direction of time and its series; ``notes`` say what could not be told."""

    box: tuple[int, int, int, int]
    seconds_per_px: float
    interval_source: str
    newest_right: bool
    series: list[ChartSeries] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: seconds before the newest sample at the plot's newest edge (0 unless cropped).
    newest_s_ago: float = 0.0
    #: points of the value scale (0-100) the picture's edge cuts off, below and above (0
    #: unless cropped through the chart): a line there is unseen, its columns NaN.
    unseen_points: tuple[float, float] = (0.0, 0.0)
    #: a monochrome chart's lines: "" (coloured), "together" (not two lines of one GPU:
    #: read as one), "unnamed" (followed apart, which is which not yet told:
    #: ``name_lines``), "named".
    monochrome: str = ""
    #: the chart's text rows above its 0 % row (``_to_levels``), None where not found.
    rows: int | None = None
    #: the picture's edges that cut through the plot area ("bottom", "top", "right"): its
    #: lines may run where they are not seen, so no stretch is judged on them.
    cut_edges: tuple[str, ...] = ()
    #: what the 100 % and 0 % rows rest on (``_scale_rows``): 3 both ticks read, 2 one tick
    #: and the box's borders, 1 the first legend and the borders, 0 the ticks' line fit.
    scale_from: int = 0
    #: nvtop's update interval, s, where its samples were told apart
    #: (``nvtop_samples.to_samples``: one value per sample); None: one value per pixel column.
    interval_s: float | None = None
    #: the legends' boxes (x0, y0, x1, y1 px): their text is no line.
    legend_boxes: list[tuple] = field(default_factory=list)


def _ages(x0: int, x1: int, seconds_per_px: float, newest_right: bool,
          edge_s_ago: float = 0.0) -> np.ndarray:
    """Seconds before the newest sample of each pixel column ``x0..x1`` of a chart whose
    newest edge is ``edge_s_ago`` s old."""
    xs = np.arange(x0, x1 + 1)
    return edge_s_ago + ((x1 - xs) * seconds_per_px if newest_right else
                         (xs - x0) * seconds_per_px)
