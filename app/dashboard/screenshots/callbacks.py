"""The Screenshots page's callbacks and picture route, grouped by what they serve: the picture
route, the browser side (zone, tabs, marker clicks, scrolling; ``assets/screenshots.js``),
uploads, the list and its row buttons, the opened screenshot (its panel and edits), and the
comparison.  ``register`` adds them all to an app."""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from zoneinfo import ZoneInfo

import dash
import pandas as pd
from dash import ALL, ClientsideFunction, Input, Output, State, html

from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.live_patch import shots_patch
from tealeaves.app.dashboard.screenshots.model import (
    MAX_REQUEST_BYTES,
    PICTURE_ROUTE,
    SPAN_S,
    Verdict,
    edited_time,
    halves,
    moment_verdict,
    parse_regions,
    region_from_shape,
    region_offset,
    span_note,
    span_seconds,
)
from tealeaves.app.dashboard.screenshots.reading import reading
from tealeaves.app.dashboard.screenshots.upload import accept_batch
from tealeaves.app.dashboard.screenshots.views import (
    compare_view,
    detail,
    picture_figure,
    picture_reading,
    shot_table,
)
from tealeaves.data.screen.screenshots import ScreenshotError, plausible, zone_name

_SHA = re.compile(r"[0-9a-f]{64}")
#: The clientside functions' namespace in ``window.dash_clientside`` (assets/screenshots.js).
JS_NAMESPACE = "screenshots"


def _js(name: str) -> ClientsideFunction:
    return ClientsideFunction(namespace=JS_NAMESPACE, function_name=name)


def register(app: dash.Dash, live) -> None:
    """Add the Screenshots page's callbacks and the picture route to ``app``.

    Args:
        app: the dashboard's Dash app (``create_app``); its layout holds ``layout.page``.
        live: its ``app.dashboard.LiveView`` (store and history).
    """
    app.server.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES
    register_picture_route(app.server, live.store)
    register_browser_side(app)
    register_upload(app, live)
    register_list(app, live)
    register_opened(app, live)
    register_reading(app, live)
    register_compare(app, live)


def _listing(live) -> tuple[list, list[dict]]:
    """The screenshot list (each row with the verdict of its moment) and the compare
    choices, of what the store keeps now."""
    live.shots_changed()
    shots = live.base_store.screenshots()  # (the store, not one host's view of it)
    table = shot_table(shots, lambda ts: _span_verdict(live, ts, SPAN_S))
    options = [{"label": f" {r.name}", "value": r.sha256} for r in shots.itertuples()]
    return table, options


def _span_verdict(live, t: float | None, span: float) -> Verdict:
    """The verdict of ``t ± span`` (epoch s) from the live history, brought up to date."""
    live.history.update()
    return moment_verdict(live.history, t, span)


def register_picture_route(server, store) -> None:
    """Serve the kept pictures' bytes at ``PICTURE_ROUTE + sha256`` on the Flask ``server``
    (404 for a malformed or unknown hash; cached for good, as a hash names its bytes)."""

    @server.route(PICTURE_ROUTE + "<sha>")
    def _picture_bytes(sha: str):
        from flask import Response, abort

        if not _SHA.fullmatch(sha or ""):
            abort(404)
        data = store.screenshot_data(sha)
        if data is None:
            abort(404)
        row = store.screenshots()
        fmt = row.loc[row["sha256"] == sha, "format"]
        mime = "image/jpeg" if len(fmt) and fmt.iloc[0] == "JPEG" else "image/png"
        resp = Response(data, mimetype=mime)
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Cache-Control"] = "private, max-age=31536000, immutable"
        return resp


