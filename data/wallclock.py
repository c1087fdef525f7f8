"""Wall-clock local times without a zone: the ``--tz`` zone, and local times turned into UTC.

nvidia-smi (``dmon -o DT``, ``--query-gpu`` timestamps, the table's date line), dcgmi and the
SGLang/vLLM logs print local time without a zone.  ``parse_zone`` reads the zone a user
names (the one reading of ``--tz`` for the CLI, the importers and the server-log parser), and
``LocalClock`` turns the file's local times into UTC epoch seconds, in file order, around the
zone's clock changes (PEP 495's ``fold``):

* fall-back (autumn): the hour before the change is printed twice.  A time in it is read as
  the first pass unless the file's times stepped back to it (it comes after a later time of
  the first pass, or after a second-pass time): then it is the second pass (``fold=1``).
  Both are counted (``ambiguous``, ``second_pass``) and said in the summary (``note``).
* spring-forward: the skipped hour's times never happen on a clock of that zone, so such a
  time says the zone is wrong: it is refused (``epoch`` gives None) and counted (``gaps``).

Nothing here imports other tealeaves rooms.
"""

from __future__ import annotations

import datetime as dt
import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["LocalClock", "parse_zone", "zone_name"]

_OFFSET_RE = re.compile(r"^(?:UTC|GMT)?\s*([+-])([0-9]{1,2})(?::?([0-9]{2}))?$", re.ASCII)

#: How far (s) a time may run back without being read as the second pass of a repeated hour:
#: lines of several processes of one server interleave a little out of order.
BACK_SLACK_S = 60.0


def parse_zone(tz: str | dt.tzinfo | None) -> dt.tzinfo:
    """A time-zone argument as a ``tzinfo``.

    Args:
        tz: an IANA name (``"Europe/Berlin"``), ``"UTC"``/``"Z"``/``"GMT"``/None (UTC), a fixed
            offset (``"+02:00"``, ``"-0530"``, ``"UTC+2"``, ``"GMT-05:30"``), or a ``tzinfo``.

    Raises:
        ValueError: an unknown name, or an offset of 24 h or more (the message names ``tz``).
    """
    if tz is None:
        return dt.UTC
    if isinstance(tz, dt.tzinfo):
        return tz
    if not isinstance(tz, str):
        # a ValueError like every other refusal here: callers catch that one
        raise ValueError(f"tz must be a zone name, an offset or a tzinfo, got {tz!r}")  # noqa: TRY004
    s = tz.strip()
    shown = repr(s) if len(s) <= 64 else f"{s[:40]!r}... ({len(s)} characters)"
    if s.upper() in ("UTC", "Z", "GMT", ""):
        return dt.UTC
    m = _OFFSET_RE.match(s)
    if m:
        hours, minutes = int(m.group(2)), int(m.group(3) or 0)
        if hours > 23 or minutes > 59:
            raise ValueError(f"time-zone offset {shown} is out of range")
        delta = dt.timedelta(hours=hours, minutes=minutes)
        return dt.timezone(-delta if m.group(1) == "-" else delta)
    try:
        return ZoneInfo(s)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"unknown time zone {shown} (IANA name such as Europe/Berlin, UTC, "
                         f"or an offset like +02:00)") from exc


#: Longest zone name read (the longest IANA name is 32 characters).
MAX_ZONE_CHARS = 64
_ZONES: dict[str, str] = {}


