"""The page's panels, pure Dash components from data: the hover and window panels, the
legend, the status line's collector and scrape health, the cluster panel and the
toolbar (the header cells: ``header_panel``).  No callbacks here (``pages`` wire them)."""

from __future__ import annotations

import math
import time
from datetime import datetime

from dash import dcc, html

from tealeaves.app.dashboard import ids
from tealeaves.app.dashboard.config import PRESETS, DashboardConfig
from tealeaves.app.dashboard.cursor import Cursor
from tealeaves.app.dashboard.explain import explain_window, row_hot_set
from tealeaves.app.dashboard.timefmt import age_s, clock, fmt_age, page_zone, replay_text
from tealeaves.app.figures import (
    HOT_COLOR,
    MIN_SHARE_LOAD,
    PHASE_COLORS,
    PHASE_HELP,
    certainty,
    fmt_span,
    gpu_color,
    hot_set_text,
)
from tealeaves.classifier.incremental import SHARES_SOURCE_COLUMN
from tealeaves.collectors.health import intermittent_text
from tealeaves.data.schema import (
    entities_text,
    entity_count_text,
    entity_short,
)


def _num(v, spec: str, unit: str = "") -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "–"
    return f"{format(f, spec)}{unit}" if math.isfinite(f) else "–"


def _phase_pill(row: dict) -> list:
    """The window's phase as a coloured pill, then how sure (``figures.certainty``)."""
    return [_pill(str(row.get("phase"))), html.Span(f" {certainty(row)}")]


def hover_panel(info: dict, order: list[int] | None, tz: str | None = None,
                ribbon: str | None = None) -> list:
    """The hover panel: time (in the page's zone ``tz``), what the ribbon draws under the
    cursor (``ribbon``: ``"segments"``, the 0.1-s phase segments, or ``"windows"``, one bar
    per window or per few windows; None: unknown), the window's phase and confidence, why the
    two differ where they do (``_why_they_differ``), the window's verdict and phase shares of
    time (``_shares_line``), and one row per GPU (in the load bands' order) with every lane's
    value in the 0.1-s bin and the GPU's load share."""
    t = info["t"]
    zone = page_zone(tz)
    win = info.get("window")
    seg = info.get("segment")
    gpus = list(order or info.get("gpus") or [])
    head: list = [html.Div(f"{datetime.fromtimestamp(t, tz=zone):%Y-%m-%d} {clock(t, zone)} "
                           f"{zone.key}", className="tl-panel-time")]
    seg_text = ("" if seg is None else
                f"0.1-s segment {clock(seg['start'], zone, 1)}–{clock(seg['end'], zone, 1)} "
                f"({fmt_span(seg['end'] - seg['start'])}, {float(seg['confidence']):.0%} sure)")
    if ribbon == "segments":  # the ribbon's bar under the cursor is the segment: it comes first
        head.append(html.Div(
            [html.Span("ribbon here: "), _pill(str(seg["phase"])), html.Span(f" {seg_text}")]
            if seg is not None else
            [html.Span("ribbon here: no 0.1-s segment settled yet", className="tl-muted")],
            className="tl-panel-phase", id=ids.HOVER_RIBBON))
    hot_set = row_hot_set(win)
    if win is not None:
        hot_s = (" · hot " + hot_set_text(hot_set, win.get("hot_share"), win.get("cold_share"))
                 if hot_set else "")
        line = [html.Span(f"{_window_s(win)} window: "), *_phase_pill(win),
                html.Span(f" · {clock(win['start'], zone, 1)}–{clock(win['end'], zone, 1)} · "
                          f"max/mean {_ratio_text(win)}{hot_s}")]
        head.append(html.Div(line, className="tl-panel-phase", id=ids.HOVER_RIBBON)
                    if ribbon == "windows" else html.Div(line, className="tl-panel-phase"))
        why = _why_they_differ(win, seg, ribbon)
        if why:
            head.append(html.Div(why, className="tl-panel-why", id=ids.HOVER_WHY))
        head.append(_shares_line(win))
    else:
        head.append(html.Div("no labelled window here", className="tl-muted"))
    if seg is not None and ribbon != "segments":
        head.append(html.Div(seg_text.replace("0.1-s segment ", f"0.1-s segment: {seg['phase']} ",
                                              1), className="tl-muted"))
    b = info.get("bin") or {}
    loads = {g: float(win.get(f"load_g{g}", math.nan)) if win else math.nan for g in gpus}
    # shares of near-zero load are noise (figures.MIN_SHARE_LOAD, as in the share strip)
    busy = win is not None and float(win.get("load_mean", math.nan)) >= MIN_SHARE_LOAD
    total = sum(v for v in loads.values() if math.isfinite(v)) if busy else 0.0
    cols = [("SM", "sm_active", 1.0, ".0f"), ("Tensor", "tensor_active", 1.0, ".0f"),
            ("DRAM", "dram_active", 1.0, ".0f"), ("PCIe tx", "pcie_tx_bytes_per_s", 1e-6, ",.0f"),
            ("rx", "pcie_rx_bytes_per_s", 1e-6, ",.0f"), ("Power", "power_w", 1.0, ".0f")]
    units = ["%", "%", "%", "MB/s", "MB/s", "W", "%"]
    header = html.Tr([html.Th("GPU")] + [html.Th([n, html.Br(), html.Span(u, className="tl-unit")])
                                        for (n, *_), u in zip(cols, units)]
                     + [html.Th(["share", html.Br(), html.Span("%", className="tl-unit")])])
    body = []
    for g in gpus:
        cells = [html.Td([html.Span(className="tl-dot", style={"background": gpu_color(g)}),
                          entity_short(g)])]
        for _, col, scale, spec in cols:
            v = b.get((col, g))
            cells.append(html.Td(_num(None if v is None else v * scale, spec)))
        share = loads[g] / total * 100 if total > 0 and math.isfinite(loads[g]) else None
        hot = g in hot_set
        cells.append(html.Td(_num(share, ".0f"), className="tl-hot" if hot else None))
        body.append(html.Tr(cells))
    return head + [html.Table([html.Thead(header), html.Tbody(body)], className="tl-table")]


