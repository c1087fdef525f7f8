"""What a line of an inference server's log is: the one recogniser of SGLang scheduler lines
and vLLM stats lines, shared by the importers' format detection (``data.importers``) and the
server-log parser (``data.server_log``), so every line the parser reads is also
recognised as a server log by ``import``, ``report``, ``classify``, ``dashboard`` and
``collect``.

A line is an SGLang line when it holds ``Prefill batch`` / ``Decode batch`` followed by at
least one ``name: value`` field, whatever comes before the message: the default
``[YYYY-mm-dd HH:MM:SS DPn TPn EPn]`` prefix, one with a ``file:line`` part or a space after
``[``, a bare pid, Ray's ``(SGLangEngine pid=...)``.  It is a vLLM line when it holds ``Avg
prompt throughput:``, ``SpecDecoding metrics:`` (V1) or ``Speculative metrics:`` (V0) with at
least one field of that message's table.  The field tables name each field's canonical key
(``data.server_log``'s docstring lists them with units).

A value is a reading only when it can be one: a blank code (``BLANK_CODES``: the all-ones and
half-range integers a counter or a ``-1`` cast prints where it has no value, and DCGM's and
NVML's ``data.schema.SENTINELS``), a numeral too long to be a count (more than ``MAX_DIGITS``
digits, e.g. a 5000-digit number) or a value outside the field's physical bounds
(``FIELD_BOUNDS``) is no reading: ``fields`` leaves it out (missing: NaN in a frame) and
counts it in ``refused``.

Nothing here imports other tealeaves rooms (``data.schema`` gives the sentinels).
"""

from __future__ import annotations

import math
import re

from tealeaves.data.schema import SENTINELS, is_blank

__all__ = ["BLANK_CODES", "FIELD_BOUNDS", "MAX_DIGITS", "fields", "line_format", "no_reading",
           "split_fields", "value"]

#: Longest numeral read as a number (digits, point excluded): 2**64 has 20 digits, so a longer
#: one is no count a server prints (Python refuses ints of over 4300 digits outright).
MAX_DIGITS = 30
#: Codes that stand for "no value" in a log's numbers: 2**31-1, 2**32-1 (an unsigned -1),
#: 2**47 (DCGM's fp64 blank, as printed), 2**53 (float precision's end), 2**63-1, 2**64-1 and
#: 2**64, plus ``data.schema.SENTINELS`` (DCGM, NVML).  Not 2**15-1 or 2**16-1: 32767 tokens
#: or 65535 tokens/s are readings a server can print.
BLANK_CODES: frozenset[float] = frozenset(
    {float(2**31 - 1), float(2**32 - 1), float(2**47), float(2**53), float(2**63 - 1),
     float(2**64 - 1), float(2**64)}
    | {c for codes in SENTINELS.values() for c in codes})

_SMALLEST_CODE = 0.999 * min(BLANK_CODES)  # below it no code can match (a fast test)
_REQS = (0.0, 1e6)        # requests in one scheduler: SGLang's --max-running-requests is
#                           thousands, a KV pool cannot hold a million requests
_TOKENS = (0.0, 1e10)     # tokens: a KV pool holds ~1e7 tokens per GPU; 1e10 is far past a node
_TOK_S = (0.0, 1e8)       # tokens/s of one server: ~1e6 is the fastest 8-GPU prefill; 100x more
_PCT = (0.0, 100.0)
_FRAC = (0.0, 1.0)
#: Physical bounds of each canonical field (inclusive); a value outside is no reading.
FIELD_BOUNDS: dict[str, tuple[float, float]] = {
    "new_seq": _REQS, "running_req": _REQS, "queue_req": _REQS, "swapped_req": _REQS,
    "new_token": _TOKENS, "cached_token": _TOKENS, "token": _TOKENS, "pending_token": _TOKENS,
    "spec_accepted_tokens": _TOKENS, "spec_drafted_tokens": _TOKENS,
    "spec_emitted_tokens": _TOKENS, "spec_num_tokens": _TOKENS,
    "gen_throughput_tok_s": _TOK_S, "input_throughput_tok_s": _TOK_S,
    "prompt_throughput_tok_s": _TOK_S, "spec_accepted_tok_s": _TOK_S,
    "spec_drafted_tok_s": _TOK_S,
    "token_usage": _FRAC, "spec_draft_acceptance_rate": _FRAC, "spec_system_efficiency": _FRAC,
    "kv_cache_usage_pct": _PCT, "cpu_kv_cache_usage_pct": _PCT,
    "prefix_cache_hit_rate_pct": _PCT, "cpu_prefix_cache_hit_rate_pct": _PCT,
    "spec_draft_acceptance_rate_pct": _PCT,
    "accept_len": (0.0, 1024.0),  # tokens per verify step: at most the draft length + 1
}

