"""Shared fixtures: the headless Chromium the browser tests drive (Debian's, through
Playwright), skipped, saying so, where it is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--headless", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium for one test module."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (Debian's chromium package)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def caught_up_store(trace, path: Path):
    """A store at ``path`` holding the whole of ``trace`` and a ``History`` caught up with
    it (no server lag); returns ``(store, history)``, the caller closes the store."""
    from tealeaves.app.dashboard.history import History
    from tealeaves.data.store import SampleStore

    store = SampleStore(path)
    store.put_devices(trace.devices)
    store.append(trace.samples)
    h = History(store, server_lag_s=0.0)
    h.update(force=True)
    return store, h


def serve_metrics(body):
    """A ``/metrics`` endpoint on 127.0.0.1 answering ``body`` (a text, or a function giving
    the text of each request); returns ``(server, url)``, the caller shuts the server down."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            data = (body() if callable(body) else body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}/metrics"


def open_live_page(browser, url: str, width: int = 1440, height: int = 900):
    """A page of the dashboard at ``url`` once its figure is drawn; returns ``(page,
    errors)``, ``errors`` the page's script errors as they come."""
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    gd = "document.querySelector('#tl-graph .js-plotly-plot')"
    page.wait_for_function(f"() => {gd} && {gd}._fullData && {gd}._fullData.length > 0",
                           timeout=30_000)
    return page, errors