def register_browser_side(app: dash.Dash) -> None:
    """The clientside callbacks: the pictures' default zone (the browser's, from
    ``ids.PAGE_TZ``), a click on a screenshot marker of the live figure (opens it on this
    page: the pages' location goes to its path), and scrolling an opened screenshot into
    view."""
    app.clientside_callback(_js("default_zone"), Output(ids.SHOT_TZ, "value"),
                            Input(ids.PAGE_TZ, "data"), Input(ids.SHOT_TZ, "value"))
    app.clientside_callback(
        _js("open_marker"),
        Output(ids.SHOT_SELECTED, "data", allow_duplicate=True),
        Output(ids.LOCATION, "pathname"),
        Input(ids.GRAPH, "clickData"), State(ids.SHOT_CONFIG, "data"),
        prevent_initial_call=True)
    app.clientside_callback(
        _js("scroll_to_detail"),
        Output(ids.SHOT_SCROLL, "data"), Input(ids.SHOT_SELECTED, "data"),
        State(ids.SHOT_CONFIG, "data"), prevent_initial_call=True)


def register_upload(app: dash.Dash, live) -> None:
    """Uploads: the browser passes a drop on as one batch (oversize files named, not sent;
    ``assets/screenshots.js``); the server keeps each file it can, says why for the others,
    lists them in the same answer (one round trip less before the drop shows: the list
    callback then only redraws the figure's marks) and opens the last one kept."""
    store = live.base_store
    app.clientside_callback(
        _js("batch"),
        Output(ids.SHOT_BATCH, "data"), Input(ids.SHOT_UPLOAD, "contents"),
        State(ids.SHOT_UPLOAD, "filename"), State(ids.SHOT_UPLOAD, "last_modified"),
        State(ids.SHOT_CONFIG, "data"), prevent_initial_call=True)

    @app.callback(
        output={"message": Output(ids.SHOT_MSG, "children"),
                "version": Output(ids.SHOTS_VERSION, "data", allow_duplicate=True),
                "selected": Output(ids.SHOT_SELECTED, "data", allow_duplicate=True),
                "list": Output(ids.SHOT_LIST, "children", allow_duplicate=True),
                "options": Output(ids.SHOT_CMP, "options", allow_duplicate=True),
                "listed": Output(ids.SHOT_LISTED, "data")},
        inputs={"batch": Input(ids.SHOT_BATCH, "data")},
        state={"tz": State(ids.SHOT_TZ, "value"), "version": State(ids.SHOTS_VERSION, "data")},
        prevent_initial_call=True,
    )
    def _upload(batch, tz, version):
        files = (batch or {}).get("files") or []
        if not files:
            raise dash.exceptions.PreventUpdate
        try:
            tz = zone_name(tz or "UTC")
        except ScreenshotError as exc:
            nu = dash.no_update
            return {"message": [html.Div(f"✗ {exc}: set the time zone, then drop the files "
                                         f"again; nothing was stored", className="tl-stale")],
                    "version": nu, "selected": nu, "list": nu, "options": nu, "listed": nu}
        msgs, last = accept_batch(store, files, tz)
        table, options = _listing(live)
        new = (version or 0) + 1
        return {"message": msgs, "version": new,
                "selected": dash.no_update if last is None else last,
                "list": table, "options": options, "listed": new}


def register_list(app: dash.Dash, live) -> None:
    """The screenshot list (and the compare choices and the live figure's marks, redrawn
    whenever the kept screenshots change) and its rows' open / delete buttons."""
    store = live.store

    @app.callback(
        Output(ids.SHOT_LIST, "children"),
        Output(ids.SHOT_CMP, "options"),
        Output(ids.GRAPH, "figure", allow_duplicate=True),
        Input(ids.SHOTS_VERSION, "data"),
        State(ids.CURSOR, "data"),
        State(ids.SHOT_LISTED, "data"),
        prevent_initial_call="initial_duplicate",
    )
    def _list(version, state, listed):
        live.shots_changed()
        if listed is not None and listed == version:  # the upload's answer listed them
            return dash.no_update, dash.no_update, shots_patch(store.screenshots(), state)
        table, options = _listing(live)
        return table, options, shots_patch(store.screenshots(), state)

    @app.callback(
        Output(ids.SHOT_SELECTED, "data", allow_duplicate=True),
        Output(ids.SHOTS_VERSION, "data", allow_duplicate=True),
        Input({"type": ids.SHOT_OPEN, "sha": ALL}, "n_clicks"),
        Input({"type": ids.SHOT_DEL, "sha": ALL}, "n_clicks"),
        State(ids.SHOT_SELECTED, "data"),
        State(ids.SHOTS_VERSION, "data"),
        prevent_initial_call=True,
    )
    def _row_action(_open, _del, selected, version):
        trig = dash.ctx.triggered_id
        if not trig or not any(t.get("value") for t in dash.ctx.triggered):
            raise dash.exceptions.PreventUpdate
        sha = trig["sha"]
        if trig["type"] == ids.SHOT_DEL:
            store.delete_screenshot(sha)
            return (None if selected == sha else dash.no_update), (version or 0) + 1
        return sha, dash.no_update


