"""The report as one self-contained HTML file: figures (plotly, with plotly.js embedded once, so
the file opens offline), tables and text, every user-supplied string escaped (Jinja2's
autoescape; plotly's figure JSON escapes ``</`` itself).  ``print_layout`` fixes the figure
widths for an A4 page (PDF/PNG rendering)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from markupsafe import Markup
from plotly.subplots import make_subplots

from tealeaves.app.figures import (
    HOT_COLOR,
    PHASE_COLORS,
    RIBBON_PHASES,
    fmt_span,
    gpu_color,
    hot_set_text,
    partial_text,
    pauses_text,
    ribbon_shares,
)
from tealeaves.app.figures.eplb import eplb_figure
from tealeaves.app.report.html_template import TEMPLATE
from tealeaves.app.report.model import Report
from tealeaves.classifier.hot_set import STAYS_SHARE, HotSetStory, describe_hot_set
from tealeaves.classifier.imbalance import IDLE_LOAD
from tealeaves.classifier.server_balance import heat_size, heat_verdict, server_balancedness
from tealeaves.data.schema import entity_name

#: Most columns of the timeline (windows are grouped beyond that).
TIMELINE_COLUMNS = 600
#: Figure width in print layout, px (A4 at 96 dpi less the page margins).
PRINT_WIDTH = 700

def _f(v, spec: str = ".2f", unit: str = "") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{format(v, spec)}{unit}"


def _pct(v, digits: int = 0) -> str:
    """A 0-1 share as the report writes every percentage: "42 %" ("–" when unknown)."""
    return _f(None if v is None else v * 100, f".{digits}f", " %")


def _figure_html(fig: go.Figure, print_layout: bool) -> Markup:
    if print_layout:
        fig.update_layout(width=PRINT_WIDTH)
    html = pio.to_html(fig, include_plotlyjs=False, full_html=False,
                       config={"displaylogo": False, "responsive": not print_layout},
                       default_width=f"{PRINT_WIDTH}px" if print_layout else "100%")
    return Markup(html)


def timeline_figure(windows: pd.DataFrame, gpus: list[int], window_s: float) -> go.Figure:
    """Phase ribbon (stacked phase shares per column: the mean of its windows' calibrated
    shares of time where they carry them, else of their labels, ``figures.ribbon_shares``;
    red where a column holds an imbalanced window) over a GPUs x time heatmap of load (%), at
    most ``TIMELINE_COLUMNS`` columns; x is UTC text (a static report is not shifted into the
    viewer's zone)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.22, 0.78],
                        vertical_spacing=0.04)
    if len(windows):
        t0 = float(windows["start"].min())
        n = max(1, math.ceil((float(windows["end"].max()) - t0) / window_s))
        per = max(1, math.ceil(n / TIMELINE_COLUMNS))
        col = ((windows["start"].to_numpy(dtype=float) - t0) / (window_s * per)).astype(int)
        g = windows.assign(_c=col).groupby("_c")
        centres = t0 + (np.asarray(list(g.groups)) + 0.5) * window_s * per
        x = [pd.Timestamp(c, unit="s").strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] for c in centres]
        size = g.size().to_numpy(dtype=float)
        base = np.zeros(len(size))
        shares = pd.DataFrame(ribbon_shares(windows), columns=list(RIBBON_PHASES)).groupby(
            col).mean()
        for p in RIBBON_PHASES:
            share = shares[p].to_numpy(dtype=float)
            if not share.any():
                continue
            fig.add_trace(go.Bar(x=x, y=share, base=base, name=p, width=window_s * per * 1000,
                                 marker={"color": PHASE_COLORS.get(p, "#999"),
                                         "line": {"width": 0}},
                                 hovertemplate=f"{p} %{{y:.0%}}<extra></extra>"), row=1, col=1)
            base = base + share
        flagged = g["imbalanced"].any().to_numpy()
        fig.add_trace(go.Bar(x=x, y=np.where(flagged, 0.25, 0.0), base=1.05, name="imbalanced",
                             width=window_s * per * 1000, marker={"color": HOT_COLOR},
                             hoverinfo="skip"), row=1, col=1)
        z = [g[f"load_g{gpu}"].mean().to_numpy(dtype=float) if f"load_g{gpu}" in windows
             else np.full(len(size), np.nan) for gpu in gpus]
        fig.add_trace(go.Heatmap(x=x, y=[entity_name(int(gpu)) for gpu in gpus], z=z, zmin=0,
                                 zmax=100,
                                 colorscale="YlOrRd", colorbar={"title": {"text": "load %"},
                                                                 "len": 0.75, "y": 0.38},
                                 hovertemplate="%{y} %{x}<br>load %{z:.0f} %<extra></extra>"),
                      row=2, col=1)
    fig.update_layout(barmode="overlay", bargap=0, showlegend=True, template="plotly_white",
                      height=200 + 26 * max(1, len(gpus)),
                      margin={"l": 60, "r": 10, "t": 10, "b": 70},
                      # below the axis: over the ribbon it hid the imbalance marks
                      legend={"orientation": "h", "y": -0.32, "x": 0, "yanchor": "top"},
                      font={"size": 11})
    fig.update_yaxes(range=[0, 1.35], showticklabels=False, row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=2, col=1)
    fig.update_xaxes(type="date", row=2, col=1, title={"text": "time (UTC)"})
    return fig


