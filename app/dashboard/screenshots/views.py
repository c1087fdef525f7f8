"""What the Screenshots page's callbacks draw: a verdict's line, the picture with its regions,
the opened screenshot's panel and its moment in the dashboard, the screenshot list, the
screenshot marks on the live figure, and the compare cards and table."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import dash
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from dash import dcc, html

from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.screenshots.model import (
    Verdict,
    compare_table,
    fmt_bytes,
    fmt_local,
    moment_verdict,
    no_telemetry,
    parse_regions,
    picture_url,
    region_color,
)
from tealeaves.app.figures import (
    PHASE_COLORS,
)


def verdict_line(v: Verdict) -> html.Span:
    """A verdict as one line: a dot in its phase's colour (grey for none), then its text."""
    color = PHASE_COLORS.get(v.phase or "", "#9ca3af")
    return html.Span([html.Span("●", style={"color": color}), f" {v.text()}"],
                     className="tl-verdict")


#: Width (px) the opened picture is drawn at when it spans the panel (a 1920x1080 window);
#: its height follows the picture's aspect, within ``PICTURE_HEIGHT_PX``.
PICTURE_PANEL_PX = 1280
PICTURE_HEIGHT_PX = (300, 1000)


def picture_height(width: int, height: int) -> int:
    """Height (px) of the opened picture's figure: the picture's aspect at the panel's width
    (``PICTURE_PANEL_PX``), within ``PICTURE_HEIGHT_PX`` (a very tall or wide picture is
    letterboxed; scroll zooms)."""
    lo, hi = PICTURE_HEIGHT_PX
    return max(lo, min(hi, int(PICTURE_PANEL_PX * height / max(width, 1))))


#: A stretch's fill on the picture, by its pattern (uneven stands out).
STRETCH_FILL = {"uneven": "rgba(214,39,40,0.18)", "uniform": "rgba(44,160,44,0.14)",
                "idle": "rgba(127,127,127,0.14)"}


def picture_figure(sha: str, width: int, height: int, regions: list[dict],
                   stretches: list[dict] | None = None) -> go.Figure:
    """The screenshot ``sha`` (``width`` x ``height`` px) as a zoomable figure (pixel axes,
    y down) with its regions outlined; rectangles drawn on it become regions.  ``stretches``
    (``classifier.picture.stretches``' list) are shaded over each nvtop chart they cover
    (``STRETCH_FILL`` by pattern), numbered S1, S2, ... oldest first, as the reading lists
    them."""
    # a layout image (go.Image takes data URIs only): served by URL, zoomable with the axes
    fig = go.Figure(go.Scatter(x=[0, width], y=[0, height], mode="markers",
                               marker={"opacity": 0}, hoverinfo="skip", showlegend=False))
    fig.add_layout_image(source=picture_url(sha), xref="x", yref="y", x=0, y=0,
                         sizex=width, sizey=height, sizing="stretch", layer="below",
                         xanchor="left", yanchor="top")
    for i, r in enumerate(regions):
        x0, y0, x1, y1 = r["box"]
        fig.add_shape(type="rect", x0=x0 * width, x1=x1 * width, y0=y0 * height,
                      y1=y1 * height, line={"color": region_color(i), "width": 3},
                      fillcolor="rgba(0,0,0,0)", editable=False)
        fig.add_annotation(x=x0 * width, y=y0 * height, text=f"<b>{i + 1}</b> {r['name']}",
                           showarrow=False, xanchor="left", yanchor="top",
                           bgcolor="rgba(255,255,255,0.85)", font={"size": 12})
    for k, st in enumerate(stretches or []):
        pattern = st["verdict"]["pattern"]
        for j, (x0, y0, x1, y1) in enumerate(st["boxes"]):
            fig.add_shape(type="rect", x0=x0 * width, x1=x1 * width, y0=y0 * height,
                          y1=y1 * height, line={"width": 1, "color": "rgba(0,0,0,0.35)",
                                                "dash": "dot"},
                          fillcolor=STRETCH_FILL.get(pattern, "rgba(31,119,180,0.14)"),
                          editable=False, name=f"stretch S{k + 1}")
            if j == 0:
                fig.add_annotation(x=x0 * width, y=y1 * height, text=f"S{k + 1} {pattern}",
                                   showarrow=False, xanchor="left", yanchor="bottom",
                                   bgcolor="rgba(255,255,255,0.85)", font={"size": 11})
    fig.update_layout(margin={"l": 0, "r": 0, "t": 0, "b": 0}, dragmode="drawrect",
                      plot_bgcolor="white",
                      newshape={"line": {"color": "#d62728", "width": 3}},
                      height=picture_height(width, height),
                      uirevision=sha)
    # constrain="domain": square pixels by narrowing the plot, never by widening the ranges
    # (a resize after the panel opens would otherwise zoom the picture out)
    fig.update_xaxes(visible=False, range=[0, width], constrain="domain")
    fig.update_yaxes(visible=False, range=[height, 0], scaleanchor="x", constrain="domain")
    return fig


