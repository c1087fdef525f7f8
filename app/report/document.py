"""The parts of a report's document: the summary, groups, MIG, experts, shares, screenshots
and server figures as JSON-ready dicts (``_document``), the value helpers they share, and the
report's identity (``SCHEMA_VERSION``, ``Source``, ``ReportError``; ``app.report.model``
is their public place).
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from tealeaves.classifier.imbalance import hot_set_of
from tealeaves.classifier.mig import balance_line
from tealeaves.classifier.rules import PHASE_ORDER
from tealeaves.classifier.server_balance import (
    HEATMAP_SERIES,
    balancedness_series,
    expert_heatmap,
    rank_spread,
    spread_line,
)
from tealeaves.classifier.summary import (
    GPU_COLUMNS,
    gaps_summary,
    partial_gpus,
    server_summary,
    share_summary,
)

#: Version of the JSON and CSV layouts (``report_schema.json``); 2 added the hot set (every
#: hot GPU, with its shares of the work) and why, per hot GPU (``hot_ceilings``).
SCHEMA_VERSION = 2


class ReportError(ValueError):
    """A report cannot be made from these inputs (the message names the file or field)."""


@dataclass
class Source:
    """One input file of a report: ``role`` (trace, store, labels, experts, server_log)."""

    role: str
    path: Path

    def describe(self, hash_limit: int = 512 * 2**20) -> dict:
        """``role``, ``path``, ``bytes`` and ``sha256`` (None for a store, which changes while
        it is written, and over ``hash_limit`` bytes)."""
        try:
            n = self.path.stat().st_size
        except OSError:
            return {"role": self.role, "path": str(self.path), "bytes": None, "sha256": None}
        digest = None
        if n <= hash_limit and self.role != "store":  # a store is live: its hash would not last
            h = hashlib.sha256()
            with open(self.path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            digest = h.hexdigest()
        return {"role": self.role, "path": str(self.path), "bytes": n, "sha256": digest}


def _utc(t: float) -> str:
    return datetime.fromtimestamp(float(t), tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-4]


def _num(v) -> float | None:
    """JSON number or None (NaN, inf and missing are unknown, not 0)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _int(v) -> int | None:
    f = _num(v)
    return None if f is None else int(f)


def _text(v) -> str | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return str(v)


def _classifier_facts(labeller: str) -> dict:
    from tealeaves.classifier.labellers import model_dir
    from tealeaves.classifier.model import MODEL_STEM

    MODEL_DIR = Path(model_dir())

    out = {"labeller": labeller, "kind": None, "training_traces": None,
           "training_windows": None, "held_out": None}
    if labeller not in ("trained", "taught"):
        out["kind"] = "rules"
        return out
    try:
        meta = json.loads((MODEL_DIR / f"{MODEL_STEM}.json").read_text())
        out.update(kind=meta.get("kind"), training_traces=len(meta.get("corpus") or []) or None,
                   training_windows=meta.get("windows"))
    except (OSError, ValueError):
        pass
    try:
        val = json.loads((MODEL_DIR / f"{MODEL_STEM}.validation.json").read_text())
        h = val.get("held_out") or {}
        out["held_out"] = {"scheme": str(val.get("scheme", "")), "macro_f1": _num(h.get("macro_f1")),
                           "accuracy": _num(h.get("accuracy")),
                           "hot_gpu_accuracy": _num(h.get("hot_gpu_accuracy"))}
    except (OSError, ValueError):
        pass
    return out