def _hot_gpus(s: dict) -> list[int]:
    """The GPUs a report marks hot: its hot set (the GPU of ``hot_gpu`` in a report
    without one)."""
    if s.get("hot_set"):
        return [int(g) for g in s["hot_set"]]
    return [] if s.get("hot_gpu") is None else [int(s["hot_gpu"])]


def _set_words(hot_set: list[int], hot_share, cold_share) -> str:
    """``"GPUs 1, 3, 5, 7 — 18 % each vs 7 %"`` from report shares (0-1, None: unknown)."""
    return hot_set_text(hot_set, math.nan if hot_share is None else hot_share * 100,
                        math.nan if cold_share is None else cold_share * 100)


def gpu_figure(d: dict) -> go.Figure:
    """Mean load (%) and busy share per GPU; the GPUs of the hot set in red."""
    gpus = [g["gpu"] for g in d["gpus"]]
    hot = _hot_gpus(d["summary"])
    colors = [HOT_COLOR if g in hot else gpu_color(g) for g in gpus]
    fig = go.Figure(go.Bar(x=[entity_name(int(g)) for g in gpus],
                           y=[g["load_mean"] for g in d["gpus"]], marker={"color": colors},
                           name="mean load %", hovertemplate="%{x}: %{y:.1f} %<extra></extra>"))
    fig.update_layout(height=170, template="plotly_white", margin={"l": 50, "r": 10, "t": 24,
                                                                    "b": 30},
                      title={"text": "mean load per GPU (SM active %, else GR engine active, "
                                     "else utilization); red: hot set",
                             "font": {"size": 12}}, yaxis={"range": [0, 100]},
                      font={"size": 11})
    return fig