def detail(live, r, span: float, page_tz: str | None = None) -> dict:
    """What the opened screenshot's panel shows, for screenshot row ``r`` and verdicts over
    ``± span`` s.

    Returns:
        By output name (``callbacks.register_opened``): ``title``, ``picture`` (figure, regions
        outlined) and ``picture_style`` (its size: the panel's width, the picture's aspect),
        ``verdicts`` (lines: whole picture and each region), ``view`` (the moment's
        figure, time axis in the browser's zone ``page_tz``, or no_update), ``view_style``,
        ``time`` and ``zone`` (the local capture time and zone, for editing) and ``offsets``
        (the regions' offset inputs); ``fix_style``, ``fix_label``, ``fix_value``: the
        one-click correction of a moment with no telemetry (``model.no_telemetry``: the zone
        shift that reaches the store's data; hidden when there is none).
    """
    h = live.history
    ts = float(r.capture_ts) if pd.notna(r.capture_ts) else None
    regions = parse_regions(r.regions)
    tz = r.tz or "UTC"
    local_value = ""
    if ts is not None:
        try:
            local_value = datetime.fromtimestamp(ts, tz=ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M:%S")
        except Exception:  # noqa: BLE001 - unknown stored zone: show UTC
            local_value = datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    verdicts: list = []
    view, view_style = dash.no_update, {"display": "none"}
    fix = {"style": {"display": "none"}, "label": "", "value": ""}
    if ts is None:
        verdicts.append(html.Div("No capture time: set it below to place this screenshot.",
                                 className="tl-stale"))
    else:
        h.update()
        whole = moment_verdict(h, ts, span)
        verdicts.append(html.Div([html.B("whole picture: "), verdict_line(whole)]))
        if not whole.windows:
            why = no_telemetry(ts, tz, h.sessions, span)
            verdicts.append(html.Div(why.text, className="tl-stale tl-no-telemetry"))
            if why.fix_ts is not None:
                fix = {"style": {}, "value": f"{why.fix_ts:.3f}", "label": why.fix_label}
        for i, reg in enumerate(regions):
            off = float(reg.get("offset_s", 0.0))
            verdicts.append(html.Div([html.B(f"region {i + 1} ({reg['name']}, {off:+g} s): "),
                                      verdict_line(moment_verdict(h, ts + off, span))]))
        view, view_style = moment_figure(live, ts, span, regions, page_tz), {}
    offsets = [html.Span([html.Span(f"region {i + 1} ({reg['name']}) offset",
                                    className="tl-group-label",
                                    style={"color": region_color(i)}),
                          # step "any" and no min/max: a browser turns a value its checks
                          # refuse into None, which would read as 0; the server checks it
                          dcc.Input(id={"type": ids.REGION_OFFSET, "i": i}, type="number",
                                    value=float(reg.get("offset_s", 0.0)), step="any",
                                    className="tl-num-input"),
                          html.Span("s", className="tl-group-label")],
                         className="tl-offset-group")
               for i, reg in enumerate(regions)]
    title = f"{r['name']} · {fmt_local(ts, tz)} · time from {r.time_source}"
    return {"title": title,
            "picture": picture_figure(r.sha256, int(r.width), int(r.height), regions),
            "picture_style": {"width": "100%",
                              "height": f"{picture_height(int(r.width), int(r.height))}px"},
            "verdicts": verdicts, "view": view, "view_style": view_style,
            "time": local_value, "zone": tz, "offsets": offsets,
            "fix_style": fix["style"], "fix_label": fix["label"], "fix_value": fix["value"]}


def moment_figure(live, ts: float, span: float, regions: list[dict],
                  page_tz: str | None = None) -> go.Figure:
    """The dashboard's figure over ``ts ± span`` (epoch s; range view), the capture time and
    each region's moment marked; its time axis named for the browser's zone ``page_tz``."""
    v = live.range_view(ts - span, ts + span, px=700)
    fig = live.range_figure(v, height=560, uirevision=f"moment-{ts}", tz=page_tz)
    fig.add_vline(x=ts * 1000.0, line={"color": "#111827", "width": 2})
    for i, reg in enumerate(regions):
        off = float(reg.get("offset_s", 0.0))
        if off:
            fig.add_vline(x=(ts + off) * 1000.0, line={"color": region_color(i), "width": 2,
                                                        "dash": "dash"})
    fig.update_layout(showlegend=False, margin={"l": 124, "r": 10, "t": 10, "b": 30})
    return fig


def shot_table(shots: pd.DataFrame, verdict_at: Callable[[float | None], Verdict]):
    """The screenshot list: one row per kept screenshot (``SampleStore.screenshots``) with
    thumbnail, name and size, capture time, the verdict of its moment (``verdict_at(ts)``)
    and open / delete buttons; a note when there are none."""
    rows_ = []
    for r in shots.itertuples():
        ts = r.capture_ts if pd.notna(r.capture_ts) else None
        v = verdict_at(ts)
        rows_.append(html.Tr([
            html.Td(html.Img(src=picture_url(r.sha256), className="tl-thumb")),
            html.Td([html.B(r.name), html.Br(),
                     html.Span(f"{r.width} x {r.height} px · {fmt_bytes(r.nbytes)}",
                               className="tl-muted")]),
            html.Td([fmt_local(ts, r.tz), html.Br(),
                     html.Span(f"from {r.time_source}", className="tl-muted")]),
            html.Td(verdict_line(v) if ts is not None else
                    html.Span("set its time to place it", className="tl-stale")),
            html.Td([html.Button("open", id={"type": ids.SHOT_OPEN, "sha": r.sha256},
                                 className="tl-btn"),
                     html.Button("delete", id={"type": ids.SHOT_DEL, "sha": r.sha256},
                                 className="tl-btn tl-btn-danger")]),
        ], className="tl-shot-row"))
    return (html.Table([html.Tbody(rows_)], className="tl-table tl-shot-table") if rows_
            else html.Div("No screenshots yet.", className="tl-muted"))


def _cell(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, str):
        return v
    if isinstance(v, int | np.integer):
        return f"GPU {v}"
    return f"{v:.2f}" if math.isfinite(v) else "–"


def compare_view(sub: pd.DataFrame, verdicts: list[Verdict], gpus: list[int]) -> list:
    """The compare panel for screenshots ``sub`` (``SampleStore.screenshots`` rows indexed by
    hash, in capture order) and their verdicts: a card per screenshot (picture, name, time,
    verdict) and the ``compare_table`` of their moments over GPUs ``gpus``."""
    names = [f"{n}" for n in sub["name"]]
    cards = [html.Div(className="tl-cmp-card", children=[
        html.Img(src=picture_url(sha), className="tl-cmp-img"),
        html.Div(html.B(n)),
        html.Div(fmt_local(t if pd.notna(t) else None, tz), className="tl-muted"),
        verdict_line(v)]) for sha, n, t, tz, v in zip(sub.index, names, sub["capture_ts"],
                                                       sub["tz"], verdicts)]
    table = compare_table(names, verdicts, gpus)
    head = html.Tr([html.Th(c) for c in table[0]])
    body = []
    for r in table[1:]:
        tds = [html.Td(r[0])] + [html.Td(_cell(v)) for v in r[1:-1]]
        d = r[-1]
        tds.append(html.Td("–" if d is None or (isinstance(d, float) and not math.isfinite(d))
                           else f"{d:+.2f}", className="tl-delta"))
        body.append(html.Tr(tds))
    return [html.Div(cards, className="tl-cmp-cards"),
            html.Table([html.Thead(head), html.Tbody(body)],
                       className="tl-table tl-cmp-table")]


__all__ = ["compare_view", "detail", "moment_figure", "picture_figure",
           "shot_table", "verdict_line"]


#: The columns of the numbers read from a picture: (title, value keys, unit).
_READ_COLUMNS = (("utilization", ("util_pct",), "%"), ("power", ("power_w", "power_limit_w"), "W"),
                 ("memory", ("mem_used_mib", "mem_total_mib"), "MiB"), ("temperature",
                                                                      ("temp_c",), "°C"))
#: Below this confidence a value read is shown as doubtful.
SURE = 0.8


def _read_cell(g: dict, keys: tuple[str, ...], unit: str) -> html.Td:
    vals = [g["values"].get(k) for k in keys]
    if vals[0] is None:
        return html.Td("—", className="tl-muted", title="not printed or not read")
    conf = min(g["confidence"].get(k, 0.0) for k, v in zip(keys, vals, strict=True)
               if v is not None)
    text = " / ".join(f"{v:g}" for v in vals if v is not None) + f" {unit}"
    return html.Td(text + ("" if conf >= SURE else " ?"), title=f"read {conf:.0%} sure",
                   className="" if conf >= SURE else "tl-stale")


def picture_reading(s: dict, telemetry: list[dict | None],
                    stretch_telemetry: list[dict | None] | None = None,
                    no_telemetry: str = "none of those seconds") -> list:
    """The numbers read from the opened picture, its verdict per region and, for nvtop, per
    stretch of its charts (S1, S2, ... oldest first, as shaded on the picture).

    Args:
        s: ``classifier.picture.summary`` of the picture (whole picture, then its regions).
        telemetry: per region of ``s``, the telemetry's loads of that moment (``{gpu: %}``)
            or None where there is none.
        stretch_telemetry: per stretch of ``s["charts"]``, the telemetry's loads over its
            seconds, or None where there is none.
        no_telemetry: why a stretch without telemetry was not compared.

    A picture of two captures (``s["captures"]``) lists each capture's reading under its
    name, stretches numbered on (S1, S2 ... across both), none compared with the telemetry:
    which moment each capture shows is not known.
    """
    if s.get("captures"):
        out: list = [html.Div([html.B("read from the picture: "),
                               f"{s['tool']}, {len(s['captures'])} captures"])]
        out.extend(html.Div(note, className="tl-muted") for note in s["notes"])
        first = 0
        for c in s["captures"]:
            out.append(html.H4(c["name"], className="tl-capture"))
            out.extend(picture_reading({**c, "first_stretch": first}, [None] * len(c["regions"]),
                                       None, "a capture of two in one picture: which moment "
                                             "it shows is not known"))
            first += len((c.get("charts") or {}).get("stretches") or [])
        return out
    from tealeaves.classifier.picture import compare

    if not s["tool"]:
        return [html.Div([html.B("read from the picture: "),
                          "; ".join(s["notes"]) or "nothing read"], className="tl-stale")]
    n = len(s["gpus"])
    shown = [g["gpu"] for g in s["gpus"]]
    out: list = [html.Div([html.B("read from the picture: "),
                           f"{s['tool']}, {n} GPU{'s' if n != 1 else ''} (OCR)"])]
    head = html.Tr([html.Th("GPU"), *(html.Th(f"{t} ({u})") for t, _, u in _READ_COLUMNS)])
    rows = [html.Tr([html.Td(str(g["gpu"])),
                     *(_read_cell(g, keys, u) for _, keys, u in _READ_COLUMNS)])
            for g in s["gpus"]]
    out.append(html.Table([html.Thead(head), html.Tbody(rows)], className="tl-table tl-read"))
    for i, (reg, tele) in enumerate(zip(s["regions"], telemetry, strict=True)):
        label = f"region {i} ({reg['name']})" if i else reg["name"]
        gpus = ", ".join(map(str, reg["gpus"])) or "none read"
        v = reg["verdict"]
        out.append(html.Div([html.B(f"picture, {label} · GPUs {gpus}: "), v["text"]],
                            className="tl-read-verdict"))
        if tele:  # compared only where the GPUs match, agreeing only where the loads do
            c = compare(v, reg.get("loads") or {}, tele, shown)
            out.append(html.Div(f"{label}: {c['text']}", className={
                "agree": "tl-muted tl-agree", "disagree": "tl-stale tl-disagree",
                "not compared": "tl-stale tl-not-compared"}[c["status"]]))
    out.append(html.Div(s["regions"][0]["verdict"]["limits"], className="tl-muted"))
    charts = s.get("charts") or {}
    stretches = charts.get("stretches") or []
    first = s.get("first_stretch", 0)
    for k, st in enumerate(stretches):
        label = f"S{first + k + 1}"
        out.append(html.Div([html.B(f"{label}, {charts['source']}: "), st["text"]],
                            className="tl-read-verdict tl-stretch"))
        tele = (stretch_telemetry or [None] * len(stretches))[k]
        if tele:
            c = compare(st["verdict"], st["loads"], tele, shown)
            out.append(html.Div(f"{label}: {c['text']}", className={
                "agree": "tl-muted tl-agree", "disagree": "tl-stale tl-disagree",
                "not compared": "tl-stale tl-not-compared"}[c["status"]]))
        else:
            out.append(html.Div(f"{label}: not compared with the telemetry: {no_telemetry}",
                                className="tl-muted tl-not-compared"))
    if stretches:
        out.append(html.Div(charts["limits"], className="tl-muted"))
    out.extend(html.Div(f"charts: {n}", className="tl-muted") for n in charts.get("notes", []))
    out.extend(html.Div(note, className="tl-muted") for note in s["notes"])
    return out
