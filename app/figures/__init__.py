"""Pure figure builders for the dashboard, the cluster view, the screenshots page and the
report: frames in, ``go.Figure``, ``Patch`` payloads or text out.

- ``geometry``: the lanes, rows, colours and trace order every figure shares;
- ``binning``: the data half (samples binned per GPU, shares of load, the windows' phase
  shares of time and mixed verdicts, server cells);
- ``points``: the points of every trace (``trace_points``), from bins, windows and cells;
- ``plot``: the plotly half (``build_figure``, traces, shapes, axes);
- ``extend``: what a page's figure receives after it (``extend_data``, ``range_update``);
- ``header``: the header's summary of the last windows and the hot set's text.

Nothing here touches a store, a clock or Dash callbacks.  The package re-exports the public
names of its modules, so ``from tealeaves.app import figures as F; F.build_figure`` works.
"""

from tealeaves.app.figures.extend import (  # noqa: F401
    extend_data,
    extend_point_count,
    extendable,
    range_update,
    typed_array,
)
from tealeaves.app.figures.geometry import (  # noqa: F401
    BAND_SCALE,
    COLUMN_DASH,
    COLUMN_SHORT,
    FIRST_LANE_ROW,
    GPU_COLORS,
    HEAT_COLORSCALE,
    HOT_COLOR,
    LABELLING_ROWS,
    LABELLING_TEXT,
    LANE_COLUMNS,
    LANES,
    MARKER_Y,
    MIN_SHARE_LOAD,
    MIXED_PATTERN,
    MIXED_PHASES,
    N_ROWS,
    PHASE_COLORS,
    PHASE_HELP,
    PREFILL_SIZES,
    RIBBON_HOT_BASE,
    RIBBON_HOT_HEIGHT,
    RIBBON_PHASES,
    RIBBON_ROW,
    SERVER_CELL_COLUMNS,
    SERVER_HOLD_S,
    SERVER_LINES,
    SHOT_COLOR,
    SHOT_Y,
    STRIP_ROW,
    Lane,
    Rows,
    ServerLine,
    band_slots,
    gpu_color,
    heat_rows,
    is_window_key,
    rows,
    trace_keys,
)
from tealeaves.app.figures.header import (  # noqa: F401
    HeaderSummary,
    certainty,
    fmt_value,
    header_summary,
    hot_counts,
    hot_set_text,
    range_summary,
)
from tealeaves.app.figures.plot import (  # noqa: F401
    band_axis,
    base_shapes,
    build_figure,
    fmt_span,
    heat_trace,
    partial_text,
    pauses_text,
    shot_lines,
    shot_points,
    shots_between,
)
from tealeaves.app.figures.points import (  # noqa: F401
    heat_blanks,
    heat_columns,
    labelling_points,
    share_axis_top,
    trace_points,
)
from tealeaves.app.figures.series.binning import (  # noqa: F401
    as_float,
    bin_index,
    bin_lanes,
    calibrated_rows,
    gpu_shares,
    hot_members,
    mixed_with,
    prefill_size_class,
    ribbon_shares,
    server_cells,
    server_series,
)
