"""The header's summary of the last windows (``header_summary`` -> ``HeaderSummary``: phase,
certainty, verdict, imbalance ratio, hot set and how often each GPU was hot, what the verdicts
stood on) or of a range (``range_summary``: its phase shares of time too) and the hot set's
text."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from tealeaves.app.figures.geometry import RIBBON_PHASES
from tealeaves.app.figures.series.binning import as_float, calibrated_rows, ribbon_shares
from tealeaves.classifier.incremental import INPUTS_COLUMN


def fmt_value(v: float | None, spec: str, missing: str = "n/a") -> str:
    """``v`` formatted with ``spec`` (``format``), or ``missing`` when it is None or not finite
    (NaN is never printed as a number)."""
    return format(v, spec) if v is not None and math.isfinite(v) else missing


def hot_set_text(hot_set, hot_share: float = math.nan, cold_share: float = math.nan) -> str:
    """A window's hot set in words (``classifier.hot_set.window_words``): ``"GPUs 1, 3, 5, 7
    at 2.6x the rest's work (18 % each vs 7 %)"`` or ``"GPU 1 at 2.4x the rest's work (71 %
    vs 29 %)"``; ``""`` for none."""
    from tealeaves.classifier.hot_set import window_words

    return window_words(hot_set, as_float(hot_share), as_float(cold_share))


# -- the header ------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeaderSummary:
    """What the header says about the newest complete window.

    Attributes:
        phase: ``idle`` / ``prefill`` / ``decode`` (``mixed``), or None before any window.
        confidence: the phase's score in [0, 1] (NaN when unknown).
        imbalance_ratio: max / mean GPU work (1.0 = balanced; NaN when no load).
        straggler_tax: 1 - mean/max busy time, the share of GPU time spent waiting (NaN when
            no load).
        hot_gpu: the busiest GPU of the hot set, or None when the window is not flagged.
        window_end: end of the window, epoch seconds (NaN before any window).
        hot_recent: ``{gpu: windows}`` flagged hot (in the hot set) in the summarised span.
        windows: number of windows summarised for ``hot_recent``.
        certainty: how sure, in words (``certainty`` of the newest window).
        hot_set: every hot GPU of the window (empty when not flagged).
        hot_share: mean share (%) of the summed work a GPU of the hot set holds (NaN when
            not flagged).
        cold_share: mean share (%) another GPU holds (NaN when not flagged).
        range: ``(t0, t1)`` epoch s when the summary describes a range on screen (paused,
            zoomed or typed: ``range_summary``), None for the newest window.
        shares: the range's phases and their share of its time (0-1), most first (empty
            for the newest window): the mean of its windows' calibrated shares where they
            carry them, else the share of its windows labelled each phase
            (``binning.ribbon_shares``).
        flagged: the range's imbalanced windows (0 for the newest window).
        share_basis: what ``shares`` are: ``"calibrated"`` (every window's calibrated
            shares), ``"partly calibrated"`` (some windows'), ``"windows"`` (window counts;
            no calibrated shares), ``""`` for the newest window.
        inputs: what the verdicts stood on (``"sm_active, tensor_active, ... at 10 Hz per
            GPU"``: ``classifier.shares.inputs_of``), ``""`` when unknown.
        verdict: the newest window's verdict from its shares (``"decode"``, ``"mixed: decode
            55 % · prefill 30 %"``), ``""`` for a range or when unknown.
        hot_story: the range's hot set told by ``classifier.hot_set.describe_hot_set``
            (``HotSetStory.to_json``: the sets, their work against the rest, stays or
            rotates), ``{}`` for the newest window (``hot_recent``'s sets tell it there).
        figures: which windows the range's imbalance ratio and straggler tax are over
            (``classifier.summary.figures_text``: ``"over 12 of 100 windows (the decode
            windows with load)"``, ``"idle: no imbalance figures ..."``), ``""`` for the
            newest window.
        load_mean: the newest window's mean load over the GPUs (%, NaN unknown or for a
            range): under ``classifier.imbalance.IDLE_LOAD`` it has no imbalance figures.
    """

    phase: str | None
    confidence: float
    imbalance_ratio: float
    straggler_tax: float
    hot_gpu: int | None
    window_end: float
    hot_recent: dict[int, int]
    windows: int
    certainty: str = ""
    hot_set: tuple[int, ...] = ()
    hot_share: float = math.nan
    cold_share: float = math.nan
    range: tuple[float, float] | None = None
    shares: dict[str, float] = field(default_factory=dict)
    flagged: int = 0
    share_basis: str = ""
    inputs: str = ""
    verdict: str = ""
    hot_story: dict = field(default_factory=dict)
    figures: str = ""
    load_mean: float = math.nan

    def story(self):
        """The hot set's ``classifier.hot_set.HotSetStory``: the range's (``hot_story``), or,
        for the newest window, that of the last windows' hot sets (``hot_recent``'s
        ``sets``, a ``HotCounts``); None when neither is known."""
        from tealeaves.classifier.hot_set import HotSetStory, describe_hot_set

        if self.hot_story:
            return HotSetStory.from_json(self.hot_story)
        sets = getattr(self.hot_recent, "sets", None)
        return describe_hot_set(sets) if sets is not None else None

    def hot_text(self) -> str:
        """The hot set in words: ``"GPUs 1, 3, 5, 7 — 18 % each vs 7 %"``, ``"GPU 1 — 71 %
        vs 29 %"``, or ``""`` when the window is not flagged."""
        hs = self.hot_set or ((self.hot_gpu,) if self.hot_gpu is not None else ())
        return hot_set_text(hs, self.hot_share, self.cold_share)

    def text(self) -> str:
        """One line, e.g. ``decode (97 %) | imbalance 1.43x | hot GPUs 1, 3, 5, 7 — 18 % each
        vs 7 % | straggler tax 28 %``."""
        if self.phase is None:
            return "waiting for the first complete window"
        hot = f"hot {self.hot_text()}" if self.hot_text() else "no hot GPU"
        return (f"{self.phase} ({fmt_value(self.confidence * 100, '.0f')} %) | imbalance "
                f"{fmt_value(self.imbalance_ratio, '.2f')}x | {hot} | straggler tax "
                f"{fmt_value(self.straggler_tax * 100, '.0f')} %")


