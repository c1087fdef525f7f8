"""The Screenshots page: upload pictures, place them on the timeline, answer "prefill or decode?".

An engineer drops screenshots (nvtop, utilisation graphs) taken mid-investigation.  Each one is
checked and timed (``data.screen.screenshots``), kept in the sample store
(``SampleStore.put_screenshot``: bytes by content hash, so it survives a restart with
``--store``), marked on the live figure's phase ribbon, and shown next to the dashboard's view
of the same moments with a **verdict**:
the phase the windows there were labelled, how sure, the imbalance ratio and the hot set.

- **Regions**: a screenshot of scrolling graphs shows different moments in different places
  (nvtop's history runs right to left).  The picture can be split into top and bottom halves or
  boxes drawn on it; each region has its own time offset from the capture time and its own
  verdict.
- **Compare**: two or more screenshots side by side, with the differences between their moments
  (phase shares, imbalance ratio, straggler tax, each GPU's load).

The package, by job:

- ``model``: the pure parts, tested without a browser (``verdict``, ``Verdict``,
  ``compare_table``, ``halves``, ``region_from_shape``, ``parse_regions``, ``region_offset``,
  ``edited_time``, ``span_note``, ``moment_verdict``, ``fmt_local``);
- ``layout``: the page's components (``page``);
- ``views``: what the callbacks draw (picture, panel, list, marks, comparison);
- ``upload``: checking, timing and keeping the dropped files;
- ``callbacks``: ``register`` adds the page's callbacks and the picture route to an app; the
  browser side is ``assets/screenshots.js``.

Only ``page`` and ``register`` are exported here (``app.dashboard.factory`` uses them).
"""

from __future__ import annotations

from tealeaves.app.dashboard.screenshots.callbacks import register
from tealeaves.app.dashboard.screenshots.layout import page

__all__ = ["page", "register"]
