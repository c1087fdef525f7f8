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