class HotCounts(dict):
    """``{gpu: windows}`` (``hot_counts``) that keeps the hot sets it counted, in time order
    (``sets``), so the header can say whether the set stays or rotates
    (``classifier.hot_set.describe_hot_set``), not only how often each GPU was hot."""

    def __init__(self, counts: dict[int, int], sets: tuple = ()) -> None:
        super().__init__(counts)
        self.sets = tuple(tuple(int(g) for g in (hs or ())) for hs in sets)


def hot_counts(sets) -> HotCounts:
    """``{gpu: windows}``: how many of the hot sets ``sets`` hold each GPU, by GPU (a
    ``HotCounts``, the sets kept)."""
    sets = list(sets)
    counts: dict[int, int] = {}
    for hs in sets:
        for g in hs or ():
            counts[int(g)] = counts.get(int(g), 0) + 1
    return HotCounts(dict(sorted(counts.items())), sets)


def header_summary(windows: pd.DataFrame, recent: int = 20) -> HeaderSummary:
    """Summarise the newest window of ``windows`` (classifier output, sorted by ``start``).

    Args:
        windows: classifier windows; may be empty.
        recent: how many trailing windows ``hot_recent`` counts over.
    """
    from tealeaves.classifier.summary import window_hot_sets

    if windows is None or windows.empty:
        return HeaderSummary(None, math.nan, math.nan, math.nan, None, math.nan, {}, 0)
    last = windows.iloc[-1]
    hot = last.get("hot_gpu")
    hot_i = int(hot) if hot is not None and math.isfinite(float(hot)) else None
    tail = windows.iloc[-recent:]
    sets = window_hot_sets(tail)
    hot_set = sets[-1]
    return HeaderSummary(
        phase=str(last["phase"]) if isinstance(last["phase"], str) else None,  # cannot tell
        confidence=float(last["confidence"]),
        imbalance_ratio=float(last["imbalance_ratio"]),
        straggler_tax=float(last["straggler_tax"]),
        hot_gpu=hot_i if hot_set else None,
        window_end=float(last["end"]),
        hot_recent=hot_counts(sets),
        windows=len(tail),
        certainty=certainty(last.to_dict()),
        hot_set=hot_set,
        hot_share=as_float(last.get("hot_share")) if hot_set else math.nan,
        cold_share=as_float(last.get("cold_share")) if hot_set else math.nan,
        inputs=inputs_text(windows.iloc[-1:]),
        verdict=_words(last.get("verdict")),
        load_mean=as_float(last.get("load_mean")),
    )


def _words(v) -> str:
    """A text cell as text (``""`` for None and NaN)."""
    return v if isinstance(v, str) else ""


def inputs_text(windows: pd.DataFrame) -> str:
    """What the verdicts of ``windows`` stood on, in words: their ``INPUTS_COLUMN`` (the text
    most of them carry, ``"(and N other inputs)"`` after it when they differ), else the
    frame's ``attrs["inputs"]["text"]``; ``""`` when unknown."""
    if windows is not None and INPUTS_COLUMN in windows and len(windows):
        texts = windows[INPUTS_COLUMN].map(_words)
        counts = texts[texts != ""].value_counts()
        if len(counts):
            more = len(counts) - 1
            return str(counts.index[0]) + (f" (and {more} other input"
                                           f"{'s' if more > 1 else ''})" if more else "")
    return str(((windows.attrs if windows is not None else {}).get("inputs") or {})
               .get("text") or "")