def _ratio_text(win: dict) -> str:
    """A window's max/mean work: ``"1.43×"``, ``"– (idle)"`` for a window under
    ``classifier.imbalance.IDLE_LOAD`` or near idle (``IDLE_WORK``; no imbalance figures),
    ``"–"`` when unknown."""
    from tealeaves.classifier.imbalance import IDLE_LOAD, IDLE_WORK

    text = _num(win.get("imbalance_ratio"), ".2f", "×")
    pipes = _f(win.get("tensor_active_mean")) + _f(win.get("dram_active_mean"))
    idle = _f(win.get("load_mean")) < IDLE_LOAD or pipes < IDLE_WORK  # imbalance.near_idle
    return "– (idle)" if text == "–" and idle else text


def _pill(phase: str, small: bool = True) -> html.Span:
    """A phase as a coloured pill (upper case)."""
    return html.Span(phase.upper(), className="tl-pill tl-pill-sm" if small else "tl-pill",
                     style={"background": PHASE_COLORS.get(phase, "#999"),
                            "color": "#1f2937" if phase == "idle" else "white"})


def _window_s(win: dict) -> str:
    """A window's length in words (``"0.5-s"``)."""
    d = _f(win.get("end")) - _f(win.get("start"))
    return f"{d:g}-s" if math.isfinite(d) and d > 0 else "labelled"


def _why_they_differ(win: dict, seg: dict | None, ribbon: str | None) -> str:
    """Why the window's phase and the 0.1-s segment under the cursor differ, in words (``""``
    when they agree or either is unknown): the window is labelled from its whole length and,
    "by context", from the windows around it (a Viterbi pass over windows); the segment from
    the windows covering this 0.1-s slot (a Viterbi pass over slots: ``classifier.segments``).
    Says which of the two the ribbon draws here."""
    if seg is None or win is None:
        return ""
    wp, sp = str(win.get("phase")), str(seg.get("phase"))
    if wp == sp:
        return ""
    how = certainty(win)
    ctx = (f", and by context: the sequence smoothing kept the phase of the windows around "
           f"it ({how.partition('(')[2].rstrip(')')})" if how.startswith("by context") else "")
    window = (f"The {_window_s(win)} window is labelled {wp} from its whole length{ctx}; the "
              f"0.1-s segment, scored from the windows covering just this slot, says {sp}.")
    if ribbon == "segments":
        return window + f" The ribbon draws the segments: {sp} here."
    if ribbon == "windows":
        return window + f" The ribbon draws whole windows at this span: {wp} here."
    return window


