"""Following a live inference-server log: ``tail -F`` of a file (rotation and truncation
included) or standard input, its new lines parsed into events as they arrive.

The lines are parsed by ``data.server_log.ServerLogParser`` (one parser for the whole
run, so decode/stats intervals chain across polls and rotations); saved logs are read
by ``data.server_log`` itself (``parse_file``, ``read_log``).

Nothing here imports ``app`` or ``classifier``.
"""

from __future__ import annotations

import datetime as dt
import os
import select
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from tealeaves.data.server_log import ServerEvent, ServerLogParser

__all__ = ["LogTailer", "follow"]


class LogTailer:
    """Follows a growing log file like ``tail -F``, or reads standard input.

    ``poll()`` returns the complete lines written since the last poll and never blocks.

    * Rotation (the path now names another file: rename + new file, or delete + new): the rest
      of the old file is read first, then the new file from its start.  A file that does not
      exist yet (or while rotated away) is waited for and read from its start.
    * Truncation (the file is now shorter than the read position, e.g. ``copytruncate``):
      reading starts again at 0; an unfinished line held at that moment is dropped.  As with
      ``tail``, a file truncated and rewritten past the read position between two polls
      cannot be told from one that grew.
    * A last line without its newline is held until the newline arrives (on rotation, or at
      end of standard input, it is returned as it is).  A line longer than ``max_line_bytes``
      is returned in pieces.

    Args:
        path: the log file, or ``"-"`` for standard input (POSIX: uses ``select``).
        from_start: read a file that exists now from its start; False starts at its end.
        encoding: text encoding; undecodable bytes are replaced.
        max_line_bytes: longest partial line held.

    Attributes:
        rotations, truncations: how often each was seen.
        eof: standard input was closed (never True for a file).
    """

    _CHUNK = 1 << 16
    _MAX_READ = 1 << 24  # per poll, so a fast writer cannot keep poll() from returning

    def __init__(self, path: str | Path, from_start: bool = False, *, encoding: str = "utf-8",
                 max_line_bytes: int = 1 << 20) -> None:
        self.path = str(path)
        self.encoding = encoding
        self.max_line_bytes = int(max_line_bytes)
        self.rotations = 0
        self.truncations = 0
        self.eof = False
        self._buf = b""
        self._fh = None
        self._id: tuple[int, int] | None = None
        self._stdin = self.path == "-"
        if self._stdin:
            self._fd = sys.stdin.fileno()
        elif self._open() and not from_start:
            self._fh.seek(0, os.SEEK_END)

    # -- context manager -------------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the file (standard input is left open)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    # -- internals ---------------------------------------------------------------------------
    def _open(self) -> bool:
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - held across polls
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            return False
        st = os.fstat(fh.fileno())
        self._fh, self._id = fh, (st.st_dev, st.st_ino)
        return True

    def _decode(self, raw: bytes) -> str:
        return raw.decode(self.encoding, errors="replace").rstrip("\r")

    def _split(self, data: bytes) -> list[str]:
        if not data:
            return []
        self._buf += data
        parts = self._buf.split(b"\n")
        self._buf = parts.pop()
        out = [self._decode(p) for p in parts]
        while len(self._buf) > self.max_line_bytes:
            out.append(self._decode(self._buf[:self.max_line_bytes]))
            self._buf = self._buf[self.max_line_bytes:]
        return out

    def _flush(self) -> list[str]:
        out = [self._decode(self._buf)] if self._buf else []
        self._buf = b""
        return out

    def _drain(self) -> list[str]:
        out: list[str] = []
        got = 0
        while self._fh is not None and got < self._MAX_READ:
            chunk = self._fh.read(self._CHUNK)
            if not chunk:
                break
            got += len(chunk)
            out += self._split(chunk)
        return out

    def _poll_stdin(self) -> list[str]:
        out: list[str] = []
        got = 0
        while not self.eof and got < self._MAX_READ:
            ready, _, _ = select.select([self._fd], [], [], 0)
            if not ready:
                break
            chunk = os.read(self._fd, self._CHUNK)
            if not chunk:
                self.eof = True
                out += self._flush()
                break
            got += len(chunk)
            out += self._split(chunk)
        return out

    # -- public ------------------------------------------------------------------------------
    def poll(self) -> list[str]:
        """New complete lines (without newlines) since the last poll; [] when there are none.

        Never raises for a missing, rotated or truncated file; I/O errors other than those
        propagate as ``OSError``.
        """
        if self._stdin:
            return self._poll_stdin()
        if self._fh is None and not self._open():
            return []
        out = self._drain()
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            st = None  # rotated away, new file not there yet: keep reading the old one
        if st is not None and (st.st_dev, st.st_ino) != self._id:
            out += self._drain()
            out += self._flush()
            self.close()
            self.rotations += 1
            if self._open():
                out += self._drain()
            return out
        size = os.fstat(self._fh.fileno()).st_size
        if size < self._fh.tell():
            self.truncations += 1
            self._buf = b""
            self._fh.seek(0)
            out += self._drain()
        return out


def follow(path: str | Path, *, fmt: str | None = None, tz: str | dt.tzinfo | None = "UTC",
           clock_offset_s: float = 0.0, year: int | None = None,
           stop_event: threading.Event | None = None, interval_s: float = 0.25,
           from_start: bool = False, yield_empty: bool = False,
           parser: ServerLogParser | None = None) -> Iterator[list[ServerEvent]]:
    """Follow a live server log (or ``"-"`` for standard input) and yield its new events.

    Polls a ``LogTailer`` every ``interval_s`` seconds and parses the new lines with one
    ``ServerLogParser`` (so decode/stats intervals chain across polls and rotations).

    Args:
        path: log file, or ``"-"``.
        fmt, tz, clock_offset_s, year: parser options as for ``parse_lines`` (ignored when
            ``parser`` is given).
        stop_event: ends the iteration when set (checked every ``interval_s``); None runs until
            standard input closes or the caller stops iterating.
        interval_s: seconds between polls.
        from_start: read the existing file from its start instead of its end.
        yield_empty: also yield [] after polls that found no event (a heartbeat).
        parser: a parser to use (to read its ``skipped_count`` afterwards).

    Yields:
        Lists of ``ServerEvent`` in line order.

    Raises:
        ServerLogError: bad ``fmt`` or ``tz``.
    """
    if parser is None:
        parser = ServerLogParser(fmt=fmt, tz=tz, clock_offset_s=clock_offset_s, year=year)
    with LogTailer(path, from_start=from_start) as tailer:
        while True:
            events, _ = parser.feed(tailer.poll())
            if events or yield_empty:
                yield events
            if tailer.eof:
                return
            if stop_event is not None:
                if stop_event.wait(interval_s):
                    return
            else:
                time.sleep(interval_s)