def range_shares(windows: pd.DataFrame) -> tuple[dict[str, float], str]:
    """A range's phase shares of time, most first, and what they are (``HeaderSummary``'s
    ``shares`` and ``share_basis``): the mean over its windows of ``ribbon_shares``
    (calibrated shares where a window carries them, else 1 for its phase); phases of no
    share are left out."""
    cal = calibrated_rows(windows)
    mean = ribbon_shares(windows).mean(axis=0)
    shares = {p: float(v) for p, v in zip(RIBBON_PHASES, mean) if v > 5e-4}
    basis = ("calibrated" if cal.all() else "partly calibrated" if cal.any() else "windows")
    return dict(sorted(shares.items(), key=lambda kv: -kv[1])), basis


def range_summary(windows: pd.DataFrame, t0: float, t1: float) -> HeaderSummary:
    """Summarise a range on screen: the windows of ``windows`` (classifier output) that
    overlap ``[t0, t1]`` (epoch s).

    The phase is the one of the largest share of the range's time, ``confidence`` that share
    and ``shares`` every phase's (``range_shares``: the windows' calibrated shares where they
    carry them, else the share of the windows each phase labelled); imbalance ratio and
    straggler tax are means over the range's decode windows with load, and the hot set is the one
    flagged most often (``classifier.summary.imbalance_summary``; ``hot_story`` whether it
    stays or rotates, ``figures`` over which windows the figures are), ``hot_recent`` how
    often each GPU was hot; ``inputs`` what the verdicts stood on (``inputs_text``).  With no window
    in the range the phase is None and the numbers NaN.
    """
    from tealeaves.classifier.summary import imbalance_summary

    rng = (float(min(t0, t1)), float(max(t0, t1)))
    if windows is None or windows.empty:
        return HeaderSummary(None, math.nan, math.nan, math.nan, None, math.nan, {}, 0,
                             range=rng)
    inside = windows[(windows["end"] > rng[0]) & (windows["start"] < rng[1])]
    w = inside[inside["phase"].notna()]  # a window that cannot be told has no share to give
    if w.empty:
        return HeaderSummary(None, math.nan, math.nan, math.nan, None, math.nan, {}, 0,
                             range=rng)
    shares, basis = range_shares(w)
    if not shares:  # labels outside the ribbon's phases: by window counts
        counts = w["phase"].astype(str).value_counts()
        shares, basis = {str(k): float(v) / len(w) for k, v in counts.items()}, "windows"
    phase = max(shares, key=lambda k: (shares[k], -RIBBON_PHASES.index(k)
                                       if k in RIBBON_PHASES else 0))
    of = "windows" if basis == "windows" else "time"
    # the imbalance over every window of the range, as the report counts them (a window
    # that cannot be told is one of its windows, with no figures)
    imb = imbalance_summary(inside)
    hot_set = tuple(int(g) for g in imb["hot_set"])
    return HeaderSummary(
        phase=phase,
        confidence=shares[phase],
        imbalance_ratio=float(imb["imbalance_ratio"]),
        straggler_tax=float(imb["straggler_tax"]),
        hot_gpu=hot_set[0] if hot_set else None,
        window_end=float(w["end"].max()),
        hot_recent={int(g): int(n) for g, n in imb["hot_gpus"].items()},
        windows=len(inside),
        certainty=f"{shares[phase]:.0%} of the range's {of}",
        hot_set=hot_set,
        hot_share=as_float(imb["hot_share"]) if hot_set else math.nan,
        cold_share=as_float(imb["cold_share"]) if hot_set else math.nan,
        range=rng,
        shares=dict(sorted(shares.items(), key=lambda kv: -kv[1])),
        flagged=int(imb["imbalanced_windows"]),
        share_basis=basis,
        inputs=inputs_text(w),
        hot_story=imb["hot_story"],
        figures=imb["figures_text"],
    )


def certainty(row: dict) -> str:
    """How sure the label of a window is, in words: ``"97 % sure"``, or, when the sequence
    smoothing chose another phase than the window's own scores (``p_<phase>``) favour,
    ``"by context (this window alone: decode 62 %)"``."""
    phase = str(row.get("phase"))
    scores = {}
    for p in RIBBON_PHASES:
        try:
            v = float(row.get(f"p_{p}", math.nan))
        except (TypeError, ValueError):
            v = math.nan
        if math.isfinite(v):
            scores[p] = v
    conf = row.get("confidence")
    if scores:
        top = max(scores, key=scores.get)
        if top != phase and scores[top] > scores.get(phase, 0.0) + 1e-9:
            return f"by context (this window alone: {top} {scores[top]:.0%})"
    try:
        c = float(conf)
    except (TypeError, ValueError):
        return ""
    return f"{c:.0%} sure" if math.isfinite(c) else ""