def _server_balance(frame: pd.DataFrame) -> dict:
    """The ``server_ranks`` and ``expert_balance`` parts from the server's ``/metrics``
    scrapes (``classifier.server_balance``); a part the scrapes cannot give is left out."""
    out: dict = {}
    spread = rank_spread(frame)
    if spread is not None:
        out["server_ranks"] = {
            "rank_label": spread["rank_label"], "scrapes": spread["scrapes"],
            "span": [float(t) for t in spread["span"]],
            "ranks": [{k: (v if k == "rank" else _num(v)) for k, v in r.items()}
                      for r in spread["ranks"]],
            "uneven_ranks": spread["uneven_ranks"],
            "spread": {k: _num(v) for k, v in spread["spread"].items()},
            "line": spread_line(spread)}
    heat = expert_heatmap(frame)
    if heat is not None:
        bal = balancedness_series(frame)
        out["expert_balance"] = {
            "source": HEATMAP_SERIES, "basis": heat["basis"],
            "span": [float(t) for t in heat["span"]], "layers": heat["layers"],
            "ranks": heat["ranks"],
            "counts": [[_num(v) for v in row] for row in heat["counts"]],
            "rank_share": [_num(v) for v in heat["share"]],
            "layer_balancedness": [_num(v) for v in heat["layer_balancedness"]],
            "balancedness": _num(heat["balancedness"]), "hot_rank": heat["hot_rank"],
            "server_balancedness": [{"timestamp": float(r.timestamp),
                                     "balancedness": _num(r.balancedness),
                                     "passes": _num(r.passes)}
                                    for r in bal.itertuples(index=False)]}
    return out


#: Half-width (s) of the span of windows a screenshot's moment is compared with.
SCREENSHOT_SPAN_S = 5.0


def _screenshot(shot: dict, windows: pd.DataFrame, t0: float, t1: float) -> dict:
    """One ``screenshots`` item: what the picture shows and its verdict per region, and,
    when its capture time falls in the range, the telemetry's verdict of the windows within
    ``SCREENSHOT_SPAN_S`` of it (the same rule, ``classifier.picture.verdict``) and whether
    they agree."""
    from tealeaves.classifier.picture import compare, verdict

    ts = shot.get("capture_ts")
    out = {"file": shot["file"], "tool": shot["tool"], "capture_ts": _num(ts),
           "gpus": [{"gpu": g["gpu"], "values": {k: _num(v) for k, v in g["values"].items()},
                     "confidence": {k: _num(v) for k, v in g["confidence"].items()}}
                    for g in shot["gpus"]],
           "regions": [{"name": r["name"], "gpus": r["gpus"],
                        "pattern": r["verdict"]["pattern"] if r["verdict"] else None,
                        "hot_set": r["verdict"]["hot_set"] if r["verdict"] else [],
                        "text": r["verdict"]["text"] if r["verdict"] else None}
                       for r in shot["regions"]],
           "limits": shot["regions"][0]["verdict"]["limits"] if shot["regions"][0]["verdict"]
           else None, "notes": list(shot["notes"]), "telemetry": None}
    if ts is None:
        out["notes"].append("no capture time in the picture's metadata or file name (a scrot "
                            "or GNOME name holds one): not compared with the telemetry")
        return out
    if not t0 - SCREENSHOT_SPAN_S <= ts <= t1 + SCREENSHOT_SPAN_S:
        out["notes"].append(f"taken at {_utc(ts)} UTC, outside the report's range: not "
                            f"compared with the telemetry")
        return out
    near = windows[(windows["end"] >= ts - SCREENSHOT_SPAN_S) &
                   (windows["start"] <= ts + SCREENSHOT_SPAN_S)]
    loads = {int(c[6:]): float(near[c].mean()) for c in near.columns
             if c.startswith("load_g") and c[6:].isdigit() and near[c].notna().any()}
    if loads:
        tele = verdict(loads)
        whole = shot["regions"][0]
        # compared only where the GPUs match (count and indices) and the loads agree too
        c = compare(whole["verdict"], whole.get("loads") or {}, loads,
                    [g["gpu"] for g in shot["gpus"]])
        out["telemetry"] = {"pattern": tele["pattern"], "hot_set": tele["hot_set"],
                            "windows": len(near), "text": tele["text"],
                            "disagreement": None if c["status"] == "agree" else c["text"]}
    return out


