"""Serving groups: the GPUs that serve one model together, and GPUs of different roles.

Imbalance (``classifier.imbalance``) is judged *within* a serving group: one server's TP/EP
ranks wait for each other at every step, two servers do not.  A prefill/decode-disaggregated
deployment (one GPU only prefills, another only decodes) is two servers of different *roles*:
the decode GPU's steady work beside the prefill GPU's bursts is no hot set and costs no
straggler tax.

Where the grouping comes from, first that applies (``resolve_groups``):

1. **an explicit grouping** (``--groups 0-3,4-7``, ``parse_groups``): groups are separated
   by commas, each a GPU index (``5``), a range (``0-3``) or parts joined by ``+``
   (``0+2+4+6``); every GPU of the trace must be in exactly one group.
2. **the compute processes** (the store's ``processes`` table): not used.  The table holds,
   per GPU, each compute process's ``pid`` and 15-character command name
   (``/proc/<pid>/comm``, ``collectors.nvml.process_name``), with no parent pid and no rank.
   SGLang and vLLM run one process per TP rank, so the eight GPUs of one TP8 server show
   eight different pids and nothing that ties them together; a grouping by pid would split
   every TP server into single GPUs.  Only a process spanning several GPUs (transformers'
   ``device_map="auto"``) would join them, which the data-driven default already does.
3. **roles detected from the data** (``detect_roles``): see below.
4. otherwise **one group** of every GPU (the behaviour before serving groups).

Role detection reads the per-GPU pipe features of ``classifier.features`` (``tensor_g<i>``,
``dram_g<i>``: fractions of the pipe's limit, 0-1).  A GPU's window is *busy* when its
tensor + DRAM activity reaches ``ROLE_BUSY_WORK``; its **compute share** there is tensor /
(tensor + DRAM), the roofline ceiling it leans on (prefill's GEMMs near 0.8, decode's GEMVs
near 0.05: ``features.f_compute_share``).  Two GPUs are of **different roles** when

- in the windows where both are busy (at least ``ROLE_MIN_WINDOWS``) their compute shares
  differ by ``ROLE_GAP`` or more (median over those windows): ranks of one server run the
  same phase in lockstep, so their shares agree window by window whatever their load; or
- they are rarely busy together (fewer than ``ROLE_MIN_WINDOWS`` such windows) and the
  medians of their own busy windows' shares differ by ``ROLE_GAP``; or
- each is busy in at least ``ROLE_MIN_WINDOWS`` windows but both are busy in at most
  ``APART_SHARE`` of the fewer busy windows of the two: they take turns, as two servers can
  and one server's ranks (a barrier every step) cannot.

A GPU busy in fewer than ``ROLE_MIN_WINDOWS`` windows gives no evidence: it stays with the
others (an idle GPU beside a working one is the low-load imbalance of
``h200x2_composite_low_load``, not a role) unless roles are found among the others, when such
GPUs make a group of their own (role ``idle``).  GPUs with evidence and not of different
roles are joined (connected components), so a split needs every link between the parts to
differ; the
eight-GPU four-vs-four split of ``tests/test_hot_set.py`` (odd GPUs at about 3x the even
ones' work, all decoding in lockstep) stays one group with its hot set of four.

Thresholds, measured 2026-12 on the bundled H200 traces (``data/traces``, 0.5-s windows):

- ``ROLE_GAP`` 0.20: over the 14 two-GPU traces of the corpus (one workload on both GPUs) the
  median per-window share difference where both GPUs are busy is 0.000-0.009 (90th
  percentile at most 0.094, on ``h200x2_bursts``); the eight-GPU split 0.002; the P/D
  composite of ``kernels_bench.composite.build_pd`` (GPU 0 the prefill rows of
  ``h200x1_bursts``, GPU 1 its decode rows) 0.55.
- ``PREFILL_SHARE`` 0.40 / ``DECODE_SHARE`` 0.25 (naming a role only): the per-GPU median
  share of labelled prefill windows is 0.46-0.85 on the 28 corpus traces except chunked
  prefill interleaved with decode (0.29); of labelled decode windows 0.02-0.24 (0.23-0.24:
  the split-KV verify kernel and Qwen3-MoE continuous batching).  Between them a role is
  ``mixed``.
- ``APART_SHARE`` 0.20: the share of the fewer busy windows in which both GPUs are busy is
  0.94-1.00 on the corpus' two-GPU recordings and 0.50 on the low-load composite (a hot GPU
  beside an idle one for 15 s at a time, then both busy).
- ``ROLE_MIN_WINDOWS`` 8 (4 s at 0.5-s windows): the eight-GPU split holds 6 windows, a
  prefill stretch of ``h200x1_bursts`` 2-3.
- ``ROLE_BUSY_WORK`` 0.05 (tensor + DRAM, 0-1): labelled idle windows read 0.00 (median;
  90th percentile at most 0.046, ``h200x1_cb_spec_dsv3``), so the share is read only where
  there is work to read it from.  Low-load decode often reads under it (hf MoE decode: median
  0.003-0.10; launch-bound decode 0.00): such windows give no evidence, so a role split needs
  real work on both sides, and a launch-bound server is judged as one group, as before.

Missing readings (NaN) are not busy and give no evidence; a source without per-GPU tensor and
DRAM activity gets no role detection (one group).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tealeaves.data.schema import MAX_GPUS, entity_name, entity_short, peers, valid_entity

#: A GPU's window counts as busy when its tensor + DRAM activity (fractions of their limits,
#: summed) reaches this.
ROLE_BUSY_WORK = 0.05
#: Least median difference of compute share (0-1) that makes two GPUs different roles.
ROLE_GAP = 0.20
#: Least busy windows (and co-busy windows) that count as evidence.
ROLE_MIN_WINDOWS = 8
#: Role names from the median compute share of a GPU's busy windows.
PREFILL_SHARE = 0.40
DECODE_SHARE = 0.25
#: Busy together in at most this share of the fewer busy windows: they take turns.
APART_SHARE = 0.20

#: Where a grouping came from (``Grouping.source``).
SOURCES = ("option", "roles", "none")
#: Role names and how the text says them.
ROLE_WORDS = {"prefill": "prefill-only", "decode": "decode-only", "mixed": "prefill and decode",
              "idle": "idle"}


class GroupsError(ValueError):
    """A grouping that cannot be used (the message names the option and the bad token)."""


@dataclass(frozen=True)
class Grouping:
    """The serving groups imbalance is judged in.

    Attributes:
        groups: GPU ids per group, each sorted, groups ordered by their first GPU.
        source: ``"option"`` (given: ``--groups``), ``"roles"`` (detected from the data) or
            ``"none"`` (one group of every GPU: nothing given, no roles found).
        roles: ``{gpu: "prefill" | "decode" | "mixed" | "idle"}`` when ``source`` is
            ``"roles"``, else empty.
        evidence: what the detection measured (``detect_roles``), JSON-ready; empty unless
            roles were looked for.
        option: the option's name in the text (``"--groups"``).
    """

    groups: tuple[tuple[int, ...], ...]
    source: str = "none"
    roles: dict = field(default_factory=dict)
    evidence: dict = field(default_factory=dict)
    option: str = "--groups"

    @property
    def applies(self) -> bool:
        """True when the grouping is more than "one group, nothing given": a grouping was
        given, or roles were detected."""
        return self.source != "none"

    @property
    def split(self) -> bool:
        """True with two or more groups."""
        return len(self.groups) > 1

    def text(self) -> str:
        """The grouping in words: ``"groups 0-3, 4-7 (from --groups)"``, ``"one group of 2
        GPUs (no grouping given)"``, ``"roles: GPU 0 prefill-only, GPU 1 decode-only
        (detected)"``."""
        if self.source == "roles":
            parts = []
            for g in self.groups:
                role = self.roles.get(g[0], "mixed")
                who = (entity_name(g[0]) if len(g) == 1
                       else f"GPUs {group_text(g)}")
                parts.append(f"{who} {ROLE_WORDS.get(role, role)}")
            return f"roles: {', '.join(parts)} (detected)"
        if self.source == "option":
            return (f"groups {', '.join(group_text(g) for g in self.groups)} "
                    f"(from {self.option})")
        n = sum(len(g) for g in self.groups)
        return f"one group of {n} GPU{'' if n == 1 else 's'} (no grouping given)"

    def why(self) -> str:
        """What the role detection saw, in one clause (``""`` unless roles were detected):
        ``"compute share 0.64 vs 0.04 where both are busy (39 windows)"``."""
        if self.source != "roles":
            return ""
        pairs = self.evidence.get("pairs", [])
        split = [p for p in pairs if p["differ"]]
        if not split:
            return ""
        p = max(split, key=lambda q: q["gap"] if q["gap"] is not None else -1.0)
        a, b = p["gpus"]
        if p["why"] == "apart":
            return (f"{entity_name(a)} and {entity_name(b)} busy together in "
                    f"{p['together']} of {min(p['busy'])} windows")
        where = (f"in the {p['together']} windows both are busy" if p["why"] == "lockstep"
                 else f"over each one's busy windows ({p['together']} together)")
        return (f"tensor share of the work {p['share'][0]:.2f} on {entity_name(a)} vs "
                f"{p['share'][1]:.2f} on {entity_name(b)} {where} (one server's ranks "
                f"differ by under {ROLE_GAP:.2f})")

    def to_json(self) -> dict:
        """JSON-ready: ``groups`` (lists of GPU ids), ``source``, ``roles`` ({"gpu": role}),
        ``text``, ``why``, ``evidence``."""
        return {"groups": [[int(g) for g in grp] for grp in self.groups],
                "source": self.source,
                "roles": {str(int(g)): r for g, r in self.roles.items()},
                "text": self.text(), "why": self.why(), "evidence": self.evidence}

    @classmethod
    def from_json(cls, doc: dict | None) -> Grouping | None:
        """A ``Grouping`` back from ``to_json`` (None for None)."""
        if not doc:
            return None
        return cls(tuple(tuple(int(g) for g in grp) for grp in doc["groups"]),
                   doc.get("source", "none"),
                   {int(g): r for g, r in (doc.get("roles") or {}).items()},
                   dict(doc.get("evidence") or {}))


