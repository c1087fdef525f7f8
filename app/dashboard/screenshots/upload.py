"""Uploads on the Screenshots page: each dropped file checked, timed and kept in the sample
store, with one message line per file."""

from __future__ import annotations

import base64
import binascii
import json
import re
import time

from dash import html

from tealeaves.app.dashboard.screenshots.model import MAX_REQUEST_BYTES, fmt_local
from tealeaves.data.screen.screenshots import (
    MAX_BYTES,
    ScreenshotError,
    capture_time,
    inspect_image,
)


def accept(store, content: str, name: str, last_modified, tz: str) -> html.Div:
    """Check, time and keep one upload in ``store`` (``SampleStore.put_screenshot``).

    Args:
        content: the file as a ``data:<mime>;base64,...`` URL (``dcc.Upload``).
        name: its file name (any folder part is dropped).
        last_modified: its modification time, epoch s or ms (None when unknown).
        tz: IANA zone of the picture's clock (a local time in its name or metadata).

    Returns:
        Its line for the message area (``title`` is its hash).

    Raises:
        ScreenshotError: refused (the message says why); nothing is kept.
    """
    label = re.split(r"[\\/]", name)[-1]
    header, _, b64 = (content or "").partition(",")
    if not header.startswith("data:") or ";base64" not in header:
        raise ScreenshotError(f"{label}: the upload did not arrive as a file")
    try:
        data = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise ScreenshotError(f"{label}: the upload is damaged (bad base64)") from None
    info = inspect_image(data, label)
    mod = None
    try:
        mod = float(last_modified) if last_modified is not None else None
    except (TypeError, ValueError):
        mod = None
    if mod is not None and mod > 1e11:  # milliseconds from some browsers
        mod /= 1000.0
    when = capture_time(info.meta_time, label, mod)
    ts = when.resolve(tz)
    row = {"sha256": info.sha256, "name": label, "nbytes": info.nbytes, "width": info.width,
           "height": info.height, "format": info.format, "uploaded": time.time(),
           "capture_ts": ts, "capture_local": when.local.isoformat(sep=" ") if when.local
           else None, "tz": tz, "time_source": when.source, "regions": json.dumps([]),
           "note": None}
    new = store.put_screenshot(row, data)
    if not new:  # the stored copy keeps its name, time and regions
        kept = store.screenshots()
        kept = kept[kept["sha256"] == info.sha256]
        name_kept = str(kept["name"].iloc[0]) if len(kept) else label
        div = html.Div(f"= {label}: the same picture is already here as {name_kept}; kept "
                       f"that one", className="tl-ok")
    elif ts is None:
        div = html.Div(f"✓ {label}: no capture time in its metadata or name: open it and "
                       f"set the time", className="tl-ok")
    else:
        div = html.Div(f"✓ {label}: {fmt_local(ts, tz)} (from {when.source})",
                       className="tl-ok")
    div.title = info.sha256
    return div


def accept_batch(store, files: list[dict], tz: str) -> tuple[list[html.Div], str | None]:
    """Keep the files of one drop, as ``assets/screenshots.js`` passes them on.

    Args:
        files: ``{"name", "modified", "bytes", "content"}`` each; ``"why"`` is ``"over"`` for
            a file over ``MAX_BYTES`` and ``"batch"`` for one beyond what the request may
            carry (neither sent: ``content`` is None).
        tz: IANA zone of the pictures' clocks (already checked).

    Returns:
        ``(one message line per file, the hash of the last one kept or None)``.
    """
    msgs, last = [], None
    for f in files:
        name = re.split(r"[\\/]", str(f.get("name") or "upload"))[-1]
        try:
            if f.get("why") == "over":
                raise ScreenshotError(f"{name}: {f.get('bytes', 0) / 2**20:.1f} MB is over "
                                      f"the {MAX_BYTES >> 20} MB limit")
            if f.get("why") == "batch":
                raise ScreenshotError(f"{name}: not sent, this drop is over "
                                      f"{MAX_REQUEST_BYTES // 2 >> 20} MB in all; drop it "
                                      f"again on its own")
            msgs.append(accept(store, f.get("content"), name, f.get("modified"), tz))
            last = msgs[-1].title
        except ScreenshotError as exc:
            msgs.append(html.Div(f"✗ {exc}", className="tl-stale"))
    return msgs, last


__all__ = ["accept", "accept_batch"]
