"""Writing an imbalance report (``app.report``): the bytes of each format and all-or-nothing
files.  Apart from ``report`` so the document model imports none of its renderers
(``report_html``, ``report_render``), which import it."""

from __future__ import annotations

import os
from pathlib import Path

from tealeaves.app.report.html import render_html
from tealeaves.app.report.model import FORMATS, Report, ReportError, to_csv, to_json


def report_bytes(report: Report, fmt: str) -> bytes:
    """``report`` as the bytes of a ``fmt`` file (``FORMATS``).

    Raises:
        ReportError: unknown format, or PDF/PNG without a Chromium or Playwright (the message
            says what to install).
    """
    if fmt == "json":
        return to_json(report).encode()
    if fmt == "csv":
        return to_csv(report).encode()
    if fmt == "html":
        return render_html(report).encode("utf-8")
    if fmt in ("pdf", "png"):
        from tealeaves.app.report.render import render_pdf_or_png

        return render_pdf_or_png(render_html(report, print_layout=True), fmt)
    raise ReportError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")


#: Why an ``--out`` that exists and is no regular file (``/dev/stdout``, a pipe, a folder) is
#: refused: the report is written beside it and renamed, which only a regular file allows.
NOT_REGULAR = ("not a regular file (a device, pipe or folder); give a file name, or - for "
               "stdout")


def write_report_stream(report: Report, fmt: str, stream) -> int:
    """Write ``report`` as ``fmt`` to the binary ``stream`` (``sys.stdout.buffer`` for
    ``--out -``) and flush it.

    Returns:
        The bytes written.

    Raises:
        ReportError: as ``report_bytes``; OSError (BrokenPipeError included): the stream
            cannot be written.
    """
    data = report_bytes(report, fmt)
    stream.write(data)
    stream.flush()
    return len(data)


def write_report(report: Report, fmt: str, out: str | Path) -> Path:
    """Write ``report`` as ``fmt`` to ``out``: all or nothing (a temporary file beside it,
    renamed when complete).

    Raises:
        ReportError: as ``report_bytes``; OSError: ``out`` cannot be written.
    """
    out = Path(out)
    if out.exists() and not out.is_file():  # a link is judged by what it names
        raise ReportError(f"--out {out}: {NOT_REGULAR}")
    if out.is_symlink():
        out = out.resolve()  # write the file the link names, keep the link
    if out.exists() and not os.access(out, os.W_OK):
        raise ReportError(f"--out {out}: the file is read-only")
    data = report_bytes(report, fmt)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(out)
    except BaseException:  # a full disk, Ctrl-C: no half-written file is left behind
        tmp.unlink(missing_ok=True)
        raise
    return out


__all__ = ["NOT_REGULAR", "report_bytes", "write_report", "write_report_stream"]