def expert_figures(report: Report) -> tuple[go.Figure, go.Figure]:
    """Per-layer expert load heatmap (share of each layer's routed tokens, %) with max/mean
    per layer, and each layer's GPU balancedness now and under the greedy placement."""
    ex = report.data["experts"]
    load = np.asarray(report.experts["layer_load"], dtype=float)
    tot = load.sum(axis=1, keepdims=True)
    share = np.where(tot > 0, 100.0 * load / np.where(tot > 0, tot, 1.0), np.nan)
    layers = list(range(load.shape[0]))
    heat = make_subplots(rows=1, cols=2, column_widths=[0.78, 0.22], shared_yaxes=True,
                         horizontal_spacing=0.03)
    heat.add_trace(go.Heatmap(z=share, x=list(range(load.shape[1])), y=layers,
                              colorscale="Viridis",
                              colorbar={"title": {"text": "% of the layer's tokens",
                                                  "side": "top"}, "orientation": "h",
                                        "y": -0.24, "len": 0.6, "x": 0.0, "xanchor": "left",
                                        "thickness": 10},
                              hovertemplate="layer %{y} expert %{x}: %{z:.2f} %<extra></extra>"),
                   row=1, col=1)
    heat.add_trace(go.Scatter(x=ex["layer_expert_max_over_mean"], y=layers, mode="lines+markers",
                              name="max/mean", marker={"size": 3}, line={"color": HOT_COLOR}),
                   row=1, col=2)
    heat.update_layout(height=max(320, 8 * len(layers) + 160), template="plotly_white",
                       margin={"l": 50, "r": 10, "t": 28, "b": 110}, showlegend=False,
                       title={"text": "expert load per layer (left) · max/mean over experts "
                                      "(right)", "font": {"size": 12}}, font={"size": 11})
    heat.update_yaxes(title={"text": "layer"}, autorange="reversed", row=1, col=1)
    heat.update_xaxes(title={"text": "expert"}, row=1, col=1)
    heat.update_xaxes(title={"text": "max/mean"}, row=1, col=2)
    bal = go.Figure()
    bal.add_trace(go.Scatter(x=layers, y=ex["layer_balancedness"], name="now", mode="lines",
                             line={"color": "#1f77b4"}))
    bal.add_trace(go.Scatter(x=layers, y=ex["layer_balancedness_greedy"],
                             name="greedy placement (estimate)", mode="lines",
                             line={"color": "#2ca02c", "dash": "dash"}))
    bal.update_layout(height=230, template="plotly_white", yaxis={"range": [0, 1.05],
                                                                   "title": "balancedness"},
                      xaxis={"title": "layer"}, margin={"l": 50, "r": 10, "t": 28, "b": 36},
                      title={"text": "GPU balancedness per layer (mean/max of GPU expert work)",
                             "font": {"size": 12}}, legend={"orientation": "h", "y": -0.3},
                      font={"size": 11})
    return heat, bal


def _summary_cards(s: dict, srv: dict | None, hot_set: list[int], set_words: str) -> list[tuple]:
    """The summary cards, ``(title, value, note)`` each: phase shares of the windows, of the
    time (the windows' mean shares, when the report has them), balancedness, imbalance
    ratio, straggler tax, the hot GPU or set, and the server's throughput when it was read."""
    pt, share = s["phase_time_s"], s["phase_share"]
    cards = [
        ("idle / prefill / decode", " / ".join(_pct(share[p]) for p in
                                                ("idle", "prefill", "decode")),
         " / ".join(fmt_span(pt[p] or 0.0) for p in ("idle", "prefill", "decode"))),
        ("decode balancedness", _f(s["decode_balancedness"]),
         f"mean/max GPU work, 1 = even, {_over(s)}"),
        ("imbalance ratio", _f(s["imbalance_ratio"], ".2f", "×"),
         f"max/mean GPU work, {_over(s)}"),
        ("straggler tax", _pct(s["straggler_tax"], 1),
         f"decode GPU-time lost waiting, {_over(s)}"),
        _hot_card(s),
    ]
    shares = s.get("phase_shares")
    if shares and any(v is not None for v in shares.values()):
        cards.insert(1, ("shares of time", _phase_triple(shares),
                         "idle / prefill / decode, " + (
                             "calibrated" if s.get("phase_shares_source") == "calibrated"
                             else "the labeller's scores")))
    if srv:
        cards.append(("server", _f(srv["gen_throughput_tok_s"], ",.0f", " tok/s"),
                      f"accept length {_f(srv['accept_len'])}"))
    return cards