def register_opened(app: dash.Dash, live) -> None:
    """The opened screenshot: its panel (picture, verdicts, its moment in the dashboard),
    and its edits (capture time and zone, region offsets, split into halves, clear, a
    rectangle drawn on the picture)."""
    store = live.store

    outputs = {"style": Output(ids.SHOT_DETAIL, "style"),
               "title": Output(ids.SHOT_DETAIL_TITLE, "children"),
               "picture": Output(ids.SHOT_IMAGE, "figure"),
               "picture_style": Output(ids.SHOT_IMAGE, "style"),
               "verdicts": Output(ids.SHOT_VERDICTS, "children"),
               "view": Output(ids.SHOT_VIEW, "figure"),
               "view_style": Output(ids.SHOT_VIEW, "style"),
               "time": Output(ids.SHOT_TIME, "value"),
               "zone": Output(ids.SHOT_ZONE, "value"),
               "offsets": Output(ids.SHOT_OFFSETS, "children"),
               "fix_style": Output(ids.SHOT_FIX, "style"),
               "fix_label": Output(ids.SHOT_FIX, "children"),
               "fix_value": Output(ids.SHOT_FIX, "value")}

    @app.callback(
        output=outputs,
        inputs={"sha": Input(ids.SHOT_SELECTED, "data"),
                "_version": Input(ids.SHOTS_VERSION, "data"),
                "span": Input(ids.SHOT_SPAN, "value")},
        state={"page_tz": State(ids.PAGE_TZ, "data")},
        prevent_initial_call=True,
    )
    def _detail(sha, _version, span, page_tz):
        r = _shot_row(store, sha)
        if r is None:
            return {**dict.fromkeys(outputs, dash.no_update), "style": {"display": "none"}}
        out = detail(live, r, span_seconds(span), page_tz)
        note = span_note(span)
        if note:
            out["verdicts"] = [html.Div(note, className="tl-stale"), *out["verdicts"]]
        return {"style": {}, **out}

    @app.callback(
        Output(ids.SHOTS_VERSION, "data", allow_duplicate=True),
        Output(ids.SHOT_MSG, "children", allow_duplicate=True),
        Output(ids.SHOT_IMAGE, "relayoutData"),
        Input(ids.SHOT_SAVE, "n_clicks"),
        Input(ids.SHOT_SPLIT, "n_clicks"),
        Input(ids.SHOT_CLEAR, "n_clicks"),
        Input(ids.SHOT_IMAGE, "relayoutData"),
        Input(ids.SHOT_FIX, "n_clicks"),
        State(ids.SHOT_FIX, "value"),
        State(ids.SHOT_SELECTED, "data"),
        State(ids.SHOT_TIME, "value"),
        State(ids.SHOT_ZONE, "value"),
        State({"type": ids.REGION_OFFSET, "i": ALL}, "value"),
        State(ids.SHOTS_VERSION, "data"),
        prevent_initial_call=True,
    )
    def _edit(_save, _split, _clear, relayout, _fix, fix_value, sha, when, zone, offsets,
              version):
        trig = dash.ctx.triggered_id
        shots = store.screenshots()
        row = shots[shots["sha256"] == sha]
        if not sha or row.empty:
            raise dash.exceptions.PreventUpdate
        try:
            if trig == ids.SHOT_FIX:
                fields = _shifted_fields(row.iloc[0], fix_value)
            else:
                fields = _edited_fields(trig, row.iloc[0], when, zone, offsets, relayout)
        except ScreenshotError as exc:
            return dash.no_update, html.Div(f"✗ {exc}", className="tl-stale"), None
        if fields:
            store.update_screenshot(sha, **fields)
        # relayoutData is emptied so the same rectangle drawn again still reaches here
        return (version or 0) + 1, [], None


