"""Device facts against the stored ones: the facts of a GPU index (``devices`` table) are what
every stored sample of that index is named and scaled by, so a source that states another
uuid, name or power limit for a stored (host, GPU) is another GPU (another machine's
inventory, imported without ``--host``) and is refused, never written over the stored facts.

A fact a source leaves out (NaN, "") or one the store lacks is no conflict: it fills in.  A
new power limit under the stored uuid is the same GPU with its cap changed (``nvidia-smi
-pl``), no conflict either.
"""

from __future__ import annotations

import math

import pandas as pd

#: The facts that tell one GPU from another (a differing one is a conflict).
IDENTITY_FACTS: tuple[str, ...] = ("uuid", "name", "power_limit_w")

#: Power limits this close (W) are the same: nvidia-smi's table prints whole watts
#: (``700W``), ``--query-gpu=power.limit`` two decimals (``700.00 W``).
POWER_LIMIT_SAME_W = 1.0


class DeviceConflictError(ValueError):
    """A source states other facts (uuid, name, power limit) for a stored GPU; the message
    names the source (when known), the host and GPU, and both facts."""


def _blank(v) -> bool:
    """Whether a fact is unstated (None, NaN, empty or whitespace text)."""
    if v is None:
        return True
    if isinstance(v, float):
        return math.isnan(v)
    return isinstance(v, str) and not v.strip()


def same_name(a: str, b: str) -> bool:
    """Whether two printed GPU names name the same model: equal ignoring case and spaces, or
    one the other's start where nvidia-smi's table cut it with ``...``
    (``Tesla V100-SXM2...`` is ``Tesla V100-SXM2-16GB``)."""
    a, b = " ".join(str(a).split()).lower(), " ".join(str(b).split()).lower()
    if a == b:
        return True
    for cut, full in ((a, b), (b, a)):
        if cut.endswith("...") and full.startswith(cut[:-3].rstrip()):
            return True
    return False


def _differs(col: str, old, new) -> bool:
    """Whether two stated values of fact ``col`` disagree."""
    if col == "name":
        return not same_name(old, new)
    if col == "power_limit_w":
        try:
            return abs(float(old) - float(new)) > POWER_LIMIT_SAME_W
        except (TypeError, ValueError):
            return str(old) != str(new)
    return str(old).strip() != str(new).strip()


def _fact_text(col: str, v) -> str:
    return f"power limit {float(v):g} W" if col == "power_limit_w" else f"{col} {str(v)!r}"


def check_devices(conn, frame: pd.DataFrame) -> list[str]:
    """Refuse device rows that contradict the stored facts of their (host, GPU), or each
    other within ``frame``.

    Args:
        conn: an open ``sqlite3`` connection to a store (read inside the caller's
            transaction, so files merged earlier in it count as stored).
        frame: device rows (``data.schema.DEVICE_COLUMNS``; missing columns are unstated);
            ``frame.attrs["source"]``, when set, is the file named in the error.

    Returns:
        One line per power limit a GPU (the same uuid) is stored with and the rows change:
        ``"GPU 0 of host 'n1': power limit 700 W stored, 600 W stated (the same GPU by its
        uuid: its cap changed)"``.

    Raises:
        DeviceConflictError: the first conflict (source, host, GPU, stored and new fact).
    """
    changed: list[str] = []
    if frame is None or frame.empty:
        return changed
    facts = [c for c in IDENTITY_FACTS if c in frame.columns]
    known: dict[tuple[str, int], dict] = {}
    source = frame.attrs.get("source")
    for rec in frame.to_dict("records"):
        key = (str(rec.get("host")), int(rec.get("gpu")))
        if key not in known:
            row = conn.execute(f"SELECT {', '.join(IDENTITY_FACTS)} FROM devices "
                               "WHERE host = ? AND gpu = ?", key).fetchone()
            known[key] = dict(zip(IDENTITY_FACTS, row)) if row else {}
        have = known[key]
        # one uuid stated on both sides: the same GPU, whose power cap an admin may have
        # changed (nvidia-smi -pl) between two runs: a new cap is no other GPU
        same_gpu = (not _blank(rec.get("uuid")) and not _blank(have.get("uuid"))
                    and str(rec.get("uuid")).strip() == str(have.get("uuid")).strip())
        for col in facts:
            new, old = rec.get(col), have.get(col)
            if _blank(new):
                continue
            if same_gpu and col == "power_limit_w":
                if not _blank(old) and _differs(col, old, new):
                    changed.append(f"GPU {key[1]} of host {key[0]!r}: {_fact_text(col, old)} "
                                   f"stored, {float(new):g} W stated (the same GPU by its "
                                   f"uuid: its cap changed)")
                have[col] = new
                continue
            if not _blank(old) and _differs(col, old, new):
                where = f"{source}: " if source else ""
                raise DeviceConflictError(
                    f"{where}GPU {key[1]} of host {key[0]!r} is stored with "
                    f"{_fact_text(col, old)}, this source states {_fact_text(col, new)}: "
                    f"another GPU (another machine's inventory?); the stored facts name and "
                    f"scale its samples and are kept (import it into another store, or with "
                    f"--host NAME)")
            have[col] = new
    return changed