def _phase_triple(shares: dict) -> str:
    """``"15 % / 24 % / 61 %"``: idle / prefill / decode shares (0-1, None: "–")."""
    return " / ".join(_f(None if shares.get(p) is None else shares[p] * 100, ".0f", " %")
                      for p in ("idle", "prefill", "decode"))


def _shares_text(s: dict) -> str:
    """The summary's sentence on the range's phase shares of time and what the verdicts
    stood on (``summary.phase_shares``, ``phase_shares_source``, ``inputs``); ``""`` for a
    report without them."""
    shares = {p: v for p, v in (s.get("phase_shares") or {}).items() if v is not None}
    out = ""
    if shares:
        words = ", ".join(f"{p} {v * 100:.0f} %" for p, v in
                          sorted(shares.items(), key=lambda kv: -kv[1]))
        how = ("the mean of the windows' calibrated shares" if s.get("phase_shares_source")
               == "calibrated" else "the mean of the labeller's scores, not calibrated shares")
        out = f"Phase shares of the range's time: {words} ({how})."
    text = (s.get("inputs") or {}).get("text")
    if text:
        out += f" The verdicts stood on {text}."
    return out.strip()


def _changes(n: int) -> str:
    """``"1 change"``, ``"3 changes"``."""
    return f"{n} change{'' if n == 1 else 's'}"


def story_of(s: dict) -> HotSetStory:
    """The hot set's story of a report summary (``classifier.hot_set``): its ``hot_story``
    (shares 0-1), or, for a report written before it, one told from ``hot_sets``."""
    if s.get("hot_story"):
        return HotSetStory.from_json(s["hot_story"], share_scale=100.0)
    sets = [tuple(int(g) for g in k.split(",")) for k, n in (s.get("hot_sets") or {}).items()
            for _ in range(int(n))]
    return describe_hot_set(sets)


def _over(s: dict) -> str:
    """Which windows the figures are over (``summary.figures_text``; older reports: the
    decode windows)."""
    return s.get("figures_text") or f"over the {s['decode_windows']} decode windows"


def _hot_card(s: dict) -> tuple:
    """The hot-set card: the set that stays (or the sets it rotates between) as its value,
    its work against the rest and how it behaves as its note (``classifier.hot_set``)."""
    story = story_of(s)
    one = story.pattern == "stays" and len(story.gpus) == 1
    if story.pattern == "stays":
        share = story.share_words()
        note = ((f"{share} · " if share else "") + f"stays: {story.top.windows} of "
                f"{story.flagged} imbalanced windows")
    elif story.pattern == "rotates":
        note = f"{story.text()} · {_changes(story.changes)}"
    else:
        note = story.text()
    return ("hot GPU" if one else "hot set", story.set_words(), note)


def _verdict_text(s: dict, hot_set: list[int], set_words: str) -> str:
    """The summary's verdict sentence: the hot set in ``classifier.hot_set``'s words (the
    set, its work against the rest, stays or rotates between which sets), and the decode
    GPU-time lost waiting, with the windows it is over."""
    story = story_of(s)
    tax = s["straggler_tax"]
    lost = (f"Decode GPU-time lost waiting for the slowest rank: {_pct(tax, 1)} "
            f"({_over(s)})." if tax is not None else f"No straggler tax: {_over(s)}.")
    if story.pattern == "none":
        return (f"No decode window was flagged imbalanced over {s['decode_windows']} decode "
                f"windows. {lost}")
    counts = ", ".join(f"{entity_name(int(g))} in {n}" for g, n in
                       sorted(s["hot_gpus"].items(), key=lambda kv: int(kv[0])))
    text = story.text()
    return (f"Hot set: {text[0].upper() + text[1:]}; per GPU: {counts}. {lost}")