def group_text(gpus) -> str:
    """One group in the option's syntax, runs as ranges joined by ``+``: ``"0-3"``,
    ``"0+2+4+6"``, ``"0-2+5"``, ``"3"`` (a MIG instance by its name, which the option
    cannot parse back)."""
    gs = sorted(int(g) for g in gpus)
    out, i = [], 0
    while i < len(gs):
        j = i
        while j + 1 < len(gs) and gs[j + 1] == gs[j] + 1:
            j += 1
        out.append(entity_short(gs[i]) if j == i
                   else f"{entity_short(gs[i])}-{entity_short(gs[j])}")
        i = j + 1
    return "+".join(out)


_TOKEN = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")
#: Most GPUs one range may name (a typo such as ``0-70000`` is refused, not expanded).
MAX_RANGE = 4096


def parse_groups(text: str, option: str | None = "--groups") -> tuple[tuple[int, ...], ...]:
    """Serving groups from their text: ``"0-3,4-7"`` -> ``((0, 1, 2, 3), (4, 5, 6, 7))``.

    Groups are separated by commas; a group is a GPU index, an inclusive range ``a-b``, or
    such parts joined by ``+`` (``"0+2+4+6,1+3+5+7"``).  Spaces around the parts are allowed.

    Args:
        text: the option's value.
        option: named at the start of each message (``"--groups: ..."``); None leaves it out
            (for an argparse ``type=``, which names the option itself).

    Returns:
        The groups, each sorted, in the order given.

    Raises:
        GroupsError: an empty value or group, a part that is not an index or range (named, with
            an example), a range that ends before it starts or spans more than ``MAX_RANGE``
            GPUs, or a GPU in two groups.
    """
    pre = f"{option}: " if option else ""
    if text is None or not str(text).strip():
        raise GroupsError(f"{pre}empty; give groups of GPUs such as 0-3,4-7")
    groups: list[tuple[int, ...]] = []
    seen: dict[int, int] = {}
    for n, chunk in enumerate(str(text).split(",")):
        if not chunk.strip():
            raise GroupsError(f"{pre}group {n + 1} of {text!r} is empty; give groups of GPUs "
                              f"such as 0-3,4-7")
        members: list[int] = []
        for part in chunk.split("+"):
            m = _TOKEN.match(part)
            if not m:
                raise GroupsError(f"{pre}{part.strip()!r} is not a GPU index or range "
                                  f"(give groups such as 0-3,4-7 or 0+2,1+3)")
            a = int(m.group(1))
            b = int(m.group(2)) if m.group(2) is not None else a
            if b < a:
                raise GroupsError(f"{pre}{part.strip()!r}: the range ends before it starts")
            if b - a + 1 > MAX_RANGE:
                raise GroupsError(f"{pre}{part.strip()!r}: more than {MAX_RANGE} GPUs in one "
                                  f"range")
            if not valid_entity(np.array([a, b])).all():  # a number no GPU (nor MIG) has
                raise GroupsError(f"{pre}{part.strip()!r} is not a GPU index (0-{MAX_GPUS - 1}, "
                                  f"or a MIG instance's entity number)")
            members.extend(range(a, b + 1))
        for g in members:
            if g in seen and seen[g] != n:
                raise GroupsError(f"{pre}GPU {g} is in two groups ({seen[g] + 1} and {n + 1})")
            seen[g] = n
        groups.append(tuple(sorted(set(members))))
    return tuple(groups)


