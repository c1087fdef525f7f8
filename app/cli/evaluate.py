"""``tealeaves evaluate`` and ``tealeaves train``: score the phase model against labels
(one trace, or the corpus with families held out) and rebuild it."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from tealeaves.app.cli.args import add_file_reading, file_reading
from tealeaves.app.cli.common import fail, na
from tealeaves.data.jsontext import dumps as json_dumps


def _progress(desc: str):
    from tqdm import tqdm

    return lambda it: tqdm(it, desc=desc, unit="trace", file=sys.stderr, leave=False)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``tealeaves evaluate``: score one trace against its labels, or (``--corpus``) validate on
    the corpus.  Returns the exit status (0; 2 bad input)."""
    from tealeaves.classifier import classify_trace, default_labeller
    from tealeaves.classifier.evaluate import check_labels_in_trace, score
    from tealeaves.classifier.rules import PHASE_ORDER, RulePhaseLabeller
    from tealeaves.data.importers import ImportFormatError, load_trace
    from tealeaves.data.traces import TraceError, read_labels

    if args.corpus is not None:
        if args.trace or args.labels:
            return fail("evaluate takes --corpus, or --trace with --labels, not both")
        return _evaluate_corpus(args)
    if args.trace is None or args.labels is None:
        return fail("evaluate needs --trace and --labels, or --corpus")
    try:
        trace = load_trace(args.trace, format=args.format, **file_reading(args))
        labels = read_labels(args.labels, phases=PHASE_ORDER)
        check_labels_in_trace(labels, trace.samples, args.labels)
    except (TraceError, ImportFormatError) as exc:
        return fail(str(exc))
    labeller = RulePhaseLabeller() if args.rules else default_labeller()
    windows = classify_trace(trace, labeller=labeller)
    result = {"trace": str(args.trace), "labels": str(args.labels),
              "labeller": windows.attrs.get("labeller"), **score(windows, labels)}
    note = in_sample_note(args.trace, result["labeller"])
    result["in_sample"] = bool(note)
    if args.json:
        print(json_dumps(result))
        return 0
    if note:
        print(note)
    _print_score(result)
    return 0


def in_sample_note(trace, labeller: str | None) -> str:
    """The warning for a trace the shipped model was fitted on (its name, without suffixes,
    among the model's ``corpus``): its score is no held-out figure, and the held-out one
    (``phase_model.validation.json``) is given; ``""`` for another trace, the rules, or a
    model without a corpus list."""
    import json
    from pathlib import Path

    from tealeaves.classifier.labellers import model_dir
    from tealeaves.classifier.model import MODEL_STEM

    if labeller not in ("trained", "taught"):
        return ""
    folder = Path(model_dir())
    try:
        corpus = set(json.loads((folder / f"{MODEL_STEM}.json").read_text()).get("corpus") or [])
    except (OSError, ValueError):
        return ""
    name = Path(trace).name.split(".")[0]
    if name not in corpus:
        return ""
    held = ""
    try:
        val = json.loads((folder / f"{MODEL_STEM}.validation.json").read_text())
        f1 = (val.get("held_out") or {}).get("macro_f1")
        if f1 is not None:
            held = (f"; held out ({val.get('scheme', 'leave one trace out')}), the model's "
                    f"macro-F1 is {float(f1):.3f}")
    except (OSError, ValueError, TypeError):
        pass
    return (f"NOTE: in-sample: {name} is one of the {len(corpus)} traces the shipped model was "
            f"fitted on (by name), so these figures are no held-out score{held}")

def _print_score(r: dict) -> None:
    print(f"labeller: {r['labeller']}; {r['labelled_windows']} labelled windows")
    print(f"macro-F1: {na(r['macro_f1'])}  accuracy: {na(r['accuracy'])}  time accuracy "
          f"(0.1-s ticks): {na(r.get('time_accuracy', math.nan))}")
    print(f"macro-F1 of windows holding no change / a change: "
          f"{na(r.get('macro_f1_interior', math.nan))} / "
          f"{na(r.get('macro_f1_change', math.nan))}")
    print("phase      precision  recall   F1     windows")
    for c, v in r["per_class"].items():
        print(f"  {c:8s} {na(v['precision'], 8)} {na(v['recall'], 8)} {na(v['f1'], 6)} "
              f"{v['support']:8d}")
    print("confusion (rows true, columns predicted idle/prefill/decode): "
          + "; ".join(" ".join(str(x) for x in row) for row in r["confusion"]))
    print(f"boundary delay: median {na(r['boundary_delay_s'], 0, 2)} s, p90 "
          f"{na(r['boundary_delay_p90_s'], 0, 2)} s over {r['boundaries']} phase changes")
    print(f"imbalance precision: {na(r['imbalance_precision'])}  recall: "
          f"{na(r['imbalance_recall'])}  hot-GPU accuracy: {na(r['hot_gpu_accuracy'])}  "
          f"hot-set accuracy: {na(r.get('hot_set_accuracy', math.nan))} "
          f"({r['skewed_windows']} skewed windows, {r['flagged_windows']} flagged)")


