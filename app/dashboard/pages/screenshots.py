"""The Screenshots page (path ``/screenshots``): its layout and its callbacks, both made by the
``app.dashboard.screenshots`` package (``page``, ``register``; browser side in
``assets/screenshots.js``)."""

from __future__ import annotations

import dash
from dash import html

from tealeaves.app.dashboard.config import DashboardConfig
from tealeaves.app.dashboard.screenshots import page
from tealeaves.app.dashboard.screenshots import register as register_screenshots
from tealeaves.app.dashboard.screenshots.layout import PATH

#: The page's name in the navigation (``dash.register_page``; ``PATH`` is its path).
NAME = "Screenshots"


def layout(config: DashboardConfig) -> html.Div:
    """The Screenshots page's body (``app.dashboard.screenshots.layout.page``)."""
    return page(config.store_temporary)


def register(app: dash.Dash, live) -> None:
    """Add the Screenshots page's callbacks and its picture route to ``app``."""
    register_screenshots(app, live)


__all__ = ["NAME", "PATH", "layout", "register"]