def check_groups(groups, gpus, option: str = "--groups") -> Grouping:
    """An explicit grouping checked against the GPUs of the data.

    Args:
        groups: ``parse_groups`` output (or any sequences of GPU ids).
        gpus: the GPU ids the data holds (per-GPU columns of the features, or the samples'
            ``gpu`` values).
        option: named in the messages.

    Returns:
        ``Grouping(source="option")``, groups ordered by their first GPU.

    Raises:
        GroupsError: a group names a GPU the data lacks, or a GPU of the data is in no group
            (both named, with the data's GPUs).
    """
    have = sorted({int(g) for g in gpus})
    named = [int(g) for grp in groups for g in grp]
    missing = sorted(set(named) - set(have))
    if missing:
        raise GroupsError(f"{option}: {_gpus_words(missing)} "
                          f"{'is' if len(missing) == 1 else 'are'} not in the data (its "
                          f"GPUs: {group_text(have) or 'none'})")
    left = [g for g in peers(have) if g not in set(named)]
    if left:
        raise GroupsError(f"{option}: {_gpus_words(left)} of the data "
                          f"{'is' if len(left) == 1 else 'are'} in no group; name every GPU "
                          f"(e.g. {option} {group_text(have)})")
    ordered = tuple(sorted((tuple(sorted(int(g) for g in grp)) for grp in groups if grp),
                           key=lambda grp: grp[0]))
    return Grouping(ordered, "option", option=option)