def _gpu_rows(d: dict, hot_set: list[int]) -> list[dict]:
    """One row of formatted cells per GPU (busy share, load, activities, PCIe and NVLink MB/s
    tx / rx, power W, hot seconds); ``hot`` marks a GPU of the hot set."""
    return [{"gpu": entity_name(g["gpu"]), "name": g["name"] or "–",
             "hot": g["gpu"] in hot_set,
             "busy": _pct(g["busy_share"]), "load": _f(g["load_mean"], ".0f", " %"),
             "sm": _f(g["sm_active"], ".0f", " %"), "tensor": _f(g["tensor_active"], ".0f",
                                                                  " %"),
             "dram": _f(g["dram_active"], ".0f", " %"),
             "pcie": (f"{_f(_mb(g['pcie_tx_bytes_per_s']), ',.0f')} / "
                      f"{_f(_mb(g['pcie_rx_bytes_per_s']), ',.0f')}"),
             "nvlink": (f"{_f(_mb(g['nvlink_tx_bytes_per_s']), ',.0f')} / "
                        f"{_f(_mb(g['nvlink_rx_bytes_per_s']), ',.0f')}"),
             "power": _f(g["power_w"], ".0f"), "hot_s": _f(g["hot_s"], ".1f")}
            for g in d["gpus"]]


def _top_rows(d: dict) -> list[dict]:
    """One row of formatted cells per most imbalanced window (rank, start, ratio, tax, hot
    GPU or set, GPU with the most work, its idle / prefill / decode shares of time and its
    verdict; "–" where the report has none)."""
    return [{"rank": w["rank"], "start": w["start_utc"], "ratio": _f(w["imbalance_ratio"],
                                                                     ".2f", "×"),
             "tax": _pct(w["straggler_tax"], 1),
             "hot": (_set_words(w["hot_set"], w["hot_share"], w["cold_share"])
                     if w.get("hot_set") else "–" if w["hot_gpu"] is None
                     else entity_name(int(w['hot_gpu']))),
             "top": "–" if w["top_gpu"] is None else entity_name(int(w['top_gpu'])),
             "shares": _phase_triple({p: w.get(f"share_{p}") for p in ("idle", "prefill",
                                                                      "decode")}),
             "verdict": w.get("verdict") or "–"}
            for w in d["top_windows"]]


def _server_rows(srv: dict | None) -> list[tuple[str, str]]:
    """``(quantity, value)`` rows of the server section; none without server signals."""
    return [] if not srv else [
        ("log/metrics events", f"{srv['events']:,}"),
        ("prefill batches", f"{srv['prefill_batches']:,}"),
        ("prefill tokens", _f(srv["prefill_tokens"], ",.0f")),
        ("generation throughput (mean of decode lines)", _f(srv["gen_throughput_tok_s"],
                                                            ",.1f", " token/s")),
        ("accept length (mean)", _f(srv["accept_len"])),
        ("running requests (mean)", _f(srv["running_req"], ".1f"))]


def _label_rows(lab: dict | None) -> list[tuple[str, str]]:
    """``(quantity, value)`` rows scoring the labeller against a labels file; none without."""
    return [] if not lab else [
        ("labels file", lab["file"]), ("labelled windows", str(lab["labelled_windows"])),
        ("phase accuracy", _pct(lab["accuracy"], 1)),
        *[(f"  {p} recall", _pct(v, 1)) for p, v in lab["per_phase_accuracy"].items()],
        ("hot-GPU accuracy on skewed decode", _pct(lab["hot_gpu_accuracy"], 1)),
        ("balanced decode windows flagged", _pct(lab["false_flag_rate"], 1))]


