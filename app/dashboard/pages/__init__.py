"""The dashboard's pages, one module each with its layout and its callbacks (``live``: path
``/``, ``screenshots``: path ``/screenshots``); ``app.dashboard.factory`` registers them with
``dash.register_page`` and draws the one navigation from the pages' registry."""