def _shifted_fields(r, fix_value) -> dict:
    """The store fields that move screenshot row ``r`` to ``fix_value`` (epoch s, the zone
    shift ``model.no_telemetry`` found), its zone kept and the shift named as the time's
    source.

    Raises:
        dash.exceptions.PreventUpdate: no shift offered or the row has no time.
    """
    try:
        ts = float(fix_value)
        old = float(r.capture_ts)
    except (TypeError, ValueError):
        raise dash.exceptions.PreventUpdate from None
    if not (math.isfinite(ts) and math.isfinite(old)) or not plausible(ts):
        raise dash.exceptions.PreventUpdate
    zone = ZoneInfo(zone_name(r.tz or "UTC"))
    local = datetime.fromtimestamp(ts, tz=zone).replace(tzinfo=None)
    return {"capture_ts": ts, "capture_local": local.isoformat(sep=" "),
            "time_source": f"{r.time_source}, moved {(ts - old) / 3600:+g} h by the user"}


def _edited_fields(trig, r, when, zone, offsets, relayout) -> dict:
    """The store fields an edit of screenshot row ``r`` changes; ``trig`` is the control
    used (save, split, clear, or the picture with a rectangle drawn).

    Raises:
        ScreenshotError: a capture time, zone or region offset that cannot be saved.
        dash.exceptions.PreventUpdate: nothing to change.
    """
    regions = parse_regions(r.regions)
    fields: dict = {}
    if trig == ids.SHOT_SAVE:
        fields.update(edited_time(r, when, zone))
        new = []
        for i, (reg, off) in enumerate(zip(regions, offsets or [])):
            try:
                new.append({**reg, "offset_s": region_offset(off)})
            except ValueError as exc:
                raise ScreenshotError(f"{r['name']}: region {i + 1} offset: {exc}") from None
        if regions:
            fields["regions"] = json.dumps(new)
    elif trig == ids.SHOT_SPLIT:  # drawn boxes stay; halves already there are replaced
        boxes = [g for g in regions if g["name"] not in ("top", "bottom")]
        fields["regions"] = json.dumps([*halves(), *boxes])
    elif trig == ids.SHOT_CLEAR:
        fields["regions"] = json.dumps([])
    elif trig == ids.SHOT_IMAGE:
        shape = None
        for k, v in (relayout or {}).items():
            if k == "shapes" and isinstance(v, list) and v:
                shape = v[-1]
        if shape is None:
            raise dash.exceptions.PreventUpdate
        reg = region_from_shape(shape, int(r.width), int(r.height), len(regions) + 1)
        if reg is None:
            raise dash.exceptions.PreventUpdate
        fields["regions"] = json.dumps([*regions, reg])
    else:
        raise dash.exceptions.PreventUpdate
    return fields


def _shot_row(store, sha: str | None):
    """The stored screenshot ``sha``'s row, or None (none chosen, or deleted)."""
    shots = store.screenshots()
    row = shots[shots["sha256"] == sha] if sha else shots.iloc[0:0]
    return None if row.empty else row.iloc[0]


