"""Malformed callback requests: a POST to ``/_dash-update-component`` naming no callback,
with missing or extra inputs, or values of the wrong type, answers ``400`` with a JSON
``{"error": ...}`` and leaves one line in the log (``logging``, logger
``tealeaves.app.dashboard.guard``), never an HTTP 500 with a traceback (issue 38).

The browser's own requests are built by Dash from the layout and never take this path; a
request that does is another client's (a script, a stale tab of another version, a tester).
``PreventUpdate`` keeps Dash's own answer (204): Flask picks the most specific handler.
"""

from __future__ import annotations

import logging

#: The path of Dash's callback dispatch (``dash.Dash`` ``_dash-update-component``).
DISPATCH = "_dash-update-component"

log = logging.getLogger(__name__)


def guard_callbacks(app) -> None:
    """Answer a malformed callback request of ``app`` (a ``dash.Dash``) with 400 and one log
    line.  Errors on other paths keep Flask's handling."""
    from flask import jsonify, request
    from werkzeug.exceptions import HTTPException

    @app.server.errorhandler(Exception)
    def _malformed(exc: Exception):
        if not request.path.endswith(DISPATCH):
            if isinstance(exc, HTTPException):
                return exc
            raise exc
        if isinstance(exc, HTTPException) and exc.code != 400:
            return exc
        body = request.get_json(silent=True)
        output = body.get("output") if isinstance(body, dict) else None
        why = (exc.description if isinstance(exc, HTTPException)
               else f"{type(exc).__name__}: {exc}")
        why = " ".join(str(why).split())[:300]  # one line, however long the message
        where = f"callback {str(output)[:120]!r}" if output else "a callback request"
        log.warning("refused %s (%s %s): %s", where, request.method, request.path, why)
        return jsonify(error=f"malformed request for {where}: {why}"), 400