def _shares_line(win: dict) -> html.Div:
    """The hover panel's line of a window's phase shares of time (largest first; "calibrated"
    or the labeller's scores, ``classifier.incremental.SHARES_SOURCE_COLUMN``) and its verdict, the mixed
    one in bold; "no shares" for a window without them."""
    shares = {p: _f(win.get(f"share_{p}")) for p in ("idle", "prefill", "decode")}
    if not all(math.isfinite(v) for v in shares.values()):
        return html.Div("no phase shares for this window", className="tl-muted",
                        id=ids.HOVER_SHARES)
    source = win.get(SHARES_SOURCE_COLUMN)
    how = ("calibrated" if source == "calibrated" else
           "the labeller's scores" if isinstance(source, str) and source else "")
    verdict = win.get("verdict") if isinstance(win.get("verdict"), str) else ""
    if verdict.startswith("mixed"):  # the verdict names the shares itself
        rest = f" ({how} shares of its time)" if how else " (shares of its time)"
        return html.Div([html.Span("verdict "), html.B(verdict),
                         html.Span(rest, className="tl-muted")],
                        className="tl-panel-shares tl-mixed", id=ids.HOVER_SHARES)
    words = " · ".join(f"{p} {v:.0%}" for p, v in sorted(shares.items(), key=lambda kv: -kv[1])
                       if v >= 0.005)
    return html.Div([html.Span(f"verdict {verdict or '–'}"),
                     html.Span(f" · shares of its time: {words}" + (f" ({how})" if how else ""),
                               className="tl-muted")],
                    className="tl-panel-shares", id=ids.HOVER_SHARES)