def _groups_part(g: dict) -> dict:
    """The ``groups`` part from ``classifier.summary.group_summary`` (JSON-ready: the role
    detection's measurements as numbers or null)."""
    return {"source": g["source"], "groups": g["groups"], "roles": g["roles"],
            "text": g["text"], "why": g["why"],
            "judged": [{k: j[k] for k in ("gpus", "name", "role", "imbalanced_windows",
                                          "hot_set", "hot_set_windows")}
                       for j in g["judged"]],
            "evidence": g["evidence"], "line": g["line"]}


def _mig_group(m: dict) -> dict:
    """One ``classifier.mig.instance_balance`` group as JSON (``mig_balance`` items)."""
    return {"gpu": m["gpu"], "name": m["name"], "instances": [int(g) for g in m["instances"]],
            "mean_load": {k: _num(v) for k, v in m["mean_load"].items()},
            "windows": m["windows"], "uneven_windows": m["uneven_windows"],
            "busiest": m["busiest"], "idlest": m["idlest"], "spread": _num(m["spread"]),
            "uneven": m["uneven"], "line": balance_line(m)}


def _experts(experts, n_gpus: int, ep_size: int) -> tuple[dict, dict]:
    from tealeaves.classifier.experts import expert_summary
    from tealeaves.data.experts import ExpertDumpError, check_logical_count, load_expert_dump

    try:
        if isinstance(experts, np.ndarray):
            count, name = check_logical_count(experts, "logical_count"), "(array)"
        else:
            count, name = load_expert_dump(experts), str(experts)
    except (ExpertDumpError, ValueError) as exc:
        raise ReportError(str(exc)) from None
    try:
        summ = expert_summary(count, n_gpus, ep_size)
    except ValueError as exc:
        raise ReportError(f"--tp {n_gpus} / --ep {ep_size}: {exc}") from None
    gpu_load = np.asarray(summ["gpu_load"], dtype=float)
    share = np.asarray(summ["gpu_load_total"], dtype=float)
    part = {
        "file": name, "passes": int(summ["passes"]), "layers": int(summ["layers"]),
        "experts": int(summ["experts"]), "tokens": float(summ["tokens"]),
        "n_gpus": n_gpus, "ep_size": ep_size, "pure_tp": bool(summ["pure_tp"]),
        "balancedness": _num(summ["balancedness"]),
        "balancedness_greedy": _num(summ["balancedness_greedy"]),
        "hot_gpu": _int(summ["hot_gpu"]) if summ["hot_gpu"] is not None else None,
        "gpu_share": [_num(v) for v in share],
        "gpu_experts": _gpu_experts(int(summ["experts"]), n_gpus, ep_size),
        "layer_expert_max_over_mean": [_num(v) for v in summ["layer_expert_max_over_mean"]],
        "layer_balancedness": [_num(v) for v in summ["layer_balancedness"]],
        "layer_balancedness_greedy": [_num(v) for v in summ["layer_balancedness_greedy"]],
        "estimate_note": str(summ["estimate_note"]),
    }
    from tealeaves.classifier.experts import layer_loads

    arrays = {"layer_load": layer_loads(count), "gpu_load": gpu_load}
    return part, arrays