def register_reading(app: dash.Dash, live) -> None:
    """The numbers read from the opened picture itself and its verdict per region (the
    whole picture, then its halves or boxes), next to the telemetry of each region's moment
    where there is some; read in the background (``reading``), asked again each second."""
    from tealeaves.classifier.picture import summary

    store = live.store

    @app.callback(
        Output(ids.SHOT_READ, "children"),
        Output(ids.SHOT_READ_TICK, "disabled"),
        Output(ids.SHOT_IMAGE, "figure", allow_duplicate=True),
        Input(ids.SHOT_SELECTED, "data"),
        Input(ids.SHOTS_VERSION, "data"),
        Input(ids.SHOT_READ_TICK, "n_intervals"),
        Input(ids.SHOT_SPAN, "value"),
        prevent_initial_call=True,
    )
    def _read(sha, _version, _tick, span):
        r = _shot_row(store, sha)
        if r is None:
            return [], True, dash.no_update
        state, value = reading(sha, lambda: store.screenshot_data(sha), str(r["name"]))
        if state == "pending":
            return [html.Div("reading the picture's numbers (OCR, up to half a minute)…",
                             className="tl-muted")], False, dash.no_update
        if state == "error":
            return [html.Div(f"read from the picture: {value}", className="tl-stale")], True, \
                dash.no_update
        regions = parse_regions(r.regions)
        s = summary(value, regions)
        ts = float(r.capture_ts) if pd.notna(r.capture_ts) else None
        tele: list[dict | None] = []
        for reg in [{"offset_s": 0.0}, *regions]:
            v = moment_verdict(live.history, ts + float(reg.get("offset_s", 0.0)),
                               span_seconds(span)) if ts is not None else None
            tele.append(dict(v.loads) if v is not None and v.windows else None)
        # each stretch of nvtop's charts against the telemetry of its seconds (the newest
        # sample taken as the capture time)
        stretches = (s.get("charts") or {}).get("stretches") or []
        for c in s.get("captures") or []:  # each capture's boxes, on the whole picture
            y0, y1 = c["box"][1], c["box"][3]
            stretches = stretches + [
                {**st, "boxes": [[b[0], y0 + b[1] * (y1 - y0), b[2], y0 + b[3] * (y1 - y0)]
                                 for b in st["boxes"]]}
                for st in (c.get("charts") or {}).get("stretches") or []]
        st_tele: list[dict | None] = []
        for st in stretches if not s.get("captures") else []:
            half = (st["from_s_ago"] - st["to_s_ago"]) / 2
            v = moment_verdict(live.history, ts - st["to_s_ago"] - half, half) \
                if ts is not None else None
            st_tele.append(dict(v.loads) if v is not None and v.windows else None)
        figure = picture_figure(r.sha256, int(r.width), int(r.height), regions, stretches) \
            if stretches else dash.no_update
        return picture_reading(s, tele, st_tele), True, figure


def register_compare(app: dash.Dash, live) -> None:
    """The comparison of the screenshots ticked (two or more): their pictures and verdicts
    side by side and the differences between their moments."""
    store = live.store

    @app.callback(
        Output(ids.SHOT_COMPARE, "children"),
        Input(ids.SHOT_CMP, "value"),
        Input(ids.SHOTS_VERSION, "data"),
        Input(ids.SHOT_SPAN, "value"),
        prevent_initial_call=True,
    )
    def _compare(chosen, _version, span):
        shots = store.screenshots()
        chosen = [s for s in (chosen or []) if s in set(shots["sha256"])]
        if len(chosen) < 2:
            return html.Div("Tick two or more screenshots to compare their moments.",
                            className="tl-muted")
        sub = shots.set_index("sha256").loc[chosen]
        sub = sub.sort_values("capture_ts", na_position="last")
        half = span_seconds(span)
        vs = [_span_verdict(live, t if pd.notna(t) else None, half) for t in sub["capture_ts"]]
        return compare_view(sub, vs, live.history.gpus)


__all__ = ["JS_NAMESPACE", "register", "register_browser_side", "register_compare",
           "register_list", "register_opened", "register_picture_route", "register_upload"]
