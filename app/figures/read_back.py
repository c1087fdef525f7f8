"""Read a picture of tealeaves' own dashboard back: each GPU's load from its band.

The dashboard's "load by GPU" bands (``plot``: GPU ``g``'s line at ``slot + BAND_SCALE *
load / 100`` on the bands' axis, its label at ``slot + BAND_TICK``, in ``gpu_color(g)``) are
inverted: each GPU's label, found by its colour left of the plot, gives its band's place;
the spacing of the labels gives the pixels per band; the GPU's line, found by its colour in
its band, gives the load of each pixel column.  The mean over the columns is the GPU's mean
load over the range shown (% SM active, as the bands draw it).
"""

from __future__ import annotations

import numpy as np

from tealeaves.app.figures.geometry import BAND_SCALE, BAND_TICK, GPU_COLORS
from tealeaves.data.screen.values import GpuReading

#: Largest RGB distance (0-441) of a pixel from a GPU's colour that is that GPU's ink.
COLOR_TOLERANCE = 25.0
#: Share of the picture's width left of the plot where the band labels are.
LABEL_ZONE = 0.12
#: Fewest pixel columns of a line for its GPU's load to be read.
MIN_COLUMNS = 20


#: Highest confidence of a load read off a band's line: the line is found or not, but its
#: mean is known to a few points only (four GPUs of identical load in one dashboard picture,
#: 38.3 % each, read 39.0-43.5 %): never "100 % sure" of the number.
LINE_CONFIDENCE = 0.7
#: Share of a GPU's colour (blended over its band's ground) that makes a pixel its line's.
MIN_BLEND = 0.4


def _line_weight(band: np.ndarray, color: np.ndarray) -> np.ndarray:
    """How much of ``color`` each pixel of ``band`` (h, w, 3 RGB) holds, 0-1: the browser
    draws a 1-px line between two pixel rows as two rows of the colour blended over the
    band's ground (its most common colour), neither within ``COLOR_TOLERANCE`` of the colour
    itself.  A pixel is ``alpha * color + (1 - alpha) * ground``; one off that blend by more
    than ``COLOR_TOLERANCE`` (another GPU's colour, the shade of a busy band) weighs 0."""
    flat = band.reshape(-1, 3)
    vals, counts = np.unique(flat.astype(np.int32), axis=0, return_counts=True)
    ground = vals[int(np.argmax(counts))].astype(np.float32)
    u = color - ground
    if float(u @ u) < 1.0:
        return np.zeros(band.shape[:2], np.float32)
    d = band - ground
    alpha = (d @ u) / float(u @ u)
    off = np.linalg.norm(d - alpha[..., None] * u, axis=2)
    return np.where(off <= COLOR_TOLERANCE, np.clip(alpha, 0.0, 1.0), 0.0).astype(np.float32)