NUM_RE = re.compile(
    r"(?P<n>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))\s*(?P<u>%|tokens/s|token/s|tok/s|reqs|req|"
    r"tokens|token)?", re.ASCII)

# canonical key, expected type ("num" or "bool")
SGLANG_FIELDS: dict[str, tuple[str, str]] = {
    "#new-seq": ("new_seq", "num"),
    "#new-token": ("new_token", "num"),
    "#cached-token": ("cached_token", "num"),
    "token usage": ("token_usage", "num"),
    "#running-req": ("running_req", "num"),
    "#queue-req": ("queue_req", "num"),
    "#token": ("token", "num"),
    "accept len": ("accept_len", "num"),
    "gen throughput (token/s)": ("gen_throughput_tok_s", "num"),
    "input throughput (token/s)": ("input_throughput_tok_s", "num"),
    "cuda graph": ("cuda_graph", "bool"),
    "#pending-token": ("pending_token", "num"),
}
VLLM_STATS: dict[str, tuple[str, str]] = {
    "avg prompt throughput": ("prompt_throughput_tok_s", "num"),
    "avg generation throughput": ("gen_throughput_tok_s", "num"),
    "running": ("running_req", "num"),
    "waiting": ("queue_req", "num"),
    "pending": ("queue_req", "num"),
    "swapped": ("swapped_req", "num"),
    "gpu kv cache usage": ("kv_cache_usage_pct", "num"),
    "cpu kv cache usage": ("cpu_kv_cache_usage_pct", "num"),
    "prefix cache hit rate": ("prefix_cache_hit_rate_pct", "num"),
    "gpu prefix cache hit rate": ("prefix_cache_hit_rate_pct", "num"),
    "cpu prefix cache hit rate": ("cpu_prefix_cache_hit_rate_pct", "num"),
}
VLLM_SPEC: dict[str, tuple[str, str]] = {
    "mean acceptance length": ("accept_len", "num"),
    "accepted throughput": ("spec_accepted_tok_s", "num"),
    "drafted throughput": ("spec_drafted_tok_s", "num"),
    "accepted": ("spec_accepted_tokens", "num"),
    "drafted": ("spec_drafted_tokens", "num"),
    "draft acceptance rate": ("spec_draft_acceptance_rate_pct", "num"),
    "avg draft acceptance rate": ("spec_draft_acceptance_rate_pct", "num"),
}
VLLM_SPEC_V0: dict[str, tuple[str, str]] = {
    "draft acceptance rate": ("spec_draft_acceptance_rate", "num"),  # fraction 0-1 on V0
    "system efficiency": ("spec_system_efficiency", "num"),
    "number of speculative tokens": ("spec_num_tokens", "num"),
    "number of accepted tokens": ("spec_accepted_tokens", "num"),
    "number of draft tokens": ("spec_drafted_tokens", "num"),
    "number of emitted tokens": ("spec_emitted_tokens", "num"),
}


def value(raw: str) -> float | int | bool | str:
    """A field value: int, float (unit suffix such as ``%`` or ``tokens/s`` dropped), bool, or
    the stripped string.  Only ASCII decimal numbers count; ``nan``/``inf`` stay strings; a
    numeral of more than ``MAX_DIGITS`` digits is ``inf`` (with its sign)."""
    s = raw.strip()
    m = NUM_RE.fullmatch(s)
    if m:
        n = m.group("n")
        if sum(c.isdigit() for c in n) > MAX_DIGITS:  # no count: +-inf, refused by no_reading
            return -math.inf if n.startswith("-") else math.inf
        if re.fullmatch(r"[+-]?[0-9]+", n, re.ASCII):
            return int(n)
        return float(n)
    low = s.lower()
    if low == "true":
        return True
    if low == "false":
        return False
    return s


def split_fields(body: str) -> list[tuple[str, str]]:
    """``name: value`` pairs of a comma-separated message; a piece without a colon continues
    the previous value (lists such as vLLM's per-position acceptance rates)."""
    items: list[list[str]] = []
    for piece in body.split(","):
        name, colon, val = piece.partition(":")
        if colon and name.strip():
            items.append([name.strip(), val.strip()])
        elif piece.strip() and items:
            items[-1][1] = f"{items[-1][1]}, {piece.strip()}" if items[-1][1] else piece.strip()
    return [(n, v) for n, v in items]


