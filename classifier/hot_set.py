"""A range's hot set in one wording, from its windows' hot sets: which GPUs, their share of
the work against the rest, and whether the set stays or rotates (and between which sets).

A window's hot set is worded by :func:`window_words` (``"GPUs 1, 3, 5, 7 at 2.6x the rest's
work (18 % each vs 7 %)"``).  Every surface that states a range's hot set (the dashboard header, ``classify``'s summary,
the report's card, verdict and JSON, ``report``'s closing line) says it through
:func:`describe_hot_set`, so they use the same words:

- ``"GPUs 1, 3, 5, 7 at 2.6x the rest's work (18 % each vs 7 %), stays: 34 of 34 imbalanced
  windows"``;
- ``"rotates between GPUs 0, 2, 4, 6 (34 windows, 2.6x the rest) and GPUs 1, 3, 5, 7
  (33 windows, 2.6x the rest)"``;
- ``"none: no imbalanced decode window"``.

Terms: a window's **hot set** is every GPU whose work exceeds the fair share
(``classifier.imbalance``); ``hot_share`` / ``cold_share`` are the mean share (%) of the summed
work a hot GPU / another GPU holds in that window, so ``hot_share / cold_share`` is how many
times the rest's work (per GPU) a hot GPU does.  A set **stays** when the windows flagged with
exactly it hold at least ``STAYS_SHARE`` of the imbalanced windows; else it **rotates**
between the sets flagged most often (``ROTATION_SETS`` named, the others counted).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tealeaves.data.schema import GpuEntity, entity_key, entity_short

#: Share of the imbalanced windows one hot set must hold for it to "stay".
STAYS_SHARE = 0.8
#: A rotating hot set names at most this many sets (most flagged first); the rest are
#: counted ("and 3 other sets (5 windows)").
ROTATION_SETS = 3


def gpus_text(gpus) -> str:
    """GPUs in words, sorted and compact: ``"GPU 1"``, ``"GPUs 0, 1"``, ``"GPUs 0, 2, 4, 6"``,
    ``"GPUs 0-3"`` (a run of three or more consecutive GPU indices), ``"GPUs 0, 0 · GI 1"``
    (MIG instances after their GPU); ``"none"`` for none."""
    gs = sorted({int(g) for g in (gpus or ())}, key=entity_key)
    if not gs:
        return "none"
    parts: list[str] = []
    i = 0
    while i < len(gs):
        j = i
        while (j + 1 < len(gs) and not GpuEntity.from_code(gs[j + 1]).is_mig
               and not GpuEntity.from_code(gs[j]).is_mig and gs[j + 1] == gs[j] + 1):
            j += 1
        if j - i >= 2:
            parts.append(f"{gs[i]}-{gs[j]}")
        else:
            parts.extend(entity_short(g) for g in gs[i:j + 1])
        i = j + 1
    return f"GPU{'s' if len(gs) > 1 else ''} " + ", ".join(parts)


def share_words(hot_share: float, cold_share: float, n_hot: int = 2) -> str:
    """A hot set's work against the rest's: ``"2.6x the rest's work (18 % each vs 7 %)"``
    (``n_hot`` GPUs in the set; ``"2.4x the rest's work (71 % vs 29 %)"`` for one GPU), from
    the mean shares (%) of the summed work a hot / another GPU holds; ``""`` when either is
    unknown (NaN, None) or the rest hold none."""
    try:
        h, c = float(hot_share), float(cold_share)
    except (TypeError, ValueError):
        return ""
    if not (math.isfinite(h) and math.isfinite(c)) or c <= 0:
        return ""
    each = " each" if n_hot > 1 else ""
    return f"{h / c:.1f}x the rest's work ({h:.0f} %{each} vs {c:.0f} %)"


def window_words(gpus, hot_share: float = math.nan, cold_share: float = math.nan) -> str:
    """One window's hot set: ``"GPUs 1, 3, 5, 7 at 2.6x the rest's work (18 % each vs
    7 %)"``, ``"GPU 1 at 2.4x the rest's work (71 % vs 29 %)"``, the GPUs alone when the
    shares are unknown; ``""`` for an empty set."""
    gs = [int(g) for g in (gpus or ())]
    if not gs:
        return ""
    share = share_words(hot_share, cold_share, len(gs))
    return gpus_text(gs) + (f" at {share}" if share else "")


def _mean(x) -> float:
    a = np.asarray(x, dtype=float)
    a = a[np.isfinite(a)]
    return float(a.mean()) if a.size else math.nan


@dataclass(frozen=True)
class HotSetPart:
    """One hot set of a range: ``gpus`` (sorted), ``windows`` (imbalanced windows flagged with
    exactly it), ``hot_share`` / ``cold_share`` (mean %, over those windows, of the summed
    work a GPU of the set / another GPU holds; NaN unknown) and ``times`` (``hot_share /
    cold_share``: a hot GPU's work in times the rest's, NaN unknown)."""

    gpus: tuple[int, ...]
    windows: int
    hot_share: float = math.nan
    cold_share: float = math.nan

    @property
    def times(self) -> float:
        h, c = self.hot_share, self.cold_share
        return h / c if math.isfinite(h) and math.isfinite(c) and c > 0 else math.nan

    def to_json(self) -> dict:
        """``{"gpus", "windows", "hot_share", "cold_share", "times"}`` (None for NaN)."""
        def num(v: float):
            return float(v) if math.isfinite(v) else None
        return {"gpus": list(self.gpus), "windows": int(self.windows),
                "hot_share": num(self.hot_share), "cold_share": num(self.cold_share),
                "times": num(self.times)}


@dataclass(frozen=True)
class HotSetStory:
    """What a range's hot set did (:func:`describe_hot_set`).

    Attributes:
        pattern: ``"stays"``, ``"rotates"`` or ``"none"`` (no imbalanced window).
        flagged: imbalanced windows with a hot set.
        parts: every hot set flagged, most windows first (lowest set on a tie).
        changes: times the set changed between consecutive imbalanced windows.
        why_none: why there is no hot set (``"no imbalanced decode window"``).
    """

    pattern: str
    flagged: int
    parts: tuple[HotSetPart, ...] = field(default_factory=tuple)
    changes: int = 0
    why_none: str = "no imbalanced decode window"

    @property
    def top(self) -> HotSetPart | None:
        """The set flagged most often (None without one)."""
        return self.parts[0] if self.parts else None

    @property
    def gpus(self) -> tuple[int, ...]:
        """The GPUs of the set flagged most often (empty without one)."""
        return self.top.gpus if self.top else ()

    def set_words(self) -> str:
        """The set that stays, ``"GPUs 1, 3, 5, 7"``; the sets it rotates between (the
        ``ROTATION_SETS`` flagged most, in GPU order), ``"GPUs 0, 2, 4, 6 / GPUs 1, 3, 5,
        7"``; ``"none"``."""
        if self.pattern == "none":
            return "none"
        if self.pattern == "stays":
            return gpus_text(self.gpus)
        named = sorted((p.gpus for p in self.parts[:ROTATION_SETS]),
                       key=lambda gs: [entity_key(g) for g in gs])
        return " / ".join(gpus_text(gs) for gs in named) + \
            (" / …" if len(self.parts) > ROTATION_SETS else "")

    def share_words(self) -> str:
        """The top set's work against the rest: ``"2.6x the rest's work (18 % each vs
        7 %)"``, ``"2.4x the rest's work (71 % vs 29 %)"`` for one GPU; ``""`` unknown."""
        p = self.top
        return "" if p is None else share_words(p.hot_share, p.cold_share, len(p.gpus))

    def text(self) -> str:
        """The hot set in one line (the module docstring's three forms)."""
        if self.pattern == "none":
            return f"none: {self.why_none}"
        if self.pattern == "stays":
            return (window_words(self.gpus, self.top.hot_share, self.top.cold_share)
                    + f", stays: {self.top.windows} of {self.flagged} imbalanced window"
                    + ("s" if self.flagged != 1 else ""))
        named = [f"{gpus_text(p.gpus)} ({p.windows} window{'s' if p.windows != 1 else ''}"
                 + (f", {p.times:.1f}x the rest" if math.isfinite(p.times) else "") + ")"
                 for p in self.parts[:ROTATION_SETS]]
        rest = self.parts[ROTATION_SETS:]
        if rest:
            n = sum(p.windows for p in rest)
            named.append(f"{len(rest)} other set{'s' if len(rest) != 1 else ''} "
                         f"({n} window{'s' if n != 1 else ''})")
        joined = (" and ".join(named) if len(named) == 2
                  else ", ".join(named[:-1]) + ", and " + named[-1])
        return f"rotates between {joined}"

    @classmethod
    def from_json(cls, d: dict, share_scale: float = 1.0) -> HotSetStory:
        """The story of a ``to_json`` dict; ``share_scale`` turns its shares into % (100 for
        a report's 0-1 shares); None shares are NaN."""
        def num(v) -> float:
            return math.nan if v is None else float(v) * share_scale
        parts = tuple(HotSetPart(tuple(int(g) for g in p["gpus"]), int(p["windows"]),
                                 num(p.get("hot_share")), num(p.get("cold_share")))
                      for p in d.get("sets") or ())
        return cls(str(d["pattern"]), int(d["flagged"]), parts, int(d.get("changes", 0)))

    def to_json(self) -> dict:
        """``{"pattern", "flagged", "changes", "sets": [HotSetPart.to_json()], "text"}``."""
        return {"pattern": self.pattern, "flagged": int(self.flagged),
                "changes": int(self.changes), "sets": [p.to_json() for p in self.parts],
                "text": self.text()}


