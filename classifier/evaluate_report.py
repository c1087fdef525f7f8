"""The corpus validation written up: ``docs/classifier.md``'s tables from
``evaluate.validate_corpus``' result (``report_markdown``)."""

from __future__ import annotations

import datetime as dt

import numpy as np

from tealeaves.classifier.evaluate import LOW_LOAD, NAMES, LabelledTrace
from tealeaves.classifier.rules import PHASE_ORDER
from tealeaves.classifier.windows import DEFAULT_WINDOW_S


def _f(x: float, nd: int = 3) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{nd}f}"


def report_markdown(result: dict, corpus: list[LabelledTrace], command: str) -> str:
    """``docs/classifier.md``: the validation tables (headline: leave-one-family-out)."""
    head = result["schemes"][0]
    pooled = result[head]["pooled"]
    loto = result.get("trace", {}).get("pooled", {})
    models = result.get("models", list(pooled))
    n_fam = len(result["families"])
    lines = [
        "# Phase classifier and imbalance detector: validation",
        "",
        (f"Written by `{command}` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC. "
         "Do not edit by hand."),
        "",
        (f"Corpus: {len(corpus)} labelled real traces in {n_fam} families "
         f"(`data/traces/MANIFEST.csv`, column `family` = generator x architecture), "
         f"{sum(int(c.truth['phase'].notna().sum()) for c in corpus)} labelled "
         f"{DEFAULT_WINDOW_S:g}-s windows. **Leave-one-family-out** (the headline): each "
         "family is labelled by a model trained on every other family, so no trace of the "
         "same generator and architecture vouches for it; leave-one-trace-out (second "
         "column) holds out one trace at a time. Held-out windows of all folds are pooled. "
         "Metric definitions: `classifier/evaluate.py`."),
        "",
        ("- *time macro-F1*: each phase's F1 over labelled time at 0.1-s ticks, unweighted "
         "mean (the issue-34 headline);"),
        ("- *time acc.*: the share of labelled time, at 0.1-s ticks, given the right phase "
         "(from the 0.1-s segments for the segments model, else from the windows);"),
        ("- *boundary delay*: from each change of true phase to the midpoint of the first "
         "window labelled the new phase (at least a quarter window for any window labeller); "
         "*segment boundary offset*: to the nearest 0.1-s segment boundary into the new "
         "phase, early or late;"),
        ("- *interior / change*: window macro-F1 over windows that hold no change of true "
         "phase / hold one;"),
        f"- *low-load*: skewed decode windows whose mean load is under {LOW_LOAD:g} %;",
        ("- *hot set*: among skewed windows caught, the share whose hot set is exactly the "
         "labelled one."),
        "",
        "## Models (held out, pooled)",
        "",
        ("| model | LOFO macro-F1 | LOTO macro-F1 | time macro-F1 | time acc. | interior / "
         "change macro-F1 | boundary delay median / p90 (s) | segment boundary offset median "
         "/ p90 (s) | imbalance P / R | low-load P / R | hot set |"),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += _model_rows(result, models, pooled, loto)
    best = pooled[result["chosen"]]
    sl = result[head].get("pooled_serving_loop", {}).get(result["chosen"])
    if sl:
        lines += ["", (f"Chosen model pooled over the serving-loop families alone (held out by "
                       f"family): window macro-F1 {_f(sl['macro_f1'])}, time-weighted macro-F1 "
                       f"{_f(sl.get('time_macro_f1', float('nan')))}, time accuracy "
                       f"{_f(sl['time_accuracy'])} ({sl['labelled_windows']} windows).")]
    if "tcn" not in models:
        lines += ["", ("The temporal conv net was not run here: torch is not installed (it "
                       "needs the `bench` extra).")]
    lines += ["", (f"Chosen: **{NAMES[result['chosen']]}**, the best leave-one-family-out "
                   "macro-F1 (ties to time accuracy). `tealeaves train` fits it on the whole "
                   "corpus; the dashboard and `tealeaves classify` use it (the v0 rules remain "
                   "the fallback: no model file, other window length, or a source without "
                   "profiling counters)."), "",
              "### Per class (chosen model, leave-one-family-out)", "",
              "| phase | precision | recall | F1 | windows |", "|---|---|---|---|---|"]
    for c in PHASE_ORDER:
        pc = best["per_class"][c]
        lines.append(f"| {c} | {_f(pc['precision'])} | {_f(pc['recall'])} | {_f(pc['f1'])} | "
                     f"{pc['support']} |")
    lines += ["", "### Confusion (chosen model; rows true, columns predicted)", "",
              "| true \\ predicted | " + " | ".join(PHASE_ORDER) + " |",
              "|---" * (len(PHASE_ORDER) + 1) + "|"]
    for c, row in zip(PHASE_ORDER, best["confusion"], strict=True):
        lines.append(f"| {c} | " + " | ".join(str(v) for v in row) + " |")
    lines += _family_rows(result, head)
    lines += _trace_rows(result, head, corpus)
    lines.append("")
    return "\n".join(lines)


def _model_rows(result: dict, models: list[str], pooled: dict, loto: dict) -> list[str]:
    """The models table's rows: each model's held-out scores, pooled."""
    lines = []
    for m in models:
        s = pooled[m]
        lines.append(
            f"| {NAMES[m]}{' **(chosen)**' if m == result['chosen'] else ''} | "
            f"{_f(s['macro_f1'])} | {_f(loto[m]['macro_f1']) if m in loto else 'n/a'} | "
            f"{_f(s.get('time_macro_f1', float('nan')))} | "
            f"{_f(s['time_accuracy'])} | {_f(s['macro_f1_interior'])} / "
            f"{_f(s['macro_f1_change'])} | {_f(s['boundary_delay_s'], 2)} / "
            f"{_f(s['boundary_delay_p90_s'], 2)} | {_f(s['boundary_offset_s'], 2)} / "
            f"{_f(s['boundary_offset_p90_s'], 2)} | {_f(s['imbalance_precision'])} / "
            f"{_f(s['imbalance_recall'])} | {_f(s['imbalance_precision_low_load'])} / "
            f"{_f(s['imbalance_recall_low_load'])} | {_f(s['hot_set_accuracy'])} |")
    return lines


def _family_rows(result: dict, head: str) -> list[str]:
    """The per-family section: each family held out as a whole."""
    chosen = result["chosen"]
    lines = ["", "## Per family (held out as a whole)", "",
              ("| family | traces | windows | rules macro-F1 | chosen macro-F1 | time macro-F1 "
               "| time acc. | prefill F1 | decode F1 | boundary delay (s) |"),
              "|---|---|---|---|---|---|---|---|---|---|"]
    for f, names in result["families"].items():
        sc = result[head]["per_family"].get(f)
        if not sc:
            continue
        s, r = sc[chosen], sc["rules"]
        lines.append(
            f"| {f} | {len(names)} | {s['labelled_windows']} | {_f(r['macro_f1'])} | "
            f"{_f(s['macro_f1'])} | {_f(s.get('time_macro_f1', float('nan')))} | "
            f"{_f(s['time_accuracy'])} | "
            f"{_f(s['per_class']['prefill']['f1'])} | {_f(s['per_class']['decode']['f1'])} | "
            f"{_f(s['boundary_delay_s'], 2)} |")
    return lines


def _trace_rows(result: dict, head: str, corpus: list[LabelledTrace]) -> list[str]:
    """The per-trace section: each trace with its family held out."""
    chosen = result["chosen"]
    lines = ["", "## Per trace (its family held out)", "",
              ("| trace | family | windows | rules macro-F1 | chosen macro-F1 | LOTO macro-F1 | "
               "time acc. | boundary delay (s) | imbalance P / R | hot set |"),
              "|---|---|---|---|---|---|---|---|---|---|"]
    loto_t = result.get("trace", {}).get("per_trace", {})
    for c in corpus:
        if c.name not in result[head]["per_trace"]:
            continue
        s = result[head]["per_trace"][c.name][chosen]
        r = result[head]["per_trace"][c.name]["rules"]
        lt = loto_t.get(c.name, {}).get(chosen)
        lines.append(
            f"| {c.name} | {c.family} | {s['labelled_windows']} | {_f(r['macro_f1'])} | "
            f"{_f(s['macro_f1'])} | {_f(lt['macro_f1']) if lt else 'n/a'} | "
            f"{_f(s['time_accuracy'])} | {_f(s['boundary_delay_s'], 2)} | "
            f"{_f(s['imbalance_precision'], 2)} / {_f(s['imbalance_recall'], 2)} | "
            f"{_f(s['hot_set_accuracy'], 2)} |")
    return lines