def _expert_parts(report: Report, print_layout: bool) -> dict:
    """The expert section's template values: ``expert_cards``, ``fig_experts``,
    ``fig_expert_layers`` (HTML), ``tokens`` and ``expert_map`` (empty without expert
    counts)."""
    ex = report.data["experts"]
    if not ex:
        return {"expert_cards": [], "fig_experts": "", "fig_expert_layers": "", "tokens": "",
                "expert_map": []}
    expert_cards = [
        ("GPU balancedness now", _f(ex["balancedness"]),
         "pure TP: every GPU holds every expert" if ex["pure_tp"] else
         f"EP {ex['ep_size']}, contiguous placement"),
        ("greedy placement (estimate)", _f(ex["balancedness_greedy"]),
         "what-if, no expert replication"),
        ("worst layer max/mean", _f(max((v for v in ex["layer_expert_max_over_mean"]
                                          if v is not None), default=None), ".2f", "×"),
         "over experts"),
        ("hottest GPU by expert work", "–" if ex["hot_gpu"] is None else
         f"GPU {ex['hot_gpu']}", ", ".join(_pct(v) for v in ex["gpu_share"])),
    ]
    f1, f2 = expert_figures(report)
    fig_experts, fig_layers = _figure_html(f1, print_layout), _figure_html(f2, print_layout)
    expert_map = [{"gpu": g, "held": held, "share": _pct(sh, 1), "hot": g == ex["hot_gpu"]}
                  for g, (held, sh) in enumerate(zip(ex["gpu_experts"], ex["gpu_share"]))]
    return {"expert_cards": expert_cards, "fig_experts": fig_experts,
            "fig_expert_layers": fig_layers, "tokens": f"{ex['tokens']:,.0f}",
            "expert_map": expert_map}


def _provenance_rows(p: dict) -> list[tuple[str, str]]:
    """``(what, value)`` rows of where the report's numbers come from: versions, source files
    (path, bytes, sha256), hosts, GPUs, driver, collector, classifier and its held-out
    score."""
    c = p["classifier"]
    held = c["held_out"]
    return [("tealeaves", p["tealeaves_version"]), ("python", p["python"]),
            *[(f"{src['role']}", (f"{src['path']} ({_f(src['bytes'], ',.0f')} bytes, "
                                 f"sha256 {src['sha256'] or 'not computed'})"))
              for src in p["sources"]],
            ("hosts", ", ".join(p["hosts"]) or "–"),
            ("GPUs", ", ".join(p["gpu_names"]) or "–"),
            ("driver", p["driver"] or "–"), ("collector", p["collector"] or "–"),
            ("classifier", (f"{c['labeller']} ({c['kind'] or '–'}; trained on "
                           f"{c['training_traces'] or '–'} traces, "
                           f"{c['training_windows'] or '–'} windows)")),
            ("held-out score", "–" if not held else
             f"macro-F1 {_f(held['macro_f1'], '.3f')}, accuracy "
             f"{_f(held['accuracy'], '.3f')} ({held['scheme']})")]


def render_html(report: Report, print_layout: bool = False) -> str:
    """The report as one HTML document (plotly.js embedded; works offline).

    Args:
        report: a built report (``build_report``).
        print_layout: fix the figures' widths at ``PRINT_WIDTH`` px for an A4 page (PDF/PNG)
            instead of filling the window.
    """
    from jinja2 import Environment
    from plotly.offline import get_plotlyjs

    d = report.data
    s = d["summary"]
    gpus = [g["gpu"] for g in d["gpus"]]
    hot_set = _hot_gpus(s)
    set_words = _set_words(hot_set, s.get("hot_share"), s.get("cold_share"))
    srv = d["server"]
    p = d["provenance"]
    experts = _expert_parts(report, print_layout)  # figures drawn in the order they were
    env = Environment(autoescape=True)
    return env.from_string(TEMPLATE).render(
        d=d, print_layout=print_layout, hot=HOT_COLOR, plotlyjs=Markup(get_plotlyjs()),
        span=fmt_span(d["range"]["span_s"]) + pauses_text(
            [tuple(g) for g in d["range"].get("gaps") or []], lambda t: f"{_utc_text(t)} UTC",
            d["range"].get("gap_count"), d["range"].get("gap_s")) + partial_text(
            d["range"].get("partial_gpus") or [], lambda t: f"{_utc_text(t)} UTC"),
        names=", ".join(p["gpu_names"]),
        cards=_summary_cards(s, srv, hot_set, set_words),
        verdict=_verdict_text(s, hot_set, set_words), shares_text=_shares_text(s),
        why=[c["line"] for c in d.get("hot_ceilings") or []], gpu_rows=_gpu_rows(d, hot_set),
        top_rows=_top_rows(d), server_rows=_server_rows(srv), label_rows=_label_rows(d["labels"]),
        prov_rows=_provenance_rows(p), utc=_utc_text, **experts,
        idle_load=f"{IDLE_LOAD:g}", stays=f"{STAYS_SHARE:.0%}".replace("%", " %"),
        fig_timeline=_figure_html(timeline_figure(report.windows, gpus, s["window_s"]),
                                  print_layout),
        fig_gpus=_figure_html(gpu_figure(d), print_layout), **_server_balance_parts(d, print_layout))


