"""What the figures draw, made from what the store and the history hold: the one place that turns
samples, windows and server cells into series (no plotly objects, no store access).

- ``binning``: samples binned per ``bin_s`` and GPU (``bin_lanes``), each GPU's share of a
  window's load, the hot members, the ribbon's phase shares and mixed verdicts, the server
  lane's series and ``window_s`` cells;
- ``downsample``: range views, a stretch of the history turned into at most a few hundred
  points per trace (MinMaxLTTB for lines, bucketed phase shares for the ribbon; ``TraceData``).
"""