def _evaluate_corpus(args: argparse.Namespace) -> int:
    from tealeaves.classifier.evaluate import load_corpus, validate_corpus
    from tealeaves.classifier.evaluate_report import report_markdown
    from tealeaves.data.traces import TraceError

    try:
        corpus = load_corpus(Path(args.corpus) if args.corpus else None,
                             progress=_progress("features"))
    except TraceError as exc:
        return fail(str(exc))
    from tqdm import tqdm

    try:
        result = validate_corpus(corpus, progress=lambda it, desc: tqdm(
            it, desc=desc, unit="fold", file=sys.stderr, leave=False))
    except TraceError as exc:
        return fail(str(exc))
    extra: list[str] = []
    if not args.phases_only:
        try:
            extra = _share_results(args, result)
        except TraceError as exc:
            return fail(str(exc))
    if args.out is not None:
        cmd = "tealeaves evaluate --corpus" + (f" {args.corpus}" if args.corpus else "")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report_markdown(result, corpus, cmd) + "\n".join(extra) + "\n")
        if not args.corpus:  # the shipped model's corpus: its held-out score ships with it
            _write_validation(result, corpus, cmd)
    if args.json:
        print(json_dumps(result))
        return 0
    loto = result.get("trace", {}).get("pooled", {})
    print("model          LOFO-F1 LOTO-F1 time-acc interior change delay  offset  imb-P  "
          "imb-R  low-P  low-R hot-set")
    for m, sc in result["pooled"].items():
        lt = na(loto[m]["macro_f1"], 7) if m in loto else na(math.nan, 7)
        print(f"{m:14s} {na(sc['macro_f1'], 7)} {lt} {na(sc['time_accuracy'], 8)} "
              f"{na(sc['macro_f1_interior'], 8)} {na(sc['macro_f1_change'], 6)} "
              f"{na(sc['boundary_delay_s'], 4, 2)} s {na(sc['boundary_offset_s'], 4, 2)} s "
              f"{na(sc['imbalance_precision'], 6)} "
              f"{na(sc['imbalance_recall'], 6)} {na(sc['imbalance_precision_low_load'], 6)} "
              f"{na(sc['imbalance_recall_low_load'], 6)} {na(sc['hot_set_accuracy'], 7)}"
              + ("  (chosen)" if m == result["chosen"] else ""))
    print("chosen: the trained model with the best leave-one-family-out macro-F1 (LOFO); "
          "LOTO: leave-one-trace-out")
    ch = result["chosen"]
    for what, sc in (("the corpus", result["pooled"][ch]),
                     ("the serving-loop families",
                      result.get("family", {}).get("pooled_serving_loop", {}).get(ch))):
        if sc:
            print(f"held out by family, pooled over {what}: time-weighted macro-F1 at 0.1 s "
                  f"{na(sc.get('time_macro_f1', math.nan))}, window macro-F1 "
                  f"{na(sc['macro_f1'])}, time accuracy {na(sc['time_accuracy'])}")
    fams = result["family"]["per_family"] if "family" in result else {}
    ch = result["chosen"]
    for fam, sc in fams.items():
        print(f"  family {fam:34s} macro-F1 {na(sc[ch]['macro_f1'], 5)}  time macro-F1 "
              f"{na(sc[ch].get('time_macro_f1', math.nan), 5)}  time acc. "
              f"{na(sc[ch]['time_accuracy'], 5)}  ({sc[ch]['labelled_windows']} windows)")
    _print_shares(result)
    print(f"leave-one-family-out over {len(result['families'])} families, "
          f"{len(corpus)} traces" + (f"; tables written to {args.out}" if args.out else ""))
    return 0