def iana_name(tz: str | None) -> str:
    """The IANA time zone name ``tz`` as the zone database spells it, any case, as a browser
    or a person types it (``europe/berlin`` -> ``Europe/Berlin``; surrounding blanks dropped).

    Raises:
        ValueError: empty, too long or not a zone of the system's zone database.
    """
    name = str(tz or "").strip()
    hint = "use an IANA name such as Europe/Berlin or UTC"
    if not name:
        raise ValueError(f"no time zone given ({hint})")
    if len(name) > MAX_ZONE_CHARS:
        raise ValueError(f"time zone {name[:40]!r}... is not a zone name ({hint})")
    try:
        ZoneInfo(name)
        return name
    except (ZoneInfoNotFoundError, ValueError, OSError):
        pass
    if not _ZONES:
        from zoneinfo import available_timezones

        _ZONES.update({z.lower(): z for z in available_timezones()})
    canon = _ZONES.get(name.lower())
    if canon is None:
        raise ValueError(f"unknown time zone {name!r} ({hint})")
    return canon


def zone_name(zone: dt.tzinfo) -> str:
    """A zone as a summary names it (``"UTC"``, ``"Europe/Berlin"``, ``"UTC+02:00"``)."""
    key = getattr(zone, "key", None)
    return key if key else str(zone)


def _wall(t: float, zone: dt.tzinfo) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, zone).replace(tzinfo=None)


class LocalClock:
    """Local times of one file, in file order, to UTC epoch seconds (see the module doc).

    Args:
        zone: the zone of the file's times (``parse_zone``).

    Attributes:
        ambiguous: times read that fall in a repeated (fall-back) hour.
        second_pass: those of them read as the second pass (``fold=1``).
        gaps: times refused because the zone's clocks skipped them (spring-forward).
        first_gap: the first refused time (for messages), else None.
    """

    def __init__(self, zone: dt.tzinfo) -> None:
        self.zone = zone
        self.ambiguous = 0
        self.second_pass = 0
        self.gaps = 0
        self.first_gap: dt.datetime | None = None
        self._last: float | None = None

    def epoch(self, naive: dt.datetime) -> float | None:
        """UTC epoch s of ``naive`` (a local time of ``zone``; an aware one keeps its own
        zone), or None when that local time does not exist in ``zone`` (counted in
        ``gaps``).  Call in file order: the order tells the two passes of a repeated hour
        apart.

        Raises:
            OverflowError, ValueError, OSError: a date out of the platform's range.
        """
        if naive.tzinfo is not None:
            return naive.timestamp()
        t0 = naive.replace(tzinfo=self.zone, fold=0).timestamp()
        t1 = naive.replace(tzinfo=self.zone, fold=1).timestamp()
        if t0 == t1:
            self._last = t0
            return t0
        if abs((_wall(t0, self.zone) - naive).total_seconds()) > 1.0:  # skipped: no round trip
            self.gaps += 1
            if self.first_gap is None:
                self.first_gap = naive
            return None
        self.ambiguous += 1
        last = self._last
        t = t0
        if last is not None and t0 < last - BACK_SLACK_S and t1 >= last - BACK_SLACK_S:
            t = t1
            self.second_pass += 1
        self._last = t
        return t

    def gap_reason(self, naive: dt.datetime) -> str:
        """Why ``naive`` (a time ``epoch`` refused) is not read, for a skipped line."""
        return (f"local time {naive:%Y-%m-%d %H:%M:%S} does not exist in {zone_name(self.zone)} "
                f"(its clocks skipped that hour); wrong --tz?")

    def note(self) -> str:
        """The summary line of the clock changes met (``""`` when none)."""
        parts = []
        if self.ambiguous:
            first = self.ambiguous - self.second_pass
            parts.append(f"{self.ambiguous} time{'s' if self.ambiguous != 1 else ''} in the "
                         f"hour {zone_name(self.zone)} repeats when clocks go back: "
                         f"{self.second_pass} read as its second pass (the times step back), "
                         f"{first} as its first")
        if self.gaps:
            parts.append(f"{self.gaps} time{'s' if self.gaps != 1 else ''} in the hour "
                         f"{zone_name(self.zone)} skips when clocks go forward (first "
                         f"{self.first_gap:%Y-%m-%d %H:%M:%S}): refused, not read as times; "
                         f"wrong --tz?")
        return "; ".join(parts)