def _gpus_words(gs: list[int]) -> str:
    return entity_name(gs[0]) if len(gs) == 1 else f"GPUs {', '.join(map(entity_short, gs))}"


def feature_gpus(features: pd.DataFrame) -> list[int]:
    """The GPUs the features compare (``load_g<i>`` columns, ``data.schema.peers``)."""
    ids = [int(c[6:]) for c in features.columns if c.startswith("load_g") and c[6:].isdigit()]
    return peers(ids)


def role_of(share: float) -> str:
    """The role a median compute share names: ``prefill`` (>= ``PREFILL_SHARE``),
    ``decode`` (<= ``DECODE_SHARE``), else ``mixed``; ``idle`` for NaN."""
    if not np.isfinite(share):
        return "idle"
    if share >= PREFILL_SHARE:
        return "prefill"
    if share <= DECODE_SHARE:
        return "decode"
    return "mixed"


def detect_roles(features: pd.DataFrame) -> Grouping:
    """Serving groups from the per-GPU phase activity (the module docstring's test).

    Args:
        features: ``WindowFeatures`` rows of the range (``tensor_g<i>``, ``dram_g<i>``).

    Returns:
        ``Grouping(source="roles")`` with one group per role when GPUs of different roles
        are found, else ``Grouping(source="none")`` (one group of every GPU).  Either way
        ``evidence`` holds ``gpus`` ({"gpu": {"busy_windows", "compute_share" (median, NaN
        as None), "role"}}) and ``pairs`` (one dict per pair of GPUs with evidence:
        ``gpus``, ``busy`` (each one's busy windows), ``together`` (windows both busy),
        ``share`` (each one's median share, over the co-busy windows when there are
        enough), ``gap`` (the difference measured), ``why`` (``lockstep``, ``own`` or
        ``apart``), ``differ``).
    """
    gpus = feature_gpus(features)
    one = Grouping((tuple(gpus),) if gpus else (), "none")
    have = [g for g in gpus if f"tensor_g{g}" in features and f"dram_g{g}" in features]
    if len(have) < 2 or len(have) != len(gpus):
        return one
    T = features[[f"tensor_g{g}" for g in have]].to_numpy(dtype=float)
    D = features[[f"dram_g{g}" for g in have]].to_numpy(dtype=float)
    P = T + D
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        busy = np.isfinite(P) & (P >= ROLE_BUSY_WORK)
        share = np.where(busy, T / np.where(P > 0, P, np.nan), np.nan)
        med = np.array([np.nanmedian(share[busy[:, i], i]) if busy[:, i].any() else np.nan
                        for i in range(len(have))])
    nb = busy.sum(axis=0)
    evidence: dict = {"gpus": {str(g): {"busy_windows": int(nb[i]),
                                        "compute_share": _num(med[i]),
                                        "role": role_of(med[i])
                                        if nb[i] >= ROLE_MIN_WINDOWS else "idle"}
                               for i, g in enumerate(have)},
                      "pairs": []}
    parent = list(range(len(have)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(have)):
        for j in range(i + 1, len(have)):
            pair = _pair(share, busy, med, nb, i, j)
            if pair is None:  # no evidence (either is seldom busy): no link either way
                continue
            pair["gpus"] = [have[i], have[j]]
            evidence["pairs"].append(pair)
            if not pair["differ"]:
                parent[find(j)] = find(i)
    comps: dict[int, list[int]] = {}
    quiet = []  # busy too seldom to tell: with the others, or on their own beside roles
    for i, g in enumerate(have):
        if nb[i] < ROLE_MIN_WINDOWS:
            quiet.append(g)
        else:
            comps.setdefault(find(i), []).append(g)
    if len(comps) < 2:
        return Grouping(one.groups, "none", evidence=evidence)
    groups = tuple(sorted([tuple(sorted(c)) for c in comps.values()]
                          + ([tuple(quiet)] if quiet else []), key=lambda c: c[0]))
    idx = {g: i for i, g in enumerate(have)}
    roles = {}
    for grp in groups:
        shares = [med[idx[g]] for g in grp if nb[idx[g]] >= ROLE_MIN_WINDOWS]
        role = role_of(float(np.median(shares))) if shares else "idle"
        for g in grp:
            roles[g] = role
    return Grouping(groups, "roles", roles, evidence)


def _pair(share: np.ndarray, busy: np.ndarray, med: np.ndarray, nb: np.ndarray, i: int,
          j: int) -> dict | None:
    """The role test of GPUs ``i`` and ``j`` (columns); None when either is busy in fewer
    than ``ROLE_MIN_WINDOWS`` windows (no evidence)."""
    if nb[i] < ROLE_MIN_WINDOWS or nb[j] < ROLE_MIN_WINDOWS:
        return None
    both = busy[:, i] & busy[:, j]
    together = int(both.sum())
    out = {"busy": [int(nb[i]), int(nb[j])], "together": together}
    if together / min(nb[i], nb[j]) <= APART_SHARE:
        return {**out, "share": [_num(med[i]), _num(med[j])], "gap": None, "why": "apart",
                "differ": True}
    if together >= ROLE_MIN_WINDOWS:
        gap = float(np.median(np.abs(share[both, i] - share[both, j])))
        s = [_num(float(np.median(share[both, i]))), _num(float(np.median(share[both, j])))]
        why = "lockstep"
    else:
        gap = float(abs(med[i] - med[j]))
        s = [_num(med[i]), _num(med[j])]
        why = "own"
    return {**out, "share": s, "gap": round(gap, 4), "why": why, "differ": gap >= ROLE_GAP}


def _num(v) -> float | None:
    v = float(v)
    return round(v, 4) if np.isfinite(v) else None


def resolve_groups(features: pd.DataFrame, groups=None, option: str = "--groups") -> Grouping:
    """The grouping to judge imbalance in (module docstring: explicit, else roles detected
    from the data, else one group).

    Args:
        features: ``WindowFeatures`` rows of the range.
        groups: None (detect), a ``Grouping`` (used as is), a string (``parse_groups``) or
            sequences of GPU ids (checked: ``check_groups``).
        option: named in the messages of an explicit grouping.

    Raises:
        GroupsError: an explicit grouping that does not fit the data.
    """
    if isinstance(groups, Grouping):
        return groups
    if groups is None:
        return detect_roles(features)
    if isinstance(groups, str):
        groups = parse_groups(groups, option)
    return check_groups(groups, feature_gpus(features), option)


__all__ = ["APART_SHARE", "DECODE_SHARE", "PREFILL_SHARE", "ROLE_BUSY_WORK", "ROLE_GAP",
           "ROLE_MIN_WINDOWS", "Grouping", "GroupsError", "check_groups", "detect_roles",
           "feature_gpus", "group_text", "parse_groups", "resolve_groups", "role_of"]