def _share_results(args: argparse.Namespace, result: dict) -> list[str]:
    """The corpus in every input kind: the shares' held-out scores, the engine-taught gain
    and the families short of the goals into ``result``; returns their markdown lines.

    Raises:
        TraceError: a trace of the corpus is missing or bad.
    """
    from tealeaves.classifier.share_corpus import (
        load_kinds,
        shares_markdown,
        shortfalls,
        shortfalls_markdown,
        taught_markdown,
        validate_shares,
        validate_taught,
    )

    kinds = load_kinds(Path(args.corpus) if args.corpus else None,
                       progress=_progress("input kinds"))
    result["shares"] = validate_shares(kinds, progress=_progress("families held out"))
    result["taught"] = validate_taught(kinds, Path(args.corpus) if args.corpus else None,
                                       progress=_progress("engine-taught"))
    result["short"] = shortfalls(result, kinds)
    return (shares_markdown(result["shares"]) + taught_markdown(result["taught"])
            + shortfalls_markdown(result["short"]))


def _print_shares(result: dict) -> None:
    """The share figures of ``_share_results`` for the terminal (nothing without them)."""
    if "shares" not in result:
        return
    sh = result["shares"]
    print("input kind      windows share-err calib-err named confident conf-wrong "
          "(serving loop: share-err conf-wrong)")
    for k in sh["kinds"]:
        s, sl = sh["per_kind"][k], sh["per_kind_serving_loop"].get(k, {})
        print(f"  {k:14s} {s['windows']:7d} {na(s['share_error'], 9)} "
              f"{na(s['calibration_error'], 9)} {na(s['named_share'], 5, 2)} "
              f"{s['confident_windows']:9d} {na(s['confident_wrong'], 10)}   "
              f"{na(sl.get('share_error', math.nan), 9)} "
              f"{na(sl.get('confident_wrong', math.nan), 10)}")
    for fam, per in sh["per_family"].items():
        s = per["full"]
        print(f"  shares {fam:34s} share error {na(s['share_error'], 5)}  calibration "
              f"error {na(s['calibration_error'], 5)}")
    for name, r in result["taught"].items():
        print(f"  engine-taught {name:38s} macro-F1 {na(r['base']['macro_f1'], 5)} -> "
              f"{na(r['taught']['macro_f1'], 5)}  share error {na(r['base']['share_error'], 5)}"
              f" -> {na(r['taught']['share_error'], 5)}  ({r['windows']} windows held out)")
    for fam, r in result["short"].items():
        print(f"  SHORT {fam}: {', '.join(r['short'])} "
              f"(time macro-F1 {na(r['figures']['time_macro_f1'])}, share error "
              f"{na(r['figures']['share_error'])}, calibration error "
              f"{na(r['figures']['calibration_error'])}, engine-taught macro-F1 "
              f"{na(r['figures'].get('taught_macro_f1', math.nan))}): {r['why']}")


def _write_validation(result: dict, corpus: list, cmd: str) -> Path:
    """Keep the chosen model's held-out scores next to the shipped model
    (``phase_model.validation.json``), for reports to cite."""
    from datetime import UTC, datetime

    from tealeaves.classifier.model import MODEL_DIR, MODEL_STEM

    chosen = result["chosen"]
    out = {"command": cmd, "written_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
           "scheme": f"leave-one-family-out over {len(result['families'])} families "
                     f"({len(corpus)} labelled traces), held-out windows pooled",
           "chosen": chosen, "held_out": result["pooled"][chosen]}
    path = MODEL_DIR / f"{MODEL_STEM}.validation.json"
    path.write_text(json_dumps(out, indent=1) + "\n")
    return path