def _gpu_experts(n_experts: int, n_gpus: int, ep_size: int) -> list[str]:
    """Which experts each GPU holds under the contiguous EP placement: ``"0-47"`` (a slice
    of each at pure TP: ``"all (1/8 of each)"``)."""
    from tealeaves.classifier.experts import expert_to_ep_rank

    if ep_size == 1:
        return [f"all (1/{n_gpus} of each)" if n_gpus > 1 else "all"] * n_gpus
    rank = expert_to_ep_rank(n_experts, ep_size)
    per_rank = n_gpus // ep_size
    out = []
    for g in range(n_gpus):
        held = np.flatnonzero(rank == g // per_rank)
        text = f"{held[0]}-{held[-1]}"
        out.append(text if per_rank == 1 else f"{text} (1/{per_rank} of each)")
    return out


def _share(v) -> float | None:
    """A share in % (``classifier`` columns) as a JSON share, 0-1 (None when unknown)."""
    f = _num(v)
    return None if f is None else f / 100.0


def _story(story: dict) -> dict:
    """``classifier.hot_set.HotSetStory.to_json`` with its shares as JSON shares (0-1)."""
    return {**story, "sets": [{**p, "hot_share": _share(p["hot_share"]),
                               "cold_share": _share(p["cold_share"])}
                              for p in story["sets"]]}


def _shares_part(sh: dict) -> dict:
    """The summary's phase shares and what the verdicts stood on, from
    ``classifier.summary.share_summary``: ``phase_shares`` (``{phase: mean share of the
    windows' time, 0-1, null when unknown}``), ``phase_shares_source`` (``"calibrated"``,
    ``"rules' scores"`` or null) and ``inputs`` (``counters``, ``rate_hz`` per GPU, ``kind``,
    ``text``; null when the windows do not say)."""
    inputs = sh["inputs"]
    if inputs is not None:
        inputs = {"counters": [str(c) for c in inputs.get("counters") or []],
                  "rate_hz": _num(inputs.get("rate_hz")), "kind": _text(inputs.get("kind")),
                  "text": str(inputs.get("text") or "")}
    return {"phase_shares": {p: _num(v) for p, v in sh["shares"].items()},
            "phase_shares_source": _text(sh["source"]), "inputs": inputs}


def _gpu_items(inp, dev: pd.DataFrame, table: pd.DataFrame) -> list[dict]:
    """The document's ``gpus`` part: one item per row of the GPU ``table``, with the host,
    name and uuid from the device rows ``dev`` (indexed by GPU)."""
    gpus = []
    for g, row in table.iterrows():
        d = dev.loc[g] if g in dev.index else {}
        host = d.get("host") if len(d) else None
        if host is None and "host" in inp.samples:
            hs = inp.samples.loc[inp.samples["gpu"] == g, "host"].dropna()
            host = hs.iloc[0] if len(hs) else None
        item = {"gpu": int(g), "host": _text(host), "name": _text(d.get("name")) if len(d) else None,
                "uuid": _text(d.get("uuid")) if len(d) else None,
                "busy_share": _num(row["busy_share"]), "load_mean": _num(row["load_mean"])}
        item.update({c: _num(row[c]) for c, _ in GPU_COLUMNS})
        item["energy_j"] = _num(row["energy_j"])
        item["hot_s"] = float(row["hot_s"])
        gpus.append(item)
    return gpus


def _summary_part(windows: pd.DataFrame, window_s: float, phases: dict, imb: dict) -> dict:
    """The document's ``summary`` part: phase time, decode imbalance, the hot set and its
    story, the labeller, the phase shares, and what the verdicts left out (the windows whose
    phase cannot be told, ``evidence.classify_told``'s lines: GPUs holding no memory, GPUs
    compared on no shared counter ...)."""
    return {
        "window_s": float(window_s), "windows": phases["windows"],
        "phase_time_s": {k: _num(v) for k, v in phases["time_s"].items()},
        "phase_share": {k: _num(v) for k, v in phases["share"].items()},
        "decode_windows": imb["decode_windows"],
        "decode_balancedness": _num(imb["balancedness"]),
        "imbalance_ratio": _num(imb["imbalance_ratio"]),
        "straggler_tax": _num(imb["straggler_tax"]),
        "imbalanced_windows": imb["imbalanced_windows"],
        "hot_set": [int(g) for g in imb["hot_set"]],
        "hot_set_windows": int(imb["hot_set_windows"]),
        "hot_share": _share(imb["hot_share"]),
        "cold_share": _share(imb["cold_share"]),
        "hot_sets": {str(k): int(v) for k, v in imb["hot_sets"].items()},
        "hot_gpu": imb["hot_gpu"],
        "hot_gpus": {str(k): v for k, v in imb["hot_gpus"].items()},
        "hot_pattern": imb["hot_pattern"], "hot_changes": imb["hot_changes"],
        "hot_text": imb["hot_text"], "hot_story": _story(imb["hot_story"]),
        "figure_windows": int(imb["figure_windows"]), "figures_text": imb["figures_text"],
        "labeller": str(windows.attrs.get("labeller", "unknown")),
        **_shares_part(share_summary(windows)),
        "cannot_tell_windows": int(windows["phase"].isna().sum()) if len(windows) else 0,
        "evidence": [str(x) for x in (windows.attrs.get("evidence") or {}).get("lines", [])],
    }


def _document(inp, windows, window_s, t0, t1, phases, imb, table, top, label_part,
              expert_part, labels, experts, why) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("tealeaves")
    except PackageNotFoundError:
        ver = "unknown"
    dev = inp.devices.copy() if len(inp.devices) else pd.DataFrame(columns=["gpu"])
    if "gpu" in dev:
        dev = dev.dropna(subset=["gpu"]).assign(gpu=lambda d: d["gpu"].astype(int))
        dev = dev.drop_duplicates("gpu").set_index("gpu")
    gpus = _gpu_items(inp, dev, table)
    tops = [{"rank": i + 1, "start": float(r.start), "end": float(r.end),
             "start_utc": _utc(r.start), "imbalance_ratio": _num(r.imbalance_ratio),
             "straggler_tax": _num(r.straggler_tax), "hot_gpu": _int(r.hot_gpu),
             "hot_set": list(hot_set_of(r.hot_set)), "hot_share": _share(r.hot_share),
             "cold_share": _share(r.cold_share), "top_gpu": _int(r.top_gpu),
             "imbalanced": bool(r.imbalanced),
             **{f"share_{p}": _num(getattr(r, f"share_{p}")) for p in PHASE_ORDER},
             "verdict": _text(r.verdict) or None}
            for i, r in enumerate(top.itertuples())]
    ceilings = [{"gpu": int(g), "windows": int(c["windows"]), "pipe": str(c["pipe"]),
                 "level": _num(c["level"]), "others": _num(c["others"]), "line": c["line"]}
                for g, c in why.items()]
    summary = _summary_part(windows, window_s, phases, imb)
    srv = server_summary(inp.server_events)
    if srv is not None:
        srv = {k: (v if isinstance(v, int) else _num(v)) for k, v in srv.items()}
    sources = list(inp.sources)
    if labels is not None:
        sources.append(Source("labels", Path(labels)))
    if experts is not None and not isinstance(experts, np.ndarray):
        sources.append(Source("experts", Path(experts)))
    names = sorted({str(n) for n in dev.get("name", pd.Series(dtype=object)).dropna()})
    hosts = sorted({str(h) for h in inp.samples.get("host", pd.Series(dtype=object)).dropna()})
    meta = inp.meta or {}
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "tealeaves-imbalance-report",
        "generated_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "range": {"start": t0, "end": t1, "start_utc": _utc(t0), "end_utc": _utc(t1),
                  "span_s": t1 - t0,
                  **gaps_summary(inp.samples["timestamp"].to_numpy(dtype=float)),
                  "partial_gpus": partial_gpus(inp.samples)},
        "summary": summary,
        "server": srv,
        "gpus": gpus,
        "top_windows": tops,
        "hot_ceilings": ceilings,
        "labels": label_part,
        "experts": expert_part,
        "provenance": {
            "tealeaves_version": ver,
            "python": platform.python_version(),
            "sources": [src.describe() for src in sources],
            "hosts": hosts,
            "gpu_names": names,
            "driver": _text(meta.get("driver")),
            "collector": _text(meta.get("collector")),
            "classifier": _classifier_facts(summary["labeller"]),
            "lines_refused": _refused(meta),
        },
    }


def _refused(meta: dict) -> dict | None:
    """The lines of the input file refused, not read (``load_trace``'s meta): their count and
    the first (line, reason); None for a store (its rows were refused when imported)."""
    if "skipped" not in meta:
        return None
    first = meta.get("first_skipped")
    return {"count": int(meta.get("skipped") or 0),
            "first_line": int(first[0]) if first else None,
            "first_reason": str(first[1]) if first else None}