def _hex(c: str) -> np.ndarray:
    return np.array([int(c[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.float32)


def _on_one_pitch(labels: dict, n: int) -> dict:
    """The labels that sit on one band pitch, and the pitch (``"pitch"``, px): the bands are
    stacked at equal spacing, so each label is a whole number of pitches from the others.
    In the default order (by index) GPU g's band is g pitches from GPU 0's: labels found on
    that line give the pitch even with labels missing between them.  Otherwise (busiest
    first) the pitch tried is each gap of 8 px or more between labels; the one that puts the most
    labels on whole multiples (within 15 %, inside ``n`` bands) wins.  A label elsewhere (a
    GPU's colour in the header, a label not found: no gap from it) is dropped; fewer than two
    left: {}."""
    if len(labels) >= 2:  # bands by index (the default): band k is GPU k's, one pitch apart
        gs = np.array(sorted(labels), dtype=float)
        ys = np.array([labels[g][0] for g in sorted(labels)])
        p, a = np.polyfit(gs, ys, 1)
        if p >= 8 and np.all(np.abs(ys - (a + p * gs)) < 0.15 * p):
            return {**labels, "pitch": float(p)}
    ys = sorted(v[0] for v in labels.values())
    gaps = sorted({round(b - a, 1) for i, a in enumerate(ys) for b in ys[i + 1:] if b - a >= 8})
    best: dict = {}
    for pitch in gaps:
        for ref in ys:
            k = {g: (v[0] - ref) / pitch for g, v in labels.items()}
            on = {g: v for g, v in labels.items()
                  if abs(k[g] - round(k[g])) < 0.15 and abs(round(k[g])) < n}
            rows = [round(k[g]) for g in on]
            if len(set(rows)) == len(rows) and len(on) > len(best) - (1 if best else 0):
                best = {**on, "pitch": float(pitch)}
    return best if len(best) >= 3 else {}


def read_back(img, words=None) -> list[GpuReading]:
    """The GPUs of a dashboard picture (``data.screen.read.read_picture``'s ``graphs``):
    ``util_pct`` = the mean of the GPU's band line (%) over the columns it spans (a column
    where it was not found read between its neighbours), with its confidence (twice the
    share of those columns where the line was found, at most ``LINE_CONFIDENCE``) and the
    band's box.  A GPU whose label
    or line is not found is left out, and so is a colour past the header's GPU count ("8
    GPUs"); fewer than two labels (no spacing to measure): []."""
    from scipy import ndimage

    a = np.asarray(img.convert("RGB"), dtype=np.float32)
    h, w, _ = a.shape
    zone = int(LABEL_ZONE * w)
    masks, found = {}, []
    import re

    text = " ".join(w.text for w in words or ())
    count = re.search(r"\b(\d{1,3})\s+GPUs?\b", text)  # the header's "8 GPUs"
    n = int(count.group(1)) if count else len(GPU_COLORS)
    for g, col in enumerate(GPU_COLORS[:n]):
        near = np.linalg.norm(a - _hex(col), axis=2) < COLOR_TOLERANCE
        masks[g] = near
        # the label "GPU g": a blob of text in the GPU's colour, its glyphs joined
        blobs, _n = ndimage.label(ndimage.binary_dilation(near[:, :zone],
                                                          np.ones((1, 7), bool)))
        for sl in ndimage.find_objects(blobs):
            bh, bw = sl[0].stop - sl[0].start, sl[1].stop - sl[1].start
            # (a blob cut by the zone's edge is a plot's line running out of it)
            if 4 <= bh <= 30 and 12 <= bw <= 90 and sl[1].stop < zone:
                found.append((g, (sl[0].start + sl[0].stop) / 2, sl[1].stop))
    if not found:
        return []
    # the bands' labels are right-aligned on the axis: the right edge most labels share
    rights = np.array([f[2] for f in found])
    edge = max(rights, key=lambda r: int((np.abs(rights - r) <= 3).sum()))
    on_edge = [(g, yc) for g, yc, right in found if abs(right - edge) <= 3]
    labels = {}
    for g, yc in on_edge:
        # a row where three or more GPUs' colours sit side by side is a legend (the header's
        # GPU dots, "GPU (click to hide)"), not bands: each band's label has a row of its own
        if sum(1 for _, y, _r in found if abs(y - yc) <= 2) >= 3:
            continue
        if g not in labels:
            labels[g] = (yc, int(edge), masks[g])
    labels = _on_one_pitch(labels, n)
    if len(labels) < 2:
        return []
    pitch = labels.pop("pitch")
    out = []
    for g, (yc, x_right, near) in labels.items():
        # the band: from its label at slot + BAND_TICK, the slot's bottom and top
        # (a few pixels more each way: a line at 0 % or 100 % is drawn on the band's edge)
        top = int(max(0, yc - (1 - BAND_TICK) * pitch - 3))
        bottom = int(min(h, yc + BAND_TICK * pitch + 4))
        band = near[top:bottom, x_right + 8:]
        weight = band.astype(np.float32)
        cols = np.flatnonzero(band.any(axis=0) & (band.sum(axis=0) <= max(3, 0.3 * pitch)))
        if len(cols) < MIN_COLUMNS:  # a thin line drawn between two pixel rows: blended
            weight = _line_weight(a[top:bottom, x_right + 8:], _hex(GPU_COLORS[g]))
            band = band | (weight >= MIN_BLEND)
            cols = np.flatnonzero(band.any(axis=0) &
                                  (band.sum(axis=0) <= max(3, 0.3 * pitch)))
        if len(cols) < MIN_COLUMNS:
            continue
        # the line's centre in each column, weighted by how much of the GPU's colour each
        # pixel holds (a 1-px line drawn between two pixel rows is in both, half each)
        wb = np.where(band, np.maximum(weight, 1e-3), 0.0)
        rows = np.arange(band.shape[0], dtype=np.float64)
        y = np.array([(rows * wb[:, c]).sum() / wb[:, c].sum() for c in cols]) + top
        load = np.clip((BAND_TICK + (yc - y) / pitch) / BAND_SCALE * 100.0, 0.0, 100.0)
        # the mean over every column the line spans: a column left out (a steep stretch, a
        # crossing line of another GPU) is read between its neighbours, so two GPUs of the
        # same load read the same whichever columns each lost
        span = np.arange(cols[0], cols[-1] + 1)
        v = float(np.clip(np.mean(np.interp(span, cols, load)), 0.0, 100.0))
        seen = len(cols) / max(1, int(cols[-1] - cols[0]) + 1)
        out.append(GpuReading(g, {"util_pct": round(v, 1)},
                              {"util_pct": float(min(LINE_CONFIDENCE, 2 * seen))},
                              (0.0, top / h, 1.0, bottom / h)))
    return sorted(out, key=lambda r: r.gpu)