def cmd_train(args: argparse.Namespace) -> int:
    """``tealeaves train``: fit the chosen model on the corpus and save it.  Returns the exit
    status (0; 2 bad input or an unwritable ``--out``)."""
    from tealeaves.classifier.evaluate import KIND_OF, load_corpus, torch_available, train
    from tealeaves.classifier.model import MODEL_DIR, MODEL_STEM
    from tealeaves.data.traces import TraceError

    if args.out is not None and args.out.exists() and not args.out.is_dir():
        return fail(f"{args.out}: exists and is not a folder (--out takes a folder)")
    pick, smooth = args.kind, None
    if pick is None:  # the model validation chose (evaluate --corpus), else the one shipped
        chosen = MODEL_DIR / f"{MODEL_STEM}.validation.json"
        shipped = MODEL_DIR / f"{MODEL_STEM}.json"
        pick = json.loads(chosen.read_text()).get("chosen") if chosen.exists() else None
        if pick not in KIND_OF:
            pick = (json.loads(shipped.read_text()).get("kind", "hgb") if shipped.exists()
                    else "hgb")
            smooth = None if pick == "tcn" else True  # what the shipped kind always did
    kind = KIND_OF[pick]
    if smooth is None and kind == "hgb":
        smooth = pick != "hgb"
    if kind == "tcn" and not torch_available():
        return fail("the tcn model trains with torch: pip install -e '.[bench]' "
                     "(or --kind hgb)")
    try:
        corpus = load_corpus(args.corpus, progress=_progress("features"), hop=False)
    except TraceError as exc:
        return fail(str(exc))
    meta = {"corpus": [c.name for c in corpus],
            "windows": int(sum(c.truth["phase"].notna().sum() for c in corpus))}
    print(f"fitting the {kind} model on {len(corpus)} traces...", file=sys.stderr, flush=True)
    model = train(corpus, seed=args.seed, meta=meta, kind=kind)
    from tealeaves.classifier.share_corpus import (
        confidence_maps,
        fit_share_model,
        held_out,
        load_kinds,
    )

    print("fitting the share model on every input kind, confidence maps held out by "
          "family...", file=sys.stderr, flush=True)
    try:
        kinds = load_kinds(args.corpus, progress=_progress("input kinds"))
    except TraceError as exc:
        return fail(str(exc))
    model.shares = fit_share_model(kinds, seed=args.seed)
    model.confidence_maps = confidence_maps(
        kinds, held_out(kinds, progress=_progress("families held out")))
    if smooth is not None and kind == "hgb":
        model.smooth = smooth  # "hgb" alone or with the Viterbi pass ("hgb_viterbi")
    out = args.out or MODEL_DIR
    try:
        path = model.save(out)
    except OSError as exc:
        return fail(f"{out}: cannot write the model ({exc.strerror or exc})")
    how = "" if kind != "hgb" else " with Viterbi smoothing" if model.smooth else " (no smoothing)"
    print(f"trained the {kind} model{how} on {len(corpus)} traces, {meta['windows']} labelled "
          f"windows; imbalance "
          f"threshold {model.imbalance.threshold:.2f} x and {model.imbalance.floor:.2f} points "
          f"over the fair share, min {model.imbalance.min_windows} "
          f"window(s); wrote {path} and "
          f"{path.with_suffix('.npz' if kind == 'tcn' else '.skops')}")
    return 0


def add_parser(sub) -> None:
    """Add ``evaluate`` and ``train`` to the top-level subparsers ``sub``."""
    e = sub.add_parser("evaluate", help="score the phase model against labels",
                       description="Score the trained phase model (or --rules) on a trace "
                                   "against a label CSV (start,end,phase[,hot_gpu]); or, with "
                                   "--corpus, validate on the labelled corpus with each family "
                                   "(generator x architecture) held out, then each trace, and "
                                   "write docs/classifier.md.")
    e.add_argument("--trace", type=Path, help="a trace (any format `tealeaves import` reads)")
    e.add_argument("--labels", type=Path, help="ground-truth CSV: start,end,phase[,hot_gpu]")
    e.add_argument("--format", help="force the trace's format (default: detected)")
    e.add_argument("--tz", type=str, default=None,
                   help="time zone of the trace's wall-clock times (default UTC)")
    add_file_reading(e)
    e.add_argument("--rules", action="store_true", help="score the v0 rules instead")
    e.add_argument("--corpus", nargs="?", const="",
                   help="leave-one-family-out (then leave-one-trace-out) validation on a "
                        "corpus folder with MANIFEST.csv (default: the bundled data/traces); "
                        "--out writes the tables")
    e.add_argument("--out", type=Path, default=None,
                   help="with --corpus: write the markdown tables here "
                        "(e.g. docs/classifier.md)")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.add_argument("--phases-only", action="store_true",
                   help="with --corpus: the phase models' validation alone, without the "
                        "shares per input kind and the engine-taught figures (a few minutes "
                        "less)")
    e.set_defaults(func=cmd_evaluate)
    t = sub.add_parser("train", help="rebuild the phase model from the labelled corpus",
                       description="Fit the phase classifier, its Viterbi transitions and the "
                                   "imbalance threshold on every trace of the corpus "
                                   "(deterministic) and save them (skops + JSON).")
    t.add_argument("--corpus", type=Path, default=None,
                   help="corpus folder with MANIFEST.csv (default: the bundled data/traces)")
    t.add_argument("--out", type=Path, default=None,
                   help="folder to write phase_model.skops/.json (default: the package's "
                        "classifier/model, which the dashboard and classify load: this "
                        "replaces the shipped model)")
    t.add_argument("--kind", choices=["hgb_viterbi", "hgb", "tcn"],
                   help="model, as `evaluate --corpus` names them (default: the one it chose; "
                        "hgb is gradient boosting without the Viterbi pass; tcn trains with "
                        "torch)")
    t.add_argument("--seed", type=int, default=0, help="random seed of the fit (default 0)")
    t.set_defaults(func=cmd_train)