def _f(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def window_panel(row: dict | None, gpus: list[int], labeller: str,
                 tz: str | None = None, ceilings: dict[int, dict] | None = None) -> list:
    """The selected window: its time (in the page's zone ``tz``), phase, scores, features
    and why it got its label; with ``ceilings`` (``LiveView.ceilings``), the ceiling each
    hot GPU leans on."""
    if row is None:
        return [html.Div("Click the figure to select a window: its features and why it got "
                         "its label show here.", className="tl-muted")]
    ex = explain_window(row, gpus, labeller, ceilings)
    zone = page_zone(tz)
    when = f"{clock(row['start'], zone, 1)}–{clock(row['end'], zone, 1)} {zone.key}"
    return [
        html.Div([html.B("Selected window "), when], className="tl-panel-time"),
        html.Div([*_phase_pill(row), html.Span(f" · labelled by the {ex.labeller}")],
                 className="tl-panel-phase"),
        html.Ul([html.Li(r) for r in ex.reasons], className="tl-reasons"),
        html.Table([html.Tbody([html.Tr([html.Td(k), html.Td(v, className="tl-num")])
                                for k, v in ex.features])], className="tl-table tl-kv"),
    ]


def labeller_label() -> str:
    """Which phase model labels the windows: the trained one, or the rules as fallback."""
    from tealeaves.classifier import default_labeller, labeller_name

    if default_labeller.cache_info().currsize == 0:  # still loading (server start preloads it)
        return "loading the model"
    name = labeller_name(default_labeller())
    return {"trained": "trained model", "taught": "model taught by the engine"}.get(
        name, "v0 rules")


#: Intermittent metrics named on the status line; the rest are counted ("+N more") and all
#: are in the piece's tooltip.
INTERMITTENT_SHOWN = 3


def collector_health(health: dict | None) -> list:
    """Status-line pieces for the collector's health: sweep rate, jitter (p99 lateness of a
    sweep against its deadline), missed deadlines, offline GPUs, store drops, intermittent
    metrics (``HealthSummary.intermittent``: answered but failed some reads, with the counts:
    "intermittent: gpu0:dram_active failed 1 of 1344 reads"; never called unsupported)."""
    h = (health or {}).get("collector")
    if not h:
        return []
    out: list = []
    if h.get("sweeps_per_s"):
        out.append(f" · {h['sweeps_per_s']:.1f} sweeps/s")
    p99 = h.get("lateness_ms_p99")
    if p99 is not None and not math.isnan(p99):
        out.append(f" · jitter p99 {p99:.1f} ms")
    if h.get("missed_deadlines"):
        out.append(f" · {h['missed_deadlines']} missed deadlines")
    if h.get("offline"):
        out.append(html.Span(f" · GPU {', '.join(map(str, h['offline']))} offline",
                             className="tl-stale"))
    waiting = h.get("buffered_for_store", 0)
    bad = h.get("dropped_samples", 0) + h.get("store_errors", 0) + waiting
    if bad:
        out.append(html.Span(f" · store: {h.get('store_errors', 0)} write errors, "
                             f"{h.get('dropped_samples', 0)} samples dropped"
                             + (f", {waiting} waiting" if waiting else ""),
                             className="tl-stale"))
    if h.get("source_errors"):  # a Prometheus that stopped answering
        ok = h.get("source_last_ok")
        since = f"last good poll {fmt_age(time.time() - ok)} ago" if ok else "no good poll yet"
        out.append(html.Span(f" · source: {h['source_errors']} failed polls, {since} "
                             f"({h.get('source_last_error')})", className="tl-stale",
                             title=str(h.get("source_last_error"))))
    flaky = h.get("intermittent") or {}
    if flaky:
        shown = dict(list(flaky.items())[:INTERMITTENT_SHOWN])
        more = len(flaky) - len(shown)
        out.append(html.Span(
            f" · intermittent: {intermittent_text(shown)}" + (f" (+{more} more)" if more else ""),
            title="answered, but some reads failed (stored as no reading): "
                  + intermittent_text(flaky)))
    for key, what in (("blank_values", "blank"), ("out_of_range_values", "impossible")):
        counts = h.get(key) or {}
        if counts:
            top = ", ".join(f"{c} {n}" for c, n in sorted(counts.items(), key=lambda x: -x[1]))
            out.append(f" · {sum(counts.values())} {what} values read as no reading ({top})")
    out.extend(_scrape_health((health or {}).get("server_metrics")))
    return out


def _scrape_health(sh) -> list:
    """Status-line piece for a ``/metrics`` scraper that fails: age of the last good scrape,
    failures and the last error."""
    if sh is None or not getattr(sh, "failures", 0):
        return []
    ok = sh.last_ok
    since = f"last good scrape {fmt_age(time.time() - ok)} ago" if ok else "no good scrape yet"
    cls = "tl-stale" if sh.consecutive_failures else ""
    return [html.Span(f" · /metrics: {since}, {sh.failures} of {sh.scrapes} failed "
                      f"(last: {sh.last_error})", className=cls, title=str(sh.last_error))]


def legend(gpus: list[int] | None = None) -> html.Div:
    """The phase-colour legend (plus the imbalance and PCIe line-style keys)."""
    items = []
    for phase in ("idle", "prefill", "decode"):
        items.append(html.Span(className="tl-key", title=PHASE_HELP[phase], children=[
            html.Span(className="tl-swatch", style={"background": PHASE_COLORS[phase]}),
            html.B(phase), html.Span(f" {PHASE_HELP[phase]}", className="tl-key-help"),
        ]))
    items.append(html.Span(className="tl-key", children=[
        html.Span(className="tl-swatch tl-swatch-thin", style={"background": HOT_COLOR}),
        html.B("imbalanced"), html.Span(" decode window with hot GPUs (red in the share strip)",
                                        className="tl-key-help"),
    ]))
    items.append(html.Span(className="tl-key", children=[
        html.Span(className="tl-swatch tl-swatch-stack", style={"background": (
            f"linear-gradient({PHASE_COLORS['decode']} 0 60%, {PHASE_COLORS['prefill']} 60%)")}),
        html.B("stacked bar"), html.Span(" zoomed out: each phase's share of the bar's time "
                                         "(calibrated shares where known)",
                                         className="tl-key-help"),
    ]))
    items.append(html.Span(className="tl-key", children=[
        html.Span(className="tl-swatch", style={"background": (
            f"repeating-linear-gradient(135deg, {PHASE_COLORS['prefill']} 0 2px, "
            f"{PHASE_COLORS['decode']} 2px 6px)")}),
        html.B("striped"), html.Span(" mixed window: no phase holds 70 % of it; stripes in the "
                                     "colour it is mixed with", className="tl-key-help"),
    ]))
    items.append(html.Span(className="tl-key", children=[
        html.Span(className="tl-swatch tl-swatch-outline"),
        html.B("selected"), html.Span(" the window clicked (details on the right)",
                                      className="tl-key-help"),
    ]))
    items.append(html.Span(className="tl-key", children=[
        *[html.Span(className="tl-dot", style={"background": gpu_color(g)})
          for g in (gpus or [0])],
        html.B(" " + entities_text(gpus or [0])),
        html.Span(" line colours; PCIe tx solid, rx dotted; gaps: no data",
                  className="tl-key-help"),
    ]))
    return html.Div(id=ids.LEGEND, className="tl-legend", children=items)


def follow_button(state: Cursor) -> tuple[str, str]:
    if state.get("follow"):
        return "● following live", "tl-btn tl-follow tl-follow-on"
    return "❚❚ paused · follow live", "tl-btn tl-follow tl-follow-off"


def follow_note(state: Cursor, c: DashboardConfig) -> str:
    """One line saying what the follow view draws."""
    f = int(state.get("factor", 1))
    ribbon = ("0.1-s phase segments" if state.get("m") is not None
              else f"one bar per {c.window_s:g}-s window")
    held = "following" if state.get("follow", True) else (
        "paused by your click on a window, so it stays on screen and selected (follow live "
        "resumes)" if state.get("paused_by") == "select" else "paused")
    return (f"last {fmt_span(float(state.get('span') or c.view_s))}, {held} · lanes: "
            f"{c.bin_s * f:g}-s bins (mean) · ribbon: {ribbon}")


def cluster_panel() -> html.Div:
    """The cluster overview (shown when the store holds several hosts): the node picker and
    every host's phase and GPUs' load over the last 10 minutes (``app.dashboard.cluster``)."""
    return html.Div(id=ids.CLUSTER_PANEL, className="tl-panel", style={"display": "none"},
                    children=[
        html.Div([html.Span("Cluster: each host's phase and each GPU's load, up to the last "
                            "10 min · the lanes below show node ", className="tl-panel-title"),
                  dcc.Dropdown(id=ids.HOST, clearable=False, searchable=True,
                               className="tl-host-pick"),
                  html.Span(" (pick one, or click its row)", className="tl-muted")],
                 className="tl-cluster-head"),
        dcc.Graph(id=ids.CLUSTER_GRAPH, config={"displaylogo": False, "displayModeBar": False}),
    ])


def toolbar(state: Cursor, config: DashboardConfig) -> html.Div:
    """Range presets, follow/pause, the time-range picker, band order, view note, latency."""
    label, cls = follow_button(state)
    span = state.get("span")
    return html.Div(className="tl-toolbar", children=[
        html.Div(className="tl-group", children=[
            html.Span("show", className="tl-group-label"),
            *[html.Button(text, id=pid, n_clicks=0,
                          className="tl-btn tl-btn-on" if s == span else "tl-btn",
                          title=("the whole session" if s is None else
                                 f"the last {text}, following live"))
              for pid, text, s in PRESETS],
            html.Button(label, id=ids.FOLLOW, n_clicks=0, className=cls,
                        title="pause or resume following the newest data"),
        ]),
        html.Div(className="tl-group", children=[
            html.Span("from", className="tl-group-label"),
            dcc.Input(id=ids.RANGE_FROM, type="text", debounce=True, className="tl-time",
                      placeholder="YYYY-MM-DD HH:MM:SS"),
            html.Span("to", className="tl-group-label"),
            dcc.Input(id=ids.RANGE_TO, type="text", debounce=True, className="tl-time",
                      placeholder="YYYY-MM-DD HH:MM:SS"),
            html.Span("UTC", id=ids.TZ_LABEL, className="tl-group-label",
                      title="times on this page are in the browser's time zone"),
            html.Button("show range", id=ids.RANGE_GO, n_clicks=0, className="tl-btn"),
        ]),
        html.Div(className="tl-group", children=[
            html.Span("session", className="tl-group-label",
                      title="runs of samples between pauses of over a minute"),
            dcc.Dropdown(id=ids.SESSION, options=[], clearable=False, searchable=False,
                         placeholder="one session", className="tl-session"),
        ]),
        html.Div(className="tl-group", children=[
            html.Span("report", className="tl-group-label"),
            dcc.Dropdown(id=ids.REPORT_FORMAT, value="html", clearable=False, searchable=False,
                         options=[{"label": f, "value": f}
                                  for f in ("html", "pdf", "png", "csv", "json")],
                         className="tl-report-format"),
            html.Button("export this range", id=ids.REPORT_GO, n_clicks=0, className="tl-btn",
                        title="an imbalance report of the range on screen (the same as "
                              "`tealeaves report --store ... --from ... --to ...`)"),
            # the dots take the message's own box, after the button, never over it
            dcc.Loading(html.Span(id=ids.REPORT_MSG, className="tl-muted"), type="dot",
                        parent_className="tl-report-msg"),
            dcc.Download(id=ids.REPORT_DOWNLOAD),
        ]),
        html.Div(className="tl-group", children=[
            html.Span("GPU bands", className="tl-group-label"),
            dcc.RadioItems(id=ids.ORDER, value=state.get("order_by", "index"), inline=True,
                           options=[{"label": "by index", "value": "index"},
                                    {"label": "busiest first", "value": "load"}],
                           className="tl-radio"),
        ]),
        html.Div(className="tl-viewline", children=[
            html.Span(follow_note(state, config) if state.get("span") else "",
                      id=ids.VIEW_NOTE, className="tl-view-note"),
            html.Span("sample → screen: measuring…", id=ids.LATENCY, className="tl-latency"),
        ]),
    ])


def status_line(c: DashboardConfig, h, state: Cursor | None, health: dict | None,
                host: str | None, n_hosts: int) -> list:
    """The status line: source, GPUs, node (of ``n_hosts``), samples stored, history held
    (``h``: the ``History``), phase model, server signals, age of the newest sample and the
    collector's ``health`` (``DashboardConfig.health``'s answer)."""
    replay = c.replay() if c.replay is not None else None
    parts: list = [html.Span(replay_text(replay, (state or {}).get("tz")), id=ids.REPLAY,
                             className="tl-source") if replay
                   else html.Span(c.source, className="tl-source")]
    gpus = (state or {}).get("gpus") or []
    parts.append(f" · {entity_count_text(gpus)}")
    if host is not None:
        parts.append(f" on {host} ({n_hosts} hosts)")
    parts.append(f" · {h.cursor:,} samples stored")
    sp = h.span()
    if sp is not None:
        parts.append(f" · history {fmt_span(sp[1] - sp[0])}")
    parts.append(f" · phases: {labeller_label()}")
    if c.server:
        parts.append(html.Span(f" · {c.server}", className="tl-server", id=ids.SERVER))
    age = age_s((state or {}).get("ts_last"), (state or {}).get("mono_last"))
    if age is not None:
        cls = "tl-age tl-stale" if age > 5 else "tl-age"
        parts.append(html.Span(f" · last sample {fmt_age(age)} ago", className=cls))
    parts.extend(collector_health(health))
    if health is not None and not health.get("running", True):
        err = health.get("error")
        parts.append(html.Span(f" · collector stopped{': ' + err if err else ''}",
                               className="tl-stale"))
    return parts
