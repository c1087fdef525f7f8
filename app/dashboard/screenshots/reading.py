"""Reading an opened screenshot's numbers in the background.

``data.screen.read.read_picture`` takes 5-30 s of one core (Tesseract), too long for a
callback: the first look at a screenshot starts its reading on one worker thread, and the
page asks again each second until it is done.  Readings are kept by content hash (a picture
is read once per dashboard process; bytes are the store's, so a restart reads again).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

#: Pictures read at most at once (Tesseract already uses the cores it is given).
WORKERS = 1
#: Readings kept (oldest dropped first).
KEEP = 256

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_readings: dict[str, Future] = {}


def _read(data: bytes, name: str):
    from tealeaves.app.figures.read_back import read_back
    from tealeaves.data.screen.read import read_picture

    return read_picture(data, name, graphs=read_back)


def reading(sha: str, load: Callable[[], bytes | None], name: str) -> tuple[str, object]:
    """The reading of screenshot ``sha``, started when it is not yet (``load`` gives its
    bytes, None when they are gone; called only then).

    Returns:
        ``("pending", None)`` while it is read; ``("done", PictureReading)``;
        ``("error", message)`` when the picture cannot be read (``ScreenReadError``, no OCR
        engine) or its bytes are gone (``data`` None).
    """
    global _pool
    with _lock:
        fut = _readings.get(sha)
        if fut is None:
            data = load()
            if data is None:
                return "error", f"{name}: the picture's bytes are not in the store"
            if _pool is None:
                _pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="tl-read")
            fut = _readings[sha] = _pool.submit(_read, data, name)
            while len(_readings) > KEEP:
                _readings.pop(next(iter(_readings)))
    if not fut.done():
        return "pending", None
    exc = fut.exception()
    if exc is not None:
        return "error", str(exc)
    return "done", fut.result()
