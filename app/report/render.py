"""PDF and PNG of a report's HTML, rendered by Playwright driving the system's Chromium (the
page's plotly figures are drawn by the browser, as on screen).  Network access is refused while
rendering: the HTML is self-contained."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tealeaves.app.report.model import ReportError

#: Where a Chromium is looked for, in order (``TEALEAVES_CHROMIUM`` first when set).
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_ARGS = ["--no-sandbox", "--disable-gpu", "--headless", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


#: Waited on before printing: every plot of the page is drawn (a browser-side snippet).
_PLOTS_READY = Path(__file__).with_name("js") / "plots_ready.js"


def chromium_path() -> str:
    """Path of the Chromium to render with.

    Raises:
        ReportError: none found (the message says how to install one).
    """
    env = os.environ.get("TEALEAVES_CHROMIUM")
    if env:
        if Path(env).exists():
            return env
        raise ReportError(f"TEALEAVES_CHROMIUM={env}: no such file")
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise ReportError("PDF and PNG reports are rendered with Chromium, and none was found: "
                      "install it (Debian/Ubuntu: apt-get install chromium) or set "
                      "TEALEAVES_CHROMIUM to its path; html, csv and json need none")


def render_pdf_or_png(html: str, fmt: str, timeout_ms: int = 120_000) -> bytes:
    """Bytes of the PDF (A4, backgrounds printed) or PNG (the whole page, 2x) of ``html``.

    Raises:
        ReportError: no Chromium or no Playwright, or the page did not finish drawing.
    """
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise ReportError("PDF and PNG reports need playwright: pip install playwright") from None
    exe = chromium_path()
    with tempfile.TemporaryDirectory(prefix="tealeaves-report-") as tmp:
        page_path = Path(tmp) / "report.html"
        page_path.write_text(html, encoding="utf-8")
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=exe, args=_ARGS)
                try:
                    ctx = browser.new_context(viewport={"width": 800, "height": 1100},
                                              device_scale_factor=2 if fmt == "png" else 1)
                    ctx.route("**/*", lambda route: route.continue_()
                              if route.request.url.startswith("file:") else route.abort())
                    page = ctx.new_page()
                    page.goto(page_path.as_uri(), timeout=timeout_ms)
                    page.wait_for_function(_PLOTS_READY.read_text(), timeout=timeout_ms)
                    if fmt == "pdf":
                        page.emulate_media(media="print")
                        return page.pdf(format="A4", print_background=True,
                                        margin={"top": "12mm", "bottom": "12mm",
                                                "left": "10mm", "right": "10mm"})
                    return page.screenshot(full_page=True, type="png")
                finally:
                    browser.close()
        except PlaywrightError as exc:
            raise ReportError(f"rendering the {fmt.upper()} with {exe} failed: "
                              f"{str(exc).splitlines()[0]}") from None


__all__ = ["CHROMIUM_NAMES", "chromium_path", "render_pdf_or_png"]
