"""The balance panel beside the lanes, for the range on screen: the balance across MIG GPU
instances (``classifier.mig``, from the range's windows), the spread across the server's
data-parallel ranks and SGLang's own expert balance (``classifier.server_balance``, from the
``/metrics`` scrapes stored for the range).  Hidden when the range holds none of them."""

from __future__ import annotations

import math
from zoneinfo import ZoneInfo

import plotly.graph_objects as go
from dash import html

from tealeaves.app.dashboard.timefmt import clock
from tealeaves.app.figures.eplb import eplb_figure
from tealeaves.classifier.mig import balance_line
from tealeaves.classifier.server_balance import (
    balancedness_line,
    heat_size,
    heat_verdict,
    read_balance,
    server_balancedness,
    spread_line,
)


def _n(v: float, spec: str = ",.0f") -> str:
    return "–" if v is None or not math.isfinite(v) else format(v, spec)


def _when(span: list[float], zone: ZoneInfo) -> str:
    t0, t1 = span
    return clock(t0, zone, 0) if t0 == t1 else f"{clock(t0, zone, 0)} to {clock(t1, zone, 0)}"


def _engine(s: dict) -> str:
    return "vLLM" if s["rank_label"] == "engine" else "SGLang"


def rank_table(s: dict, zone: ZoneInfo) -> html.Div:
    """The per-rank table of ``rank_spread``'s answer ``s``, its header naming the label, the
    scrapes and their span; a rank off the median by more than ``RANK_SPREAD`` is marked."""
    head = html.Tr([html.Th(x) for x in (s["rank_label"], "gen tok/s", "run", "queue",
                                          "accept", "× mean")])
    rows = []
    for r in s["ranks"]:
        off = r["rank"] in s["uneven_ranks"]
        rows.append(html.Tr(className="tl-hot-row" if off else "", children=[
            html.Td(r["rank"]), html.Td(_n(r["gen_throughput_tok_s"])),
            html.Td(_n(r["running_req"], ".1f")), html.Td(_n(r["queue_req"], ".1f")),
            html.Td(_n(r["accept_len"], ".2f")), html.Td(_n(r["vs_median"], ".2f"))]))
    far = bool(s["uneven_ranks"])
    verdict = spread_line(s).split("; ", 1)[1]  # "UNEVEN: ...", "even (...)" or "n/a (...)"
    return html.Div(id="tl-server-ranks", children=[
        html.Div(f"DP ranks · {_engine(s)} /metrics, {s['scrapes']} scrape"
                 f"{'s' if s['scrapes'] != 1 else ''}, {_when(s['span'], zone)} (means)",
                 className="tl-muted"),
        html.Table(className="tl-table", children=[html.Thead(head), html.Tbody(rows)]),
        html.Div(verdict, className="tl-stale" if far else "tl-muted"),
    ])


def expert_text(heat: dict, bal, zone: ZoneInfo) -> html.Div:
    """The expert section's header: the source, the layers and ranks, what the counts cover,
    the balancedness (summed load) and the server's own mean balancedness."""
    t0, t1 = heat["span"]
    basis = (f"increase from {clock(t0, zone, 0)} to {clock(t1, zone, 0)}"
             if heat["basis"] == "increase"
             else f"counts since the server started, as of {clock(t1, zone, 0)}")
    own, passes = server_balancedness(bal)
    tail = (f"; the server's eplb_balancedness {own:.2f} over {passes:,.0f} passes"
            if math.isfinite(own) else "")
    return html.Div([
        html.Div(f"Expert balance · sglang:eplb_gpu_physical_count, {heat_size(heat, '×')}, "
                 f"{basis}", className="tl-muted"),
        html.Div(f"{heat_verdict(heat)}{tail}", id="tl-expert-verdict"),
    ])


def mig_section(groups: list[dict], span: tuple[float, float], zone: ZoneInfo) -> html.Div:
    """The MIG section: one line per group of instances (``classifier.mig``), uneven in red."""
    return html.Div(id="tl-mig-balance", children=[
        html.Div(f"MIG instances · load per window, {_when(list(span), zone)}",
                 className="tl-muted"),
        *[html.Div(balance_line(g).removeprefix("MIG: "),
                   className="tl-stale" if g["uneven"] else "") for g in groups],
    ])


def server_panel(frame, zone: ZoneInfo, mig: list[dict] | None = None,
                 span: tuple[float, float] | None = None
                 ) -> tuple[list, go.Figure | None] | None:
    """The panel's children and expert figure for the range on screen: ``mig`` its MIG
    groups (``classifier.mig.load_balance``) over ``span``, ``frame`` its stored scrapes;
    None when there are no MIG groups, two ranks nor eplb buckets."""
    b = read_balance(frame)
    spread, heat, bal = b["spread"], b["heat"], b["bal"]
    alone = heat is None and len(bal) > 0  # the server's balancedness, no heatmap
    if spread is None and heat is None and not alone and not mig:
        return None
    children: list = []
    if mig:
        children.append(mig_section(mig, span or (math.nan, math.nan), zone))
    if spread is not None:
        children.append(rank_table(spread, zone))
    fig = None
    if alone:
        children.append(html.Div([html.Div("Expert balance · sglang:eplb_balancedness",
                                           className="tl-muted"),
                                  html.Div(balancedness_line(bal), id="tl-expert-verdict")]))
    if heat is not None:
        children.append(expert_text(heat, bal, zone))
        fig = eplb_figure(heat["layers"], heat["ranks"], heat["counts"],
                          bal["timestamp"].to_numpy(dtype=float),
                          bal["balancedness"].to_numpy(dtype=float))
    return children, fig