def no_reading(key: str | None, val: float) -> str | None:
    """Why the number ``val`` of field ``key`` (a canonical key, or None for a field the
    tables do not know) is no reading: ``"blank"`` (one of ``BLANK_CODES``), ``"impossible"``
    (not finite, a numeral too long, or outside ``FIELD_BOUNDS[key]``); None when it is one."""
    v = float(val)
    if not math.isfinite(v):
        return "impossible"
    if v in BLANK_CODES or (abs(v) >= _SMALLEST_CODE and bool(is_blank(v))):
        return "blank"
    lo, hi = FIELD_BOUNDS.get(key, (-math.inf, math.inf)) if key else (-math.inf, math.inf)
    return None if lo <= v <= hi else "impossible"


def fields(body: str, table: dict[str, tuple[str, str]],
           refused: dict[tuple[str, str], int] | None = None) -> tuple[dict, dict]:
    """The ``(known, extra)`` fields of a message: known ones under their canonical keys
    (``table``), others under their names as written.  A number that is no reading
    (``no_reading``) is left out of both and counted in ``refused`` under ``(key or name,
    "blank" | "impossible")``."""
    known: dict[str, float | bool | str] = {}
    extra: dict[str, float | bool | str] = {}
    for name, raw in split_fields(body):
        val = value(raw)
        spec = table.get(" ".join(name.lower().split()))
        key = spec[0] if spec is not None else None
        if isinstance(val, int | float) and not isinstance(val, bool):
            why = no_reading(key, val)
            if why is not None:
                if refused is not None:
                    refused[(key or name, why)] = refused.get((key or name, why), 0) + 1
                continue
        if spec is not None:
            kind = spec[1]
            ok = isinstance(val, bool) if kind == "bool" else (
                isinstance(val, int | float) and not isinstance(val, bool))
            if ok:
                known[key] = val
                continue
            extra[name] = raw.strip()
            continue
        extra[name] = val
    return known, extra



ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SGLANG_MSG_RE = re.compile(r"(?P<kind>Prefill|Decode) batch(?![A-Za-z0-9_])\s*[.,:]?")
SGLANG_PREFIX_RE = re.compile(
    r"^\s*\[(?P<Y>[0-9]{4})-(?P<m>[0-9]{2})-(?P<d>[0-9]{2})[ T](?P<H>[0-9]{2}):(?P<M>[0-9]{2}):"
    r"(?P<S>[0-9]{2})(?:[.,](?P<f>[0-9]{1,9}))?(?P<tags>(?: +[A-Za-z_]+[0-9]+)*) *\]\s*$",
    re.ASCII)
TAG_RE = re.compile(r"(?<![A-Za-z0-9_])(DP|PP|TP|EP)([0-9]{1,6})(?![A-Za-z0-9])", re.ASCII)
VLLM_MSG_RE = re.compile(
    r"(?:Engine\s+(?P<eng>[0-9]{1,6})\s*:\s*)?"
    r"(?P<msg>Avg prompt throughput(?=\s*:)|SpecDecoding metrics\s*:|Speculative metrics\s*:)",
    re.ASCII)
PID_RE = re.compile(r"\((?P<proc>[A-Za-z_][A-Za-z0-9_]*)\s+pid=(?P<pid>[0-9]{1,10})\)", re.ASCII)


def line_format(line: str) -> str | None:
    """``"sglang"`` or ``"vllm"`` when ``line`` is a line the server-log parser reads (see
    the module docstring), else None.  ANSI colour codes are ignored."""
    clean = ANSI_RE.sub("", line)
    m = SGLANG_MSG_RE.search(clean)
    if m is not None:
        refused: dict[tuple[str, str], int] = {}
        known, extra = fields(clean[m.end():].rstrip(" ,."), SGLANG_FIELDS, refused)
        if known or extra or refused:  # a line of blank codes alone is still the server's
            return "sglang"
    m = VLLM_MSG_RE.search(clean)
    if m is not None:
        msg = m.group("msg")
        if msg.startswith("Avg"):
            body, table = clean[m.start("msg"):], VLLM_STATS
        elif msg.startswith("SpecDecoding"):
            body, table = clean[m.end():], VLLM_SPEC
        else:
            body, table = clean[m.end():], VLLM_SPEC_V0
        refused = {}
        canonical = {key for key, _ in table.values()}
        if fields(body.rstrip(" ,."), table, refused)[0] or any(
                k in canonical for k, _ in refused):
            return "vllm"
    return None