def describe_hot_set(sets: Sequence, hot_share: Sequence | None = None,
                     cold_share: Sequence | None = None,
                     why_none: str = "no imbalanced decode window") -> HotSetStory:
    """Describe a range's hot set from its windows' hot sets.

    Args:
        sets: one hot set per window in time order (sequences of GPU ids; empty for a
            window not flagged), e.g. ``summary.window_hot_sets(windows)``.
        hot_share, cold_share: per window, the mean share (%) of the summed work a hot GPU /
            another GPU holds (``classifier.imbalance``; NaN unknown); None: unknown.
        why_none: the reason given when no window has a hot set.

    Returns:
        A :class:`HotSetStory`: ``stays`` when the set flagged most often holds at least
        ``STAYS_SHARE`` of the windows with a hot set, ``rotates`` otherwise, ``none``
        without one.  Sets are compared as sets (GPU order within a window ignored).
    """
    n = len(sets)
    hs = np.full(n, np.nan) if hot_share is None else np.asarray(hot_share, dtype=float)
    cs = np.full(n, np.nan) if cold_share is None else np.asarray(cold_share, dtype=float)
    keyed = [tuple(sorted({int(g) for g in (s or ())}, key=entity_key)) for s in sets]
    counts: dict[tuple[int, ...], list[int]] = {}
    for i, s in enumerate(keyed):
        if s:
            counts.setdefault(s, []).append(i)
    flagged = sum(len(v) for v in counts.values())
    if not flagged:
        return HotSetStory("none", 0, why_none=why_none)
    ranked = sorted(counts.items(), key=lambda kv: (-len(kv[1]),
                                                    [entity_key(g) for g in kv[0]]))
    parts = tuple(HotSetPart(s, len(idx), _mean(hs[idx]), _mean(cs[idx]))
                  for s, idx in ranked)
    seq = [s for s in keyed if s]
    changes = sum(1 for a, b in itertools.pairwise(seq) if a != b)
    pattern = "stays" if parts[0].windows / flagged >= STAYS_SHARE else "rotates"
    return HotSetStory(pattern, flagged, parts, changes, why_none)


__all__ = ["ROTATION_SETS", "STAYS_SHARE", "HotSetPart", "HotSetStory", "describe_hot_set",
           "gpus_text", "share_words", "window_words"]