def _server_balance_parts(d: dict, print_layout: bool) -> dict:
    """The template's values for the server DP-rank and expert-balance sections."""
    out: dict = {}
    sr = d.get("server_ranks")
    if sr:
        engine = "vLLM" if sr["rank_label"] == "engine" else "SGLang"
        t0, t1 = sr["span"]
        out["rank_source"] = (f"{engine} /metrics, {sr['scrapes']} scrape"
                              f"{'s' if sr['scrapes'] != 1 else ''}, {_utc_text(t0)} to "
                              f"{_utc_text(t1)} UTC{_outside(d, t0, t1)}")
        out["rank_rows"] = [{"rank": r["rank"], "hot": r["rank"] in sr["uneven_ranks"],
                             "gen": _f(r["gen_throughput_tok_s"], ",.0f"),
                             "run": _f(r["running_req"], ".1f"),
                             "queue": _f(r["queue_req"], ".1f"),
                             "accept": _f(r["accept_len"], ".2f"),
                             "vs": _f(r["vs_median"], ".2f")} for r in sr["ranks"]]
    eb = d.get("expert_balance")
    if eb:
        t0, t1 = eb["span"]
        basis = ("the increase between the first and last scrape" if eb["basis"] == "increase"
                 else "counts since the server started")
        out["eplb_source"] = (f"{eb['source']}, {heat_size(eb, '×')}, {basis}; "
                              f"{_utc_text(t0)} to "
                              f"{_utc_text(t1)} UTC{_outside(d, t0, t1)}. Each cell: the "
                              f"rank's share of the layer's expert selections.")
        out["eplb_verdict"] = heat_verdict(
            {**eb, "balancedness": math.nan if eb["balancedness"] is None
             else eb["balancedness"]})
        own, n = server_balancedness(pd.DataFrame(eb["server_balancedness"], dtype=float,
                                                  columns=["balancedness", "passes"]))
        if math.isfinite(own):
            out["eplb_own"] = (f" The server's own eplb_balancedness: {own:.2f} over "
                               f"{n:,.0f} forward passes.")
        counts = [[math.nan if v is None else v for v in row] for row in eb["counts"]]
        sb = eb["server_balancedness"]
        fig = eplb_figure(eb["layers"], eb["ranks"], counts, [x["timestamp"] for x in sb],
                          [math.nan if x["balancedness"] is None else x["balancedness"]
                           for x in sb])
        out["fig_eplb"] = _figure_html(fig, print_layout)
    return out


def _outside(d: dict, t0: float, t1: float) -> str:
    """``" (not within the report's range)"`` when ``[t0, t1]`` misses the report's range."""
    r = d["range"]
    return "" if t0 <= r["end"] and r["start"] <= t1 else " (NOT within the report's range)"


def _utc_text(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(float(t), tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _mb(v):
    return None if v is None else v / 1e6


__all__ = ["expert_figures", "gpu_figure", "render_html", "timeline_figure"]
